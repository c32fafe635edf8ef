//! Remora's wire types: the messages a process exchanges with its node daemon, and that
//! daemons of one host exchange with each other, over Unix `SOCK_SEQPACKET` sockets.
//!
//! Every message is one datagram: a 4-byte header (the magic `RM` and a little-endian
//! protocol version) followed by a postcard-encoded body. Descriptors (memfds) travel beside
//! the bytes as SCM_RIGHTS. A frame with the wrong magic or version, or a body that does not
//! decode, is a [`DecodeError`]; the receiver drops the connection and logs why.
//!
//! ```
//! use remora_proto::{decode, encode, Request, RequestFrame};
//! let frame = RequestFrame { id: 7, req: Request::Probe { node: 8 } };
//! let bytes = encode(&frame).unwrap();
//! let back: RequestFrame = decode(&bytes).unwrap();
//! assert_eq!(back, frame);
//! ```

pub mod link;
pub mod paths;
mod runs;

use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// The first two bytes of every frame.
pub const MAGIC: [u8; 2] = *b"RM";
/// The protocol version this build speaks. Bump on any incompatible change (2: SCIF; 3: peer
/// requests grouped by personality, pager flows bound to a [`link::RangeRef`]).
pub const VERSION: u16 = 3;
/// The largest frame either side sends or accepts.
pub const MAX_FRAME: usize = 64 * 1024;
/// The most bytes one [`Request::SegRead`] or [`Request::SegWrite`] carries.
pub const MAX_DATA_IO: usize = 48 * 1024;
/// The request id that asks for no reply (one-way notes such as map bookkeeping).
pub const NO_REPLY: u64 = 0;

/// Why a frame could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than a header.
    #[error("frame of {0} bytes is shorter than its header")]
    Short(usize),
    /// Not a Remora frame.
    #[error("bad magic {0:02x?}")]
    Magic([u8; 2]),
    /// Another protocol version.
    #[error("protocol version {theirs}, this side speaks {ours}")]
    Version {
        /// The version in the frame.
        theirs: u16,
        /// Ours.
        ours: u16,
    },
    /// The body does not decode as the expected message.
    #[error("malformed body: {0}")]
    Body(String),
    /// Longer than [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the limit")]
    TooLong(usize),
}

/// Encode a message into one frame.
///
/// # Errors
/// [`DecodeError::TooLong`] when the frame would exceed [`MAX_FRAME`], or
/// [`DecodeError::Body`] when serialisation fails.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let out = postcard::to_extend(msg, out).map_err(|e| DecodeError::Body(e.to_string()))?;
    if out.len() > MAX_FRAME {
        return Err(DecodeError::TooLong(out.len()));
    }
    Ok(out)
}

/// Decode one frame.
///
/// # Errors
/// A [`DecodeError`] naming what is wrong with the frame.
pub fn decode<T: DeserializeOwned>(buf: &[u8]) -> Result<T, DecodeError> {
    if buf.len() > MAX_FRAME {
        return Err(DecodeError::TooLong(buf.len()));
    }
    if buf.len() < 4 {
        return Err(DecodeError::Short(buf.len()));
    }
    if buf[..2] != MAGIC {
        return Err(DecodeError::Magic([buf[0], buf[1]]));
    }
    let v = u16::from_le_bytes([buf[2], buf[3]]);
    if v != VERSION {
        return Err(DecodeError::Version { theirs: v, ours: VERSION });
    }
    let (msg, rest) = postcard::take_from_bytes(&buf[4..]).map_err(|e| DecodeError::Body(e.to_string()))?;
    if !rest.is_empty() {
        return Err(DecodeError::Body(format!("{} trailing bytes", rest.len())));
    }
    Ok(msg)
}

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
    /// Bookkeeping: the process mapped a segment (sent with [`NO_REPLY`]).
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
    /// Bookkeeping: the process unmapped (sent with [`NO_REPLY`]).
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
    /// Read `len` bytes (at most [`MAX_DATA_IO`]) of a connection's segment (the DSM pager
    /// fetching a page of another host's segment).
    SegRead {
        /// The connection handle.
        conn: u64,
        /// Offset in the segment.
        offset: u64,
        /// Bytes.
        len: u32,
    },
    /// Store runs of bytes (at most [`MAX_DATA_IO`] in all) into a connection's segment
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

    /// Open a DSM pager's own connection to the node that holds connection `conn`'s
    /// segment (another host): the daemon dials that node's [`link::Flow::Pager`], proves
    /// who it is, and hands the socket over. Answer: [`Reply::DsmFlow`] with the socket.
    DsmFlow {
        /// The connection handle.
        conn: u64,
    },
}

