//! RMA completion in ticket order, for fences.
//!
//! A fence mark is the count of RMAs a side has started; the fence is reached when every
//! RMA *started before the mark* has completed. A count of finished RMAs cannot tell
//! that: a later RMA that finishes quickly counts in place of an earlier slow one. So each
//! RMA takes a ticket (the started count, incremented), and on completion sets its bit in
//! a ring of [`RMA_RING_BITS`] bits in the region; the done count advances only over
//! contiguous set bits, clearing them, and is then exactly "every ticket below it has
//! completed". Whoever completes advances it, so no thread waits for another.
//!
//! The common case costs little more than the two counters did: an RMA that completes
//! while it is the oldest in flight moves the done count itself with one compare-exchange
//! and touches no bit. Otherwise it sets its bit and advances under a try-lock (a flag
//! word): a thread that finds the flag taken leaves, and the holder looks again after
//! letting it go, so a set bit is never left behind. All of it sequentially consistent:
//! of "set my bit, then look at the done count" and "move the done count, then look at
//! the next bit", at least one of the two threads sees the other's store.
//!
//! At most [`RMA_RING_BITS`] RMAs of a side are in flight: a ticket that far ahead of
//! the done count waits ([`MsgRegion::rma_has_room`]) before it starts.
//!
//! The ring lives in the region both ends map, so a misbehaving peer can garble its own
//! side's counts (its fences, and ours of its RMAs, may then wait until it closes), never
//! reach outside the region.

use super::MsgRegion;
use std::sync::atomic::Ordering::SeqCst;

/// RMAs of one side that may be in flight at once (the bits of its completion ring).
pub const RMA_RING_BITS: u64 = 4096;

// Both sides' rings fit in the header page, after the side words.
const _: () = assert!(super::rma_ring_base(1) + RMA_RING_BITS as usize / 8 <= super::HEADER);
const _: () = assert!(super::rma_ring_base(0) >= super::side_base(1) + 256);

impl MsgRegion {
    /// Start an RMA of side `s`: its ticket. Before copying, wait until
    /// [`MsgRegion::rma_has_room`]; once it completed (or failed), [`MsgRegion::rma_end`].
    pub fn rma_begin(&self, s: usize) -> u64 {
        self.rma_started(s).fetch_add(1, SeqCst)
    }

    /// Whether the RMA of `ticket` may start: fewer than [`RMA_RING_BITS`] before it are
    /// still in flight, so its bit is free.
    pub fn rma_has_room(&self, s: usize, ticket: u64) -> bool {
        ticket.wrapping_sub(self.rma_done(s).load(SeqCst)) < RMA_RING_BITS
    }

    /// The RMA of `ticket` (side `s`) completed: advance the done count over it and every
    /// completed ticket after it, when the tickets before it have completed.
    pub fn rma_end(&self, s: usize, ticket: u64) {
        let done = self.rma_done(s);
        let next = ticket.wrapping_add(1);
        if done.compare_exchange(ticket, next, SeqCst, SeqCst).is_ok() {
            // The oldest in flight: moved it alone. A later ticket may have completed
            // meanwhile and found the count below it.
            let (w, m) = self.rma_bit(s, next);
            if w.load(SeqCst) & m != 0 {
                self.rma_advance(s);
            }
            return;
        }
        let (w, m) = self.rma_bit(s, ticket);
        w.fetch_or(m, SeqCst);
        self.rma_advance(s);
    }

    /// Move the done count over contiguous set bits, unless another thread is at it.
    fn rma_advance(&self, s: usize) {
        let (done, flag) = (self.rma_done(s), self.rma_advancing(s));
        loop {
            if flag.swap(1, SeqCst) != 0 {
                // The holder looks at the next bit after letting go.
                return;
            }
            loop {
                let d = done.load(SeqCst);
                let (w, m) = self.rma_bit(s, d);
                if w.load(SeqCst) & m == 0 {
                    break;
                }
                w.fetch_and(!m, SeqCst);
                if done.compare_exchange(d, d.wrapping_add(1), SeqCst, SeqCst).is_err() {
                    // The count moved since we read it (the oldest ticket moved it alone,
                    // and a ticket a ring later set this bit): not ours to clear.
                    w.fetch_or(m, SeqCst);
                }
            }
            flag.store(0, SeqCst);
            let d = done.load(SeqCst);
            let (w, m) = self.rma_bit(s, d);
            if w.load(SeqCst) & m == 0 {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn region() -> MsgRegion {
        let fd = MsgRegion::create(4096).unwrap();
        MsgRegion::open(fd.as_fd()).unwrap()
    }

    #[test]
    fn done_counts_only_contiguous_completions() {
        let r = region();
        let (a, b, c) = (r.rma_begin(0), r.rma_begin(0), r.rma_begin(0));
        r.rma_end(0, c);
        r.rma_end(0, b);
        assert_eq!(r.rma_done(0).load(SeqCst), 0, "the first is still in flight");
        r.rma_end(0, a);
        assert_eq!(r.rma_done(0).load(SeqCst), 3);
        assert_eq!(r.rma_done(1).load(SeqCst), 0, "sides apart");
    }

    #[test]
    fn a_full_ring_has_no_room_until_the_oldest_completes() {
        let r = region();
        let first = r.rma_begin(1);
        let rest: Vec<u64> = (1..RMA_RING_BITS).map(|_| r.rma_begin(1)).collect();
        for &t in &rest {
            assert!(r.rma_has_room(1, t));
            r.rma_end(1, t);
        }
        let over = r.rma_begin(1);
        assert!(!r.rma_has_room(1, over));
        r.rma_end(1, first);
        assert_eq!(r.rma_done(1).load(SeqCst), RMA_RING_BITS);
        assert!(r.rma_has_room(1, over));
        r.rma_end(1, over);
        assert_eq!(r.rma_done(1).load(SeqCst), RMA_RING_BITS + 1);
    }

    #[test]
    fn threads_completing_out_of_order_leave_no_gap() {
        let r = std::sync::Arc::new(region());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        let t = r.rma_begin(0);
                        while !r.rma_has_room(0, t) {
                            std::thread::yield_now();
                        }
                        if i % 7 == 0 {
                            std::thread::yield_now();
                        }
                        r.rma_end(0, t);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.rma_done(0).load(SeqCst), 80_000);
        assert_eq!(r.rma_advancing(0).load(SeqCst), 0);
    }
}
