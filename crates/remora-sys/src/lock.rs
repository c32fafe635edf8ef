//! A lock for the data paths of the personalities, whose critical sections are a few
//! hundred nanoseconds, almost never contended, and most often taken by one thread again
//! and again (the thread that posts and polls on a VI).
//!
//! **Biased to its thread.** A thread that took the lock [`BIAS_AFTER`] times in a row
//! becomes its owner, and from then on takes it without a locked instruction: it writes
//! the lock's address into a flag of its own (a plain store), checks it still owns the
//! lock, and lets go with another plain store. (A thread inside one lock as its owner takes
//! any other through the lock word: the flag names one lock at a time.) (A locked instruction costs some twenty cycles, and
//! also waits for every store the core made before it to leave the core: after a send has
//! stored into another core's line, that is a whole trip between the cores.) Another
//! thread that wants the lock first takes it away: under the lock word below it clears the
//! owner, asks the kernel for a memory barrier on every running thread of the process
//! (`membarrier(2)`, private expedited), and waits until the owner's flag no longer names
//! this lock. After that barrier the owner either was seen busy, or sees it no longer owns
//! the lock (the asymmetric form of Dekker's exclusion, as user-space RCU and the JVMs'
//! biased locks do it). Taking the bias away costs a few microseconds, so it is given
//! again only after [`BIAS_AFTER`] takings in a row by one thread. Without `membarrier`
//! (an old kernel, a filter) no lock is ever biased.
//!
//! **Otherwise**, taking it is one compare-exchange; letting it go is a plain release store
//! (the standard library's mutex swaps the word on unlock to learn whether someone sleeps:
//! a second locked instruction). A thread that finds it taken spins a moment, then sleeps
//! on the word (a futex) and is woken by the holder, which sees the sleeper's count. The
//! count and the release are not ordered against each other (that would cost the barrier
//! this lock exists to avoid), so a release can miss a sleeper that arrived in the same
//! instant: sleeps are therefore short ([`NAP`]) and the sleeper tries again after each
//! one, so such a miss costs at most that long, never a hang. A thread waiting for an
//! owner to leave spins a moment too, then naps: the owner wakes no one.
//!
//! A guard stays on the thread that took it (it is not `Send`). A thread that takes a lock
//! it already holds as its owner panics (a second guard would alias the value); one that
//! holds it through the lock word waits for ever, as with a mutex.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use rustix::thread::{membarrier, MembarrierCommand};
use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::sync::atomic::{compiler_fence, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The longest a waiter sleeps before it looks at the lock again.
pub const NAP: Duration = Duration::from_micros(200);
/// Takings in a row by one thread after which the lock is biased to it.
pub const BIAS_AFTER: u32 = 256;
/// Looks at a taken lock before the waiter sleeps.
const SPINS: u32 = 200;
/// Threads that can own locks at once (a thread beyond them takes locks unbiased).
const FLAGS: usize = 256;

/// A thread's flag: the address of the lock it is inside as that lock's owner, 0 when none
/// (a thread inside one lock as its owner takes any other through the lock word, so one
/// address is enough, and a taker waits only for an owner inside the very lock it wants).
/// On a line pair of its own, as only its thread writes it.
#[repr(align(128))]
struct Flag(AtomicUsize);

#[allow(clippy::declare_interior_mutable_const)] // the initializer of the array below
const LOWERED: Flag = Flag(AtomicUsize::new(0));
/// Every thread's flag, by the number it holds while it lives (its number + 1 names it
/// as a lock's owner; 0 is none).
static FLAG: [Flag; FLAGS] = [LOWERED; FLAGS];
/// Numbers given back by threads that ended.
static FREE: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// Numbers never given yet.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// No number yet (0), or none any more ([`GONE`]); else a thread's number + 1.
const GONE: usize = usize::MAX;

thread_local! {
    /// This thread's number + 1 (a plain word: one load on every taking).
    static ME: Cell<usize> = const { Cell::new(0) };
    /// Gives the number back when the thread ends.
    static GIVE_BACK: Number = const { Number };
}

/// Gives this thread's number back when it ends. A number passes from a thread that ended
/// to a new one through `FREE`'s mutex, with the locks biased to it: the old thread is in
/// none of them (a lock is let go before its thread ends), so the new one may take them as
/// owner.
struct Number;

impl Drop for Number {
    fn drop(&mut self) {
        // Locks taken later in this thread's end (other thread-locals' destructors) go
        // unbiased: the number may be another thread's by then.
        let n = ME.try_with(|me| me.replace(GONE)).unwrap_or(GONE);
        if n != 0 && n != GONE {
            FREE.lock().unwrap_or_else(|p| p.into_inner()).push(n - 1);
        }
    }
}

/// This thread's number + 1, or `None` (no number left, or the thread is ending).
#[inline]
fn me() -> Option<usize> {
    match ME.try_with(Cell::get) {
        Ok(0) => claim(),
        Ok(GONE) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// Give this thread a number (its first taking of any lock).
#[cold]
fn claim() -> Option<usize> {
    // The destructor that gives it back must be registered first: no number without it.
    GIVE_BACK.try_with(|_| ()).ok()?;
    let free = FREE.lock().unwrap_or_else(|p| p.into_inner()).pop();
    let n = free.or_else(|| {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        (n < FLAGS).then_some(n)
    });
    let word = n.map_or(GONE, |n| n + 1);
    ME.try_with(|me| me.set(word)).ok()?;
    n.map(|n| n + 1)
}

/// Whether this process may bias locks: `membarrier`'s private expedited barrier, which a
/// process must register for once, is there.
fn can_bias() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok())
}

/// A memory barrier on every running thread of the process (registered in `can_bias`
/// before any lock was biased).
fn barrier_everywhere() {
    loop {
        if membarrier(MembarrierCommand::PrivateExpedited).is_ok() {
            return;
        }
        // A child of `fork` inherits `can_bias`'s answer but not the registration (it is
        // the parent's address space's): register this one and try again, then fall back
        // to the slower global barrier.
        if (membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok()
            && membarrier(MembarrierCommand::PrivateExpedited).is_ok())
            || membarrier(MembarrierCommand::Global).is_ok()
        {
            return;
        }
        // None can fail once registered; should all, an owner's flag may not be seen yet:
        // never go on without the barrier.
        std::thread::sleep(NAP);
    }
}

/// A value behind a lock; see the module doc.
///
/// Forgetting a guard (`mem::forget`) leaks the lock, as with a mutex, and more: an
/// owner's guard forgotten leaves its thread's flag naming the lock's address for as long
/// as the thread lives: no lock is biased to that thread again, and it panics (a
/// re-entry) taking a new lock placed at the same address.
pub struct Lock<T> {
    held: AtomicU32,
    sleepers: AtomicU32,
    /// The number + 1 of the thread the lock is biased to, 0 for none. Set only by that
    /// thread and cleared only by another, both holding `held`.
    owner: AtomicUsize,
    /// The last thread that took `held` and how many times in a row (only under `held`).
    streak: Cell<(usize, u32)>,
    value: UnsafeCell<T>,
}

impl<T: Default> Default for Lock<T> {
    fn default() -> Self {
        Lock::new(T::default())
    }
}

// SAFETY: the value is reached only through a `Guard`, and one guard exists at a time (the
// compare-exchange on `held`, or an owner's flag with the revocation in `take_slow`), so
// sharing the lock shares the value as a mutex does; `streak` is touched only under `held`.
unsafe impl<T: Send> Send for Lock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T: std::fmt::Debug> std::fmt::Debug for Lock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("held", &(self.held.load(Ordering::Relaxed) != 0))
            .field("biased", &(self.owner.load(Ordering::Relaxed) != 0))
            .finish()
    }
}

