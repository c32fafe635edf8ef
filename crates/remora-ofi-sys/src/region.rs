//! A registered range of memory (`fi_mr_reg`): its key, the address peers name it by, and
//! what keeps the memory and the endpoint alive while it is registered.

#![allow(unsafe_code)]

use crate::{ffi, Endpoint};
use remora_sys::Mapping;
use std::sync::Arc;

/// A registered range of memory (`fi_mr_reg`), closed when dropped.
pub struct Region {
    pub(crate) mr: *mut ffi::FidMr,
    pub(crate) key: u64,
    pub(crate) desc: *mut std::ffi::c_void,
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) mapping: Option<Arc<Mapping>>,
    pub(crate) virt: bool,
    /// The endpoint whose domain holds the registration (none for the endpoint's own
    /// receive buffers, closed before it).
    pub(crate) ep: Option<Arc<Endpoint>>,
}

// SAFETY: a registration is a provider object usable from any thread (FI_THREAD_SAFE);
// the memory it covers is a shared mapping accessed through bounds-checked calls.
unsafe impl Send for Region {}
// SAFETY: as for Send.
unsafe impl Sync for Region {}

impl Region {
    /// The key a peer names it by.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The mapping it covers (none for the endpoint's own buffers).
    pub fn mapping(&self) -> Option<&Arc<Mapping>> {
        self.mapping.as_ref()
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address a peer gives `fi_write`/`fi_read` for byte `off` of the region: its
    /// virtual address where the provider wants those (`FI_MR_VIRT_ADDR`), else the offset.
    pub fn remote_addr(&self, off: usize) -> u64 {
        match self.virt {
            true => self.ptr as u64 + off as u64,
            false => off as u64,
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the registration is closed once, before its endpoint (held by `ep`, or
        // closing this region first in its drop) and while the mapping it covers is held.
        let _ = unsafe { ffi::rofi_mr_close(self.mr) };
        let _ = (&self.mapping, &self.ep);
    }
}
