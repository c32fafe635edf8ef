//! The owner of an interrupt reads the trigger flows of other hosts' processes itself
//! while it waits (`remora_sys::intr`, the flows the owner reads): a trigger from another
//! host then wakes the waiting thread straight from the socket, one wake-up as a raw TCP
//! reader has, instead of waking the daemon's thread, which rang the page's bell.
//!
//! The daemon books each such flow of a plain interrupt for its owner and bumps the
//! page's generation of the set; a wait that finds the generation changed asks for the
//! set again (`Request::InterruptFlows`, a duplicate of each socket).

use super::Core;
use remora_proto::link::{BulkFrame, BulkOp, BULK_FRAME};
use remora_proto::{Reply, Request};
use remora_sys::intr::{take_frames, FlowStep, IntrPage, IntrWait, Taken, FRAMES_PER_LOOK};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// How long the owner waits for the rest of a split frame before it leaves its flows to
/// the daemon's threads: across hosts most segments end in the middle of a frame (40-byte
/// frames, 1448-byte segments), and their rest follows within microseconds.
const SPLIT_GRACE: Duration = Duration::from_millis(1);

/// The flows of one interrupt its owner has (empty for everyone else).
#[derive(Debug, Default)]
pub(super) struct OwnFlows {
    /// The generation of the set held (0: none was ever booked).
    gen: u32,
    /// Each flow, with the owner's node's handle of the connection it triggers through.
    flows: Vec<(OwnedFd, u64)>,
    /// Since when each flow held only part of a frame, in the current wait (kept between
    /// waits so that the record is not allocated per wait; reset at each).
    split: Vec<Option<Instant>>,
}

impl OwnFlows {
    /// Ask for the set again when the page says it changed.
    fn refresh(&mut self, core: &Core) {
        let now = core.page().flows_generation();
        if now == self.gen {
            return;
        }
        // Never behind another thread's request on the descriptor (a connect that waits for
        // its interrupt to exist, say): the set held is kept for now, and the daemon reads
        // the flows that joined after it.
        let Some(asked) = core.desc.session().try_request(Request::InterruptFlows { intr: core.handle }, &[])
        else {
            return;
        };
        match asked {
            Ok((Reply::InterruptFlows { gen, conns, nodes }, fds))
                if fds.len() == conns.len() && nodes.len() == conns.len() =>
            {
                self.gen = gen;
                self.flows = fds.into_iter().zip(conns).collect();
                super::back::offer(core.handle, super::back::side(&core.desc), &self.flows, &nodes);
            }
            // The daemon reads them all, as before; asked again at the next change.
            _ => {
                self.gen = now;
                self.flows.clear();
                super::back::offer(core.handle, super::back::side(&core.desc), &[], &[]);
            }
        }
    }
}

/// Wait on `core`'s page, reading the flows the owner has when other hosts are connected.
pub(super) fn wait(
    core: &Core,
    spin: Duration,
    timeout: Option<Duration>,
    ready: impl FnMut(u32) -> bool,
) -> IntrWait {
    let page = core.page();
    // Another thread of the process holds the flows: it reads them; this one sleeps on
    // the page's futex, which every trigger wakes.
    let Ok(mut guard) = core.own.try_lock() else { return page.wait(spin, timeout, ready) };
    if !page.far_connected() {
        return page.wait(spin, timeout, ready);
    }
    guard.refresh(core);
    let own = &mut *guard;
    let fds: Vec<_> = own.flows.iter().map(|(f, _)| f.as_fd()).collect();
    let mut buf = [0u8; BULK_FRAME * FRAMES_PER_LOOK];
    let gen = own.gen;
    // No flow held part of a frame yet in this wait.
    own.split.clear();
    own.split.resize(own.flows.len(), None);
    let (flows, split) = (&own.flows, &mut own.split);
    let mut on_flow = |i: usize| take(page, gen, &flows[i], &mut split[i], &mut buf);
    page.wait_owned(spin, timeout, &fds, gen, &mut on_flow, ready)
}

