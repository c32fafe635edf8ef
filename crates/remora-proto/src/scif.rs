//! The SCIF personality's part of the client protocol.

use serde::{Deserialize, Serialize};

/// The requests of a SCIF endpoint's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScifRequest {
    /// `scif_bind`: bind this session's endpoint to `port` (0 picks a free port at or
    /// above `SCIF_PORT_RSVD`). Answer: [`Reply::ScifPort`](crate::Reply::ScifPort).
    Bind {
        /// The port, or 0.
        port: u16,
        /// The caller may take ports below 1024 (it runs as root).
        privileged: bool,
    },
    /// `scif_listen`: make the bound endpoint a listener. The request carries the
    /// endpoint's doorbell (reader, then ringer): the daemon keeps it readable while
    /// connection requests wait. Answer: [`Reply::ScifListening`](crate::Reply::ScifListening).
    Listen {
        /// How many requests may wait.
        backlog: u32,
    },
    /// `scif_connect`, sent to the daemon of the node that listens. Carries the connecting
    /// endpoint's doorbell ringer. Answer: [`Reply::ScifConnected`](crate::Reply::ScifConnected) with the region memfd
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
    /// ringer. Answer: [`Reply::ScifConnected`](crate::Reply::ScifConnected).
    Accept {
        /// The listening port.
        port: u16,
        /// The listener's token ([`Reply::ScifListening`](crate::Reply::ScifListening)).
        token: u64,
        /// Wait for a request (`SCIF_ACCEPT_SYNC`) rather than fail with `Again`.
        sync: bool,
    },
    /// `scif_register`: add a window to this endpoint's registered address space. The
    /// window is made of `pieces`, in order; the memfds they lie in ride along, each once
    /// (at most [`SCIF_MAX_FDS`]), and a piece names its memfd by its place among them
    /// (pages that back an earlier window stay where that window has them, so one page
    /// may back several windows). Answer: [`Reply::ScifOffset`](crate::Reply::ScifOffset).
    Register {
        /// Where (`fixed`) or a hint.
        offset: u64,
        /// `SCIF_PROT_READ` (1) | `SCIF_PROT_WRITE` (2).
        prot: u8,
        /// `SCIF_MAP_FIXED`.
        fixed: bool,
        /// The window's memory, at most [`SCIF_MAX_PIECES`] pieces; its length is theirs.
        pieces: Vec<ScifPiece>,
    },
    /// `scif_unregister`: remove the windows that `offset..offset+len` covers exactly.
    Unregister {
        /// Start.
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// List windows of this endpoint (`peer` false) or of its peer, from `from` on, at
    /// most [`SCIF_WINDOWS_PER_REPLY`] and as many as fit with at most
    /// [`SCIF_PIECES_PER_REPLY`] pieces and [`SCIF_MAX_FDS`] memfds in all; each memfd
    /// rides along once. Answer: [`Reply::ScifWindows`](crate::Reply::ScifWindows).
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
        /// The bytes (at most [`MAX_DATA_IO`](crate::MAX_DATA_IO)).
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
        /// `SCIF_PROT_READ` (1) | `SCIF_PROT_WRITE` (2), and [`SCIF_CHECK_ONE_WINDOW`]
        /// for a range that must lie in one window.
        prot: u8,
    },
    /// RMA from the peer's registered windows when the peer is on another host.
    /// Answer: [`Reply::Data`](crate::Reply::Data).
    RemoteRead {
        /// Offset in the peer's registered address space.
        offset: u64,
        /// Bytes (at most [`MAX_DATA_IO`](crate::MAX_DATA_IO)).
        len: u32,
    },
    /// `scif_get_nodeIDs`: the nodes this node reaches, itself included.
    Nodes,
    /// Open a DSM pager's own connection to the node of this endpoint's peer (another
    /// host), bound to the peer's registered windows (as [`Request::DsmFlow`](crate::Request::DsmFlow) for a
    /// segment). Answer: [`Reply::DsmFlow`](crate::Reply::DsmFlow) with the socket.
    PagerFlow,
    /// [`ScifRequest::Connect`] for a connect that runs in the background (the program set
    /// `O_NONBLOCK`): to a node of another host, the messages stay on the daemons' relays,
    /// without a direct flow, since the flow would replace the file behind the endpoint's
    /// descriptor, which an `epoll` set may already watch for the connect's end.
    ConnectWithoutFlow {
        /// The node that listens.
        node: u32,
        /// The port listened on.
        port: u16,
        /// The connecting endpoint's node.
        from_node: u32,
        /// The connecting endpoint's port.
        from_port: u16,
    },
    /// The RMA counts of this endpoint's peer on another host, for `SCIF_FENCE_INIT_PEER`:
    /// the RMAs it has started and those completed in ticket order (see
    /// `remora_sys::msgring`), as two little-endian `u64` in [`Reply::Data`](crate::Reply::Data).
    /// With `until` (a fence mark's count, modulo 2^[`SCIF_MARK_BITS`]), the peer's node
    /// first waits, at most [`SCIF_RMA_WAIT_MS`], until the completed count reaches it.
    PeerRmaCounts {
        /// The count to wait for, or none.
        until: Option<u64>,
    },
}

