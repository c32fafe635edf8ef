//! How a node reaches the other nodes: the transports, and the contract every one keeps.
//!
//! # The contract
//!
//! A transport moves requests and bytes between this node and other nodes. It knows no
//! API: it never looks inside a [`PeerRequest`] it carries, nor inside a [`RangeRef`] a peer
//! names, and it never touches the node's books. What arrives from a peer is handed to the
//! node's [`Inbound`] handler, which serves it; what the node wants from a peer goes through
//! the [`Transport`] trait. Each operation below is part of the contract:
//!
//! * **Request / response** ([`Transport::request`]): a request on behalf of one session
//!   of this node, answered once, by the peer's [`Inbound::request`]. The answer may carry
//!   descriptors when the transport shares memory with the peer (the `local` transport
//!   hands memfds and interrupt pages over). A request to a node that cannot be reached
//!   fails with [`Error::NodeNotResponding`] (or [`Error::NoSuchNode`]); it never waits
//!   forever: a link that is coming up is waited for at most a few seconds. A request
//!   whose answer the caller never takes (it gave up and dropped the future, or the
//!   connection broke first) is told to the peer as given up, after it in order and again
//!   after every reconnection to the same start of the peer until the peer noted it: the
//!   peer refuses it while it is still being served and releases what it made once it was
//!   ([`Inbound::gave_up`]): a SISCI segment or interrupt connect given up leaves nothing
//!   booked there (what other connects given up made stays booked until their session's
//!   end, which the peer is also told until it noted it).
//! * **Posts** ([`Transport::post`]): a request in order with the others that the peer
//!   answers only when it fails (a SCIF relay's bytes: one packet per message instead of
//!   two). A broken connection fails the caller's watch, as it fails requests. Transports
//!   that cannot post give the request back.
//! * **Session end** ([`Transport::session_end`]): the peer releases everything it holds for
//!   that session. A transport remembers ends it could not deliver while a link was down
//!   and delivers them when it comes back; one sent on a connection that broke before the
//!   peer noted it is sent again on the next.
//! * **Link state and events**: a transport reports a silent peer (not operational), its
//!   return (operational) and its loss (its daemon restarted or is gone) through
//!   [`Inbound::link_changed`] (for a whole link) or [`Inbound::route_lost`] (for one
//!   session's route). In-flight requests and transfers to a lost peer fail. A transport
//!   that keeps connections takes these decisions with [`liveness::Liveness`] (a pure state
//!   machine on explicit inputs and times, simulated in `tests/simulation.rs`).
//! * **Statistics** ([`Transport::links`]): state, round-trip time and bytes per peer.
//! * **Streaming reads and writes of a remote range** ([`Transport::write_range`],
//!   [`Transport::read_range`], and [`Transport::start_range`], which returns before the
//!   transfer is complete so that the engine keeps the next chunk in flight) for the DMA
//!   engine and RMA: bytes move between a mapping of this node and a connection of the
//!   peer, checked again by the peer ([`Inbound::memory`]). A transport that shares memory
//!   answers "unsupported" (the engine copies locally).
//! * **Pager flows** ([`Transport::pager_flow`]): a connection of its own that a DSM pager
//!   of this node's processes uses to fetch pages of, and store into, one [`RangeRef`] of
//!   the peer, bound by this node before it is handed over so that the process reaches
//!   nothing else.
//! * **Direct flows** ([`Transport::direct_flow`]): a connection of its own between a
//!   process of this node and one of the peer's (a SCIF connection's messages), dialed and
//!   authenticated as a pager flow is, and given by the peer to whoever waits for it with
//!   the one-time token the peer handed out ([`Inbound::direct_flow`]).
//!
//! An operation a transport cannot do answers [`unsupported`] rather than pretending. Bytes
//! that arrive malformed close that one link (or flow), with the reason logged, and never
//! the daemon — but over [`ofi`], where they are dropped (logged, rate-limited) and close
//! nothing: a fabric message is tied to its link only by the token it carries, and a
//! receive that fails does not say its sender, so a stranger's junk must not close a
//! cluster's link (a message lost on its way breaks its sender's side instead, whose send
//! fails, and so the link on both sides).
//!
//! # The transports
//!
//! [`TRANSPORTS`] is the registration table, one line per transport, tried in order: the
//! first that reaches a node carries its traffic.
//!
//! | name | reaches | shares memory | code |
//! | --- | --- | --- | --- |
//! | `local` | nodes of this host (same runtime directory) | yes | [`local`] |
//! | `ofi` | nodes of the cluster file that name the same `ofi+<provider>` transport, over libfabric (messages, RMA) | no | [`ofi`] |
//! | `tcp` | the other nodes of the cluster file, over TCP | no | [`tcp`] |
//!
//! One conformance suite (`crates/remora-node/tests/conformance.rs`) runs the same checks
//! over every transport in the table.

