//! What the node does for its transports: it serves what peers send ([`Inbound`]).
//!
//! A peer's session is served here by a session of this node made for it (role `Peer`,
//! no process): what the peer's session connects to is held by that session, and released
//! when the peer says the session ended or the peer is lost. Requests of a personality go
//! to its module; link changes turn into the events the APIs promise.

use crate::core::{ConnKind, ConnectWait, DmaTarget, Registry};
use crate::session::wait_changes;
use crate::transport::{BoxFuture, FlowUse, Inbound, LinkState, PeerMemory, SharedFlow};

mod back_flow;
mod gave_up;
mod owner_flow;
use crate::Node;
pub(crate) use back_flow::serve as serve_back_flow;
use gave_up::{Made, Ticket};
use remora_proto::link::{PeerReply, PeerRequest, RangeRef, Space};
use remora_proto::{Error, Event, LostReason, Role};
use remora_sys::Mapping;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// The node's [`Inbound`] handler.
pub struct NodeInbound {
    node: Weak<Node>,
    /// Sessions made here for peers' sessions: (peer, its session) → ours.
    served: Mutex<HashMap<(u32, u64), u64>>,
    /// Peers' requests being served, and what served connects made (`gave_up.rs`).
    asked: gave_up::Book,
    /// Peers' sessions told ended here lately: a request of one that comes after its end
    /// (a disconnect re-sent on a new connection behind the end) is refused, not served by
    /// a new session that nothing would ever end (reviewer 88).
    ended: Mutex<Ended>,
}

/// The last [`ENDED_KEPT`] peers' sessions told ended, oldest first.
#[derive(Default)]
struct Ended {
    set: std::collections::HashSet<(u32, u64)>,
    order: std::collections::VecDeque<(u32, u64)>,
}

/// How many ended peers' sessions [`NodeInbound`] remembers.
const ENDED_KEPT: usize = 4096;

impl Ended {
    fn note(&mut self, key: (u32, u64)) {
        if self.set.insert(key) {
            self.order.push_back(key);
        }
        while self.order.len() > ENDED_KEPT {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }

    /// A peer that restarted numbers its sessions afresh.
    fn forget_peer(&mut self, peer: u32) {
        self.order.retain(|(p, _)| *p != peer);
        self.set.retain(|(p, _)| *p != peer);
    }
}

impl NodeInbound {
    /// The handler of `node`.
    pub fn new(node: Weak<Node>) -> NodeInbound {
        NodeInbound {
            node,
            served: Mutex::new(HashMap::new()),
            asked: Default::default(),
            ended: Mutex::default(),
        }
    }

    /// The session of this node that stands for `from`'s session `origin`.
    fn served_session(&self, node: &Arc<Node>, from: u32, origin: u64) -> u64 {
        let mut map = self.served.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = map.get(&(from, origin)) {
            return *s;
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sid = node.lock().add_session(0, Role::Peer { node: from }, tx);
        map.insert((from, origin), sid);
        let n = Arc::downgrade(node);
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                let Some(node) = n.upgrade() else { break };
                if let Some(t) = node.transports().to(from) {
                    t.send_event(from, origin, event);
                }
            }
        });
        sid
    }
}

impl NodeInbound {
    /// Serve a request of `from`'s session `origin`, with the ticket `ticket` makes (taken
    /// now, in the order requests come).
    fn serve_with(
        &self,
        from: u32,
        origin: u64,
        req: PeerRequest,
        ticket: impl FnOnce(&gave_up::Book) -> Ticket,
    ) -> BoxFuture<'static, Result<PeerReply, Error>> {
        let Some(node) = self.node.upgrade() else {
            return Box::pin(async { Err(Error::NodeNotResponding) });
        };
        if self.ended.lock().unwrap_or_else(|p| p.into_inner()).set.contains(&(from, origin)) {
            // Its end released everything it held here.
            return Box::pin(async { Err(Error::Protocol("the requesting session ended".into())) });
        }
        let sid = self.served_session(&node, from, origin);
        let ticket = ticket(&self.asked);
        Box::pin(async move {
            let r = serve(node.clone(), sid, (from, origin), req, &ticket).await;
            node.changed.notify_waiters();
            r
        })
    }
}

/// Retry `attempt` on the books whenever they change (see [`wait_changes`]).
async fn wait_for<T>(
    node: &Node,
    timeout_ms: Option<u32>,
    missing: Error,
    mut attempt: impl FnMut(&mut Registry) -> Result<T, ConnectWait>,
) -> Result<T, Error> {
    wait_changes(node, timeout_ms, missing, || attempt(&mut node.lock()), std::future::pending()).await
}

