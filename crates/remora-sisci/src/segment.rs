//! Local segments (exported by this node) and remote segments (connections to a segment of
//! any node), with their events.

use crate::events::{Callback, EventQueue, LocalEvent, RemoteEvent, SegmentReason};
use crate::{check_adapter, timeout_ms, DepToken, Deps, Descriptor, Error, Result};
use remora_client::Session;
use remora_proto::{Reply, Request};
use remora_sys::user_memory::UserRegion;
use remora_sys::{AsFd, Memfd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

/// Flags of [`LocalSegment::create`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateFlags {
    /// Never connectable; has no id (`SCI_FLAG_PRIVATE`).
    pub private: bool,
    /// Allocate no memory; give it some with [`LocalSegment::register_memory`]
    /// (`SCI_FLAG_EMPTY`).
    pub empty: bool,
}

/// A local segment's callback (`sci_cb_local_segment_t`).
pub type LocalCallback = Callback<LocalSegment, LocalEvent>;
/// A remote segment's callback (`sci_cb_remote_segment_t`).
pub type RemoteCallback = Callback<RemoteSegment, RemoteEvent>;

#[derive(Debug)]
pub(crate) struct LocalInner {
    pub(crate) desc: Descriptor,
    pub(crate) seg: u64,
    id: Option<u32>,
    size: AtomicU64,
    pub(crate) memfd: RwLock<Option<Memfd>>,
    pub(crate) deps: Arc<Deps>,
    token: Mutex<Option<DepToken>>,
    removed: AtomicBool,
    pub(crate) prepared: AtomicBool,
    events: EventQueue<LocalSegment, LocalEvent>,
}

impl Drop for LocalInner {
    fn drop(&mut self) {
        self.desc.inner.dispatch.locals.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.seg);
        if !self.removed.load(Ordering::Acquire) {
            let _ = self.desc.session().request(Request::RemoveSegment { seg: self.seg, force: false }, &[]);
        }
    }
}

/// A segment of this node (`sci_local_segment_t`).
#[derive(Debug, Clone)]
pub struct LocalSegment {
    pub(crate) inner: Arc<LocalInner>,
}

