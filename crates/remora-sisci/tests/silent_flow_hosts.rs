//! The calls that go over the process's own flow to another host answer at once during a
//! cable cut instead of waiting for the flow's patience (10 s): a trigger in a tight loop
//! (whose frames fill the flow's socket before the route is known silent; and after the
//! cut, while the flow's connection recovers, it goes through the daemons), and a small DMA
//! started once the route is known silent (the engine's path ends it in ERROR) or already
//! on the flow when the cable is cut (the flow is stopped when the route falls silent). Needs a
//! namespace cluster (root); skips without one. No map of another host's memory in this
//! binary: a settle point of such a map (which triggers and DMA wait for, up to 5 s) would
//! hold these calls up.

mod common;

use remora_sisci::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[test]
fn triggers_in_a_tight_loop_never_block_through_a_cable_cut() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let intr = Interrupt::create(&a, 0, Some(77), false, None).unwrap();
    let r = RemoteInterrupt::connect(&b, c.node(1), 0, 77, Some(Duration::from_secs(10))).unwrap();
    r.trigger().unwrap();
    intr.wait(Some(Duration::from_secs(5))).unwrap();
    let (stop, back) = (AtomicBool::new(false), AtomicBool::new(false));
    let (during, after, failed) = std::thread::scope(|s| {
        let looping = s.spawn(|| {
            // The longest trigger begun during the cut, and after the cable came back.
            let (mut during, mut after, mut failed) = (Duration::ZERO, Duration::ZERO, 0u64);
            while !stop.load(Ordering::SeqCst) {
                let (t, was_back) = (Instant::now(), back.load(Ordering::SeqCst));
                let got = r.trigger();
                let took = t.elapsed();
                if was_back {
                    after = after.max(took);
                } else {
                    during = during.max(took);
                }
                if let Err(e) = got {
                    assert_eq!(e, Error::NodeNotResponding);
                    failed += 1;
                }
            }
            (during, after, failed)
        });
        // The owner's waits go on meanwhile (as the program's would).
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                let _ = intr.wait(Some(Duration::from_millis(100)));
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        c.link_down(1);
        // Longer than the flow's 10 s patience.
        std::thread::sleep(Duration::from_secs(12));
        back.store(true, Ordering::SeqCst);
        c.link_up(1);
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::SeqCst);
        looping.join().unwrap()
    });
    assert!(failed > 0, "no trigger failed during the cut");
    assert!(during < Duration::from_secs(2), "a trigger blocked {during:?} during the cut");
    // Once the cable is back the flow's connection may sit in TCP's retry back-off for
    // seconds: a trigger that finds it full goes through the daemons (it waited the flow's
    // 10 s patience, in about one run of three).
    assert!(after < Duration::from_secs(6), "a trigger blocked {after:?} after the cut");
    let t = Instant::now();
    while r.trigger().is_err() {
        assert!(t.elapsed() < Duration::from_secs(20), "triggers never worked again");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Segment `id` of host 1 and segment `id + 1` of host 2 (its first 4 KiB `fill`), a
/// one-entry DMA queue of host 2, and a first 4 KiB DMA through the process's own flow.
struct Dma {
    _seg: LocalSegment,
    home: Map,
    remote: RemoteSegment,
    src: LocalSegment,
    q: DmaQueue,
}

impl Dma {
    fn new(a: &Descriptor, b: &Descriptor, node: u32, id: u32, fill: u8) -> Dma {
        let (_seg, home) = common::available(a, id, 8192);
        let remote = RemoteSegment::connect(b, node, id, 0, Some(Duration::from_secs(10))).unwrap();
        let src = LocalSegment::create(b, Some(id + 1), 8192, CreateFlags::default()).unwrap();
        src.prepare(0).unwrap();
        src.map(0, 8192, None, MapFlags::default()).unwrap().write(0, &[fill; 4096]).unwrap();
        let q = DmaQueue::create(b, 0, 1).unwrap();
        q.start(&src, &remote, 0, 4096, 0, DmaFlags::default(), None).unwrap();
        assert_eq!(q.wait(Some(Duration::from_secs(10))).unwrap(), DmaState::Done);
        Dma { _seg, home, remote, src, q }
    }

    /// Start a 4 KiB DMA and wait for its end.
    fn transfer(&self) -> Result<DmaState> {
        self.q
            .start(&self.src, &self.remote, 0, 4096, 0, DmaFlags::default(), None)
            .and_then(|_| self.q.wait(Some(Duration::from_secs(15))))
    }

    /// Once the link is back, transfers work again: the bytes `fill` reach the home.
    fn works_again(&self, fill: u8) {
        common::expect_event(&self.remote, SegmentReason::Operational, Duration::from_secs(20));
        self.src.map(0, 8192, None, MapFlags::default()).unwrap().write(0, &[fill; 4096]).unwrap();
        let t = Instant::now();
        loop {
            let r = self.transfer();
            if let Ok(DmaState::Done) = r {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(15), "transfers never worked again: {r:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut got = [0u8; 4096];
        self.home.read(0, &mut got).unwrap();
        assert!(got.iter().all(|&x| x == fill), "the bytes of the transfer after the cut");
    }
}

#[test]
fn a_small_dma_to_a_silent_home_ends_in_error_at_once() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    // Through the process's own flow while the route is up.
    let d = Dma::new(&a, &b, c.node(1), 43, 5);
    c.link_down(1);
    common::expect_event(&d.remote, SegmentReason::NotOperational, Duration::from_secs(20));
    let t = Instant::now();
    let end = d.transfer();
    let took = t.elapsed();
    c.link_up(1);
    assert!(!matches!(end, Ok(DmaState::Done)), "a DMA to a silent home was DONE: {end:?}");
    assert!(took < Duration::from_secs(2), "a 4 KiB DMA to a silent home ended after {took:?}");
    d.works_again(6);
}

#[test]
fn a_small_dma_on_the_flow_when_the_cable_is_cut_ends_in_error_soon() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let d = Dma::new(&a, &b, c.node(1), 45, 7);
    // Cut before the route is known silent: the transfer is on the flow, waiting for the
    // home's answer, when the link reports NOT_OPERATIONAL (within a second).
    c.link_down(1);
    let t = Instant::now();
    let end = d.transfer();
    let took = t.elapsed();
    c.link_up(1);
    assert!(!matches!(end, Ok(DmaState::Done)), "a DMA to a home behind a cut cable was DONE: {end:?}");
    assert!(took < Duration::from_secs(3), "a 4 KiB DMA on the flow at the cut ended after {took:?}");
    d.works_again(8);
}
