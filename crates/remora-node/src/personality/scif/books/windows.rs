//! Registered windows of each side of a connection: `scif_register` / `scif_unregister`,
//! the list a peer maps from, and the pieces a far node's RMA reaches.

use super::{sys, Books, Window, AUTO_BASE, OFFSET_LIMIT};
use remora_proto::{
    Error, ScifPiece, ScifWindow, SCIF_MAX_FDS, SCIF_MAX_PIECES, SCIF_PIECES_PER_REPLY,
    SCIF_WINDOWS_PER_REPLY,
};
use remora_sys::{Mapping, Memfd};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Window {
    /// The daemon's mapping of the whole window (made on first use).
    fn mapping(&self) -> Result<Arc<Mapping>, Error> {
        if let Some(m) = self.map.get() {
            return Ok(m.clone());
        }
        let parts: Vec<_> = self.pieces.iter().map(|(fd, o, n)| (fd.as_fd(), *o, *n as usize)).collect();
        let m = Mapping::new_pieces(&parts, false).map_err(|e| Error::System(e.to_string()))?;
        Ok(self.map.get_or_init(|| Arc::new(m)).clone())
    }
}

/// `pieces` with each memfd replaced by the one `known` holds of the same file, if any
/// (the new descriptor is closed); the others become known. Dead entries are forgotten.
fn one_per_memfd(
    known: &mut Vec<((u64, u64), std::sync::Weak<Memfd>)>,
    pieces: Vec<(Arc<Memfd>, u64, u64)>,
) -> Vec<(Arc<Memfd>, u64, u64)> {
    known.retain(|(_, w)| w.strong_count() > 0);
    // The memfds of this message, and the one held for each.
    let mut chosen: Vec<(Arc<Memfd>, Arc<Memfd>)> = Vec::new();
    let mut out = Vec::with_capacity(pieces.len());
    for (fd, o, n) in pieces {
        let held = match chosen.iter().find(|(sent, _)| Arc::ptr_eq(sent, &fd)) {
            Some((_, held)) => held.clone(),
            None => {
                let file = rustix::fs::fstat(fd.as_fd()).ok().map(|st| (st.st_dev, st.st_ino));
                let old =
                    known.iter().find(|(f, _)| file.is_some_and(|x| x == *f)).and_then(|(_, w)| w.upgrade());
                let held = match old {
                    Some(old) => old,
                    None => {
                        if let Some(file) = file {
                            known.push((file, Arc::downgrade(&fd)));
                        }
                        fd.clone()
                    }
                };
                chosen.push((fd, held.clone()));
                held
            }
        };
        out.push((held, o, n));
    }
    out
}

impl Books {
    /// The windows of the local endpoint of relayed connection `conn` that
    /// `offset..offset+len` covers, checked for `need` protections (RMA from another host):
    /// the daemon's mapping of each window (made once, kept while it is registered), the
    /// offset in it and the length.
    ///
    /// # Errors
    /// `NotConnected`, `OutOfRange` outside the windows, `Access` without the protection,
    /// `System` when a window cannot be mapped.
    pub fn remote_rma_pieces(
        &self,
        from: u32,
        conn: u64,
        offset: u64,
        len: u64,
        need: u8,
    ) -> Result<Vec<(Arc<Mapping>, usize, usize)>, Error> {
        let c = self.conns.get(&conn).ok_or(Error::NotConnected)?;
        // Only the node at the far end of the connection reaches its windows.
        if c.far.map(|f| f.0) != Some(from) {
            return Err(Error::NotConnected);
        }
        let local = match c.proxy {
            Some(p) => 1 - p,
            None => return Err(Error::NotConnected),
        };
        if c.sides[local].sid.is_none() || c.lost {
            return Err(Error::ConnReset);
        }
        let windows = &c.sides[local].windows;
        let end = offset.checked_add(len).ok_or(Error::OutOfRange)?;
        let mut at = offset;
        let mut out = Vec::new();
        while at < end {
            let (o, w) = windows.range(..=at).next_back().ok_or(Error::OutOfRange)?;
            if at >= o + w.len {
                return Err(Error::OutOfRange);
            }
            if w.prot & need != need {
                return Err(Error::Access);
            }
            let n = end.min(o + w.len) - at;
            out.push((w.mapping()?, (at - o) as usize, n as usize));
            at += n;
        }
        Ok(out)
    }

