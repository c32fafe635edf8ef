//! Virtual interfaces (`VipCreateVi` and the calls on a VI): attributes, the state machine,
//! and the queues' bookkeeping. The peer's health and the connection's end (breaking the
//! VI, noticing a peer that went, the reset after a disconnect) are in `vi/peer.rs`. The
//! data path is in `data.rs`, the link to the peer in `link.rs`, connection set-up in
//! `connect.rs`.

use crate::cache::DescCache;
use crate::layout::{self, Chunk};
use crate::link::Link;
use crate::memory::ProtectionTag;
use crate::posted::PostedQ;
use crate::window::Window;
use crate::{CompletionQueue, Error, Nic, Result};
use remora_sisci::{CreateFlags, Interrupt, LocalSegment, MapFlags, RemoteInterrupt};
use remora_sys::lock::Lock;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

/// `VIP_SERVICE_UNRELIABLE`.
pub const UNRELIABLE: u16 = 0x01;
/// `VIP_SERVICE_RELIABLE_DELIVERY`.
pub const RELIABLE_DELIVERY: u16 = 0x02;
/// `VIP_SERVICE_RELIABLE_RECEPTION`.
pub const RELIABLE_RECEPTION: u16 = 0x04;
/// The largest transfer a descriptor may describe (`MaxTransferSize`).
pub const MAX_TRANSFER: u32 = 64 << 20;

/// The attributes of a VI (`VIP_VI_ATTRIBUTES`; QoS is not used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViAttributes {
    /// One of the `VIP_SERVICE_*` levels.
    pub reliability: u16,
    /// The largest transfer.
    pub max_transfer: u32,
    /// The protection tag.
    pub ptag: ProtectionTag,
    /// RDMA writes of the peer into this VI's memory are allowed.
    pub rdma_write: bool,
    /// RDMA reads of the peer from this VI's memory are allowed.
    pub rdma_read: bool,
}

/// The state of a VI (`VIP_VI_STATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ViState {
    /// Not connected.
    Idle = 0,
    /// Connected.
    Connected = 1,
    /// A connection is being made.
    ConnectPending = 2,
    /// The connection broke; only a disconnect leaves this state.
    Error = 3,
}

#[derive(Debug, Default)]
pub(crate) struct SendQ {
    /// Receives of the peer consumed (= completions written into its ring B).
    pub(crate) consumed: u64,
    /// The peer's posted count as last read: receives below it need no look at the count.
    pub(crate) seen: u64,
    /// The sizes of the peer's receives below `seen`, by ring index.
    pub(crate) rooms: Vec<u32>,
    /// The send descriptors seen last.
    pub(crate) cache: DescCache,
    /// The link while connected, and the VI's attributes then (they change only while
    /// idle): a send on a connected VI needs no other lock than the send queue's.
    pub(crate) link: Option<(Arc<Link>, ViAttributes)>,
    /// Completed sends not yet reaped: (descriptor address, its memory handle).
    pub(crate) done: VecDeque<(usize, u32)>,
    /// Where the buffers of the peer's receives below `seen` lie, by ring index, as noted
    /// when they were learned (`crate::scatter`).
    pub(crate) heads: Vec<crate::layout::Head>,
    /// The peer's piece written last and its table, straight (`Link::write_piece_hinted`).
    pub(crate) hint: crate::link::PieceHint,
}

#[derive(Debug, Default)]
pub(crate) struct RecvQ {
    /// Posted, not completed, oldest first.
    pub(crate) posted: PostedQ,
    /// Entries described to the peer (ring A index of the next one).
    pub(crate) pushed: u64,
    /// Completions read from ring B.
    pub(crate) consumed: u64,
    /// Completed receives not yet reaped.
    pub(crate) done: VecDeque<(usize, u32)>,
    /// What this connection wrote at each index of the peer's ring A, for entries of at
    /// most two chunks: a receive posted again where the same one was described before
    /// is not written again (programs repost a fixed pool of descriptors).
    pub(crate) described: Vec<Option<Short>>,
    /// The receive descriptors seen last.
    pub(crate) cache: DescCache,
    /// The link while connected (what [`ViInner::link`] answers), and the VI's protection
    /// tag then: a receive posted on a connected VI needs no other lock.
    pub(crate) link: Option<(Arc<Link>, ProtectionTag)>,
    /// Posts noted, to be taken in a little later (`crate::later`).
    pub(crate) pending: Pending,
    /// A reliable VI's first receive whose completion came with an error (its descriptor
    /// address), noted when it was taken in: whichever thread breaks the VI then
    /// ([`ViInner::fail`]) reports that receive, not what it looked at itself.
    pub(crate) broke: Option<usize>,
}

