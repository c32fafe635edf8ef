//! The shared memory of one SCIF connection: two byte rings (one per direction) and the
//! words both ends and the daemon use to coordinate.
//!
//! The daemon that holds the connection creates the region and hands the memfd to both
//! ends; messages then move process to process with no daemon on the path. Side 0 is the
//! connecting end, side 1 the accepting end; ring `d` carries bytes from side `d` to side
//! `1 - d`. Each ring has one producer and one consumer; the producer owns `tail`, the
//! consumer owns `head`, both count bytes since the start, and every offset is taken
//! modulo the ring size, so a corrupt counter written by a misbehaving peer can garble
//! its own messages but never reach outside the region.

use crate::{Mapping, Memfd};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes in each direction's ring.
pub const RING: usize = 64 * 1024;
const HEADER: usize = 4096;
/// The size of a region.
pub const SIZE: usize = HEADER + 2 * RING;
const MAGIC: u64 = 0x5245_4d4f_5343_4946; // "REMOSCIF"

const fn dir_base(d: usize) -> usize {
    256 + d * 1024
}
const TAIL: usize = 0;
const HEAD: usize = 128;
const RX_SPIN: usize = 256;
const BELL_PENDING: usize = 260;
const TX_STUFFED: usize = 264;
const fn side_base(s: usize) -> usize {
    2304 + s * 256
}
const CLOSED: usize = 0;
const WIN_GEN: usize = 4;
const RMA_STARTED: usize = 64;
const RMA_DONE: usize = 72;

/// A mapped connection region.
#[derive(Debug)]
pub struct MsgRegion {
    map: Mapping,
}

impl MsgRegion {
    /// Make a new region's memfd.
    ///
    /// # Errors
    /// The errno of `memfd_create` or `mmap`.
    pub fn create() -> io::Result<Memfd> {
        let fd = Memfd::create("remora-scif-conn", SIZE as u64)?;
        let r = MsgRegion::map(fd.as_fd())?;
        r.u64(0).store(MAGIC, Ordering::Release);
        Ok(fd)
    }

    fn map(fd: BorrowedFd<'_>) -> io::Result<MsgRegion> {
        Ok(MsgRegion { map: Mapping::new(fd, 0, SIZE, Default::default())? })
    }

    /// Map a region received from a daemon.
    ///
    /// # Errors
    /// `EINVAL` when it is too small or not a region.
    pub fn open(fd: BorrowedFd<'_>) -> io::Result<MsgRegion> {
        let size = rustix::fs::fstat(fd).map(|s| s.st_size as usize).unwrap_or(0);
        if size < SIZE {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
        }
        let r = MsgRegion::map(fd)?;
        if r.u64(0).load(Ordering::Acquire) != MAGIC {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
        }
        Ok(r)
    }

    fn u64(&self, off: usize) -> &AtomicU64 {
        self.map.atomic_u64(off).expect("region words are aligned and inside")
    }

    fn u32(&self, off: usize) -> &AtomicU32 {
        self.map.atomic_u32(off).expect("region words are aligned and inside")
    }

    /// Copy as much of `data` as fits into ring `d`; returns the bytes queued.
    pub fn push(&self, d: usize, data: &[u8]) -> usize {
        let base = dir_base(d);
        let tail = self.u64(base + TAIL).load(Ordering::Relaxed);
        let head = self.u64(base + HEAD).load(Ordering::Acquire);
        let used = (tail.wrapping_sub(head) as usize).min(RING);
        let n = data.len().min(RING - used);
        if n == 0 {
            return 0;
        }
        let at = (tail % RING as u64) as usize;
        let first = n.min(RING - at);
        let ring = HEADER + d * RING;
        let _ = self.map.write(ring + at, &data[..first]);
        if first < n {
            let _ = self.map.write(ring, &data[first..n]);
        }
        self.u64(base + TAIL).store(tail.wrapping_add(n as u64), Ordering::Release);
        n
    }

