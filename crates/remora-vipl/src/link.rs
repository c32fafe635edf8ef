//! A VI's link to its peer: the peer's VI segment (on this host mapped, written only), its
//! doorbell, and the peer's memory pieces and table, connected on first use. Payloads go by
//! memory copy into a map or by the node's DMA engine ([`remora_config::ViplTransfer`]).
//!
//! A peer on another host is reached through a *channel* of the VI's own
//! (`remora_client::dsm::Channel`): one TCP stream to the peer's node that reaches the
//! peer's VI segment, its table and every piece used so far, whose stores land in the
//! order sent. A payload, then its completion entry, sequence number and done count go
//! down it back to back without waiting for an answer; the peer's node wakes a receiver
//! that sleeps on the done count after the store that covers it. A store that fails marks
//! the link failed, and the VI moves to ERROR at once. None of the peer's segments on
//! another host is mapped (not even its VI segment): no pager flow is dialed for them and
//! no pager thread refreshes their pages. The peer's loss is learnt from its segment's
//! connection (the node reports the owner or its node gone) and from the channel's
//! failure, neither of which needs a map.

use crate::layout::{self, SLOT, SLOTS};
use crate::window::{PeerWindow, Window};
use crate::{Error, ErrorCode, Nic, Result};
use remora_client::dsm::{Channel, ChannelGuard};
use remora_config::ViplTransfer;
use remora_sisci::{DmaFlags, MapFlags, RemoteInterrupt, RemoteSegment, UserRegion};
use remora_sys::lock::Lock;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

pub(crate) mod direct;
mod pieces;
mod told;
pub(crate) use pieces::PieceHint;
use pieces::PieceMap;

pub(crate) use direct::Direct;

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
    /// Its connection number (`ViInner::conn`): every word this side stores in the peer's
    /// segment carries it ([`layout::tagged`]), so the peer's next connection does not hear
    /// a store of this one that lands late.
    pub(crate) conn: u32,
    /// The accepting side's offer of a stream of the pair's own (across hosts): its port on
    /// the host's address and the token the dialer sends ([`direct`]); the requesting
    /// side's [`direct::CAN_DIAL`] when it can dial one.
    pub(crate) direct: Option<(u16, u128)>,
}

impl PeerInfo {
    pub(crate) fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).unwrap_or_default()
    }

    pub(crate) fn decode(b: &[u8]) -> Result<PeerInfo> {
        postcard::from_bytes(b).map_err(|e| Error::Resource(format!("malformed VI description: {e}")))
    }
}

/// A segment of the peer's and, when it is on this host, a window into it (another host's
/// is reached through the channel only: no map, so no pager work and no page to fault).
type Piece = (RemoteSegment, Option<Window>);

/// The window of a segment on this host (`None` for another host's).
fn window_of(seg: &RemoteSegment) -> Result<Option<Window>> {
    if !seg.is_on_this_host() {
        return Ok(None);
    }
    Ok(Some(Window::new(seg.map(0, seg.size(), None, MapFlags::default())?)))
}

fn no_window() -> Error {
    Error::Resource("no window into the peer's memory".into())
}

/// The channel to a peer on another host, and the segments it reaches (by segment id; the
/// peer's VI segment first, the index a store names).
#[derive(Debug)]
struct Far {
    segs: Vec<(u32, RemoteSegment)>,
    chan: Channel,
}

impl Far {
    /// The index of segment `id` in the channel, re-dialed to reach it too when it did not
    /// (the stores sent before land first: the old channel is flushed).
    fn target(&mut self, id: u32, seg: &RemoteSegment) -> Result<usize> {
        if let Some(i) = self.segs.iter().position(|(x, _)| *x == id) {
            return Ok(i);
        }
        self.chan.lock().send(true).map_err(|e| Error::Resource(e.to_string()))?;
        if self.segs.len() >= remora_proto::link::MAX_FLOW_TARGETS {
            // Full: keep the VI segment and the newer half of the rest (a piece dropped
            // here comes back with a re-dial when it is used again).
            let keep_from = 1 + (self.segs.len() - 1) / 2;
            self.segs.drain(1..keep_from);
        }
        self.segs.push((id, seg.clone()));
        let all: Vec<&RemoteSegment> = self.segs.iter().map(|(_, s)| s).collect();
        match RemoteSegment::channel(&all, Some((0, layout::DONE as u64))) {
            Ok(c) => {
                self.chan = c;
                Ok(self.segs.len() - 1)
            }
            Err(e) => {
                self.segs.pop();
                Err(e.into())
            }
        }
    }
}

