//! Endpoints: open, bind, listen, connect, accept, close; and messaging.

use crate::window::WinCache;
use crate::{Error, Result, Scif};
use remora_client::Session;
use remora_proto::{Reply, Request, ScifRequest};
use remora_sys::bell;
use remora_sys::msgring::MsgRegion;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a blocking receive spins on the ring before it sleeps on the doorbell.
const SPIN: Duration = Duration::from_micros(50);
/// How long a sender waits for a receiver on its way into `recv` before ringing.
const NOTICE: Duration = Duration::from_micros(1);
/// Blocked calls re-check the daemon this often.
const RECHECK: Duration = Duration::from_millis(100);

/// One sender (or one receiver) at a time on an endpoint: the rings have one producer and
/// one consumer. Taking it costs one atomic exchange and releasing it a plain store (a
/// mutex costs an exchange more, on the message path); a second thread spins briefly,
/// then sleeps in growing steps (a receiver may hold it while it waits for data).
#[derive(Default)]
struct Excl(AtomicBool);

struct ExclGuard<'a>(&'a AtomicBool);

impl Excl {
    fn lock(&self) -> ExclGuard<'_> {
        let mut tries = 0u32;
        loop {
            if !self.0.swap(true, Ordering::Acquire) {
                return ExclGuard(&self.0);
            }
            tries += 1;
            if tries < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros((tries as u64 - 63).min(1000)));
            }
        }
    }
}

