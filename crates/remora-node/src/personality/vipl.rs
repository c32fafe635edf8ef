//! The VIPL personality of the node: the connection manager of the Virtual Interface
//! Architecture (`VipConnectWait` / `Accept` / `Reject` / `Request`).
//!
//! A server's session waits on a discriminator; a request (from a session of this node or,
//! through the peer protocol, of another node) is handed to the first waiter on the same
//! discriminator, and then waits for that server's accept or reject, up to the requester's
//! timeout. A request that finds no waiter is refused at once (`NoMatch`), as VIA's
//! `VIP_NO_MATCH`: requesters retry. What the two VIs tell each other is opaque here.

use crate::session::{Outcome, Session};
use crate::Node;
use remora_proto::link::{PeerReply, PeerRequest};
use remora_proto::{Error, Reply, ViplAsk, ViplPeerRequest, ViplRequest, MAX_DISCRIMINATOR, MAX_INFO};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::time::Duration;
use tokio::sync::oneshot;

/// A request handed to a waiter.
#[derive(Debug)]
struct Incoming {
    conn: u64,
    node: u32,
    disc: Vec<u8>,
    info: Vec<u8>,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    sid: u64,
    disc: Vec<u8>,
    tx: oneshot::Sender<Incoming>,
}

#[derive(Debug)]
struct Pending {
    /// The session of the server that got it.
    sid: u64,
    tx: oneshot::Sender<Result<Vec<u8>, Error>>,
}

/// The VIPL personality's books: waiters and the requests handed to them.
#[derive(Debug, Default)]
pub struct Books {
    next: u64,
    waiters: Vec<Waiter>,
    pending: HashMap<u64, Pending>,
}

