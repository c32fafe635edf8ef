//! A page that can never be filled (its map's home is lost) while a call of the API copies
//! through the map ([`DsmMap::write`](super::super::DsmMap::write) and
//! [`DsmMap::read`](super::super::DsmMap::read): `SCIMemCpy`'s PIO path). The program's
//! own loads and stores of such a page raise SIGBUS (`UFFDIO_POISON`), as documented; a
//! call of the API must answer an error instead (`SCI_ERR_TRANSFER_FAILED`), also when the
//! home is lost while the call waits for the page (a cable cut that ends in the loss of
//! the connection).
//!
//! The copying thread names itself and the map it copies through to its pager for the
//! length of the copy ([`Pager::copying`]). A fault of such a thread on a page of *that*
//! map that can never be filled gets a *stand-in*, a page of zeros, and the copy goes on
//! (a page of another map of the pager — the copy's source or destination in the
//! program's memory — is poisoned as any access of the program: its zeros would otherwise
//! go home through the copy as data, and stay in that map, which no call forgets); the
//! call then finds the map lost and,
//! before it answers the error, has the pager drop its stand-ins (`Cmd::Forget`): their next
//! access faults again and is poisoned. (Until then another thread's load of a stand-in
//! reads zeros, not SIGBUS: until the piece of the copy that met the loss ends, at most
//! a mebibyte of it, on a lost home only.)

use super::*;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// How many threads at once a pager knows as copying through its maps: each holds a slot
/// for the length of its copy (one atomic exchange to take it, a store to give it back);
/// a thread that finds none free copies on unnamed, and a page of a lost home raises
/// SIGBUS in it, as in the program's own accesses.
pub(super) const COPIERS: usize = 32;

/// One thread copying through a map of a pager for a call of the API: the thread's id (0:
/// a free slot) and the map's.
#[derive(Default)]
pub(in crate::dsm) struct Copier {
    tid: AtomicU32,
    map: AtomicU64,
}

/// The threads copying through a pager's maps for a call of the API now.
pub(in crate::dsm) type Copiers = [Copier; COPIERS];

/// A thread copying through a map of the pager (see the module's documentation), until
/// dropped.
pub(in crate::dsm) struct Copying<'a>(Option<&'a Copier>);

impl Drop for Copying<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            slot.tid.store(0, Ordering::SeqCst);
        }
    }
}

impl Pager {
    /// The calling thread copies through map `map` of this pager (a call of the API) until
    /// the answer is dropped: a page of that map that can never be filled gets a stand-in
    /// instead of raising SIGBUS in it.
    pub(in crate::dsm) fn copying(&self, map: u64) -> Copying<'_> {
        let tid = remora_sys::uffd::this_thread();
        let slot = self
            .copiers
            .iter()
            .find(|s| s.tid.compare_exchange(0, tid, Ordering::SeqCst, Ordering::Relaxed).is_ok());
        // The slot is ours now; it is read only for a fault of this thread, which comes
        // after this store (in the copy).
        if let Some(s) = slot {
            s.map.store(map, Ordering::SeqCst);
        }
        Copying(slot)
    }

    /// The page at `addr` (index `idx` of map `id`, `m`), which thread `tid` faulted on,
    /// can never be filled: a stand-in for a copy of the API through that map on a lost
    /// home, otherwise poisoned (the access fails instead of hanging).
    pub(super) fn unfillable(&self, id: u64, m: &mut PMap, idx: usize, addr: usize, tid: u32) {
        let copier = tid != 0
            && self
                .copiers
                .iter()
                .any(|s| s.tid.load(Ordering::SeqCst) == tid && s.map.load(Ordering::SeqCst) == id);
        if copier && m.lost.load(Ordering::SeqCst) {
            if let Ok(true) = self.uffd.copy_page(&m.region, addr, &[0u8; PAGE], false) {
                m.stand_ins.push(idx);
                return;
            }
        }
        if self.uffd.poison(&m.region, addr, PAGE).is_err() {
            let _ = self.uffd.copy_page(&m.region, addr, &[0u8; PAGE], false);
        }
    }

    /// Drop the map's stand-ins: their next access faults, and is poisoned.
    pub(super) fn forget_stand_ins(&self, m: &mut PMap) {
        for idx in m.stand_ins.drain(..) {
            let _ = m.region.drop_pages(m.region.base() + idx * PAGE, PAGE);
        }
    }
}
