//! Pager flows: a pager's own connection to the home node, dialed and authenticated by
//! this node's daemon and handed over, shared by every map of one memory.

mod asked;
mod held;

pub(super) use asked::Soon;
pub use held::{FlowStop, HeldFlow};

use super::rma::{Sink, Source};
use super::*;

/// A pager's own connection to the home node (`Flow::Pager`), dialed and authenticated by
/// this node's daemon and handed over: page fetches and stores go straight to the home
/// daemon's thread that serves them, with no daemon of this host in between.
pub(super) struct Direct {
    s: std::net::TcpStream,
    /// The home node's handle of the connection.
    remote: u64,
    tag: u64,
    /// Write frames not sent yet.
    out: Vec<u8>,
    /// An error happened: the stream may be out of step, nothing more goes through it.
    broken: bool,
    /// The process that opened it: a child made by fork shares the socket with its parent
    /// and must never write on it (its frames would land among the parent's).
    pid: u32,
    /// Regions of the program's memory queued after `out[..at]` (`write_region` of a
    /// channel), gathered into the next send without a copy.
    regions: Vec<(usize, remora_sys::user_memory::UserRegion)>,
}

/// A pager flow shared by every map of one connection (one stream keeps their stores in
/// order).
pub(super) type Flow = Arc<Mutex<Direct>>;

/// Names a pager flow among the process's: (session, memory key).
type Key = (usize, u64);

/// The pager flows of this process, held weakly: those that are there, and those asked
/// for in the background (`asked.rs`).
#[derive(Default)]
struct Books {
    known: Vec<(Key, std::sync::Weak<Mutex<Direct>>)>,
    asked: Vec<(Key, std::sync::Weak<asked::Cell>)>,
}

static BOOKS: Mutex<Books> = Mutex::new(Books { known: Vec::new(), asked: Vec::new() });

/// The pager flow of `key` that is there and sound, or the one asked for.
enum Found {
    Flow(Flow),
    Asked(Soon),
    Nothing,
}

fn find(key: Key) -> Found {
    let mut books = BOOKS.lock().unwrap_or_else(|p| p.into_inner());
    books.known.retain(|(_, w)| w.strong_count() > 0);
    books.asked.retain(|(_, w)| w.strong_count() > 0);
    let known = books.known.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade());
    if let Some(d) = known {
        // Never waits for the flow under the books: one in use (a page fetch from a home
        // that stopped answering holds it up to the flow's patience) is as sound as anyone
        // knows, as it would be had it broken right after this look.
        let sound = match d.try_lock() {
            Ok(g) => g.unusable().is_none(),
            Err(std::sync::TryLockError::WouldBlock) => true,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().unusable().is_none(),
        };
        if sound {
            return Found::Flow(d);
        }
    }
    match books.asked.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade()) {
        Some(c) => Found::Asked(Soon(c)),
        None => Found::Nothing,
    }
}

fn key_of(session: &Arc<Session>, home: &Arc<dyn RemoteRange>) -> Key {
    (Arc::as_ptr(session) as usize, home.key())
}

/// The pager flow for connection `conn` of `session`: the one its other maps use, or a new
/// one. `None` where the daemon cannot open one.
pub(super) fn shared_flow(session: &Arc<Session>, home: &Arc<dyn RemoteRange>) -> Option<Flow> {
    if !remora_config::Config::get().pager_flows {
        return None;
    }
    let key = key_of(session, home);
    match find(key) {
        Found::Flow(d) => return Some(d),
        // Asked for by a map: its answer, on its way.
        Found::Asked(soon) => return soon.get(),
        Found::Nothing => {}
    }
    // Dial without holding the books: other maps are made meanwhile. Two maps of one
    // connection made at once may each get a flow; the later one is shared from then on.
    let d = Arc::new(Mutex::new(Direct::open(session, home.flow_request())?));
    let mut books = BOOKS.lock().unwrap_or_else(|p| p.into_inner());
    books.known.retain(|(k, _)| *k != key);
    books.known.push((key, Arc::downgrade(&d)));
    Some(d)
}

