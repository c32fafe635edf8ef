//! One connection to the daemon: a process of this node, a peer daemon, or the CLI.

use crate::core::{ConnectWait, Registry};
use crate::send_msg;
use crate::transport::{Answer, LinkState};
use crate::Node;
use remora_proto::link::PeerRequest;
use remora_proto::{
    decode, Error, MapStatus, Reply, Request, RequestFrame, Role, ScifRequest, ServerMsg, MAX_FRAME, NO_REPLY,
};
use remora_sys::async_conn::AsyncConn;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::unbounded_channel;

/// One connection to the daemon, as the personalities see it.
pub(crate) struct Session {
    /// The node.
    pub node: Arc<Node>,
    /// The session's number in the books.
    pub sid: u64,
    /// The process (0 for a peer daemon's session).
    pub pid: u32,
    /// What the other end is.
    pub role: Role,
    /// The process's user.
    pub uid: u32,
    conn: AsyncConn,
}

/// A reply and the descriptors that go with it.
pub(crate) type Outcome = (Result<Reply, Error>, Vec<OwnedFd>);

/// Serve one connection until it closes, then release everything it held.
pub async fn run(node: Arc<Node>, fd: OwnedFd) {
    let pid = remora_sys::seqpacket::peer_pid(fd.as_fd()).unwrap_or(0);
    let uid = remora_sys::seqpacket::peer_uid(fd.as_fd()).unwrap_or(u32::MAX);
    let conn = match AsyncConn::new(fd) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(pid, "cannot serve connection: {e}");
            return;
        }
    };
    let mut buf = vec![0u8; MAX_FRAME];
    let event_sock: Option<AsyncConn>;
    let role = match tokio::time::timeout(Duration::from_secs(5), conn.recv(&mut buf)).await {
        Ok(Ok((n, _))) if n > 0 => match decode::<RequestFrame>(&buf[..n]) {
            Ok(RequestFrame { id, req: Request::Hello { role, .. } }) => {
                // Application processes get a second socket for events, so that replies
                // and events never interleave on one stream.
                let pair = if role == Role::Client {
                    match remora_sys::seqpacket::pair() {
                        Ok(p) => Some(p),
                        Err(e) => {
                            tracing::warn!(pid, "cannot make an event socket: {e}");
                            return;
                        }
                    }
                } else {
                    None
                };
                let reply = ServerMsg::Reply { id, result: Ok(Reply::Hello { node: node.config.node }) };
                let fds: Vec<BorrowedFd<'_>> = pair.iter().map(|(_, theirs)| theirs.as_fd()).collect();
                if send_msg(&conn, &reply, &fds).await.is_err() {
                    return;
                }
                event_sock = match pair.map(|(ours, _)| AsyncConn::new(ours)).transpose() {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!(pid, "cannot serve the event socket: {e}");
                        return;
                    }
                };
                role
            }
            Ok(other) => {
                tracing::warn!(pid, "first message is not a hello ({:?}); closing", other.req);
                return;
            }
            Err(e) => {
                tracing::warn!(pid, "malformed first frame; closing: {e}");
                return;
            }
        },
        Ok(_) => return,
        Err(_) => {
            tracing::warn!(pid, "no hello within 5 s; closing");
            return;
        }
    };
    let (tx, mut rx) = unbounded_channel();
    let sid = node.lock().add_session(pid, role, tx);
    tracing::debug!(sid, pid, ?role, "session open");
    let mut s = Session { node: node.clone(), sid, pid, role, uid, conn };
    // Application processes have an event socket of their own: forward events there from a
    // task of their own, so they flow even while a request of the session waits (a long
    // connect, say). Other roles get events between requests on the main socket.
    // `keep` holds the sending side of the idle channel the loop listens on when events
    // go through the forwarding task.
    let (keep, idle) = unbounded_channel::<remora_proto::Event>();
    let mut rx = match event_sock {
        Some(ev_sock) => {
            tokio::spawn(async move {
                while let Some(ev) = rx.recv().await {
                    if send_msg(&ev_sock, &ServerMsg::Event(ev), &[]).await.is_err() {
                        break;
                    }
                }
            });
            idle
        }
        None => rx,
    };
    loop {
        tokio::select! {
            r = s.conn.recv(&mut buf) => {
                let (n, fds) = match r {
                    Ok((0, _)) => break,
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(sid, pid, "receive failed, closing session: {e}");
                        break;
                    }
                };
                let frame = match decode::<RequestFrame>(&buf[..n]) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!(sid, pid, "malformed frame, closing session: {e}");
                        break;
                    }
                };
                let (result, out_fds) = s.handle(frame.req, fds).await;
                s.node.changed.notify_waiters();
                if frame.id != NO_REPLY {
                    let borrowed: Vec<BorrowedFd<'_>> = out_fds.iter().map(|f| f.as_fd()).collect();
                    let msg = ServerMsg::Reply { id: frame.id, result };
                    if send_msg(&s.conn, &msg, &borrowed).await.is_err() {
                        break;
                    }
                }
            }
            Some(ev) = rx.recv() => {
                if send_msg(&s.conn, &ServerMsg::Event(ev), &[]).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(keep);
    node.transports().session_end(sid);
    node.end_session(sid);
    node.changed.notify_waiters();
    tracing::debug!(sid, pid, "session closed; its resources are released");
}