pub mod carrier;
pub mod features;
pub mod liveness;
pub mod local;
#[cfg(test)]
pub(crate) mod nobody;
pub mod ofi;
pub(crate) mod shared_flow;
pub mod tcp;

use remora_proto::link::{PeerReply, PeerRequest, RangeRef};
use remora_proto::{Error, Event};
use remora_sys::Mapping;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

/// A future that a trait object can return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A streaming transfer started by [`Transport::start_range`]: calling it waits until the
/// transfer is complete (every byte stored where it goes) or failed.
pub type Pending = Box<dyn FnOnce() -> Result<(), Error> + Send>;

/// An answer from a peer: the reply, and descriptors when the transport shares memory.
pub type Answer = (PeerReply, Vec<OwnedFd>);

/// The watch of a [`Transport::post`]: its id (for [`Transport::unwatch`] and the next
/// post's `replaces`), and a future that ends only when the post failed (`Err`), or with
/// `Ok` when a peer that answers every request confirmed it.
pub struct Posted {
    /// The watch's id.
    pub id: u64,
    /// Ends with the post's failure (or a confirmation).
    pub outcome: BoxFuture<'static, Result<PeerReply, Error>>,
}

/// The error of an operation a transport does not do.
pub fn unsupported(transport: &str, what: &str) -> Error {
    Error::Protocol(format!("unsupported: the {transport} transport does not do {what}"))
}

/// A link's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Never connected yet.
    Down,
    /// Connected, heartbeats answered.
    Up,
    /// Connected or reconnecting, but silent past the heartbeat budget.
    NotOperational,
    /// The peer is gone or restarted; a new connection starts afresh.
    Lost,
}

impl LinkState {
    /// The word `remora status` shows.
    pub fn word(self) -> &'static str {
        match self {
            LinkState::Up => "up",
            LinkState::NotOperational => "not operational",
            LinkState::Down => "down",
            LinkState::Lost => "lost",
        }
    }
}

/// What a transport tells about its link to one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// The peer node.
    pub node: u32,
    /// Its address.
    pub addr: String,
    /// The link's state.
    pub state: LinkState,
    /// The last heartbeat round trip, in µs.
    pub rtt_us: u64,
    /// Bytes received from the peer.
    pub bytes_in: u64,
    /// Bytes sent to the peer.
    pub bytes_out: u64,
    /// The most bytes of RMA the link ever had in flight at once (0 for a transport that
    /// keeps no RMA window: the `ofi` one keeps it, `ofi/window.rs`).
    pub rma_peak: u64,
}

/// What a transport needs to know of the node it serves.
#[derive(Debug, Clone)]
pub struct Env {
    /// This node's id.
    pub node: u32,
    /// The runtime directory of this host's nodes.
    pub runtime_dir: PathBuf,
    /// The cluster (nodes of other hosts), if any.
    pub cluster: Option<crate::cluster::Cluster>,
    /// This daemon's start (peers tell a restart from a pause by it).
    pub incarnation: u64,
    /// This node's features, a bit set the link handshake carries to every peer as it is
    /// (what each bit means is the node's, not the transport's).
    pub features: u32,
    /// The feature word each peer said in its last handshake (shared with the node).
    pub peer_features: std::sync::Arc<features::PeerFeatures>,
    /// The congestion control of the TCP transport's sockets (`REMORA_TCP_CONGESTION`).
    pub congestion: remora_config::TcpCongestion,
}

/// A way to reach other nodes. See the module doc for the contract.
pub trait Transport: Send + Sync {
    /// The name in the table.
    fn name(&self) -> &'static str;

    /// Whether segments reached through it are mapped directly (shared memory).
    fn shares_memory(&self) -> bool;

    /// Whether it carries traffic from this node to `node`.
    fn reaches(&self, node: u32) -> bool;

    /// Ask `node`, for session `origin` of this node.
    ///
    /// # Errors
    /// The peer's answer when it refused; [`Error::NodeNotResponding`] when the link is down
    /// or lost before the answer.
    fn request(&self, node: u32, origin: u64, req: PeerRequest) -> BoxFuture<'_, Result<Answer, Error>>;

