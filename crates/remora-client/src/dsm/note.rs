//! A map's note to its daemon (`Request::MapNote`: what `remora status` shows of the map),
//! sent by the thread that asks for the map's pager flow, just before that request, rather
//! than by the thread that maps.
//!
//! A note is a message the daemon reads: sent by the mapping thread it woke the daemon in
//! the middle of `SCIMapRemoteSegment`, on that thread's core (a synchronous wake-up) and at
//! the daemon's higher priority, so the daemon ran before the map returned (issue 19: a
//! third of the map's time on a machine whose work lands on one core). The flow request
//! wakes the daemon anyway, from the asking thread; the note now goes just before it, on
//! the same (pager) session, so the daemon reads both in one wake-up, off the mapping
//! thread's path. A map made while that request is on its way (a second map of the
//! connection) has its note sent right after the answer, by the same thread: the session
//! carries one request at a time, and the mapping thread must not wait behind a dial. A
//! map whose flow is not asked for (one is there already, or pager flows are off) sends
//! its note at once, as before.
//!
//! The note is never sent after the map's unmap note: [`MapNote::withdraw`] drops a note
//! not sent yet (the daemon then never hears of the map), and sends the unmap note after
//! one that was, both under the note's lock.

use crate::Session;
use remora_proto::Request;
use std::sync::{Arc, Mutex};

/// A map's note, sent once by whichever thread gets to it first (see the module's doc).
#[derive(Debug)]
pub struct MapNote {
    state: Mutex<State>,
}

#[derive(Debug)]
enum State {
    /// Not sent yet: the session it goes on and the note.
    Waiting(Arc<Session>, Request),
    /// Sent on this session.
    Sent(Arc<Session>),
    /// The map is gone.
    Withdrawn,
}

impl MapNote {
    /// The note `note` (a `Request::MapNote`) of a map, to go on `session`.
    pub fn new(session: Arc<Session>, note: Request) -> Arc<MapNote> {
        Arc::new(MapNote { state: Mutex::new(State::Waiting(session, note)) })
    }

    /// Send the note if it was not sent or withdrawn yet. A session that fails to send it
    /// is gone: the daemon has dropped the map's books with it.
    pub fn send(&self) {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let State::Waiting(..) = &*g {
            let State::Waiting(session, note) = std::mem::replace(&mut *g, State::Withdrawn) else {
                unreachable!("matched above")
            };
            let _ = session.note(note);
            *g = State::Sent(session);
        }
    }

    /// The map is unmapped: a note not sent yet never will be; after one that was, send
    /// `unmap` (its `Request::UnmapNote`) on the same session.
    pub fn withdraw(&self, unmap: Request) {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let State::Sent(session) = std::mem::replace(&mut *g, State::Withdrawn) {
            let _ = session.note(unmap);
        }
    }

    /// Whether the note went to the daemon (and was not withdrawn since).
    pub fn is_sent(&self) -> bool {
        matches!(*self.state.lock().unwrap_or_else(|p| p.into_inner()), State::Sent(_))
    }
}