impl LocalSegment {
    /// The descriptor it was made through (`SCIClose` of it with this still open tears this down).
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.desc
    }

    pub(crate) fn from_inner(inner: Arc<LocalInner>) -> LocalSegment {
        LocalSegment { inner }
    }

    pub(crate) fn from_reply(
        desc: &Descriptor,
        reply: Reply,
        fds: Vec<std::os::fd::OwnedFd>,
        callback: Option<LocalCallback>,
    ) -> Result<LocalSegment> {
        let Reply::Segment { seg, id, size, prepared, .. } = reply else {
            return Err(Error::System(format!("unexpected reply {reply:?}")));
        };
        let memfd = first_memfd(fds)?;
        let inner = Arc::new(LocalInner {
            token: Mutex::new(Some(desc.inner.deps.token())),
            desc: desc.clone(),
            seg,
            id,
            size: AtomicU64::new(size),
            memfd: RwLock::new(memfd),
            deps: Arc::default(),
            removed: AtomicBool::new(false),
            prepared: AtomicBool::new(prepared),
            events: EventQueue::new(callback),
        });
        desc.inner
            .dispatch
            .locals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(seg, Arc::downgrade(&inner));
        Ok(LocalSegment { inner })
    }

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
        LocalSegment::create_with_callback(desc, id, size, flags, None)
    }

    /// `SCICreateSegment` with `SCI_FLAG_USE_CALLBACK`: `callback` runs on the event
    /// thread for every connect and disconnect; [`LocalSegment::wait_event`] is then illegal.
    ///
    /// # Errors
    /// As [`LocalSegment::create`].
    pub fn create_with_callback(
        desc: &Descriptor,
        id: Option<u32>,
        size: usize,
        flags: CreateFlags,
        callback: Option<LocalCallback>,
    ) -> Result<LocalSegment> {
        let req =
            Request::CreateSegment { id, size: size as u64, private: flags.private, empty: flags.empty };
        let (reply, fds) = desc.live()?.session.request(req, &[])?;
        LocalSegment::from_reply(desc, reply, fds, callback)
    }

    /// `SCIAttachLocalSegment`: attach a segment another process of this node shared.
    ///
    /// # Errors
    /// [`Error::NoSuchSegment`]; [`Error::Access`] when it is not shared.
    pub fn attach(desc: &Descriptor, id: u32, callback: Option<LocalCallback>) -> Result<LocalSegment> {
        let (reply, fds) = desc.live()?.session.request(Request::AttachShared { id }, &[])?;
        LocalSegment::from_reply(desc, reply, fds, callback)
    }

    pub(crate) fn live(&self) -> Result<&LocalInner> {
        if self.inner.removed.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("segment removed".into()));
        }
        Ok(&self.inner)
    }

    fn call(&self, req: Request) -> Result<()> {
        self.live()?.desc.session().request(req, &[])?;
        Ok(())
    }

    pub(crate) fn deliver(&self, e: LocalEvent) {
        self.inner.events.push(self, e);
    }

    /// End the waits for this segment's events (the daemon is gone).
    pub(crate) fn cancel_events(&self) {
        self.inner.events.cancel();
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
        self.call(Request::Prepare { seg: self.inner.seg, adapter })?;
        self.inner.prepared.store(true, Ordering::Release);
        Ok(())
    }

    /// `SCISetSegmentAvailable`.
    ///
    /// # Errors
    /// [`Error::NotPrepared`]; [`Error::IllegalOperation`] for a private segment.
    pub fn set_available(&self, adapter: u32) -> Result<()> {
        check_adapter(adapter)?;
        self.call(Request::SetAvailable { seg: self.inner.seg, adapter })
    }

    /// `SCISetSegmentUnavailable` (`SCI_FLAG_FORCE_DISCONNECT`, `SCI_FLAG_NOTIFY`).
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] when it is not available.
    pub fn set_unavailable(&self, adapter: u32, force_disconnect: bool, notify: bool) -> Result<()> {
        check_adapter(adapter)?;
        self.call(Request::SetUnavailable { seg: self.inner.seg, adapter, force_disconnect, notify })
    }

    /// `SCIShareSegment`.
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] for a private segment.
    pub fn share(&self) -> Result<()> {
        self.call(Request::ShareSegment { seg: self.inner.seg })
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
        if inner.memfd.read().unwrap_or_else(|p| p.into_inner()).is_some() {
            return Err(Error::IllegalOperation);
        }
        let memfd = remora_sys::user_memory::move_slice_into_memfd(mem, "registered").map_err(|e| {
            if e.raw_os_error() == Some(14) {
                Error::IllegalAddress
            } else {
                Error::from(e)
            }
        })?;
        let (reply, _) =
            inner.desc.session().request(Request::AttachMemory { seg: inner.seg }, &[memfd.as_fd()])?;
        if let Reply::Segment { size, .. } = reply {
            inner.size.store(size, Ordering::Release);
        }
        *inner.memfd.write().unwrap_or_else(|p| p.into_inner()) = Some(memfd);
        Ok(())
    }

    /// `SCIRegisterSegmentMemory` of memory that may already be shared: the page-aligned
    /// `region` becomes shareable in place (private memory moves into a memfd; memory an
    /// earlier call shared is found again) and that memfd becomes this empty segment's
    /// memory. Returns the region's offset in the segment, which is 0 unless the region is
    /// part of memory shared before.
    ///
    /// # Errors
    /// As [`LocalSegment::register_memory`].
    pub fn register_region(&self, region: UserRegion) -> Result<usize> {
        let inner = self.live()?;
        let page = remora_sys::page_size();
        if !region.addr().is_multiple_of(page) {
            return Err(Error::OffsetAlignment);
        }
        if region.is_empty() || !region.len().is_multiple_of(page) {
            return Err(Error::SizeAlignment);
        }
        if inner.memfd.read().unwrap_or_else(|p| p.into_inner()).is_some() {
            return Err(Error::IllegalOperation);
        }
        let (memfd, off) = remora_sys::user_memory::share_region(region, "registered").map_err(|e| {
            if e.raw_os_error() == Some(14) {
                Error::IllegalAddress
            } else {
                Error::from(e)
            }
        })?;
        let memfd = memfd.try_clone()?;
        let (reply, _) =
            inner.desc.session().request(Request::AttachMemory { seg: inner.seg }, &[memfd.as_fd()])?;
        if let Reply::Segment { size, .. } = reply {
            inner.size.store(size, Ordering::Release);
        }
        *inner.memfd.write().unwrap_or_else(|p| p.into_inner()) = Some(memfd);
        Ok(off as usize)
    }

    /// `SCIWaitForLocalSegmentEvent`: the next connect or disconnect (`None` waits forever).
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::Cancelled`] when the segment is removed meanwhile;
    /// [`Error::IllegalOperation`] when the segment has a callback.
    pub fn wait_event(&self, timeout: Option<Duration>) -> Result<LocalEvent> {
        self.live()?;
        self.inner.events.wait(timeout)
    }

    /// `SCIRemoveSegment`. Succeeds while other nodes are connected (their memory lives
    /// until they disconnect).
    ///
    /// # Errors
    /// [`Error::Busy`] while this process has maps of it, a posted DMA transfer uses it, or
    /// other processes attached it.
    pub fn remove(&self) -> Result<()> {
        self.remove_with(false)
    }

    /// `SCIRemoveSegment` with `SCI_FLAG_FORCE_REMOVE`: remove the segment although maps,
    /// transfers or other processes still depend on it. Maps keep their memory (a map is
    /// memory of the process) until unmapped; other processes' handles stop naming a
    /// segment; transfers still posted against it end in error. The guide says the flag
    /// "is not intended for general use".
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when already removed.
    pub fn remove_forced(&self) -> Result<()> {
        self.remove_with(true)
    }

    fn remove_with(&self, force: bool) -> Result<()> {
        let inner = self.live()?;
        if !force && inner.deps.busy() {
            return Err(Error::Busy);
        }
        inner.desc.session().request(Request::RemoveSegment { seg: inner.seg, force }, &[])?;
        inner.removed.store(true, Ordering::Release);
        inner.events.cancel();
        inner.memfd.write().unwrap_or_else(|p| p.into_inner()).take();
        inner.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }
}

/// The memfd a reply carried (the first descriptor), if any.
fn first_memfd(fds: Vec<std::os::fd::OwnedFd>) -> Result<Option<Memfd>> {
    fds.into_iter().next().map(Memfd::from_fd).transpose().map_err(Error::from)
}

/// Flags of [`RemoteSegment::connect_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnectFlags {
    /// Return at once; the result comes as a `Connect` or `Disconnect` event
    /// (`SCI_FLAG_ASYNCHRONOUS_CONNECT`).
    pub asynchronous: bool,
}

