//! The fault schedule, drawn from the seed, and the daemon faults themselves: `SIGKILL` of
//! a daemon (then it is started again) and `SIGSTOP` of a daemon for longer than three
//! heartbeats (then `SIGCONT`), each timed from the other nodes' view of its link. The
//! faults of the cable between namespace hosts are in `net_faults.rs`.

use super::checks::{daemon_pid, until_seen};
use super::cluster::Nodes;
use super::ctx::now_ms;
use super::rng::Rng;
use remora_sys::ProcessSignal as Signal;
use std::time::{Duration, Instant};

/// The kinds of fault the soak injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum FaultKind {
    /// `SIGKILL` of a worker (it is started again).
    KillWorker,
    /// `SIGKILL` of a node daemon (it is started again).
    KillDaemon,
    /// `SIGSTOP` of a node daemon past three heartbeats, then `SIGCONT`.
    StopDaemon,
    /// A namespace host's cable out (its veth down) past three heartbeats, then back.
    Cable,
    /// Packet loss and delay (`tc netem`) on a namespace host's cable for a while.
    Netem,
}

impl FaultKind {
    /// The fault's name in the summary.
    pub(crate) fn name(self) -> &'static str {
        match self {
            FaultKind::KillWorker => "worker SIGKILL (restarted)",
            FaultKind::KillDaemon => "daemon SIGKILL (restarted)",
            FaultKind::StopDaemon => "daemon SIGSTOP/SIGCONT",
            FaultKind::Cable => "cable out/in (veth down/up)",
            FaultKind::Netem => "packet loss and delay (tc netem)",
        }
    }

    /// Whether bytes that differ under this fault are excused (its daemon lost what it
    /// held, or stopped past the heartbeat budget): a cable's fault loses nothing.
    pub(crate) fn excuses_bytes(self) -> bool {
        matches!(self, FaultKind::KillDaemon | FaultKind::StopDaemon)
    }
}

/// One injected fault: when its effects may show (`from_ms..to_ms`, a margin included).
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    /// Its kind.
    pub(crate) kind: FaultKind,
    /// The node or worker it hit.
    pub(crate) target: u32,
    /// Start of the window its effects may show in (ms since the epoch).
    pub(crate) from_ms: u64,
    /// End of that window.
    pub(crate) to_ms: u64,
}

/// A measured answer of the cluster to a fault, beside what the API promises.
#[derive(Debug, Clone)]
pub(crate) struct Observation {
    /// What was watched.
    pub(crate) what: &'static str,
    /// How long it took (None: not seen within the limit).
    pub(crate) took: Option<Duration>,
    /// The promise.
    pub(crate) bound: Duration,
}

/// When the next fault comes, and which: every 2 to 5 s, from the seed.
pub(crate) struct Schedule {
    rng: Rng,
    next: Instant,
    /// Namespace hosts: cable faults too.
    net: bool,
    /// `tc netem` works here.
    netem: bool,
}

impl Schedule {
    /// The schedule of a run with `seed`; the first fault 3 s after the start. `net`: the
    /// nodes are on namespace hosts (cable faults, and netem ones where `netem`).
    pub(crate) fn new(seed: u64, net: bool, netem: bool) -> Schedule {
        Schedule {
            rng: Rng::new(seed, 0x5C4E_D01E),
            next: Instant::now() + Duration::from_secs(3),
            net,
            netem,
        }
    }

    /// The fault due now, if any, and a target index below `n` for it.
    pub(crate) fn due(&mut self, n_workers: usize, n_nodes: usize) -> Option<(FaultKind, usize)> {
        if Instant::now() < self.next {
            return None;
        }
        self.next = Instant::now() + Duration::from_millis(self.rng.range(2000, 5000));
        let kind = match (self.net, self.rng.range(0, 100)) {
            (false, 0..35) => FaultKind::KillWorker,
            (false, 35..65) => FaultKind::KillDaemon,
            (false, _) => FaultKind::StopDaemon,
            (true, 0..25) => FaultKind::KillWorker,
            (true, 25..40) => FaultKind::KillDaemon,
            (true, 40..55) => FaultKind::StopDaemon,
            (true, 85..) if self.netem => FaultKind::Netem,
            (true, _) => FaultKind::Cable,
        };
        let n = if kind == FaultKind::KillWorker { n_workers } else { n_nodes };
        Some((kind, self.rng.urange(0, n)))
    }

    /// How long a stop or a cable's outage lasts: three heartbeats and 300 to 1200 ms more.
    pub(crate) fn stop_length(&mut self, heartbeat: Duration) -> Duration {
        heartbeat * 3 + Duration::from_millis(self.rng.range(300, 1200))
    }
}

/// Send `sig` to `pid`.
pub(crate) fn signal(pid: u32, sig: Signal) -> Result<(), String> {
    remora_sys::send_signal(pid, sig).map_err(|e| format!("kill {pid}: {e}"))
}

/// How late a link state may be seen after the promise (the observer polls every node's
/// status in turn, on two shared cores).
pub(crate) const SLACK: Duration = Duration::from_millis(250);

/// `SIGKILL` `node`'s daemon; time the other nodes' view of it going and coming back.
pub(crate) fn kill_daemon(nodes: &Nodes, node: u32) -> (Option<Fault>, Vec<Observation>) {
    let hb = nodes.hb;
    let Some(pid) = daemon_pid(nodes, node) else { return (None, vec![]) };
    let from_ms = now_ms();
    if signal(pid, Signal::Kill).is_err() {
        return (None, vec![]);
    }
    let mut obs = vec![Observation {
        what: "daemon SIGKILL: every peer's link to it not up (LOST / NOT_OPERATIONAL)",
        took: until_seen(nodes, node, Duration::from_secs(3), |s| s != "up"),
        bound: hb * 3 + SLACK,
    }];
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let restarted = nodes.restart(node);
    obs.push(Observation {
        what: "daemon restarted: every peer's link to it up again (OPERATIONAL)",
        took: if restarted {
            until_seen(nodes, node, Duration::from_secs(10), |s| s == "up").map(|_| t.elapsed())
        } else {
            None
        },
        bound: Duration::from_secs(3),
    });
    (Some(Fault { kind: FaultKind::KillDaemon, target: node, from_ms, to_ms: now_ms() + 2000 }), obs)
}

/// `SIGSTOP` `node`'s daemon for `length`, then `SIGCONT`; time the other nodes' view.
pub(crate) fn stop_daemon(nodes: &Nodes, node: u32, length: Duration) -> (Option<Fault>, Vec<Observation>) {
    let hb = nodes.hb;
    let Some(pid) = daemon_pid(nodes, node) else { return (None, vec![]) };
    let from_ms = now_ms();
    let t = Instant::now();
    if signal(pid, Signal::Stop).is_err() {
        return (None, vec![]);
    }
    let silent = until_seen(nodes, node, length, |s| s != "up");
    std::thread::sleep(length.saturating_sub(t.elapsed()));
    let _ = signal(pid, Signal::Cont);
    let back = until_seen(nodes, node, Duration::from_secs(5), |s| s == "up");
    let obs = vec![
        Observation {
            what: "daemon SIGSTOP: every peer's link to it NOT_OPERATIONAL",
            took: silent,
            bound: hb * 3 + hb + SLACK,
        },
        Observation {
            what: "daemon SIGCONT: every peer's link to it OPERATIONAL again",
            took: back,
            bound: hb * 3 + SLACK,
        },
    ];
    (Some(Fault { kind: FaultKind::StopDaemon, target: node, from_ms, to_ms: now_ms() + 2000 }), obs)
}
