//! A pager flow's thread kept on the core its frames come in on (`SO_INCOMING_CPU`: on a
//! loopback or veth stream, the core of the thread that sent them).
//!
//! The thread sleeps in `recv` between frames; where the scheduler wakes it is its last
//! core unless the waker's core looks lighter, and on a machine whose cores all run
//! spinners (a DSM ping-pong: two programs polling their segments, two pagers spinning
//! after a change) it stays wherever it first landed. Landing on the reader's core rather
//! than the writing pager's made the two-core loopback ping-pong bimodal, run to run:
//! about 12 µs one-way with each home's flow thread on its writer's core, 28-33 µs with it
//! on the reader's (each wake a cross-core wake-up, then a turn among the reader's
//! spinners). Holding the thread to the core its frames came in on — once two frames
//! running came in on the same other core, after the answer went, off the critical path —
//! makes the next wake a local one. Only the daemon's own thread is moved, only to cores
//! it was allowed at its start, never where only one core is allowed, only while the
//! frames are short ([`SMALL`]), and only on a map's or a DMA's flow (a VIPL channel's,
//! which a watched word marks, streams 64 KiB messages, each after a short frame: its
//! thread held to the sender's core between them made the stream across hosts half as
//! fast). At most [`MOST_PER_CORE`] threads are held to one core: on a real NIC the core
//! frames come in on is its interrupt's, the same for every flow of a single-queue card,
//! and the scheduler must stay free to spread the rest.

use remora_sys::sched::{hold_thread_to, let_thread_run_on, thread_cpus, Cpus, MAX_CPUS};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};

/// The most flow threads held to one core at once.
const MOST_PER_CORE: u16 = 2;

/// How many flow threads are held to each core (this daemon's).
static HELD: [AtomicU16; MAX_CPUS] = [const { AtomicU16::new(0) }; MAX_CPUS];

/// Frames longer than this are a stream's (RMA, a long flush): its sender and the serving
/// thread then each need a core, and holding the thread to the sender's made the 64 KiB
/// VIPL stream across hosts a third slower (0.95-1.17 of raw TCP to 0.67-0.84). A map's
/// write-through, a page fetch's request and an 8-byte DMA are shorter.
const SMALL: u64 = 4096;

/// After a long frame the thread is held again only once this many short frames came
/// running: a flow that mixes both (a flush's runs between stores) moves its thread at most
/// once in so many frames.
const SHORT_AGAIN: u32 = 64;

/// How many flow threads of this process are held to a core now.
pub(super) fn held_total() -> u32 {
    HELD.iter().map(|h| u32::from(h.load(Ordering::Acquire))).sum()
}

/// The flow's socket and where its thread is held.
pub(super) struct Follow {
    /// A duplicate of the flow's socket (the incoming core is the socket's).
    fd: OwnedFd,
    /// The cores the thread was allowed at its start.
    allowed: Cpus,
    /// The core the thread is held to, if any.
    held: Option<usize>,
    /// The core the last frame came in on.
    seen: Option<usize>,
    /// Short frames since the last long one ([`SHORT_AGAIN`] at the start).
    short: u32,
}

impl Follow {
    /// Follow the frames of the socket `fd`; `None` where the thread may run on one core
    /// only or its cores cannot be read.
    pub(super) fn new(fd: OwnedFd) -> Option<Follow> {
        let allowed = thread_cpus().ok()?;
        (allowed.count() > 1).then_some(Follow { fd, allowed, held: None, seen: None, short: SHORT_AGAIN })
    }