/// Serve one core request of `from`'s session `origin`, held here by session `sid`;
/// `ticket` is refused once `from` gives it up.
async fn serve(
    node: Arc<Node>,
    sid: u64,
    (from, origin): (u32, u64),
    req: PeerRequest,
    ticket: &Ticket,
) -> Result<PeerReply, Error> {
    let alive = move |reg: &Registry| match reg.sessions.contains_key(&sid) {
        true => Ok(()),
        false => Err(ConnectWait::Failed(Error::Protocol("the requesting session ended".into()))),
    };
    match req {
        PeerRequest::Probe => Ok(PeerReply::Ok),
        PeerRequest::Connect { id, timeout_ms } => wait_for(&node, timeout_ms, Error::NoSuchSegment, |reg| {
            alive(reg)?;
            ticket.check()?;
            let (conn, size) = reg.connect_for_peer(sid, from, id)?;
            ticket.made(reg, sid, Made::Segment(conn));
            Ok((conn, size))
        })
        .await
        .map(|(conn, size)| PeerReply::Connected { conn, size }),
        PeerRequest::Disconnect { conn } => node.lock().disconnect(sid, conn).map(|_| PeerReply::Ok),
        PeerRequest::ConnectInterrupt { intno, data, timeout_ms } => {
            wait_for(&node, timeout_ms, Error::NoSuchIntno, |reg| {
                alive(reg)?;
                ticket.check()?;
                // A link's peer: its triggers come through this daemon (the page stays here).
                let (intr, fds) = reg.connect_interrupt(sid, from, intno, data, true)?;
                ticket.made(reg, sid, Made::Interrupt(intr));
                // The connecting process there, and the interrupt's owner here (issue 19:
                // what may come back on a flow dialed to it).
                let owner = reg.bind_far_session(intr, origin);
                Ok((intr, owner, fds))
            })
            .await
            .map(|(intr, owner, _)| PeerReply::Interrupt { intr, intno, owner })
        }
        PeerRequest::DisconnectInterrupt { intr } => {
            node.lock().disconnect_interrupt(sid, intr).map(|_| PeerReply::Ok)
        }
        PeerRequest::Read { conn, offset, len } => {
            if len as usize > remora_proto::MAX_DATA_IO {
                return Err(Error::IllegalParameter(format!("read of {len} bytes")));
            }
            // A read of nothing only asks whether the connection stands (a barrier's close).
            let m = served(&node, from, conn, offset, len as u64, len > 0)?;
            let mut v = vec![0u8; len as usize];
            m.read(offset as usize, &mut v).map(|_| PeerReply::Data(v)).map_err(|_| Error::OutOfRange)
        }
        PeerRequest::Write { conn, runs } => {
            let total: usize = runs.iter().map(|r| r.1.len()).sum();
            if total > remora_proto::MAX_DATA_IO {
                return Err(Error::IllegalParameter(format!("write of {total} bytes")));
            }
            // A member still copying its group's contents takes stores after the copy.
            crate::personality::multicast::filled(&node, conn).await;
            let maps: Result<Vec<_>, Error> =
                runs.iter().map(|(o, d)| served(&node, from, conn, *o, d.len() as u64, false)).collect();
            let maps = maps?;
            if maps.iter().any(|m| m.is_readonly()) {
                return Err(Error::PermissionDenied);
            }
            for (m, (o, d)) in maps.iter().zip(&runs) {
                m.write(*o as usize, d).map_err(|_| Error::OutOfRange)?;
            }
            Ok(PeerReply::Ok)
        }
        PeerRequest::Trigger { intr, data } => {
            node.lock().trigger_interrupt(sid, intr, data.as_deref()).map(|_| PeerReply::Ok)
        }
        PeerRequest::Scif(r) => crate::personality::scif::peer::serve(&node, sid, from, r).await,
        PeerRequest::Rsm(r) => crate::personality::rsm::serve_peer(&node, sid, from, r),
        PeerRequest::Vipl(r) => crate::personality::vipl::serve_peer(&node, from, r).await,
        PeerRequest::GroupMemory { group } => crate::personality::multicast::serve_peer(&node, group),
        PeerRequest::ConnectGroup { group } => {
            crate::personality::multicast::serve_connect(&node, sid, from, group)
        }
        PeerRequest::GroupMembers { group, joined, left } => {
            crate::personality::multicast::serve_members(node, from, group, joined, left).await
        }
    }
}

