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
//! it was allowed at its start, and never where only one core is allowed.

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
use std::os::fd::OwnedFd;

/// The flow's socket and where its thread is held.
pub(super) struct Follow {
    /// A duplicate of the flow's socket (the incoming core is the socket's).
    fd: OwnedFd,
    /// The cores the thread was allowed at its start.
    allowed: CpuSet,
    /// The core the thread is held to, if any.
    held: Option<usize>,
    /// The core the last frame came in on.
    seen: Option<usize>,
}

impl Follow {
    /// Follow the frames of the socket `fd`; `None` where the thread may run on one core
    /// only or its cores cannot be read.
    pub(super) fn new(fd: OwnedFd) -> Option<Follow> {
        let allowed = sched_getaffinity(None).ok()?;
        (allowed.count() > 1).then_some(Follow { fd, allowed, held: None, seen: None })
    }

    /// A frame was served: hold the thread to the core frames come in on, when the last
    /// two came in on the same core and it is not the one held already.
    pub(super) fn served(&mut self) {
        let Ok(cpu) = rustix::net::sockopt::socket_incoming_cpu(&self.fd) else { return };
        let cpu = cpu as usize;
        let twice = self.seen.replace(cpu) == Some(cpu);
        if !twice || self.held == Some(cpu) {
            return;
        }
        if cpu >= CpuSet::MAX_CPU || !self.allowed.is_set(cpu) {
            // Not a core of ours (a NIC's interrupt core outside the daemon's set): free.
            if self.held.take().is_some() {
                let _ = sched_setaffinity(None, &self.allowed);
            }
            return;
        }
        let mut one = CpuSet::new();
        one.set(cpu);
        if sched_setaffinity(None, &one).is_ok() {
            self.held = Some(cpu);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Follow;
    use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// The allowed cores of the calling thread, in order.
    fn cores() -> Vec<usize> {
        let set = sched_getaffinity(None).expect("affinity");
        (0..CpuSet::MAX_CPU).filter(|c| set.is_set(*c)).collect()
    }

    /// Send one byte on `s` from a thread held to `core`.
    fn send_from(s: &TcpStream, core: usize) {
        let mut s = s.try_clone().expect("clone");
        std::thread::spawn(move || {
            let mut one = CpuSet::new();
            one.set(core);
            sched_setaffinity(None, &one).expect("pin the sender");
            s.write_all(&[1]).expect("send");
        })
        .join()
        .expect("sender");
    }

    /// A flow's thread goes to the core its frames come in on (a loopback stream's: the
    /// sender's) once two came from there, not after one, and goes again when the sender
    /// moves; fails with `served` doing nothing or holding at the first frame.
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
                f.served();
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
        })
        .join()
        .expect("the flow's thread");
    }

    /// A thread allowed one core only is never moved.
    #[test]
    fn one_allowed_core_follows_nothing() {
        let core = cores()[0];
        std::thread::spawn(move || {
            let mut one = CpuSet::new();
            one.set(core);
            sched_setaffinity(None, &one).expect("pin");
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            let s = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
            assert!(Follow::new(s.into()).is_none());
        })
        .join()
        .expect("thread");
    }
}