/// The lock, held: the value is reachable through it until it is dropped.
///
/// A guard stays on the thread that took the lock (it is not `Send`): an owner's guard
/// is let go through that thread's flag, and a guard sent away would leave the thread
/// free to take the lock again. It is shared between threads only when the value may be
/// (`T: Sync`), as the standard library's `MutexGuard` is. Forgetting one leaks the lock
/// for this thread beyond the lock itself (see [`Lock`]).
///
/// ```compile_fail
/// let l = remora_sys::lock::Lock::new(0u32);
/// let g = l.lock();
/// std::thread::scope(|s| {
///     s.spawn(move || drop(g));
/// });
/// ```
///
/// Nor is a guard of a value that is not `Sync` shared:
///
/// ```compile_fail
/// let l = remora_sys::lock::Lock::new(std::cell::Cell::new(0u32));
/// let g = l.lock();
/// std::thread::scope(|s| {
///     s.spawn(|| g.set(1));
///     g.set(2);
/// });
/// ```
///
/// while one of a `Sync` value is:
///
/// ```
/// let l = remora_sys::lock::Lock::new(5u32);
/// let g = l.lock();
/// std::thread::scope(|s| {
///     s.spawn(|| assert_eq!(*g, 5));
/// });
/// ```
pub struct Guard<'a, T> {
    lock: &'a Lock<T>,
    /// The owner's flag, when taken as its owner.
    flag: Option<&'static Flag>,
    /// Not `Send` (see above); `Sync` only as below.
    _here: PhantomData<*const ()>,
}

