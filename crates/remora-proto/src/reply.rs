//! What a node daemon answers, and the events it sends.

use crate::{NodeStatus, ScifWindow};
use serde::{Deserialize, Serialize};

/// The errors a daemon reports. Each personality maps them to its vendor codes in one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Error {
    /// No segment with that id (or not available yet when the wait ran out of time).
    #[error("no such segment")]
    NoSuchSegment,
    /// The segment id is already used on this node.
    #[error("segment id in use")]
    SegmentIdUsed,
    /// Dependent resources exist.
    #[error("resource busy")]
    Busy,
    /// The call is illegal in the resource's current state.
    #[error("illegal operation in this state")]
    IllegalOperation,
    /// The segment must be prepared first.
    #[error("segment not prepared")]
    NotPrepared,
    /// No node with that id is known.
    #[error("no such node")]
    NoSuchNode,
    /// No adapter with that number.
    #[error("no such adapter")]
    NoSuchAdapter,
    /// The time ran out.
    #[error("timeout")]
    Timeout,
    /// An offset or size outside the resource.
    #[error("out of range")]
    OutOfRange,
    /// The connection no longer exists.
    #[error("not connected")]
    NotConnected,
    /// The handle is unknown (stale or never valid).
    #[error("unknown handle")]
    UnknownHandle,
    /// A parameter is invalid.
    #[error("illegal parameter: {0}")]
    IllegalParameter(String),
    /// Out of memory or ids.
    #[error("no space")]
    NoSpace,
    /// The node does not answer.
    #[error("node not responding")]
    NodeNotResponding,
    /// Not allowed for this caller.
    #[error("access denied")]
    Access,
    /// A system call failed.
    #[error("system error: {0}")]
    System(String),
    /// The peer broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The interrupt number is taken.
    #[error("interrupt number in use")]
    IntnoUsed,
    /// No interrupt with that number (or not yet, when the wait ran out of time).
    #[error("no such interrupt")]
    NoSuchIntno,
    /// Nobody listens there, or the listener's queue is full.
    #[error("connection refused")]
    ConnRefused,
    /// The port or the registered range is taken.
    #[error("address in use")]
    AddrInUse,
    /// Nothing to take now; try again.
    #[error("try again")]
    Again,
    /// The peer closed the connection.
    #[error("connection reset")]
    ConnReset,
    /// The endpoint is already connected (or listening).
    #[error("already connected")]
    IsConnected,
    /// The segment's access list does not name the importer's node (RSM).
    #[error("segment not published to this node")]
    NotPublishedToNode,
    /// The importer's user, group or node lacks the access asked for (RSM).
    #[error("permission denied")]
    PermissionDenied,
    /// The segment id lies in a range reserved for the system (RSM).
    #[error("reserved segment id")]
    ReservedId,
    /// No one waits on that discriminator (VIPL `VIP_NO_MATCH`).
    #[error("no matching connection waiter")]
    NoMatch,
    /// The server rejected the connection request (VIPL `VIP_REJECT`).
    #[error("connection rejected")]
    Rejected,
}

/// Why an importer lost its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LostReason {
    /// The owner made the segment unavailable with force-disconnect.
    ForcedDisconnect,
    /// The owning process went away.
    OwnerGone,
    /// The owning node (daemon) went away.
    NodeGone,
}

