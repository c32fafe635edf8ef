//! SISCI across hosts: a cluster of network namespaces joined by a bridge, one `remorad` in
//! each, talking TCP. Needs root and iproute2; elsewhere each test says why it skips.
//! The test process reaches each node's daemon through that node's runtime directory.

mod common;

use remora_sisci::*;
use remora_testkit::NetCluster;
use std::sync::mpsc;
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
    common::conformance(&sci(&c, 1), &sci(&c, 2), true);
}

#[test]
fn link_down_up_kill_and_restart() {
    let Some(mut c) = cluster(2) else { return };
    let a = Descriptor::open(&sci(&c, 1)).unwrap();
    let b = Descriptor::open(&sci(&c, 2)).unwrap();
    let seg = LocalSegment::create(&a, Some(3), 4 << 20, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    let (tx, rx) = mpsc::channel();
    let remote = RemoteSegment::connect_with(
        &b,
        4,
        3,
        0,
        Some(Duration::from_secs(10)),
        ConnectFlags::default(),
        Some(Box::new(move |_r, ev| {
            tx.send(ev.reason).unwrap();
            CallbackAction::Continue
        })),
    )
    .unwrap();
    let src = LocalSegment::create(&b, Some(4), 4 << 20, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let data = common::pattern(4 << 20, 9);
    src.map(0, 4 << 20, None, MapFlags::default()).unwrap().write(0, &data).unwrap();
    let q = DmaQueue::create(&b, 0, 1).unwrap();
    q.start(&src, &remote, 0, 4 << 20, 0, DmaFlags { read: false, wait: true }, None).unwrap();
    let tm = seg.map(0, 4 << 20, None, MapFlags::default()).unwrap();
    let mut got = vec![0u8; 4 << 20];
    tm.read(0, &mut got).unwrap();
    assert_eq!(common::checksum(&got), common::checksum(&data));

    // The cable is pulled: NOT_OPERATIONAL within three heartbeats (200 ms each).
    c.link_down(1);
    let t = Instant::now();
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), SegmentReason::NotOperational);
    let took = t.elapsed();
    c.link_up(1);
    assert!(took < Duration::from_millis(1200), "not operational after {took:?}");
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), SegmentReason::Operational);
    tm.write(0, &vec![0u8; 4 << 20]).unwrap();
    q.start(&src, &remote, 0, 4 << 20, 0, DmaFlags { read: false, wait: true }, None).unwrap();
    tm.read(0, &mut got).unwrap();
    assert_eq!(common::checksum(&got), common::checksum(&data), "transfers work again");

    // The peer daemon is killed during a transfer: ERROR or DONE, then LOST; nothing hangs.
    q.start(&src, &remote, 0, 4 << 20, 0, DmaFlags::default(), None).unwrap();
    c.kill_daemon(1);
    let end = q.wait(Some(Duration::from_secs(20))).unwrap();
    assert!(matches!(end, DmaState::Done | DmaState::Error), "{end:?}");
    let t = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(SegmentReason::Lost) => break,
            Ok(_) => {}
            Err(e) => panic!("no LOST event: {e}"),
        }
        assert!(t.elapsed() < Duration::from_secs(10));
    }
    assert!(q.start(&src, &remote, 0, 4096, 0, DmaFlags { read: false, wait: true }, None).is_err());

    // Restarted: new connects work (the old ones stay lost).
    c.start_daemon(1);
    let a2 = Descriptor::open(&sci(&c, 1)).unwrap();
    let seg2 = LocalSegment::create(&a2, Some(5), 4096, CreateFlags::default()).unwrap();
    seg2.prepare(0).unwrap();
    seg2.set_available(0).unwrap();
    let t = Instant::now();
    let r2 = loop {
        match RemoteSegment::connect(&b, 4, 5, 0, Some(Duration::from_secs(2))) {
            Ok(r) => break r,
            Err(e) => {
                assert!(t.elapsed() < Duration::from_secs(15), "reconnect after restart: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    assert_eq!(r2.size(), 4096);
    assert!(remote.is_lost());
}
