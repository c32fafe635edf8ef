//! Endpoints: open, bind, listen, connect, accept, close; and messaging.

use crate::conn::{Conn, PortId};
use crate::{Error, Result, Scif};
use remora_client::Session;
use remora_proto::{Reply, Request, ScifRequest};
use remora_sys::bell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How long a blocking receive spins on the ring before it sleeps on the doorbell.
pub(crate) const SPIN: Duration = Duration::from_micros(50);
/// How long a sender waits for a receiver on its way into `recv` before ringing.
pub(crate) const NOTICE: Duration = Duration::from_micros(1);
/// Blocked calls re-check the daemon this often.
pub(crate) const RECHECK: Duration = Duration::from_millis(100);

pub(crate) enum State {
    Open,
    Bound { port: u16, home: Session },
    Listening { port: u16, token: u64, _home: Session },
    Connecting,
    Connected { _home: Option<Session> },
    Closed,
}

pub(crate) struct Inner {
    pub(crate) scif: Arc<Scif>,
    pub(crate) reader: OwnedFd,
    pub(crate) ringer: OwnedFd,
    pub(crate) closed: AtomicBool,
    state: Mutex<State>,
    pub(crate) conn: OnceLock<Arc<Conn>>,
    pub(crate) async_connect: Mutex<Option<Result<u16>>>,
}

/// A SCIF endpoint (`scif_epd_t`). Clones refer to the same endpoint.
#[derive(Clone)]
pub struct Endpoint {
    pub(crate) inner: Arc<Inner>,
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

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn live(&self) -> Result<()> {
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

    /// `scif_accept`: take a waiting connection request (or wait for one when `sync`,
    /// `SCIF_ACCEPT_SYNC`). Returns the new connected endpoint and the peer's port id.
    ///
    /// # Errors
    /// [`Error::Again`] when nothing waits and not `sync`, [`Error::Invalid`] when the
    /// endpoint is not listening (or was closed while waiting).
    pub fn accept(&self, sync: bool) -> Result<(Endpoint, PortId)> {
        let mut a = self.accept_begin(sync)?;
        a.wait(None)?.ok_or_else(|| Error::NoMemory("no answer to an accept".into()))
    }

    /// `scif_accept` in two steps: ask for a connection request now, and wait for it with
    /// [`Accepting::wait`] in as many slices as the caller likes (the C library waits in
    /// slices, so that a thread cancelled inside `scif_accept` ends between two of them;
    /// dropping the [`Accepting`] withdraws the ask).
    ///
    /// # Errors
    /// As [`Endpoint::accept`], for what can be told before waiting.
    pub fn accept_begin(&self, sync: bool) -> Result<Accepting> {
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
        let id = session.begin(req, &[ringer.as_fd()]).map_err(|e| self.accept_error(e))?;
        Ok(Accepting { ep: self.clone(), parts: Some((session, reader, ringer)), id, port })
    }

    /// A failed accept's error: [`Error::BadEndpoint`] once the listener was closed.
    fn accept_error(&self, e: remora_client::ClientError) -> Error {
        if self.inner.closed.load(Ordering::Acquire) {
            Error::BadEndpoint
        } else {
            e.into()
        }
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
            if c.direct {
                // The peer reads what we sent, then the end of the stream; every thread
                // blocked on the descriptor wakes.
                remora_sys::flow::shutdown(self.as_fd(), false);
            }
            let _ = c.session.request(Request::Scif(ScifRequest::Close), &[]);
            // Its windows are gone: their pages are free to move again, and its arenas go
            // (their pages with the last map of them).
            std::mem::take(&mut *c.leases.lock().unwrap_or_else(|p| p.into_inner()));
            c.arena.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
        bell::hang_up(self.inner.ringer.as_fd());
        *self.state() = State::Closed;
        // Arenas of this endpoint that no live window uses any more go.
        remora_sys::user_memory::prune_shared();
        Ok(())
    }

    /// Whether [`Endpoint::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }
}

/// An accept under way ([`Endpoint::accept_begin`]): its own session to the node, whose
/// answer is the connection.
#[derive(Debug)]
pub struct Accepting {
    ep: Endpoint,
    /// The session, the new endpoint's doorbell pair: taken by the answer.
    parts: Option<(Session, OwnedFd, OwnedFd)>,
    id: u64,
    port: u16,
}

impl Accepting {
    /// Wait up to `timeout` (`None`: until it comes) for the connection: `Ok(None)` when
    /// the time passed first (wait again, or drop this to give up).
    ///
    /// # Errors
    /// As [`Endpoint::accept`]; [`Error::Invalid`] after the connection was returned.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Option<(Endpoint, PortId)>> {
        let ep = &self.ep;
        let Some((session, _, _)) = &self.parts else {
            return Err(Error::Invalid("this accept already returned its connection".into()));
        };
        let Some((reply, fds)) = session.answer(self.id, timeout).map_err(|e| ep.accept_error(e))? else {
            return Ok(None);
        };
        let Some((session, reader, ringer)) = self.parts.take() else {
            return Err(Error::Invalid("this accept already returned its connection".into()));
        };
        let scif = ep.inner.scif.clone();
        let local = PortId { node: scif.node(), port: self.port };
        let (conn, flow) = Conn::adopt(session, reply, fds, local)?;
        let peer = conn.peer;
        // A direct flow is the new endpoint's descriptor (its doorbell is not needed).
        // (Close-on-exec as every descriptor received; TCP_NODELAY set by the daemons;
        // blocking waits in slices, as `flow::install` sets them.)
        if let Some(f) = &flow {
            remora_sys::flow::bound_waits(f.as_fd());
        }
        let reader = flow.unwrap_or(reader);
        let ep = Endpoint::from_parts(scif, reader, ringer, State::Connected { _home: None });
        let _ = ep.inner.conn.set(Arc::new(conn));
        Ok(Some((ep, peer)))
    }
}
