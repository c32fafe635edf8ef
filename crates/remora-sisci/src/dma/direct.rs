//! Small DMA transfers to and from a segment of another host over the process's own pager
//! flow to the segment's node, instead of through the node daemon's engine: the bytes
//! leave from (or land in) this process's mapping of its local segment, and the job is DONE
//! once the home has them (a write is acknowledged by the home; a read's bytes are here).
//! One round trip, no daemon of this host on the way. A queue runs one job at a time, so
//! such a transfer always comes after the queue's earlier ones have ended.
//!
//! Transfers of up to [`SMALL`] (8 KiB) go this way (a vector too when its pieces follow
//! each other on both sides: [`contiguous`]). Up to 64 KiB was tried: between namespace
//! hosts under load (2-4) 64 KiB moved over the flow at a median 4.6 GB/s written, 5.2
//! read, beside the engine's 2.3-3.0 and 3.3, but on a quiet machine the flow sat in its
//! slow state (0.84-0.93 GB/s, as a raw 64 KiB stream's idle state) in most runs while the
//! engine's bulk lanes made 2.1-3.7 GB/s.
//!
//! Anything else (large, pieces that do not follow each other, a callback, this host's
//! segment, a multicast connection, no flow) goes to the engine; so does a transfer whose flow failed, which the
//! engine then makes again (a copy made twice leaves the same bytes) and, when the home
//! refused it, reports with the precise error.

use crate::map::SegmentRange;
use crate::segment::{LocalSegment, RemoteSegment};
use remora_client::dsm::{HeldFlow, RemoteRange, Sink, Source};
use remora_sys::dma::{DmaDesc, DMA_F_READ, DMA_F_USER_MEM};
use remora_sys::Mapping;
use std::os::fd::AsFd;
use std::sync::Arc;

/// Transfers of at most this many bytes go over the flow. (64 KiB for a while: faster on a
/// loaded machine, but on a quiet one a 64 KiB transfer over the flow took ~75 µs in most
/// runs, 0.84-0.93 GB/s, where the engine's bulk lanes made 2.1-3.7 GB/s, three runs each,
/// interleaved.)
pub(super) const SMALL: u64 = 8 << 10;

/// The one transfer `descs` make when each piece follows the one before on both sides
/// (one piece, or a vector of adjacent pieces, as the engine would join them).
pub(super) fn contiguous(descs: &[DmaDesc]) -> Option<DmaDesc> {
    let (first, rest) = descs.split_first()?;
    let mut one = *first;
    for d in rest {
        let follows = d.local == one.local
            && d.remote == one.remote
            && d.flags == one.flags
            && d.local_off == one.local_off.checked_add(one.size)?
            && d.remote_off == one.remote_off.checked_add(one.size)?;
        if !follows {
            return None;
        }
        one.size = one.size.checked_add(d.size)?;
    }
    Some(one)
}

/// What a queue keeps for its small transfers: the flow to the remote segment last reached
/// and a mapping of the local segment last used.
#[derive(Debug, Default)]
pub(super) struct Direct {
    flow: Option<(u64, HeldFlow)>,
    local: Option<(u64, Arc<Mapping>)>,
}

impl Direct {
    /// Make the one transfer `d` between `local` and `remote` here when it is small and
    /// reaches another host. `None`: not made (the engine makes it); `Some(Err)`: the flow
    /// failed, the bytes may or may not have moved.
    pub(super) fn run(
        &mut self,
        local: &LocalSegment,
        remote: &RemoteSegment,
        d: &DmaDesc,
    ) -> Option<std::io::Result<()>> {
        if d.size > SMALL || d.flags & DMA_F_USER_MEM != 0 || !remora_config::Config::get().pager_flows {
            return None;
        }
        let link = remote.link().ok()?;
        if link.memfd.is_some() || !link.legs.is_empty() || remote.is_lost() {
            return None;
        }
        let map = self.local_map(local)?;
        let conn = link.conn;
        if !matches!(&self.flow, Some((c, f)) if *c == conn && !f.broken()) {
            let range: Arc<dyn RemoteRange> = Arc::new(SegmentRange { conn });
            self.flow = Some((conn, HeldFlow::open(&link.session, &range)?));
        }
        let flow = &self.flow.as_ref()?.1;
        let piece = [(map, d.local_off as usize, d.size as usize)];
        Some(match d.flags & DMA_F_READ != 0 {
            true => flow.read(d.remote_off, Sink::Pieces(&piece)),
            false => flow.write(d.remote_off, Source::Pieces(&piece)),
        })
    }

    /// A mapping of the whole of `local` (made once per segment).
    fn local_map(&mut self, local: &LocalSegment) -> Option<Arc<Mapping>> {
        let seg = local.handle();
        if let Some((s, m)) = &self.local {
            if *s == seg && m.len() == local.size() {
                return Some(m.clone());
            }
        }
        let memfd = local.inner.memfd.read().unwrap_or_else(|p| p.into_inner());
        let m = Arc::new(Mapping::new(memfd.as_ref()?.as_fd(), 0, local.size(), Default::default()).ok()?);
        self.local = Some((seg, m.clone()));
        Some(m)
    }
}
