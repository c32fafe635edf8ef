//! The short message between two VIs of this host, in one straight line: a send whose
//! payload travels inside the completion entry ([`layout::INLINE`] bytes at most), from a
//! descriptor posted before as it is now, into a receive whose size the sender knows
//! already; and the taking of such a completion. A long send or an RDMA write found the
//! same way goes on from here in a straight line of its own (`short/long.rs`). Everything
//! else (and anything unusual on the way: an error to report, a receive not described
//! yet, a peer that asked for the bell on every message) goes the general way of `data.rs`
//! and `deliver.rs`, which these only shorten, never change: the same words are stored in
//! the same order, the same descriptor fields written.
//!
//! On one host a message's latency is the receiver's work from seeing the entry to the
//! answer's entry: its reap, its post of the receive again, and the answer's send up to its
//! sequence number. Each layer of the general path (a descriptor's outcome built and
//! matched, its link lent out of the queue and back, the registrations asked twice) costs a
//! few nanoseconds there.

use crate::deliver::NOT_OURS;
use crate::layout::{self, control, status, Completion, Head, ENTRIES, INLINE, INLINE_AT, SEQ};
use crate::link::Link;
use crate::vi::{RecvQ, SendQ, ViInner};
use remora_sisci::UserRegion;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

// A ring B entry is one line of words: the completion's two, the inline payload's, the
// sequence number last (what `Window::line` hands out).
const _: () = assert!(
    layout::COMPLETION == 64 && INLINE_AT.is_multiple_of(8) && INLINE_AT + INLINE <= SEQ && SEQ == 56
);

impl ViInner {
    /// `VipPostSend` of a send or RDMA write to a peer on this host in a straight line (a
    /// short send here, a long one or an RDMA write in `long.rs`: see the module docs),
    /// under the send queue's lock. `false` when it is not one: no entry stored and no
    /// queue state changed but the piece hint, which only caches (a long one's bytes may
    /// have been copied), the general path takes it.
    #[inline]
    pub(crate) fn send_short(&self, sq: &mut SendQ, addr: usize, handle: u32) -> bool {
        let SendQ { consumed, seen, rooms, heads, cache, link, done, hint } = sq;
        let Some((link, attrs)) = link.as_ref() else { return false };
        let Some(map) = link.map.0.as_ref() else { return false };
        let k = *consumed;
        // A receive described already (else the general path looks at the count, and
        // waits for it), not of another connection, and no bell wanted on every message.
        if k >= *seen || link.peer.bell_always || link.broken.load(Ordering::Acquire) {
            return false;
        }
        let Some(&room) = rooms.get(k as usize % ENTRIES) else { return false };
        // The entry's line, checked once for its four stores.
        let Some(e) = map.line(layout::completion_at(k)) else { return false };
        let Some(t) = cache.hit(&self.nic, addr, handle, attrs.ptag, false) else { return false };
        // No reserved bit, its memory registered under the VI's tag.
        if t.control & control::RESERVED != 0 || t.too_many {
            return false;
        }
        let Some(sources) = &t.local else { return false };
        // The sources' lengths summed when it was read (a send's every segment is a
        // source; its segments compared equal since): no loop over them here.
        let size = t.total as usize;
        let max = attrs.max_transfer.min(link.peer.max_transfer) as usize;
        if size > max || room == NOT_OURS || self.peer_said() != 0 {
            return false;
        }
        // A long send or an RDMA write: its own straight line (`short/long.rs`), from
        // this descriptor as found here.
        if size > INLINE || t.control & control::OP_MASK != 0 {
            let q = Long { consumed, seen, rooms, heads, done, hint };
            return self.send_long(q, link, e, t, sources, size, room, (addr, handle));
        }
        if size > room as usize {
            return false;
        }
        let imm = (t.control & control::IMMEDIATE != 0).then_some(t.immediate);
        let c = Completion::new(size as u32, status::DONE | status::OP_RECEIVE, imm);
        // The entry's words, then the payload's, stored as words: no copy routine called
        // on the way.
        let [w0, w1] = c.words(Some(size));
        e[0].store(w0, Ordering::Release);
        e[1].store(w1, Ordering::Release);
        let words = &e[INLINE_AT / 8..SEQ / 8];
        if let [src] = sources.as_slice() {
            // One source (`size` bytes: its length): its words straight into the entry.
            words_from(src, size, words);
        } else {
            // Several: gathered here first.
            let mut b = [0u8; INLINE];
            let mut o = 0;
            for s in sources.iter() {
                gather(s, &mut b[o..o + s.len()]);
                o += s.len();
            }
            for (w, c) in words.iter().zip(b[..size.div_ceil(8) * 8].chunks_exact(8)) {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                w.store(u64::from_ne_bytes(a), Ordering::Release);
            }
        }
        self.entry_stored(link, e, k, (consumed, seen), rooms, heads);
        self.complete_send(done, addr, handle, t, status::DONE | status::OP_SEND);
        true
    }

