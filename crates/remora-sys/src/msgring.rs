//! The shared memory of one SCIF connection: two message rings (one per direction) and
//! the words both ends and the daemon use to coordinate.
//!
//! The daemon that holds the connection creates the region and hands the memfd to both
//! ends; messages then move process to process with no daemon on the path. Side 0 is the
//! connecting end, side 1 the accepting end; ring `d` carries bytes from side `d` to side
//! `1 - d`.
//!
//! A ring is a power of two of cache-line slots. A slot holds a sequence word, a *waiter* word, a
//! length and up to [`PAYLOAD`] bytes, so one line carries both the data and the signal
//! that it is there: the receiver polls the one slot it expects, and a message costs the
//! transfer of that line and little else. The receiver writes the sequence number it
//! waits for into the slot's waiter word before it spins; a sender that finds it there
//! knows the receiver is watching and need not ring the doorbell. Each ring has one
//! producer and one consumer; the producer's and consumer's positions live on lines of
//! their own and are read across only when the ring looks full. Offsets are taken modulo
//! the ring size and lengths are clamped, so a misbehaving peer can garble its own
//! messages but never reach outside the region.
//!
//! A ring's *queue* is MPSS's endpoint queue (`SCIF_ENDPT_QP_SIZE`, 4 KiB by default;
//! `REMORA_SCIF_QUEUE_BYTES`), and like MPSS's circular buffer it holds one byte less than
//! its size of payload that the consumer has not taken (4095 bytes by default): the
//! producer counts the bytes it queued, the consumer the bytes it took, each on its own
//! line beside its slot index. Slot headers do not count. Up to [`EXACT_QUEUE`] bytes a ring has a
//! slot for every byte of its queue, so the queue is exact whatever the sizes of the
//! messages; above, it has a slot for every [`PAYLOAD`] bytes (rounded up to a power of
//! two, at least [`EXACT_QUEUE`]), and many messages shorter than that may fill the
//! slots first. The region's header records the queue; each end reads it once.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::{Mapping, Memfd};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

mod rma;
pub use rma::{RmaTicket, RMA_OWNERS, RMA_RING_BITS, RMA_STALL};

const SLOT: usize = 64;
/// Payload bytes per slot.
pub const PAYLOAD: usize = SLOT - 12;
const HEADER: usize = 4096;
/// Up to this many queue bytes a ring has a slot per byte (the queue is exact whatever
/// the message sizes).
pub const EXACT_QUEUE: usize = 65536;
const MAGIC: u64 = 0x5245_4d4f_5343_4946; // "REMOSCIF"
                                          // The header's record of the queue, written before the magic.
const G_QUEUE: usize = 8;

/// The slots of each ring of a region whose queue is `queue` bytes (a power of two).
pub const fn slots_for(queue: usize) -> usize {
    let s = if queue <= EXACT_QUEUE {
        queue
    } else {
        let per_payload = queue.div_ceil(PAYLOAD);
        if per_payload > EXACT_QUEUE {
            per_payload
        } else {
            EXACT_QUEUE
        }
    };
    s.next_power_of_two()
}

/// The bytes of a region whose queue is `queue` bytes.
pub const fn size_for(queue: usize) -> usize {
    HEADER + 2 * slots_for(queue) * SLOT
}

/// A queue size within `REMORA_SCIF_QUEUE_BYTES`' bounds.
fn valid_queue(queue: u64) -> bool {
    (remora_config::SCIF_QUEUE_MIN as u64..=remora_config::SCIF_QUEUE_MAX as u64).contains(&queue)
}