    /// A frame of `len` bytes was served: hold the thread to the core frames come in on,
    /// when the last two came in on the same core and it is not the one held already; let
    /// it go after a frame longer than [`SMALL`] (a stream, not a ping-pong).
    pub(super) fn served(&mut self, len: u64) {
        if len > SMALL {
            self.seen = None;
            self.short = 0;
            self.free();
            return;
        }
        self.short = self.short.saturating_add(1);
        if self.short < SHORT_AGAIN {
            return;
        }
        let Some(cpu) = remora_sys::flow::incoming_cpu(self.fd.as_fd()) else { return };
        let twice = self.seen.replace(cpu) == Some(cpu);
        if !twice || self.held == Some(cpu) {
            return;
        }
        if !self.allowed.has(cpu) {
            // Not a core of ours (a NIC's interrupt core outside the daemon's set).
            self.free();
            return;
        }
        // A place on that core first (at most `MOST_PER_CORE`), then the one held let go.
        if HELD[cpu].fetch_add(1, Ordering::AcqRel) >= MOST_PER_CORE {
            HELD[cpu].fetch_sub(1, Ordering::AcqRel);
            return;
        }
        if hold_thread_to(cpu).is_ok() {
            if let Some(old) = self.held.replace(cpu) {
                HELD[old].fetch_sub(1, Ordering::AcqRel);
            }
        } else {
            HELD[cpu].fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Let the thread run on all the cores it was allowed at its start again.
    fn free(&mut self) {
        if let Some(old) = self.held.take() {
            HELD[old].fetch_sub(1, Ordering::AcqRel);
            let _ = let_thread_run_on(&self.allowed);
        }
    }
}

impl Drop for Follow {
    /// The flow ended (its thread with it): its place on the core it was held to is free.
    fn drop(&mut self) {
        if let Some(old) = self.held.take() {
            HELD[old].fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Follow;
    use remora_sys::sched::{hold_thread_to, thread_cpus, MAX_CPUS};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// The allowed cores of the calling thread, in order.
    fn cores() -> Vec<usize> {
        let set = thread_cpus().expect("affinity");
        (0..MAX_CPUS).filter(|c| set.has(*c)).collect()
    }

    /// Send one byte on `s` from a thread held to `core`.
    fn send_from(s: &TcpStream, core: usize) {
        let mut s = s.try_clone().expect("clone");
        std::thread::spawn(move || {
            hold_thread_to(core).expect("pin the sender");
            s.write_all(&[1]).expect("send");
        })
        .join()
        .expect("sender");
    }

    /// A flow's thread goes to the core its frames come in on (a loopback stream's: the
    /// sender's) once two came from there, not after one, goes again when the sender
    /// moves, and is let go after a long frame, held again only after many short ones;
    /// fails with `served` doing nothing, holding at the first frame or holding through a
    /// stream.
    #[test]
    fn the_thread_goes_where_two_frames_running_came_from() {
        let all = cores();
        if all.len() < 2 {
            eprintln!("one core only: nothing to follow");
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let tx = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut rx, _) = l.accept().expect("accept");
        let (a, b) = (all[all.len() - 1], all[0]);
        std::thread::spawn(move || {
            let mut f = Follow::new(rx.try_clone().expect("clone").into()).expect("two cores");
            let mut byte = [0u8; 1];
            let mut frame = |f: &mut Follow| {
                rx.read_exact(&mut byte).expect("frame");
                f.served(1);
                cores()
            };
            send_from(&tx, a);
            assert_eq!(frame(&mut f), all, "one frame moves nothing");
            send_from(&tx, a);
            assert_eq!(frame(&mut f), vec![a], "held to the sender's core after two");
            send_from(&tx, b);
            assert_eq!(frame(&mut f), vec![a], "one frame from elsewhere moves nothing");
            send_from(&tx, b);
            assert_eq!(frame(&mut f), vec![b], "and two move it");
            f.served(super::SMALL + 1);
            assert_eq!(cores(), all, "a stream's frame lets it go");
            // The last of these is the first seen again.
            for _ in 0..super::SHORT_AGAIN {
                send_from(&tx, a);
                assert_eq!(frame(&mut f), all, "not held again right after a long frame");
            }
            send_from(&tx, a);
            assert_eq!(frame(&mut f), vec![a], "held again after enough short frames");
        })
        .join()
        .expect("the flow's thread");
    }

    /// No more than `MOST_PER_CORE` flow threads are held to one core: of three flows whose
    /// frames all come in on the same core, at most two hold their threads there (another
    /// test may hold one more meanwhile, never this test's third), and every place is
    /// given back when the flows end.
    #[test]
    fn no_more_than_two_threads_are_held_to_one_core() {
        let all = cores();
        if all.len() < 2 {
            eprintln!("(one core: nothing to follow)");
            return;
        }
        let a = all[all.len() - 1];
        let (mut flows, mut held) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            let tx = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
            let (mut rx, _) = l.accept().expect("accept");
            let (go, wait) = std::sync::mpsc::channel::<()>();
            let (said, heard) = std::sync::mpsc::channel::<bool>();
            std::thread::spawn(move || {
                let mut f = Follow::new(rx.try_clone().expect("clone").into()).expect("two cores");
                let mut byte = [0u8; 1];
                for _ in 0..2 {
                    rx.read_exact(&mut byte).expect("frame");
                    f.served(1);
                }
                said.send(cores() == vec![a]).expect("tell");
                // Held until the test has heard all three (the sender dropped).
                let _ = wait.recv();
                drop(f);
            });
            send_from(&tx, a);
            send_from(&tx, a);
            held.push(heard.recv().expect("the flow's thread"));
            flows.push((go, tx));
        }
        drop(flows);
        assert!(held.iter().filter(|h| **h).count() <= 2, "{held:?}: a third thread held to core {a}");
    }

    /// A thread allowed one core only is never moved.
    #[test]
    fn one_allowed_core_follows_nothing() {
        let core = cores()[0];
        std::thread::spawn(move || {
            hold_thread_to(core).expect("pin");
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            let s = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
            assert!(Follow::new(s.into()).is_none());
        })
        .join()
        .expect("thread");
    }
}
