//! Counts of receives posted here, told to a peer on another host down the link's channel:
//! at once, or a little later in batches (see [`Link::posted_later`]).

use super::{Far2, Link};
use std::sync::atomic::Ordering;
use std::sync::TryLockError;

/// A peer on another host is told of new receives with the next send of a VI that answers
/// its peer when this many wait to be told (on the channel the send carries them; after
/// a short one on the pair's own stream they follow it, [`Link::posted_urgent`], off the
/// answer's path: told at the post, they were a socket write between the message and the
/// answer on every eighth round trip of each side of a ping-pong)...
const POSTED_BATCH: u64 = 8;
/// ...or this many, for a VI that only receives (see [`Link::posted_later`])...
const POSTED_BATCH_QUIET: u64 = 24;
/// ...or when fewer than this many it was told of are still unused as far as this side
/// knows (the completions landed here so far)...
const POSTED_LOW: u64 = 16;
/// ...while fewer than this many messages that landed here wait for the program to take
/// them. A receiver further behind has that much work before it could run dry: its
/// sender waiting for the batch costs the stream nothing, where a count told on every
/// repost (a socket write here, a wake-up of the sender's node and of the sender per
/// message) kept such a receiver behind for good (issue 15: a 64 KiB stream locked at
/// 0.55-0.6 of its speed, the sender waiting for every receive).
const UNREAD_LOW: u64 = 8;

impl Link {
    /// Whether the count `posted` of receives posted here, just queued on the channel to a
    /// peer on another host, may wait there a little ([`tell_later`]): fewer than a batch
    /// wait, and the peer still knows at least [`POSTED_LOW`] receives not used as far as
    /// `landed` (the completions that landed here) tells, or at least [`UNREAD_LOW`] of
    /// those completions (`unread`) wait for the program to take them. A count that waits leaves with
    /// this VI's next send through the channel (a VI that sent since its last post answers
    /// its peer; a short answer on the pair's own stream does not carry it, and takes it only
    /// as [`Link::posted_urgent`] says), a later post that is told at once, the receiver's taking of
    /// completions once the peer knows fewer than [`POSTED_LOW`] unused
    /// ([`Link::posted_landed`]), or the NIC's watcher ([`Link::flush_posted`], every
    /// 10 ms; none waits while no watcher runs): well inside the grace a sender gives a
    /// receive to appear. An echo reposts and answers every message; the repost's own
    /// write to the socket (and the wake-up of the peer node's thread that stores it) was
    /// on the path of every round trip (issue 15). A VI that only receives tells its posts
    /// in batches of [`POSTED_BATCH_QUIET`]: told one by one, each repost of a 64 KiB
    /// stream cost the receiver a write and the sender's node a wake-up per message, on a
    /// machine whose cores also carry the stream (issue 15: the stream at 0.5-0.6 of raw
    /// TCP moving the same messages, 0.73-0.8 with the posts told in batches).
    pub(crate) fn posted_later(&self, posted: u64, landed: u64, unread: u64) -> bool {
        self.landed.fetch_max(landed, Ordering::Relaxed);
        self.unread.store(unread, Ordering::Relaxed);
        self.posted_queued.store(posted, Ordering::Release);
        let sends = self.sends.load(Ordering::Acquire);
        let answering = self.sends_seen.swap(sends, Ordering::AcqRel) != sends;
        tell_later(answering, posted, self.posted_sent.load(Ordering::Acquire), landed, unread)
    }

    /// The count of posted receives last queued on the channel (read under the channel's
    /// lock before a send, it is one that send carries).
    pub(crate) fn posted_queued(&self) -> u64 {
        self.posted_queued.load(Ordering::Acquire)
    }

    /// A send of this VI left, carrying the count `posted` of receives posted here.
    pub(crate) fn posted_left(&self, posted: u64) {
        self.sends.fetch_add(1, Ordering::AcqRel);
        self.posted_sent.fetch_max(posted, Ordering::AcqRel);
    }

    /// A send of this VI left on the pair's own stream: counted as a send (the VI answers
    /// its peer), though a posted count queued on the channel stays there (the send flushes
    /// it when [`Link::posted_urgent`] says so, the NIC's watcher otherwise).
    pub(crate) fn sent_direct(&self) {
        self.sends.fetch_add(1, Ordering::AcqRel);
    }

