//! The owner of an interrupt reads the trigger flows of other hosts' processes itself
//! while it waits (`remora_sys::intr`, the flows the owner reads): a trigger from another
//! host then wakes the waiting thread straight from the socket, one wake-up as a raw TCP
//! reader has, instead of waking the daemon's thread, which rang the page's bell.
//!
//! The daemon books each such flow for the interrupt's owner and bumps the
//! page's generation of the set; a wait that finds the generation changed asks for the
//! set again (`Request::InterruptFlows`, a duplicate of each socket).

use super::Core;
use remora_proto::link::{
    BulkFrame, BulkHeader, BulkOp, BULK_FRAME, MAX_TRIGGER_DATA, TRIGGER_FULL, TRIGGER_REFUSED,
    TRIGGER_REMOVED,
};
use remora_proto::{Reply, Request};
use remora_sys::intr::{
    send_whole, shut_flow, take_frames, FlowStep, Frames, IntrPage, IntrWait, Taken, TriggerError,
    FRAMES_PER_LOOK,
};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;
use zerocopy::IntoBytes;

/// The flows of one interrupt its owner has (empty for everyone else).
#[derive(Debug, Default)]
pub(super) struct OwnFlows {
    /// The generation of the set held (0: none was ever booked).
    gen: u32,
    /// Each flow, with the owner's node's handle of the connection it triggers through.
    flows: Vec<(OwnedFd, u64)>,
}

impl OwnFlows {
    /// Ask for the set again when the page says it changed.
    fn refresh(&mut self, core: &Core) {
        let now = core.page().flows_generation();
        if now == self.gen {
            return;
        }
        let asked = core.desc.session().request(Request::InterruptFlows { intr: core.handle }, &[]);
        match asked {
            Ok((Reply::InterruptFlows { gen, conns }, fds)) if fds.len() == conns.len() => {
                self.gen = gen;
                self.flows = fds.into_iter().zip(conns).collect();
            }
            // The daemon reads them all, as before; asked again at the next change.
            _ => {
                self.gen = now;
                self.flows.clear();
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
    let Ok(mut own) = core.own.try_lock() else { return page.wait(spin, timeout, ready) };
    if !page.far_connected() {
        return page.wait(spin, timeout, ready);
    }
    own.refresh(core);
    let fds: Vec<_> = own.flows.iter().map(|(f, _)| f.as_fd()).collect();
    let mut buf = vec![0u8; BULK_FRAME * FRAMES_PER_LOOK + 2 * (BULK_FRAME + MAX_TRIGGER_DATA)];
    let mut on_flow = |i: usize| {
        let (fd, conn) = (own.flows[i].0.as_fd(), own.flows[i].1);
        if !page.try_read_lock() {
            // The daemon's thread reads it now; its ring wakes us.
            return FlowStep::Idle;
        }
        let step = serve(page, fd, conn, core.data, &mut buf);
        page.read_unlock();
        step
    };
    page.wait_owned(spin, timeout, &fds, own.gen, &mut on_flow, ready)
}

/// Read the whole trigger frames waiting on flow `fd` of connection `conn` and deliver
/// them as the daemon would (`transport/tcp/pager_shared.rs`): plain triggers counted, a
/// data interrupt's payloads queued and answered when the frame asks or it was refused.
/// Called with the reader lock held (answers are written under it too).
fn serve(page: &IntrPage, fd: BorrowedFd<'_>, conn: u64, data: bool, buf: &mut [u8]) -> FlowStep {
    let payload = |h: &[u8]| {
        BulkFrame::parse(h).ok().filter(|h| h.op == BulkOp::Trigger && h.conn == conn).map(|h| h.len as usize)
    };
    let frames = Frames { header: BULK_FRAME, max_payload: MAX_TRIGGER_DATA, payload: &payload };
    let n = match take_frames(fd, &frames, buf) {
        Ok(Taken::Frames(n)) => n,
        Ok(Taken::Nothing) => return FlowStep::Idle,
        Ok(Taken::Closed) | Err(_) => {
            // Its end (or a frame it may not send) is the daemon's thread's to see.
            shut_flow(fd);
            page.nudge();
            return FlowStep::Drop;
        }
    };
    let mut plain = 0;
    let mut at = 0;
    while at < n {
        let Ok(h) = BulkFrame::parse(&buf[at..at + BULK_FRAME]) else { break };
        let body = &buf[at + BULK_FRAME..at + BULK_FRAME + h.len as usize];
        at += BULK_FRAME + h.len as usize;
        let code = match (data, body.is_empty()) {
            (false, true) => {
                plain += 1;
                0
            }
            (false, false) => TRIGGER_REFUSED,
            (true, _) => match page.send_read(body) {
                Ok(()) => 0,
                Err(TriggerError::Removed) => TRIGGER_REMOVED,
                Err(TriggerError::Full) => TRIGGER_FULL,
                Err(TriggerError::TooLong) => TRIGGER_REFUSED,
            },
        };
        if (h.ok || code != 0)
            && !answer(fd, &BulkHeader { op: BulkOp::Ack, ok: code == 0, len: 0, offset: code, ..h })
        {
            page.count_read(plain);
            shut_flow(fd);
            page.nudge();
            return FlowStep::Drop;
        }
    }
    page.count_read(plain);
    FlowStep::Read
}

/// Write answer `h` on `fd` whole, without blocking; `false` when it could not.
fn answer(fd: BorrowedFd<'_>, h: &BulkHeader) -> bool {
    send_whole(fd, BulkFrame::from_header(h).as_bytes())
}
