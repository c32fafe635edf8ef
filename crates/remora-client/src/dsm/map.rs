//! A map of another host's memory: its userfaultfd region, registered with the pager.

use super::flow::{flow_soon, shared_flow, Flow, Soon};
use super::pager::{PMap, Pager};
use super::pagers::{pager_for, PagerKey};
use super::*;

/// Stores of at least this many bytes into a map ([`DsmMap::write`]) go home straight over
/// the map's pager flow rather than page by page through the map.
pub const THROUGH: usize = 32 << 10;

/// Stores from this many bytes on are sent by the calling thread (smaller ones are copied
/// and sent by the pager: one command to it instead of two).
const THROUGH_HERE: usize = 1 << 20;

/// The bytes a copy through a map moves between two looks at whether the home was lost
/// ([`DsmMap::copy`]).
const COPY_PIECE: usize = 1 << 20;

/// A map of a segment of another host.
pub struct DsmMap {
    /// The pager that serves the map (its home node's, or the shared one).
    pager: Arc<Pager>,
    id: u64,
    region: Arc<UffdRegion>,
    delta: usize,
    len: usize,
    lost: Arc<AtomicBool>,
    released: AtomicBool,
    /// A multicast map: whether every leg has a pager flow of its own.
    fan_direct: Option<bool>,
    /// The map's own pager flow (not a multicast map's; maybe still on its way), and the
    /// home's offset of the region's first byte: large stores go straight over it.
    flow: Soon,
    seg_off: u64,
    readonly: bool,
    /// The pager's count of the map's resident pages.
    resident: Arc<AtomicUsize>,
    /// The map's home, whose route an unmap looks at (`release`).
    home: Arc<dyn RemoteRange>,
}

impl std::fmt::Debug for DsmMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DsmMap").field("id", &self.id).field("len", &self.len).finish()
    }
}

impl DsmMap {
    /// Map `len` bytes at `offset` of `home` (whose address space ends at `seg_size`), on
    /// node `node`: the maps of each home node have a pager of their own (`pagers.rs`), so
    /// a home that stops answering holds up only its own maps' faults and flushes.
    ///
    /// # Errors
    /// [`DsmError::Unavailable`] where userfaultfd cannot be used (logged once with why).
    pub fn new(
        session: Arc<Session>,
        home: Arc<dyn RemoteRange>,
        node: u32,
        seg_size: u64,
        offset: u64,
        len: usize,
        readonly: bool,
    ) -> Result<DsmMap, DsmError> {
        DsmMap::make(session, home, Some(node), None, seg_size, offset, len, readonly, false)
    }

    /// As [`DsmMap::new`], on a session that serves the pager alone (no other request of
    /// the program waits on it): the map's pager flow, when none of `session` reaches `home`
    /// yet, is booked and the map returns without waiting for it; [`DsmMap::ask_flow`]
    /// sends the request, to be answered in the background, and the first fault, store
    /// straight home or [`DsmMap::is_direct`] waits for the flow (or makes the request
    /// itself, when it was not sent yet). The map's `note` goes just before that request,
    /// by the same thread, or at once when no request is asked for ([`MapNote`]).
    ///
    /// # Errors
    /// As [`DsmMap::new`].
    #[allow(clippy::too_many_arguments)]
    pub fn on_pager_session(
        session: Arc<Session>,
        home: Arc<dyn RemoteRange>,
        node: u32,
        seg_size: u64,
        offset: u64,
        len: usize,
        readonly: bool,
        note: Arc<super::MapNote>,
    ) -> Result<DsmMap, DsmError> {
        let map = DsmMap::make(session, home, Some(node), None, seg_size, offset, len, readonly, true)?;
        map.flow.attach(note);
        Ok(map)
    }

