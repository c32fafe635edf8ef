//! One thread per process that keeps reading the flows [`super::end`] could not finish,
//! until each other end ends its side or [`REAP_LIMIT`] passed; started at the first.
//!
//! It blocks in `poll` on its flows and a bell that a new flow rings, until one of them is
//! readable (bytes, the other end's end, a break) or the next flow's time is up: a reaper
//! that holds flows whose other ends stay silent does not wake at all (it looked every
//! 100 ms before, for up to a minute after each flow it was handed). A flow that keeps
//! sending is read a bounded amount per look, and while any does the reaper looks every
//! [`BUSY_NAP`] only: a far end that floods (or keeps sending small frames, each its own
//! wake-up) must not take a core for a minute.

use super::{drain_step, Drained, REAP_LIMIT};
use crate::sync::EventFd;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::net::Shutdown;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most reads of one flow at one look.
const READS_PER_LOOK: usize = 64;
/// The most flows it reads at once: past that the oldest is shut both ways.
const MOST: usize = 4096;
/// How long the reaper naps after a look at which a flow not yet ended had bytes (a far
/// end that keeps sending), or when it cannot wait.
const BUSY_NAP: Duration = Duration::from_millis(100);

/// The reaper's books.
struct Reaper {
    /// Flows handed over and not yet taken in by the thread, with when each was handed.
    handed: Mutex<Vec<(OwnedFd, Instant)>>,
    /// Rung when a flow is handed over.
    bell: EventFd,
    /// How long a flow is read at most.
    limit: Duration,
    /// The flows the thread holds (taken in, not yet let go).
    held: AtomicUsize,
    /// How many times the thread woke (for tests).
    wakes: AtomicU64,
}

impl Reaper {
    fn new(limit: Duration) -> std::io::Result<Reaper> {
        Ok(Reaper {
            handed: Mutex::new(Vec::new()),
            bell: EventFd::new()?,
            limit,
            held: AtomicUsize::new(0),
            wakes: AtomicU64::new(0),
        })
    }

    fn hand(&self, fd: OwnedFd) {
        self.handed.lock().unwrap_or_else(|e| e.into_inner()).push((fd, Instant::now()));
        self.bell.signal();
    }

    /// The thread's loop: never returns.
    fn run(&self) {
        let mut flows: Vec<(OwnedFd, Instant)> = Vec::new();
        let mut scratch = [0u8; 4096];
        loop {
            // The bell is cleared before the flows are taken in: one handed over after
            // this rings it again, and the next wait does not sleep.
            self.bell.drain();
            flows.append(&mut self.handed.lock().unwrap_or_else(|e| e.into_inner()));
            let extra = flows.len().saturating_sub(MOST);
            for (old, _) in flows.drain(..extra) {
                let _ = rustix::net::shutdown(&old, Shutdown::Both);
            }
            let mut busy = false;
            flows.retain(|(fd, since)| {
                // What waits is read, a bounded amount per look (a far end that keeps
                // sending must not hold the others).
                let mut over = since.elapsed() >= self.limit;
                let mut reads = 0;
                while reads < READS_PER_LOOK {
                    match drain_step(fd.as_fd(), None, &mut scratch) {
                        Drained::Waiting => reads += 1,
                        Drained::Quiet => break,
                        Drained::Ended => {
                            over = true;
                            break;
                        }
                    }
                }
                busy |= reads > 0 && !over;
                if over {
                    let _ = rustix::net::shutdown(fd, Shutdown::Both);
                }
                !over
            });
            self.held.store(flows.len(), Ordering::Release);
            if busy {
                std::thread::sleep(BUSY_NAP);
            } else {
                self.wait(&flows);
            }
            self.wakes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Block until a flow is readable (or ends, or breaks), a flow is handed over, or the
    /// time of the flow handed first is up; with no flow, until one is handed over.
    fn wait(&self, flows: &[(OwnedFd, Instant)]) {
        let due = flows.iter().map(|(_, since)| *since + self.limit).min();
        let left = due.map(|d| d.saturating_duration_since(Instant::now()));
        let ts = left.map(crate::timespec);
        let mut fds = Vec::with_capacity(flows.len() + 1);
        fds.push(PollFd::new(&self.bell, PollFlags::IN));
        fds.extend(flows.iter().map(|(fd, _)| PollFd::new(fd, PollFlags::IN | PollFlags::RDHUP)));
        match poll(&mut fds, ts.as_ref()) {
            // Something to read, a flow handed over, the time up, or an interruption: the
            // loop looks, then waits again.
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            // No wait at all (out of memory, say): a nap, not a spinning loop.
            Err(_) => std::thread::sleep(BUSY_NAP),
        }
    }
}

/// The process's reaper, its thread started at the first call that can start it (`None`:
/// none could be, now — no descriptor for the bell or no thread, as when the process is out
/// of descriptors: the next call tries again, so one bad moment does not leave every later
/// flow to be shut with a reset).
fn reaper() -> Option<&'static Reaper> {
    // The reaper made (kept when its thread could not be started, so that a retry makes no
    // second bell), and whether its thread runs.
    static R: Mutex<Option<(&'static Reaper, bool)>> = Mutex::new(None);
    let mut r = R.lock().unwrap_or_else(|e| e.into_inner());
    if r.is_none() {
        *r = Reaper::new(REAP_LIMIT).ok().map(|new| (&*Box::leak(Box::new(new)), false));
    }
    let (made, running) = r.as_mut()?;
    if !*running {
        let made: &'static Reaper = made;
        *running =
            std::thread::Builder::new().name("remora-flow-reaper".into()).spawn(move || made.run()).is_ok();
    }
    running.then_some(*made)
}

/// Read `fd` until its other end ends (or [`REAP_LIMIT`]), then shut it both ways.
/// Without a thread it is shut both ways now.
pub(super) fn hand(fd: OwnedFd) {
    match reaper() {
        Some(r) => r.hand(fd),
        None => {
            let _ = rustix::net::shutdown(&fd, Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests;
