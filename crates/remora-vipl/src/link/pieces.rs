//! The peer's pieces (its registered memory, exported as segments) as a [`Link`] reaches
//! them: connected on first use, and told apart when missing (removed, or its peer gone).

use super::{slot_at, valid_slot, window_of, Link, Miss, CONNECT_WAIT};
use crate::layout::{self, SLOT};
use crate::window::Window;
use crate::{Error, Nic, Result};
use remora_sisci::{RemoteSegment, UserRegion};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A map keyed by a node's segment id or a memory handle: looked up on every message's
/// payload, so hashed by one multiplication ([`remora_client::id_hash`]), not by the default
/// keyed hash (SipHash, a few dozen ns a look). Nothing outside the process chooses these
/// keys to collide: they are numbers the node, this library and the peer's library hand
/// out (a peer's memory handles, bounded by the slots it has).
pub(crate) type PieceMap<V> = remora_client::id_hash::IdMap<u32, V>;

impl Link {
    /// Run `f` on piece `id` of the peer (connected on first use, again after a loss of
    /// another host's segment). A piece on this host is used without asking whether it
    /// was lost: its memory stays mapped, and the VI learns of the loss otherwise.
    pub(super) fn with_piece<R>(
        &self,
        nic: &Nic,
        id: u32,
        f: impl FnOnce(&RemoteSegment, Option<&Window>) -> R,
    ) -> std::result::Result<R, Miss> {
        let mut pieces = self.pieces.lock();
        if let Some((seg, w)) = pieces.get(&id) {
            if w.is_some() || !seg.is_lost() {
                return Ok(f(seg, w.as_ref()));
            }
        }
        let seg = self.connect_piece(nic, id)?;
        let w = window_of(&seg)?;
        let r = f(&seg, w.as_ref());
        pieces.insert(id, (seg, w));
        self.pieces_changed();
        Ok(r)
    }

    /// The peer's pieces or table changed (under their lock): every [`PieceHint`] taken
    /// before is looked up again.
    pub(super) fn pieces_changed(&self) {
        self.pieces_gen.store(fresh_gen(), Ordering::Release);
    }

    /// [`Link::write_piece`], for a peer on this host in copy mode straight into the window
    /// `hint` kept of the piece, with no look at the piece table (its lock is a locked
    /// instruction, which waits for every store before it to leave the core: the last
    /// message's copy and completion). The hint is looked up again whenever the table
    /// changed since.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_piece_hinted(
        &self,
        nic: &Nic,
        hint: &mut PieceHint,
        id: u32,
        off: usize,
        src: &UserRegion,
        src_off: usize,
        len: usize,
    ) -> std::result::Result<(), Miss> {
        if self.is_far() || self.dma(nic) {
            return self.write_piece(nic, id, off, src, src_off, len);
        }
        let gen = self.pieces_gen.load(Ordering::Acquire);
        if hint.gen != gen || hint.piece.as_ref().is_none_or(|(i, _)| *i != id) {
            // Read before the look: a change after it leaves the hint older than the table.
            let w = self.with_piece(nic, id, |_, w| w.cloned())?;
            let Some(w) = w else { return self.write_piece(nic, id, off, src, src_off, len) };
            // The table's window stays while the tables did not change (an RDMA stream
            // alternating between two targets keeps it).
            let table = if hint.gen == gen { hint.table.take() } else { None };
            *hint = PieceHint { gen, piece: Some((id, w)), table };
        }
        match &hint.piece {
            Some((_, w)) => w.write_from(off, src, src_off, len).map_err(|e| Miss::from(Error::from(e))),
            None => self.write_piece(nic, id, off, src, src_off, len),
        }
    }

    /// The peer's table slot for `handle` as [`Link::slot`] reads it, for a peer on this
    /// host straight from the table's window kept in `hint` (read afresh every time, as
    /// there; only the table's lock is left out).
    pub(crate) fn slot_hinted(
        &self,
        nic: &Nic,
        hint: &mut PieceHint,
        handle: u32,
        epoch: u64,
    ) -> Result<Option<layout::FixedSlot>> {
        if self.is_far() {
            return self.slot(nic, handle, epoch);
        }
        let gen = self.pieces_gen.load(Ordering::Acquire);
        if hint.gen != gen || hint.table.is_none() {
            let s = self.slot(nic, handle, epoch)?;
            let w = self.table.lock().as_ref().and_then(|(_, w)| w.clone());
            if hint.gen != gen {
                hint.piece = None;
            }
            hint.gen = gen;
            hint.table = w;
            return Ok(s);
        }
        let Some(w) = &hint.table else { return self.slot(nic, handle, epoch) };
        let mut b = [0u8; SLOT];
        w.read(slot_at(handle), &mut b)?;
        Ok(valid_slot(&b, handle))
    }

    /// Connect to piece `id` of the peer. A piece is described to this side only once its
    /// segment exists and is available (`VipRegisterMem` makes it so before it returns a
    /// handle), and the node gives no segment an id it gave before until its 2^32 ids wrap
    /// around: a piece the peer's node does not know was removed ([`Miss::Gone`], its
    /// memory deregistered).
    /// The first ask does not wait for the segment to exist, only for the node's answer;
    /// any other failure of it (no answer in time, the segment not available, the peer's
    /// node not reached) is asked again with the usual wait.
    fn connect_piece(&self, nic: &Nic, id: u32) -> std::result::Result<RemoteSegment, Miss> {
        let ask =
            |wait| RemoteSegment::connect(&nic.inner.desc, self.peer.node, id, remora_sisci::ADAPTER, wait);
        match ask(Some(Duration::ZERO)) {
            Ok(seg) => Ok(seg),
            Err(remora_sisci::Error::NoSuchSegment) => Err(self.piece_or_peer_gone(nic)),
            Err(_) => Ok(ask(Some(CONNECT_WAIT))?),
        }
    }

    /// A piece the peer's node does not know: removed ([`Miss::Gone`]) while the peer
    /// lives. When the peer's VI segment is gone too, the peer itself is (its process
    /// ended, and its node removed all its segments at once, before this side heard of the
    /// loss): the transfer fails as on a lost connection ([`Miss::Failed`]), not as a
    /// protection error (reviewer 92).
    fn piece_or_peer_gone(&self, nic: &Nic) -> Miss {
        if self.seg.is_lost() {
            return Miss::Failed;
        }
        let vi = self.peer.vi_seg;
        match RemoteSegment::connect(
            &nic.inner.desc,
            self.peer.node,
            vi,
            remora_sisci::ADAPTER,
            Some(Duration::ZERO),
        ) {
            Ok(seg) => {
                let _ = seg.disconnect();
                Miss::Gone
            }
            Err(_) => Miss::Failed,
        }
    }
}

/// A fresh number for [`Link::pieces_changed`], never given before in this process: a hint
/// of one link never matches another's.
pub(super) fn fresh_gen() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The window of the peer's piece a send queue wrote last, and of its table, as the
/// link's tables were at `gen` (a send queue's, under its lock: see
/// [`Link::write_piece_hinted`]).
#[derive(Debug, Default)]
pub(crate) struct PieceHint {
    gen: u64,
    piece: Option<(u32, Window)>,
    table: Option<Window>,
}
