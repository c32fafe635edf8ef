//! The shared page of a DMA queue: descriptors go from a process to its daemon's DMA engine
//! and completion comes back, through memory and futexes, with no socket on the path.
//!
//! ```text
//!  0 state          u32  futex word: IDLE, POSTED, DONE, ERROR, ABORTED (the DMA_* consts)
//!  4 worker_waiting u32  the engine is blocked waiting for a post
//!  8 client_waiting u32  a process thread is blocked waiting for completion
//! 12 abort          u32  the process asks the engine to stop
//! 16 armed          u32  a callback listens on the eventfd
//! 20 count          u32  descriptors in the posted job
//! 24 error          u32  why a job ended in ERROR (the DMA_ERR_* consts)
//! 28 closed         u32  the daemon removed the queue: the engine stops
//! 64 descriptors    count × 48 bytes: local u64, remote u64, local_off u64,
//!                   remote_off u64, size u64, flags u32, pad u32
//! ```
//!
//! The engine copies the descriptors out of the page before it checks them, so a process
//! that rewrites the page during a job cannot make the engine touch anything it did not
//! check.

use crate::sync::{futex_wake_all, spin_then_block, EventFd, WaitOutcome};
use crate::{Mapping, Memfd};
use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Queue state: nothing posted.
pub const DMA_IDLE: u32 = 0;
/// Queue state: posted, the engine works on it.
pub const DMA_POSTED: u32 = 1;
/// Queue state: every descriptor completed.
pub const DMA_DONE: u32 = 2;
/// Queue state: a descriptor failed.
pub const DMA_ERROR: u32 = 3;
/// Queue state: aborted on request.
pub const DMA_ABORTED: u32 = 4;

/// Descriptor flag: copy from the remote segment into the local side.
pub const DMA_F_READ: u32 = 1;
/// Descriptor flag: the local side is an address in the posting process, not a segment.
pub const DMA_F_USER_MEM: u32 = 2;

/// Error detail: an offset or size outside its segment.
pub const DMA_ERR_RANGE: u32 = 1;
/// Error detail: the local segment is not prepared (or unknown).
pub const DMA_ERR_NOT_PREPARED: u32 = 2;
/// Error detail: the remote connection is gone.
pub const DMA_ERR_NOT_CONNECTED: u32 = 3;
/// Error detail: the copy failed (e.g. user memory unreadable).
pub const DMA_ERR_TRANSFER: u32 = 4;
/// Error detail: the descriptor list is malformed.
pub const DMA_ERR_INVALID: u32 = 5;

const STATE: usize = 0;
const WORKER_WAITING: usize = 4;
const CLIENT_WAITING: usize = 8;
const ABORT: usize = 12;
const ARMED: usize = 16;
const COUNT: usize = 20;
const ERROR: usize = 24;
const CLOSED: usize = 28;
const DESCS: usize = 64;
const DESC_SIZE: usize = 48;
/// The most descriptors one queue holds.
pub const MAX_ENTRIES: u32 = 1 << 16;

/// One transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DmaDesc {
    /// Local segment handle, or the address in the posting process with [`DMA_F_USER_MEM`].
    pub local: u64,
    /// Remote connection handle.
    pub remote: u64,
    /// Offset in the local segment (0 for user memory).
    pub local_off: u64,
    /// Offset in the remote segment.
    pub remote_off: u64,
    /// Bytes.
    pub size: u64,
    /// `DMA_F_*`.
    pub flags: u32,
}

/// The size of the page for `max` descriptors.
pub fn page_bytes(max: u32) -> usize {
    crate::page_round_up(DESCS + max as usize * DESC_SIZE)
}

/// A mapped DMA queue page plus its completion eventfd.
#[derive(Debug)]
pub struct DmaPage {
    map: Mapping,
    event: EventFd,
    max: u32,
}

impl DmaPage {
    /// Create the memfd of a queue page for `max` descriptors (daemon side).
    ///
    /// # Errors
    /// `EINVAL` for `max` of 0 or above [`MAX_ENTRIES`]; the errno of `memfd_create`.
    pub fn create(max: u32) -> io::Result<Memfd> {
        if max == 0 || max > MAX_ENTRIES {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
        }
        Memfd::create("dma-queue", page_bytes(max) as u64)
    }

    /// Map a queue page for `max` descriptors.
    ///
    /// # Errors
    /// `EINVAL` when the memfd is too small; the errno of `mmap`.
    pub fn open(memfd: &Memfd, event: EventFd, max: u32) -> io::Result<DmaPage> {
        let len = page_bytes(max);
        if max == 0 || max > MAX_ENTRIES || memfd.size() < len as u64 {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
        }
        Ok(DmaPage { map: Mapping::new(memfd.as_fd(), 0, len, Default::default())?, event, max })
    }

    fn u32(&self, off: usize) -> &AtomicU32 {
        self.map.atomic_u32(off).expect("fixed offset inside the page")
    }

    fn u64(&self, off: usize) -> &AtomicU64 {
        self.map.atomic_u64(off).expect("fixed offset inside the page")
    }

    /// The completion eventfd.
    pub fn event(&self) -> &EventFd {
        &self.event
    }

    /// The capacity.
    pub fn max_entries(&self) -> u32 {
        self.max
    }

    /// The state word.
    pub fn state(&self) -> u32 {
        self.u32(STATE).load(Ordering::SeqCst)
    }

    /// The error detail of the last job.
    pub fn error(&self) -> u32 {
        self.u32(ERROR).load(Ordering::SeqCst)
    }

