//! Flows the owner of an interrupt reads itself: a trigger from another host with one
//! wake-up, the owner's, as a raw TCP reader has.
//!
//! A process that connected to an interrupt of another host sends its triggers over a TCP
//! flow of its own to the owner's node (fixed-size frames, one per trigger). The owner's
//! daemon serves the flow; for a plain interrupt it also hands a duplicate of the socket
//! to the owner, and from then on both may read it, one at a time:
//!
//! * The owner reads while it waits: its blocked wait polls the flows beside the bell, and
//!   the frames it reads bump the trigger counter like any trigger. While the owner waits,
//!   or has waited lately, with a set of flows that holds a given flow, the daemon's thread
//!   of that flow stays away from the socket ([`IntrPage::owner_reads`]), so a trigger
//!   wakes one thread, not two.
//! * The daemon reads when the owner does not (nobody waits, a callback listens, the owner
//!   has not fetched the flow yet): its ring wakes everyone as before.
//!
//! Whoever reads holds the page's reader lock and takes whole frames only (`FIONREAD`
//! says how many bytes wait): the stream is never left in the middle of a frame. Header
//! words used (after the ones `intr.rs` lists):
//!
//! ```text
//! 40  flows      u32  generation of the set of flows the owner may read (daemon bumps)
//! 44  reader     u32  0 free, 1 held: someone reads a flow now
//! 48  polling    u32  owner threads polling their flows now
//! 52  polls      u32  bumped when such a poll begins and ends
//! 56  owner_gen  u32  the generation of the set the owner polls (0: it reads none now)
//! 60  nudge      u32  the daemon's flow threads sleep on it; a flow's end bumps it
//! ```

use super::{IntrPage, IntrWait, ARMED, FAR, RINGING, TRIGGERS, WAITERS};
use crate::sync::{futex_wait, futex_wake_all};
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const FLOWS: usize = 40;
const READER: usize = 44;
const POLLING: usize = 48;
const POLLS: usize = 52;
const OWNER_GEN: usize = 56;
const NUDGE: usize = 60;

/// The owner's first nap when a flow gave nothing.
const IDLE_NAP: Duration = Duration::from_micros(20);

/// The most frames one look at a flow takes.
pub const FRAMES_PER_LOOK: usize = 16;

/// What one look at a flow found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// `n` whole frames were read into the buffer.
    Frames(usize),
    /// Nothing to read now.
    Nothing,
    /// Only part of a frame waits, this many bytes (its rest is on its way, or held up:
    /// see [`take_frames`]).
    Partial(usize),
    /// The other end closed the flow (everything before the close was read).
    Closed,
}

/// What the owner did with a flow that `poll` said was readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowStep {
    /// Frames were read (or may be next time): keep polling it.
    Read,
    /// Nothing to take now (the daemon holds the lock, or part of a frame came): keep it,
    /// nap.
    Idle,
    /// It ended or broke: stop polling it.
    Drop,
}

