//! Plain triggers carried back on another host's process's flow (issue 19; unless either
//! node's cluster file says `intr_pair = false`: the owner's daemon then names that flow as
//! from its own node, and it is not offered here). A process of a lower node that connected to
//! one of our interrupts triggers it over a flow of its own (a TCP connection its daemon
//! dialed to ours); when we trigger an interrupt of that node too, our triggers go back on
//! the same connection, so that a ping-pong between the two processes takes one
//! connection, not two one-way ones each of whose segments gets a bare ACK. The owner's
//! wait learns the flows from our daemon with the node each comes from
//! ([`super::owned`]), and offers those of lower nodes here; the far daemon takes from a
//! flow only triggers of connections this process made (the process the flow was dialed
//! to), books the flow only for the process that dialed it, and reads it alone otherwise.
//!
//! A flow carries one connection's triggers back (the first that takes it), and is never
//! taken by another after that connection ended; a trigger goes back only on a flow from
//! the node of its connection to its own descriptor (the one that owns the interrupt the
//! flow was dialed to: the far daemon takes back only that session's connections). A
//! trigger goes back only
//! when the whole frame fits at once; otherwise, or once the flow failed, it takes the
//! connection's own path ([`super::direct`], or the daemons'), so nothing is lost and
//! nothing counted twice (only whole frames are served). A refusal (the interrupt removed)
//! ends the flow, and the next trigger learns the error through the own path. A flow out of
//! step (part of a frame went, its rest did not within 2 s) is ended for writing only: the
//! far process's triggers of our interrupt still come on it until its daemon sees the end
//! and ends its side (never a reset, which would lose those sent and not yet here). The
//! far daemon ends a flow the same way (`remora_sys::flow::end`): it drops what still
//! comes, so a trigger looks (at most every millisecond) whether the far node ended the
//! flow before it sends on it, and takes its own path once it did. A disconnect
//! waits until what went back was taken by the far host's kernel (not yet served there):
//! the disconnect, which goes through the daemons, can overtake it, and the far daemon
//! then counts it all the same on the interrupt the flow carried it to, as long as the
//! flow lives. A child made by `fork` never touches the table (the sockets are its
//! parent's): its triggers take their own path.

use remora_proto::link::BulkFrame;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use zerocopy::IntoBytes;

/// Which descriptor of this process a flow serves: its node, and its session (the daemon
/// takes back only triggers of connections made by the session that owns the interrupt
/// the flow was dialed to: a process may create its interrupt through one descriptor and
/// connect through another, review 106).
pub(super) type Side = (u32, usize);

/// The [`Side`] of descriptor `desc`. (Its session lives as long as the descriptor, and a
/// flow's entry no longer than its interrupt, which holds the descriptor.)
pub(super) fn side(desc: &crate::Descriptor) -> Side {
    (desc.node(), std::sync::Arc::as_ptr(desc.session()) as usize)
}

/// How long a trigger waits to finish a frame of which part went.
const FINISH: Duration = Duration::from_secs(2);
/// How long a disconnect waits for what went back to be taken.
const SETTLE: Duration = Duration::from_secs(2);
/// How often triggers look whether the far node ended the flow (a look is a system call,
/// as long as the send itself).
const LOOK_EVERY: Duration = Duration::from_millis(1);

/// A flow that may carry our triggers back.
#[derive(Debug)]
struct Back {
    /// Our interrupt it triggers, and our node's handle of the far process's connection.
    intr: u64,
    conn: u64,
    /// The node it comes from (where the triggers it carries back go), and our interrupt's
    /// descriptor (a process may hold descriptors of several nodes, or several of one: a
    /// trigger goes back only on a flow to its own connection's descriptor).
    node: u32,
    mine: Side,
    fd: OwnedFd,
    /// The far node's handle of the connection of ours whose triggers it carries.
    carries: Option<u64>,
    /// That connection ended, or the flow failed: it carries no more.
    spent: bool,
    /// A trigger finishes a frame on it without the table's lock: others take their own path
    /// meanwhile.
    busy: bool,
    /// When the far node's end of it was last looked for ([`LOOK_EVERY`]).
    looked: Option<Instant>,
}

static FLOWS: Mutex<Vec<Back>> = Mutex::new(Vec::new());
/// The process that offered flows (0: none yet). A child made by `fork` never touches the
/// table (its lock may have been held at the fork; its sockets are the parent's): its
/// triggers take their own path.
static OFFERED_BY: AtomicU32 = AtomicU32::new(0);
/// Triggers sent back so far ([`sent`]).
static SENT: AtomicU64 = AtomicU64::new(0);

/// How many plain triggers this process sent back on other processes' flows.
pub(super) fn sent() -> u64 {
    SENT.load(Ordering::Relaxed)
}

