//! The safe Rust API of Remora's SISCI personality: Dolphin's Software Infrastructure for
//! Shared-memory Cluster Interconnects, in idiomatic Rust.
//!
//! A [`Sisci`] is the initialised library (`SCIInitialize`); a [`Descriptor`] is a virtual
//! device (`SCIOpen`). Segments are exported with [`LocalSegment`], imported with
//! [`RemoteSegment`], mapped with [`Map`], and error-checked with [`Sequence`]. Every handle
//! is cheap to clone; the explicit `remove`/`disconnect`/`unmap`/`close` calls follow the
//! guide's rules (a parent with dependants gives [`Error::Busy`]), and dropping the last
//! clone of a handle releases it too.
//!
//! ```no_run
//! use remora_sisci::{Sisci, Descriptor, LocalSegment, RemoteSegment, CreateFlags, MapFlags};
//! let sci = Sisci::initialize().unwrap();
//! let dev = Descriptor::open(&sci).unwrap();
//! let seg = LocalSegment::create(&dev, Some(4), 4096, CreateFlags::default()).unwrap();
//! seg.prepare(0).unwrap();
//! seg.set_available(0).unwrap();
//! // Any process of any node on this host can now connect and map it:
//! let remote = RemoteSegment::connect(&dev, sci.local_node_id(), 4, 0, None).unwrap();
//! let map = remote.map(0, 4096, None, MapFlags::default()).unwrap();
//! map.write(0, b"hello").unwrap();
//! let local = seg.map(0, 4096, None, MapFlags::default()).unwrap();
//! let mut buf = [0u8; 5];
//! local.read(0, &mut buf).unwrap();
//! assert_eq!(&buf, b"hello");
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod query;

pub use error::{Error, Result};
pub use query::AdapterInfo;
pub use remora_client::Config;

use remora_client::Session;
use remora_proto::{MapTarget, Reply, Request};
use remora_sys::{AsFd, MapOptions, Mapping, Memfd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The only adapter number a Remora node has.
pub const ADAPTER: u32 = 0;

/// Counts the resources that depend on a parent.
#[derive(Debug, Default)]
struct Deps(AtomicUsize);

/// Held by a child; its drop releases the parent.
#[derive(Debug)]
struct DepToken(Arc<Deps>);

impl Deps {
    fn token(self: &Arc<Self>) -> DepToken {
        self.0.fetch_add(1, Ordering::AcqRel);
        DepToken(self.clone())
    }
    fn busy(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }
}

impl Drop for DepToken {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The initialised library (`SCIInitialize`).
#[derive(Debug, Clone)]
pub struct Sisci {
    cfg: Config,
}

impl Sisci {
    /// `SCIInitialize`: read the node and runtime directory from the environment.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when `REMORA_NODE` or another variable is malformed.
    pub fn initialize() -> Result<Sisci> {
        Ok(Sisci {
            cfg: Config::from_env().map_err(|e| Error::IllegalParameter(e.to_string()))?,
        })
    }

    /// A library for an explicit configuration (several nodes in one process, tests).
    pub fn with_config(cfg: Config) -> Sisci {
        Sisci { cfg }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// `SCIGetLocalNodeId`: the node this process belongs to.
    pub fn local_node_id(&self) -> u32 {
        self.cfg.node
    }
}

#[derive(Debug)]
struct DescInner {
    session: Session,
    node: u32,
    deps: Arc<Deps>,
    closed: AtomicBool,
    next_map: AtomicU64,
}

/// A virtual device (`SCIOpen`): one session with the node daemon.
#[derive(Debug, Clone)]
pub struct Descriptor {
    inner: Arc<DescInner>,
}

impl Descriptor {
    /// `SCIOpen`: open a session with the node daemon, starting it if none runs.
    ///
    /// # Errors
    /// [`Error::System`] when no daemon runs and none could be started.
    pub fn open(sci: &Sisci) -> Result<Descriptor> {
        let session = Session::open(&sci.cfg)?;
        Ok(Descriptor {
            inner: Arc::new(DescInner {
                node: session.node(),
                session,
                deps: Arc::default(),
                closed: AtomicBool::new(false),
                next_map: AtomicU64::new(1),
            }),
        })
    }

    /// `SCIClose`.
    ///
    /// # Errors
    /// [`Error::Busy`] while segments, connections or maps made through it exist;
    /// [`Error::IllegalOperation`] when already closed.
    pub fn close(&self) -> Result<()> {
        if self.inner.deps.busy() {
            return Err(Error::Busy);
        }
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Err(Error::IllegalOperation);
        }
        Ok(())
    }

    fn live(&self) -> Result<&DescInner> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::IllegalOperation);
        }
        Ok(&self.inner)
    }

    /// The node of this descriptor's session.
    pub fn node(&self) -> u32 {
        self.inner.node
    }

    /// `SCIProbeNode`: whether `node` answers.
    ///
    /// # Errors
    /// [`Error::NoSuchAdapter`] for an adapter other than 0; [`Error::NoSuchNode`] when the
    /// node is unknown or does not answer.
    pub fn probe_node(&self, adapter: u32, node: u32) -> Result<bool> {
        check_adapter(adapter)?;
        match self
            .live()?
            .session
            .request(Request::Probe { node }, &[])?
            .0
        {
            Reply::Probe { reachable: true } => Ok(true),
            Reply::Probe { reachable: false } => Err(Error::NoSuchNode),
            other => Err(Error::System(format!("unexpected reply {other:?}"))),
        }
    }

    fn session(&self) -> &Session {
        &self.inner.session
    }
}

