//! A cable cut longer than a pager flow's patience (10 s) while a process of the other host
//! polls and stores into its map of the segment: the connection only goes NOT_OPERATIONAL
//! and OPERATIONAL again, so the map must ride it out (its accesses wait; no SIGBUS), its
//! sequences say PENDING during the cut and RETRIABLE (never NOT_RETRIABLE) after, and the
//! stores made once the link is back reach the home. Needs a namespace cluster (root);
//! skips without one.

mod common;

use remora_sisci::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the cable stays pulled: longer than a pager flow's 10 s patience, shorter than
/// the link's budget before the connection is closed (~30 s).
const CUT: Duration = Duration::from_secs(15);

#[test]
fn a_map_rides_out_a_cable_cut_longer_than_the_flow_patience() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let (_seg, home) = common::available(&a, 41, 8192);
    let (remote, map) = common::mapped(&b, c.node(1), 41, 8192);
    let seq = map.create_sequence().unwrap();
    map.write(64, &1u64.to_le_bytes()).unwrap();
    assert!(map.flush());
    assert_eq!(common::word(&home, 64), 1);
    assert_eq!(seq.start().unwrap(), SequenceStatus::Ok);

    let stop = AtomicBool::new(false);
    let loads = AtomicU64::new(0);
    let stored = AtomicU64::new(1);
    let statuses = std::thread::scope(|s| {
        // A program polling a flag of the map...
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                let mut w = [0u8; 8];
                map.read(0, &mut w).unwrap();
                loads.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        // ...and one storing and flushing every 100 ms.
        s.spawn(|| {
            let mut n = 1u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                map.write(64, &n.to_le_bytes()).unwrap();
                seq.flush();
                stored.store(n, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        c.link_down(1);
        common::expect_event(&remote, SegmentReason::NotOperational, Duration::from_secs(20));
        let cut = Instant::now();
        let mut during = Vec::new();
        while cut.elapsed() < CUT {
            during.push(seq.check(false, false).unwrap());
            std::thread::sleep(Duration::from_millis(250));
        }
        c.link_up(1);
        common::expect_event(&remote, SegmentReason::Operational, Duration::from_secs(20));
        // Back: the accesses go on (the pager opened a new flow).
        let back = loads.load(Ordering::SeqCst);
        let t = Instant::now();
        while loads.load(Ordering::SeqCst) < back + 3 {
            assert!(t.elapsed() < Duration::from_secs(20), "loads never resumed after the link came back");
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::SeqCst);
        during
    });
    assert!(during_ok(&statuses), "statuses during the cut: {statuses:?}");
    assert!(!map.is_lost(), "the map was given up during a cut of {CUT:?}");

    // The guide's loop: start until OK, then the transfer, then a check: RETRIABLE for the
    // outage (at most once), then OK; the data written after the link came back is home.
    let t = Instant::now();
    loop {
        match seq.start().unwrap() {
            SequenceStatus::Ok => break,
            SequenceStatus::Pending => assert!(t.elapsed() < Duration::from_secs(20), "start stayed PENDING"),
            other => panic!("start answered {other:?}"),
        }
    }
    let last = stored.load(Ordering::SeqCst) + 100;
    map.write(64, &last.to_le_bytes()).unwrap();
    map.write(128, b"after the cut").unwrap();
    let first = seq.check(false, false).unwrap();
    assert!(
        matches!(first, SequenceStatus::Ok | SequenceStatus::Retriable),
        "check after the cut: {first:?}"
    );
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Ok);
    assert_eq!(common::word(&home, 64), last);
    let mut got = [0u8; 13];
    home.read(128, &mut got).unwrap();
    assert_eq!(&got, b"after the cut");
    // And a store the home makes is seen by the map again.
    home.write(256, &77u64.to_le_bytes()).unwrap();
    let t = Instant::now();
    while common::word(&map, 256) != 77 {
        assert!(t.elapsed() < Duration::from_secs(5), "the home's store never showed in the map");
        std::thread::sleep(Duration::from_millis(10));
    }
    seq.remove().unwrap();
}

/// During a cut, checks say PENDING (the route is down) and never NOT_RETRIABLE; a check
/// made right after the route came back may say RETRIABLE.
fn during_ok(statuses: &[SequenceStatus]) -> bool {
    statuses.contains(&SequenceStatus::Pending) && !statuses.contains(&SequenceStatus::NotRetriable)
}

/// What host 1's node holds for sessions of host 2's: (connections to segments,
/// connections to interrupts).
fn booked_on_host_1_for_host_2(c: &remora_testkit::NetCluster) -> (usize, usize) {
    use remora_proto::{Reply, Request, Role};
    let s = remora_client::Session::open_control(&remora_testkit::net_config(c, 1)).unwrap();
    let Reply::Status(st) = s.request(Request::Status, &[]).unwrap().0 else { panic!("no status") };
    let far =
        |sid: u64| st.sessions.iter().any(|s| s.session == sid && s.role == Role::Peer { node: c.node(2) });
    let conns = st.connections.iter().filter(|k| far(k.session)).count();
    (conns, st.interrupts.iter().map(|i| i.3 as usize).sum())
}

/// Disconnects during a cable cut are done at once (they waited for the cable, or for the
/// link's close some 30 s into the cut); the far node learns of them once the cable is back.
#[test]
fn disconnects_during_a_cut_do_not_wait_for_the_cable() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let (_seg, _home) = common::available(&a, 42, 4096);
    let _intr = Interrupt::create(&a, 0, Some(78), false, None).unwrap();
    let remote = RemoteSegment::connect(&b, c.node(1), 42, 0, Some(Duration::from_secs(10))).unwrap();
    let intr = RemoteInterrupt::connect(&b, c.node(1), 0, 78, Some(Duration::from_secs(10))).unwrap();
    assert_eq!(booked_on_host_1_for_host_2(&c), (1, 1));
    c.link_down(1);
    common::expect_event(&remote, SegmentReason::NotOperational, Duration::from_secs(20));
    let t = Instant::now();
    remote.disconnect().unwrap();
    intr.disconnect().unwrap();
    let took = t.elapsed();
    c.link_up(1);
    assert!(took < Duration::from_secs(3), "the disconnects took {took:?} during the cut");
    let t = Instant::now();
    while booked_on_host_1_for_host_2(&c) != (0, 0) {
        let held = booked_on_host_1_for_host_2(&c);
        assert!(t.elapsed() < Duration::from_secs(20), "host 1 still holds {held:?} after the cut");
        std::thread::sleep(Duration::from_millis(100));
    }
}
