//! One conformance suite, run over every transport: `local` (nodes of one host sharing
//! memory) and `tcp` (forced between nodes of this host over loopback, as between hosts).
//! Every transfer is checked byte for byte with a checksum.

mod common;

use remora_sisci::*;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| (h ^ x as u64).wrapping_mul(0x100_0000_01b3))
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn conformance(h: &common::Harness, over_tcp: bool) {
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    assert_eq!(a.probe_node(0, 8), Ok(true));
    assert_eq!(b.probe_node(0, 4), Ok(true));
    assert_eq!(b.probe_node(0, 12), Err(Error::NoSuchNode));

    // Connect, and the owner hears it.
    const SIZE: usize = 8 << 20;
    let target = LocalSegment::create(&a, Some(1), SIZE, CreateFlags::default()).unwrap();
    target.prepare(0).unwrap();
    target.set_available(0).unwrap();
    let remote = RemoteSegment::connect(&b, 4, 1, 0, Some(Duration::from_secs(5))).unwrap();
    assert_eq!((remote.node(), remote.id(), remote.size()), (4, 1, SIZE));
    assert_eq!(target.wait_event(Some(Duration::from_secs(5))).unwrap().reason, SegmentReason::Connect);
    assert_eq!(remote.is_on_this_host(), !over_tcp);
    if over_tcp {
        assert_eq!(remote.map(0, 4096, None, MapFlags::default()).unwrap_err(), Error::NotSupported);
    }

    // DMA push, vector, pull and from user memory, checksummed end to end.
    let src = LocalSegment::create(&b, Some(2), SIZE, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let data = pattern(SIZE, 42);
    let sm = src.map(0, SIZE, None, MapFlags::default()).unwrap();
    sm.write(0, &data).unwrap();
    let q = DmaQueue::create(&b, 0, 8).unwrap();
    q.start(&src, &remote, 0, SIZE, 0, DmaFlags { read: false, wait: true }, None).unwrap();
    let tm = target.map(0, SIZE, None, MapFlags::default()).unwrap();
    let mut got = vec![0u8; SIZE];
    tm.read(0, &mut got).unwrap();
    assert_eq!(checksum(&got), checksum(&data), "pushed data differs");
    let vec = [
        DmaVec { size: 1000, local_offset: 5, remote_offset: SIZE - 1000 },
        DmaVec { size: 4 << 20, local_offset: 1 << 20, remote_offset: 7 },
    ];
    sm.write(0, &vec![0u8; SIZE]).unwrap();
    q.start_vec(&src, &remote, &vec, DmaFlags { read: true, wait: true }, None).unwrap();
    let mut back = vec![0u8; 4 << 20];
    sm.read(1 << 20, &mut back).unwrap();
    assert_eq!(checksum(&back), checksum(&data[7..7 + (4 << 20)]), "pulled data differs");
    sm.read(5, &mut back[..1000]).unwrap();
    assert_eq!(&back[..1000], &data[SIZE - 1000..]);
    let msg: &'static mut [u8] = Box::leak(b"user memory crosses the link".to_vec().into_boxed_slice());
    q.start_mem(UserRegion::from_static(msg), &remote, 3000, DmaFlags { read: false, wait: true }, None)
        .unwrap();
    tm.read(3000, &mut got[..28]).unwrap();
    assert_eq!(&got[..28], b"user memory crosses the link");
    // Out of range is refused before anything moves.
    assert_eq!(
        q.start(&src, &remote, 0, 16, SIZE - 8, DmaFlags::default(), None).unwrap_err(),
        Error::OutOfRange
    );

    // Interrupts and data interrupts across.
    let intr = Interrupt::create(&a, 0, Some(100), false, None).unwrap();
    let ri = RemoteInterrupt::connect(&b, 4, 0, 100, Some(Duration::from_secs(5))).unwrap();
    ri.trigger().unwrap();
    intr.wait(Some(Duration::from_secs(5))).unwrap();
    let (tx, rx) = mpsc::channel();
    let di = DataInterrupt::create(
        &a,
        0,
        Some(101),
        Some(Box::new(move |_d, data| {
            tx.send(data.to_vec()).unwrap();
            CallbackAction::Continue
        })),
    )
    .unwrap();
    let rdi = RemoteDataInterrupt::connect(&b, 4, 0, 101, Some(Duration::from_secs(5))).unwrap();
    for i in 0..5u8 {
        rdi.trigger(&[i; 100]).unwrap();
    }
    for i in 0..5u8 {
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), vec![i; 100]);
    }
    assert_eq!(rdi.trigger(&[0; MAX_DATA_INTERRUPT + 1]).unwrap_err(), Error::OutOfRange);
    di.remove().unwrap();
    assert_eq!(rdi.trigger(b"gone").unwrap_err(), Error::NoSuchIntno);

    // Disconnect is seen by the owner.
    q.remove().unwrap();
    remote.disconnect().unwrap();
    assert_eq!(target.wait_event(Some(Duration::from_secs(5))).unwrap().reason, SegmentReason::Disconnect);
}

#[test]
fn local_transport() {
    let h = common::Harness::with_cluster(&[4, 8], false);
    conformance(&h, false);
}

#[test]
fn tcp_transport() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    conformance(&h, true);
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
    let map = {
        // Sequences need a map; over TCP there is none, so check through the lost state.
        remote.map(0, 4096, None, MapFlags::default()).err()
    };
    assert_eq!(map, Some(Error::NotSupported));

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
