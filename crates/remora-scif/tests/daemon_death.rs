//! SCIF endpoints whose node daemon, or whose peer's, dies under them.

use remora_scif::*;
use remora_testkit::Harness;
use std::time::{Duration, Instant};

mod common;
use common::{over_tcp, pair};

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