    /// Send `req` to `node` for session `origin` without waiting for its answer: the peer
    /// serves it after every request and post sent to it before, and answers only a
    /// failure. What comes back is a watch ([`Posted`]) that fires when the post failed
    /// there, or when the connection it went on broke before anything confirmed it (a post
    /// may then be lost: the caller treats the watch like a failed request). A new post
    /// `replaces` the caller's previous watch: the new one covers the same connection, and
    /// a failure of the older post is then no longer reported. [`Transport::unwatch`]
    /// drops the last one.
    ///
    /// `Err` gives the request back when the transport cannot post (it shares memory, or
    /// the link is not up): ask with [`Transport::request`] instead.
    fn post(
        &self,
        node: u32,
        origin: u64,
        req: PeerRequest,
        replaces: Option<u64>,
    ) -> Result<Posted, PeerRequest> {
        let _ = (node, origin, replaces);
        Err(req)
    }

    /// Drop the watch `id` of a [`Transport::post`] to `node`.
    fn unwatch(&self, node: u32, id: u64) {
        let _ = (node, id);
    }

    /// Session `origin` of this node ended: every peer it reached releases what it held.
    fn session_end(&self, origin: u64);

    /// The links this transport keeps, for status and statistics.
    fn links(&self) -> Vec<LinkInfo>;

    /// The state of the link to `node`, where this transport keeps one (a cheaper look
    /// than [`Transport::links`], for the paths that check before every request).
    fn link_state(&self, node: u32) -> Option<LinkState> {
        self.links().into_iter().find(|l| l.node == node).map(|l| l.state)
    }

    /// Deliver `event` to session `origin` of `node` (a session that reached this node
    /// through this transport). Transports whose peers hold their own sessions here (the
    /// peer daemon reads events on its proxy socket) have nothing to do.
    fn send_event(&self, node: u32, origin: u64, event: Event) {
        let _ = (node, origin, event);
    }

    /// Write `len` bytes of `src` at `src_off` into connection `conn` of `node` at `offset`
    /// (blocking: for the DMA engine's threads).
    ///
    /// # Errors
    /// [`unsupported`] for transports that share memory; [`Error::NodeNotResponding`] when
    /// the transfer failed.
    fn write_range(
        &self,
        node: u32,
        conn: u64,
        offset: u64,
        src: &Arc<Mapping>,
        src_off: usize,
        len: usize,
    ) -> Result<(), Error> {
        let _ = (node, conn, offset, src, src_off, len);
        Err(unsupported(self.name(), "streaming writes"))
    }

    /// Read `len` bytes of connection `conn` of `node` at `offset` into `dest` at
    /// `dest_off` (blocking).
    ///
    /// # Errors
    /// As [`Transport::write_range`].
    fn read_range(
        &self,
        node: u32,
        conn: u64,
        offset: u64,
        dest: &Arc<Mapping>,
        dest_off: usize,
        len: usize,
    ) -> Result<(), Error> {
        let _ = (node, conn, offset, dest, dest_off, len);
        Err(unsupported(self.name(), "streaming reads"))
    }

    /// Start writing (`write`) `len` bytes of `mem` at `mem_off` into connection `conn` of
    /// `node` at `offset`, or reading them from it into `mem`, and return what waits for
    /// the end: the caller may start the next transfer first (the DMA engine keeps the
    /// link busy that way). `mem` must not be touched until the wait returns. Transports
    /// without a pipeline do the transfer here (the default).
    ///
    /// # Errors
    /// As [`Transport::write_range`], here or from the wait.
    #[allow(clippy::too_many_arguments)]
    fn start_range(
        &self,
        node: u32,
        conn: u64,
        offset: u64,
        mem: &Arc<Mapping>,
        mem_off: usize,
        len: usize,
        write: bool,
    ) -> Result<Pending, Error> {
        match write {
            true => self.write_range(node, conn, offset, mem, mem_off, len)?,
            false => self.read_range(node, conn, offset, mem, mem_off, len)?,
        }
        Ok(Box::new(|| Ok(())))
    }

