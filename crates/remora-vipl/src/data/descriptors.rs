//! Descriptors in the program's memory: read and written for the program
//! (`VipPostSend`'s caller builds them with these), taken for a post and completed in
//! place.
//!
//! A descriptor is read once, under one look at the registered memory: its control
//! segment, its data segments, and the memory they name. The descriptor's control segment
//! is kept, so completing it later writes the program's memory directly, unless memory was
//! deregistered meanwhile (then it is looked up again).

use crate::cache::Taken;
use crate::few::Few;
use crate::layout::{self, control, DataSegment, Descriptor, CONTROL, DESCRIPTOR_ALIGNMENT, SEGMENT};
use crate::vi::lock;
use crate::{Error, Nic, ProtectionTag, Result};
use remora_sisci::UserRegion;
use std::sync::atomic::{fence, Ordering};

fn aligned(addr: usize) -> Result<()> {
    if addr == 0 || !addr.is_multiple_of(DESCRIPTOR_ALIGNMENT) {
        return Err(Error::InvalidParameter(format!("descriptor at {addr:#x} is not 64-byte aligned")));
    }
    Ok(())
}

impl Nic {
    /// Read the descriptor at `addr` (in memory registered as `handle`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when it is not 64-byte aligned or not inside that memory.
    pub fn read_descriptor(&self, addr: usize, handle: u32) -> Result<Descriptor> {
        aligned(addr)?;
        let mem = lock(&self.inner.mem);
        let outside =
            || Error::InvalidParameter(format!("descriptor at {addr:#x} is not in memory handle {handle}"));
        let cs = mem.local(handle, addr, CONTROL, None).ok_or_else(outside)?;
        let mut c = [0u8; CONTROL];
        cs.read(0, &mut c)?;
        let n = Descriptor::seg_count(&c);
        let all = mem.local(handle, addr, CONTROL + n * SEGMENT, None).ok_or_else(outside)?;
        let mut b = vec![0u8; CONTROL + n * SEGMENT];
        all.read(0, &mut b)?;
        Descriptor::decode(&b)
    }

    /// Write `d` at `addr` (in memory registered as `handle`): how a Rust program builds
    /// descriptors in registered memory.
    ///
    /// # Errors
    /// As [`Nic::read_descriptor`].
    pub fn write_descriptor(&self, addr: usize, handle: u32, d: &Descriptor) -> Result<()> {
        aligned(addr)?;
        let b = d.encode();
        let mem = lock(&self.inner.mem);
        let r = mem
            .local(handle, addr, b.len(), None)
            .ok_or_else(|| Error::InvalidParameter("descriptor outside its memory".into()))?;
        r.write(0, &b)?;
        Ok(())
    }

    /// Read the descriptor at `addr` for posting on a VI with protection tag `ptag`, with
    /// the memory its segments name (a receive's: where it lies in pieces too).
    pub(crate) fn take(&self, addr: usize, handle: u32, ptag: ProtectionTag, recv: bool) -> Result<Taken> {
        aligned(addr)?;
        let mem = lock(&self.inner.mem);
        let epoch = self.inner.mem_epoch.load(Ordering::Acquire);
        let outside =
            || Error::InvalidParameter(format!("descriptor at {addr:#x} is not in memory handle {handle}"));
        let ctl = mem.local(handle, addr, CONTROL, None).ok_or_else(outside)?;
        let mut c = [0u8; CONTROL];
        ctl.read(0, &mut c)?;
        let n = Descriptor::seg_count(&c);
        let all = mem.local(handle, addr, CONTROL + n * SEGMENT, None).ok_or_else(outside)?;
        let control = u16::from_le_bytes([c[14], c[15]]);
        let immediate = u32::from_le_bytes([c[20], c[21], c[22], c[23]]);
        let mut t = Taken { ctl, all, epoch, control, immediate, ..Taken::default() };
        if n > layout::MAX_SEGMENTS {
            t.too_many = true;
            return Ok(t);
        }
        let rdma = !recv && control & control::OP_MASK != control::OP_SENDRECV;
        let mut local = Some(Few::default());
        for i in 0..n {
            let mut b = [0u8; SEGMENT];
            all.read(CONTROL + i * SEGMENT, &mut b)?;
            let s = DataSegment::decode(&b);
            if i == 0 && rdma {
                t.remote = Some(s);
                continue;
            }
            t.total = t.total.saturating_add(s.len);
            if recv && mem.chunks(s.handle, s.addr as usize, s.len as usize, ptag, &mut t.chunks).is_none() {
                local = None;
            }
            match (&mut local, mem.local(s.handle, s.addr as usize, s.len as usize, Some(ptag))) {
                (Some(l), Some(r)) => l.push(r),
                _ => local = None,
            }
        }
        t.local = local;
        Ok(t)
    }

    /// Write a completed descriptor's fields into its control segment `ctl` (found in
    /// registered memory at `epoch`), the status last.
    #[inline]
    pub(crate) fn finish(&self, ctl: &UserRegion, epoch: u64, st: u32, len: Option<u32>, imm: Option<u32>) {
        if !self.still_registered(ctl, epoch) {
            return;
        }
        if let Some(i) = imm {
            let _ = ctl.write(20, &i.to_le_bytes());
        }
        if let Some(l) = len {
            let _ = ctl.write(24, &l.to_le_bytes());
        }
        fence(Ordering::Release);
        let _ = ctl.write(28, &st.to_le_bytes());
    }

    /// Whether every one of `rs`, registered at `epoch`, still is, in memory registered no
    /// later ([`crate::memory`]'s `covers_since`: what lies there now, registered again
    /// since, is in pieces the peer was never told of).
    pub(crate) fn still_registered_all(&self, rs: &[UserRegion], epoch: u64) -> bool {
        self.inner.mem_epoch.load(Ordering::Acquire) == epoch || {
            let mem = lock(&self.inner.mem);
            rs.iter().all(|r| mem.covers_since(r.addr(), r.len(), epoch))
        }
    }

    /// Whether `r`, registered at `epoch`, still is.
    #[inline]
    pub(crate) fn still_registered(&self, r: &UserRegion, epoch: u64) -> bool {
        self.inner.mem_epoch.load(Ordering::Acquire) == epoch || self.covered(r)
    }

    /// Whether `r` lies in registered memory (registrations changed since it was found).
    #[inline(never)]
    fn covered(&self, r: &UserRegion) -> bool {
        lock(&self.inner.mem).covers(r.addr(), r.len())
    }
}
