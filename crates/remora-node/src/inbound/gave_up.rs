//! Peers' requests as this node serves them, for the peers' [`Inbound::gave_up`]: a peer
//! that gave a request up never takes its answer, so a connect it gave up while it is
//! still being served is refused, and what a served one made (a connection to a segment or
//! an interrupt) is released. Without this a connect given up at the asking node (its
//! caller's time, a silent route, a broken connection) left a connection booked here that
//! no one holds until the asking session's end.
//!
//! Lock order: the books ([`crate::core::Registry`]) before [`Asked`].
//!
//! [`Inbound::gave_up`]: crate::transport::Inbound::gave_up

use crate::core::{ConnectWait, Registry};
use remora_proto::Error;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// What a served connect made, for the session that holds it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Made {
    /// A connection to a segment.
    Segment(u64),
    /// A connection to an interrupt.
    Interrupt(u64),
}

impl Made {
    /// Whether `session` still holds it.
    fn held(self, reg: &Registry, session: u64) -> bool {
        match self {
            Made::Segment(c) => reg.conns.get(&c).is_some_and(|c| c.session == session),
            Made::Interrupt(c) => reg.intr_conns.get(&c).is_some_and(|c| c.session == session),
        }
    }
}

/// Peers' requests being served, and what served connects made, by (peer, request id).
#[derive(Debug, Default)]
pub(super) struct Asked {
    /// Requests being served: their ticket's number, and whether the peer gave one up
    /// meanwhile. (A peer that restarted numbers its requests afresh: a ticket of its old
    /// start still being served leaves the entry of the new one with the same id alone.)
    serving: HashMap<(u32, u64), (u64, bool)>,
    /// The last ticket's number.
    tickets: u64,
    /// What served connects made (while it stands): the holding session and the thing.
    made: HashMap<(u32, u64), (u64, Made)>,
}

/// The book of a node's [`Asked`].
pub(super) type Book = Arc<Mutex<Asked>>;

fn lock(book: &Book) -> MutexGuard<'_, Asked> {
    book.lock().unwrap_or_else(|p| p.into_inner())
}

/// One request of a peer being served (or none, for a request without an id): the book,
/// the request's (peer, id), the ticket's number.
pub(super) struct Ticket(Option<(Book, (u32, u64), u64)>);

impl Ticket {
    /// Request `id` of `from` is being served from now until the ticket drops.
    pub(super) fn new(book: &Book, from: u32, id: u64) -> Ticket {
        let mut b = lock(book);
        b.tickets += 1;
        let n = b.tickets;
        b.serving.insert((from, id), (n, false));
        Ticket(Some((book.clone(), (from, id), n)))
    }

    /// A request the peer cannot give up (no id).
    pub(super) fn none() -> Ticket {
        Ticket(None)
    }

    /// Refused when the peer gave the request up (looked at under the books' lock, before
    /// the request makes anything).
    pub(super) fn check(&self) -> Result<(), ConnectWait> {
        match &self.0 {
            Some((book, key, n)) if lock(book).serving.get(key).is_some_and(|s| *s == (*n, true)) => {
                Err(ConnectWait::Failed(Error::Protocol("the asking node gave the request up".into())))
            }
            _ => Ok(()),
        }
    }

    /// The request made `what` for `session` (under the books' lock, right after
    /// [`Ticket::check`]): kept while it stands, for a later give-up. What no longer
    /// stands is forgotten now.
    pub(super) fn made(&self, reg: &Registry, session: u64, what: Made) {
        let Some((book, key, _)) = &self.0 else { return };
        let mut b = lock(book);
        b.made.retain(|_, (s, m)| m.held(reg, *s));
        b.made.insert(*key, (session, what));
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some((book, key, n)) = &self.0 {
            let mut b = lock(book);
            if b.serving.get(key).is_some_and(|s| s.0 == *n) {
                b.serving.remove(key);
            }
        }
    }
}

/// `from` gave request `id` up: release what it made, or have it refused if it is still
/// being served. Nothing when it never came or made nothing.
pub(super) fn gave_up(reg: &mut Registry, book: &Book, from: u32, id: u64) {
    let mut b = lock(book);
    if let Some((session, what)) = b.made.remove(&(from, id)) {
        drop(b);
        let released = match what {
            Made::Segment(c) => reg.disconnect(session, c).is_ok(),
            Made::Interrupt(c) => reg.disconnect_interrupt(session, c).is_ok(),
        };
        tracing::debug!(peer = from, id, released, "a request given up by its node: {what:?} released");
    } else if let Some((_, given_up)) = b.serving.get_mut(&(from, id)) {
        *given_up = true;
    }
}

/// Peer `peer` is lost (its new start asks afresh, with new ids): forget its requests.
pub(super) fn forget(book: &Book, peer: u32) {
    let mut b = lock(book);
    b.serving.retain(|(p, _), _| *p != peer);
    b.made.retain(|(p, _), _| *p != peer);
}
