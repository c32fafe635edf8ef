//! The SISCI personality of the node: segments and their state machine (created,
//! prepared, available), connections to segments of any node, interrupts and data
//! interrupts, DMA queues, and the DSM's pager flows, on the core's books
//! ([`crate::core`]) and the transports. Requests that go to another node are core peer
//! requests, carried by whichever transport reaches that node.

use crate::core::ConnKind;
use crate::core::DmaTarget;
use crate::session::{fd_of, is_memfd, Outcome, Session};
use crate::transport::Transport;
use crate::Node;
use remora_proto::link::{PeerReply, PeerRequest, RangeRef};
use remora_proto::{Error, Reply, Request};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

fn unexpected(other: impl std::fmt::Debug) -> Error {
    Error::Protocol(format!("unexpected answer {other:?}"))
}

/// The transport that reaches `node` (waiting a moment for a node of this host whose
/// daemon is starting, see [`Session::reach`]), and whether it shares memory.
async fn transport_to(
    s: &Session,
    node: u32,
    timeout_ms: Option<u32>,
) -> Result<(Arc<dyn Transport>, bool), Error> {
    let t = s.reach(node, timeout_ms).await?;
    let shared = t.shares_memory();
    Ok((t, shared))
}

/// Serve one SISCI request of session `s`.
pub(crate) async fn handle(s: &mut Session, req: Request, mut fds: Vec<OwnedFd>) -> Outcome {
    let sid = s.sid;
    let ok = |r: Result<(), Error>| (r.map(|_| Reply::Ok), vec![]);
    match req {
        Request::CreateSegment { id, size, private, empty } => {
            let mut reg = s.node.lock();
            match reg.create_segment(sid, id, size, private, empty) {
                Ok(s) => {
                    let reply = Reply::Segment {
                        seg: s.seg,
                        id: s.id,
                        size: s.size,
                        prepared: false,
                        available: false,
                    };
                    match s.memfd.as_ref().map(fd_of).transpose() {
                        Ok(fd) => (Ok(reply), fd.into_iter().collect()),
                        Err(e) => (Err(e), vec![]),
                    }
                }
                Err(e) => (Err(e), vec![]),
            }
        }
        Request::AttachMemory { seg } => {
            if fds.len() != 1 || !is_memfd(&fds[0]) {
                return (Err(Error::IllegalParameter("AttachMemory needs exactly one memfd".into())), vec![]);
            }
            let memfd = match remora_sys::Memfd::from_fd(fds.remove(0)) {
                Ok(m) if m.is_size_sealed() => m,
                Ok(_) => {
                    return (
                        Err(Error::IllegalParameter(
                            "AttachMemory needs a memfd sealed against shrinking".into(),
                        )),
                        vec![],
                    )
                }
                Err(e) => return (Err(Error::System(e.to_string())), vec![]),
            };
            let r = s.node.lock().attach_memory(sid, seg, memfd);
            (r.map(|size| Reply::Segment { seg, id: None, size, prepared: false, available: false }), vec![])
        }
        Request::Prepare { seg, adapter } => ok(s.node.lock().prepare(sid, seg, adapter)),
        Request::SetAvailable { seg, adapter } => ok(s.node.lock().set_available(sid, seg, adapter)),
        Request::SetUnavailable { seg, adapter, force_disconnect, notify } => {
            ok(s.node.lock().set_unavailable(sid, seg, adapter, force_disconnect, notify))
        }
        Request::RemoveSegment { seg, force } => super::multicast::remove(s, seg, force).await,
        Request::ShareSegment { seg } => ok(s.node.lock().share(sid, seg)),
        Request::SegmentEvents { seg } => {
            s.node.lock().want_segment_events(sid, seg);
            ok(Ok(()))
        }
        Request::TakeSegmentEvents { seg } => {
            let events = s.node.lock().take_segment_events(sid, seg);
            (Ok(Reply::SegmentEvents(events)), vec![])
        }
        Request::AttachShared { id } => {
            let mut reg = s.node.lock();
            match reg.attach_shared(sid, id) {
                Ok(s) => {
                    let reply = Reply::Segment {
                        seg: s.seg,
                        id: s.id,
                        size: s.size,
                        prepared: s.prepared,
                        available: s.available,
                    };
                    match s.memfd.as_ref().map(fd_of).transpose() {
                        Ok(fd) => (Ok(reply), fd.into_iter().collect()),
                        Err(e) => (Err(e), vec![]),
                    }
                }
                Err(e) => (Err(e), vec![]),
            }
        }
        Request::Connect { node, id, timeout_ms } => {
            if node == s.me() {
                connect_local(s, id, timeout_ms).await
            } else if s.is_peer() {
                (Err(Error::NoSuchNode), vec![])
            } else {
                connect_far(s, node, id, timeout_ms).await
            }
        }
        Request::Disconnect { conn } => {
            super::multicast::disconnect_legs(s, conn).await;
            let r = s.node.lock().disconnect(sid, conn);
            match r {
                Ok((kind, node)) => {
                    if let Some(remote) = kind.remote() {
                        s.release_far(node, PeerRequest::Disconnect { conn: remote }).await;
                    }
                    (Ok(Reply::Ok), vec![])
                }
                Err(e) => (Err(e), vec![]),
            }
        }
        Request::SegRead { conn, offset, len } => {
            (seg_read(s, conn, offset, len).await.map(Reply::Data), vec![])
        }
        Request::SegWrite { conn, runs } => (seg_write(s, conn, runs).await.map(|_| Reply::Ok), vec![]),
        Request::DsmFlow { conn } => match dsm_flow(s, conn).await {
            Ok((reply, fd)) => (Ok(reply), vec![fd]),
            Err(e) => (Err(e), vec![]),
        },
        Request::DsmFlows { conns, watch } => match dsm_flows(s, conns, watch).await {
            Ok((reply, fd)) => (Ok(reply), vec![fd]),
            Err(e) => (Err(e), vec![]),
        },
        Request::TriggerInterrupt { intr, data } => {
            let target = {
                let reg = s.node.lock();
                reg.interrupt_live(sid, intr).map(|_| reg.intr_conns.get(&intr).map(|c| (c.target, c.node)))
            };
            let target = match target {
                Ok(t) => t,
                Err(e) => return (Err(e), vec![]),
            };
            match target {
                Some((ConnKind::Local { .. }, _)) => {
                    ok(s.node.lock().trigger_interrupt(sid, intr, data.as_deref()))
                }
                Some((kind, node)) => {
                    // One look for the route (a trigger is on someone's critical path): a
                    // route known to be down fails the trigger at once (the caller may try
                    // again), rather than after the transport's wait for the link.
                    let Some(t) = s.node.transports().to(node).cloned() else {
                        return (Err(Error::NoSuchNode), vec![]);
                    };
                    if route_down(&t, node) {
                        return (Err(Error::NodeNotResponding), vec![]);
                    }
                    let remote = kind.remote().expect("not local");
                    let r = ask_while_up(s, &t, node, PeerRequest::Trigger { intr: remote, data }).await;
                    (r.map(|_| Reply::Ok), vec![])
                }
                None => (Err(Error::UnknownHandle), vec![]),
            }
        }
        Request::CreateInterrupt { intno, data, shared } => {
            let made = s.node.lock().create_interrupt(sid, intno, data, shared);
            match made {
                Ok((intr, intno, fds, fanout)) => {
                    if let Some(fanout) = fanout {
                        tokio::spawn(fan_out(s.node.clone(), intno, fanout, data));
                    }
                    (Ok(Reply::Interrupt { intr, intno }), fds)
                }
                Err(e) => (Err(e), vec![]),
            }
        }
        Request::RemoveInterrupt { intr } => ok(s.node.lock().remove_interrupt(sid, intr)),
        Request::InterruptFlows { intr } => match s.node.lock().interrupt_flows(sid, intr) {
            Ok((gen, conns, mut nodes, fds)) => {
                // Without the pairing (this node's cluster file, or the flow's node's, says
                // no) a flow carries none of the owner's triggers back: it is named as from the
                // owner's own node, which the owner's library never sends back on.
                let me = s.me();
                for n in nodes.iter_mut().filter(|n| **n != me && !s.node.intr_pair_with(**n)) {
                    *n = me;
                }
                (Ok(Reply::InterruptFlows { gen, conns, nodes }), fds)
            }
            Err(e) => (Err(e), vec![]),
        },
        Request::ConnectInterrupt { node, intno, data, timeout_ms } => {
            if node == s.me() {
                let importer = s.importer_node();
                // The session's process (or, through the `local` transport, a process of
                // another node of this host) gets the page and triggers it itself.
                let r = s
                    .wait_until(timeout_ms, Error::NoSuchIntno, |reg| {
                        reg.connect_interrupt(sid, importer, intno, data, false)
                    })
                    .await;
                match r {
                    Ok((conn, fds)) => (Ok(Reply::Interrupt { intr: conn, intno }), fds),
                    Err(e) => (Err(e), vec![]),
                }
            } else if s.is_peer() {
                (Err(Error::NoSuchNode), vec![])
            } else {
                connect_interrupt_far(s, node, intno, data, timeout_ms).await
            }
        }
        Request::DisconnectInterrupt { intr } => {
            let r = s.node.lock().disconnect_interrupt(sid, intr);
            match r {
                Ok(c) => {
                    if let Some(remote) = c.target.remote() {
                        s.release_far(c.node, PeerRequest::DisconnectInterrupt { intr: remote }).await;
                    }
                    (Ok(Reply::Ok), vec![])
                }
                Err(e) => (Err(e), vec![]),
            }
        }
        Request::CreateDmaQueue { max_entries } => create_dma(s, max_entries),
        Request::CreateGroupSegment { group, size, unicast } => {
            super::multicast::create(s, group, size, unicast).await
        }
        Request::ConnectGroup { group, timeout_ms } => super::multicast::connect(s, group, timeout_ms).await,
        Request::GroupMemory { group } => super::multicast::memory(s, group),
        Request::GroupLegReady { conn, leg } => {
            let r = s.node.lock().group_leg_ready(sid, conn, leg);
            s.node.changed.notify_waiters();
            ok(r)
        }
        Request::RemoveDmaQueue { queue } => ok(s.node.lock().remove_dma(sid, queue)),
        other => (Err(Error::Protocol(format!("not a SISCI request: {other:?}"))), vec![]),
    }
}