    /// The end of a straight line's entry `e` for the peer's receive `k` (its other words
    /// stored already): its sequence number last, the receive consumed, the peer rung when
    /// it waits, and the receives it described since taken in when this used the last one
    /// known.
    #[inline(always)]
    fn entry_stored(
        &self,
        link: &Link,
        e: &[AtomicU64; 8],
        k: u64,
        (consumed, seen): (&mut u64, &mut u64),
        rooms: &mut Vec<u32>,
        heads: &mut Vec<Head>,
    ) {
        e[SEQ / 8].store(link.tag(k + 1), Ordering::Release);
        *consumed = k + 1;
        // No barrier before the look at the flag (see `ViInner::deliver`).
        if self.flag_up(layout::PEER_WAITING) {
            link.ring();
        }
        if *consumed == *seen {
            self.learn_ahead(seen, rooms, heads, k + 1);
        }
    }

    /// The receives the peer described since its count was read last, taken in right
    /// after the send that used the last one known, while that message is on its way: the
    /// next send would otherwise read the count (its line last written by the peer's core)
    /// and the new ring A entries on its own path, and go the general way for it. What
    /// `learn_posted` (`deliver/learn.rs`) does, without its wait: nothing new, nothing
    /// learnt. The entries are read as there ([`ViInner::learn_entries`]: sizes and where
    /// the buffers lie), so a long send to a receive learned here reads no entry again.
    #[inline(never)]
    fn learn_ahead(&self, seen: &mut u64, rooms: &mut Vec<u32>, heads: &mut Vec<Head>, k: u64) {
        let posted = layout::count_in(self.conn(), self.map.load(layout::PEER_POSTED), k);
        if posted <= *seen {
            return;
        }
        self.learn_entries(rooms, heads, *seen, posted);
        *seen = posted;
    }

    /// `VipRecvDone` with a peer on this host, no completed receive waiting and no post
    /// waiting to be taken in: one look at the next completion's sequence number, and when
    /// it is there and plain, [`ViInner::recv_short`]. `Some(None)` when nothing completed
    /// (what [`ViInner::reap_and`] answers then, its look at the peer done), `Some(Some)`
    /// the receive taken; `None`: ask `reap_and` (nothing was done).
    #[inline(always)]
    pub(crate) fn poll_short(self: &Arc<Self>) -> Option<Option<(usize, u32)>> {
        if self.recv_ready.load(Ordering::Acquire) != 0
            || !self.peer_here.load(Ordering::Relaxed)
            || self.undescribed.load(Ordering::Relaxed)
            || self.recv_cq.is_some()
        {
            return None;
        }
        let k = self.recv_next.load(Ordering::Acquire);
        let conn = self.conn();
        // The entry's line (this VI's own segment, always mapped here), checked once for
        // the look and the loads after it.
        let e = self.map.line(layout::completion_at(k))?;
        if e[SEQ / 8].load(Ordering::Acquire) != layout::tagged(conn, k + 1) {
            self.check_peer_now_and_then();
            return Some(None);
        }
        let mut q = self.recv.lock();
        self.settle(&mut q);
        self.recv_short_seen(&mut q, k, conn, e).map(Some)
    }

    /// [`ViInner::recv_short`] when completion `k` (its entry `e`) was seen there already
    /// under connection `conn` (its sequence number looked at since the last receive was
    /// taken, with no completion queue told and a peer on this host): not looked at again
    /// while the queue still waits for that one (another thread may have taken it
    /// meanwhile) under the same connection (a disconnect meanwhile starts the count at
    /// zero again, under a new number taken under this lock, and a receive posted after it
    /// must not be completed with the old connection's entry) with the peer still on this
    /// host (looked at again: the number is taken at the disconnect's reset, but where the
    /// peer is changes only at the next connection, under that same number, so a poll that
    /// looked before a reconnect to another host would match it; the completion queue is
    /// the VI's for life). A completion stays in its entry until its receive is taken and
    /// posted again, so what was seen is still there.
    #[inline(always)]
    fn recv_short_seen(&self, q: &mut RecvQ, k: u64, conn: u32, e: &[AtomicU64; 8]) -> Option<(usize, u32)> {
        if q.done.is_empty()
            && q.consumed == k
            && self.conn() == conn
            && self.peer_here.load(Ordering::Relaxed)
        {
            return self.take_entry(q, k, e);
        }
        self.take_short(q)
    }

