//! SCIF endpoints whose node daemon, or whose peer's, dies under them.

use remora_scif::*;
use remora_testkit::Harness;
use std::time::{Duration, Instant};

mod common;
use common::{every_call, every_call_for, over_tcp, pair, pair_with_windows, reset_for_good, ScifOf, Seen};

fn kill_daemon(h: &Harness, node: u32) {
    let s = remora_client::Session::open_control(&h.config(node)).unwrap();
    let pid = match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.pid,
        other => panic!("{other:?}"),
    };
    drop(s);
    let st = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert!(st.success());
}

/// Poll with non-blocking receives until one fails; the error and how long it took.
fn poll_until_error(ep: &Endpoint, limit: Duration) -> (Error, Duration) {
    let t0 = Instant::now();
    let mut buf = [0u8; 64];
    loop {
        match ep.recv(&mut buf, false) {
            Ok(0) => {
                assert!(t0.elapsed() < limit, "non-blocking receives still answer 0 bytes after {limit:?}");
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(n) => panic!("{n} bytes from nowhere"),
            Err(e) => return (e, t0.elapsed()),
        }
    }
}

/// A peer on another host (nodes joined over TCP), whose bytes come through this node's
/// daemon: when that daemon dies, a program polling with non-blocking receives is told
/// ECONNRESET once what arrived is taken, instead of 0 bytes forever (found by the soak).
#[test]
fn a_non_blocking_receiver_hears_of_its_own_daemons_death() {
    let h = over_tcp(&[4, 8]);
    let (c, s) = pair(&h, 8, 4);
    assert_eq!(s.send(b"before", true).unwrap(), 6);
    let mut buf = [0u8; 6];
    assert_eq!(c.recv(&mut buf, true).unwrap(), 6);
    kill_daemon(&h, 8);
    let (e, took) = poll_until_error(&c, Duration::from_secs(3));
    assert!(matches!(e, Error::Reset), "{e:?} after {took:?}");
}

/// The same when the daemon that dies is the peer's: this node's relay sees the link go.
#[test]
fn a_non_blocking_receiver_hears_of_its_peers_daemons_death() {
    let h = over_tcp(&[4, 8]);
    let (c, _s) = pair(&h, 8, 4);
    kill_daemon(&h, 4);
    let (e, took) = poll_until_error(&c, Duration::from_secs(5));
    assert!(matches!(e, Error::Reset | Error::NoDevice), "{e:?} after {took:?}");
}

/// The state of node `node`'s link to `peer`, or why there is none.
fn link_state(h: &Harness, node: u32, peer: u32) -> String {
    let s = match remora_client::Session::open_control(&h.config(node)) {
        Ok(s) => s,
        Err(e) => return format!("no session: {e}"),
    };
    match s.request(remora_proto::Request::Status, &[]) {
        Ok((remora_proto::Reply::Status(st), _)) => match st.peers.iter().find(|p| p.node == peer) {
            Some(p) => p.state.clone(),
            None => "no link".into(),
        },
        other => format!("{other:?}"),
    }
}

/// The peer's daemon dies (SIGKILL) under a connection between two hosts: from the first
/// ECONNRESET on, every call on the connected endpoint answers it — the SCIF guide's "access
/// to any remaining endpoint which was connected to an endpoint on the lost node now
/// returns the ECONNRESET error" — also once the peer's node is back with a new daemon,
/// which hands out the same connection handles anew to connections of its own.
#[test]
fn a_connection_whose_peers_daemon_died_answers_econnreset_for_good() {
    let h = over_tcp(&[4, 8]);
    let (c, _s, local, remote) = pair_with_windows(&h, 8, 4);
    kill_daemon(&h, 4);
    let t0 = Instant::now();
    let mut seen = Seen::new();
    every_call_for(&c, local, remote, t0, 3, &mut seen);
    // Node 4 comes back (the library starts its daemon anew) and links with node 8 again;
    // a new connection between the two works.
    h.scif(4).node_ids().unwrap();
    let t1 = Instant::now();
    while link_state(&h, 8, 4) != "up" || link_state(&h, 4, 8) != "up" {
        assert!(
            t1.elapsed() < Duration::from_secs(20),
            "node 4 came back and linked with node 8: {} {}",
            link_state(&h, 8, 4),
            link_state(&h, 4, 8)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _again = pair_with_windows(&h, 8, 4);
    for _ in 0..20 {
        every_call(&c, local, remote, t0, &mut seen);
        std::thread::sleep(Duration::from_millis(20));
    }
    reset_for_good(&seen);
}

/// The endpoint's own daemon dies (SIGKILL) while its peer on the other host lives: from
/// the first ECONNRESET on, every call answers it (ECONNRESET and ENODEV took turns: sends
/// and receives saw the ring's consumer gone, RMAs and registrations a dead daemon, and a
/// fence of the endpoint's own RMAs went through).
#[test]
fn a_connection_whose_own_daemon_died_answers_econnreset_for_good() {
    let h = over_tcp(&[4, 8]);
    let (c, _s, local, remote) = pair_with_windows(&h, 8, 4);
    kill_daemon(&h, 8);
    let t0 = Instant::now();
    let mut seen = Seen::new();
    every_call_for(&c, local, remote, t0, 3, &mut seen);
    reset_for_good(&seen);
}