/// Whether the transport to `node` reports its link silent or lost now.
fn route_down(t: &Arc<dyn Transport>, node: u32) -> bool {
    use crate::transport::LinkState;
    matches!(t.link_state(node), Some(LinkState::NotOperational | LinkState::Lost))
}

/// [`Session::ask`], given up with `NodeNotResponding` as soon as the route to `node` is
/// known silent or lost: a request in flight on a link that fell silent otherwise waits
/// until the transport closes the link (30 s). The peer may still get it if the route
/// comes back before that.
async fn ask_while_up(
    s: &Session,
    t: &Arc<dyn Transport>,
    node: u32,
    req: PeerRequest,
) -> Result<crate::transport::Answer, Error> {
    let ask = s.ask_via(t, node, req);
    tokio::pin!(ask);
    loop {
        tokio::select! {
            r = &mut ask => return r,
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                if route_down(t, node) {
                    return Err(Error::NodeNotResponding);
                }
            }
        }
    }
}

/// `SCIConnectSegment` to a segment of another node, through its transport.
async fn connect_far(s: &Session, node: u32, id: u32, timeout_ms: Option<u32>) -> Outcome {
    let (t, shared) = match transport_to(s, node, timeout_ms).await {
        Ok(x) => x,
        Err(e) => return (Err(e), vec![]),
    };
    match s.ask_within(&t, node, PeerRequest::Connect { id, timeout_ms }, timeout_ms).await {
        Ok((PeerReply::Connected { conn: remote, size }, fds)) if shared && fds.len() == 1 => {
            let keep = fds[0].try_clone().ok().and_then(|fd| remora_sys::Memfd::from_fd(fd).ok());
            // Never trust a size larger than the memory that came with it.
            let size = keep.as_ref().map_or(size, |m| size.min(m.size()));
            let conn = s.node.lock().add_proxied(s.sid, node, id, size, remote, keep);
            (Ok(Reply::Connected { conn, size }), fds)
        }
        Ok((PeerReply::Connected { conn: remote, size }, fds)) if !shared && fds.is_empty() => {
            let conn = s.node.lock().add_proxied(s.sid, node, id, size, remote, None);
            (Ok(Reply::Connected { conn, size }), vec![])
        }
        Ok(other) => (Err(unexpected(other.0)), vec![]),
        Err(e) => (Err(e), vec![]),
    }
}

