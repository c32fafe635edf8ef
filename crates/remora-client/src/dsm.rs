//! The DSM pager: loads and stores on a segment of another host, in software.
//!
//! A map of a segment that lives on another host is anonymous memory of this process,
//! registered with userfaultfd. One pager thread per process serves every such map:
//!
//! ```text
//!   load of a missing page ──► fault ──► pager fetches the page from the home node
//!                                         (SegRead through this node's daemon), installs
//!                                         it write-protected
//!   store to a clean page  ──► fault ──► pager keeps a twin (copy), lifts protection
//!   after the flush delay  ───► pager protects the page again, diffs it against its
//!                                twin, sends the changed bytes home (SegWrite), without
//!                                waiting for the answer (the daemon keeps them in order)
//!   every `refresh` (default 1 ms) ───► pager drops clean pages: the next load refetches
//! ```
//!
//! The flush delay adapts per map between `REMORA_DSM_FLUSH_MIN_US` (default 2) and
//! `REMORA_DSM_FLUSH_US` (default 20): it doubles while pages are written again right after
//! each flush (stores are batched) and halves after quiet spells (a store goes home almost
//! at once). A page whose write fault was taken but that has not changed yet stays
//! writable until it changes (at most 1 ms), so a writer that was slow to run does not
//! fault twice.
//!
//! Consistency model (what a program may rely on):
//! * A store reaches the home node within the flush delay of landing (at most
//!   `REMORA_DSM_FLUSH_US`, plus the send), and at once at [`DsmMap::flush`] (`SCIFlush`,
//!   `SCIStoreBarrier`, `SCICheckSequence`, unmap), which waits for the home's answer.
//! * A load sees every store that reached the home node before the last
//!   [`DsmMap::refresh`] (`SCIStartSequence`), and any page is refetched within `refresh`
//!   (`REMORA_DSM_REFRESH_US`, default 1000): a program polling a word of the map sees the
//!   home's change without calling anything.
//! * Only the bytes a process changed are sent home (diffs against the twin), so processes
//!   on several hosts storing to different bytes of one page never overwrite each other.
//!   Stores of several hosts to the same bytes: the last to reach the home node wins.
//! * When the home node is lost, pages still resident keep their last contents and stores
//!   to them stay local; an access to a page that is not resident (never touched, or
//!   dropped by the last refresh, so within `refresh` nearly every page) raises SIGBUS
//!   (`UFFDIO_POISON`) rather than hanging. The connection reports the loss
//!   (`SCI_CB_LOST`), sequences report NOT_RETRIABLE, flushes fail.
//!
//! The pager lives in the client process (not the daemon) so that a fault is resolved by a
//! thread of the faulting process with one request to its own daemon: no userfaultfd
//! crosses a socket, and a process that dies takes its pager with it.

use crate::Session;
use remora_proto::{Reply, Request, ScifRequest, MAX_DATA_IO};
use remora_sys::sync::EventFd;
use remora_sys::uffd::{Uffd, UffdRegion};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const PAGE: usize = 4096;