/// A ring A entry of at most two chunks, as remembered: its total, its chunk count, its
/// chunks (compared as values: no bytes to build for a receive posted again).
pub(crate) type Short = (u32, usize, [Chunk; 2]);

pub(crate) struct ViInner {
    pub(crate) nic: Nic,
    pub(crate) id: u64,
    pub(crate) attrs: Mutex<ViAttributes>,
    pub(crate) state: Mutex<ViState>,
    pub(crate) send_cq: Option<CompletionQueue>,
    pub(crate) recv_cq: Option<CompletionQueue>,
    pub(crate) seg: LocalSegment,
    /// This VI's own segment (rings, counts), always on this host.
    pub(crate) map: Window,
    /// Rung by the peer when a receive completes (unless a receive CQ is attached, whose
    /// own doorbell is rung instead).
    pub(crate) bell: Interrupt,
    /// A connection to the doorbell that waits on, to wake them from this process.
    pub(crate) self_bell: RemoteInterrupt,
    pub(crate) link: RwLock<Option<Arc<Link>>>,
    /// The peer's VI is on this host (set when connected): completions are found by their
    /// sequence numbers alone.
    pub(crate) peer_here: AtomicBool,
    /// The send queue, behind the data path's lock (one locked instruction per call).
    pub(crate) send: Lock<SendQ>,
    /// Bumped (and woken) when a send completes while a thread waits in `send_wait`.
    pub(crate) send_seq: AtomicU32,
    /// Threads in `send_wait` (counted under the send queue's lock: a completion wakes
    /// only when there are some, as a wake is a system call).
    pub(crate) send_waiters: AtomicUsize,
    /// The receive queue's next completion (its `consumed`) and how many completed
    /// receives wait to be reaped, as last seen under its lock: a poll with nothing to
    /// take looks at these and the ring, and takes no lock.
    pub(crate) recv_next: AtomicU64,
    pub(crate) recv_ready: AtomicUsize,
    /// Polls of the receive queue: the peer's liveness is checked every 128th.
    pub(crate) polls: AtomicUsize,
    /// A peer on this host: receives posted and not described to it yet, left for this
    /// VI's next send, poll that finds nothing, or the NIC's watcher
    /// ([`ViInner::describe_pending`]).
    pub(crate) undescribed: AtomicBool,
    /// A send was posted since the last receive was (the VI answers its peer: a send
    /// follows a post, and describes what the post left).
    pub(crate) sent_since_post: AtomicBool,
    /// Posts noted to be taken in later so far, and that count as the NIC's watcher saw it
    /// last (it takes in only what waited since its previous look).
    pub(crate) noted: AtomicU64,
    pub(crate) noted_seen: AtomicU64,
    pub(crate) recv: Lock<RecvQ>,
    /// A peer-to-peer connect in progress: its outcome once known.
    pub(crate) peer_connect: Mutex<Option<Option<Result<ViAttributes>>>>,
    /// Notified when a peer-to-peer connect's outcome becomes known (`VipConnectPeerWait`
    /// sleeps on it).
    pub(crate) peer_outcome: Condvar,
    /// Threads asleep on `peer_outcome` now (counted under `peer_connect`'s lock).
    #[cfg(test)]
    pub(crate) peer_sleepers: std::sync::atomic::AtomicUsize,
    /// This VI's connection number: told to the peer in [`crate::link::PeerInfo`], carried by every word
    /// the peer stores in this VI's segment ([`layout::tagged`]: counts, flags, what it
    /// says about itself, each completion's sequence number, each receive it describes),
    /// bumped by every disconnect. A word an earlier peer stores late (it still reaches the
    /// segment) names an older number and is not heard.
    pub(crate) conn: AtomicU32,
}

impl std::fmt::Debug for ViInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vi").field("id", &self.id).field("state", &*lock(&self.state)).finish()
    }
}

