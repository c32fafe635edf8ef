//! Large stores into a map of another host that go home straight over the map's pager
//! flow (`DsmMap::write` of [`crate::dsm::THROUGH`] bytes or more: `SCIMemCpy`),
//! instead of page by page through the map: a store through the map faults on every page
//! it reaches (a fetch of the page from the home, one round trip each, then a write fault),
//! and its bytes go home as diffs at the next flush. Straight over the flow they go as
//! frames of up to 1 MiB, many in flight, as `scif_writeto` sends them.
//!
//! The pager keeps the map's pages true to the store, in two steps around it:
//!
//! * [`Pager::through`], before: every watched page sends its changes (stores made before
//!   this one reach the home first, on the same flow), and the pages the store reaches are
//!   protected again and no longer watched.
//! * The caller sends the bytes and waits for the home's answers.
//! * [`Pager::landed`], after: the pages the store reaches send what other threads stored
//!   into them meanwhile (a write fault on them took their twin from the page as it was, so
//!   only those stores differ; they go after this one), are protected, and are dropped: the
//!   next access refetches them, with this store in them (fetches go on the same flow,
//!   behind the store).

use super::super::flow::Flow;
use super::super::*;
use super::flush::drop_clean;
use super::{PMap, Pager};
use crate::dsm::Source;

impl Pager {
    /// The pages (indices) that bytes `start..start + len` of a map reach.
    fn pages_of(start: usize, len: usize) -> std::ops::Range<usize> {
        start / PAGE..(start + len).div_ceil(PAGE)
    }

    /// Send every change of the map and settle the pages a store of `len` bytes at byte
    /// `start` reaches (see the module's documentation). Returns the map's flow and the
    /// home's offset of `start`; `None` when the store must go through the map (no flow of
    /// its own, a multicast or read-only map, a lost home).
    pub(super) fn through(&self, m: &mut PMap, start: usize, len: usize) -> Option<(Flow, u64)> {
        if m.readonly || m.fan.is_some() || m.lost.load(Ordering::SeqCst) {
            return None;
        }
        let flow = m.direct.get()?;
        let pages = Self::pages_of(start, len);
        if pages.end > m.pages.len() {
            return None;
        }
        let t = Instant::now();
        let (_, watching) = self.flush_settling(m, false, pages, t);
        if watching && m.next_tick.is_none() {
            m.next_tick = Some(t + m.delay);
        }
        if m.lost.load(Ordering::SeqCst) {
            return None;
        }
        Some((flow, m.seg_off + start as u64))
    }

    /// The store of [`Pager::through`] went home (`broken`: the flow failed on it; the home
    /// is lost unless the route comes back): settle the pages it reached again and drop them. Returns whether that
    /// sent changes (stores of other threads meanwhile).
    pub(super) fn landed(&self, m: &mut PMap, start: usize, len: usize, broken: bool) -> bool {
        let pages = Self::pages_of(start, len);
        if pages.end > m.pages.len() {
            return false;
        }
        // The store failed on the flow (its caller has the error): the home is lost only
        // when the route does not come back (`revive.rs`).
        if broken && !m.revive() {
            m.lost.store(true, Ordering::SeqCst);
        }
        let t = Instant::now();
        let (changed, watching) = self.flush_settling(m, false, pages.clone(), t);
        if watching && m.next_tick.is_none() {
            m.next_tick = Some(t + m.delay);
        }
        if !m.lost.load(Ordering::SeqCst) {
            drop_clean(m, pages);
        }
        changed
    }

    /// The whole of a store of `data` at byte `start` straight home, on the pager's thread
    /// (for stores small enough that copying them here costs less than a second command):
    /// [`Pager::through`], the bytes sent and answered, [`Pager::landed`]. `None` when it
    /// must go through the map.
    pub(super) fn store(&self, m: &mut PMap, start: usize, data: &[u8]) -> Option<std::io::Result<()>> {
        let (flow, at) = self.through(m, start, data.len())?;
        let r = flow.lock().unwrap_or_else(|p| p.into_inner()).write_now(at, Source::Buf(data));
        let broken = r.as_ref().is_err_and(|e| e.kind() != std::io::ErrorKind::PermissionDenied);
        let sent = self.landed(m, start, data.len(), broken);
        if r.is_ok() && !sent {
            // The home answered this store, so it has everything the flow carried before it:
            // nothing of this map is left unanswered.
            super::set_unanswered(m, false);
        }
        Some(r)
    }
}