    /// A pager flow to `node`, bound to `target` there, for a process of this node.
    ///
    /// # Errors
    /// [`unsupported`] for transports that share memory; the dial's failure otherwise.
    fn pager_flow(&self, node: u32, target: RangeRef) -> BoxFuture<'_, Result<OwnedFd, Error>> {
        let _ = (node, target);
        Box::pin(async move { Err(unsupported(self.name(), "pager flows")) })
    }

    /// A pager flow to `node` that reaches every one of `targets` there (their handles all
    /// different), served in order; with `watch` `(handle, offset)`, the home wakes futex
    /// waiters of that word after each store that covers it
    /// ([`remora_proto::link::LinkMsg::PagerBindMany`]).
    ///
    /// # Errors
    /// [`unsupported`] for transports that share memory; the dial's failure otherwise.
    fn pager_flows(
        &self,
        node: u32,
        targets: Vec<RangeRef>,
        watch: Option<(u64, u64)>,
    ) -> BoxFuture<'_, Result<OwnedFd, Error>> {
        let _ = (node, targets, watch);
        Box::pin(async move { Err(unsupported(self.name(), "pager flows")) })
    }

    /// A direct flow to `node` for a process of this node: a TCP stream of its own, dialed
    /// and authenticated as a pager flow is, that `node` hands to whoever waits there for
    /// `key` with the one-time `token` ([`Inbound::direct_flow`]). It returns once the peer
    /// said it handed the stream over.
    ///
    /// # Errors
    /// [`unsupported`] for transports that share memory or dial no flows; the dial's or
    /// the hand-over's failure otherwise (the caller falls back to its relay).
    fn direct_flow(&self, node: u32, key: u64, token: u64) -> BoxFuture<'_, Result<OwnedFd, Error>> {
        let _ = (node, key, token);
        Box::pin(async move { Err(unsupported(self.name(), "direct flows")) })
    }
}

/// Gives a direct flow that arrived to whoever waited for it ([`Inbound::direct_flow`]).
pub type HandOver = Box<dyn FnOnce(OwnedFd) + Send>;

/// What the node does for its transports: serve what peers send.
pub trait Inbound: Send + Sync {
    /// Serve a request of `from`'s session `origin`.
    fn request(
        &self,
        from: u32,
        origin: u64,
        req: PeerRequest,
    ) -> BoxFuture<'static, Result<PeerReply, Error>>;

    /// Serve request `id` of `from`'s session `origin`: [`Inbound::request`] (the default),
    /// for a handler that keeps the id to act on a later [`Inbound::gave_up`].
    fn request_numbered(
        &self,
        from: u32,
        origin: u64,
        id: u64,
        req: PeerRequest,
    ) -> BoxFuture<'static, Result<PeerReply, Error>> {
        let _ = id;
        self.request(from, origin, req)
    }

    /// `from` gave its request `id` up (it never takes the answer): refuse it if it is
    /// still being served, release what it made if it was served. Nothing by default.
    fn gave_up(&self, from: u32, id: u64) {
        let _ = (from, id);
    }

    /// `from`'s session `origin` ended: release what was held for it.
    fn session_end(&self, from: u32, origin: u64);

    /// An event from `from` for this node's session `origin` (handles are `from`'s).
    fn event(&self, from: u32, origin: u64, event: Event);

    /// The link to `peer` changed state.
    fn link_changed(&self, peer: u32, state: LinkState);

    /// The route of session `origin` to `node` broke (a shared-memory transport's per
    /// session link closed): its connections there are lost.
    fn route_lost(&self, node: u32, origin: u64);

    /// The memory `target` of this node, as `from` may reach it (`None`: it may not).
    fn memory(&self, from: u32, target: RangeRef) -> Option<Arc<dyn PeerMemory>>;

    /// A direct flow from `from` bound to `key` with `token` arrived: the hand-over to
    /// whoever waits for exactly that (taken: a token serves once), or `None` (the
    /// transport closes the flow). Dropping the hand-over unused tells the waiter the flow
    /// failed.
    fn direct_flow(&self, from: u32, key: u64, token: u64) -> Option<HandOver> {
        let _ = (from, key, token);
        None
    }
}

/// Memory of this node that a peer reaches; every access is checked when it is made.
pub trait PeerMemory: Send + Sync {
    /// The mappings that hold `len` bytes at `offset`, in order, as (mapping, offset in it,
    /// bytes); `None` when the range may not be reached (gone, outside, no such access).
    fn resolve(&self, offset: u64, len: u64, write: bool) -> Option<Vec<(Arc<Mapping>, usize, usize)>>;

    /// A pager flow bound to this memory did `what` (bulk frames do not say): for the
    /// node's counters. Ignored unless the memory counts.
    fn flow_used(&self, what: FlowUse) {
        let _ = what;
    }