/// The link of a connected VI.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) peer: PeerInfo,
    seg: RemoteSegment,
    /// The peer's VI segment mapped, when it is on this host (`None`: the channel only).
    pub(crate) map: PeerWindow,
    bell: RemoteInterrupt,
    /// The peer's pieces and its table, looked up for a payload or RDMA (under the send
    /// queue's lock) unless the send queue's hint of the last piece still holds (one host,
    /// copy mode; `write_piece_hinted`, checked against the number bumped at each change):
    /// behind a lock let go by a plain store (the standard mutex lets go with a locked
    /// instruction, which after a 64 KiB copy waits for the copy's stores).
    pieces: Lock<PieceMap<Piece>>,
    table: Lock<Option<Piece>>,
    /// Changed with the two above ([`Link::pieces_changed`]): what a send queue's
    /// [`PieceHint`] was taken under.
    pieces_gen: AtomicU64,
    /// The peer on another host: its channel.
    far: Option<Mutex<Far>>,
    /// The VI broke (its ERROR state), read by the data path without the state's lock.
    pub(crate) broken: AtomicBool,
    /// A store to the peer could not be made (its channel failed): the VI must break.
    pub(crate) failed: AtomicBool,
    /// A peer on another host: the count of receives posted here last queued on the
    /// channel, and the highest known to have left on it (see [`Link::posted_later`]).
    posted_queued: AtomicU64,
    posted_sent: AtomicU64,
    /// Counts of posted receives the NIC's watcher sent ([`Link::told_late`]), and those
    /// sent on their own, the watcher's among them ([`Link::told_alone`]).
    told_late: AtomicU64,
    told_alone: AtomicU64,
    /// The highest count of receives completed here seen when posting or taking them
    /// ([`Link::posted_urgent`]), how many of those the program had not taken yet at the
    /// last look, and whether the watcher found the channel taken while a count waited.
    landed: AtomicU64,
    unread: AtomicU64,
    watcher_missed: AtomicBool,
    /// Sends of this VI to a peer on another host so far, and that count at the last post.
    sends: AtomicU64,
    sends_seen: AtomicU64,
    /// Slots of a peer on another host read before, by handle, with the peer's count of
    /// table changes at the time ([`layout::PEER_TABLE`]): used again while it holds.
    slots: Mutex<PieceMap<(u64, layout::FixedSlot)>>,
    /// The pair's own stream for short messages across hosts, once made ([`direct`]).
    direct: OnceLock<Direct>,
}

const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// A table count that was not this connection's ([`Link::slot`]): the slot is read afresh
/// and not kept.
pub(crate) const NO_EPOCH: u64 = u64::MAX;
/// Payloads from this many bytes on go to a peer on another host straight from the
/// program's memory (a gathering write), not copied into the channel's queue first.
const DIRECT_PAYLOAD: usize = 16 << 10;