// SAFETY: a shared guard gives only `&T` (`Deref`), never `&mut T` (`DerefMut` needs the
// guard borrowed exclusively) nor the lock's release (`Drop` needs it owned), so sharing
// it between threads shares `&T`, which is sound exactly when `T: Sync`.
unsafe impl<T: Sync> Sync for Guard<'_, T> {}

impl<T> Lock<T> {
    /// `value`, behind a lock.
    pub const fn new(value: T) -> Lock<T> {
        Lock {
            held: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            owner: AtomicUsize::new(0),
            streak: Cell::new((0, 0)),
            value: UnsafeCell::new(value),
        }
    }

    /// Take the lock, waiting while another thread holds it.
    #[inline]
    pub fn lock(&self) -> Guard<'_, T> {
        let me = me();
        if let Some(n) = me {
            let flag = &FLAG[n - 1];
            if self.owner.load(Ordering::Relaxed) == n && flag.0.load(Ordering::Relaxed) == 0 {
                // Release: a taker that reads this address (or a later one) sees what this
                // thread did inside the lock it left before.
                flag.0.store(self.address(), Ordering::Release);
                // The flag's store stays before the owner's look (for the compiler; for the
                // core, the barrier a taker asks for orders them, see the module doc).
                compiler_fence(Ordering::SeqCst);
                if self.owner.load(Ordering::Acquire) == n {
                    return Guard { lock: self, flag: Some(flag), _here: PhantomData };
                }
                flag.0.store(0, Ordering::Release);
            }
        }
        self.take_slow(me)
    }

    /// Take `held`; take the bias away from another thread; give it to this one after
    /// [`BIAS_AFTER`] takings in a row.
    ///
    /// Panics when this thread is already inside this lock as its owner (a re-entry):
    /// `held` was never taken by it, so the compare-exchange below would succeed and hand
    /// out a second guard to the value.
    fn take_slow(&self, me: Option<usize>) -> Guard<'_, T> {
        if let Some(n) = me {
            // Only this thread writes its flag, and it holds this lock's address only
            // while this thread has an owner's guard of it.
            if FLAG[n - 1].0.load(Ordering::Relaxed) == self.address() {
                panic!("remora_sys::lock::Lock taken again by the thread that holds it");
            }
        }
        if self.held.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.contended();
        }
        let owner = self.owner.load(Ordering::Relaxed);
        if owner != 0 && Some(owner) == me {
            // Biased to this thread, which is inside another lock as its owner: it is not in
            // this one (its flag was looked at above), and no other thread enters this one
            // as owner.
            self.owner.store(0, Ordering::Relaxed);
        } else if owner != 0 {
            self.owner.store(0, Ordering::Relaxed);
            barrier_everywhere();
            let flag = &FLAG[owner - 1];
            let mut looks = 0u32;
            while flag.0.load(Ordering::Acquire) == self.address() {
                looks += 1;
                if looks < SPINS {
                    std::hint::spin_loop();
                } else {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        }
        if let Some(n) = me {
            let (last, run) = self.streak.get();
            let run = if last == n { run.saturating_add(1) } else { 1 };
            self.streak.set((n, run));
            let flag = &FLAG[n - 1];
            // Only when this thread is inside no other lock as its owner (its flag names
            // one lock); else the streak stays and a later taking gives the bias.
            if run >= BIAS_AFTER && flag.0.load(Ordering::Relaxed) == 0 && can_bias() {
                self.streak.set((0, 0));
                return self.grant(n, flag);
            }
        }
        Guard { lock: self, flag: None, _here: PhantomData }
    }

    /// Bias the lock to thread `n`, which holds `held`, and hand this taking out as an
    /// owner's guard: had it a guard through `held` while the lock is biased to it with
    /// its flag lowered, a taking again would pass the owner's way and get a second guard.
    #[cold]
    fn grant(&self, n: usize, flag: &'static Flag) -> Guard<'_, T> {
        // Both stores are seen by the next thread to take `held` (the release below): it
        // takes the bias away and waits for the flag to be lowered, as for any owner.
        flag.0.store(self.address(), Ordering::Relaxed);
        self.owner.store(n, Ordering::Relaxed);
        self.held.store(0, Ordering::Release);
        if self.sleepers.load(Ordering::Relaxed) != 0 {
            crate::sync::futex_wake_all(&self.held);
        }
        Guard { lock: self, flag: Some(flag), _here: PhantomData }
    }

    /// What an owner's flag holds while it is inside this lock.
    fn address(&self) -> usize {
        self as *const Self as usize
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
        if let Some(flag) = self.flag {
            flag.0.store(0, Ordering::Release);
            return;
        }
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
mod tests;
