//! The safe Rust API of Remora's SISCI personality: Dolphin's Software Infrastructure for
//! Shared-memory Cluster Interconnects, in idiomatic Rust.
//!
//! A [`Sisci`] is the initialised library (`SCIInitialize`); a [`Descriptor`] is a virtual
//! device (`SCIOpen`). Segments are exported with [`LocalSegment`], imported with
//! [`RemoteSegment`], mapped with [`Map`], and error-checked with [`Sequence`]. The node's
//! DMA engine serves [`DmaQueue`]s; [`Interrupt`]s and [`DataInterrupt`]s wake a waiter in
//! another process. Every handle is cheap to clone; the explicit `remove`/`disconnect`/
//! `unmap`/`close` calls follow the guide's rules (a parent with dependants gives
//! [`Error::Busy`]), and dropping the last clone of a handle releases it too.
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

mod block;
mod broadcast;
mod channel;
mod copy;
mod dma;
mod error;
mod events;
mod health;
mod interrupt;
mod map;
mod query;
mod segment;
mod segment_map;
mod sequence;

pub use block::{transfer_block, BlockCallback, BlockTransfer};
pub use broadcast::{BROADCAST_NODE, MULTICAST_GROUPS};
pub use channel::{DmaChannel, DmaKind, DMA_CHANNELS};
pub use copy::{flush, mem_copy, mem_read, store_with, CopyRoutine};
pub use dma::{DmaCallback, DmaFlags, DmaQueue, DmaState, DmaVec, MIN_CAPACITY};
pub use error::{Error, Result};
pub use events::{CallbackAction, LocalEvent, RemoteEvent, SegmentReason};
pub use interrupt::{
    named_interrupt_number, DataCallback, DataInterrupt, Interrupt, InterruptCallback, RemoteDataInterrupt,
    RemoteInterrupt, MAX_DATA_INTERRUPT, NAMED_INTNO_BASE,
};
pub use map::{Map, MapFlags};
pub use query::AdapterInfo;
pub use remora_client::Config;
pub use remora_sys::user_memory::UserRegion;
pub use segment::{ConnectFlags, CreateFlags, LocalCallback, LocalSegment, RemoteCallback, RemoteSegment};
pub use sequence::{Sequence, SequenceStatus};

use remora_client::Session;
use remora_proto::{Event, LostReason, Reply, Request};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The only adapter number a Remora node has.
pub const ADAPTER: u32 = 0;

/// How long waits spin before they block (`REMORA_SPIN_US`, default 50 µs).
pub(crate) fn spin() -> Duration {
    remora_config::Config::get().spin
}

/// Counts the resources that depend on a parent.
#[derive(Debug, Default)]
pub(crate) struct Deps(AtomicUsize);

/// Held by a child; its drop releases the parent.
#[derive(Debug)]
pub(crate) struct DepToken(Arc<Deps>);

impl Deps {
    pub(crate) fn token(self: &Arc<Self>) -> DepToken {
        self.0.fetch_add(1, Ordering::AcqRel);
        DepToken(self.clone())
    }
    /// A token borrowed for a while on this thread (no reference count taken: the parent
    /// outlives the borrow): what a transfer made by the calling thread holds.
    pub(crate) fn hold(&self) -> DepHold<'_> {
        self.0.fetch_add(1, Ordering::AcqRel);
        DepHold(self)
    }
    pub(crate) fn busy(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }
}

/// [`Deps::hold`]'s token; its drop releases the parent.
#[derive(Debug)]
pub(crate) struct DepHold<'a>(&'a Deps);

impl Drop for DepHold<'_> {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
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
        Ok(Sisci { cfg: Config::from_env().map_err(|e| Error::IllegalParameter(e.to_string()))? })
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

/// Where a descriptor's events go: the resources made through it, by daemon handle.
#[derive(Debug, Default)]
pub(crate) struct Dispatch {
    pub(crate) locals: Mutex<HashMap<u64, Weak<segment::LocalInner>>>,
    pub(crate) remotes: Mutex<HashMap<u64, Weak<segment::RemoteInner>>>,
}

