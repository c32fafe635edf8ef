//! The NIC (`VipOpenNic`): the process's door to the node, its protection tags, its
//! registered memory and table, the name service, and the error callback.

use crate::layout::{Slot, SLOT, SLOTS};
use crate::memory::{MemAttributes, MemBook, MemHandle, ProtectionTag};
use crate::vi::ViInner;
use crate::{CompletionQueue, Error, Result, Vi};
use remora_config::ViplTransfer;
use remora_sisci::{CreateFlags, Descriptor, DmaQueue, LocalSegment, Map, MapFlags, Sisci, UserRegion};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

/// How often the NIC's watcher looks (see `watch`).
const WATCH_EVERY: Duration = Duration::from_millis(10);

/// The device names programs hard-code; each opens the node's NIC.
pub const DEVICE_NAMES: &[&str] =
    &["remora0", "/dev/via0", "/dev/via_lo", "/dev/clanvi0", "nic0", "via0", "/dev/remora0"];

/// The NIC's attributes (`VIP_NIC_ATTRIBUTES`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicAttributes {
    /// The name it was opened with.
    pub name: String,
    /// The NIC's address: this node's id, four bytes big-endian.
    pub address: [u8; 4],
    /// Longest discriminator.
    pub max_discriminator_len: u16,
    /// Bytes one region may hold.
    pub max_register_bytes: u64,
    /// Regions.
    pub max_register_regions: u64,
    /// VIs.
    pub max_vi: u64,
    /// Descriptors a queue holds.
    pub max_descriptors_per_queue: u64,
    /// Segments a descriptor may carry.
    pub max_segments_per_desc: u64,
    /// Completion queues.
    pub max_cq: u64,
    /// Entries of one completion queue.
    pub max_cq_entries: u64,
    /// Largest transfer.
    pub max_transfer_size: u64,
    /// The MTU.
    pub native_mtu: u64,
    /// Protection tags.
    pub max_ptags: u64,
    /// Reliability levels offered (`VIP_SERVICE_*` bits).
    pub reliability_levels: u16,
    /// Levels with RDMA read.
    pub rdma_read_levels: u16,
}

/// What went wrong, as the error callback hears it (`VIP_ERROR_CODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ErrorCode {
    /// An error on a posted descriptor.
    PostDesc = 0,
    /// The connection was lost (the peer disconnected, died, or its node went away).
    ConnLost = 1,
    /// A message came with no receive posted.
    RecvqEmpty = 2,
    /// Too many descriptors.
    ViOverrun = 3,
    /// An RDMA write refused by the memory.
    RdmawProt = 4,
    /// RDMA write data error.
    RdmawData = 5,
    /// RDMA write aborted.
    RdmawAbort = 6,
    /// An RDMA read refused by the memory.
    RdmarProt = 7,
    /// Completion protection error.
    CompProt = 8,
    /// RDMA transport error.
    RdmaTransport = 9,
    /// The NIC failed.
    Catastrophic = 10,
}

/// An asynchronous error (`VIP_ERROR_DESCRIPTOR`).
#[derive(Debug, Clone)]
pub struct ErrorEvent {
    /// The VI concerned.
    pub vi: Option<Vi>,
    /// The completion queue concerned.
    pub cq: Option<CompletionQueue>,
    /// The address of the descriptor concerned.
    pub descriptor: Option<usize>,
    /// The operation (`VIP_CONTROL_OP_*`).
    pub opcode: u32,
    /// `VIP_RESOURCE_*`: 0 NIC, 1 VI, 2 CQ, 3 descriptor.
    pub resource: u32,
    /// What happened.
    pub code: ErrorCode,
}

fn mode_code(m: ViplTransfer) -> u8 {
    match m {
        ViplTransfer::Auto => 0,
        ViplTransfer::Copy => 1,
        ViplTransfer::Dma => 2,
    }
}

/// The error callback.
pub type ErrorHandler = Arc<dyn Fn(&ErrorEvent) + Send + Sync>;

