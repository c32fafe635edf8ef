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

#[test]
fn a_group_with_a_member_on_another_host_is_not_supported_yet() {
    // Two nodes joined over TCP stand for two hosts.
    let h = common::Harness::with_cluster(&[4, 8], true);
    let (s4, s8) = (h.sci(4), h.sci(8));
    let (a, b) = (Descriptor::open(&s4).unwrap(), Descriptor::open(&s8).unwrap());
    assert_eq!(a.probe_node(0, 8), Ok(true), "the link is up");
    let (_far, _far_map) = member(&b, 0, 4096);
    let (_near, _near_map) = member(&a, 0, 4096);
    assert_eq!(RemoteSegment::connect_group(&a, 0, 0, T).unwrap_err(), Error::NotSupported);
}
