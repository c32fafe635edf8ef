//! The node core: the books every personality stands on — sessions, the memory regions
//! this node exports, connections of importers to exports (here or at other nodes),
//! notifiers (interrupts, with or without a payload), and transfers (DMA queues and the
//! engine that serves them) — with every rule that does not need to wait. Kept synchronous
//! (behind one mutex, never held across an await) so each rule is a plain function that is
//! easy to test.
//!
//! | file | nouns |
//! | --- | --- |
//! | `mod.rs` | the books ([`Registry`]), sessions, status |
//! | `exports.rs` | regions exported as segments: ids, states, attach, removal |
//! | `connections.rs` | connections to exports of this or another node; maps |
//! | `groups.rs` | reflective-memory groups: members sharing one memfd, multicast connections |
//! | `notifiers.rs` | interrupts and data interrupts, shared numbers |
//! | `transfer.rs` | DMA queues and the engine's worker threads |

mod connections;
mod exports;
pub mod groups;
mod notifiers;
pub mod transfer;

pub use connections::{ConnKind, Connection, DmaTarget};
pub use exports::Segment;
pub use notifiers::{BackFlowEntry, Interrupt, IntrConn, OwnerFlowEntry, SharedBooking, SharedGroup};
pub use transfer::DmaQueue;

use remora_proto::{
    ConnectionStatus, Error, Event, LostReason, MapStatus, NodeStatus, Role, SegmentStatus, SessionStatus,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// The first id handed out for `SCI_FLAG_AUTO_ID`; applications pick small ids.
pub const AUTO_ID_BASE: u32 = 0x4000_0000;
/// The first number handed out for interrupts without `SCI_FLAG_FIXED_INTNO`.
pub const AUTO_INTNO_BASE: u32 = 0x4000_0000;
/// The only adapter a Remora node has.
pub const ADAPTER: u32 = 0;

/// Whose ids name a segment: SISCI and RSM ids are separate spaces (segment 5 of SISCI
/// and segment 5 of RSM are different segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdSpace {
    /// `SCICreateSegment` ids.
    Sisci,
    /// `rsm_memseg_export_publish` ids.
    Rsm,
}

/// A session.
#[derive(Debug)]
pub struct Session {
    /// Process id of the peer.
    pub pid: u32,
    /// Role.
    pub role: Role,
    /// Where events for it go.
    pub events: UnboundedSender<Event>,
}

/// The registry.
#[derive(Debug)]
pub struct Registry {
    /// This node.
    pub node: u32,
    next: u64,
    /// Segments by handle.
    pub segments: BTreeMap<u64, Segment>,
    ids: HashMap<(IdSpace, u32), u64>,
    /// Connections by handle.
    pub conns: BTreeMap<u64, Connection>,
    /// Sessions by number.
    pub sessions: BTreeMap<u64, Session>,
    maps: BTreeMap<(u64, u64), MapStatus>,
    /// Interrupts by handle.
    pub interrupts: BTreeMap<u64, Interrupt>,
    intnos: HashMap<(bool, u32), u64>,
    /// Where the search for the next automatic interrupt number starts (`notifiers.rs`).
    next_intno: u32,
    /// Where the search for the next automatic segment id starts (`exports.rs`).
    next_seg_id: u32,
    /// Interrupt connections by handle.
    pub intr_conns: BTreeMap<u64, IntrConn>,
    /// This node's duplicates of the plain interrupt flows its processes dialed, read for
    /// the triggers that come back on them (`notifiers/owned.rs`).
    pub back_flows: Vec<BackFlowEntry>,
    /// DMA queues by handle.
    pub dma: BTreeMap<u64, DmaQueue>,
    /// Bumped whenever memory may stop being usable by the DMA engine (disconnect, loss,
    /// removal, session end), so engine workers can cache what they resolved until then.
    pub epoch: Arc<std::sync::atomic::AtomicU64>,
    /// Shared interrupt numbers, by kind (data or not) and number.
    pub shared_ints: HashMap<(bool, u32), SharedGroup>,
    /// The connections to members on other hosts (legs) of each multicast connection
    /// whose group reaches beyond this host, released with it (`groups.rs`).
    pub group_legs: HashMap<u64, Vec<u64>>,
    /// What the legs reach, members still copying a group's contents, legs the processes
    /// put in their pagers (`groups.rs`).
    pub group_books: groups::GroupBooks,
}

impl Registry {
    /// An empty registry for `node`.
    pub fn new(node: u32) -> Registry {
        Registry {
            node,
            // Handles differ from one daemon start to the next, so a handle kept from a
            // previous instance never names a new object.
            next: (crate::new_incarnation() & 0xffff_ffff) << 24 | 1,
            segments: BTreeMap::new(),
            ids: HashMap::new(),
            conns: BTreeMap::new(),
            sessions: BTreeMap::new(),
            maps: BTreeMap::new(),
            interrupts: BTreeMap::new(),
            intnos: HashMap::new(),
            next_intno: AUTO_INTNO_BASE,
            next_seg_id: AUTO_ID_BASE,
            intr_conns: BTreeMap::new(),
            back_flows: Vec::new(),
            dma: BTreeMap::new(),
            epoch: Arc::default(),
            shared_ints: HashMap::new(),
            group_legs: HashMap::new(),
            group_books: groups::GroupBooks::default(),
        }
    }

