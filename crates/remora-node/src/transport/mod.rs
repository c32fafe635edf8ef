//! How a node reaches the other nodes: the transports.
//!
//! # The contract every transport keeps
//!
//! A transport carries, for one session of this node, requests to another node and brings
//! back their replies and the events the other node raises for that session:
//!
//! * **Connect / disconnect** a segment or an interrupt of the other node, waiting for it to
//!   appear up to the caller's timeout. Everything the other node holds for the session is
//!   released when the session ends, and when the transport loses the node.
//! * **Data**: either the transport *shares memory* (it hands over the segment's memfd, so a
//!   map is plain loads and stores and the DMA engine copies locally), or it moves bytes:
//!   the DMA engine writes and reads ranges of the other node's segment through it. Every
//!   offset and length is checked again by the node that owns the memory.
//! * **Interrupts**: a shared-memory transport hands over the interrupt page (triggers go
//!   straight to the waiter); otherwise a trigger is a request to the owning node.
//! * **Failure is an event**: a transport reports a silent node (not operational), its return
//!   (operational), and its loss (restarted or gone). In-flight requests and transfers to a
//!   lost node fail; nothing waits forever.
//!
//! An operation a transport cannot do answers `Error::Protocol("unsupported")` rather than
//! pretending.
//!
//! # The transports
//!
//! | name | reaches | shares memory | file |
//! | --- | --- | --- | --- |
//! | `local` | nodes of this host (same runtime directory) | yes | `crate::peer` |
//! | `tcp` | nodes of the cluster file, over TCP | no | [`tcp`] |
//!
//! Which one a session uses for a node is decided in one place, [`route`].

pub mod tcp;

use crate::Node;

/// How this node reaches another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// It is this node.
    Me,
    /// A node of this host: the `local` transport.
    Local,
    /// A node of the cluster on another host (or any node when `force_tcp` is set).
    Tcp,
    /// Unknown.
    Unknown,
}

/// The transport for `node`.
pub fn route(me: &Node, node: u32) -> Route {
    if node == me.config.node {
        return Route::Me;
    }
    let in_cluster = me.config.cluster.as_ref().is_some_and(|c| c.addr(node).is_some());
    if in_cluster && me.config.cluster.as_ref().is_some_and(|c| c.force_tcp) {
        return Route::Tcp;
    }
    if remora_proto::paths::socket_path(&me.config.runtime_dir, node).exists() {
        return Route::Local;
    }
    if in_cluster {
        Route::Tcp
    } else {
        Route::Unknown
    }
}