/// Read the whole trigger frames waiting on `flow` (of the set of generation `gen`) and
/// count them in the page. `split`: since when the flow held only part of a frame.
fn take(
    page: &IntrPage,
    gen: u32,
    flow: &(OwnedFd, u64),
    split: &mut Option<Instant>,
    buf: &mut [u8],
) -> FlowStep {
    let (fd, conn) = (flow.0.as_fd(), flow.1);
    if !page.try_read_lock() {
        // The daemon's thread reads it now; its ring wakes us.
        return FlowStep::Idle;
    }
    if page.flows_generation() != gen {
        // The set changed: the daemon's thread may have taken this flow for itself (it
        // does so under the lock, before it reads a split frame), so none is read here
        // until the next wait asks for the set again.
        page.read_unlock();
        page.owner_leaves();
        return FlowStep::Drop;
    }
    let taken = take_frames(fd, BULK_FRAME, buf);
    page.read_unlock();
    if !matches!(taken, Ok(Taken::Partial(_))) {
        *split = None;
    }
    match taken {
        Ok(Taken::Frames(n)) => {
            let valid = buf[..n * BULK_FRAME]
                .chunks_exact(BULK_FRAME)
                .take_while(|raw| {
                    BulkFrame::parse(raw)
                        .is_ok_and(|h| h.op == BulkOp::Trigger && h.conn == conn && h.len == 0 && !h.ok)
                })
                .count();
            page.count_read(valid as u32);
            if valid == n {
                return FlowStep::Read;
            }
            // Not a plain trigger of this connection: the flow ends, as the daemon ends it,
            // shut for writing only. Shut for reading too, the far end's next bytes would
            // be answered with a reset, which throws away what this process sent back on
            // the flow and the far end had not yet acknowledged (triggers of a live
            // interrupt that returned `Ok`). The far end ends its side on seeing ours, and
            // the daemon's thread then ends the flow (`remora_sys::flow::end`).
            remora_sys::flow::shutdown(fd, true);
            page.nudge();
            FlowStep::Drop
        }
        Ok(Taken::Nothing) => FlowStep::Idle,
        Ok(Taken::Partial(_)) if split.is_none_or(|t| t.elapsed() < SPLIT_GRACE) => {
            // Part of a frame: its rest is most likely on its way (a segment ended
            // inside the frame).
            split.get_or_insert_with(Instant::now);
            FlowStep::Idle
        }
        Ok(Taken::Partial(_)) => {
            // Part of a frame that stays: its rest may be held back until the part is
            // read, which only the daemon's thread does (it takes the flow for itself when
            // the part stays): the daemon reads the flows for the rest of this wait.
            page.owner_leaves();
            FlowStep::Drop
        }
        Ok(Taken::Closed) | Err(_) => {
            // Its end is the daemon's thread's to see and close.
            page.nudge();
            FlowStep::Drop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn page() -> IntrPage {
        let memfd = IntrPage::create("sisci-owned-test").unwrap();
        IntrPage::open(&memfd, remora_sys::sync::EventFd::new().unwrap()).unwrap()
    }

    /// The sending end, the flow, and a copy of the flow to peek with.
    fn flow() -> (std::net::TcpStream, (OwnedFd, u64), std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        rx.set_nonblocking(true).unwrap();
        let peek = rx.try_clone().unwrap();
        (tx, (OwnedFd::from(rx), 7), peek)
    }

    fn trigger() -> BulkFrame {
        BulkFrame::trigger(7)
    }

    /// The bytes waiting on the flow `peek` is a copy of (after they had time to come).
    fn waiting(peek: &std::net::TcpStream) -> usize {
        std::thread::sleep(Duration::from_millis(20));
        peek.peek(&mut [0u8; 4 * BULK_FRAME]).unwrap_or(0)
    }

    /// The daemon's thread took a flow for itself (`SharedFlow::leave` moved the set's
    /// generation on, under the lock): the owner's look with the old set drops the flow and
    /// reads none of it, not even whole frames (they are the daemon's thread's now).
    #[test]
    fn a_flow_whose_set_moved_on_is_not_read() {
        let page = page();
        let (mut tx, f, peek) = flow();
        let gen = page.flows_changed();
        let mut buf = [0u8; BULK_FRAME * FRAMES_PER_LOOK];
        tx.write_all(zerocopy::IntoBytes::as_bytes(&trigger())).unwrap();
        assert_eq!(waiting(&peek), BULK_FRAME);
        // The daemon's thread leaves (with the lock, as `OwnerFlow::leave` does).
        assert!(page.try_read_lock());
        page.flows_changed();
        page.read_unlock();
        assert_eq!(take(&page, gen, &f, &mut None, &mut buf), FlowStep::Drop);
        assert_eq!(waiting(&peek), BULK_FRAME, "the owner read a flow no longer its own");
        assert_eq!(page.triggers(), 0);
    }

    /// Part of a frame: the owner waits a little for the rest (a segment that ended inside
    /// a frame), then leaves its flows to the daemon's threads, the part unread.
    #[test]
    fn a_split_frame_is_awaited_briefly_then_left() {
        let page = page();
        let (mut tx, f, peek) = flow();
        let gen = page.flows_changed();
        let mut buf = [0u8; BULK_FRAME * FRAMES_PER_LOOK];
        let frame = trigger();
        let bytes = zerocopy::IntoBytes::as_bytes(&frame);
        let mut split = None;
        tx.write_all(&bytes[..BULK_FRAME / 2]).unwrap();
        assert_eq!(waiting(&peek), BULK_FRAME / 2);
        // Its first sight: the rest is awaited.
        assert_eq!(take(&page, gen, &f, &mut split, &mut buf), FlowStep::Idle);
        tx.write_all(&bytes[BULK_FRAME / 2..]).unwrap();
        assert_eq!(waiting(&peek), BULK_FRAME);
        assert_eq!(take(&page, gen, &f, &mut split, &mut buf), FlowStep::Read);
        assert_eq!(split, None, "a whole frame ends the grace");
        // A part that stays past the grace: the flow is left, the part unread.
        tx.write_all(&bytes[..BULK_FRAME / 2]).unwrap();
        assert_eq!(waiting(&peek), BULK_FRAME / 2);
        assert_eq!(take(&page, gen, &f, &mut split, &mut buf), FlowStep::Idle);
        std::thread::sleep(SPLIT_GRACE * 2);
        assert_eq!(take(&page, gen, &f, &mut split, &mut buf), FlowStep::Drop);
        assert_eq!(waiting(&peek), BULK_FRAME / 2);
    }
}
