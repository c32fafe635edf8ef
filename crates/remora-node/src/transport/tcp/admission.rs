//! Places for the handshakes under way on a peer port. A connection holds one from its
//! accept until it has authenticated or its deadline passed (a thread of ours serves it
//! meanwhile); one that finds no place is closed at once.
//!
//! Connections from addresses of the cluster's nodes — their cluster-file hosts, resolved
//! when the transport opens, and every address a node has authenticated from since — take
//! places of their own ([`KNOWN_AT_ONCE`]), and the strangers' ([`STRANGERS_AT_ONCE`]) only
//! once those are full; connections from anywhere else share the strangers' places. So
//! connections that drip their handshake from elsewhere, renewed as each is cut off, never
//! keep a peer's (re)connect out. Places go by kind of address, not by address: every node
//! of one host dials from that host's address (127.0.0.1 for nodes of a loopback cluster),
//! so one address may carry many nodes' flows at once.
//!
//! The connections an accept loop refuses are logged at most ten every ten seconds
//! ([`RefusalLog`]); the next warning says how many went unsaid.

use crate::cluster::Cluster;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Handshakes under way at most from addresses that are not the cluster's.
pub(in crate::transport) const STRANGERS_AT_ONCE: usize = 64;

/// Handshakes under way at most from the cluster's addresses, beside the strangers'.
pub(in crate::transport) const KNOWN_AT_ONCE: usize = 64;

/// The places of one listener and the addresses it knows.
#[derive(Debug, Default)]
pub(in crate::transport) struct Admission {
    /// The cluster-file hosts, resolved.
    configured: HashSet<IpAddr>,
    /// The address each node last authenticated from.
    learned: Mutex<HashMap<u32, IpAddr>>,
    strangers: AtomicUsize,
    known: AtomicUsize,
}

/// One handshake's place, given back when dropped.
#[derive(Debug)]
pub(in crate::transport) struct Place {
    admission: Arc<Admission>,
    known: bool,
}

impl Admission {
    /// The places of a listener of `cluster`'s nodes: every node's host is resolved now (a
    /// host that does not resolve is known once a node authenticates from it).
    pub(in crate::transport) fn new(cluster: &Cluster) -> Arc<Admission> {
        let configured = cluster
            .nodes
            .iter()
            .filter_map(|n| (n.host.as_str(), n.port).to_socket_addrs().ok())
            .flatten()
            .map(|a| a.ip().to_canonical())
            .collect();
        Arc::new(Admission { configured, ..Admission::default() })
    }

    /// Whether `ip` is an address of the cluster's nodes.
    pub(in crate::transport) fn is_known(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.configured.contains(&ip)
            || self.learned.lock().unwrap_or_else(|p| p.into_inner()).values().any(|a| *a == ip)
    }

    /// A place for a handshake from `ip`, if one is free.
    pub(in crate::transport) fn take(self: &Arc<Self>, ip: IpAddr) -> Option<Place> {
        if self.is_known(ip) && take_one(&self.known, KNOWN_AT_ONCE) {
            return Some(Place { admission: self.clone(), known: true });
        }
        take_one(&self.strangers, STRANGERS_AT_ONCE).then(|| Place { admission: self.clone(), known: false })
    }

    /// Node `node` authenticated from `ip`: later connections from there are known.
    pub(in crate::transport) fn learn(&self, node: u32, ip: IpAddr) {
        self.learned.lock().unwrap_or_else(|p| p.into_inner()).insert(node, ip.to_canonical());
    }
}

/// Take one of `cap` places counted by `n`.
fn take_one(n: &AtomicUsize, cap: usize) -> bool {
    n.fetch_update(Ordering::AcqRel, Ordering::Acquire, |x| (x < cap).then_some(x + 1)).is_ok()
}

