//! Maps (plain loads and stores into a segment), sequences, and the PIO copy helpers.

use crate::segment::{LocalSegment, RemoteSegment};
use crate::{DepToken, Deps, Descriptor, Error, Result};
use remora_client::dsm::MapNote;
use remora_client::Session;
use remora_proto::{MapTarget, Request};
use remora_sys::user_memory::UserRegion;
use remora_sys::{AsFd, MapOptions, Mapping, Memfd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};

/// Flags of the map calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct MapFlags {
    /// Map read-only: a store faults (`SCI_FLAG_READONLY_MAP`).
    pub readonly: bool,
}

/// What a map's memory is: a shared mapping of the segment's memfd (this host), or pages
/// served by the DSM pager (a segment of another host).
#[derive(Debug)]
pub(crate) enum Backing {
    Mmap(Arc<Mapping>),
    Dsm(remora_client::dsm::DsmMap),
}

impl Backing {
    fn as_ptr(&self) -> *mut u8 {
        match self {
            Backing::Mmap(m) => m.as_ptr(),
            Backing::Dsm(d) => d.as_ptr(),
        }
    }
    fn write(&self, off: usize, data: &[u8]) -> std::io::Result<()> {
        match self {
            Backing::Mmap(m) => m.write(off, data),
            Backing::Dsm(d) => d.write(off, data),
        }
    }
    fn read(&self, off: usize, out: &mut [u8]) -> std::io::Result<()> {
        match self {
            Backing::Mmap(m) => m.read(off, out),
            Backing::Dsm(d) => d.read(off, out),
        }
    }
    fn write_from(&self, off: usize, src: &UserRegion, src_off: usize, len: usize) -> std::io::Result<()> {
        match self {
            Backing::Mmap(m) => m.write_from(off, src, src_off, len),
            Backing::Dsm(d) => {
                let mut buf = vec![0u8; len];
                src.read(src_off, &mut buf)?;
                d.write(off, &buf)
            }
        }
    }
    fn read_into(&self, off: usize, dst: &UserRegion, dst_off: usize, len: usize) -> std::io::Result<()> {
        match self {
            Backing::Mmap(m) => m.read_into(off, dst, dst_off, len),
            Backing::Dsm(d) => {
                let mut buf = vec![0u8; len];
                d.read(off, &mut buf)?;
                dst.write(dst_off, &buf)
            }
        }
    }
    fn is_readonly(&self) -> bool {
        match self {
            Backing::Mmap(m) => m.is_readonly(),
            Backing::Dsm(_) => false,
        }
    }
    fn atomic_u64(&self, off: usize) -> Option<&std::sync::atomic::AtomicU64> {
        match self {
            Backing::Mmap(m) => m.atomic_u64(off),
            Backing::Dsm(d) => d.atomic_u64(off),
        }
    }
    /// Make stores visible at the home (DSM) or in memory (a fence). `false` when they could
    /// not reach the home node.
    fn flush(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        match self {
            Backing::Mmap(_) => true,
            Backing::Dsm(d) => d.flush(),
        }
    }
    /// Send stores on their way to the home (DSM) without waiting for them to land: later
    /// stores arrive after them.
    fn send(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        match self {
            Backing::Mmap(_) => true,
            Backing::Dsm(d) => d.send(),
        }
    }
    /// Make later loads see what reached the home (DSM).
    fn acquire(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        match self {
            Backing::Mmap(_) => true,
            Backing::Dsm(d) => d.refresh(),
        }
    }
    fn store_home(&self, runs: &[(usize, &[u8])]) -> std::io::Result<()> {
        match self {
            Backing::Mmap(m) => {
                for (off, data) in runs {
                    m.write(*off, data)?;
                    std::sync::atomic::fence(Ordering::SeqCst);
                }
                Ok(())
            }
            Backing::Dsm(d) => d.store_home(runs),
        }
    }
    fn load_home(&self, off: usize, out: &mut [u8]) -> std::io::Result<()> {
        match self {
            Backing::Mmap(m) => {
                std::sync::atomic::fence(Ordering::SeqCst);
                m.read(off, out)
            }
            Backing::Dsm(d) => d.load_home(off, out),
        }
    }
    fn lost(&self) -> bool {
        matches!(self, Backing::Dsm(d) if d.is_lost())
    }
    fn dsm_direct(&self) -> Option<bool> {
        match self {
            Backing::Mmap(_) => None,
            Backing::Dsm(d) => Some(d.is_direct()),
        }
    }
}

