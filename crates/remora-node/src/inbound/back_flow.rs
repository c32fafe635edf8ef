//! The backward direction of a plain interrupt flow this node dialed (issue 19). A process
//! here triggers another host's interrupt over its own flow; the owner of that interrupt,
//! when its node is the higher one, sends its own plain triggers of this host's interrupts
//! back on the same connection, so that a ping-pong between the two processes takes one
//! TCP connection, not two one-way ones each of whose segments gets a bare ACK.
//!
//! This thread reads those triggers while the owner here does not: each is checked against
//! the books (a plain interrupt connection of the flow's node to an interrupt of this one)
//! and triggered through them, as the serving side does forward (`pager_shared.rs`). At
//! the first valid one the flow is booked for the owner of the interrupt it triggers
//! (`Registry::share_flow`), who then reads it itself while it waits; from then on the
//! transport's shared reader serves it. One flow carries one connection's triggers back: a
//! frame naming another connection, or anything but a plain trigger, ends the flow. A
//! trigger refused (the interrupt removed) ends it too, so its sender falls back to its own
//! path, which says the error; one naming a connection already ended (it raced the
//! disconnect) is dropped. The flow ends when the far node closes it: after the dialing
//! connection's end (`Registry::end_back_flows` shuts our side for writing).

use super::owner_flow::OwnerFlow;
use super::InterruptTarget;
use crate::transport::PeerMemory;
use crate::Node;
use remora_proto::link::{BulkFrame, BulkOp, BULK_FRAME};
use remora_sys::intr::{shut_flow, take_frames, Taken, FRAMES_PER_LOOK};
use std::net::TcpStream;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How long one `poll` of the flow lasts before the dialing connection is looked at.
const LOOK: Duration = Duration::from_millis(100);
/// The nap when only part of a frame came.
const NAP: Duration = Duration::from_micros(50);
/// Looks after the dialing connection ended at which the thread stops waiting for the far
/// node's close (a route that went silent never brings it).
const ENDED_LOOKS: u32 = 100;

/// Read the backward direction of `fd`, the flow dialed to `peer` for this node's plain
/// interrupt connection `conn`, on a thread of its own.
pub(crate) fn serve(node: &Arc<Node>, peer: u32, conn: u64, fd: OwnedFd) {
    let Ok(kept) = fd.try_clone() else { return };
    let id = node.lock().keep_back_flow(conn, kept);
    let weak = Arc::downgrade(node);
    let spawned = std::thread::Builder::new().name("remora-back-flow".into()).spawn({
        let weak = weak.clone();
        move || {
            read(&weak, peer, conn, TcpStream::from(fd));
            if let Some(n) = weak.upgrade() {
                n.lock().forget_back_flow(id);
            }
        }
    });
    if spawned.is_err() {
        node.lock().forget_back_flow(id);
    }
}

/// What one frame read back came to.
enum Step {
    /// Triggered (its connection, the first time).
    Served,
    /// Its connection ended meanwhile: dropped.
    Dropped,
    /// Not a plain trigger of the flow's connection, or refused: the flow ends.
    End,
}

fn read(node: &Weak<Node>, peer: u32, conn: u64, s: TcpStream) {
    let mut buf = [0u8; BULK_FRAME * FRAMES_PER_LOOK];
    // The connection the flow carries back, once a trigger named it.
    let mut carried: Option<u64> = None;
    let mut ended_looks = 0;
    loop {
        match remora_sys::poller::wait_ready(&[s.as_fd()], Some(LOOK)) {
            Ok(0) => {
                let Some(n) = node.upgrade() else { return };
                if n.lock().intr_conns.contains_key(&conn) {
                    ended_looks = 0;
                } else {
                    ended_looks += 1;
                    if ended_looks >= ENDED_LOOKS {
                        break;
                    }
                }
                continue;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        let n = match take_frames(s.as_fd(), BULK_FRAME, &mut buf) {
            Ok(Taken::Frames(n)) => n,
            Ok(Taken::Nothing) => {
                std::thread::sleep(NAP);
                continue;
            }
            Ok(Taken::Closed) | Err(_) => return,
        };
        for raw in buf[..n * BULK_FRAME].chunks_exact(BULK_FRAME) {
            match one(node, peer, &mut carried, raw) {
                Step::Served | Step::Dropped => {}
                Step::End => {
                    shut_flow(s.as_fd());
                    return;
                }
            }
        }
        // The first trigger named the connection: the flow is its owner's to read too,
        // and the transport's shared reader serves it from now on.
        if let Some(c) = carried {
            let Some(n) = node.upgrade() else { return };
            let booking = n.lock().share_flow(peer, c, s.as_fd(), true);
            if let Some(booking) = booking {
                let target = InterruptTarget { node: node.clone(), peer, conn: c };
                let share = Box::new(OwnerFlow { node: node.clone(), booking, polls: 0 });
                let bytes = AtomicU64::new(0);
                crate::transport::tcp::pager_shared::serve_shared(peer, &bytes, s, c, &target, share);
                return;
            }
        }
    }
    // The far node never closed it after the dialing connection ended.
    shut_flow(s.as_fd());
}

/// Check one frame read back and trigger it.
fn one(node: &Weak<Node>, peer: u32, carried: &mut Option<u64>, raw: &[u8]) -> Step {
    let h = match BulkFrame::parse(raw) {
        Ok(h) if h.op == BulkOp::Trigger && h.len == 0 && !h.ok && carried.is_none_or(|c| c == h.conn) => h,
        other => {
            tracing::warn!(peer, "a flow dialed to node {peer} sent back {other:?}; closed");
            return Step::End;
        }
    };
    let Some(n) = node.upgrade() else { return Step::End };
    let held = InterruptTarget::held(&n.lock(), peer, h.conn);
    match held {
        // A connection that ended: a trigger that raced its disconnect.
        None if carried.is_some() => return Step::Dropped,
        None => {
            tracing::warn!(peer, conn = h.conn, "a flow dialed to node {peer} triggers no connection of it");
            return Step::End;
        }
        Some((_, true)) => {
            tracing::warn!(peer, "a data interrupt's trigger came back on a plain flow; closed");
            return Step::End;
        }
        Some((_, false)) => {}
    }
    let target = InterruptTarget { node: node.clone(), peer, conn: h.conn };
    if let Err(e) = target.trigger(&[]) {
        // Its connection ended since it was looked at: the same race as above.
        if carried.is_some() && InterruptTarget::held(&n.lock(), peer, h.conn).is_none() {
            return Step::Dropped;
        }
        tracing::debug!(peer, conn = h.conn, "a trigger back was refused ({e}); flow closed");
        return Step::End;
    }
    *carried = Some(h.conn);
    Step::Served
}