/// Something that happened without a request: sent by a daemon to the session concerned.
///
/// The events of a local segment (`SegmentConnected`, `SegmentDisconnected`,
/// `SegmentLink`, `SegmentLost`) are kept by the daemon, in order, until the segment's
/// owner asks for them with [`Request::SegmentEvents`](crate::Request::SegmentEvents) (a
/// callback, or a first wait): the daemon then sends those it kept, then
/// [`Event::SegmentEventsOn`], then each one as it happens. A segment whose owner never asks
/// has at most [`KEPT_SEGMENT_EVENTS`](crate::KEPT_SEGMENT_EVENTS) of them kept: the one
/// that fills the store sends them all, in order, and the daemon keeps the next ones again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// Someone connected to one of the session's segments.
    SegmentConnected {
        /// The segment handle.
        seg: u64,
        /// The importing node.
        node: u32,
    },
    /// Someone disconnected from one of the session's segments.
    SegmentDisconnected {
        /// The segment handle.
        seg: u64,
        /// The importing node.
        node: u32,
    },
    /// The owner set the segment unavailable with notify.
    SegmentUnavailable {
        /// The connection handle.
        conn: u64,
    },
    /// The route between this node and `node` changed, as seen by one of the session's
    /// segments that `node` imports (raised by the network transports).
    SegmentLink {
        /// The segment handle.
        seg: u64,
        /// The importing node.
        node: u32,
        /// The route works (`true`) or is down for now (`false`).
        operational: bool,
    },
    /// The route to the node that owns a connection's segment changed.
    ConnectionLink {
        /// The connection handle.
        conn: u64,
        /// The route works (`true`) or is down for now (`false`).
        operational: bool,
    },
    /// A node that imported one of the session's segments is gone for good.
    SegmentLost {
        /// The segment handle.
        seg: u64,
        /// The importing node.
        node: u32,
    },
    /// The connection is gone.
    ConnectionLost {
        /// The connection handle.
        conn: u64,
        /// Why.
        reason: LostReason,
    },
    /// The answer to [`Request::SegmentEvents`](crate::Request::SegmentEvents): the events of
    /// local segment `seg` the daemon kept were sent before this one, and the next ones are
    /// sent as they happen. Also the answer for a segment the session does not own (an
    /// attached one: its events go to its owner), which has nothing kept.
    SegmentEventsOn {
        /// The segment handle.
        seg: u64,
    },
    /// A multicast connection of the session reaches a member host that joined the group
    /// after it was made (`joined`), or no longer reaches one whose member was removed: its
    /// leg `leg` (a connection to that host's member) is to be added to, or dropped from,
    /// its maps. The process answers with
    /// [`Request::GroupLegReady`](crate::Request::GroupLegReady) once its pager did.
    GroupLeg {
        /// The multicast connection.
        conn: u64,
        /// The leg.
        leg: u64,
        /// Added (`true`) or dropped.
        joined: bool,
    },
}

