//! Descriptors posted again. VIA programs keep pools of descriptors and post the same ones
//! over and over; a queue remembers how it found each of the last few (the memory their
//! segments name, where a receive's buffers lie in pieces), and when a descriptor comes
//! back with the same segments, under the same registrations, it is not looked up again.
//! The descriptor's bytes are always read afresh: only what they resolve to is reused.

use crate::few::Few;
use crate::layout::{self, control, Descriptor, CONTROL, SEGMENT};
use crate::DataSegment;
use crate::{Nic, ProtectionTag, Result};
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
/// up to this many all stay).
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
    /// The segment bytes it had.
    segs: [u8; SEGS * SEGMENT],
    n: usize,
    taken: Taken,
}

/// The descriptors a queue saw last.
#[derive(Debug, Default)]
pub(crate) struct DescCache {
    ways: Vec<Option<Seen>>,
}

fn ways(recv: bool) -> usize {
    if recv {
        RECV_WAYS
    } else {
        SEND_WAYS
    }
}

impl DescCache {
    /// Read the descriptor at `addr` as [`Nic::take`] does, reusing what it resolved to
    /// when it was seen last with the same segments.
    pub(crate) fn take(
        &mut self,
        nic: &Nic,
        addr: usize,
        handle: u32,
        ptag: ProtectionTag,
        recv: bool,
    ) -> Result<Taken> {
        if self.ways.is_empty() {
            self.ways.resize(ways(recv), None);
        }
        let epoch = nic.inner.mem_epoch.load(Ordering::Acquire);
        let way = (addr / 64) % self.ways.len();
        if let Some(s) = &self.ways[way] {
            if s.addr == addr && s.handle == handle && s.ptag == ptag && s.epoch == epoch {
                let mut c = [0u8; CONTROL];
                s.taken.ctl.read(0, &mut c)?;
                let n = Descriptor::seg_count(&c);
                let control = u16::from_le_bytes([c[14], c[15]]);
                let rdma = !recv && control & control::OP_MASK != control::OP_SENDRECV;
                let mut b = [0u8; SEGS * SEGMENT];
                if n == s.n && rdma == s.rdma {
                    s.taken.all.read(CONTROL, &mut b[..n * SEGMENT])?;
                    if b[..n * SEGMENT] == s.segs[..n * SEGMENT] {
                        let mut t = s.taken.clone();
                        t.control = control;
                        t.immediate = u32::from_le_bytes([c[20], c[21], c[22], c[23]]);
                        return Ok(t);
                    }
                }
            }
        }
        let t = nic.take(addr, handle, ptag, recv)?;
        let n = (t.all.len() - CONTROL) / SEGMENT;
        self.ways[way] = None;
        if n <= SEGS && !t.too_many && t.epoch == epoch {
            let mut segs = [0u8; SEGS * SEGMENT];
            t.all.read(CONTROL, &mut segs[..n * SEGMENT])?;
            let rdma = !recv && t.control & control::OP_MASK != control::OP_SENDRECV;
            self.ways[way] = Some(Seen { addr, handle, ptag, rdma, epoch, segs, n, taken: t.clone() });
        }
        Ok(t)
    }

    /// Forget everything (the queue's VI changed its protection tag or reconnected).
    pub(crate) fn clear(&mut self) {
        self.ways.clear();
    }
}
