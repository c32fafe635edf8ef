//! The congestion control of a tcp link's connections, seen from outside: every one (the
//! control flow and the bulk lanes, a pager flow and a direct flow, at both ends) runs the
//! algorithm the node was told to (`Env::congestion`, set by `tcp/mod.rs`'s
//! `tune_congestion` after each flow's handshake); so does an ofi link's bootstrap flow.
//! Fails if any of its calls in `tcp/link.rs` (the accepting end, the dialed control and
//! bulk flows), `tcp/pool.rs` (a flow dialed on the runtime, a blocking one) or
//! `ofi/link.rs` (the bootstrap's dial) is left out.

use super::{ofi_env, tcp_env, wait, Near, HANDLE};
use remora_config::TcpCongestion;
use remora_node::transport::{Env, LinkState};
use remora_proto::link::{RangeRef, BULK_LANES};
use remora_testkit::free_port;
use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

/// An algorithm every Linux kernel has, and not this machine's default (BBR, or CUBIC).
const ALGORITHM: &str = "reno";

/// `env` told to run [`ALGORITHM`] on every link.
fn told(mut env: Env) -> Env {
    env.congestion = TcpCongestion::Named(ALGORITHM.into());
    env
}

/// The inodes of the established IPv4 TCP sockets (of this network namespace) with an end
/// on one of `ports`.
fn established_on(ports: &[u16]) -> HashSet<u64> {
    let table = std::fs::read_to_string("/proc/self/net/tcp").expect("/proc/self/net/tcp");
    let port = |a: &str| a.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
    let row = |l: &str| -> Option<u64> {
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
        let f: Vec<&str> = l.split_whitespace().collect();
        let ours = f.get(1..3)?.iter().any(|a| port(a).is_some_and(|p| ports.contains(&p)));
        (ours && *f.get(3)? == "01").then(|| f.get(9)?.parse().ok()).flatten()
    };
    table.lines().skip(1).filter_map(row).collect()
}

/// The congestion control of each socket of this process that is established with an end
/// on one of `ports`, by inode (a socket open under several numbers counts once): the
/// link's connections, both ends (both nodes are in this process), and none of another
/// test's.
fn congestion_on(ports: &[u16]) -> BTreeMap<u64, String> {
    let ours = established_on(ports);
    let socket = |e: std::fs::DirEntry| -> Option<(u64, String)> {
        let link = std::fs::read_link(e.path()).ok()?;
        let inode: u64 = link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()?;
        if !ours.contains(&inode) {
            return None;
        }
        // A copy of the descriptor, the same socket still (its number may have been closed
        // and reused since it was listed).
        let copy =
            std::fs::File::from(remora_sys::flow::copy_own(e.file_name().to_str()?.parse().ok()?).ok()?);
        (copy.metadata().ok()?.ino() == inode).then_some(())?;
        let algorithm = remora_sys::flow::congestion(std::os::fd::AsFd::as_fd(&copy));
        Some((inode, algorithm.unwrap_or_else(|e| format!("({e})"))))
    };
    std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").flatten().filter_map(socket).collect()
}

/// Every socket of this process established with an end on one of `ports`, `expected` of
/// them at least, runs [`ALGORITHM`]. Each end is tuned once its handshake is through:
/// waited for (a socket at the machine's default for a moment is not a failure; one that
/// stays so is).
fn assert_all_run(ports: &[u16], expected: usize) {
    let t0 = Instant::now();
    let seen = loop {
        let seen = congestion_on(ports);
        let done = seen.len() >= expected && seen.values().all(|c| c == ALGORITHM);
        if done || t0.elapsed() > Duration::from_secs(5) {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(seen.len() >= expected, "{expected} connections of the link, at both ends: {seen:?}");
    assert!(seen.values().all(|c| c == ALGORITHM), "every connection of the link runs {ALGORITHM}: {seen:?}");
}

#[test]
fn every_connection_of_a_tcp_link_runs_the_congestion_control_set() {
    let dir = tempfile::tempdir().unwrap();
    let (p4, p8) = (free_port(), free_port());
    let far = Near::open(told(tcp_env(8, dir.path(), p4, p8)));
    let near = Near::open(told(tcp_env(4, dir.path(), p4, p8)));
    wait("the link to come up", || near.transports.link_state(8) == Some(LinkState::Up));
    // A pager flow (dialed on the runtime) and a direct flow (dialed blocking), both kept.
    let t = near.to8();
    let pager = near.rt.block_on(t.pager_flow(8, RangeRef::connection(HANDLE))).unwrap();
    let direct = near.rt.block_on(t.direct_flow(8, 1, 2)).unwrap();
    // The peer welcomes the direct flow before it hands it over: waited for.
    let handed = || far.heard.direct.lock().unwrap().len() == 1;
    wait("the direct flow to be handed over", handed);
    // The control flow, the bulk lanes, the pager and the direct flow; at both ends.
    let expected = 2 * (1 + BULK_LANES + 2);
    assert_all_run(&[p4, p8], expected);
    drop((pager, direct));
}

#[test]
fn the_bootstrap_flow_of_an_ofi_link_runs_the_congestion_control_set() {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP ofi congestion control: libfabric is not installed (apt-get install libfabric-dev)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ports = [free_port(), free_port(), free_port(), free_port()];
    let _far = Near::open(told(ofi_env(8, dir.path(), ports, "ofi+tcp")));
    let near = Near::open(told(ofi_env(4, dir.path(), ports, "ofi+tcp")));
    assert_eq!(near.to8().name(), "ofi");
    wait("the link to come up", || near.transports.link_state(8) == Some(LinkState::Up));
    // The bootstrap flow, to a node's ofi port (`ofi/link.rs`), at both ends.
    assert_all_run(&[ports[1], ports[3]], 2);
}