fn check_adapter(adapter: u32) -> Result<()> {
    if adapter == ADAPTER {
        Ok(())
    } else {
        Err(Error::NoSuchAdapter)
    }
}

/// Flags of [`LocalSegment::create`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateFlags {
    /// Never connectable; has no id (`SCI_FLAG_PRIVATE`).
    pub private: bool,
    /// Allocate no memory; give it some with [`LocalSegment::register_memory`]
    /// (`SCI_FLAG_EMPTY`).
    pub empty: bool,
}

#[derive(Debug)]
struct LocalInner {
    desc: Descriptor,
    seg: u64,
    id: Option<u32>,
    size: AtomicU64,
    memfd: RwLock<Option<Memfd>>,
    deps: Arc<Deps>,
    token: Mutex<Option<DepToken>>,
    removed: AtomicBool,
}

impl Drop for LocalInner {
    fn drop(&mut self) {
        if !self.removed.load(Ordering::Acquire) {
            let _ = self
                .desc
                .session()
                .request(Request::RemoveSegment { seg: self.seg }, &[]);
        }
    }
}

/// A segment of this node (`sci_local_segment_t`).
#[derive(Debug, Clone)]
pub struct LocalSegment {
    inner: Arc<LocalInner>,
}

fn segment_from_reply(
    desc: &Descriptor,
    reply: Reply,
    fds: Vec<std::os::fd::OwnedFd>,
) -> Result<LocalSegment> {
    let Reply::Segment { seg, id, size, .. } = reply else {
        return Err(Error::System(format!("unexpected reply {reply:?}")));
    };
    let memfd = match fds.into_iter().next() {
        Some(fd) => Some(Memfd::from_fd(fd)?),
        None => None,
    };
    Ok(LocalSegment {
        inner: Arc::new(LocalInner {
            token: Mutex::new(Some(desc.inner.deps.token())),
            desc: desc.clone(),
            seg,
            id,
            size: AtomicU64::new(size),
            memfd: RwLock::new(memfd),
            deps: Arc::default(),
            removed: AtomicBool::new(false),
        }),
    })
}

