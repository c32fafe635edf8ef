//! One connection to the daemon: a process of this node, a peer daemon, or the CLI.

use crate::peer::{self, Proxy};
use crate::registry::{ConnKind, ConnectWait, DmaTarget};
use crate::send_msg;
use crate::transport::tcp::LinkState;
use crate::transport::{route, Route};
use crate::Node;
use remora_proto::link::{LinkMsg, PeerReply, PeerRequest};
use remora_proto::{
    decode, Error, Event, MapStatus, Reply, Request, RequestFrame, Role, ScifRequest, ServerMsg, MAX_FRAME,
    NO_REPLY,
};
use remora_sys::async_conn::AsyncConn;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

struct Session {
    node: Arc<Node>,
    sid: u64,
    pid: u32,
    role: Role,
    uid: u32,
    conn: AsyncConn,
    proxies: HashMap<u32, Proxy>,
    events: UnboundedSender<Event>,
}

type Outcome = (Result<Reply, Error>, Vec<OwnedFd>);

/// Serve one connection until it closes, then release everything it held.
pub async fn run(node: Arc<Node>, fd: OwnedFd) {
    let pid = remora_sys::seqpacket::peer_pid(fd.as_fd()).unwrap_or(0);
    let uid = remora_sys::seqpacket::peer_uid(fd.as_fd()).unwrap_or(u32::MAX);
    let conn = match AsyncConn::new(fd) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(pid, "cannot serve connection: {e}");
            return;
        }
    };
    let mut buf = vec![0u8; MAX_FRAME];
    let event_sock: Option<AsyncConn>;
    let role = match tokio::time::timeout(Duration::from_secs(5), conn.recv(&mut buf)).await {
        Ok(Ok((n, _))) if n > 0 => match decode::<RequestFrame>(&buf[..n]) {
            Ok(RequestFrame { id, req: Request::Hello { role, .. } }) => {
                // Application processes get a second socket for events, so that replies
                // and events never interleave on one stream.
                let pair = if role == Role::Client {
                    match remora_sys::seqpacket::pair() {
                        Ok(p) => Some(p),
                        Err(e) => {
                            tracing::warn!(pid, "cannot make an event socket: {e}");
                            return;
                        }
                    }
                } else {
                    None
                };
                let reply = ServerMsg::Reply { id, result: Ok(Reply::Hello { node: node.config.node }) };
                let fds: Vec<BorrowedFd<'_>> = pair.iter().map(|(_, theirs)| theirs.as_fd()).collect();
                if send_msg(&conn, &reply, &fds).await.is_err() {
                    return;
                }
                event_sock = match pair.map(|(ours, _)| AsyncConn::new(ours)).transpose() {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!(pid, "cannot serve the event socket: {e}");
                        return;
                    }
                };
                role
            }
            Ok(other) => {
                tracing::warn!(pid, "first message is not a hello ({:?}); closing", other.req);
                return;
            }
            Err(e) => {
                tracing::warn!(pid, "malformed first frame; closing: {e}");
                return;
            }
        },
        Ok(_) => return,
        Err(_) => {
            tracing::warn!(pid, "no hello within 5 s; closing");
            return;
        }
    };
    let (tx, mut rx) = unbounded_channel();
    let sid = node.lock().add_session(pid, role, tx.clone());
    tracing::debug!(sid, pid, ?role, "session open");
    let mut s =
        Session { node: node.clone(), sid, pid, role, uid, conn, proxies: HashMap::new(), events: tx };
    // Application processes have an event socket of their own: forward events there from a
    // task of their own, so they flow even while a request of the session waits (a long
    // connect, say). Other roles get events between requests on the main socket.
    // `keep` holds the sending side of the idle channel the loop listens on when events
    // go through the forwarding task.
    let (keep, idle) = unbounded_channel::<remora_proto::Event>();
    let mut rx = match event_sock {
        Some(ev_sock) => {
            tokio::spawn(async move {
                while let Some(ev) = rx.recv().await {
                    if send_msg(&ev_sock, &ServerMsg::Event(ev), &[]).await.is_err() {
                        break;
                    }
                }
            });
            idle
        }
        None => rx,
    };
    loop {
        tokio::select! {
            r = s.conn.recv(&mut buf) => {
                let (n, fds) = match r {
                    Ok((0, _)) => break,
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(sid, pid, "receive failed, closing session: {e}");
                        break;
                    }
                };
                let frame = match decode::<RequestFrame>(&buf[..n]) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!(sid, pid, "malformed frame, closing session: {e}");
                        break;
                    }
                };
                let (result, out_fds) = s.handle(frame.req, fds).await;
                s.node.changed.notify_waiters();
                if frame.id != NO_REPLY {
                    let borrowed: Vec<BorrowedFd<'_>> = out_fds.iter().map(|f| f.as_fd()).collect();
                    let msg = ServerMsg::Reply { id: frame.id, result };
                    if send_msg(&s.conn, &msg, &borrowed).await.is_err() {
                        break;
                    }
                }
            }
            Some(ev) = rx.recv() => {
                if send_msg(&s.conn, &ServerMsg::Event(ev), &[]).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(keep);
    s.proxies.clear();
    let links: Vec<_> = node.links.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
    for l in links {
        l.session_end(sid);
    }
    node.lock().end_session(sid);
    node.changed.notify_waiters();
    tracing::debug!(sid, pid, "session closed; its resources are released");
}

