//! Taking in the completions the peer wrote into this VI's ring B (on this host read in
//! place; across hosts once the done count covers them, or as the pair's own stream brings
//! them), and recording completed receives for reaping.

use crate::layout::{self, status, Completion, INLINE_AT, SEQ};
use crate::link::direct::{is_short, Pump};
use crate::link::Link;
use crate::posted::Posted;
use crate::vi::{RecvQ, ViInner, UNRELIABLE};
use crate::{ErrorCode, Result};
use remora_sisci::UserRegion;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A completed receive as `VipRecvDone` gives it: (descriptor address, its memory handle).
type Reaped = (usize, u32);

impl ViInner {
    /// Record a completed receive (the descriptor in user memory, the done queue, the CQ).
    pub(crate) fn complete_recv(&self, q: &mut RecvQ, p: &Posted, st: u32, len: u32, imm: Option<u32>) {
        self.nic.finish(&p.ctl, p.epoch, st, Some(len), imm);
        self.record_recv(q, (p.addr, p.handle));
    }

    /// Queue a receive whose descriptor is complete for reaping.
    pub(crate) fn record_recv(&self, q: &mut RecvQ, d: (usize, u32)) {
        q.done.push_back(d);
        self.recv_ready.store(q.done.len(), Ordering::Release);
        if let Some(cq) = &self.recv_cq {
            cq.push(self.id, true, d.0);
        }
    }

    /// Every receive still posted completes flushed (the VI broke or disconnected).
    pub(crate) fn flush_receives(&self) {
        let mut q = self.recv.lock();
        self.settle(&mut q);
        while let Some(p) = q.posted.pop_front() {
            self.complete_recv(
                &mut q,
                &p,
                status::DONE | status::OP_RECEIVE | status::DESC_FLUSHED_ERROR,
                0,
                None,
            );
        }
    }

    /// Take in the completions the peer wrote. A completion with an error breaks a
    /// reliable VI at once (the peer's side broke when it wrote it).
    pub(crate) fn reap(self: &Arc<Self>) -> Result<()> {
        self.reap_and(false).map(|_| ())
    }

    /// [`ViInner::reap`], and take the oldest completed receive out (`VipRecvDone`) when
    /// `pop`, under the same lock.
    pub(crate) fn reap_and(self: &Arc<Self>, pop: bool) -> Result<Option<(usize, u32)>> {
        if self.recv_ready.load(Ordering::Acquire) == 0 && !self.completion_in_sight() {
            // Nothing to take: the time to take in and describe what posts left (one may
            // complete at once).
            self.describe_pending();
            if self.recv_ready.load(Ordering::Acquire) == 0 {
                self.check_peer_now_and_then();
                return Ok(None);
            }
        }
        let (broke, got) = {
            let mut q = self.recv.lock();
            self.settle(&mut q);
            if pop {
                if let Some(d) = self.recv_short(&mut q) {
                    return Ok(Some(d));
                }
            }
            let (broke, first) = self.take_completions_locked(&mut q, pop)?;
            let got = if pop { first.or_else(|| q.done.pop_front()) } else { None };
            self.recv_ready.store(q.done.len(), Ordering::Release);
            (broke, got)
        };
        if let Some(addr) = broke {
            if self.attrs().reliability != UNRELIABLE {
                self.fail(ErrorCode::PostDesc, Some(addr), false);
            }
        }
        // A receive taken out for `VipRecvDone` goes back at once: what the peer said is
        // looked at by the polls that find nothing (this one was on the path of every
        // message).
        if got.is_none() {
            self.check_peer_now_and_then();
        }
        Ok(got)
    }

    /// Whether the peer wrote the next completion (a look without the lock: a stale
    /// answer only delays a completion to the next poll).
    fn completion_in_sight(&self) -> bool {
        let k = self.recv_next.load(Ordering::Acquire);
        let conn = self.conn();
        if self.peer_here.load(Ordering::Relaxed) {
            self.map.load(layout::completion_at(k) + SEQ) == layout::tagged(conn, k + 1)
        } else if layout::count_in(conn, self.map.load(layout::DONE), k) > k {
            true
        } else {
            // The pair's own stream: what it holds is taken in (into this VI's ring).
            self.link().is_some_and(|l| l.direct().is_some_and(|d| d.holds(&self.map, &self.recv_next, k)))
        }
    }

    /// Complete the receives the peer completed; the first that failed, if one did.
    pub(crate) fn take_completions(&self) -> Result<Option<usize>> {
        let mut q = self.recv.lock();
        self.settle(&mut q);
        self.take_completions_locked(&mut q, false).map(|(broke, _)| broke)
    }

