//! `SCIFlush` keeps a flag behind its data across homes, also for a flag's map made after
//! the flush, and never waits past a settle point's bound for a home that stopped.

mod common;
use common::{available as segment, daemon_pid, mapped, word, Sci as _, Stopped};

use remora_sisci::*;
use std::time::{Duration, Instant};

/// Nodes 4, 8 and 12 on hosts of their own, and a descriptor on each (4's, 8's, 12's).
fn three_nodes() -> (common::Harness, Descriptor, Descriptor, Descriptor) {
    let h = common::Harness::with_cluster(&[4, 8, 12], true);
    let open = |n| Descriptor::open(&h.sci(n)).unwrap();
    let (a, b, c) = (open(4), open(8), open(12));
    (h, a, b, c)
}

#[test]
fn a_flag_into_a_map_made_after_the_flush_never_overtakes_the_data() {
    // When the flush is called only home 4's pager has a writable map: it sends without
    // waiting. The flag's map (home 12) is made after it, while home 4 is stopped: the
    // flag must still land after the data.
    let (h, a, b, c) = three_nodes();
    let (_s4, home4) = segment(&a, 31, 4096);
    let (_s12, home12) = segment(&c, 41, 4096);
    let r4 = RemoteSegment::connect(&b, 4, 31, 0, Some(Duration::from_secs(10))).unwrap();
    let r12 = RemoteSegment::connect(&b, 12, 41, 0, Some(Duration::from_secs(10))).unwrap();
    let data = r4.map(0, 4096, None, MapFlags::default()).unwrap();
    let pid = daemon_pid(&h, 4);
    for i in 1..=3u64 {
        data.write(8, &i.to_le_bytes()).unwrap();
        let stopped = Stopped::new(pid);
        // The home answers again in a while, whatever happens next.
        let answer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(stopped);
        });
        data.write(16, &i.to_le_bytes()).unwrap();
        flush();
        let flag = r12.map(0, 4096, None, MapFlags::default()).unwrap();
        flag.write(0, &i.to_le_bytes()).unwrap();
        let t = Instant::now();
        while word(&home12, 0) != i {
            assert!(t.elapsed() < Duration::from_secs(5), "flag {i} never arrived");
            std::thread::yield_now();
        }
        let got = (word(&home4, 8), word(&home4, 16));
        answer.join().unwrap();
        drop(flag);
        assert_eq!(got, (i, i), "data behind flag {i}");
    }
}

#[test]
fn a_flush_waits_no_longer_than_a_settle_point_for_a_stopped_home() {
    // Stores sent to two segments of home 4 (a flow each), then home 4 stops: where they
    // were not answered yet, the pager waits for each flow in turn, up to its patience
    // (10 s) each; `SCIFlush` returns within a settle point's bound (5 s) all the same.
    let (h, a, b, c) = three_nodes();
    let (_s1, home1) = segment(&a, 31, 4096);
    let (_s2, _home2) = segment(&a, 32, 4096);
    let (_s12, _home12) = segment(&c, 41, 4096);
    let connect = |node, id| RemoteSegment::connect(&b, node, id, 0, Some(Duration::from_secs(10))).unwrap();
    let (r1, r2, r12) = (connect(4, 31), connect(4, 32), connect(12, 41));
    let m1 = r1.map(0, 4096, None, MapFlags::default()).unwrap();
    let m2 = r2.map(0, 4096, None, MapFlags::default()).unwrap();
    let m12 = r12.map(0, 4096, None, MapFlags::default()).unwrap();
    m12.write(0, b"x").unwrap();
    m1.write(0, b"a").unwrap();
    m2.write(0, b"b").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let stopped = Stopped::new(daemon_pid(&h, 4));
    let t = Instant::now();
    flush();
    let took = t.elapsed();
    drop(stopped);
    assert!(took < Duration::from_secs(7), "SCIFlush waited {took:?} for a stopped home");
    // The home answers again: the stores reach it.
    assert!(m1.flush());
    let mut got = [0u8; 1];
    home1.read(0, &mut got).unwrap();
    assert_eq!(&got, b"a");
}

#[test]
fn a_store_straight_home_is_not_overwritten_by_an_earlier_store_of_another_map() {
    // Two maps of one connection: a small store through the second (its page watched), then
    // a store of 32 KiB through the first over the same bytes (straight home over the
    // flow): the home ends with the later store.
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_s, home, _r, m1, m2) = two_maps_of_one_connection(&a, &b);
    for i in 1..=20u64 {
        m2.write(0, &(i * 1000).to_le_bytes()).unwrap();
        m1.write(0, &vec![i as u8; 32 << 10]).unwrap();
        assert!(m2.flush() && m1.flush());
        assert_eq!(
            word(&home, 0),
            u64::from_le_bytes([i as u8; 8]),
            "store {i} overwritten by an earlier one"
        );
    }
}

#[test]
fn stores_and_loads_straight_home_come_after_another_maps_earlier_stores() {
    // `Map::store_home`/`load_home` promise order with every store made before to maps of
    // the same connection: a store through the second map, then a store straight home
    // through the first over the same bytes (the later one wins at the home), or a load
    // straight home through the first (it sees the earlier store).
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_s, home, _r, m1, m2) = two_maps_of_one_connection(&a, &b);
    for i in 1..=5u64 {
        m2.write(4096, &(i * 1000).to_le_bytes()).unwrap();
        let mut w = [0u8; 8];
        m1.load_home(4096, &mut w).unwrap();
        assert_eq!(u64::from_le_bytes(w), i * 1000, "load {i} missed the other map's store");
        m2.write(0, &(i * 1000).to_le_bytes()).unwrap();
        m1.store_home(&[(0, &i.to_le_bytes())]).unwrap();
        assert!(m2.flush() && m1.flush());
        assert_eq!(word(&home, 0), i, "store {i} overwritten by the other map's earlier one");
    }
}

/// Segment 31 of `a`'s node (64 KiB) with a map there, and two maps of it through one
/// connection of `b`.
fn two_maps_of_one_connection(
    a: &Descriptor,
    b: &Descriptor,
) -> (LocalSegment, Map, RemoteSegment, Map, Map) {
    let (s, home) = segment(a, 31, 65536);
    let (r, m1) = mapped(b, 4, 31, 65536);
    let m2 = r.map(0, 65536, None, MapFlags::default()).unwrap();
    (s, home, r, m1, m2)
}
