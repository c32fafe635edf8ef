//! The data path of an import: `put`/`get` of any size (and the item forms the C library
//! builds on them), the scatter/gather calls, and their checks, in Solaris's order.
//!
//! On this host an access is a copy between the caller's memory and the library's own map of
//! the export's memory. Across hosts a small one is one request through the node to the
//! exporter's node; a large one, named by region, is a DMA of the caller's memory, which
//! goes over the process's own flow to the exporter's node, straight between that memory
//! and the socket (the node's transfer engine makes it where no flow can be had).

use crate::import::BarrierMode;
use crate::import::{ImportSegment, State};
use crate::{Error, Result};
use remora_proto::{Reply, Request, MAX_DATA_IO};
use remora_sisci::{DmaFlags, DmaQueue, Map, MapFlags};
use remora_sys::user_memory::UserRegion;
use remora_sys::Mapping;

/// Below this many bytes a transfer across hosts goes as one request through the node
/// (one round trip) rather than through the transfer engine.
const SMALL: usize = 64 * 1024;

/// The most bytes a copy between the caller's memory and the segment goes through the
/// library's buffer at a time (`putv`/`getv` and the region forms on this host).
const CHUNK: usize = 64 * 1024;

/// The most entries one `putv`/`getv` takes (`RSM_MAX_SGIOREQS`).
pub const MAX_SGIOREQS: usize = 16;

/// Local memory named once for many scatter/gather requests
/// (`rsm_localmemory_handle_t`).
#[derive(Debug, Clone, Copy)]
pub struct LocalMemory {
    region: UserRegion,
}

impl LocalMemory {
    /// `rsm_create_localmemory_handle`.
    ///
    /// # Errors
    /// [`Error::BadAddress`] for a null address; [`Error::BadLength`] for an empty one.
    pub fn new(region: UserRegion) -> Result<LocalMemory> {
        if region.addr() == 0 {
            return Err(Error::BadAddress);
        }
        if region.is_empty() {
            return Err(Error::BadLength);
        }
        Ok(LocalMemory { region })
    }

    /// The memory.
    pub fn region(&self) -> UserRegion {
        self.region
    }
}

/// The local side of one scatter/gather entry.
#[derive(Debug, Clone, Copy)]
pub enum LocalSide {
    /// Memory given by address (`RSM_VA_TYPE`); the offset counts from it.
    Region(UserRegion),
    /// A local-memory handle (`RSM_HANDLE_TYPE`).
    Handle(LocalMemory),
}

/// One entry of `putv`/`getv` (`rsm_iovec_t`).
#[derive(Debug, Clone, Copy)]
pub struct IoVec {
    /// Local memory.
    pub local: LocalSide,
    /// Offset into the local memory.
    pub local_offset: usize,
    /// Offset into the segment.
    pub remote_offset: usize,
    /// Bytes.
    pub len: usize,
}

/// Solaris's library's rule for `put`/`get` (when `applies`): in implicit barrier mode a
/// barrier must be initialised on the import.
fn check_barrier_rule(st: &State, applies: bool) -> Result<()> {
    if applies && st.mode == BarrierMode::Implicit && st.barriers == 0 {
        return Err(Error::BarrierUninitialized);
    }
    Ok(())
}

