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

use crate::transport::{PeerMemory, SharedFlow};
use remora_proto::link::{BulkFrame, BulkOp, BULK_FRAME};
use remora_sys::intr::{take_frames, Taken, FRAMES_PER_LOOK};
use std::net::TcpStream as StdStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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

/// Serve `s`, bound to connection `handle` of `mem`, shared with its owner by `share`,
/// until the flow ends or breaks; then shut it down both ways (the owner's duplicate
/// sees the end too).
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
    loop {
        if share.owner_reads() {
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
        if unread == 0 && share.owner_reads() && !hung_up(&s) {
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
        if locked {
            share.unlock();
        }
        let n = match taken {
            Ok(Taken::Frames(n)) => n,
            Ok(Taken::Nothing) => {
                // Part of a frame (its rest is on its way), or the owner took them.
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(20));
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
    let _ = s.shutdown(std::net::Shutdown::Both);
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
