//! The DSM pager: loads and stores on a segment of another host, in software.
//!
//! A map of a segment that lives on another host is anonymous memory of this process,
//! registered with userfaultfd. One pager thread per process serves every such map, over a
//! TCP connection of its own per segment connection, shared by that connection's maps (a
//! *pager flow*: dialed, authenticated and bound to the connection by this node's daemon,
//! handed over with SCM_RIGHTS, served on the home by a daemon thread that moves frames
//! straight between the socket and the segment):
//!
//! ```text
//!   load of a missing page ──► fault ──► pager fetches the page, installs it
//!                                         write-protected
//!   store to a clean page  ──► fault ──► pager keeps a twin (the page as the home has
//!                                         it), lifts protection: the page is *watched*
//!   every tick             ───► a watched page that differs from its twin is copied until
//!                                two copies agree; the changed bytes go home (no answer
//!                                awaited: the flow keeps them in order); the copy becomes
//!                                the twin. A page quiet for `QUIET` is protected again.
//!   every `refresh` (default 1 ms) ───► pager sends what changed and drops every page:
//!                                the next access refetches
//! ```
//!
//! Ticks come every `REMORA_DSM_FLUSH_MIN_US` (default 10) for `HOT` after a change, then
//! less often up to `REMORA_DSM_FLUSH_US` (default 20); a writer that never pauses is looked
//! at every `REMORA_DSM_FLUSH_US`, so its stores batch. A page written again and again
//! costs no fault per store. After a lone change the pager looks without sleeping for
//! `REMORA_DSM_SPIN_US` (default 50), yielding between looks: in a ping-pong the next store
//! comes one round trip later and leaves at once. A spin kept from a core for `CROWDED`
//! means programs that never yield hold the cores: the pager then stops spinning for a
//! while and runs at nice -20 (where allowed) so that its ticks preempt them.
//!
//! Two copies in a row that agree are a consistent picture for every writer whose stores
//! are seen in program order (x86): if the picture holds a store, the second copy, read
//! entirely after the first, holds every store before it. The home stores a picture's
//! changed bytes in address order, so a reader there may see part of one picture.
//!
//! Consistency model (what a program may rely on):
//! * A store reaches the home node within `REMORA_DSM_FLUSH_US` of landing (plus the
//!   send); at [`DsmMap::flush`] (`SCIStoreBarrier`, `SCICheckSequence`, unmap) the caller
//!   waits until it is there; [`DsmMap::send`] and [`send_all`] (`SCIFlush`) send it at
//!   once without waiting.
//! * Signals on other paths (interrupt triggers, DMA, SCIF messages and fences) call
//!   [`settle`] first: the stores made before them land before they leave.
//! * Order: stores separated by a flush or a send reach the home in program order (one
//!   flow keeps a connection's stores in order; [`send_all`] waits for the homes' answers
//!   when the maps use several flows). Stores
//!   between two of them may become visible at the home in any order (as through the
//!   write-combining buffers of the adapters): store the data, `SCIFlush`, store the flag.
//! * A load sees every store that reached the home node before the last
//!   [`DsmMap::refresh`] (`SCIStartSequence`), and any page is refetched within `refresh`
//!   (`REMORA_DSM_REFRESH_US`, default 1000): a program polling a word of the map sees the
//!   home's change without calling anything.
//! * Only the bytes a process changed are sent home (diffs against the twin), so processes
//!   on several hosts storing to different bytes of one page never overwrite each other.
//!   Stores of several hosts to the same bytes: the last to reach the home node wins.
//! * When the home node is lost, pages still resident keep their last contents and stores
//!   to them stay local; an access to a page that is not resident (never touched, or
//!   dropped by the last refresh, so within `refresh` every page) raises SIGBUS
//!   (`UFFDIO_POISON`) rather than hanging. The connection reports the loss
//!   (`SCI_CB_LOST`), sequences report NOT_RETRIABLE, flushes fail. A home that stops
//!   answering without closing the flow is given up after 10 s.
//!
//! The pager lives in the client process (not the daemon) so that a fault is resolved by a
//! thread of the faulting process: no userfaultfd crosses a socket, and a process that dies
//! takes its pager with it. A SCIF endpoint's maps of its peer's windows (`scif_mmap` of a
//! peer on another host) use a pager flow bound to the peer's windows. Where the daemon
//! cannot open a pager flow, requests go through this node's daemon instead.