impl LocalSegment {
    /// `SCICreateSegment`: `id` `None` lets the node choose (`SCI_FLAG_AUTO_ID`).
    ///
    /// # Errors
    /// [`Error::SegmentIdUsed`], [`Error::NoSpace`], [`Error::IllegalParameter`] for a zero
    /// size, [`Error::IllegalOperation`] on a closed descriptor.
    pub fn create(
        desc: &Descriptor,
        id: Option<u32>,
        size: usize,
        flags: CreateFlags,
    ) -> Result<LocalSegment> {
        let req = Request::CreateSegment {
            id,
            size: size as u64,
            private: flags.private,
            empty: flags.empty,
        };
        let (reply, fds) = desc.live()?.session.request(req, &[])?;
        segment_from_reply(desc, reply, fds)
    }

    /// `SCIAttachLocalSegment`: attach a segment another process of this node shared.
    ///
    /// # Errors
    /// [`Error::NoSuchSegment`]; [`Error::Access`] when it is not shared.
    pub fn attach(desc: &Descriptor, id: u32) -> Result<LocalSegment> {
        let (reply, fds) = desc
            .live()?
            .session
            .request(Request::AttachShared { id }, &[])?;
        segment_from_reply(desc, reply, fds)
    }

    fn live(&self) -> Result<&LocalInner> {
        if self.inner.removed.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("segment removed".into()));
        }
        Ok(&self.inner)
    }

    fn call(&self, req: Request) -> Result<()> {
        self.live()?.desc.session().request(req, &[])?;
        Ok(())
    }

    /// `SCIGetLocalSegmentId` (0 for a private segment).
    pub fn id(&self) -> u32 {
        self.inner.id.unwrap_or(0)
    }

    /// `SCIGetLocalSegmentSize`.
    pub fn size(&self) -> usize {
        self.inner.size.load(Ordering::Acquire) as usize
    }

    /// The node's handle (for status and queries).
    pub fn handle(&self) -> u64 {
        self.inner.seg
    }

    /// The node that owns the segment.
    pub fn node(&self) -> u32 {
        self.inner.desc.node()
    }

    /// `SCIPrepareSegment`.
    ///
    /// # Errors
    /// [`Error::NoSuchAdapter`]; [`Error::IllegalOperation`] for an empty segment.
    pub fn prepare(&self, adapter: u32) -> Result<()> {
        check_adapter(adapter)?;
        self.call(Request::Prepare {
            seg: self.inner.seg,
            adapter,
        })
    }

    /// `SCISetSegmentAvailable`.
    ///
    /// # Errors
    /// [`Error::NotPrepared`]; [`Error::IllegalOperation`] for a private segment.
    pub fn set_available(&self, adapter: u32) -> Result<()> {
        check_adapter(adapter)?;
        self.call(Request::SetAvailable {
            seg: self.inner.seg,
            adapter,
        })
    }

    /// `SCISetSegmentUnavailable` (`SCI_FLAG_FORCE_DISCONNECT`, `SCI_FLAG_NOTIFY`).
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] when it is not available.
    pub fn set_unavailable(
        &self,
        adapter: u32,
        force_disconnect: bool,
        notify: bool,
    ) -> Result<()> {
        check_adapter(adapter)?;
        self.call(Request::SetUnavailable {
            seg: self.inner.seg,
            adapter,
            force_disconnect,
            notify,
        })
    }

    /// `SCIShareSegment`.
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] for a private segment.
    pub fn share(&self) -> Result<()> {
        self.call(Request::ShareSegment {
            seg: self.inner.seg,
        })
    }

    /// `SCIRegisterSegmentMemory`: make `mem` (private anonymous memory of this process,
    /// page-aligned) the memory of this empty segment, in place: the addresses stay valid.
    ///
    /// # Errors
    /// [`Error::OffsetAlignment`]/[`Error::SizeAlignment`] when not page-aligned,
    /// [`Error::IllegalAddress`] when it is not anonymous memory,
    /// [`Error::IllegalOperation`] when the segment already has memory.
    pub fn register_memory(&self, mem: &'static mut [u8]) -> Result<()> {
        let inner = self.live()?;
        let page = remora_sys::page_size();
        if !(mem.as_ptr() as usize).is_multiple_of(page) {
            return Err(Error::OffsetAlignment);
        }
        if mem.is_empty() || !mem.len().is_multiple_of(page) {
            return Err(Error::SizeAlignment);
        }
        if inner
            .memfd
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return Err(Error::IllegalOperation);
        }
        let memfd =
            remora_sys::user_memory::move_slice_into_memfd(mem, "registered").map_err(|e| {
                if e.raw_os_error() == Some(14) {
                    Error::IllegalAddress
                } else {
                    Error::from(e)
                }
            })?;
        let (reply, _) = inner
            .desc
            .session()
            .request(Request::AttachMemory { seg: inner.seg }, &[memfd.as_fd()])?;
        if let Reply::Segment { size, .. } = reply {
            inner.size.store(size, Ordering::Release);
        }
        *inner.memfd.write().unwrap_or_else(|p| p.into_inner()) = Some(memfd);
        Ok(())
    }

    /// `SCIRemoveSegment`. Succeeds while other nodes are connected (their memory lives
    /// until they disconnect).
    ///
    /// # Errors
    /// [`Error::Busy`] while this process has maps of it or other processes attached it.
    pub fn remove(&self) -> Result<()> {
        let inner = self.live()?;
        if inner.deps.busy() {
            return Err(Error::Busy);
        }
        inner
            .desc
            .session()
            .request(Request::RemoveSegment { seg: inner.seg }, &[])?;
        inner.removed.store(true, Ordering::Release);
        inner
            .memfd
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        inner.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }

    /// `SCIMapLocalSegment`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`], [`Error::IllegalAddress`] when a fixed address is taken,
    /// [`Error::IllegalOperation`] for a segment without memory.
    pub fn map(
        &self,
        offset: usize,
        size: usize,
        addr: Option<usize>,
        flags: MapFlags,
    ) -> Result<Map> {
        let inner = self.live()?;
        let memfd = inner.memfd.read().unwrap_or_else(|p| p.into_inner());
        let memfd = memfd.as_ref().ok_or(Error::IllegalOperation)?;
        Map::create(
            &inner.desc,
            memfd,
            self.size(),
            offset,
            size,
            addr,
            flags,
            MapTarget::Local { seg: inner.seg },
            &inner.deps,
            MapParent::Local(self.clone()),
        )
    }
}