impl Dispatch {
    /// The node daemon is gone: every remote segment of the descriptor is lost (as its node
    /// would be), and waits for local segment events end (`Cancelled`).
    fn daemon_gone(&self) {
        let remotes: Vec<_> = self
            .remotes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for inner in remotes {
            segment::RemoteSegment::from_inner(inner)
                .deliver(RemoteEvent { reason: SegmentReason::Lost, status: Some(Error::NodeNotResponding) });
        }
        let locals: Vec<_> = self
            .locals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for inner in locals {
            segment::LocalSegment::from_inner(inner).cancel_events();
        }
    }

    pub(crate) fn deliver(&self, ev: &Event) {
        if let Some((seg, e)) = local_event(ev) {
            let target =
                self.locals.lock().unwrap_or_else(|p| p.into_inner()).get(&seg).and_then(Weak::upgrade);
            if let Some(inner) = target {
                segment::LocalSegment::from_inner(inner).deliver(e);
            }
            return;
        }
        match *ev {
            Event::ConnectionLink { conn, operational } => {
                let reason =
                    if operational { SegmentReason::Operational } else { SegmentReason::NotOperational };
                self.remote(conn, reason, None)
            }
            Event::SegmentEventsOn { seg } => {
                let target =
                    self.locals.lock().unwrap_or_else(|p| p.into_inner()).get(&seg).and_then(Weak::upgrade);
                if let Some(inner) = target {
                    segment::LocalSegment::from_inner(inner).events_on();
                }
            }
            Event::SegmentUnavailable { conn } => self.remote(conn, SegmentReason::Disconnect, None),
            // A local segment's: delivered above.
            Event::SegmentConnected { .. }
            | Event::SegmentDisconnected { .. }
            | Event::SegmentLink { .. }
            | Event::SegmentLost { .. } => {}
            Event::GroupLeg { conn, leg, joined } => broadcast::on_leg(conn, leg, joined),
            Event::ConnectionLost { conn, reason } => match reason {
                LostReason::ForcedDisconnect => {
                    self.remote(conn, SegmentReason::Disconnect, Some(Error::NotConnected))
                }
                LostReason::OwnerGone | LostReason::NodeGone => {
                    self.remote(conn, SegmentReason::Lost, Some(Error::NodeNotResponding))
                }
            },
        }
    }

    fn remote(&self, conn: u64, reason: SegmentReason, status: Option<Error>) {
        let target =
            self.remotes.lock().unwrap_or_else(|p| p.into_inner()).get(&conn).and_then(Weak::upgrade);
        if let Some(inner) = target {
            segment::RemoteSegment::from_inner(inner).deliver(RemoteEvent { reason, status });
        }
    }
}

/// The local segment `ev` is about and the event as its waits and callbacks see it; `None`
/// for an event of anything else.
pub(crate) fn local_event(ev: &Event) -> Option<(u64, LocalEvent)> {
    let (seg, node, reason) = match *ev {
        Event::SegmentConnected { seg, node } => (seg, node, SegmentReason::Connect),
        Event::SegmentDisconnected { seg, node } => (seg, node, SegmentReason::Disconnect),
        Event::SegmentLink { seg, node, operational: true } => (seg, node, SegmentReason::Operational),
        Event::SegmentLink { seg, node, operational: false } => (seg, node, SegmentReason::NotOperational),
        Event::SegmentLost { seg, node } => (seg, node, SegmentReason::Lost),
        _ => return None,
    };
    Some((seg, LocalEvent { reason, node, adapter: ADAPTER }))
}

#[derive(Debug)]
pub(crate) struct DescInner {
    pub(crate) session: Arc<Session>,
    pub(crate) cfg: Config,
    pub(crate) node: u32,
    pub(crate) deps: Arc<Deps>,
    pub(crate) closed: AtomicBool,
    pub(crate) next_map: AtomicU64,
    pub(crate) dispatch: Arc<Dispatch>,
    /// The sessions of the DSM pager's requests for this descriptor's maps of other hosts'
    /// memory, one per home node (`segment_map.rs`, `pager_session`): each opened at the
    /// first map of its home and kept with the descriptor, so a map costs no session of its
    /// own, and a home that does not answer holds up no other home's requests.
    pub(crate) pager: std::sync::Mutex<Vec<(u32, Arc<Session>)>>,
}