use crate::Session;
use remora_proto::link::{BulkFrame, BulkHeader, BulkOp, BULK_FRAME, MAX_SCIF_FRAME};
use remora_proto::{Reply, Request, ScifRequest, MAX_DATA_IO};
use remora_sys::sync::EventFd;
use remora_sys::uffd::{Uffd, UffdRegion};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use zerocopy::IntoBytes;

const PAGE: usize = 4096;

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
    /// Writable since its write fault: the pager watches it for changes against `twin`.
    dirty: bool,
    /// The page as the home has it from us (fetched, plus every change sent since).
    twin: Option<Box<[u8]>>,
    /// When a change was last seen (or the write fault taken).
    changed: Option<Instant>,
}

/// How long a watched page may stay unchanged before the pager protects it again (its next
/// store faults, and it costs nothing until then).
const QUIET: Duration = Duration::from_millis(1);
/// A spinning pager that was kept from a core this long yields to the programs that hold
/// them (spinning stops for a while).
const CROWDED: Duration = Duration::from_micros(200);
/// How long after a change the pager keeps looking at the short interval before it backs
/// off (a writer answering a peer writes again about one round trip later).
const HOT: Duration = Duration::from_micros(100);

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

/// A pager's own connection to the home node (`Flow::Pager`), dialed and authenticated by
/// this node's daemon and handed over: page fetches and stores go straight to the home
/// daemon's thread that serves them, with no daemon of this host in between.
struct Direct {
    s: std::net::TcpStream,
    /// The home node's handle of the connection.
    remote: u64,
    tag: u64,
    /// Write frames not sent yet.
    out: Vec<u8>,
    /// An error happened: the stream may be out of step, nothing more goes through it.
    broken: bool,
}

/// A pager flow shared by every map of one connection (one stream keeps their stores in
/// order).
type Flow = Arc<Mutex<Direct>>;

/// A pager flow known by (session, connection), held weakly.
type KnownFlow = ((usize, u64), std::sync::Weak<Mutex<Direct>>);

/// The pager flows of this process.
static FLOWS: Mutex<Vec<KnownFlow>> = Mutex::new(Vec::new());

/// The pager flow for connection `conn` of `session`: the one its other maps use, or a new
/// one. `None` where the daemon cannot open one.
fn shared_flow(session: &Arc<Session>, home: Home) -> Option<Flow> {
    if !remora_config::Config::get().pager_flows {
        return None;
    }
    let (conn, req) = match home {
        Home::Segment { conn } => (conn, Request::DsmFlow { conn }),
        // One SCIF endpoint session has one peer.
        Home::ScifPeer => (u64::MAX, Request::Scif(ScifRequest::PagerFlow)),
    };
    let key = (Arc::as_ptr(session) as usize, conn);
    {
        let mut flows = FLOWS.lock().unwrap_or_else(|p| p.into_inner());
        flows.retain(|(_, w)| w.strong_count() > 0);
        let known = flows.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade());
        if let Some(d) = known {
            if !d.lock().unwrap_or_else(|p| p.into_inner()).broken {
                return Some(d);
            }
        }
    }
    // Dial without holding the books: other maps are made meanwhile. Two maps of one
    // connection made at once may each get a flow; the later one is shared from then on.
    let d = Arc::new(Mutex::new(Direct::open(session, req)?));
    let mut flows = FLOWS.lock().unwrap_or_else(|p| p.into_inner());
    flows.retain(|(k, _)| *k != key);
    flows.push((key, Arc::downgrade(&d)));
    Some(d)
}

