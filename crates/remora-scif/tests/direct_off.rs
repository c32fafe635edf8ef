//! SCIF connections between two hosts without a direct flow (`REMORA_SCIF_DIRECT=0`):
//! both daemons' relays carry the messages. Either daemon turns it off: when only the
//! connector's does, the acceptor's daemon waits for a flow that never comes and then goes
//! on with the relay. This binary's daemons inherit its environment, so it sets the
//! variable before any starts.

use remora_scif::*;
use std::time::{Duration, Instant};

mod common;
use common::{over_tcp, pair, ScifOf};

fn no_direct_flows() {
    // Every test of this binary sets the same value before it starts a daemon.
    std::env::set_var("REMORA_SCIF_DIRECT", "0");
}

fn wait_for_link(h: &remora_testkit::Harness) {
    assert!(h.scif(8).node_ids().unwrap().contains(&8));
    let t0 = Instant::now();
    while !h.scif(4).node_ids().unwrap().contains(&8) {
        assert!(t0.elapsed() < Duration::from_secs(10), "the link between nodes 4 and 8 came up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Messages both ways, more than a ring's worth at once, and a close after its data.
fn exchange(c: &Endpoint, s: &Endpoint) {
    for i in 0u64..50 {
        c.send(&i.to_le_bytes(), true).unwrap();
        let mut b = [0u8; 8];
        s.recv(&mut b, true).unwrap();
        assert_eq!(u64::from_le_bytes(b), i);
        s.send(&b, true).unwrap();
        c.recv(&mut b, true).unwrap();
        assert_eq!(u64::from_le_bytes(b), i);
    }
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let (s2, big2) = (s.clone(), big.clone());
    let t = std::thread::spawn(move || {
        let mut got = vec![0u8; big2.len()];
        assert_eq!(s2.recv(&mut got, true).unwrap(), got.len());
        assert!(got == big2, "intact, in order");
    });
    c.send(&big, true).unwrap();
    t.join().unwrap();
    c.send(b"last words", true).unwrap();
    c.close().unwrap();
    let mut b = [0u8; 10];
    assert_eq!(s.recv(&mut b, true).unwrap(), 10);
    assert_eq!(&b, b"last words");
    assert_eq!(s.recv(&mut b, true).unwrap_err(), Error::Reset);
    let r = remora_sys::bell::wait(s.as_fd(), false, Some(Duration::from_secs(5))).unwrap();
    assert!(r.hung_up);
}

#[test]
fn with_direct_flows_off_the_relays_carry_the_messages() {
    no_direct_flows();
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(!c.is_direct() && !s.is_direct(), "REMORA_SCIF_DIRECT=0: the relays");
    exchange(&c, &s);
}

/// The listener's daemon offers a flow, the connector's (direct flows off) never dials it:
/// the accept waits a few seconds, then both ends go on with their relays.
#[test]
fn a_flow_that_never_comes_leaves_both_ends_on_the_relays() {
    no_direct_flows();
    let h = over_tcp(&[4, 8]);
    let cfg = h.config(8);
    let mut cmd = std::process::Command::new(remora_testkit::daemon_path());
    if let Some(c) = &cfg.cluster {
        cmd.arg("--cluster").arg(c);
    }
    let st = cmd
        .args(["--node", "8", "--idle-exit", "60", "--detach", "--runtime-dir"])
        .arg(&cfg.runtime_dir)
        .env("REMORA_SCIF_DIRECT", "1")
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    while !remora_proto::paths::socket_path(&cfg.runtime_dir, 8).exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "node 8 came up");
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(!c.is_direct() && !s.is_direct(), "no flow came: the relays");
    exchange(&c, &s);
}
