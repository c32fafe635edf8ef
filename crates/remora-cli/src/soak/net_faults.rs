//! The faults of the cable between namespace hosts (`--netns`): a host's veth taken down
//! for longer than three heartbeats and put back, and packet loss with delay (`tc netem`)
//! on it for a while; each timed from both ends' view of the link against the promise.

use super::checks::status;
use super::cluster::Nodes;
use super::ctx::now_ms;
use super::schedule::{Fault, FaultKind, Observation, SLACK};
use std::time::{Duration, Instant};

/// The states of every link between `node` and the other nodes, seen from both ends (one
/// word per end that answers).
fn both_ends(nodes: &Nodes, node: u32) -> Vec<String> {
    let mut seen = Vec::new();
    for &n in nodes.ids.iter().filter(|&&n| n != node) {
        if let Some(st) = status(nodes, n) {
            seen.extend(st.peers.iter().filter(|p| p.node == node).map(|p| p.state.clone()));
        }
    }
    if let Some(st) = status(nodes, node) {
        seen.extend(st.peers.iter().filter(|p| nodes.ids.contains(&p.node)).map(|p| p.state.clone()));
    }
    seen
}

/// Wait (up to `limit`) until both ends of every link of `node` show a state `want`
/// accepts; the time it took, or None.
fn until_both(nodes: &Nodes, node: u32, limit: Duration, want: impl Fn(&str) -> bool) -> Option<Duration> {
    let t = Instant::now();
    loop {
        let seen = both_ends(nodes, node);
        if seen.len() >= 2 && seen.iter().all(|s| want(s)) {
            return Some(t.elapsed());
        }
        if t.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How long a link may take to be up again after the cable is back from an outage of
/// `out`: three heartbeats, TCP's retransmission timer (the link's connections survive an
/// outage, but their retransmissions back off exponentially while it lasts, so the next
/// one may come as late as about the outage's length after the cable is back) or the
/// redial's back-off (at most 1 s), and slack.
fn back_bound(hb: Duration, out: Duration) -> Duration {
    hb * 3 + (out + Duration::from_millis(200)).max(Duration::from_millis(1000)) + SLACK * 2
}

/// Take `node`'s cable out for `length`, then put it back; time both ends' view.
pub(crate) fn cable(nodes: &Nodes, node: u32, length: Duration) -> (Option<Fault>, Vec<Observation>) {
    let hb = nodes.hb;
    let from_ms = now_ms();
    let t = Instant::now();
    if nodes.cable(node, false).is_err() {
        return (None, vec![]);
    }
    let silent = until_both(nodes, node, length.max(hb * 5), |s| s != "up");
    std::thread::sleep(length.saturating_sub(t.elapsed()));
    if let Err(e) = nodes.cable(node, true) {
        eprintln!("remora soak: {e}");
    }
    let out = t.elapsed();
    let back = until_both(nodes, node, Duration::from_secs(10), |s| s == "up");
    let obs = vec![
        Observation {
            what: "cable out: both ends' links NOT_OPERATIONAL",
            took: silent,
            bound: hb * 3 + hb + SLACK,
        },
        Observation {
            what: "cable back: both ends' links OPERATIONAL again",
            took: back,
            bound: back_bound(hb, out),
        },
    ];
    (Some(Fault { kind: FaultKind::Cable, target: node, from_ms, to_ms: now_ms() + 2000 }), obs)
}

/// Loss and delay on `node`'s cable for `length` (`tc netem`), then removed; the links
/// must be up at the end (they may flap meanwhile: that is an event, not a failure).
pub(crate) fn netem(nodes: &Nodes, node: u32, length: Duration) -> (Option<Fault>, Vec<Observation>) {
    let from_ms = now_ms();
    let spec = ["add", "dev", "eth0", "root", "netem", "loss", "5%", "delay", "20ms", "10ms"];
    if let Err(e) = nodes.tc(node, &spec) {
        eprintln!("remora soak: {e}");
        return (None, vec![]);
    }
    std::thread::sleep(length);
    let t = Instant::now();
    if let Err(e) = nodes.tc(node, &["del", "dev", "eth0", "root"]) {
        eprintln!("remora soak: {e}");
    }
    let back = until_both(nodes, node, Duration::from_secs(10), |s| s == "up").map(|_| t.elapsed());
    let obs = vec![Observation {
        what: "netem (5% loss, 20+-10 ms delay) removed: both ends' links OPERATIONAL",
        took: back,
        bound: back_bound(nodes.hb, Duration::ZERO),
    }];
    (Some(Fault { kind: FaultKind::Netem, target: node, from_ms, to_ms: now_ms() + 2000 }), obs)
}