fn env_us(name: &str, default: u64) -> Duration {
    Duration::from_micros(std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

/// Why a DSM map cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum DsmError {
    /// userfaultfd is not available (kernel, permissions, seccomp).
    #[error("userfaultfd unavailable: {0}")]
    Unavailable(String),
}

#[derive(Default, Clone)]
struct Page {
    resident: bool,
    dirty: bool,
    twin: Option<Box<[u8]>>,
    /// When the page was last written after a clean spell (its write fault).
    dirtied: Option<Instant>,
    /// When its changes last went home.
    flushed: Option<Instant>,
}

/// How long a page written (fault taken) but not yet changed is left unprotected before the
/// pager gives up waiting for the store and protects it again.
const STORE_WAIT: Duration = Duration::from_millis(1);

/// Where a map's pages live.
#[derive(Debug, Clone, Copy)]
pub enum Home {
    /// A SISCI segment connection (`SegRead`/`SegWrite` through this node's daemon).
    Segment {
        /// The connection handle.
        conn: u64,
    },
    /// The registered windows of a SCIF endpoint's peer on another host
    /// (`ScifRemoteRead`/`ScifRemoteWrite` on the endpoint's session).
    ScifPeer,
}

struct PMap {
    region: Arc<UffdRegion>,
    session: Arc<Session>,
    home: Home,
    seg_off: u64,
    seg_size: u64,
    readonly: bool,
    pages: Vec<Page>,
    lost: Arc<AtomicBool>,
    dirty_since: Option<Instant>,
    last_refresh: Instant,
    /// Stores were sent without waiting for the home's answer.
    unanswered: bool,
    /// The current flush delay: short while pages are written now and then (a store goes
    /// home almost at once), doubled up to `flush` while pages are written again right
    /// after each flush (stores are batched).
    delay: Duration,
}

enum Cmd {
    FlushAll(Sender<bool>),
    Add(u64, PMap),
    Flush(u64, Sender<bool>),
    Refresh(u64, Sender<bool>),
    Remove(u64, Sender<()>),
}

struct Pager {
    uffd: Uffd,
    waker: EventFd,
    cmds: Mutex<VecDeque<Cmd>>,
    next: AtomicU64,
    flush: Duration,
    flush_min: Duration,
    refresh: Duration,
}

static PAGER: OnceLock<Result<Arc<Pager>, String>> = OnceLock::new();

/// Send every DSM map's stores home and wait (at most `limit`): for `SCITerminate` and
/// process exit. Does nothing when no map of another host was ever made.
pub fn flush_all(limit: Duration) -> bool {
    let Some(Ok(p)) = PAGER.get() else { return true };
    let (tx, rx) = channel();
    p.command(Cmd::FlushAll(tx));
    rx.recv_timeout(limit).unwrap_or(false)
}

fn pager() -> Result<&'static Arc<Pager>, DsmError> {
    let r = PAGER.get_or_init(|| {
        let uffd = Uffd::new().map_err(|e| e.to_string())?;
        let waker = EventFd::new().map_err(|e| e.to_string())?;
        let p = Arc::new(Pager {
            uffd,
            waker,
            cmds: Mutex::new(VecDeque::new()),
            next: AtomicU64::new(1),
            flush: env_us("REMORA_DSM_FLUSH_US", 20),
            flush_min: env_us("REMORA_DSM_FLUSH_MIN_US", 2),
            refresh: env_us("REMORA_DSM_REFRESH_US", 1000),
        });
        let runner = p.clone();
        std::thread::Builder::new()
            .name("remora-pager".into())
            .spawn(move || runner.run())
            .map_err(|e| e.to_string())?;
        Ok(p)
    });
    r.as_ref().map_err(|e| DsmError::Unavailable(e.clone()))
}

/// A map of a segment of another host.
pub struct DsmMap {
    id: u64,
    region: Arc<UffdRegion>,
    delta: usize,
    len: usize,
    lost: Arc<AtomicBool>,
    released: AtomicBool,
}

impl std::fmt::Debug for DsmMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DsmMap").field("id", &self.id).field("len", &self.len).finish()
    }
}

impl DsmMap {
    /// Map `len` bytes at `offset` of connection `conn` (a segment of size `seg_size` on
    /// another host).
    ///
    /// # Errors
    /// [`DsmError::Unavailable`] where userfaultfd cannot be used (logged once with why).
    pub fn new(
        session: Arc<Session>,
        conn: u64,
        seg_size: u64,
        offset: u64,
        len: usize,
        readonly: bool,
    ) -> Result<DsmMap, DsmError> {
        DsmMap::new_at(session, Home::Segment { conn }, seg_size, offset, len, readonly)
    }

