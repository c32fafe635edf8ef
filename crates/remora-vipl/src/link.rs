//! A VI's link to its peer: the peer's VI segment (mapped, written only), its doorbell, and
//! the peer's memory pieces and table, connected on first use. Payloads go by memory copy
//! into a map or by the node's DMA engine ([`remora_config::ViplTransfer`]).

use crate::layout::{self, SLOT, SLOTS};
use crate::window::Window;
use crate::{Error, ErrorCode, Nic, Result};
use remora_config::ViplTransfer;
use remora_sisci::{DmaFlags, MapFlags, RemoteInterrupt, RemoteSegment, UserRegion};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

/// What a VI tells its peer about itself when they connect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PeerInfo {
    pub(crate) node: u32,
    pub(crate) vi_seg: u32,
    pub(crate) bell: u32,
    pub(crate) table: u32,
    pub(crate) reliability: u16,
    pub(crate) max_transfer: u32,
    pub(crate) rdma_write: bool,
    pub(crate) rdma_read: bool,
    pub(crate) ptag: u64,
    /// Its receives report to a completion queue: ring the bell on every completion.
    pub(crate) bell_always: bool,
}

impl PeerInfo {
    pub(crate) fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).unwrap_or_default()
    }

    pub(crate) fn decode(b: &[u8]) -> Result<PeerInfo> {
        postcard::from_bytes(b).map_err(|e| Error::Resource(format!("malformed VI description: {e}")))
    }
}

type Piece = (RemoteSegment, Window);

/// The link of a connected VI.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) peer: PeerInfo,
    seg: RemoteSegment,
    pub(crate) map: Window,
    bell: RemoteInterrupt,
    pieces: Mutex<HashMap<u32, Piece>>,
    table: Mutex<Option<Piece>>,
    same_host: bool,
    /// The VI broke (its ERROR state), read by the data path without the state's lock.
    pub(crate) broken: AtomicBool,
}

const CONNECT_WAIT: Duration = Duration::from_secs(10);

impl Link {
    /// Connect to the peer `info` describes, from a VI of `nic` (`rung_always`: its
    /// receives report to a completion queue).
    pub(crate) fn open(nic: &Nic, rung_always: bool, peer: PeerInfo) -> Result<Link> {
        let desc = &nic.inner.desc;
        let seg =
            RemoteSegment::connect(desc, peer.node, peer.vi_seg, remora_sisci::ADAPTER, Some(CONNECT_WAIT))?;
        let map = seg.map(0, seg.size(), None, MapFlags::default())?;
        let window = Window::resident(map.clone(), seg.size());
        let bell =
            RemoteInterrupt::connect(desc, peer.node, remora_sisci::ADAPTER, peer.bell, Some(CONNECT_WAIT))?;
        let same_host = seg.is_on_this_host();
        if rung_always {
            // Our receives report to a CQ: the peer rings on every completion.
            let _ = window.put(&[(layout::PEER_WAITING, &1u64.to_le_bytes())]);
        }
        Ok(Link {
            peer,
            seg,
            map: window,
            bell,
            pieces: Mutex::new(HashMap::new()),
            table: Mutex::new(None),
            same_host,
            broken: AtomicBool::new(false),
        })
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.seg.is_lost()
    }

    /// Store `v` into the peer's VI segment at `off`, after everything stored before
    /// (another host's segment: straight home, landed when this returns, so that no page
    /// of the peer's segment is written here and none faults).
    pub(crate) fn store(&self, off: usize, v: u64) {
        if self.map.is_local() {
            self.map.store(off, v);
        } else {
            let _ = self.map.put(&[(off, &v.to_le_bytes())]);
        }
    }

    /// Put the stores so far on their way (another host's segment: send them home).
    pub(crate) fn push(&self) {
        self.map.send();
    }

    /// Make the stores so far land before going on.
    pub(crate) fn settle(&self) -> bool {
        self.map.flush()
    }

    pub(crate) fn ring(&self) {
        let _ = self.bell.trigger();
    }

    /// Tell the peer this side disconnected.
    pub(crate) fn say_gone(&self) {
        self.store(layout::PEER_STATE, 1);
        self.settle();
        self.ring();
    }

    /// Tell the peer the connection broke on this side.
    pub(crate) fn say_error(&self, code: ErrorCode) {
        self.store(layout::PEER_STATE, 2 | ((code as u64) << 8));
        self.settle();
        self.ring();
    }

