//! [`MemoryRegion`]: registered memory that deregisters itself when dropped, for Rust
//! programs that would rather not carry a [`MemHandle`] and its address around and
//! remember `VipDeregisterMem`. The C library keeps to handles (`Nic::register`), as VIA's
//! calls do.

use crate::{DataSegment, MemAttributes, MemHandle, Nic, Result, UserRegion};

/// Memory registered on a [`Nic`] (`VipRegisterMem`), deregistered (`VipDeregisterMem`)
/// when dropped or by [`MemoryRegion::deregister`], which reports what that answered.
#[derive(Debug)]
pub struct MemoryRegion {
    nic: Nic,
    region: UserRegion,
    handle: MemHandle,
    /// Still registered (not given back by [`MemoryRegion::deregister`]).
    live: bool,
}

impl Nic {
    /// `VipRegisterMem`, kept as a [`MemoryRegion`]: register `region` as
    /// [`Nic::register`] does, deregistered again when the value is dropped.
    ///
    /// # Errors
    /// As [`Nic::register`].
    pub fn register_region(&self, region: UserRegion, attrs: MemAttributes) -> Result<MemoryRegion> {
        let handle = self.register(region, attrs)?;
        Ok(MemoryRegion { nic: self.clone(), region, handle, live: true })
    }
}

impl MemoryRegion {
    /// The memory handle descriptors name this memory by.
    pub fn handle(&self) -> MemHandle {
        self.handle
    }

    /// The registered memory.
    pub fn region(&self) -> UserRegion {
        self.region
    }

    /// The address `off` bytes into the memory.
    pub fn addr(&self, off: usize) -> usize {
        self.region.addr() + off
    }

    /// A data segment of `len` bytes at `off` of this memory, for a [`crate::Descriptor`].
    pub fn segment(&self, off: usize, len: u32) -> DataSegment {
        DataSegment { addr: self.addr(off) as u64, handle: self.handle, len }
    }

    /// `VipQueryMem`: the memory's attributes.
    ///
    /// # Errors
    /// As [`Nic::query_mem`].
    pub fn attributes(&self) -> Result<MemAttributes> {
        self.nic.query_mem(self.region.addr(), self.handle)
    }

    /// `VipSetMemAttributes`.
    ///
    /// # Errors
    /// As [`Nic::set_mem_attributes`].
    pub fn set_attributes(&self, attrs: MemAttributes) -> Result<()> {
        self.nic.set_mem_attributes(self.region.addr(), self.handle, attrs)
    }

    /// `VipDeregisterMem` now, with its answer (dropping the value deregisters too, and
    /// drops the answer).
    ///
    /// # Errors
    /// As [`Nic::deregister`].
    pub fn deregister(mut self) -> Result<()> {
        self.live = false;
        self.nic.deregister(self.region.addr(), self.handle)
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        if self.live {
            let _ = self.nic.deregister(self.region.addr(), self.handle);
        }
    }
}