    fn revoke(&self) {
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn handle(&mut self) -> u64 {
        let h = self.next;
        self.next += 1;
        h
    }

    /// Send `ev` to a session (dropped if it is gone).
    pub fn tell_session(&self, session: u64, ev: Event) {
        self.tell(session, ev)
    }

    fn tell(&self, session: u64, ev: Event) {
        if let Some(s) = self.sessions.get(&session) {
            let _ = s.events.send(ev);
        }
    }

    /// Whether two sessions belong to one process (a process may open several: one per
    /// SISCI descriptor), so that a DMA queue of one may use segments of another.
    pub fn same_process(&self, a: u64, b: u64) -> bool {
        a == b
            || matches!((self.sessions.get(&a), self.sessions.get(&b)),
                (Some(x), Some(y)) if x.pid == y.pid && x.pid != 0 && x.role == Role::Client && y.role == Role::Client)
    }

    /// Register a session and return its number.
    pub fn add_session(&mut self, pid: u32, role: Role, events: UnboundedSender<Event>) -> u64 {
        let sid = self.handle();
        self.sessions.insert(sid, Session { pid, role, events });
        sid
    }

    /// Sessions that hold resources or may (everything but control connections).
    pub fn active_sessions(&self) -> usize {
        self.sessions.values().filter(|s| s.role != Role::Control).count()
    }

    /// Release everything a session held. Returns the proxied connections it had, by node.
    pub fn end_session(&mut self, session: u64) {
        self.revoke();
        let conns: Vec<u64> = self.conns.values().filter(|c| c.session == session).map(|c| c.conn).collect();
        for c in conns {
            let _ = self.disconnect(session, c);
        }
        let owned: Vec<u64> = self.segments.values().filter(|s| s.owner == session).map(|s| s.seg).collect();
        for seg in owned {
            if let Some(s) = self.segments.get_mut(&seg) {
                if !s.attached.is_empty() {
                    // Hand ownership to the longest-attached process: the memory is shared.
                    let heir = *s.attached.iter().next().expect("non-empty");
                    s.attached.remove(&heir);
                    s.owner = heir;
                    // The heir gets every event from now on (it may have asked already,
                    // as an attacher, and will not ask again); what was kept was for the
                    // owner that is gone.
                    s.events = exports::OwnerEvents { wanted: true, kept: Default::default() };
                    continue;
                }
            }
            self.retire(seg, Some(LostReason::OwnerGone));
        }
        for s in self.segments.values_mut() {
            s.attached.remove(&session);
        }
        let ics: Vec<u64> =
            self.intr_conns.iter().filter(|(_, c)| c.session == session).map(|(k, _)| *k).collect();
        for c in ics {
            let _ = self.disconnect_interrupt(session, c);
        }
        let owned: Vec<u64> =
            self.interrupts.values().filter(|i| i.owner == session).map(|i| i.intr).collect();
        for i in owned {
            let _ = self.remove_interrupt(session, i);
        }
        let queues: Vec<u64> = self.dma.iter().filter(|(_, q)| q.owner == session).map(|(k, _)| *k).collect();
        for q in queues {
            let _ = self.remove_dma(session, q);
        }
        self.maps.retain(|(s, _), _| *s != session);
        self.sessions.remove(&session);
    }

    /// A snapshot for `remora status`.
    pub fn status(&self, pid: u32, auto_started: bool, uptime_s: u64) -> NodeStatus {
        NodeStatus {
            node: self.node,
            pid,
            auto_started,
            uptime_s,
            sessions: self
                .sessions
                .iter()
                .map(|(&session, s)| SessionStatus { session, pid: s.pid, role: s.role })
                .collect(),
            segments: self
                .segments
                .values()
                .map(|s| SegmentStatus {
                    seg: s.seg,
                    id: s.id,
                    size: s.size,
                    owner: s.owner,
                    state: if s.removed {
                        "removed"
                    } else if s.available {
                        "available"
                    } else if s.prepared {
                        "prepared"
                    } else {
                        "created"
                    }
                    .into(),
                    importers: s.importers.len() as u32,
                    shared: s.shared,
                })
                .collect(),
            connections: self
                .conns
                .values()
                .map(|c| ConnectionStatus {
                    conn: c.conn,
                    session: c.session,
                    node: c.node,
                    id: c.id,
                    size: c.size,
                    alive: c.alive,
                })
                .collect(),
            maps: self.maps.values().cloned().collect(),
            interrupts: self
                .interrupts
                .values()
                .map(|i| (i.owner, i.intno, i.data, i.conns.len() as u32))
                .collect(),
            dma_queues: self.dma.iter().map(|(h, q)| (q.owner, *h, q.max)).collect(),
            peers: Vec::new(),
            scif: (0, 0, 0),
            dma_bytes: 0,
            dma_jobs: 0,
        }
    }
}

/// Why a connect could not complete yet.
#[derive(Debug)]
pub enum ConnectWait {
    /// No segment has the id (yet).
    Missing,
    /// The segment exists but is not available (yet).
    Unavailable,
    /// A hard failure.
    Failed(Error),
}

#[cfg(test)]
mod tests;