#[derive(Debug)]
struct RemoteInner {
    desc: Descriptor,
    conn: u64,
    node: u32,
    id: u32,
    size: usize,
    memfd: Memfd,
    deps: Arc<Deps>,
    token: Mutex<Option<DepToken>>,
    disconnected: AtomicBool,
}

impl Drop for RemoteInner {
    fn drop(&mut self) {
        if !self.disconnected.load(Ordering::Acquire) {
            let _ = self
                .desc
                .session()
                .request(Request::Disconnect { conn: self.conn }, &[]);
        }
    }
}

/// A connection to a segment of some node (`sci_remote_segment_t`).
#[derive(Debug, Clone)]
pub struct RemoteSegment {
    inner: Arc<RemoteInner>,
}

impl RemoteSegment {
    /// `SCIConnectSegment`: wait up to `timeout` (`None`: forever) for segment `id` of
    /// `node` to become available, then connect. Connecting to one's own node works.
    ///
    /// # Errors
    /// [`Error::NoSuchNode`] at once for an unknown node; [`Error::NoSuchSegment`] when the
    /// time ran out and no segment had the id; [`Error::Timeout`] when it existed but was
    /// not available; [`Error::NoSuchAdapter`].
    pub fn connect(
        desc: &Descriptor,
        node: u32,
        id: u32,
        adapter: u32,
        timeout: Option<Duration>,
    ) -> Result<RemoteSegment> {
        check_adapter(adapter)?;
        let timeout_ms = timeout.map(|t| t.as_millis().min(u32::MAX as u128 - 1) as u32);
        let (reply, fds) = desc.live()?.session.request(
            Request::Connect {
                node,
                id,
                timeout_ms,
            },
            &[],
        )?;
        let Reply::Connected { conn, size } = reply else {
            return Err(Error::System(format!("unexpected reply {reply:?}")));
        };
        let fd = fds
            .into_iter()
            .next()
            .ok_or_else(|| Error::System("connect reply without memory".into()))?;
        Ok(RemoteSegment {
            inner: Arc::new(RemoteInner {
                token: Mutex::new(Some(desc.inner.deps.token())),
                desc: desc.clone(),
                conn,
                node,
                id,
                size: size as usize,
                memfd: Memfd::from_fd(fd)?,
                deps: Arc::default(),
                disconnected: AtomicBool::new(false),
            }),
        })
    }