pub(crate) struct NicInner {
    id: u64,
    pub(crate) name: String,
    pub(crate) sisci: Sisci,
    pub(crate) desc: Descriptor,
    pub(crate) node: u32,
    pub(crate) mem: Mutex<MemBook>,
    /// Deregistrations and attribute changes so far: memory found registered (with its
    /// protection tag) when a descriptor was posted still is while this has not moved.
    pub(crate) mem_epoch: AtomicU64,
    table: LocalSegment,
    table_map: Map,
    ptags: Mutex<Vec<ProtectionTag>>,
    next_ptag: AtomicU64,
    handler: Mutex<Option<ErrorHandler>>,
    /// The error handler's thread and the events queued to it.
    errors: crate::dispatch::ErrorDispatch,
    pub(crate) vis: Mutex<Vec<Weak<ViInner>>>,
    dma: Mutex<Option<DmaQueue>>,
    /// The transfer mode ([`ViplTransfer`] as 0 auto, 1 copy, 2 DMA): read on every
    /// payload, so an atomic.
    transfer: AtomicU8,
    watching: AtomicBool,
    /// The NIC watcher's period in microseconds ([`WATCH_EVERY`] unless a test set it).
    watch_us: AtomicU64,
    pub(crate) ns_up: AtomicBool,
}

impl std::fmt::Debug for NicInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nic").field("name", &self.name).field("node", &self.node).finish()
    }
}

impl Drop for NicInner {
    fn drop(&mut self) {
        for piece in self.mem.get_mut().unwrap_or_else(|p| p.into_inner()).drain() {
            piece.release();
        }
        let _ = self.table.remove();
    }
}

/// The node's NIC, as one process opened it (`VIP_NIC_HANDLE`). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Nic {
    pub(crate) inner: Arc<NicInner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

static NEXT_NIC: AtomicU64 = AtomicU64::new(1);

impl Nic {
    /// A number naming this NIC within the process.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The nodes this NIC knows of (`VipQuerySystemManagementInfo` autodiscovery): this
    /// one and those of the cluster file.
    pub fn known_nodes(&self) -> Vec<u32> {
        crate::names::known(self)
    }

    /// `VipOpenNic`: `remora0` and the names real programs hard-code (`/dev/via0`,
    /// `/dev/via_lo`, `/dev/clanvi0`, `nic0`) open this node's NIC. The library starts the
    /// node's daemon if none runs.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for another name; [`Error::Resource`] when no daemon
    /// could be reached or started.
    pub fn open(name: &str) -> Result<Nic> {
        Nic::check_name(name)?;
        let sisci = Sisci::initialize().map_err(|e| Error::Resource(e.to_string()))?;
        Nic::start(name, sisci)
    }

    /// [`Nic::open`] for a process of the node `cfg` names (tests; programs playing
    /// several nodes).
    ///
    /// # Errors
    /// As [`Nic::open`].
    pub fn open_with_config(name: &str, cfg: remora_client::Config) -> Result<Nic> {
        Nic::check_name(name)?;
        Nic::start(name, Sisci::with_config(cfg))
    }

    fn check_name(name: &str) -> Result<()> {
        if DEVICE_NAMES.contains(&name) {
            Ok(())
        } else {
            Err(Error::InvalidParameter(format!("no VI NIC named {name:?} (try remora0 or /dev/via0)")))
        }
    }

    fn start(name: &str, sisci: Sisci) -> Result<Nic> {
        let transfer = remora_config::Config::get().vipl_transfer;
        let desc = Descriptor::open(&sisci).map_err(|e| Error::Resource(e.to_string()))?;
        let table = LocalSegment::create(&desc, None, SLOTS * SLOT, CreateFlags::default())?;
        table.prepare(remora_sisci::ADAPTER)?;
        table.set_available(remora_sisci::ADAPTER)?;
        let table_map = table.map(0, SLOTS * SLOT, None, MapFlags::default())?;
        Ok(Nic {
            inner: Arc::new(NicInner {
                id: NEXT_NIC.fetch_add(1, Ordering::Relaxed),
                name: name.to_string(),
                node: desc.node(),
                sisci,
                desc,
                mem: Mutex::new(MemBook::default()),
                mem_epoch: AtomicU64::new(0),
                table,
                table_map,
                ptags: Mutex::new(Vec::new()),
                next_ptag: AtomicU64::new(1),
                handler: Mutex::new(None),
                errors: Default::default(),
                vis: Mutex::new(Vec::new()),
                dma: Mutex::new(None),
                transfer: AtomicU8::new(mode_code(transfer)),
                watching: AtomicBool::new(false),
                watch_us: AtomicU64::new(WATCH_EVERY.as_micros() as u64),
                ns_up: AtomicBool::new(false),
            }),
        })
    }

