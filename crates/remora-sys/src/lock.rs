//! A lock for the data paths of the personalities, whose critical sections are a few
//! hundred nanoseconds and almost never contended.
//!
//! Taking it is one compare-exchange; letting it go is a plain release store (the standard
//! library's mutex swaps the word on unlock to learn whether someone sleeps: a second
//! locked instruction, which also waits for every store made under the lock to leave the
//! core). A thread that finds it taken spins a moment, then sleeps on the word (a futex)
//! and is woken by the holder, which sees the sleeper's count. The count and the release
//! are not ordered against each other (that would cost the barrier this lock exists to
//! avoid), so a release can miss a sleeper that arrived in the same instant: sleeps are
//! therefore short ([`NAP`]) and the sleeper tries again after each one, so such a miss
//! costs at most that long, never a hang.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The longest a waiter sleeps before it looks at the lock again.
pub const NAP: Duration = Duration::from_micros(200);
/// Looks at a taken lock before the waiter sleeps.
const SPINS: u32 = 200;

/// A value behind a lock; see the module doc.
#[derive(Default)]
pub struct Lock<T> {
    held: AtomicU32,
    sleepers: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `Guard`, and the compare-exchange in `lock`
// lets one guard exist at a time, so sharing the lock shares the value as a mutex does.
unsafe impl<T: Send> Send for Lock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T: std::fmt::Debug> std::fmt::Debug for Lock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock").field("held", &(self.held.load(Ordering::Relaxed) != 0)).finish()
    }
}

/// The lock, held: the value is reachable through it until it is dropped.
pub struct Guard<'a, T> {
    lock: &'a Lock<T>,
}

impl<T> Lock<T> {
    /// `value`, behind a lock.
    pub const fn new(value: T) -> Lock<T> {
        Lock { held: AtomicU32::new(0), sleepers: AtomicU32::new(0), value: UnsafeCell::new(value) }
    }

    /// Take the lock, waiting while another thread holds it.
    #[inline]
    pub fn lock(&self) -> Guard<'_, T> {
        if self.held.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.contended();
        }
        Guard { lock: self }
    }

    fn try_take(&self) -> bool {
        self.held.load(Ordering::Relaxed) == 0
            && self.held.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    #[cold]
    fn contended(&self) {
        for _ in 0..SPINS {
            if self.try_take() {
                return;
            }
            std::hint::spin_loop();
        }
        loop {
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            let got = self.try_take();
            if !got {
                crate::sync::futex_wait(&self.held, 1, Some(NAP));
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            if got || self.try_take() {
                return;
            }
        }
    }

    /// The value, through an exclusive borrow of the lock (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<T> Drop for Guard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.held.store(0, Ordering::Release);
        if self.lock.sleepers.load(Ordering::Relaxed) != 0 {
            crate::sync::futex_wake_all(&self.lock.held);
        }
    }
}

impl<T> std::ops::Deref for Guard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other reference to the value exists
        // beside the ones borrowed from this guard.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for Guard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; the borrow of the guard is exclusive.
        unsafe { &mut *self.lock.value.get() }
    }
}

#[cfg(test)]
mod tests {
    use super::Lock;
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
    fn a_panic_under_the_lock_lets_it_go() {
        let l = Lock::new(1u32);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = l.lock();
            panic!("inside");
        }));
        assert!(r.is_err());
        *l.lock() += 1;
        assert_eq!(*l.lock(), 2);
    }
}