    fn live(&self) -> Result<&RemoteInner> {
        if self.inner.disconnected.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("segment disconnected".into()));
        }
        Ok(&self.inner)
    }

    /// `SCIGetRemoteSegmentSize`.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// `SCIGetRemoteSegmentId`.
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// `SCIGetRemoteSegmentNodeId`.
    pub fn node(&self) -> u32 {
        self.inner.node
    }

    /// The node's connection handle.
    pub fn handle(&self) -> u64 {
        self.inner.conn
    }

    /// Whether the node has reported this connection lost (owner gone, forced disconnect).
    pub fn is_lost(&self) -> bool {
        let s = self.inner.desc.session();
        s.poll_events();
        s.lost(self.inner.conn).is_some()
    }

    /// `SCIDisconnectSegment`.
    ///
    /// # Errors
    /// [`Error::Busy`] while maps of it exist.
    pub fn disconnect(&self) -> Result<()> {
        let inner = self.live()?;
        if inner.deps.busy() {
            return Err(Error::Busy);
        }
        inner
            .desc
            .session()
            .request(Request::Disconnect { conn: inner.conn }, &[])?;
        inner.disconnected.store(true, Ordering::Release);
        inner.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }

    /// `SCIMapRemoteSegment`: any offset and size inside the segment; read-only maps are
    /// enforced by the MMU.
    ///
    /// # Errors
    /// [`Error::OutOfRange`]; [`Error::IllegalAddress`] when a fixed address is taken.
    pub fn map(
        &self,
        offset: usize,
        size: usize,
        addr: Option<usize>,
        flags: MapFlags,
    ) -> Result<Map> {
        let inner = self.live()?;
        Map::create(
            &inner.desc,
            &inner.memfd,
            inner.size,
            offset,
            size,
            addr,
            flags,
            MapTarget::Remote { conn: inner.conn },
            &inner.deps,
            MapParent::Remote(self.clone()),
        )
    }
}

/// Flags of the map calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct MapFlags {
    /// Map read-only: a store faults (`SCI_FLAG_READONLY_MAP`).
    pub readonly: bool,
}

/// The segment a map came from; held so the segment outlives its maps.
#[derive(Debug)]
#[allow(dead_code)]
enum MapParent {
    Local(LocalSegment),
    Remote(RemoteSegment),
}

#[derive(Debug)]
struct MapInner {
    desc: Descriptor,
    number: u64,
    mapping: RwLock<Option<Mapping>>,
    addr: usize,
    size: usize,
    parent: MapParent,
    deps: Arc<Deps>,
    token: Mutex<Option<DepToken>>,
}

impl Drop for MapInner {
    fn drop(&mut self) {
        if self.mapping.get_mut().map(|m| m.is_some()).unwrap_or(false) {
            let _ = self
                .desc
                .session()
                .note(Request::UnmapNote { map: self.number });
        }
    }
}

/// A mapped segment (`sci_map_t`): plain loads and stores reach the segment's memory.
#[derive(Debug, Clone)]
pub struct Map {
    inner: Arc<MapInner>,
}

