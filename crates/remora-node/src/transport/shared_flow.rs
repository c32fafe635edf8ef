//! Serving a pager flow that the owner of its target reads too ([`SharedFlow`]: a plain
//! interrupt's trigger flow, whose owner reads it while it waits; also the backward
//! direction of such a flow this node dialed, `inbound/back_flow.rs`). Neutral: it knows
//! the flow as a stream socket and its target through [`PeerMemory`] and [`SharedFlow`]
//! only, so a transport's pager loop (`tcp/pager.rs`, whose flows the `ofi` transport
//! uses too) and the inbound side both call it without reaching into each other. Only plain triggers
//! travel on it, a whole frame of [`BULK_FRAME`] bytes each; this thread reads while the
//! owner does not, whole frames only and under the shared lock, and triggers through
//! [`PeerMemory::trigger`] as the pager loop (`tcp/pager.rs`) does. Nothing is ever written back: a
//! refusal ends the flow (its sender then takes the daemons' path, which says the error),
//! as does any other frame and its close (the owner is nudged away by the end itself).
//!
//! A split frame whose first part stays, the same number of bytes at every look over
//! [`SPLIT_HELD`] at least, may be held back for good (the part's buffer keeps the receive
//! window shut, `remora_sys::intr::take_frames`): this thread then takes the flow from the
//! owner for good ([`SharedFlow::leave`]) and reads it alone, the part included, so the
//! rest comes (issue 19's two-way flood lost 3-10 % of the triggers of a live interrupt
//! that had returned `Ok`). A part that grows or is replaced by another is on its way and
//! starts the count again. The flow is not given back: the owner's one-wake-up path (and
//! with `intr_pair` the backward direction) is lost for that flow's life, a cost
//! ARCHITECTURE.md states. It stays in the books, read alone
//! (`Registry::read_flow_alone`), so that its connection's end shuts it for writing as it
//! does the flows still shared, and the far end's answering end ends it here. The thread
//! reads it without changing the socket's settings, which are its other holders' too
//! (`serve_alone`).
//!
//! A flow ends (a refusal, a frame that does not belong, the far end's end) through
//! `remora_sys::flow::end`, once the flow is taken from the owner: shut for writing, then
//! what still comes is read and dropped until the far end ends its side too (by this
//! thread for [`DRAIN`], then by the process's reaper thread), never shut for reading. The
//! flow may carry the owner's own triggers back the other way (`inbound/back_flow.rs`), to
//! an interrupt that lives on: a socket shut for reading answers the far end's next bytes
//! with a reset, which threw away what the owner had sent and the far end had not yet
//! acknowledged, triggers that had returned `Ok`. Shut for writing only, what the owner
//! sent before goes out ahead of the end of the stream and the far end's reader takes it
//! all before it sees the end; the owner's next write fails and takes its own path. What
//! is dropped here are triggers of the connection the flow was bound to, which a refusal
//! says is gone (or sent after a frame that did not belong). The far end ends its side on
//! seeing ours, so its sender learns on its next write, and the drain stops then.

use crate::transport::{PeerMemory, SharedFlow};
use remora_proto::link::{BulkFrame, BulkOp, BULK_FRAME};
use remora_sys::intr::{take_frames, Taken, FRAMES_PER_LOOK};
use std::net::TcpStream as StdStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[cfg(test)]
pub(crate) mod testing;

/// How long the thread sleeps while the owner reads (it looks again after that). Long: a
/// flow's end wakes it at once, frames nobody waits for may wait, and a thread that woke
/// often would change how the machine's idle cores sleep (a ping-pong of blocked waits is
/// fast only while they poll before they halt).
const OWNER_PARK: Duration = Duration::from_millis(100);
/// How long one `poll` of the flow lasts, so that the owner's start is noticed.
const LOOK: Duration = Duration::from_millis(100);
/// The first nap when the owner holds the lock or no whole frame waits.
const LOCK_NAP: Duration = Duration::from_micros(50);
/// Naps after which the lock of a removed interrupt is not waited for.
const ABANDONED_NAPS: u32 = 4;
/// Looks ([`OWNER_PARK`] apart) with frames waiting after which this thread reads them even
/// though the owner read lately.
const STALE_LOOKS: u32 = 2;
/// How long part of a frame may wait alone, unchanged, before this thread takes the flow
/// for itself (its rest follows within a round trip unless the window is held shut).
const SPLIT_HELD: Duration = Duration::from_millis(10);
/// The longest nap between looks while part of a frame waits (several looks see it stay).
const SPLIT_NAP: Duration = Duration::from_millis(2);
/// How long this thread reads an ended flow (what comes dropped) for the far end to end it
/// too, before it hands the flow to the reaper thread (`remora_sys::flow::end`).
pub(crate) const DRAIN: Duration = Duration::from_secs(2);

