//! A registered range of memory (`fi_mr_reg`): its key, the address peers name it by, and
//! what keeps the memory and the provider's objects alive while it is registered.
//!
//! When a registration may be closed: once the provider can no longer touch it. For one
//! an operation uses (the local side of a write or a read), that is when the operation's
//! completion (or error completion) is read, or else once the endpoint is closed: the
//! endpoint holds it until then (`keep`), never closing it under an operation in flight
//! (`fi_close` of a registration an operation still uses is not safe). And a registration
//! is closed before its domain: the domain (with the fabric, address vector and queue)
//! closes only after the endpoint and the last registration are gone ([`Core`]).

#![allow(unsafe_code)]

use crate::ffi;
use remora_sys::Mapping;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The shim's objects under an endpoint (fabric, domain, address vector, completion queue,
/// endpoint). The endpoint object is closed when the [`crate::Endpoint`] goes
/// (`rofi_close_ep`); the rest when this goes, once the last registration of the domain is
/// closed too.
pub(crate) struct Core {
    pub(crate) raw: *mut ffi::Rofi,
    /// Registrations open in its domain.
    pub(crate) open: Arc<AtomicUsize>,
}

// SAFETY: the shim's objects are opened FI_THREAD_SAFE; closing them is done once, here.
unsafe impl Send for Core {}
// SAFETY: as for Send.
unsafe impl Sync for Core {}

impl Drop for Core {
    fn drop(&mut self) {
        // SAFETY: the last holder of the objects: the endpoint object is closed already
        // (its `Endpoint` is gone) and so is every registration (each holds this).
        let rc = unsafe { ffi::rofi_close(self.raw) };
        if rc != 0 {
            // The domain (or an object before it) is still open, and with it whatever the
            // provider holds: counted as one registration still open, so that no one is told
            // the domain is gone (the objects are left as they are: a leak, not a use after
            // free).
            tracing::error!("libfabric: the domain's objects could not close: {}", crate::strerror(rc));
            self.open.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// How many registrations of an endpoint's domain are open, readable after the endpoint
/// is gone ([`crate::Endpoint::registrations`]). A registration that could not be closed
/// counts as open, and so does the domain if it could not be closed (as one more).
#[derive(Debug, Clone)]
pub struct Registrations(pub(crate) Arc<AtomicUsize>);

impl Registrations {
    /// The registrations open now.
    pub fn open(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A registered range of memory (`fi_mr_reg`), closed when dropped.
pub struct Region {
    pub(crate) mr: *mut ffi::FidMr,
    pub(crate) key: u64,
    pub(crate) desc: *mut std::ffi::c_void,
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) mapping: Option<Arc<Mapping>>,
    pub(crate) virt: bool,
    /// The provider's objects whose domain holds the registration (closed after it).
    pub(crate) core: Arc<Core>,
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
        // SAFETY: the registration is closed once, before its domain (held by `core`), while
        // the mapping it covers is held, and when no operation uses it any more: the last
        // holder of a registration an operation used is the endpoint's `keep`, which lets go
        // of it at the operation's completion or after the endpoint object is closed.
        let rc = unsafe { ffi::rofi_mr_close(self.mr) };
        if rc != 0 {
            // Still registered: the memory stays mapped (peers may still reach it) and the
            // registration counts as open.
            tracing::error!("libfabric: a registration could not close: {}", crate::strerror(rc));
            std::mem::forget(self.mapping.take());
            return;
        }
        self.core.open.fetch_sub(1, Ordering::SeqCst);
    }
}