impl Map {
    #[allow(clippy::too_many_arguments)]
    fn create(
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
        if let Some(a) = addr {
            if a % remora_sys::page_size() != offset % remora_sys::page_size() {
                return Err(Error::IllegalAddress);
            }
        }
        let mapping = Mapping::new(
            memfd.as_fd(),
            offset as u64,
            size,
            MapOptions {
                readonly: flags.readonly,
                fixed_addr: addr,
            },
        )
        .map_err(|e| {
            if e.raw_os_error() == Some(17) || addr.is_some() {
                Error::IllegalAddress
            } else {
                Error::from(e)
            }
        })?;
        let number = desc.inner.next_map.fetch_add(1, Ordering::Relaxed);
        let _ = desc.session().note(Request::MapNote {
            map: number,
            target,
            offset: offset as u64,
            size: size as u64,
            readonly: flags.readonly,
        });
        Ok(Map {
            inner: Arc::new(MapInner {
                desc: desc.clone(),
                number,
                addr: mapping.as_ptr() as usize,
                size,
                mapping: RwLock::new(Some(mapping)),
                parent,
                deps: Arc::default(),
                token: Mutex::new(Some(parent_deps.token())),
            }),
        })
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
    /// always, for segments of nodes of this host.
    pub fn is_local_target(&self) -> bool {
        true
    }

    /// Whether the map's address range contains `addr..addr+len`; the offset if so.
    pub fn offset_of(&self, addr: usize, len: usize) -> Option<usize> {
        let off = addr.checked_sub(self.inner.addr)?;
        (off.checked_add(len)? <= self.inner.size).then_some(off)
    }

    fn with<R>(&self, f: impl FnOnce(&Mapping) -> std::io::Result<R>) -> Result<R> {
        let g = self.inner.mapping.read().unwrap_or_else(|p| p.into_inner());
        let m = g
            .as_ref()
            .ok_or_else(|| Error::IllegalParameter("map unmapped".into()))?;
        f(m).map_err(|e| match e.raw_os_error() {
            Some(13) => Error::IllegalOperation,
            _ => Error::from(e),
        })
    }

    /// Store `data` at `offset` (the PIO path of `SCIMemCpy`).
    ///
    /// # Errors
    /// [`Error::OutOfRange`]; [`Error::IllegalOperation`] on a read-only map.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.with(|m| m.write(offset, data))
    }

    /// Load into `out` from `offset` (`SCIMemCpy` with `SCI_FLAG_BLOCK_READ`).
    ///
    /// # Errors
    /// [`Error::OutOfRange`].
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.with(|m| m.read(offset, out))
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
        let m = g
            .as_ref()
            .ok_or_else(|| Error::IllegalParameter("map unmapped".into()))?;
        if !offset.is_multiple_of(8) {
            return Err(Error::OffsetAlignment);
        }
        if m.is_readonly() {
            return Err(Error::IllegalOperation);
        }
        m.atomic_u64(offset).map(f).ok_or(Error::OutOfRange)
    }

    /// `SCIUnmapSegment`.
    ///
    /// # Errors
    /// [`Error::Busy`] while sequences of it exist.
    pub fn unmap(&self) -> Result<()> {
        if self.inner.deps.busy() {
            return Err(Error::Busy);
        }
        let mut g = self
            .inner
            .mapping
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if g.take().is_none() {
            return Err(Error::IllegalParameter("map unmapped".into()));
        }
        let _ = self.inner.desc.session().note(Request::UnmapNote {
            map: self.inner.number,
        });
        self.inner
            .token
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        Ok(())
    }

    /// `SCICreateMapSequence`.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] on an unmapped map.
    pub fn create_sequence(&self) -> Result<Sequence> {
        self.with(|_| Ok(()))?;
        Ok(Sequence {
            inner: Arc::new(SeqInner {
                map: self.clone(),
                token: Mutex::new(Some(self.inner.deps.token())),
                removed: AtomicBool::new(false),
            }),
        })
    }

    fn link_lost(&self) -> bool {
        match &self.inner.parent {
            MapParent::Remote(r) => r.is_lost(),
            MapParent::Local(_) => false,
        }
    }
}

