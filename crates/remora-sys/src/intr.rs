//! The shared page of an interrupt: how a trigger reaches a waiter with no daemon on the path.
//!
//! The daemon creates one small memfd per interrupt and hands it, with an eventfd, to the
//! creating process and to every process that connects. Layout (all fields little-endian
//! atomics, offsets fixed):
//!
//! ```text
//!  0  triggers  u32  bumped by every trigger; the futex word waiters sleep on
//!  4  waiters   u32  threads blocked in the kernel (a trigger wakes them only if > 0)
//!  8  removed   u32  set when the interrupt is removed: waiters wake, triggers fail
//! 12  armed     u32  a callback listens on the eventfd (a trigger signals it if set)
//! 16  tail      u64  data interrupts: next ticket a producer claims
//! 24  head      u64  data interrupts: next ticket the owner consumes; a plain interrupt
//!                     used as an RSM signal: triggers consumed so far
//! 32  far       u32  connections whose triggers come through the daemon (the owner
//!                     then waits on the bell)
//! 36  ringing   u32  threads blocked on the bell (a trigger rings it only if > 0)
//! 40..64            the flows the owner reads itself (`intr/owned.rs`)
//! 64  slots     DATA_SLOTS × SLOT_SIZE: seq u64, len u32, pad u32, data [MAX_DATA]
//! ```
//!
//! Data interrupts use a bounded multi-producer queue (Vyukov's sequence-numbered slots):
//! a producer claims a ticket with a compare-and-swap on `tail`, copies its payload into
//! the ticket's slot and publishes it by storing `seq = ticket + 1`; the owner consumes in
//! ticket order. Nothing read from the page is trusted for memory safety: lengths are
//! clamped to [`MAX_DATA`], slot indices are taken modulo [`DATA_SLOTS`].
//!
//! **The bell.** Besides the futex word, an interrupt has a bell: a Unix stream socket pair
//! whose sending end every holder of the page has, and whose receiving end only the owner
//! has. While the interrupt has connections whose triggers come through the daemon (`far`,
//! kept by the daemon: those of a link transport's peer, another host or a node joined
//! over TCP), the owner's blocked waiter sleeps in `poll` on the bell instead of on the
//! futex, and a trigger that sees it there (`ringing`) writes one byte. Such a trigger is
//! made by the owner's daemon, whose thread read it from a TCP socket and goes back to
//! reading at once: a socket's wake-up is a synchronous one, which the scheduler may hand
//! to the waker's own core, where a futex wake-up goes to an idle core; on a virtual
//! machine whose idle cores halt, that wake-up cost about 30 µs (issue 19: an interrupt
//! across hosts, the waiter blocked, took 29 µs one-way beside raw TCP's 3). A process of
//! this host holding the page, of this node or of another one reached over the `local`
//! transport, triggers it itself and is not counted: with only such connections the owner
//! sleeps on the futex (one `futex` call each side; the bell's `ppoll` then, `poll` now,
//! and `sendto` made a one-core ping-pong 1.6 times raw futexes'). Every trigger, counted
//! or not, wakes both kinds of sleeper (`waiters`, `ringing`), so the count may change under a waiter.

use crate::sync::{futex_wake_all, spin_then_block, EventFd, WaitOutcome};
use crate::{Mapping, Memfd};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

mod owned;
pub use owned::{
    sender_gone, take_frames, unsent, wait_sender_gone, FlowStep, Taken, FRAMES_PER_LOOK, MAX_POLLED,
};

/// The largest payload of one data interrupt, in bytes.
pub const MAX_DATA: usize = 1024;
/// Data interrupts that can wait unconsumed before a trigger reports the queue full.
pub const DATA_SLOTS: usize = 64;
const HEADER: usize = 64;
const SLOT_SIZE: usize = 16 + MAX_DATA;
/// The size of an interrupt page.
pub const PAGE_BYTES: usize = HEADER + DATA_SLOTS * SLOT_SIZE;

const TRIGGERS: usize = 0;
const WAITERS: usize = 4;
const REMOVED: usize = 8;
const ARMED: usize = 12;
const TAIL: usize = 16;
const HEAD: usize = 24;
const FAR: usize = 32;
const RINGING: usize = 36;

/// Why a trigger failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerError {
    /// The interrupt was removed.
    Removed,
    /// All data slots hold unconsumed interrupts.
    Full,
    /// The payload exceeds [`MAX_DATA`].
    TooLong,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntrWait {
    /// Triggered; the new trigger count.
    Triggered(u32),
    /// The time ran out.
    TimedOut,
    /// The interrupt was removed.
    Removed,
}