    /// Take up to `out.len()` bytes from ring `d`; returns how many.
    pub fn pop(&self, d: usize, out: &mut [u8]) -> usize {
        let base = dir_base(d);
        let head = self.u64(base + HEAD).load(Ordering::Relaxed);
        let tail = self.u64(base + TAIL).load(Ordering::Acquire);
        let avail = (tail.wrapping_sub(head) as usize).min(RING);
        let n = out.len().min(avail);
        if n == 0 {
            return 0;
        }
        let at = (head % RING as u64) as usize;
        let first = n.min(RING - at);
        let ring = HEADER + d * RING;
        let _ = self.map.read(ring + at, &mut out[..first]);
        if first < n {
            let _ = self.map.read(ring, &mut out[first..n]);
        }
        self.u64(base + HEAD).store(head.wrapping_add(n as u64), Ordering::Release);
        n
    }

    /// Bytes waiting in ring `d`.
    pub fn queued(&self, d: usize) -> usize {
        let base = dir_base(d);
        let tail = self.u64(base + TAIL).load(Ordering::Acquire);
        let head = self.u64(base + HEAD).load(Ordering::Acquire);
        (tail.wrapping_sub(head) as usize).min(RING)
    }

    /// Free bytes in ring `d`.
    pub fn room(&self, d: usize) -> usize {
        RING - self.queued(d)
    }

    /// Raised by ring `d`'s consumer while it spins in a receive: producers skip the bell.
    pub fn rx_spin(&self, d: usize) -> &AtomicU32 {
        self.u32(dir_base(d) + RX_SPIN)
    }

    /// Raised while a bell byte for ring `d` waits in the consumer's descriptor.
    pub fn bell_pending(&self, d: usize) -> &AtomicU32 {
        self.u32(dir_base(d) + BELL_PENDING)
    }

    /// Raised while ring `d`'s producer has stuffed its descriptor (ring full).
    pub fn tx_stuffed(&self, d: usize) -> &AtomicU32 {
        self.u32(dir_base(d) + TX_STUFFED)
    }

    /// Non-zero once side `s` closed (or its process died).
    pub fn closed(&self, s: usize) -> &AtomicU32 {
        self.u32(side_base(s) + CLOSED)
    }

    /// Bumped by the daemon whenever side `s`'s registered windows change.
    pub fn win_gen(&self, s: usize) -> &AtomicU32 {
        self.u32(side_base(s) + WIN_GEN)
    }

    /// RMAs side `s` has started.
    pub fn rma_started(&self, s: usize) -> &AtomicU64 {
        self.u64(side_base(s) + RMA_STARTED)
    }

    /// RMAs side `s` has finished.
    pub fn rma_done(&self, s: usize) -> &AtomicU64 {
        self.u64(side_base(s) + RMA_DONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_wrap_in_order() {
        let fd = MsgRegion::create().unwrap();
        let a = MsgRegion::open(fd.as_fd()).unwrap();
        let b = MsgRegion::open(fd.as_fd()).unwrap();
        let data: Vec<u8> = (0..RING * 3).map(|i| (i % 251) as u8).collect();
        let (mut sent, mut got) = (0, Vec::new());
        let mut buf = vec![0u8; 10_000];
        while got.len() < data.len() {
            sent += a.push(0, &data[sent..(sent + 7_000).min(data.len())]);
            let n = b.pop(0, &mut buf);
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, data);
        assert_eq!(b.queued(0), 0);
        assert_eq!(a.push(0, &vec![0u8; RING + 5]), RING);
        assert_eq!(a.room(0), 0);
        assert_eq!(b.queued(1), 0);
    }

    #[test]
    fn rejects_foreign_memory() {
        let fd = Memfd::create("not-a-region", SIZE as u64).unwrap();
        assert!(MsgRegion::open(fd.as_fd()).is_err());
    }
}