    /// `VipRecvDone` of the next completion when it is a plain one from a peer on this
    /// host (no error, registrations unchanged, its payload, if it travelled in the entry,
    /// for one buffer), under the receive queue's lock, with no completed receive waiting
    /// and no completion queue told. `None` when it is not: nothing was done.
    #[inline(always)]
    pub(crate) fn recv_short(&self, q: &mut RecvQ) -> Option<(usize, u32)> {
        self.take_short(q)
    }

    /// [`ViInner::recv_short`].
    #[inline(always)]
    fn take_short(&self, q: &mut RecvQ) -> Option<(usize, u32)> {
        if !q.done.is_empty() || self.recv_cq.is_some() || !self.peer_here.load(Ordering::Relaxed) {
            return None;
        }
        let k = q.consumed;
        // The entry's line, checked once for its loads.
        let e = self.map.line(layout::completion_at(k))?;
        if e[SEQ / 8].load(Ordering::Acquire) != layout::tagged(self.conn(), k + 1) {
            return None;
        }
        self.take_entry(q, k, e)
    }

    /// Take completion `k` (its entry `e`, its sequence number seen there) for the oldest
    /// posted receive, when it is plain (see [`ViInner::recv_short`]); `None`: nothing was
    /// done.
    #[inline(always)]
    fn take_entry(&self, q: &mut RecvQ, k: u64, e: &[AtomicU64; 8]) -> Option<(usize, u32)> {
        let (c, inline) =
            Completion::from_words([e[0].load(Ordering::Acquire), e[1].load(Ordering::Acquire)]);
        let p = q.posted.front()?;
        // A payload in the entry goes to a receive of one buffer that holds it.
        let into = match (inline, p.bufs.as_slice()) {
            (None, _) => None,
            (Some(n), [buf]) if n <= buf.len() => Some((n, buf)),
            _ => return None,
        };
        if c.status & status::ERROR_MASK != 0 || self.nic.inner.mem_epoch.load(Ordering::Acquire) != p.epoch {
            return None;
        }
        if let Some((n, buf)) = into {
            words_to(&e[INLINE_AT / 8..SEQ / 8], n, buf);
        }
        // The registrations are those the receive was posted under: its descriptor is
        // written in place (as `Nic::finish` does), the status last.
        if c.status & status::IMMEDIATE != 0 {
            let _ = p.ctl.write(20, &c.immediate.to_le_bytes());
        }
        let _ = p.ctl.write(24, &c.len.to_le_bytes());
        fence(Ordering::Release);
        let _ = p.ctl.write(28, &c.status.to_le_bytes());
        let d = (p.addr, p.handle);
        q.posted.advance();
        q.consumed = k + 1;
        self.recv_next.store(q.consumed, Ordering::Release);
        Some(d)
    }
}

/// `out.len()` bytes of `src` from its start, whole words as words (a copy of a length
/// known only when it runs is a call to `memmove`).
#[inline(always)]
fn gather(src: &UserRegion, out: &mut [u8]) {
    let mut words = out.chunks_exact_mut(8);
    let mut o = 0;
    for w in &mut words {
        let mut a = [0u8; 8];
        let _ = src.read(o, &mut a);
        w.copy_from_slice(&a);
        o += 8;
    }
    let rest = words.into_remainder();
    if !rest.is_empty() {
        let _ = src.read(o, rest);
    }
}

/// The first `len` bytes of `src` into the words `out`, a word at a time (the last one's
/// bytes past `len` zero): a short payload's one source straight into its entry.
#[inline(always)]
fn words_from(src: &UserRegion, len: usize, out: &[AtomicU64]) {
    for (i, w) in out.iter().enumerate().take(len.div_ceil(8)) {
        let mut a = [0u8; 8];
        let rest = len - i * 8;
        let _ = if rest >= 8 { src.read(i * 8, &mut a) } else { src.read(i * 8, &mut a[..rest]) };
        w.store(u64::from_ne_bytes(a), Ordering::Release);
    }
}

/// The first `len` bytes the words `words` hold into `dst` from its start, a word at a
/// time: a short payload out of its entry into its receive's one buffer.
#[inline(always)]
fn words_to(words: &[AtomicU64], len: usize, dst: &UserRegion) {
    for (i, w) in words.iter().enumerate().take(len.div_ceil(8)) {
        let a = w.load(Ordering::Acquire).to_ne_bytes();
        let rest = len - i * 8;
        let _ = if rest >= 8 { dst.write(i * 8, &a) } else { dst.write(i * 8, &a[..rest]) };
    }
}

mod long;
use long::Long;

#[cfg(test)]
mod tests;
