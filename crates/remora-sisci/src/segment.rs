//! Local segments (exported by this node) and remote segments (connections to a segment of
//! any node), with their events.

use crate::events::{Callback, EventQueue, LocalEvent};
use crate::{check_adapter, DepToken, Deps, Descriptor, Error, Result};
use remora_proto::{Reply, Request};
use remora_sys::user_memory::UserRegion;
use remora_sys::{AsFd, Memfd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

mod remote;
pub use remote::*;

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
        let ask = callback.is_some();
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
            events: EventQueue::kept_until_asked(callback),
        });
        desc.inner
            .dispatch
            .locals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(seg, Arc::downgrade(&inner));
        let seg = LocalSegment { inner };
        if ask {
            // A callback runs for every event: the daemon sends them from now on (and
            // those it kept since the segment was made).
            seg.ask_events()?;
        }
        Ok(seg)
    }

    /// Ask the daemon for this segment's events: those it kept, then each as it happens
    /// (`events.rs`). Sent on the session's event socket, which no long request of the
    /// descriptor holds up.
    fn ask_events(&self) -> Result<()> {
        let req = Request::SegmentEvents { seg: self.inner.seg };
        self.inner.desc.session().ask_on_events(req).map_err(Error::from)
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

    /// The daemon sent every event it kept for this segment (the answer to the ask).
    pub(crate) fn events_on(&self) {
        self.inner.events.set_ready();
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
        if remora_client::events::on_event_thread() {
            // Inside another resource's callback: the event thread reads the event socket
            // again only after it, so this wait reads it itself. It takes this segment's
            // events (and the answer to the ask) in the order they came; the others are
            // delivered after the running callback returns.
            let seg = self.inner.seg;
            let session = self.inner.desc.session();
            let pick = move |ev: &remora_proto::Event| match ev {
                remora_proto::Event::SegmentEventsOn { seg: s } => *s == seg,
                ev => crate::local_event(ev).is_some_and(|(s, _)| s == seg),
            };
            let pump = |left| match session.pump_events(&pick, left) {
                Ok(_) => Ok(()),
                Err(remora_client::ClientError::DaemonGone) => Err(Error::Cancelled),
                Err(e) => Err(Error::from(e)),
            };
            return self.inner.events.wait_pumping(timeout, || self.ask_events(), Some(pump));
        }
        self.inner.events.wait(timeout, || self.ask_events())
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
pub(crate) fn first_memfd(fds: Vec<std::os::fd::OwnedFd>) -> Result<Option<Memfd>> {
    fds.into_iter().next().map(Memfd::from_fd).transpose().map_err(Error::from)
}