    /// Map `len` bytes at `offset` of `home` (whose address space ends at `size`).
    ///
    /// # Errors
    /// [`DsmError::Unavailable`] where userfaultfd cannot be used (logged once with why).
    pub fn new_at(
        session: Arc<Session>,
        home: Home,
        seg_size: u64,
        offset: u64,
        len: usize,
        readonly: bool,
    ) -> Result<DsmMap, DsmError> {
        let p = pager()
            .inspect_err(|e| tracing::warn!("maps of other hosts' segments are not supported here: {e}"))?;
        let seg_off = offset & !(PAGE as u64 - 1);
        let delta = (offset - seg_off) as usize;
        let region = Arc::new(
            p.uffd.register(delta + len, readonly).map_err(|e| DsmError::Unavailable(e.to_string()))?,
        );
        let id = p.next.fetch_add(1, Ordering::Relaxed);
        let lost = Arc::new(AtomicBool::new(false));
        let pages = vec![Page::default(); region.len() / PAGE];
        let pm = PMap {
            region: region.clone(),
            session,
            home,
            seg_off,
            seg_size,
            readonly,
            pages,
            lost: lost.clone(),
            dirty_since: None,
            last_refresh: Instant::now(),
            unanswered: false,
            delay: p.flush_min,
        };
        p.command(Cmd::Add(id, pm));
        Ok(DsmMap { id, region, delta, len, lost, released: AtomicBool::new(false) })
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

    /// Whether the home node was lost (or refused a transfer).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Store `data` at `off` (pages fault in as needed).
    ///
    /// # Errors
    /// `ERANGE` outside the map.
    pub fn write(&self, off: usize, data: &[u8]) -> std::io::Result<()> {
        check(off, data.len(), self.len)?;
        self.region.write_at(self.delta + off, data)
    }

    /// Load from `off` into `out`.
    ///
    /// # Errors
    /// `ERANGE` outside the map.
    pub fn read(&self, off: usize, out: &mut [u8]) -> std::io::Result<()> {
        check(off, out.len(), self.len)?;
        self.region.read_at(self.delta + off, out)
    }

    /// An atomic view of the 8 bytes at `off`.
    pub fn atomic_u64(&self, off: usize) -> Option<&std::sync::atomic::AtomicU64> {
        check(off, 8, self.len).ok()?;
        self.region.atomic_u64(self.delta + off)
    }

    /// Send every store made so far home and wait until it is there. `false` if the home
    /// node could not be reached.
    pub fn flush(&self) -> bool {
        let Ok(p) = pager() else { return false };
        let (tx, rx) = channel();
        p.command(Cmd::Flush(self.id, tx));
        rx.recv().unwrap_or(false) && !self.is_lost()
    }

    /// Flush, then drop every clean page: later loads see the home's current contents.
    pub fn refresh(&self) -> bool {
        let Ok(p) = pager() else { return false };
        let (tx, rx) = channel();
        p.command(Cmd::Refresh(self.id, tx));
        rx.recv().unwrap_or(false) && !self.is_lost()
    }

    /// Flush and unmap.
    pub fn release(&self) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Ok(p) = pager() {
            let (tx, rx) = channel();
            p.command(Cmd::Remove(self.id, tx));
            let _ = rx.recv();
        }
    }
}

impl Drop for DsmMap {
    fn drop(&mut self) {
        self.release();
    }
}

fn check(off: usize, len: usize, total: usize) -> std::io::Result<()> {
    match off.checked_add(len) {
        Some(e) if e <= total => Ok(()),
        _ => Err(std::io::Error::from_raw_os_error(34)),
    }
}

