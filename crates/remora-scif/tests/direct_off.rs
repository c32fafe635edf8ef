//! SCIF connections between two hosts without a direct flow (`REMORA_SCIF_DIRECT=0`):
//! both daemons' relays carry the messages. Either daemon turns it off: when only the
//! connector's does, it asks for no flow, so the acceptor's daemon does not wait for one.
//! This binary's daemons inherit its environment, so it sets the variable before any
//! starts.

use std::time::{Duration, Instant};

mod common;
use common::{exchange, last_words, over_tcp, pair, wait_for_link};

fn no_direct_flows() {
    // Every test of this binary sets the same value before it starts a daemon.
    std::env::set_var("REMORA_SCIF_DIRECT", "0");
}

#[test]
fn with_direct_flows_off_the_relays_carry_the_messages() {
    no_direct_flows();
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(!c.is_direct() && !s.is_direct(), "REMORA_SCIF_DIRECT=0: the relays");
    exchange(&c, &s, 50, 1_000_000);
    last_words(&c, &s);
}

/// The listener's daemon would offer a flow; the connector's (direct flows off) asks for
/// none, so the accept does not wait the acceptor's patience for a flow (3 s) that would
/// never be dialed, and both ends go on with their relays.
#[test]
fn a_connector_without_direct_flows_asks_for_none() {
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
    let t0 = Instant::now();
    let (c, s) = pair(&h, 4, 8);
    // Not a speed check: an accept that waited for a flow takes at least the 3 s patience.
    assert!(t0.elapsed() < Duration::from_secs(3), "the accept waited for a flow: {:?}", t0.elapsed());
    assert!(!c.is_direct() && !s.is_direct(), "no flow asked for: the relays");
    exchange(&c, &s, 50, 1_000_000);
    last_words(&c, &s);
}
