//! Import segments: connections to an export of any node, with maps, `put`/`get` of any
//! size and the scatter/gather forms, and signals to the exporter.
//!
//! An import is a core connection of the node. On this host it comes with the export's
//! memory (read-only for a read-only import): a map is an `mmap` of it and `put`/`get` are
//! copies into and out of a map the library keeps. Across hosts a map is served by the DSM
//! pager and `put`/`get` go through the node to the exporter's node.

use crate::barrier::BarrierMode;
use crate::signal::{Inbox, Outbox};
use crate::{Controller, Error, Permission, Result};
use remora_proto::{Reply, Request, RsmRequest, MAX_DATA_IO};
use remora_sisci::{DmaFlags, DmaQueue, Map, MapFlags, RemoteSegment};
use remora_sys::user_memory::UserRegion;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Below this many bytes a transfer across hosts goes as one request through the node
/// (one round trip) rather than through the transfer engine.
const SMALL: usize = 64 * 1024;

/// The most entries one `putv`/`getv` takes (`RSM_MAX_SGIOREQS`).
pub const MAX_SGIOREQS: usize = 16;

/// How a map is placed (`rsm_attribute_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapAttr {
    /// Anywhere (`RSM_MAP_NONE`).
    None,
    /// At the given address (`RSM_MAP_FIXED`).
    Fixed,
    /// At the given address, over a range the program reserved (`RSM_MAP_RESERVED`).
    Reserved,
}

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

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) map: Option<Map>,
    /// The mapped range (offset, length): while mapped, put/get stay inside it.
    map_range: (usize, usize),
    /// Barriers initialised and not destroyed.
    pub(crate) barriers: u32,
    access: Option<Map>,
    outbox: Option<Outbox>,
    /// The queue `put_region`/`get_region` use across hosts, made on first use.
    dma: Option<DmaQueue>,
    pub(crate) mode: BarrierMode,
    /// Accesses that failed, for barriers.
    pub(crate) errors: u64,
    /// Barriers open now (explicit mode defers access errors to their close).
    pub(crate) open_barriers: u32,
    pub(crate) disconnected: bool,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) ctl: Controller,
    node: u32,
    id: u32,
    size: usize,
    writable: bool,
    readable: bool,
    pub(crate) remote: RemoteSegment,
    inbox: Inbox,
    exporter_signal: u32,
    pub(crate) state: Mutex<State>,
}

/// A connection to an export of some node (`rsm_memseg_import_handle_t`).
#[derive(Debug, Clone)]
pub struct ImportSegment {
    pub(crate) inner: Arc<Inner>,
}

impl ImportSegment {
    /// `rsm_memseg_import_connect` to export `id` of `node` (this node too), asking for
    /// `perm`. The exporting node checks the access list and the importer's user and group.
    ///
    /// # Errors
    /// [`Error::PermDenied`] for bits other than read and write, or access the exporter
    /// does not grant; [`Error::NotPublished`] when no export has the id;
    /// [`Error::NotPublishedToNode`];
    /// [`Error::Unreachable`] for a node that cannot be reached.
    pub fn connect(ctl: &Controller, node: u32, id: u32, perm: Permission) -> Result<ImportSegment> {
        if !perm.is_valid() {
            return Err(Error::PermDenied);
        }
        let inbox = Inbox::create(ctl.session())?;
        let req =
            Request::Rsm(RsmRequest::Connect { node, id, perm: perm.0, signal: inbox.number(), creds: None });
        let (reply, fds) = ctl.session().request(req, &[])?;
        let Reply::RsmConnected { size, signal, writable, .. } = reply else {
            return Err(Error::Internal(format!("unexpected reply {reply:?}")));
        };
        let remote = RemoteSegment::adopt(&ctl.inner.desc, node, id, &reply, fds)?;
        Ok(ImportSegment {
            inner: Arc::new(Inner {
                ctl: ctl.clone(),
                node,
                id,
                size: size as usize,
                writable,
                readable: perm.reads(),
                remote,
                inbox,
                exporter_signal: signal,
                state: Mutex::new(State {
                    map: None,
                    map_range: (0, 0),
                    barriers: 0,
                    access: None,
                    outbox: None,
                    dma: None,
                    mode: BarrierMode::Implicit,
                    errors: 0,
                    open_barriers: 0,
                    disconnected: false,
                }),
            }),
        })
    }

