//! Direct flows of SCIF connections across hosts: the two processes' messages go over a
//! TCP stream of their own instead of through both daemons' relays.
//!
//! The listening node's daemon, when it accepts a connection from another host, gives the
//! connecting node a one-time token with its answer
//! ([`ScifPeerReply::AcceptedDirect`](remora_proto::link::ScifPeerReply::AcceptedDirect))
//! and waits up to [`WAIT`] for the flow; the connecting node dials it
//! ([`Transport::direct_flow`](crate::transport::Transport::direct_flow)), and the
//! transport hands it here ([`arrived`]) and welcomes it. Each daemon then gives the
//! stream to its process as a third descriptor of `Reply::ScifConnected` and keeps a
//! duplicate ([`Flows`]), which it shuts down when its process's end closes or ends
//! (so a killed process's peer sees the end of the stream), shuts for writing when the far
//! end closed (so the endpoint reports hang-up once the far end's last bytes are in), and
//! shuts both ways when the far node is lost. A flow that does not come leaves both ends on
//! their relays, which also carry the closes either way.

use crate::transport::HandOver;
use crate::Node;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long the accepting daemon waits for the flow before its process goes on with the
/// relay (the dialer gives up sooner: its dial is bounded at about 1.7 s).
pub const WAIT: Duration = Duration::from_secs(3);

/// Whether this daemon offers and dials direct flows (`REMORA_SCIF_DIRECT`).
pub fn enabled() -> bool {
    remora_config::Config::get().scif_direct
}

struct Waiter {
    from: u32,
    token: u64,
    tx: oneshot::Sender<OwnedFd>,
}

/// The direct flows of the books: the ones awaited, and this daemon's duplicate of each
/// one its process holds, by connection.
#[derive(Default)]
pub struct Flows {
    waiting: HashMap<u64, Waiter>,
    held: HashMap<u64, OwnedFd>,
}

impl Flows {
    /// Await a flow for `conn` from node `from` with `token`.
    pub fn expect(&mut self, conn: u64, from: u32, token: u64) -> oneshot::Receiver<OwnedFd> {
        let (tx, rx) = oneshot::channel();
        self.waiting.insert(conn, Waiter { from, token, tx });
        rx
    }

    /// Stop awaiting the flow of `conn`; whether it was still awaited (not yet taken).
    pub fn cancel(&mut self, conn: u64) -> bool {
        self.waiting.remove(&conn).is_some()
    }

    /// Keep this daemon's duplicate of `conn`'s flow.
    fn hold(&mut self, conn: u64, fd: OwnedFd) {
        self.held.insert(conn, fd);
    }

    /// The far end of `conn` closed: shut our process's flow for writing (its sends fail,
    /// and it reports hang-up once the far end's last bytes are in).
    pub fn peer_closed(&self, conn: u64) {
        if let Some(fd) = self.held.get(&conn) {
            remora_sys::flow::shutdown(fd.as_fd(), true);
        }
    }

    /// The far node is lost: wake our process's flow with the end of the stream.
    pub fn lost(&self, conn: u64) {
        if let Some(fd) = self.held.get(&conn) {
            remora_sys::flow::shutdown(fd.as_fd(), false);
        }
    }

    /// Our process's end of `conn` closed or ended: the far process sees the end of the
    /// stream after every byte sent, and our duplicate goes.
    pub fn release(&mut self, conn: u64) {
        self.waiting.remove(&conn);
        if let Some(fd) = self.held.remove(&conn) {
            remora_sys::flow::shutdown(fd.as_fd(), false);
        }
    }
}

/// A flow for `conn` with `token` came from node `from` (the transport's
/// [`Inbound::direct_flow`](crate::transport::Inbound::direct_flow)): the hand-over to the
/// accept that awaits it, when the node and the token are the ones it awaits.
pub fn arrived(node: &Node, from: u32, conn: u64, token: u64) -> Option<HandOver> {
    let mut books = node.scif();
    let w = books.flows.waiting.get(&conn)?;
    if w.from != from || w.token != token {
        tracing::warn!(from, conn, "a direct flow with a wrong node or token; closed");
        return None;
    }
    let w = books.flows.waiting.remove(&conn)?;
    Some(Box::new(move |fd| {
        let _ = w.tx.send(fd);
    }))
}

/// The accepting side: wait for the flow of `conn` (at most [`WAIT`]; a flow taken just
/// then is still waited for, as its dialer is told it was handed over), keep a duplicate,
/// and return the process's descriptor; `None` leaves the connection on its relay.
pub async fn await_flow(node: &Node, conn: u64, mut rx: oneshot::Receiver<OwnedFd>) -> Option<OwnedFd> {
    let fd = tokio::select! {
        r = &mut rx => r.ok(),
        _ = tokio::time::sleep(WAIT) => {
            if node.scif().flows.cancel(conn) {
                None
            } else {
                rx.await.ok()
            }
        }
    }?;
    keep(node, conn, fd)
}

/// Keep a duplicate of `conn`'s flow and return the process's descriptor (`None`, and the
/// flow closed, when the connection is gone meanwhile).
pub fn keep(node: &Node, conn: u64, fd: OwnedFd) -> Option<OwnedFd> {
    let dup = fd.try_clone().ok()?;
    let mut books = node.scif();
    if !books.has_conn(conn) {
        remora_sys::flow::shutdown(fd.as_fd(), false);
        return None;
    }
    books.flows.hold(conn, dup);
    Some(fd)
}
