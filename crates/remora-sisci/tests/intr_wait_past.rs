//! `Interrupt::wait_past`: a trigger is not used up. Every thread waiting past the count it
//! saw wakes at the same trigger (three at once here), a wait past the count that trigger
//! made sleeps on to its timeout, and one past an older count returns at once. VIPL's
//! completion queues wait so, each waiter looking for its own completion after a ring.

mod common;
use common::Sci as _;
use remora_sisci::*;
use std::time::{Duration, Instant};

const LONG: Option<Duration> = Some(Duration::from_secs(10));

#[test]
fn a_trigger_wakes_every_thread_waiting_past_the_count_it_saw() {
    let h = common::Harness::new();
    let d = Descriptor::open(&h.sci(4)).unwrap();
    let intr = Interrupt::create(&d, 0, None, true, None).unwrap();
    let bell = RemoteInterrupt::connect(&d, 4, 0, intr.number(), LONG).unwrap();
    let seen = intr.triggers().unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let w = intr.clone();
            std::thread::spawn(move || w.wait_past(seen, LONG, Duration::ZERO))
        })
        .collect();
    // Asleep by now, or about to look at a count the trigger moved.
    std::thread::sleep(Duration::from_millis(50));
    let rung = Instant::now();
    bell.trigger().unwrap();
    for w in waiters {
        assert_eq!(w.join().unwrap(), Ok(seen.wrapping_add(1)));
    }
    assert!(
        rung.elapsed() < Duration::from_secs(5),
        "the waiters woke {:?} after the trigger",
        rung.elapsed()
    );
    let now = intr.triggers().unwrap();
    assert_eq!(now, seen.wrapping_add(1));
    // Nothing after that count: the wait ends by its timeout. Past the older one: at once.
    assert_eq!(intr.wait_past(now, Some(Duration::from_millis(50)), Duration::ZERO), Err(Error::Timeout));
    assert_eq!(intr.wait_past(seen, LONG, Duration::ZERO), Ok(now));
}
