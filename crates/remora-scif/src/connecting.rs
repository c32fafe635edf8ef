//! A connect under way ([`Connecting`]): `scif_connect` returns once the listener accepted,
//! which may take as long as its program likes, so the wait for that answer is a step of
//! its own, which the C library makes in slices (a thread cancelled inside `scif_connect`
//! ends between two of them).
//!
//! A node of this host is asked directly (memory is shared). Any other node, or any node
//! at all in a cluster (the cluster file may force the network), is asked through this
//! node's daemon, which relays, says to dial the node directly, or knows no such node.

use crate::conn::{Conn, PortId};
use crate::endpoint::State;
use crate::{Endpoint, Error, Result};
use remora_client::Session;
use remora_proto::{Reply, Request, ScifRequest};
use remora_sys::bell;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

impl Endpoint {
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
        let (port, home) = match self.prepare_connect()? {
            Prepared::Ended(r) => return r,
            Prepared::Start { port, home } => (port, home),
        };
        if bell::is_nonblocking(self.as_fd()) {
            bell::stuff(self.as_fd());
            let me = self.clone();
            std::thread::Builder::new()
                .name("scif-connect".into())
                .spawn(move || {
                    // No direct flow: it would replace the file behind the descriptor,
                    // which an epoll set may watch for this connect's end.
                    let r = Connecting::start(&me, dst, port, home, false).and_then(|c| c.finish());
                    *me.inner.async_connect.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                    bell::unstuff(me.inner.ringer.as_fd());
                })
                .map_err(|e| Error::NoMemory(e.to_string()))?;
            return Err(Error::InProgress);
        }
        Connecting::start(self, dst, port, home, true)?.finish()
    }

    /// Whether the program made the endpoint's descriptor `O_NONBLOCK` (a connect then goes
    /// on in the background).
    pub fn is_nonblocking(&self) -> bool {
        bell::is_nonblocking(self.as_fd())
    }

    /// A blocking `scif_connect` in two steps: ask for the connection now, and wait for
    /// the listener's accept with [`Connecting::wait`] in as many slices as the caller
    /// likes (the C library waits in slices, so that a thread cancelled inside
    /// `scif_connect` ends between two of them; dropping the [`Connecting`] withdraws the
    /// connect and leaves the endpoint bound). For a descriptor the program made
    /// `O_NONBLOCK`, use [`Endpoint::connect`].
    ///
    /// # Errors
    /// As [`Endpoint::connect`], for what can be told before waiting.
    pub fn connect_begin(&self, dst: PortId) -> Result<Connecting> {
        match self.prepare_connect()? {
            Prepared::Ended(r) => Ok(Connecting::ended(self, r?)),
            Prepared::Start { port, home } => Connecting::start(self, dst, port, home, true),
        }
    }

    /// The checks and the state change every connect begins with: the result of a
    /// background connect that ended, or the endpoint's port (bound now if it was not) and
    /// session, the endpoint then connecting.
    fn prepare_connect(&self) -> Result<Prepared> {
        self.live()?;
        if let Some(r) = self.inner.async_connect.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Ok(Prepared::Ended(r));
        }
        let mut st = self.state();
        match &*st {
            State::Open | State::Bound { .. } => {}
            State::Connecting => return Err(Error::InProgress),
            State::Connected { .. } => return Err(Error::IsConnected),
            State::Listening { .. } => return Err(Error::NotSupported("connect on a listening endpoint")),
            State::Closed => return Err(Error::BadEndpoint),
        }
        if matches!(&*st, State::Open) {
            drop(st);
            self.bind(0)?;
            st = self.state();
        }
        match std::mem::replace(&mut *st, State::Connecting) {
            State::Bound { port, home } => Ok(Prepared::Start { port, home }),
            other => {
                *st = other;
                Err(Error::Invalid("endpoint changed state during connect".into()))
            }
        }
    }
}

/// A connect under way ([`Endpoint::connect_begin`]). Dropping it before it ended withdraws
/// the connect (its session to the node closes) and leaves the endpoint bound to its port,
/// as a failed connect does.
pub struct Connecting {
    ep: Endpoint,
    dst: PortId,
    port: u16,
    /// The port's session: the connected endpoint's once the connect ends, else the bound
    /// endpoint's again.
    home: Option<Session>,
    req: Request,
    /// The session the request went on, its id, and whether the answer may be "dial the
    /// node directly".
    dial: Option<(Session, u64, bool)>,
    /// A connect that ended before this was made (in the background): its port.
    ended: Option<u16>,
}

impl std::fmt::Debug for Connecting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connecting").field("dst", &self.dst).field("port", &self.port).finish()
    }
}