/// The mapping of connection `conn`, if a session served for `peer` holds it, it is alive,
/// the range is inside it, and (for a `read`) it may be read.
fn served_mapping(node: &Node, peer: u32, conn: u64, off: u64, len: u64, read: bool) -> Option<Arc<Mapping>> {
    served(node, peer, conn, off, len, read).ok()
}

/// [`served_mapping`], saying why not: `NotConnected` for a connection that is not (or no
/// longer) one of `peer`'s live connections, `PermissionDenied` for a read of one granted
/// no read (an RSM import), `OutOfRange` for a range outside it.
fn served(node: &Node, peer: u32, conn: u64, off: u64, len: u64, read: bool) -> Result<Arc<Mapping>, Error> {
    let mut reg = node.lock();
    let c = reg.conns.get(&conn).ok_or(Error::NotConnected)?;
    let holder = reg.sessions.get(&c.session).ok_or(Error::NotConnected)?;
    if holder.role != (Role::Peer { node: peer }) || holder.pid != 0 || !c.alive {
        return Err(Error::NotConnected);
    }
    if read && !c.readable {
        return Err(Error::PermissionDenied);
    }
    if off.checked_add(len).is_none_or(|e| e > c.size) {
        return Err(Error::OutOfRange);
    }
    let session = c.session;
    match reg.dma_remote(session, conn) {
        Ok(DmaTarget::Map(m)) => Ok(m),
        _ => Err(Error::NotConnected),
    }
}

/// A connection of a peer to an export of this node, as the peer's transfers reach it.
struct ConnectionMemory {
    node: Weak<Node>,
    peer: u32,
    conn: u64,
}

impl PeerMemory for ConnectionMemory {
    fn resolve(&self, offset: u64, len: u64, write: bool) -> Option<Vec<(Arc<Mapping>, usize, usize)>> {
        let node = self.node.upgrade()?;
        if write {
            crate::personality::multicast::block_filled(&node, self.conn);
        }
        // A page fetch is a load: none for a connection granted no read.
        let m = served_mapping(&node, self.peer, self.conn, offset, len, !write)?;
        Some(vec![(m, offset as usize, len as usize)])
    }

    /// Only DSM pagers bind flows to a connection: reads are page fetches, stores are the
    /// runs of a flush (an empty store only asks that the ones before it have arrived).
    fn flow_used(&self, what: FlowUse) {
        let Some(node) = self.node.upgrade() else { return };
        let st = &node.stats;
        match what {
            FlowUse::Bound => {
                st.pager_flows_served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            FlowUse::Read(n) => crate::Stats::count(&st.dsm_page_fetches, &st.dsm_fetched_bytes, n),
            FlowUse::Stored { bytes: 0, .. } => {}
            FlowUse::Stored { bytes, .. } => {
                crate::Stats::count(&st.dsm_flush_runs, &st.dsm_flushed_bytes, bytes)
            }
        }
    }
}

/// A connection of a peer's session to an interrupt of this node, as that process's own
/// flow triggers it (`Space::Interrupt`): no memory, only triggers, each checked against
/// the books when it comes.
struct InterruptTarget {
    node: Weak<Node>,
    peer: u32,
    conn: u64,
    /// The back flow (`inbound/back_flow.rs`) these triggers come on, if so: once `conn`
    /// ended, what the flow carried for it is still counted.
    via: Option<u64>,
}

impl InterruptTarget {
    /// The session of `peer` that holds connection `conn`, and whether it is a data
    /// interrupt's, when it is one of `peer`'s connections to an interrupt of this node.
    fn held(reg: &Registry, peer: u32, conn: u64) -> Option<(u64, bool)> {
        let c = reg.intr_conns.get(&conn)?;
        let by_peer = reg.sessions.get(&c.session).is_some_and(|s| s.role == Role::Peer { node: peer });
        // Only a connection counted far (`IntrConn::afar`) has its triggers come through
        // this daemon: the owner's waits are on the bell then, which a flow relies on.
        (by_peer && c.afar && c.node == peer && matches!(c.target, ConnKind::Local { .. }))
            .then_some((c.session, c.data))
    }
}

impl PeerMemory for InterruptTarget {
    fn resolve(&self, _: u64, _: u64, _: bool) -> Option<Vec<(Arc<Mapping>, usize, usize)>> {
        None
    }