impl Books {
    fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

fn timeout_of(ms: Option<u32>) -> Duration {
    ms.map_or(Duration::from_secs(u64::MAX / 4), |t| Duration::from_millis(t.into()))
}

fn check(disc: &[u8], info: Option<&[u8]>) -> Result<(), Error> {
    if disc.len() > MAX_DISCRIMINATOR {
        return Err(Error::IllegalParameter(format!("discriminator of {} bytes", disc.len())));
    }
    if info.is_some_and(|i| i.len() > MAX_INFO) {
        return Err(Error::IllegalParameter("VI description too long".into()));
    }
    Ok(())
}

/// A request from node `from` for the waiter on `disc`: hand it over and wait for the
/// server's answer.
async fn incoming(node: &Node, from: u32, ask: ViplAsk) -> Result<Vec<u8>, Error> {
    let ViplAsk { disc, from_disc, info, timeout_ms } = ask;
    check(&disc, Some(&info))?;
    check(&from_disc, None)?;
    let (conn, rx) = {
        let mut books = node.vipl();
        let mut offer = Incoming { conn: 0, node: from, disc: from_disc, info };
        loop {
            let Some(i) = books.waiters.iter().position(|w| w.disc == disc && !w.tx.is_closed()) else {
                return Err(Error::NoMatch);
            };
            let w = books.waiters.remove(i);
            offer.conn = books.next_id();
            let conn = offer.conn;
            match w.tx.send(offer) {
                Ok(()) => {
                    let (tx, rx) = oneshot::channel();
                    books.pending.insert(conn, Pending { sid: w.sid, tx });
                    break (conn, rx);
                }
                Err(back) => offer = back,
            }
        }
    };
    match tokio::time::timeout(timeout_of(timeout_ms), rx).await {
        Ok(Ok(answer)) => answer,
        // The server's session ended without answering.
        Ok(Err(_)) => Err(Error::NoMatch),
        Err(_) => {
            node.vipl().pending.remove(&conn);
            Err(Error::Timeout)
        }
    }
}

/// Serve one VIPL request of session `s`.
pub(crate) async fn handle(s: &mut Session, req: ViplRequest, _fds: Vec<OwnedFd>) -> Outcome {
    let r = match req {
        ViplRequest::Wait { disc, timeout_ms } => wait(s, disc, timeout_ms).await,
        ViplRequest::Request { node, ask } => {
            let answer = if node == s.me() {
                // A peer daemon of this host asks for its requester through its session.
                let from = s.importer_node();
                tokio::select! {
                    a = incoming(&s.node, from, ask) => a,
                    _ = s.hangup() => Err(Error::Protocol("caller hung up".into())),
                }
            } else {
                match s.reach(node, ask.timeout_ms).await {
                    Ok(t) => {
                        let timeout_ms = ask.timeout_ms;
                        let req = PeerRequest::Vipl(ViplPeerRequest::Request(ask));
                        // A requester that gives up (its thread cancelled) hangs up: stop
                        // waiting for it; its session's end reaches the server's node.
                        // The caller's time is kept also when the server's node is held
                        // up or its link silent (its own wait would end the request).
                        let asked = tokio::select! {
                            a = s.ask_within(&t, node, req, timeout_ms) => a,
                            _ = s.hangup() => Err(Error::Protocol("caller hung up".into())),
                        };
                        match asked {
                            Ok((PeerReply::ViplAccepted(info), _)) => Ok(info),
                            Ok((other, _)) => Err(Error::Protocol(format!("unexpected answer {other:?}"))),
                            Err(e) => Err(e),
                        }
                    }
                    Err(e) => Err(e),
                }
            };
            answer.map(Reply::ViplAccepted)
        }
        ViplRequest::Accept { conn, info } => answer(&s.node, s.sid, conn, Ok(info)),
        ViplRequest::Reject { conn } => answer(&s.node, s.sid, conn, Err(Error::Rejected)),
    };
    (r, vec![])
}

/// A server's accept or reject of request `conn`.
fn answer(node: &Node, sid: u64, conn: u64, what: Result<Vec<u8>, Error>) -> Result<Reply, Error> {
    if let Ok(info) = &what {
        check(&[], Some(info))?;
    }
    let mut books = node.vipl();
    match books.pending.get(&conn) {
        Some(p) if p.sid == sid => {}
        Some(_) => return Err(Error::UnknownHandle),
        // A request this node handed out earlier whose requester gave up meanwhile.
        None if conn <= books.next => return Err(Error::Timeout),
        None => return Err(Error::UnknownHandle),
    }
    let p = books.pending.remove(&conn).ok_or(Error::UnknownHandle)?;
    p.tx.send(what).map(|_| Reply::Ok).map_err(|_| Error::Timeout)
}

/// `VipConnectWait` of session `s`.
async fn wait(s: &Session, disc: Vec<u8>, timeout_ms: Option<u32>) -> Result<Reply, Error> {
    check(&disc, None)?;
    let (tx, mut rx) = oneshot::channel();
    let id = {
        let mut books = s.node.vipl();
        let id = books.next_id();
        books.waiters.push(Waiter { id, sid: s.sid, disc, tx });
        id
    };
    let got = tokio::select! {
        r = &mut rx => r.ok(),
        _ = tokio::time::sleep(timeout_of(timeout_ms)) => None,
        _ = s.hangup() => None,
    };
    let got = match got {
        Some(g) => Some(g),
        None => {
            // Withdraw; a request handed over at this very moment is still taken.
            let withdrawn = {
                let mut books = s.node.vipl();
                let before = books.waiters.len();
                books.waiters.retain(|w| w.id != id);
                before != books.waiters.len()
            };
            if withdrawn {
                None
            } else {
                rx.await.ok()
            }
        }
    };
    match got {
        Some(i) => Ok(Reply::ViplIncoming { conn: i.conn, node: i.node, disc: i.disc, info: i.info }),
        None => Err(Error::Timeout),
    }
}

/// Serve what the VIPL personality of node `from` asks.
pub(crate) async fn serve_peer(node: &Node, from: u32, req: ViplPeerRequest) -> Result<PeerReply, Error> {
    match req {
        ViplPeerRequest::Request(ask) => incoming(node, from, ask).await.map(PeerReply::ViplAccepted),
    }
}

/// Session `sid` ended: its waits and the requests handed to it go.
pub(crate) fn end_session(node: &Node, sid: u64) {
    let mut books = node.vipl();
    books.waiters.retain(|w| w.sid != sid);
    // Dropping a pending request's sender tells its requester nobody answers.
    books.pending.retain(|_, p| p.sid != sid);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_discriminators_and_descriptions_are_refused() {
        assert!(check(&[0; MAX_DISCRIMINATOR], Some(&[0; MAX_INFO])).is_ok());
        assert!(matches!(check(&[0; MAX_DISCRIMINATOR + 1], None), Err(Error::IllegalParameter(_))));
        assert!(matches!(check(&[], Some(&[0; MAX_INFO + 1])), Err(Error::IllegalParameter(_))));
    }
}