/// `SCIConnectInterrupt` / `SCIConnectDataInterrupt` to another node's interrupt.
async fn connect_interrupt_far(
    s: &Session,
    node: u32,
    intno: u32,
    data: bool,
    timeout_ms: Option<u32>,
) -> Outcome {
    let (t, shared) = match transport_to(s, node, timeout_ms).await {
        Ok(x) => x,
        Err(e) => return (Err(e), vec![]),
    };
    let req = PeerRequest::ConnectInterrupt { intno, data, timeout_ms };
    match s.ask_within(&t, node, req, timeout_ms).await {
        Ok((PeerReply::Interrupt { intr: remote, intno, owner }, fds))
            // Shared memory: the page, its eventfd and its bell's sending end.
            if fds.len() == if shared { 3 } else { 0 } =>
        {
            let conn = s.node.lock().add_proxied_interrupt(s.sid, node, intno, data, remote, !shared, owner);
            (Ok(Reply::Interrupt { intr: conn, intno }), fds)
        }
        Ok(other) => (Err(unexpected(other.0)), vec![]),
        Err(e) => (Err(e), vec![]),
    }
}

async fn connect_local(s: &Session, id: u32, timeout_ms: Option<u32>) -> Outcome {
    let importer = s.importer_node();
    let sid = s.sid;
    match s.wait_until(timeout_ms, Error::NoSuchSegment, |reg| reg.connect_local(sid, importer, id)).await {
        Ok((conn, size, fd)) => (Ok(Reply::Connected { conn, size }), vec![fd.into_fd()]),
        Err(e) => (Err(e), vec![]),
    }
}