/// Pass the triggers of a shared interrupt number's fan-out page (connections of this
/// host trigger it directly) on to every member, until the group goes.
pub(crate) async fn fan_out(node: Arc<Node>, intno: u32, fanout: u64) {
    let clones = node
        .lock()
        .interrupts
        .get(&fanout)
        .and_then(|i| Some((i.event.try_clone().ok()?, i.event.try_clone().ok()?)));
    let Some((counter, watched)) = clones else { return };
    let Ok(ev) = remora_sys::async_conn::register(watched.into_fd()) else { return };
    let mut seen = node.lock().interrupts.get(&fanout).map_or(0, |i| i.page.triggers());
    loop {
        let ready = tokio::time::timeout(Duration::from_millis(200), ev.readable()).await;
        if let Ok(Ok(mut g)) = ready {
            counter.drain();
            g.clear_ready();
        }
        let reg = node.lock();
        let Some(now) = reg.interrupts.get(&fanout).map(|i| i.page.triggers()) else { return };
        let n = now.wrapping_sub(seen);
        seen = now;
        if !reg.fan_out(intno, fanout, n) {
            return;
        }
    }
}

pub(crate) fn fd_of(m: &remora_sys::Memfd) -> Result<OwnedFd, Error> {
    m.try_clone().map(|m| m.into_fd()).map_err(|e| Error::System(e.to_string()))
}

pub(crate) fn is_memfd(fd: &OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|p| p.to_string_lossy().starts_with("/memfd:"))
        .unwrap_or(false)
}

impl Session {
    /// This node's id.
    pub fn me(&self) -> u32 {
        self.node.config.node
    }

    /// The node the session's imports count as coming from (a peer daemon's for its
    /// sessions, else this node).
    pub fn importer_node(&self) -> u32 {
        match self.role {
            Role::Peer { node } => node,
            _ => self.me(),
        }
    }

    /// Whether a peer daemon holds this session (it may not reach onwards).
    pub fn is_peer(&self) -> bool {
        matches!(self.role, Role::Peer { .. })
    }

    /// Resolves when the other end hangs up.
    pub async fn hangup(&self) {
        self.conn.hangup().await
    }

