//! The daemon-to-daemon protocol over TCP.
//!
//! Two TCP connections join every pair of nodes: a control flow (requests, replies, events,
//! heartbeats) and a bulk flow (DMA payload), so a long transfer never delays a heartbeat or
//! a small request. A control frame is a 4-byte little-endian length followed by a frame as
//! [`crate::encode`] makes it (magic, version, postcard body). A bulk frame is a fixed
//! 40-byte [`BulkFrame`] (zerocopy layout, checked by [`BulkFrame::parse`]) followed by its
//! payload bytes raw. The handshake of both flows uses control frames.
//!
//! The handshake authenticates both sides from the cluster secret: the dialer sends
//! [`LinkMsg::Hello`] with a fresh nonce; the listener answers [`LinkMsg::Challenge`] with
//! its own nonce and an HMAC proving it knows the secret; the dialer checks it and answers
//! [`LinkMsg::Auth`] with its own HMAC; the listener checks that and sends
//! [`LinkMsg::Welcome`], or [`LinkMsg::Refused`] with a reason.

use crate::{Error, Event, MAGIC, VERSION};
pub use scif::{ScifPeerReply, ScifPeerRequest};
use serde::{Deserialize, Serialize};
use zerocopy::little_endian::{U16, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

mod scif;

/// The largest control frame.
pub const MAX_LINK_FRAME: usize = 64 * 1024;
/// The largest payload one bulk frame carries.
pub const MAX_BULK_CHUNK: usize = 4 << 20;
/// The largest payload of a frame on a pager flow (RMA into registered memory goes in such
/// frames; a DSM pager sends at most a page).
pub const MAX_PAGER_FRAME: usize = 1 << 20;
/// The name SCIF's client code uses for [`MAX_PAGER_FRAME`].
pub const MAX_SCIF_FRAME: usize = MAX_PAGER_FRAME;

/// Which of the two connections between two nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Flow {
    /// Requests, replies, events, heartbeats.
    Control,
    /// DMA payload.
    Bulk,
    /// A DSM pager's own connection: a process of the dialing node fetches pages of this
    /// node's segments and sends its stores home in bulk frames, without a daemon of its
    /// own host in between. Dialed (and authenticated) by the process's daemon, which
    /// hands the socket to the process.
    Pager,
    /// Another bulk flow of the link, lane `1..`[`BULK_LANES`] ([`Flow::Bulk`] is lane 0):
    /// DMA payload spread over several streams, one lane per sending thread, each served by
    /// a reader of its own on the receiving node (one stream, and its one reader copying
    /// into the segments, could not fill the link for several DMA queues at once).
    BulkLane(u8),
}