/// The status of a sequence (`sci_sequence_status_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceStatus {
    /// No error since the last check (`SCI_SEQ_OK`).
    Ok,
    /// A transient error: retry the transfer (`SCI_SEQ_RETRIABLE`).
    Retriable,
    /// A fatal error: start the sequence again before retrying (`SCI_SEQ_NOT_RETRIABLE`).
    NotRetriable,
    /// An error whose kind is not known yet: start again (`SCI_SEQ_PENDING`).
    Pending,
}

#[derive(Debug)]
struct SeqInner {
    map: Map,
    token: Mutex<Option<DepToken>>,
    removed: AtomicBool,
}

/// An error-checked sequence of accesses to a map (`sci_sequence_t`).
#[derive(Debug, Clone)]
pub struct Sequence {
    inner: Arc<SeqInner>,
}

impl Sequence {
    fn live(&self) -> Result<&SeqInner> {
        if self.inner.removed.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("sequence removed".into()));
        }
        Ok(&self.inner)
    }

    /// The map this sequence checks.
    pub fn map(&self) -> &Map {
        &self.inner.map
    }

    /// `SCIStartSequence`: `Ok` when no error is pending on the map's link.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] for a removed sequence.
    pub fn start(&self) -> Result<SequenceStatus> {
        let inner = self.live()?;
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(if inner.map.link_lost() {
            SequenceStatus::NotRetriable
        } else {
            SequenceStatus::Ok
        })
    }

    /// `SCICheckSequence`: flush (unless `no_flush`), wait for stores to complete (unless
    /// `no_store_barrier`), and report whether an error happened since the last start/check.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] for a removed sequence.
    pub fn check(&self, no_flush: bool, no_store_barrier: bool) -> Result<SequenceStatus> {
        let inner = self.live()?;
        if !no_flush || !no_store_barrier {
            std::sync::atomic::fence(Ordering::SeqCst);
        }
        Ok(if inner.map.link_lost() {
            SequenceStatus::NotRetriable
        } else {
            SequenceStatus::Ok
        })
    }

    /// `SCIStoreBarrier`: every store made before it has reached the segment's memory.
    pub fn store_barrier(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// `SCIRemoveSequence`.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when already removed.
    pub fn remove(&self) -> Result<()> {
        let inner = self.live()?;
        inner.removed.store(true, Ordering::Release);
        inner.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }
}

/// `SCIFlush`: drain this CPU's store buffers (a full memory fence).
pub fn flush() {
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// `SCIMemCpy`: store `data` into `map` at `offset`; then, when a sequence is given and
/// `error_check` is set (`SCI_FLAG_ERROR_CHECK`), check it.
///
/// # Errors
/// [`Error::OutOfRange`]; [`Error::IllegalOperation`] writing a read-only map;
/// [`Error::TransferFailed`] when the checked sequence reports an error.
pub fn mem_copy(
    seq: Option<&Sequence>,
    data: &[u8],
    map: &Map,
    offset: usize,
    error_check: bool,
) -> Result<()> {
    map.write(offset, data)?;
    std::sync::atomic::fence(Ordering::Release);
    checked(seq, error_check)
}

/// `SCIMemCpy` with `SCI_FLAG_BLOCK_READ`: load from `map` at `offset` into `out`; then
/// check the sequence as [`mem_copy`] does.
///
/// # Errors
/// [`Error::OutOfRange`]; [`Error::TransferFailed`] when the checked sequence reports an
/// error.
pub fn mem_read(
    seq: Option<&Sequence>,
    out: &mut [u8],
    map: &Map,
    offset: usize,
    error_check: bool,
) -> Result<()> {
    map.read(offset, out)?;
    checked(seq, error_check)
}

fn checked(seq: Option<&Sequence>, error_check: bool) -> Result<()> {
    if let (Some(s), true) = (seq, error_check) {
        if s.check(false, false)? != SequenceStatus::Ok {
            return Err(Error::TransferFailed);
        }
    }
    Ok(())
}