/// Serve `s`, bound to connection `handle` of `mem`, shared with its owner by `share`,
/// until the flow ends or breaks; then end it without a reset (`remora_sys::flow::end`; the
/// owner's duplicate sees the end too).
pub(crate) fn serve_shared(
    peer: u32,
    bytes_in: &AtomicU64,
    s: StdStream,
    handle: u64,
    mem: &dyn PeerMemory,
    mut share: Box<dyn SharedFlow>,
) {
    let mut buf = [0u8; BULK_FRAME * FRAMES_PER_LOOK];
    // Looks in a row at which the owner read lately but frames waited all the same.
    let mut unread = 0;
    // The next nap's length (the lock taken, or no whole frame), and the lock failures in a
    // row since the interrupt was seen removed.
    let (mut nap, mut abandoned_naps) = (LOCK_NAP, 0);
    // Since when the looks (the lock held) found only part of a frame, and its bytes.
    let mut split: Option<(std::time::Instant, usize)> = None;
    loop {
        if split.is_none() && share.owner_reads() {
            // Frames that wait through several looks are read here all the same: an owner
            // stopped, or stuck in a wait that does not read them, must not hold them.
            let waiting = remora_sys::seqpacket::readable_now(s.as_fd()).unwrap_or(true);
            unread = if waiting { unread + 1 } else { 0 };
            if !hung_up(&s) && unread < STALE_LOOKS {
                share.park(OWNER_PARK);
                continue;
            }
        }
        match remora_sys::poller::wait_ready(&[s.as_fd()], Some(LOOK)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        if split.is_none() && unread == 0 && share.owner_reads() && !hung_up(&s) {
            continue;
        }
        unread = 0;
        // The owner holds the lock for a few microseconds at a time. The lock is in a page
        // that every process connected on this host may write: one that holds it forever
        // gets longer and longer naps, not a spinning thread; and once the interrupt is
        // removed (its owner may have died holding it) it is not waited for long.
        let locked = share.try_lock();
        // Lock failures counted since the interrupt was seen removed.
        abandoned_naps = if locked || !share.abandoned() { 0 } else { abandoned_naps + 1 };
        if !locked && abandoned_naps <= ABANDONED_NAPS {
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(20));
            continue;
        }
        let taken = take_frames(s.as_fd(), BULK_FRAME, &mut buf);
        // The bytes of the part of a frame that waits alone (seen with the lock held).
        let part = match taken {
            Ok(Taken::Partial(n)) if locked => Some(n),
            _ => None,
        };
        // The same part at the last look: since when it waits.
        let same = split.filter(|(_, b)| Some(*b) == part);
        if same.is_some_and(|(t, _)| t.elapsed() >= SPLIT_HELD) {
            // The same part of a frame at every look for a while: its rest may be held
            // back for good while the part stays unread (its buffer keeps the receive
            // window shut, `take_frames`). The flow is this thread's alone from now on:
            // the owner is told before the lock goes, and the part is read.
            share.leave();
            share.unlock();
            serve_alone(peer, bytes_in, &s, handle, mem);
            break;
        }
        if locked {
            share.unlock();
        }
        split = same.or_else(|| part.map(|b| (std::time::Instant::now(), b)));
        let n = match taken {
            Ok(Taken::Frames(n)) => n,
            Ok(Taken::Nothing | Taken::Partial(_)) => {
                // Part of a frame (its rest is on its way), or the owner took them.
                std::thread::sleep(nap);
                let most = if split.is_some() { SPLIT_NAP } else { Duration::from_millis(20) };
                nap = (nap * 2).min(most);
                continue;
            }
            Ok(Taken::Closed) | Err(_) => break,
        };
        nap = LOCK_NAP;
        bytes_in.fetch_add((n * BULK_FRAME) as u64, Ordering::Relaxed);
        if !serve_triggers(peer, &buf[..n * BULK_FRAME], handle, mem) {
            break;
        }
    }
    // The flow is taken from the owner first (the set's generation moves on under the
    // lock): what the end drains is dropped, and read in chunks of any size, which an
    // owner still reading would count, or find a frame cut in two.
    drop(share);
    remora_sys::flow::end(s.into(), DRAIN);
}