/// The bulk flows of a link ([`Flow::Bulk`] and the [`Flow::BulkLane`]s).
pub const BULK_LANES: usize = 4;

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
        /// The dialer's node features: a bit set the link carries without reading it (the
        /// nodes give their bits their meanings).
        features: u32,
        /// The dialer's kernel word (its kernel id keyed with the cluster's secret): equal
        /// to the listener's when both run on one machine, whatever their network
        /// namespaces; `0` when its kernel does not say.
        kernel: u64,
    },
    /// Listener → dialer: its nonce, incarnation and proof.
    Challenge {
        /// The listener's node.
        node: u32,
        /// A fresh random nonce.
        nonce: [u8; 32],
        /// Changes every time the listener's daemon starts.
        incarnation: u64,
        /// The listener's node features (as the dialer's hello).
        features: u32,
        /// The listener's kernel word (as the dialer's hello).
        kernel: u64,
        /// HMAC-SHA256(secret, "remora-listener" ‖ dialer nonce ‖ listener nonce ‖ nodes ‖
        /// both feature words ‖ both kernels, the dialer's first).
        mac: [u8; 32],
    },
    /// Dialer → listener: the dialer's proof.
    Auth {
        /// HMAC-SHA256(secret, "remora-dialer" ‖ listener nonce ‖ dialer nonce ‖ nodes ‖
        /// both feature words ‖ both kernels, the dialer's first).
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
    /// First frame of a [`Flow::Pager`], sent by the dialing daemon before it hands the
    /// socket to a process: the flow may touch this memory of the listener only.
    PagerBind {
        /// What the flow reaches (the listening node decides what that memory is).
        target: RangeRef,
    },
    /// First frame of a [`Flow::Pager`] connection that is not a pager's: a direct flow
    /// between two processes (a SCIF connection's messages), which the listener hands to
    /// whoever waits for `key` with the one-time `token` it gave out for that flow. The
    /// listener answers [`LinkMsg::Welcome`] once it handed the socket over, else closes.
    FlowBind {
        /// What the flow is for, in the listening node's handles (a SCIF connection).
        key: u64,
        /// The one-time token the listening node gave for it.
        token: u64,
    },
    /// First frame of a [`Flow::Pager`] that reaches several memories of the listener (at
    /// most [`MAX_FLOW_TARGETS`], their handles all different): each frame names one of
    /// them by its handle, and the frames are served in order, so stores into several
    /// segments land in the order they were sent (a VIPL payload, then its completion).
    /// With `watch` `(handle, offset)`, every store that covers the 4-byte word at `offset`
    /// of that target is followed by a futex wake of the word (a waiter on the listener's
    /// host sleeps on it without missing the store); so is every store that covers the
    /// target's first word (offset 0), of that word (a second word the flow's writer moves:
    /// a VIPL VI's count of its peer's posted receives, the watched one its done count).
    PagerBindMany {
        /// What the flow reaches.
        targets: Vec<RangeRef>,
        /// The word woken after each store that covers it.
        watch: Option<(u64, u64)>,
    },
    /// The sender gave request `id` up (its caller's time ran out, the route fell silent,
    /// or the connection it went on broke): it will never take its answer. The receiver
    /// refuses it if it is still being served, and releases what it made if it was
    /// served. Sent in order after the request (a request is never read after its
    /// `GaveUp`), and again after every reconnection to the same start of the receiver
    /// until [`LinkMsg::GaveUpNoted`] comes back.
    GaveUp {
        /// The request's id.
        id: u64,
    },
    /// The receiver of [`LinkMsg::GaveUp`] acted on it.
    GaveUpNoted {
        /// The request's id.
        id: u64,
    },
    /// The receiver of [`LinkMsg::SessionEnd`] released what it held for the session: the
    /// sender stops telling it again after reconnections.
    SessionEndNoted {
        /// The sender's session.
        origin: u64,
    },
}

/// The most memories one [`LinkMsg::PagerBindMany`] flow reaches.
pub const MAX_FLOW_TARGETS: usize = 64;

/// Memory of a node that a peer reaches through a pager flow or bulk frames, named the way
/// the owning node's core names it. Transports carry it without looking inside; the node
/// that owns the memory resolves it and checks every access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RangeRef {
    /// Which kind of handle.
    pub space: Space,
    /// The owning node's handle.
    pub handle: u64,
}

/// The address spaces a [`RangeRef`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Space {
    /// A connection of the peer to an export of the owning node (offsets are offsets in
    /// the exported region). Bulk frames always name this space.
    Connection,
    /// The registered memory of the owning node's end of a message channel (offsets are
    /// offsets of that end's registered address space).
    Registered,
    /// A connection of the peer to an interrupt or data interrupt of the owning node: no
    /// memory, only [`BulkOp::Trigger`] frames (the triggering process's own flow).
    Interrupt,
}

impl RangeRef {
    /// A connection handle.
    pub fn connection(handle: u64) -> RangeRef {
        RangeRef { space: Space::Connection, handle }
    }

    /// The registered memory of a channel end.
    pub fn registered(handle: u64) -> RangeRef {
        RangeRef { space: Space::Registered, handle }
    }