/// A mapped interrupt page plus its eventfd and, when it has one, its bell.
#[derive(Debug)]
pub struct IntrPage {
    map: Mapping,
    event: EventFd,
    /// The bell's sending end (every holder of the page).
    bell_tx: Option<OwnedFd>,
    /// The bell's receiving end (the owner only).
    bell_rx: Option<OwnedFd>,
    /// A thread of this process waits on the bell (one at a time: it alone drains it).
    bell_busy: AtomicBool,
}

/// A new bell: `(sending end, receiving end)`, both non-blocking and close-on-exec.
///
/// # Errors
/// The errno of `socketpair`.
pub fn bell() -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    let (tx, rx) = socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    Ok((tx, rx))
}

impl IntrPage {
    /// Create the memfd of a new interrupt page, initialised (daemon side).
    ///
    /// # Errors
    /// The errno of creating or mapping the memfd.
    pub fn create(name: &str) -> io::Result<Memfd> {
        let fd = Memfd::create(name, PAGE_BYTES as u64)?;
        let map = Mapping::new(fd.as_fd(), 0, PAGE_BYTES, Default::default())?;
        for i in 0..DATA_SLOTS {
            map.atomic_u64(HEADER + i * SLOT_SIZE).expect("slot in page").store(i as u64, Ordering::Release);
        }
        Ok(fd)
    }

    /// Map a received interrupt page.
    ///
    /// # Errors
    /// `EINVAL` when the memfd is too small; the errno of `mmap`.
    pub fn open(memfd: &Memfd, event: EventFd) -> io::Result<IntrPage> {
        if memfd.size() < PAGE_BYTES as u64 {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
        }
        Ok(IntrPage {
            map: Mapping::new(memfd.as_fd(), 0, PAGE_BYTES, Default::default())?,
            event,
            bell_tx: None,
            bell_rx: None,
            bell_busy: AtomicBool::new(false),
        })
    }

    /// Give the page its bell: the sending end (every holder) and the receiving end (the
    /// owner's, whose waits then sleep on it while the interrupt has connections from other
    /// hosts). A page without the sending end must not be triggered while its owner has
    /// the receiving end: its triggers would not wake a waiter on the bell.
    pub fn with_bell(mut self, tx: Option<OwnedFd>, rx: Option<OwnedFd>) -> IntrPage {
        self.bell_tx = tx;
        self.bell_rx = rx;
        self
    }

    /// The bell's sending end, if the page has one (to hand a copy to another holder).
    pub fn bell_sender(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.bell_tx.as_ref().map(|t| t.as_fd())
    }

    /// Whether the interrupt has connections whose triggers come through the daemon now.
    pub fn far_connected(&self) -> bool {
        self.u32(FAR).load(Ordering::SeqCst) > 0
    }