impl Link {
    /// Connect to the peer `info` describes, from a VI of `nic` (`rung_always`: its
    /// receives report to a completion queue).
    pub(crate) fn open(nic: &Nic, rung_always: bool, peer: PeerInfo) -> Result<Link> {
        let desc = &nic.inner.desc;
        let seg =
            RemoteSegment::connect(desc, peer.node, peer.vi_seg, remora_sisci::ADAPTER, Some(CONNECT_WAIT))?;
        // Another host's segment is not mapped: every store goes down the channel, so a map
        // would only cost a pager flow's dial here and its pager's refresh of every page
        // each millisecond while connected (and a page of it could fault once it is lost).
        let window = PeerWindow(window_of(&seg)?);
        let bell =
            RemoteInterrupt::connect(desc, peer.node, remora_sisci::ADAPTER, peer.bell, Some(CONNECT_WAIT))?;
        let far = if window.is_local() {
            None
        } else {
            let chan = RemoteSegment::channel(&[&seg], Some((0, layout::DONE as u64)))?;
            Some(Mutex::new(Far { segs: vec![(peer.vi_seg, seg.clone())], chan }))
        };
        let link = Link {
            peer,
            seg,
            map: window,
            bell,
            pieces: Lock::new(PieceMap::default()),
            table: Lock::new(None),
            pieces_gen: AtomicU64::new(pieces::fresh_gen()),
            far,
            broken: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            posted_queued: AtomicU64::new(0),
            posted_sent: AtomicU64::new(0),
            told_late: AtomicU64::new(0),
            told_alone: AtomicU64::new(0),
            landed: AtomicU64::new(0),
            unread: AtomicU64::new(0),
            watcher_missed: AtomicBool::new(false),
            sends: AtomicU64::new(0),
            sends_seen: AtomicU64::new(0),
            slots: Mutex::new(PieceMap::default()),
            direct: OnceLock::new(),
        };
        if rung_always {
            // Our receives report to a CQ: the peer rings on every completion.
            link.store(layout::PEER_WAITING, link.tag(1));
            if !link.settle() {
                return Err(Error::Resource("the peer's node did not take a store".into()));
            }
        }
        Ok(link)
    }

    /// Whether the peer is on another host (stores go down the channel).
    #[inline]
    pub(crate) fn is_far(&self) -> bool {
        self.far.is_some()
    }

    /// The pair's own stream, when it was made.
    #[inline]
    pub(crate) fn direct(&self) -> Option<&Direct> {
        self.direct.get()
    }

    /// Use `d` as the pair's own stream (made at connect, before either side uses it).
    pub(crate) fn attach(&self, d: Direct) {
        let _ = self.direct.set(d);
    }

