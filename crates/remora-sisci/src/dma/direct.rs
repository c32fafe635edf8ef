//! DMA transfers waited for (and small ones) to and from a segment of another host over the
//! process's own pager flow to the segment's node, instead of through the node daemon's
//! engine: the bytes leave from (or land in) this process's mapping of its local segment,
//! or its own memory, and the job is DONE once the home has them (a write is acknowledged
//! by the home; a read's bytes are here). One round trip per piece, as a raw TCP transfer
//! that waits for its answer, and no daemon of this host on the way (the engine's is two
//! thread hand-offs more: post, worker, completion). A queue runs one job at a time, so
//! such a transfer always comes after the queue's earlier ones have ended.
//!
//! A transfer between a local segment and another host's goes this way when it is waited
//! for (`SCI_FLAG_DMA_WAIT`: the posting thread waits for it anyway) and of at most
//! [`WAITED`] bytes, or when it is of at most [`SMALL`] bytes; a vector too when its pieces
//! follow each other on both sides ([`contiguous`]). A large one whose flow another thread
//! is using at that moment (a second queue to the same segment, a map's fetch) goes to the
//! engine instead, so queues side by side move over the engine's bulk lanes side by side
//! rather than one after the other. The flow's answers are waited for as a DMA wait is,
//! spinning `REMORA_SPIN_US` first (`Direct::answer_header` in `remora-client`): with the
//! waiting thread asleep, a 64 KiB transfer fell into the slow state of a 64 KiB exchange
//! between idle cores (1.0 GB/s beside the raw reference's 2.46 in the same run) in one run
//! of four. Measured between namespace hosts (`remora bench hosts --only
//! bulk,copy,concurrent`, five runs interleaved with the engine's path, load 5-11): 64 KiB
//! written / read 0.90 / 0.98 of raw TCP moving the same pieces, each answered, where the
//! engine made 0.62 / 0.61; 1 MiB 0.99 / 0.84 beside 0.83 / 0.91.
//!
//! A transfer of the program's own memory (`SCIStartDmaTransferMem`, and RSM's `put`/`get`
//! across hosts, which stand on it) goes this way at any size when it is waited for: the
//! bytes go straight between the socket and that memory, where the engine would copy them
//! through `/proc/PID/mem` into a scratch mapping first, then send it, one 4 MiB chunk at a
//! time (RSM's 1 MiB `put`/`get` across hosts made 0.22-0.27 of a raw TCP transfer that
//! way, 0.85-1.6 over the flow: `remora bench rsm`, loopback, three interleaved runs each,
//! on a loaded machine). One not waited for goes to the engine, as the call promises (the
//! caller goes on while it moves), unless it is small.
//!
//! Anything else (large and not waited for, pieces that do not follow each other, a
//! callback, this host's segment, a multicast connection, no flow, a route reported silent) goes to the engine;
//! so does a transfer whose flow failed, which the engine then makes again (a copy made
//! twice leaves the same bytes) and, when the home refused it, reports with the precise
//! error. A flow is stopped when its connection's route falls silent
//! (`LinkWatch::stop_on_down`): a transfer on it then fails over to the engine at once,
//! which ends it in ERROR, rather than after the flow's 10 s patience.

use crate::map::SegmentRange;
use crate::segment::{LocalSegment, RemoteSegment};
use crate::UserRegion;
use remora_client::dsm::{FlowStop, HeldFlow, RemoteRange, Sink, Source};
use remora_sys::dma::{DmaDesc, DMA_F_READ, DMA_F_USER_MEM};
use remora_sys::Mapping;
use std::os::fd::AsFd;
use std::sync::Arc;

/// Transfers not waited for go over the flow up to this many bytes (the posting thread
/// makes them: the caller, who asked to go on while it moves, waits this long at most).
pub(super) const SMALL: u64 = 8 << 10;

/// Transfers of a local segment waited for go over the flow up to this many bytes. Larger
/// ones go to the engine, whose worker streams 4 MiB chunks over a bulk lane of its own per
/// queue: 16 MiB over the flow made 0.89-0.98 of raw TCP beside the engine's 0.90-1.27, and
/// four queues at once of 16 MiB each 0.55-0.71 beside 0.94-1.75 (namespace hosts, load
/// 3-5, interleaved).
pub(super) const WAITED: u64 = 1 << 20;

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

/// The local side of a transfer the flow may make: a local segment, or the program's own
/// memory (`SCIStartDmaTransferMem`).
#[derive(Clone, Copy)]
pub(super) enum Near<'a> {
    /// A local segment (the descriptor's offsets count in it).
    Seg(&'a LocalSegment),
    /// The program's memory: the descriptor's whole local side.
    Mem(UserRegion),
}

