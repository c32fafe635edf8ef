//! A long send, or an RDMA write, to a peer on this host in one straight line (issue 15,
//! the one-host 64 KiB streams): from the descriptor [`ViInner::send_short`] found in the
//! send queue's cache (no second look there), into the receive it learned (its buffers
//! from the note taken then, the peer's piece through the queue's hint), the completion
//! stored as the general path stores it. What the general path (`data.rs`'s `perform`,
//! `deliver.rs`) would answer with an error bit, or anything unusual (an RDMA read, a
//! receive too small, a piece gone, a transport failure, a slot refused; a piece or slot
//! the hint does not reach is looked up as the general path looks it up), is left to it:
//! `false`, and the descriptor goes the general way, which does all of it again. Bytes
//! copied on the way are copied again there, to the same place, if it copies at all (a
//! peer that went meanwhile gets nothing, and a receive that never completes holds them
//! unseen): the receiver sees nothing before the
//! entry's sequence number, and an RDMA write's target is undefined until it completes.
//!
//! An RDMA write without immediate data takes this line too, but only while a receive of
//! this connection is learned (the short path's first steps need one); a stream of RDMA
//! writes to a peer that posts no receives goes the general way.

use crate::layout::{control, status, Completion, Head};
use crate::link::{Link, PieceHint};
use crate::vi::ViInner;
use remora_sisci::UserRegion;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(test)]
thread_local! {
    /// Posts of this thread the straight line carried out: the tests tell it from the
    /// general path, whose results are the same.
    pub(crate) static LINES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The parts of the send queue a long send uses besides its cache (which lends the
/// descriptor).
pub(super) struct Long<'a> {
    pub(super) consumed: &'a mut u64,
    pub(super) seen: &'a mut u64,
    pub(super) rooms: &'a mut Vec<u32>,
    pub(super) heads: &'a mut Vec<Head>,
    pub(super) done: &'a mut VecDeque<(usize, u32)>,
    pub(super) hint: &'a mut PieceHint,
}

impl ViInner {
    /// Carry out `t` (`sources`: its memory, `size` bytes, within the transfer limit) into
    /// the peer's receive `k` of `room` bytes, whose ring B entry is `e`: a send whose
    /// payload does not travel in the entry, or an RDMA write (with immediate data it
    /// consumes that receive, as the general path's). `send_short` checked the rest: a
    /// connected peer of this host that did not go and wants no bell on every message,
    /// the descriptor's reserved bits clear and its memory registered under the VI's tag.
    /// `false`: no entry stored and no queue state changed but the piece hint, which only
    /// caches (bytes may have been copied, to the places the general path copies them
    /// again); the general path takes it.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn send_long(
        &self,
        q: Long<'_>,
        link: &Link,
        e: &[AtomicU64; 8],
        t: &crate::cache::Taken,
        sources: &[UserRegion],
        size: usize,
        room: u32,
        (addr, handle): (usize, u32),
    ) -> bool {
        let k = *q.consumed;
        let imm = t.control & control::IMMEDIATE != 0;
        let (entry, mine) = match t.control & control::OP_MASK {
            control::OP_SENDRECV => {
                // A receive too small is a length error of both: the general path's.
                if size > room as usize || self.scatter(q.heads, q.hint, link, k, sources).is_err() {
                    return false;
                }
                (Some((status::DONE | status::OP_RECEIVE, None)), status::OP_SEND)
            }
            control::OP_RDMAWRITE => {
                let Some(r) = t.remote else { return false };
                // The error bits (protection: the peer's enable bits, its region's, the
                // range) are the general path's to report.
                if self.rdma(q.hint, link, r, sources, true, imm) != 0 {
                    return false;
                }
                // With immediate data the completion goes as the general path's: no
                // payload, its length the write's.
                (imm.then_some((status::DONE | status::OP_REMOTE_RDMA_WRITE, Some(0))), status::OP_RDMA_WRITE)
            }
            _ => return false,
        };
        if let Some((st, carried)) = entry {
            let c = Completion::new(size as u32, st, imm.then_some(t.immediate));
            let [w0, w1] = c.words(carried);
            e[0].store(w0, Ordering::Release);
            e[1].store(w1, Ordering::Release);
            self.entry_stored(link, e, k, (q.consumed, q.seen), q.rooms, q.heads);
        }
        self.complete_send(q.done, addr, handle, t, status::DONE | mine);
        #[cfg(test)]
        LINES.with(|n| n.set(n.get() + 1));
        true
    }
}

#[cfg(test)]
mod tests;