/// The segment a map came from; held so the segment outlives its maps.
#[derive(Debug)]
#[allow(dead_code)]
pub(crate) enum MapParent {
    Local(LocalSegment),
    Remote(RemoteSegment),
}

#[derive(Debug)]
struct MapInner {
    session: Arc<Session>,
    number: u64,
    /// A map of another host's segment: its note, sent with its flow request rather than by
    /// the mapping thread (`remora_client::dsm::MapNote`); `None`: noted on `session`.
    note: Option<Arc<MapNote>>,
    mapping: RwLock<Option<Backing>>,
    readonly: bool,
    addr: usize,
    size: usize,
    parent: MapParent,
    deps: Arc<Deps>,
    token: Mutex<Option<DepToken>>,
}

impl MapInner {
    /// Tell the daemon the map is gone (after its note, never before).
    fn unnote(&self) {
        let unmap = Request::UnmapNote { map: self.number };
        match &self.note {
            Some(n) => n.withdraw(unmap),
            None => {
                let _ = self.session.note(unmap);
            }
        }
    }
}

impl Drop for MapInner {
    fn drop(&mut self) {
        if self.mapping.get_mut().map(|m| m.is_some()).unwrap_or(false) {
            self.unnote();
        }
    }
}

/// A mapped segment (`sci_map_t`): plain loads and stores reach the segment's memory.
#[derive(Debug, Clone)]
pub struct Map {
    inner: Arc<MapInner>,
}