    fn trigger(&self, data: &[u8]) -> Result<(), Error> {
        let node = self.node.upgrade().ok_or(Error::NodeNotResponding)?;
        let mut reg = node.lock();
        let Some((session, is_data)) = InterruptTarget::held(&reg, self.peer, self.conn) else {
            // Sent back before its connection's disconnect, which overtook it.
            return match (self.via, data.is_empty()) {
                (Some(id), true) => reg.trigger_carried(id, self.conn),
                _ => Err(Error::NoSuchIntno),
            };
        };
        let r = match (is_data, data.is_empty()) {
            (true, _) => reg.trigger_interrupt(session, self.conn, Some(data)),
            (false, true) => reg.trigger_interrupt(session, self.conn, None),
            (false, false) => Err(Error::IllegalParameter("a payload for a plain interrupt".into())),
        };
        // The back flow carries this connection from its first trigger on (under the same
        // lock as the trigger, so that a disconnect cannot fall between the two).
        if let (Ok(()), Some(id)) = (&r, self.via) {
            reg.carry_back(id, self.conn);
        }
        r
    }

    /// A plain interrupt's owner reads the flow too, while it waits.
    fn share_flow(&self, flow: std::os::fd::BorrowedFd<'_>) -> Option<Box<dyn SharedFlow>> {
        let node = self.node.upgrade()?;
        let booking = node.lock().share_flow(self.peer, self.conn, flow, None)?;
        Some(Box::new(owner_flow::OwnerFlow { node: self.node.clone(), booking, polls: 0 }))
    }
}

/// Tell every session concerned that the route to `peer` works again or not.
fn link_events(node: &Node, peer: u32, operational: bool) {
    let mut reg = node.lock();
    let mut tell = Vec::new();
    let mut owners = Vec::new();
    for c in reg.conns.values() {
        if c.node == peer && matches!(c.kind, ConnKind::Remote { .. }) {
            tell.push((c.session, Event::ConnectionLink { conn: c.conn, operational }));
        }
        if c.importer_node == peer
            && reg.sessions.get(&c.session).is_some_and(|s| s.role == Role::Peer { node: peer })
        {
            if let ConnKind::Local { seg } = c.kind {
                owners.push(seg);
            }
        }
    }
    // Connections to the peer's interrupts: a trigger over the process's own flow looks
    // at this before it is sent.
    for (conn, c) in &reg.intr_conns {
        if c.node == peer && matches!(c.target, ConnKind::Remote { .. }) && c.lost.is_none() {
            tell.push((c.session, Event::ConnectionLink { conn: *conn, operational }));
        }
    }
    for (s, ev) in tell {
        reg.tell_session(s, ev);
    }
    for seg in owners {
        reg.tell_owner(seg, Event::SegmentLink { seg, node: peer, operational });
    }
    drop(reg);
    node.changed.notify_waiters();
}

/// The peer is gone or restarted: every connection to it is lost, and everything it held
/// here is released (owners hear `SegmentLost`).
fn lose_peer(node: &Node, peer: u32, served: Vec<u64>) {
    crate::personality::scif::lose_node(node, peer);
    let mut reg = node.lock();
    let mut sessions: Vec<u64> = reg
        .conns
        .values()
        .filter(|c| c.node == peer && matches!(c.kind, ConnKind::Remote { .. }))
        .map(|c| c.session)
        .collect();
    // Sessions that reach only interrupts of the peer lose those connections too.
    sessions.extend(
        reg.intr_conns
            .values()
            .filter(|c| c.node == peer && !matches!(c.target, ConnKind::Local { .. }))
            .map(|c| c.session),
    );
    sessions.sort_unstable();
    sessions.dedup();
    for s in sessions {
        reg.lose_node(s, peer, LostReason::NodeGone);
    }
    for vs in served {
        let owned: Vec<u64> = reg
            .conns
            .values()
            .filter(|c| c.session == vs)
            .filter_map(|c| match c.kind {
                ConnKind::Local { seg } => Some(seg),
                _ => None,
            })
            .collect();
        for seg in owned {
            reg.tell_owner(seg, Event::SegmentLost { seg, node: peer });
        }
        drop(reg);
        node.end_session(vs);
        reg = node.lock();
    }
    drop(reg);
    node.changed.notify_waiters();
}

impl Inbound for NodeInbound {
    fn request(
        &self,
        from: u32,
        origin: u64,
        req: PeerRequest,
    ) -> BoxFuture<'static, Result<PeerReply, Error>> {
        self.serve_with(from, origin, req, |_| Ticket::none())
    }

