//! Reflective memory (`SCI_FLAG_BROADCAST`) on one host: members of a group on several
//! nodes, the multicast connection, a late member, unicast, and clean-up.

mod common;
use common::Sci as _;

use remora_proto::{Reply, Request};
use remora_sisci::*;
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(5));

fn status(h: &common::Harness, node: u32) -> remora_proto::NodeStatus {
    let s = remora_client::Session::open_control(&h.config(node)).unwrap();
    match s.request(Request::Status, &[]).unwrap().0 {
        Reply::Status(st) => *st,
        other => panic!("{other:?}"),
    }
}

/// A member of `group` on `dev`'s node, prepared, and its local map.
fn member(dev: &Descriptor, group: u32, size: usize) -> (LocalSegment, Map) {
    let s = LocalSegment::create_broadcast(dev, group, size, false, None).unwrap();
    s.prepare(0).unwrap();
    let m = s.map(0, size, None, MapFlags::default()).unwrap();
    (s, m)
}

fn read_u64(m: &Map, off: usize) -> u64 {
    let mut b = [0u8; 8];
    m.read(off, &mut b).unwrap();
    u64::from_le_bytes(b)
}

#[test]
fn one_store_reaches_every_member_of_the_host() {
    let h = common::Harness::new();
    let nodes = [4u32, 8, 12];
    let scis: Vec<Sisci> = nodes.iter().map(|n| h.sci(*n)).collect();
    let devs: Vec<Descriptor> = scis.iter().map(|s| Descriptor::open(s).unwrap()).collect();
    const SIZE: usize = 8192;
    let members: Vec<(LocalSegment, Map)> = devs.iter().map(|d| member(d, 3, SIZE)).collect();
    let casts: Vec<(RemoteSegment, Map)> = devs
        .iter()
        .map(|d| {
            let r = RemoteSegment::connect_group(d, 3, 0, T).unwrap();
            assert_eq!((r.node(), r.id(), r.size()), (BROADCAST_NODE, 3, SIZE));
            let m = r.map(0, SIZE, None, MapFlags::default()).unwrap();
            (r, m)
        })
        .collect();
    // Every member stores its own slot through the multicast map; every member sees all.
    for (i, (_, m)) in casts.iter().enumerate() {
        m.write(i * 8, &(0x1000 + i as u64).to_le_bytes()).unwrap();
    }
    for (_, local) in &members {
        for i in 0..nodes.len() {
            assert_eq!(read_u64(local, i * 8), 0x1000 + i as u64);
        }
    }
    // A late member (a fourth node) sees the current contents at once.
    let late_sci = h.sci(16);
    let late_dev = Descriptor::open(&late_sci).unwrap();
    let (late, late_map) = member(&late_dev, 3, SIZE);
    for i in 0..nodes.len() {
        assert_eq!(read_u64(&late_map, i * 8), 0x1000 + i as u64);
    }
    // And its own stores reach the others.
    let late_cast = RemoteSegment::connect_group(&late_dev, 3, 0, T).unwrap();
    let lm = late_cast.map(0, SIZE, None, MapFlags::default()).unwrap();
    lm.write(SIZE - 8, &77u64.to_le_bytes()).unwrap();
    assert!(members.iter().all(|(_, m)| read_u64(m, SIZE - 8) == 77));

    // Disconnect and remove leave nothing behind on any node.
    drop((lm, late_map));
    late_cast.disconnect().unwrap();
    late.remove().unwrap();
    for (r, m) in casts {
        drop(m);
        r.disconnect().unwrap();
    }
    for (s, m) in members {
        drop(m);
        s.remove().unwrap();
    }
    for n in [4, 8, 12, 16] {
        let st = status(&h, n);
        assert!(st.segments.is_empty(), "node {n} keeps {:?}", st.segments);
        assert!(st.connections.is_empty(), "node {n} keeps {:?}", st.connections);
    }
    // With every member gone the group starts afresh.
    let (again, m) = member(&devs[0], 3, SIZE);
    assert_eq!(read_u64(&m, 0), 0);
    drop(m);
    again.remove().unwrap();
}

