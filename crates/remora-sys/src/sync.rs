//! Cross-process wake-ups: eventfds, shared futexes, and spin-then-block waiting.
//!
//! Every wait here spins for a short, bounded time and then blocks in the kernel, so two
//! waiting threads on a two-core machine never burn both cores for long.

use rustix::event::EventfdFlags;
use rustix::thread::futex;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a waiter spins before it blocks, unless told otherwise.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// An eventfd: a counter another process can bump to wake a poller.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A new non-blocking, close-on-exec eventfd at zero.
    ///
    /// # Errors
    /// The errno of `eventfd2`.
    pub fn new() -> io::Result<EventFd> {
        Ok(EventFd { fd: rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)? })
    }

    /// Adopt a received eventfd.
    pub fn from_fd(fd: OwnedFd) -> EventFd {
        EventFd { fd }
    }

    /// Add one to the counter (wakes pollers). Errors are ignored: a full counter
    /// (`EAGAIN`) already means "readable".
    pub fn signal(&self) {
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// Read and reset the counter; 0 when it was zero.
    pub fn drain(&self) -> u64 {
        let mut b = [0u8; 8];
        match rustix::io::read(&self.fd, &mut b) {
            Ok(8) => u64::from_ne_bytes(b),
            _ => 0,
        }
    }

    /// Duplicate the descriptor.
    ///
    /// # Errors
    /// The errno of `fcntl(F_DUPFD_CLOEXEC)`.
    pub fn try_clone(&self) -> io::Result<EventFd> {
        Ok(EventFd { fd: rustix::io::fcntl_dupfd_cloexec(&self.fd, 3)? })
    }

    /// Give up the wrapper.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Block while `word` holds `expected`, at most `timeout` (shared futex: works across
/// processes on `MAP_SHARED` memory). Returns early on any wake or change.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(crate::timespec);
    let _ = futex::wait(word, futex::Flags::empty(), expected, ts.as_ref());
}

/// Wake every thread blocked on `word`, in any process.
pub fn futex_wake_all(word: &AtomicU32) {
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}

/// How a spin-then-block wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The condition became true.
    Ready,
    /// The time ran out.
    TimedOut,
}

/// Wait until `ready()` holds: spin for `spin`, then block on `word` (re-checking after
/// every wake). `waiters` is raised while blocked so that wakers know to call
/// [`futex_wake_all`]. `timeout` `None` waits forever.
///
/// The spin offers the core to any other runnable thread every few microseconds
/// (`sched_yield`, which returns at once when there is none): the thread a waiter waits for
/// is often woken onto the waiter's own core, and the scheduler lets the current thread
/// run on before it preempts it for a wakee. Without that, on a two-core machine, a DMA
/// across hosts waited out the full spin of its process, then of the engine's worker,
/// at every transfer (64 KiB transfers at a tenth of raw TCP's speed).
pub fn spin_then_block(
    word: &AtomicU32,
    waiters: &AtomicU32,
    spin: Duration,
    timeout: Option<Duration>,
    ready: impl FnMut() -> bool,
) -> WaitOutcome {
    let seen = || word.load(Ordering::SeqCst);
    spin_then_sleep(waiters, spin, timeout, ready, seen, |seen, slice| futex_wait(word, seen, Some(slice)))
}

/// The shape of both waits: spin for `spin`, then, with `sleepers` raised, look at
/// `before()` (what a wake-up changes), check `ready()`, and `sleep` at most one slice,
/// until ready or the time ran out.
fn spin_then_sleep<T>(
    sleepers: &AtomicU32,
    spin: Duration,
    timeout: Option<Duration>,
    mut ready: impl FnMut() -> bool,
    mut before: impl FnMut() -> T,
    mut sleep: impl FnMut(T, Duration),
) -> WaitOutcome {
    let start = Instant::now();
    if spin_for(start, spin, &mut ready) {
        return WaitOutcome::Ready;
    }
    sleepers.fetch_add(1, Ordering::SeqCst);
    let out = loop {
        let seen = before();
        if ready() {
            break WaitOutcome::Ready;
        }
        let Some(slice) = next_slice(start, timeout) else { break WaitOutcome::TimedOut };
        sleep(seen, slice);
    };
    sleepers.fetch_sub(1, Ordering::SeqCst);
    out
}