impl Drop for ExclGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A SCIF port identifier: a node and a port on it (`struct scif_portID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortId {
    /// The node id.
    pub node: u32,
    /// The port.
    pub port: u16,
}

enum State {
    Open,
    Bound { port: u16, home: Session },
    Listening { port: u16, token: u64, _home: Session },
    Connecting,
    Connected { _home: Option<Session> },
    Closed,
}

/// A connected endpoint's shared state.
pub(crate) struct Conn {
    pub(crate) session: Arc<Session>,
    pub(crate) region: MsgRegion,
    /// The peer is on another host: RMA goes through the daemons, maps are refused.
    pub(crate) remote: bool,
    /// 0 for the connecting end, 1 for the accepting end.
    pub(crate) side: usize,
    peer_ringer: OwnedFd,
    pub(crate) local: PortId,
    pub(crate) peer: PortId,
    send_lock: Excl,
    recv_lock: Excl,
    pub(crate) own_windows: Mutex<WinCache>,
    pub(crate) peer_windows: Mutex<WinCache>,
}

impl Conn {
    pub(crate) fn peer_closed(&self) -> bool {
        self.region.closed(1 - self.side).load(Ordering::Acquire) != 0
    }
}

pub(crate) struct Inner {
    scif: Arc<Scif>,
    reader: OwnedFd,
    ringer: OwnedFd,
    closed: AtomicBool,
    state: Mutex<State>,
    conn: OnceLock<Arc<Conn>>,
    async_connect: Mutex<Option<Result<u16>>>,
}

/// A SCIF endpoint (`scif_epd_t`). Clones refer to the same endpoint.
#[derive(Clone)]
pub struct Endpoint {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("fd", &self.fd()).finish()
    }
}

fn euid_is_root() -> bool {
    remora_sys::is_root()
}

impl Endpoint {
    /// `scif_open`: a new, unbound endpoint.
    ///
    /// # Errors
    /// [`Error::NoMemory`] when no descriptor can be made.
    pub fn open(scif: &Arc<Scif>) -> Result<Endpoint> {
        let (reader, ringer) = bell::pair().map_err(|e| Error::NoMemory(e.to_string()))?;
        Ok(Endpoint::from_parts(scif.clone(), reader, ringer, State::Open))
    }

    fn from_parts(scif: Arc<Scif>, reader: OwnedFd, ringer: OwnedFd, state: State) -> Endpoint {
        Endpoint {
            inner: Arc::new(Inner {
                scif,
                reader,
                ringer,
                closed: AtomicBool::new(false),
                state: Mutex::new(state),
                conn: OnceLock::new(),
                async_connect: Mutex::new(None),
            }),
        }
    }

    /// The library this endpoint belongs to.
    pub fn scif(&self) -> &Arc<Scif> {
        &self.inner.scif
    }

    /// `scif_get_fd`: the descriptor that stands for the endpoint. It is readable when a
    /// connection request or data waits, writable when the send queue has room, and hung
    /// up when the peer closed.
    pub fn fd(&self) -> RawFd {
        self.inner.reader.as_raw_fd()
    }

    /// The descriptor, borrowed.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.reader.as_fd()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn live(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::BadEndpoint);
        }
        Ok(())
    }

    /// The connection, when connected.
    pub(crate) fn conn(&self) -> Result<&Arc<Conn>> {
        self.live()?;
        self.inner.conn.get().ok_or(Error::NotConnected)
    }

    /// Check that the endpoint is connected and its peer still there (what a zero-byte
    /// send or receive reports).
    ///
    /// # Errors
    /// [`Error::BadEndpoint`], [`Error::NotConnected`], [`Error::Reset`].
    pub fn conn_check(&self) -> Result<()> {
        self.live_conn().map(|_| ())
    }

    /// The connection, if any (no state checks).
    pub(crate) fn inner_conn(&self) -> Option<&Arc<Conn>> {
        self.inner.conn.get()
    }

    /// The connection, failing with [`Error::Reset`] when the peer has closed.
    pub(crate) fn live_conn(&self) -> Result<&Arc<Conn>> {
        let c = self.conn()?;
        if c.peer_closed() {
            return Err(Error::Reset);
        }
        Ok(c)
    }

    /// `scif_bind`: bind to `port`, or to a free port at or above `SCIF_PORT_RSVD` when
    /// `port` is 0. Returns the port.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the endpoint or the port is already bound,
    /// [`Error::IsConnected`] when connected, [`Error::Access`] for a port below 1024
    /// without root, [`Error::NoSpace`] when no port is free, [`Error::NoDevice`] when the
    /// node daemon cannot be reached or started.
    pub fn bind(&self, port: u16) -> Result<u16> {
        self.live()?;
        let mut st = self.state();
        match &*st {
            State::Open => {}
            State::Connecting | State::Connected { .. } => return Err(Error::IsConnected),
            State::Closed => return Err(Error::BadEndpoint),
            _ => return Err(Error::Invalid("endpoint already bound".into())),
        }
        let home = Session::open_scif(self.inner.scif.config(), true)?;
        let port =
            match home.request(Request::Scif(ScifRequest::Bind { port, privileged: euid_is_root() }), &[])? {
                (Reply::ScifPort { port }, _) => port,
                (other, _) => return Err(Error::Invalid(format!("unexpected answer {other:?}"))),
            };
        *st = State::Bound { port, home };
        Ok(port)
    }

    /// `scif_listen`: accept connection requests on the bound port, `backlog` of them
    /// waiting at most.
    ///
    /// # Errors
    /// [`Error::Invalid`] when not bound or `backlog` is 0, [`Error::IsConnected`] when
    /// connected or already listening.
    pub fn listen(&self, backlog: u32) -> Result<()> {
        self.live()?;
        let mut st = self.state();
        if backlog == 0 {
            return Err(Error::Invalid("backlog must be positive".into()));
        }
        let (port, home) = match std::mem::replace(&mut *st, State::Closed) {
            State::Bound { port, home } => (port, home),
            other => {
                let err = match &other {
                    State::Connecting | State::Connected { .. } | State::Listening { .. } => {
                        Error::IsConnected
                    }
                    State::Closed => Error::BadEndpoint,
                    _ => Error::Invalid("endpoint not bound".into()),
                };
                *st = other;
                return Err(err);
            }
        };
        let fds = [self.inner.reader.as_fd(), self.inner.ringer.as_fd()];
        match home.request(Request::Scif(ScifRequest::Listen { backlog }), &fds) {
            Ok((Reply::ScifListening { token }, _)) => {
                // A listener is never writable (POLLOUT means nothing on it).
                bell::stuff(self.as_fd());
                *st = State::Listening { port, token, _home: home };
                Ok(())
            }
            Ok((other, _)) => {
                *st = State::Bound { port, home };
                Err(Error::Invalid(format!("unexpected answer {other:?}")))
            }
            Err(e) => {
                *st = State::Bound { port, home };
                Err(e.into())
            }
        }
    }

    /// `scif_connect`: connect to the listener at `dst` (binding to a free port first if
    /// unbound). Returns the local port. When the program has set `O_NONBLOCK` on the
    /// descriptor, the connect goes on in the background: the call fails with
    /// [`Error::InProgress`], the descriptor turns writable when it ends, and the next call
    /// returns its result.
    ///
    /// # Errors
    /// [`Error::Refused`] when nobody listens there, [`Error::NoDevice`] for an unknown or
    /// unreachable node, [`Error::IsConnected`] when already connected,
    /// [`Error::NotSupported`] for a listening endpoint.
    pub fn connect(&self, dst: PortId) -> Result<u16> {
        self.live()?;
        if let Some(r) = self.inner.async_connect.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return r;
        }
        let (port, home) = {
            let mut st = self.state();
            match &*st {
                State::Open | State::Bound { .. } => {}
                State::Connecting => return Err(Error::InProgress),
                State::Connected { .. } => return Err(Error::IsConnected),
                State::Listening { .. } => {
                    return Err(Error::NotSupported("connect on a listening endpoint"))
                }
                State::Closed => return Err(Error::BadEndpoint),
            }
            if matches!(&*st, State::Open) {
                drop(st);
                self.bind(0)?;
                st = self.state();
            }
            match std::mem::replace(&mut *st, State::Connecting) {
                State::Bound { port, home } => (port, home),
                other => {
                    *st = other;
                    return Err(Error::Invalid("endpoint changed state during connect".into()));
                }
            }
        };
        if bell::is_nonblocking(self.as_fd()) {
            bell::stuff(self.as_fd());
            let me = self.clone();
            std::thread::Builder::new()
                .name("scif-connect".into())
                .spawn(move || {
                    let r = me.finish_connect(dst, port, home);
                    *me.inner.async_connect.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                    bell::unstuff(me.inner.ringer.as_fd());
                })
                .map_err(|e| Error::NoMemory(e.to_string()))?;
            return Err(Error::InProgress);
        }
        self.finish_connect(dst, port, home)
    }

    fn finish_connect(&self, dst: PortId, port: u16, home: Session) -> Result<u16> {
        let r = self.dial(dst, port);
        let mut st = self.state();
        match r {
            Ok(conn) => {
                let _ = self.inner.conn.set(Arc::new(conn));
                *st = State::Connected { _home: Some(home) };
                Ok(port)
            }
            Err(e) => {
                if !matches!(&*st, State::Closed) {
                    *st = State::Bound { port, home };
                }
                Err(e)
            }
        }
    }

    fn dial(&self, dst: PortId, port: u16) -> Result<Conn> {
        let scif = &self.inner.scif;
        let cfg = scif.config();
        // A node of this host: ask its daemon directly (memory is shared). Any other node,
        // or any node at all in a cluster (the cluster file may force the network): our own
        // daemon relays, says to dial directly, or knows no such node.
        let direct = |node: u32| -> Result<Session> {
            Session::open_scif(&cfg.with_node(node), false).map_err(|_| Error::NoDevice)
        };
        let local =
            dst.node != scif.node() && remora_proto::paths::socket_path(&cfg.runtime_dir, dst.node).exists();
        let req = Request::Scif(ScifRequest::Connect {
            node: dst.node,
            port: dst.port,
            from_node: scif.node(),
            from_port: port,
        });
        let ringer = [self.inner.ringer.as_fd()];
        let (session, (reply, fds)) = if local && cfg.cluster.is_none() {
            let s = direct(dst.node)?;
            let r = s.request(req, &ringer)?;
            (s, r)
        } else {
            let s = Session::open_scif(cfg, true)?;
            match s.request(req.clone(), &ringer)? {
                (Reply::ScifDialDirect, _) => {
                    let s = direct(dst.node)?;
                    let r = s.request(req, &ringer)?;
                    (s, r)
                }
                r => (s, r),
            }
        };
        let local = PortId { node: scif.node(), port };
        Conn::adopt(session, reply, fds, local)
    }

    /// `scif_accept`: take a waiting connection request (or wait for one when `sync`,
    /// `SCIF_ACCEPT_SYNC`). Returns the new connected endpoint and the peer's port id.
    ///
    /// # Errors
    /// [`Error::Again`] when nothing waits and not `sync`, [`Error::Invalid`] when the
    /// endpoint is not listening (or was closed while waiting).
    pub fn accept(&self, sync: bool) -> Result<(Endpoint, PortId)> {
        self.live()?;
        let (port, token) = match &*self.state() {
            State::Listening { port, token, .. } => (*port, *token),
            State::Closed => return Err(Error::BadEndpoint),
            _ => return Err(Error::Invalid("endpoint is not listening".into())),
        };
        let scif = self.inner.scif.clone();
        let (reader, ringer) = bell::pair().map_err(|e| Error::NoMemory(e.to_string()))?;
        let session = Session::open_scif(scif.config(), true)?;
        let req = Request::Scif(ScifRequest::Accept { port, token, sync });
        let (reply, fds) = session.request(req, &[ringer.as_fd()]).map_err(|e| {
            if self.inner.closed.load(Ordering::Acquire) {
                Error::BadEndpoint
            } else {
                e.into()
            }
        })?;
        let local = PortId { node: scif.node(), port };
        let conn = Conn::adopt(session, reply, fds, local)?;
        let peer = conn.peer;
        let ep = Endpoint::from_parts(scif, reader, ringer, State::Connected { _home: None });
        let _ = ep.inner.conn.set(Arc::new(conn));
        Ok((ep, peer))
    }

    /// This endpoint's port id, once bound.
    pub fn local_port(&self) -> Option<PortId> {
        if let Some(c) = self.inner.conn.get() {
            return Some(c.local);
        }
        let node = self.inner.scif.node();
        match &*self.state() {
            State::Bound { port, .. } | State::Listening { port, .. } => Some(PortId { node, port: *port }),
            _ => None,
        }
    }

    /// The peer's port id, when connected.
    pub fn peer(&self) -> Option<PortId> {
        self.inner.conn.get().map(|c| c.peer)
    }

    /// `scif_close`: close the endpoint. The peer sees hang-up (it may still drain what
    /// was sent), the windows go (maps of them stay valid until unmapped), the port is
    /// freed, and every thread blocked on the endpoint wakes.
    ///
    /// # Errors
    /// [`Error::BadEndpoint`] when already closed.
    pub fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Err(Error::BadEndpoint);
        }
        if let Some(c) = self.inner.conn.get() {
            c.region.closed(c.side).store(1, Ordering::Release);
            let _ = c.session.request(Request::Scif(ScifRequest::Close), &[]);
        }
        bell::hang_up(self.inner.ringer.as_fd());
        *self.state() = State::Closed;
        Ok(())
    }

    /// Whether [`Endpoint::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// `scif_send`: queue `data` for the peer. Blocking (`SCIF_SEND_BLOCK`) returns when
    /// all of it is queued; otherwise as much as fits now is queued. Returns the bytes
    /// queued.
    ///
    /// # Errors
    /// [`Error::NotConnected`], [`Error::Reset`] when the peer closed before anything was
    /// sent, [`Error::BadEndpoint`] when the endpoint was closed.
    pub fn send(&self, data: &[u8], block: bool) -> Result<usize> {
        let c = self.live_conn()?;
        if c.remote {
            // Stores into maps of the far peer's windows reach it before this message (free
            // when none are on their way).
            remora_client::dsm::settle();
        }
        let _g = c.send_lock.lock();
        let d = c.side;
        let mut sent = 0;
        loop {
            let (n, unseen) = c.region.push(d, &data[sent..]);
            sent += n;
            if let Some(u) = unseen {
                // The receiver may be on its way into a receive: give it a moment to look
                // before paying for a doorbell. (A relay to another host never watches.)
                let t = Instant::now();
                let mut seen = false;
                for i in 0u32.. {
                    if c.remote {
                        break;
                    }
                    if c.region.noticed(&u) {
                        seen = true;
                        break;
                    }
                    if i.is_multiple_of(32) && t.elapsed() >= NOTICE {
                        break;
                    }
                }
                if !seen {
                    bell::ring_once(c.region.bell_pending(d), c.peer_ringer.as_fd());
                }
            }
            if sent == data.len() {
                return Ok(sent);
            }
            // The ring is full: not writable until the peer takes some.
            self.stuff(c, d);
            if !block {
                return Ok(sent);
            }
            let ready =
                bell::wait(self.as_fd(), true, Some(RECHECK)).map_err(|e| Error::NoMemory(e.to_string()))?;
            if self.inner.closed.load(Ordering::Acquire) {
                return if sent > 0 { Ok(sent) } else { Err(Error::BadEndpoint) };
            }
            if c.peer_closed() || (!ready.writable && c.session.hung_up()) {
                return if sent > 0 { Ok(sent) } else { Err(Error::Reset) };
            }
        }
    }

    /// Make our descriptor unwritable while ring `d` is full (the consumer undoes it).
    fn stuff(&self, c: &Conn, d: usize) {
        if c.region.tx_stuffed(d).load(Ordering::SeqCst) != 0 {
            return;
        }
        bell::stuff(self.as_fd());
        c.region.tx_stuffed(d).store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if c.region.stuffed_wait(d) && c.region.tx_stuffed(d).swap(0, Ordering::SeqCst) == 1 {
            bell::unstuff(self.inner.ringer.as_fd());
        }
    }

    /// After taking bytes from ring `d`: let a stuffed producer write again.
    fn took(&self, c: &Conn, d: usize) {
        if c.region.tx_stuffed(d).load(Ordering::SeqCst) != 0
            && c.region.tx_stuffed(d).swap(0, Ordering::SeqCst) == 1
        {
            bell::unstuff(c.peer_ringer.as_fd());
        }
    }

    /// Keep the descriptor readable exactly while ring `d` holds bytes (after a fence).
    fn settle(&self, c: &Conn, d: usize) {
        if !c.region.has_data(d) {
            if bell::take(c.region.bell_pending(d), self.as_fd()) {
                fence(Ordering::SeqCst);
                if c.region.has_data(d) {
                    bell::ring_once(c.region.bell_pending(d), self.inner.ringer.as_fd());
                }
            }
        } else {
            bell::ring_once(c.region.bell_pending(d), self.inner.ringer.as_fd());
        }
    }

    /// `scif_recv`: take bytes the peer sent. Blocking (`SCIF_RECV_BLOCK`) returns when
    /// `buf` is full; otherwise it takes what is there (possibly nothing). After the peer
    /// closed, what it sent can still be taken.
    ///
    /// # Errors
    /// [`Error::NotConnected`], [`Error::Reset`] when the peer closed and nothing is left,
    /// [`Error::BadEndpoint`] when the endpoint was closed.
    pub fn recv(&self, buf: &mut [u8], block: bool) -> Result<usize> {
        let c = self.conn()?;
        let _g = c.recv_lock.lock();
        let d = 1 - c.side;
        let mut got = 0;
        let mut took = false;
        let mut inside = false;
        let r = loop {
            let (n, mid) = c.region.pop_ex(d, &mut buf[got..]);
            got += n;
            took |= n > 0;
            if n > 0 {
                inside = mid;
            }
            if got == buf.len() {
                break Ok(got);
            }
            if c.peer_closed() && !c.region.has_data(d) {
                break if got > 0 { Ok(got) } else { Err(Error::Reset) };
            }
            if !block {
                break Ok(got);
            }
            if took {
                // Room for a producer that may be waiting for it, before we wait.
                fence(Ordering::SeqCst);
                self.took(c, d);
                took = false;
            }
            if let Err(e) = self.wait_data(c, d) {
                break if got > 0 { Ok(got) } else { Err(e) };
            }
        };
        if took {
            self.took(c, d);
        }
        if inside || c.region.bell_pending(d).load(Ordering::SeqCst) != 0 {
            self.settle(c, d);
        }
        // Otherwise every byte still in the ring came with a doorbell of its own or comes
        // from a push the sender will ring for (it saw no watcher on its first slot), so
        // the descriptor's readiness is already right.
        r
    }

    /// Wait for bytes in ring `d` (or the peer's close): spin, then sleep on the doorbell.
    fn wait_data(&self, c: &Conn, d: usize) -> Result<()> {
        let ready = || c.region.has_data(d) || c.peer_closed();
        c.region.watch(d, true);
        let mut start = None;
        let mut n = 0u32;
        let spun = loop {
            if ready() {
                break true;
            }
            n = n.wrapping_add(1);
            // Read the clock rarely: the common wait is far shorter than one reading.
            if n.is_multiple_of(256) && start.get_or_insert_with(Instant::now).elapsed() >= SPIN {
                break false;
            }
        };
        if spun {
            // The waiter word names a slot now filled: it can never match again.
            return Ok(());
        }
        c.region.watch(d, false);
        if c.region.settle_wait(d) {
            return Ok(());
        }
        loop {
            if ready() {
                return Ok(());
            }
            if self.inner.closed.load(Ordering::Acquire) {
                return Err(Error::BadEndpoint);
            }
            let r =
                bell::wait(self.as_fd(), false, Some(RECHECK)).map_err(|e| Error::NoMemory(e.to_string()))?;
            if r.readable && !r.hung_up && !c.region.has_data(d) {
                // A stale bell (a sender's ring can land after we took its bytes and
                // cleared the flag): take every byte, whatever the flag says, or poll would
                // keep answering at once; then re-arm if bytes slipped in meanwhile.
                if !bell::take(c.region.bell_pending(d), self.as_fd()) {
                    bell::drain(self.as_fd());
                }
                fence(Ordering::SeqCst);
                if c.region.has_data(d) {
                    bell::ring_once(c.region.bell_pending(d), self.inner.ringer.as_fd());
                }
            }
            if !r.readable && !r.hung_up && c.session.hung_up() && !ready() {
                return Err(Error::Reset);
            }
            if r.hung_up && !ready() && !self.inner.closed.load(Ordering::Acquire) {
                // Hang-up without a closed flag: the daemon went away.
                if c.session.hung_up() {
                    return Err(Error::Reset);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Conn {
    fn adopt(session: Session, reply: Reply, mut fds: Vec<OwnedFd>, local: PortId) -> Result<Conn> {
        let Reply::ScifConnected { side, remote, peer_node, peer_port } = reply else {
            return Err(Error::Invalid(format!("unexpected answer {reply:?}")));
        };
        if fds.len() != 2 || side > 1 {
            return Err(Error::Invalid("connection answer without its descriptors".into()));
        }
        let peer_ringer = fds.pop().expect("two");
        let region_fd = fds.pop().expect("two");
        let region = MsgRegion::open(region_fd.as_fd()).map_err(|e| Error::NoMemory(e.to_string()))?;
        Ok(Conn {
            session: Arc::new(session),
            region,
            remote,
            side: side as usize,
            peer_ringer,
            local,
            peer: PortId { node: peer_node, port: peer_port },
            send_lock: Excl::default(),
            recv_lock: Excl::default(),
            own_windows: Mutex::default(),
            peer_windows: Mutex::default(),
        })
    }
}
