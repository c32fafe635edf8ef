//! Plain triggers carried back on another host's process's flow (issue 19), when the
//! cluster file says `intr_pair = true` (off by default: the owner's daemon then names every
//! flow as from its own node, and nothing is offered here). A process of a
//! lower node that connected to one of our interrupts triggers it over a flow of its own
//! (a TCP connection its daemon dialed to ours); when we trigger an interrupt of that node
//! too, our triggers go back on the same connection, so that a ping-pong between the two
//! processes takes one connection, not two one-way ones each of whose segments gets a bare
//! ACK. The owner's wait learns the flows from our daemon with the node each comes from
//! ([`super::owned`]), and offers those of lower nodes here; the far daemon checks every
//! frame against its books and books the flow for the interrupt's owner there, who reads
//! it directly.
//!
//! A flow carries one connection's triggers back (the first that takes it), and is never
//! taken by another after that connection ended. A trigger goes back only when the whole
//! frame fits at once; otherwise, or once the flow failed, it takes the connection's own
//! path ([`super::direct`], or the daemons'), so nothing is lost and nothing counted twice
//! (only whole frames are served). A refusal (the interrupt removed) ends the flow, and the
//! next trigger learns the error through the own path. A disconnect waits until what went
//! back was taken by the far host's kernel; that is not yet served, and the disconnect,
//! which goes through the daemons, can overtake it there (the far daemon then drops it: a
//! known fault, one reason the pairing is off by default).

use remora_proto::link::{BulkFrame, BulkHeader, BulkOp};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use zerocopy::IntoBytes;

/// How long a trigger waits to finish a frame of which part went.
const FINISH: Duration = Duration::from_secs(2);
/// How long a disconnect waits for what went back to be taken.
const SETTLE: Duration = Duration::from_secs(2);

/// A flow that may carry our triggers back.
#[derive(Debug)]
struct Back {
    /// Our interrupt it triggers, and our node's handle of the far process's connection.
    intr: u64,
    conn: u64,
    /// The node it comes from (where the triggers it carries back go).
    node: u32,
    fd: OwnedFd,
    /// The far node's handle of the connection of ours whose triggers it carries.
    carries: Option<u64>,
    /// That connection ended, or the flow failed: it carries no more.
    spent: bool,
}

static FLOWS: Mutex<Vec<Back>> = Mutex::new(Vec::new());
/// Triggers sent back so far ([`sent`]).
static SENT: AtomicU64 = AtomicU64::new(0);

/// How many plain triggers this process sent back on other processes' flows.
pub(super) fn sent() -> u64 {
    SENT.load(Ordering::Relaxed)
}

fn flows() -> std::sync::MutexGuard<'static, Vec<Back>> {
    FLOWS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The set of flows our interrupt `intr` (of node `mine`) reads is now `set`, each with the
/// node it comes from: those from lower nodes may carry triggers back.
pub(super) fn offer(intr: u64, mine: u32, set: &[(OwnedFd, u64)], nodes: &[u32]) {
    let mut all = flows();
    all.retain(|b| b.intr != intr || set.iter().any(|(_, c)| *c == b.conn));
    for ((fd, conn), node) in set.iter().zip(nodes) {
        if *node >= mine || all.iter().any(|b| b.intr == intr && b.conn == *conn) {
            continue;
        }
        if let Ok(fd) = fd.try_clone() {
            all.push(Back { intr, conn: *conn, node: *node, fd, carries: None, spent: false });
        }
    }
}

/// Our interrupt `intr` is gone: its flows carry nothing back any more.
pub(super) fn forget(intr: u64) {
    flows().retain(|b| b.intr != intr);
}

/// Send a plain trigger of connection `remote` (the far node's handle) to an interrupt of
/// `node` back on a flow from there; `false` when none can take it whole now (the caller
/// takes the connection's own path).
pub(super) fn send(node: u32, remote: u64) -> bool {
    let mut all = flows();
    let usable = |b: &Back| b.node == node && !b.spent;
    let at = match all.iter().position(|b| usable(b) && b.carries == Some(remote)) {
        Some(i) => i,
        None => match all.iter().position(|b| usable(b) && b.carries.is_none()) {
            Some(i) => i,
            None => return false,
        },
    };
    let b = &mut all[at];
    b.carries = Some(remote);
    let frame = BulkFrame::from_header(&BulkHeader {
        op: BulkOp::Trigger,
        tag: 0,
        conn: remote,
        offset: 0,
        len: 0,
        ok: false,
    });
    let bytes = frame.as_bytes();
    let done = match remora_sys::flow::send(b.fd.as_fd(), bytes, false) {
        Ok(n) if n == bytes.len() => true,
        Ok(n) if n > 0 => {
            // Part went (the socket had less room than a frame): the rest must follow, or
            // the stream is out of step for good.
            let done = finish(b.fd.as_fd(), &bytes[n..]);
            if !done {
                remora_sys::intr::shut_flow(b.fd.as_fd());
                b.spent = true;
            }
            done
        }
        // No room now: this one takes the own path, the flow is kept.
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        // Ended (a refusal ends it) or broken.
        _ => {
            b.spent = true;
            false
        }
    };
    if done {
        SENT.fetch_add(1, Ordering::Relaxed);
    }
    done
}

/// Write the rest of a frame, waiting for room at most [`FINISH`].
fn finish(fd: std::os::fd::BorrowedFd<'_>, mut rest: &[u8]) -> bool {
    let t = Instant::now();
    while !rest.is_empty() && t.elapsed() < FINISH {
        match remora_sys::flow::send(fd, rest, false) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let _ = remora_sys::bell::wait(fd, true, Some(Duration::from_millis(20)));
            }
            Err(_) => return false,
        }
    }
    rest.is_empty()
}

/// Connection `remote` to an interrupt of `node` ends: its flow back carries no more, and
/// this waits (at most [`SETTLE`], not while `silent`) until what it sent back was taken by
/// the far host, before the disconnect goes through the daemons.
pub(super) fn release(node: u32, remote: u64, silent: impl Fn() -> bool) {
    let fd = {
        let mut all = flows();
        let Some(b) = all.iter_mut().find(|b| b.node == node && b.carries == Some(remote)) else { return };
        b.spent = true;
        b.fd.try_clone()
    };
    let Ok(fd) = fd else { return };
    let t = Instant::now();
    while t.elapsed() < SETTLE && !silent() {
        match remora_sys::intr::unsent(fd.as_fd()) {
            Ok(0) | Err(_) => break,
            Ok(_) => std::thread::sleep(Duration::from_micros(200)),
        }
    }
}