    pub(crate) fn state(&self) -> Result<MutexGuard<'_, State>> {
        let st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.disconnected {
            return Err(Error::BadSegment);
        }
        Ok(st)
    }

    /// The exporting node.
    pub fn node(&self) -> u32 {
        self.inner.node
    }

    /// The segment id.
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// The segment's size.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// Whether puts and writable maps are allowed.
    pub fn is_writable(&self) -> bool {
        self.inner.writable
    }

    /// Whether the export went away (unpublished, destroyed, its process or node gone).
    pub fn is_lost(&self) -> bool {
        self.inner.remote.is_lost()
    }

    /// Whether the export is on this host (maps are plain shared memory).
    pub fn is_on_this_host(&self) -> bool {
        self.inner.remote.is_on_this_host()
    }

    /// `rsm_memseg_import_map`: map `len` bytes from `offset` (page-aligned) with `perm`
    /// (none gives an inaccessible map); returns the address. [`MapAttr::Fixed`] and
    /// [`MapAttr::Reserved`] place it at `addr`.
    ///
    /// # Errors
    /// [`Error::AlreadyMapped`]; [`Error::BadPerms`] for bits other than read and write,
    /// and for a writable map of a read-only import; [`Error::BadLength`] for an empty
    /// range or one that leaves the segment; [`Error::BadMemAlignment`] for an offset or a
    /// fixed address that is not page-aligned; [`Error::BadAddress`] for a null fixed
    /// address; [`Error::ConnAborted`]; [`Error::MapFailed`].
    pub fn map(
        &self,
        addr: Option<usize>,
        attr: MapAttr,
        perm: Permission,
        offset: usize,
        len: usize,
    ) -> Result<usize> {
        let mut st = self.state()?;
        if st.map.is_some() {
            return Err(Error::AlreadyMapped);
        }
        if !perm.is_valid() {
            return Err(Error::BadPerms);
        }
        if len == 0 || offset.checked_add(len).is_none_or(|e| e > self.inner.size) {
            return Err(Error::BadLength);
        }
        let page = remora_sys::page_size();
        if !offset.is_multiple_of(page) {
            return Err(Error::BadMemAlignment);
        }
        // A writable map of a read-only import: the kernel refuses it (Solaris's mmap
        // answered EACCES, which its library reports as bad permissions).
        if perm.writes() && !self.inner.writable {
            return Err(Error::BadPerms);
        }
        let at = match attr {
            MapAttr::None => None,
            MapAttr::Fixed | MapAttr::Reserved => match addr {
                None | Some(0) => return Err(Error::BadAddress),
                Some(a) if !a.is_multiple_of(page) => return Err(Error::BadMemAlignment),
                Some(a) => Some(a),
            },
        };
        if self.is_lost() {
            return Err(Error::ConnAborted);
        }
        let map = self.inner.remote.map(offset, len, at, MapFlags { readonly: !perm.writes() }).map_err(
            |e| match e {
                remora_sisci::Error::IllegalAddress => Error::BadAddress,
                other => Error::MapFailed(other.to_string()),
            },
        )?;
        let p = map.as_ptr() as usize;
        st.map = Some(map);
        st.map_range = (offset, len);
        Ok(p)
    }

    /// Run `f` on the 8-byte word at `offset` of the map (offsets count from the map's
    /// start): loads and stores through it are plain CPU accesses to the export's memory.
    ///
    /// # Errors
    /// [`Error::NotMapped`]; [`Error::BadOffset`] outside the map or unaligned.
    pub fn with_atomic<R>(
        &self,
        offset: usize,
        f: impl FnOnce(&std::sync::atomic::AtomicU64) -> R,
    ) -> Result<R> {
        let st = self.state()?;
        let map = st.map.as_ref().ok_or(Error::NotMapped)?;
        map.with_atomic(offset, f).map_err(|_| Error::BadOffset)
    }

    /// `rsm_memseg_import_unmap`.
    ///
    /// # Errors
    /// [`Error::NotMapped`].
    pub fn unmap(&self) -> Result<()> {
        let mut st = self.state()?;
        let map = st.map.take().ok_or(Error::NotMapped)?;
        st.map_range = (0, 0);
        let _ = map.unmap();
        Ok(())
    }

    /// `rsm_memseg_import_disconnect`.
    ///
    /// # Errors
    /// [`Error::StillMapped`]; [`Error::PollFdInUse`]; [`Error::BadSegment`] once
    /// disconnected.
    pub fn disconnect(&self) -> Result<()> {
        let mut st = self.state()?;
        if st.map.is_some() {
            return Err(Error::StillMapped);
        }
        if self.inner.inbox.pollfds() > 0 {
            return Err(Error::PollFdInUse);
        }
        if let Some(m) = st.access.take() {
            let _ = m.unmap();
        }
        st.outbox = None;
        if let Some(q) = st.dma.take() {
            let _ = q.remove();
        }
        st.disconnected = true;
        let _ = self.inner.remote.disconnect();
        Ok(())
    }

    /// The library's own map of the whole segment (this host only), made on first use.
    fn access<'a>(&self, st: &'a mut State) -> Result<Option<&'a Map>> {
        if !self.inner.remote.is_on_this_host() {
            return Ok(None);
        }
        if st.access.is_none() {
            let flags = MapFlags { readonly: !self.inner.writable };
            st.access = Some(self.inner.remote.map(0, self.inner.size, None, flags)?);
        }
        Ok(st.access.as_ref())
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
        let mut st = self.state()?;
        if !self.inner.writable {
            return Err(Error::PermDenied);
        }
        self.check_range(&st, offset, data.len())?;
        self.access_with(&mut st, |me, st| match me.access(st)? {
            Some(m) => m.write(offset, data).map_err(Error::from),
            None => me.far_write(offset, data),
        })
    }

    /// `rsm_memseg_import_get`: copy bytes of the segment at `offset` into `out`.
    ///
    /// # Errors
    /// [`Error::PermDenied`] on an import without read access; [`Error::BadOffset`],
    /// [`Error::BadLength`] as for [`ImportSegment::put`]; [`Error::ConnAborted`].
    pub fn get(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let mut st = self.state()?;
        if !self.inner.readable {
            return Err(Error::PermDenied);
        }
        self.check_range(&st, offset, out.len())?;
        self.access_with(&mut st, |me, st| match me.access(st)? {
            Some(m) => m.read(offset, out).map_err(Error::from),
            None => me.far_read(offset, out),
        })
    }

    /// `rsm_memseg_import_put` of memory the caller names by region: on this host as
    /// [`ImportSegment::put`]; across hosts the node's transfer engine streams the bytes
    /// straight from this process's memory to the exporter's node (no copy through the
    /// library), which is what the C library uses.
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
            let mut buf = vec![0u8; region.len()];
            return if read {
                self.get(offset, &mut buf)?;
                region.write(0, &buf).map_err(Error::from)
            } else {
                region.read(0, &mut buf)?;
                self.put(offset, &buf)
            };
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
            let mut buf = vec![0u8; v.len];
            let r = if put {
                region
                    .read(v.local_offset, &mut buf)
                    .map_err(Error::from)
                    .and_then(|_| self.put(v.remote_offset, &buf))
            } else {
                self.get(v.remote_offset, &mut buf)
                    .and_then(|_| region.write(v.local_offset, &buf).map_err(Error::from))
            };
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

    /// `rsm_intr_signal_post` on an import: signal the exporter.
    ///
    /// # Errors
    /// [`Error::ConnAborted`] when the export is gone; [`Error::Unreachable`].
    pub fn signal_post(&self, no_accumulate: bool) -> Result<()> {
        let mut st = self.state()?;
        if st.outbox.is_none() {
            st.outbox =
                Some(Outbox::connect(self.inner.ctl.session(), self.inner.node, self.inner.exporter_signal)?);
        }
        st.outbox.as_ref().expect("made above").post(no_accumulate)
    }

    /// `rsm_intr_signal_wait` on an import: wait for the exporter's signal (`None`: forever).
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::BadSegment`] once disconnected.
    pub fn signal_wait(&self, timeout: Option<Duration>) -> Result<()> {
        drop(self.state()?);
        self.inner.inbox.wait(timeout)
    }

    /// Consume a pending signal without waiting; whether there was one.
    pub fn signal_take(&self) -> bool {
        self.inner.inbox.try_take()
    }

    /// `rsm_memseg_get_pollfd`.
    ///
    /// # Errors
    /// [`Error::BadSegment`] once disconnected.
    pub fn pollfd(&self) -> Result<OwnedFd> {
        drop(self.state()?);
        self.inner.inbox.pollfd()
    }

    /// `rsm_memseg_release_pollfd`.
    ///
    /// # Errors
    /// [`Error::BadSegment`] when none is held.
    pub fn release_pollfd(&self) -> Result<()> {
        self.inner.inbox.release_pollfd()
    }

    /// `rsm_memseg_import_set_mode`.
    ///
    /// # Errors
    /// [`Error::BadSegment`] once disconnected.
    pub fn set_mode(&self, mode: BarrierMode) -> Result<()> {
        self.state()?.mode = mode;
        Ok(())
    }

    /// `rsm_memseg_import_get_mode`.
    ///
    /// # Errors
    /// [`Error::BadSegment`] once disconnected.
    pub fn mode(&self) -> Result<BarrierMode> {
        Ok(self.state()?.mode)
    }

    /// Make stores through maps reach the export (a fence on this host; the DSM's flush
    /// across hosts). `false` when they could not reach it.
    pub(crate) fn flush(st: &State) -> bool {
        let mut ok = true;
        for m in st.map.iter().chain(st.access.iter()) {
            ok &= m.flush();
        }
        ok
    }

    /// Make later loads through maps see what reached the export.
    pub(crate) fn acquire(st: &State) {
        for m in st.map.iter().chain(st.access.iter()) {
            let _ = m.acquire();
        }
    }

    /// Ask the node whether the connection still stands (and, across hosts, whether the
    /// exporter's node answers): a read of nothing.
    pub(crate) fn verify(&self) -> Result<()> {
        let req = Request::SegRead { conn: self.inner.remote.handle(), offset: 0, len: 0 };
        match self.inner.ctl.session().request(req, &[]) {
            Ok(_) => Ok(()),
            Err(e) => Err(match Error::from(e) {
                Error::Unreachable => Error::Unreachable,
                _ => Error::ConnAborted,
            }),
        }
    }
}