/// Read bytes of a connection's segment: mapped here, or asked of its node over TCP.
async fn seg_read(s: &Session, conn: u64, offset: u64, len: u32) -> Result<Vec<u8>, Error> {
    if len as usize > remora_proto::MAX_DATA_IO {
        return Err(Error::IllegalParameter(format!("read of {len} bytes")));
    }
    let (target, via) = {
        let mut reg = s.node.lock();
        let via = reg.conns.get(&conn).and_then(|c| c.kind.remote().map(|r| (c.node, r)));
        let target = reg.dma_remote(s.sid, conn).map_err(|_| Error::NotConnected)?;
        // An RSM import granted no read reads nothing (a read of nothing only asks whether
        // the connection stands).
        if len > 0 && reg.conns.get(&conn).is_some_and(|c| !c.readable) {
            return Err(Error::PermissionDenied);
        }
        (target, via)
    };
    // A read of nothing asks the segment's own node whether the connection still stands
    // (an RSM barrier's close): the owner knows at once, this node only when told.
    if let (0, Some((node, remote))) = (len, via) {
        return match s.ask(node, PeerRequest::Read { conn: remote, offset, len: 0 }).await?.0 {
            PeerReply::Data(v) if v.is_empty() => Ok(v),
            other => Err(unexpected(other)),
        };
    }
    match target {
        DmaTarget::Map(m) => {
            let mut v = vec![0u8; len as usize];
            m.read(offset as usize, &mut v).map_err(|_| Error::OutOfRange)?;
            Ok(v)
        }
        DmaTarget::Far { node, remote, size } => {
            if offset.checked_add(len as u64).is_none_or(|e| e > size) {
                return Err(Error::OutOfRange);
            }
            match s.ask(node, PeerRequest::Read { conn: remote, offset, len }).await?.0 {
                PeerReply::Data(v) if v.len() == len as usize => Ok(v),
                other => Err(unexpected(other)),
            }
        }
    }
}

