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

use serde::{de::DeserializeOwned, Serialize};

/// The first two bytes of every frame.
pub const MAGIC: [u8; 2] = *b"RM";
/// The protocol version this build speaks. Bump on any incompatible change (2: SCIF; 3: peer
/// requests grouped by personality, pager flows bound to a [`link::RangeRef`]; 4: RSM;
/// 5: VIPL; 6: reflective-memory groups; 7: reflective memory across hosts,
/// [`link::PeerRequest::ConnectGroup`], [`Reply::GroupConnected`]; 8: members joining and
/// leaving a group across hosts, [`link::PeerRequest::GroupMembers`], [`Event::GroupLeg`],
/// [`Request::GroupLegReady`]; 9: [`ServerMsg::Events`], events queued together; 10: a local
/// segment's events kept by the daemon until its owner asks, [`Request::SegmentEvents`],
/// [`Event::SegmentEventsOn`]; 11: SCIF's RMA counts asked of a far peer's node,
/// `ScifRequest::PeerRmaCounts`, `ScifPeerRequest::RmaCounts`, and the one-window check
/// of a fence signal's target; 12: a SCIF window's pieces name their memfd among the
/// message's, each memfd sent once, up to [`SCIF_MAX_PIECES`] pieces; [`Reply::ScifWindows`]
/// says whether more follow; a local segment's kept events taken in an answer,
/// [`Request::TakeSegmentEvents`], [`Reply::SegmentEvents`]; 13: credit for the SCIF
/// relays' messages, `ScifPeerRequest::Credit`, [`SCIF_RELAY_WINDOW`]; 14: requests a node gave
/// up and session ends, told again until noted, `link::LinkMsg::GaveUp`,
/// `link::LinkMsg::GaveUpNoted`, `link::LinkMsg::SessionEndNoted`; 15: a posted
/// interrupt trigger's refusal ends its flow instead of being answered on it; 16: a plain
/// interrupt's flow carries its owner's triggers back, [`Reply::InterruptFlows`] names
/// each flow's node; 17: the VI description a VIPL connection carries, [`ViplAsk::info`]
/// and the accept's, offers the VI pair's own stream across hosts; 18: an interrupt
/// connection's answer names the interrupt's owner, [`link::PeerReply::Interrupt`]'s
/// `owner`; 19: each node says its feature word in the link handshake,
/// `link::LinkMsg::Hello`'s and `link::LinkMsg::Challenge`'s `features`; 20: and its
/// kernel, their `kernel`, so two nodes of one machine know it).
pub const VERSION: u16 = 20;
/// The most bytes of SCIF messages a daemon's relay sends to the far daemon's relay
/// without credit back (`ScifPeerRequest::Credit`, given once the bytes are in the far
/// endpoint's ring), plus the one message under way when the limit is reached: beyond it
/// the bytes stay in the sender's ring, and the sender blocks as on a full ring.
pub const SCIF_RELAY_WINDOW: usize = 1024 * 1024;
/// The most events of one local segment a daemon keeps while its owner has not asked for
/// them ([`Event`]): the one that fills the store sends them all to the owner.
pub const KEPT_SEGMENT_EVENTS: usize = 256;
/// Reflective-memory (multicast) groups a node offers: ids 0 to 5, as a Dolphin DX adapter
/// (`SCI_Q_ADAPTER_MCAST_MAX_GROUPS`).
pub const MULTICAST_GROUPS: u32 = 6;
/// The node id that names every member of a multicast group
/// (`DIS_BROADCAST_NODEID_GROUP_ALL`).
pub const BROADCAST_NODE: u32 = 252;
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

mod reply;
mod request;
mod rsm;
mod scif;
mod status;
mod vipl;

pub use reply::*;
pub use request::*;
pub use rsm::*;
pub use scif::*;
pub use status::*;
pub use vipl::*;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_wrong_header() {
        assert_eq!(decode::<RequestFrame>(b"RM"), Err(DecodeError::Short(2)));
        assert!(matches!(decode::<RequestFrame>(b"XX\x01\x00\x00"), Err(DecodeError::Magic(_))));
        assert!(matches!(decode::<RequestFrame>(b"RM\xff\xff\x00"), Err(DecodeError::Version { .. })));
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