    /// This node's id.
    pub fn node(&self) -> u32 {
        self.inner.node
    }

    /// The id of the NIC's table segment (what peers read for RDMA).
    pub(crate) fn table_id(&self) -> u32 {
        self.inner.table.id()
    }

    /// How payloads move (`REMORA_VIPL_TRANSFER` unless set here).
    pub fn transfer_mode(&self) -> ViplTransfer {
        match self.inner.transfer.load(Ordering::Relaxed) {
            1 => ViplTransfer::Copy,
            2 => ViplTransfer::Dma,
            _ => ViplTransfer::Auto,
        }
    }

    /// Choose how VIs of this NIC move payloads: the paper's memory copy or DMA.
    pub fn set_transfer_mode(&self, mode: ViplTransfer) {
        self.inner.transfer.store(mode_code(mode), Ordering::Relaxed);
    }

    /// For tests only (hidden from the docs): the NIC's watcher looks every `period`
    /// instead of every 10 ms from its next look on (from its first when set before the
    /// NIC's first VI), so a test can tell what the watcher did from what the VIs' own
    /// calls did without racing its ticks.
    #[doc(hidden)]
    pub fn set_watch_period(&self, period: Duration) {
        let us = u64::try_from(period.as_micros()).unwrap_or(u64::MAX).max(1);
        self.inner.watch_us.store(us, Ordering::Relaxed);
    }

    /// `VipQueryNic`.
    pub fn attributes(&self) -> NicAttributes {
        NicAttributes {
            name: self.inner.name.clone(),
            address: self.inner.node.to_be_bytes(),
            max_discriminator_len: remora_proto::MAX_DISCRIMINATOR as u16,
            max_register_bytes: 1 << 40,
            max_register_regions: SLOTS as u64,
            max_vi: 1024,
            max_descriptors_per_queue: crate::layout::ENTRIES as u64,
            max_segments_per_desc: crate::layout::MAX_SEGMENTS as u64,
            max_cq: 1024,
            max_cq_entries: 1 << 20,
            max_transfer_size: crate::MAX_TRANSFER as u64,
            native_mtu: crate::MAX_TRANSFER as u64,
            max_ptags: 1 << 20,
            reliability_levels: crate::UNRELIABLE | crate::RELIABLE_DELIVERY | crate::RELIABLE_RECEPTION,
            rdma_read_levels: crate::RELIABLE_DELIVERY | crate::RELIABLE_RECEPTION,
        }
    }

    /// `VipCreatePtag`.
    pub fn create_ptag(&self) -> ProtectionTag {
        let tag = ProtectionTag(
            self.inner.next_ptag.fetch_add(1, Ordering::Relaxed) | (u64::from(self.inner.node) << 40),
        );
        lock(&self.inner.ptags).push(tag);
        tag
    }

    /// Whether `tag` is a live protection tag of this NIC.
    pub fn has_ptag(&self, tag: ProtectionTag) -> bool {
        lock(&self.inner.ptags).contains(&tag)
    }

    /// `VipDestroyPtag`.
    ///
    /// # Errors
    /// [`Error::InvalidPtag`] for a tag that is not this NIC's; [`Error::Resource`] while a
    /// VI or registered memory carries it.
    pub fn destroy_ptag(&self, tag: ProtectionTag) -> Result<()> {
        if !self.has_ptag(tag) {
            return Err(Error::InvalidPtag);
        }
        let vi_uses = self.live_vis().iter().any(|v| v.ptag() == tag);
        if vi_uses || lock(&self.inner.mem).uses_ptag(tag) {
            return Err(Error::Resource("the protection tag is in use".into()));
        }
        lock(&self.inner.ptags).retain(|t| *t != tag);
        Ok(())
    }

    pub(crate) fn live_vis(&self) -> Vec<Arc<ViInner>> {
        let mut vis = lock(&self.inner.vis);
        vis.retain(|w| w.strong_count() > 0);
        vis.iter().filter_map(Weak::upgrade).collect()
    }

    fn write_slot(&self, handle: MemHandle, slot: &Slot) {
        let _ = self.inner.table_map.write((handle as usize % SLOTS) * SLOT, &slot.encode());
    }

