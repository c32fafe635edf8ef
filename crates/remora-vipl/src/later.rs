//! Receives posted now and taken in a little later, off the path of a message.
//!
//! An echo reaps a message, posts its receive again, and answers: everything the post does
//! lies between the message's arrival and the answer's. With a peer on this host, a VI that
//! answers (it sent since its last post) and whose peer still knows enough receives it has
//! not used, a post whose descriptor is the one the queue saw last at that address (same
//! memory handle, protection tag, registrations and segment count: so it lies in
//! registered memory, and no error the call returns can come of it) only clears the
//! descriptor's status and is noted. What a post does otherwise (the descriptor's segments
//! read and checked, the receive queued, and described in the peer's ring A) follows at the
//! VI's next send once its completion is stored, the next poll that finds nothing, any
//! other call that looks at the receive queue (before it looks), or the NIC's watcher
//! within 20 ms (two of its looks: see [`ViInner::describe_stale`]): well inside the grace
//! a sender gives a receive to appear, and the peer knows [`DESCRIBED_LOW`] others
//! meanwhile. A descriptor whose segments turn out bad then
//! completes with the same status as when posted (a protection error), only a moment
//! later; one whose VI broke or disconnected meanwhile completes flushed.

use crate::layout::{status, ENTRIES};
use crate::posted::Posted;
use crate::vi::{RecvQ, ViInner, DEFER_MAX};
use crate::Error;
use std::sync::atomic::Ordering;

/// Receives are described later only while the peer still knows at least this many it has
/// not used (as far as the completions taken in here tell).
const DESCRIBED_LOW: u64 = 16;

/// What [`ViInner::post_later`] did with a post (a word, where an answer with the error
/// in it was built and copied out on the echo's path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Later {
    /// Noted, to be taken in later: the post succeeded.
    Noted,
    /// Refused: the receive queue is full ([`full`]).
    Full,
    /// Not noted: it must be taken in now (nothing was done).
    Now,
}

/// A post refused: the receive queue is full.
#[cold]
pub(crate) fn full() -> Error {
    Error::Resource(format!("{ENTRIES} receives posted"))
}

impl ViInner {
    /// Whether the receives posted up to `end` may be described a little later (see the
    /// module doc; the receives themselves are queued).
    pub(crate) fn describe_later(&self, q: &RecvQ, end: u64) -> bool {
        if !self.sent_since_post.load(Ordering::Relaxed) {
            return false;
        }
        self.sent_since_post.store(false, Ordering::Relaxed);
        if end - q.pushed > DEFER_MAX as u64
            || q.pushed.saturating_sub(q.consumed) < DESCRIBED_LOW
            || !self.nic.watcher_runs()
        {
            return false;
        }
        self.undescribed.store(true, Ordering::Relaxed);
        true
    }

    /// `VipPostRecv` on a connected VI with a peer on this host, noted to be taken in
    /// later when it may be (see the module doc): [`Later::Now`] when the post must be
    /// taken in now.
    #[inline(always)]
    pub(crate) fn post_later(&self, q: &mut RecvQ, addr: usize, handle: u32) -> Later {
        let Some((link, ptag)) = q.link.as_ref() else { return Later::Now };
        if q.pending.n >= DEFER_MAX
            || !link.map.is_local()
            || link.broken.load(Ordering::Acquire)
            || !self.sent_since_post.load(Ordering::Relaxed)
            || q.pushed.saturating_sub(q.consumed) < DESCRIBED_LOW
            || !self.nic.watcher_runs()
        {
            return Later::Now;
        }
        // Found registered as it was, at the registrations' epoch of now.
        let Some(ctl) = q.cache.unchanged(&self.nic, addr, handle, *ptag) else { return Later::Now };
        if q.posted.len() + q.pending.n >= ENTRIES {
            return Later::Full;
        }
        self.sent_since_post.store(false, Ordering::Relaxed);
        // Its status cleared, as `Nic::finish` would (which would look at the epoch again).
        let _ = ctl.write(28, &0u32.to_le_bytes());
        q.pending.posts[q.pending.n] = (addr, handle, *ptag);
        q.pending.n += 1;
        // Counted under the queue's lock: a plain store, no locked instruction.
        self.noted.store(self.noted.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.undescribed.store(true, Ordering::Relaxed);
        Later::Noted
    }

    /// Take in the posts [`ViInner::post_later`] noted, in order: each is queued, or
    /// completes at once as when posted (segments not registered: a protection error; the
    /// VI broke or disconnected meanwhile: flushed).
    #[inline(always)]
    pub(crate) fn settle(&self, q: &mut RecvQ) {
        if q.pending.n != 0 {
            self.settle_noted(q);
        }
    }

    /// [`ViInner::settle`] when posts were noted.
    #[inline(never)]
    fn settle_noted(&self, q: &mut RecvQ) {
        let n = std::mem::take(&mut q.pending.n);
        let usable = q.link.as_ref().is_some_and(|(l, _)| !l.broken.load(Ordering::Acquire));
        for i in 0..n {
            let (addr, handle, ptag) = q.pending.posts[i];
            let t = match q.cache.take(&self.nic, addr, handle, ptag, true) {
                Ok(t) => t,
                Err(_) => {
                    // Its memory was deregistered since it was posted: reaped as it is.
                    self.record_recv(q, (addr, handle));
                    continue;
                }
            };
            let bad = t.too_many || t.local.is_none();
            if bad || !usable {
                let p = Posted::of(addr, handle, t);
                let why = if bad { status::PROTECTION_ERROR } else { status::DESC_FLUSHED_ERROR };
                self.complete_recv(q, &p, status::DONE | status::OP_RECEIVE | why, 0, None);
            } else {
                q.posted.push(addr, handle, t);
            }
        }
    }

    /// The NIC's watcher: take in what posts left when they waited since its previous look
    /// (one in the instant between a post and the send that takes it in is left to that
    /// send: the watcher taking the queue's lock would take it away from the VI's thread).
    pub(crate) fn describe_stale(&self) {
        let noted = self.noted.load(Ordering::Relaxed);
        if self.noted_seen.load(Ordering::Relaxed) != noted {
            self.noted_seen.store(noted, Ordering::Relaxed);
            return;
        }
        self.describe_pending();
    }

    /// A send's completion is stored: what a post of this VI left undescribed goes now.
    #[inline]
    pub(crate) fn sent_now(&self) {
        if !self.sent_since_post.load(Ordering::Relaxed) {
            self.sent_since_post.store(true, Ordering::Relaxed);
        }
        self.describe_pending();
    }

    /// Take in what posts left, and describe it to the peer.
    pub(crate) fn describe_pending(&self) {
        if !self.undescribed.load(Ordering::Relaxed) {
            return;
        }
        let mut q = self.recv.lock();
        self.undescribed.store(false, Ordering::Relaxed);
        self.settle(&mut q);
        let end = q.consumed + q.posted.len() as u64;
        if q.pushed >= end {
            return;
        }
        // Lent out of the queue as `Vi::post_recv` does (a peer on this host: never fails).
        if let Some((link, ptag)) = q.link.take() {
            let _ = self.describe(&mut q, &link, end);
            q.link = Some((link, ptag));
        }
    }
}

#[cfg(test)]
mod tests;
