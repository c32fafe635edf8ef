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
    /// Connections whose far end closed (`false`) or whose far node was lost (`true`)
    /// before their flow was held: the flow is shut as soon as it is (the close can
    /// overtake the accept's hand-over).
    early: HashMap<u64, bool>,
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

    /// Keep this daemon's duplicate of `conn`'s flow (shut at once if the far end already
    /// closed or its node was lost).
    fn hold(&mut self, conn: u64, fd: OwnedFd) {
        if let Some(lost) = self.early.remove(&conn) {
            remora_sys::flow::shutdown(fd.as_fd(), !lost);
        }
        self.held.insert(conn, fd);
    }

    /// The far end of `conn` closed: shut our process's flow for writing (its sends fail,
    /// and it reports hang-up once the far end's last bytes are in).
    pub fn peer_closed(&mut self, conn: u64) {
        match self.held.get(&conn) {
            Some(fd) => remora_sys::flow::shutdown(fd.as_fd(), true),
            None => {
                self.early.entry(conn).or_insert(false);
            }
        }
    }

    /// The far node is lost: wake our process's flow with the end of the stream.
    pub fn lost(&mut self, conn: u64) {
        match self.held.get(&conn) {
            Some(fd) => remora_sys::flow::shutdown(fd.as_fd(), false),
            None => {
                self.early.insert(conn, true);
            }
        }
    }

    /// Our process's end of `conn` closed or ended: the far process sees the end of the
    /// stream after every byte sent, and our duplicate goes.
    pub fn release(&mut self, conn: u64) {
        self.waiting.remove(&conn);
        self.early.remove(&conn);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (a, l.accept().unwrap().0)
    }

    /// A far end's close (or its node's loss) that overtakes the hand-over of the flow is
    /// not forgotten: the flow is shut the moment it is held.
    #[test]
    fn a_close_before_the_flow_is_held_shuts_it_when_it_is() {
        for lost in [false, true] {
            let (ours, mut far) = pair();
            let mut flows = Flows::default();
            match lost {
                false => flows.peer_closed(5),
                true => flows.lost(5),
            }
            flows.hold(5, OwnedFd::from(ours.try_clone().unwrap()));
            let mut b = [0u8; 1];
            assert_eq!(far.read(&mut b).unwrap(), 0, "our side's stream ended");
            let r = remora_sys::bell::wait(ours.as_fd(), false, Some(Duration::ZERO)).unwrap();
            assert_eq!(r.readable, lost, "reading shut too only when the node was lost");
            flows.release(5);
            assert!(flows.held.is_empty() && flows.early.is_empty());
        }
    }
}
