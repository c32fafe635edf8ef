//! Registered windows: `scif_register`, `scif_unregister`, `scif_mmap`, and the cached
//! view of both ends' registered address spaces that RMA uses.

use crate::conn::{mapped_peer_windows, Conn, Win, WinPair};
use crate::{Endpoint, Error, Result, UserRegion};
use remora_proto::{Reply, Request, ScifPiece, ScifRequest, SCIF_MAX_FDS, SCIF_MAX_PIECES};
use remora_sys::Mapping;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Window protections (`SCIF_PROT_READ`, `SCIF_PROT_WRITE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Prot {
    /// The window may be read (be an RMA source, be mapped readable).
    pub read: bool,
    /// The window may be written (be an RMA destination, be mapped writable).
    pub write: bool,
}

impl Prot {
    /// Read and write.
    pub const RW: Prot = Prot { read: true, write: true };

    pub(crate) fn bits(self) -> u8 {
        self.read as u8 | (self.write as u8) << 1
    }
}

/// A piece of a range: a mapping, the offset in it, and the length.
pub(crate) type Piece = (Arc<Mapping>, usize, usize);

/// A piece of a peer's registered range, for mapping it: the memfd, the byte offset in
/// it (a page multiple) and the length.
#[derive(Debug, Clone)]
pub struct PeerPiece {
    /// The memfd.
    pub fd: Arc<OwnedFd>,
    /// Where the piece starts in the memfd.
    pub offset: u64,
    /// Bytes.
    pub len: usize,
}

/// The file `fd` names: device and inode (an inode number alone may be another
/// device's file's too).
fn file_of(fd: &OwnedFd) -> (u64, u64) {
    remora_sys::file_id_of(fd.as_fd())
}

impl Conn {
    /// The current windows of our side (`peer` false) or the peer's.
    pub(crate) fn windows(&self, peer: bool) -> Result<Arc<Vec<Win>>> {
        let side = if peer { 1 - self.side } else { self.side };
        let gen = self.region.win_gen(side).load(Ordering::Acquire);
        let cache = if peer { &self.peer_windows } else { &self.own_windows };
        let mut cache = cache.lock();
        if cache.gen == Some(gen) {
            return Ok(cache.list.clone());
        }
        let mut list: Vec<Win> = Vec::new();
        let mut from = 0u64;
        // One descriptor per memfd (by device and inode) for the whole list: every window
        // of an endpoint lies in its arena, which each answer sends again.
        let mut known: Vec<((u64, u64), Arc<OwnedFd>)> = Vec::new();
        for w in cache.list.iter() {
            for (fd, id) in w.fds.iter().zip(&w.files) {
                if !known.iter().any(|(i, _)| i == id) {
                    known.push((*id, fd.clone()));
                }
            }
        }
        loop {
            let (reply, fds) =
                self.session.request(Request::Scif(ScifRequest::Windows { peer, from }), &[])?;
            let Reply::ScifWindows { windows: infos, more } = reply else {
                return Err(Error::Invalid(format!("unexpected answer {reply:?}")));
            };
            let mut ids = Vec::with_capacity(fds.len());
            let fds: Vec<Arc<OwnedFd>> = fds
                .into_iter()
                .map(|fd| {
                    let id = file_of(&fd);
                    ids.push(id);
                    match known.iter().find(|(i, _)| *i == id && id.1 != 0) {
                        Some((_, held)) => held.clone(),
                        None => {
                            let fd = Arc::new(fd);
                            known.push((id, fd.clone()));
                            fd
                        }
                    }
                })
                .collect();
            for info in infos {
                from = info.offset + 1;
                let mut own = Vec::with_capacity(info.pieces.len());
                for p in &info.pieces {
                    let fd = fds
                        .get(p.fd as usize)
                        .ok_or_else(|| Error::Invalid("a piece names no memfd".into()))?;
                    own.push((fd.clone(), ids[p.fd as usize]));
                }
                let files: Vec<(u64, u64)> = own.iter().map(|(_, i)| *i).collect();
                let old = cache.list.iter().find(|w| w.info == info && w.files == files);
                let w = match old {
                    Some(w) => Win { info, fds: w.fds.clone(), map: w.map.clone(), files },
                    None => {
                        let parts: Vec<_> = own
                            .iter()
                            .zip(&info.pieces)
                            .map(|((fd, _), p)| (fd.as_fd(), p.memfd_offset, p.len as usize))
                            .collect();
                        if parts.iter().map(|p| p.2 as u64).sum::<u64>() != info.len {
                            return Err(Error::Invalid("a window unlike its pieces".into()));
                        }
                        let map =
                            Mapping::new_pieces(&parts, false).map_err(|e| Error::NoMemory(e.to_string()))?;
                        let fds = own.into_iter().map(|(fd, _)| fd).collect();
                        Win { info, fds, map: Arc::new(map), files }
                    }
                };
                list.push(w);
            }
            if !more {
                break;
            }
        }
        cache.gen = Some(gen);
        cache.list = Arc::new(list);
        // The pair of lists must not keep the old one's mappings alive.
        *self.both_windows.lock() = None;
        Ok(cache.list.clone())
    }
}

impl Conn {
    /// [`Conn::windows`] of both ends (ours first), as one reference: valid while neither
    /// end's generation changed.
    pub(crate) fn both_windows(&self) -> Result<Arc<WinPair>> {
        let gens = |c: &Conn| {
            let g = |s: usize| c.region.win_gen(s).load(Ordering::Acquire);
            (g(c.side), g(1 - c.side))
        };
        let now = gens(self);
        if let Some((g, pair)) = &*self.both_windows.lock() {
            if *g == now {
                return Ok(pair.clone());
            }
        }
        // Each list is at least as new as the generations read above: a label older than
        // its lists only costs one more refresh.
        let pair = Arc::new((self.windows(false)?, self.windows(true)?));
        *self.both_windows.lock() = Some((now, pair.clone()));
        Ok(pair)
    }
}

/// The window holding all of `off..off+len`, when one does and has the `need`
/// protections: the mapping and the offset in it (the common case, without allocating).
pub(crate) fn resolve_one(list: &[Win], off: u64, len: u64, need: u8) -> Option<(&Mapping, usize)> {
    let i = list.partition_point(|w| w.info.offset <= off).checked_sub(1)?;
    let w = &list[i];
    let end = off.checked_add(len)?;
    (end <= w.info.offset + w.info.len && w.info.prot & need == need)
        .then(|| (&*w.map, (off - w.info.offset) as usize))
}

/// The windows that `off..off+len` runs through, each with the offset in it and the
/// length taken from it; every window must have the `need` protections.
fn walk(list: &[Win], off: u64, len: u64, need: u8) -> Result<Vec<(&Win, u64, u64)>> {
    let end = off.checked_add(len).ok_or(Error::NoWindow)?;
    let mut out = Vec::new();
    let mut at = off;
    while at < end {
        let i = list.partition_point(|w| w.info.offset <= at);
        let w = i.checked_sub(1).map(|i| &list[i]).ok_or(Error::NoWindow)?;
        let w_end = w.info.offset + w.info.len;
        if at >= w_end {
            return Err(Error::NoWindow);
        }
        if w.info.prot & need != need {
            return Err(Error::Access);
        }
        let n = end.min(w_end) - at;
        out.push((w, at - w.info.offset, n));
        at += n;
    }
    Ok(out)
}

/// The pieces of `off..off+len` in `list`, each window needing the `need` protections.
pub(crate) fn resolve(list: &[Win], off: u64, len: u64, need: u8) -> Result<Vec<Piece>> {
    Ok(walk(list, off, len, need)?
        .into_iter()
        .map(|(w, o, n)| (w.map.clone(), o as usize, n as usize))
        .collect())
}

impl Endpoint {
    /// `scif_register`: make `mem` a window of this endpoint's registered address space,
    /// at `offset` exactly when `fixed` (`SCIF_MAP_FIXED`), else where the node chooses.
    /// The memory stays where it is (private pages move into shareable memory in place).
    /// Pages that back a live window (of any endpoint of this process) stay where that
    /// window has them: the new window is made of pieces, so one page backs both windows
    /// and a store or RMA through either is seen through the other. All other pages move
    /// into the endpoint's arena (one memfd for all its windows), each run of them as one
    /// piece. Returns the window's offset.
    ///
    /// # Errors
    /// [`Error::Invalid`] for unaligned or empty input, [`Error::Fault`] for memory that
    /// cannot be shared (a file mapping, or shared memory other than a memfd sealed
    /// against shrinking, which is shared as it is), [`Error::NoMemory`] when the memory runs over
    /// more than `SCIF_MAX_PIECES` (2048) pieces (parts of live windows and other memory
    /// between them) or more than 16 memfds (memory other libraries shared),
    /// [`Error::AddrInUse`] when a fixed range overlaps a window, [`Error::NotConnected`],
    /// [`Error::Reset`] when the peer closed.
    pub fn register(&self, mem: UserRegion, offset: u64, prot: Prot, fixed: bool) -> Result<u64> {
        let c = self.live_conn()?;
        let page = remora_sys::page_size() as u64;
        if mem.is_empty()
            || !(mem.len() as u64).is_multiple_of(page)
            || !(mem.addr() as u64).is_multiple_of(page)
        {
            return Err(Error::Invalid("address and length must be page multiples".into()));
        }
        if fixed && !offset.is_multiple_of(page) {
            return Err(Error::Invalid("offset must be a page multiple".into()));
        }
        // Pages a live window uses keep their place (the earlier window keeps seeing the
        // same pages); the rest moves into the endpoint's arena, each run as one piece.
        let mem = {
            let mut arena = c.arena.lock().unwrap_or_else(|p| p.into_inner());
            let arena = match &mut *arena {
                Some(a) => a,
                slot => slot.insert(remora_sys::user_memory::Arena::new()?),
            };
            remora_sys::user_memory::share_window(arena, mem, SCIF_MAX_PIECES)?
        };
        let mut memfds: Vec<&Arc<remora_sys::Memfd>> = Vec::new();
        let mut pieces = Vec::with_capacity(mem.pieces.len());
        for (fd, memfd_offset, len) in &mem.pieces {
            let at = match memfds.iter().position(|m| Arc::ptr_eq(m, fd)) {
                Some(at) => at,
                None => {
                    memfds.push(fd);
                    memfds.len() - 1
                }
            };
            pieces.push(ScifPiece { fd: at as u8, memfd_offset: *memfd_offset, len: *len });
        }
        if memfds.len() > SCIF_MAX_FDS {
            return Err(Error::NoMemory(format!(
                "the memory lies in {} memfds of registered memory (at most {SCIF_MAX_FDS})",
                memfds.len()
            )));
        }
        let req = Request::Scif(ScifRequest::Register {
            offset: if fixed { offset } else { offset - offset % page },
            prot: prot.bits(),
            fixed,
            pieces,
        });
        let fds: Vec<_> = memfds.iter().map(|m| m.as_fd()).collect();
        match c.lost_if(c.session.request(req, &fds).map_err(Error::from))? {
            (Reply::ScifOffset { offset }, _) => {
                let len = mem.pieces.iter().map(|p| p.2).sum();
                c.leases.lock().unwrap_or_else(|p| p.into_inner()).insert(offset, (len, mem.lease));
                Ok(offset)
            }
            (other, _) => Err(Error::Invalid(format!("unexpected answer {other:?}"))),
        }
    }

    /// `scif_unregister`: remove the windows inside `offset..offset+len` (which must not
    /// cut through a window). Maps of them stay valid until unmapped.
    ///
    /// # Errors
    /// [`Error::Invalid`] for unaligned input, [`Error::NoWindow`] when the range holds no
    /// window or cuts one, [`Error::NotConnected`].
    pub fn unregister(&self, offset: u64, len: u64) -> Result<()> {
        let c = self.conn()?;
        match c.session.request(Request::Scif(ScifRequest::Unregister { offset, len }), &[])? {
            (Reply::Ok, _) => {
                // The windows' pages are free to move again; an arena that wastes much
                // takes no more moves, and arenas no live window uses are let go now.
                let end = offset.saturating_add(len);
                let gone = {
                    let mut leases = c.leases.lock().unwrap_or_else(|p| p.into_inner());
                    let inside: Vec<u64> = leases.range(offset..end).map(|(o, _)| *o).collect();
                    inside.into_iter().filter_map(|o| leases.remove(&o)).collect::<Vec<_>>()
                };
                drop(gone);
                remora_sys::user_memory::prune_shared();
                Ok(())
            }
            (other, _) => Err(Error::Invalid(format!("unexpected answer {other:?}"))),
        }
    }

    /// The pieces of the peer's registered range `offset..offset+len` for `scif_mmap`,
    /// checked against `prot`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for unaligned or empty input, [`Error::NoWindow`] when the range
    /// leaves the peer's windows, [`Error::Access`] when a window lacks a protection asked
    /// for, [`Error::NotConnected`], [`Error::Reset`].
    pub fn peer_pieces(&self, offset: u64, len: usize, prot: Prot) -> Result<Vec<PeerPiece>> {
        self.pieces(true, offset, len, prot)
    }

    fn pieces(&self, peer: bool, offset: u64, len: usize, prot: Prot) -> Result<Vec<PeerPiece>> {
        let c = self.live_conn()?;
        if peer && c.remote {
            // Windows of another host are mapped through the DSM pager (`map_far`).
            return Err(Error::NoDevice);
        }
        let page = remora_sys::page_size();
        if len == 0 || !len.is_multiple_of(page) || !offset.is_multiple_of(page as u64) {
            return Err(Error::Invalid("offset and length must be page multiples".into()));
        }
        let list = c.windows(peer)?;
        let mut out = Vec::new();
        for (w, o, n) in walk(&list, offset, len as u64, prot.bits())? {
            // The window's pieces that `o..o+n` runs through.
            let mut start = 0u64;
            for (p, fd) in w.info.pieces.iter().zip(&w.fds) {
                let (lo, hi) = (o.max(start), (o + n).min(start + p.len));
                if lo < hi {
                    let offset = p.memfd_offset + (lo - start);
                    out.push(PeerPiece { fd: fd.clone(), offset, len: (hi - lo) as usize });
                }
                start += p.len;
            }
        }
        Ok(out)
    }

    /// `scif_mmap` without a fixed address: map the peer's registered range
    /// `offset..offset+len`. The map stays valid even after the peer closes or
    /// unregisters (the memory lives while it is mapped).
    ///
    /// # Errors
    /// As [`Endpoint::peer_pieces`]; [`Error::NoMemory`] when `mmap` fails.
    pub fn map_peer(&self, offset: u64, len: usize, prot: Prot) -> Result<Mapping> {
        let pieces = self.peer_pieces(offset, len, prot)?;
        let parts: Vec<_> = pieces.iter().map(|p| (p.fd.as_fd(), p.offset, p.len)).collect();
        Mapping::new_pieces(&parts, !prot.write).map_err(|e| Error::NoMemory(e.to_string()))
    }

    /// Map this endpoint's own registered range `offset..offset+len` (another view of the
    /// registered memory, e.g. for atomics on it). Not a SCIF call.
    ///
    /// # Errors
    /// As [`Endpoint::map_peer`].
    pub fn map_own(&self, offset: u64, len: usize, prot: Prot) -> Result<Mapping> {
        let pieces = self.pieces(false, offset, len, prot)?;
        let parts: Vec<_> = pieces.iter().map(|p| (p.fd.as_fd(), p.offset, p.len)).collect();
        Mapping::new_pieces(&parts, !prot.write).map_err(|e| Error::NoMemory(e.to_string()))
    }

    /// Whether the peer is on another host (its windows map through the DSM pager).
    pub fn peer_is_far(&self) -> bool {
        self.inner_conn().is_some_and(|c| c.remote)
    }

    /// `scif_mmap` of a window of a peer on another host: a software DSM map (pages fetched
    /// from the peer's node on first touch, stores sent back within the DSM's flush delay
    /// and at once before every `scif_send`, fence and unmap). The map ends with the
    /// connection: after the peer closes or its node is lost, pages not yet here raise
    /// SIGBUS; a cable cut alone holds its accesses until the cable is back.
    ///
    /// # Errors
    /// As [`Endpoint::map_peer`]; [`Error::NotSupported`] where userfaultfd is unavailable,
    /// [`Error::NoMemory`] where the process is out of descriptors or memory for it now.
    pub fn map_far(&self, offset: u64, len: usize, prot: Prot) -> Result<remora_client::dsm::DsmMap> {
        let c = self.live_conn()?;
        let page = remora_sys::page_size();
        if len == 0 || !len.is_multiple_of(page) || !offset.is_multiple_of(page as u64) {
            return Err(Error::Invalid("offset and length must be page multiples".into()));
        }
        if !c.remote {
            return Err(Error::Invalid("the peer is on this host: use map_peer".into()));
        }
        match c.session.request(
            Request::Scif(ScifRequest::RemoteCheck { offset, len: len as u64, prot: prot.bits() }),
            &[],
        )? {
            (Reply::Ok, _) => {}
            (other, _) => return Err(Error::Invalid(format!("unexpected answer {other:?}"))),
        }
        // Served by the pager of the peer's node: a peer that stops answering holds up no
        // other node's maps.
        remora_client::dsm::DsmMap::new(
            c.session.clone(),
            mapped_peer_windows(c),
            c.peer.node,
            u64::MAX,
            offset,
            len,
            !prot.write,
        )
        .map_err(|e| match e {
            remora_client::dsm::DsmError::Unavailable(_) => {
                Error::NotSupported("userfaultfd is unavailable: no maps of another host's memory")
            }
            remora_client::dsm::DsmError::Resources(why) => Error::NoMemory(why),
        })
    }
}