impl Map {
    /// The descriptor it was made through (the segment's).
    pub fn descriptor(&self) -> &Descriptor {
        match &self.inner.parent {
            MapParent::Local(s) => s.descriptor(),
            MapParent::Remote(s) => s.descriptor(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create(
        session: Arc<Session>,
        desc: &Descriptor,
        memfd: &Memfd,
        seg_size: usize,
        offset: usize,
        size: usize,
        addr: Option<usize>,
        flags: MapFlags,
        target: MapTarget,
        parent_deps: &Arc<Deps>,
        parent: MapParent,
    ) -> Result<Map> {
        if size == 0 {
            return Err(Error::SizeAlignment);
        }
        match offset.checked_add(size) {
            Some(end) if end <= seg_size => {}
            _ => return Err(Error::OutOfRange),
        }
        let page = remora_sys::page_size();
        if let Some(a) = addr {
            if a % page != offset % page {
                return Err(Error::IllegalAddress);
            }
        }
        let opts = MapOptions { readonly: flags.readonly, fixed_addr: addr };
        let mapping = Mapping::new(memfd.as_fd(), offset as u64, size, opts).map_err(|e| {
            if e.raw_os_error() == Some(17) || addr.is_some() {
                Error::IllegalAddress
            } else {
                Error::from(e)
            }
        })?;
        Ok(Map::wrap(
            session,
            desc,
            Backing::Mmap(Arc::new(mapping)),
            offset,
            size,
            flags,
            target,
            parent_deps,
            parent,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wrap(
        session: Arc<Session>,
        desc: &Descriptor,
        backing: Backing,
        offset: usize,
        size: usize,
        flags: MapFlags,
        target: MapTarget,
        parent_deps: &Arc<Deps>,
        parent: MapParent,
    ) -> Map {
        let number = desc.inner.next_map.fetch_add(1, Ordering::Relaxed);
        let _ = session.note(Map::note_of(number, target, offset, size, flags));
        Map::wrap_noted(session, number, None, backing, size, flags, parent_deps, parent)
    }

    /// The daemon's note of map `number`.
    pub(crate) fn note_of(
        number: u64,
        target: MapTarget,
        offset: usize,
        size: usize,
        flags: MapFlags,
    ) -> Request {
        Request::MapNote {
            map: number,
            target,
            offset: offset as u64,
            size: size as u64,
            readonly: flags.readonly,
        }
    }

    /// [`Map::wrap`] of a map whose note the caller saw to: sent on `session`, or `note`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wrap_noted(
        session: Arc<Session>,
        number: u64,
        note: Option<Arc<MapNote>>,
        backing: Backing,
        size: usize,
        flags: MapFlags,
        parent_deps: &Arc<Deps>,
        parent: MapParent,
    ) -> Map {
        Map {
            inner: Arc::new(MapInner {
                session,
                number,
                note,
                addr: backing.as_ptr() as usize,
                size,
                readonly: flags.readonly,
                mapping: RwLock::new(Some(backing)),
                parent,
                deps: Arc::default(),
                token: Mutex::new(Some(parent_deps.token())),
            }),
        }
    }

    /// `SCIGetMapPointer`: the address of the first mapped byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.addr as *mut u8
    }

    /// The mapped length.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// Whether it is a map of a remote segment (`SCIMapRemoteSegment`).
    pub fn is_remote(&self) -> bool {
        matches!(self.inner.parent, MapParent::Remote(_))
    }

    /// Whether the memory behind the map is on this host (`SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET`):
    /// yes for segments of nodes of this host (a shared mapping), no for a map of another
    /// host's segment (pages served by the DSM pager).
    pub fn is_local_target(&self) -> bool {
        self.dsm_direct().is_none()
    }

    /// Whether the map's address range contains `addr..addr+len`; the offset if so.
    pub fn offset_of(&self, addr: usize, len: usize) -> Option<usize> {
        let off = addr.checked_sub(self.inner.addr)?;
        (off.checked_add(len)? <= self.inner.size).then_some(off)
    }

    /// As [`Map::with`], for a copy through the map: one of another host's memory whose
    /// connection or home is lost answers [`Error::TransferFailed`] rather than touch pages
    /// that would raise `SIGBUS` in the library.
    fn copy_with<R>(&self, f: impl FnOnce(&Backing) -> std::io::Result<R>) -> Result<R> {
        self.with(|m| {
            let far = matches!(m, Backing::Dsm(_));
            if far && (m.lost() || self.remote_parent().is_some_and(|r| r.gone().is_some())) {
                return Err(std::io::Error::from(std::io::ErrorKind::NotConnected));
            }
            f(m)
        })
    }

    fn with<R>(&self, f: impl FnOnce(&Backing) -> std::io::Result<R>) -> Result<R> {
        let g = self.inner.mapping.read().unwrap_or_else(|p| p.into_inner());
        let m = g.as_ref().ok_or_else(|| Error::IllegalParameter("map unmapped".into()))?;
        f(m).map_err(|e| match (e.raw_os_error(), e.kind()) {
            (Some(13), _) => Error::IllegalOperation,
            // A map of another host's memory whose home is lost.
            (None, std::io::ErrorKind::NotConnected) => Error::TransferFailed,
            _ => Error::from(e),
        })
    }

    /// Store `data` at `offset` (the PIO path of `SCIMemCpy`).
    ///
    /// # Errors
    /// [`Error::OutOfRange`]; [`Error::IllegalOperation`] on a read-only map;
    /// [`Error::TransferFailed`] for a map of another host's memory whose home is lost.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        if self.inner.readonly {
            return Err(Error::IllegalOperation);
        }
        self.copy_with(|m| m.write(offset, data))
    }

    /// Load into `out` from `offset` (`SCIMemCpy` with `SCI_FLAG_BLOCK_READ`).
    ///
    /// # Errors
    /// [`Error::OutOfRange`]; [`Error::TransferFailed`] for a map of another host's memory
    /// whose home is lost.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.copy_with(|m| m.read(offset, out))
    }

    /// Store `len` bytes of the program's memory `src` (from `src_off`) at `offset`: one
    /// copy for a map of this host's memory.
    ///
    /// # Errors
    /// [`Error::OutOfRange`]; [`Error::IllegalOperation`] on a read-only map;
    /// [`Error::TransferFailed`] for a map of another host's memory whose home is lost.
    pub fn write_from(&self, offset: usize, src: &UserRegion, src_off: usize, len: usize) -> Result<()> {
        if self.inner.readonly {
            return Err(Error::IllegalOperation);
        }
        self.copy_with(|m| m.write_from(offset, src, src_off, len))
    }

    /// Load `len` bytes at `offset` into the program's memory `dst` (from `dst_off`).
    ///
    /// # Errors
    /// [`Error::OutOfRange`]; [`Error::TransferFailed`] for a map of another host's memory
    /// whose home is lost.
    pub fn read_into(&self, offset: usize, dst: &UserRegion, dst_off: usize, len: usize) -> Result<()> {
        self.copy_with(|m| m.read_into(offset, dst, dst_off, len))
    }

    /// An atomic view of the 8 bytes at `offset`, for polling and flags.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] or [`Error::OffsetAlignment`]; [`Error::IllegalOperation`] on
    /// a read-only map.
    pub fn with_atomic<R>(
        &self,
        offset: usize,
        f: impl FnOnce(&std::sync::atomic::AtomicU64) -> R,
    ) -> Result<R> {
        let g = self.inner.mapping.read().unwrap_or_else(|p| p.into_inner());
        let m = g.as_ref().ok_or_else(|| Error::IllegalParameter("map unmapped".into()))?;
        if !self.inner.addr.wrapping_add(offset).is_multiple_of(8) {
            return Err(Error::OffsetAlignment);
        }
        if m.is_readonly() {
            return Err(Error::IllegalOperation);
        }
        m.atomic_u64(offset).map(f).ok_or(Error::OutOfRange)
    }

    /// `SCIUnmapSegment`. As with Dolphin's library, sequences of the map may still exist
    /// (programs unmap first and remove their sequences after): they go on reporting the
    /// connection's state.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when already unmapped.
    pub fn unmap(&self) -> Result<()> {
        let mut g = self.inner.mapping.write().unwrap_or_else(|p| p.into_inner());
        match g.take() {
            None => return Err(Error::IllegalParameter("map unmapped".into())),
            Some(Backing::Dsm(d)) => d.release(),
            Some(Backing::Mmap(_)) => {}
        }
        self.inner.unnote();
        self.inner.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }

    /// A hold on the map for a sequence made on it (`SCICreateMapSequence`).
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] on an unmapped map.
    pub(crate) fn hold(&self) -> Result<crate::DepToken> {
        self.with(|_| Ok(()))?;
        Ok(self.inner.deps.token())
    }

