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
