//! Two nodes whose cluster files differ in `intr_pair` (issue 19): each node says its
//! setting in the link handshake, and the pairing is used only when both say yes. A lower
//! node with `false` beside a higher with `true` lost the higher node's triggers before
//! (they went back on a flow the lower daemon did not read); now every trigger is counted
//! exactly once both ways, whichever node says no, and nothing goes back on the other's
//! flow. (Its own test binary: the count of triggers sent back is the process's.)

use remora_sisci::*;
use std::path::PathBuf;
use std::time::Duration;

const LONG: Option<Duration> = Some(Duration::from_secs(10));
const QUIET: Option<Duration> = Some(Duration::from_millis(100));

/// A harness of nodes 4 and 8 over loopback TCP, each with a cluster file of its own
/// that differs only in `intr_pair` (`lower` for node 4, `higher` for node 8).
fn mixed(lower: bool, higher: bool) -> (remora_testkit::Harness, Sisci, Sisci) {
    let h = remora_testkit::Harness::with_cluster_keys(&[4, 8], "force_tcp = true\n");
    let text = std::fs::read_to_string(h.runtime_dir().join("cluster.toml")).unwrap();
    let file = |name: &str, on: bool| -> PathBuf {
        let p = h.runtime_dir().join(name);
        std::fs::write(&p, format!("intr_pair = {on}\n{text}")).unwrap();
        p
    };
    let (lo_file, hi_file) = (file("lower.toml", lower), file("higher.toml", higher));
    let sci = |node, f: &PathBuf| {
        Sisci::with_config(remora_testkit::child_config(node, h.runtime_dir(), Some(f), true))
    };
    let (lo, hi) = (sci(4, &lo_file), sci(8, &hi_file));
    (h, lo, hi)
}

/// A ping-pong, a burst each way with nobody waiting, and a disconnect after a burst: all
/// counted exactly once, and nothing went back on the other's flow.
fn every_trigger_counted(lower: bool, higher: bool, lo_no: u32, hi_no: u32) {
    let (h, sa, sb) = mixed(lower, higher);
    let lo = Descriptor::open(&sa).unwrap();
    let hi = Descriptor::open(&sb).unwrap();
    let lo_intr = Interrupt::create(&lo, 0, Some(lo_no), true, None).unwrap();
    let hi_intr = Interrupt::create(&hi, 0, Some(hi_no), true, None).unwrap();
    let to_hi = RemoteInterrupt::connect(&lo, 8, 0, hi_no, LONG).unwrap();
    let to_lo = RemoteInterrupt::connect(&hi, 4, 0, lo_no, LONG).unwrap();
    let before = RemoteInterrupt::triggers_sent_back();
    for i in 0..100 {
        to_hi.trigger().unwrap();
        if let Err(e) = hi_intr.wait_with_spin(LONG, Duration::ZERO) {
            h.show_logs();
            panic!("round {i}: the higher node's interrupt: {e:?}");
        }
        to_lo.trigger().unwrap();
        if let Err(e) = lo_intr.wait_with_spin(LONG, Duration::ZERO) {
            h.show_logs();
            panic!("round {i}: the lower node's interrupt: {e:?}");
        }
    }
    for _ in 0..200 {
        to_lo.trigger().unwrap();
        to_hi.trigger().unwrap();
    }
    for _ in 0..200 {
        lo_intr.wait(LONG).unwrap();
        hi_intr.wait(LONG).unwrap();
    }
    for _ in 0..100 {
        to_lo.trigger().unwrap();
    }
    to_lo.disconnect().unwrap();
    for _ in 0..100 {
        lo_intr.wait(LONG).unwrap();
    }
    assert_eq!(lo_intr.wait(QUIET).unwrap_err(), Error::Timeout, "one too many");
    assert_eq!(hi_intr.wait(QUIET).unwrap_err(), Error::Timeout, "one too many");
    assert_eq!(RemoteInterrupt::triggers_sent_back(), before, "a trigger went back though a node said no");
}

/// Both mixes, one after the other (one test: the count of triggers sent back is the
/// process's, and a test beside it that pairs would add to it).
#[test]
fn nodes_that_differ_in_the_pairing_lose_nothing() {
    // Lost the higher node's triggers before the nodes said their settings.
    every_trigger_counted(false, true, 71, 72);
    every_trigger_counted(true, false, 73, 74);
}