/// Byte runs where `now` differs from `twin`, with gaps under 16 bytes merged.
fn diff(twin: &[u8], now: &[u8]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < now.len() {
        if twin[i] == now[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < now.len() && twin[i] != now[i] {
            i += 1;
        }
        match runs.last_mut() {
            Some(last) if start - last.1 < 16 => last.1 = i,
            _ => runs.push((start, i)),
        }
    }
    runs
}

impl Pager {
    fn command(&self, c: Cmd) {
        self.cmds.lock().unwrap_or_else(|p| p.into_inner()).push_back(c);
        self.waker.signal();
    }

    fn run(&self) {
        remora_sys::sync::precise_timers();
        let mut maps: BTreeMap<usize, (u64, PMap)> = BTreeMap::new();
        loop {
            let now = Instant::now();
            let due = maps
                .values()
                .flat_map(|(_, m)| [m.dirty_since.map(|d| d + m.delay), Some(m.last_refresh + self.refresh)])
                .flatten()
                .min();
            let timeout = due.map(|d| d.saturating_duration_since(now));
            {
                use std::os::fd::AsFd;
                let _ = remora_sys::poller::wait_readable(&[self.uffd.as_fd(), self.waker.as_fd()], timeout);
            }
            self.waker.drain();
            self.drain_cmds(&mut maps);
            while let Ok(Some(f)) = self.uffd.next_fault() {
                // A fault may come from a map whose registration is still queued.
                if !maps
                    .range(..=f.addr)
                    .next_back()
                    .is_some_and(|(_, (_, m))| m.region.contains(f.addr, PAGE))
                {
                    self.drain_cmds(&mut maps);
                }
                let Some((_, (_, m))) = maps.range_mut(..=f.addr).next_back() else { continue };
                if !m.region.contains(f.addr, PAGE) {
                    continue;
                }
                let idx = (f.addr - m.region.base()) / PAGE;
                if f.wp {
                    self.on_write(m, idx, f.addr);
                } else {
                    self.on_missing(m, idx, f.addr);
                }
            }
            let now = Instant::now();
            for (_, m) in maps.values_mut() {
                if m.dirty_since.is_some_and(|d| now >= d + m.delay) {
                    // In the background a lone store does not wait for the home's answer
                    // (the daemon keeps the session's requests in order), so the pager is
                    // free for the next fault at once. A map whose pages are written
                    // without pause (delay at its bound) waits, which paces the flushes.
                    let pace = m.delay >= self.flush;
                    self.flush_map(m, pace);
                }
                if now >= m.last_refresh + self.refresh {
                    self.refresh_map(m);
                }
            }
        }
    }

    fn drain_cmds(&self, maps: &mut BTreeMap<usize, (u64, PMap)>) {
        loop {
            let cmd = self.cmds.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
            let Some(cmd) = cmd else { break };
            match cmd {
                Cmd::FlushAll(tx) => {
                    let mut ok = true;
                    for (_, m) in maps.values_mut() {
                        ok &= self.flush_map(m, true);
                    }
                    let _ = tx.send(ok);
                }
                Cmd::Add(id, m) => {
                    maps.insert(m.region.base(), (id, m));
                }
                Cmd::Flush(id, tx) => {
                    let ok = find_id(maps, id).map(|m| self.flush_map(m, true)).unwrap_or(false);
                    let _ = tx.send(ok);
                }
                Cmd::Refresh(id, tx) => {
                    let ok = find_id(maps, id).map(|m| self.refresh_map(m)).unwrap_or(false);
                    let _ = tx.send(ok);
                }
                Cmd::Remove(id, tx) => {
                    if let Some(m) = find_id(maps, id) {
                        self.flush_map(m, true);
                    }
                    maps.retain(|_, (i, _)| *i != id);
                    let _ = tx.send(());
                }
            }
        }
    }

    fn on_missing(&self, m: &mut PMap, idx: usize, addr: usize) {
        let off = m.seg_off + (idx * PAGE) as u64;
        let mut page = vec![0u8; PAGE];
        let fetched = if m.lost.load(Ordering::SeqCst) || off >= m.seg_size {
            None
        } else {
            let len = (m.seg_size - off).min(PAGE as u64) as u32;
            let req = match m.home {
                Home::Segment { conn } => Request::SegRead { conn, offset: off, len },
                Home::ScifPeer => Request::Scif(ScifRequest::RemoteRead { offset: off, len }),
            };
            match m.session.request(req, &[]) {
                Ok((Reply::Data(d), _)) if d.len() == len as usize => {
                    page[..d.len()].copy_from_slice(&d);
                    Some(page)
                }
                Ok(_) | Err(_) => {
                    m.lost.store(true, Ordering::SeqCst);
                    None
                }
            }
        };
        match fetched {
            Some(page) => {
                if self.uffd.copy_page(&m.region, addr, &page, !m.readonly).is_ok() {
                    m.pages[idx].resident = true;
                }
            }
            None => {
                // The page can never be filled: make the access fail instead of hanging.
                if self.uffd.poison(&m.region, addr, PAGE).is_err() {
                    let _ = self.uffd.copy_page(&m.region, addr, &[0u8; PAGE], false);
                }
            }
        }
    }

    fn on_write(&self, m: &mut PMap, idx: usize, addr: usize) {
        if !m.pages[idx].resident {
            // The page was dropped after this store faulted: reading it here would fault on
            // the pager's own thread. Let the writer retry; it will fault as missing.
            let _ = self.uffd.wake(&m.region, addr, PAGE);
            return;
        }
        let p = &mut m.pages[idx];
        if !p.dirty {
            let mut twin = vec![0u8; PAGE].into_boxed_slice();
            if m.region.read_present_page(addr, &mut twin).is_ok() {
                p.twin = Some(twin);
            }
            p.dirty = true;
            let now = Instant::now();
            p.dirtied = Some(now);
            // Written again right after its last flush: the page is hot, batch more;
            // written after a quiet spell: send the next stores home quickly.
            if let Some(f) = p.flushed {
                m.delay = if now - f < m.delay * 2 {
                    (m.delay * 2).min(self.flush)
                } else {
                    (m.delay / 2).max(self.flush_min)
                };
            }
            m.dirty_since.get_or_insert(now);
        }
        let _ = self.uffd.protect(&m.region, addr, PAGE, false);
    }

    /// Protect every dirty page again, send its changes home. `false` if that failed.
    /// Send the map's changed bytes home; with `wait`, return only once the home has them
    /// (and everything sent before without waiting).
    fn flush_map(&self, m: &mut PMap, wait: bool) -> bool {
        m.dirty_since = None;
        let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut bytes = 0;
        let mut ok = true;
        let mut now = vec![0u8; PAGE];
        let mut waiting = false;
        let t = Instant::now();
        for idx in 0..m.pages.len() {
            if !m.pages[idx].dirty {
                continue;
            }
            let addr = m.region.base() + idx * PAGE;
            if !wait && m.pages[idx].dirtied.is_some_and(|d| t - d < STORE_WAIT) {
                // The writer may not have run since its fault (two cores, many threads):
                // while the page still equals its twin, leave it writable and look again
                // at the next tick, rather than protect it and make the store fault again.
                let unchanged = m.region.read_present_page(addr, &mut now).is_ok()
                    && m.pages[idx].twin.as_deref().is_some_and(|tw| tw == &now[..]);
                if unchanged {
                    waiting = true;
                    continue;
                }
            }
            let _ = self.uffd.protect(&m.region, addr, PAGE, true);
            if m.region.read_present_page(addr, &mut now).is_err() {
                continue;
            }
            let page = &mut m.pages[idx];
            page.dirty = false;
            page.flushed = Some(t);
            let twin = page.twin.take().unwrap_or_else(|| vec![0u8; PAGE].into_boxed_slice());
            for (a, b) in diff(&twin, &now) {
                let off = m.seg_off + (idx * PAGE + a) as u64;
                if off >= m.seg_size {
                    continue;
                }
                let b = b.min(a + (m.seg_size - off) as usize);
                if bytes + (b - a) > MAX_DATA_IO {
                    ok &= send(m, std::mem::take(&mut runs), false);
                    bytes = 0;
                }
                bytes += b - a;
                runs.push((off, now[a..b].to_vec()));
            }
        }
        if !runs.is_empty() || (wait && m.unanswered) {
            ok &= send(m, runs, wait);
        }
        if waiting {
            // Look again later, each time less often: the writer needs a core, and a pager
            // ticking every 2 µs would keep one from it.
            m.dirty_since = Some(t);
            m.delay = (m.delay * 2).min(self.flush);
        }
        ok
    }

    /// Flush, then drop every resident page so the next access refetches it.
    fn refresh_map(&self, m: &mut PMap) -> bool {
        // Refetches queue behind these stores in the session, so no need to wait.
        let ok = self.flush_map(m, false);
        m.last_refresh = Instant::now();
        if m.lost.load(Ordering::SeqCst) {
            return false;
        }
        for idx in 0..m.pages.len() {
            if m.pages[idx].resident && !m.pages[idx].dirty {
                let addr = m.region.base() + idx * PAGE;
                if m.region.drop_pages(addr, PAGE).is_ok() {
                    m.pages[idx].resident = false;
                }
            }
        }
        ok
    }
}

/// Send runs home, waiting for the answer when `wait` (an empty `wait` send only waits for
/// what went before). Without waiting, failures surface at the next request that waits.
fn send(m: &mut PMap, runs: Vec<(u64, Vec<u8>)>, wait: bool) -> bool {
    if m.lost.load(Ordering::SeqCst) {
        return false;
    }
    let reqs: Vec<Request> = match m.home {
        Home::Segment { conn } => vec![Request::SegWrite { conn, runs }],
        Home::ScifPeer if runs.is_empty() => {
            vec![Request::Scif(ScifRequest::RemoteWrite { offset: 0, data: Vec::new() })]
        }
        Home::ScifPeer => runs
            .into_iter()
            .map(|(offset, data)| Request::Scif(ScifRequest::RemoteWrite { offset, data }))
            .collect(),
    };
    let last = reqs.len().saturating_sub(1);
    let mut r = Ok(());
    for (i, req) in reqs.into_iter().enumerate() {
        r = if wait && i == last { m.session.request(req, &[]).map(|_| ()) } else { m.session.note(req) };
        if r.is_err() {
            break;
        }
    }
    m.unanswered = !wait && r.is_ok();
    match r {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("DSM: stores could not reach the home node: {e}");
            m.lost.store(true, Ordering::SeqCst);
            false
        }
    }
}

fn find_id(maps: &mut BTreeMap<usize, (u64, PMap)>, id: u64) -> Option<&mut PMap> {
    maps.values_mut().find(|(i, _)| *i == id).map(|(_, m)| m)
}

#[cfg(test)]
mod tests {
    use super::diff;

    #[test]
    fn diff_finds_and_merges_runs() {
        let a = vec![0u8; 100];
        let mut b = a.clone();
        b[3] = 1;
        b[10] = 1;
        b[50] = 2;
        b[51] = 2;
        assert_eq!(diff(&a, &b), vec![(3, 11), (50, 52)]);
        assert!(diff(&a, &a).is_empty());
    }
}
