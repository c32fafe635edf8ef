//! The backward direction of a plain interrupt flow this node dialed (issue 19; unless either
//! node's cluster file says `intr_pair = false`). A process here triggers another host's
//! interrupt over its own flow; the owner of that interrupt, when its node is the higher
//! one, sends its own plain triggers of this host's interrupts back on the same connection,
//! so that a ping-pong between the two processes takes one TCP connection, not two one-way
//! ones each of whose segments gets a bare ACK.
//!
//! This thread reads those triggers while the owner here does not. The first is checked
//! against the books (`Registry::may_carry_back`): a plain connection the flow's node made
//! to an interrupt of this one, made by the very process there that owns the interrupt the
//! flow was dialed to (another process of that node never triggers through it what it did
//! not connect to); anything else ends the flow. It is triggered as the serving side does
//! forward (`transport/shared_flow.rs`), and from then on the flow carries that connection only: a
//! frame naming another ends it. The flow is then booked for the owner of the interrupt it
//! triggers when that owner is the process that dialed it (`Registry::share_flow`; another
//! process never gets its socket), who reads it itself while it waits, and the transport's
//! shared reader serves it; otherwise this thread goes on reading it alone. The books keep
//! which connection and interrupt the flow carries as long as the flow lives
//! (`BackFlowEntry::carries`): a trigger of that connection that its disconnect overtook
//! (the disconnect goes through the daemons, the triggers wait on this flow) is still
//! counted (`Registry::trigger_carried`). A trigger refused (the interrupt removed) ends
//! the flow, so its sender falls back to its own path, which says the error. The
//! flow ends when the far node closes it: after the dialing connection's end
//! (`Registry::end_back_flows` shuts our side for writing and rings the flow's bell,
//! `BackFlowEntry::bell`), waited for at most 10 s. Until a frame comes or the bell rings
//! the thread blocks: no periodic wake-up (it looked at the books every 100 ms before).
//!
//! This thread reads the flow alone until it is booked, so a frame split by the stream is
//! read as far as it came and kept ([`Frames`]), its rest taken from the next bytes: a
//! part left in the socket may keep the receive window shut, so that its rest never comes
//! (`remora_sys::intr::take_frames`; issue 19's two-way flood). Before, it was waited for
//! in the socket and ended the flow after 5 s, losing what the far process had sent after
//! it, triggers that had returned `Ok`. The flow is booked only at a frame's edge (the
//! owner and the shared reader take whole frames). A frame that is not a plain trigger of
//! the flow's connection still ends it, with a warning.
//!
//! How a flow ends (a refusal, a frame that does not belong, the far node's end) is
//! `remora_sys::flow::end`: shut for writing, what still comes read and dropped until the
//! far node ends its side too (by this thread for [`DRAIN`], then by the process's reaper
//! thread), never a reset; a flow the far node never closed after the dialing connection
//! ended ([`ENDED_WAIT`]) too. The flow carries both
//! directions: a refusal ends the removed interrupt's direction, but it cannot end that
//! one alone, and the other direction's interrupt is live. A socket shut for reading
//! answers the next bytes with a reset, which throws away what the dialing process sent
//! and the far node did not yet acknowledge (triggers of the live interrupt, `Ok` to their
//! sender). Ended for writing only, what the dialing process wrote before the end goes
//! out ahead of the end of the stream, and the far node's reader takes all of it before
//! it sees the end; the dialing process's next write fails, and it takes the daemons'
//! path. What comes here meanwhile are triggers of the removed interrupt (the flow
//! carries one connection back), which no one can count: dropped. The far node, seeing the
//! end, ends its side the same way (`transport/shared_flow.rs`), so its process's next
//! trigger takes its own path too and learns the error, and our drain stops there.

use super::owner_flow::OwnerFlow;
use super::InterruptTarget;
use crate::transport::shared_flow::DRAIN;
use crate::transport::PeerMemory;
use crate::Node;
use remora_proto::link::{BulkFrame, BulkOp, BULK_FRAME};
use remora_sys::intr::{take_frames, Taken, FRAMES_PER_LOOK};
use remora_sys::sync::EventFd;
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How long one `poll` of the flow lasts before the dialing connection is looked at, when
/// the flow has no bell (`BackFlowEntry::bell`; with one, the reader blocks until a frame
/// comes or the connection's end rings it).
const LOOK: Duration = Duration::from_millis(100);
/// How long after the dialing connection ended the thread waits for the far node's close
/// (a route that went silent never brings it).
const ENDED_WAIT: Duration = Duration::from_secs(10);