    /// Count a connection whose triggers come through the daemon in (`true`) or out
    /// (daemon side).
    pub fn far_connection(&self, added: bool) {
        let far = self.u32(FAR);
        if added {
            far.fetch_add(1, Ordering::SeqCst);
        } else {
            let _ = far.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
    }

    fn u32(&self, off: usize) -> &AtomicU32 {
        self.map.atomic_u32(off).expect("fixed offset inside the page")
    }

    fn u64(&self, off: usize) -> &AtomicU64 {
        self.map.atomic_u64(off).expect("fixed offset inside the page")
    }

    /// The eventfd a callback thread polls.
    pub fn event(&self) -> &EventFd {
        &self.event
    }

    /// The number of triggers so far (wrapping).
    pub fn triggers(&self) -> u32 {
        self.u32(TRIGGERS).load(Ordering::SeqCst)
    }

    /// Whether the interrupt was removed.
    pub fn is_removed(&self) -> bool {
        self.u32(REMOVED).load(Ordering::SeqCst) != 0
    }

    /// Ask triggers to signal the eventfd (a callback is listening) or stop doing so.
    pub fn set_armed(&self, on: bool) {
        self.u32(ARMED).store(on as u32, Ordering::SeqCst);
    }

    fn ring(&self) {
        let t = self.u32(TRIGGERS);
        t.fetch_add(1, Ordering::SeqCst);
        if self.u32(WAITERS).load(Ordering::SeqCst) > 0 {
            futex_wake_all(t);
        }
        if self.u32(ARMED).load(Ordering::SeqCst) != 0 {
            self.event.signal();
        }
        if self.u32(RINGING).load(Ordering::SeqCst) > 0 {
            self.ring_bell();
        }
    }

    /// One byte into the bell (a full bell is ringing already).
    fn ring_bell(&self) {
        if let Some(tx) = &self.bell_tx {
            let _ = rustix::net::send(
                tx,
                &[1],
                rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
            );
        }
    }

    /// Trigger a plain interrupt.
    ///
    /// # Errors
    /// [`TriggerError::Removed`].
    pub fn trigger(&self) -> Result<(), TriggerError> {
        if self.is_removed() {
            return Err(TriggerError::Removed);
        }
        self.ring();
        Ok(())
    }

    /// Triggers not consumed yet, for a plain interrupt whose consumers count in the page
    /// ([`IntrPage::consume_one`]: RSM signals, where a post may be dropped while one is
    /// pending).
    pub fn pending(&self) -> u32 {
        self.triggers().wrapping_sub(self.u64(HEAD).load(Ordering::SeqCst) as u32)
    }

    /// Consume one trigger counted in the page, if one is pending.
    pub fn consume_one(&self) -> bool {
        let head = self.u64(HEAD);
        loop {
            let c = head.load(Ordering::SeqCst);
            if c as u32 == self.triggers() {
                return false;
            }
            if head.compare_exchange(c, c.wrapping_add(1), Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                return true;
            }
        }
    }

    /// Trigger a plain interrupt unless a trigger is pending ([`IntrPage::pending`]).
    /// Returns whether it triggered.
    ///
    /// # Errors
    /// [`TriggerError::Removed`].
    pub fn trigger_unless_pending(&self) -> Result<bool, TriggerError> {
        if self.is_removed() {
            return Err(TriggerError::Removed);
        }
        if self.pending() > 0 {
            return Ok(false);
        }
        self.ring();
        Ok(true)
    }

    /// Trigger a data interrupt carrying `data`.
    ///
    /// # Errors
    /// [`TriggerError::TooLong`], [`TriggerError::Full`], [`TriggerError::Removed`].
    pub fn send(&self, data: &[u8]) -> Result<(), TriggerError> {
        if data.len() > MAX_DATA {
            return Err(TriggerError::TooLong);
        }
        if self.is_removed() {
            return Err(TriggerError::Removed);
        }
        let tail = self.u64(TAIL);
        let mut pos = tail.load(Ordering::Relaxed);
        // The page is shared with untrusted processes: never loop without bound.
        let mut tries = 0;
        let slot = loop {
            tries += 1;
            if tries > 4 * DATA_SLOTS {
                return Err(TriggerError::Full);
            }
            let slot = HEADER + (pos as usize % DATA_SLOTS) * SLOT_SIZE;
            let seq = self.u64(slot).load(Ordering::Acquire);
            let dif = seq.wrapping_sub(pos) as i64;
            if dif == 0 {
                // Wrapping: the page is writable by every connected process, so `tail` may
                // be anything (regression input of the fuzz target `intr_page`).
                match tail.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break slot,
                    Err(now) => pos = now,
                }
            } else if dif < 0 {
                return Err(TriggerError::Full);
            } else {
                pos = tail.load(Ordering::Relaxed);
            }
        };
        self.map.write(slot + 16, data).expect("payload fits its slot");
        self.u32(slot + 8).store(data.len() as u32, Ordering::Relaxed);
        self.u64(slot).store(pos.wrapping_add(1), Ordering::Release);
        self.ring();
        Ok(())
    }