    /// The region of relayed connection `conn` and the side of it this node's endpoint
    /// uses, as node `from` (the far end) reaches them: for its `SCIF_FENCE_INIT_PEER`
    /// fences, which count the RMAs our endpoint started there.
    ///
    /// # Errors
    /// `NotConnected` when `conn` is not a connection of `from`'s.
    pub fn far_rma_side(
        &self,
        from: u32,
        conn: u64,
    ) -> Result<(Arc<remora_sys::msgring::MsgRegion>, usize), Error> {
        let c = self.conns.get(&conn).ok_or(Error::NotConnected)?;
        match (c.far, c.proxy) {
            (Some((f, _)), Some(p)) if f == from && !c.lost => Ok((c.region.clone(), 1 - p)),
            _ => Err(Error::NotConnected),
        }
    }

    /// `scif_register`: a window made of `pieces` (a memfd, where the piece starts in it,
    /// bytes), in order. Returns the window's offset.
    ///
    /// # Errors
    /// `NotConnected`, `ConnReset` when the peer closed, `IllegalParameter` for unaligned
    /// or empty ranges, no pieces or more than [`SCIF_MAX_PIECES`], bad protections or
    /// memory a memfd does not hold, `AddrInUse` when a fixed range overlaps a window,
    /// `NoSpace` when no range is free.
    pub fn register(
        &mut self,
        sid: u64,
        offset: u64,
        prot: u8,
        fixed: bool,
        pieces: Vec<(Arc<Memfd>, u64, u64)>,
    ) -> Result<u64, Error> {
        let page = remora_sys::page_size() as u64;
        let (c, s) = self.side_of(sid)?;
        if c.peer_gone(s) {
            return Err(Error::ConnReset);
        }
        let bad = |why: &str| Error::IllegalParameter(why.into());
        if pieces.is_empty() || pieces.len() > SCIF_MAX_PIECES {
            return Err(bad(&format!("a window is made of 1 to {SCIF_MAX_PIECES} pieces")));
        }
        let mut memfds: Vec<&Arc<Memfd>> = Vec::new();
        for (fd, _, _) in &pieces {
            if !memfds.iter().any(|m| Arc::ptr_eq(m, fd)) {
                memfds.push(fd);
            }
        }
        if memfds.len() > SCIF_MAX_FDS {
            return Err(bad(&format!("a window lies in at most {SCIF_MAX_FDS} memfds")));
        }
        let mut len = 0u64;
        for (memfd, memfd_offset, n) in &pieces {
            if *n == 0 || !n.is_multiple_of(page) || !memfd_offset.is_multiple_of(page) {
                return Err(bad("offset and length must be page multiples"));
            }
            if memfd_offset.checked_add(*n).is_none_or(|e| e > memfd.size()) {
                return Err(bad("memory outside the memfd"));
            }
            len = len.checked_add(*n).ok_or_else(|| bad("offset out of range"))?;
        }
        if !offset.is_multiple_of(page) {
            return Err(bad("offset and length must be page multiples"));
        }
        if prot & !3 != 0 {
            return Err(bad("unknown protection flags"));
        }
        let windows = &mut c.sides[s].windows;
        let free = |w: &BTreeMap<u64, Window>, at: u64| -> Result<bool, Error> {
            let end = at.checked_add(len).filter(|e| *e <= OFFSET_LIMIT).ok_or(Error::NoSpace)?;
            let before = w.range(..end).next_back();
            Ok(before.is_none_or(|(o, win)| o + win.len <= at))
        };
        let at = if fixed {
            if offset.checked_add(len).is_none_or(|e| e > OFFSET_LIMIT) {
                return Err(bad("offset out of range"));
            }
            if !free(windows, offset)? {
                return Err(Error::AddrInUse);
            }
            offset
        } else {
            let mut at = AUTO_BASE.max(offset);
            loop {
                if free(windows, at)? {
                    break at;
                }
                let (o, w) = windows.range(..at + len).next_back().expect("an overlapping window");
                at = o + w.len;
            }
        };
        let pieces = one_per_memfd(&mut c.sides[s].memfds, pieces);
        c.sides[s].windows.insert(at, Window { len, prot, pieces, map: Default::default() });
        c.region.win_gen(s).fetch_add(1, Ordering::AcqRel);
        Ok(at)
    }