/// Read the backward direction of `fd`, the flow dialed to `peer` for this node's plain
/// interrupt connection `conn`, on a thread of its own.
pub(crate) fn serve(node: &Arc<Node>, peer: u32, conn: u64, fd: OwnedFd) {
    let Ok(kept) = fd.try_clone() else { return };
    let (id, bell) = {
        let mut reg = node.lock();
        let id = reg.keep_back_flow(conn, kept);
        (id, reg.back_flow_bell(id))
    };
    let weak = Arc::downgrade(node);
    let spawned = std::thread::Builder::new().name("remora-back-flow".into()).spawn({
        let weak = weak.clone();
        move || {
            read(&weak, Flow { id, peer, conn }, TcpStream::from(fd), bell);
            if let Some(n) = weak.upgrade() {
                n.lock().forget_back_flow(id);
            }
        }
    });
    if spawned.is_err() {
        node.lock().forget_back_flow(id);
    }
}

/// The flow read: its entry in the books, the node it was dialed to, the dialing
/// connection.
#[derive(Clone, Copy)]
struct Flow {
    id: u64,
    peer: u32,
    conn: u64,
}

/// What one frame read back came to.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Triggered (its connection, the first time).
    Served,
    /// Not a plain trigger of the flow's connection, or refused: the flow ends.
    End,
}