    /// Send the stores queued so far, among them the count `posted` of receives posted
    /// here. `false` when they could not be.
    pub(crate) fn push_posted(&self, posted: u64) -> bool {
        let ok = self.push();
        if ok {
            self.posted_sent.fetch_max(posted, Ordering::AcqRel);
            self.told_alone.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Whether a count of posted receives that waits should leave with a send on the
    /// pair's own stream (which does not carry it): the peer knows fewer than
    /// [`POSTED_LOW`] unused as far as the completions seen here tell while fewer than
    /// [`UNREAD_LOW`] of them wait to be taken, a batch of [`POSTED_BATCH`] waits (a VI
    /// that answers leaves its batch to its answer), or the NIC's watcher found the channel
    /// taken (a loop of sends holding its lock). Otherwise it
    /// waits for its batch: a flush on every short send put a socket write, a store by
    /// the peer's node and its wake-up back on every round trip of a ping-pong.
    #[inline]
    pub(crate) fn posted_urgent(&self) -> bool {
        let sent = self.posted_sent.load(Ordering::Acquire);
        let queued = self.posted_queued.load(Ordering::Acquire);
        queued > sent
            && (queued - sent >= POSTED_BATCH
                || is_low(sent, self.landed.load(Ordering::Relaxed), self.unread.load(Ordering::Relaxed))
                || self.watcher_missed.load(Ordering::Relaxed))
    }

    /// The stores queued on the channel left (sent under its lock), carrying the count
    /// `posted` of receives posted here (read under that lock before).
    pub(crate) fn posted_told(&self, posted: u64) {
        self.posted_sent.fetch_max(posted, Ordering::AcqRel);
        self.watcher_missed.store(false, Ordering::Relaxed);
    }

    /// [`Link::posted_told`] for the stores queued on the channel sent right after a short
    /// send on the pair's own stream ([`Link::posted_urgent`]): a write of their own, not
    /// carried by the send, counted ([`Link::told_alone`]).
    pub(crate) fn posted_told_alone(&self, posted: u64) {
        self.posted_told(posted);
        self.told_alone.fetch_add(1, Ordering::Relaxed);
    }

    /// Receives completed here up to `landed` (taken, or their completions landed), of
    /// which `unread` the program has not taken yet, as the receiver looks for completions:
    /// a count that waits goes now when the peer knows fewer than [`POSTED_LOW`] unused and
    /// fewer than [`UNREAD_LOW`] wait to be taken (a sender that used them would wait for
    /// the NIC's watcher otherwise: a receiver that posts a window of 32 and takes it whole
    /// held 16 of every window's posts). Looked at on every look, whether or not it found
    /// a completion: a receiver that took the messages it had learns it here.
    #[inline]
    pub(crate) fn posted_landed(&self, landed: u64, unread: u64) {
        self.landed.fetch_max(landed, Ordering::Relaxed);
        self.unread.store(unread, Ordering::Relaxed);
        let sent = self.posted_sent.load(Ordering::Acquire);
        if self.posted_queued.load(Ordering::Acquire) > sent && is_low(sent, landed, unread) {
            self.flush_posted();
        }
    }

    /// [`Link::flush_posted`] by the NIC's watcher, counted ([`Link::told_late`]).
    pub(crate) fn flush_posted_late(&self) {
        if self.flush(Taking::Late) {
            self.told_late.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// [`Link::flush_posted`], waiting for the channel's lock (the watcher's end: it
    /// holds no lock of the link then, and no holder of the channel waits for it).
    pub(crate) fn flush_posted_waiting(&self) -> bool {
        self.flush(Taking::Wait)
    }

    /// How many counts of posted receives the NIC's watcher sent ([`Link::posted_later`]:
    /// each kept a sender that used up the receives it knew waiting for the watcher).
    pub(crate) fn told_late(&self) -> u64 {
        self.told_late.load(Ordering::Relaxed)
    }

    /// How many counts of posted receives went to the peer on their own, not carried by a
    /// send of this VI (each a socket write here and a wake-up of the peer's node): the
    /// NIC's watcher's, and those that follow a short send on the pair's own stream, among
    /// them.
    pub(crate) fn told_alone(&self) -> u64 {
        self.told_alone.load(Ordering::Relaxed)
    }

    /// Send a count of posted receives that waited on the channel ([`Link::posted_later`]);
    /// nothing when none waits, or when another thread holds the channel (what it sends
    /// carries the count; the NIC's watcher never waits behind a long write). A failure
    /// marks the link failed. `true` when a waiting count was sent.
    pub(crate) fn flush_posted(&self) -> bool {
        self.flush(Taking::Try)
    }

    fn flush(&self, taking: Taking) -> bool {
        let Some(far) = self.far.as_ref() else { return false };
        let queued = self.posted_queued.load(Ordering::Acquire);
        if queued <= self.posted_sent.load(Ordering::Acquire) {
            return false;
        }
        let got = match taking {
            Taking::Wait => far.lock().map_err(TryLockError::from),
            _ => far.try_lock(),
        };
        let mut g = match got {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if taking == Taking::Late {
                    // The next short send on the pair's stream sends it.
                    self.watcher_missed.store(true, Ordering::Relaxed);
                }
                return false;
            }
        };
        // Read again under the lock: a send that held it may have carried the count.
        let queued = self.posted_queued.load(Ordering::Acquire);
        if queued <= self.posted_sent.load(Ordering::Acquire) {
            return false;
        }
        if (Far2 { far: &mut g }).send(false).is_ok() {
            self.posted_told(queued);
            self.told_alone.fetch_add(1, Ordering::Relaxed);
            true
        } else {
            self.failed.store(true, Ordering::Release);
            false
        }
    }
}

/// How [`Link::flush`] takes the channel's lock.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Taking {
    /// Not at all when another thread holds it.
    Try,
    /// Likewise, for the NIC's watcher: noted ([`Link::posted_urgent`]).
    Late,
    /// Waiting for it.
    Wait,
}

/// Whether a count `posted` of receives posted here may wait before it is told to a peer on
/// another host, which was told `sent` so far and whose completions of them landed here up
/// to `landed`, `unread` of them not taken yet (see [`Link::posted_later`]; `answering`:
/// the VI sent since its last post).
fn tell_later(answering: bool, posted: u64, sent: u64, landed: u64, unread: u64) -> bool {
    if answering {
        // Its batch leaves with its answer (after it, on the pair's own stream).
        return !is_low(sent, landed, unread);
    }
    posted.saturating_sub(sent) < POSTED_BATCH_QUIET && !is_low(sent, landed, unread)
}

/// Whether a receiver's peer, told of `sent` receives, runs low: fewer than [`POSTED_LOW`]
/// of them unused as far as the completions landed here (`landed`) tell, while fewer than
/// [`UNREAD_LOW`] of those (`unread`) wait for the program to take them.
#[inline]
fn is_low(sent: u64, landed: u64, unread: u64) -> bool {
    sent.saturating_sub(landed) < POSTED_LOW && unread < UNREAD_LOW
}

#[cfg(test)]
mod missed;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vi_that_only_receives_tells_its_posts_in_batches_while_the_peer_knows_enough() {
        // 64 receives told, none landed yet: the next 23 posts wait, the 24th goes.
        assert!(tell_later(false, 64 + 23, 64, 0, 0));
        assert!(!tell_later(false, 64 + 24, 64, 0, 0));
        // A VI that answers leaves its batch to its answer ([`Link::posted_urgent`]).
        assert!(tell_later(true, 64 + 7, 64, 0, 0));
        assert!(tell_later(true, 64 + 8, 64, 0, 0));
    }

    #[test]
    fn posts_are_told_at_once_when_the_peer_runs_low() {
        // 16 of those told are still unused: waiting is allowed; 15: the count goes now,
        // whether the VI answers or only receives.
        for answering in [false, true] {
            assert!(tell_later(answering, 41, 40, 24, 0));
            assert!(!tell_later(answering, 41, 40, 25, 0));
            assert!(!tell_later(answering, 41, 40, 25, UNREAD_LOW - 1));
        }
    }

    #[test]
    fn a_receiver_with_messages_waiting_to_be_taken_keeps_to_its_batches() {
        // All 64 told receives used and landed, 40 of them not taken yet: the reposts
        // wait for their batch (told one by one, each repost's write kept the receiver
        // behind); once fewer than 8 wait to be taken, a repost goes at once.
        assert!(tell_later(false, 64 + 23, 64, 64, 40));
        assert!(!tell_later(false, 64 + 24, 64, 64, 40));
        assert!(tell_later(false, 64 + 1, 64, 64, UNREAD_LOW));
        assert!(!tell_later(false, 64 + 1, 64, 64, UNREAD_LOW - 1));
    }
}