    /// An interrupt connection.
    pub fn interrupt(handle: u64) -> RangeRef {
        RangeRef { space: Space::Interrupt, handle }
    }
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
        #[serde(with = "serde_bytes")]
        data: Option<Vec<u8>>,
    },
    /// Does the node answer?
    Probe,
    /// Read bytes of a connection's segment (at most [`crate::MAX_DATA_IO`]).
    Read {
        /// The answering node's connection handle.
        conn: u64,
        /// Offset.
        offset: u64,
        /// Bytes.
        len: u32,
    },
    /// Store runs of bytes into a connection's segment.
    Write {
        /// The answering node's connection handle.
        conn: u64,
        /// (offset, bytes) runs.
        #[serde(with = "crate::runs")]
        runs: Vec<(u64, Vec<u8>)>,
    },
    /// A request of the SCIF personality.
    Scif(ScifPeerRequest),
    /// A request of the RSM personality.
    Rsm(crate::RsmPeerRequest),
    /// A request of the VIPL personality.
    Vipl(crate::ViplPeerRequest),
    /// Does the answering node hold a member segment of reflective-memory group `group`?
    /// Answer: [`PeerReply::Connected`] (handle 0) with the size, and, from a node of this
    /// host, the group's memfd; `NoSuchSegment` when it holds none.
    GroupMemory {
        /// The group.
        group: u32,
    },
    /// From a node of another host: connect the asking session to this node's member
    /// segment of group `group` (whatever its `SCI_FLAG_ALLOW_UNICAST`; the connection
    /// reaches the group's memory on this host, which every member of the host shares).
    /// Answer: [`PeerReply::GroupConnected`]; `NoSuchSegment` when the node holds none.
    ConnectGroup {
        /// The group.
        group: u32,
    },
    /// From a node of another host: the members of group `group` on the asker's host
    /// changed. Every multicast connection of the group on the answering node that has no
    /// leg to that host yet gets one to `joined`'s member (a host's first member, or the
    /// member that takes over from `left`), and its legs to node `left` (whose member was
    /// removed) are dropped. Answered [`PeerReply::Ok`] once the writers' pagers hold the
    /// new legs (or after a few seconds), so the asker copies the group's contents only
    /// then.
    GroupMembers {
        /// The group.
        group: u32,
        /// The node whose member the multicast connections should reach.
        joined: Option<u32>,
        /// The node whose member is gone.
        left: Option<u32>,
    },
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
    /// Bytes read.
    Data(#[serde(with = "serde_bytes")] Vec<u8>),
    /// An interrupt connection.
    Interrupt {
        /// The answering node's handle.
        intr: u64,
        /// Its number.
        intno: u32,
        /// The answering node's session that owns the interrupt (0: a shared number's).
        /// A plain flow dialed to it carries back only the triggers of connections that
        /// session made to the asking node's interrupts (issue 19).
        owner: u64,
    },
    /// An answer of the SCIF personality.
    Scif(ScifPeerReply),
    /// An RSM import of an export of the answering node.
    RsmConnected {
        /// The answering node's connection handle.
        conn: u64,
        /// Segment size.
        size: u64,
        /// The exporter's signal interrupt on the answering node.
        signal: u32,
        /// Puts and writable maps are allowed.
        writable: bool,
    },
    /// A VIPL connection request was accepted: the accepting VI's description.
    ViplAccepted(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Answer to [`PeerRequest::ConnectGroup`].
    GroupConnected {
        /// The answering node's connection handle.
        conn: u64,
        /// The size of the group's memory on the answering host.
        size: u64,
        /// Names that memory: equal on every node of one host that shares it (so the
        /// asker connects to one member per host).
        memory: u64,
    },
}

/// What a bulk frame does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BulkOp {
    /// `len` payload bytes follow; store them at `offset` of connection `conn`, then ack
    /// (on a [`Flow::Pager`]: ack only when `ok` is set, so a background flush costs no
    /// answer).
    Write,
    /// Send back `len` bytes from `offset` of connection `conn` as a `Data` frame.
    Read,
    /// `len` payload bytes follow: the answer to a `Read`.
    Data,
    /// The operation succeeded (`ok`) or failed. The answer to a refused
    /// [`BulkOp::Trigger`] says why in its `offset` (one of the `TRIGGER_*` codes).
    Ack,
    /// On a [`Flow::Pager`] bound to a [`Space::Interrupt`]: trigger that interrupt; the
    /// `len` payload bytes that follow (at most [`MAX_TRIGGER_DATA`]) are a data
    /// interrupt's message (a plain interrupt's trigger has none). Answered with an `Ack`
    /// when `ok` is set (the sender waits), and otherwise only when it was refused.
    Trigger,
}

/// The most payload bytes of a [`BulkOp::Trigger`] (a data interrupt's largest message).
pub const MAX_TRIGGER_DATA: usize = 1024;
/// A refused trigger's code (the `Ack`'s `offset`): the interrupt was removed.
pub const TRIGGER_REMOVED: u64 = 1;
/// A refused trigger's code: the data interrupt's queue is full.
pub const TRIGGER_FULL: u64 = 2;
/// A refused trigger's code: anything else (the connection is gone, a payload for a plain
/// interrupt, one too long).
pub const TRIGGER_REFUSED: u64 = 3;

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

