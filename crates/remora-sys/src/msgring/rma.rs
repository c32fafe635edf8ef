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
//! word holding the holder's pid): a thread that finds the flag taken leaves, and the
//! holder looks again after letting it go, so a set bit is never left behind. All of it
//! sequentially consistent: of "set my bit, then look at the done count" and "move the
//! done count, then look at the next bit", at least one of the two threads sees the
//! other's store. (The owner entries below are the exception: a live owner records its
//! ticket and clears its entry with plain loads and stores, as no one else writes them
//! while it lives; it clears only an entry still holding its own ticket.)
//!
//! At most [`RMA_RING_BITS`] RMAs of a side are in flight: a ticket that far ahead of
//! the done count waits ([`RmaTicket::has_room`]) before it starts.
//!
//! An RMA whose process dies, or whose ticket is dropped before it had room, must not
//! hold up every fence and (a ring later) every RMA. So each RMA first claims an entry in
//! its side's table of [`RMA_OWNERS`] owners (its pid, then its ticket); the ticket ends
//! when its [`RmaTicket`] drops (a panic that unwinds through the RMA ends it too). A
//! waiter that sees the done count stand still ([`RMA_STALL`]) calls
//! [`MsgRegion::rma_recover`]: it ends the tickets of owners that are gone (`kill(pid,
//! 0)` answers `ESRCH`) or that gave up waiting for room, and takes over the flag from a
//! holder that is gone. An RMA that is merely slow keeps its entry and is waited for.
//! What stays open is a process killed within the few instructions between claiming an
//! entry and recording its ticket, or between clearing it and setting the bit: a ticket
//! taken there is not recorded (the pids are of one host's processes, one pid namespace).
//!
//! The ring lives in the region both ends map, so a misbehaving peer can garble its own
//! side's counts (its fences, and ours of its RMAs, may then wait until it closes), never
//! reach outside the region.

use super::MsgRegion;
use std::sync::atomic::Ordering::{Relaxed, Release, SeqCst};
use std::time::Duration;

/// RMAs of one side that may be in flight at once (the bits of its completion ring).
pub const RMA_RING_BITS: u64 = 4096;

/// RMAs of one side that may run at once (entries of its table of owners); more wait for
/// an entry ([`MsgRegion::rma_try_begin`]).
pub const RMA_OWNERS: usize = 16;

/// How long a waiter lets the done count stand still before it looks for RMAs whose
/// owners are gone ([`MsgRegion::rma_recover`]).
pub const RMA_STALL: Duration = Duration::from_secs(1);

// An owner entry: 0 free; the pid in bits 32..63; with TICKETED, the ticket's low 32 bits.
const TICKETED: u64 = 1 << 63;
// The pid of an entry whose ticket was dropped before it had room: ended once it has.
const ABANDONED: u32 = 0x7fff_ffff;

// Both sides' rings fit in the header page, after the side words, and the owner tables
// after them.
const _: () = assert!(super::rma_ring_base(1) + RMA_RING_BITS as usize / 8 <= super::rma_owner_base(0));
const _: () = assert!(super::rma_owner_base(1) + RMA_OWNERS * 8 <= super::HEADER);
const _: () = assert!(super::rma_ring_base(0) >= super::side_base(1) + 256);

fn own_pid() -> u32 {
    crate::sched::own_pid()
}

/// Whether process `pid` (of this host) may still end its tickets.
fn alive(pid: u32) -> bool {
    if pid == own_pid() {
        return true;
    }
    match rustix::process::Pid::from_raw(pid as i32) {
        Some(p) if pid != ABANDONED => rustix::process::test_kill_process(p) != Err(rustix::io::Errno::SRCH),
        _ => false,
    }
}

/// One RMA of a side, from its start: its ticket ends when this drops (or, when it never
/// had room, once it has, by a waiter's [`MsgRegion::rma_recover`]).
pub struct RmaTicket<'a> {
    r: &'a MsgRegion,
    s: usize,
    slot: usize,
    ticket: u64,
    entry: u64,
}

