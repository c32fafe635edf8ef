//! Sending a map's changes home: the flush of its watched pages (each copied until two
//! copies agree, the runs sent in order, the answer waited for when asked), the refresh of
//! its clean pages, and the dropping of clean resident pages.

use super::*;

impl Pager {
    /// Send the map's changed bytes home; with `wait`, return only once the home has them
    /// (and everything sent before). `false` if that failed.
    pub(super) fn flush_map(&self, m: &mut PMap, wait: bool) -> bool {
        let t = Instant::now();
        let before = m.lost.load(Ordering::SeqCst);
        let (_, watching) = self.flush_pages(m, wait, false, t);
        if watching && m.next_tick.is_none() {
            m.next_tick = Some(t + m.delay);
        }
        // Stores a failed flow carried unanswered may be lost: said once, to a flush that
        // waits for the home (a settle point, a sequence's check).
        let doubtful = wait && std::mem::take(&mut m.doubtful);
        !before && !m.lost.load(Ordering::SeqCst) && !doubtful
    }

    /// Send the changes of every watched page home (waiting for the home's answer with
    /// `wait`). A page unchanged for [`QUIET`], or every page with `settle`, is protected
    /// again and no longer watched. Returns (some page changed, some page still watched).
    ///
    /// A changed page is copied until two copies in a row agree: with stores seen in program
    /// order (x86), a store in the copy means every earlier store of that thread is in it
    /// too, so what goes home is a picture the page really held.
    pub(super) fn flush_pages(&self, m: &mut PMap, wait: bool, settle: bool, t: Instant) -> (bool, bool) {
        let all = if settle { 0..m.pages.len() } else { 0..0 };
        self.flush_settling(m, wait, all, t)
    }

    /// [`Pager::flush_pages`], settling the pages of `settle` (indices) only.
    pub(super) fn flush_settling(
        &self,
        m: &mut PMap,
        wait: bool,
        settle_pages: std::ops::Range<usize>,
        t: Instant,
    ) -> (bool, bool) {
        let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut bytes = 0;
        let mut cur = vec![0u8; PAGE];
        let mut again = vec![0u8; PAGE];
        let (mut changed, mut watching) = (false, false);
        let mut released = 0;
        for idx in 0..m.pages.len() {
            if !m.pages[idx].st.dirty {
                continue;
            }
            let addr = m.region.base() + idx * PAGE;
            let quiet = m.pages[idx].changed.is_none_or(|c| t.saturating_duration_since(c) >= QUIET);
            let mut mem = Mem { uffd: &self.uffd, region: &m.region, addr };
            let settle = settle_pages.contains(&idx);
            let look: Look = m.pages[idx].st.look(&mut mem, quiet, settle, &mut cur, &mut again);
            changed |= look.changed;
            watching |= look.watching;
            if look.changed {
                m.pages[idx].changed = Some(t);
            }
            released += usize::from(look.released);
            for (a, b) in look.runs {
                let off = m.seg_off + (idx * PAGE + a) as u64;
                if off >= m.seg_size {
                    continue;
                }
                let b = b.min(a + (m.seg_size - off) as usize);
                if bytes + (b - a) > MAX_DATA_IO {
                    send(m, std::mem::take(&mut runs), false);
                    bytes = 0;
                }
                bytes += b - a;
                runs.push((off, cur[a..b].to_vec()));
            }
        }
        if !runs.is_empty() || (wait && m.unanswered) {
            send(m, runs, wait);
        }
        // Released pages stop counting only now that their last changes are on their way
        // (and counted as unanswered when not waited for): a settle point that found
        // nothing pending between the two would let its signal overtake them. (The DSM
        // simulation, tests/dsm_simulation.rs, finds that window when the count drops at
        // the release.)
        self.pending.unwatch(released);
        (changed, watching)
    }

    /// Flush, then drop every resident page so the next access refetches it.
    pub(super) fn refresh_map(&self, m: &mut PMap) -> bool {
        // Refetches queue behind these stores, so no need to wait. Watched pages are
        // protected again and dropped too: a page this process keeps writing still shows
        // the other writers' stores within `refresh`.
        let before = m.lost.load(Ordering::SeqCst);
        self.flush_pages(m, false, true, Instant::now());
        m.next_tick = None;
        let ok = !before && !m.lost.load(Ordering::SeqCst);
        m.last_refresh = Instant::now();
        if m.lost.load(Ordering::SeqCst) {
            return false;
        }
        drop_clean(m, 0..m.pages.len());
        ok
    }
}

/// Drop the clean resident pages of `pages` (indices): their next access refetches them.
/// One system call per run of them.
pub(super) fn drop_clean(m: &mut PMap, pages: std::ops::Range<usize>) {
    let droppable = |p: &Page| p.st.droppable();
    let mut idx = pages.start;
    while idx < pages.end {
        if !droppable(&m.pages[idx]) {
            idx += 1;
            continue;
        }
        let start = idx;
        while idx < pages.end && droppable(&m.pages[idx]) {
            idx += 1;
        }
        let addr = m.region.base() + start * PAGE;
        if m.region.drop_pages(addr, (idx - start) * PAGE).is_ok() {
            for p in &mut m.pages[start..idx] {
                p.st.dropped();
            }
            m.resident.fetch_sub(idx - start, Ordering::SeqCst);
        }
    }
}

/// Send runs home, waiting for the answer when `wait` (an empty `wait` send only waits for
/// what went before). Without waiting, failures surface at the next request that waits.
pub(super) fn send(m: &mut PMap, runs: Vec<(u64, Vec<u8>)>, wait: bool) -> bool {
    if m.lost.load(Ordering::SeqCst) {
        // Nothing it sent will be answered now: no settle point waits for it.
        set_unanswered(m, false);
        return false;
    }
    if m.fan.is_some() {
        return fanout::send(m, runs, wait);
    }
    for attempt in 1..=super::revive::TRIES {
        match send_once(m, &runs, wait) {
            Ok(ok) => return ok,
            Err(e) => {
                tracing::warn!("DSM: stores could not reach the home node: {e}");
                // Done again over a new flow once the route is back (the runs are the
                // bytes the pages hold: sending them twice stores the same bytes).
                if attempt == super::revive::TRIES || !m.revive() {
                    break;
                }
            }
        }
    }
    m.lost.store(true, Ordering::SeqCst);
    set_unanswered(m, false);
    false
}

/// One try of [`send`]: `Ok(false)` when the home refused them, `Err` when the path failed.
fn send_once(m: &mut PMap, runs: &[(u64, Vec<u8>)], wait: bool) -> std::io::Result<bool> {
    if let Some(d) = m.direct.get() {
        let r = {
            let mut d = d.lock().unwrap_or_else(|p| p.into_inner());
            for (offset, data) in runs {
                d.push(*offset, data);
            }
            d.send(wait)
        };
        return match r {
            Ok(()) => {
                set_unanswered(m, !wait);
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                tracing::warn!("DSM: the home node refused stores: {e}");
                m.lost.store(true, Ordering::SeqCst);
                set_unanswered(m, false);
                Ok(false)
            }
            Err(e) => Err(e),
        };
    }
    let reqs: Vec<Request> = m.home.write_requests(runs.to_vec());
    let last = reqs.len().saturating_sub(1);
    let mut r = Ok(());
    for (i, req) in reqs.into_iter().enumerate() {
        r = if wait && i == last { m.session.request(req, &[]).map(|_| ()) } else { m.session.note(req) };
        if r.is_err() {
            break;
        }
    }
    set_unanswered(m, !wait && r.is_ok());
    r.map(|()| true).map_err(|e| std::io::Error::other(e.to_string()))
}
