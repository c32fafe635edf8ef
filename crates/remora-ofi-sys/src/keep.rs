//! The operations in flight on an endpoint, each holding the registration of its local
//! memory until its completion is read (or the endpoint closes), and those of them whose
//! peer's address was removed meanwhile (stranded: their completions may never come).
//! Only writes and reads are counted stranded: a send holds no registration (the shim
//! copied its message), so one left unanswered leaks nothing.
//!
//! A stranded operation holds its registration (and the memory under it) until its
//! completion comes or the endpoint closes, which for a daemon's endpoint is its life.
//! libfabric leaves undefined what becomes of operations to an address removed under them
//! (`fi_av_remove`: they may never complete), and `fi_cancel` cannot take them back (the
//! `ofi_rxm` provider cancels only receives; a transmit or RMA is not found), so nothing
//! releases them earlier without risk of closing a registration the provider still uses.
//! The leak is bounded by the operations in flight to a peer when its address is removed,
//! and told: [`crate::Endpoint::remove`] returns how many it strands,
//! [`crate::Endpoint::stranded`] counts those still held.
//!
//! The endpoint's close lets go of them all, once the endpoint object is closed; should that
//! close fail, they (and the receive buffers) are leaked and logged, never freed under the
//! provider.

#![allow(unsafe_code)]

use crate::{ffi, strerror, Endpoint, Error, RecvBuf, Region, RECV_ID};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The hasher of the ids: they are the caller's (mostly [`Endpoint::next_id`]'s counter),
/// not an attacker's, so SipHash's cost buys nothing. One multiply by an odd constant
/// (Fibonacci hashing) spreads consecutive ids over the high bits the table's tags use.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not reached for u64 keys (write_u64 below); kept correct for any other.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Map = HashMap<u64, Held, BuildHasherDefault<IdHasher>>;

/// How many ids [`Keep::release`] takes out under one lock: a completion read's worth.
const BATCH: usize = 32;

/// An operation in flight: its peer, and the registration of its local memory (none for a
/// send, whose message the shim copied), held until its completion is read.
pub(crate) struct Held {
    region: Option<Arc<Region>>,
    dest: u64,
    /// Its peer's address was removed before the completion came, and it holds a region.
    stranded: bool,
}

/// The operations in flight, by id.
#[derive(Default)]
pub(crate) struct Keep {
    map: Mutex<Map>,
    /// Entries of `map` whose peer's address was removed and that hold a region.
    stranded: AtomicUsize,
}

impl Keep {
    fn lock(&self) -> MutexGuard<'_, Map> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take `id` for an operation to `dest` until its completion is read.
    ///
    /// # Errors
    /// The id is in the receive buffers' range, or an operation in flight has it (its
    /// completion would let go of the other's registration).
    pub(crate) fn hold(&self, id: u64, dest: u64, region: Option<&Arc<Region>>) -> Result<(), Error> {
        if id >= RECV_ID {
            return Err(Error { code: 22, what: format!("operation id {id:#x} is a receive buffer's") });
        }
        match self.lock().entry(id) {
            Entry::Occupied(_) => {
                Err(Error { code: 17, what: format!("operation id {id} is in flight already") })
            }
            Entry::Vacant(v) => {
                v.insert(Held { region: region.cloned(), dest, stranded: false });
                Ok(())
            }
        }
    }

    /// Let go of the operations `ids`: their completions were read, or their posting
    /// failed. The registrations close here if nothing else holds them.
    ///
    /// The registrations are taken out under the lock and closed after it, [`BATCH`] at a
    /// time in an array on the stack: reading completions allocates nothing here.
    pub(crate) fn release(&self, ids: impl IntoIterator<Item = u64>) {
        let mut ids = ids.into_iter().peekable();
        while ids.peek().is_some() {
            let mut gone: [Option<Arc<Region>>; BATCH] = Default::default();
            let mut n = 0;
            {
                let mut map = self.lock();
                for (slot, id) in gone.iter_mut().zip(ids.by_ref()) {
                    if let Some(h) = map.remove(&id) {
                        n += usize::from(h.stranded);
                        *slot = h.region;
                    }
                }
            }
            self.stranded.fetch_sub(n, Ordering::SeqCst);
        }
    }