/// Store runs into a connection's segment: mapped here, or sent to its node over TCP.
async fn seg_write(s: &Session, conn: u64, runs: Vec<(u64, Vec<u8>)>) -> Result<(), Error> {
    let total: usize = runs.iter().map(|r| r.1.len()).sum();
    if total > remora_proto::MAX_DATA_IO {
        return Err(Error::IllegalParameter(format!("write of {total} bytes")));
    }
    let target = s.node.lock().dma_remote(s.sid, conn).map_err(|_| Error::NotConnected)?;
    let size = match &target {
        DmaTarget::Map(m) => m.len() as u64,
        DmaTarget::Far { size, .. } => *size,
    };
    if runs.iter().any(|(o, d)| o.checked_add(d.len() as u64).is_none_or(|e| e > size)) {
        return Err(Error::OutOfRange);
    }
    match target {
        DmaTarget::Map(m) => {
            for (o, d) in &runs {
                m.write(*o as usize, d).map_err(|_| Error::OutOfRange)?;
            }
            Ok(())
        }
        DmaTarget::Far { node, remote, .. } => {
            s.ask(node, PeerRequest::Write { conn: remote, runs }).await.map(|_| ())
        }
    }
}

/// Dial a pager flow to the node of connection `conn`'s segment for the caller's DSM
/// pager (`Request::DsmFlow`), or, when `conn` is a connection to an interrupt of another
/// host, a flow bound to that connection there, which the process triggers it over (two
/// hops instead of three: no daemon of this host on the way).
async fn dsm_flow(s: &Session, conn: u64) -> Result<(Reply, OwnedFd), Error> {
    let intr = {
        let reg = s.node.lock();
        reg.intr_conns.get(&conn).filter(|c| c.session == s.sid).map(|c| (c.node, c.target, c.lost, c.data))
    };
    if let Some((node, target, lost, data)) = intr {
        let (ConnKind::Remote { remote }, None) = (target, lost) else {
            return Err(Error::IllegalParameter("not a live interrupt connection of another host".into()));
        };
        let t = s.node.transports().to(node).cloned().ok_or(Error::NoSuchNode)?;
        let fd = t.pager_flow(node, RangeRef::interrupt(remote)).await?;
        s.node.stats.pager_flows_dialed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A plain interrupt's flow dialed from the lower node of the two may carry the far
        // owner's triggers back: our duplicate reads them while nobody here does
        // (`inbound/back_flow.rs`), unless either node's cluster file turns the pairing off.
        if !data && s.me() < node && s.node.intr_pair_with(node) {
            if let Ok(dup) = fd.try_clone() {
                crate::inbound::serve_back_flow(&s.node, node, conn, dup);
            }
        }
        return Ok((Reply::DsmFlow { remote, size: 0 }, fd));
    }
    let target = s.node.lock().dma_remote(s.sid, conn).map_err(|_| Error::NotConnected)?;
    let DmaTarget::Far { node, remote, size } = target else {
        return Err(Error::IllegalParameter("the segment is on this host".into()));
    };
    let t = s.node.transports().to(node).cloned().ok_or(Error::NoSuchNode)?;
    let fd = t.pager_flow(node, RangeRef::connection(remote)).await?;
    s.node.stats.pager_flows_dialed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok((Reply::DsmFlow { remote, size }, fd))
}

