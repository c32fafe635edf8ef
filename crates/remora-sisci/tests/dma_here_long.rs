//! Long DMA jobs between segments of one host, which the posting thread copies itself in
//! 4 MiB pieces when it waits for them (`dma/here.rs`): an abort from another thread stops
//! one between two pieces (ABORTED, the post answers `Cancelled`), and a connection the
//! exporter forces unavailable meanwhile ends it in ERROR, `NotConnected`, as the engine
//! ends its own.

mod common;
use common::Sci as _;

use remora_sisci::*;
use std::time::{Duration, Instant};

/// Long enough (32 pieces) that another thread's abort, or the loss, comes before its end.
const BIG: usize = 128 << 20;
const WAIT: DmaFlags = DmaFlags { read: false, wait: true };

/// Spin until `q` is POSTED (or 10 s have passed).
fn until_posted(q: &DmaQueue) {
    let t = Instant::now();
    while q.state() != DmaState::Posted && t.elapsed() < Duration::from_secs(10) {
        std::hint::spin_loop();
    }
}

#[test]
fn an_abort_from_another_thread_stops_a_long_job_made_here() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let target = LocalSegment::create(&a, Some(21), BIG, CreateFlags::default()).unwrap();
    target.prepare(0).unwrap();
    target.set_available(0).unwrap();
    let src = LocalSegment::create(&b, Some(22), BIG, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let remote = RemoteSegment::connect(&b, 4, 21, 0, Some(Duration::from_secs(10))).unwrap();
    assert!(remote.is_on_this_host());
    let q = DmaQueue::create(&b, 0, 16).unwrap();
    let mut cancelled = 0;
    for round in 0..5 {
        let (q2, src2, remote2) = (q.clone(), src.clone(), remote.clone());
        let poster = std::thread::spawn(move || q2.start(&src2, &remote2, 0, BIG, 0, WAIT, None));
        until_posted(&q);
        // While it runs, another post and a reset are refused; then the abort.
        let second = q.start(&src, &remote, 0, 8, 0, WAIT, None);
        let reset = q.reset();
        q.abort().unwrap();
        let r = poster.join().unwrap();
        match r {
            Err(Error::Cancelled) => {
                cancelled += 1;
                assert_eq!(q.state(), DmaState::Aborted, "round {round}");
                // The job was still running when they came.
                assert_eq!(second, Err(Error::IllegalOperation), "round {round}");
                assert_eq!(reset, Err(Error::IllegalOperation), "round {round}");
            }
            // Ended before the abort reached it (a loaded machine).
            Ok(()) => assert_eq!(q.state(), DmaState::Done, "round {round}"),
            other => panic!("round {round}: {other:?}"),
        }
    }
    assert!(cancelled > 0, "no abort stopped a {} MiB job made here", BIG >> 20);
    // The queue goes on: a job after the aborted ones lands whole.
    q.start(&src, &remote, 0, BIG, 0, WAIT, None).unwrap();
    assert_eq!(q.state(), DmaState::Done);
}

#[test]
fn a_connection_forced_unavailable_mid_copy_ends_the_job_not_connected() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let src = LocalSegment::create(&b, Some(22), BIG, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let q = DmaQueue::create(&b, 0, 16).unwrap();
    let mut lost = 0;
    for round in 0..5u32 {
        let target = LocalSegment::create(&a, Some(30 + round), BIG, CreateFlags::default()).unwrap();
        target.prepare(0).unwrap();
        target.set_available(0).unwrap();
        let remote = RemoteSegment::connect(&b, 4, 30 + round, 0, Some(Duration::from_secs(10))).unwrap();
        assert!(remote.is_on_this_host());
        let (q2, src2, remote2) = (q.clone(), src.clone(), remote.clone());
        let poster = std::thread::spawn(move || q2.start(&src2, &remote2, 0, BIG, 0, WAIT, None));
        until_posted(&q);
        target.set_unavailable(0, true, false).unwrap();
        let r = poster.join().unwrap();
        match r {
            Err(Error::NotConnected) => {
                lost += 1;
                assert_eq!(q.state(), DmaState::Error, "round {round}");
                assert_eq!(q.last_error(), Some(Error::NotConnected), "round {round}");
            }
            // Ended before this process heard of the loss (a loaded machine).
            Ok(()) => assert_eq!(q.state(), DmaState::Done, "round {round}"),
            other => panic!("round {round}: {other:?}"),
        }
        // A later job to the lost connection is refused before it starts.
        assert_eq!(q.start(&src, &remote, 0, 8, 0, WAIT, None), Err(Error::NotConnected));
    }
    assert!(lost > 0, "a {} MiB job made here went on after the exporter's forced unavailability", BIG >> 20);
}