/// Serve flow `s` that nobody else reads any more ([`SharedFlow::leave`]): what comes is
/// read as it comes, a split frame's part kept until its rest follows, until the flow ends
/// (the far end's end, or a break) or a trigger is refused.
///
/// The socket's settings are left as they are: they are every holder's. Its file status
/// flags (`O_NONBLOCK`) are shared with every duplicate of the descriptor, and its timeouts
/// (`SO_RCVTIMEO`) with every descriptor of the socket: the process that dialed a flow
/// (`inbound/back_flow.rs`, whose duplicate this may be) holds it with its own timeouts
/// (`remora-sisci`'s `interrupt/direct.rs`). So nothing here blocks in a read: a read
/// that does not wait, and `poll` (with no timeout: the far end's end wakes it, and the
/// connection's end makes the far end end it, `Registry::read_flow_alone`) while nothing
/// waits. (It made the socket blocking with no read timeout before, which took away the
/// dialer's read timeout; a plain flow's dialer reads nothing, but nothing else should
/// depend on that.)
fn serve_alone(peer: u32, bytes_in: &AtomicU64, s: &StdStream, handle: u64, mem: &dyn PeerMemory) {
    let fd = s.as_fd();
    let mut buf = [0u8; BULK_FRAME * FRAMES_PER_LOOK];
    // Bytes held at the start of `buf`: less than a frame between two reads.
    let mut held = 0;
    loop {
        match remora_sys::flow::recv(fd, &mut buf[held..], false) {
            Ok(0) => return,
            Ok(n) => {
                held += n;
                let whole = held - held % BULK_FRAME;
                bytes_in.fetch_add(whole as u64, Ordering::Relaxed);
                if !serve_triggers(peer, &buf[..whole], handle, mem) {
                    return;
                }
                buf.copy_within(whole..held, 0);
                held -= whole;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // An interrupted wait answers 0: read again.
                if remora_sys::poller::wait_ready(&[fd], None).is_err() {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// Whether the other end closed (or broke) the flow, even with part of a frame left: its
/// end must be read by this thread.
fn hung_up(s: &StdStream) -> bool {
    remora_sys::intr::sender_gone(s.as_fd())
}

/// Trigger once per frame of `frames`. `false` when a frame is not a plain trigger of
/// `handle` or a trigger was refused: the flow ends.
fn serve_triggers(peer: u32, frames: &[u8], handle: u64, mem: &dyn PeerMemory) -> bool {
    for raw in frames.chunks_exact(BULK_FRAME) {
        match BulkFrame::parse(raw) {
            Ok(h) if h.op == BulkOp::Trigger && h.conn == handle && h.len == 0 && !h.ok => {}
            other => {
                tracing::warn!(peer, "a shared interrupt flow sent {other:?}; closed");
                return false;
            }
        }
        if let Err(e) = mem.trigger(&[]) {
            tracing::debug!(peer, handle, "a posted trigger was refused ({e}); flow closed");
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::testing::{flow_pair, wait_for, Counted};
    use super::*;
    use std::io::Write;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use zerocopy::IntoBytes;

    /// An owner that says it reads while `reads` says so, with a reader lock the test may
    /// hold (`lock`), that tells when the thread took the flow from it (`left`).
    struct Owner {
        reads: Arc<AtomicBool>,
        lock: Arc<AtomicBool>,
        left: Arc<AtomicBool>,
    }

    impl SharedFlow for Owner {
        fn owner_reads(&mut self) -> bool {
            self.reads.load(Ordering::SeqCst)
        }

        fn park(&self, max: Duration) {
            std::thread::sleep(max.min(Duration::from_millis(5)));
        }

        fn try_lock(&self) -> bool {
            self.lock.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_ok()
        }

        fn unlock(&self) {
            assert!(self.lock.swap(false, Ordering::SeqCst), "unlocked a lock not held");
        }

        fn abandoned(&self) -> bool {
            false
        }

        fn leave(&mut self) {
            assert!(self.lock.load(Ordering::SeqCst), "left without the lock");
            self.left.store(true, Ordering::SeqCst);
        }
    }

    /// A flow taken to be read alone keeps the settings its other holders gave the
    /// socket: the dialing process's read timeout (the socket's, for every descriptor of
    /// it) and `O_NONBLOCK` (every duplicate's). Before, the thread made the socket
    /// blocking with no read timeout. What comes is still served, the split frame too.
    #[test]
    fn a_flow_read_alone_keeps_its_holders_settings() {
        let (mut tx, rx) = flow_pair();
        let dialer = rx.try_clone().unwrap();
        let patience = Some(Duration::from_secs(7));
        dialer.set_read_timeout(patience).unwrap();
        dialer.set_nonblocking(true).unwrap();
        let reads = Arc::new(AtomicBool::new(false));
        let (lock, left) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let owner = Owner { reads, lock, left: left.clone() };
        let frame = BulkFrame::trigger(7);
        let (mem, bytes) = (Counted::default(), AtomicU64::new(0));
        std::thread::scope(|sc| {
            let server = sc.spawn(|| serve_shared(4, &bytes, rx, 7, &mem, Box::new(owner)));
            tx.write_all(frame.as_bytes()).unwrap();
            tx.write_all(&frame.as_bytes()[..BULK_FRAME / 3]).unwrap();
            assert!(wait_for(|| left.load(Ordering::SeqCst)), "the split frame's flow was not taken");
            assert!(wait_for(|| mem.count() == 1), "the whole frame was not served");
            tx.write_all(&frame.as_bytes()[BULK_FRAME / 3..]).unwrap();
            tx.write_all(frame.as_bytes()).unwrap();
            assert!(wait_for(|| mem.count() == 3), "the split frame's rest, or the next, not served");
            assert_eq!(dialer.read_timeout().unwrap(), patience, "the dialer's read timeout was changed");
            let nonblocking = remora_sys::bell::is_nonblocking(std::os::fd::AsFd::as_fd(&dialer));
            assert!(nonblocking, "the descriptors were made blocking");
            drop(tx);
            assert!(wait_for(|| server.is_finished()), "the far end's close did not end the thread");
        });
        assert_eq!(bytes.load(Ordering::SeqCst), 3 * BULK_FRAME as u64);
    }

    /// Issue 19's two-way flood: frames that pile up unread (nobody read while the
    /// sender triggered; here the owner holds the lock) shut the receive window with a
    /// frame split at its edge, and the part's buffer keeps the window shut until the
    /// part is read: a reader of whole frames only never got the rest, nor anything after
    /// it, though every trigger had returned `Ok` to its sender (on loopback a third of
    /// 20 000 frames came, every time). Every frame sent is served.
    #[test]
    fn frames_that_piled_up_unread_are_all_served() {
        const FRAMES: u64 = 20_000;
        // A write held back for good fails (the test reports it) instead of hanging.
        let (mut tx, rx) = flow_pair();
        let frame = BulkFrame::trigger(7);
        // The owner holds the lock and reads (it says), then stops.
        let (reads, lock) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(true)));
        let left = Arc::new(AtomicBool::new(false));
        let mem = Counted::default();
        let bytes = AtomicU64::new(0);
        let rx_end = rx.try_clone().unwrap();
        let (served, stalled) = std::thread::scope(|sc| {
            let owner = Owner { reads: reads.clone(), lock: lock.clone(), left: left.clone() };
            sc.spawn(|| serve_shared(4, &bytes, rx, 7, &mem, Box::new(owner)));
            // One trigger after the other, whole frames each, while nobody may read.
            let sender = sc.spawn(move || {
                for _ in 0..FRAMES {
                    if tx.write_all(frame.as_bytes()).is_err() {
                        break;
                    }
                }
            });
            std::thread::sleep(Duration::from_millis(300));
            reads.store(false, Ordering::SeqCst);
            lock.store(false, Ordering::SeqCst);
            wait_for(|| mem.count() >= FRAMES);
            let stalled = !sender.is_finished();
            // The flow's end lets the server go, and a stalled sender.
            let _ = rx_end.shutdown(std::net::Shutdown::Both);
            (mem.count(), stalled)
        });
        let left = left.load(Ordering::SeqCst);
        assert_eq!(
            served, FRAMES,
            "triggers sent but never served (sender stalled: {stalled}; flow taken alone: {left})"
        );
        // A window shut with a frame split at its edge is what held them: the thread took
        // the flow for itself to read the part.
        assert!(left, "every frame came without the flow taken from the owner");
    }
}