    fn request_numbered(
        &self,
        from: u32,
        origin: u64,
        id: u64,
        req: PeerRequest,
    ) -> BoxFuture<'static, Result<PeerReply, Error>> {
        self.serve_with(from, origin, req, |book| Ticket::new(book, from, id))
    }

    fn gave_up(&self, from: u32, id: u64) {
        let Some(node) = self.node.upgrade() else { return };
        gave_up::gave_up(&mut node.lock(), &self.asked, from, id);
        node.changed.notify_waiters();
    }

    fn session_end(&self, from: u32, origin: u64) {
        self.ended.lock().unwrap_or_else(|p| p.into_inner()).note((from, origin));
        let sid = self.served.lock().unwrap_or_else(|p| p.into_inner()).remove(&(from, origin));
        if let (Some(sid), Some(node)) = (sid, self.node.upgrade()) {
            node.end_session(sid);
            node.changed.notify_waiters();
        }
    }

    fn event(&self, from: u32, origin: u64, event: Event) {
        let Some(node) = self.node.upgrade() else { return };
        let mut reg = node.lock();
        match event {
            Event::ConnectionLost { conn: remote, reason } => reg.lose_proxied(origin, &[remote], reason),
            Event::SegmentUnavailable { conn: remote } => {
                if let Some(conn) = reg.local_of_remote(origin, remote) {
                    reg.tell_session(origin, Event::SegmentUnavailable { conn });
                }
            }
            Event::ConnectionLink { conn: remote, operational } => {
                if let Some(conn) = reg.local_of_remote(origin, remote) {
                    reg.tell_session(origin, Event::ConnectionLink { conn, operational });
                }
            }
            // Segment events of a peer link concern segments this node does not own.
            other => tracing::debug!(peer = from, "ignoring {other:?} from a peer"),
        }
        drop(reg);
        node.changed.notify_waiters();
    }

    fn link_changed(&self, peer: u32, state: LinkState) {
        let Some(node) = self.node.upgrade() else { return };
        match state {
            LinkState::Up => link_events(&node, peer, true),
            LinkState::NotOperational => link_events(&node, peer, false),
            LinkState::Lost => {
                let served: Vec<u64> = {
                    let mut map = self.served.lock().unwrap_or_else(|p| p.into_inner());
                    let mine: Vec<(u32, u64)> = map.keys().filter(|(p, _)| *p == peer).copied().collect();
                    mine.into_iter().filter_map(|k| map.remove(&k)).collect()
                };
                gave_up::forget(&self.asked, peer);
                self.ended.lock().unwrap_or_else(|p| p.into_inner()).forget_peer(peer);
                lose_peer(&node, peer, served);
            }
            LinkState::Down => {}
        }
    }

    fn route_lost(&self, node_id: u32, origin: u64) {
        let Some(node) = self.node.upgrade() else { return };
        node.lock().lose_node(origin, node_id, LostReason::NodeGone);
        node.changed.notify_waiters();
    }

    fn memory(&self, from: u32, target: RangeRef) -> Option<Arc<dyn PeerMemory>> {
        match target.space {
            Space::Connection => {
                Some(Arc::new(ConnectionMemory { node: self.node.clone(), peer: from, conn: target.handle }))
            }
            Space::Registered => {
                crate::personality::scif::peer::memory(self.node.clone(), from, target.handle)
            }
            Space::Interrupt => {
                let node = self.node.upgrade()?;
                InterruptTarget::held(&node.lock(), from, target.handle)?;
                Some(Arc::new(InterruptTarget {
                    node: self.node.clone(),
                    peer: from,
                    conn: target.handle,
                    via: None,
                }))
            }
        }
    }

    /// Only SCIF connections take direct flows (their messages).
    fn direct_flow(&self, from: u32, key: u64, token: u64) -> Option<crate::transport::HandOver> {
        let node = self.node.upgrade()?;
        crate::personality::scif::direct::arrived(&node, from, key, token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_sessions_are_remembered_per_peer_and_boundedly() {
        let mut e = Ended::default();
        e.note((4, 7));
        e.note((4, 7));
        e.note((8, 7));
        assert!(e.set.contains(&(4, 7)) && e.set.contains(&(8, 7)));
        assert_eq!(e.order.len(), 2, "a session noted twice is kept once");
        // A peer that restarted numbers its sessions afresh: its ends are forgotten.
        e.forget_peer(4);
        assert!(!e.set.contains(&(4, 7)) && e.set.contains(&(8, 7)));
        for s in 0..(ENDED_KEPT as u64 + 10) {
            e.note((12, s));
        }
        assert_eq!(e.set.len(), ENDED_KEPT);
        assert_eq!(e.order.len(), ENDED_KEPT);
        assert!(!e.set.contains(&(8, 7)) && !e.set.contains(&(12, 0)), "the oldest go first");
        assert!(e.set.contains(&(12, ENDED_KEPT as u64 + 9)));
    }
}
