//! What a sender knows of its peer's posted receives: the peer's posted count, looked at
//! (and waited for a moment) only once the receives known are used up, and the ring A
//! entries of those new since the last look, read once for their sizes and where their
//! buffers lie ([`ViInner::learn_entries`], which `crate::short` uses too).

use crate::layout::{self, Chunk, Head, ENTRIES};
use crate::vi::{lock, SendQ, ViInner, ViState};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The room of a ring A entry that is not of this connection ([`layout::ENTRY_CONN`]): no
/// receive (a real one holds at most [`crate::MAX_TRANSFER`] bytes).
pub(crate) const NOT_OURS: u32 = u32::MAX;

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

impl ViInner {
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
    pub(crate) fn peer_room(&self, sq: &mut SendQ, k: u64, grace: Duration) -> Option<u32> {
        if k >= sq.seen && !self.learn_posted(sq, k, grace) {
            return None;
        }
        sq.rooms.get(k as usize % ENTRIES).copied().filter(|r| *r != NOT_OURS)
    }

    /// Read the peer's posted count (waiting for receive `k` a moment) and the sizes of
    /// the receives new since the last look, and where their buffers lie.
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

    /// Read the peer's ring A entries `from..to` (its receives new since the last look,
    /// at most a ring's worth) and note what a send needs of each: its size in `rooms`
    /// ([`NOT_OURS`] for an entry of another connection, which an earlier peer stored late)
    /// and where its buffers lie in `heads`. Each entry's first line is read once, by the
    /// one path both ways of learning receives take (`ViInner::learn_posted`, and
    /// `learn_ahead` after a short send): a receive learned either way is copied into
    /// without a look at its entry.
    #[inline]
    pub(crate) fn learn_entries(&self, rooms: &mut Vec<u32>, heads: &mut Vec<Head>, from: u64, to: u64) {
        if rooms.len() < ENTRIES {
            rooms.resize(ENTRIES, 0);
        }
        if heads.len() < ENTRIES {
            heads.resize(ENTRIES, Head::default());
        }
        let conn = self.conn();
        for j in from.max(to.saturating_sub(ENTRIES as u64))..to {
            // The entry's total, then its connection number; its first chunk lies on the
            // same line.
            let at = layout::entry_at(j);
            let head = self.map.load(at);
            let of = self.map.load(at + layout::ENTRY_CONN) as u32;
            let i = j as usize % ENTRIES;
            if of != conn {
                rooms[i] = NOT_OURS;
                continue;
            }
            rooms[i] = head as u32;
            let (w0, w1) = (self.map.load(at + 16), self.map.load(at + 24));
            heads[i] = Head {
                k: j + 1,
                conn,
                chunks: ((head >> 32) as u32).min(layout::MAX_CHUNKS as u32),
                first: Chunk { seg: w0 as u32, len: (w0 >> 32) as u32, off: w1 },
            };
        }
    }
}

#[cfg(test)]
mod tests;