/// How long a wait begun at `start` sleeps next: what is left of `timeout`, and at most
/// 100 ms, so that a lost wake-up costs little; `None` once the timeout passed.
pub(crate) fn next_slice(start: Instant, timeout: Option<Duration>) -> Option<Duration> {
    let slice = Duration::from_millis(100);
    match timeout {
        Some(t) => t.checked_sub(start.elapsed()).filter(|l| !l.is_zero()).map(|l| l.min(slice)),
        None => Some(slice),
    }
}

/// Spin until `ready()` holds (`true`) or `spin` since `start` passed (`false`), offering
/// the core to other threads every few microseconds (see [`spin_then_block`]).
fn spin_for(start: Instant, spin: Duration, ready: &mut impl FnMut() -> bool) -> bool {
    let mut n = 0u32;
    loop {
        if ready() {
            return true;
        }
        if spin.is_zero() {
            return false;
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(64) {
            if start.elapsed() >= spin {
                return false;
            }
            std::thread::yield_now();
        }
        std::hint::spin_loop();
    }
}

/// [`spin_then_block`] that blocks in `poll` on `bell` (a socket that wakers write a byte
/// into while `ringing` is raised) instead of on a futex: a socket's wake-up is synchronous
/// (the scheduler may run the wakee on the waker's core once the waker sleeps), a futex's
/// is not. Only one thread may wait on a given bell at a time: it drains what was rung.
/// Survives `EINTR`; wakes at least every 100 ms to re-check, as [`spin_then_block`] does.
pub fn spin_then_poll(
    bell: BorrowedFd<'_>,
    ringing: &AtomicU32,
    spin: Duration,
    timeout: Option<Duration>,
    ready: impl FnMut() -> bool,
) -> WaitOutcome {
    use std::os::fd::AsRawFd;
    let sleep = |(), slice: Duration| {
        let mut fds = [libc::pollfd { fd: bell.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        if let Ok(n) = poll_for(&mut fds, slice) {
            if n > 0 {
                drain_bell(bell);
            }
        }
    };
    spin_then_sleep(ringing, spin, timeout, ready, || (), sleep)
}

/// `poll` of `fds` for at most `slice`: the blocking call of a wait's wake-up path, made
/// without `ppoll`'s copy of the time left back to the caller on every return (a
/// measurable part of a blocked trigger→wake). Whole milliseconds go through `poll` (where
/// the architecture has it), a slice under one millisecond through `ppoll`; a slice of `n`
/// ms and a fraction sleeps its whole `n` ms and leaves the fraction to the caller's next
/// slice, so no slice sleeps more than asked beyond timer slack (the callers' loops ask
/// again for what is left). Returns how many of `fds` have events.
///
/// Both are raw system calls, not glibc's wrappers: those are cancellation points, and the
/// C libraries' waits must have none (see [`crate::cancel`]).
///
/// # Errors
/// The errno of the call, `EINTR` included (the callers look again).
#[allow(unsafe_code)] // the unsafe layer: the blocks have SAFETY comments
pub(crate) fn poll_for(fds: &mut [libc::pollfd], slice: Duration) -> io::Result<usize> {
    let nfds = fds.len() as libc::nfds_t;
    let ms = slice.as_millis();
    #[cfg(target_arch = "x86_64")]
    let n = if ms > 0 || slice.is_zero() {
        let ms = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` points at `nfds` live `pollfd`s, writable for the call.
        unsafe { libc::syscall(libc::SYS_poll, fds.as_mut_ptr(), nfds, ms) }
    } else {
        ppoll_raw(fds, slice)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let n = ppoll_raw(fds, if ms > 0 { Duration::from_millis(ms as u64) } else { slice });
    match usize::try_from(n) {
        Ok(n) => Ok(n),
        Err(_) => Err(io::Error::last_os_error()),
    }
}

/// The raw `ppoll` of `fds` for `slice` (no signal mask): the kernel's answer, -1 with
/// `errno` set on failure.
#[allow(unsafe_code)] // the unsafe layer: the block has a SAFETY comment
fn ppoll_raw(fds: &mut [libc::pollfd], slice: Duration) -> libc::c_long {
    let secs = libc::time_t::try_from(slice.as_secs()).unwrap_or(libc::time_t::MAX);
    let mut ts = libc::timespec { tv_sec: secs, tv_nsec: slice.subsec_nanos() as libc::c_long };
    // SAFETY: `fds` points at `fds.len()` live `pollfd`s, writable for the call; `ts` lives
    // for it and is writable (the kernel writes the time left back); a null signal mask
    // leaves the thread's as it is (its size argument is then not read).
    unsafe {
        libc::syscall(
            libc::SYS_ppoll,
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &mut ts as *mut libc::timespec,
            std::ptr::null::<libc::sigset_t>(),
            8usize, // the kernel's signal set, in bytes
        )
    }
}

/// Take what was rung into `bell` so far (bounded: wakers may keep ringing). A bell whose
/// other end is gone reads 0 and stays readable: the futex word and the wait's slices
/// still serve; nap rather than spin on it.
pub(crate) fn drain_bell(bell: BorrowedFd<'_>) {
    let mut sink = [0u8; 256];
    if let Ok(0) = rustix::io::read(bell, &mut sink) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Make this thread's timed sleeps precise (`PR_SET_TIMERSLACK` of 1 ns): by default Linux
/// may wake a sleeping thread up to 50 µs late, which is longer than the pager's flush delay.
pub fn precise_timers() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
}

/// Give the calling thread the highest CPU share (nice -20) where the process may (root, or
/// `RLIMIT_NICE`), or (`urgent` false) the default share back: for helper threads whose
/// work is short and on someone's critical path (the DSM pager, the daemon thread serving
/// it). Programs that poll memory keep both cores of a small machine busy; a helper of
/// ordinary weight, woken to move their data, waits up to a scheduler tick for a core, one
/// of ours preempts the poller at once. `REMORA_URGENT=0` turns it off. Returns whether the
/// priority is now as asked.
///
/// Do not spin with `sched_yield` at nice -20: the scheduler hands the core straight back.
pub fn urgent_thread(urgent: bool) -> bool {
    thread_local! {
        /// The thread's nice value before it was first raised.
        static ORIGINAL: std::cell::Cell<Option<i32>> = const { std::cell::Cell::new(None) };
    }
    if !remora_config::Config::get().urgent {
        return false;
    }
    let tid = rustix::thread::gettid();
    if urgent {
        if ORIGINAL.get().is_none() {
            let Ok(now) = rustix::process::getpriority_process(Some(tid)) else { return false };
            ORIGINAL.set(Some(now));
        }
        rustix::process::setpriority_process(Some(tid), -20).is_ok()
    } else {
        match ORIGINAL.get() {
            Some(n) => rustix::process::setpriority_process(Some(tid), n).is_ok(),
            None => true,
        }
    }
}

/// Give the calling thread the lowest CPU share (nice 19): for background work that is
/// never on anyone's critical path and that, on a small machine, must not compete with the
/// threads that are. Whether it was set.
pub fn background_thread() -> bool {
    rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn eventfd_counts() {
        let e = EventFd::new().unwrap();
        assert_eq!(e.drain(), 0);
        e.signal();
        e.signal();
        assert_eq!(e.try_clone().unwrap().drain(), 2);
    }

    /// `poll_for` sleeps no longer than asked and never returns early without an event: a
    /// slice under a millisecond (through `ppoll`) is slept, not taken for zero; a slice
    /// of milliseconds and a fraction sleeps its whole milliseconds; a readable descriptor
    /// is reported at once.
    #[test]
    fn poll_for_sleeps_its_slice_and_sees_events() {
        use std::os::fd::AsRawFd;
        let (tx, rx) = crate::intr::bell().unwrap();
        let mut fds = [libc::pollfd { fd: rx.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        assert_eq!(poll_for(&mut fds, Duration::ZERO).unwrap(), 0);
        for (slice, least) in [
            (Duration::from_micros(300), Duration::from_micros(300)),
            (Duration::from_micros(2500), Duration::from_millis(2)),
        ] {
            let t = Instant::now();
            assert_eq!(poll_for(&mut fds, slice).unwrap(), 0);
            assert!(t.elapsed() >= least, "{slice:?} slept only {:?}", t.elapsed());
        }
        rustix::io::write(&tx, &[1]).unwrap();
        assert_eq!(poll_for(&mut fds, Duration::from_secs(5)).unwrap(), 1);
        assert_eq!(fds[0].revents, libc::POLLIN);
    }

    #[test]
    fn spin_then_block_wakes_and_times_out() {
        let w = Arc::new((AtomicU32::new(0), AtomicU32::new(0)));
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            w2.0.fetch_add(1, Ordering::SeqCst);
            futex_wake_all(&w2.0);
        });
        let r = spin_then_block(&w.0, &w.1, Duration::from_micros(10), Some(Duration::from_secs(5)), || {
            w.0.load(Ordering::SeqCst) == 1
        });
        assert_eq!(r, WaitOutcome::Ready);
        t.join().unwrap();
        let r = spin_then_block(&w.0, &w.1, Duration::ZERO, Some(Duration::from_millis(20)), || false);
        assert_eq!(r, WaitOutcome::TimedOut);
        assert_eq!(w.1.load(Ordering::SeqCst), 0);
    }
}

/// The CPUs a thread was allowed before [`pin_thread`]: given back by [`Pinned::restore`],
/// or when dropped (on the thread that pinned itself).
#[derive(Debug)]
pub struct Pinned(Option<rustix::thread::CpuSet>);

impl Pinned {
    /// Let the calling thread run on the CPUs it had before it was pinned.
    ///
    /// # Errors
    /// The errno of `sched_setaffinity`.
    pub fn restore(mut self) -> io::Result<()> {
        match self.0.take() {
            Some(set) => Ok(rustix::thread::sched_setaffinity(None, &set)?),
            None => Ok(()),
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(set) = self.0.take() {
            let _ = rustix::thread::sched_setaffinity(None, &set);
        }
    }
}

/// Keep the calling thread on one CPU, the first one it may use (benchmarks that measure a
/// path with every thread on one core, away from the scheduler's choice of cores); returns
/// what to restore.
///
/// # Errors
/// The errno of `sched_getaffinity` or `sched_setaffinity`.
pub fn pin_thread() -> io::Result<Pinned> {
    pin_to_end(false)
}

/// [`pin_thread`] on the last CPU the thread may use (with another thread on the first:
/// a pair kept on two cores).
///
/// # Errors
/// The errno of `sched_getaffinity` or `sched_setaffinity`.
pub fn pin_thread_last() -> io::Result<Pinned> {
    pin_to_end(true)
}

/// Keep the calling thread on the first (or `last`) CPU it may use.
fn pin_to_end(last: bool) -> io::Result<Pinned> {
    let before = rustix::thread::sched_getaffinity(None)?;
    let mut cpus = (0..rustix::thread::CpuSet::MAX_CPU).filter(|c| before.is_set(*c));
    let cpu = if last { cpus.next_back() } else { cpus.next() }
        .ok_or_else(|| io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()))?;
    let mut one = rustix::thread::CpuSet::new();
    one.set(cpu);
    rustix::thread::sched_setaffinity(None, &one)?;
    Ok(Pinned(Some(before)))
}