    /// A multicast map (SISCI reflective memory across hosts) of `len` bytes at `offset`
    /// of a group whose memory ends at `seg_size`, for the multicast connection named
    /// `key`: the changed bytes of every picture go to each of `homes` (a member of each
    /// other host that has one; hosts that join later are added by
    /// [`DsmMap::multicast_leg`]) and into `local` (a mapping of this host's group memory
    /// from offset 0, when this host has a member); pages come from `local`, else from the
    /// first home that answers. A home that is lost drops out; the map is lost only when
    /// no member is left.
    ///
    /// # Errors
    /// [`DsmError::Unavailable`] where userfaultfd cannot be used, or with no home and no
    /// local memory.
    pub fn multicast(
        session: Arc<Session>,
        key: u64,
        homes: Vec<Arc<dyn RemoteRange>>,
        local: Option<Arc<remora_sys::Mapping>>,
        seg_size: u64,
        offset: u64,
        len: usize,
    ) -> Result<DsmMap, DsmError> {
        let first: Arc<dyn RemoteRange> = match (homes.first(), &local) {
            (Some(h), _) => h.clone(),
            (None, Some(_)) => Arc::new(super::pager::fanout::NoHome),
            (None, None) => return Err(DsmError::Unavailable("no member to send to".into())),
        };
        let fan = super::pager::fanout::Fanout::new(&session, key, homes, local);
        // On the shared pager, which alone is asked to add legs (`multicast_leg`).
        DsmMap::make(session, first, None, Some(fan), seg_size, offset, len, false, false)
    }

