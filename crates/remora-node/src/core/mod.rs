//! The node's bookkeeping: segments, connections, sessions and maps, with every rule that
//! does not need to wait. Kept synchronous (behind one mutex, never held across an await)
//! so each rule is a plain function that is easy to test.

pub mod transfer;

use remora_proto::{
    ConnectionStatus, Error, Event, LostReason, MapStatus, MapTarget, NodeStatus, Role, SegmentStatus,
    SessionStatus,
};
use remora_sys::dma::{DmaPage, DMA_ERR_NOT_CONNECTED, DMA_ERR_NOT_PREPARED};
use remora_sys::intr::IntrPage;
use remora_sys::sync::EventFd;
use remora_sys::{AsFd, Mapping, Memfd};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// The first id handed out for `SCI_FLAG_AUTO_ID`; applications pick small ids.
pub const AUTO_ID_BASE: u32 = 0x4000_0000;
/// The first number handed out for interrupts without `SCI_FLAG_FIXED_INTNO`.
pub const AUTO_INTNO_BASE: u32 = 0x4000_0000;
/// The only adapter a Remora node has.
pub const ADAPTER: u32 = 0;

/// A local segment.
#[derive(Debug)]
pub struct Segment {
    /// Handle.
    pub seg: u64,
    /// Id; `None` for private segments.
    pub id: Option<u32>,
    /// Size in bytes.
    pub size: u64,
    /// Owning session (0 after removal).
    pub owner: u64,
    /// Memory; `None` while an empty segment waits for `AttachMemory`, and after removal.
    pub memfd: Option<Memfd>,
    /// Prepared on the adapter.
    pub prepared: bool,
    /// Available for connections.
    pub available: bool,
    /// Created private.
    pub private: bool,
    /// Shared for attach.
    pub shared: bool,
    /// Removed by its owner; kept while importers remain.
    pub removed: bool,
    /// Sessions that attached it.
    pub attached: BTreeSet<u64>,
    /// Connections importing it.
    pub importers: BTreeSet<u64>,
    /// The DMA engine's view of the memory, made on first use.
    pub dma_map: Option<Arc<Mapping>>,
}

/// What a connection reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnKind {
    /// A segment of this node.
    Local {
        /// Segment handle.
        seg: u64,
    },
    /// A segment of another node through a transport that shares memory (this host).
    Proxied {
        /// The other daemon's connection handle.
        remote: u64,
    },
    /// A segment of another node through a transport that moves bytes (another host).
    Remote {
        /// The other daemon's connection handle.
        remote: u64,
    },
}

impl ConnKind {
    /// The other daemon's handle, for connections that go through another daemon.
    pub fn remote(&self) -> Option<u64> {
        match *self {
            ConnKind::Proxied { remote } | ConnKind::Remote { remote } => Some(remote),
            ConnKind::Local { .. } => None,
        }
    }
}

/// Where the DMA engine finds a connection's memory.
#[derive(Debug, Clone)]
pub enum DmaTarget {
    /// Mapped here (this host's memory).
    Map(Arc<Mapping>),
    /// Memory of another node that a transport moves bytes to and from.
    Far {
        /// The node.
        node: u32,
        /// Its connection handle.
        remote: u64,
        /// The segment's size.
        size: u64,
    },
}

/// A connection held by a session of this node.
#[derive(Debug)]
pub struct Connection {
    /// Handle.
    pub conn: u64,
    /// The session that holds it.
    pub session: u64,
    /// The node that owns the segment.
    pub node: u32,
    /// The node of the importer (differs from ours for peer sessions).
    pub importer_node: u32,
    /// Segment id.
    pub id: u32,
    /// Size.
    pub size: u64,
    /// Where it goes.
    pub kind: ConnKind,
    /// Not lost.
    pub alive: bool,
    /// The segment's memory (a duplicate), for the DMA engine.
    pub memfd: Option<Memfd>,
    /// The DMA engine's view of the memory, made on first use.
    pub dma_map: Option<Arc<Mapping>>,
}