impl Drop for ViInner {
    fn drop(&mut self) {
        if let Some(l) = self.link.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            l.say_gone();
            l.close();
        }
        let _ = self.self_bell.disconnect();
        let _ = self.bell.remove();
        let _ = self.map.map.unmap();
        let _ = self.seg.remove();
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A virtual interface (`VIP_VI_HANDLE`): a send queue and a receive queue, connected to
/// one peer VI. Cheap to clone; destroyed with [`Vi::destroy`] or when the last clone goes.
#[derive(Debug, Clone)]
pub struct Vi {
    pub(crate) inner: Arc<ViInner>,
}

static NEXT_VI: AtomicU64 = AtomicU64::new(1);

fn check_attrs(nic: &Nic, a: &ViAttributes) -> Result<()> {
    if ![UNRELIABLE, RELIABLE_DELIVERY, RELIABLE_RECEPTION].contains(&a.reliability) {
        return Err(Error::InvalidReliabilityLevel);
    }
    if a.max_transfer > MAX_TRANSFER {
        return Err(Error::InvalidMtu);
    }
    if !nic.has_ptag(a.ptag) {
        return Err(Error::InvalidPtag);
    }
    if a.rdma_read && a.reliability == UNRELIABLE {
        return Err(Error::InvalidRdmaRead);
    }
    Ok(())
}

impl Vi {
    /// `VipCreateVi`: a VI with `attrs`, its completions reported to `send_cq` and
    /// `recv_cq` when given.
    ///
    /// # Errors
    /// [`Error::InvalidReliabilityLevel`], [`Error::InvalidMtu`], [`Error::InvalidPtag`],
    /// [`Error::InvalidRdmaRead`] (RDMA read on an unreliable VI), [`Error::Resource`].
    pub fn create(
        nic: &Nic,
        attrs: ViAttributes,
        send_cq: Option<&CompletionQueue>,
        recv_cq: Option<&CompletionQueue>,
    ) -> Result<Vi> {
        check_attrs(nic, &attrs)?;
        for cq in send_cq.iter().chain(recv_cq.iter()) {
            if !Arc::ptr_eq(&cq.nic().inner, &nic.inner) {
                return Err(Error::InvalidParameter("a completion queue of another NIC".into()));
            }
        }
        let desc = &nic.inner.desc;
        let size = layout::vi_segment_size();
        let seg = LocalSegment::create(desc, None, size, CreateFlags::default())?;
        seg.prepare(remora_sisci::ADAPTER)?;
        seg.set_available(remora_sisci::ADAPTER)?;
        let map = seg.map(0, size, None, MapFlags::default())?;
        let bell = Interrupt::create(desc, remora_sisci::ADAPTER, None, true, None)?;
        let self_bell =
            RemoteInterrupt::connect(desc, nic.node(), remora_sisci::ADAPTER, bell.number(), None)?;
        let inner = Arc::new(ViInner {
            nic: nic.clone(),
            id: NEXT_VI.fetch_add(1, Ordering::Relaxed),
            attrs: Mutex::new(attrs),
            state: Mutex::new(ViState::Idle),
            send_cq: send_cq.cloned(),
            recv_cq: recv_cq.cloned(),
            seg,
            map: Window::new(map),
            bell,
            self_bell,
            link: RwLock::new(None),
            peer_here: AtomicBool::new(false),
            send: Lock::new(SendQ::default()),
            send_seq: AtomicU32::new(0),
            send_waiters: AtomicUsize::new(0),
            recv_next: AtomicU64::new(0),
            recv_ready: AtomicUsize::new(0),
            polls: AtomicUsize::new(0),
            undescribed: AtomicBool::new(false),
            sent_since_post: AtomicBool::new(false),
            noted: AtomicU64::new(0),
            noted_seen: AtomicU64::new(0),
            recv: Lock::new(RecvQ::default()),
            peer_connect: Mutex::new(None),
            peer_outcome: Condvar::new(),
            #[cfg(test)]
            peer_sleepers: std::sync::atomic::AtomicUsize::new(0),
            conn: AtomicU32::new(1),
        });
        nic.add_vi(&inner);
        if let Some(cq) = recv_cq {
            cq.attach(&inner, true);
        }
        if let Some(cq) = send_cq {
            cq.attach(&inner, false);
        }
        Ok(Vi { inner })
    }

    /// A number naming this VI within the process.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The NIC it was made on.
    pub fn nic(&self) -> &Nic {
        &self.inner.nic
    }

    /// `VipDestroyVi`.
    ///
    /// # Errors
    /// [`Error::InvalidState`] unless idle (disconnect first); [`Error::Resource`] while
    /// descriptors are still posted.
    pub fn destroy(&self) -> Result<()> {
        if *lock(&self.inner.state) != ViState::Idle {
            return Err(Error::InvalidState);
        }
        let mut q = self.inner.recv.lock();
        self.inner.settle(&mut q);
        let posted = !q.posted.is_empty();
        drop(q);
        if posted {
            return Err(Error::Resource("receives are still posted".into()));
        }
        for cq in self.inner.send_cq.iter().chain(self.inner.recv_cq.iter()) {
            cq.detach(self.inner.id);
        }
        self.inner.nic.remove_vi(&self.inner);
        Ok(())
    }