/// Pass the triggers of a shared interrupt number's fan-out page (connections of this
/// host trigger it directly) on to every member, until the group goes.
async fn fan_out(node: Arc<Node>, intno: u32, fanout: u64) {
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
        let Some(now) = reg.interrupts.get(&fanout).map(|i| i.page.triggers()) else { return };
        let n = now.wrapping_sub(seen);
        seen = now;
        if !reg.fan_out(intno, fanout, n) {
            return;
        }
    }
}

fn fd_of(m: &remora_sys::Memfd) -> Result<OwnedFd, Error> {
    m.try_clone().map(|m| m.into_fd()).map_err(|e| Error::System(e.to_string()))
}

fn is_memfd(fd: &OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|p| p.to_string_lossy().starts_with("/memfd:"))
        .unwrap_or(false)
}

impl Session {
    fn me(&self) -> u32 {
        self.node.config.node
    }

    async fn handle(&mut self, req: Request, mut fds: Vec<OwnedFd>) -> Outcome {
        if self.role == Role::Control
            && !matches!(req, Request::Probe { .. } | Request::Status | Request::Shutdown)
        {
            return (Err(Error::Access), vec![]);
        }
        let scif_req = matches!(req, Request::Scif(_));
        if scif_req != (self.role == Role::Scif)
            && !matches!(req, Request::Probe { .. } | Request::Scif(ScifRequest::Nodes))
        {
            return (Err(Error::Access), vec![]);
        }
        if let Request::Scif(r) = req {
            return self.scif(r, fds).await;
        }
        let sid = self.sid;
        let ok = |r: Result<(), Error>| (r.map(|_| Reply::Ok), vec![]);
        match req {
            Request::Hello { .. } => (Err(Error::Protocol("second hello".into())), vec![]),
            Request::CreateSegment { id, size, private, empty } => {
                let mut reg = self.node.lock();
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
                    return (
                        Err(Error::IllegalParameter("AttachMemory needs exactly one memfd".into())),
                        vec![],
                    );
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
                let r = self.node.lock().attach_memory(sid, seg, memfd);
                (
                    r.map(|size| Reply::Segment { seg, id: None, size, prepared: false, available: false }),
                    vec![],
                )
            }
            Request::Prepare { seg, adapter } => ok(self.node.lock().prepare(sid, seg, adapter)),
            Request::SetAvailable { seg, adapter } => ok(self.node.lock().set_available(sid, seg, adapter)),
            Request::SetUnavailable { seg, adapter, force_disconnect, notify } => {
                ok(self.node.lock().set_unavailable(sid, seg, adapter, force_disconnect, notify))
            }
            Request::RemoveSegment { seg, force } => ok(self.node.lock().remove_segment(sid, seg, force)),
            Request::ShareSegment { seg } => ok(self.node.lock().share(sid, seg)),
            Request::AttachShared { id } => {
                let mut reg = self.node.lock();
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
            Request::Connect { node, id, timeout_ms } => match route(&self.node, node) {
                Route::Me => self.connect_local(id, timeout_ms).await,
                _ if matches!(self.role, Role::Peer { .. }) => (Err(Error::NoSuchNode), vec![]),
                Route::Local => self.connect_remote(node, id, timeout_ms).await,
                Route::Tcp => {
                    let r = self.ask_tcp(node, PeerRequest::Connect { id, timeout_ms }).await;
                    match r {
                        Ok(PeerReply::Connected { conn: remote, size }) => {
                            let conn = self.node.lock().add_proxied(sid, node, id, size, remote, None);
                            (Ok(Reply::Connected { conn, size }), vec![])
                        }
                        Ok(other) => (Err(Error::Protocol(format!("unexpected answer {other:?}"))), vec![]),
                        Err(e) => (Err(e), vec![]),
                    }
                }
                Route::Unknown => (Err(Error::NoSuchNode), vec![]),
            },
            Request::Disconnect { conn } => {
                let r = self.node.lock().disconnect(sid, conn);
                match r {
                    Ok((ConnKind::Proxied { remote }, node)) => {
                        if let Some(p) = self.proxies.get(&node) {
                            let _ = p.request(Request::Disconnect { conn: remote }).await;
                        }
                        (Ok(Reply::Ok), vec![])
                    }
                    Ok((ConnKind::Remote { remote }, node)) => {
                        let _ = self.ask_tcp(node, PeerRequest::Disconnect { conn: remote }).await;
                        (Ok(Reply::Ok), vec![])
                    }
                    Ok(_) => (Ok(Reply::Ok), vec![]),
                    Err(e) => (Err(e), vec![]),
                }
            }
            Request::MapNote { map, target, offset, size, readonly } => {
                self.node
                    .lock()
                    .map_note(sid, MapStatus { session: sid, map, target, offset, size, readonly });
                (Ok(Reply::Ok), vec![])
            }
            Request::UnmapNote { map } => {
                self.node.lock().unmap_note(sid, map);
                (Ok(Reply::Ok), vec![])
            }
            Request::Probe { node } => {
                let reachable = match route(&self.node, node) {
                    Route::Me => true,
                    Route::Local => peer::probe(&self.node, node).await,
                    Route::Tcp => matches!(
                        tokio::time::timeout(Duration::from_secs(2), self.ask_tcp(node, PeerRequest::Probe))
                            .await,
                        Ok(Ok(_))
                    ),
                    Route::Unknown => false,
                };
                (Ok(Reply::Probe { reachable }), vec![])
            }
            Request::SegRead { conn, offset, len } => {
                (self.seg_read(conn, offset, len).await.map(Reply::Data), vec![])
            }
            Request::SegWrite { conn, runs } => (self.seg_write(conn, runs).await.map(|_| Reply::Ok), vec![]),
            Request::DsmFlow { conn } => match self.dsm_flow(conn).await {
                Ok((reply, fd)) => (Ok(reply), vec![fd]),
                Err(e) => (Err(e), vec![]),
            },
            Request::TriggerInterrupt { intr, data } => {
                let target = self
                    .node
                    .lock()
                    .intr_conns
                    .get(&intr)
                    .filter(|c| c.session == sid)
                    .map(|c| (c.target, c.node));
                match target {
                    Some((ConnKind::Remote { remote }, node)) => {
                        let r = self.ask_tcp(node, PeerRequest::Trigger { intr: remote, data }).await;
                        (r.map(|_| Reply::Ok), vec![])
                    }
                    Some((ConnKind::Proxied { remote }, node)) => match self.proxies.get(&node) {
                        Some(p) => match p.request(Request::TriggerInterrupt { intr: remote, data }).await {
                            Ok((r, _)) => (r, vec![]),
                            Err(e) => (Err(e), vec![]),
                        },
                        None => (Err(Error::NodeNotResponding), vec![]),
                    },
                    Some((ConnKind::Local { .. }, _)) => {
                        ok(self.node.lock().trigger_interrupt(sid, intr, data.as_deref()))
                    }
                    None => (Err(Error::UnknownHandle), vec![]),
                }
            }
            Request::CreateInterrupt { intno, data, shared } => {
                let made = self.node.lock().create_interrupt(sid, intno, data, shared);
                match made {
                    Ok((intr, intno, page, ev, fanout)) => {
                        if let Some(fanout) = fanout {
                            tokio::spawn(fan_out(self.node.clone(), intno, fanout));
                        }
                        (Ok(Reply::Interrupt { intr, intno }), vec![page, ev])
                    }
                    Err(e) => (Err(e), vec![]),
                }
            }
            Request::RemoveInterrupt { intr } => ok(self.node.lock().remove_interrupt(sid, intr)),
            Request::ConnectInterrupt { node, intno, data, timeout_ms } => {
                let tcp = route(&self.node, node) == Route::Tcp;
                if tcp && !matches!(self.role, Role::Peer { .. }) {
                    let r =
                        self.ask_tcp(node, PeerRequest::ConnectInterrupt { intno, data, timeout_ms }).await;
                    return match r {
                        Ok(PeerReply::Interrupt { intr: remote, intno }) => {
                            let conn =
                                self.node.lock().add_proxied_interrupt(sid, node, intno, data, remote, true);
                            (Ok(Reply::Interrupt { intr: conn, intno }), vec![])
                        }
                        Ok(other) => (Err(Error::Protocol(format!("unexpected answer {other:?}"))), vec![]),
                        Err(e) => (Err(e), vec![]),
                    };
                }
                if node == self.me() {
                    let importer = self.importer_node();
                    let r = self
                        .wait_until(timeout_ms, Error::NoSuchIntno, |reg| {
                            reg.connect_interrupt(sid, importer, intno, data)
                        })
                        .await;
                    match r {
                        Ok((conn, page, ev)) => (Ok(Reply::Interrupt { intr: conn, intno }), vec![page, ev]),
                        Err(e) => (Err(e), vec![]),
                    }
                } else if matches!(self.role, Role::Peer { .. }) {
                    (Err(Error::NoSuchNode), vec![])
                } else {
                    self.connect_interrupt_remote(node, intno, data, timeout_ms).await
                }
            }
            Request::DisconnectInterrupt { intr } => {
                let r = self.node.lock().disconnect_interrupt(sid, intr);
                match r {
                    Ok(c) => {
                        if let (ConnKind::Proxied { remote }, Some(p)) = (c.target, self.proxies.get(&c.node))
                        {
                            let _ = p.request(Request::DisconnectInterrupt { intr: remote }).await;
                        }
                        if let ConnKind::Remote { remote } = c.target {
                            let _ =
                                self.ask_tcp(c.node, PeerRequest::DisconnectInterrupt { intr: remote }).await;
                        }
                        (Ok(Reply::Ok), vec![])
                    }
                    Err(e) => (Err(e), vec![]),
                }
            }
            Request::CreateDmaQueue { max_entries } => self.create_dma(max_entries),
            Request::RemoveDmaQueue { queue } => ok(self.node.lock().remove_dma(sid, queue)),
            Request::Scif(_) => (Err(Error::Access), vec![]),
            Request::Status => {
                let up = self.node.started.elapsed().as_secs();
                let mut st = self.node.lock().status(std::process::id(), self.node.config.auto_started, up);
                let links: Vec<_> =
                    self.node.links.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
                st.peers = links
                    .iter()
                    .map(|l| remora_proto::PeerStatus {
                        node: l.id,
                        addr: l.addr.clone(),
                        state: match l.state() {
                            LinkState::Up => "up",
                            LinkState::NotOperational => "not operational",
                            LinkState::Down => "down",
                            LinkState::Lost => "lost",
                        }
                        .into(),
                        rtt_us: l.rtt_us(),
                        bytes_in: l.bytes_in.load(std::sync::atomic::Ordering::Relaxed),
                        bytes_out: l.bytes_out.load(std::sync::atomic::Ordering::Relaxed),
                    })
                    .collect();
                st.peers.sort_by_key(|p| p.node);
                (Ok(Reply::Status(st)), vec![])
            }
            Request::Shutdown => {
                self.node.shutdown.notify_one();
                (Ok(Reply::Ok), vec![])
            }
        }
    }

    /// The SCIF requests of an endpoint's session.
    async fn scif(&mut self, req: ScifRequest, mut fds: Vec<OwnedFd>) -> Outcome {
        let sid = self.sid;
        let me = self.me();
        match req {
            ScifRequest::Bind { port, privileged } => {
                let r = self.node.lock().scif.bind(sid, port, privileged && self.uid == 0);
                (r.map(|port| Reply::ScifPort { port }), vec![])
            }
            ScifRequest::Listen { backlog } => {
                let r = self.node.lock().scif.listen(sid, backlog, fds);
                (r.map(|token| Reply::ScifListening { token }), vec![])
            }
            ScifRequest::Connect { node, port, from_node, from_port } => {
                if fds.len() != 1 {
                    return (Err(Error::IllegalParameter("connect needs a doorbell".into())), vec![]);
                }
                let ringer = fds.remove(0);
                if node != me {
                    return match route(&self.node, node) {
                        Route::Tcp => self.scif_connect_out(node, port, (from_node, from_port), ringer).await,
                        Route::Local => (Ok(Reply::ScifDialDirect), vec![]),
                        _ => (Err(Error::NoSuchNode), vec![]),
                    };
                }
                let queued = self.node.lock().scif.request(sid, port, (from_node, from_port), ringer, None);
                let (id, rx) = match queued {
                    Ok(x) => x,
                    Err(e) => return (Err(e), vec![]),
                };
                self.node.changed.notify_waiters();
                let answer = tokio::select! {
                    a = rx => a.unwrap_or(Err(Error::ConnRefused)),
                    _ = self.conn.hangup() => {
                        self.node.lock().scif.withdraw(port, id);
                        return (Err(Error::Protocol("caller hung up".into())), vec![]);
                    }
                };
                match answer {
                    Ok(a) => (
                        Ok(Reply::ScifConnected {
                            side: 0,
                            remote: false,
                            peer_node: a.peer.0,
                            peer_port: a.peer.1,
                        }),
                        vec![a.region, a.peer_ringer],
                    ),
                    Err(e) => (Err(e), vec![]),
                }
            }
            ScifRequest::Accept { port, token, sync } => {
                if fds.len() != 1 {
                    return (Err(Error::IllegalParameter("accept needs a doorbell".into())), vec![]);
                }
                let ringer = fds.remove(0);
                let attempt = |reg: &mut crate::registry::Registry| match reg
                    .scif
                    .accept(sid, me, port, token, &ringer)
                {
                    Ok(x) => Ok(x),
                    Err(Error::Again) if sync => Err(ConnectWait::Unavailable),
                    Err(e) => Err(ConnectWait::Failed(e)),
                };
                match self.wait_until(None, Error::Again, attempt).await {
                    Ok((region, theirs, from, remote)) => (
                        Ok(Reply::ScifConnected { side: 1, remote, peer_node: from.0, peer_port: from.1 }),
                        vec![region, theirs],
                    ),
                    Err(e) => (Err(e), vec![]),
                }
            }
            ScifRequest::Register { offset, len, prot, fixed, memfd_offset } => {
                if fds.len() != 1 || !is_memfd(&fds[0]) {
                    return (Err(Error::IllegalParameter("register needs exactly one memfd".into())), vec![]);
                }
                let memfd = match remora_sys::Memfd::from_fd(fds.remove(0)) {
                    Ok(m) if m.is_size_sealed() => m,
                    Ok(_) => return (Err(Error::IllegalParameter("memfd not sealed".into())), vec![]),
                    Err(e) => return (Err(Error::System(e.to_string())), vec![]),
                };
                let r = self.node.lock().scif.register(sid, offset, len, prot, fixed, memfd_offset, memfd);
                (r.map(|offset| Reply::ScifOffset { offset }), vec![])
            }
            ScifRequest::Unregister { offset, len } => {
                (self.node.lock().scif.unregister(sid, offset, len).map(|_| Reply::Ok), vec![])
            }
            ScifRequest::Windows { peer, from } => match self.node.lock().scif.windows(sid, peer, from) {
                Ok((list, fds)) => (Ok(Reply::ScifWindows(list)), fds),
                Err(e) => (Err(e), vec![]),
            },
            ScifRequest::Close => {
                self.node.lock().scif.close(sid);
                (Ok(Reply::Ok), vec![])
            }
            ScifRequest::RemoteWrite { offset, data } => {
                let far = self.node.lock().scif.far_of(sid);
                let r = match far {
                    Ok((node, conn)) => {
                        self.ask_tcp(node, PeerRequest::ScifWrite { conn, offset, data }).await
                    }
                    Err(e) => Err(e),
                };
                (r.map(|_| Reply::Ok), vec![])
            }
            ScifRequest::RemoteCheck { offset, len, prot } => {
                let far = self.node.lock().scif.far_of(sid);
                let r = match far {
                    Ok((node, conn)) => {
                        self.ask_tcp(node, PeerRequest::ScifCheck { conn, offset, len, prot }).await
                    }
                    Err(e) => Err(e),
                };
                (r.map(|_| Reply::Ok), vec![])
            }
            ScifRequest::RemoteRead { offset, len } => {
                let far = self.node.lock().scif.far_of(sid);
                let r = match far {
                    Ok((node, conn)) => self.ask_tcp(node, PeerRequest::ScifRead { conn, offset, len }).await,
                    Err(e) => Err(e),
                };
                match r {
                    Ok(PeerReply::Data(v)) if v.len() == len as usize => (Ok(Reply::Data(v)), vec![]),
                    Ok(other) => (Err(Error::Protocol(format!("unexpected answer {other:?}"))), vec![]),
                    Err(e) => (Err(e), vec![]),
                }
            }
            ScifRequest::PagerFlow => {
                let far = self.node.lock().scif.far_of(sid);
                match far {
                    Ok((node, conn)) => match self.pager_flow_to(node, LinkMsg::PagerBindScif { conn }).await
                    {
                        Ok(fd) => (Ok(Reply::DsmFlow { remote: conn, size: u64::MAX }), vec![fd]),
                        Err(e) => (Err(e), vec![]),
                    },
                    Err(e) => (Err(e), vec![]),
                }
            }
            ScifRequest::Nodes => {
                let mut nodes = remora_proto::paths::nodes_in(&self.node.config.runtime_dir);
                nodes.push(me);
                let links: Vec<_> =
                    self.node.links.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
                nodes.extend(links.iter().filter(|l| l.state() == LinkState::Up).map(|l| l.id));
                nodes.sort_unstable();
                nodes.dedup();
                (Ok(Reply::ScifNodes(nodes)), vec![])
            }
        }
    }

    /// `scif_connect` to a listener on a node of another host: book the connection here,
    /// ask that node over the link, and start the relay once it accepts.
    async fn scif_connect_out(&mut self, node: u32, port: u16, from: (u32, u16), ringer: OwnedFd) -> Outcome {
        let sys = |e: std::io::Error| Error::System(e.to_string());
        let made = (|| {
            let (reader, proxy_ringer) = remora_sys::bell::pair().map_err(sys)?;
            let theirs = proxy_ringer.try_clone().map_err(sys)?;
            let keep = proxy_ringer.try_clone().map_err(sys)?;
            let booked = self.node.lock().scif.connect_out(self.sid, ringer, proxy_ringer)?;
            Ok::<_, Error>((reader, theirs, keep, booked))
        })();
        let (reader, theirs, keep, (conn, region, region_fd, rx)) = match made {
            Ok(x) => x,
            Err(e) => return (Err(e), vec![]),
        };
        let peer = self.node.links.lock().unwrap_or_else(|p| p.into_inner()).get(&node).cloned();
        let Some(peer) = peer else {
            self.node.lock().scif.abort_out(self.sid);
            return (Err(Error::NoSuchNode), vec![]);
        };
        let origin = crate::scif_link::origin_of(conn);
        let req = PeerRequest::ScifConnect { port, from, conn };
        let answer = tokio::select! {
            a = peer.request(origin, req) => a,
            _ = self.conn.hangup() => Err(Error::Protocol("caller hung up".into())),
        };
        match answer {
            Ok(PeerReply::ScifAccepted { conn: far, port: far_port }) => {
                let local_ringer = {
                    let mut reg = self.node.lock();
                    reg.scif.set_far(conn, node, far);
                    reg.scif.local_ringer(conn, 0)
                };
                let Some(local_ringer) = local_ringer else {
                    return (Err(Error::NotConnected), vec![]);
                };
                let start = crate::scif::RelayStart {
                    conn,
                    region,
                    local: 0,
                    ringer: local_ringer,
                    proxy_ringer: keep,
                    remote: crate::scif::RemoteEnd { node, conn: far, reader },
                    rx,
                };
                crate::scif_link::spawn(self.node.clone(), start);
                let reply =
                    Reply::ScifConnected { side: 0, remote: true, peer_node: node, peer_port: far_port };
                (Ok(reply), vec![region_fd, theirs])
            }
            other => {
                self.node.lock().scif.abort_out(self.sid);
                peer.session_end(origin);
                let e = match other {
                    Err(e) => e,
                    Ok(o) => Error::Protocol(format!("unexpected answer {o:?}")),
                };
                (Err(e), vec![])
            }
        }
    }

    /// Read bytes of a connection's segment: mapped here, or asked of its node over TCP.
    async fn seg_read(&self, conn: u64, offset: u64, len: u32) -> Result<Vec<u8>, Error> {
        if len as usize > remora_proto::MAX_DATA_IO {
            return Err(Error::IllegalParameter(format!("read of {len} bytes")));
        }
        let target = self.node.lock().dma_remote(self.sid, conn).map_err(|_| Error::NotConnected)?;
        match target {
            DmaTarget::Map(m) => {
                let mut v = vec![0u8; len as usize];
                m.read(offset as usize, &mut v).map_err(|_| Error::OutOfRange)?;
                Ok(v)
            }
            DmaTarget::Tcp { node, remote, size } => {
                if offset.checked_add(len as u64).is_none_or(|e| e > size) {
                    return Err(Error::OutOfRange);
                }
                match self.ask_tcp(node, PeerRequest::Read { conn: remote, offset, len }).await? {
                    PeerReply::Data(v) if v.len() == len as usize => Ok(v),
                    other => Err(Error::Protocol(format!("unexpected answer {other:?}"))),
                }
            }
        }
    }

    /// Store runs into a connection's segment: mapped here, or sent to its node over TCP.
    async fn seg_write(&self, conn: u64, runs: Vec<(u64, Vec<u8>)>) -> Result<(), Error> {
        let total: usize = runs.iter().map(|r| r.1.len()).sum();
        if total > remora_proto::MAX_DATA_IO {
            return Err(Error::IllegalParameter(format!("write of {total} bytes")));
        }
        let target = self.node.lock().dma_remote(self.sid, conn).map_err(|_| Error::NotConnected)?;
        let size = match &target {
            DmaTarget::Map(m) => m.len() as u64,
            DmaTarget::Tcp { size, .. } => *size,
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
            DmaTarget::Tcp { node, remote, .. } => {
                self.ask_tcp(node, PeerRequest::Write { conn: remote, runs }).await.map(|_| ())
            }
        }
    }

    /// Dial a pager flow to the node of connection `conn`'s segment for the caller's DSM
    /// pager (`Request::DsmFlow`).
    async fn dsm_flow(&self, conn: u64) -> Result<(Reply, OwnedFd), Error> {
        let target = self.node.lock().dma_remote(self.sid, conn).map_err(|_| Error::NotConnected)?;
        let DmaTarget::Tcp { node, remote, size } = target else {
            return Err(Error::IllegalParameter("the segment is on this host".into()));
        };
        let fd = self.pager_flow_to(node, LinkMsg::PagerBind { conn: remote }).await?;
        Ok((Reply::DsmFlow { remote, size }, fd))
    }

    /// Dial a pager flow to node `node`, bound by `bind`, for the caller's DSM pager.
    async fn pager_flow_to(&self, node: u32, bind: LinkMsg) -> Result<OwnedFd, Error> {
        let peer = self.node.links.lock().unwrap_or_else(|p| p.into_inner()).get(&node).cloned();
        let peer = peer.ok_or(Error::NoSuchNode)?;
        let me = self.node.clone();
        let s = tokio::task::spawn_blocking(move || peer.dial_pager(&me, bind))
            .await
            .map_err(|e| Error::Protocol(e.to_string()))?
            .map_err(|e| Error::Protocol(format!("pager flow to node {node}: {e}")))?;
        Ok(OwnedFd::from(s))
    }

    /// Ask node `node` over the `tcp` transport, giving up if the caller hangs up.
    async fn ask_tcp(&self, node: u32, req: PeerRequest) -> Result<PeerReply, Error> {
        let peer = self.node.links.lock().unwrap_or_else(|p| p.into_inner()).get(&node).cloned();
        let Some(peer) = peer else { return Err(Error::NoSuchNode) };
        tokio::select! {
            r = peer.request(self.sid, req) => r,
            _ = self.conn.hangup() => Err(Error::Protocol("caller hung up".into())),
        }
    }

    fn importer_node(&self) -> u32 {
        match self.role {
            Role::Peer { node } => node,
            _ => self.me(),
        }
    }

    async fn connect_local(&self, id: u32, timeout_ms: Option<u32>) -> Outcome {
        let importer = self.importer_node();
        let sid = self.sid;
        match self
            .wait_until(timeout_ms, Error::NoSuchSegment, |reg| reg.connect_local(sid, importer, id))
            .await
        {
            Ok((conn, size, fd)) => (Ok(Reply::Connected { conn, size }), vec![fd.into_fd()]),
            Err(e) => (Err(e), vec![]),
        }
    }

    /// Retry `attempt` whenever the books change, until it succeeds, fails hard, the time
    /// runs out (`missing` if the thing never existed, else `Timeout`), or the caller hangs up.
    async fn wait_until<T>(
        &self,
        timeout_ms: Option<u32>,
        missing: Error,
        mut attempt: impl FnMut(&mut crate::registry::Registry) -> Result<T, ConnectWait>,
    ) -> Result<T, Error> {
        let deadline = timeout_ms.map(|t| Instant::now() + Duration::from_millis(t as u64));
        loop {
            let notified = self.node.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let last = match attempt(&mut self.node.lock()) {
                Ok(x) => return Ok(x),
                Err(ConnectWait::Failed(e)) => return Err(e),
                Err(w) => w,
            };
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if remaining == Some(Duration::ZERO) {
                return Err(match last {
                    ConnectWait::Missing => missing,
                    _ => Error::Timeout,
                });
            }
            let sleep = tokio::time::sleep(remaining.unwrap_or(Duration::from_secs(3600)));
            tokio::select! {
                _ = &mut notified => {}
                _ = sleep => {}
                _ = self.conn.hangup() => return Err(Error::Protocol("caller hung up".into())),
            }
        }
    }

    fn create_dma(&self, max: u32) -> Outcome {
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
        let queue = self.node.lock().add_dma(self.sid, page.clone(), max);
        crate::dma::spawn(self.node.clone(), self.sid, self.pid, page);
        (Ok(Reply::DmaQueue { queue }), vec![memfd.into_fd(), ev.into_fd()])
    }

    async fn connect_interrupt_remote(
        &mut self,
        node: u32,
        intno: u32,
        data: bool,
        timeout_ms: Option<u32>,
    ) -> Outcome {
        if !self.proxies.contains_key(&node) {
            match Proxy::open(&self.node, self.sid, node, self.events.clone()).await {
                Ok(p) => {
                    self.proxies.insert(node, p);
                }
                Err(e) => return (Err(e), vec![]),
            }
        }
        let proxy = &self.proxies[&node];
        let req = Request::ConnectInterrupt { node, intno, data, timeout_ms };
        let answer = tokio::select! {
            a = proxy.request(req) => a,
            _ = self.conn.hangup() => return (Err(Error::Protocol("caller hung up".into())), vec![]),
        };
        match answer {
            Ok((Ok(Reply::Interrupt { intr: remote, intno }), fds)) if fds.len() == 2 => {
                let conn = self.node.lock().add_proxied_interrupt(self.sid, node, intno, data, remote, false);
                (Ok(Reply::Interrupt { intr: conn, intno }), fds)
            }
            Ok((Ok(other), _)) => (Err(Error::Protocol(format!("unexpected answer {other:?}"))), vec![]),
            Ok((Err(e), _)) => (Err(e), vec![]),
            Err(e) => {
                self.proxies.remove(&node);
                (Err(e), vec![])
            }
        }
    }

    async fn connect_remote(&mut self, node: u32, id: u32, timeout_ms: Option<u32>) -> Outcome {
        if !self.proxies.contains_key(&node) {
            match Proxy::open(&self.node, self.sid, node, self.events.clone()).await {
                Ok(p) => {
                    self.proxies.insert(node, p);
                }
                Err(e) => return (Err(e), vec![]),
            }
        }
        let proxy = &self.proxies[&node];
        let req = Request::Connect { node, id, timeout_ms };
        let answer = tokio::select! {
            a = proxy.request(req) => a,
            _ = self.conn.hangup() => return (Err(Error::Protocol("caller hung up".into())), vec![]),
        };
        match answer {
            Ok((Ok(Reply::Connected { conn: remote, size }), fds)) if fds.len() == 1 => {
                let keep = fds[0].try_clone().ok().and_then(|fd| remora_sys::Memfd::from_fd(fd).ok());
                // Never trust a size larger than the memory that came with it.
                let size = keep.as_ref().map_or(size, |m| size.min(m.size()));
                let conn = self.node.lock().add_proxied(self.sid, node, id, size, remote, keep);
                (Ok(Reply::Connected { conn, size }), fds)
            }
            Ok((Ok(other), _)) => (Err(Error::Protocol(format!("unexpected answer {other:?}"))), vec![]),
            Ok((Err(e), _)) => (Err(e), vec![]),
            Err(e) => {
                self.proxies.remove(&node);
                (Err(e), vec![])
            }
        }
    }
}
