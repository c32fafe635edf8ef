//! The pool of pager flows a node keeps dialed ahead of need (`REMORA_PAGER_POOL`, the
//! node's `transport/tcp/pool.rs`): a map after the home's daemon restarted still works (a
//! flow pooled before the restart is never handed out), and the daemon's descriptors come
//! back to where they were once the pool is emptied at the link's loss. The pool is off by
//! default; these tests turn it on (two flows per peer) for the daemons they start.

mod common;
use common::{daemon_pid, retried, Sci as _};

use remora_sisci::*;
use std::time::{Duration, Instant};

/// A cluster of nodes `nodes` over TCP whose daemons (started by the library, inheriting
/// this process's environment) pool two flows per peer.
fn pooled(nodes: &[u32]) -> common::Harness {
    std::env::set_var("REMORA_PAGER_POOL", "2");
    common::Harness::with_cluster(nodes, true)
}

/// How many descriptors process `pid` holds.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

/// Wait (at most 5 s) until `pid` holds `n` descriptors; the last count when it does not.
fn settles_at(pid: u32, n: usize) -> usize {
    let t = Instant::now();
    loop {
        let now = fds(pid);
        if now == n || t.elapsed() > Duration::from_secs(5) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Segment 31 of `a` (64 KiB, `data` at 0).
fn exported(a: &Descriptor, data: &[u8]) -> LocalSegment {
    let seg = LocalSegment::create(a, Some(31), 65536, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    seg.map(0, 65536, None, MapFlags::default()).unwrap().write(0, data).unwrap();
    seg
}

/// Connect segment 31 of `node` from `b`, map it over a pager flow and read `data` back.
fn map_reads(b: &Descriptor, node: u32, data: &[u8]) {
    let remote = RemoteSegment::connect(b, node, 31, 0, Some(Duration::from_secs(10))).unwrap();
    let map = remote.map(0, 65536, None, MapFlags::default()).unwrap();
    assert_eq!(map.dsm_direct(), Some(true), "the map has a pager flow");
    let mut buf = vec![0u8; data.len()];
    map.read(0, &mut buf).unwrap();
    assert_eq!(buf, data);
    map.unmap().unwrap();
    remote.disconnect().unwrap();
}

#[test]
fn maps_after_the_home_restarted_work_and_the_pool_leaves_no_descriptor_behind() {
    let h = pooled(&[4, 8]);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let _seg = exported(&a, b"first start");
    // The link is up (a connect went through), no flow was taken yet: nothing pooled.
    RemoteSegment::connect(&b, 4, 31, 0, Some(Duration::from_secs(10))).unwrap().disconnect().unwrap();
    let pid = daemon_pid(&h, 8);
    std::thread::sleep(Duration::from_millis(300));
    // And the session `b`'s first map opens for the pager and keeps while `b` lives (its
    // socket and its event socket on the daemon's side).
    let base = fds(pid) + 2;

    // Maps take pooled flows; the pool refills to its size (2) in the background.
    for _ in 0..5 {
        map_reads(&b, 4, b"first start");
    }
    let pooled = settles_at(pid, base + 2);
    assert_eq!(pooled, base + 2, "the pool holds its two flows");

    // Node 4's daemon dies: the pooled flows (authenticated with its old start) are
    // dropped with the link, and the daemon's descriptors are back where they were.
    let old = daemon_pid(&h, 4);
    drop(_seg);
    drop(a);
    assert!(std::process::Command::new("kill").args(["-KILL", &old.to_string()]).status().unwrap().success());
    // Node 4 starts again (a process of it starts its daemon) with the same numbers.
    let a2 = retried(|| Descriptor::open(&h.sci(4)));
    assert_ne!(daemon_pid(&h, 4), old);
    let _seg2 = exported(&a2, b"second start");
    retried(|| RemoteSegment::connect(&b, 4, 31, 0, Some(Duration::from_secs(10)))).disconnect().unwrap();
    assert_eq!(settles_at(pid, base), base, "nothing of the old pool is left once the link is back");

    // A map of the new start gets a fresh, working flow and the new bytes.
    for _ in 0..3 {
        map_reads(&b, 4, b"second start");
    }
    assert_eq!(settles_at(pid, base + 2), base + 2, "the pool holds two flows again");
}

#[test]
fn a_map_of_a_stopped_home_with_flows_pooled_is_made_at_once_and_reads_after() {
    let h = pooled(&[4, 8]);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let _seg = exported(&a, b"home data");
    // The pool fills: the next map would take a flow dialed before the home stopped.
    map_reads(&b, 4, b"home data");
    let remote = RemoteSegment::connect(&b, 4, 31, 0, Some(Duration::from_secs(10))).unwrap();
    let pid = daemon_pid(&h, 4);
    std::thread::sleep(Duration::from_millis(200));
    assert!(std::process::Command::new("kill").args(["-STOP", &pid.to_string()]).status().unwrap().success());
    let t = Instant::now();
    let map = remote.map(0, 65536, None, MapFlags::default());
    let took = t.elapsed();
    assert!(std::process::Command::new("kill").args(["-CONT", &pid.to_string()]).status().unwrap().success());
    eprintln!(
        "the map of a stopped home answered in {took:?} (pager flow: {:?})",
        map.as_ref().map(|m| m.dsm_direct())
    );
    assert!(took < Duration::from_millis(1500), "the map of a stopped home took {took:?}");
    let map = map.unwrap();
    let mut buf = [0u8; 9];
    map.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"home data");
}