impl ImportSegment {
    /// The library's own map of the whole segment (this host only), made on first use.
    fn access<'a>(&self, st: &'a mut State) -> Result<Option<&'a Map>> {
        if !self.inner.remote.is_on_this_host() {
            return Ok(None);
        }
        if st.access.is_none() {
            let flags = MapFlags { readonly: !self.inner.writable };
            let map = self.inner.remote.map(0, self.inner.size, None, flags)?;
            st.near = map.local_mapping();
            st.access = Some(map);
        }
        Ok(st.access.as_ref())
    }

    /// The memory of the library's own map when the export is on this host (made on first
    /// use): `put`/`get` copy straight into and out of it, without the map's lock.
    fn near<'a>(&self, st: &'a mut State) -> Result<Option<&'a Mapping>> {
        if st.near.is_none() {
            self.access(st)?;
        }
        Ok(st.near.as_deref())
    }

    /// Solaris's rule: while the import is mapped, an access must lie inside the map
    /// (`BadOffset`); otherwise inside the segment (`BadLength`).
    fn check_range(&self, st: &State, offset: usize, len: usize) -> Result<()> {
        let end = offset.checked_add(len).ok_or(Error::BadLength)?;
        if st.map.is_some() {
            let (mo, ml) = st.map_range;
            if offset < mo || end > mo + ml {
                return Err(Error::BadOffset);
            }
        } else if end > self.inner.size {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    /// Check an access of `len` bytes at `offset` as `put` (`write`) or `get` would, without
    /// making it: the import's access, then the range.
    ///
    /// # Errors
    /// [`Error::BadSegment`]; [`Error::PermDenied`]; [`Error::BadOffset`];
    /// [`Error::BadLength`].
    pub fn check_access(&self, offset: usize, len: usize, write: bool) -> Result<()> {
        let st = self.state()?;
        if if write { !self.inner.writable } else { !self.inner.readable } {
            return Err(Error::PermDenied);
        }
        self.check_range(&st, offset, len)
    }

    /// Whether a barrier is initialised on the import (Solaris's library requires one for
    /// `put`/`get` in implicit mode).
    pub fn has_barrier(&self) -> bool {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner()).barriers > 0
    }

    /// Run one access with the barrier mode's rules: in implicit mode it completes or fails
    /// here; in explicit mode, with a barrier open, a failure of the connection is kept for
    /// the barrier's close.
    fn access_with(&self, st: &mut State, f: impl FnOnce(&Self, &mut State) -> Result<()>) -> Result<()> {
        let r = if self.is_lost() { Err(Error::ConnAborted) } else { f(self, st) };
        let r = match r {
            Ok(()) if self.is_lost() => Err(Error::ConnAborted),
            other => other,
        };
        match r {
            Err(e @ (Error::ConnAborted | Error::Unreachable | Error::Internal(_))) => {
                st.errors += 1;
                if st.mode == BarrierMode::Explicit && st.open_barriers > 0 {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            other => other,
        }
    }

    /// `rsm_memseg_import_put`: copy `data` into the segment at `offset`.
    ///
    /// # Errors
    /// [`Error::PermDenied`] on an import without write access; [`Error::BadOffset`] for a
    /// range outside the map while mapped, [`Error::BadLength`] for one outside the
    /// segment; [`Error::ConnAborted`] once the export is gone.
    pub fn put(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.ruled(true, offset, data.len(), false, |me, m| match m {
            Some(m) => Ok(m.write(offset, data)?),
            None => me.far_write(offset, data),
        })
    }

    /// [`ImportSegment::put`] with Solaris's library's rule that in implicit barrier mode a
    /// barrier must be initialised on the import (checked after the access and the range),
    /// in one call: what `rsm_memseg_import_put` and `put8`..`put64` do.
    ///
    /// # Errors
    /// As [`ImportSegment::put`]; [`Error::BadSegment`] once disconnected;
    /// [`Error::BarrierUninitialized`] in implicit mode without a barrier.
    pub fn put_needing_barrier(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.ruled(true, offset, data.len(), true, |me, m| match m {
            Some(m) => Ok(m.write(offset, data)?),
            None => me.far_write(offset, data),
        })
    }

    /// [`ImportSegment::put_needing_barrier`] of memory the caller names by region (what
    /// the C library's `put` does on this host): the region's bytes are read only once
    /// every check has passed, straight into the export's memory, so a caller's length
    /// that the checks refuse never covers more than its memory.
    ///
    /// # Errors
    /// As [`ImportSegment::put_needing_barrier`].
    pub fn put_region_needing_barrier(&self, offset: usize, region: UserRegion) -> Result<()> {
        self.ruled(true, offset, region.len(), true, |me, m| match m {
            Some(m) => Ok(m.write_from(offset, &region, 0, region.len())?),
            None => {
                let mut buf = vec![0u8; region.len()];
                region.read(0, &mut buf)?;
                me.far_write(offset, &buf)
            }
        })
    }

    /// The checks of a `put` (`write`) or a `get` of `len` bytes (the access, the range,
    /// the barrier rule when `barrier_rule`), under the import's lock, then `copy`: with
    /// the library's map of the export's memory on this host (the mapping given), through
    /// the node otherwise.
    fn ruled(
        &self,
        write: bool,
        offset: usize,
        len: usize,
        barrier_rule: bool,
        copy: impl FnOnce(&Self, Option<&Mapping>) -> Result<()>,
    ) -> Result<()> {
        let mut st = self.state()?;
        if !(if write { self.inner.writable } else { self.inner.readable }) {
            return Err(Error::PermDenied);
        }
        self.check_range(&st, offset, len)?;
        check_barrier_rule(&st, barrier_rule)?;
        // The range was checked against the segment (or the map inside it) and the access
        // is granted: the mapping's own checks cannot fail.
        self.access_with(&mut st, |me, st| copy(me, me.near(st)?))
    }

    /// `rsm_memseg_import_get`: copy bytes of the segment at `offset` into `out`.
    ///
    /// # Errors
    /// [`Error::PermDenied`] on an import without read access; [`Error::BadOffset`],
    /// [`Error::BadLength`] as for [`ImportSegment::put`]; [`Error::ConnAborted`].
    pub fn get(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.ruled(false, offset, out.len(), false, |me, m| match m {
            Some(m) => Ok(m.read(offset, out)?),
            None => me.far_read(offset, out),
        })
    }

    /// [`ImportSegment::get`] with the barrier rule of
    /// [`ImportSegment::put_needing_barrier`]: what `rsm_memseg_import_get` and
    /// `get8`..`get64` do.
    ///
    /// # Errors
    /// As [`ImportSegment::get`]; [`Error::BadSegment`] once disconnected;
    /// [`Error::BarrierUninitialized`] in implicit mode without a barrier.
    pub fn get_needing_barrier(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.ruled(false, offset, out.len(), true, |me, m| match m {
            Some(m) => Ok(m.read(offset, out)?),
            None => me.far_read(offset, out),
        })
    }

    /// [`ImportSegment::get_needing_barrier`] into memory the caller names by region (what
    /// the C library's `get` does on this host): the region is written only once every
    /// check has passed (see [`ImportSegment::put_region_needing_barrier`]).
    ///
    /// # Errors
    /// As [`ImportSegment::get_needing_barrier`].
    pub fn get_region_needing_barrier(&self, offset: usize, region: UserRegion) -> Result<()> {
        self.ruled(false, offset, region.len(), true, |me, m| match m {
            Some(m) => Ok(m.read_into(offset, &region, 0, region.len())?),
            None => {
                let mut buf = vec![0u8; region.len()];
                me.far_read(offset, &mut buf)?;
                Ok(region.write(0, &buf)?)
            }
        })
    }

    /// `rsm_memseg_import_put` of memory the caller names by region: on this host as
    /// [`ImportSegment::put`]; across hosts, from 64 KiB, the bytes go straight from this
    /// process's memory to the exporter's node over the process's own flow (no copy through
    /// the library or the node), which is what the C library uses.
    ///
    /// # Errors
    /// As [`ImportSegment::put`].
    pub fn put_region(&self, offset: usize, region: UserRegion) -> Result<()> {
        self.region_transfer(offset, region, false)
    }

    /// `rsm_memseg_import_get` into memory the caller names by region (see
    /// [`ImportSegment::put_region`]).
    ///
    /// # Errors
    /// As [`ImportSegment::get`].
    pub fn get_region(&self, offset: usize, region: UserRegion) -> Result<()> {
        self.region_transfer(offset, region, true)
    }

    fn region_transfer(&self, offset: usize, region: UserRegion, read: bool) -> Result<()> {
        if self.inner.remote.is_on_this_host() || region.len() < SMALL {
            // The whole range is checked before the caller's memory is touched; the bytes
            // then go through a bounded buffer.
            self.check_access(offset, region.len(), !read)?;
            let mut buf = vec![0u8; region.len().min(CHUNK)];
            let mut done = 0;
            while done < region.len() {
                let part = &mut buf[..(region.len() - done).min(CHUNK)];
                if read {
                    self.get(offset + done, part)?;
                    region.write(done, part)?;
                } else {
                    region.read(done, part)?;
                    self.put(offset + done, part)?;
                }
                done += part.len();
            }
            return Ok(());
        }
        let mut st = self.state()?;
        if if read { !self.inner.readable } else { !self.inner.writable } {
            return Err(Error::PermDenied);
        }
        self.check_range(&st, offset, region.len())?;
        self.access_with(&mut st, |me, st| {
            if st.dma.is_none() {
                st.dma = Some(DmaQueue::create(&me.inner.ctl.inner.desc, 0, 0)?);
            }
            let q = st.dma.as_ref().expect("made above");
            q.start_mem(region, &me.inner.remote, offset, DmaFlags { read, wait: true }, None).map_err(|e| {
                match e {
                    remora_sisci::Error::TransferFailed => Error::ConnAborted,
                    other => other.into(),
                }
            })
        })
    }

    fn far_write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let conn = self.inner.remote.handle();
        for (i, chunk) in data.chunks(MAX_DATA_IO).enumerate() {
            let runs = vec![((offset + i * MAX_DATA_IO) as u64, chunk.to_vec())];
            self.inner.ctl.session().request(Request::SegWrite { conn, runs }, &[])?;
        }
        Ok(())
    }

    fn far_read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let conn = self.inner.remote.handle();
        for (i, chunk) in out.chunks_mut(MAX_DATA_IO).enumerate() {
            let req =
                Request::SegRead { conn, offset: (offset + i * MAX_DATA_IO) as u64, len: chunk.len() as u32 };
            match self.inner.ctl.session().request(req, &[])?.0 {
                Reply::Data(d) if d.len() == chunk.len() => chunk.copy_from_slice(&d),
                other => return Err(Error::Internal(format!("unexpected reply {other:?}"))),
            }
        }
        Ok(())
    }

    /// `rsm_memseg_import_putv`: every entry's local bytes into the segment, in order.
    /// Returns how many entries were not done (the residual count) beside the outcome;
    /// `sigpost` posts a signal to the exporter when all are done
    /// (`RSM_IMPLICIT_SIGPOST`), `no_accumulate` passes `RSM_SIGPOST_NO_ACCUMULATE` on.
    ///
    /// # Errors
    /// [`Error::BadSgio`] for no entries or more than [`MAX_SGIOREQS`]; what
    /// [`ImportSegment::put`] returns for the entry that failed; [`Error::BadLength`] for a
    /// local range outside its memory.
    pub fn putv(&self, vec: &[IoVec], sigpost: bool, no_accumulate: bool) -> (Result<()>, usize) {
        self.vectored(vec, true, sigpost, no_accumulate)
    }

    /// `rsm_memseg_import_getv`: the segment's bytes into every entry's local memory.
    ///
    /// # Errors
    /// As [`ImportSegment::putv`].
    pub fn getv(&self, vec: &[IoVec], sigpost: bool, no_accumulate: bool) -> (Result<()>, usize) {
        self.vectored(vec, false, sigpost, no_accumulate)
    }

    fn vectored(&self, vec: &[IoVec], put: bool, sigpost: bool, no_accumulate: bool) -> (Result<()>, usize) {
        if vec.is_empty() || vec.len() > MAX_SGIOREQS {
            return (Err(Error::BadSgio), vec.len());
        }
        for (done, v) in vec.iter().enumerate() {
            let region = match v.local {
                LocalSide::Region(r) => r,
                LocalSide::Handle(h) => h.region,
            };
            if region.addr() == 0 {
                return (Err(Error::BadAddress), vec.len() - done);
            }
            if v.local_offset.checked_add(v.len).is_none_or(|e| e > region.len()) {
                return (Err(Error::BadLength), vec.len() - done);
            }
            // The segment's range is checked before any of the caller's memory is read or
            // a buffer made (a length far beyond the segment is `BadLength`, as on
            // Solaris); the bytes go in bounded pieces.
            let r = self
                .check_access(v.remote_offset, v.len, put)
                .and_then(|_| self.region_transfer(v.remote_offset, region.sub(v.local_offset, v.len), !put));
            if let Err(e) = r {
                return (Err(e), vec.len() - done);
            }
        }
        if sigpost {
            if let Err(e) = self.signal_post(no_accumulate) {
                return (Err(e), 0);
            }
        }
        (Ok(()), 0)
    }
}