    /// Run `f` on the channel to a peer on another host (`None` for a peer on this host).
    /// A failure marks the link failed (the caller breaks the VI).
    pub(crate) fn far<R>(&self, f: impl FnOnce(&mut Far2<'_>) -> Result<R>) -> Option<Result<R>> {
        let far = self.far.as_ref()?;
        let mut g = far.lock().unwrap_or_else(|p| p.into_inner());
        let r = f(&mut Far2 { far: &mut g });
        if r.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        Some(r)
    }

    /// Whether a store to the peer failed.
    #[inline]
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Whether the node reported the connection to the peer's VI segment lost (the peer,
    /// or its node, gone; this node's daemon gone). Asked of the connection, not of a map:
    /// another host's segment has none.
    pub(crate) fn is_lost(&self) -> bool {
        self.seg.is_lost()
    }

    /// Store `v` into the peer's VI segment at `off`, after everything stored before
    /// (another host's segment: queued on the channel, sent by the next
    /// [`Link::push`] or [`Link::settle`]; no page of the peer's segment is written here).
    #[inline]
    pub(crate) fn store(&self, off: usize, v: u64) {
        let far = self.far(|c| c.push_vi(off, &v.to_le_bytes()));
        if far.is_none() {
            self.map.store(off, v);
        }
    }

    /// Put the stores so far on their way, in order. `false` when they could not be.
    pub(crate) fn push(&self) -> bool {
        match self.far(|c| c.send(false)) {
            Some(r) => r.is_ok(),
            None => self.map.send(),
        }
    }

    /// Make the stores so far land before going on. `false` when they could not.
    pub(crate) fn settle(&self) -> bool {
        match self.far(|c| c.send(true)) {
            Some(r) => r.is_ok(),
            None => self.map.flush(),
        }
    }

    pub(crate) fn ring(&self) {
        let _ = self.bell.trigger();
    }

    /// A word for the peer's segment: `v` (a count's low half, a flag) under the peer's
    /// connection number ([`layout::tagged`]).
    #[inline]
    pub(crate) fn tag(&self, v: u64) -> u64 {
        layout::tagged(self.peer.conn, v)
    }

    /// Tell the peer this side disconnected.
    pub(crate) fn say_gone(&self) {
        // The stream's end goes after its last frame, before the word: the peer reads the
        // stream to its end before it flushes its receives.
        if let Some(d) = self.direct() {
            d.end();
        }
        self.store(layout::PEER_STATE, self.tag(1));
        self.settle();
        self.ring();
    }

    /// Tell the peer the connection broke on this side.
    pub(crate) fn say_error(&self, code: ErrorCode) {
        if let Some(d) = self.direct() {
            d.end();
        }
        self.store(layout::PEER_STATE, self.tag(2 | ((code as u64) << 8)));
        self.settle();
        self.ring();
    }

    pub(crate) fn close(&self) {
        if let Some(d) = self.direct() {
            d.close();
        }
        let mut pieces = self.pieces.lock();
        self.pieces_changed();
        for (_, (s, m)) in pieces.drain() {
            if let Some(m) = m {
                let _ = m.map.unmap();
            }
            let _ = s.disconnect();
        }
        drop(pieces);
        let mut table = self.table.lock();
        self.pieces_changed();
        if let Some((s, m)) = table.take() {
            if let Some(m) = m {
                let _ = m.map.unmap();
            }
            let _ = s.disconnect();
        }
        drop(table);
        let _ = self.bell.disconnect();
        self.map.unmap();
        let _ = self.seg.disconnect();
    }

    fn dma(&self, nic: &Nic) -> bool {
        match nic.transfer_mode() {
            ViplTransfer::Auto | ViplTransfer::Copy => false,
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
    ) -> std::result::Result<(), Miss> {
        let dma = self.dma(nic);
        self.with_piece(nic, id, |seg, map| {
            if dma {
                nic.with_dma(|q| {
                    q.start_mem(src.sub(src_off, len), seg, off, DmaFlags { read: false, wait: true }, None)
                        .map_err(Error::from)
                })
            } else if let Some(r) = self.far(|c| {
                // Bytes on the channel: the next completion follows them there, not on the
                // pair's stream (an RDMA write lands before a later send's completion).
                if let Some(d) = self.direct() {
                    d.after_channel_bytes();
                }
                let t = c.target(id, seg)?;
                let mut g = c.guard();
                if len >= DIRECT_PAYLOAD {
                    g.write_region(t, off as u64, src, src_off, len).map_err(io)
                } else {
                    g.push_with(t, off as u64, len, |at, out| src.read(src_off + at, out)).map_err(io)
                }
            }) {
                r
            } else {
                map.ok_or_else(no_window)?.write_from(off, src, src_off, len).map_err(Error::from)
            }
        })?
        .map_err(Miss::from)
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
    ) -> std::result::Result<(), Miss> {
        let dma = self.dma(nic);
        self.with_piece(nic, id, |seg, map| {
            if dma {
                nic.with_dma(|q| {
                    q.start_mem(dst.sub(dst_off, len), seg, off, DmaFlags { read: true, wait: true }, None)
                        .map_err(Error::from)
                })
            } else if let Some(r) = self.far(|c| {
                let t = c.target(id, seg)?;
                let mut b = vec![0u8; len];
                c.guard().read(t, off as u64, &mut b).map_err(io)?;
                dst.write(dst_off, &b).map_err(io)
            }) {
                r
            } else {
                map.ok_or_else(no_window)?.read_into(off, dst, dst_off, len).map_err(Error::from)
            }
        })?
        .map_err(Miss::from)
    }

    /// The peer's table slot for memory handle `handle`, if that region is registered.
    /// `epoch` is the peer's count of table changes as this VI's segment holds it: for a
    /// peer on another host a slot read under the same count is used again (the peer tells
    /// every change, landed, before its call returns), with no round trip; [`NO_EPOCH`] (the
    /// word was an earlier peer's) reads it afresh.
    pub(crate) fn slot(&self, nic: &Nic, handle: u32, epoch: u64) -> Result<Option<layout::FixedSlot>> {
        if self.far.is_some() && epoch != NO_EPOCH {
            let known = self.slots.lock().unwrap_or_else(|p| p.into_inner()).get(&handle).copied();
            if let Some((_, s)) = known.filter(|(e, _)| *e == epoch) {
                return Ok(Some(s));
            }
            let s = self.read_slot(nic, handle)?;
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            match &s {
                Some(s) => {
                    if slots.len() >= 1024 {
                        slots.clear();
                    }
                    slots.insert(handle, (epoch, *s));
                }
                None => {
                    slots.remove(&handle);
                }
            }
            return Ok(s);
        }
        self.read_slot(nic, handle)
    }

    fn read_slot(&self, nic: &Nic, handle: u32) -> Result<Option<layout::FixedSlot>> {
        let mut t = self.table.lock();
        if t.is_none() {
            let seg = RemoteSegment::connect(
                &nic.inner.desc,
                self.peer.node,
                self.peer.table,
                remora_sisci::ADAPTER,
                Some(CONNECT_WAIT),
            )?;
            let w = window_of(&seg)?;
            *t = Some((seg, w));
            self.pieces_changed();
        }
        let Some((seg, map)) = t.as_ref() else { return Ok(None) };
        let mut b = [0u8; SLOT];
        let at = slot_at(handle);
        if let Some(map) = map {
            map.read(at, &mut b)?;
        } else {
            // The slot as the peer's host has it now (one round trip on the channel, after
            // every store sent before), with no page of the table here.
            let id = self.peer.table;
            self.far(|c| {
                let i = c.target(id, seg)?;
                c.guard().read(i, at as u64, &mut b).map_err(io)
            })
            .unwrap_or_else(|| Err(Error::Resource("no channel".into())))?;
        }
        Ok(valid_slot(&b, handle))
    }
}

/// Where the table slot of `handle` lies in the peer's table.
fn slot_at(handle: u32) -> usize {
    (handle as usize % SLOTS) * SLOT
}

/// The slot read into `b`, when it is valid and of `handle` (the slot's other user took it
/// otherwise).
fn valid_slot(b: &[u8; SLOT], handle: u32) -> Option<layout::FixedSlot> {
    let s = layout::FixedSlot::decode(b);
    (s.flags & layout::SLOT_VALID != 0 && s.handle == handle).then_some(s)
}

/// Why the peer's memory piece could not be written or read.
#[derive(Debug)]
pub(crate) enum Miss {
    /// The peer removed the piece: the memory it described was deregistered since.
    Gone,
    /// Anything else (the node, the connection, the channel, a bad description).
    Failed,
}

impl From<Error> for Miss {
    fn from(_: Error) -> Miss {
        Miss::Failed
    }
}

impl From<remora_sisci::Error> for Miss {
    fn from(_: remora_sisci::Error) -> Miss {
        Miss::Failed
    }
}

fn io(e: std::io::Error) -> Error {
    Error::Resource(format!("the peer's node: {e}"))
}

/// The channel of a far link, held (see [`Link::far`]).
pub(crate) struct Far2<'a> {
    far: &'a mut Far,
}

impl Far2<'_> {
    fn target(&mut self, id: u32, seg: &RemoteSegment) -> Result<usize> {
        self.far.target(id, seg)
    }

    pub(crate) fn guard(&self) -> ChannelGuard<'_> {
        self.far.chan.lock()
    }

    /// Queue a store of `b` at `off` of the peer's VI segment.
    pub(crate) fn push_vi(&mut self, off: usize, b: &[u8]) -> Result<()> {
        self.guard().push(0, off as u64, b).map_err(io)
    }

    /// Send what is queued (landed when this returns with `wait`).
    pub(crate) fn send(&mut self, wait: bool) -> Result<()> {
        self.guard().send(wait).map_err(io)
    }
}