    /// Take the oldest data interrupt into `buf`; returns the bytes copied (a payload
    /// longer than `buf` is truncated; [`IntrPage::peek_len`] tells the length first). `None` when none waits.
    /// Only one thread of the owning process may call this at a time.
    pub fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        let head = self.u64(HEAD);
        let pos = head.load(Ordering::Relaxed);
        let slot = HEADER + (pos as usize % DATA_SLOTS) * SLOT_SIZE;
        let seq = self.u64(slot).load(Ordering::Acquire);
        if seq != pos.wrapping_add(1) {
            return None;
        }
        let len = (self.u32(slot + 8).load(Ordering::Relaxed) as usize).min(MAX_DATA);
        let n = len.min(buf.len());
        self.map.read(slot + 16, &mut buf[..n]).expect("payload inside its slot");
        self.u64(slot).store(pos.wrapping_add(DATA_SLOTS as u64), Ordering::Release);
        head.store(pos.wrapping_add(1), Ordering::Relaxed);
        Some(n)
    }

    /// The length of the oldest unconsumed data interrupt, if any.
    pub fn peek_len(&self) -> Option<usize> {
        let pos = self.u64(HEAD).load(Ordering::Relaxed);
        let slot = HEADER + (pos as usize % DATA_SLOTS) * SLOT_SIZE;
        if self.u64(slot).load(Ordering::Acquire) != pos.wrapping_add(1) {
            return None;
        }
        Some((self.u32(slot + 8).load(Ordering::Relaxed) as usize).min(MAX_DATA))
    }

    /// Whether a data interrupt waits to be consumed.
    pub fn has_data(&self) -> bool {
        let pos = self.u64(HEAD).load(Ordering::Relaxed);
        let slot = HEADER + (pos as usize % DATA_SLOTS) * SLOT_SIZE;
        self.u64(slot).load(Ordering::Acquire) == pos.wrapping_add(1)
    }

    /// Wait until `ready(triggers)` holds, spinning for `spin` first; `None` waits forever.
    pub fn wait(
        &self,
        spin: Duration,
        timeout: Option<Duration>,
        mut ready: impl FnMut(u32) -> bool,
    ) -> IntrWait {
        let t = self.u32(TRIGGERS);
        let mut ready = || self.is_removed() || ready(t.load(Ordering::SeqCst));
        let out = match self.bell_rx.as_ref().filter(|_| self.u32(FAR).load(Ordering::SeqCst) > 0) {
            Some(rx) if !self.bell_busy.swap(true, Ordering::Acquire) => {
                let out =
                    crate::sync::spin_then_poll(rx.as_fd(), self.u32(RINGING), spin, timeout, &mut ready);
                self.bell_busy.store(false, Ordering::Release);
                out
            }
            _ => spin_then_block(t, self.u32(WAITERS), spin, timeout, ready),
        };
        if self.is_removed() {
            return IntrWait::Removed;
        }
        match out {
            WaitOutcome::Ready => IntrWait::Triggered(t.load(Ordering::SeqCst)),
            WaitOutcome::TimedOut => IntrWait::TimedOut,
        }
    }

    /// Mark the interrupt removed and wake everyone waiting on it.
    pub fn remove(&self) {
        self.u32(REMOVED).store(1, Ordering::SeqCst);
        let t = self.u32(TRIGGERS);
        t.fetch_add(1, Ordering::SeqCst);
        futex_wake_all(t);
        self.event.signal();
        self.ring_bell();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (IntrPage, IntrPage) {
        let fd = IntrPage::create("t").unwrap();
        let ev = EventFd::new().unwrap();
        let a = IntrPage::open(&fd, ev.try_clone().unwrap()).unwrap();
        let b = IntrPage::open(&fd.try_clone().unwrap(), ev).unwrap();
        (a, b)
    }

    #[test]
    fn plain_trigger_wakes_a_blocked_waiter() {
        let (owner, remote) = pair();
        let seen = owner.triggers();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            remote.trigger().unwrap();
            remote
        });
        assert!(matches!(
            owner.wait(Duration::ZERO, Some(Duration::from_secs(5)), |n| n != seen),
            IntrWait::Triggered(_)
        ));
        let remote = t.join().unwrap();
        assert_eq!(
            owner.wait(Duration::ZERO, Some(Duration::from_millis(10)), |n| n != seen + 1),
            IntrWait::TimedOut
        );
        owner.remove();
        assert_eq!(remote.trigger(), Err(TriggerError::Removed));
        assert_eq!(owner.wait(Duration::ZERO, None, |_| false), IntrWait::Removed);
    }

    #[test]
    fn the_bell_wakes_an_owner_while_other_hosts_are_connected() {
        let fd = IntrPage::create("t").unwrap();
        let ev = EventFd::new().unwrap();
        let (tx, rx) = bell().unwrap();
        let owner = IntrPage::open(&fd, ev.try_clone().unwrap()).unwrap().with_bell(None, Some(rx));
        let daemon = IntrPage::open(&fd, ev).unwrap().with_bell(Some(tx), None);
        daemon.far_connection(true);
        let daemon = std::sync::Arc::new(daemon);
        for _ in 0..3 {
            let seen = owner.triggers();
            let d = daemon.clone();
            let t = std::thread::spawn(move || {
                // Until the owner sleeps on the bell (not on the futex).
                while d.u32(RINGING).load(Ordering::SeqCst) == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert_eq!(d.u32(WAITERS).load(Ordering::SeqCst), 0);
                d.trigger().unwrap();
            });
            assert!(matches!(
                owner.wait(Duration::ZERO, Some(Duration::from_secs(5)), |n| n != seen),
                IntrWait::Triggered(_)
            ));
            t.join().unwrap();
        }
        // No far connection left: the owner sleeps on the futex again.
        daemon.far_connection(false);
        daemon.far_connection(false);
        let seen = owner.triggers();
        let d = daemon.clone();
        let t = std::thread::spawn(move || {
            while d.u32(WAITERS).load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            d.trigger().unwrap();
        });
        assert!(matches!(
            owner.wait(Duration::ZERO, Some(Duration::from_secs(5)), |n| n != seen),
            IntrWait::Triggered(_)
        ));
        t.join().unwrap();
        // A removal wakes a waiter on the bell.
        daemon.far_connection(true);
        let d = daemon.clone();
        let t = std::thread::spawn(move || {
            while d.u32(RINGING).load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            d.remove();
        });
        assert_eq!(owner.wait(Duration::ZERO, Some(Duration::from_secs(5)), |_| false), IntrWait::Removed);
        t.join().unwrap();
        assert_eq!(owner.u32(RINGING).load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_trigger_rings_the_bell_only_while_someone_waits_on_it() {
        let fd = IntrPage::create("t").unwrap();
        let (tx, rx) = bell().unwrap();
        let page = IntrPage::open(&fd, EventFd::new().unwrap()).unwrap().with_bell(Some(tx), None);
        let rung = || crate::poller::wait_ready(&[rx.as_fd()], Some(Duration::ZERO)).unwrap() != 0;
        page.trigger().unwrap();
        page.send(b"x").unwrap();
        assert!(!rung(), "nobody waits on the bell: no byte");
        page.u32(RINGING).store(1, Ordering::SeqCst);
        page.trigger().unwrap();
        assert!(rung());
        let mut sink = [0u8; 8];
        assert_eq!(rustix::io::read(&rx, &mut sink), Ok(1));
        page.send(b"y").unwrap();
        assert!(rung());
        assert_eq!(rustix::io::read(&rx, &mut sink), Ok(1));
        page.u32(RINGING).store(0, Ordering::SeqCst);
        page.remove();
        assert!(rung(), "a removal always rings");
    }

    #[test]
    fn a_tail_at_the_end_of_u64_wraps() {
        // Regression (fuzz target `intr_page`, fuzz/seeds/intr_page/crash-tail-overflow): a
        // process wrote u64::MAX into `tail` and the slot's sequence; `send` overflowed.
        let fd = IntrPage::create("t").unwrap();
        let raw = Mapping::new(fd.as_fd(), 0, PAGE_BYTES, Default::default()).unwrap();
        let slot = HEADER + (u64::MAX as usize % DATA_SLOTS) * SLOT_SIZE;
        raw.write(TAIL, &u64::MAX.to_ne_bytes()).unwrap();
        raw.write(slot, &u64::MAX.to_ne_bytes()).unwrap();
        let page = IntrPage::open(&fd, EventFd::new().unwrap()).unwrap();
        assert_eq!(page.send(b"wrap"), Ok(()));
        assert_eq!(raw.load_u64(TAIL), Some(0));
        assert!(!page.has_data(), "the owner's head is elsewhere: the payload waits unseen");
    }

    #[test]
    fn data_queue_keeps_order_and_bounds() {
        let (owner, remote) = pair();
        owner.set_armed(true);
        for i in 0..DATA_SLOTS {
            remote.send(&[i as u8; 10]).unwrap();
        }
        assert_eq!(remote.send(b"x"), Err(TriggerError::Full));
        assert_eq!(remote.send(&[0; MAX_DATA + 1]), Err(TriggerError::TooLong));
        assert!(owner.event().drain() > 0);
        let mut buf = [0u8; 4];
        for i in 0..DATA_SLOTS {
            assert_eq!(owner.peek_len(), Some(10));
            assert_eq!(owner.recv(&mut buf), Some(4), "only what fits is copied");
            assert_eq!(buf[0], i as u8);
        }
        assert_eq!(owner.recv(&mut buf), None);
        remote.send(b"again").unwrap();
        let mut big = [0u8; 16];
        assert_eq!(owner.recv(&mut big), Some(5));
        assert_eq!(&big[..5], b"again");
    }
}