/// Dial a pager flow to the node of the segments of connections `conns` (all on one node
/// of another host) that reaches all of them, in order (`Request::DsmFlows`).
async fn dsm_flows(
    s: &Session,
    conns: Vec<u64>,
    watch: Option<(u32, u64)>,
) -> Result<(Reply, OwnedFd), Error> {
    let mut home = None;
    let mut remotes = Vec::with_capacity(conns.len());
    {
        let mut reg = s.node.lock();
        for conn in &conns {
            let target = reg.dma_remote(s.sid, *conn).map_err(|_| Error::NotConnected)?;
            let DmaTarget::Far { node, remote, .. } = target else {
                return Err(Error::IllegalParameter("a segment is on this host".into()));
            };
            if *home.get_or_insert(node) != node {
                return Err(Error::IllegalParameter("the segments are on different nodes".into()));
            }
            remotes.push(remote);
        }
    }
    let node = home.ok_or_else(|| Error::IllegalParameter("no connection".into()))?;
    let watch = match watch {
        Some((i, off)) => {
            Some((*remotes.get(i as usize).ok_or(Error::IllegalParameter("watch".into()))?, off))
        }
        None => None,
    };
    let t = s.node.transports().to(node).cloned().ok_or(Error::NoSuchNode)?;
    let targets = remotes.iter().map(|r| RangeRef::connection(*r)).collect();
    let fd = t.pager_flows(node, targets, watch).await?;
    s.node.stats.pager_flows_dialed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok((Reply::DsmFlows { remotes }, fd))
}

fn create_dma(s: &Session, max: u32) -> Outcome {
    use remora_sys::dma::DmaPage;
    use remora_sys::sync::EventFd;
    let sys = |e: std::io::Error| Error::System(e.to_string());
    let made = (|| -> Result<_, Error> {
        let memfd =
            DmaPage::create(max).map_err(|_| Error::IllegalParameter(format!("{max} DMA entries")))?;
        let ev = EventFd::new().map_err(sys)?;
        let page = DmaPage::open(&memfd, ev.try_clone().map_err(sys)?, max).map_err(sys)?;
        Ok((memfd, ev, page))
    })();
    let (memfd, ev, page) = match made {
        Ok(x) => x,
        Err(e) => return (Err(e), vec![]),
    };
    let page = Arc::new(page);
    let queue = s.node.lock().add_dma(s.sid, page.clone(), max);
    crate::core::transfer::spawn(s.node.clone(), s.sid, s.pid, page);
    (Ok(Reply::DmaQueue { queue }), vec![memfd.into_fd(), ev.into_fd()])
}

/// Pass the triggers (or, for a data interrupt, the payloads) of a shared interrupt
/// number's fan-out page (connections of this host trigger it directly) on to every
/// member, until the group goes.
pub(crate) async fn fan_out(node: Arc<Node>, intno: u32, fanout: u64, data: bool) {
    let clones = node
        .lock()
        .interrupts
        .get(&fanout)
        .and_then(|i| Some((i.event.try_clone().ok()?, i.event.try_clone().ok()?)));
    let Some((counter, watched)) = clones else { return };
    let Ok(ev) = remora_sys::async_conn::register(watched.into_fd()) else { return };
    let mut seen = node.lock().interrupts.get(&fanout).map_or(0, |i| i.page.triggers());
    loop {
        let ready = tokio::time::timeout(Duration::from_millis(200), ev.readable()).await;
        if let Ok(Ok(mut g)) = ready {
            counter.drain();
            g.clear_ready();
        }
        let reg = node.lock();
        if data {
            if !reg.fan_out_data(intno, fanout) {
                return;
            }
            continue;
        }
        let Some(now) = reg.interrupts.get(&fanout).map(|i| i.page.triggers()) else { return };
        let n = now.wrapping_sub(seen);
        seen = now;
        if !reg.fan_out(intno, fanout, n) {
            return;
        }
    }
}