/// An established connection.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) session: Arc<Session>,
    pub(crate) conn: u64,
    pub(crate) size: usize,
    /// The segment's memory when it is on this host; `None` for another host's segment.
    pub(crate) memfd: Option<Memfd>,
    /// A multicast connection's legs: this node's connections to a member of each other
    /// host that has one (`broadcast.rs`); empty otherwise.
    pub(crate) legs: Vec<u64>,
}

#[derive(Debug)]
pub(crate) struct RemoteInner {
    pub(crate) desc: Descriptor,
    node: u32,
    id: u32,
    pub(crate) link: OnceLock<Link>,
    pub(crate) deps: Arc<Deps>,
    token: Mutex<Option<DepToken>>,
    disconnected: AtomicBool,
    events: EventQueue<RemoteSegment, RemoteEvent>,
    pub(crate) watch: crate::health::LinkWatch,
}

impl Drop for RemoteInner {
    fn drop(&mut self) {
        if let Some(l) = self.link.get() {
            self.desc.inner.dispatch.remotes.lock().unwrap_or_else(|p| p.into_inner()).remove(&l.conn);
            if !self.disconnected.load(Ordering::Acquire) {
                let _ = l.session.request(Request::Disconnect { conn: l.conn }, &[]);
            }
        }
    }
}

/// A connection to a segment of some node (`sci_remote_segment_t`).
#[derive(Debug, Clone)]
pub struct RemoteSegment {
    pub(crate) inner: Arc<RemoteInner>,
}

