//! Remote memory access: `scif_readfrom`, `scif_writeto`, `scif_vreadfrom`,
//! `scif_vwriteto`, and the fences.
//!
//! Between endpoints of one host both windows are mapped in the caller, so an RMA is a
//! copy by the calling CPU (what `SCIF_RMA_USECPU` asks for) and is complete when the call
//! returns: `SCIF_RMA_SYNC` holds trivially and a fence waits only for RMAs other threads
//! (or the peer) still have in flight. Each end counts the RMAs it started in the
//! connection's shared region, and each RMA marks its completion there in ticket order
//! (`remora_sys::msgring`'s RMA ring): a fence mark is a count of started RMAs, reached
//! when every RMA before it has completed, however the RMAs after it finish.

use crate::conn::Win;
use crate::conn::{peer_windows, Conn};
use crate::window::{resolve, resolve_one, Piece};
use crate::{Endpoint, Error, Result};
use remora_client::dsm::{Sink, Source};
use remora_proto::rma_mark_reached;
use remora_sys::msgring::{RmaTicket, RMA_STALL};
use remora_sys::Mapping;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `rma_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RmaFlags {
    /// `SCIF_RMA_USECPU`: copy with the CPU (always so on one host).
    pub use_cpu: bool,
    /// `SCIF_RMA_USECACHE`: keep temporary registrations (nothing to keep here).
    pub use_cache: bool,
    /// `SCIF_RMA_SYNC`: return when complete (always so on one host).
    pub sync: bool,
    /// `SCIF_RMA_ORDERED`: the last cache line lands after everything before it.
    pub ordered: bool,
}

/// Whose RMAs a fence covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceInit {
    /// RMAs started through this endpoint (`SCIF_FENCE_INIT_SELF`).
    SelfInit,
    /// RMAs started through the peer endpoint (`SCIF_FENCE_INIT_PEER`).
    Peer,
}

const MARK_BITS: u32 = remora_proto::SCIF_MARK_BITS;
const MARK_MASK: u64 = (1 << MARK_BITS) - 1;

/// Copy `len` bytes from the `src` pieces to the `dst` pieces, skipping the first `skip`.
fn copy_pieces(dst: &[Piece], src: &[Piece], skip: usize, len: usize) -> Result<()> {
    let (mut di, mut doff, mut si, mut soff) = (0, 0, 0, 0);
    let advance = |pieces: &[Piece], i: &mut usize, off: &mut usize, mut by: usize| {
        while by > 0 && *i < pieces.len() {
            let left = pieces[*i].2 - *off;
            if by < left {
                *off += by;
                return;
            }
            by -= left;
            *i += 1;
            *off = 0;
        }
    };
    advance(dst, &mut di, &mut doff, skip);
    advance(src, &mut si, &mut soff, skip);
    let mut left = len;
    while left > 0 {
        let (dm, dbase, dlen) = &dst[di];
        let (sm, sbase, slen) = &src[si];
        let n = left.min(dlen - doff).min(slen - soff);
        dm.copy_from(dbase + doff, sm, sbase + soff, n).map_err(|e| Error::NoMemory(e.to_string()))?;
        left -= n;
        advance(dst, &mut di, &mut doff, n);
        advance(src, &mut si, &mut soff, n);
    }
    Ok(())
}

/// Copy between pieces, the last cache line last when `ordered`.
fn copy_all(dst: &[Piece], src: &[Piece], len: usize, ordered: bool) -> Result<()> {
    if !ordered || len <= 64 {
        return copy_pieces(dst, src, 0, len);
    }
    copy_pieces(dst, src, 0, len - 64)?;
    fence(Ordering::Release);
    copy_pieces(dst, src, len - 64, 64)
}

impl Conn {
    /// Run one RMA of this side under a ticket, so fences see it complete in order
    /// (`remora_sys::msgring`'s RMA ring): a fence mark covers exactly the RMAs started
    /// before it, whatever order they finish in. The ticket ends when it drops, also when
    /// `f` panics.
    fn rma<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let ticket = self.lost_if(self.rma_ticket())?;
        let r = f();
        drop(ticket);
        self.lost_if(r)
    }

    /// A ticket that may start: wait for an owner entry, then until fewer than
    /// `RMA_RING_BITS` RMAs before it are still in flight.
    fn rma_ticket(&self) -> Result<RmaTicket<'_>> {
        // The wait (and its reading of the clock, a tenth of a 64 KiB copy's time) is made
        // only when the ticket cannot start at once.
        let mut wait: Option<Stalled<'_>> = None;
        let mut pause = || wait.get_or_insert_with(|| Stalled::new(self, self.side)).pause();
        let ticket = loop {
            match self.region.rma_try_begin(self.side) {
                Some(t) => break t,
                None => pause()?,
            }
        };
        while !ticket.has_room() {
            // Given up (an error), the ticket is left for a waiter to end once it has room.
            pause()?;
        }
        Ok(ticket)
    }

    fn wait_done(&self, side: usize, target: u64) -> Result<()> {
        let mut wait = Stalled::new(self, side);
        while !rma_mark_reached(self.region.rma_done(side).load(Ordering::Acquire), target) {
            match wait.pause() {
                Err(Error::Reset) if side != self.side && self.peer_closed() => return Ok(()),
                r => r?,
            }
        }
        Ok(())
    }
}

/// A wait on side `side`'s RMAs: spins briefly, then sleeps; ends in [`Error::Reset`] when
/// the daemon hung up or the peer closed, and when the done count stands still for
/// `RMA_STALL` looks for RMAs whose owners are gone (a slow RMA is waited for).
struct Stalled<'a> {
    c: &'a Conn,
    side: usize,
    start: Instant,
    done: u64,
    since: Instant,
}

impl<'a> Stalled<'a> {
    fn new(c: &'a Conn, side: usize) -> Self {
        let now = Instant::now();
        Stalled { c, side, start: now, done: c.region.rma_done(side).load(Ordering::Acquire), since: now }
    }

    fn pause(&mut self) -> Result<()> {
        if self.start.elapsed() < Duration::from_micros(50) {
            std::hint::spin_loop();
            return Ok(());
        }
        if self.c.peer_closed() || self.c.session.hung_up() {
            return Err(Error::Reset);
        }
        std::thread::sleep(Duration::from_micros(50));
        let done = self.c.region.rma_done(self.side).load(Ordering::Acquire);
        if done != self.done {
            (self.done, self.since) = (done, Instant::now());
        } else if self.since.elapsed() >= RMA_STALL {
            self.c.region.rma_recover(self.side);
            self.since = Instant::now();
        }
        Ok(())
    }
}

impl Conn {
    /// The RMA counts of the peer on another host (started, completed in ticket order), as
    /// its node reads them in its region; with `until`, once the completed count reaches
    /// it or a bounded wait ends.
    fn far_peer_counts(&self, until: Option<u64>) -> Result<(u64, u64)> {
        let req = remora_proto::Request::Scif(remora_proto::ScifRequest::PeerRmaCounts { until });
        match self.session.request(req, &[])? {
            (remora_proto::Reply::Data(v), _) if v.len() == 16 => {
                let word = |i: usize| u64::from_le_bytes(v[i..i + 8].try_into().expect("8 bytes"));
                Ok((word(0), word(8)))
            }
            (other, _) => Err(Error::Invalid(format!("unexpected answer {other:?}"))),
        }
    }

    /// Wait until the peer on another host has completed the RMAs before mark count
    /// `target`. Its node is asked for the counts without waiting (a waiting request would
    /// hold up the session's other requests at the nodes), backing off to 2 ms between
    /// asks; when the completed count stood still for `RMA_STALL`, one ask lets the node
    /// wait (at most `SCIF_RMA_WAIT_MS`), and it first ends the tickets of RMAs whose
    /// processes are gone there. A peer that closed has no RMA left in flight.
    fn wait_far_peer(&self, target: u64) -> Result<()> {
        let mut pause = Duration::from_micros(20);
        let (mut last, mut since) = (None, Instant::now());
        loop {
            if self.peer_closed() {
                return Ok(());
            }
            let stalled = since.elapsed() >= RMA_STALL;
            match self.far_peer_counts(stalled.then_some(target)) {
                Ok((_, done)) if rma_mark_reached(done, target) => return Ok(()),
                Ok((_, done)) => {
                    if stalled || last != Some(done) {
                        (last, since) = (Some(done), Instant::now());
                    }
                    if !stalled {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(2));
                    }
                }
                Err(Error::Reset) if self.peer_closed() => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// RMA into the far peer's windows: over the endpoint's pager flow straight to the
    /// peer's node (from `src` itself: the caller's buffer or our windows' pieces), else (or
    /// for the precise error of a refused store) through the daemons, in chunks.
    fn remote_write(&self, roffset: u64, src: Source<'_>) -> Result<()> {
        match remora_client::dsm::range_write(&self.session, &peer_windows(), roffset, src) {
            Some(Ok(())) => return Ok(()),
            Some(Err(e)) if e.kind() != std::io::ErrorKind::PermissionDenied => return Err(Error::Reset),
            _ => {}
        }
        match src {
            Source::Buf(b) => self.write_via_daemons(roffset, b),
            Source::Pieces(p) => self.write_via_daemons(roffset, &gather(p, src_len(p))?),
            Source::Region(r) => {
                let mut v = vec![0u8; r.len()];
                r.read(0, &mut v).map_err(|e| Error::Invalid(e.to_string()))?;
                self.write_via_daemons(roffset, &v)
            }
        }
    }

    fn write_via_daemons(&self, roffset: u64, data: &[u8]) -> Result<()> {
        for (i, chunk) in data.chunks(remora_proto::MAX_DATA_IO).enumerate() {
            let offset = roffset + (i * remora_proto::MAX_DATA_IO) as u64;
            let req = remora_proto::Request::Scif(remora_proto::ScifRequest::RemoteWrite {
                offset,
                data: chunk.to_vec(),
            });
            self.session.request(req, &[])?;
        }
        Ok(())
    }

    /// RMA from the far peer's windows: over the endpoint's pager flow (straight into
    /// `out`: the caller's buffer or our windows' pieces), else (or for the precise error
    /// of a refused read) through the daemons, in chunks.
    fn remote_read(&self, roffset: u64, mut out: Sink<'_>) -> Result<()> {
        match remora_client::dsm::range_read(&self.session, &peer_windows(), roffset, out.reborrow()) {
            Some(Ok(())) => return Ok(()),
            Some(Err(e)) if e.kind() != std::io::ErrorKind::PermissionDenied => return Err(Error::Reset),
            _ => {}
        }
        match out {
            Sink::Buf(b) => self.read_via_daemons(roffset, b),
            Sink::Pieces(p) => {
                let mut v = vec![0u8; src_len(p)];
                self.read_via_daemons(roffset, &mut v)?;
                scatter(p, &v)
            }
            Sink::Region(r) => {
                let mut v = vec![0u8; r.len()];
                self.read_via_daemons(roffset, &mut v)?;
                r.write(0, &v).map_err(|e| Error::Invalid(e.to_string()))
            }
        }
    }

    fn read_via_daemons(&self, roffset: u64, out: &mut [u8]) -> Result<()> {
        for (i, chunk) in out.chunks_mut(remora_proto::MAX_DATA_IO).enumerate() {
            let offset = roffset + (i * remora_proto::MAX_DATA_IO) as u64;
            let req = remora_proto::Request::Scif(remora_proto::ScifRequest::RemoteRead {
                offset,
                len: chunk.len() as u32,
            });
            match self.session.request(req, &[])? {
                (remora_proto::Reply::Data(v), _) if v.len() == chunk.len() => chunk.copy_from_slice(&v),
                (other, _) => return Err(Error::Invalid(format!("unexpected answer {other:?}"))),
            }
        }
        Ok(())
    }
}

fn src_len(pieces: &[Piece]) -> usize {
    pieces.iter().map(|(_, _, n)| n).sum()
}

/// Gather `len` bytes of local pieces into a buffer.
fn gather(pieces: &[Piece], len: usize) -> Result<Vec<u8>> {
    let mut v = vec![0u8; len];
    let mut at = 0;
    for (m, off, n) in pieces {
        m.read(*off, &mut v[at..at + n]).map_err(|e| Error::NoMemory(e.to_string()))?;
        at += n;
    }
    Ok(v)
}

/// Scatter a buffer into local pieces.
fn scatter(pieces: &[Piece], data: &[u8]) -> Result<()> {
    let mut at = 0;
    for (m, off, n) in pieces {
        m.write(*off, &data[at..at + n]).map_err(|e| Error::NoMemory(e.to_string()))?;
        at += n;
    }
    Ok(())
}

fn check_len(len: usize) -> Result<()> {
    if len == 0 {
        return Err(Error::Invalid("length must not be zero".into()));
    }
    Ok(())
}

impl Endpoint {
    /// `scif_writeto`: copy `len` bytes from our registered range at `loffset` to the
    /// peer's at `roffset`.
    ///
    /// # Errors
    /// [`Error::NoWindow`] when a range leaves the registered windows, [`Error::Access`]
    /// when our window is not readable or the peer's not writable, [`Error::Invalid`] for
    /// a zero length, [`Error::NotConnected`], [`Error::Reset`].
    pub fn write_to(&self, loffset: u64, len: usize, roffset: u64, flags: RmaFlags) -> Result<()> {
        check_len(len)?;
        let c = self.live_conn()?;
        if !c.remote && !flags.ordered {
            let both = c.both_windows()?;
            let (own, peer) = &*both;
            if let (Some((sm, so)), Some((dm, dof))) =
                (resolve_one(own, loffset, len as u64, 1), resolve_one(peer, roffset, len as u64, 2))
            {
                return c.rma(|| dm.copy_from(dof, sm, so, len).map_err(|e| Error::NoMemory(e.to_string())));
            }
        }
        let own = c.windows(false)?;
        let src = resolve(&own, loffset, len as u64, 1)?;
        if c.remote {
            return c.rma(|| c.remote_write(roffset, Source::Pieces(&src)));
        }
        let dst = resolve(&c.windows(true)?, roffset, len as u64, 2)?;
        c.rma(|| copy_all(&dst, &src, len, flags.ordered))
    }

    /// `scif_readfrom`: copy `len` bytes from the peer's registered range at `roffset`
    /// into ours at `loffset`.
    ///
    /// # Errors
    /// As [`Endpoint::write_to`], with the protections reversed.
    pub fn read_from(&self, loffset: u64, len: usize, roffset: u64, flags: RmaFlags) -> Result<()> {
        check_len(len)?;
        let c = self.live_conn()?;
        let dst = resolve(&c.windows(false)?, loffset, len as u64, 2)?;
        if c.remote {
            return c.rma(|| c.remote_read(roffset, Sink::Pieces(&dst)));
        }
        let src = resolve(&c.windows(true)?, roffset, len as u64, 1)?;
        c.rma(|| copy_all(&dst, &src, len, flags.ordered))
    }

    /// `scif_vwriteto`: copy `data` to the peer's registered range at `roffset`.
    ///
    /// # Errors
    /// As [`Endpoint::write_to`].
    pub fn vwrite_to(&self, data: &[u8], roffset: u64, flags: RmaFlags) -> Result<()> {
        check_len(data.len())?;
        let c = self.live_conn()?;
        if c.remote {
            return c.rma(|| c.remote_write(roffset, Source::Buf(data)));
        }
        let peer = c.windows(true)?;
        if !flags.ordered {
            if let Some((m, off)) = resolve_one(&peer, roffset, data.len() as u64, 2) {
                return c.rma(|| m.write(off, data).map_err(|e| Error::NoMemory(e.to_string())));
            }
        }
        let dst = resolve(&peer, roffset, data.len() as u64, 2)?;
        c.rma(|| {
            let split = if flags.ordered && data.len() > 64 { data.len() - 64 } else { data.len() };
            let mut at = 0;
            for (m, off, n) in &dst {
                let end = at + n;
                if at < split && split < end {
                    m.write(*off, &data[at..split]).map_err(|e| Error::NoMemory(e.to_string()))?;
                    fence(Ordering::Release);
                    m.write(off + (split - at), &data[split..end])
                        .map_err(|e| Error::NoMemory(e.to_string()))?;
                } else {
                    if at == split {
                        fence(Ordering::Release);
                    }
                    m.write(*off, &data[at..end]).map_err(|e| Error::NoMemory(e.to_string()))?;
                }
                at = end;
            }
            Ok(())
        })
    }

    /// `scif_vreadfrom`: copy the peer's registered range at `roffset` into `buf`.
    ///
    /// # Errors
    /// As [`Endpoint::read_from`].
    pub fn vread_from(&self, buf: &mut [u8], roffset: u64, _flags: RmaFlags) -> Result<()> {
        check_len(buf.len())?;
        let c = self.live_conn()?;
        if c.remote {
            return c.rma(|| c.remote_read(roffset, Sink::Buf(buf)));
        }
        let src = resolve(&c.windows(true)?, roffset, buf.len() as u64, 1)?;
        c.rma(|| {
            let mut at = 0;
            for (m, off, n) in &src {
                m.read(*off, &mut buf[at..at + n]).map_err(|e| Error::NoMemory(e.to_string()))?;
                at += n;
            }
            Ok(())
        })
    }

    /// `scif_fence_mark`: a handle for the RMAs started so far through this endpoint
    /// ([`FenceInit::SelfInit`]) or its peer, for [`Endpoint::fence_wait`].
    ///
    /// # Errors
    /// [`Error::NotConnected`], [`Error::Reset`].
    pub fn fence_mark(&self, init: FenceInit) -> Result<i32> {
        let c = self.live_conn()?;
        if c.remote {
            // Stores into maps of the far peer's windows are ordered by fences too.
            remora_client::dsm::settle();
        }
        let (started, bit) = match init {
            FenceInit::SelfInit => (c.region.rma_started(c.side).load(Ordering::Acquire), 0),
            // The far peer's RMAs are counted in its host's region: ask its node.
            FenceInit::Peer if c.remote => (c.lost_if(c.far_peer_counts(None))?.0, 1),
            FenceInit::Peer => (c.region.rma_started(1 - c.side).load(Ordering::Acquire), 1),
        };
        Ok((((started & MARK_MASK) << 1) | bit) as i32)
    }

    /// `scif_fence_wait`: wait until the RMAs of `mark` have completed.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a negative mark, [`Error::NotConnected`], [`Error::Reset`].
    pub fn fence_wait(&self, mark: i32) -> Result<()> {
        if mark < 0 {
            return Err(Error::Invalid("not a fence mark".into()));
        }
        let c = self.conn()?;
        c.lost_if(Self::fence_wait_on(c, mark as u64))
    }

    /// [`Endpoint::fence_wait`] on connection `c`, for a mark that is not negative.
    fn fence_wait_on(c: &Conn, m: u64) -> Result<()> {
        let side = if m & 1 == 0 { c.side } else { 1 - c.side };
        let far = side != c.side && c.remote;
        // A mark names RMAs already started; one ahead of the count was never handed out
        // (waiting on it would never end).
        let started = match far {
            true => match c.far_peer_counts(None) {
                Ok((started, _)) => started,
                // A peer that closed has nothing left in flight.
                Err(Error::Reset) if c.peer_closed() => return Ok(()),
                Err(e) => return Err(e),
            },
            false => c.region.rma_started(side).load(Ordering::Acquire),
        };
        let ahead = (m >> 1).wrapping_sub(started) & MARK_MASK;
        if ahead != 0 && ahead < (1 << (MARK_BITS - 1)) {
            return Err(Error::Invalid("not a mark this endpoint handed out".into()));
        }
        match far {
            true => c.wait_far_peer(m >> 1),
            false => c.wait_done(side, m >> 1),
        }
    }

    /// `scif_fence_signal`: once the RMAs started so far (by `init`) have completed, store
    /// `local.1` at our registered offset `local.0` and/or `remote.1` at the peer's
    /// registered offset `remote.0` (DWORD-aligned offsets). As the kernel's window query,
    /// each 8-byte target must lie in one window registered writable.
    ///
    /// # Errors
    /// [`Error::Invalid`] for offsets not 4-byte aligned or neither target, [`Error::NoWindow`]
    /// when a target is outside the windows or runs past the end of its window,
    /// [`Error::Permission`] when its window is not writable, [`Error::NotConnected`],
    /// [`Error::Reset`].
    pub fn fence_signal(
        &self,
        local: Option<(u64, u64)>,
        remote: Option<(u64, u64)>,
        init: FenceInit,
    ) -> Result<()> {
        let c = self.live_conn()?;
        if local.is_none() && remote.is_none() {
            return Err(Error::Invalid("signal neither end".into()));
        }
        if local.iter().chain(remote.iter()).any(|(off, _)| off % 4 != 0) {
            return Err(Error::Invalid("signal offsets must be 4-byte (DWORD) aligned".into()));
        }
        let lw = local.map(|(off, v)| signal_target(&c.windows(false)?, off).map(|t| (t, v))).transpose()?;
        if c.remote {
            if let Some((off, _)) = remote {
                c.lost_if(c.check_remote_signal(off))?;
            }
            let mark = self.fence_mark(init)?;
            self.fence_wait(mark)?;
            if let Some((off, v)) = remote {
                c.lost_if(c.remote_write(off, Source::Buf(&v.to_ne_bytes())).map_err(signal_error))?;
            }
            return store_signals(lw.into_iter().collect());
        }
        let rw = remote.map(|(off, v)| signal_target(&c.windows(true)?, off).map(|t| (t, v))).transpose()?;
        let mark = self.fence_mark(init)?;
        self.fence_wait(mark)?;
        store_signals(lw.into_iter().chain(rw).collect())
    }
}

/// The window of a fence signal's 8 bytes at `off`: the mapping and the offset in it.
/// One window, registered writable (the kernel's `scif_query_window` for a signal:
/// `ENXIO` outside the windows or across a window's end, `EPERM` without write).
fn signal_target(list: &[Win], off: u64) -> Result<(Arc<Mapping>, usize)> {
    let i = list.partition_point(|w| w.info.offset <= off).checked_sub(1).ok_or(Error::NoWindow)?;
    let w = &list[i];
    let w_end = w.info.offset + w.info.len;
    if off >= w_end {
        return Err(Error::NoWindow);
    }
    if w.info.prot & 2 == 0 {
        return Err(Error::Permission);
    }
    if off + 8 > w_end {
        return Err(Error::NoWindow);
    }
    Ok((w.map.clone(), (off - w.info.offset) as usize))
}

/// A refused signal store's error: a window without write is `EPERM` for a signal.
fn signal_error(e: Error) -> Error {
    match e {
        Error::Access => Error::Permission,
        other => other,
    }
}

impl Conn {
    /// The far peer's window of a signal at `off`: one window, writable (the far node's
    /// check, told to refuse a range of more than one window).
    fn check_remote_signal(&self, off: u64) -> Result<()> {
        let req = remora_proto::Request::Scif(remora_proto::ScifRequest::RemoteCheck {
            offset: off,
            len: 8,
            prot: 2 | remora_proto::SCIF_CHECK_ONE_WINDOW,
        });
        self.session.request(req, &[]).map(|_| ()).map_err(|e| signal_error(e.into()))
    }
}

/// Store each signal value, 8 bytes at once when the offset allows.
fn store_signals(targets: Vec<((Arc<Mapping>, usize), u64)>) -> Result<()> {
    for ((m, off), v) in targets {
        match m.atomic_u64(off) {
            Some(a) => a.store(v, Ordering::Release),
            None => {
                // Only DWORD-aligned: a plain store, ordered before what follows.
                m.write(off, &v.to_ne_bytes()).map_err(|e| Error::NoMemory(e.to_string()))?;
                fence(Ordering::Release);
            }
        }
    }
    Ok(())
}