/// As [`shared_flow`], for a map: without waiting for a flow that must be dialed (its
/// request is booked, and sent by [`Soon::start`] or by its first user, `asked.rs`).
pub(super) fn flow_soon(session: &Arc<Session>, home: &Arc<dyn RemoteRange>) -> Soon {
    if !remora_config::Config::get().pager_flows {
        return Soon::ready(None);
    }
    let key = key_of(session, home);
    match find(key) {
        Found::Flow(d) => return Soon::ready(Some(d)),
        Found::Asked(soon) => return soon,
        Found::Nothing => {}
    }
    // Booked before anyone else can find it: whoever needs it first sends it.
    let soon = Soon(Arc::default());
    asked::book(session.clone(), home.flow_request(), key, &soon);
    let mut books = BOOKS.lock().unwrap_or_else(|p| p.into_inner());
    // Asked for by another map meanwhile: that answer is shared.
    if let Some(c) = books.asked.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade()) {
        return Soon(c);
    }
    books.asked.push((key, Arc::downgrade(&soon.0)));
    soon
}

impl Direct {
    /// How long an answer may take before the home is given up.
    const PATIENCE: Duration = Duration::from_secs(10);
    /// Write frames sent before the first answer is awaited.
    const WRITES_IN_FLIGHT: u64 = 64;
    /// Read frames asked ahead of the answer being read.
    const READS_IN_FLIGHT: usize = 8;

