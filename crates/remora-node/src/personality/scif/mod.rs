//! The SCIF personality: Intel's Symmetric Communications Interface on the node.
//!
//! | file | what |
//! | --- | --- |
//! | `books.rs` | ports, listeners and their waiting requests, connections, windows |
//! | `client.rs` | the requests of endpoint sessions (`remora_proto::ScifRequest`) |
//! | `relay.rs` | relays of connections whose peer is on another host |
//! | `direct.rs` | direct flows: the two processes' own TCP stream, awaited, held, shut |
//! | `peer.rs` | what peers ask (`remora_proto::link::ScifPeerRequest`), pager-flow memory |

mod books;
pub(crate) mod client;
pub(crate) mod direct;
pub(crate) mod peer;
mod relay;

pub use books::{Accepted, Books, RelayIn, RelayStart, RemoteEnd, ADMIN_PORT_END, PORT_RSVD};

use crate::Node;
use remora_proto::{Event, LostReason};

/// The least queue of a connection's region when the peer is on another host (the ring
/// between an endpoint and its own daemon's relay). What a program sees of its queue across
/// hosts is already its ring, the relays' window and the far ring; with MPSS's 4 KiB there,
/// every 4 KiB cost the relay and the endpoint a wake each (0.13 GB/s for a relayed 16 MiB
/// stream, 0.85 GB/s with 64 KiB). Up to 3.4 MB a queue takes the same 65536 slots (4 MiB
/// of each ring, touched as it wraps), so the ring is as large as keeps a sender within a
/// window and a half of an idle receiver.
pub(crate) const RELAYED_QUEUE: usize = 256 << 10;

/// The queue of a connection's region: `REMORA_SCIF_QUEUE_BYTES`, at least
/// [`RELAYED_QUEUE`] when the peer is on another host (`remote`).
pub(crate) fn queue_bytes(remote: bool) -> usize {
    let queue = remora_config::Config::get().scif_queue_bytes;
    if remote {
        queue.max(RELAYED_QUEUE)
    } else {
        queue
    }
}

/// Session `sid` ended: close its endpoint's port, listener and connection side.
pub(crate) fn end_session(node: &Node, sid: u64) {
    node.scif().end_session(sid);
}

/// Node `peer` is lost: every connection to an endpoint there is reset, and the endpoint
/// sessions of this node's ends hear it (`ConnectionLost`: a map of the peer's windows
/// whose pager waits for the route gives it up at once).
pub(crate) fn lose_node(node: &Node, peer: u32) {
    let ends = node.scif().lose_node(peer);
    if !ends.is_empty() {
        tracing::warn!(
            peer,
            ends = ends.len(),
            "SCIF connections to a lost node are reset (the node is lost)"
        );
    }
    let reg = node.lock();
    for (sid, conn) in ends {
        reg.tell_session(sid, Event::ConnectionLost { conn, reason: LostReason::NodeGone });
    }
}
