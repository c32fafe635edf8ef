//! RDMA write and read against the peer's registered memory: the peer's region table says
//! which pieces (segments and offsets) a range lies in and what the region allows; the
//! bytes then go piece by piece through the link (a copy on one host, the channel across
//! hosts).

use crate::layout::{self, status};
use crate::link::{Link, Miss, PieceHint};
use crate::vi::{ViInner, RELIABLE_RECEPTION};
use remora_sisci::UserRegion;

impl ViInner {
    /// An RDMA write or read of `local` against the peer's memory at `remote` (`hint`: the
    /// send queue's, see `Link::write_piece_hinted`). Returns the error bits. With
    /// `completion_follows` (a write with immediate data), the bytes
    /// of a write to a peer on another host are left queued on the channel for the
    /// completion's [`ViInner::deliver`] to send with it.
    pub(crate) fn rdma(
        &self,
        hint: &mut PieceHint,
        link: &Link,
        remote: layout::DataSegment,
        local: &[UserRegion],
        write: bool,
        completion_follows: bool,
    ) -> u32 {
        let total: usize = local.iter().map(|s| s.len()).sum();
        let allowed = if write { link.peer.rdma_write } else { link.peer.rdma_read };
        // The peer's count of table changes matters only for a peer on another host (its
        // slots are kept between writes). On this host the slot is read afresh every time,
        // and the count's line is also where the peer stores its posted count on every post
        // of a receive: not looked at (a trip between the cores on every write).
        let epoch = if link.is_far() {
            layout::untagged(self.conn(), self.map.load(layout::PEER_TABLE))
                .map_or(crate::link::NO_EPOCH, u64::from)
        } else {
            crate::link::NO_EPOCH
        };
        let slot = match link.slot_hinted(&self.nic, hint, remote.handle, epoch) {
            Ok(Some(s)) => s,
            Ok(None) => return status::RDMA_PROT_ERROR,
            Err(_) => return status::TRANSPORT_ERROR,
        };
        let flag = if write { layout::SLOT_RDMA_WRITE } else { layout::SLOT_RDMA_READ };
        let inside = remote.addr >= slot.base && remote.addr + total as u64 <= slot.base + slot.len;
        if !allowed || slot.flags & flag == 0 || !inside || slot.ptag != link.peer.ptag {
            return status::RDMA_PROT_ERROR;
        }
        let mut at = remote.addr;
        for l in local {
            let mut off = 0usize;
            while off < l.len() {
                let Some(&(seg, seg_off, start, len)) =
                    slot.pieces().iter().find(|p| at >= p.2 && at < p.2 + p.3)
                else {
                    return status::RDMA_PROT_ERROR;
                };
                let n = ((start + len - at) as usize).min(l.len() - off);
                let where_ = (seg_off + at - start) as usize;
                let r = if write {
                    link.write_piece_hinted(&self.nic, hint, seg, where_, l, off, n)
                } else {
                    link.read_piece(&self.nic, seg, where_, l, off, n)
                };
                if let Err(miss) = r {
                    // Whatever was queued goes now (the target's bytes are undefined after a
                    // failed write), not with a later message.
                    if write && link.is_far() {
                        link.push();
                    }
                    // A piece removed since the slot was read: memory deregistered.
                    return match miss {
                        Miss::Gone => status::RDMA_PROT_ERROR,
                        Miss::Failed => status::TRANSPORT_ERROR,
                    };
                }
                off += n;
                at += n as u64;
            }
        }
        // Another host: the written bytes on their way (landed first for reliable
        // reception); an immediate's completion follows them down the same channel.
        if write && link.is_far() && !completion_follows {
            let ok = if self.attrs().reliability == RELIABLE_RECEPTION { link.settle() } else { link.push() };
            if !ok {
                return status::TRANSPORT_ERROR;
            }
        }
        0
    }
}