    pub(crate) fn close(&self) {
        for (_, (s, m)) in self.pieces.lock().unwrap_or_else(|p| p.into_inner()).drain() {
            let _ = m.map.unmap();
            let _ = s.disconnect();
        }
        if let Some((s, m)) = self.table.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = m.map.unmap();
            let _ = s.disconnect();
        }
        let _ = self.bell.disconnect();
        let _ = self.map.map.unmap();
        let _ = self.seg.disconnect();
    }

    /// Run `f` on piece `id` of the peer (connected on first use, again after a loss of
    /// another host's segment). A piece on this host is used without asking whether it
    /// was lost: its memory stays mapped, and the VI learns of the loss otherwise.
    fn with_piece<R>(&self, nic: &Nic, id: u32, f: impl FnOnce(&RemoteSegment, &Window) -> R) -> Result<R> {
        let mut pieces = self.pieces.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seg, w)) = pieces.get(&id) {
            if w.is_local() || !seg.is_lost() {
                return Ok(f(seg, w));
            }
        }
        let seg = RemoteSegment::connect(
            &nic.inner.desc,
            self.peer.node,
            id,
            remora_sisci::ADAPTER,
            Some(CONNECT_WAIT),
        )?;
        let map = seg.map(0, seg.size(), None, MapFlags::default())?;
        let w = Window::new(map);
        let r = f(&seg, &w);
        pieces.insert(id, (seg, w));
        Ok(r)
    }

    fn dma(&self, nic: &Nic) -> bool {
        match nic.transfer_mode() {
            ViplTransfer::Auto => !self.same_host,
            ViplTransfer::Copy => false,
            ViplTransfer::Dma => true,
        }
    }

    /// Copy `len` bytes of the program's `src` (from `src_off`) into piece `id` of the
    /// peer at `off`.
    pub(crate) fn write_piece(
        &self,
        nic: &Nic,
        id: u32,
        off: usize,
        src: &UserRegion,
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        let dma = self.dma(nic);
        self.with_piece(nic, id, |seg, map| {
            if dma {
                nic.with_dma(|q| {
                    q.start_mem(src.sub(src_off, len), seg, off, DmaFlags { read: false, wait: true }, None)
                        .map_err(Error::from)
                })
            } else {
                map.write_from(off, src, src_off, len).map_err(Error::from)
            }
        })?
    }

    /// Copy `len` bytes of piece `id` of the peer at `off` into the program's `dst`.
    pub(crate) fn read_piece(
        &self,
        nic: &Nic,
        id: u32,
        off: usize,
        dst: &UserRegion,
        dst_off: usize,
        len: usize,
    ) -> Result<()> {
        let dma = self.dma(nic);
        self.with_piece(nic, id, |seg, map| {
            if dma {
                nic.with_dma(|q| {
                    q.start_mem(dst.sub(dst_off, len), seg, off, DmaFlags { read: true, wait: true }, None)
                        .map_err(Error::from)
                })
            } else {
                map.read_into(off, dst, dst_off, len).map_err(Error::from)
            }
        })?
    }

    /// The peer's table slot for memory handle `handle`, if that region is registered.
    pub(crate) fn slot(&self, nic: &Nic, handle: u32) -> Result<Option<layout::FixedSlot>> {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_none() {
            let seg = RemoteSegment::connect(
                &nic.inner.desc,
                self.peer.node,
                self.peer.table,
                remora_sisci::ADAPTER,
                Some(CONNECT_WAIT),
            )?;
            let map = seg.map(0, seg.size(), None, MapFlags::default())?;
            *t = Some((seg, Window::new(map)));
        }
        let Some((_, map)) = t.as_ref() else { return Ok(None) };
        let mut b = [0u8; SLOT];
        let at = (handle as usize % SLOTS) * SLOT;
        if map.is_local() {
            map.read(at, &mut b)?;
        } else {
            // The slot as the peer's host has it now (one round trip), without a refresh
            // of the table's map (which dropped its pages and fetched the slot's again).
            map.map.load_home(at, &mut b)?;
        }
        let s = layout::FixedSlot::decode(&b);
        Ok((s.flags & layout::SLOT_VALID != 0 && s.handle == handle).then_some(s))
    }
}
