//! The personalities: one module per API on the node core. What is particular to an API
//! (SISCI's segment state machine, SCIF's ports, listeners and windows) lives here; the
//! nouns every API shares (regions, exports, connections, notifiers, transfers, sessions)
//! live in [`crate::core`]. A personality serves its variant of the client protocol
//! (`remora_proto::Request`) and of the peer protocol (`remora_proto::link::PeerRequest`).

pub mod multicast;
pub mod rsm;
pub mod scif;
pub mod sisci;
pub mod vipl;

use crate::Node;

/// Session `sid` ended: every personality releases what it held for it.
pub(crate) fn end_session(node: &Node, sid: u64) {
    scif::end_session(node, sid);
    rsm::end_session(node);
    vipl::end_session(node, sid);
}