impl RmaTicket<'_> {
    /// The ticket: the count of RMAs of its side started before it.
    pub fn ticket(&self) -> u64 {
        self.ticket
    }

    /// Whether the RMA may start: fewer than [`RMA_RING_BITS`] before it are still in
    /// flight, so its bit is free.
    pub fn has_room(&self) -> bool {
        self.r.rma_has_room(self.s, self.ticket)
    }
}

impl Drop for RmaTicket<'_> {
    fn drop(&mut self) {
        let (r, s, t) = (self.r, self.s, self.ticket);
        let e = r.rma_owner(s, self.slot);
        if r.rma_has_room(s, t) {
            // Whoever clears the entry ends the ticket: a recovering waiter only clears
            // entries of owners that are gone (or gave up), so this one is ours unless a
            // waiter misjudged this owner gone and the entry is now another's claim: then
            // it is left alone (the waiter ended this ticket). The guard is a plain load
            // and a plain store (the compare-exchange it was cost a locked instruction an
            // RMA); `rma_end`'s compare-exchange then orders the clear.
            if e.load(Relaxed) == self.entry {
                e.store(0, Release);
                r.rma_end(s, t);
            }
        } else {
            // Its bit is still another ticket's: left for a waiter to end once it is free.
            let gave_up = TICKETED | (u64::from(ABANDONED) << 32) | (t & 0xffff_ffff);
            let _ = e.compare_exchange(self.entry, gave_up, SeqCst, SeqCst);
        }
    }
}