/// A virtual device (`SCIOpen`): one session with the node daemon.
#[derive(Debug, Clone)]
pub struct Descriptor {
    pub(crate) inner: Arc<DescInner>,
}

impl Descriptor {
    /// Whether segments, connections, maps, queues or interrupts made through it exist
    /// (`SCIClose` of a busy descriptor tears them down first, as Dolphin's library does).
    pub fn is_busy(&self) -> bool {
        self.inner.deps.busy()
    }

    /// Whether `other` is this descriptor (a clone of it).
    pub fn same_as(&self, other: &Descriptor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// `SCIOpen`: open a session with the node daemon, starting it if none runs.
    ///
    /// # Errors
    /// [`Error::System`] when no daemon runs and none could be started.
    pub fn open(sci: &Sisci) -> Result<Descriptor> {
        let session = Arc::new(Session::open(&sci.cfg)?);
        let dispatch = Arc::new(Dispatch::default());
        let d = Arc::downgrade(&dispatch);
        session.set_event_sink(Arc::new(move |ev| {
            if let Some(d) = d.upgrade() {
                d.deliver(ev);
            }
        }));
        let d = Arc::downgrade(&dispatch);
        session.on_daemon_gone(Arc::new(move || {
            if let Some(d) = d.upgrade() {
                d.daemon_gone();
            }
        }));
        Ok(Descriptor {
            inner: Arc::new(DescInner {
                node: session.node(),
                session,
                cfg: sci.cfg.clone(),
                deps: Arc::default(),
                closed: AtomicBool::new(false),
                next_map: AtomicU64::new(1),
                dispatch,
                pager: std::sync::Mutex::new(Vec::new()),
            }),
        })
    }

    /// `SCIClose`.
    ///
    /// # Errors
    /// [`Error::Busy`] while segments, connections, maps, queues or interrupts made through
    /// it exist; [`Error::IllegalOperation`] when already closed.
    pub fn close(&self) -> Result<()> {
        if self.inner.deps.busy() {
            return Err(Error::Busy);
        }
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Err(Error::IllegalOperation);
        }
        Ok(())
    }

    pub(crate) fn live(&self) -> Result<&DescInner> {
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
    /// [`Error::NoSuchAdapter`] for an adapter other than 0; [`Error::NoSuchNode`] when no
    /// link reaches the node (not of this host, not in the cluster);
    /// [`Error::NodeNotResponding`] when it is reachable but does not answer.
    pub fn probe_node(&self, adapter: u32, node: u32) -> Result<bool> {
        check_adapter(adapter)?;
        match self.live()?.session.request(Request::Probe { node }, &[])?.0 {
            Reply::Probe { reachable: true } => Ok(true),
            // An older daemon's answer for a node it cannot reach.
            Reply::Probe { reachable: false } => Err(Error::NoSuchNode),
            other => Err(Error::System(format!("unexpected reply {other:?}"))),
        }
    }

    pub(crate) fn session(&self) -> &Arc<Session> {
        &self.inner.session
    }

    /// The descriptor's session with its node daemon, for tests that speak the protocol
    /// directly (bad input, raw requests). Not part of the SISCI API.
    #[doc(hidden)]
    pub fn raw_session(&self) -> &Arc<Session> {
        &self.inner.session
    }
}

pub(crate) fn check_adapter(adapter: u32) -> Result<()> {
    if adapter == ADAPTER {
        Ok(())
    } else {
        Err(Error::NoSuchAdapter)
    }
}

pub(crate) fn timeout_ms(timeout: Option<Duration>) -> Option<u32> {
    timeout.map(|t| t.as_millis().min(u32::MAX as u128 - 1) as u32)
}