    /// The mapping of a map of this host's memory (`None` for another host's segment, or
    /// an unmapped map): for hot paths that must not take the map's lock on every access.
    /// The memory stays mapped while the mapping is held, even after [`Map::unmap`].
    pub fn local_mapping(&self) -> Option<Arc<Mapping>> {
        match self.inner.mapping.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(Backing::Mmap(m)) => Some(Arc::clone(m)),
            _ => None,
        }
    }

    /// Whether the memory behind this map was lost: its connection, or (another host's
    /// segment) the home of its pages. Loads and stores of pages not yet fetched would then
    /// fault (`SIGBUS`), as an access to a lost SCI segment does.
    pub fn is_lost(&self) -> bool {
        self.gone().is_some()
    }

    /// A DSM map: send the request for its pager flow, booked when the map was made.
    pub(crate) fn ask_flow(&self) {
        if let Some(Backing::Dsm(d)) = self.inner.mapping.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            d.ask_flow();
        }
    }

    /// For a map of another host's segment (served by the DSM pager): whether the pager
    /// reaches the home over a connection of its own (`Some(true)`) or through this node's
    /// daemon (`Some(false)`). `None` for a map of this host's memory, or an unmapped map.
    pub fn dsm_direct(&self) -> Option<bool> {
        self.inner.mapping.read().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|b| b.dsm_direct())
    }

    /// Why the memory behind this map is gone for good, if it is: its connection's reason
    /// (see `RemoteSegment::gone`), or [`Error::NodeNotResponding`] when the DSM pager could
    /// no longer reach the home.
    pub(crate) fn gone(&self) -> Option<Error> {
        let why = self.remote_parent().and_then(RemoteSegment::gone);
        let dsm_lost =
            self.inner.mapping.read().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|b| b.lost());
        why.or(dsm_lost.then_some(Error::NodeNotResponding))
    }

    /// The connection this map was made through (`None` for a map of a local segment).
    pub(crate) fn remote_parent(&self) -> Option<&RemoteSegment> {
        match &self.inner.parent {
            MapParent::Remote(r) => Some(r),
            MapParent::Local(_) => None,
        }
    }

    /// Make this map's stores visible at the segment's memory (for another host's segment:
    /// send them home and wait). `false` when they could not reach it.
    pub fn flush(&self) -> bool {
        self.inner.mapping.read().unwrap_or_else(|p| p.into_inner()).as_ref().is_none_or(|b| b.flush())
    }

    /// Put this map's stores on their way to the segment's memory without waiting for them
    /// to land (for another host's segment: send them home; stores made later arrive after
    /// them). `false` when the home was lost.
    pub fn send(&self) -> bool {
        self.inner.mapping.read().unwrap_or_else(|p| p.into_inner()).as_ref().is_none_or(|b| b.send())
    }

    /// Store each run (`offset`, bytes) in order and return once all have reached the
    /// segment's memory (another host's segment: straight home over the pager flow, one
    /// round trip and no page fault, where the pager has nothing of this map to send first).
    ///
    /// # Errors
    /// [`Error::OutOfRange`]; [`Error::IllegalOperation`] on a read-only map; the error of
    /// the home's loss.
    pub fn store_home(&self, runs: &[(usize, &[u8])]) -> Result<()> {
        if self.inner.readonly {
            return Err(Error::IllegalOperation);
        }
        self.with(|m| m.store_home(runs))
    }

    /// Load into `out` from `offset` what the segment's memory holds now (another host's
    /// segment: straight from the home over the pager flow, one round trip, where no store
    /// of this process is left unsent in a page; the pages of the map are not dropped).
    ///
    /// # Errors
    /// [`Error::OutOfRange`]; the error of the home's loss.
    pub fn load_home(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.with(|m| m.load_home(offset, out))
    }

    /// Make later loads of this map see every store that reached the segment's memory.
    pub fn acquire(&self) -> bool {
        self.inner.mapping.read().unwrap_or_else(|p| p.into_inner()).as_ref().is_none_or(|b| b.acquire())
    }
}

/// A connection to a segment of another host, as the DSM pager reaches it: through a pager
/// flow the daemon dials to the segment's node, else through the daemon.
#[derive(Debug)]
pub(crate) struct SegmentRange {
    pub(crate) conn: u64,
}

impl remora_client::dsm::RemoteRange for SegmentRange {
    fn key(&self) -> u64 {
        self.conn
    }

    fn flow_request(&self) -> Request {
        Request::DsmFlow { conn: self.conn }
    }

    fn read_request(&self, offset: u64, len: u32) -> Request {
        Request::SegRead { conn: self.conn, offset, len }
    }

    fn write_requests(&self, runs: Vec<(u64, Vec<u8>)>) -> Vec<Request> {
        vec![Request::SegWrite { conn: self.conn, runs }]
    }
}