/// A daemon's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Nothing more to say.
    Ok,
    /// Answer to [`Request::Hello`](crate::Request::Hello).
    Hello {
        /// The daemon's node id.
        node: u32,
    },
    /// A local segment (create or attach); the memfd rides along unless it is empty.
    Segment {
        /// The daemon's handle.
        seg: u64,
        /// The id (`None` for private segments).
        id: Option<u32>,
        /// Size in bytes.
        size: u64,
        /// Prepared on adapter 0.
        prepared: bool,
        /// Available to importers.
        available: bool,
    },
    /// A connection; the memfd rides along.
    Connected {
        /// The daemon's handle.
        conn: u64,
        /// Size of the segment.
        size: u64,
    },
    /// Answer to [`Request::ConnectGroup`](crate::Request::ConnectGroup) for a group with
    /// members on other hosts: the multicast connection `conn` (with the group's memfd on
    /// this host when this host has a member), and one connection of this node per other
    /// host that holds a member (`legs`, in the order asked), each to one member segment
    /// of that host, which the caller's DSM pager sends its stores to. Disconnecting
    /// `conn` releases the legs.
    GroupConnected {
        /// The daemon's handle of the multicast connection.
        conn: u64,
        /// The group's size as every member host has it (the smallest).
        size: u64,
        /// This node's handles of the connections to one member of each other host.
        legs: Vec<u64>,
    },
    /// Answer to [`Request::Probe`](crate::Request::Probe).
    Probe {
        /// The node answers.
        reachable: bool,
    },
    /// Answer to [`Request::Status`](crate::Request::Status).
    Status(Box<NodeStatus>),
    /// An interrupt (created or connected); page memfd and eventfd ride along.
    Interrupt {
        /// The daemon's handle.
        intr: u64,
        /// Its number.
        intno: u32,
    },
    /// Bytes read from a segment.
    Data(#[serde(with = "serde_bytes")] Vec<u8>),
    /// A DMA queue; page memfd and eventfd ride along.
    DmaQueue {
        /// The daemon's handle.
        queue: u64,
    },

    /// A bound SCIF port.
    ScifPort {
        /// The port.
        port: u16,
    },
    /// A SCIF listener.
    ScifListening {
        /// Proves to [`ScifRequest::Accept`](crate::ScifRequest::Accept) on another session that the caller listens.
        token: u64,
    },
    /// One side of a SCIF connection: the region memfd and the peer's ringer ride along.
    ScifConnected {
        /// Which side this is (0 connector, 1 acceptor).
        side: u8,
        /// The peer is on another host: messages go through the daemons, RMA through
        /// [`ScifRequest::RemoteWrite`](crate::ScifRequest::RemoteWrite) / [`ScifRequest::RemoteRead`](crate::ScifRequest::RemoteRead), maps are refused.
        remote: bool,
        /// The peer's node.
        peer_node: u32,
        /// The peer's port.
        peer_port: u16,
    },
    /// The node asked for in [`ScifRequest::Connect`](crate::ScifRequest::Connect) is on this host: connect through its
    /// own daemon.
    ScifDialDirect,
    /// A registered window's offset.
    ScifOffset {
        /// The offset.
        offset: u64,
    },
    /// Registered windows, in order of offset; the memfds their pieces name ride along,
    /// each once.
    ScifWindows {
        /// The windows.
        windows: Vec<ScifWindow>,
        /// More windows follow the last one (ask again from after it).
        more: bool,
    },
    /// Node ids.
    ScifNodes(Vec<u32>),
    /// An RSM export got its id (`rsm_memseg_export_publish`).
    RsmPublished {
        /// The id.
        id: u32,
    },
    /// An RSM import; the memfd rides along when the segment is on this host.
    RsmConnected {
        /// The connection handle (a core connection: maps, DMA and the DSM use it).
        conn: u64,
        /// The segment's size.
        size: u64,
        /// The exporter's signal interrupt (on the exporting node).
        signal: u32,
        /// Puts and writable maps are allowed.
        writable: bool,
    },
    /// The signal interrupts of an export's importers: (node, interrupt number).
    RsmSignals(Vec<(u32, u32)>),
    /// A VIPL connection request reached a waiter (`VipConnectWait`).
    ViplIncoming {
        /// The pending request, for accept or reject.
        conn: u64,
        /// The requester's node.
        node: u32,
        /// The requester's discriminator.
        #[serde(with = "serde_bytes")]
        disc: Vec<u8>,
        /// The requesting VI's description.
        #[serde(with = "serde_bytes")]
        info: Vec<u8>,
    },
    /// A VIPL connection request was accepted: the accepting VI's description.
    ViplAccepted(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Answer to [`Request::DsmFlow`](crate::Request::DsmFlow); the connected socket rides along.
    DsmFlow {
        /// The home node's handle of the connection (the `conn` of the bulk frames).
        remote: u64,
        /// The segment's size.
        size: u64,
    },
    /// Answer to [`Request::DsmFlows`](crate::Request::DsmFlows); the connected socket rides
    /// along.
    DsmFlows {
        /// The home node's handle of each connection, in the order asked (the `conn` of the
        /// bulk frames).
        remotes: Vec<u64>,
    },
    /// Answer to [`Request::InterruptFlows`](crate::Request::InterruptFlows); the flows'
    /// sockets ride along, one per entry of `conns`, in order.
    InterruptFlows {
        /// The generation of the set (the page's, when the set was taken).
        gen: u32,
        /// This node's handle of the connection each flow triggers through (the `conn` of
        /// its frames).
        conns: Vec<u64>,
        /// The node each flow was dialed from, in the same order: a flow from a lower node
        /// than the owner's may carry the owner's own plain triggers back to that node. A
        /// flow is named as from the owner's own node (it carries nothing back) when either
        /// node's cluster file says `intr_pair = false`.
        nodes: Vec<u32>,
    },
    /// Answer to [`Request::TakeSegmentEvents`](crate::Request::TakeSegmentEvents): the
    /// events the daemon kept for the segment, oldest first (none for a segment the
    /// session does not own).
    SegmentEvents(Vec<Event>),
}

/// A daemon's message to a process: a reply or an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerMsg {
    /// The answer to request `id`.
    Reply {
        /// The request id.
        id: u64,
        /// Success or the reason for failure.
        result: Result<Reply, Error>,
    },
    /// An unsolicited event.
    Event(Event),
    /// Events queued together (by one operation of the daemon, e.g. every connection to an
    /// export lost at its unpublish), in order: a process applies them as one, so that no
    /// thread sees one of them without the others.
    Events(Vec<Event>),
}
