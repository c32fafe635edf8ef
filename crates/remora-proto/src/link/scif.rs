//! The SCIF personality's part of the daemon-to-daemon protocol: what one node's SCIF
//! asks of another's (connects, the relay's messages and credit, RMA), and the answers.

use serde::{Deserialize, Serialize};

/// What the SCIF personality of one node asks of another's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScifPeerRequest {
    /// `scif_connect` to a listener of the answering node.
    Connect {
        /// The port listened on.
        port: u16,
        /// The connecting endpoint's port id (node, port).
        from: (u32, u16),
        /// The asking node's handle of the connection (for data and close it sends back).
        conn: u64,
    },
    /// Bytes an endpoint sent, for its peer on the answering node (in order).
    Data {
        /// The answering node's connection handle.
        conn: u64,
        /// The bytes.
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// The endpoint on the asking node closed (after all its data).
    Close {
        /// The answering node's connection handle.
        conn: u64,
    },
    /// RMA: store bytes into the registered windows of the peer on the answering node.
    Write {
        /// The answering node's connection handle.
        conn: u64,
        /// Offset in the peer's registered address space.
        offset: u64,
        /// The bytes (at most [`crate::MAX_DATA_IO`]).
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// Check that windows of the peer on the answering node cover a range with the given
    /// protections (before a map of them).
    Check {
        /// The answering node's connection handle.
        conn: u64,
        /// Offset in the peer's registered address space.
        offset: u64,
        /// Bytes.
        len: u64,
        /// `SCIF_PROT_READ` (1) | `SCIF_PROT_WRITE` (2), and
        /// [`SCIF_CHECK_ONE_WINDOW`](crate::SCIF_CHECK_ONE_WINDOW) for a range that must
        /// lie in one window.
        prot: u8,
    },
    /// RMA: read bytes of the registered windows of the peer on the answering node.
    Read {
        /// The answering node's connection handle.
        conn: u64,
        /// Offset in the peer's registered address space.
        offset: u64,
        /// Bytes (at most [`crate::MAX_DATA_IO`]).
        len: u32,
    },
    /// [`ScifPeerRequest::Connect`] without a direct flow: the connecting endpoint's
    /// messages stay on the relays (its connect runs in the background), so the answer is
    /// [`ScifPeerReply::Accepted`], never `AcceptedDirect`.
    ConnectWithoutFlow {
        /// The port listened on.
        port: u16,
        /// The connecting endpoint's port id (node, port).
        from: (u32, u16),
        /// The asking node's handle of the connection (for data and close it sends back).
        conn: u64,
    },
    /// The RMA counts of the answering node's end of a connection (started, completed in
    /// ticket order), as [`ScifRequest::PeerRmaCounts`](crate::ScifRequest::PeerRmaCounts)
    /// asks them: two little-endian `u64` in [`PeerReply::Data`](super::PeerReply::Data).
    RmaCounts {
        /// The answering node's connection handle.
        conn: u64,
        /// The completed count to wait for first (bounded), or none.
        until: Option<u64>,
    },
    /// Credit for a relay's messages: `bytes` more of what the asking node's relay
    /// received (as [`ScifPeerRequest::Data`]) are now in its endpoint's ring, so the
    /// answering node's relay may send that many more. A relay keeps at most
    /// [`SCIF_RELAY_WINDOW`](crate::SCIF_RELAY_WINDOW) bytes (and one message) without
    /// credit on the way.
    Credit {
        /// The answering node's connection handle.
        conn: u64,
        /// Bytes given back.
        bytes: u64,
    },
}

/// What the SCIF personality of the answering node says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScifPeerReply {
    /// A connection was accepted.
    Accepted {
        /// The answering node's handle of the connection.
        conn: u64,
        /// The accepting endpoint's port.
        port: u16,
    },
    /// A connection was accepted, and the accepting endpoint's messages may go over a TCP
    /// flow of their own between the two processes: the asking node dials the answering
    /// node's link port with the pager flows' handshake and binds the flow with
    /// [`LinkMsg::FlowBind`](super::LinkMsg::FlowBind) `{ key: conn, token }` (the relay is
    /// the fallback when the flow does not come).
    AcceptedDirect {
        /// The answering node's handle of the connection.
        conn: u64,
        /// The accepting endpoint's port.
        port: u16,
        /// The one-time token of the flow.
        token: u64,
    },
}
