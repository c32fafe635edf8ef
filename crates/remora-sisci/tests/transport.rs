//! One conformance suite, run over every transport: `local` (nodes of one host sharing
//! memory) and `tcp` (forced between nodes of this host over loopback, as between hosts).
//! Every transfer is checked byte for byte with a checksum.

mod common;
use common::Sci as _;

use remora_sisci::*;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn local_transport() {
    let h = common::Harness::with_cluster(&[4, 8], false);
    common::conformance(&h.sci(4), &h.sci(8), common::Route::Shared);
}

#[test]
fn tcp_transport() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    common::conformance(&h.sci(4), &h.sci(8), common::Route::Loopback);
}

fn daemon_pid(h: &common::Harness, node: u32) -> i32 {
    let s = remora_client::Session::open_control(&h.config(node)).unwrap();
    match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.pid as i32,
        other => panic!("{other:?}"),
    }
}

fn signal(pid: i32, sig: &str) {
    assert!(std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

#[test]
fn tcp_link_failures_are_events_not_hangs() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let seg = LocalSegment::create(&a, Some(7), 1 << 20, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    let (tx, rx) = mpsc::channel();
    let remote = RemoteSegment::connect_with(
        &b,
        4,
        7,
        0,
        Some(Duration::from_secs(5)),
        ConnectFlags::default(),
        Some(Box::new(move |_r, ev| {
            tx.send(ev.reason).unwrap();
            CallbackAction::Continue
        })),
    )
    .unwrap();
    // A map across hosts, with its sequence: OK now, NOT_RETRIABLE once the home is lost.
    let map = remote.map(0, 8192, None, MapFlags::default()).unwrap();
    let seq = map.create_sequence().unwrap();
    map.write(0, b"x").unwrap();
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Ok);

    // A silent peer: NOT_OPERATIONAL within three heartbeats (50 ms each), then OPERATIONAL.
    let pid4 = daemon_pid(&h, 4);
    signal(pid4, "STOP");
    let t = Instant::now();
    let ev = rx.recv_timeout(Duration::from_secs(3));
    signal(pid4, "CONT");
    assert_eq!(ev.unwrap(), SegmentReason::NotOperational);
    assert!(t.elapsed() < Duration::from_secs(1), "took {:?}", t.elapsed());
    assert_eq!(rx.recv_timeout(Duration::from_secs(3)).unwrap(), SegmentReason::Operational);

    // Transfers work again.
    let src = LocalSegment::create(&b, Some(8), 1 << 20, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let q = DmaQueue::create(&b, 0, 1).unwrap();
    q.start(&src, &remote, 0, 1 << 20, 0, DmaFlags { read: false, wait: true }, None).unwrap();

    // A killed peer: the queue in flight ends in ERROR, the connection is LOST, nothing hangs.
    q.start(&src, &remote, 0, 1 << 20, 0, DmaFlags::default(), None).unwrap();
    signal(daemon_pid(&h, 4), "KILL");
    let end = q.wait(Some(Duration::from_secs(10))).unwrap();
    assert!(matches!(end, DmaState::Done | DmaState::Error), "{end:?}");
    let t = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(SegmentReason::Lost) => break,
            Ok(_) => {}
            Err(e) => panic!("no LOST event: {e}"),
        }
        assert!(t.elapsed() < Duration::from_secs(5));
    }
    assert!(remote.is_lost());
    assert_eq!(seq.start().unwrap_err(), Error::NodeNotResponding);
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::NotRetriable);
    let r = q.start(&src, &remote, 0, 4096, 0, DmaFlags { read: false, wait: true }, None);
    assert!(r.is_err(), "a transfer to a lost node fails");
    // A restarted node: new connects work.
    let a2 = Descriptor::open(&h.sci(4)).unwrap();
    let seg2 = LocalSegment::create(&a2, Some(9), 4096, CreateFlags::default()).unwrap();
    seg2.prepare(0).unwrap();
    seg2.set_available(0).unwrap();
    let t = Instant::now();
    let r2 = loop {
        match RemoteSegment::connect(&b, 4, 9, 0, Some(Duration::from_secs(2))) {
            Ok(r) => break r,
            Err(e) if t.elapsed() < Duration::from_secs(10) => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("reconnect after restart: {e}"),
        }
    };
    assert_eq!(r2.size(), 4096);
}