    /// `VipRegisterMem`: register `region` (any memory of the program, at any alignment).
    /// Its pages become shareable in place: they keep their addresses and bytes.
    ///
    /// # Errors
    /// [`Error::InvalidPtag`]; [`Error::InvalidParameter`] for empty memory or memory that
    /// cannot be shared (a file mapping, read-only memory); [`Error::Resource`].
    pub fn register(&self, region: UserRegion, attrs: MemAttributes) -> Result<MemHandle> {
        if !self.has_ptag(attrs.ptag) {
            return Err(Error::InvalidPtag);
        }
        let (handle, slot) = {
            let mut mem = lock(&self.inner.mem);
            // Read under the lock that deregistrations bump it under.
            let epoch = self.inner.mem_epoch.load(Ordering::SeqCst);
            mem.register(&self.inner.desc, region, attrs, epoch)?
        };
        self.write_slot(handle, &slot);
        Ok(handle)
    }

    /// `VipDeregisterMem`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when `handle` is not a region registered at `addr`.
    pub fn deregister(&self, addr: usize, handle: MemHandle) -> Result<()> {
        let gone = {
            let mut mem = lock(&self.inner.mem);
            let gone = mem.deregister(handle, addr)?;
            self.inner.mem_epoch.fetch_add(1, Ordering::SeqCst);
            gone
        };
        self.write_slot(handle, &Slot::default());
        self.table_changed();
        for piece in gone {
            piece.release();
        }
        Ok(())
    }

    /// `VipQueryMem`.
    ///
    /// # Errors
    /// As [`Nic::deregister`].
    pub fn query_mem(&self, addr: usize, handle: MemHandle) -> Result<MemAttributes> {
        lock(&self.inner.mem).query(handle, addr)
    }

    /// `VipSetMemAttributes`.
    ///
    /// # Errors
    /// As [`Nic::deregister`]; [`Error::InvalidPtag`].
    pub fn set_mem_attributes(&self, addr: usize, handle: MemHandle, attrs: MemAttributes) -> Result<()> {
        if !self.has_ptag(attrs.ptag) {
            return Err(Error::InvalidPtag);
        }
        let slot = {
            let mut mem = lock(&self.inner.mem);
            let slot = mem.set(handle, addr, attrs)?;
            self.inner.mem_epoch.fetch_add(1, Ordering::SeqCst);
            slot
        };
        self.write_slot(handle, &slot);
        self.table_changed();
        Ok(())
    }

    /// The memory table changed (a region deregistered, or its attributes): every peer on
    /// another host that may hold slots it read before hears it before this returns (its
    /// RDMA reads the slot again), through the VI's channel, landed.
    fn table_changed(&self) {
        let epoch = self.inner.mem_epoch.load(Ordering::SeqCst);
        for vi in self.live_vis() {
            if let Some(link) = vi.link().filter(|l| l.is_far()) {
                link.store(crate::layout::PEER_TABLE, link.tag(epoch));
                link.settle();
            }
        }
    }

    /// `VipErrorCallback`: `handler` hears every asynchronous error of this NIC's VIs, in
    /// order, on one thread of the library per NIC (never inside the call that caused it).
    /// `None` restores the default, which keeps quiet.
    pub fn set_error_handler(&self, handler: Option<ErrorHandler>) {
        *lock(&self.inner.handler) = handler;
    }

    /// Tell the error handler (if one is set) about `ev`, on the NIC's error thread
    /// (`dispatch.rs`): queued only here, so a caller may hold the library's locks.
    pub(crate) fn report(&self, ev: ErrorEvent) {
        let Some(h) = lock(&self.inner.handler).clone() else { return };
        self.inner.errors.report(Box::new(move || h(&ev)));
    }

    /// Run `f` with the NIC's DMA queue (made on first use).
    pub(crate) fn with_dma<R>(&self, f: impl FnOnce(&DmaQueue) -> Result<R>) -> Result<R> {
        let mut g = lock(&self.inner.dma);
        if g.is_none() {
            *g = Some(DmaQueue::create(&self.inner.desc, remora_sisci::ADAPTER, 16)?);
        }
        match g.as_ref() {
            Some(q) => f(q),
            None => Err(Error::Resource("no DMA queue".into())),
        }
    }

    /// Forget a destroyed VI: its protection tag is free at once, though another thread
    /// (the watcher, a notify handler) may still hold it for a moment.
    pub(crate) fn remove_vi(&self, vi: &Arc<ViInner>) {
        let gone = Arc::downgrade(vi);
        lock(&self.inner.vis).retain(|w| !w.ptr_eq(&gone) && w.strong_count() > 0);
    }