    /// `VipQueryVi`: the state, the attributes, and whether the send and receive queues
    /// are empty.
    pub fn query(&self) -> (ViState, ViAttributes, bool, bool) {
        let _ = self.inner.reap();
        let state = *lock(&self.inner.state);
        let attrs = *lock(&self.inner.attrs);
        let send_empty = self.inner.send.lock().done.is_empty();
        let mut recv = self.inner.recv.lock();
        self.inner.settle(&mut recv);
        (state, attrs, send_empty, recv.posted.is_empty() && recv.done.is_empty())
    }

    /// `VipSetViAttributes`.
    ///
    /// # Errors
    /// As [`Vi::create`]; [`Error::InvalidState`] unless idle.
    pub fn set_attributes(&self, attrs: ViAttributes) -> Result<()> {
        if *lock(&self.inner.state) != ViState::Idle {
            return Err(Error::InvalidState);
        }
        check_attrs(&self.inner.nic, &attrs)?;
        *lock(&self.inner.attrs) = attrs;
        Ok(())
    }

    /// The VI's state.
    pub fn state(&self) -> ViState {
        *lock(&self.inner.state)
    }

    /// How many times the NIC's watcher, not this VI's own calls, told its peer on another
    /// host of receives posted here that waited to be told (0 with a peer on this host, or
    /// none connected): each time a sender that used up the receives it knew may have
    /// waited up to the watcher's 10 ms. For tests and diagnostics.
    // Public only for the crate's integration tests: not part of the VIPL API.
    #[doc(hidden)]
    pub fn posts_told_late(&self) -> u64 {
        self.inner.link().map_or(0, |l| l.told_late())
    }

    /// How many times counts of receives posted here went to a peer on another host on
    /// their own, not carried by a send of this VI (each a socket write, and a wake-up of
    /// the peer's node): the NIC's watcher's among them. For tests and diagnostics.
    // Public only for the crate's integration tests: not part of the VIPL API.
    #[doc(hidden)]
    pub fn posts_told_alone(&self) -> u64 {
        self.inner.link().map_or(0, |l| l.told_alone())
    }

    /// How many receives the connected peer has posted, as far as this VI's segment was
    /// told (0 before a count of this connection came). For tests and diagnostics.
    // Public only for the crate's integration tests: not part of the VIPL API.
    #[doc(hidden)]
    pub fn peer_posted_known(&self) -> u64 {
        layout::count_in(self.inner.conn(), self.inner.map.load(layout::PEER_POSTED), 0)
    }
}

impl ViInner {
    pub(crate) fn ptag(&self) -> ProtectionTag {
        lock(&self.attrs).ptag
    }

    pub(crate) fn attrs(&self) -> ViAttributes {
        *lock(&self.attrs)
    }

    pub(crate) fn link(&self) -> Option<Arc<Link>> {
        self.link.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn vi(self: &Arc<Self>) -> Vi {
        Vi { inner: self.clone() }
    }

    /// This VI's connection number now (what the words its peer stores carry).
    #[inline(always)]
    pub(crate) fn conn(&self) -> u32 {
        self.conn.load(Ordering::Relaxed)
    }

    /// Wake whoever waits on this VI's queues or its completion queues.
    pub(crate) fn wake(&self) {
        let _ = self.self_bell.trigger();
        // A waiter for a peer on another host sleeps on the done count, a sender short of
        // receives on the peer's posted count.
        self.map.wake_word(layout::DONE);
        self.map.wake_word(layout::PEER_POSTED);
        self.send_seq.fetch_add(1, Ordering::SeqCst);
        remora_sys::sync::futex_wake_all(&self.send_seq);
        for cq in self.send_cq.iter().chain(self.recv_cq.iter()) {
            cq.wake();
        }
    }
}

/// Posts noted and not yet taken in, at most (`later.rs`).
pub(crate) const DEFER_MAX: usize = 8;

/// Posts noted by `ViInner::post_later` (`later.rs`): (descriptor address, memory
/// handle, protection tag), oldest first.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) posts: [(usize, u32, ProtectionTag); DEFER_MAX],
    pub(crate) n: usize,
}

impl Default for Pending {
    fn default() -> Self {
        Pending { posts: [(0, 0, ProtectionTag(0)); DEFER_MAX], n: 0 }
    }
}

pub(crate) mod peer;