impl Connecting {
    /// Ask for the connection of `ep` (connecting, bound to `port` with session `home`) to
    /// `dst`; across hosts over a direct flow when `flow` (and the daemons make one).
    pub(crate) fn start(
        ep: &Endpoint,
        dst: PortId,
        port: u16,
        home: Session,
        flow: bool,
    ) -> Result<Connecting> {
        let scif = &ep.inner.scif;
        let cfg = scif.config();
        let (node, from_node) = (dst.node, scif.node());
        let req = Request::Scif(match flow {
            true => ScifRequest::Connect { node, port: dst.port, from_node, from_port: port },
            false => ScifRequest::ConnectWithoutFlow { node, port: dst.port, from_node, from_port: port },
        });
        // Made before the first request: an error from here on leaves the endpoint bound
        // (its drop).
        let mut c = Connecting { ep: ep.clone(), dst, port, home: Some(home), req, dial: None, ended: None };
        let local =
            dst.node != scif.node() && remora_proto::paths::socket_path(&cfg.runtime_dir, dst.node).exists();
        let (s, redirect) = if local && cfg.cluster.is_none() {
            (c.direct()?, false)
        } else {
            (Session::open_scif(cfg, true)?, true)
        };
        let id = s.begin(c.req.clone(), &[ep.inner.ringer.as_fd()])?;
        c.dial = Some((s, id, redirect));
        Ok(c)
    }

    /// A connect that already ended (in the background) on `port`.
    pub(crate) fn ended(ep: &Endpoint, port: u16) -> Connecting {
        let req = Request::Scif(ScifRequest::Close);
        Connecting {
            ep: ep.clone(),
            dst: PortId::default(),
            port,
            home: None,
            req,
            dial: None,
            ended: Some(port),
        }
    }

    /// A session with the daemon of the destination's node (of this host).
    fn direct(&self) -> Result<Session> {
        Session::open_scif(&self.ep.inner.scif.config().with_node(self.dst.node), false)
            .map_err(|_| Error::NoDevice)
    }

    /// Wait up to `timeout` (`None`: until it comes) for the listener's answer: the local
    /// port once connected, `Ok(None)` when the time passed first (wait again, or drop
    /// this to give up).
    ///
    /// # Errors
    /// As [`Endpoint::connect`]; [`Error::Invalid`] after the connect ended.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Option<u16>> {
        if let Some(port) = self.ended.take() {
            return Ok(Some(port));
        }
        loop {
            let Some((s, id, redirect)) = &self.dial else {
                return Err(Error::Invalid("this connect already ended".into()));
            };
            let Some((reply, fds)) = s.answer(*id, timeout)? else { return Ok(None) };
            if matches!(reply, Reply::ScifDialDirect) && *redirect {
                let s = self.direct()?;
                let id = s.begin(self.req.clone(), &[self.ep.inner.ringer.as_fd()])?;
                self.dial = Some((s, id, false));
                continue;
            }
            let Some((session, _, _)) = self.dial.take() else { continue };
            let local = PortId { node: self.ep.inner.scif.node(), port: self.port };
            let (conn, flow) = Conn::adopt(session, reply, fds, local)?;
            if let Some(flow) = flow {
                // The flow becomes the endpoint's descriptor (same number, with the
                // program's O_NONBLOCK); a poll already under way on the doorbell is woken
                // to look again.
                let fd = self.ep.as_fd();
                let nonblocking = bell::is_nonblocking(fd);
                remora_sys::flow::install(fd, flow).map_err(|e| Error::NoMemory(e.to_string()))?;
                if nonblocking {
                    remora_sys::seqpacket::set_nonblocking(fd, true)
                        .map_err(|e| Error::NoMemory(e.to_string()))?;
                }
                bell::ring(self.ep.inner.ringer.as_fd());
            }
            let mut st = self.ep.state();
            let _ = self.ep.inner.conn.set(Arc::new(conn));
            *st = State::Connected { _home: self.home.take() };
            return Ok(Some(self.port));
        }
    }

    /// Wait for the answer, however long it takes.
    ///
    /// # Errors
    /// As [`Connecting::wait`].
    pub(crate) fn finish(mut self) -> Result<u16> {
        loop {
            if let Some(port) = self.wait(None)? {
                return Ok(port);
            }
        }
    }
}

impl Drop for Connecting {
    fn drop(&mut self) {
        // Not connected (failed, or given up): bound again, unless closed meanwhile.
        if let Some(home) = self.home.take() {
            let mut st = self.ep.state();
            if !matches!(&*st, State::Closed) {
                *st = State::Bound { port: self.port, home };
            }
        }
    }
}

/// What [`Endpoint::prepare_connect`] found.
enum Prepared {
    /// A background connect ended with this.
    Ended(Result<u16>),
    /// Connect from `port`; `home` is the port's session.
    Start { port: u16, home: Session },
}