impl MsgRegion {
    /// Start an RMA of side `s`: claim an owner entry and take a ticket. `None` while all
    /// [`RMA_OWNERS`] entries are taken: try again later (and, when the done count stands
    /// still for [`RMA_STALL`], [`MsgRegion::rma_recover`]). Before copying, wait until
    /// [`RmaTicket::has_room`]; drop the ticket once the RMA completed (or failed).
    pub fn rma_try_begin(&self, s: usize) -> Option<RmaTicket<'_>> {
        let claim = u64::from(own_pid()) << 32;
        for slot in 0..RMA_OWNERS {
            let e = self.rma_owner(s, slot);
            if e.load(SeqCst) != 0 || e.compare_exchange(0, claim, SeqCst, SeqCst).is_err() {
                continue;
            }
            let ticket = self.rma_started(s).fetch_add(1, SeqCst);
            let entry = TICKETED | claim | (ticket & 0xffff_ffff);
            // A plain store: only this thread writes a live owner's entry, and a recovering
            // waiter reads it only after the done count stood still for `RMA_STALL`.
            e.store(entry, Release);
            return Some(RmaTicket { r: self, s, slot, ticket, entry });
        }
        None
    }

    /// For a waiter that saw side `s`'s done count stand still: end the tickets whose
    /// owners are gone or gave up (those that have room), free their entries, take over
    /// the advancing flag from a holder that is gone, and advance the done count. Whether
    /// it changed anything.
    pub fn rma_recover(&self, s: usize) -> bool {
        let mut changed = false;
        let flag = self.rma_advancing(s);
        let holder = flag.load(SeqCst);
        if holder != 0 && !alive(holder) && flag.compare_exchange(holder, 0, SeqCst, SeqCst).is_ok() {
            changed = true;
        }
        loop {
            self.rma_advance(s);
            let mut ended = false;
            for slot in 0..RMA_OWNERS {
                let e = self.rma_owner(s, slot);
                let v = e.load(SeqCst);
                if v == 0 || alive(((v & !TICKETED) >> 32) as u32) {
                    continue;
                }
                if v & TICKETED == 0 {
                    // Gone before it took a ticket (or before it recorded one: see above).
                    changed |= e.compare_exchange(v, 0, SeqCst, SeqCst).is_ok();
                    continue;
                }
                // Unfinished, so at or after the done count: its low bits place it.
                let done = self.rma_done(s).load(SeqCst);
                let t = done.wrapping_add(u64::from((v as u32).wrapping_sub(done as u32)));
                if self.rma_has_room(s, t) && e.compare_exchange(v, 0, SeqCst, SeqCst).is_ok() {
                    self.rma_end(s, t);
                    ended = true;
                }
            }
            if !ended {
                return changed;
            }
            changed = true;
        }
    }

    /// Whether `ticket` of side `s` has its bit free.
    fn rma_has_room(&self, s: usize, ticket: u64) -> bool {
        ticket.wrapping_sub(self.rma_done(s).load(SeqCst)) < RMA_RING_BITS
    }

    /// The RMA of `ticket` (side `s`) completed: advance the done count over it and every
    /// completed ticket after it, when the tickets before it have completed.
    fn rma_end(&self, s: usize, ticket: u64) {
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
            if flag.compare_exchange(0, own_pid(), SeqCst, SeqCst).is_err() {
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

    /// A bare ticket, with no owner entry.
    fn take(r: &MsgRegion, s: usize) -> u64 {
        r.rma_started(s).fetch_add(1, SeqCst)
    }

    /// The pid of a process that has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    }

    /// Start an RMA and leave it behind as if process `pid` held it and died.
    fn abandon(r: &MsgRegion, s: usize, pid: u32) -> u64 {
        let t = r.rma_try_begin(s).unwrap();
        let (slot, ticket) = (t.slot, t.ticket);
        std::mem::forget(t);
        r.rma_owner(s, slot).store(TICKETED | (u64::from(pid) << 32) | ticket, SeqCst);
        ticket
    }

    fn free_entries(r: &MsgRegion, s: usize) -> usize {
        (0..RMA_OWNERS).filter(|&i| r.rma_owner(s, i).load(SeqCst) == 0).count()
    }

    #[test]
    fn done_counts_only_contiguous_completions() {
        let r = region();
        let (a, b, c) =
            (r.rma_try_begin(0).unwrap(), r.rma_try_begin(0).unwrap(), r.rma_try_begin(0).unwrap());
        assert_eq!((a.ticket(), b.ticket(), c.ticket()), (0, 1, 2));
        drop(c);
        drop(b);
        assert_eq!(r.rma_done(0).load(SeqCst), 0, "the first is still in flight");
        drop(a);
        assert_eq!(r.rma_done(0).load(SeqCst), 3);
        assert_eq!(r.rma_done(1).load(SeqCst), 0, "sides apart");
        assert_eq!(free_entries(&r, 0), RMA_OWNERS);
    }

    #[test]
    fn a_full_ring_has_no_room_until_the_oldest_completes() {
        let r = region();
        let first = r.rma_try_begin(1).unwrap();
        for _ in 1..RMA_RING_BITS {
            let t = take(&r, 1);
            assert!(r.rma_has_room(1, t));
            r.rma_end(1, t);
        }
        let over = r.rma_try_begin(1).unwrap();
        assert!(!over.has_room());
        drop(first);
        assert_eq!(r.rma_done(1).load(SeqCst), RMA_RING_BITS);
        assert!(over.has_room());
        drop(over);
        assert_eq!(r.rma_done(1).load(SeqCst), RMA_RING_BITS + 1);
    }

    #[test]
    fn all_entries_taken_means_no_start_until_one_ends() {
        let r = region();
        let held: Vec<_> = (0..RMA_OWNERS).map(|_| r.rma_try_begin(0).unwrap()).collect();
        assert!(r.rma_try_begin(0).is_none());
        assert!(r.rma_try_begin(1).is_some(), "sides apart");
        drop(held);
        assert!(r.rma_try_begin(0).is_some());
    }

    #[test]
    fn a_ticket_of_a_dead_owner_is_ended_by_recovery() {
        let r = region();
        let pid = dead_pid();
        let lost = abandon(&r, 0, pid);
        let later = r.rma_try_begin(0).unwrap();
        drop(later);
        assert_eq!(r.rma_done(0).load(SeqCst), lost, "the lost ticket holds the count");
        assert!(r.rma_recover(0));
        assert_eq!(r.rma_done(0).load(SeqCst), 2);
        assert_eq!(free_entries(&r, 0), RMA_OWNERS);
        assert!(!r.rma_recover(0), "nothing left to do");
    }

    #[test]
    fn a_slow_ticket_of_a_live_owner_is_waited_for() {
        let r = region();
        let slow = r.rma_try_begin(0).unwrap();
        drop(r.rma_try_begin(0).unwrap());
        assert!(!r.rma_recover(0));
        assert_eq!(r.rma_done(0).load(SeqCst), 0);
        // Another live process's ticket too (this test's parent shell is alive).
        let parent = rustix::process::getppid().unwrap().as_raw_nonzero().get() as u32;
        abandon(&r, 1, parent);
        assert!(!r.rma_recover(1));
        assert_eq!(r.rma_done(1).load(SeqCst), 0);
        drop(slow);
        assert_eq!(r.rma_done(0).load(SeqCst), 2);
    }

    #[test]
    fn a_panic_in_the_rma_ends_its_ticket() {
        let r = region();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _t = r.rma_try_begin(0).unwrap();
            panic!("the copy failed");
        }));
        assert!(caught.is_err());
        assert_eq!(r.rma_done(0).load(SeqCst), 1);
        assert_eq!(free_entries(&r, 0), RMA_OWNERS);
    }

    #[test]
    fn a_ticket_dropped_before_it_had_room_is_ended_once_it_has() {
        let r = region();
        let first = r.rma_try_begin(0).unwrap();
        for _ in 1..RMA_RING_BITS {
            let t = take(&r, 0);
            r.rma_end(0, t);
        }
        let over = r.rma_try_begin(0).unwrap();
        assert!(!over.has_room());
        drop(over);
        assert!(!r.rma_recover(0), "its bit is still the first ticket's");
        drop(first);
        assert_eq!(r.rma_done(0).load(SeqCst), RMA_RING_BITS);
        assert!(r.rma_recover(0));
        assert_eq!(r.rma_done(0).load(SeqCst), RMA_RING_BITS + 1);
        assert_eq!(free_entries(&r, 0), RMA_OWNERS);
    }

    #[test]
    fn an_owner_misjudged_gone_leaves_the_next_claim_of_its_entry_alone() {
        let r = region();
        let first = r.rma_try_begin(0).unwrap();
        let t = r.rma_try_begin(0).unwrap();
        // A waiter took the second ticket's owner for gone, ended the ticket (its bit set,
        // the first still in flight) and freed its entry, which another process (the
        // parent shell, alive) then claimed.
        let e = r.rma_owner(0, t.slot);
        let parent = rustix::process::getppid().unwrap().as_raw_nonzero().get() as u32;
        r.rma_end(0, t.ticket);
        let claim = u64::from(parent) << 32;
        e.store(claim, SeqCst);
        drop(t);
        assert_eq!(e.load(SeqCst), claim, "the new owner's claim stays");
        drop(first);
        assert_eq!(r.rma_done(0).load(SeqCst), 2, "each ticket ended once");
    }

    #[test]
    fn the_flag_of_a_dead_holder_is_taken_over() {
        let r = region();
        let (a, b) = (r.rma_try_begin(0).unwrap(), r.rma_try_begin(0).unwrap());
        r.rma_advancing(0).store(dead_pid(), SeqCst);
        drop(b);
        drop(a);
        assert_eq!(r.rma_done(0).load(SeqCst), 1, "the second's bit waits for the flag");
        assert!(r.rma_recover(0));
        assert_eq!(r.rma_done(0).load(SeqCst), 2);
        assert_eq!(r.rma_advancing(0).load(SeqCst), 0);
    }

    #[test]
    fn threads_completing_out_of_order_leave_no_gap() {
        let r = std::sync::Arc::new(region());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        let t = r.rma_try_begin(0).unwrap();
                        while !t.has_room() {
                            std::thread::yield_now();
                        }
                        if i % 7 == 0 {
                            std::thread::yield_now();
                        }
                        drop(t);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.rma_done(0).load(SeqCst), 80_000);
        assert_eq!(r.rma_advancing(0).load(SeqCst), 0);
        assert_eq!(free_entries(&r, 0), RMA_OWNERS);
    }
}