/// Directions and sides are 0 or 1; anything else is folded into that range, so no caller
/// can reach outside the region.
const fn dir_base(d: usize) -> usize {
    256 + (d & 1) * 1024
}
// The producer's line: next message index, cached consumer position, bytes ever queued,
// cached bytes ever taken.
const TAIL: usize = 0;
const HEAD_CACHE: usize = 8;
const PUT: usize = 16;
const TAKEN_CACHE: usize = 24;
// The consumer's line: slot index, bytes taken from that slot, bytes ever taken.
const HEAD: usize = 128;
const HEAD_OFF: usize = 136;
const TAKEN: usize = 144;
// Rarely written words.
const BELL_PENDING: usize = 256;
const TX_STUFFED: usize = 260;
const fn side_base(s: usize) -> usize {
    2304 + (s & 1) * 256
}
const CLOSED: usize = 0;
const WIN_GEN: usize = 4;
const RMA_STARTED: usize = 64;
const RMA_DONE: usize = 72;
const RMA_ADVANCING: usize = 80;
// The RMA completion rings (see `rma`): one per side, after the side words.
const fn rma_ring_base(s: usize) -> usize {
    2816 + (s & 1) * (RMA_RING_BITS as usize / 8)
}
// The owners of the RMAs in flight (see `rma`): one table per side, after the rings.
const fn rma_owner_base(s: usize) -> usize {
    3840 + (s & 1) * (rma::RMA_OWNERS * 8)
}
// Within a slot.
const S_SEQ: usize = 0;
const S_WAITER: usize = 4;
const S_LEN: usize = 8;
const S_DATA: usize = 12;
/// In a slot's length word: more slots of the same push follow.
const CONT: u32 = 1 << 31;

/// How long the two unfenced races of a ring are watched for (see `settle_wait` and
/// `stuffed_wait`): far longer than a store takes to become visible.
pub const RACE: std::time::Duration = std::time::Duration::from_micros(3);