    /// Signal completions on the eventfd (a callback listens) or not.
    pub fn set_armed(&self, on: bool) {
        self.u32(ARMED).store(on as u32, Ordering::SeqCst);
    }

    /// Reset a finished queue to IDLE (process side).
    pub fn reset(&self) {
        self.u32(STATE).store(DMA_IDLE, Ordering::SeqCst);
    }

    /// Write `descs` and post them to the engine (process side).
    ///
    /// # Errors
    /// `EINVAL` when there are none or more than the queue holds.
    pub fn post(&self, descs: &[DmaDesc]) -> io::Result<()> {
        if descs.is_empty() || descs.len() > self.max as usize {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
        }
        for (i, d) in descs.iter().enumerate() {
            let o = DESCS + i * DESC_SIZE;
            for (k, v) in [d.local, d.remote, d.local_off, d.remote_off, d.size].into_iter().enumerate() {
                self.u64(o + k * 8).store(v, Ordering::Relaxed);
            }
            self.u32(o + 40).store(d.flags, Ordering::Relaxed);
        }
        self.u32(COUNT).store(descs.len() as u32, Ordering::Relaxed);
        self.u32(ERROR).store(0, Ordering::Relaxed);
        self.u32(ABORT).store(0, Ordering::Relaxed);
        let st = self.u32(STATE);
        st.store(DMA_POSTED, Ordering::SeqCst);
        if self.u32(WORKER_WAITING).load(Ordering::SeqCst) > 0 {
            futex_wake_all(st);
        }
        Ok(())
    }

    /// Wait for the posted job to end (process side); returns the final state, or `None`
    /// when the time ran out.
    pub fn wait_done(&self, spin: Duration, timeout: Option<Duration>) -> Option<u32> {
        let st = self.u32(STATE);
        match spin_then_block(st, self.u32(CLIENT_WAITING), spin, timeout, || {
            st.load(Ordering::SeqCst) != DMA_POSTED
        }) {
            WaitOutcome::Ready => Some(st.load(Ordering::SeqCst)),
            WaitOutcome::TimedOut => None,
        }
    }

    /// Ask the engine to stop the posted job (process side).
    pub fn request_abort(&self) {
        self.u32(ABORT).store(1, Ordering::SeqCst);
    }

    /// Whether an abort was requested (engine side).
    pub fn abort_requested(&self) -> bool {
        self.u32(ABORT).load(Ordering::SeqCst) != 0
    }

    /// Wait for a post (engine side); `false` when the queue was closed.
    pub fn wait_posted(&self, spin: Duration) -> bool {
        let st = self.u32(STATE);
        let closed = self.u32(CLOSED);
        spin_then_block(st, self.u32(WORKER_WAITING), spin, None, || {
            closed.load(Ordering::SeqCst) != 0 || st.load(Ordering::SeqCst) == DMA_POSTED
        });
        closed.load(Ordering::SeqCst) == 0
    }

    /// Copy the posted descriptors out of the page (engine side). `None` for a malformed
    /// count.
    pub fn take(&self) -> Option<Vec<DmaDesc>> {
        let n = self.u32(COUNT).load(Ordering::Acquire);
        if n == 0 || n > self.max {
            return None;
        }
        Some(
            (0..n as usize)
                .map(|i| {
                    let o = DESCS + i * DESC_SIZE;
                    let g = |k: usize| self.u64(o + k * 8).load(Ordering::Relaxed);
                    DmaDesc {
                        local: g(0),
                        remote: g(1),
                        local_off: g(2),
                        remote_off: g(3),
                        size: g(4),
                        flags: self.u32(o + 40).load(Ordering::Relaxed),
                    }
                })
                .collect(),
        )
    }

    /// Finish the job with `state` and `error` and wake the process (engine side).
    pub fn complete(&self, state: u32, error: u32) {
        self.u32(ERROR).store(error, Ordering::SeqCst);
        let st = self.u32(STATE);
        st.store(state, Ordering::SeqCst);
        if self.u32(CLIENT_WAITING).load(Ordering::SeqCst) > 0 {
            futex_wake_all(st);
        }
        if self.u32(ARMED).load(Ordering::SeqCst) != 0 {
            self.event.signal();
        }
    }

    /// Close the queue: the engine's wait returns `false` (daemon side).
    pub fn close(&self) {
        self.u32(CLOSED).store(1, Ordering::SeqCst);
        futex_wake_all(self.u32(STATE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_take_complete() {
        let fd = DmaPage::create(4).unwrap();
        let ev = EventFd::new().unwrap();
        let client = DmaPage::open(&fd, ev.try_clone().unwrap(), 4).unwrap();
        let engine = DmaPage::open(&fd, ev, 4).unwrap();
        assert!(client.post(&[]).is_err());
        let d = DmaDesc { local: 1, remote: 2, local_off: 3, remote_off: 4, size: 5, flags: DMA_F_READ };
        client.post(&[d, d]).unwrap();
        assert!(engine.wait_posted(Duration::ZERO));
        assert_eq!(engine.take().unwrap(), vec![d, d]);
        client.set_armed(true);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            engine.complete(DMA_DONE, 0);
            engine
        });
        assert_eq!(client.wait_done(Duration::ZERO, Some(Duration::from_secs(5))), Some(DMA_DONE));
        let engine = t.join().unwrap();
        assert!(client.event().drain() > 0);
        engine.close();
        assert!(!engine.wait_posted(Duration::ZERO));
    }
}
