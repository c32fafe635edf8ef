//! Descriptors posted again. VIA programs keep pools of descriptors and post the same ones
//! over and over; a queue remembers how it found each of the last few (the memory their
//! segments name, where a receive's buffers lie in pieces), and when a descriptor comes
//! back with the same segments, under the same registrations, it is not looked up again.
//! The descriptor's bytes are always read afresh: only what they resolve to is reused.

use crate::few::Few;
use crate::layout::{self, control, Descriptor, CONTROL, SEGMENT};
use crate::DataSegment;
use crate::{Error, Nic, ProtectionTag, Result};
use remora_sisci::UserRegion;
use std::sync::atomic::Ordering;

/// A descriptor as the data path reads it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Taken {
    /// Its control segment.
    pub(crate) ctl: UserRegion,
    /// The whole descriptor: its control segment and its data segments.
    pub(crate) all: UserRegion,
    /// [`crate::nic::NicInner::mem_epoch`] when it was read.
    pub(crate) epoch: u64,
    pub(crate) control: u16,
    pub(crate) immediate: u32,
    /// More data segments than a descriptor may carry.
    pub(crate) too_many: bool,
    /// The address segment of an RDMA descriptor.
    pub(crate) remote: Option<DataSegment>,
    /// The memory its data segments name; `None` when one is not registered with the
    /// VI's protection tag.
    pub(crate) local: Option<Few<UserRegion, 4>>,
    /// A receive's buffers in the NIC's pieces.
    pub(crate) chunks: Few<layout::Chunk, 2>,
    /// The data segments' lengths, summed.
    pub(crate) total: u32,
}

/// Descriptors a receive queue remembers (by address: a pool of consecutive descriptors
/// up to this many all stay). A power of two, as [`SEND_WAYS`].
pub(crate) const RECV_WAYS: usize = 128;
/// Descriptors a send queue remembers.
pub(crate) const SEND_WAYS: usize = 32;
/// Most segments a remembered descriptor has.
const SEGS: usize = 4;

#[derive(Debug, Clone)]
struct Seen {
    addr: usize,
    handle: u32,
    ptag: ProtectionTag,
    rdma: bool,
    epoch: u64,
    /// The segments it had, each's 16 bytes as one word.
    segs: [u128; SEGS],
    n: usize,
    taken: Taken,
}

impl Seen {
    /// Whether this was seen at `addr` under the same handle, tag and registrations.
    #[inline(always)]
    fn is(&self, addr: usize, handle: u32, ptag: ProtectionTag, epoch: u64) -> bool {
        self.addr == addr && self.handle == handle && self.ptag == ptag && self.epoch == epoch
    }

    /// Whether this is the descriptor at `addr` seen again with the same segments, under
    /// the same handle, tag and registrations (`epoch`): its control and immediate data
    /// are read afresh into what it resolved to then.
    #[inline(always)]
    fn again(
        &mut self,
        addr: usize,
        handle: u32,
        ptag: ProtectionTag,
        recv: bool,
        epoch: u64,
    ) -> Result<bool> {
        if !self.is(addr, handle, ptag, epoch) {
            return Ok(false);
        }
        let mut c = [0u8; CONTROL];
        self.taken.ctl.read(0, &mut c)?;
        let n = Descriptor::seg_count(&c);
        let control = u16::from_le_bytes([c[14], c[15]]);
        let rdma = !recv && control & control::OP_MASK != control::OP_SENDRECV;
        if n != self.n || rdma != self.rdma {
            return Ok(false);
        }
        let mut same = true;
        for (i, w) in self.segs[..n].iter().enumerate() {
            same &= segment(&self.taken.all, i)? == *w;
        }
        if !same {
            return Ok(false);
        }
        self.taken.control = control;
        self.taken.immediate = u32::from_le_bytes([c[20], c[21], c[22], c[23]]);
        Ok(true)
    }
}

/// The descriptors a queue saw last.
#[derive(Debug, Default)]
pub(crate) struct DescCache {
    ways: Vec<Option<Seen>>,
    /// The last descriptor that could not be remembered (what [`DescCache::take`] lends;
    /// boxed, so that the cache stays small to move).
    spare: Option<Box<Taken>>,
}

const _: () = assert!(RECV_WAYS.is_power_of_two() && SEND_WAYS.is_power_of_two());

fn ways(recv: bool) -> usize {
    if recv {
        RECV_WAYS
    } else {
        SEND_WAYS
    }
}

/// What [`DescCache::take`] would answer if what it just stored were gone (it never is).
fn forgotten() -> Error {
    Error::Descriptor("the descriptor was not remembered".into())
}

/// Segment `i` of the descriptor `all` as one word (inlined: the short send compares a
/// descriptor's segments on the message's path).
#[inline(always)]
fn segment(all: &UserRegion, i: usize) -> Result<u128> {
    let mut v = [0u8; SEGMENT];
    all.read(CONTROL + i * SEGMENT, &mut v)?;
    Ok(u128::from_ne_bytes(v))
}

