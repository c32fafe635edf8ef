//! The events of a local segment for its owner (connects, disconnects, the route to an
//! importer, an importer lost), kept here until the owner asks for them.
//!
//! Sending an event wakes the owner's event thread; on a small machine that thread takes
//! the core of whoever is connecting, on the connect's path (issue 19). Most owners never
//! look at these events, so they are sent only to an owner that wants them: a segment with
//! a callback, or whose events a thread waits for, asks once with
//! [`Request::SegmentEvents`](remora_proto::Request::SegmentEvents) (the library does that
//! at the callback's registration and at the first wait). Until then the daemon keeps them
//! in order, at most [`KEPT_SEGMENT_EVENTS`] per segment; the one that fills the store
//! sends them all at once (one wake-up for that many events), and the next are kept again.
//! Kept events are sent, in order, before the answer to the owner's ask
//! ([`Event::SegmentEventsOn`]); events sent go down the session's one event channel, so
//! the owner sees every event of a segment once and in the order it happened.

use super::super::Registry;
use remora_proto::{Event, KEPT_SEGMENT_EVENTS};
use std::collections::VecDeque;

/// Where the events of one segment go.
#[derive(Debug, Default)]
pub struct OwnerEvents {
    /// The owner asked for them: each is sent as it happens.
    pub wanted: bool,
    /// Events kept while the owner has not asked, oldest first.
    pub kept: VecDeque<Event>,
}

impl Registry {
    /// Tell the owner of segment `seg` about `ev` (one of the segment's events): sent now
    /// when the owner asked for the segment's events, else kept (see the module).
    pub fn tell_owner(&mut self, seg: u64, ev: Event) {
        let Some(s) = self.segments.get_mut(&seg) else {
            return;
        };
        let owner = s.owner;
        if owner == 0 {
            // Removed: nobody to tell.
            return;
        }
        if s.events.wanted {
            self.tell(owner, ev);
            return;
        }
        s.events.kept.push_back(ev);
        if s.events.kept.len() >= KEPT_SEGMENT_EVENTS {
            let kept = std::mem::take(&mut s.events.kept);
            for ev in kept {
                self.tell(owner, ev);
            }
        }
    }

    /// Session `session` wants the events of segment `seg` from now on: the kept ones are
    /// sent, then [`Event::SegmentEventsOn`]. A session that does not own the segment (one
    /// that attached it, or a segment gone) gets only that answer.
    pub fn want_segment_events(&mut self, session: u64, seg: u64) {
        if let Some(s) = self.segments.get_mut(&seg).filter(|s| s.owner == session && !s.removed) {
            s.events.wanted = true;
            let kept = std::mem::take(&mut s.events.kept);
            for ev in kept {
                self.tell(session, ev);
            }
        }
        self.tell(session, Event::SegmentEventsOn { seg });
    }

    /// As [`Registry::want_segment_events`], the kept events returned (for the answer to
    /// the request) instead of sent, and no [`Event::SegmentEventsOn`]. Events a full store
    /// sent earlier are already on the event socket: a process that reads these first sees
    /// events out of order, so the library no longer asks this way (a wait on its event
    /// thread reads the event socket itself and asks with `Request::SegmentEvents`).
    pub fn take_segment_events(&mut self, session: u64, seg: u64) -> Vec<Event> {
        match self.segments.get_mut(&seg).filter(|s| s.owner == session && !s.removed) {
            Some(s) => {
                s.events.wanted = true;
                std::mem::take(&mut s.events.kept).into()
            }
            None => Vec::new(),
        }
    }
}
