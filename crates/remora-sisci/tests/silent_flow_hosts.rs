//! The calls that go over the process's own flow to another host answer at once during a
//! cable cut instead of waiting for the flow's patience (10 s): a trigger in a tight loop
//! (whose frames fill the flow's socket before the route is known silent). Needs a
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
    let stop = AtomicBool::new(false);
    let (longest, failed) = std::thread::scope(|s| {
        let looping = s.spawn(|| {
            let (mut longest, mut failed) = (Duration::ZERO, 0u64);
            while !stop.load(Ordering::SeqCst) {
                let t = Instant::now();
                let got = r.trigger();
                longest = longest.max(t.elapsed());
                if let Err(e) = got {
                    assert_eq!(e, Error::NodeNotResponding);
                    failed += 1;
                }
            }
            (longest, failed)
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
        c.link_up(1);
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::SeqCst);
        looping.join().unwrap()
    });
    assert!(failed > 0, "no trigger failed during the cut");
    assert!(longest < Duration::from_secs(2), "a trigger blocked {longest:?} during the cut");
    let t = Instant::now();
    while r.trigger().is_err() {
        assert!(t.elapsed() < Duration::from_secs(20), "triggers never worked again");
        std::thread::sleep(Duration::from_millis(50));
    }
}
