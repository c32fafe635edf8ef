//! SISCI across hosts: a cluster of network namespaces joined by a bridge, one `remorad` in
//! each, talking TCP. Needs root and iproute2; elsewhere each test says why it skips.
//! The test process reaches each node's daemon through that node's runtime directory.

mod common;

use remora_sisci::*;
use remora_testkit::NetCluster;
use std::time::{Duration, Instant};

fn cluster(hosts: usize) -> Option<NetCluster> {
    common::net_cluster(hosts)
}

fn sci(c: &NetCluster, k: usize) -> Sisci {
    common::net_sci(c, k)
}

#[test]
fn conformance_across_two_hosts() {
    let Some(c) = cluster(2) else { return };
    assert_eq!((c.node(1), c.node(2)), (4, 8));
    common::conformance(&sci(&c, 1), &sci(&c, 2), common::Route::Hosts);
}

#[test]
fn link_down_up_kill_and_restart() {
    let Some(mut c) = cluster(2) else { return };
    common::link_faults(&mut c);
}

fn read_u64(m: &Map, off: usize) -> u64 {
    let mut b = [0u8; 8];
    m.read(off, &mut b).unwrap();
    u64::from_le_bytes(b)
}

/// Poll until `m` reads `want` at `off` (at most 5 s).
fn sees(m: &Map, off: usize, want: u64) {
    let t = Instant::now();
    while read_u64(m, off) != want {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "offset {off} reads {:#x}, not {want:#x}",
            read_u64(m, off)
        );
        std::thread::yield_now();
    }
}

#[test]
fn reflective_memory_across_three_hosts() {
    let Some(mut c) = cluster(3) else { return };
    let devs: Vec<Descriptor> = (1..=3).map(|k| Descriptor::open(&sci(&c, k)).unwrap()).collect();
    const SIZE: usize = 8192;
    let t = Some(Duration::from_secs(10));
    let member = |d: &Descriptor| {
        let s = LocalSegment::create_broadcast(d, 2, SIZE, false, None).unwrap();
        s.prepare(0).unwrap();
        let m = s.map(0, SIZE, None, MapFlags::default()).unwrap();
        (s, m)
    };
    let members = [member(&devs[0]), member(&devs[1])];
    let casts: Vec<(RemoteSegment, Map)> = devs[..2]
        .iter()
        .map(|d| {
            let r = RemoteSegment::connect_group(d, 2, 0, t).unwrap();
            let m = r.map(0, SIZE, None, MapFlags::default()).unwrap();
            (r, m)
        })
        .collect();
    for (i, (_, m)) in casts.iter().enumerate() {
        m.write(i * 8, &(0x100 + i as u64).to_le_bytes()).unwrap();
        flush();
    }
    for (_, local) in &members {
        sees(local, 0, 0x100);
        sees(local, 8, 0x101);
    }
    // A late member on the third host has the contents at once, and its stores reach all.
    let (late, late_map) = member(&devs[2]);
    assert_eq!((read_u64(&late_map, 0), read_u64(&late_map, 8)), (0x100, 0x101));
    let late_cast = RemoteSegment::connect_group(&devs[2], 2, 0, t).unwrap();
    let lm = late_cast.map(0, SIZE, None, MapFlags::default()).unwrap();
    lm.write(16, &0x102u64.to_le_bytes()).unwrap();
    assert!(lm.flush(), "every member host has it");
    assert_eq!(read_u64(&members[0].1, 16), 0x102);
    assert_eq!(read_u64(&members[1].1, 16), 0x102);
    // The third host dies: host 1's stores still reach host 2, and no flush hangs.
    drop(lm);
    drop(late_map);
    std::mem::forget((late, late_cast)); // their daemon is gone
    c.kill_daemon(3);
    let (_, m) = &casts[0];
    let t0 = Instant::now();
    for v in 1..5u64 {
        m.write(24, &v.to_le_bytes()).unwrap();
        m.flush();
        sees(&members[1].1, 24, v);
    }
    assert!(t0.elapsed() < Duration::from_secs(10), "flushes took {:?}", t0.elapsed());
    for (r, m) in casts {
        drop(m);
        r.disconnect().unwrap();
    }
    for (s, m) in members {
        drop(m);
        s.remove().unwrap();
    }
}

#[test]
fn a_member_host_that_joins_after_the_connect() {
    let Some(c) = cluster(2) else { return };
    let (a, b) = (Descriptor::open(&sci(&c, 1)).unwrap(), Descriptor::open(&sci(&c, 2)).unwrap());
    const SIZE: usize = 8192;
    let t = Some(Duration::from_secs(10));
    let member = |d: &Descriptor| {
        let s = LocalSegment::create_broadcast(d, 3, SIZE, false, None).unwrap();
        s.prepare(0).unwrap();
        let m = s.map(0, SIZE, None, MapFlags::default()).unwrap();
        (s, m)
    };
    // Host 1 connects before host 2's member exists.
    let (ma, la) = member(&a);
    let cast = RemoteSegment::connect_group(&a, 3, 0, t).unwrap();
    let m = cast.map(0, SIZE, None, MapFlags::default()).unwrap();
    m.write(0, &7u64.to_le_bytes()).unwrap();
    flush();
    let (mb, lb) = member(&b);
    assert_eq!(read_u64(&lb, 0), 7, "the contents at the join");
    m.write(8, &8u64.to_le_bytes()).unwrap();
    flush();
    sees(&lb, 8, 8);
    let cast_b = RemoteSegment::connect_group(&b, 3, 0, t).unwrap();
    let mbc = cast_b.map(0, SIZE, None, MapFlags::default()).unwrap();
    mbc.write(16, &9u64.to_le_bytes()).unwrap();
    flush();
    sees(&la, 16, 9);
    // Host 2 leaves in order; host 1's flushes go on, and host 2 keeps nothing.
    drop(mbc);
    cast_b.disconnect().unwrap();
    drop(lb);
    mb.remove().unwrap();
    m.write(24, &10u64.to_le_bytes()).unwrap();
    assert!(m.flush());
    assert_eq!(read_u64(&la, 24), 10);
    let status = |k: usize| {
        let s = remora_client::Session::open_control(&remora_testkit::net_config(&c, k)).unwrap();
        match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
            remora_proto::Reply::Status(st) => *st,
            other => panic!("{other:?}"),
        }
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let st = status(2);
        if st.segments.is_empty() && st.connections.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "host 2 keeps {:?} {:?}", st.segments, st.connections);
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(m);
    cast.disconnect().unwrap();
    drop(la);
    ma.remove().unwrap();
    let st = status(1);
    assert!(st.segments.is_empty() && st.connections.is_empty(), "{:?} {:?}", st.segments, st.connections);
}