    /// A member host joined the group of multicast connection `key` (`joined`): every
    /// multicast map of it sends its stores to `home` too, once the stores it sent before
    /// reached the member hosts it had. Or one left: the maps stop sending to `home` (the
    /// leg with `home`'s key). Returns when the pager did (at once when no map of another
    /// host was ever made).
    pub fn multicast_leg(key: u64, home: Arc<dyn RemoteRange>, joined: bool) {
        if let Some(p) = super::pagers::shared() {
            p.ask(|done| Cmd::Leg { key, home, joined, done });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn make(
        session: Arc<Session>,
        home: Arc<dyn RemoteRange>,
        node: PagerKey,
        fan: Option<super::pager::fanout::Fanout>,
        seg_size: u64,
        offset: u64,
        len: usize,
        readonly: bool,
        ask: bool,
    ) -> Result<DsmMap, DsmError> {
        if !readonly && fan.is_none() {
            // A map that can be written is made once the stores made before it are home
            // (free when none are on their way; at most a settle point's wait): `SCIFlush`
            // waits for the homes only where several pagers had writable maps when it was
            // called, so a flag stored into a map made after it must not overtake data
            // the flush sent without waiting.
            super::pagers::settle_cluster(&session);
        }
        let p = pager_for(&session, node)
            .inspect_err(|e| tracing::warn!("no map of another host's segment: {e}"))?;
        let seg_off = offset & !(PAGE as u64 - 1);
        let delta = (offset - seg_off) as usize;
        let region = Arc::new(
            // Refused for want of memory or address space, or of userfaultfd's features.
            p.uffd.register(delta + len, readonly).map_err(|e| match e.kind() {
                std::io::ErrorKind::OutOfMemory => DsmError::Resources(e.to_string()),
                _ => DsmError::Unavailable(e.to_string()),
            })?,
        );
        let id = p.next.fetch_add(1, Ordering::Relaxed);
        let lost = Arc::new(AtomicBool::new(false));
        // On the pager's own session the map's flow is asked for in the background: the map
        // returns now, and the first fault (or store straight home) waits for it
        // (`flow/asked.rs`). On another session it is had now: a request of the program
        // on that session must not hold the pager's first fault.
        let direct = match (&fan, ask) {
            (Some(_), _) => Soon::ready(None),
            (None, true) => flow_soon(&session, &home),
            (None, false) => Soon::ready(shared_flow(&session, &home)),
        };
        let pages = vec![Page::default(); region.len() / PAGE];
        let fan_direct = fan.as_ref().map(|f| f.is_direct());
        let resident = Arc::new(AtomicUsize::new(0));
        let pm = PMap {
            region: region.clone(),
            session,
            home: home.clone(),
            direct: direct.clone(),
            seg_off,
            seg_size,
            readonly,
            pages,
            resident: resident.clone(),
            lost: lost.clone(),
            pending: p.pending.clone(),
            next_tick: None,
            streaming: false,
            spin_until: None,
            last_lone: None,
            last_refresh: Instant::now(),
            unanswered: false,
            doubtful: false,
            delay: p.flush_min,
            fan,
            leaving: false,
            stand_ins: Vec::new(),
        };
        if !readonly {
            p.writers.fetch_add(1, Ordering::SeqCst);
        }
        // Nothing for the pager to do before the map's first fault or command.
        p.queue(Cmd::Add(id, Box::new(pm)));
        Ok(DsmMap {
            pager: p,
            id,
            region,
            delta,
            len,
            lost,
            released: AtomicBool::new(false),
            fan_direct,
            flow: direct,
            seg_off,
            readonly,
            resident,
            home,
        })
    }

    /// Send the request for the map's pager flow, when it was booked and not sent yet (a map
    /// of [`DsmMap::on_pager_session`]): once the caller booked the map with its daemon, so
    /// that the daemon's dial follows the map's other requests. The flow is asked for by the
    /// first use that needs it otherwise.
    pub fn ask_flow(&self) {
        self.flow.start();
    }

    /// The address of the first mapped byte.
    pub fn as_ptr(&self) -> *mut u8 {
        (self.region.base() + self.delta) as *mut u8
    }

    /// The mapped length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the pager reaches the home over a pager flow of its own (`false`: through
    /// this node's daemon). Waits for a flow still on its way.
    pub fn is_direct(&self) -> bool {
        self.fan_direct.unwrap_or_else(|| self.flow.get().is_some())
    }

    /// The map's own pager flow (waited for when still on its way) and the home's offset
    /// of the region's first byte: not for a read-only or multicast map.
    fn own_flow(&self) -> Option<(Flow, u64)> {
        if self.readonly || self.fan_direct.is_some() {
            return None;
        }
        self.flow.get().map(|f| (f, self.seg_off))
    }

    /// Whether the home node was lost (or refused a transfer).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Store `data` at `off`: through the map (pages fault in as needed), or, from
    /// [`THROUGH`] bytes on, straight home over the map's pager flow, returning once the
    /// home has the bytes (`pager/through.rs`).
    ///
    /// # Errors
    /// `ERANGE` outside the map; `ENOTCONN` once the home is lost (its pages would raise
    /// `SIGBUS`), also when it is lost while the store waits for a page (a cable cut that
    /// ends in the loss of the connection); the flow's error when a store straight home
    /// failed.
    pub fn write(&self, off: usize, data: &[u8]) -> std::io::Result<()> {
        check(off, data.len(), self.len)?;
        self.reachable()?;
        // Not bytes of a map of another host themselves: the kernel's copy into the flow
        // could not fault their missing pages in.
        let paged = || remora_sys::uffd::overlaps_registered(data.as_ptr() as usize, data.len());
        if data.len() >= THROUGH && self.is_direct() && !paged() {
            if let Some(r) = self.write_through(self.delta + off, data) {
                return r;
            }
        }
        self.copy_in(self.delta + off, data)
    }

    /// Copy `data` into the region at byte `at`, through the map ([`DsmMap::copy`]).
    fn copy_in(&self, at: usize, data: &[u8]) -> std::io::Result<()> {
        self.copy(at, data.len(), |r, off, part| r.write_at(off, &data[part]))
    }

    /// A copy through the map for a call of the API, `len` bytes from byte `at` of the
    /// region (`f` copies the bytes of its range of the caller's buffer to or from the
    /// region at the offset it is given): a page that can never be filled, as the home is
    /// lost while the copy waits for it, gets a stand-in rather than raise SIGBUS in the
    /// call (`pager/stand_in.rs`), and the call answers `ENOTCONN`. The copy goes in pieces
    /// of [`COPY_PIECE`] bytes and stops at the first piece that finds the home lost: the
    /// stand-ins, which other threads would read as zeros, are forgotten after one piece
    /// at most, not after the rest of a long copy.
    fn copy(
        &self,
        at: usize,
        len: usize,
        mut f: impl FnMut(&UffdRegion, usize, std::ops::Range<usize>) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let copying = self.pager.copying(self.id);
        let (mut done, mut r) = (0, Ok(()));
        while done < len && r.is_ok() && !self.is_lost() {
            let n = (len - done).min(COPY_PIECE);
            r = f(&self.region, at + done, done..done + n);
            done += n;
        }
        drop(copying);
        if self.is_lost() {
            self.pager.ask(|tx| Cmd::Forget(self.id, tx));
            return Err(std::io::Error::from(std::io::ErrorKind::NotConnected));
        }
        r
    }

    /// Store `data` at byte `start` of the region straight home; `None` when the pager says
    /// it must go through the map.
    fn write_through(&self, start: usize, data: &[u8]) -> Option<std::io::Result<()>> {
        let p = &self.pager;
        if let Some((flow, seg_off)) = self.own_flow().filter(|_| !self.is_lost()) {
            // No page of the pager's maps watched (no store made before this one to a map
            // of its home is left to send first) and no page of the map resident: the
            // pager has nothing to do before or after.
            if p.pending.nothing_watched() && self.resident.load(Ordering::SeqCst) == 0 {
                let mut d = flow.lock().unwrap_or_else(|p| p.into_inner());
                let r = d.write_now(seg_off + start as u64, Source::Buf(data));
                // Still none resident now that the store went (a page fetch that began
                // before it counted itself first): no page holds older bytes.
                if r.is_ok() && self.resident.load(Ordering::SeqCst) == 0 {
                    return Some(r);
                }
                drop(d);
                return Some(self.landed(p, start, data.len(), r));
            }
        }
        if data.len() < THROUGH_HERE {
            // A copy of the bytes costs less than a second command to the pager.
            return p.ask(|tx| Cmd::Store { id: self.id, start, data: data.to_vec(), tx })?;
        }
        let (flow, at) = p.ask(|tx| Cmd::Through { id: self.id, start, len: data.len(), tx })??;
        let r = flow.lock().unwrap_or_else(|p| p.into_inner()).write_now(at, Source::Buf(data));
        Some(self.landed(p, start, data.len(), r))
    }

    /// Store each run (`off`, bytes), in order, straight home over the map's pager flow, and
    /// return once the home has them all (and every store made before them to maps of the
    /// same connection): for a few small stores whose order and arrival matter (a
    /// completion entry, then its sequence number, then a count), at the cost of one round
    /// trip and no fault. Where that cannot go without the pager (a page of the map
    /// resident, some page of a map of its pager watched, no flow of the map's own), the runs go
    /// through the map and a [`DsmMap::flush`].
    ///
    /// # Errors
    /// `ERANGE` outside the map; the flow's error, or `ENOTCONN` when the home was lost.
    pub fn store_home(&self, runs: &[(usize, &[u8])]) -> std::io::Result<()> {
        for (off, data) in runs {
            check(*off, data.len(), self.len)?;
        }
        if self.is_lost() {
            // A page not resident would raise SIGBUS: nothing goes through the map.
            return Err(std::io::Error::from_raw_os_error(107));
        }
        if let Some((flow, seg_off)) = self.own_flow() {
            // As in `write_through`: no store made before is left for the pager to send,
            // and no page holds bytes these stores would make stale.
            if self.pager.pending.nothing_watched() && self.resident.load(Ordering::SeqCst) == 0 {
                let mut d = flow.lock().unwrap_or_else(|p| p.into_inner());
                for (off, data) in runs {
                    d.push(seg_off + (self.delta + off) as u64, data);
                }
                let r = d.send(true);
                drop(d);
                if r.is_ok() && self.resident.load(Ordering::SeqCst) == 0 {
                    return r;
                }
                // A page fetch began meanwhile: drop the pages the stores reached.
                let broken = r.as_ref().is_err_and(|e| e.kind() != std::io::ErrorKind::PermissionDenied);
                for (off, data) in runs {
                    self.pager.ask(|tx| Cmd::Landed {
                        id: self.id,
                        start: self.delta + off,
                        len: data.len(),
                        broken,
                        tx,
                    });
                }
                return r;
            }
        }
        // Each run's bytes as they are (not as a page's difference from its twin, which a
        // store through another map of the same memory may have made stale), straight home
        // by the pager after every store made before; through the map where it cannot go so.
        for (off, data) in runs {
            let start = self.delta + off;
            let sent = self.pager.ask(|tx| Cmd::Store { id: self.id, start, data: data.to_vec(), tx });
            match sent.flatten() {
                Some(r) => r?,
                None => self.copy_in(start, data).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotConnected => std::io::Error::from_raw_os_error(107),
                    _ => e,
                })?,
            }
        }
        if self.flush() {
            Ok(())
        } else {
            Err(std::io::Error::from_raw_os_error(107))
        }
    }