    /// Why nothing may go through the flow now: it failed earlier, or this process is a
    /// child made by fork after it was opened (the socket is its parent's too).
    fn unusable(&self) -> Option<std::io::Error> {
        if self.pid != remora_sys::sched::own_pid() {
            Some(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the pager flow is the parent process's (this is a child made by fork)",
            ))
        } else if self.broken {
            Some(std::io::Error::other("the pager flow failed earlier"))
        } else {
            None
        }
    }

    pub(super) fn open(session: &Session, req: Request) -> Option<Direct> {
        let (reply, mut fds) = session.request(req, &[]).ok()?;
        let (Reply::DsmFlow { remote, .. }, Some(fd)) = (reply, fds.pop()) else { return None };
        let s = std::net::TcpStream::from(fd);
        s.set_read_timeout(Some(Self::PATIENCE)).ok()?;
        s.set_write_timeout(Some(Self::PATIENCE)).ok()?;
        s.set_nodelay(true).ok()?;
        Some(Direct {
            s,
            remote,
            tag: 0,
            out: Vec::new(),
            broken: false,
            pid: remora_sys::sched::own_pid(),
            regions: Vec::new(),
        })
    }

    /// A flow that reaches several connections of one home (`Request::DsmFlows`), and the
    /// home's handle of each, in the order asked.
    pub(super) fn open_many(session: &Session, req: Request) -> std::io::Result<(Direct, Vec<u64>)> {
        let (reply, mut fds) = session.request(req, &[]).map_err(|e| std::io::Error::other(e.to_string()))?;
        let (Reply::DsmFlows { remotes }, Some(fd)) = (reply, fds.pop()) else {
            return Err(std::io::Error::other("the node answered a flow request without a flow"));
        };
        let s = std::net::TcpStream::from(fd);
        s.set_read_timeout(Some(Self::PATIENCE))?;
        s.set_write_timeout(Some(Self::PATIENCE))?;
        s.set_nodelay(true)?;
        let first = remotes.first().copied().unwrap_or(0);
        Ok((
            Direct {
                s,
                remote: first,
                tag: 0,
                out: Vec::new(),
                broken: false,
                pid: remora_sys::sched::own_pid(),
                regions: Vec::new(),
            },
            remotes,
        ))
    }

    /// Name `remote` (the home's handle of one of the flow's connections) in the frames
    /// made from now on.
    pub(super) fn aim(&mut self, remote: u64) {
        self.remote = remote;
    }

    /// Bytes queued and not sent yet.
    pub(super) fn queued(&self) -> usize {
        self.out.len() + self.regions.iter().map(|(_, r)| r.len()).sum::<usize>()
    }

    /// Queue a store of `len` bytes at `offset`, which `fill` writes into the queue.
    pub(super) fn push_with(
        &mut self,
        offset: u64,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let f = self.frame(BulkOp::Write, offset, len, false);
        let start = self.out.len();
        self.out.extend_from_slice(f.as_bytes());
        let at = self.out.len();
        self.out.resize(at + len, 0);
        let r = fill(&mut self.out[at..]);
        if r.is_err() {
            // Nothing of a store that could not be read goes out.
            self.out.truncate(start);
            self.tag -= 1;
        }
        r
    }

    /// Queue a store of `len` bytes of the program's memory `src` (from `src_off`) at
    /// `offset`, in frames of at most `MAX_SCIF_FRAME`, the bytes to be gathered straight
    /// from `src` by the next send (no copy).
    pub(super) fn queue_region(
        &mut self,
        offset: u64,
        src: &remora_sys::user_memory::UserRegion,
        src_off: usize,
        len: usize,
    ) -> std::io::Result<()> {
        if src_off.checked_add(len).is_none_or(|e| e > src.len()) {
            return Err(std::io::Error::from_raw_os_error(34));
        }
        let mut at = 0;
        while at < len {
            let n = (len - at).min(MAX_SCIF_FRAME);
            let f = self.frame(BulkOp::Write, offset + at as u64, n, false);
            self.out.extend_from_slice(f.as_bytes());
            self.regions.push((self.out.len(), src.sub(src_off + at, n)));
            at += n;
        }
        Ok(())
    }

    /// Write what is queued: the bytes, with the queued regions gathered in their places.
    fn write_queued(&mut self) -> std::io::Result<()> {
        use remora_sys::user_memory::{Gather, UserRegion};
        use std::io::Write;
        if self.regions.is_empty() {
            return self.s.write_all(&self.out);
        }
        let mut parts = Vec::with_capacity(2 * self.regions.len() + 1);
        let mut from = 0;
        for (at, r) in &self.regions {
            parts.push(Gather::Bytes(&self.out[from..*at]));
            parts.push(Gather::Region(*r));
            from = *at;
        }
        parts.push(Gather::Bytes(&self.out[from..]));
        UserRegion::write_gathered(&mut remora_sys::flow::Quiet(std::os::fd::AsFd::as_fd(&self.s)), &parts)
    }

    pub(super) fn frame(&mut self, op: BulkOp, offset: u64, len: usize, ok: bool) -> BulkFrame {
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

    /// The header of the next answer to a transfer's frame, waited for as a DMA wait does:
    /// spinning `REMORA_SPIN_US` first (its core kept awake), then asleep.
    fn answer_header(&mut self, raw: &mut [u8; BULK_FRAME]) -> std::io::Result<()> {
        let spin = remora_config::Config::get().spin;
        let got = remora_sys::flow::recv_spinning(std::os::fd::AsFd::as_fd(&self.s), raw, spin)?;
        std::io::Read::read_exact(&mut self.s, &mut raw[got..])
    }

    /// The next answer, which must be `op` for the last frame sent.
    pub(super) fn answer(&mut self, op: BulkOp, refusal_ok: bool) -> std::io::Result<BulkHeader> {
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
    pub(super) fn read(&mut self, offset: u64, page: &mut [u8]) -> std::io::Result<()> {
        let r = self.try_read(offset, page);
        if let Err(e) = &r {
            self.broken |= e.kind() != std::io::ErrorKind::PermissionDenied;
        }
        r
    }

    pub(super) fn try_read(&mut self, offset: u64, page: &mut [u8]) -> std::io::Result<()> {
        if let Some(e) = self.unusable() {
            return Err(e);
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

    /// Store the bytes of `src` at `offset` now, in frames of at most `MAX_SCIF_FRAME`
    /// (each header and its payload in one gathering write, straight from `src`), and wait
    /// for the home to have them (with everything sent before).
    pub(super) fn write_now(&mut self, offset: u64, src: Source<'_>) -> std::io::Result<()> {
        let r = (|| {
            if let Some(e) = self.unusable() {
                return Err(e);
            }
            // Stores queued by the pager go first.
            let r = self.write_queued();
            self.out.clear();
            self.regions.clear();
            r?;
            // Every frame asks for an answer (so a refusal is told, not fatal). Answers are
            // read as they come once `WRITES_IN_FLIGHT` are outstanding, and the rest after
            // the last frame.
            let mut next = self.tag + 1;
            let mut refused = false;
            let mut take = |d: &mut Direct, next: &mut u64| -> std::io::Result<()> {
                let mut raw = [0u8; BULK_FRAME];
                d.answer_header(&mut raw)?;
                let h = BulkFrame::parse(&raw).map_err(std::io::Error::other)?;
                if h.op != BulkOp::Ack || h.tag != *next {
                    return Err(std::io::Error::other(format!("the home answered {h:?}")));
                }
                refused |= !h.ok;
                *next += 1;
                Ok(())
            };
            let len = src.len();
            let mut at = 0;
            while at < len {
                let n = (len - at).min(MAX_SCIF_FRAME);
                let f = self.frame(BulkOp::Write, offset + at as u64, n, true);
                let mut w = remora_sys::flow::Quiet(std::os::fd::AsFd::as_fd(&self.s));
                src.send(f.as_bytes(), at, n, &mut w)?;
                at += n;
                if self.tag + 1 - next > Self::WRITES_IN_FLIGHT {
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

    /// Read the bytes of `out` at `offset`, in frames of at most `MAX_SCIF_FRAME` with
    /// `READS_IN_FLIGHT` asked ahead (the home answers in order), each answer's bytes read
    /// straight into `out`. A refused frame (answered in step with no data) fails the read
    /// with `PermissionDenied` once every answer is in, without breaking the flow.
    pub(super) fn read_many(&mut self, offset: u64, out: &mut Sink<'_>) -> std::io::Result<()> {
        let r = self.try_read_many(offset, out);
        if let Err(e) = &r {
            self.broken |= e.kind() != std::io::ErrorKind::PermissionDenied;
        }
        r
    }

    fn try_read_many(&mut self, offset: u64, out: &mut Sink<'_>) -> std::io::Result<()> {
        use std::io::Write;
        if let Some(e) = self.unusable() {
            return Err(e);
        }
        let len = out.len();
        let frames = len.div_ceil(MAX_SCIF_FRAME);
        let first = self.tag + 1;
        let (mut asked, mut refused) = (0, false);
        let mut ask = Vec::with_capacity(Self::READS_IN_FLIGHT * BULK_FRAME);
        for i in 0..frames {
            // Keep the home `READS_IN_FLIGHT` frames ahead (a few dozen bytes a frame: the
            // requests never fill the socket while the home writes answers).
            while asked < frames && asked < i + Self::READS_IN_FLIGHT {
                let at = asked * MAX_SCIF_FRAME;
                let f = self.frame(BulkOp::Read, offset + at as u64, (len - at).min(MAX_SCIF_FRAME), false);
                ask.extend_from_slice(f.as_bytes());
                asked += 1;
            }
            if !ask.is_empty() {
                self.s.write_all(&ask)?;
                ask.clear();
            }
            let mut raw = [0u8; BULK_FRAME];
            self.answer_header(&mut raw)?;
            let h = BulkFrame::parse(&raw).map_err(std::io::Error::other)?;
            let at = i * MAX_SCIF_FRAME;
            let n = (len - at).min(MAX_SCIF_FRAME);
            if h.op != BulkOp::Data || h.tag != first + i as u64 {
                return Err(std::io::Error::other(format!("the home answered {h:?}")));
            }
            if !h.ok && h.len == 0 {
                refused = true;
                continue;
            }
            if h.len != n as u64 {
                return Err(std::io::Error::other(format!("the home sent {} bytes", h.len)));
            }
            // The payload read polling while its segments come (`remora_sys::flow::Eager`).
            let spin = remora_config::Config::get().spin;
            out.fill(
                at,
                n,
                &mut remora_sys::flow::Eager::new(&self.s, spin, remora_sys::flow::EAGER_PAYLOAD),
            )?;
        }
        if refused {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "the home refused the read",
            ));
        }
        Ok(())
    }

    /// Queue a store of `data` at `offset`.
    pub(super) fn push(&mut self, offset: u64, data: &[u8]) {
        let f = self.frame(BulkOp::Write, offset, data.len(), false);
        self.out.extend_from_slice(f.as_bytes());
        self.out.extend_from_slice(data);
    }

    /// Send the queued stores; with `wait`, return once the home has stored them (and
    /// everything sent before).
    pub(super) fn send(&mut self, wait: bool) -> std::io::Result<()> {
        let r = self.try_send(wait);
        self.broken |= r.is_err();
        r
    }

    pub(super) fn try_send(&mut self, wait: bool) -> std::io::Result<()> {
        if let Some(e) = self.unusable() {
            self.out.clear();
            self.regions.clear();
            return Err(e);
        }
        if wait {
            // An empty store that asks for an answer: the home answers in order.
            let f = self.frame(BulkOp::Write, 0, 0, true);
            self.out.extend_from_slice(f.as_bytes());
        }
        let r = self.write_queued();
        self.out.clear();
        self.regions.clear();
        r?;
        if wait {
            self.answer(BulkOp::Ack, false)?;
        }
        Ok(())
    }
}

/// Store the bytes of `src` at `roffset` of `range` over the session's pager flow to it
/// (shared with the session's maps of that memory, so their stores stay in order),
/// returning once the home node has them: RMA to another host (`scif_writeto` and
/// friends). `None` where no pager flow can be had, or where `src` is memory a map of
/// another host pages in (the caller goes through the daemon).
///
/// # Errors
/// The flow failed; `PermissionDenied` when the peer's node refused a store (no window
/// there, no write access): ask the daemon for the precise error.
pub fn range_write(
    session: &Arc<Session>,
    range: &Arc<dyn RemoteRange>,
    roffset: u64,
    src: Source<'_>,
) -> Option<std::io::Result<()>> {
    if src.pages_in() {
        return None;
    }
    let flow = shared_flow(session, range)?;
    let mut d = flow.lock().unwrap_or_else(|p| p.into_inner());
    Some(d.write_now(roffset, src))
}

/// Read the bytes of `out` at `roffset` of `range` over the session's pager flow, in frames
/// of at most 1 MiB with several in flight: RMA from another host (`scif_readfrom` and
/// friends). `None` where no pager flow can be had, or where `out` is memory a map of
/// another host pages in.
///
/// # Errors
/// The flow failed; `PermissionDenied` when the peer's node refused the read: ask the
/// daemon for the precise error.
pub fn range_read(
    session: &Arc<Session>,
    range: &Arc<dyn RemoteRange>,
    roffset: u64,
    mut out: Sink<'_>,
) -> Option<std::io::Result<()>> {
    if out.pages_in() {
        return None;
    }
    let flow = shared_flow(session, range)?;
    let mut d = flow.lock().unwrap_or_else(|p| p.into_inner());
    Some(d.read_many(roffset, &mut out))
}

#[cfg(test)]
mod tests;