/// The requests of a SCIF endpoint's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScifRequest {
    /// `scif_bind`: bind this session's endpoint to `port` (0 picks a free port at or
    /// above `SCIF_PORT_RSVD`). Answer: [`Reply::ScifPort`].
    Bind {
        /// The port, or 0.
        port: u16,
        /// The caller may take ports below 1024 (it runs as root).
        privileged: bool,
    },
    /// `scif_listen`: make the bound endpoint a listener. The request carries the
    /// endpoint's doorbell (reader, then ringer): the daemon keeps it readable while
    /// connection requests wait. Answer: [`Reply::ScifListening`].
    Listen {
        /// How many requests may wait.
        backlog: u32,
    },
    /// `scif_connect`, sent to the daemon of the node that listens. Carries the connecting
    /// endpoint's doorbell ringer. Answer: [`Reply::ScifConnected`] with the region memfd
    /// and the acceptor's ringer.
    Connect {
        /// The node that listens (this daemon's, or a node of another host that this
        /// daemon reaches over the network).
        node: u32,
        /// The port listened on.
        port: u16,
        /// The connecting endpoint's node.
        from_node: u32,
        /// The connecting endpoint's port.
        from_port: u16,
    },
    /// `scif_accept`, sent on the new endpoint's own session. Carries the new endpoint's
    /// ringer. Answer: [`Reply::ScifConnected`].
    Accept {
        /// The listening port.
        port: u16,
        /// The listener's token ([`Reply::ScifListening`]).
        token: u64,
        /// Wait for a request (`SCIF_ACCEPT_SYNC`) rather than fail with `Again`.
        sync: bool,
    },
    /// `scif_register`: add a window to this endpoint's registered address space. Carries
    /// the memfd holding the memory. Answer: [`Reply::ScifOffset`].
    Register {
        /// Where (`fixed`) or a hint.
        offset: u64,
        /// Bytes (a page multiple).
        len: u64,
        /// `SCIF_PROT_READ` (1) | `SCIF_PROT_WRITE` (2).
        prot: u8,
        /// `SCIF_MAP_FIXED`.
        fixed: bool,
        /// Where the window's memory starts in the memfd.
        memfd_offset: u64,
    },
    /// `scif_unregister`: remove the windows that `offset..offset+len` covers exactly.
    Unregister {
        /// Start.
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// List windows of this endpoint (`peer` false) or of its peer, from `from` on, at
    /// most [`SCIF_WINDOWS_PER_REPLY`]; one memfd rides along per window.
    Windows {
        /// The peer's windows rather than our own.
        peer: bool,
        /// The lowest offset of interest.
        from: u64,
    },
    /// `scif_close` of a connected endpoint (also implied when the session ends).
    Close,
    /// RMA into the peer's registered windows when the peer is on another host.
    RemoteWrite {
        /// Offset in the peer's registered address space.
        offset: u64,
        /// The bytes (at most [`MAX_DATA_IO`]).
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// Check that the peer on another host has windows covering `offset..offset+len`
    /// with protections `prot` (before mapping them).
    RemoteCheck {
        /// Offset in the peer's registered address space.
        offset: u64,
        /// Bytes.
        len: u64,
        /// `SCIF_PROT_READ` (1) | `SCIF_PROT_WRITE` (2).
        prot: u8,
    },
    /// RMA from the peer's registered windows when the peer is on another host.
    /// Answer: [`Reply::Data`].
    RemoteRead {
        /// Offset in the peer's registered address space.
        offset: u64,
        /// Bytes (at most [`MAX_DATA_IO`]).
        len: u32,
    },
    /// `scif_get_nodeIDs`: the nodes this node reaches, itself included.
    Nodes,
    /// Open a DSM pager's own connection to the node of this endpoint's peer (another
    /// host), bound to the peer's registered windows (as [`Request::DsmFlow`] for a
    /// segment). Answer: [`Reply::DsmFlow`] with the socket.
    PagerFlow,
}

/// A request with its id; replies carry the same id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFrame {
    /// Chosen by the sender; [`NO_REPLY`] for one-way notes.
    pub id: u64,
    /// The request.
    pub req: Request,
}

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
}