impl Drop for Place {
    fn drop(&mut self) {
        let n = if self.known { &self.admission.known } else { &self.admission.strangers };
        n.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The warnings of one accept loop's refused connections, at most [`WARNINGS_PER_WINDOW`]
/// every [`WARNING_WINDOW`]: a flood of strangers must not flood the daemon's log. The
/// refusals left unsaid are counted in the next warning.
#[derive(Debug)]
pub(in crate::transport) struct RefusalLog {
    per_window: u32,
    window: Duration,
    /// When the window began, the warnings in it, the refusals left unsaid since the last.
    state: Mutex<(Option<Instant>, u32, u64)>,
}

/// Warnings of refused connections at most, per [`WARNING_WINDOW`].
const WARNINGS_PER_WINDOW: u32 = 10;
/// See [`WARNINGS_PER_WINDOW`].
const WARNING_WINDOW: Duration = Duration::from_secs(10);

impl Default for RefusalLog {
    fn default() -> RefusalLog {
        RefusalLog::new(WARNINGS_PER_WINDOW, WARNING_WINDOW)
    }
}

impl RefusalLog {
    fn new(per_window: u32, window: Duration) -> RefusalLog {
        RefusalLog { per_window, window, state: Mutex::new((None, 0, 0)) }
    }

    /// A connection was refused: `Some(n)` when it is to be logged, `n` the refusals left
    /// unsaid before it; `None` when it is left unsaid (counted).
    pub(in crate::transport) fn refused(&self) -> Option<u64> {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if g.0.is_none_or(|began| now.duration_since(began) >= self.window) {
            (g.0, g.1) = (Some(now), 0);
        }
        if g.1 < self.per_window {
            g.1 += 1;
            return Some(std::mem::take(&mut g.2));
        }
        g.2 += 1;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission() -> Arc<Admission> {
        let text = "secret = \"0123456789abcdef0123\"\n[[node]]\nid = 4\nhost = \"127.0.0.1\"\nport = 7400\n\
                    [[node]]\nid = 8\nhost = \"10.1.2.3\"\nport = 7400\n";
        Admission::new(&Cluster::parse(text, std::path::Path::new(".")).unwrap())
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn strangers_filling_their_places_leave_the_clusters_addresses_theirs() {
        let a = admission();
        let strangers: Vec<Place> =
            (0..STRANGERS_AT_ONCE).map(|_| a.take(ip("192.0.2.9")).unwrap()).collect();
        assert!(a.take(ip("192.0.2.10")).is_none(), "the strangers' places are full");
        let peers: Vec<Place> = (0..KNOWN_AT_ONCE).map(|_| a.take(ip("10.1.2.3")).unwrap()).collect();
        assert!(a.take(ip("::ffff:127.0.0.1")).is_none(), "both kinds full (a mapped address is known too)");
        drop(strangers);
        assert!(
            a.take(ip("127.0.0.1")).is_some(),
            "a known address takes a stranger's place when its own are full"
        );
        drop(peers);
        assert_eq!(
            (a.known.load(Ordering::Acquire), a.strangers.load(Ordering::Acquire)),
            (0, 0),
            "all given back"
        );
    }

    #[test]
    fn an_address_a_node_authenticated_from_is_known_from_then_on() {
        let a = admission();
        assert!(!a.is_known(ip("192.0.2.7")));
        a.learn(8, ip("192.0.2.7"));
        assert!(a.is_known(ip("192.0.2.7")));
        let _strangers: Vec<Place> =
            (0..STRANGERS_AT_ONCE).map(|_| a.take(ip("192.0.2.9")).unwrap()).collect();
        assert!(a.take(ip("192.0.2.7")).is_some_and(|p| p.known));
        a.learn(8, ip("192.0.2.8"));
        assert!(!a.is_known(ip("192.0.2.7")), "a node's address is the one it last came from");
    }

    #[test]
    fn refusals_past_the_windows_quota_are_counted_into_the_next_warning() {
        let log = RefusalLog::new(2, Duration::from_millis(300));
        assert_eq!((log.refused(), log.refused()), (Some(0), Some(0)));
        assert_eq!((log.refused(), log.refused(), log.refused()), (None, None, None));
        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(log.refused(), Some(3), "the next window's first warning says how many went unsaid");
        assert_eq!(log.refused(), Some(0));
    }
}
