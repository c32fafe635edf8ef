//! What travels on an `ofi` link: the bootstrap frame (over the authenticated TCP
//! connection, after the handshake) and the fabric messages. Every fabric message carries the
//! token its receiver handed out in the bootstrap; one without a token of a live link is
//! dropped unread, so nothing of a peer is served before it authenticated.

use remora_proto::link::LinkMsg;
use serde::{Deserialize, Serialize};

/// Bootstrap, both ways: where to send fabric messages, and the token they must carry.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Boot {
    /// The sender's endpoint name (`fi_getname`).
    pub name: Vec<u8>,
    /// What the receiver must put in every fabric message to the sender.
    pub token: u64,
}

/// One fabric message.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Wire {
    /// The receiver's token for this link.
    pub token: u64,
    /// What it says.
    pub body: Body,
}

/// What a fabric message says.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) enum Body {
    /// A control message, as the tcp transport's control flow carries them.
    Link(LinkMsg),
    /// Open `len` bytes at `offset` of the receiver's connection `conn` for one RMA
    /// transfer of the sender (`write`: the sender writes them).
    RmaOpen {
        /// The sender's tag of the transfer.
        tag: u64,
        /// The receiver's connection handle.
        conn: u64,
        /// Offset in it.
        offset: u64,
        /// Bytes.
        len: u64,
        /// Write (else read).
        write: bool,
    },
    /// The answer: the region registered for exactly that range, or a refusal.
    RmaKey {
        /// The transfer's tag.
        tag: u64,
        /// The range may be reached and was registered.
        ok: bool,
        /// The address `fi_write`/`fi_read` give for its first byte.
        addr: u64,
        /// Its key.
        key: u64,
    },
    /// The transfer is over (its writes are before this message on the link): close the
    /// region.
    RmaClose {
        /// The transfer's tag.
        tag: u64,
    },
    /// The region is closed; every byte written is in place.
    RmaClosed {
        /// The transfer's tag.
        tag: u64,
    },
    /// A small transfer carried in the message itself (eager: one round trip instead of
    /// the three of opening, moving and closing a region): store `data` at `offset` of the
    /// receiver's connection `conn`.
    Put {
        /// The sender's tag of the transfer.
        tag: u64,
        /// The receiver's connection handle.
        conn: u64,
        /// Offset in it.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A small read carried in messages: answer `len` bytes at `offset` of `conn`.
    Get {
        /// The sender's tag of the transfer.
        tag: u64,
        /// The receiver's connection handle.
        conn: u64,
        /// Offset in it.
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// The answer to [`Body::Put`] or [`Body::Get`]: done (with the bytes read), or refused.
    Done {
        /// The transfer's tag.
        tag: u64,
        /// Whether the range could be reached.
        ok: bool,
        /// The bytes a `Get` asked for.
        data: Vec<u8>,
    },
}
