//! What the soak measures on the daemons: their resources (from each node's status
//! request and from `/proc`), compared with the baseline taken before any worker ran, and
//! how fast the other nodes see a node's link change state after a fault.

use super::cluster::Nodes;
use remora_client::Session;
use remora_proto::{Reply, Request, Role};
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

/// One node's resources at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Resources {
    /// The daemon's pid.
    pub(crate) pid: u32,
    /// Sessions of processes (control and peer sessions left out).
    pub(crate) sessions: usize,
    /// Segments.
    pub(crate) segments: usize,
    /// Connections (imports).
    pub(crate) connections: usize,
    /// Maps.
    pub(crate) maps: usize,
    /// Interrupts and data interrupts.
    pub(crate) interrupts: usize,
    /// DMA queues.
    pub(crate) dma_queues: usize,
    /// SCIF ports, listeners and connections.
    pub(crate) scif: (u32, u32, u32),
    /// Open file descriptors.
    pub(crate) fds: usize,
    /// Their kinds, counted.
    pub(crate) fd_kinds: BTreeMap<String, usize>,
    /// Resident memory, KiB.
    pub(crate) rss_kb: u64,
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sessions {} segments {} connections {} maps {} interrupts {} dma {} scif {:?} fds {} rss {} KiB",
            self.sessions,
            self.segments,
            self.connections,
            self.maps,
            self.interrupts,
            self.dma_queues,
            self.scif,
            self.fds,
            self.rss_kb
        )
    }
}

/// A node's status (None when it does not answer).
pub(crate) fn status(nodes: &Nodes, node: u32) -> Option<remora_proto::NodeStatus> {
    let s = Session::open_control(&nodes.cfg(node)).ok()?;
    match s.request(Request::Status, &[]).ok()?.0 {
        Reply::Status(st) => Some(*st),
        _ => None,
    }
}

/// The daemon pid of `node` (None when it does not answer).
pub(crate) fn daemon_pid(nodes: &Nodes, node: u32) -> Option<u32> {
    status(nodes, node).map(|s| s.pid)
}

/// The kinds of the open descriptors of process `pid` (`socket`, `anon_inode:[eventfd]`,
/// `/memfd:…`, a path), counted.
fn fd_kinds(pid: u32) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
        let target =
            std::fs::read_link(e.path()).map(|t| t.to_string_lossy().into_owned()).unwrap_or_default();
        let kind = match target.split_once(':') {
            Some((k, _)) if k == "socket" || k == "pipe" => k.to_string(),
            _ => target.split(" (deleted)").next().unwrap_or("").to_string(),
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

/// The resources of `node` now, counted while the status session is still open (so its
/// own socket is always among the daemon's descriptors, never sometimes).
pub(crate) fn resources(nodes: &Nodes, node: u32) -> Option<Resources> {
    let s = Session::open_control(&nodes.cfg(node)).ok()?;
    let Reply::Status(st) = s.request(Request::Status, &[]).ok()?.0 else { return None };
    let fd_kinds = fd_kinds(st.pid);
    let fds = fd_kinds.values().sum();
    drop(s);
    let rss_kb = std::fs::read_to_string(format!("/proc/{}/status", st.pid))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0);
    Some(Resources {
        pid: st.pid,
        sessions: st.sessions.iter().filter(|s| matches!(s.role, Role::Client | Role::Scif)).count(),
        segments: st.segments.len(),
        connections: st.connections.len(),
        maps: st.maps.len(),
        interrupts: st.interrupts.len(),
        dma_queues: st.dma_queues.len(),
        scif: st.scif,
        fds,
        fd_kinds,
        rss_kb,
    })
}

/// How much resident memory a daemon may have grown by at the end (allocator arenas and
/// caches keep some after a busy run; a leak per operation grows far past it).
pub(crate) const RSS_SLACK_KB: u64 = 32 << 10;

/// What differs between `now` and the baseline `base` (empty when back to baseline).
/// Open descriptors may differ by the links' sockets of a restarted daemon (`fd_slack`).
pub(crate) fn differences(base: &Resources, now: &Resources, fd_slack: usize) -> Vec<String> {
    let mut d = Vec::new();
    let mut cmp = |what: &str, b: usize, n: usize| {
        if n > b {
            d.push(format!("{what} {b} -> {n}"));
        }
    };
    cmp("sessions", base.sessions, now.sessions);
    cmp("segments", base.segments, now.segments);
    cmp("connections", base.connections, now.connections);
    cmp("maps", base.maps, now.maps);
    cmp("interrupts", base.interrupts, now.interrupts);
    cmp("dma queues", base.dma_queues, now.dma_queues);
    cmp("scif ports", base.scif.0 as usize, now.scif.0 as usize);
    cmp("scif listeners", base.scif.1 as usize, now.scif.1 as usize);
    cmp("scif connections", base.scif.2 as usize, now.scif.2 as usize);
    if now.fds > base.fds + fd_slack {
        let grew: Vec<String> = now
            .fd_kinds
            .iter()
            .filter_map(|(k, n)| {
                let b = base.fd_kinds.get(k).copied().unwrap_or(0);
                (*n > b).then(|| format!("{k} {b} -> {n}"))
            })
            .collect();
        d.push(format!("fds {} -> {} ({})", base.fds, now.fds, grew.join(", ")));
    }
    if now.rss_kb > base.rss_kb + RSS_SLACK_KB {
        d.push(format!("rss {} KiB -> {} KiB", base.rss_kb, now.rss_kb));
    }
    d
}

/// The state the other nodes show for their link to `node` (one word per observer that
/// answers and has a link to it).
fn seen_by_others(nodes: &Nodes, node: u32) -> Vec<String> {
    nodes
        .ids
        .iter()
        .filter(|&&n| n != node)
        .filter_map(|&n| status(nodes, n))
        .filter_map(|st| st.peers.iter().find(|p| p.node == node).map(|p| p.state.clone()))
        .collect()
}

/// Wait (up to `limit`) until every other node shows its link to `node` in a state `want`
/// accepts; the time it took, or None when the limit passed.
pub(crate) fn until_seen(
    nodes: &Nodes,
    node: u32,
    limit: Duration,
    want: impl Fn(&str) -> bool,
) -> Option<Duration> {
    let t = Instant::now();
    loop {
        let seen = seen_by_others(nodes, node);
        if !seen.is_empty() && seen.iter().all(|s| want(s)) {
            return Some(t.elapsed());
        }
        if t.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every node's link to every other node is up (waited for up to `limit`).
pub(crate) fn all_links_up(nodes: &Nodes, limit: Duration) -> bool {
    let t = Instant::now();
    loop {
        let up = nodes.ids.iter().all(|&n| {
            status(nodes, n).is_some_and(|st| {
                nodes
                    .ids
                    .iter()
                    .filter(|&&m| m != n)
                    .all(|&m| st.peers.iter().any(|p| p.node == m && p.state == "up"))
            })
        });
        if up {
            return true;
        }
        if t.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