/// The table, unless no flow was ever offered or this process is a child made by `fork`.
fn flows() -> Option<std::sync::MutexGuard<'static, Vec<Back>>> {
    let by = OFFERED_BY.load(Ordering::Relaxed);
    (by != 0 && by == remora_sys::sched::own_pid()).then(|| FLOWS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// The set of flows our interrupt `intr` (of descriptor `mine`) reads is now `set`, each
/// with the node it comes from: those from lower nodes may carry triggers back.
pub(super) fn offer(intr: u64, mine: Side, set: &[(OwnedFd, u64)], nodes: &[u32]) {
    let me = remora_sys::sched::own_pid();
    if OFFERED_BY.load(Ordering::Relaxed) == 0 && nodes.iter().any(|n| *n < mine.0) {
        let _ = OFFERED_BY.compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed);
    }
    let Some(mut all) = flows() else { return };
    all.retain(|b| b.intr != intr || set.iter().any(|(_, c)| *c == b.conn));
    for ((fd, conn), node) in set.iter().zip(nodes) {
        if *node >= mine.0 || all.iter().any(|b| b.intr == intr && b.conn == *conn) {
            continue;
        }
        if let Ok(fd) = fd.try_clone() {
            all.push(Back {
                intr,
                conn: *conn,
                node: *node,
                mine,
                fd,
                carries: None,
                spent: false,
                busy: false,
                looked: None,
            });
        }
    }
}

/// Our interrupt `intr` is gone: its flows carry nothing back any more.
pub(super) fn forget(intr: u64) {
    if let Some(mut all) = flows() {
        all.retain(|b| b.intr != intr);
    }
}

/// Send a plain trigger of connection `remote` (the far node's handle), made by our
/// descriptor `mine`, to an interrupt of `node` back on a flow from there to `mine`;
/// `false` when none can take it whole now (the caller takes the connection's own path).
pub(super) fn send(node: u32, mine: Side, remote: u64) -> bool {
    let frame = BulkFrame::trigger(remote);
    let bytes = frame.as_bytes();
    // Under the table's lock: the whole frame went, or none did, or part did (its rest is
    // written after the lock is let go: a full socket may take up to [`FINISH`]).
    let (fd, n, key) = {
        let Some(mut all) = flows() else { return false };
        let usable = |b: &Back| b.node == node && b.mine == mine && !b.spent && !b.busy;
        let at = match all.iter().position(|b| usable(b) && b.carries == Some(remote)) {
            Some(i) => i,
            None => match all.iter().position(|b| usable(b) && b.carries.is_none()) {
                Some(i) => i,
                None => return false,
            },
        };
        let b = &mut all[at];
        // The far node ended the flow (a refusal ends it for writing only, and drops what
        // still comes: `remora_sys::flow::end`): this and later triggers take their own
        // path, which says the error.
        if b.looked.is_none_or(|t| t.elapsed() >= LOOK_EVERY) {
            b.looked = Some(Instant::now());
            if remora_sys::intr::sender_gone(b.fd.as_fd()) {
                b.spent = true;
                return false;
            }
        }
        b.carries = Some(remote);
        match remora_sys::flow::send(b.fd.as_fd(), bytes, false) {
            Ok(n) if n == bytes.len() => {
                SENT.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            Ok(n) if n > 0 => match b.fd.try_clone() {
                Ok(fd) => {
                    b.busy = true;
                    (fd, n, (b.intr, b.conn))
                }
                Err(_) => {
                    // Out of step for good: ended for writing only (ended for reading too,
                    // the far process's triggers that come next would be answered with a
                    // reset, which throws away what they sent before and is not yet here).
                    remora_sys::flow::shutdown(b.fd.as_fd(), true);
                    b.spent = true;
                    return false;
                }
            },
            // No room now: this one takes the own path, the flow is kept.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            // Ended (a refusal ends it) or broken.
            _ => {
                b.spent = true;
                return false;
            }
        }
    };
    // Part went (the socket had less room than a frame): the rest must follow, or the
    // stream is out of step for good.
    let done = finish(fd.as_fd(), &bytes[n..]);
    if !done {
        remora_sys::flow::shutdown(fd.as_fd(), true);
    }
    if let Some(mut all) = flows() {
        if let Some(b) = all.iter_mut().find(|b| (b.intr, b.conn) == key) {
            b.busy = false;
            b.spent |= !done;
        }
    }
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
pub(super) fn release(node: u32, mine: Side, remote: u64, silent: impl Fn() -> bool) {
    let fd = {
        let Some(mut all) = flows() else { return };
        let at = |b: &Back| b.node == node && b.mine == mine && b.carries == Some(remote);
        let Some(b) = all.iter_mut().find(|b| at(b)) else { return };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// In a child made by `fork` (the parent offered the flows, and another of its threads
    /// may have held the table's lock at the fork) nothing here touches the table: a trigger
    /// takes its own path, and nothing waits for the lock.
    #[test]
    fn a_child_made_by_fork_never_touches_the_table() {
        OFFERED_BY.store(remora_sys::sched::own_pid().wrapping_add(1), Ordering::Relaxed);
        let held = FLOWS.lock().unwrap_or_else(|p| p.into_inner());
        assert!(!send(4, (8, 1), 1), "a child's trigger takes its own path");
        release(4, (8, 1), 1, || false);
        forget(1);
        offer(1, (8, 1), &[], &[4]);
        drop(held);
        OFFERED_BY.store(0, Ordering::Relaxed);
    }
}