    /// Whether `vi` was made on this NIC and not destroyed since.
    pub(crate) fn has_vi(&self, vi: &Arc<ViInner>) -> bool {
        let vi = Arc::downgrade(vi);
        lock(&self.inner.vis).iter().any(|w| w.ptr_eq(&vi))
    }

    pub(crate) fn add_vi(&self, vi: &Arc<ViInner>) {
        lock(&self.inner.vis).push(Arc::downgrade(vi));
        if !self.inner.watching.swap(true, Ordering::AcqRel) {
            let weak = Arc::downgrade(&self.inner);
            if std::thread::Builder::new().name("vipl-watch".into()).spawn(move || watch(weak)).is_err() {
                // Tried again with the next VI; meanwhile no count of posted receives waits.
                self.inner.watching.store(false, Ordering::Release);
            }
        }
    }

    /// Whether the NIC's watcher runs (it sends counts of posted receives that waited).
    pub(crate) fn watcher_runs(&self) -> bool {
        self.inner.watching.load(Ordering::Acquire)
    }

    /// `VipNSInit`.
    pub fn ns_init(&self) {
        self.inner.ns_up.store(true, Ordering::Release);
    }

    /// `VipNSShutdown`.
    pub fn ns_shutdown(&self) {
        self.inner.ns_up.store(false, Ordering::Release);
    }

    /// `VipNSGetHostByName`: a decimal node id, `localhost` or this machine's host name,
    /// or a host named in the cluster file. Returns the node's NIC address.
    ///
    /// # Errors
    /// [`Error::NameService`] for a name no node has.
    pub fn host_by_name(&self, name: &str) -> Result<[u8; 4]> {
        crate::names::resolve(self, name).map(u32::to_be_bytes)
    }

    /// `VipNSGetHostByAddr`: the node's name (its host in the cluster file when that host
    /// stands for it, else its decimal id; see `names`).
    ///
    /// # Errors
    /// [`Error::NameService`] for an address that is not four bytes.
    pub fn host_by_addr(&self, addr: &[u8]) -> Result<String> {
        let node: [u8; 4] =
            addr.try_into().map_err(|_| Error::NameService(format!("address of {} bytes", addr.len())))?;
        Ok(crate::names::name_of(self, u32::from_be_bytes(node)))
    }
}

/// The NIC's watcher: notices peers that disconnected, died, or whose node was lost, for
/// VIs nobody is waiting on, so that the error callback comes anyway; and sends the counts
/// of posted receives that waited on a channel to another host (`Link::posted_later`).
fn watch(nic: Weak<NicInner>) {
    let watching = Watching(nic);
    let set = |i: Arc<NicInner>| Duration::from_micros(i.watch_us.load(Ordering::Relaxed));
    let mut period = watching.0.upgrade().map_or(WATCH_EVERY, set);
    loop {
        std::thread::sleep(period);
        let Some(inner) = watching.0.upgrade() else { return };
        period = Duration::from_micros(inner.watch_us.load(Ordering::Relaxed));
        let nic = Nic { inner };
        for vi in nic.live_vis() {
            vi.check_peer(&nic);
            // Receives posts left to a peer on this host are taken in and described now.
            vi.describe_stale();
            // Counts of posted receives that waited on a channel go now.
            if let Some(link) = vi.link() {
                link.flush_posted_late();
            }
        }
    }
}

/// The NIC's watcher runs: when it ends (its NIC gone, or a panic unwinding it), no count
/// of posted receives waits any more, and those waiting go (the next VI made starts
/// another watcher).
struct Watching(Weak<NicInner>);

impl Drop for Watching {
    fn drop(&mut self) {
        let Some(inner) = self.0.upgrade() else { return };
        inner.watching.store(false, Ordering::Release);
        // Against a post that looked before the store above and holds its count after:
        // either this flush sees the count, or the post sees the watcher gone and sends it
        // (`ViInner::tell_posted`).
        std::sync::atomic::fence(Ordering::SeqCst);
        for vi in (Nic { inner }).live_vis() {
            if let Some(link) = vi.link() {
                // Waiting for the channel: a holder's send may have carried the count,
                // or left it queued. The unwinding let go of every lock this thread held,
                // and no holder of the channel waits for the watcher.
                link.flush_posted_waiting();
            }
        }
    }
}

#[cfg(test)]
mod watcher_end;