/// Read the whole frames of `frame` bytes waiting on stream socket `fd` into `buf` (at
/// most `buf.len() / frame`), without blocking. Call with the reader lock held. Only whole
/// frames are taken (`FIONREAD` says how many bytes wait; a frame split by the stream
/// stays until its rest came), so the stream is always left at a frame's edge and nobody
/// ever waits with the lock held.
///
/// A split frame's first part is [`Taken::Partial`] when nothing else waits. Its rest may
/// never come while it stays unread: the kernel charges the part's whole buffer (up to a
/// loopback burst's 64 KiB and more) to the socket's receive space, and once that space
/// is short of a segment the receiver advertises a zero window, so the sender holds the
/// rest back (issue 19's two-way flood). Whoever sees it persist must read the part
/// (the daemon's thread takes such a flow for itself, `transport/shared_flow.rs`).
///
/// # Errors
/// The errno of `ioctl(FIONREAD)` or `recv` (a reset or broken flow).
pub fn take_frames(fd: BorrowedFd<'_>, frame: usize, buf: &mut [u8]) -> io::Result<Taken> {
    use rustix::net::{recv, RecvFlags};
    let waiting = rustix::io::ioctl_fionread(fd)? as usize;
    let n = (waiting / frame).min(buf.len() / frame);
    if n == 0 {
        if waiting > 0 {
            // Part of a frame: its rest is on its way, unless the sender shut its side (the
            // rest can never come: the flow is over, as at its end).
            return if write_side_shut(fd)? { Ok(Taken::Closed) } else { Ok(Taken::Partial(waiting)) };
        }
        // Nothing waits: the end of the stream, or nothing yet.
        let mut b = [0u8; 1];
        return match recv(fd, &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
            Ok((0, _)) => Ok(Taken::Closed),
            Ok(_) | Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Ok(Taken::Nothing),
            Err(e) => Err(e.into()),
        };
    }
    let want = n * frame;
    let mut got = 0;
    while got < want {
        match recv(fd, &mut buf[got..want], RecvFlags::DONTWAIT) {
            Ok((k, _)) if k > 0 => got += k,
            Err(rustix::io::Errno::INTR) => {}
            // FIONREAD said they were there, and only the lock's holder reads.
            Ok(_) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Taken::Frames(n))
}

/// Whether the sender of flow `fd` is done: it shut its sending side or the socket broke
/// (what waits may still be read; nothing more comes).
pub fn sender_gone(fd: BorrowedFd<'_>) -> bool {
    write_side_shut(fd).unwrap_or(true)
}

/// Wait at most `timeout` for the sender of flow `fd` to be done ([`sender_gone`]), without
/// reading it (what waits stays for its reader): `true` once it is. An interruption
/// returns `false` early.
pub fn wait_sender_gone(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(&fd, PollFlags::RDHUP)];
    let ts = crate::timespec(timeout);
    match poll(&mut fds, Some(&ts)) {
        Ok(_) => {
            fds[0].revents().intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL)
        }
        Err(rustix::io::Errno::INTR) => false,
        Err(_) => true,
    }
}

/// The bytes written to stream socket `fd` that the other end's host has not yet
/// acknowledged (`SIOCOUTQ`): 0 once everything sent reached it.
///
/// # Errors
/// The errno of `ioctl`.
#[allow(unsafe_code)] // the unsafe layer: the block has a SAFETY comment
pub fn unsent(fd: BorrowedFd<'_>) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: `fd` is a live descriptor for the call, and `TIOCOUTQ` (`SIOCOUTQ`) writes one
    // `int` through the pointer, which points at `n`.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut n as *mut libc::c_int) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as usize)
}

