//! Import segments: connections to an export of any node, with maps, `put`/`get` of any
//! size and the scatter/gather forms, and signals to the exporter.
//!
//! An import is a core connection of the node. On this host it comes with the export's
//! memory (read-only for a read-only import): a map is an `mmap` of it and `put`/`get` are
//! copies into and out of a map the library keeps. Across hosts a map is served by the DSM
//! pager and `put`/`get` go through the node to the exporter's node. An import granted no
//! read comes without memory wherever the export is: it has no map, and its puts go
//! through the node.

use crate::signal::{Inbox, Outbox};
use crate::{Controller, Error, Permission, Result};
use remora_proto::{Reply, Request, RsmRequest};
use remora_sisci::{DmaQueue, Map, MapFlags, RemoteSegment};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Barrier scoping of `put`/`get` (`rsm_barrier_mode_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierMode {
    /// The program brackets accesses with open and close (`RSM_BARRIER_MODE_EXPLICIT`).
    Explicit,
    /// Each access completes or fails by itself (`RSM_BARRIER_MODE_IMPLICIT`, the default).
    Implicit,
}

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

/// The program's map of an import.
#[derive(Debug)]
pub(crate) enum ImportMap {
    /// Made by the library: anywhere, or at a free fixed address (the DSM's across hosts).
    Own(Map),
    /// Placed over a range the program handed over ([`ImportSegment::map_over`]); with
    /// `reserved` the range goes back to an inaccessible reservation at unmap.
    Placed { mapping: remora_sys::Mapping, reserved: bool },
}

impl ImportMap {
    /// Make stores through the map reach the export (a placed map is of this host's memory:
    /// a fence).
    pub(crate) fn flush(&self) -> bool {
        match self {
            ImportMap::Own(m) => m.flush(),
            ImportMap::Placed { .. } => {
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                true
            }
        }
    }

    /// Make later loads through the map see what reached the export.
    pub(crate) fn acquire(&self) {
        match self {
            ImportMap::Own(m) => {
                let _ = m.acquire();
            }
            ImportMap::Placed { .. } => std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst),
        }
    }

    /// Unmap: a placed map over a reserved range leaves the reservation as it found it.
    fn unmap(self) {
        match self {
            ImportMap::Own(m) => {
                let _ = m.unmap();
            }
            ImportMap::Placed { mapping, reserved: true } => {
                let _ = mapping.into_reservation();
            }
            ImportMap::Placed { mapping, reserved: false } => drop(mapping),
        }
    }
}

/// What [`ImportSegment::map_over`] asks its placer to map over the program's range: `len`
/// bytes (a page multiple) of the export's memory `fd` from `offset`, read-only or not.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// The export's memory.
    pub fd: std::os::fd::BorrowedFd<'a>,
    /// Where in it the map starts (page-aligned).
    pub offset: u64,
    /// Bytes (a page multiple).
    pub len: usize,
    /// Whether stores must fault.
    pub readonly: bool,
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) map: Option<ImportMap>,
    /// The mapped range (offset, length): while mapped, put/get stay inside it.
    pub(crate) map_range: (usize, usize),
    /// Barriers initialised and not destroyed.
    pub(crate) barriers: u32,
    pub(crate) access: Option<Map>,
    /// The memory of `access` when the export is on this host (held while `access` is).
    pub(crate) near: Option<Arc<remora_sys::Mapping>>,
    outbox: Option<Outbox>,
    /// The queue `put_region`/`get_region` use across hosts, made on first use.
    pub(crate) dma: Option<DmaQueue>,
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
    pub(crate) node: u32,
    pub(crate) id: u32,
    pub(crate) size: usize,
    pub(crate) writable: bool,
    pub(crate) readable: bool,
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
                    near: None,
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
    /// [`MapAttr::Reserved`] place it at `addr` when nothing is mapped there (else
    /// [`Error::BadAddress`]); [`ImportSegment::map_over`] replaces what is there.
    ///
    /// # Errors
    /// [`Error::AlreadyMapped`]; [`Error::BadPerms`] for bits other than read and write,
    /// for a writable map of a read-only import, and for any map of an import granted no
    /// read; [`Error::BadLength`] for an empty
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
        let at = self.check_map(&st, addr, attr, perm, offset, len)?;
        let map = self.inner.remote.map(offset, len, at, MapFlags { readonly: !perm.writes() }).map_err(
            |e| match e {
                remora_sisci::Error::IllegalAddress => Error::BadAddress,
                other => Error::MapFailed(other.to_string()),
            },
        )?;
        let p = map.as_ptr() as usize;
        st.map = Some(ImportMap::Own(map));
        st.map_range = (offset, len);
        Ok(p)
    }

    /// [`ImportSegment::map`] with [`MapAttr::Fixed`] or [`MapAttr::Reserved`] over a range
    /// the program hands over, replacing what it had mapped there (Solaris maps
    /// `RSM_MAP_FIXED` with `MAP_FIXED`): the checks are `map`'s, then `place` maps the
    /// [`Placement`] at `addr` (the C library does, with the caller's contract for the
    /// range). With [`MapAttr::Reserved`], [`ImportSegment::unmap`] puts an inaccessible
    /// reservation back over the range. Only for an export on this host.
    ///
    /// # Errors
    /// As [`ImportSegment::map`]; [`Error::BadMode`] for [`MapAttr::None`];
    /// [`Error::MapFailed`] for an export of another host, or when `place` fails.
    pub fn map_over(
        &self,
        addr: usize,
        attr: MapAttr,
        perm: Permission,
        offset: usize,
        len: usize,
        place: impl FnOnce(Placement<'_>) -> std::io::Result<remora_sys::Mapping>,
    ) -> Result<usize> {
        if attr == MapAttr::None {
            return Err(Error::BadMode);
        }
        let mut st = self.state()?;
        self.check_map(&st, Some(addr), attr, perm, offset, len)?;
        let fd = self.inner.remote.memory().ok_or_else(|| {
            Error::MapFailed("a map at a fixed address of another host's export is not available".into())
        })?;
        // The segment is a page multiple: the rounded map stays inside it.
        let placement = Placement {
            fd,
            offset: offset as u64,
            len: remora_sys::page_round_up(len),
            readonly: !perm.writes(),
        };
        let mapping = place(placement).map_err(|e| Error::MapFailed(e.to_string()))?;
        if mapping.as_ptr() as usize != addr {
            return Err(Error::MapFailed("the map was not placed at the address".into()));
        }
        st.map = Some(ImportMap::Placed { mapping, reserved: attr == MapAttr::Reserved });
        st.map_range = (offset, len);
        Ok(addr)
    }

    /// `map`'s checks, in Solaris's order; the fixed address, if any.
    fn check_map(
        &self,
        st: &State,
        addr: Option<usize>,
        attr: MapAttr,
        perm: Permission,
        offset: usize,
        len: usize,
    ) -> Result<Option<usize>> {
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
        // answered EACCES, which its library reports as bad permissions). An import granted
        // no read has no map at all: its node hands it no memory, and no map of this
        // platform can be written without being readable.
        if (perm.writes() && !self.inner.writable) || !self.inner.readable {
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
        Ok(at)
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
        match st.map.as_ref().ok_or(Error::NotMapped)? {
            ImportMap::Own(map) => map.with_atomic(offset, f).map_err(|_| Error::BadOffset),
            ImportMap::Placed { mapping, .. } => mapping.atomic_u64(offset).map(f).ok_or(Error::BadOffset),
        }
    }

    /// `rsm_memseg_import_unmap`: the map goes; one placed over a reserved range
    /// ([`MapAttr::Reserved`]) leaves the range reserved (inaccessible) for the program again.
    ///
    /// # Errors
    /// [`Error::NotMapped`].
    pub fn unmap(&self) -> Result<()> {
        let mut st = self.state()?;
        let map = st.map.take().ok_or(Error::NotMapped)?;
        st.map_range = (0, 0);
        map.unmap();
        Ok(())
    }

    /// `rsm_memseg_import_disconnect`: the connection, the import's signal interrupt and
    /// the library's own map, signal connection and transfer queue go now, whatever barriers
    /// remain (they hold no import; see [`crate::Barrier`]).
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
        st.near = None;
        if let Some(m) = st.access.take() {
            let _ = m.unmap();
        }
        st.outbox = None;
        if let Some(q) = st.dma.take() {
            let _ = q.remove();
        }
        st.disconnected = true;
        let _ = self.inner.remote.disconnect();
        self.inner.inbox.remove();
        Ok(())
    }

    /// `rsm_intr_signal_post` on an import: signal the exporter.
    ///
    /// The exporter's interrupt is connected at the first post, once the node has said the
    /// import still stands (so a post never reaches an interrupt that took over the
    /// number of a destroyed export's); the connection fails from then on when the export
    /// is destroyed, and the post fails once the import is reported lost.
    ///
    /// # Errors
    /// [`Error::ConnAborted`] when the export is gone (unpublished, destroyed, its process
    /// gone); [`Error::Unreachable`].
    pub fn signal_post(&self, no_accumulate: bool) -> Result<()> {
        let mut st = self.state()?;
        if self.is_lost() {
            st.outbox = None;
            return Err(Error::ConnAborted);
        }
        if st.outbox.is_none() {
            self.verify()?;
            st.outbox =
                Some(Outbox::connect(self.inner.ctl.session(), self.inner.node, self.inner.exporter_signal)?);
        }
        let r = st.outbox.as_ref().expect("made above").post(no_accumulate);
        if r == Err(Error::ConnAborted) {
            st.outbox = None;
        }
        r
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
        let mut ok = st.map.as_ref().is_none_or(ImportMap::flush);
        for m in st.access.iter() {
            ok &= m.flush();
        }
        ok
    }

    /// Make later loads through maps see what reached the export.
    pub(crate) fn acquire(st: &State) {
        if let Some(m) = &st.map {
            m.acquire();
        }
        for m in st.access.iter() {
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