impl Direct {
    /// How long an answer may take before the home is given up.
    const PATIENCE: Duration = Duration::from_secs(10);

    fn open(session: &Session, req: Request) -> Option<Direct> {
        let (reply, mut fds) = session.request(req, &[]).ok()?;
        let (Reply::DsmFlow { remote, .. }, Some(fd)) = (reply, fds.pop()) else { return None };
        let s = std::net::TcpStream::from(fd);
        s.set_read_timeout(Some(Self::PATIENCE)).ok()?;
        s.set_write_timeout(Some(Self::PATIENCE)).ok()?;
        s.set_nodelay(true).ok()?;
        Some(Direct { s, remote, tag: 0, out: Vec::new(), broken: false })
    }

    fn frame(&mut self, op: BulkOp, offset: u64, len: usize, ok: bool) -> BulkFrame {
        self.tag += 1;
        BulkFrame::from_header(&BulkHeader {
            op,
            tag: self.tag,
            conn: self.remote,
            offset,
            len: len as u64,
            ok,
        })
    }

    /// The next answer, which must be `op` for the last frame sent.
    fn answer(&mut self, op: BulkOp, refusal_ok: bool) -> std::io::Result<BulkHeader> {
        use std::io::Read;
        let mut raw = [0u8; BULK_FRAME];
        self.s.read_exact(&mut raw)?;
        let h = BulkFrame::parse(&raw).map_err(std::io::Error::other)?;
        if h.op != op || h.tag != self.tag || !(h.ok || refusal_ok) {
            return Err(std::io::Error::other(format!("the home answered {h:?}")));
        }
        Ok(h)
    }

    /// Fetch `page.len()` bytes at `offset`. A read the home refuses (in step, answered
    /// with no data) fails without breaking the flow for the other maps that share it.
    fn read(&mut self, offset: u64, page: &mut [u8]) -> std::io::Result<()> {
        let r = self.try_read(offset, page);
        if let Err(e) = &r {
            self.broken |= e.kind() != std::io::ErrorKind::PermissionDenied;
        }
        r
    }

    fn try_read(&mut self, offset: u64, page: &mut [u8]) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::Error::other("the pager flow failed earlier"));
        }
        use std::io::{Read, Write};
        let f = self.frame(BulkOp::Read, offset, page.len(), false);
        self.s.write_all(f.as_bytes())?;
        let h = self.answer(BulkOp::Data, true)?;
        if !h.ok && h.len == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "the home refused the read",
            ));
        }
        if h.len != page.len() as u64 {
            return Err(std::io::Error::other(format!("the home sent {} bytes", h.len)));
        }
        self.s.read_exact(page)
    }

    /// Store `data` at `offset` now, in frames of at most `MAX_SCIF_FRAME`, and wait for
    /// the home to have it (with everything sent before).
    fn write_now(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let r = (|| {
            if self.broken {
                return Err(std::io::Error::other("the pager flow failed earlier"));
            }
            // Stores queued by the pager go first.
            let queued = std::mem::take(&mut self.out);
            self.s.write_all(&queued)?;
            // Every frame asks for an answer (so a refusal is told, not fatal). Answers are
            // read as they come once 64 are outstanding, and the rest after the last frame.
            let mut next = self.tag + 1;
            let mut refused = false;
            let mut take = |d: &mut Direct, next: &mut u64| -> std::io::Result<()> {
                let mut raw = [0u8; BULK_FRAME];
                std::io::Read::read_exact(&mut d.s, &mut raw)?;
                let h = BulkFrame::parse(&raw).map_err(std::io::Error::other)?;
                if h.op != BulkOp::Ack || h.tag != *next {
                    return Err(std::io::Error::other(format!("the home answered {h:?}")));
                }
                refused |= !h.ok;
                *next += 1;
                Ok(())
            };
            for (i, chunk) in data.chunks(MAX_SCIF_FRAME).enumerate() {
                let f = self.frame(BulkOp::Write, offset + (i * MAX_SCIF_FRAME) as u64, chunk.len(), true);
                self.s.write_all(f.as_bytes())?;
                self.s.write_all(chunk)?;
                if self.tag + 1 - next > 64 {
                    take(self, &mut next)?;
                }
            }
            while next <= self.tag {
                take(self, &mut next)?;
            }
            if refused {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "the peer refused a store",
                ));
            }
            Ok(())
        })();
        if let Err(e) = &r {
            self.broken |= e.kind() != std::io::ErrorKind::PermissionDenied;
        }
        r
    }

    /// Queue a store of `data` at `offset`.
    fn push(&mut self, offset: u64, data: &[u8]) {
        let f = self.frame(BulkOp::Write, offset, data.len(), false);
        self.out.extend_from_slice(f.as_bytes());
        self.out.extend_from_slice(data);
    }

    /// Send the queued stores; with `wait`, return once the home has stored them (and
    /// everything sent before).
    fn send(&mut self, wait: bool) -> std::io::Result<()> {
        let r = self.try_send(wait);
        self.broken |= r.is_err();
        r
    }

    fn try_send(&mut self, wait: bool) -> std::io::Result<()> {
        use std::io::Write;
        if self.broken {
            self.out.clear();
            return Err(std::io::Error::other("the pager flow failed earlier"));
        }
        if wait {
            // An empty store that asks for an answer: the home answers in order.
            let f = self.frame(BulkOp::Write, 0, 0, true);
            self.out.extend_from_slice(f.as_bytes());
        }
        let r = self.s.write_all(&self.out);
        self.out.clear();
        r?;
        if wait {
            self.answer(BulkOp::Ack, false)?;
        }
        Ok(())
    }
}

