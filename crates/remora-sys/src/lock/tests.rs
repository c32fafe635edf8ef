//! Tests of the lock: exclusion, the bias and its revocation, re-entry, panics while held.

use super::{Lock, BIAS_AFTER};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[test]
fn threads_take_turns_and_lose_no_update() {
    let l = Lock::new(0u64);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for i in 0..20_000u64 {
                    let mut g = l.lock();
                    let v = *g;
                    if i % 5000 == 0 {
                        // Held across a sleep: the others must sleep and be woken.
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    *g = v + 1;
                }
            });
        }
    });
    assert_eq!(*l.lock(), 80_000);
}

#[test]
fn a_child_of_fork_takes_a_lock_biased_to_a_parent_thread() {
    // Biased to a thread of this process; a child of `fork` (here: between the fork
    // and the exec of `true`) takes the bias away without hanging, although the
    // child's address space was never registered for membarrier.
    static L: Lock<u64> = Lock::new(0);
    std::thread::spawn(|| {
        for _ in 0..=BIAS_AFTER {
            *L.lock() += 1;
        }
    })
    .join()
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::os::unix::process::CommandExt as _;
        let mut c = std::process::Command::new("true");
        // SAFETY: the closure runs in the child between fork and exec; it takes the
        // lock (plain memory, futex and membarrier calls) and returns.
        unsafe {
            c.pre_exec(|| {
                *L.lock() += 1;
                Ok(())
            });
        }
        let _ = tx.send(c.status().map(|s| s.success()).unwrap_or(false));
    });
    let done = rx.recv_timeout(Duration::from_secs(20));
    assert_eq!(done, Ok(true), "the child hung or failed taking the lock");
    assert_eq!(*L.lock(), u64::from(BIAS_AFTER) + 1, "the child's update stays in the child");
}

#[test]
fn a_biased_owner_and_other_threads_lose_no_update() {
    // One thread takes the lock in long runs (it becomes the owner, again and again);
    // the others take it now and then, each time taking the bias away.
    let l = Lock::new(0u64);
    let stop = AtomicBool::new(false);
    let owner_runs = 200_000u64;
    let others = std::thread::scope(|s| {
        let hands: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let mut g = l.lock();
                        let v = *g;
                        std::hint::spin_loop();
                        *g = v + 1;
                        drop(g);
                        n += 1;
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    n
                })
            })
            .collect();
        for _ in 0..owner_runs {
            let mut g = l.lock();
            let v = *g;
            *g = v + 1;
        }
        stop.store(true, Ordering::Relaxed);
        hands.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(*l.lock(), owner_runs + others);
}

#[test]
fn an_owner_inside_one_lock_takes_another_while_a_thread_takes_that_ones_bias_away() {
    // Both locks biased to this thread; inside the first it takes the second, whose
    // bias another thread keeps taking away: no deadlock, no lost update.
    let (l1, l2) = (Lock::new(0u64), Lock::new(0u64));
    for _ in 0..=BIAS_AFTER {
        drop(l1.lock());
        drop(l2.lock());
    }
    let rounds = 50_000u64;
    let others = std::thread::scope(|s| {
        let other = s.spawn(|| {
            for _ in 0..100 {
                *l2.lock() += 1;
                std::thread::sleep(Duration::from_micros(50));
            }
            100u64
        });
        for i in 0..rounds {
            let mut g1 = l1.lock();
            let mut g2 = l2.lock();
            *g1 += 1;
            *g2 += 1;
            drop(g2);
            drop(g1);
            if i % 1000 == 0 {
                // Long runs again and again: both locks come back to this thread.
                for _ in 0..=BIAS_AFTER {
                    drop(l2.lock());
                }
            }
        }
        other.join().unwrap()
    });
    assert_eq!(*l1.lock(), rounds);
    assert_eq!(*l2.lock(), rounds + others);
}

#[test]
fn a_lock_is_biased_after_takings_in_a_row_and_taken_away_by_another_thread() {
    let l = Lock::new(0u32);
    for _ in 0..BIAS_AFTER + 1 {
        *l.lock() += 1;
    }
    let biased = l.owner.load(Ordering::Relaxed) != 0;
    if super::can_bias() {
        assert!(biased, "not biased after {BIAS_AFTER} takings in a row");
    }
    std::thread::scope(|s| {
        s.spawn(|| *l.lock() += 1);
    });
    assert_eq!(l.owner.load(Ordering::Relaxed), 0, "another thread's taking left the bias");
    assert_eq!(*l.lock(), BIAS_AFTER + 2);
}

#[test]
fn a_biased_owner_taking_the_lock_again_panics_instead_of_a_second_guard() {
    if !super::can_bias() {
        eprintln!("no membarrier here: no lock is biased, nothing to test");
        return;
    }
    let l = Lock::new(7u32);
    // Held by the taking that gave the lock its bias (the BIAS_AFTER-th in a row), and
    // by one through the owner's flag after it.
    for (case, before) in [(1, BIAS_AFTER - 1), (2, BIAS_AFTER + 1)] {
        for _ in 0..before {
            drop(l.lock());
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut g = l.lock();
            assert!(g.flag.is_some(), "case {case}: not taken as the biased owner");
            let g2 = l.lock(); // before the fix: a second guard to the same value
            *g += 1;
            drop(g2);
        }));
        let msg = r.expect_err("the re-entry gave a second guard");
        let msg = msg.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(msg.contains("taken again"), "case {case}: another panic: {msg:?}");
        // The unwinding let the first guard go: another thread and this one take it
        // again (the other's taking restarts this thread's streak).
        std::thread::scope(|s| {
            s.spawn(|| *l.lock() += 1);
        });
        assert_eq!(*l.lock(), 7 + case);
    }
}

#[test]
fn a_panic_under_the_lock_lets_it_go() {
    // Once taken through the lock word, once as the biased owner.
    let l = Lock::new(1u32);
    for _ in 0..2 {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = l.lock();
            panic!("inside");
        }));
        assert!(r.is_err());
        *l.lock() += 1;
        for _ in 0..BIAS_AFTER {
            drop(l.lock());
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| *l.lock() += 1);
    });
    assert_eq!(*l.lock(), 4);
}
