//! One connection to the daemon, as the personalities see it: who is on the other end,
//! and the helpers every personality uses (asking another node, waiting for the books).

use crate::core::{ConnectWait, Registry};
use crate::transport::{Answer, LinkState, Transport};
use crate::Node;
use remora_proto::link::PeerRequest;
use remora_proto::{Error, Reply, Role};
use remora_sys::async_conn::AsyncConn;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a connect waits for a node of this host whose daemon is not up yet (it starts
/// in milliseconds; this is many times that).
pub const STARTUP_GRACE: Duration = Duration::from_secs(3);

/// How long a disconnect waits for a node of this host (no link state tells whether its
/// daemon runs) before it returns and the answer is awaited in the background.
pub const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// How long past the caller's timeout a request to another node waits for the answer (the
/// round trip, and the peer's own work once its wait ended).
pub const ANSWER_GRACE: Duration = Duration::from_secs(1);

/// [`ANSWER_GRACE`] for a node of this host (reviewer 92: with 1 s, a connect with a short
/// timeout to a segment missing there could answer `Timeout` instead of `NoSuchSegment` on a
/// loaded machine, the proxy's dial included).
pub const LOCAL_ANSWER_GRACE: Duration = Duration::from_secs(3);

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
    /// The process's group.
    pub gid: u32,
    pub(crate) conn: AsyncConn,
}