#[test]
fn group_rules_and_unicast() {
    let h = common::Harness::new();
    let (s4, s8) = (h.sci(4), h.sci(8));
    let (a, b) = (Descriptor::open(&s4).unwrap(), Descriptor::open(&s8).unwrap());
    // Groups are 0..6; the id is the node's; size rules.
    assert!(matches!(
        LocalSegment::create_broadcast(&a, 6, 4096, false, None),
        Err(Error::IllegalParameter(_))
    ));
    assert!(matches!(LocalSegment::create_broadcast(&a, 0, 0, false, None), Err(Error::IllegalParameter(_))));
    let plain = LocalSegment::create(&a, Some(1), 4096, CreateFlags::default()).unwrap();
    assert_eq!(LocalSegment::create_broadcast(&a, 1, 4096, false, None).unwrap_err(), Error::SegmentIdUsed);
    plain.remove().unwrap();
    // No member yet: the multicast connect waits, then answers NoSuchSegment.
    assert_eq!(
        RemoteSegment::connect_group(&a, 2, 0, Some(Duration::from_millis(50))).unwrap_err(),
        Error::NoSuchSegment
    );
    assert_eq!(RemoteSegment::connect_group(&a, 2, 1, T).unwrap_err(), Error::NoSuchAdapter);
    let m4 = LocalSegment::create_broadcast(&a, 2, 4096, false, None).unwrap();
    assert_eq!(LocalSegment::create_broadcast(&a, 2, 4096, false, None).unwrap_err(), Error::SegmentIdUsed);
    // A later member may not be larger than the group's memory; smaller is fine.
    assert!(matches!(
        LocalSegment::create_broadcast(&b, 2, 8192, false, None),
        Err(Error::IllegalParameter(_))
    ));
    let m8 = LocalSegment::create_broadcast(&b, 2, 2048, true, None).unwrap();
    m4.prepare(0).unwrap();
    m4.set_available(0).unwrap();
    m8.prepare(0).unwrap();
    m8.set_available(0).unwrap();
    // Without ALLOW_UNICAST an ordinary connect is refused; with it, it is the member.
    assert_eq!(RemoteSegment::connect(&b, 4, 2, 0, T).unwrap_err(), Error::Access);
    let uni = RemoteSegment::connect(&a, 8, 2, 0, T).unwrap();
    let um = uni.map(0, 2048, None, MapFlags::default()).unwrap();
    um.write(100, b"unicast").unwrap();
    let lm4 = m4.map(0, 4096, None, MapFlags::default()).unwrap();
    let mut got = [0u8; 7];
    lm4.read(100, &mut got).unwrap();
    assert_eq!(&got, b"unicast", "the member's memory is the group's");
    // A non-member node of the host may write to the group too.
    let s12 = h.sci(12);
    let c = Descriptor::open(&s12).unwrap();
    let cast = RemoteSegment::connect_group(&c, 2, 0, T).unwrap();
    assert_eq!(cast.size(), 4096);
    let cm = cast.map(0, 4096, None, MapFlags::default()).unwrap();
    cm.write(4000, b"from 12").unwrap();
    lm4.read(4000, &mut got).unwrap();
    assert_eq!(&got, b"from 12");
    // DMA through the multicast connection reaches the members as well.
    let src = LocalSegment::create(&c, Some(9), 4096, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    src.map(0, 4096, None, MapFlags::default()).unwrap().write(0, b"dma!").unwrap();
    let q = DmaQueue::create(&c, 0, 4).unwrap();
    q.start(&src, &cast, 0, 4, 200, DmaFlags { read: false, wait: true }, None).unwrap();
    let mut four = [0u8; 4];
    lm4.read(200, &mut four).unwrap();
    assert_eq!(&four, b"dma!");
}

#[test]
fn process_exit_releases_the_group() {
    let h = common::Harness::new();
    {
        let s4 = h.sci(4);
        let a = Descriptor::open(&s4).unwrap();
        let (_m, _map) = member(&a, 5, 4096);
        let _cast = RemoteSegment::connect_group(&a, 5, 0, T).unwrap();
        assert_eq!(status(&h, 4).connections.len(), 1);
    }
    // The descriptor's close released member and connection.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let st = status(&h, 4);
        if st.segments.is_empty() && st.connections.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "left behind: {st:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Poll `m`'s 8 bytes at `off` until they read `want` (at most 5 s): how long it took.
fn sees(m: &Map, off: usize, want: u64) -> Duration {
    let t = std::time::Instant::now();
    loop {
        if read_u64(m, off) == want {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "offset {off} reads {:#x}, not {want:#x}",
            read_u64(m, off)
        );
        std::thread::yield_now();
    }
}

fn all_released(h: &common::Harness, nodes: &[u32]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    for &n in nodes {
        loop {
            let st = status(h, n);
            if st.segments.is_empty() && st.connections.is_empty() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "node {n} keeps {:?} {:?}",
                st.segments,
                st.connections
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn one_store_reaches_every_member_across_hosts() {
    // Nodes joined over TCP stand for three hosts (each has its own group memory).
    let h = common::Harness::with_cluster(&[4, 8, 12], true);
    let (s4, s8, s12) = (h.sci(4), h.sci(8), h.sci(12));
    let (a, b) = (Descriptor::open(&s4).unwrap(), Descriptor::open(&s8).unwrap());
    // Node 12's daemon runs (its process joins the group later).
    let c = Descriptor::open(&s12).unwrap();
    const SIZE: usize = 8192;
    let members = [member(&a, 0, SIZE), member(&b, 0, SIZE)];
    // The links need not be up: the connect dials them.
    let casts: Vec<(RemoteSegment, Map)> = [&a, &b]
        .iter()
        .map(|d| {
            let r = RemoteSegment::connect_group(d, 0, 0, T).unwrap();
            assert_eq!((r.node(), r.id(), r.size()), (BROADCAST_NODE, 0, SIZE));
            let m = r.map(0, SIZE, None, MapFlags::default()).unwrap();
            (r, m)
        })
        .collect();
    // Every member stores its slot through its multicast map and flushes; both see both.
    for (i, (_, m)) in casts.iter().enumerate() {
        m.write(i * 8, &(0x1000 + i as u64).to_le_bytes()).unwrap();
        flush();
    }
    for (_, local) in &members {
        for i in 0..2 {
            sees(local, i * 8, 0x1000 + i as u64);
        }
    }
    // Data, flush, flag: a member that sees the flag sees the data (one flow keeps order).
    let (_, m) = &casts[0];
    m.write(4096, &[7u8; 512]).unwrap();
    flush();
    m.write(SIZE - 8, &1u64.to_le_bytes()).unwrap();
    flush();
    sees(&members[1].1, SIZE - 8, 1);
    let mut data = [0u8; 512];
    members[1].1.read(4096, &mut data).unwrap();
    assert_eq!(data, [7u8; 512]);
    // A store barrier waits until every member host has the stores.
    m.write(16, &0xabcu64.to_le_bytes()).unwrap();
    assert!(m.flush());
    assert_eq!(read_u64(&members[1].1, 16), 0xabc);

    // A late member on a third host sees the current contents at once (fetched at its
    // join) and reaches the others with its own multicast connection.
    let (late, late_map) = member(&c, 0, SIZE);
    for i in 0..2 {
        assert_eq!(read_u64(&late_map, i * 8), 0x1000 + i as u64);
    }
    assert_eq!(read_u64(&late_map, 16), 0xabc);
    let late_cast = RemoteSegment::connect_group(&c, 0, 0, T).unwrap();
    let lm = late_cast.map(0, SIZE, None, MapFlags::default()).unwrap();
    lm.write(24, &77u64.to_le_bytes()).unwrap();
    flush();
    for local in members.iter().map(|(_, m)| m).chain([&late_map]) {
        sees(local, 24, 77);
    }
    // Loads through a multicast map see the group (this host's member, or a leg).
    assert_eq!(read_u64(&lm, 0), 0x1000);

    // Disconnect and remove leave nothing behind on any node.
    drop(lm);
    late_cast.disconnect().unwrap();
    for (r, m) in casts {
        drop(m);
        r.disconnect().unwrap();
    }
    for (s, m) in members.into_iter().chain([(late, late_map)]) {
        drop(m);
        s.remove().unwrap();
    }
    all_released(&h, &[4, 8, 12]);
}

#[test]
fn a_writer_without_a_member_and_a_lost_member_host() {
    let h = common::Harness::with_cluster(&[4, 8, 12], true);
    let (s4, s8, s12) = (h.sci(4), h.sci(8), h.sci(12));
    let (a, b, c) =
        (Descriptor::open(&s4).unwrap(), Descriptor::open(&s8).unwrap(), Descriptor::open(&s12).unwrap());
    const SIZE: usize = 4096;
    let (_m8, l8) = member(&b, 1, SIZE);
    let (_m12, _l12) = member(&c, 1, SIZE);
    // Node 4 holds no member: its multicast map reaches the two other hosts only.
    let cast = RemoteSegment::connect_group(&a, 1, 0, T).unwrap();
    let m = cast.map(0, SIZE, None, MapFlags::default()).unwrap();
    m.write(0, &5u64.to_le_bytes()).unwrap();
    assert!(m.flush());
    assert_eq!(read_u64(&l8, 0), 5);
    // Host 12 dies: it drops out; the writer's flush does not hang and 8 keeps receiving.
    let pid = {
        let s = remora_client::Session::open_control(&h.config(12)).unwrap();
        match s.request(Request::Status, &[]).unwrap().0 {
            Reply::Status(st) => st.pid,
            other => panic!("{other:?}"),
        }
    };
    std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t = std::time::Instant::now();
    for v in 6..10u64 {
        m.write(0, &v.to_le_bytes()).unwrap();
        m.flush();
        sees(&l8, 0, v);
    }
    assert!(t.elapsed() < Duration::from_secs(10), "flushes took {:?}", t.elapsed());
    drop(m);
    cast.disconnect().unwrap();
}

/// Poll node `n`'s status until it holds `segments` segments and `conns` connections.
fn holds(h: &common::Harness, n: u32, segments: usize, conns: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let st = status(h, n);
        if st.segments.len() == segments && st.connections.len() == conns {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node {n} keeps {:?} {:?}",
            st.segments,
            st.connections
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_member_host_that_joins_after_the_connect_is_reached() {
    // Dolphin's usual flow: every node creates its member and connects at about the same
    // time, so one connects before the other host's member exists.
    let h = common::Harness::with_cluster(&[4, 8], true);
    let (s4, s8) = (h.sci(4), h.sci(8));
    let (a, b) = (Descriptor::open(&s4).unwrap(), Descriptor::open(&s8).unwrap());
    const SIZE: usize = 8192;
    let (ma, la) = member(&a, 4, SIZE);
    let cast = RemoteSegment::connect_group(&a, 4, 0, T).unwrap();
    let m = cast.map(0, SIZE, None, MapFlags::default()).unwrap();
    m.write(0, &0x11u64.to_le_bytes()).unwrap();
    flush();
    sees(&la, 0, 0x11);
    // Host 8's first member: it has the contents at once, and A's later stores reach it.
    let (mb, lb) = member(&b, 4, SIZE);
    assert_eq!(read_u64(&lb, 0), 0x11);
    m.write(8, &0x22u64.to_le_bytes()).unwrap();
    flush();
    sees(&lb, 8, 0x22);
    // Stores in a tight loop while nothing waits: the last one lands on both hosts.
    for v in 0..200u64 {
        m.write(4096, &v.to_le_bytes()).unwrap();
    }
    assert!(m.flush(), "every member host has it");
    assert_eq!(read_u64(&lb, 4096), 199);
    // B's own multicast connection reaches A.
    let cast_b = RemoteSegment::connect_group(&b, 4, 0, T).unwrap();
    let mb_cast = cast_b.map(0, SIZE, None, MapFlags::default()).unwrap();
    mb_cast.write(16, &0x33u64.to_le_bytes()).unwrap();
    flush();
    sees(&la, 16, 0x33);
    // B leaves in order: A's leg to it is dropped, A's flushes keep working, and B's node
    // keeps nothing.
    drop(mb_cast);
    cast_b.disconnect().unwrap();
    drop(lb);
    mb.remove().unwrap();
    holds(&h, 8, 0, 0);
    m.write(24, &0x44u64.to_le_bytes()).unwrap();
    assert!(m.flush());
    assert_eq!(read_u64(&la, 24), 0x44);
    // A member that joins again is reached again.
    let (mb, lb) = member(&b, 4, SIZE);
    assert_eq!(read_u64(&lb, 24), 0x44);
    m.write(32, &0x55u64.to_le_bytes()).unwrap();
    flush();
    sees(&lb, 32, 0x55);
    drop(lb);
    mb.remove().unwrap();
    drop(m);
    cast.disconnect().unwrap();
    drop(la);
    ma.remove().unwrap();
    all_released(&h, &[4, 8]);
}