    /// Load `out.len()` bytes at `off` as the home has them now (with every store made
    /// before to maps of the same connection): straight over the map's pager flow, one
    /// round trip, where no page of a map of its pager (its home's maps) holds stores not
    /// sent yet; else a
    /// [`DsmMap::refresh`] and a load through the map. For a word read now and then that
    /// must be current (a table another host rewrites), without dropping every page.
    ///
    /// # Errors
    /// `ERANGE` outside the map; the flow's error, or `ENOTCONN` when the home was lost.
    pub fn load_home(&self, off: usize, out: &mut [u8]) -> std::io::Result<()> {
        check(off, out.len(), self.len)?;
        if self.is_lost() {
            // A page not resident would raise SIGBUS: nothing goes through the map.
            return Err(std::io::Error::from_raw_os_error(107));
        }
        if let Some((flow, seg_off)) = self.own_flow() {
            // No store of this process is left unsent in a page (one sent is on this flow,
            // before the read): the home's bytes include every store made here.
            if self.pager.pending.nothing_watched() {
                let mut d = flow.lock().unwrap_or_else(|p| p.into_inner());
                return d.read(seg_off + (self.delta + off) as u64, out);
            }
        }
        if !self.refresh() {
            return Err(std::io::Error::from_raw_os_error(107));
        }
        self.read(off, out)
    }