/// An interrupt created on this node.
#[derive(Debug)]
pub struct Interrupt {
    /// Handle.
    pub intr: u64,
    /// Number.
    pub intno: u32,
    /// A data interrupt.
    pub data: bool,
    /// Owning session.
    pub owner: u64,
    /// The shared page.
    pub memfd: Memfd,
    /// The wake-up eventfd.
    pub event: EventFd,
    /// The daemon's own view of the page (to mark it removed).
    pub page: IntrPage,
    /// Connections to it.
    pub conns: BTreeSet<u64>,
}

/// The processes that created one shared interrupt number (`SCI_FLAG_SHARED_INT`).
/// Connections point at `fanout`, an interrupt of the daemon's own whose triggers the
/// daemon passes on to every member.
#[derive(Debug)]
pub struct SharedGroup {
    /// The daemon's interrupt that connections trigger.
    pub fanout: u64,
    /// The members' interrupts.
    pub members: BTreeSet<u64>,
}

/// A session's connection to an interrupt.
#[derive(Debug)]
pub struct IntrConn {
    /// The session.
    pub session: u64,
    /// The owning node.
    pub node: u32,
    /// The number.
    pub intno: u32,
    /// A data interrupt.
    pub data: bool,
    /// The interrupt handle on this node, or the other daemon's connection handle.
    pub target: ConnKind,
}

/// A DMA queue served by this node's engine.
#[derive(Debug)]
pub struct DmaQueue {
    /// Owning session.
    pub owner: u64,
    /// The shared page.
    pub page: Arc<DmaPage>,
    /// Capacity.
    pub max: u32,
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
    ids: HashMap<u32, u64>,
    /// Connections by handle.
    pub conns: BTreeMap<u64, Connection>,
    /// Sessions by number.
    pub sessions: BTreeMap<u64, Session>,
    maps: BTreeMap<(u64, u64), MapStatus>,
    /// Interrupts by handle.
    pub interrupts: BTreeMap<u64, Interrupt>,
    intnos: HashMap<(bool, u32), u64>,
    /// Interrupt connections by handle.
    pub intr_conns: BTreeMap<u64, IntrConn>,
    /// DMA queues by handle.
    pub dma: BTreeMap<u64, DmaQueue>,
    /// Bumped whenever memory may stop being usable by the DMA engine (disconnect, loss,
    /// removal, session end), so engine workers can cache what they resolved until then.
    pub epoch: Arc<std::sync::atomic::AtomicU64>,
    /// Shared interrupt numbers, by number.
    pub shared_ints: HashMap<u32, SharedGroup>,
}