    /// `scif_unregister`: remove the windows inside `offset..offset+len`, which must not
    /// cut through any window.
    ///
    /// # Errors
    /// `NotConnected`; `IllegalParameter` for unaligned input or a range that cuts through
    /// a window; `OutOfRange` when the range holds no window.
    pub fn unregister(&mut self, sid: u64, offset: u64, len: u64) -> Result<(), Error> {
        let page = remora_sys::page_size() as u64;
        let (c, s) = self.side_of(sid)?;
        if len == 0 || !len.is_multiple_of(page) || !offset.is_multiple_of(page) {
            return Err(Error::IllegalParameter("offset and length must be page multiples".into()));
        }
        let end = offset.checked_add(len).ok_or(Error::OutOfRange)?;
        let windows = &mut c.sides[s].windows;
        let cut = || Error::IllegalParameter("the range cuts through a window".into());
        if windows.range(..offset).next_back().is_some_and(|(o, w)| o + w.len > offset) {
            return Err(cut());
        }
        let inside: Vec<u64> = windows.range(offset..end).map(|(o, _)| *o).collect();
        if inside.is_empty() {
            return Err(Error::OutOfRange);
        }
        if inside.iter().any(|o| o + windows[o].len > end) {
            return Err(cut());
        }
        for o in inside {
            windows.remove(&o);
        }
        c.region.win_gen(s).fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The windows of this side (or its peer's) from `from` on, whether more follow, and
    /// the memfds their pieces name (each once).
    ///
    /// # Errors
    /// `NotConnected`; the errno of duplicating a descriptor.
    pub fn windows(
        &mut self,
        sid: u64,
        peer: bool,
        from: u64,
    ) -> Result<(Vec<ScifWindow>, bool, Vec<OwnedFd>), Error> {
        let (c, s) = self.side_of(sid)?;
        let side = if peer { 1 - s } else { s };
        let mut list = Vec::new();
        let mut sent: Vec<&Arc<Memfd>> = Vec::new();
        let mut npieces = 0;
        let mut more = false;
        for (o, w) in c.sides[side].windows.range(from..) {
            let fresh: Vec<&Arc<Memfd>> = {
                let mut fresh: Vec<&Arc<Memfd>> = Vec::new();
                for (fd, _, _) in &w.pieces {
                    if !sent.iter().chain(&fresh).any(|m| Arc::ptr_eq(m, fd)) {
                        fresh.push(fd);
                    }
                }
                fresh
            };
            if list.len() == SCIF_WINDOWS_PER_REPLY
                || npieces + w.pieces.len() > SCIF_PIECES_PER_REPLY
                || sent.len() + fresh.len() > SCIF_MAX_FDS
            {
                more = true;
                break;
            }
            sent.extend(fresh);
            npieces += w.pieces.len();
            let pieces = w
                .pieces
                .iter()
                .map(|(fd, o, n)| {
                    let at = sent.iter().position(|m| Arc::ptr_eq(m, fd)).expect("sent above");
                    ScifPiece { fd: at as u8, memfd_offset: *o, len: *n }
                })
                .collect();
            list.push(ScifWindow { offset: *o, len: w.len, prot: w.prot, pieces });
        }
        let fds = sent.iter().map(|m| m.try_clone().map(Memfd::into_fd)).collect::<Result<_, _>>();
        Ok((list, more, fds.map_err(sys)?))
    }
}