/// A reply and the descriptors that go with it.
pub(crate) type Outcome = (Result<Reply, Error>, Vec<OwnedFd>);

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
        self.ask_via(&t, node, req).await
    }

    /// Tell node `node` something that releases what this session holds there (a
    /// disconnect), waiting for its answer only while the route to `node` is up: once the
    /// link is known silent (a cable cut, a daemon held up: three heartbeats) the caller
    /// goes on and the answer is awaited in the background (a cut held the caller until the
    /// cable came back or the link was closed). The request goes on the link at once, in
    /// order with the session's requests. When the link's connection breaks before the
    /// answer (the node may never have read it), it is sent again each time the link is up
    /// again, until the node answers (a refusal too: nothing is left to release), the
    /// transport no longer knows the node, or the session ends (its end, told to every node
    /// it reached, releases all it held there).
    ///
    /// A node of this host (a transport without a link state) is waited for at most
    /// [`RELEASE_WAIT`]: its daemon held up longer (stopped, hung) serves the request,
    /// which waits in its socket in order with the session's others, when it runs again;
    /// the session's end, when its proxy closes, releases everything anyway.
    pub async fn release_far(&self, node: u32, req: PeerRequest) {
        let Some(t) = self.node.transports().to(node).cloned() else { return };
        let (link, books, sid) = (t.clone(), self.node.clone(), self.sid);
        let told = async move {
            loop {
                if !matches!(t.request(node, sid, req.clone()).await, Err(Error::NodeNotResponding)) {
                    return;
                }
                loop {
                    if !books.lock().sessions.contains_key(&sid) {
                        return;
                    }
                    match t.link_state(node) {
                        Some(LinkState::Up) => break,
                        None => return,
                        Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
            }
        };
        let mut told = Box::pin(told);
        // A first look now: the request leaves in it when the link has a connection.
        let sent = told.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        if sent.is_ready() {
            return;
        }
        // A transport without a link state (this host's nodes) is waited for up to
        // `RELEASE_WAIT`.
        let bound = tokio::time::sleep(RELEASE_WAIT);
        tokio::pin!(bound);
        while !matches!(link.link_state(node), Some(s) if s != LinkState::Up) {
            tokio::select! {
                _ = told.as_mut() => return,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = self.conn.hangup() => break,
                _ = &mut bound, if link.link_state(node).is_none() => break,
            }
        }
        tokio::spawn(told);
    }

    /// The transport that reaches `node` for a connect. A node of this host whose daemon is
    /// still starting (a program started a moment before its peer) is waited for, up to
    /// [`STARTUP_GRACE`] or the caller's timeout, whichever is shorter, before the node is
    /// declared not to exist.
    ///
    /// # Errors
    /// `NoSuchNode` when no transport reaches it by then; `Protocol` when the caller hangs
    /// up meanwhile.
    pub async fn reach(&self, node: u32, timeout_ms: Option<u32>) -> Result<Arc<dyn Transport>, Error> {
        let grace = timeout_ms.map_or(STARTUP_GRACE, |t| Duration::from_millis(t.into()).min(STARTUP_GRACE));
        let deadline = Instant::now() + grace;
        loop {
            if let Some(t) = self.node.transports().to(node) {
                return Ok(t.clone());
            }
            if node == 0 || Instant::now() >= deadline {
                return Err(Error::NoSuchNode);
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                _ = self.conn.hangup() => return Err(Error::Protocol("caller hung up".into())),
            }
        }
    }

    /// [`Session::ask`] through a transport the caller already picked.
    ///
    /// # Errors
    /// The peer's or the transport's error.
    pub async fn ask_via(
        &self,
        t: &Arc<dyn Transport>,
        node: u32,
        req: PeerRequest,
    ) -> Result<Answer, Error> {
        tokio::select! {
            r = t.request(node, self.sid, req) => r,
            _ = self.conn.hangup() => Err(Error::Protocol("caller hung up".into())),
        }
    }

    /// Ask `node` for something it waits up to `timeout_ms` for (a connect, a VIPL
    /// connection request), keeping the caller's time: given up with `Timeout` once that
    /// time and [`ANSWER_GRACE`] ([`LOCAL_ANSWER_GRACE`] for a node of this host) passed
    /// without an answer. Without this a request on a link that fell silent waits until
    /// the transport closes the link, and one to a node of this host whose daemon is held
    /// up (stopped, hung) waits until that daemon runs again. A route reported silent
    /// alone does not end it: three missed heartbeats are also a far daemon descheduled on
    /// a loaded host, which answers a moment later. Without a time limit the request waits
    /// until the answer comes or the route is lost.
    ///
    /// What a request given up so made is not left behind: across hosts the transport
    /// tells the peer (`LinkMsg::GaveUp`, in order after it and again after reconnections
    /// until noted), which refuses it or releases what it made; on this host the
    /// session's proxy, whose requests the held-up daemon serves in turn when it runs
    /// again, undoes what the reply made (`transport/local/proxy.rs`).
    ///
    /// # Errors
    /// `Timeout`; the peer's or the transport's error.
    pub async fn ask_within(
        &self,
        t: &Arc<dyn Transport>,
        node: u32,
        req: PeerRequest,
        timeout_ms: Option<u32>,
    ) -> Result<Answer, Error> {
        let ask = self.ask_via(t, node, req);
        // A node of this host may first be dialled (its hello waits up to 2 s), and a host
        // loaded enough to be slow is slow for both daemons: the answer is given longer.
        let grace = if t.shares_memory() { LOCAL_ANSWER_GRACE } else { ANSWER_GRACE };
        match timeout_ms {
            None => ask.await,
            Some(ms) => tokio::time::timeout(Duration::from_millis(ms.into()) + grace, ask)
                .await
                .unwrap_or(Err(Error::Timeout)),
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
        attempt: impl FnMut() -> Result<T, ConnectWait>,
    ) -> Result<T, Error> {
        wait_changes(&self.node, timeout_ms, missing, attempt, self.conn.hangup()).await
    }
}

/// Retry `attempt` whenever the books change, until it succeeds, fails hard, the time runs
/// out (`missing` if the thing never existed, else `Timeout`), or `cancel` resolves.
pub(crate) async fn wait_changes<T>(
    node: &Node,
    timeout_ms: Option<u32>,
    missing: Error,
    mut attempt: impl FnMut() -> Result<T, ConnectWait>,
    cancel: impl std::future::Future<Output = ()>,
) -> Result<T, Error> {
    let deadline = timeout_ms.map(|t| Instant::now() + Duration::from_millis(t as u64));
    tokio::pin!(cancel);
    loop {
        let notified = node.changed.notified();
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
            _ = &mut cancel => return Err(Error::Protocol("caller hung up".into())),
        }
    }
}
