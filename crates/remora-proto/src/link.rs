//! The daemon-to-daemon protocol over TCP.
//!
//! Two TCP connections join every pair of nodes: a control flow (requests, replies, events,
//! heartbeats) and a bulk flow (DMA payload), so a long transfer never delays a heartbeat or
//! a small request. Every frame is a 4-byte little-endian length followed by a frame as
//! [`crate::encode`] makes it (magic, version, postcard body); bulk payload bytes follow
//! their [`BulkHeader`] frame raw.
//!
//! The handshake authenticates both sides from the cluster secret: the dialer sends
//! [`LinkMsg::Hello`] with a fresh nonce; the listener answers [`LinkMsg::Challenge`] with
//! its own nonce and an HMAC proving it knows the secret; the dialer checks it and answers
//! [`LinkMsg::Auth`] with its own HMAC; the listener checks that and sends
//! [`LinkMsg::Welcome`], or [`LinkMsg::Refused`] with a reason.

use crate::{Error, Event};
use serde::{Deserialize, Serialize};

/// The largest control frame.
pub const MAX_LINK_FRAME: usize = 64 * 1024;
/// The largest payload one bulk frame carries.
pub const MAX_BULK_CHUNK: usize = 4 << 20;

/// Which of the two connections between two nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Flow {
    /// Requests, replies, events, heartbeats.
    Control,
    /// DMA payload.
    Bulk,
}

/// A message on a control flow (and the handshake of both flows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkMsg {
    /// Dialer → listener: who I am, which flow, my nonce, my incarnation.
    Hello {
        /// Protocol version.
        version: u16,
        /// The dialer's node.
        node: u32,
        /// The node the dialer wants.
        to: u32,
        /// Which flow this connection is.
        flow: Flow,
        /// A fresh random nonce.
        nonce: [u8; 32],
        /// Changes every time the dialer's daemon starts.
        incarnation: u64,
    },
    /// Listener → dialer: its nonce, incarnation and proof.
    Challenge {
        /// The listener's node.
        node: u32,
        /// A fresh random nonce.
        nonce: [u8; 32],
        /// Changes every time the listener's daemon starts.
        incarnation: u64,
        /// HMAC-SHA256(secret, "remora-listener" ‖ dialer nonce ‖ listener nonce ‖ nodes).
        mac: [u8; 32],
    },
    /// Dialer → listener: the dialer's proof.
    Auth {
        /// HMAC-SHA256(secret, "remora-dialer" ‖ listener nonce ‖ dialer nonce ‖ nodes).
        mac: [u8; 32],
    },
    /// The link is up.
    Welcome,
    /// The link is refused, with why.
    Refused {
        /// The reason (also logged by the refusing side).
        reason: String,
    },
    /// Heartbeat.
    Ping {
        /// Sequence number.
        seq: u64,
    },
    /// Heartbeat answer.
    Pong {
        /// The ping's sequence number.
        seq: u64,
    },
    /// A request on behalf of session `origin` of the sending node.
    Request {
        /// Request id (for the reply).
        id: u64,
        /// The session of the sender it is for.
        origin: u64,
        /// What is asked.
        req: PeerRequest,
    },
    /// The answer to request `id`.
    Reply {
        /// The request id.
        id: u64,
        /// Success or why not.
        result: Result<PeerReply, Error>,
    },
    /// An event for session `origin` of the receiving node.
    Event {
        /// The receiving node's session.
        origin: u64,
        /// What happened.
        event: Event,
    },
    /// Session `origin` of the sender ended: release everything held for it.
    SessionEnd {
        /// The sender's session.
        origin: u64,
    },
}

/// What one node asks another for a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerRequest {
    /// Connect to a segment (waits up to the timeout for it to become available).
    Connect {
        /// Segment id.
        id: u32,
        /// `None` waits forever.
        timeout_ms: Option<u32>,
    },
    /// Release a connection.
    Disconnect {
        /// The answering node's connection handle.
        conn: u64,
    },
    /// Connect to an interrupt.
    ConnectInterrupt {
        /// Its number.
        intno: u32,
        /// A data interrupt.
        data: bool,
        /// `None` waits forever.
        timeout_ms: Option<u32>,
    },
    /// Release an interrupt connection.
    DisconnectInterrupt {
        /// The answering node's handle.
        intr: u64,
    },
    /// Trigger an interrupt (with a payload for data interrupts).
    Trigger {
        /// The answering node's interrupt-connection handle.
        intr: u64,
        /// The payload of a data interrupt.
        data: Option<Vec<u8>>,
    },
    /// Does the node answer?
    Probe,
}

/// What the answering node says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerReply {
    /// Done.
    Ok,
    /// A connection.
    Connected {
        /// The answering node's handle.
        conn: u64,
        /// Segment size.
        size: u64,
    },
    /// An interrupt connection.
    Interrupt {
        /// The answering node's handle.
        intr: u64,
        /// Its number.
        intno: u32,
    },
}

/// What a bulk frame does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BulkOp {
    /// `len` payload bytes follow; store them at `offset` of connection `conn`, then ack.
    Write,
    /// Send back `len` bytes from `offset` of connection `conn` as a `Data` frame.
    Read,
    /// `len` payload bytes follow: the answer to a `Read`.
    Data,
    /// The operation succeeded (`ok`) or failed.
    Ack,
}

/// The fixed header of a bulk frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkHeader {
    /// What to do.
    pub op: BulkOp,
    /// The sender's operation number (echoed in the answer).
    pub tag: u64,
    /// The receiving node's connection handle (Write, Read).
    pub conn: u64,
    /// Offset in the segment.
    pub offset: u64,
    /// Payload length (Write, Data) or requested length (Read).
    pub len: u64,
    /// For Ack (and a failed Read's Data): success.
    pub ok: bool,
}