/// The wire layout of a bulk frame header: 40 bytes, little-endian.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct BulkFrame {
    magic: [u8; 2],
    version: U16,
    op: u8,
    ok: u8,
    pad: [u8; 2],
    tag: U64,
    conn: U64,
    offset: U64,
    len: U64,
}

/// The size of a bulk frame header.
pub const BULK_FRAME: usize = std::mem::size_of::<BulkFrame>();

impl BulkFrame {
    /// The wire form of `h`.
    pub fn from_header(h: &BulkHeader) -> BulkFrame {
        BulkFrame {
            magic: MAGIC,
            version: U16::new(VERSION),
            op: match h.op {
                BulkOp::Write => 1,
                BulkOp::Read => 2,
                BulkOp::Data => 3,
                BulkOp::Ack => 4,
                BulkOp::Trigger => 5,
            },
            ok: h.ok as u8,
            pad: [0; 2],
            tag: U64::new(h.tag),
            conn: U64::new(h.conn),
            offset: U64::new(h.offset),
            len: U64::new(h.len),
        }
    }

    /// A plain trigger of connection `conn`: no payload, nobody waits for an answer (tag 0,
    /// offset 0, `ok` false), the frame a trigger flow carries.
    pub fn trigger(conn: u64) -> BulkFrame {
        BulkFrame::from_header(&BulkHeader {
            op: BulkOp::Trigger,
            tag: 0,
            conn,
            offset: 0,
            len: 0,
            ok: false,
        })
    }

    /// Check and decode a received header.
    ///
    /// # Errors
    /// A [`crate::DecodeError`] for a short buffer, wrong magic or version, unknown
    /// operation, or a payload longer than [`MAX_BULK_CHUNK`].
    pub fn parse(bytes: &[u8]) -> Result<BulkHeader, crate::DecodeError> {
        let f = BulkFrame::read_from_bytes(bytes).map_err(|_| crate::DecodeError::Short(bytes.len()))?;
        if f.magic != MAGIC {
            return Err(crate::DecodeError::Magic(f.magic));
        }
        if f.version.get() != VERSION {
            return Err(crate::DecodeError::Version { theirs: f.version.get(), ours: VERSION });
        }
        let op = match f.op {
            1 => BulkOp::Write,
            2 => BulkOp::Read,
            3 => BulkOp::Data,
            4 => BulkOp::Ack,
            5 => BulkOp::Trigger,
            n => return Err(crate::DecodeError::Body(format!("unknown bulk operation {n}"))),
        };
        if f.len.get() > MAX_BULK_CHUNK as u64 {
            return Err(crate::DecodeError::TooLong(f.len.get() as usize));
        }
        Ok(BulkHeader {
            op,
            tag: f.tag.get(),
            conn: f.conn.get(),
            offset: f.offset.get(),
            len: f.len.get(),
            ok: f.ok != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_frames_round_trip_and_reject_garbage() {
        let h = BulkHeader { op: BulkOp::Write, tag: 7, conn: 9, offset: 1 << 40, len: 4096, ok: true };
        let f = BulkFrame::from_header(&h);
        assert_eq!(BULK_FRAME, 40);
        assert_eq!(BulkFrame::parse(f.as_bytes()).unwrap(), h);
        let t = BulkHeader { op: BulkOp::Trigger, len: MAX_TRIGGER_DATA as u64, ok: false, ..h };
        assert_eq!(BulkFrame::parse(BulkFrame::from_header(&t).as_bytes()).unwrap(), t);
        let mut bad = f.as_bytes().to_vec();
        bad[4] = 99;
        assert!(BulkFrame::parse(&bad).is_err());
        let mut long = BulkFrame::from_header(&BulkHeader { len: u64::MAX, ..h }).as_bytes().to_vec();
        assert!(BulkFrame::parse(&long).is_err());
        long.truncate(10);
        assert!(BulkFrame::parse(&long).is_err());
    }

    #[test]
    fn a_plain_trigger_is_a_bare_trigger_of_its_connection() {
        let want = BulkHeader { op: BulkOp::Trigger, tag: 0, conn: 7, offset: 0, len: 0, ok: false };
        assert_eq!(BulkFrame::parse(BulkFrame::trigger(7).as_bytes()).unwrap(), want);
    }
}
