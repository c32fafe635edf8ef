//! The VIPL personality's part of the client protocol and of the peer protocol: the
//! connection manager of the Virtual Interface Architecture, in the node.
//!
//! A VI's data path stands on SISCI segments and interrupts; what needs the node is the
//! rendezvous. A server waits on a discriminator (`VipConnectWait`); a requester names a
//! node and a discriminator (`VipConnectRequest`); the node of the server matches the two,
//! hands the requester's description to the server and waits for its accept or reject.
//! What the two VIs tell each other (their segments, interrupts, attributes) is opaque to
//! the node: the `info` bytes.

use serde::{Deserialize, Serialize};

/// The longest discriminator the node matches (`MaxDiscriminatorLen`).
pub const MAX_DISCRIMINATOR: usize = 64;
/// The most bytes of a VI's description.
pub const MAX_INFO: usize = 1024;

/// The requests of the VIPL personality.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ViplRequest {
    /// `VipConnectWait`: wait for a request naming discriminator `disc` on this node.
    /// Answer: [`Reply::ViplIncoming`](crate::Reply::ViplIncoming).
    Wait {
        /// The discriminator waited on.
        #[serde(with = "serde_bytes")]
        disc: Vec<u8>,
        /// Milliseconds to wait; `None` waits until a request comes.
        timeout_ms: Option<u32>,
    },
    /// `VipConnectRequest`: ask node `node`'s waiter on `disc` for a connection.
    /// Answer: [`Reply::ViplAccepted`](crate::Reply::ViplAccepted), or `NoMatch`,
    /// `Rejected`, `Timeout`.
    Request {
        /// The server's node.
        node: u32,
        /// What the requester asks for.
        ask: ViplAsk,
    },
    /// `VipConnectAccept` of a request [`ViplRequest::Wait`] returned.
    Accept {
        /// The pending request.
        conn: u64,
        /// The accepting VI's description.
        #[serde(with = "serde_bytes")]
        info: Vec<u8>,
    },
    /// `VipConnectReject` of a request [`ViplRequest::Wait`] returned.
    Reject {
        /// The pending request.
        conn: u64,
    },
}

/// What the VIPL personality of one node asks of another's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ViplPeerRequest {
    /// A requester of the asking node wants a waiter of the answering node. Answer:
    /// [`PeerReply::ViplAccepted`](crate::link::PeerReply::ViplAccepted).
    Request(ViplAsk),
}

/// A connection request, as a requester sends it to its node and that node passes it on
/// to the server's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViplAsk {
    /// The server's discriminator.
    #[serde(with = "serde_bytes")]
    pub disc: Vec<u8>,
    /// The requester's own discriminator (its local address).
    #[serde(with = "serde_bytes")]
    pub from_disc: Vec<u8>,
    /// The requesting VI's description.
    #[serde(with = "serde_bytes")]
    pub info: Vec<u8>,
    /// Milliseconds to wait for the answer; `None` waits until it comes.
    pub timeout_ms: Option<u32>,
}