    /// Trigger what the flow is bound to (a `BulkOp::Trigger` frame), with the frame's
    /// payload. Only a target that is an interrupt connection does.
    ///
    /// # Errors
    /// The node's reason (the interrupt is gone, its queue is full, ...); "unsupported"
    /// for memory.
    fn trigger(&self, data: &[u8]) -> Result<(), Error> {
        let _ = data;
        Err(unsupported("pager", "triggers into memory"))
    }

    /// Offer the flow `flow` bound to this target to the process that owns the target, to
    /// read its frames itself (a plain interrupt's owner, while it waits): `Some` when it
    /// took a duplicate. The transport then reads the flow only while [`SharedFlow`] lets
    /// it, whole frames of [`remora_proto::link::BULK_FRAME`] bytes only. `None` (the
    /// default): the transport alone reads it.
    fn share_flow(&self, flow: std::os::fd::BorrowedFd<'_>) -> Option<Box<dyn SharedFlow>> {
        let _ = flow;
        None
    }
}

/// A flow that the owner of its target reads too ([`PeerMemory::share_flow`]): the
/// transport's thread keeps away from it while the owner reads, and reads only under the
/// lock. Dropping it takes the flow back from the owner.
pub trait SharedFlow: Send {
    /// Whether the owner reads the flow now, or did lately: leave it alone.
    fn owner_reads(&mut self) -> bool;
    /// Sleep until the owner may have stopped, or a flow's end was told, at most `max`.
    fn park(&self, max: std::time::Duration);
    /// Take the right to read the flow; `false` while the owner holds it.
    fn try_lock(&self) -> bool;
    /// Give that right back.
    fn unlock(&self);
    /// Whether the owner reads no more (its target is gone; it may have died holding the
    /// right): the transport then reads without it once it waited a little.
    fn abandoned(&self) -> bool;
    /// Take the flow from the owner for good (called with the right held): the owner
    /// reads it no more from the moment the right is given back, and the transport reads
    /// it alone, split frames included.
    fn leave(&mut self);
}

/// What a pager flow did with the memory it is bound to ([`PeerMemory::flow_used`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowUse {
    /// The flow was bound to the memory.
    Bound,
    /// `bytes` were read from it and sent.
    Read(u64),
    /// `bytes` were stored into it; `acked`: the sender waits for the answer.
    Stored {
        /// How many.
        bytes: u64,
        /// The frame asked for an acknowledgement.
        acked: bool,
    },
}

/// A constructor in the registration table.
pub type Open = fn(&Env, Arc<dyn Inbound>) -> std::io::Result<Arc<dyn Transport>>;

/// The registration table: one line per transport, in order of preference.
pub static TRANSPORTS: &[(&str, Open)] = &[("local", local::open), ("ofi", ofi::open), ("tcp", tcp::open)];

/// The transports of a running node, opened from [`TRANSPORTS`].
pub struct Transports {
    open: Vec<Arc<dyn Transport>>,
}

impl Transports {
    /// Open every registered transport (tcp binds its listener: call inside the runtime).
    ///
    /// # Errors
    /// The first transport that cannot start.
    pub fn open(env: &Env, inbound: Arc<dyn Inbound>) -> std::io::Result<Transports> {
        let mut open = Vec::new();
        for (name, f) in TRANSPORTS {
            let t =
                f(env, inbound.clone()).map_err(|e| std::io::Error::new(e.kind(), format!("{name}: {e}")))?;
            open.push(t);
        }
        Ok(Transports { open })
    }

    /// No transport (a node being built, or tests of the books).
    pub fn none() -> Transports {
        Transports { open: Vec::new() }
    }

    /// The transport that reaches `node`: the first in table order.
    pub fn to(&self, node: u32) -> Option<&Arc<dyn Transport>> {
        self.open.iter().find(|t| t.reaches(node))
    }

    /// Every open transport.
    pub fn all(&self) -> &[Arc<dyn Transport>] {
        &self.open
    }

    /// Tell every transport that session `origin` ended.
    pub fn session_end(&self, origin: u64) {
        for t in &self.open {
            t.session_end(origin);
        }
    }

    /// Every link of every transport, by node.
    pub fn links(&self) -> Vec<LinkInfo> {
        let mut v: Vec<LinkInfo> = self.open.iter().flat_map(|t| t.links()).collect();
        v.sort_by_key(|l| l.node);
        v
    }

    /// The state of the link to `node`, where a transport keeps one.
    pub fn link_state(&self, node: u32) -> Option<LinkState> {
        self.links().into_iter().find(|l| l.node == node).map(|l| l.state)
    }
}
