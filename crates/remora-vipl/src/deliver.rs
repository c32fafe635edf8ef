//! How a payload reaches the peer, and how completions come back.
//!
//! A receive posted on a connected VI is described in the peer's ring A (its size, and
//! where its buffers lie: piece segments and offsets): at once on this host, across hosts
//! at once, or a little later in batches, with this VI's next send when it answers its peer
//! (`Link::posted_later`). A send consumes the peer's next receive: it learns the receive's size from ring A (sizes are read in batches, when the
//! peer's posted count is looked at, which is only when the receives known are used up),
//! writes the payload — inside the completion entry when it is short ([`layout::INLINE`]),
//! else straight into the receiver's buffers (one copy on one host, one stream across
//! hosts) —, writes the completion entry with its sequence number last, and rings the
//! receiver's doorbell only when it sleeps. Across hosts the sender also stores the done
//! count after the entry, and the receiver reads the entry only once the count covers it.

use crate::cache::Taken;
use crate::data::Outcome;
use crate::layout::{self, status, Completion, ENTRIES, INLINE, INLINE_AT, SEQ};
use crate::link::direct::{is_short, Pump};
use crate::link::{Link, Miss};
use crate::posted::Posted;
use crate::vi::{lock, RecvQ, SendQ, ViInner, ViState, RELIABLE_RECEPTION, UNRELIABLE};
use crate::{Error, ErrorCode, Result};
use remora_sisci::UserRegion;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a send waits for a peer of this host to post a receive before the message
/// counts as one that found none. (5 ms broke streams under load: their receiving thread,
/// kept off the two cores that long, reposted too late.)
const RECEIVE_GRACE: Duration = Duration::from_millis(50);
/// The same for a peer on another host, whose posted count comes down the receiver's
/// channel and its node's thread (kept off the cores by a loaded machine, that took longer
/// than 5 ms to tell a receive posted before the send: the send broke the VI). 100 ms, the
/// next choice, broke a 64 KiB stream's VI in 5 of 30 runs of `remora bench vipl
/// --across-hosts` on two cores beside three CPU-bound processes (threads waited up to
/// 80 ms for a core there); 500 ms in none of 30.
const RECEIVE_GRACE_FAR: Duration = Duration::from_millis(500);
/// The same for an unreliable VI (the wait's length before 500 ms: a sender that outruns
/// its receiver loses those messages, as VIA allows, without being held up half a second
/// for each).
const RECEIVE_GRACE_FAR_UNRELIABLE: Duration = Duration::from_millis(100);
/// A send waiting for a peer on another host to post a receive yields the core for this
/// long, then sleeps on the peer's posted count (the post needs this host's node thread,
/// and the peer's threads on a shared machine, to run: a sender that kept yielding took a
/// core from them). The node thread that stores the count wakes its sleepers (the word is
/// the first of the VI segment, which the channel's flow wakes after each store of it,
/// `Request::DsmFlows`): a stream short of receives runs at its receiver's pace. Before,
/// nothing woke the word and the sender slept in slices of 100 µs after 1 ms of yielding
/// (issue 15). Sleeping at once was slower on a loaded machine (README, issue 15).
const FAR_NAP_AFTER: Duration = Duration::from_micros(100);
/// The longest sleep of [`FAR_NAP_AFTER`]'s sender before it looks again: a safety net for
/// a wake missed (a node that does not wake the word), and how soon a VI that left
/// CONNECTED (a disconnect, a lost peer) is noticed by a sender short of receives.
const FAR_NAP: Duration = Duration::from_millis(5);
/// How long a send waits for a freshly connected peer to describe its receives.
const READY_WAIT: Duration = Duration::from_secs(10);
/// The room of a ring A entry that is not of this connection ([`layout::ENTRY_CONN`]): no
/// receive (a real one holds at most [`crate::MAX_TRANSFER`] bytes).
pub(crate) const NOT_OURS: u32 = u32::MAX;

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
            cq.push(self.id, true);
        }
    }

    /// Record a completed send, RDMA write or RDMA read.
    pub(crate) fn complete_send(&self, sq: &mut SendQ, addr: usize, handle: u32, t: &Taken, st: u32) {
        self.nic.finish(&t.ctl, t.epoch, st, None, None);
        sq.done.push_back((addr, handle));
        if self.send_waiters.load(Ordering::Relaxed) > 0 {
            self.send_seq.fetch_add(1, Ordering::SeqCst);
            remora_sys::sync::futex_wake_all(&self.send_seq);
        }
        if let Some(cq) = &self.send_cq {
            cq.push(self.id, false);
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
            let taken_next = u64::from(pop && first.is_none() && !q.done.is_empty());
            l.posted_landed(landed, (landed - q.consumed + q.done.len() as u64).saturating_sub(taken_next));
        }
        Ok((broke, first))
    }

    #[inline(always)]
    fn own(&self, off: usize) -> u64 {
        self.map.load(off)
    }

    /// A flag of this VI's segment the peer raises ([`layout::PEER_READY`],
    /// [`layout::PEER_WAITING`]): up only when raised by this connection's peer.
    #[inline(always)]
    pub(crate) fn flag_up(&self, off: usize) -> bool {
        layout::untagged(self.conn(), self.own(off)).is_some_and(|v| v != 0)
    }

    /// The count of receives the peer described, near `k`: 0 when the word is of an
    /// earlier connection.
    #[inline]
    fn peer_posted(&self, k: u64) -> u64 {
        layout::count_in(self.conn(), self.own(layout::PEER_POSTED), k)
    }

    /// The size of the peer's receive number `k`, once it is described; `None` when it is
    /// not within the grace (or the peer never linked).
    fn peer_room(&self, sq: &mut SendQ, k: u64, grace: Duration) -> Option<u32> {
        if k >= sq.seen && !self.learn_posted(sq, k, grace) {
            return None;
        }
        sq.rooms.get(k as usize % ENTRIES).copied().filter(|r| *r != NOT_OURS)
    }

    /// Read the peer's posted count (waiting for receive `k` a moment) and the sizes of
    /// the receives new since the last look.
    fn learn_posted(&self, sq: &mut SendQ, k: u64, grace: Duration) -> bool {
        let conn = self.conn();
        let mut posted = layout::count_in(conn, self.own(layout::PEER_POSTED), k);
        // A count of this connection's peer (its number) is one it stored after describing
        // those receives: no need to look at its ready flag then.
        if posted <= k {
            let start = Instant::now();
            while !self.flag_up(layout::PEER_READY) {
                if start.elapsed() > READY_WAIT || *lock(&self.state) != ViState::Connected {
                    return false;
                }
                std::thread::yield_now();
            }
            let start = Instant::now();
            let mut n = 0u32;
            loop {
                posted = self.peer_posted(k);
                if posted > k {
                    break;
                }
                if start.elapsed() > grace {
                    return false;
                }
                n += 1;
                if n > 64 {
                    // A VI that left CONNECTED (a disconnect, a lost peer) waits no longer.
                    if n.is_multiple_of(64) && *lock(&self.state) != ViState::Connected {
                        return false;
                    }
                    if !self.peer_here.load(Ordering::Relaxed) && start.elapsed() > FAR_NAP_AFTER {
                        // The word read, then the count looked at once more: a store after
                        // the read changed the word (the wait returns at once), and its wake
                        // follows it. Every sleep ends with a look at the VI's state.
                        let seen = self.own(layout::PEER_POSTED) as u32;
                        if self.peer_posted(k) > k {
                            continue;
                        }
                        let left = grace.saturating_sub(start.elapsed());
                        self.map.wait_word(layout::PEER_POSTED, seen, left.min(FAR_NAP));
                        if *lock(&self.state) != ViState::Connected {
                            return false;
                        }
                    } else {
                        std::thread::yield_now();
                    }
                }
            }
        }
        self.learn_entries(&mut sq.rooms, &mut sq.heads, sq.seen, posted);
        sq.seen = posted;
        true
    }

    /// Consume the peer's next receive with `len` bytes from `sources` (none for an RDMA
    /// write's immediate data), and complete it with `st`. Returns the status bits for the
    /// sender's descriptor.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn deliver(
        &self,
        sq: &mut SendQ,
        link: &Link,
        reliable: bool,
        sources: Option<&[UserRegion]>,
        imm: Option<u32>,
        st: u32,
        len: u32,
    ) -> Outcome {
        let k = sq.consumed;
        // An unreliable VI's sender is not held up long by a receiver it outruns: its
        // messages may be dropped, and are after the shorter wait.
        let grace = match (link.map.is_local(), reliable) {
            (true, _) => RECEIVE_GRACE,
            (false, true) => RECEIVE_GRACE_FAR,
            (false, false) => RECEIVE_GRACE_FAR_UNRELIABLE,
        };
        let Some(room) = self.peer_room(sq, k, grace) else {
            // An RDMA write's bytes left queued for this completion go anyway.
            if link.is_far() && !link.push() {
                return Outcome {
                    bits: status::TRANSPORT_ERROR,
                    fail: Some((ErrorCode::ConnLost, false)),
                    ..Outcome::default()
                };
            }
            if !reliable {
                return Outcome::bits(0);
            }
            return Outcome {
                bits: status::TRANSPORT_ERROR,
                fail: Some((ErrorCode::ConnLost, false)),
                say: Some(ErrorCode::RecvqEmpty),
            };
        };
        let mut done = Completion { len, immediate: imm.unwrap_or(0), status: st };
        if imm.is_some() {
            done.status |= status::IMMEDIATE;
        }
        let sources = sources.unwrap_or(&[]);
        let size: usize = sources.iter().map(|s| s.len()).sum();
        let mut carried = false;
        let mut broke = None;
        if size > room as usize {
            done.status |= status::LENGTH_ERROR;
            done.len = 0;
            broke = Some(ErrorCode::PostDesc);
        } else if size <= INLINE {
            carried = true;
        } else {
            match self.scatter(sq, link, k, sources) {
                Ok(()) => {}
                // The receive's memory was deregistered since the peer described it (the
                // piece is gone): a protection error of that receive, as the peer finds
                // for memory deregistered under it; a reliable VI breaks as for a receive
                // too short. Told at once, not after a connect's wait for the piece.
                Err(Miss::Gone) => {
                    done.status |= status::PROTECTION_ERROR;
                    done.len = 0;
                    broke = Some(ErrorCode::PostDesc);
                }
                Err(Miss::Failed) => {
                    done.status |= status::TRANSPORT_ERROR;
                    broke = Some(ErrorCode::ConnLost);
                }
            }
        }
        let at = layout::completion_at(k);
        let here = link.map.is_local();
        if here {
            // Straight into the entry: its two words, then the short payload from the
            // program's memory, no copy on the way.
            let [w0, w1] = done.words(carried.then_some(size));
            link.map.store(at, w0);
            link.map.store(at + 8, w1);
            if carried {
                // Gathered here, then stored as words: no copy routine called on the way.
                let mut b = [0u8; INLINE];
                let mut o = 0;
                for s in sources {
                    let _ = s.read(0, &mut b[o..o + s.len()]);
                    o += s.len();
                }
                for (i, w) in b[..size.div_ceil(8) * 8].chunks_exact(8).enumerate() {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(w);
                    link.map.store(at + INLINE_AT + i * 8, u64::from_ne_bytes(a));
                }
            }
        } else {
            let mut inline = [0u8; INLINE];
            if carried {
                let mut o = 0;
                for s in sources {
                    let _ = s.read(0, &mut inline[o..o + s.len()]);
                    o += s.len();
                }
            }
            // Down the channel after the payload: the entry, its sequence number, then
            // the done count (the receiver looks at the count first, and reads the entry
            // only once the count covers it; the peer's node wakes it if it sleeps on the
            // count). Sent without waiting (reliable delivery: the send completes once its
            // bytes are on their way in order on a stream whose failure breaks the VI),
            // landed first for reliable reception, and before a CQ's bell is rung (the
            // bell travels another path).
            let line = done.encode(carried.then(|| &inline[..size]));
            let next = link.tag(k + 1).to_le_bytes();
            let wait = link.peer.bell_always || self.attrs().reliability == RELIABLE_RECEPTION;
            // The entry and its sequence number are one line: one frame (the peer's node
            // stores its bytes in order), then the count.
            let mut whole = [0u8; SEQ + 8];
            whole[..SEQ].copy_from_slice(&line);
            whole[SEQ..].copy_from_slice(&next);
            let short = is_short(done.status, carried);
            let sent = link.far(|c| {
                // A short message after a short one goes on the pair's own stream, read by
                // the receiving process itself; the channel's queued stores stay queued.
                if let Some(d) = link.direct().filter(|_| !wait) {
                    if d.send(k, &whole, short).map_err(|e| Error::Resource(e.to_string()))? {
                        link.sent_direct();
                        // A posted count that waits goes too when a batch waits, the peer runs
                        // low (while fewer than 8 of its messages wait here to be taken) or the
                        // watcher could not send it (a loop of sends holding the channel's
                        // lock), a write of its own (counted). The message is sent: a failure
                        // here only marks the link.
                        if link.posted_urgent() {
                            let posted = link.posted_queued();
                            if c.send(false).is_ok() {
                                link.posted_told_alone(posted);
                            } else {
                                link.failed.store(true, Ordering::Release);
                            }
                        }
                        return Ok(());
                    }
                }
                c.push_vi(at, &whole)?;
                c.push_vi(layout::DONE, &next)?;
                // Read under the channel's lock: a posted count queued before it leaves now.
                let posted = link.posted_queued();
                c.send(wait)?;
                link.posted_left(posted);
                Ok(())
            });
            if sent.is_none_or(|r| r.is_err()) {
                broke = Some(ErrorCode::ConnLost);
            }
        }
        if here {
            link.store(at + SEQ, link.tag(k + 1));
        }
        sq.consumed = k + 1;
        // On this host no barrier between the entry and the look at the peer's waiting
        // flag (it would stall every send until the entry's line reached this core): a
        // receiver that raised the flag watches the ring a moment longer before it sleeps
        // (`Vi::recv_wait`), so an entry whose sender read a stale flag is still seen.
        // Across hosts the entry landed before the look (a receiver that raised its flag
        // after it sees the entry; one that raised it before is rung).
        if link.peer.bell_always && here {
            fence(Ordering::SeqCst);
        }
        // A receiver on another host that sleeps waits on its done count, which its node
        // wakes after the count's store: only a CQ's bell is rung.
        if link.peer.bell_always || (here && self.flag_up(layout::PEER_WAITING)) {
            link.ring();
        }
        match broke {
            Some(ErrorCode::ConnLost) if !here => Outcome {
                bits: status::TRANSPORT_ERROR,
                fail: Some((ErrorCode::ConnLost, false)),
                ..Outcome::default()
            },
            // Reliable reception completes the send with the receive's outcome: a receive
            // that refused it (too short) fails the send too, and the VI breaks as below
            // (the post path breaks it for an error bit, telling the peer).
            Some(ErrorCode::PostDesc) if self.attrs().reliability == RELIABLE_RECEPTION => {
                Outcome::bits(status::REMOTE_DESC_ERROR)
            }
            Some(code) if reliable || code == ErrorCode::ConnLost => {
                Outcome { fail: Some((code, true)), ..Outcome::default() }
            }
            _ => Outcome::default(),
        }
    }
}

impl ViInner {
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