struct PMap {
    region: Arc<UffdRegion>,
    session: Arc<Session>,
    home: Home,
    /// The pager's own connection to the home, when one could be made (otherwise requests
    /// go through this node's daemon).
    direct: Option<Flow>,
    seg_off: u64,
    seg_size: u64,
    readonly: bool,
    pages: Vec<Page>,
    lost: Arc<AtomicBool>,
    /// When the pager next looks at the watched pages.
    next_tick: Option<Instant>,
    /// Whether the last look found changes (a writer storing without pause).
    streaming: bool,
    /// Until when the pager keeps looking at the map without sleeping (after a lone change:
    /// the next one, in a ping-pong, comes one round trip later).
    spin_until: Option<Instant>,
    last_refresh: Instant,
    /// Stores were sent without waiting for the home's answer.
    unanswered: bool,
    /// The current flush delay: short while pages are written now and then (a store goes
    /// home almost at once), doubled up to `flush` while pages are written again right
    /// after each flush (stores are batched).
    delay: Duration,
}

enum Cmd {
    /// Flush every map; wait for the homes' answers when set.
    FlushAll(Sender<bool>, bool),
    Add(u64, PMap),
    /// Flush one map; wait for the home's answer when set.
    Flush(u64, Sender<bool>, bool),
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
    /// How long the pager looks without sleeping after a lone change.
    spin: Duration,
}

static PAGER: OnceLock<Result<Arc<Pager>, String>> = OnceLock::new();

/// Pages of every map that are watched (written, their changes maybe not sent yet). Raised
/// before a writer resumes from its write fault, so a writer that sees 0 after its store
/// has nothing unsent.
static WATCHED: AtomicUsize = AtomicUsize::new(0);
/// Maps whose last stores went out without waiting for the home's answer.
static UNANSWERED: AtomicUsize = AtomicUsize::new(0);

fn nothing_pending() -> bool {
    WATCHED.load(Ordering::SeqCst) == 0 && UNANSWERED.load(Ordering::SeqCst) == 0
}

