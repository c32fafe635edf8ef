//! How a payload reaches the peer, and how completions come back.
//!
//! A receive posted on a connected VI is described in the peer's ring A (its size, and
//! where its buffers lie: piece segments and offsets): at once on this host, across hosts
//! at once, or a little later in batches, with this VI's next send when it answers its peer
//! (`Link::posted_later`). A send consumes the peer's next receive: it learns the
//! receive's size from ring A (sizes are read in batches, when the
//! peer's posted count is looked at, which is only when the receives known are used up),
//! writes the payload — inside the completion entry when it is short ([`layout::INLINE`]),
//! else straight into the receiver's buffers (one copy on one host, one stream across
//! hosts) —, writes the completion entry with its sequence number last, and rings the
//! receiver's doorbell only when it sleeps. Across hosts the sender also stores the done
//! count after the entry, and the receiver reads the entry only once the count covers it.
//!
//! What the sender knows of the peer's receives (the posted count and ring A's entries)
//! is in `deliver/learn.rs`; the receiver's taking of completions in `deliver/reap.rs`.

use crate::cache::Taken;
use crate::data::Outcome;
use crate::layout::{self, status, Completion, INLINE, INLINE_AT, SEQ};
use crate::link::direct::is_short;
use crate::link::{Link, Miss};
use crate::vi::{SendQ, ViInner, RELIABLE_RECEPTION};
use crate::{Error, ErrorCode};
use remora_sisci::UserRegion;
use std::collections::VecDeque;
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

/// How long an unreliable VI's send waits for a peer of this host to post a receive before
/// the message counts as one that found none (and is dropped). (5 ms broke streams under
/// load: their receiving thread, kept off the two cores that long, reposted too late.)
const RECEIVE_GRACE: Duration = Duration::from_millis(50);
/// The same for a reliable VI, on this host or another (where the posted count comes down
/// the receiver's channel and its node's thread): a send that finds none breaks the VI, so
/// the wait covers a loaded machine's threads waiting for a core. 100 ms broke a 64 KiB
/// stream's VI across hosts in 5 of 30 runs of `remora bench vipl --across-hosts` on two
/// cores beside three CPU-bound processes (threads waited up to 80 ms for a core there);
/// 500 ms in none of 30. On one host 50 ms broke a VI whose receiver reposted while
/// answering and then went quiet, its repost taken in by the NIC's watcher (`later.rs`),
/// in 1 of 12 runs beside three CPU-bound processes (`tests/receive_rooms.rs`).
const RECEIVE_GRACE_RELIABLE: Duration = Duration::from_millis(500);
/// An unreliable VI's wait for a peer on another host (the wait's length before 500 ms: a
/// sender that outruns its receiver loses those messages, as VIA allows, without being
/// held up half a second for each).
const RECEIVE_GRACE_FAR_UNRELIABLE: Duration = Duration::from_millis(100);

impl ViInner {
    /// Record a completed send, RDMA write or RDMA read (its descriptor at `addr`,
    /// `handle`; `done`: the send queue's completed ones): its status `st` written, the
    /// descriptor queued as done, a thread asleep in `send_wait` woken, the send completion
    /// queue told. The general path's and both straight lines' (`short.rs`, `short/long.rs`).
    #[inline(always)]
    pub(crate) fn complete_send(
        &self,
        done: &mut VecDeque<(usize, u32)>,
        addr: usize,
        handle: u32,
        t: &Taken,
        st: u32,
    ) {
        self.nic.finish(&t.ctl, t.epoch, st, None, None);
        done.push_back((addr, handle));
        if self.send_waiters.load(Ordering::Relaxed) > 0 {
            self.send_seq.fetch_add(1, Ordering::SeqCst);
            remora_sys::sync::futex_wake_all(&self.send_seq);
        }
        if let Some(cq) = &self.send_cq {
            cq.push(self.id, false, addr);
        }
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
            (_, true) => RECEIVE_GRACE_RELIABLE,
            (true, false) => RECEIVE_GRACE,
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
        let mut done = Completion::new(len, st, imm);
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
            match self.scatter(&sq.heads, &mut sq.hint, link, k, sources) {
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

mod learn;
pub(crate) use learn::NOT_OURS;
mod reap;
