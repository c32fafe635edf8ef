//! A connected VI's peer and the connection's end: breaking the VI (`fail`), what this
//! side tells the peer about itself, noticing a peer that went (`check_peer`), and the
//! reset of the VI's state and segment after a disconnect.

use super::{lock, ViInner, ViState};
use crate::layout;
use crate::link::direct::Pump;
use crate::link::PeerInfo;
use crate::{ErrorCode, ErrorEvent, Nic};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl ViInner {
    /// Move to ERROR (a reliable VI's connection broke), tell the error callback, and
    /// wake every waiter.
    pub(crate) fn fail(self: &Arc<Self>, code: ErrorCode, descriptor: Option<usize>, tell_peer: bool) {
        {
            let mut st = lock(&self.state);
            if *st != ViState::Connected {
                return;
            }
            *st = ViState::Error;
            if let Some(l) = self.link() {
                l.broken.store(true, Ordering::Release);
            }
        }
        // The Error state completes every posted receive flushed, so no wait goes on; what
        // the peer completed before it went is taken in first (a peer that said it is gone
        // ended its own stream after its last frame: read to that end; else what the
        // stream holds now, a crashed peer's last frames among it).
        if let Some(d) = self.link().as_deref().and_then(|l| l.direct()) {
            let how = if self.peer_said() != 0 { Pump::ToEnd } else { Pump::Now };
            d.pump(&self.map, &self.recv_next, how);
        }
        let _ = self.take_completions();
        self.flush_receives();
        // A receive that completed with an error, taken in here or by another thread that
        // has not broken the VI yet (it let the queue's lock go, and this thread came
        // first): the VI broke with that receive, and the callback names it, whichever
        // thread got here first. A caller that names its own descriptor keeps it.
        let (code, descriptor, told) = match (descriptor, self.recv.lock().broke) {
            (None, Some(addr)) => (ErrorCode::PostDesc, Some(addr), code),
            _ => (code, descriptor, code),
        };
        if tell_peer {
            if let Some(l) = self.link() {
                l.say_error(told);
            }
        }
        self.wake();
        self.nic.report(ErrorEvent {
            vi: Some(self.vi()),
            cq: None,
            descriptor,
            opcode: 0,
            resource: if descriptor.is_some() { 3 } else { 1 },
            code,
        });
    }

    /// What this VI tells its peer about itself when they connect.
    pub(crate) fn peer_info(&self) -> PeerInfo {
        let a = self.attrs();
        let bell = self.recv_cq.as_ref().map_or(self.bell.number(), |cq| cq.bell_number());
        PeerInfo {
            node: self.nic.node(),
            vi_seg: self.seg.id(),
            bell,
            table: self.nic.table_id(),
            reliability: a.reliability,
            max_transfer: a.max_transfer,
            rdma_write: a.rdma_write,
            rdma_read: a.rdma_read,
            ptag: a.ptag.0,
            bell_always: self.recv_cq.is_some(),
            conn: self.conn.load(Ordering::Acquire),
            direct: None,
        }
    }

    /// Look at what the peer wrote about itself: a disconnect, an error, its loss.
    /// [`ViInner::check_peer`] when the peer said something (looked at every 8th call),
    /// else on every 128th call, or every 4096th while the NIC's watcher runs (it checks
    /// every VI's peer every 10 ms itself): for receive polls, which must stay cheap (the
    /// check takes locks, and a message that lands during one waits for it).
    #[inline]
    pub(crate) fn check_peer_now_and_then(self: &Arc<Self>) {
        // A count, not a tally: no locked instruction on every poll.
        let n = self.polls.load(Ordering::Relaxed);
        self.polls.store(n.wrapping_add(1), Ordering::Relaxed);
        if n.is_multiple_of(8)
            && (self.peer_said() != 0
                || (n.is_multiple_of(128) && (n.is_multiple_of(4096) || !self.nic.watcher_runs())))
        {
            self.check_peer(&self.nic);
        }
    }

    /// What this connection's peer said about itself ([`layout::PEER_STATE`] without the
    /// connection number): 0 while connected. A word stored by the peer of an earlier
    /// connection (its number differs) reads as 0.
    #[inline(always)]
    pub(crate) fn peer_said(&self) -> u64 {
        layout::untagged(self.conn(), self.map.load(layout::PEER_STATE)).map_or(0, u64::from)
    }

    pub(crate) fn check_peer(self: &Arc<Self>, _nic: &Nic) {
        if *lock(&self.state) != ViState::Connected {
            return;
        }
        let Some(link) = self.link() else { return };
        let said = self.peer_said();
        if said != 0 {
            // `fail` takes in what the peer completed before its word first (its stream read
            // to the end it made after its last frame): a receive it refused (too short, its
            // memory gone) breaks a reliable VI with that receive's own error, as when it is
            // reaped, not with the word's (whichever thread looks first, the callback gets
            // the same code).
            self.fail(said_code(said), None, false);
        } else if link.is_lost() || link.has_failed() {
            self.fail(ErrorCode::ConnLost, None, false);
        } else if link.direct().is_some_and(|d| d.broken()) {
            // The pair's stream broke (or ended without the peer's word): what it held may
            // be lost, so the VI breaks, and the peer hears it.
            self.fail(ErrorCode::ConnLost, None, true);
        }
    }

    /// Forget the link in the queues (the first step of a disconnect): sends and receives
    /// posted from now on find the VI by its state.
    pub(crate) fn unlink(&self) {
        {
            let mut s = self.send.lock();
            s.link = None;
            s.hint = Default::default();
        }
        self.recv.lock().link = None;
    }

    /// Reset the queues after a disconnect: every receive still posted completes flushed,
    /// and the counts start again from zero for the next connection.
    pub(crate) fn reset(&self) {
        self.flush_receives();
        {
            let mut q = self.recv.lock();
            // The next connection has another number (what the old peer still stores is
            // not heard by it), taken before the count starts again under this lock: a
            // receive poll that saw the old connection's entry and waits for the lock then
            // finds the count back at its number, but not the connection.
            self.conn.fetch_add(1, Ordering::AcqRel);
            q.pushed = 0;
            q.consumed = 0;
            self.recv_next.store(0, Ordering::Release);
            q.described.clear();
            q.cache.clear();
            q.link = None;
            q.broke = None;
        }
        {
            let mut s = self.send.lock();
            s.consumed = 0;
            s.seen = 0;
            s.cache.clear();
            s.heads.clear();
            s.hint = Default::default();
        }
        self.clear_segment();
    }

    /// Zero the segment's words and ring B: after a disconnect, and again right before this
    /// VI's description goes to a new peer, so a store the old peer had under way when the
    /// disconnect came is wiped. One that lands later still carries the old connection
    /// number (as ring A's entries do), and is not heard.
    pub(crate) fn clear_segment(&self) {
        let _ = self.map.write(0, &[0u8; layout::RING_A]);
        let _ = self.map.write(layout::RING_B, &[0u8; layout::ENTRIES * layout::COMPLETION]);
    }
}

/// The error a peer's word ([`ViInner::peer_said`], not 0) breaks the VI with.
pub(crate) fn said_code(said: u64) -> ErrorCode {
    match said & 0xFF {
        2 => match (said >> 8) & 0xFF_FFFF {
            2 => ErrorCode::RecvqEmpty,
            4 => ErrorCode::RdmawProt,
            7 => ErrorCode::RdmarProt,
            _ => ErrorCode::ConnLost,
        },
        _ => ErrorCode::ConnLost,
    }
}
