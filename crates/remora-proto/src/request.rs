//! What a process (or a peer daemon of this host, or the CLI) asks its node daemon.

use crate::{RsmRequest, ScifRequest, ViplRequest};
use serde::{Deserialize, Serialize};

/// Who opened a connection to a daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// An application process of this node.
    Client,
    /// The daemon of another node of this host, acting for one of its sessions.
    Peer {
        /// The node the peer daemon plays.
        node: u32,
    },
    /// The `remora` command line (status, shutdown): holds no resources.
    Control,
    /// One SCIF endpoint of an application process: the session holds at most one bound
    /// port, one listener and one side of one connection, and its end closes them.
    Scif,
}

/// Where a map points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MapTarget {
    /// A local segment, by daemon handle.
    Local {
        /// The segment handle.
        seg: u64,
    },
    /// A remote segment connection, by daemon handle.
    Remote {
        /// The connection handle.
        conn: u64,
    },
}

/// A request to a daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The first message on every connection.
    Hello {
        /// The sender's protocol version (also in every header; repeated for the log).
        version: u16,
        /// The sender's role.
        role: Role,
    },
    /// Create a local segment (`SCICreateSegment`). The reply carries the memfd unless
    /// `empty`.
    CreateSegment {
        /// The id, or `None` to let the node choose one (`SCI_FLAG_AUTO_ID`).
        id: Option<u32>,
        /// Size in bytes.
        size: u64,
        /// Never connectable (`SCI_FLAG_PRIVATE`).
        private: bool,
        /// No memory yet (`SCI_FLAG_EMPTY`); memory comes with [`Request::AttachMemory`].
        empty: bool,
    },
    /// Give an empty segment its memory: the request carries a memfd
    /// (`SCIRegisterSegmentMemory`).
    AttachMemory {
        /// The segment handle.
        seg: u64,
    },
    /// `SCIPrepareSegment`.
    Prepare {
        /// The segment handle.
        seg: u64,
        /// The local adapter number.
        adapter: u32,
    },
    /// `SCISetSegmentAvailable`.
    SetAvailable {
        /// The segment handle.
        seg: u64,
        /// The local adapter number.
        adapter: u32,
    },
    /// `SCISetSegmentUnavailable`.
    SetUnavailable {
        /// The segment handle.
        seg: u64,
        /// The local adapter number.
        adapter: u32,
        /// Disconnect everyone connected (`SCI_FLAG_FORCE_DISCONNECT`).
        force_disconnect: bool,
        /// Tell everyone connected (`SCI_FLAG_NOTIFY`).
        notify: bool,
    },
    /// `SCIRemoveSegment` (or, from a process that attached a shared segment, detach).
    RemoveSegment {
        /// The segment handle.
        seg: u64,
        /// `SCI_FLAG_FORCE_REMOVE`: also when other processes of this node attached it
        /// (their maps keep the memory; their handles no longer name a segment).
        force: bool,
    },
    /// `SCIShareSegment`: let other processes of this node attach the segment.
    ShareSegment {
        /// The segment handle.
        seg: u64,
    },
    /// `SCIAttachLocalSegment`. The reply carries the memfd.
    AttachShared {
        /// The segment id.
        id: u32,
    },
    /// `SCIConnectSegment`. The reply carries the memfd.
    Connect {
        /// The node that owns the segment.
        node: u32,
        /// The segment id.
        id: u32,
        /// How long to wait for the segment to become available; `None` waits forever.
        timeout_ms: Option<u32>,
    },
    /// `SCIDisconnectSegment`.
    Disconnect {
        /// The connection handle.
        conn: u64,
    },
    /// Bookkeeping: the process mapped a segment (sent with [`NO_REPLY`](crate::NO_REPLY)).
    MapNote {
        /// The process's own map number.
        map: u64,
        /// What is mapped.
        target: MapTarget,
        /// First byte.
        offset: u64,
        /// Length.
        size: u64,
        /// Read-only map.
        readonly: bool,
    },
    /// Bookkeeping: the process unmapped (sent with [`NO_REPLY`](crate::NO_REPLY)).
    UnmapNote {
        /// The process's own map number.
        map: u64,
    },
    /// `SCIProbeNode`.
    Probe {
        /// The node to probe.
        node: u32,
    },
    /// `SCICreateInterrupt` / `SCICreateDataInterrupt`. The reply carries the interrupt
    /// page (memfd) and its eventfd.
    CreateInterrupt {
        /// The number wanted (`SCI_FLAG_FIXED_INTNO`), or `None` to let the node choose.
        intno: Option<u32>,
        /// A data interrupt (its own number space).
        data: bool,
        /// `SCI_FLAG_SHARED_INT` (plain interrupts): several processes may create the same
        /// number, and every trigger reaches all of them.
        shared: bool,
    },
    /// `SCIRemoveInterrupt` / `SCIRemoveDataInterrupt`.
    RemoveInterrupt {
        /// The interrupt handle.
        intr: u64,
    },
    /// `SCIConnectInterrupt` / `SCIConnectDataInterrupt`. The reply carries the page and
    /// the eventfd, so triggers go straight to the waiter.
    ConnectInterrupt {
        /// The node that owns the interrupt.
        node: u32,
        /// Its number.
        intno: u32,
        /// A data interrupt.
        data: bool,
        /// How long to wait for it to exist; `None` waits forever.
        timeout_ms: Option<u32>,
    },
    /// `SCIDisconnectInterrupt` / `SCIDisconnectDataInterrupt`.
    DisconnectInterrupt {
        /// The connection handle.
        intr: u64,
    },
    /// `SCICreateDMAQueue`. The reply carries the queue page (memfd) and its eventfd; the
    /// node's DMA engine serves the queue from then on.
    CreateDmaQueue {
        /// Descriptors the queue holds.
        max_entries: u32,
    },
    /// `SCIRemoveDMAQueue`.
    RemoveDmaQueue {
        /// The queue handle.
        queue: u64,
    },
    /// What `remora status` shows.
    Status,
    /// Stop the daemon (`remora shutdown`).
    Shutdown,
    /// Read `len` bytes (at most [`MAX_DATA_IO`](crate::MAX_DATA_IO)) of a connection's segment (the DSM pager
    /// fetching a page of another host's segment).
    SegRead {
        /// The connection handle.
        conn: u64,
        /// Offset in the segment.
        offset: u64,
        /// Bytes.
        len: u32,
    },
    /// Store runs of bytes (at most [`MAX_DATA_IO`](crate::MAX_DATA_IO) in all) into a connection's segment
    /// (the DSM pager sending a page's changes home).
    SegWrite {
        /// The connection handle.
        conn: u64,
        /// (offset in the segment, bytes) runs.
        #[serde(with = "crate::runs")]
        runs: Vec<(u64, Vec<u8>)>,
    },
    /// Trigger an interrupt of another host through the daemons (an interrupt of this
    /// host is triggered directly through its page).
    TriggerInterrupt {
        /// The interrupt-connection handle.
        intr: u64,
        /// The payload of a data interrupt.
        #[serde(with = "serde_bytes")]
        data: Option<Vec<u8>>,
    },

    /// A SCIF endpoint's request (sessions of role [`Role::Scif`] only).
    Scif(ScifRequest),

    /// A request of the RSM personality.
    Rsm(RsmRequest),

    /// A request of the VIPL personality.
    Vipl(ViplRequest),

    /// Open a DSM pager's own connection to the node that holds connection `conn`'s
    /// segment (another host): the daemon dials that node's [`link::Flow::Pager`](crate::link::Flow::Pager), proves
    /// who it is, and hands the socket over. Answer: [`Reply::DsmFlow`](crate::Reply::DsmFlow) with the socket.
    /// When `conn` is a connection to an interrupt of another host, the flow is bound to
    /// that connection there (`link::Space::Interrupt`) and carries its triggers.
    DsmFlow {
        /// The connection handle.
        conn: u64,
    },

    /// `SCICreateSegment` with `SCI_FLAG_BROADCAST`: this node's member segment of
    /// reflective-memory group `group` (its segment id is the group). Every member of the
    /// group on this host is backed by one memfd, so a store through the group's multicast
    /// map lands in all of them. The reply is [`Reply::Segment`](crate::Reply::Segment)
    /// with that memfd.
    CreateGroupSegment {
        /// The group (0..[`MULTICAST_GROUPS`](crate::MULTICAST_GROUPS)).
        group: u32,
        /// Size in bytes.
        size: u64,
        /// Unicast connects to it are allowed too (`SCI_FLAG_ALLOW_UNICAST`).
        unicast: bool,
    },

    /// `SCIConnectSegment` to `DIS_BROADCAST_NODEID_GROUP_ALL` with `SCI_FLAG_BROADCAST`:
    /// the multicast connection of group `group`. The reply is
    /// [`Reply::Connected`](crate::Reply::Connected) with the group's memfd on this host
    /// when every member is on this host, else
    /// [`Reply::GroupConnected`](crate::Reply::GroupConnected).
    ConnectGroup {
        /// The group.
        group: u32,
        /// How long to wait for a member to exist; `None` waits forever.
        timeout_ms: Option<u32>,
    },

    /// From a peer daemon of this host: the memory of this node's member segment of group
    /// `group`. The reply is [`Reply::Connected`](crate::Reply::Connected) (handle 0, no
    /// connection is recorded) with the memfd, or `NoSuchSegment`.
    GroupMemory {
        /// The group.
        group: u32,
    },

    /// The pager of the process now sends the stores of multicast connection `conn` down
    /// its leg `leg` ([`Event::GroupLeg`](crate::Event::GroupLeg) with `joined`), or no
    /// longer does (without). The reply is [`Reply::Ok`](crate::Reply::Ok).
    GroupLegReady {
        /// The multicast connection.
        conn: u64,
        /// The leg.
        leg: u64,
    },

    /// Open a pager flow of this process's own to the node that holds the segments of
    /// connections `conns` (all on one node of another host), reaching all of them, in
    /// order ([`link::LinkMsg::PagerBindMany`](crate::link::LinkMsg::PagerBindMany)): stores into
    /// several segments sent over it land in the order sent. With `watch`
    /// `(index into conns, offset)`, the home wakes futex waiters of that word after each
    /// store touching it, and those of that segment's first word after each store touching
    /// that. Answer: [`Reply::DsmFlows`](crate::Reply::DsmFlows) with the socket.
    DsmFlows {
        /// The connection handles.
        conns: Vec<u64>,
        /// The word the home wakes after each store touching it.
        watch: Option<(u32, u64)>,
    },

    /// The owner of local segment `seg` wants its events (a callback, or a thread waiting
    /// for them): the daemon sends the events it kept for the segment, then
    /// [`Event::SegmentEventsOn`](crate::Event::SegmentEventsOn), then each event as it
    /// happens (see [`Event`](crate::Event)). Sent with [`NO_REPLY`](crate::NO_REPLY) on the
    /// session's event socket, which no long request of the session holds up; on the
    /// session's own socket it is answered [`Reply::Ok`](crate::Reply::Ok), the events
    /// following on the event socket.
    SegmentEvents {
        /// The segment handle.
        seg: u64,
    },

    /// The owner of plain interrupt `intr` asks for the flows of other hosts' processes
    /// that trigger it, to read them itself while it waits (`remora_sys::intr`, the flows
    /// the owner reads). Answer: [`Reply::InterruptFlows`](crate::Reply::InterruptFlows)
    /// with a duplicate of each socket.
    InterruptFlows {
        /// The interrupt handle.
        intr: u64,
    },

    /// As [`Request::SegmentEvents`], asked by the process's event thread (a first wait for
    /// a local segment's events made inside another resource's callback, which cannot read
    /// the event socket's answer until it returns): the events the daemon kept for `seg` come
    /// in the answer, [`Reply::SegmentEvents`](crate::Reply::SegmentEvents), and the next
    /// ones go down the event socket as they happen (behind the answer: the event thread is
    /// the one waiting for it). Events a full store sent earlier are still on the event
    /// socket then, older than those of the answer: the library does not use this any more
    /// (a wait inside a callback reads the event socket itself and asks with
    /// [`Request::SegmentEvents`]); served for libraries of this protocol version.
    TakeSegmentEvents {
        /// The segment handle.
        seg: u64,
    },
}

/// A request with its id; replies carry the same id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFrame {
    /// Chosen by the sender; [`NO_REPLY`](crate::NO_REPLY) for one-way notes.
    pub id: u64,
    /// The request.
    pub req: Request,
}