    /// [`ViInner::take_completions`]; with `pop`, the oldest completed receive comes back
    /// too when none waited to be reaped and no completion queue is told (it goes straight
    /// to `VipRecvDone`, not through the done queue).
    fn take_completions_locked(
        &self,
        q: &mut RecvQ,
        mut pop: bool,
    ) -> Result<(Option<usize>, Option<Reaped>)> {
        let here = self.peer_here.load(Ordering::Relaxed);
        let conn = self.conn();
        let mut first = None;
        // The caller takes the oldest completed receive out right after (`reap_and`).
        let taking = pop;
        pop &= q.done.is_empty() && self.recv_cq.is_none();
        let mut broke = None;
        let mut done = None;
        let far_link = if here { None } else { q.link.as_ref().map(|(l, _)| l.clone()) };
        let direct = far_link.as_deref().and_then(Link::direct);
        // The pair's stream is read at most once per call, for the first completion.
        let start = q.consumed;
        while !q.posted.is_empty() {
            let k = q.consumed;
            // Not covered by the done count: it may have come on the pair's own stream.
            if !here
                && *done.get_or_insert_with(|| layout::count_in(conn, self.map.load(layout::DONE), k)) <= k
                && !direct.is_some_and(|d| {
                    if k == start {
                        d.holds(&self.map, &self.recv_next, k)
                    } else {
                        d.has(k)
                    }
                })
            {
                break;
            }
            let at = layout::completion_at(k);
            // A completion of an earlier connection of this VI (a store that landed late)
            // carries another number: not this receive's. Or one the count covers (a later
            // message's, by the channel) that came on the pair's stream and waits in its
            // socket: read once (a poll reads nothing else).
            if self.map.load(at + SEQ) != layout::tagged(conn, k + 1)
                && !direct.is_some_and(|d| k == start && !d.has(k) && d.holds(&self.map, &self.recv_next, k))
            {
                break;
            }
            // This VI's own segment, always on this host: the entry's words are read in
            // place, and a short payload goes from the entry straight into the buffers.
            let (c, inline) = Completion::from_words([self.map.load(at), self.map.load(at + 8)]);
            let Some(p) = q.posted.front() else { break };
            if let Some(d) = direct {
                // Taken by the channel right after a short one: its mark is read off the
                // stream (else marks pile up there behind a receiver that lags).
                if d.owes_mark(k) {
                    d.pump(&self.map, &self.recv_next, Pump::Now);
                }
                d.took(is_short(c.status, inline.is_some()));
            }
            let mut st = c.status;
            // Memory deregistered while the receive was posted fails it, whatever the
            // peer wrote (its pages went private at the deregistration: nothing landed).
            if !self.nic.still_registered_all(&p.bufs, p.epoch)
                || inline.is_some_and(|n| self.scatter_inline(at + INLINE_AT, n, &p.bufs).is_err())
            {
                st |= status::PROTECTION_ERROR;
            }
            let imm = (st & status::IMMEDIATE != 0).then_some(c.immediate);
            if st & status::ERROR_MASK != 0 && broke.is_none() {
                broke = Some(p.addr);
                // Noted before the lock goes: a thread that breaks the VI before this
                // one does (the watcher, seeing the peer's word) reports this receive.
                if q.broke.is_none() && self.attrs().reliability != UNRELIABLE {
                    q.broke = Some(p.addr);
                }
            }
            self.nic.finish(&p.ctl, p.epoch, st, Some(c.len), imm);
            let d = (p.addr, p.handle);
            q.posted.advance();
            q.consumed += 1;
            // At once: the stream's reader lets no frame into a slot not taken yet.
            self.recv_next.store(q.consumed, Ordering::Release);
            if pop {
                first = Some(d);
                pop = false;
            } else {
                self.record_recv(q, d);
            }
        }
        self.recv_next.store(q.consumed, Ordering::Release);
        // A count of posts that waits goes when the peer runs low and the program is
        // about to run out of messages (looked at on every take: also one that found
        // nothing new, by a program that took what it had).
        if let Some(l) = far_link {
            let landed = done.unwrap_or(0).max(q.consumed);
            // The message the caller takes from the done queue right after is not unread.
            // (`pop` no longer tells: it is cleared whenever the done queue held one.)
            let taken_next = u64::from(taking && first.is_none() && !q.done.is_empty());
            l.posted_landed(landed, (landed - q.consumed + q.done.len() as u64).saturating_sub(taken_next));
        }
        Ok((broke, first))
    }

    /// Copy the `len` payload bytes that arrived inside a completion (at `at` of this VI's
    /// segment) into the receive's buffers.
    fn scatter_inline(&self, mut at: usize, mut len: usize, bufs: &[UserRegion]) -> Result<()> {
        for b in bufs {
            let n = b.len().min(len);
            self.map.read_into(at, b, 0, n)?;
            at += n;
            len -= n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
