//! Serving a pager flow that the owner of its target reads too ([`SharedFlow`]: an
//! interrupt's trigger flow, whose owner reads it while it waits). Only triggers travel on
//! it, a header of [`BULK_FRAME`] bytes and a data interrupt's payload each; this thread
//! reads while the owner does not, whole frames only and under the shared lock (answers
//! too are written under it), and triggers through [`PeerMemory::trigger`] as
//! [`super::pager`] does: a frame that asks, or was refused, is answered. Any other frame
//! ends the flow, as does its close.

use crate::transport::{PeerMemory, SharedFlow};
use remora_proto::link::{
    BulkFrame, BulkHeader, BulkOp, BULK_FRAME, MAX_TRIGGER_DATA, TRIGGER_FULL, TRIGGER_REFUSED,
    TRIGGER_REMOVED,
};
use remora_proto::Error;
use remora_sys::intr::{take_frames, Frames, Taken, FRAMES_PER_LOOK};
use std::io::Write;
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
/// Looks ([`OWNER_PARK`] apart) with frames waiting after which this thread reads them even
/// though the owner read lately.
const STALE_LOOKS: u32 = 2;

/// Serve `s`, bound to connection `handle` of `mem`, shared with its owner by `share`,
/// until the flow ends or breaks; then shut it down both ways (the owner's duplicate
/// sees the end too).
pub(super) fn serve_shared(
    peer: u32,
    bytes_in: &AtomicU64,
    s: StdStream,
    handle: u64,
    mem: &dyn PeerMemory,
    mut share: Box<dyn SharedFlow>,
) {
    let mut buf = vec![0u8; BULK_FRAME * FRAMES_PER_LOOK + 2 * (BULK_FRAME + MAX_TRIGGER_DATA)];
    let payload = |h: &[u8]| {
        BulkFrame::parse(h)
            .ok()
            .filter(|h| h.op == BulkOp::Trigger && h.conn == handle)
            .map(|h| h.len as usize)
    };
    let frames = Frames { header: BULK_FRAME, max_payload: MAX_TRIGGER_DATA, payload: &payload };
    // Looks in a row at which the owner read lately but frames waited all the same.
    let mut unread = 0;
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
        if !share.try_lock() {
            // The owner reads it now (a few microseconds).
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        // Answers are written under the lock too: the owner writes its own.
        let served = match take_frames(s.as_fd(), &frames, &mut buf) {
            Ok(Taken::Frames(n)) => {
                bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                serve_triggers(peer, &buf[..n], mem, &s)
            }
            Ok(Taken::Nothing) => true,
            Ok(Taken::Closed) => false,
            Err(e) => {
                tracing::info!(peer, "a shared interrupt flow broke: {e}");
                false
            }
        };
        share.unlock();
        if !served {
            break;
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Both);
}

/// Whether the other end closed (or broke) the flow: its end must be read by this thread.
fn hung_up(s: &StdStream) -> bool {
    remora_sys::seqpacket::peer_closed(s.as_fd())
}

/// Trigger once per frame of `frames` (whole frames, checked by [`take_frames`]) with its
/// payload; answer a frame that asks, or that was refused, on `wr`. `false` when an
/// answer cannot be written: the flow ends.
fn serve_triggers(peer: u32, frames: &[u8], mem: &dyn PeerMemory, wr: &StdStream) -> bool {
    let mut at = 0;
    while at < frames.len() {
        let Ok(hdr) = BulkFrame::parse(&frames[at..at + BULK_FRAME]) else { return false };
        let body = &frames[at + BULK_FRAME..at + BULK_FRAME + hdr.len as usize];
        at += BULK_FRAME + hdr.len as usize;
        let done = mem.trigger(body);
        if hdr.ok || done.is_err() {
            let code = match done {
                Ok(()) => 0,
                Err(Error::NoSuchIntno) => TRIGGER_REMOVED,
                Err(Error::NoSpace) => TRIGGER_FULL,
                Err(_) => TRIGGER_REFUSED,
            };
            let ack = BulkHeader { op: BulkOp::Ack, ok: code == 0, len: 0, offset: code, ..hdr };
            let mut w = wr;
            if w.write_all(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&ack))).is_err() {
                tracing::info!(peer, "a shared interrupt flow's answer could not be written; closed");
                return false;
            }
        }
    }
    true
}