/// The bits of the RMA counts a SCIF fence mark holds (a mark is a non-negative C `int`,
/// with one bit for whose RMAs it counts).
pub const SCIF_MARK_BITS: u32 = 30;

/// How long a node waits in one [`ScifRequest::PeerRmaCounts`] with `until` before it
/// answers the counts as they are (the caller asks again).
pub const SCIF_RMA_WAIT_MS: u64 = 200;

/// Whether a completed-RMA count `done` has reached the fence mark count `mark` (both taken
/// modulo 2^[`SCIF_MARK_BITS`]; a count less than half that range ahead counts as reached).
pub fn rma_mark_reached(done: u64, mark: u64) -> bool {
    let mask = (1u64 << SCIF_MARK_BITS) - 1;
    (done.wrapping_sub(mark) & mask) < (1 << (SCIF_MARK_BITS - 1))
}

/// In [`ScifRequest::RemoteCheck`]'s `prot`: the range must lie in one window (a fence
/// signal's target). A node that does not know the bit ignores it.
pub const SCIF_CHECK_ONE_WINDOW: u8 = 4;

/// At most this many windows per [`ScifRequest::Windows`] answer.
pub const SCIF_WINDOWS_PER_REPLY: usize = 64;

/// At most this many pieces in all per [`ScifRequest::Windows`] answer (a window of
/// [`SCIF_MAX_PIECES`] always fits one answer, within [`MAX_FRAME`](crate::MAX_FRAME)).
pub const SCIF_PIECES_PER_REPLY: usize = 2048;

/// At most this many pieces make one window (a piece is at most 21 bytes encoded: a
/// window's request fits [`MAX_FRAME`](crate::MAX_FRAME)).
pub const SCIF_MAX_PIECES: usize = 2048;

/// At most this many memfds ride along with one [`ScifRequest::Register`] or one
/// [`ScifRequest::Windows`] answer (the descriptors one message carries).
pub const SCIF_MAX_FDS: usize = 16;

/// One piece of a window's memory: a run of pages of one memfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScifPiece {
    /// Which of the message's memfds the piece lies in (its place among them).
    pub fd: u8,
    /// Where the piece starts in its memfd (a page multiple).
    pub memfd_offset: u64,
    /// Bytes (a page multiple).
    pub len: u64,
}

/// A registered SCIF window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScifWindow {
    /// Start in the registered address space.
    pub offset: u64,
    /// Bytes (the sum of the pieces').
    pub len: u64,
    /// `SCIF_PROT_READ` (1) | `SCIF_PROT_WRITE` (2).
    pub prot: u8,
    /// The window's memory, in order; each piece names one of the answer's memfds.
    pub pieces: Vec<ScifPiece>,
}