fn adapter(a: u32) -> Result<(), Error> {
    if a == ADAPTER {
        Ok(())
    } else {
        Err(Error::NoSuchAdapter)
    }
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
            intr_conns: BTreeMap::new(),
            dma: BTreeMap::new(),
            epoch: Arc::default(),
            shared_ints: HashMap::new(),
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

    /// `SCICreateSegment`.
    ///
    /// # Errors
    /// `SegmentIdUsed`, `NoSpace` (memfd creation failed or no free auto id),
    /// `IllegalParameter` for a zero size of a non-empty segment.
    pub fn create_segment(
        &mut self,
        session: u64,
        id: Option<u32>,
        size: u64,
        private: bool,
        empty: bool,
    ) -> Result<&Segment, Error> {
        if size == 0 && !empty {
            return Err(Error::IllegalParameter("segment size 0".into()));
        }
        let id = if private {
            None
        } else {
            match id {
                Some(id) if self.ids.contains_key(&id) => return Err(Error::SegmentIdUsed),
                Some(id) => Some(id),
                None => Some(
                    (AUTO_ID_BASE..=u32::MAX).find(|i| !self.ids.contains_key(i)).ok_or(Error::NoSpace)?,
                ),
            }
        };
        let memfd = if empty {
            None
        } else {
            let name =
                format!("n{}-s{}", self.node, id.map(|i| i.to_string()).unwrap_or_else(|| "private".into()));
            Some(Memfd::create(&name, size).map_err(|e| {
                if e.raw_os_error() == Some(12) {
                    Error::NoSpace
                } else {
                    Error::System(e.to_string())
                }
            })?)
        };
        let seg = self.handle();
        if let Some(id) = id {
            self.ids.insert(id, seg);
        }
        self.segments.insert(
            seg,
            Segment {
                seg,
                id,
                size,
                owner: session,
                memfd,
                prepared: false,
                available: false,
                private,
                shared: false,
                removed: false,
                attached: BTreeSet::new(),
                importers: BTreeSet::new(),
                dma_map: None,
            },
        );
        Ok(&self.segments[&seg])
    }

    fn own_segment(&mut self, session: u64, seg: u64) -> Result<&mut Segment, Error> {
        match self.segments.get_mut(&seg) {
            Some(s) if !s.removed && (s.owner == session || s.attached.contains(&session)) => Ok(s),
            _ => Err(Error::UnknownHandle),
        }
    }

    /// `SCIRegisterSegmentMemory`: give an empty segment its memory.
    ///
    /// # Errors
    /// `UnknownHandle`, `IllegalOperation` when the segment already has memory.
    pub fn attach_memory(&mut self, session: u64, seg: u64, memfd: Memfd) -> Result<u64, Error> {
        let s = self.own_segment(session, seg)?;
        if s.memfd.is_some() {
            return Err(Error::IllegalOperation);
        }
        s.size = memfd.size();
        s.memfd = Some(memfd);
        Ok(s.size)
    }

    /// `SCIPrepareSegment`.
    ///
    /// # Errors
    /// `UnknownHandle`, `NoSuchAdapter`, `IllegalOperation` for a segment without memory.
    pub fn prepare(&mut self, session: u64, seg: u64, a: u32) -> Result<(), Error> {
        let s = self.own_segment(session, seg)?;
        adapter(a)?;
        if s.memfd.is_none() {
            return Err(Error::IllegalOperation);
        }
        s.prepared = true;
        Ok(())
    }

    /// `SCISetSegmentAvailable`.
    ///
    /// # Errors
    /// `UnknownHandle`, `NoSuchAdapter`, `NotPrepared`, `IllegalOperation` for private ones.
    pub fn set_available(&mut self, session: u64, seg: u64, a: u32) -> Result<(), Error> {
        let s = self.own_segment(session, seg)?;
        adapter(a)?;
        if s.private {
            return Err(Error::IllegalOperation);
        }
        if !s.prepared {
            return Err(Error::NotPrepared);
        }
        s.available = true;
        Ok(())
    }

    /// `SCISetSegmentUnavailable`.
    ///
    /// # Errors
    /// `UnknownHandle`, `NoSuchAdapter`, `IllegalOperation` when not available.
    pub fn set_unavailable(
        &mut self,
        session: u64,
        seg: u64,
        a: u32,
        force: bool,
        notify: bool,
    ) -> Result<(), Error> {
        self.revoke();
        let s = self.own_segment(session, seg)?;
        adapter(a)?;
        if !s.available {
            return Err(Error::IllegalOperation);
        }
        s.available = false;
        let importers: Vec<u64> = if force {
            std::mem::take(&mut s.importers).into_iter().collect()
        } else {
            s.importers.iter().copied().collect()
        };
        for c in importers {
            let Some(conn) = self.conns.get_mut(&c) else {
                continue;
            };
            let sess = conn.session;
            if force {
                conn.alive = false;
                self.tell(sess, Event::ConnectionLost { conn: c, reason: LostReason::ForcedDisconnect });
            } else if notify {
                self.tell(sess, Event::SegmentUnavailable { conn: c });
            }
        }
        Ok(())
    }

    /// `SCIShareSegment`.
    ///
    /// # Errors
    /// `UnknownHandle`; `IllegalOperation` for private segments.
    pub fn share(&mut self, session: u64, seg: u64) -> Result<(), Error> {
        let s = self.own_segment(session, seg)?;
        if s.private {
            return Err(Error::IllegalOperation);
        }
        s.shared = true;
        Ok(())
    }

    /// `SCIAttachLocalSegment`.
    ///
    /// # Errors
    /// `NoSuchSegment`; `Access` when the segment is not shared.
    pub fn attach_shared(&mut self, session: u64, id: u32) -> Result<&Segment, Error> {
        let seg = *self.ids.get(&id).ok_or(Error::NoSuchSegment)?;
        let s = self.segments.get_mut(&seg).ok_or(Error::NoSuchSegment)?;
        if !s.shared || s.memfd.is_none() {
            return Err(Error::Access);
        }
        if s.owner != session {
            s.attached.insert(session);
        }
        Ok(&self.segments[&seg])
    }

    /// `SCIRemoveSegment`: the owner removes (the id is free at once; the memory lives on
    /// in the importers' mappings); an attacher detaches.
    ///
    /// # Errors
    /// `UnknownHandle`; `Busy` while other processes have it attached, unless `force`
    /// (`SCI_FLAG_FORCE_REMOVE`): then it goes all the same.
    pub fn remove_segment(&mut self, session: u64, seg: u64, force: bool) -> Result<(), Error> {
        self.revoke();
        let s = self.own_segment(session, seg)?;
        if s.owner != session {
            s.attached.remove(&session);
            return Ok(());
        }
        if !s.attached.is_empty() {
            if !force {
                return Err(Error::Busy);
            }
            s.attached.clear();
        }
        self.retire(seg, None);
        Ok(())
    }

    /// Take a segment out of use: free its id, drop the daemon's memory reference, and
    /// (when its owner died) tell the importers.
    fn retire(&mut self, seg: u64, lost: Option<LostReason>) {
        self.revoke();
        let Some(s) = self.segments.get_mut(&seg) else {
            return;
        };
        if let Some(id) = s.id {
            if self.ids.get(&id) == Some(&seg) {
                self.ids.remove(&id);
            }
        }
        s.removed = true;
        s.available = false;
        s.owner = 0;
        s.memfd = None;
        let importers: Vec<u64> = s.importers.iter().copied().collect();
        if importers.is_empty() {
            self.segments.remove(&seg);
        }
        if let Some(reason) = lost {
            for c in importers {
                if let Some(conn) = self.conns.get_mut(&c) {
                    conn.alive = false;
                    let sess = conn.session;
                    self.tell(sess, Event::ConnectionLost { conn: c, reason });
                }
            }
        }
    }

    /// Try to connect `session` to segment `id` of this node.
    ///
    /// # Errors
    /// `NoSuchSegment` while no segment has the id, `NotAvailable`-like `Timeout`
    /// is decided by the caller; `ConnectionRefused` is reported as `Access` for private.
    pub fn connect_local(
        &mut self,
        session: u64,
        importer_node: u32,
        id: u32,
    ) -> Result<(u64, u64, Memfd), ConnectWait> {
        let seg = *self.ids.get(&id).ok_or(ConnectWait::Missing)?;
        let s = self.segments.get_mut(&seg).ok_or(ConnectWait::Missing)?;
        if !s.available {
            return Err(ConnectWait::Unavailable);
        }
        let Some(memfd) = s.memfd.as_ref() else {
            return Err(ConnectWait::Unavailable);
        };
        let fd = memfd.try_clone().map_err(|e| ConnectWait::Failed(Error::System(e.to_string())))?;
        let keep = memfd.try_clone().map_err(|e| ConnectWait::Failed(Error::System(e.to_string())))?;
        let size = s.size;
        let owner = s.owner;
        let conn = self.next;
        self.next += 1;
        s.importers.insert(conn);
        self.conns.insert(
            conn,
            Connection {
                conn,
                session,
                node: self.node,
                importer_node,
                id,
                size,
                kind: ConnKind::Local { seg },
                alive: true,
                memfd: Some(keep),
                dma_map: None,
            },
        );
        self.tell(owner, Event::SegmentConnected { seg, node: importer_node });
        Ok((conn, size, fd))
    }

    /// Record a connection to another node's segment made through a proxy.
    pub fn add_proxied(
        &mut self,
        session: u64,
        node: u32,
        id: u32,
        size: u64,
        remote: u64,
        memfd: Option<Memfd>,
    ) -> u64 {
        let kind = if memfd.is_some() { ConnKind::Proxied { remote } } else { ConnKind::Remote { remote } };
        let conn = self.handle();
        self.conns.insert(
            conn,
            Connection {
                conn,
                session,
                node,
                importer_node: self.node,
                id,
                size,
                kind,
                alive: true,
                memfd,
                dma_map: None,
            },
        );
        conn
    }

    /// `SCICreateInterrupt`: returns the handle, number, page memfd and eventfd.
    ///
    /// # Errors
    /// `IntnoUsed`; `NoSpace` when no number is free; `System` when the page cannot be made.
    pub fn create_interrupt(
        &mut self,
        session: u64,
        intno: Option<u32>,
        data: bool,
        shared: bool,
    ) -> Result<(u64, u32, OwnedFd, OwnedFd, Option<u64>), Error> {
        let shared = shared && !data;
        let intno = match intno {
            Some(n) if shared && self.shared_ints.contains_key(&n) => n,
            Some(n) if self.intnos.contains_key(&(data, n)) => return Err(Error::IntnoUsed),
            Some(n) => n,
            None => (AUTO_INTNO_BASE..=u32::MAX)
                .find(|n| !self.intnos.contains_key(&(data, *n)))
                .ok_or(Error::NoSpace)?,
        };
        let mut new_fanout = None;
        if shared && !self.shared_ints.contains_key(&intno) {
            // The first sharer: the number names the daemon's fan-out interrupt, whose
            // page is armed so that every trigger signals its eventfd.
            let fanout = self.new_interrupt(0, intno, false)?;
            if let Some(f) = self.interrupts.get(&fanout) {
                f.page.set_armed(true);
            }
            self.intnos.insert((false, intno), fanout);
            self.shared_ints.insert(intno, SharedGroup { fanout, members: BTreeSet::new() });
            new_fanout = Some(fanout);
        }
        let intr = self.new_interrupt(session, intno, data)?;
        if shared {
            self.shared_ints.get_mut(&intno).expect("made above").members.insert(intr);
        } else {
            self.intnos.insert((data, intno), intr);
        }
        let i = &self.interrupts[&intr];
        let sys = |e: std::io::Error| Error::System(e.to_string());
        let fds = (i.memfd.try_clone().map_err(sys)?.into_fd(), i.event.try_clone().map_err(sys)?.into_fd());
        Ok((intr, intno, fds.0, fds.1, new_fanout))
    }

    /// A new interrupt page for `owner` (0: the daemon), not yet numbered in `intnos`.
    fn new_interrupt(&mut self, owner: u64, intno: u32, data: bool) -> Result<u64, Error> {
        let sys = |e: std::io::Error| Error::System(e.to_string());
        let memfd = IntrPage::create(&format!("n{}-intr{}", self.node, intno)).map_err(sys)?;
        let event = EventFd::new().map_err(sys)?;
        let page = IntrPage::open(&memfd, event.try_clone().map_err(sys)?).map_err(sys)?;
        let intr = self.handle();
        self.interrupts
            .insert(intr, Interrupt { intr, intno, data, owner, memfd, event, page, conns: BTreeSet::new() });
        Ok(intr)
    }

    /// Pass `n` triggers of shared number `intno`'s fan-out on to every member. `false`
    /// when the group is gone.
    pub fn fan_out(&self, intno: u32, fanout: u64, n: u32) -> bool {
        let Some(g) = self.shared_ints.get(&intno).filter(|g| g.fanout == fanout) else { return false };
        for m in &g.members {
            if let Some(i) = self.interrupts.get(m) {
                for _ in 0..n.min(64) {
                    let _ = i.page.trigger();
                }
            }
        }
        true
    }

    /// `SCIRemoveInterrupt`: waiters wake with "cancelled", triggers fail from now on.
    ///
    /// # Errors
    /// `UnknownHandle`.
    pub fn remove_interrupt(&mut self, session: u64, intr: u64) -> Result<(), Error> {
        match self.interrupts.get(&intr) {
            Some(i) if i.owner == session => {}
            _ => return Err(Error::UnknownHandle),
        }
        let i = self.interrupts.remove(&intr).expect("checked");
        i.page.remove();
        match self.shared_ints.get_mut(&i.intno).filter(|g| g.members.contains(&intr)) {
            Some(g) => {
                g.members.remove(&intr);
                if g.members.is_empty() {
                    let fanout = g.fanout;
                    self.shared_ints.remove(&i.intno);
                    if let Some(f) = self.interrupts.remove(&fanout) {
                        f.page.remove();
                    }
                    self.intnos.remove(&(false, i.intno));
                }
            }
            None => {
                self.intnos.remove(&(i.data, i.intno));
            }
        }
        Ok(())
    }

    /// Connect `session` to interrupt `intno` of this node.
    pub fn connect_interrupt(
        &mut self,
        session: u64,
        importer_node: u32,
        intno: u32,
        data: bool,
    ) -> Result<(u64, OwnedFd, OwnedFd), ConnectWait> {
        let h = *self.intnos.get(&(data, intno)).ok_or(ConnectWait::Missing)?;
        let sys = |e: std::io::Error| ConnectWait::Failed(Error::System(e.to_string()));
        let i = self.interrupts.get(&h).ok_or(ConnectWait::Missing)?;
        let fds = (i.memfd.try_clone().map_err(sys)?.into_fd(), i.event.try_clone().map_err(sys)?.into_fd());
        let conn = self.handle();
        self.interrupts.get_mut(&h).expect("present").conns.insert(conn);
        self.intr_conns.insert(
            conn,
            IntrConn { session, node: importer_node, intno, data, target: ConnKind::Local { seg: h } },
        );
        Ok((conn, fds.0, fds.1))
    }

    /// Record an interrupt connection made through a proxy.
    pub fn add_proxied_interrupt(
        &mut self,
        session: u64,
        node: u32,
        intno: u32,
        data: bool,
        remote: u64,
        moves_bytes: bool,
    ) -> u64 {
        let conn = self.handle();
        let target = if moves_bytes { ConnKind::Remote { remote } } else { ConnKind::Proxied { remote } };
        self.intr_conns.insert(conn, IntrConn { session, node, intno, data, target });
        conn
    }

    /// Trigger interrupt connection `conn` of `session` (a connection to an interrupt of
    /// this node), with a payload for data interrupts.
    ///
    /// # Errors
    /// `UnknownHandle`; `NoSuchIntno` when the interrupt was removed; `NoSpace` when a
    /// data interrupt's queue is full; `IllegalParameter` for a payload too long.
    pub fn trigger_interrupt(&mut self, session: u64, conn: u64, data: Option<&[u8]>) -> Result<(), Error> {
        let c = match self.intr_conns.get(&conn) {
            Some(c) if c.session == session => c,
            _ => return Err(Error::UnknownHandle),
        };
        let ConnKind::Local { seg: h } = c.target else { return Err(Error::UnknownHandle) };
        let i = self.interrupts.get(&h).ok_or(Error::NoSuchIntno)?;
        if i.owner == 0 && !i.data && !i.page.is_removed() && self.fan_out(i.intno, h, 1) {
            // A shared number: every member hears it.
            return Ok(());
        }
        let r = match data {
            Some(d) => i.page.send(d),
            None => i.page.trigger(),
        };
        r.map_err(|e| match e {
            remora_sys::intr::TriggerError::Removed => Error::NoSuchIntno,
            remora_sys::intr::TriggerError::Full => Error::NoSpace,
            remora_sys::intr::TriggerError::TooLong => {
                Error::IllegalParameter("data interrupt payload too long".into())
            }
        })
    }

    /// `SCIDisconnectInterrupt`: returns the connection's target.
    ///
    /// # Errors
    /// `UnknownHandle`.
    pub fn disconnect_interrupt(&mut self, session: u64, conn: u64) -> Result<IntrConn, Error> {
        match self.intr_conns.get(&conn) {
            Some(c) if c.session == session => {}
            _ => return Err(Error::UnknownHandle),
        }
        let c = self.intr_conns.remove(&conn).expect("checked");
        if let ConnKind::Local { seg: h } = c.target {
            if let Some(i) = self.interrupts.get_mut(&h) {
                i.conns.remove(&conn);
            }
        }
        Ok(c)
    }

    /// Register a DMA queue and return its handle.
    pub fn add_dma(&mut self, session: u64, page: Arc<DmaPage>, max: u32) -> u64 {
        let q = self.handle();
        self.dma.insert(q, DmaQueue { owner: session, page, max });
        q
    }

    /// `SCIRemoveDMAQueue`: the engine stops serving it.
    ///
    /// # Errors
    /// `UnknownHandle`.
    pub fn remove_dma(&mut self, session: u64, queue: u64) -> Result<(), Error> {
        match self.dma.get(&queue) {
            Some(q) if q.owner == session => {}
            _ => return Err(Error::UnknownHandle),
        }
        self.dma.remove(&queue).expect("checked").page.close();
        Ok(())
    }

    /// The DMA engine's mapping of a local segment `session` may use: owned or attached,
    /// prepared, with memory. Errors are `DMA_ERR_*` codes.
    pub fn dma_local(&mut self, session: u64, seg: u64) -> Result<Arc<Mapping>, u32> {
        let mine = |o: u64, r: &Registry| r.same_process(o, session);
        let ok = match self.segments.get(&seg) {
            Some(s) => !s.removed && (mine(s.owner, self) || s.attached.iter().any(|a| mine(*a, self))),
            None => false,
        };
        let s = match self.segments.get_mut(&seg) {
            Some(s) if ok => s,
            _ => return Err(DMA_ERR_NOT_PREPARED),
        };
        if !s.prepared {
            return Err(DMA_ERR_NOT_PREPARED);
        }
        if s.dma_map.is_none() {
            let m = s.memfd.as_ref().ok_or(DMA_ERR_NOT_PREPARED)?;
            let map = Mapping::new(m.as_fd(), 0, s.size as usize, Default::default())
                .map_err(|_| DMA_ERR_NOT_PREPARED)?;
            s.dma_map = Some(Arc::new(map));
        }
        Ok(s.dma_map.clone().expect("made above"))
    }

    /// The DMA engine's mapping of a connection of `session` that is alive.
    pub fn dma_remote(&mut self, session: u64, conn: u64) -> Result<DmaTarget, u32> {
        let ok = self.conns.get(&conn).is_some_and(|c| c.alive && self.same_process(c.session, session));
        let c = match self.conns.get_mut(&conn) {
            Some(c) if ok => c,
            _ => return Err(DMA_ERR_NOT_CONNECTED),
        };
        if let ConnKind::Remote { remote } = c.kind {
            return Ok(DmaTarget::Far { node: c.node, remote, size: c.size });
        }
        if c.dma_map.is_none() {
            let m = c.memfd.as_ref().ok_or(DMA_ERR_NOT_CONNECTED)?;
            let map = Mapping::new(m.as_fd(), 0, c.size as usize, Default::default())
                .map_err(|_| DMA_ERR_NOT_CONNECTED)?;
            c.dma_map = Some(Arc::new(map));
        }
        Ok(DmaTarget::Map(c.dma_map.clone().expect("made above")))
    }

    /// `SCIDisconnectSegment`. Returns the connection's kind (a proxied one must also be
    /// disconnected at its node).
    ///
    /// # Errors
    /// `UnknownHandle`.
    pub fn disconnect(&mut self, session: u64, conn: u64) -> Result<(ConnKind, u32), Error> {
        self.revoke();
        match self.conns.get(&conn) {
            Some(c) if c.session == session => {}
            _ => return Err(Error::UnknownHandle),
        }
        let c = self.conns.remove(&conn).expect("checked above");
        self.maps.retain(|_, m| m.target != MapTarget::Remote { conn });
        if let ConnKind::Local { seg } = c.kind {
            if let Some(s) = self.segments.get_mut(&seg) {
                s.importers.remove(&conn);
                let owner = s.owner;
                if s.removed && s.importers.is_empty() {
                    self.segments.remove(&seg);
                } else {
                    self.tell(owner, Event::SegmentDisconnected { seg, node: c.importer_node });
                }
            }
        }
        Ok((c.kind, c.node))
    }

    /// Mark the proxied connections with these remote handles lost, and tell their sessions.
    pub fn lose_proxied(&mut self, session: u64, remote: &[u64], reason: LostReason) {
        self.revoke();
        let hit: Vec<u64> = self
            .conns
            .values()
            .filter(|c| c.session == session && c.kind.remote().is_some_and(|r| remote.contains(&r)))
            .map(|c| c.conn)
            .collect();
        for conn in hit {
            if let Some(c) = self.conns.get_mut(&conn) {
                if c.alive {
                    c.alive = false;
                    self.tell(session, Event::ConnectionLost { conn, reason });
                }
            }
        }
    }

    /// Mark every proxied connection of `session` to `node` lost, and tell the session.
    pub fn lose_node(&mut self, session: u64, node: u32, reason: LostReason) {
        let remotes: Vec<u64> = self
            .conns
            .values()
            .filter(|c| c.session == session && c.node == node)
            .filter_map(|c| c.kind.remote())
            .collect();
        self.lose_proxied(session, &remotes, reason);
    }

    /// The local handle of a proxied connection.
    pub fn local_of_remote(&self, session: u64, remote: u64) -> Option<u64> {
        self.conns.values().find(|c| c.session == session && c.kind.remote() == Some(remote)).map(|c| c.conn)
    }

    /// Record a map (bookkeeping only: the mapping itself is the process's).
    pub fn map_note(&mut self, session: u64, m: MapStatus) {
        self.maps.insert((session, m.map), MapStatus { session, ..m });
    }

    /// Forget a map.
    pub fn unmap_note(&mut self, session: u64, map: u64) {
        self.maps.remove(&(session, map));
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
mod tests {
    use super::*;
    use tokio::sync::mpsc::unbounded_channel;

    fn reg() -> (Registry, u64, u64, tokio::sync::mpsc::UnboundedReceiver<Event>) {
        let mut r = Registry::new(4);
        let (tx, _rx) = unbounded_channel();
        let a = r.add_session(1, Role::Client, tx);
        let (tx2, rx2) = unbounded_channel();
        let b = r.add_session(2, Role::Client, tx2);
        (r, a, b, rx2)
    }

    #[test]
    fn state_machine_and_ids() {
        let (mut r, a, b, mut rx) = reg();
        let seg = r.create_segment(a, Some(7), 4096, false, false).unwrap().seg;
        assert_eq!(r.create_segment(b, Some(7), 4096, false, false).unwrap_err(), Error::SegmentIdUsed);
        assert_eq!(r.set_available(a, seg, 0), Err(Error::NotPrepared));
        assert_eq!(r.set_unavailable(a, seg, 0, false, false), Err(Error::IllegalOperation));
        assert_eq!(r.prepare(a, seg, 1), Err(Error::NoSuchAdapter));
        assert_eq!(r.prepare(b, seg, 0), Err(Error::UnknownHandle));
        r.prepare(a, seg, 0).unwrap();
        assert!(matches!(r.connect_local(b, 4, 7), Err(ConnectWait::Unavailable)));
        r.set_available(a, seg, 0).unwrap();
        let (conn, size, _fd) = r.connect_local(b, 4, 7).unwrap();
        assert_eq!(size, 4096);
        r.remove_segment(a, seg, false).unwrap();
        // The id is free again while the importer still holds the memory.
        assert!(r.create_segment(a, Some(7), 8192, false, false).is_ok());
        assert_eq!(r.segments.values().filter(|s| s.removed).count(), 1);
        r.disconnect(b, conn).unwrap();
        assert_eq!(r.segments.values().filter(|s| s.removed).count(), 0);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn owner_death_frees_ids_and_tells_importers() {
        let (mut r, a, b, mut rx) = reg();
        let seg = r.create_segment(a, Some(1), 4096, false, false).unwrap().seg;
        r.prepare(a, seg, 0).unwrap();
        r.set_available(a, seg, 0).unwrap();
        let (conn, _, _) = r.connect_local(b, 8, 1).unwrap();
        r.end_session(a);
        assert!(
            matches!(rx.try_recv(), Ok(Event::ConnectionLost { conn: c, reason: LostReason::OwnerGone }) if c == conn)
        );
        assert!(r.create_segment(b, Some(1), 4096, false, false).is_ok());
        r.end_session(b);
        assert!(r.segments.is_empty() && r.conns.is_empty());
    }

    #[test]
    fn private_and_auto_ids() {
        let (mut r, a, _, _) = reg();
        let p = r.create_segment(a, Some(3), 4096, true, false).unwrap();
        assert_eq!(p.id, None);
        let p = p.seg;
        r.prepare(a, p, 0).unwrap();
        assert_eq!(r.set_available(a, p, 0), Err(Error::IllegalOperation));
        let x = r.create_segment(a, None, 4096, false, false).unwrap().id.unwrap();
        let y = r.create_segment(a, None, 4096, false, false).unwrap().id.unwrap();
        assert!(x >= AUTO_ID_BASE && y != x);
        let e = r.create_segment(a, Some(9), 0, false, true).unwrap().seg;
        assert_eq!(r.prepare(a, e, 0), Err(Error::IllegalOperation));
    }
}