/// A daemon's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Nothing more to say.
    Ok,
    /// Answer to [`Request::Hello`].
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
    /// Answer to [`Request::Probe`].
    Probe {
        /// The node answers.
        reachable: bool,
    },
    /// Answer to [`Request::Status`].
    Status(NodeStatus),
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
        /// Proves to [`ScifRequest::Accept`] on another session that the caller listens.
        token: u64,
    },
    /// One side of a SCIF connection: the region memfd and the peer's ringer ride along.
    ScifConnected {
        /// Which side this is (0 connector, 1 acceptor).
        side: u8,
        /// The peer is on another host: messages go through the daemons, RMA through
        /// [`ScifRequest::RemoteWrite`] / [`ScifRequest::RemoteRead`], maps are refused.
        remote: bool,
        /// The peer's node.
        peer_node: u32,
        /// The peer's port.
        peer_port: u16,
    },
    /// The node asked for in [`ScifRequest::Connect`] is on this host: connect through its
    /// own daemon.
    ScifDialDirect,
    /// A registered window's offset.
    ScifOffset {
        /// The offset.
        offset: u64,
    },
    /// Registered windows; their memfds ride along in the same order.
    ScifWindows(Vec<ScifWindow>),
    /// Node ids.
    ScifNodes(Vec<u32>),
    /// Answer to [`Request::DsmFlow`]; the connected socket rides along.
    DsmFlow {
        /// The home node's handle of the connection (the `conn` of the bulk frames).
        remote: u64,
        /// The segment's size.
        size: u64,
    },
}

/// At most this many windows per [`ScifRequest::Windows`] answer.
pub const SCIF_WINDOWS_PER_REPLY: usize = 16;

/// A registered SCIF window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScifWindow {
    /// Start in the registered address space.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// `SCIF_PROT_READ` (1) | `SCIF_PROT_WRITE` (2).
    pub prot: u8,
    /// Where the window starts in its memfd.
    pub memfd_offset: u64,
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
}

/// The state of a node, for `remora status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct NodeStatus {
    /// Node id.
    pub node: u32,
    /// Process id of the daemon.
    pub pid: u32,
    /// Started by the library (exits when idle).
    pub auto_started: bool,
    /// Seconds since start.
    pub uptime_s: u64,
    /// Sessions.
    pub sessions: Vec<SessionStatus>,
    /// Segments.
    pub segments: Vec<SegmentStatus>,
    /// Connections (imports by this node's sessions).
    pub connections: Vec<ConnectionStatus>,
    /// Maps.
    pub maps: Vec<MapStatus>,
    /// Interrupts created on this node: (session, number, data?, connections).
    pub interrupts: Vec<(u64, u32, bool, u32)>,
    /// DMA queues: (session, handle, capacity).
    pub dma_queues: Vec<(u64, u64, u32)>,
    /// Links to nodes of other hosts.
    pub peers: Vec<PeerStatus>,
    /// SCIF: bound ports, listeners, connections held here.
    pub scif: (u32, u32, u32),
}

/// One link to a node of another host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    /// The node.
    pub node: u32,
    /// Its address.
    pub addr: String,
    /// "up", "not operational", "down", "lost".
    pub state: String,
    /// The last heartbeat round trip, in microseconds.
    pub rtt_us: u64,
    /// Bytes received from it.
    pub bytes_in: u64,
    /// Bytes sent to it.
    pub bytes_out: u64,
}

/// One session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// Session number.
    pub session: u64,
    /// Peer process id.
    pub pid: u32,
    /// Role.
    pub role: Role,
}

