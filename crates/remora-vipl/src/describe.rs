//! Receives described to the peer: each posted receive as an entry of the peer's ring A
//! (its size, and where its buffers lie), written only where the entry differs from what
//! that index held, then the posted count; on this host into the peer's segment, across
//! hosts down the link's channel (in order, without waiting, sent now or with the next
//! message: `Link::posted_later`).

use crate::layout::{self, Chunk, ENTRIES, ENTRY};
use crate::link::Link;
use crate::vi::{RecvQ, Short, ViInner};

impl ViInner {
    /// Describe the receives not described yet in the peer's ring A. `false` when the
    /// description could not be sent to a peer on another host (the caller breaks the VI).
    #[must_use]
    pub(crate) fn publish(&self, q: &mut RecvQ, link: &Link) -> bool {
        let end = q.consumed + q.posted.len() as u64;
        if q.pushed >= end {
            return true;
        }
        if !link.is_far() && self.describe_later(q, end) {
            return true;
        }
        self.describe(q, link, end)
    }

    /// Describe the receives posted up to `end` in the peer's ring A, and its posted
    /// count.
    pub(crate) fn describe(&self, q: &mut RecvQ, link: &Link, end: u64) -> bool {
        // Another host's segment: the entries, then the count, down the link's channel
        // (in order: the peer never reads an entry as it was a lap ago), without waiting,
        // and sent now or a little later (`Link::posted_later`).
        let far = link.is_far();
        let put = |at: usize, b: &[u8]| {
            if far {
                let _ = link.far(|c| c.push_vi(at, b));
            } else {
                let _ = link.map.write(at, b);
            }
        };
        if q.described.len() < ENTRIES {
            q.described.resize(ENTRIES, None);
        }
        while q.pushed < end {
            let Some(p) = q.posted.get((q.pushed - q.consumed) as usize) else { break };
            let i = q.pushed as usize % ENTRIES;
            let at = layout::entry_at(q.pushed);
            if p.chunks.len() <= 2 {
                // The common entry (one or two chunks): compared as values, and written
                // only when it differs from what this index held.
                let mut short: Short = (p.total, p.chunks.len(), [Chunk::default(); 2]);
                for (d, c) in short.2.iter_mut().zip(p.chunks.iter()) {
                    *d = *c;
                }
                if q.described[i] != Some(short) {
                    let mut e = [0u8; 48];
                    let n = layout::encode_entry_into(p.total, link.peer.conn, &p.chunks, &mut e);
                    put(at, &e[..n]);
                    q.described[i] = Some(short);
                }
            } else {
                let mut e = [0u8; ENTRY];
                let n = layout::encode_entry(p.total, link.peer.conn, &p.chunks, &mut e);
                put(at, &e[..n]);
                q.described[i] = None;
            }
            q.pushed += 1;
        }
        link.store(layout::PEER_POSTED, link.tag(q.pushed));
        if far {
            // Completions taken here landed too (those of the pair's own stream leave the
            // done count behind); those landed or taken in and not yet taken out by the
            // program are its work ahead.
            let landed =
                layout::count_in(self.conn(), self.map.load(layout::DONE), q.consumed).max(q.consumed);
            let unread = landed - q.consumed + q.done.len() as u64;
            return self.tell_posted(link, q.pushed, landed, unread, || self.nic.watcher_runs());
        }
        true
    }

    /// Tell a peer on another host the count `posted` of receives described (queued on the
    /// link's channel with their entries), or leave it there for a batch
    /// (`Link::posted_later`, given `landed` and `unread` as it reads them) while the NIC's
    /// watcher runs, which sends what waits when it ends. `watcher_runs` is asked before the
    /// hold and once more after it: a watcher that ended between the two may have flushed
    /// before this count was queued, so the count goes now. `false` when the description
    /// could not be sent (the caller breaks the VI).
    #[must_use]
    pub(crate) fn tell_posted(
        &self,
        link: &Link,
        posted: u64,
        landed: u64,
        unread: u64,
        watcher_runs: impl Fn() -> bool,
    ) -> bool {
        // An unreliable VI's sender drops a message after a short grace: told at once.
        if link.peer.reliability != crate::UNRELIABLE
            && watcher_runs()
            && link.posted_later(posted, landed, unread)
        {
            // Held: unless the watcher ended meanwhile (its end sends only the counts held
            // before it: see `Watching`'s drop, whose fence pairs with this one).
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            if watcher_runs() {
                return !link.has_failed();
            }
        }
        link.push_posted(posted) && !link.has_failed()
    }
}

#[cfg(test)]
mod tests;