/// Whether the other end of stream socket `fd` shut its sending side (or the socket broke).
fn write_side_shut(fd: BorrowedFd<'_>) -> io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(&fd, PollFlags::RDHUP)];
    let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
    match poll(&mut fds, Some(&zero)) {
        Ok(_) => Ok(fds[0].revents().intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR)),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

impl IntrPage {
    /// The generation of the set of flows the owner may read.
    pub fn flows_generation(&self) -> u32 {
        self.u32(FLOWS).load(Ordering::SeqCst)
    }

    /// The set of flows changed (daemon side); returns the new generation.
    pub fn flows_changed(&self) -> u32 {
        self.u32(FLOWS).fetch_add(1, Ordering::SeqCst).wrapping_add(1)
    }

    /// Take the reader lock of the page's flows, if free.
    pub fn try_read_lock(&self) -> bool {
        self.u32(READER).compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Give the reader lock back.
    pub fn read_unlock(&self) {
        self.u32(READER).store(0, Ordering::Release);
    }

    /// Whether the owner reads a flow that joined its set at generation `joined` now, or
    /// did since the last call (`polls` keeps what that call saw): the daemon's thread of
    /// that flow then leaves it alone.
    /// A removed interrupt's owner reads nothing more.
    pub fn owner_reads(&self, joined: u32, polls: &mut u32) -> bool {
        if self.is_removed() {
            return false;
        }
        let has_it = self.u32(OWNER_GEN).load(Ordering::SeqCst).wrapping_sub(joined) as i32 >= 0;
        let now = self.u32(POLLS).load(Ordering::SeqCst);
        let lately = now != *polls;
        *polls = now;
        has_it && (lately || self.u32(POLLING).load(Ordering::SeqCst) > 0)
    }

    /// Sleep until a flow's end is told ([`IntrPage::nudge`]) or `max` passed (daemon side).
    pub fn park(&self, max: Duration) {
        let w = self.u32(NUDGE);
        futex_wait(w, w.load(Ordering::SeqCst), Some(max));
    }

    /// The owner stops reading its flows until its next wait (one held a split frame, or
    /// the set changed under it): the daemon's threads read them from now on, told at once.
    pub fn owner_leaves(&self) {
        self.u32(OWNER_GEN).store(0, Ordering::SeqCst);
        self.nudge();
    }

    /// Wake the daemon's parked flow threads (a flow ended: its thread must see it).
    pub fn nudge(&self) {
        let w = self.u32(NUDGE);
        w.fetch_add(1, Ordering::SeqCst);
        crate::sync::futex_wake_all(w);
    }

    /// Count `n` triggers that the thread waiting in [`IntrPage::wait_owned`] read from a
    /// flow: wakes the futex's waiters and a listening callback, not the bell, whose only
    /// waiter is that thread.
    pub fn count_read(&self, n: u32) {
        if n == 0 {
            return;
        }
        let t = self.u32(TRIGGERS);
        t.fetch_add(n, Ordering::SeqCst);
        if self.u32(WAITERS).load(Ordering::SeqCst) > 0 {
            futex_wake_all(t);
        }
        if self.u32(ARMED).load(Ordering::SeqCst) != 0 {
            self.event.signal();
        }
    }

    /// [`IntrPage::wait`] of the owner that also reads `flows` (the set of generation
    /// `gen`) itself: `on_flow(i)` reads flow `i` when `poll` says it is readable. Falls
    /// back to [`IntrPage::wait`] without flows or with more than [`MAX_POLLED`], without
    /// the bell, when no other host is connected, or while another thread of the process
    /// waits on the bell.
    pub fn wait_owned(
        &self,
        spin: Duration,
        timeout: Option<Duration>,
        flows: &[BorrowedFd<'_>],
        gen: u32,
        on_flow: &mut dyn FnMut(usize) -> FlowStep,
        mut ready: impl FnMut(u32) -> bool,
    ) -> IntrWait {
        let far = self.u32(FAR).load(Ordering::SeqCst) > 0;
        let Some(bell) =
            self.bell_rx.as_ref().filter(|_| far && !flows.is_empty() && flows.len() <= MAX_POLLED)
        else {
            return self.wait(spin, timeout, ready);
        };
        if self.bell_busy.swap(true, Ordering::Acquire) {
            return self.wait(spin, timeout, ready);
        }
        let t = self.u32(TRIGGERS);
        self.u32(OWNER_GEN).store(gen, Ordering::SeqCst);
        self.u32(POLLING).fetch_add(1, Ordering::SeqCst);
        self.u32(POLLS).fetch_add(1, Ordering::SeqCst);
        self.u32(RINGING).fetch_add(1, Ordering::SeqCst);
        let mut live = if flows.len() >= MAX_POLLED { u64::MAX } else { (1u64 << flows.len()) - 1 };
        let mut fds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; MAX_POLLED + 1];
        let start = Instant::now();
        let mut ready = || self.is_removed() || ready(t.load(Ordering::SeqCst));
        let mut nap = IDLE_NAP;
        let mut looked = false;
        let timed_out = loop {
            if ready() {
                break false;
            }
            let spinning = !spin.is_zero() && start.elapsed() < spin;
            let slice = if spinning {
                Duration::ZERO
            } else {
                match crate::sync::next_slice(start, timeout) {
                    Some(s) => s,
                    // A wait without time still looks at the flows once.
                    None if !looked => Duration::ZERO,
                    None => break true,
                }
            };
            looked = true;
            if poll_once(&mut fds, bell, flows, &mut live, slice, on_flow) {
                // The daemon holds the lock (it will ring), or part of a frame came. The
                // lock is in a page every process connected on this host may write: naps
                // that grow, not a spin, while it stays taken.
                // Never past the wait's end: a short time-out ends on time.
                let left = crate::sync::next_slice(start, timeout).unwrap_or(Duration::ZERO);
                std::thread::sleep(nap.min(left));
                nap = (nap * 2).min(Duration::from_millis(5));
            } else {
                nap = IDLE_NAP;
                if spinning {
                    std::thread::yield_now();
                }
            }
        };
        self.u32(RINGING).fetch_sub(1, Ordering::SeqCst);
        self.u32(POLLING).fetch_sub(1, Ordering::SeqCst);
        self.u32(POLLS).fetch_add(1, Ordering::SeqCst);
        if self.u32(WAITERS).load(Ordering::SeqCst) > 0 {
            // Another thread of the process waits on the futex and reads no flow: the
            // daemon's threads read them from now on (they looked away while this one
            // polled), and are told at once.
            self.u32(OWNER_GEN).store(0, Ordering::SeqCst);
            self.nudge();
        }
        self.bell_busy.store(false, Ordering::Release);
        if self.is_removed() {
            IntrWait::Removed
        } else if timed_out {
            IntrWait::TimedOut
        } else {
            IntrWait::Triggered(t.load(Ordering::SeqCst))
        }
    }
}

/// The most flows [`IntrPage::wait_owned`] polls; given more, it waits as
/// [`IntrPage::wait`] does and leaves them all to the daemon (a node books at most 16 per
/// owner).
pub const MAX_POLLED: usize = 64;

/// One `poll` of the bell and the live flows (a bit each in `live`) for at most `slice`;
/// reads what is readable. `fds` is scratch space kept between calls (no allocation per
/// wait). Returns whether a flow was readable but gave nothing and nothing else came (the
/// caller naps).
fn poll_once(
    fds: &mut [libc::pollfd; MAX_POLLED + 1],
    bell: &OwnedFd,
    flows: &[BorrowedFd<'_>],
    live: &mut u64,
    slice: Duration,
    on_flow: &mut dyn FnMut(usize) -> FlowStep,
) -> bool {
    use std::os::fd::AsRawFd;
    let watch = |fd: i32| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    fds[0] = watch(bell.as_raw_fd());
    let mut watched = 1;
    let polled = flows.len().min(MAX_POLLED);
    for (i, f) in flows[..polled].iter().enumerate() {
        if *live & (1 << i) != 0 {
            fds[watched] = watch(f.as_raw_fd());
            watched += 1;
        }
    }
    let Ok(n) = crate::sync::poll_for(&mut fds[..watched], slice) else { return false };
    if n == 0 {
        return false;
    }
    let rung = fds[0].revents != 0;
    // The flows that are readable, as a bit each (the n-th live flow is the n-th polled).
    let mut readable = 0u64;
    let mut k = 1;
    for i in 0..polled {
        if *live & (1 << i) != 0 {
            if fds[k].revents != 0 {
                readable |= 1 << i;
            }
            k += 1;
        }
    }
    if rung {
        crate::sync::drain_bell(std::os::fd::AsFd::as_fd(bell));
    }
    let (mut idle, mut read) = (false, false);
    for i in (0..polled).filter(|i| readable & (1 << i) != 0) {
        match on_flow(i) {
            FlowStep::Read => read = true,
            FlowStep::Idle => idle = true,
            FlowStep::Drop => *live &= !(1 << i),
        }
    }
    idle && !read && !rung
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::EventFd;
    use std::os::fd::AsFd;

    const FRAME: usize = 40;

    /// An owner's page with its bell, the daemon's view of it (one far connection), and a
    /// flow: (the end the owner reads, the sender's end).
    fn setup() -> (IntrPage, IntrPage, OwnedFd, OwnedFd) {
        let fd = IntrPage::create("t").unwrap();
        let ev = EventFd::new().unwrap();
        let (tx, rx) = super::super::bell().unwrap();
        let owner = IntrPage::open(&fd, ev.try_clone().unwrap()).unwrap().with_bell(None, Some(rx));
        let daemon = IntrPage::open(&fd, ev).unwrap().with_bell(Some(tx), None);
        daemon.far_connection(true);
        let (a, b) = super::super::bell().unwrap();
        (owner, daemon, a, b)
    }

    fn read_all(page: &IntrPage, fd: BorrowedFd<'_>) -> FlowStep {
        assert!(page.try_read_lock());
        let mut buf = [0u8; FRAME * 4];
        let t = take_frames(fd, FRAME, &mut buf);
        page.read_unlock();
        match t.unwrap() {
            Taken::Frames(n) => {
                page.count_read(n as u32);
                FlowStep::Read
            }
            Taken::Nothing | Taken::Partial(_) => FlowStep::Idle,
            Taken::Closed => FlowStep::Drop,
        }
    }

    #[test]
    fn only_whole_frames_are_taken_and_an_end_is_seen() {
        let (_, _, rd, wr) = setup();
        let mut buf = [0u8; FRAME * 2];
        assert_eq!(take_frames(rd.as_fd(), FRAME, &mut buf).unwrap(), Taken::Nothing);
        // A frame split by the stream stays until its rest came: nothing is consumed.
        rustix::io::write(&wr, &[7u8; FRAME + 10]).unwrap();
        assert_eq!(take_frames(rd.as_fd(), FRAME, &mut buf).unwrap(), Taken::Frames(1));
        assert_eq!(take_frames(rd.as_fd(), FRAME, &mut buf).unwrap(), Taken::Partial(10));
        assert_eq!(take_frames(rd.as_fd(), FRAME, &mut buf).unwrap(), Taken::Partial(10));
        rustix::io::write(&wr, &[8u8; FRAME - 10]).unwrap();
        assert_eq!(take_frames(rd.as_fd(), FRAME, &mut buf).unwrap(), Taken::Frames(1));
        assert_eq!(&buf[..10], &[7u8; 10]);
        assert_eq!(&buf[10..FRAME], &[8u8; FRAME - 10]);
        // At most what the buffer holds, the rest next time.
        rustix::io::write(&wr, &[9u8; FRAME * 3]).unwrap();
        assert_eq!(take_frames(rd.as_fd(), FRAME, &mut buf).unwrap(), Taken::Frames(2));
        assert_eq!(take_frames(rd.as_fd(), FRAME, &mut buf).unwrap(), Taken::Frames(1));
        // Part of a frame whose sender closed: the rest can never come, the flow is over.
        rustix::io::write(&wr, &[1u8; 3]).unwrap();
        assert_eq!(take_frames(rd.as_fd(), FRAME, &mut buf).unwrap(), Taken::Partial(3), "3 bytes wait");
        drop(wr);
        assert_eq!(take_frames(rd.as_fd(), FRAME, &mut buf).unwrap(), Taken::Closed);
    }

    #[test]
    fn a_waiting_owner_reads_its_flow_and_the_daemon_keeps_away() {
        let (owner, daemon, rd, wr) = setup();
        let gen = daemon.flows_changed();
        let mut polls = 0;
        assert!(!daemon.owner_reads(gen, &mut polls), "the owner never polled");
        let seen = owner.triggers();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            rustix::io::write(&wr, &[1u8; FRAME * 3]).unwrap();
            wr
        });
        let fds = [rd.as_fd()];
        let mut on_flow = |_: usize| read_all(&owner, rd.as_fd());
        let got =
            owner.wait_owned(Duration::ZERO, Some(Duration::from_secs(5)), &fds, gen, &mut on_flow, |n| {
                n.wrapping_sub(seen) >= 3
            });
        assert_eq!(got, IntrWait::Triggered(seen.wrapping_add(3)));
        let wr = sender.join().unwrap();
        // The owner polled with the set that holds the flow: the daemon keeps away once more,
        // then reads (nobody polls now). A flow that joined later is the daemon's.
        assert!(daemon.owner_reads(gen, &mut polls));
        assert!(!daemon.owner_reads(gen, &mut polls));
        let later = daemon.flows_changed();
        let mut polls2 = polls.wrapping_sub(1);
        assert!(!daemon.owner_reads(later, &mut polls2));
        // A trigger the daemon counts (another flow) wakes an owner that polls its flows.
        let d = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            daemon.trigger().unwrap();
            daemon
        });
        let seen = owner.triggers();
        let got =
            owner.wait_owned(Duration::ZERO, Some(Duration::from_secs(5)), &fds, gen, &mut on_flow, |n| {
                n != seen
            });
        assert!(matches!(got, IntrWait::Triggered(_)));
        let daemon = d.join().unwrap();
        // The flow's end drops it from the wait; the wait still times out as asked.
        drop(wr);
        let got = owner.wait_owned(
            Duration::from_micros(200),
            Some(Duration::from_millis(30)),
            &fds,
            gen,
            &mut on_flow,
            |_| false,
        );
        assert_eq!(got, IntrWait::TimedOut);
        // A time-out with a part of a millisecond is waited out whole (the sub-millisecond
        // slice itself is checked by `sync`'s `poll_for` test).
        let t = Instant::now();
        let got = owner.wait_owned(
            Duration::ZERO,
            Some(Duration::from_micros(2500)),
            &fds,
            gen,
            &mut on_flow,
            |_| false,
        );
        assert_eq!(got, IntrWait::TimedOut);
        assert!(t.elapsed() >= Duration::from_micros(2500), "timed out after {:?}", t.elapsed());
        // A removed interrupt's flows are the daemon's.
        daemon.remove();
        let mut polls = 0;
        assert!(!daemon.owner_reads(gen, &mut polls));
    }
}
