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
//! Each transport is one [`Transport`] value in [`TRANSPORTS`], the registration table,
//! tried in order; the first that reaches a node carries its traffic.
//!
//! | name | reaches | shares memory | code |
//! | --- | --- | --- | --- |
//! | `local` | nodes of this host (same runtime directory) | yes | `crate::peer` |
//! | `tcp` | nodes of the cluster file, over TCP | no | [`tcp`] |
//!
//! One conformance suite (`crates/remora-sisci/tests/transport.rs`, and across network
//! namespaces `tests/multihost.rs`) runs the same checks over every transport.

pub mod tcp;

use crate::Node;

/// A way to reach other nodes.
pub trait Transport: Sync {
    /// The name in the table.
    fn name(&self) -> &'static str;
    /// Whether segments reached through it are mapped directly (shared memory).
    fn shares_memory(&self) -> bool;
    /// Whether it carries traffic from `me` to `node`.
    fn reaches(&self, me: &Node, node: u32) -> bool;
    /// The route a session takes through it.
    fn route(&self) -> Route;
}

/// The `local` transport: another daemon of this host hands memfds over its Unix socket.
struct Local;

impl Transport for Local {
    fn name(&self) -> &'static str {
        "local"
    }
    fn shares_memory(&self) -> bool {
        true
    }
    fn reaches(&self, me: &Node, node: u32) -> bool {
        let forced = me.config.cluster.as_ref().is_some_and(|c| c.force_tcp && c.addr(node).is_some());
        !forced && remora_proto::paths::socket_path(&me.config.runtime_dir, node).exists()
    }
    fn route(&self) -> Route {
        Route::Local
    }
}

/// The `tcp` transport: nodes of the cluster file.
struct Tcp;

impl Transport for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }
    fn shares_memory(&self) -> bool {
        false
    }
    fn reaches(&self, me: &Node, node: u32) -> bool {
        me.config.cluster.as_ref().is_some_and(|c| c.addr(node).is_some())
    }
    fn route(&self) -> Route {
        Route::Tcp
    }
}

/// The registration table: one line per transport, in order of preference.
pub static TRANSPORTS: &[&dyn Transport] = &[&Local, &Tcp];

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

/// The transport for `node`: the first in [`TRANSPORTS`] that reaches it.
pub fn route(me: &Node, node: u32) -> Route {
    if node == me.config.node {
        return Route::Me;
    }
    TRANSPORTS.iter().find(|t| t.reaches(me, node)).map(|t| t.route()).unwrap_or(Route::Unknown)
}

/// The name of the transport that carries traffic to `node`, for status and logs.
pub fn transport_name(me: &Node, node: u32) -> &'static str {
    TRANSPORTS.iter().find(|t| t.reaches(me, node)).map(|t| t.name()).unwrap_or("none")
}