/// What a queue keeps for the transfers it makes over a flow: the flow to the remote
/// segment last reached and a mapping of the local segment last used.
#[derive(Debug, Default)]
pub(super) struct Direct {
    /// The flow, with its stop handle (stopped when the route falls silent, so that a
    /// transfer blocked on it fails at once: the engine then ends it in ERROR).
    flow: Option<(u64, HeldFlow, Option<Arc<FlowStop>>)>,
    local: Option<(u64, Arc<Mapping>)>,
}

impl Direct {
    /// Make the one transfer `d` between `near` and `remote` here when it reaches another
    /// host and is waited for (`wait`) or small (a large one of a local segment only while
    /// no other thread uses the flow). `None`:
    /// not made (the engine makes it); `Some(Err)`: the flow failed, the bytes may or may
    /// not have moved.
    pub(super) fn run(
        &mut self,
        near: Near<'_>,
        remote: &RemoteSegment,
        d: &DmaDesc,
        wait: bool,
    ) -> Option<std::io::Result<()>> {
        let mine = match near {
            Near::Seg(_) => d.flags & DMA_F_USER_MEM == 0 && d.size <= if wait { WAITED } else { SMALL },
            // Not memory a map of another host's segment pages in: the kernel's copy into
            // the socket cannot fault its missing pages in (the userfaultfd serves faults of
            // user mode only) and would break the flow the maps share; the engine, which
            // reads it another way, reports what happens.
            Near::Mem(m) => {
                d.flags & DMA_F_USER_MEM != 0
                    && d.size == m.len() as u64
                    && (wait || d.size <= SMALL)
                    && !remora_sys::uffd::overlaps_registered(m.addr(), m.len())
            }
        };
        if !mine || !remora_config::Config::get().pager_flows {
            return None;
        }
        let link = remote.link().ok()?;
        // Nor over a route our daemon reports down: the flow would wait for the home up to
        // its patience (10 s); the engine ends the transfer in ERROR at once, as it does
        // for any transfer to a silent node.
        if link.memfd.is_some() || !link.legs.is_empty() || remote.is_lost() || remote.watch().is_down() {
            return None;
        }
        let map = match near {
            Near::Seg(local) => Some(self.local_map(local)?),
            Near::Mem(_) => None,
        };
        let conn = link.conn;
        // Neither looking at the flow nor taking its stop handle waits for a thread using
        // it (a map's fetch from a home gone silent may hold it up to its patience).
        if !matches!(&self.flow, Some((c, f, _)) if *c == conn && !f.broken()) {
            let range: Arc<dyn RemoteRange> = Arc::new(SegmentRange { conn });
            let flow = HeldFlow::open(&link.session, &range)?;
            self.flow = Some((conn, flow, None));
        }
        let (_, flow, stop) = self.flow.as_mut()?;
        if stop.is_none() {
            // Taken once the flow is free a moment (a later post asks again; meanwhile the
            // engine makes the transfers).
            *stop = flow.stopper().map(Arc::new);
            if let Some(s) = stop {
                remote.watch().stop_on_down(s);
            }
        }
        // Without it nothing would stop the transfer when the route falls silent (review
        // 105): until a post finds the flow free a moment, the engine makes them.
        if stop.is_none() {
            return None;
        }
        let flow = &*flow;
        let read = d.flags & DMA_F_READ != 0;
        Some(match (near, map) {
            // A large transfer whose flow another queue (or a map) is using now goes over the
            // engine's bulk lanes meanwhile, side by side, rather than queue behind it.
            (_, Some(map)) if d.size > SMALL => {
                let piece = [(map, d.local_off as usize, d.size as usize)];
                match read {
                    true => flow.read_if_free(d.remote_off, Sink::Pieces(&piece))?,
                    false => flow.write_if_free(d.remote_off, Source::Pieces(&piece))?,
                }
            }
            (_, Some(map)) => {
                let piece = [(map, d.local_off as usize, d.size as usize)];
                match read {
                    true => flow.read(d.remote_off, Sink::Pieces(&piece)),
                    false => flow.write(d.remote_off, Source::Pieces(&piece)),
                }
            }
            (Near::Mem(m), None) => match read {
                true => flow.read(d.remote_off, Sink::Region(m)),
                false => flow.write(d.remote_off, Source::Region(m)),
            },
            (Near::Seg(_), None) => return None,
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