#[test]
fn tcp_pulls_in_both_directions_at_once_do_not_deadlock() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    const SIZE: usize = 32 << 20;
    let mk = |d: &Descriptor, id| {
        let s = LocalSegment::create(d, Some(id), SIZE, CreateFlags::default()).unwrap();
        s.prepare(0).unwrap();
        s.set_available(0).unwrap();
        s
    };
    let (sa, sb) = (mk(&a, 1), mk(&b, 2));
    sa.map(0, SIZE, None, MapFlags::default()).unwrap().write(0, &common::pattern(SIZE, 1)).unwrap();
    sb.map(0, SIZE, None, MapFlags::default()).unwrap().write(0, &common::pattern(SIZE, 2)).unwrap();
    let (la, lb) = (mk(&a, 3), mk(&b, 4));
    let to_b = RemoteSegment::connect(&a, 8, 2, 0, Some(Duration::from_secs(5))).unwrap();
    let to_a = RemoteSegment::connect(&b, 4, 1, 0, Some(Duration::from_secs(5))).unwrap();
    let (qa, qb) = (DmaQueue::create(&a, 0, 1).unwrap(), DmaQueue::create(&b, 0, 1).unwrap());
    for _ in 0..3 {
        qa.start(&la, &to_b, 0, SIZE, 0, DmaFlags { read: true, wait: false }, None).unwrap();
        qb.start(&lb, &to_a, 0, SIZE, 0, DmaFlags { read: true, wait: false }, None).unwrap();
        assert_eq!(qa.wait(Some(Duration::from_secs(20))).unwrap(), DmaState::Done);
        assert_eq!(qb.wait(Some(Duration::from_secs(20))).unwrap(), DmaState::Done);
    }
    let mut got = vec![0u8; SIZE];
    la.map(0, SIZE, None, MapFlags::default()).unwrap().read(0, &mut got).unwrap();
    assert_eq!(common::checksum(&got), common::checksum(&common::pattern(SIZE, 2)));
    lb.map(0, SIZE, None, MapFlags::default()).unwrap().read(0, &mut got).unwrap();
    assert_eq!(common::checksum(&got), common::checksum(&common::pattern(SIZE, 1)));
}

#[test]
fn probe_tells_an_unknown_node_from_a_silent_one() {
    // Node 8 is in the cluster but its daemon never starts: known, not answering.
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    assert_eq!(a.probe_node(0, 4), Ok(true));
    assert_eq!(a.probe_node(0, 8), Err(Error::NodeNotResponding));
    // Node 12 is neither in the cluster nor on this host.
    assert_eq!(a.probe_node(0, 12), Err(Error::NoSuchNode));
}

/// The engine keeps several chunks of a job in flight across hosts: a vector job whose
/// later entries overwrite part of what earlier ones wrote still lands in order, and so
/// does a pull whose entries overlap in the local segment.
#[test]
fn tcp_pipelined_chunks_land_in_order() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    const SIZE: usize = 16 << 20;
    const MIB: usize = 1 << 20;
    let mk = |d: &Descriptor, id| {
        let s = LocalSegment::create(d, Some(id), SIZE, CreateFlags::default()).unwrap();
        s.prepare(0).unwrap();
        s.set_available(0).unwrap();
        s
    };
    let (target, src) = (mk(&b, 21), mk(&a, 22));
    let data = common::pattern(SIZE, 5);
    src.map(0, SIZE, None, MapFlags::default()).unwrap().write(0, &data).unwrap();
    let remote = RemoteSegment::connect(&a, 8, 21, 0, Some(Duration::from_secs(5))).unwrap();
    let q = DmaQueue::create(&a, 0, 4).unwrap();
    let vec = [
        DmaVec { size: 9 * MIB + 3, local_offset: 0, remote_offset: 0 },
        DmaVec { size: 5 * MIB, local_offset: 11 * MIB, remote_offset: 2 * MIB + 1 },
        DmaVec { size: 100, local_offset: 7, remote_offset: 8 * MIB },
    ];
    q.start_vec(&src, &remote, &vec, DmaFlags { read: false, wait: true }, None).unwrap();
    let mut want = vec![0u8; SIZE];
    for v in &vec {
        want[v.remote_offset..v.remote_offset + v.size]
            .copy_from_slice(&data[v.local_offset..v.local_offset + v.size]);
    }
    let mut got = vec![0u8; SIZE];
    target.map(0, SIZE, None, MapFlags::default()).unwrap().read(0, &mut got).unwrap();
    assert_eq!(common::checksum(&got), common::checksum(&want), "pushed chunks out of order");
    // Pull: two overlapping entries into the same local bytes, the later wins.
    let pull = [
        DmaVec { size: 6 * MIB, local_offset: 0, remote_offset: 0 },
        DmaVec { size: 3 * MIB, local_offset: MIB, remote_offset: 10 * MIB },
    ];
    q.start_vec(&src, &remote, &pull, DmaFlags { read: true, wait: true }, None).unwrap();
    let mut local = data.clone();
    for v in &pull {
        local[v.local_offset..v.local_offset + v.size]
            .copy_from_slice(&want[v.remote_offset..v.remote_offset + v.size]);
    }
    src.map(0, SIZE, None, MapFlags::default()).unwrap().read(0, &mut got).unwrap();
    assert_eq!(common::checksum(&got), common::checksum(&local), "pulled chunks out of order");
    q.remove().unwrap();
}