/// Read the flow until it ends or is booked for its owner (then serve it shared). Blocks
/// on the socket and `bell` (rung when the dialing connection ends) with no periodic
/// wake-up; without a bell it looks at the books every [`LOOK`].
fn read(node: &Weak<Node>, f: Flow, s: TcpStream, bell: Option<EventFd>) {
    let mut buf = [0u8; BULK_FRAME * FRAMES_PER_LOOK];
    let mut frames = Frames::default();
    // The connection the flow carries back, once a trigger named it.
    let mut carried: Option<u64> = None;
    // Since when the dialing connection is known ended.
    let mut ended: Option<Instant> = None;
    loop {
        let timeout = match (ended, &bell) {
            (Some(t), _) => match ENDED_WAIT.checked_sub(t.elapsed()) {
                Some(left) => Some(left),
                None => break,
            },
            (None, Some(_)) => None,
            (None, None) => Some(LOOK),
        };
        let ready = match &bell {
            Some(b) => remora_sys::poller::wait_ready(&[s.as_fd(), b.as_fd()], timeout),
            None => remora_sys::poller::wait_ready(&[s.as_fd()], timeout),
        };
        let ready = match ready {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if ready & 2 != 0 {
            if let Some(b) = &bell {
                b.drain();
            }
            ended.get_or_insert_with(Instant::now);
        }
        if ready & 1 == 0 {
            if bell.is_none() && ended.is_none() {
                let Some(n) = node.upgrade() else { return };
                if !n.lock().intr_conns.contains_key(&f.conn) {
                    ended = Some(Instant::now());
                }
            }
            continue;
        }
        let n = match frames.take(s.as_fd(), &mut buf) {
            Ok(Some(n)) => n,
            // The far node ended it (a part of a frame left is dropped: its sender gave up
            // on it and took its own path): so does this side, for its process's sender.
            Ok(None) => {
                remora_sys::flow::end(s.into(), DRAIN);
                return;
            }
            Err(_) => return,
        };
        for raw in buf[..n * BULK_FRAME].chunks_exact(BULK_FRAME) {
            if one(node, f, &mut carried, raw) == Step::End {
                remora_sys::flow::end(s.into(), DRAIN);
                return;
            }
        }
        // The first trigger named the connection: the flow is its owner's to read too (when
        // that owner is the process that dialed it), and the transport's shared reader
        // serves it from now on; only at a frame's edge, as they read whole frames.
        if let Some(c) = carried.filter(|_| !frames.split()) {
            let Some(n) = node.upgrade() else { return };
            let booking = {
                let mut reg = n.lock();
                let dialer = reg.back_flow_dialer(f.id);
                reg.share_flow(f.peer, c, s.as_fd(), Some(dialer))
            };
            if let Some(booking) = booking {
                let target = InterruptTarget { node: node.clone(), peer: f.peer, conn: c, via: Some(f.id) };
                let share = Box::new(OwnerFlow { node: node.clone(), booking, polls: 0 });
                let bytes = AtomicU64::new(0);
                crate::transport::shared_flow::serve_shared(f.peer, &bytes, s, c, &target, share);
                return;
            }
        }
    }
    // The far node never closed it after the dialing connection ended: ended the same way
    // (shut for writing and read until the far end ends), a reset would throw away what
    // the process had sent on it and the far end had not yet acknowledged.
    remora_sys::flow::end(s.into(), DRAIN);
}

/// A flow read by this thread alone: the whole frames that wait are taken, and a frame
/// split by the stream is read as far as it came, kept here and completed from the next
/// bytes (left in the socket, its part may keep the receive window shut for good,
/// `remora_sys::intr::take_frames`).
struct Frames {
    /// The first part of a split frame, `have` bytes of it.
    part: [u8; BULK_FRAME],
    have: usize,
}

impl Default for Frames {
    fn default() -> Self {
        Self { part: [0; BULK_FRAME], have: 0 }
    }
}

impl Frames {
    /// Whether part of a frame is kept (the stream is not at a frame's edge).
    fn split(&self) -> bool {
        self.have > 0
    }

    /// Read what waits on `fd` without blocking: `Some(n)` whole frames into the start of
    /// `buf` (`n` may be 0: nothing yet, or only part of a frame), `None` at the flow's end.
    fn take(&mut self, fd: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        if self.have == 0 {
            match take_frames(fd, BULK_FRAME, buf)? {
                Taken::Frames(n) => return Ok(Some(n)),
                Taken::Nothing => return Ok(Some(0)),
                Taken::Closed => return Ok(None),
                Taken::Partial(_) => {}
            }
        }
        match remora_sys::flow::recv(fd, &mut self.part[self.have..], false) {
            Ok(0) => return Ok(None),
            Ok(k) => self.have += k,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(Some(0)),
            Err(e) => return Err(e),
        }
        if self.have < BULK_FRAME {
            return Ok(Some(0));
        }
        buf[..BULK_FRAME].copy_from_slice(&self.part);
        self.have = 0;
        Ok(Some(1))
    }
}

/// Check one frame read back and trigger it, on the node's books.
fn one(node: &Weak<Node>, f: Flow, carried: &mut Option<u64>, raw: &[u8]) -> Step {
    let Some(n) = node.upgrade() else { return Step::End };
    let may_carry = |conn| n.lock().may_carry_back(f.id, f.peer, conn);
    let trigger =
        |conn| InterruptTarget { node: node.clone(), peer: f.peer, conn, via: Some(f.id) }.trigger(&[]);
    check_and_trigger(f.peer, carried, raw, may_carry, trigger)
}

/// One frame read back from `peer`: a plain trigger of the connection the flow carries
/// (`carried`; the first names it, and must pass `may_carry`), triggered by `trigger`.
/// Anything else, or a refusal, ends the flow.
fn check_and_trigger(
    peer: u32,
    carried: &mut Option<u64>,
    raw: &[u8],
    may_carry: impl FnOnce(u64) -> Result<(), &'static str>,
    trigger: impl FnOnce(u64) -> Result<(), remora_proto::Error>,
) -> Step {
    let h = match BulkFrame::parse(raw) {
        Ok(h) if h.op == BulkOp::Trigger && h.len == 0 && !h.ok && carried.is_none_or(|c| c == h.conn) => h,
        other => {
            tracing::warn!(peer, "a flow dialed to node {peer} sent back {other:?}; closed");
            return Step::End;
        }
    };
    // Once the flow carries a connection, a trigger of it after the connection ended (its
    // disconnect, through the daemons, overtook it) is still counted (`trigger_carried`).
    if carried.is_none() {
        if let Err(why) = may_carry(h.conn) {
            tracing::warn!(peer, conn = h.conn, "a flow dialed to node {peer} sent back {why}; closed");
            return Step::End;
        }
    }
    if let Err(e) = trigger(h.conn) {
        tracing::debug!(peer, conn = h.conn, "a trigger back was refused ({e}); flow closed");
        return Step::End;
    }
    *carried = Some(h.conn);
    Step::Served
}

#[cfg(test)]
mod tests {
    use super::*;
    use remora_proto::link::BulkHeader;
    use remora_proto::Error;
    use std::cell::Cell;
    use zerocopy::IntoBytes;

    fn frame(op: BulkOp, conn: u64, len: u64, ok: bool) -> Vec<u8> {
        let h = BulkHeader { op, tag: 0, conn, offset: 0, len, ok };
        BulkFrame::from_header(&h).as_bytes().to_vec()
    }

    fn trigger_of(conn: u64) -> Vec<u8> {
        BulkFrame::trigger(conn).as_bytes().to_vec()
    }

    /// Runs `check_and_trigger` on `raw` with books that allow `allowed` only and refuse
    /// triggers of `refused`; gives the step and the connections triggered.
    fn step(carried: &mut Option<u64>, raw: &[u8], allowed: u64, refused: u64) -> (Step, Vec<u64>) {
        let fired = Cell::new(Vec::new());
        let may = |c| if c == allowed { Ok(()) } else { Err("another process's connection") };
        let trigger = |c| {
            if c == refused {
                return Err(Error::NoSuchIntno);
            }
            let mut v = fired.take();
            v.push(c);
            fired.set(v);
            Ok(())
        };
        let s = check_and_trigger(9, carried, raw, may, trigger);
        (s, fired.take())
    }

    #[test]
    fn the_first_trigger_names_the_connection_the_flow_carries_from_then_on() {
        let mut carried = None;
        assert_eq!(step(&mut carried, &trigger_of(5), 5, 0), (Step::Served, vec![5]));
        assert_eq!(carried, Some(5));
        // Later ones of it are not asked of the books again (its disconnect may have
        // overtaken them: still counted).
        assert_eq!(step(&mut carried, &trigger_of(5), 0, 0), (Step::Served, vec![5]));
        // Another connection ends the flow, untriggered.
        assert_eq!(step(&mut carried, &trigger_of(6), 6, 0), (Step::End, vec![]));
        assert_eq!(carried, Some(5));
    }

    #[test]
    fn a_first_trigger_the_books_do_not_allow_ends_the_flow_untriggered() {
        let mut carried = None;
        assert_eq!(step(&mut carried, &trigger_of(5), 6, 0), (Step::End, vec![]));
        assert_eq!(carried, None, "it carries nothing");
    }

    #[test]
    fn anything_but_a_plain_trigger_ends_the_flow_untriggered() {
        for raw in [
            frame(BulkOp::Trigger, 5, 8, false),
            frame(BulkOp::Trigger, 5, 0, true),
            frame(BulkOp::Write, 5, 0, false),
            vec![0xa5; BULK_FRAME],
        ] {
            let mut carried = None;
            assert_eq!(step(&mut carried, &raw, 5, 0), (Step::End, vec![]), "{raw:?}");
            assert_eq!(carried, None);
        }
    }

    /// Issue 19's two-way flood on a flow read back before it is booked: frames that pile
    /// up unread shut the receive window with a frame split at its edge, and the part's
    /// buffer keeps the window shut until the part is read. Left in the socket, its rest and
    /// everything after it never came (the flow ended after 5 s), though every trigger had
    /// returned `Ok` to its sender. Every frame sent is taken, each one whole.
    #[test]
    fn frames_that_piled_up_unread_are_all_served() {
        use std::io::Write;
        const FRAMES: u64 = 20_000;
        let (mut tx, rx) = crate::transport::shared_flow::testing::flow_pair();
        let one = trigger_of(7);
        let sent = one.clone();
        // One trigger after the other, whole frames each, while nobody reads.
        let sender = std::thread::spawn(move || {
            for _ in 0..FRAMES {
                if tx.write_all(&sent).is_err() {
                    break;
                }
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        let (mut frames, mut buf) = (Frames::default(), [0u8; BULK_FRAME * FRAMES_PER_LOOK]);
        let mut got = 0u64;
        let t = Instant::now();
        while got < FRAMES && t.elapsed() < Duration::from_secs(20) {
            match remora_sys::poller::wait_ready(&[rx.as_fd()], Some(Duration::from_millis(100))) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
            let Ok(Some(n)) = frames.take(rx.as_fd(), &mut buf) else { break };
            for raw in buf[..n * BULK_FRAME].chunks_exact(BULK_FRAME) {
                assert_eq!(raw, &one[..], "frame {got} came whole");
                got += 1;
            }
        }
        let stalled = !sender.is_finished();
        // The flow's end lets a stalled sender go.
        let _ = rx.shutdown(std::net::Shutdown::Both);
        sender.join().unwrap();
        assert_eq!(got, FRAMES, "triggers sent but never taken (sender stalled: {stalled})");
        assert!(!frames.split());
    }

    #[test]
    fn a_refusal_ends_the_flow_and_names_nothing() {
        let mut carried = None;
        assert_eq!(step(&mut carried, &trigger_of(5), 5, 5), (Step::End, vec![]));
        assert_eq!(carried, None);
    }
}