/// Whether `cond` holds within [`RACE`], spinning.
fn within_race(cond: impl Fn() -> bool) -> bool {
    let t = std::time::Instant::now();
    loop {
        if cond() {
            return true;
        }
        if t.elapsed() >= RACE {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// The first slot of a push that no consumer was watching. It names the slot by ring and
/// index, never by offset: asked of another region, it reaches only that region's slots.
#[derive(Debug, Clone, Copy)]
pub struct Unseen {
    d: usize,
    seq: u32,
    index: u64,
}

/// A mapped connection region.
#[derive(Debug)]
pub struct MsgRegion {
    map: Mapping,
    /// Slots per ring less one (a power of two less one), read once at open: nothing a peer
    /// writes later moves an offset outside the mapping.
    mask: u64,
    /// Bytes of one ring.
    ring: usize,
    /// The queue's size ([`MsgRegion::queue`]).
    queue: u64,
    /// The payload bytes a ring holds that its consumer has not taken: `queue - 1`.
    cap: u64,
}

fn einval() -> io::Error {
    io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error())
}

impl MsgRegion {
    /// Make a new region's memfd, whose rings hold `queue` payload bytes each (clamped to
    /// `REMORA_SCIF_QUEUE_BYTES`' bounds).
    ///
    /// # Errors
    /// The errno of `memfd_create` or `mmap`.
    pub fn create(queue: usize) -> io::Result<Memfd> {
        let queue = queue.clamp(remora_config::SCIF_QUEUE_MIN, remora_config::SCIF_QUEUE_MAX);
        let fd = Memfd::create("remora-scif-conn", size_for(queue) as u64)?;
        let r = MsgRegion::map(fd.as_fd(), queue)?;
        r.u64(G_QUEUE).store(queue as u64, Ordering::Relaxed);
        r.u64(0).store(MAGIC, Ordering::Release);
        Ok(fd)
    }

    fn map(fd: BorrowedFd<'_>, queue: usize) -> io::Result<MsgRegion> {
        let slots = slots_for(queue);
        Ok(MsgRegion {
            map: Mapping::new(fd, 0, size_for(queue), Default::default())?,
            mask: slots as u64 - 1,
            ring: slots * SLOT,
            queue: queue as u64,
            cap: queue as u64 - 1,
        })
    }

    /// Map a region received from a daemon.
    ///
    /// # Errors
    /// `EINVAL` when it is too small or not a region.
    pub fn open(fd: BorrowedFd<'_>) -> io::Result<MsgRegion> {
        let size = rustix::fs::fstat(fd).map(|s| s.st_size as usize).unwrap_or(0);
        if size < HEADER {
            return Err(einval());
        }
        let mut head = [0u8; 16];
        loop {
            match rustix::io::pread(fd, &mut head, 0) {
                Err(rustix::io::Errno::INTR) => continue,
                r => {
                    r.map_err(io::Error::from)?;
                    break;
                }
            }
        }
        let word = |i: usize| u64::from_ne_bytes(head[i..i + 8].try_into().expect("8 bytes"));
        let queue = word(G_QUEUE);
        if word(0) != MAGIC || !valid_queue(queue) || size < size_for(queue as usize) {
            return Err(einval());
        }
        let r = MsgRegion::map(fd, queue as usize)?;
        // The magic is stored last at creation: seen (Acquire), the queue word is settled.
        if r.u64(0).load(Ordering::Acquire) != MAGIC || r.u64(G_QUEUE).load(Ordering::Relaxed) != queue {
            return Err(einval());
        }
        Ok(r)
    }

    /// The size of each ring's queue (MPSS's `SCIF_ENDPT_QP_SIZE`).
    pub fn queue(&self) -> usize {
        self.queue as usize
    }

    /// The payload bytes each ring holds that its consumer has not taken: one less than
    /// the queue's size, as in MPSS's circular buffer.
    pub fn capacity(&self) -> usize {
        self.cap as usize
    }

    /// The word at `off`. Every caller passes a constant of the layout above or a slot
    /// offset computed modulo the ring size, so `off` is inside the region and aligned.
    #[inline(always)]
    fn u64(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off + 8 <= self.map.len() && off.is_multiple_of(8));
        // SAFETY: the region is a live, writable, page-aligned mapping of `size_for(queue)`
        // bytes (made so at map); `off` is inside it and 8-aligned (see above); the
        // reference lives no longer than `self`, which owns the mapping. Shared mutation
        // through atomics is what the region is for.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU64) }
    }

    #[inline(always)]
    fn u32(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off + 4 <= self.map.len() && off.is_multiple_of(4));
        // SAFETY: as in `u64`, with 4-byte alignment.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU32) }
    }

    /// The offset of ring `d`'s slot for message `index`: inside the mapping, as `mask`
    /// and `ring` were fixed at map time from the mapping's own size.
    #[inline(always)]
    fn slot(&self, d: usize, index: u64) -> usize {
        HEADER + (d & 1) * self.ring + (index & self.mask) as usize * SLOT
    }

    /// Queue as much of `data` as fits in ring `d` (its slots, and its queue of bytes the
    /// consumer has not taken). Returns the bytes queued and, when the receiver was not
    /// watching the first slot written, that slot: ring the receiver unless
    /// [`MsgRegion::noticed`] says it has looked since.
    pub fn push(&self, d: usize, data: &[u8]) -> (usize, Option<Unseen>) {
        let base = dir_base(d);
        let slots = self.mask + 1;
        let mut tail = self.u64(base + TAIL).load(Ordering::Relaxed);
        let mut head = self.u64(base + HEAD_CACHE).load(Ordering::Relaxed);
        let mut put = self.u64(base + PUT).load(Ordering::Relaxed);
        let mut taken = self.u64(base + TAKEN_CACHE).load(Ordering::Relaxed);
        let mut first = None;
        let mut sent = 0;
        while sent < data.len() {
            // Bytes first: the consumer publishes its slot index before its byte count, so
            // a fresh byte count comes with a slot index at least as fresh.
            let mut out = put.wrapping_sub(taken);
            if out >= self.cap {
                taken = self.u64(base + TAKEN).load(Ordering::Acquire);
                self.u64(base + TAKEN_CACHE).store(taken, Ordering::Relaxed);
                out = put.wrapping_sub(taken);
                if out >= self.cap {
                    break;
                }
            }
            if tail.wrapping_sub(head) >= slots {
                head = self.u64(base + HEAD).load(Ordering::Acquire);
                self.u64(base + HEAD_CACHE).store(head, Ordering::Relaxed);
                if tail.wrapping_sub(head) >= slots {
                    break;
                }
            }
            let at = self.slot(d, tail);
            let n = (data.len() - sent).min(PAYLOAD).min((self.cap - out) as usize);
            let _ = self.map.write(at + S_DATA, &data[sent..sent + n]);
            // More slots of this push follow: a consumer that stops after this slot must
            // not assume the ring is empty (no doorbell was rung for them).
            let more = if sent + n < data.len() { CONT } else { 0 };
            self.u32(at + S_LEN).store(n as u32 | more, Ordering::Relaxed);
            let seq = tail.wrapping_add(1) as u32;
            self.u32(at + S_SEQ).store(seq, Ordering::Release);
            first.get_or_insert((at, seq, tail));
            tail = tail.wrapping_add(1);
            put = put.wrapping_add(n as u64);
            sent += n;
        }
        // No barrier between publishing and reading the waiter word (it would stall every
        // send until the slot's line arrives): a consumer that stops watching looks at the
        // ring for a moment longer before it sleeps (`settle_wait`), so a message whose
        // sender read a stale waiter word is still seen.
        self.u64(base + TAIL).store(tail, Ordering::Relaxed);
        self.u64(base + PUT).store(put, Ordering::Relaxed);
        let unseen = match first {
            Some((at, seq, index)) => {
                (self.u32(at + S_WAITER).load(Ordering::SeqCst) != seq).then_some(Unseen { d, seq, index })
            }
            None => None,
        };
        (sent, unseen)
    }

    /// Whether the consumer has, since [`MsgRegion::push`], started watching the slot or
    /// taken it (then it will keep its descriptor's readiness right itself).
    pub fn noticed(&self, u: &Unseen) -> bool {
        // The slot from the ring's own mask: an `Unseen` of a larger region (the fuzz
        // target `scif_ring` re-opened one whose header a peer rewrote) stays inside this one.
        self.u32(self.slot(u.d, u.index) + S_WAITER).load(Ordering::SeqCst) == u.seq
            || self.u64(dir_base(u.d) + HEAD).load(Ordering::Acquire).wrapping_sub(u.index) as i64 > 0
    }

    /// Take up to `out.len()` bytes from ring `d`; returns how many.
    pub fn pop(&self, d: usize, out: &mut [u8]) -> usize {
        self.pop_ex(d, out).0
    }

    /// [`MsgRegion::pop`], also telling whether the consumer stopped inside a push (in a
    /// slot, or after a slot that more of the same push follows): then bytes may be
    /// waiting that no doorbell announced.
    pub fn pop_ex(&self, d: usize, out: &mut [u8]) -> (usize, bool) {
        let base = dir_base(d);
        let mut head = self.u64(base + HEAD).load(Ordering::Relaxed);
        let mut off = self.u32(base + HEAD_OFF).load(Ordering::Relaxed) as usize;
        let mut got = 0;
        let mut inside = off > 0;
        while got < out.len() {
            let at = self.slot(d, head);
            if self.u32(at + S_SEQ).load(Ordering::Acquire) != head.wrapping_add(1) as u32 {
                break;
            }
            let word = self.u32(at + S_LEN).load(Ordering::Relaxed);
            let len = ((word & !CONT) as usize).min(PAYLOAD);
            if off < len {
                let n = (len - off).min(out.len() - got);
                let _ = self.map.read(at + S_DATA + off, &mut out[got..got + n]);
                got += n;
                off += n;
            }
            if off >= len {
                head = head.wrapping_add(1);
                off = 0;
                inside = word & CONT != 0;
            } else {
                inside = true;
            }
        }
        self.u32(base + HEAD_OFF).store(off as u32, Ordering::Relaxed);
        // No barrier here (it would sit on every message's path): a producer that finds
        // the ring full watches it for a moment after raising its stuffed flag (see
        // `stuffed_wait`), so a release it races with is never missed. The slot index
        // goes first (see `push`).
        self.u64(base + HEAD).store(head, Ordering::Release);
        let taken = self.u64(base + TAKEN).load(Ordering::Relaxed);
        self.u64(base + TAKEN).store(taken.wrapping_add(got as u64), Ordering::Release);
        (got, inside)
    }

    /// Whether ring `d` holds bytes for its consumer.
    pub fn has_data(&self, d: usize) -> bool {
        let head = self.u64(dir_base(d) + HEAD).load(Ordering::Acquire);
        self.u32(self.slot(d, head) + S_SEQ).load(Ordering::Acquire) == head.wrapping_add(1) as u32
    }

    /// For a consumer that just withdrew its watch on ring `d`: whether bytes arrive
    /// within [`RACE`] (a producer may have read the waiter word before its slot became
    /// visible, and so not rung; its slot becomes visible within a microsecond).
    pub fn settle_wait(&self, d: usize) -> bool {
        within_race(|| self.has_data(d))
    }

    /// For a producer that just raised its stuffed flag on ring `d` (after a full
    /// barrier): whether a slot frees within [`RACE`] — a consumer may have released slots
    /// an instant before without seeing the flag (its release and its look at the flag
    /// are not ordered), and such a release becomes visible within a microsecond.
    pub fn stuffed_wait(&self, d: usize) -> bool {
        within_race(|| self.has_room(d))
    }

    /// Whether ring `d` has room for a byte of its producer (a free slot, and its queue
    /// not full).
    pub fn has_room(&self, d: usize) -> bool {
        let base = dir_base(d);
        let put = self.u64(base + PUT).load(Ordering::Relaxed);
        let taken = self.u64(base + TAKEN).load(Ordering::Acquire);
        let tail = self.u64(base + TAIL).load(Ordering::Relaxed);
        let head = self.u64(base + HEAD).load(Ordering::Acquire);
        put.wrapping_sub(taken) < self.cap && tail.wrapping_sub(head) <= self.mask
    }

    /// The consumer of ring `d` announces (`true`) or withdraws (`false`) that it watches
    /// the next slot, so senders need not ring. Sequentially consistent: a sender either
    /// sees the announcement or its message is seen by the consumer's next check.
    pub fn watch(&self, d: usize, on: bool) {
        let head = self.u64(dir_base(d) + HEAD).load(Ordering::Relaxed);
        let v = if on { head.wrapping_add(1) as u32 } else { 0 };
        self.u32(self.slot(d, head) + S_WAITER).swap(v, Ordering::SeqCst);
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

    /// RMAs side `s` has finished, in ticket order: every RMA whose ticket (the value of
    /// [`MsgRegion::rma_started`] it took) is below it has completed.
    pub fn rma_done(&self, s: usize) -> &AtomicU64 {
        self.u64(side_base(s) + RMA_DONE)
    }

    /// The word of side `s`'s completion ring that holds the bit of `ticket`, and the bit.
    fn rma_bit(&self, s: usize, ticket: u64) -> (&AtomicU64, u64) {
        let bit = ticket % RMA_RING_BITS;
        (self.u64(rma_ring_base(s) + (bit / 64) as usize * 8), 1 << (bit % 64))
    }

    /// The pid of the process whose thread advances side `s`'s [`MsgRegion::rma_done`],
    /// 0 when none does.
    fn rma_advancing(&self, s: usize) -> &AtomicU32 {
        self.u32(side_base(s) + RMA_ADVANCING)
    }

    /// Entry `i` (modulo [`rma::RMA_OWNERS`]) of side `s`'s table of RMA owners.
    fn rma_owner(&self, s: usize, i: usize) -> &AtomicU64 {
        self.u64(rma_owner_base(s) + (i % rma::RMA_OWNERS) * 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(queue: usize) -> (MsgRegion, MsgRegion) {
        let fd = MsgRegion::create(queue).unwrap();
        (MsgRegion::open(fd.as_fd()).unwrap(), MsgRegion::open(fd.as_fd()).unwrap())
    }

    #[test]
    fn bytes_wrap_in_order() {
        let (a, b) = pair(4096);
        let ring = slots_for(4096) * SLOT;
        let data: Vec<u8> = (0..ring * 3).map(|i| (i % 251) as u8).collect();
        let (mut sent, mut got) = (0, Vec::new());
        let mut buf = vec![0u8; 777];
        while got.len() < data.len() {
            sent += a.push(0, &data[sent..(sent + 7_000).min(data.len())]).0;
            let n = b.pop(0, &mut buf);
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, data);
        assert!(!b.has_data(0));
        assert_eq!(a.push(0, &vec![0u8; ring * 2]).0, 4095, "the queue, not the slots, bounds it");
        assert!(!a.has_room(0));
        assert!(!b.has_data(1));
    }

    #[test]
    fn the_queue_counts_payload_bytes_only() {
        for queue in [256, 4096, 5000, 16384] {
            let (a, b) = pair(queue);
            assert_eq!(a.queue(), queue);
            let cap = queue - 1;
            assert_eq!(a.capacity(), cap);
            // One-byte messages: exactly `queue - 1` of them, whatever a slot costs.
            for i in 0..cap {
                assert_eq!(a.push(1, &[i as u8]).0, 1, "message {i} of {queue}");
            }
            assert_eq!(a.push(1, b"x").0, 0, "full at {queue}");
            assert!(!a.has_room(1));
            // Taking 3 bytes (part of no slot boundary) frees exactly 3.
            let mut buf = [0u8; 3];
            assert_eq!(b.pop(1, &mut buf), 3);
            assert!(a.has_room(1));
            assert_eq!(a.push(1, b"abcdef").0, 3);
            let mut all = vec![0u8; queue + 10];
            assert_eq!(b.pop(1, &mut all), cap);
            assert!((0..cap - 3).all(|i| all[i] == (i + 3) as u8));
            assert_eq!(&all[cap - 3..cap], b"abc");
            // Large messages fill it exactly too.
            assert_eq!(a.push(1, &vec![7u8; queue * 2]).0, cap);
        }
    }

    #[test]
    fn large_queues_have_a_slot_per_payload() {
        assert_eq!(slots_for(4096), 4096);
        assert_eq!(slots_for(5000), 8192);
        assert_eq!(slots_for(EXACT_QUEUE), EXACT_QUEUE);
        assert_eq!(slots_for(EXACT_QUEUE + 1), EXACT_QUEUE);
        assert_eq!(slots_for(16 << 20), ((16usize << 20).div_ceil(PAYLOAD)).next_power_of_two());
        let (a, _b) = pair(1 << 20);
        assert_eq!(a.push(0, &vec![1u8; 3 << 20]).0, (1 << 20) - 1);
    }

    #[test]
    fn a_watching_consumer_needs_no_bell() {
        let (r, _) = pair(4096);
        assert!(r.push(1, b"x").1.is_some(), "nobody watches: ring");
        let mut b = [0u8; 1];
        assert_eq!(r.pop(1, &mut b), 1);
        r.watch(1, true);
        assert!(r.push(1, b"y").1.is_none(), "the consumer watches the slot");
        r.pop(1, &mut b);
        r.watch(1, true);
        r.watch(1, false);
        let u = r.push(1, b"z").1.expect("withdrawn: ring again");
        assert!(!r.noticed(&u));
        r.watch(1, true);
        assert!(r.noticed(&u), "watching now");
    }

    #[test]
    fn an_unseen_of_another_region_stays_inside() {
        // Regression (fuzz target `scif_ring`, fuzz/seeds/scif_ring/crash-foreign-unseen):
        // the slot of an `Unseen` of a larger region was read at its offset, outside this one.
        let (big, _) = pair(4096);
        let (small, _) = pair(256);
        let u = big.push(1, b"x").1.expect("nobody watches");
        assert!(!small.noticed(&u));
    }

    #[test]
    fn rejects_foreign_memory() {
        let fd = Memfd::create("not-a-region", size_for(4096) as u64).unwrap();
        assert!(MsgRegion::open(fd.as_fd()).is_err());
        // A region whose header claims more than the memfd holds.
        let fd = MsgRegion::create(4096).unwrap();
        let r = MsgRegion::open(fd.as_fd()).unwrap();
        r.u64(G_QUEUE).store(1 << 20, Ordering::Relaxed);
        assert!(MsgRegion::open(fd.as_fd()).is_err());
        r.u64(G_QUEUE).store(7, Ordering::Relaxed);
        assert!(MsgRegion::open(fd.as_fd()).is_err());
    }
}