fn set_unanswered(m: &mut PMap, v: bool) {
    if m.unanswered != v {
        m.unanswered = v;
        if v {
            UNANSWERED.fetch_add(1, Ordering::SeqCst);
        } else {
            UNANSWERED.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// `scif_writeto` and friends to a peer on another host: store `data` at `roffset` of the
/// peer's registered address space over the endpoint session's pager flow (shared with its
/// maps of the peer's windows, so their stores stay in order), returning once the peer's
/// node has it. `None` where no pager flow can be had (the caller goes through the daemon).
///
/// # Errors
/// The flow failed; `PermissionDenied` when the peer's node refused a store (no window
/// there, no write access): ask the daemon for the precise error.
pub fn peer_window_write(session: &Arc<Session>, roffset: u64, data: &[u8]) -> Option<std::io::Result<()>> {
    let flow = shared_flow(session, Home::ScifPeer)?;
    let mut d = flow.lock().unwrap_or_else(|p| p.into_inner());
    Some(d.write_now(roffset, data))
}

/// `scif_readfrom` and friends from a peer on another host, over the endpoint session's
/// pager flow, in frames of at most 1 MiB. `None` where no pager flow can be had.
///
/// # Errors
/// The flow failed; `PermissionDenied` when the peer's node refused the read: ask the
/// daemon for the precise error.
pub fn peer_window_read(session: &Arc<Session>, roffset: u64, out: &mut [u8]) -> Option<std::io::Result<()>> {
    let flow = shared_flow(session, Home::ScifPeer)?;
    let mut d = flow.lock().unwrap_or_else(|p| p.into_inner());
    for (i, chunk) in out.chunks_mut(MAX_SCIF_FRAME).enumerate() {
        if let Err(e) = d.read(roffset + (i * MAX_SCIF_FRAME) as u64, chunk) {
            return Some(Err(e));
        }
    }
    Some(Ok(()))
}

/// Wait until every store made so far to maps of other hosts has reached its home (at most
/// 5 s), when any may still be on its way: for a signal that travels another path (an
/// interrupt trigger, a DMA transfer, a SCIF message), which must not overtake them. Free
/// when nothing is pending. `false` if a home could not be reached.
pub fn settle() -> bool {
    if nothing_pending() {
        return true;
    }
    flush_all(Duration::from_secs(5))
}

/// Send every DSM map's stores home and wait (at most `limit`): for `SCITerminate` and
/// process exit. Does nothing when no map of another host was ever made.
pub fn flush_all(limit: Duration) -> bool {
    let Some(Ok(p)) = PAGER.get() else { return true };
    let (tx, rx) = channel();
    p.command(Cmd::FlushAll(tx, true));
    rx.recv_timeout(limit).unwrap_or(false)
}

/// Send the stores made so far to every DSM map's home, without waiting for the homes to
/// answer: stores made after this call reach each home after them (`SCIFlush`). Does
/// nothing when no map of another host was ever made.
pub fn send_all() -> bool {
    let Some(Ok(p)) = PAGER.get() else { return true };
    if nothing_pending() {
        return true;
    }
    let (tx, rx) = channel();
    p.command(Cmd::FlushAll(tx, false));
    rx.recv().unwrap_or(false)
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
            flush: remora_config::Config::get().dsm.flush,
            flush_min: remora_config::Config::get().dsm.flush_min,
            refresh: remora_config::Config::get().dsm.refresh,
            spin: remora_config::Config::get().dsm.spin,
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
    direct: bool,
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
        let direct = shared_flow(&session, home);
        let pages = vec![Page::default(); region.len() / PAGE];
        let is_direct = direct.is_some();
        let pm = PMap {
            region: region.clone(),
            session,
            home,
            direct,
            seg_off,
            seg_size,
            readonly,
            pages,
            lost: lost.clone(),
            next_tick: None,
            streaming: false,
            spin_until: None,
            last_refresh: Instant::now(),
            unanswered: false,
            delay: p.flush_min,
        };
        p.command(Cmd::Add(id, pm));
        Ok(DsmMap { id, region, delta, len, lost, released: AtomicBool::new(false), direct: is_direct })
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
    /// this node's daemon).
    pub fn is_direct(&self) -> bool {
        self.direct
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
        p.command(Cmd::Flush(self.id, tx, true));
        rx.recv().unwrap_or(false) && !self.is_lost()
    }

    /// Send every store made so far home without waiting for the home's answer: stores
    /// made after this call reach the home after them. `false` if the home was lost.
    pub fn send(&self) -> bool {
        let Ok(p) = pager() else { return false };
        let (tx, rx) = channel();
        p.command(Cmd::Flush(self.id, tx, false));
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
        // Programs that poll without ever yielding can hold every core. Once a spin of the
        // pager finds it was kept from a core for long, the pager stops spinning for a while
        // and runs urgent (nice -20, where allowed): its ticks and faults then preempt the
        // pollers at once. Otherwise it runs at the default priority, where yielding really
        // gives the core away.
        let mut crowded_until: Option<Instant> = None;
        let mut urgent = false;
        let mut looks = 0u32;
        let mut maps: BTreeMap<usize, (u64, PMap)> = BTreeMap::new();
        loop {
            // A bug must not leave faulting threads waiting for a pager that died: a
            // panicking look is logged and the next one goes on.
            let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let now = Instant::now();
                let due = maps
                    .values()
                    .flat_map(|(_, m)| [m.next_tick, Some(m.last_refresh + self.refresh)])
                    .flatten()
                    .min();
                let crowded = crowded_until.is_some_and(|c| now < c);
                let spinning = !crowded && maps.values().any(|(_, m)| m.spin_until.is_some_and(|u| now < u));
                if !spinning {
                    for (_, m) in maps.values_mut() {
                        m.spin_until = None;
                    }
                }
                if urgent != crowded {
                    urgent = crowded;
                    remora_sys::sync::urgent_thread(urgent);
                }
                let timeout = if spinning {
                    // Looking without sleeping: give the core to whoever else wants it first.
                    let y = Instant::now();
                    std::thread::yield_now();
                    if y.elapsed() > CROWDED {
                        crowded_until = Some(Instant::now() + Duration::from_millis(50));
                    }
                    Some(Duration::ZERO)
                } else {
                    due.map(|d| d.saturating_duration_since(now))
                };
                // While spinning, the descriptors are polled every fourth look only (a fault or a
                // command waits a few looks at most); commands are seen in their queue anyway.
                looks = looks.wrapping_add(1);
                let ready = if spinning && !looks.is_multiple_of(4) {
                    let queued = !self.cmds.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
                    if queued {
                        2
                    } else {
                        0
                    }
                } else {
                    use std::os::fd::AsFd;
                    // A failed wait looks at everything.
                    remora_sys::poller::wait_ready(&[self.uffd.as_fd(), self.waker.as_fd()], timeout)
                        .unwrap_or(3)
                };
                // A tick that found nothing ready costs no further system call.
                if ready & 2 != 0 {
                    self.waker.drain();
                    self.drain_cmds(&mut maps);
                }
                let mut faults = ready & 1 != 0;
                while faults {
                    let Ok(Some(f)) = self.uffd.next_fault() else {
                        faults = false;
                        continue;
                    };
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
                    if m.next_tick.is_some_and(|d| now >= d) || m.spin_until.is_some_and(|u| now < u) {
                        self.tick(m);
                    }
                    if now >= m.last_refresh + self.refresh {
                        self.refresh_map(m);
                    }
                }
            }));
            if step.is_err() {
                tracing::error!("the DSM pager recovered from a panic");
            }
        }
    }

    fn drain_cmds(&self, maps: &mut BTreeMap<usize, (u64, PMap)>) {
        loop {
            let cmd = self.cmds.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
            let Some(cmd) = cmd else { break };
            match cmd {
                Cmd::FlushAll(tx, wait) => {
                    // Stores travel in order along one path (a pager flow, or this node's
                    // daemon); across several, only waiting for every home keeps them so.
                    let mut paths: Vec<usize> = maps
                        .values()
                        .filter(|(_, m)| !m.readonly)
                        .map(|(_, m)| match &m.direct {
                            Some(d) => Arc::as_ptr(d) as usize,
                            None => Arc::as_ptr(&m.session) as usize,
                        })
                        .collect();
                    paths.sort_unstable();
                    paths.dedup();
                    let wait = wait || paths.len() > 1;
                    let mut ok = true;
                    for (_, m) in maps.values_mut() {
                        ok &= self.flush_map(m, wait);
                    }
                    let _ = tx.send(ok);
                }
                Cmd::Add(id, m) => {
                    maps.insert(m.region.base(), (id, m));
                }
                Cmd::Flush(id, tx, wait) => {
                    let ok = find_id(maps, id).map(|m| self.flush_map(m, wait)).unwrap_or(false);
                    let _ = tx.send(ok);
                }
                Cmd::Refresh(id, tx) => {
                    let ok = find_id(maps, id).map(|m| self.refresh_map(m)).unwrap_or(false);
                    let _ = tx.send(ok);
                }
                Cmd::Remove(id, tx) => {
                    if let Some(m) = find_id(maps, id) {
                        self.flush_map(m, true);
                        let watched = m.pages.iter().filter(|p| p.dirty).count();
                        WATCHED.fetch_sub(watched, Ordering::SeqCst);
                        set_unanswered(m, false);
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
            if let Some(d) = &m.direct {
                let r = d.lock().unwrap_or_else(|p| p.into_inner()).read(off, &mut page[..len as usize]);
                if let Err(e) = &r {
                    tracing::warn!("DSM: a page could not be fetched from the home node: {e}");
                    m.lost.store(true, Ordering::SeqCst);
                }
                r.ok().map(|()| page)
            } else {
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
            WATCHED.fetch_add(1, Ordering::SeqCst);
            let now = Instant::now();
            p.changed = Some(now);
            if m.next_tick.is_none() {
                m.delay = self.flush_min;
                m.streaming = false;
                m.next_tick = Some(now + m.delay);
            }
        }
        let _ = self.uffd.protect(&m.region, addr, PAGE, false);
    }

    /// Look at the watched pages: send what changed, protect those quiet for [`QUIET`], and
    /// plan the next look: soon after a change (later while a writer streams, to batch its
    /// stores), backing off while nothing changes.
    fn tick(&self, m: &mut PMap) {
        let t = Instant::now();
        let (changed, watching) = self.flush_pages(m, false, false, t);
        if changed {
            // A lone change opens a spell of looking without sleeping; a writer that keeps
            // storing ends it (its stores batch at the tick).
            m.spin_until = if m.streaming || self.spin.is_zero() { None } else { Some(t + self.spin) };
        }
        if !watching {
            m.spin_until = None;
        }
        m.next_tick = watching.then(|| {
            if changed {
                m.delay = if m.streaming { (m.delay * 2).min(self.flush) } else { self.flush_min };
                m.streaming = true;
                t + m.delay
            } else {
                m.streaming = false;
                let last = m.pages.iter().filter(|p| p.dirty).filter_map(|p| p.changed).max();
                let quiet = last.map_or(QUIET, |l| t - l);
                let wait = if quiet < HOT { m.delay } else { (quiet / 4).clamp(m.delay, self.flush) };
                t + wait
            }
        });
    }

    /// Send the map's changed bytes home; with `wait`, return only once the home has them
    /// (and everything sent before). `false` if that failed.
    fn flush_map(&self, m: &mut PMap, wait: bool) -> bool {
        let t = Instant::now();
        let before = m.lost.load(Ordering::SeqCst);
        let (_, watching) = self.flush_pages(m, wait, false, t);
        if watching && m.next_tick.is_none() {
            m.next_tick = Some(t + m.delay);
        }
        !before && !m.lost.load(Ordering::SeqCst)
    }

    /// Send the changes of every watched page home (waiting for the home's answer with
    /// `wait`). A page unchanged for [`QUIET`], or every page with `settle`, is protected
    /// again and no longer watched. Returns (some page changed, some page still watched).
    ///
    /// A changed page is copied until two copies in a row agree: with stores seen in program
    /// order (x86), a store in the copy means every earlier store of that thread is in it
    /// too, so what goes home is a picture the page really held.
    fn flush_pages(&self, m: &mut PMap, wait: bool, settle: bool, t: Instant) -> (bool, bool) {
        let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut bytes = 0;
        let mut cur = vec![0u8; PAGE];
        let mut again = vec![0u8; PAGE];
        let (mut changed, mut watching) = (false, false);
        for idx in 0..m.pages.len() {
            if !m.pages[idx].dirty {
                continue;
            }
            let addr = m.region.base() + idx * PAGE;
            let quiet = m.pages[idx].changed.is_none_or(|c| t.saturating_duration_since(c) >= QUIET);
            let mut protect = settle;
            // Most looks find nothing: compare in place before copying.
            let differs = match m.pages[idx].twin.as_deref() {
                Some(tw) => m.region.present_page_differs(addr, tw).unwrap_or(true),
                None => true,
            };
            if !(differs || quiet || settle) {
                watching = true;
                continue;
            }
            if m.region.read_present_page(addr, &mut cur).is_err() {
                continue;
            }
            let same = m.pages[idx].twin.as_deref().is_some_and(|tw| tw == &cur[..]);
            if same && !(quiet || settle) {
                watching = true;
                continue;
            }
            if same {
                protect = true;
            }
            if protect {
                // No store lands after this: the copy below is final.
                let _ = self.uffd.protect(&m.region, addr, PAGE, true);
                let _ = m.region.read_present_page(addr, &mut cur);
            } else {
                let mut stable = false;
                for _ in 0..8 {
                    std::sync::atomic::fence(Ordering::SeqCst);
                    let _ = m.region.read_present_page(addr, &mut again);
                    if again == cur {
                        stable = true;
                        break;
                    }
                    std::mem::swap(&mut cur, &mut again);
                }
                if !stable {
                    // A writer that never pauses: stop it for one copy.
                    protect = true;
                    let _ = self.uffd.protect(&m.region, addr, PAGE, true);
                    let _ = m.region.read_present_page(addr, &mut cur);
                }
            }
            let page = &mut m.pages[idx];
            let twin = page.twin.get_or_insert_with(|| vec![0u8; PAGE].into_boxed_slice());
            let d = diff(twin, &cur);
            if !d.is_empty() {
                changed = true;
                page.changed = Some(t);
            }
            twin.copy_from_slice(&cur);
            if protect {
                page.dirty = false;
                WATCHED.fetch_sub(1, Ordering::SeqCst);
                page.twin = None;
            } else {
                watching = true;
            }
            for (a, b) in d {
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
        (changed, watching)
    }

    /// Flush, then drop every resident page so the next access refetches it.
    fn refresh_map(&self, m: &mut PMap) -> bool {
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
        // One system call per run of resident pages.
        let droppable = |p: &Page| p.resident && !p.dirty;
        let mut idx = 0;
        while idx < m.pages.len() {
            if !droppable(&m.pages[idx]) {
                idx += 1;
                continue;
            }
            let start = idx;
            while idx < m.pages.len() && droppable(&m.pages[idx]) {
                idx += 1;
            }
            let addr = m.region.base() + start * PAGE;
            if m.region.drop_pages(addr, (idx - start) * PAGE).is_ok() {
                for p in &mut m.pages[start..idx] {
                    p.resident = false;
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
    if let Some(d) = m.direct.clone() {
        let r = {
            let mut d = d.lock().unwrap_or_else(|p| p.into_inner());
            for (offset, data) in &runs {
                d.push(*offset, data);
            }
            d.send(wait)
        };
        return match r {
            Ok(()) => {
                set_unanswered(m, !wait);
                true
            }
            Err(e) => {
                tracing::warn!("DSM: stores could not reach the home node: {e}");
                m.lost.store(true, Ordering::SeqCst);
                false
            }
        };
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
    set_unanswered(m, !wait && r.is_ok());
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