/// One local segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentStatus {
    /// Handle.
    pub seg: u64,
    /// Id.
    pub id: Option<u32>,
    /// Size.
    pub size: u64,
    /// Owning session (0 once removed).
    pub owner: u64,
    /// "created", "prepared", "available", "removed".
    pub state: String,
    /// Importers connected now.
    pub importers: u32,
    /// Shared for attach.
    pub shared: bool,
}

/// One connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionStatus {
    /// Handle.
    pub conn: u64,
    /// Importing session.
    pub session: u64,
    /// Node that owns the segment.
    pub node: u32,
    /// Segment id.
    pub id: u32,
    /// Size.
    pub size: u64,
    /// Still valid.
    pub alive: bool,
}

/// One map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapStatus {
    /// Session.
    pub session: u64,
    /// The process's map number.
    pub map: u64,
    /// Target.
    pub target: MapTarget,
    /// Offset.
    pub offset: u64,
    /// Size.
    pub size: u64,
    /// Read-only.
    pub readonly: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_wrong_header() {
        assert_eq!(decode::<RequestFrame>(b"RM"), Err(DecodeError::Short(2)));
        assert!(matches!(decode::<RequestFrame>(b"XX\x01\x00\x00"), Err(DecodeError::Magic(_))));
        assert!(matches!(decode::<RequestFrame>(b"RM\x09\x00\x00"), Err(DecodeError::Version { .. })));
        let mut ok = encode(&RequestFrame { id: 1, req: Request::Status }).unwrap();
        ok.push(0);
        assert!(matches!(decode::<RequestFrame>(&ok), Err(DecodeError::Body(_))));
    }

    #[test]
    fn replies_round_trip() {
        let m = ServerMsg::Reply {
            id: 9,
            result: Ok(Reply::Segment { seg: 3, id: Some(4), size: 4096, prepared: false, available: false }),
        };
        assert_eq!(decode::<ServerMsg>(&encode(&m).unwrap()).unwrap(), m);
        let e = ServerMsg::Reply { id: 2, result: Err(Error::IllegalParameter("x".into())) };
        assert_eq!(decode::<ServerMsg>(&encode(&e).unwrap()).unwrap(), e);
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode::<RequestFrame>(&bytes);
            let _ = decode::<ServerMsg>(&bytes);
            let mut framed = b"RM\x01\x00".to_vec();
            framed.extend_from_slice(&bytes);
            let _ = decode::<RequestFrame>(&framed);
            let _ = decode::<ServerMsg>(&framed);
            let _ = decode::<link::LinkMsg>(&framed);
            let _ = link::BulkFrame::parse(&bytes);
        }

        #[test]
        fn connect_round_trips(id in any::<u64>(), node in any::<u32>(), seg in any::<u32>(), t in any::<Option<u32>>()) {
            let f = RequestFrame { id, req: Request::Connect { node, id: seg, timeout_ms: t } };
            prop_assert_eq!(decode::<RequestFrame>(&encode(&f).unwrap()).unwrap(), f);
        }

        #[test]
        fn byte_payloads_round_trip(
            offset in any::<u64>(),
            data in proptest::collection::vec(any::<u8>(), 0..2000),
            runs in proptest::collection::vec((any::<u64>(), proptest::collection::vec(any::<u8>(), 0..64)), 0..8),
        ) {
            let reqs = [
                Request::Scif(ScifRequest::RemoteWrite { offset, data: data.clone() }),
                Request::SegWrite { conn: offset, runs: runs.clone() },
                Request::TriggerInterrupt { intr: offset, data: Some(data.clone()) },
            ];
            for req in reqs {
                let f = RequestFrame { id: 7, req };
                prop_assert_eq!(decode::<RequestFrame>(&encode(&f).unwrap()).unwrap(), f);
            }
            let m = ServerMsg::Reply { id: 9, result: Ok(Reply::Data(data.clone())) };
            prop_assert_eq!(decode::<ServerMsg>(&encode(&m).unwrap()).unwrap(), m);
            let l = link::LinkMsg::Request { id: 1, origin: 2, req: link::PeerRequest::Scif(link::ScifPeerRequest::Data { conn: offset, data }) };
            prop_assert_eq!(decode::<link::LinkMsg>(&encode(&l).unwrap()).unwrap(), l);
        }
    }
}