impl DescCache {
    /// Read the descriptor at `addr` as [`Nic::take`] does, reusing what it resolved to
    /// when it was seen last with the same segments. The answer is lent until the next
    /// call.
    pub(crate) fn take(
        &mut self,
        nic: &Nic,
        addr: usize,
        handle: u32,
        ptag: ProtectionTag,
        recv: bool,
    ) -> Result<&Taken> {
        if self.ways.is_empty() {
            self.ways.resize(ways(recv), None);
        }
        let epoch = nic.inner.mem_epoch.load(Ordering::Acquire);
        let way = self.seen_again(addr, handle, ptag, recv, epoch)?;
        if let Some(way) = way {
            return self.ways[way].as_ref().map(|s| &s.taken).ok_or_else(forgotten);
        }
        let way = self.way(addr).ok_or_else(forgotten)?;
        let t = nic.take(addr, handle, ptag, recv)?;
        let n = (t.all.len() - CONTROL) / SEGMENT;
        self.ways[way] = None;
        if n <= SEGS && !t.too_many && t.epoch == epoch {
            let mut segs = [0u128; SEGS];
            for (i, w) in segs[..n].iter_mut().enumerate() {
                *w = segment(&t.all, i)?;
            }
            let rdma = !recv && t.control & control::OP_MASK != control::OP_SENDRECV;
            let seen = self.ways[way].insert(Seen { addr, handle, ptag, rdma, epoch, segs, n, taken: t });
            return Ok(&seen.taken);
        }
        match &mut self.spare {
            Some(b) => **b = t,
            None => self.spare = Some(Box::new(t)),
        }
        self.spare.as_deref().ok_or_else(forgotten)
    }

    /// The descriptor at `addr` as it was seen last (its control and immediate data read
    /// afresh), when it comes back with the same segments under the same registrations;
    /// `None` otherwise (nothing is looked up: see [`DescCache::take`]).
    #[inline(always)]
    pub(crate) fn hit(
        &mut self,
        nic: &Nic,
        addr: usize,
        handle: u32,
        ptag: ProtectionTag,
        recv: bool,
    ) -> Option<&Taken> {
        let epoch = nic.inner.mem_epoch.load(Ordering::Acquire);
        // The way looked up once (the look answers its entry, not its index to index by
        // again).
        let way = self.way(addr)?;
        let s = self.ways.get_mut(way)?.as_mut()?;
        s.again(addr, handle, ptag, recv, epoch).ok()?.then_some(&s.taken)
    }

    /// The way of the descriptor at `addr` when it was seen last there with the same
    /// segments, under the same handle, tag and registrations (`epoch`): its control and
    /// immediate data are read afresh into what it resolved to. Inlined into its callers
    /// (a short send's look on the message's path: a call was register saves and an
    /// answer through memory).
    #[inline(always)]
    fn seen_again(
        &mut self,
        addr: usize,
        handle: u32,
        ptag: ProtectionTag,
        recv: bool,
        epoch: u64,
    ) -> Result<Option<usize>> {
        let Some(way) = self.way(addr) else { return Ok(None) };
        let Some(s) = &mut self.ways[way] else { return Ok(None) };
        Ok(s.again(addr, handle, ptag, recv, epoch)?.then_some(way))
    }

    /// A receive descriptor at `addr` that this cache saw last there under the same memory
    /// handle, protection tag and registrations (their epoch of now, so the caller need not
    /// look at it again), with as many segments as then (so it lies in registered memory,
    /// as it did): its control segment. Its segments are not looked at (see `crate::later`).
    #[inline(always)]
    pub(crate) fn unchanged(
        &self,
        nic: &Nic,
        addr: usize,
        handle: u32,
        ptag: ProtectionTag,
    ) -> Option<UserRegion> {
        let s = self.ways.get(self.way(addr)?)?.as_ref()?;
        if !s.is(addr, handle, ptag, nic.inner.mem_epoch.load(Ordering::Acquire)) || s.taken.local.is_none() {
            return None;
        }
        let mut count = [0u8; 2];
        s.taken.ctl.read(12, &mut count).ok()?;
        (usize::from(u16::from_le_bytes(count)) == s.n).then_some(s.taken.ctl)
    }

    /// The way a descriptor at `addr` falls in (the ways are a power of two: a mask, not a
    /// division, which costs tens of cycles); `None` before the queue's first take.
    #[inline(always)]
    fn way(&self, addr: usize) -> Option<usize> {
        Some((addr / 64) & self.ways.len().checked_sub(1)?)
    }

    /// Forget everything (the queue's VI changed its protection tag or reconnected).
    pub(crate) fn clear(&mut self) {
        self.ways.clear();
    }
}
