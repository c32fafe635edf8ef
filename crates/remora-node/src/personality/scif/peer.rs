//! What the SCIF personality serves to peer nodes: connection requests from endpoints on
//! other hosts, the bytes and closes their relays forward, and RMA into (and out of) the
//! registered windows of this node's end of a connection — by request, or through a pager
//! flow bound to those windows ([`memory`]). Only the node at the far end of a connection
//! reaches its windows.

use super::relay;
use crate::transport::{FlowUse, PeerMemory};
use crate::{Node, Stats};
use remora_proto::link::{PeerReply, ScifPeerRequest};
use remora_proto::{rma_mark_reached, Error, MAX_DATA_IO, SCIF_CHECK_ONE_WINDOW, SCIF_RMA_WAIT_MS};
use remora_sys::msgring::MsgRegion;
use remora_sys::Mapping;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Serve one SCIF request of node `from`, whose session here is `sid`.
///
/// # Errors
/// The books' refusal (`NotConnected`, `OutOfRange`, `Access`, `ConnRefused`, …).
pub(crate) async fn serve(
    node: &Arc<Node>,
    sid: u64,
    from: u32,
    req: ScifPeerRequest,
) -> Result<PeerReply, Error> {
    match req {
        // A node cannot connect on another node's behalf: the port id's node is the peer's.
        ScifPeerRequest::Connect { port, from: (_, from_port), conn } => {
            relay::serve_connect(node, sid, (from, from_port), port, conn, true).await
        }
        ScifPeerRequest::ConnectWithoutFlow { port, from: (_, from_port), conn } => {
            relay::serve_connect(node, sid, (from, from_port), port, conn, false).await
        }
        ScifPeerRequest::Data { conn, data } => {
            node.scif().to_relay(conn, from, super::RelayIn::Data(data)).map(|_| PeerReply::Ok)
        }
        ScifPeerRequest::Credit { conn, bytes } => {
            node.scif().to_relay(conn, from, super::RelayIn::Credit(bytes)).map(|_| PeerReply::Ok)
        }
        ScifPeerRequest::Close { conn } => {
            node.scif().to_relay(conn, from, super::RelayIn::PeerClosed).map(|_| PeerReply::Ok)
        }
        ScifPeerRequest::Write { conn, offset, data } => {
            if data.len() > MAX_DATA_IO {
                return Err(Error::IllegalParameter(format!("write of {} bytes", data.len())));
            }
            let mut at = 0;
            for (m, off, n) in pieces(node, from, conn, offset, data.len() as u64, true)? {
                m.write(off, &data[at..at + n]).map_err(|_| Error::OutOfRange)?;
                at += n;
            }
            if at > 0 {
                Stats::count(&node.stats.scif_rma_writes, &node.stats.scif_rma_written_bytes, at as u64);
            }
            Ok(PeerReply::Ok)
        }
        ScifPeerRequest::Check { conn, offset, len, prot } => {
            let pieces = node.scif().remote_rma_pieces(from, conn, offset, len, prot & 3)?;
            if prot & SCIF_CHECK_ONE_WINDOW != 0 && pieces.len() > 1 {
                return Err(Error::OutOfRange);
            }
            Ok(PeerReply::Ok)
        }
        ScifPeerRequest::RmaCounts { conn, until } => {
            let (region, side) = node.scif().far_rma_side(from, conn)?;
            Ok(PeerReply::Data(rma_counts(&region, side, until).await))
        }
        ScifPeerRequest::Read { conn, offset, len } => {
            if len as usize > MAX_DATA_IO {
                return Err(Error::IllegalParameter(format!("read of {len} bytes")));
            }
            let mut out = vec![0u8; len as usize];
            let mut at = 0;
            for (m, off, n) in pieces(node, from, conn, offset, len as u64, false)? {
                m.read(off, &mut out[at..at + n]).map_err(|_| Error::OutOfRange)?;
                at += n;
            }
            Stats::count(&node.stats.scif_rma_reads, &node.stats.scif_rma_read_bytes, at as u64);
            Ok(PeerReply::Data(out))
        }
    }
}

/// The RMA counts of `side` of `region` (started, then completed in ticket order, each a
/// little-endian `u64`), once the completed count reaches `until` (a fence mark's), the
/// side closes, or [`SCIF_RMA_WAIT_MS`] passed. A waiting ask (sent when the count stood
/// still) first ends the tickets of RMAs whose processes are gone.
async fn rma_counts(region: &MsgRegion, side: usize, until: Option<u64>) -> Vec<u8> {
    if let Some(mark) = until {
        if !rma_mark_reached(region.rma_done(side).load(Ordering::Acquire), mark) {
            region.rma_recover(side);
        }
        let deadline = Instant::now() + Duration::from_millis(SCIF_RMA_WAIT_MS);
        let mut pause = Duration::from_micros(20);
        while !rma_mark_reached(region.rma_done(side).load(Ordering::Acquire), mark)
            && region.closed(side).load(Ordering::Acquire) == 0
            && Instant::now() < deadline
        {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }
    let started = region.rma_started(side).load(Ordering::Acquire);
    let done = region.rma_done(side).load(Ordering::Acquire);
    [started.to_le_bytes(), done.to_le_bytes()].concat()
}

/// Mappings of the windows that hold `len` bytes at `offset` of this node's end of `conn`,
/// as node `from` may reach them.
fn pieces(
    node: &Node,
    from: u32,
    conn: u64,
    offset: u64,
    len: u64,
    write: bool,
) -> Result<Vec<(Arc<Mapping>, usize, usize)>, Error> {
    let need = if write { 2 } else { 1 };
    node.scif().remote_rma_pieces(from, conn, offset, len, need)
}

/// The registered windows of this node's end of `conn`, as node `from` reaches them.
struct Windows {
    node: Weak<Node>,
    from: u32,
    conn: u64,
}

impl PeerMemory for Windows {
    fn resolve(&self, offset: u64, len: u64, write: bool) -> Option<Vec<(Arc<Mapping>, usize, usize)>> {
        let node = self.node.upgrade()?;
        pieces(&node, self.from, self.conn, offset, len, write).ok()
    }

    /// RMA (`scif_writeto`, `scif_readfrom` and friends) and the DSM pager of `scif_mmap`
    /// maps share the flow: a store the sender waits for is RMA, one it does not wait for
    /// is a map's flush; reads are either (the frames do not say).
    fn flow_used(&self, what: FlowUse) {
        let Some(node) = self.node.upgrade() else { return };
        let st = &node.stats;
        match what {
            FlowUse::Bound => {
                st.pager_flows_served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            FlowUse::Read(n) => Stats::count(&st.scif_rma_reads, &st.scif_rma_read_bytes, n),
            FlowUse::Stored { bytes: 0, .. } => {}
            FlowUse::Stored { bytes, acked: true } => {
                Stats::count(&st.scif_rma_writes, &st.scif_rma_written_bytes, bytes)
            }
            FlowUse::Stored { bytes, acked: false } => {
                Stats::count(&st.dsm_flush_runs, &st.dsm_flushed_bytes, bytes)
            }
        }
    }
}

/// The windows of this node's end of SCIF connection `conn`, for a pager flow of `from`.
pub(crate) fn memory(node: Weak<Node>, from: u32, conn: u64) -> Option<Arc<dyn PeerMemory>> {
    Some(Arc::new(Windows { node, from, conn }))
}