    /// Mark the operations to `dest` that hold a registration stranded (its address is
    /// being removed); how many. A send holds none (the shim copied its message), so an
    /// unanswered one leaks nothing and is not counted.
    pub(crate) fn strand(&self, dest: u64) -> usize {
        let mut map = self.lock();
        let mut n = 0;
        for h in map.values_mut().filter(|h| h.dest == dest && !h.stranded && h.region.is_some()) {
            h.stranded = true;
            n += 1;
        }
        self.stranded.fetch_add(n, Ordering::SeqCst);
        n
    }

    /// Operations stranded and still held.
    pub(crate) fn stranded(&self) -> usize {
        self.stranded.load(Ordering::SeqCst)
    }

    /// Operations in flight.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Every entry, taken out (the endpoint is closing).
    pub(crate) fn take(&self) -> Map {
        self.stranded.store(0, Ordering::SeqCst);
        std::mem::take(&mut *self.lock())
    }
}

impl Endpoint {
    /// Forget a peer's address. Returns how many operations to it holding a registration
    /// (writes and reads; not sends) are still in flight: their completions may never come
    /// now (libfabric leaves them undefined), and their registrations are held until they
    /// do or the endpoint closes ([`Endpoint::stranded`]).
    pub fn remove(&self, addr: u64) -> usize {
        let n = self.keep.strand(addr);
        // SAFETY: removing an address the vector does not hold only fails.
        let _ = unsafe { ffi::rofi_av_remove(self.raw, addr) };
        n
    }

    /// Operations whose peer's address was removed before their completion came, still
    /// holding their registrations (and memory): a leak until their completions come or
    /// the endpoint closes.
    pub fn stranded(&self) -> usize {
        self.keep.stranded()
    }

    /// Operations in flight (posted, completion not read yet).
    pub fn in_flight(&self) -> usize {
        self.keep.len()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
        // SAFETY: nothing else holds the endpoint (it is being dropped), so nothing posts on
        // it any more; the shim closes the endpoint object once. Once it is closed the
        // provider touches no buffer and no registration of an operation posted on it:
        // libfabric discards what is still outstanding at the close.
        let rc = unsafe { ffi::rofi_close_ep(self.raw) };
        let keep = self.keep.take();
        let bufs: Vec<RecvBuf> = std::mem::take(&mut *self.recv.lock().unwrap_or_else(|p| p.into_inner()));
        if rc != 0 {
            // Still open: the provider may still write into the receive buffers and use the
            // registrations of operations in flight. Leak them (and the domain, which they
            // hold) rather than free them under it.
            tracing::error!(
                "libfabric: the endpoint could not close ({}): {} operations' registrations and {} \
                 receive buffers are left allocated",
                strerror(rc),
                keep.len(),
                bufs.len()
            );
            std::mem::forget(keep);
            std::mem::forget(bufs);
            return;
        }
        // Registrations of operations whose completion never came (their peer's address
        // was removed under them, say) close now: they were held until the provider could
        // no longer touch them, and no longer.
        drop(keep);
        for RecvBuf(p, n, r) in bufs {
            drop(r);
            // SAFETY: each buffer came from Box::into_raw of a boxed slice of n bytes, and
            // the endpoint object that wrote into it is closed.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) });
        }
        // The domain and the rest close with `core`, after the last registration held
        // elsewhere (a transfer's, the node's books') is closed too.
    }
}

#[cfg(test)]
mod tests {
    use super::Keep;

    /// A send holds no registration: one in flight to a removed address leaks nothing and
    /// is not counted stranded (it was, and a link's ordinary end warned that registrations
    /// stay held). Its id is still taken until its completion.
    #[test]
    fn a_send_to_a_removed_address_is_not_stranded() {
        let keep = Keep::default();
        keep.hold(1, 7, None).unwrap();
        keep.hold(2, 8, None).unwrap();
        assert_eq!(keep.hold(1, 7, None).unwrap_err().code, 17);
        assert_eq!((keep.strand(7), keep.stranded(), keep.len()), (0, 0, 2));
        keep.release([1, 3]);
        assert_eq!(keep.len(), 1);
        keep.release((0..100).map(|i| 2 + i * 1000));
        assert_eq!((keep.len(), keep.stranded()), (0, 0));
    }
}