fn connect_on(
    session: &Session,
    node: u32,
    id: u32,
    timeout: Option<Duration>,
) -> Result<(u64, usize, Option<Memfd>)> {
    let (reply, fds) =
        session.request(Request::Connect { node, id, timeout_ms: timeout_ms(timeout) }, &[])?;
    let Reply::Connected { conn, size } = reply else {
        return Err(Error::System(format!("unexpected reply {reply:?}")));
    };
    let memfd = first_memfd(fds)?;
    Ok((conn, size as usize, memfd))
}

impl RemoteSegment {
    /// The descriptor it was made through (`SCIClose` of it with this still open tears this down).
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.desc
    }

    pub(crate) fn from_inner(inner: Arc<RemoteInner>) -> RemoteSegment {
        RemoteSegment { inner }
    }

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
        RemoteSegment::connect_with(desc, node, id, adapter, timeout, ConnectFlags::default(), None)
    }

    /// `SCIConnectSegment` with a callback and/or `SCI_FLAG_ASYNCHRONOUS_CONNECT`. An
    /// asynchronous connect returns at once; its result arrives as a `Connect` event (the
    /// handle is now usable) or a `Disconnect` event with the reason (release the handle
    /// with [`RemoteSegment::disconnect`]).
    ///
    /// # Errors
    /// As [`RemoteSegment::connect`] for a synchronous connect; an asynchronous one fails
    /// at once only for a bad adapter or a closed descriptor.
    pub fn connect_with(
        desc: &Descriptor,
        node: u32,
        id: u32,
        adapter: u32,
        timeout: Option<Duration>,
        flags: ConnectFlags,
        callback: Option<RemoteCallback>,
    ) -> Result<RemoteSegment> {
        check_adapter(adapter)?;
        let live = desc.live()?;
        let inner = Arc::new(RemoteInner {
            token: Mutex::new(Some(desc.inner.deps.token())),
            desc: desc.clone(),
            node,
            id,
            link: OnceLock::new(),
            deps: Arc::default(),
            disconnected: AtomicBool::new(false),
            events: EventQueue::new(callback),
            watch: Default::default(),
        });
        if !flags.asynchronous {
            let (conn, size, memfd) = connect_on(&live.session, node, id, timeout)?;
            RemoteSegment::attach_link(
                &inner,
                Link { session: live.session.clone(), conn, size, memfd, legs: vec![] },
            );
            return Ok(RemoteSegment { inner });
        }
        // Asynchronous: a private session does the (possibly long) wait, so the
        // descriptor's own session stays free for other calls.
        let weak = Arc::downgrade(&inner);
        let cfg = live.cfg.clone();
        std::thread::Builder::new()
            .name("remora-connect".into())
            .spawn(move || {
                let result = Session::open(&cfg).map_err(Error::from).and_then(|s| {
                    let s = Arc::new(s);
                    connect_on(&s, node, id, timeout).map(|(conn, size, memfd)| Link {
                        session: s,
                        conn,
                        size,
                        memfd,
                        legs: vec![],
                    })
                });
                let Some(inner) = weak.upgrade() else { return };
                let seg = RemoteSegment { inner };
                match result {
                    Ok(link) if !seg.inner.disconnected.load(Ordering::Acquire) => {
                        let d = Arc::downgrade(&seg.inner.desc.inner.dispatch);
                        link.session.set_event_sink(Arc::new(move |ev| {
                            if let Some(d) = d.upgrade() {
                                d.deliver(ev);
                            }
                        }));
                        RemoteSegment::attach_link(&seg.inner, link);
                        seg.deliver(RemoteEvent { reason: SegmentReason::Connect, status: None });
                    }
                    Ok(link) => {
                        let _ = link.session.request(Request::Disconnect { conn: link.conn }, &[]);
                    }
                    Err(e) => seg.deliver(RemoteEvent { reason: SegmentReason::Disconnect, status: Some(e) }),
                }
            })
            .map_err(|e| Error::System(e.to_string()))?;
        Ok(RemoteSegment { inner })
    }

    /// A remote segment from the answer to a connect request of a personality layered on
    /// SISCI (RSM's connect carries permissions and signals): the answer names a core
    /// connection ([`Reply::Connected`], [`Reply::RsmConnected`], or a multicast
    /// connection's [`Reply::GroupConnected`]) and `fds` holds the
    /// segment's memory when it is on this host. The segment is then a remote segment like
    /// any other: maps (through the DSM for another host's), DMA, events, disconnect.
    ///
    /// # Errors
    /// [`Error::System`] for another answer; [`Error::IllegalOperation`] on a closed
    /// descriptor.
    pub fn adopt(
        desc: &Descriptor,
        node: u32,
        id: u32,
        reply: &Reply,
        fds: Vec<std::os::fd::OwnedFd>,
    ) -> Result<RemoteSegment> {
        let live = desc.live()?;
        let (conn, size, legs) = match reply {
            Reply::Connected { conn, size } | Reply::RsmConnected { conn, size, .. } => {
                (*conn, *size as usize, vec![])
            }
            Reply::GroupConnected { conn, size, legs } => (*conn, *size as usize, legs.clone()),
            other => return Err(Error::System(format!("unexpected reply {other:?}"))),
        };
        let memfd = first_memfd(fds)?;
        let inner = Arc::new(RemoteInner {
            token: Mutex::new(Some(desc.inner.deps.token())),
            desc: desc.clone(),
            node,
            id,
            link: OnceLock::new(),
            deps: Arc::default(),
            disconnected: AtomicBool::new(false),
            events: EventQueue::new(None),
            watch: Default::default(),
        });
        RemoteSegment::attach_link(&inner, Link { session: live.session.clone(), conn, size, memfd, legs });
        Ok(RemoteSegment { inner })
    }

    fn attach_link(inner: &Arc<RemoteInner>, link: Link) {
        let conn = link.conn;
        if inner.link.set(link).is_ok() {
            inner
                .desc
                .inner
                .dispatch
                .remotes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(conn, Arc::downgrade(inner));
        }
    }

    pub(crate) fn deliver(&self, e: RemoteEvent) {
        self.inner.watch.note(e.reason);
        self.inner.events.push(self, e);
    }

    pub(crate) fn link(&self) -> Result<&Link> {
        if self.inner.disconnected.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("segment disconnected".into()));
        }
        self.inner.link.get().ok_or(Error::NotConnected)
    }

    /// Whether the connection is established (an asynchronous connect may still run).
    pub fn is_connected(&self) -> bool {
        self.link().is_ok()
    }

    /// `SCIGetRemoteSegmentSize` (0 while an asynchronous connect runs).
    pub fn size(&self) -> usize {
        self.inner.link.get().map(|l| l.size).unwrap_or(0)
    }

    /// `SCIGetRemoteSegmentId`.
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// `SCIGetRemoteSegmentNodeId`.
    pub fn node(&self) -> u32 {
        self.inner.node
    }

    /// The node's connection handle (0 while an asynchronous connect runs).
    pub fn handle(&self) -> u64 {
        self.inner.link.get().map(|l| l.conn).unwrap_or(0)
    }

    /// `SCIWaitForRemoteSegmentEvent` (`None` waits forever).
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::Cancelled`] when disconnected meanwhile;
    /// [`Error::IllegalOperation`] when the connection has a callback.
    pub fn wait_event(&self, timeout: Option<Duration>) -> Result<RemoteEvent> {
        if self.inner.disconnected.load(Ordering::Acquire) {
            return Err(Error::Cancelled);
        }
        self.inner.events.wait(timeout)
    }

    /// `SCIDisconnectSegment` (also releases a failed or running asynchronous connect).
    ///
    /// # Errors
    /// [`Error::Busy`] while maps of it or posted DMA transfers exist.
    pub fn disconnect(&self) -> Result<()> {
        if self.inner.disconnected.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("segment disconnected".into()));
        }
        if self.inner.deps.busy() {
            return Err(Error::Busy);
        }
        if let Some(l) = self.inner.link.get() {
            l.session.request(Request::Disconnect { conn: l.conn }, &[])?;
        }
        self.inner.disconnected.store(true, Ordering::Release);
        self.inner.events.cancel();
        self.inner.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }

    /// Whether the segment's memory is on this host (nodes of other hosts are reached over
    /// the network: DMA, interrupts and events work, maps do not yet).
    pub fn is_on_this_host(&self) -> bool {
        self.inner.link.get().is_some_and(|l| l.memfd.is_some())
    }
}