    /// Tell the pager that a store of `len` bytes at byte `start` went home straight (with
    /// `r`), and wait until it dropped the pages the store reached. Returns `r`.
    fn landed(&self, p: &Pager, start: usize, len: usize, r: std::io::Result<()>) -> std::io::Result<()> {
        let broken = r.as_ref().is_err_and(|e| e.kind() != std::io::ErrorKind::PermissionDenied);
        p.ask(|tx| Cmd::Landed { id: self.id, start, len, broken, tx });
        r
    }

    /// Load from `off` into `out`.
    ///
    /// # Errors
    /// `ERANGE` outside the map; `ENOTCONN` once the home is lost (also while the load
    /// waits for a page, as in [`DsmMap::write`]).
    pub fn read(&self, off: usize, out: &mut [u8]) -> std::io::Result<()> {
        check(off, out.len(), self.len)?;
        self.reachable()?;
        self.copy(self.delta + off, out.len(), |r, at, part| r.read_at(at, &mut out[part]))
    }

    /// `ENOTCONN` once the home is lost: the map's missing pages are poisoned then, and a
    /// copy through them would raise `SIGBUS` in the program (a load or store of its own
    /// does; a call of the API answers an error instead).
    fn reachable(&self) -> std::io::Result<()> {
        if self.is_lost() {
            return Err(std::io::Error::from(std::io::ErrorKind::NotConnected));
        }
        Ok(())
    }

    /// An atomic view of the 8 bytes at `off`.
    pub fn atomic_u64(&self, off: usize) -> Option<&std::sync::atomic::AtomicU64> {
        check(off, 8, self.len).ok()?;
        self.region.atomic_u64(self.delta + off)
    }

    /// Send every store made so far home and wait until it is there. `false` if the home
    /// node could not be reached.
    pub fn flush(&self) -> bool {
        // A child made by fork: its parent's pager does not run here, and the stores the
        // child makes into this (inherited) map reach no home.
        if !self.pager.runs_here() {
            return false;
        }
        // No page of the pager's maps is watched and every store they sent was answered:
        // the stores made so far are home (as at a settle point).
        if self.pager.pending.nothing() {
            return !self.is_lost();
        }
        self.pager.ask(|tx| Cmd::Flush(self.id, tx, true)).unwrap_or(false) && !self.is_lost()
    }

    /// Send every store made so far home without waiting for the home's answer: stores
    /// made after this call reach the home after them. `false` if the home was lost.
    pub fn send(&self) -> bool {
        self.pager.ask(|tx| Cmd::Flush(self.id, tx, false)).unwrap_or(false) && !self.is_lost()
    }

    /// Flush, then drop every clean page: later loads see the home's current contents.
    pub fn refresh(&self) -> bool {
        self.pager.ask(|tx| Cmd::Refresh(self.id, tx)).unwrap_or(false) && !self.is_lost()
    }

    /// Flush and unmap. While the route home is silent (a cable cut), the unmap does not
    /// wait for the pager: it may be waiting for the route on behalf of another access to
    /// a map of the same home (a page fetch), and removes the map once it is free.
    pub fn release(&self) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(done) = self.pager.asked(|tx| Cmd::Remove(self.id, tx)) {
            use std::sync::mpsc::RecvTimeoutError::Timeout;
            while let Err(Timeout) = done.recv_timeout(Duration::from_millis(50)) {
                if self.home.route() == Route::Silent {
                    break;
                }
            }
        }
        if !self.readonly {
            self.pager.writers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for DsmMap {
    fn drop(&mut self) {
        self.release();
    }
}