    async fn handle(&mut self, req: Request, fds: Vec<OwnedFd>) -> Outcome {
        if self.role == Role::Control
            && !matches!(req, Request::Probe { .. } | Request::Status | Request::Shutdown)
        {
            return (Err(Error::Access), vec![]);
        }
        let scif_req = matches!(req, Request::Scif(_));
        if scif_req != (self.role == Role::Scif)
            && !matches!(req, Request::Probe { .. } | Request::Scif(ScifRequest::Nodes))
        {
            return (Err(Error::Access), vec![]);
        }
        let sid = self.sid;
        match req {
            Request::Hello { .. } => (Err(Error::Protocol("second hello".into())), vec![]),
            Request::Scif(r) => crate::personality::scif::client::handle(self, r, fds).await,
            Request::MapNote { map, target, offset, size, readonly } => {
                self.node
                    .lock()
                    .map_note(sid, MapStatus { session: sid, map, target, offset, size, readonly });
                (Ok(Reply::Ok), vec![])
            }
            Request::UnmapNote { map } => {
                self.node.lock().unmap_note(sid, map);
                (Ok(Reply::Ok), vec![])
            }
            Request::Probe { node } => {
                let reachable = node == self.me()
                    || matches!(
                        tokio::time::timeout(Duration::from_secs(2), self.ask(node, PeerRequest::Probe))
                            .await,
                        Ok(Ok(_))
                    );
                (Ok(Reply::Probe { reachable }), vec![])
            }
            Request::Status => (Ok(Reply::Status(self.status())), vec![]),
            Request::Shutdown => {
                self.node.shutdown.notify_one();
                (Ok(Reply::Ok), vec![])
            }
            other => crate::personality::sisci::handle(self, other, fds).await,
        }
    }

    fn status(&self) -> remora_proto::NodeStatus {
        let up = self.node.started.elapsed().as_secs();
        let mut st = self.node.lock().status(std::process::id(), self.node.config.auto_started, up);
        st.scif = self.node.scif().counts();
        st.peers = self
            .node
            .transports()
            .links()
            .into_iter()
            .map(|l| remora_proto::PeerStatus {
                node: l.node,
                addr: l.addr,
                state: l.state.word().into(),
                rtt_us: l.rtt_us,
                bytes_in: l.bytes_in,
                bytes_out: l.bytes_out,
            })
            .collect();
        st
    }

    /// The nodes this session can reach: this host's and every peer whose link is up.
    pub fn reachable_nodes(&self) -> Vec<u32> {
        let mut nodes = remora_proto::paths::nodes_in(&self.node.config.runtime_dir);
        nodes.push(self.me());
        let links = self.node.transports().links();
        nodes.extend(links.iter().filter(|l| l.state == LinkState::Up).map(|l| l.node));
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// Ask node `node` through the transport that reaches it, for this session, giving up
    /// if the caller hangs up.
    ///
    /// # Errors
    /// `NoSuchNode` when no transport reaches it; the peer's or the transport's error.
    pub async fn ask(&self, node: u32, req: PeerRequest) -> Result<Answer, Error> {
        let t = self.node.transports().to(node).cloned().ok_or(Error::NoSuchNode)?;
        tokio::select! {
            r = t.request(node, self.sid, req) => r,
            _ = self.conn.hangup() => Err(Error::Protocol("caller hung up".into())),
        }
    }

    /// Retry `attempt` whenever the books change, until it succeeds, fails hard, the time
    /// runs out (`missing` if the thing never existed, else `Timeout`), or the caller hangs up.
    pub async fn wait_until<T>(
        &self,
        timeout_ms: Option<u32>,
        missing: Error,
        mut attempt: impl FnMut(&mut Registry) -> Result<T, ConnectWait>,
    ) -> Result<T, Error> {
        self.wait_with(timeout_ms, missing, || attempt(&mut self.node.lock())).await
    }

    /// [`Session::wait_until`] for an attempt that locks what it needs itself.
    pub async fn wait_with<T>(
        &self,
        timeout_ms: Option<u32>,
        missing: Error,
        mut attempt: impl FnMut() -> Result<T, ConnectWait>,
    ) -> Result<T, Error> {
        let deadline = timeout_ms.map(|t| Instant::now() + Duration::from_millis(t as u64));
        loop {
            let notified = self.node.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let last = match attempt() {
                Ok(x) => return Ok(x),
                Err(ConnectWait::Failed(e)) => return Err(e),
                Err(w) => w,
            };
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if remaining == Some(Duration::ZERO) {
                return Err(match last {
                    ConnectWait::Missing => missing,
                    _ => Error::Timeout,
                });
            }
            let sleep = tokio::time::sleep(remaining.unwrap_or(Duration::from_secs(3600)));
            tokio::select! {
                _ = &mut notified => {}
                _ = sleep => {}
                _ = self.conn.hangup() => return Err(Error::Protocol("caller hung up".into())),
            }
        }
    }
}
