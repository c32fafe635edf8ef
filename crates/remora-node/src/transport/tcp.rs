//! The `tcp` transport: nodes of other hosts, reached at their cluster-file address.
//!
//! Every pair of nodes keeps two authenticated TCP connections (see `remora_proto::link`):
//! a control flow served by tokio tasks, and a bulk flow served by one plain thread per
//! direction that moves DMA payload straight between the socket and the segment mappings.
//! The node with the smaller id dials; the other listens. Heartbeats go every
//! `heartbeat_ms`; after three silent periods the link is *not operational*, and when
//! frames come again it is *operational*. A broken connection is redialled with back-off;
//! a peer that refuses connections (its daemon is gone) or comes back with another
//! incarnation (it restarted) is *lost*: every connection to it fails for good.

use crate::registry::{ConnKind, ConnectWait};
use crate::Node;
use hmac::{Hmac, Mac};
use remora_proto::link::*;
use remora_proto::{decode, encode, Error, Event, LostReason, Role, VERSION};
use remora_sys::Mapping;
use sha2::Sha256;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream as StdStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};

/// The link's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Never connected yet.
    Down,
    /// Connected, heartbeats answered.
    Up,
    /// Connected or reconnecting, but silent past the heartbeat budget.
    NotOperational,
    /// The peer is gone or restarted; a new connection starts afresh.
    Lost,
}

type Pending = HashMap<u64, oneshot::Sender<Result<PeerReply, Error>>>;

/// What waits for a bulk operation's answer.
enum BulkWait {
    Ack(std::sync::mpsc::Sender<bool>),
    Read { dest: Arc<Mapping>, off: usize, len: u64, done: std::sync::mpsc::Sender<bool> },
}

/// One remote node.
pub struct TcpPeer {
    /// Its node id.
    pub id: u32,
    /// Its address.
    pub addr: String,
    node: Weak<Node>,
    state: Mutex<LinkState>,
    ctrl: Mutex<Option<mpsc::UnboundedSender<LinkMsg>>>,
    pending: Mutex<Pending>,
    next: AtomicU64,
    last_rx: Mutex<Instant>,
    peer_incarnation: AtomicU64,
    rtt_us: AtomicU64,
    /// Bytes received.
    pub bytes_in: AtomicU64,
    /// Bytes sent.
    pub bytes_out: AtomicU64,
    bulk: Mutex<Option<(StdStream, std::sync::mpsc::Sender<BulkOut>)>>,
    /// The pager flows this peer's processes hold to us (shut down when the peer is lost).
    /// With what each is bound to, once its first frame came.
    pager_flows: Mutex<HashMap<u64, (StdStream, Option<Bound>)>>,
    bulk_wait: Mutex<HashMap<u64, BulkWait>>,
    inbound: Mutex<Option<mpsc::UnboundedSender<(TcpStream, u64)>>>,
    changed: Notify,
    /// Sessions of this node that hold something at the peer (for SessionEnd).
    vsessions: Mutex<HashMap<u64, u64>>,
    /// Sessions that ended while the link was down: told when it comes back.
    ended: Mutex<Vec<u64>>,
    /// Sessions made here for the peer's sessions: its session → ours.
    served: Mutex<HashMap<u64, u64>>,
}

impl std::fmt::Debug for TcpPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpPeer").field("id", &self.id).field("addr", &self.addr).finish()
    }
}

fn mac_state(secret: &[u8], label: &[u8], a: &[u8; 32], b: &[u8; 32], x: u32, y: u32) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key length");
    m.update(label);
    m.update(a);
    m.update(b);
    m.update(&x.to_le_bytes());
    m.update(&y.to_le_bytes());
    m
}

fn mac(secret: &[u8], label: &[u8], a: &[u8; 32], b: &[u8; 32], x: u32, y: u32) -> [u8; 32] {
    mac_state(secret, label, a, b, x, y).finalize().into_bytes().into()
}

/// Whether `given` is the MAC of these inputs, compared in constant time (a timing
/// difference must not tell a forger how many leading bytes were right).
fn mac_ok(given: &[u8; 32], secret: &[u8], label: &[u8], a: &[u8; 32], b: &[u8; 32], x: u32, y: u32) -> bool {
    mac_state(secret, label, a, b, x, y).verify_slice(given).is_ok()
}

fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    let _ = rustix::rand::getrandom(&mut n, rustix::rand::GetRandomFlags::empty());
    n
}

/// A fresh incarnation number for this daemon start.
pub fn new_incarnation() -> u64 {
    let n = nonce();
    u64::from_le_bytes(n[..8].try_into().expect("8 bytes")) | 1
}

fn write_frame(w: &mut impl Write, msg: &impl serde::Serialize) -> std::io::Result<usize> {
    let body = encode(msg).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    w.write_all(&out)?;
    Ok(out.len())
}

fn read_frame<T: serde::de::DeserializeOwned>(r: &mut impl Read) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_LINK_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame of {n} bytes")));
    }
    let mut buf = vec![0u8; n];
    r.read_exact(&mut buf)?;
    decode(&buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

async fn read_frame_async(r: &mut (impl AsyncReadExt + Unpin)) -> std::io::Result<(LinkMsg, usize)> {
    let n = r.read_u32_le().await? as usize;
    if n > MAX_LINK_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame of {n} bytes")));
    }
    let mut buf = vec![0u8; n];
    r.read_exact(&mut buf).await?;
    let m = decode(&buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok((m, n + 4))
}

fn refuse(s: &mut StdStream, why: String) -> std::io::Error {
    let _ = write_frame(s, &LinkMsg::Refused { reason: why.clone() });
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, why)
}

/// Dialer side of the handshake (blocking). Returns the peer's incarnation.
fn dial_handshake(s: &mut StdStream, me: &Node, to: u32, flow: Flow) -> std::io::Result<u64> {
    let secret = &me.config.cluster.as_ref().expect("tcp needs a cluster").secret;
    let mine = nonce();
    write_frame(
        s,
        &LinkMsg::Hello {
            version: VERSION,
            node: me.config.node,
            to,
            flow,
            nonce: mine,
            incarnation: me.incarnation,
        },
    )?;
    match read_frame::<LinkMsg>(s)? {
        LinkMsg::Challenge { node, nonce: theirs, incarnation, mac: m } => {
            if node != to {
                return Err(refuse(s, format!("expected node {to}, answered by node {node}")));
            }
            if !mac_ok(&m, secret, b"remora-listener", &mine, &theirs, me.config.node, to) {
                return Err(refuse(s, format!("node {to} failed authentication")));
            }
            write_frame(
                s,
                &LinkMsg::Auth { mac: mac(secret, b"remora-dialer", &theirs, &mine, me.config.node, to) },
            )?;
            match read_frame::<LinkMsg>(s)? {
                LinkMsg::Welcome => Ok(incarnation),
                LinkMsg::Refused { reason } => {
                    Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, reason))
                }
                other => Err(std::io::Error::other(format!("unexpected {other:?}"))),
            }
        }
        LinkMsg::Refused { reason } => Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, reason)),
        other => Err(std::io::Error::other(format!("unexpected {other:?}"))),
    }
}

/// Listener side of the handshake (blocking). Returns (node, flow, incarnation).
fn accept_handshake(s: &mut StdStream, me: &Node) -> std::io::Result<(u32, Flow, u64)> {
    let cluster = me.config.cluster.as_ref().expect("tcp needs a cluster");
    let (node, to, flow, theirs, incarnation) = match read_frame::<LinkMsg>(s)? {
        LinkMsg::Hello { version, node, to, flow, nonce, incarnation } => {
            if version != VERSION {
                return Err(refuse(s, format!("protocol version {version}, this node speaks {VERSION}")));
            }
            (node, to, flow, nonce, incarnation)
        }
        other => return Err(refuse(s, format!("expected a hello, got {other:?}"))),
    };
    if to != me.config.node {
        return Err(refuse(s, format!("this is node {}, not node {to}", me.config.node)));
    }
    if cluster.addr(node).is_none() {
        return Err(refuse(s, format!("node {node} is not in the cluster file")));
    }
    let mine = nonce();
    let m = mac(&cluster.secret, b"remora-listener", &theirs, &mine, node, me.config.node);
    write_frame(
        s,
        &LinkMsg::Challenge { node: me.config.node, nonce: mine, incarnation: me.incarnation, mac: m },
    )?;
    match read_frame::<LinkMsg>(s)? {
        LinkMsg::Auth { mac: m }
            if mac_ok(&m, &cluster.secret, b"remora-dialer", &mine, &theirs, node, me.config.node) =>
        {
            write_frame(s, &LinkMsg::Welcome)?;
            Ok((node, flow, incarnation))
        }
        LinkMsg::Auth { .. } => Err(refuse(s, format!("node {node} failed authentication"))),
        other => Err(refuse(s, format!("expected auth, got {other:?}"))),
    }
}

impl TcpPeer {
    fn new(node: &Arc<Node>, id: u32, addr: String) -> TcpPeer {
        TcpPeer {
            id,
            addr,
            node: Arc::downgrade(node),
            state: Mutex::new(LinkState::Down),
            ctrl: Mutex::new(None),
            pending: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            last_rx: Mutex::new(Instant::now()),
            peer_incarnation: AtomicU64::new(0),
            rtt_us: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            bulk: Mutex::new(None),
            pager_flows: Mutex::new(HashMap::new()),
            bulk_wait: Mutex::new(HashMap::new()),
            inbound: Mutex::new(None),
            changed: Notify::new(),
            vsessions: Mutex::new(HashMap::new()),
            ended: Mutex::new(Vec::new()),
            served: Mutex::new(HashMap::new()),
        }
    }

    /// The link's state.
    pub fn state(&self) -> LinkState {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last heartbeat round trip.
    pub fn rtt_us(&self) -> u64 {
        self.rtt_us.load(Ordering::Relaxed)
    }

    fn send(&self, m: LinkMsg) -> bool {
        match self.ctrl.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(tx) => tx.send(m).is_ok(),
            None => false,
        }
    }

    /// Ask the peer, for session `origin` of this node; waits for the answer (or the link's
    /// loss). Waits for a link that is coming up, for up to 5 seconds.
    pub async fn request(&self, origin: u64, req: PeerRequest) -> Result<PeerReply, Error> {
        let t = Instant::now();
        while self.ctrl.lock().unwrap_or_else(|p| p.into_inner()).is_none() {
            if self.state() == LinkState::Lost && t.elapsed() > Duration::from_millis(500)
                || t.elapsed() > Duration::from_secs(5)
            {
                return Err(Error::NodeNotResponding);
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), self.changed.notified()).await;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id, tx);
        self.vsessions.lock().unwrap_or_else(|p| p.into_inner()).insert(origin, origin);
        if !self.send(LinkMsg::Request { id, origin, req }) {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            return Err(Error::NodeNotResponding);
        }
        rx.await.unwrap_or(Err(Error::NodeNotResponding))
    }

    /// Session `origin` of this node ended: tell the peer to release what it held for it.
    pub fn session_end(&self, origin: u64) {
        if self.vsessions.lock().unwrap_or_else(|p| p.into_inner()).remove(&origin).is_some()
            && !self.send(LinkMsg::SessionEnd { origin })
        {
            self.ended.lock().unwrap_or_else(|p| p.into_inner()).push(origin);
        }
    }

    /// Queue a bulk frame for the link's writer thread; `wait` (for our own operations,
    /// never for replies) is registered under the frame's tag before it leaves. Never blocks
    /// on the socket, so a reader answering a request cannot deadlock against the peer.
    fn bulk_send(
        &self,
        hdr: BulkHeader,
        payload: Option<(Arc<Mapping>, usize)>,
        wait: Option<BulkWait>,
    ) -> Result<(), ()> {
        if let Some(wait) = wait {
            self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).insert(hdr.tag, wait);
        }
        let tx = self.bulk.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|(_, tx)| tx.clone());
        match tx.map(|tx| tx.send(BulkOut { hdr, payload })) {
            Some(Ok(())) => Ok(()),
            _ => {
                self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&hdr.tag);
                Err(())
            }
        }
    }

    /// Write `len` bytes from `src` at `src_off` into the peer's connection `conn` at
    /// `offset` (blocking; for DMA workers). `false` when the transfer failed.
    pub fn bulk_write(&self, conn: u64, offset: u64, src: &Arc<Mapping>, src_off: usize, len: usize) -> bool {
        let mut acks = Vec::new();
        let mut done = 0;
        while done < len {
            let n = (len - done).min(MAX_BULK_CHUNK);
            let (tx, rx) = std::sync::mpsc::channel();
            let tag = self.next.fetch_add(1, Ordering::Relaxed);
            let hdr = BulkHeader {
                op: BulkOp::Write,
                tag,
                conn,
                offset: offset + done as u64,
                len: n as u64,
                ok: true,
            };
            if self.bulk_send(hdr, Some((src.clone(), src_off + done)), Some(BulkWait::Ack(tx))).is_err() {
                return false;
            }
            acks.push(rx);
            done += n;
        }
        acks.into_iter().all(|rx| rx.recv_timeout(Duration::from_secs(60)).unwrap_or(false))
    }

    /// Read `len` bytes of the peer's connection `conn` at `offset` into `dest` at
    /// `dest_off` (blocking). `false` when the transfer failed.
    pub fn bulk_read(
        &self,
        conn: u64,
        offset: u64,
        dest: &Arc<Mapping>,
        dest_off: usize,
        len: usize,
    ) -> bool {
        let mut waits = Vec::new();
        let mut done = 0;
        while done < len {
            let n = (len - done).min(MAX_BULK_CHUNK);
            let (tx, rx) = std::sync::mpsc::channel();
            let tag = self.next.fetch_add(1, Ordering::Relaxed);
            let hdr = BulkHeader {
                op: BulkOp::Read,
                tag,
                conn,
                offset: offset + done as u64,
                len: n as u64,
                ok: true,
            };
            let wait = BulkWait::Read { dest: dest.clone(), off: dest_off + done, len: n as u64, done: tx };
            if self.bulk_send(hdr, None, Some(wait)).is_err() {
                return false;
            }
            waits.push((tag, rx));
            done += n;
        }
        let mut ok = true;
        for (tag, rx) in waits {
            if !rx.recv_timeout(Duration::from_secs(60)).unwrap_or(false) {
                // Late data for a failed job must not land later.
                self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
                ok = false;
            }
        }
        ok
    }

    fn fail_all(&self) {
        for (_, tx) in self.pending.lock().unwrap_or_else(|p| p.into_inner()).drain() {
            let _ = tx.send(Err(Error::NodeNotResponding));
        }
        self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).clear();
        if let Some((s, _)) = self.bulk.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn set_state(self: &Arc<Self>, new: LinkState) {
        let old = std::mem::replace(&mut *self.state.lock().unwrap_or_else(|p| p.into_inner()), new);
        if old == new {
            return;
        }
        tracing::info!(peer = self.id, "link {old:?} -> {new:?}");
        self.changed.notify_waiters();
        let Some(node) = self.node.upgrade() else { return };
        match new {
            LinkState::Up if old == LinkState::NotOperational => link_events(&node, self.id, true),
            LinkState::NotOperational if old == LinkState::Up => link_events(&node, self.id, false),
            LinkState::Lost => lose_peer(&node, self),
            _ => {}
        }
    }
}

/// Tell every session concerned that the route to `peer` works again or not.
fn link_events(node: &Node, peer: u32, operational: bool) {
    let reg = node.lock();
    let mut tell = Vec::new();
    for c in reg.conns.values() {
        if c.node == peer && matches!(c.kind, ConnKind::Remote { .. }) {
            tell.push((c.session, Event::ConnectionLink { conn: c.conn, operational }));
        }
        if c.importer_node == peer
            && reg.sessions.get(&c.session).is_some_and(|s| s.role == Role::Peer { node: peer })
        {
            if let ConnKind::Local { seg } = c.kind {
                if let Some(s) = reg.segments.get(&seg) {
                    tell.push((s.owner, Event::SegmentLink { seg, node: peer, operational }));
                }
            }
        }
    }
    for (s, ev) in tell {
        reg.tell_session(s, ev);
    }
    drop(reg);
    node.changed.notify_waiters();
}

/// The peer is gone or restarted: every connection to it is lost, and everything it held
/// here is released (owners hear `SegmentLost`).
fn lose_peer(node: &Node, peer: &TcpPeer) {
    for (_, (s, _)) in peer.pager_flows.lock().unwrap_or_else(|p| p.into_inner()).drain() {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    let mut reg = node.lock();
    reg.scif.lose_node(peer.id);
    let sessions: Vec<u64> = reg
        .conns
        .values()
        .filter(|c| c.node == peer.id && matches!(c.kind, ConnKind::Remote { .. }))
        .map(|c| c.session)
        .collect();
    for s in sessions {
        reg.lose_node(s, peer.id, LostReason::NodeGone);
    }
    let virtual_sessions: Vec<u64> = reg
        .sessions
        .iter()
        .filter(|(_, s)| s.role == Role::Peer { node: peer.id } && s.pid == 0)
        .map(|(k, _)| *k)
        .collect();
    for vs in virtual_sessions {
        let owners: Vec<(u64, u64)> = reg
            .conns
            .values()
            .filter(|c| c.session == vs)
            .filter_map(|c| match c.kind {
                ConnKind::Local { seg } => reg.segments.get(&seg).map(|s| (s.owner, seg)),
                _ => None,
            })
            .collect();
        for (owner, seg) in owners {
            reg.tell_session(owner, Event::SegmentLost { seg, node: peer.id });
        }
        reg.end_session(vs);
    }
    drop(reg);
    peer.vsessions.lock().unwrap_or_else(|p| p.into_inner()).clear();
    peer.ended.lock().unwrap_or_else(|p| p.into_inner()).clear();
    peer.served.lock().unwrap_or_else(|p| p.into_inner()).clear();
    node.changed.notify_waiters();
}

fn served_session(node: &Arc<Node>, peer: &Arc<TcpPeer>, origin: u64) -> u64 {
    let mut map = peer.served.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = map.get(&origin) {
        return *s;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sid = node.lock().add_session(0, Role::Peer { node: peer.id }, tx);
    map.insert(origin, sid);
    let p = peer.clone();
    tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            p.send(LinkMsg::Event { origin, event });
        }
    });
    sid
}

async fn wait_for<T>(
    node: &Node,
    timeout_ms: Option<u32>,
    missing: Error,
    mut attempt: impl FnMut(&mut crate::registry::Registry) -> Result<T, ConnectWait>,
) -> Result<T, Error> {
    let deadline = timeout_ms.map(|t| Instant::now() + Duration::from_millis(t as u64));
    loop {
        let notified = node.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let last = match attempt(&mut node.lock()) {
            Ok(x) => return Ok(x),
            Err(ConnectWait::Failed(e)) => return Err(e),
            Err(w) => w,
        };
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Err(match last {
                ConnectWait::Missing => missing,
                _ => Error::Timeout,
            });
        }
        let _ = tokio::time::timeout(left.unwrap_or(Duration::from_secs(3600)), &mut notified).await;
    }
}

/// A connecting endpoint's port id, with the node forced to the peer's own id (a node
/// cannot connect on another node's behalf).
fn from_node_check(from: (u32, u16), peer: u32) -> (u32, u16) {
    (peer, from.1)
}

/// Serve one request from `peer` for its session `origin`.
async fn serve_request(
    node: Arc<Node>,
    peer: Arc<TcpPeer>,
    origin: u64,
    req: PeerRequest,
) -> Result<PeerReply, Error> {
    let sid = served_session(&node, &peer, origin);
    let from = peer.id;
    let r = match req {
        PeerRequest::Probe => Ok(PeerReply::Ok),
        PeerRequest::Connect { id, timeout_ms } => wait_for(&node, timeout_ms, Error::NoSuchSegment, |reg| {
            if !reg.sessions.contains_key(&sid) {
                return Err(ConnectWait::Failed(Error::Protocol("the requesting session ended".into())));
            }
            reg.connect_local(sid, from, id)
        })
        .await
        .map(|(conn, size, _fd)| PeerReply::Connected { conn, size }),
        PeerRequest::Disconnect { conn } => node.lock().disconnect(sid, conn).map(|_| PeerReply::Ok),
        PeerRequest::ConnectInterrupt { intno, data, timeout_ms } => {
            wait_for(&node, timeout_ms, Error::NoSuchIntno, |reg| {
                if !reg.sessions.contains_key(&sid) {
                    return Err(ConnectWait::Failed(Error::Protocol("the requesting session ended".into())));
                }
                reg.connect_interrupt(sid, from, intno, data)
            })
            .await
            .map(|(intr, _, _)| PeerReply::Interrupt { intr, intno })
        }
        PeerRequest::DisconnectInterrupt { intr } => {
            node.lock().disconnect_interrupt(sid, intr).map(|_| PeerReply::Ok)
        }
        PeerRequest::Read { conn, offset, len } => {
            if len as usize > remora_proto::MAX_DATA_IO {
                Err(Error::IllegalParameter(format!("read of {len} bytes")))
            } else {
                match served_mapping(&node, &peer, conn, offset, len as u64) {
                    Some(m) => {
                        let mut v = vec![0u8; len as usize];
                        m.read(offset as usize, &mut v)
                            .map(|_| PeerReply::Data(v))
                            .map_err(|_| Error::OutOfRange)
                    }
                    None => Err(Error::OutOfRange),
                }
            }
        }
        PeerRequest::Write { conn, runs } => {
            let total: usize = runs.iter().map(|r| r.1.len()).sum();
            let maps: Option<Vec<_>> =
                runs.iter().map(|(o, d)| served_mapping(&node, &peer, conn, *o, d.len() as u64)).collect();
            match maps {
                _ if total > remora_proto::MAX_DATA_IO => {
                    Err(Error::IllegalParameter(format!("write of {total} bytes")))
                }
                Some(maps) => {
                    for (m, (o, d)) in maps.iter().zip(&runs) {
                        let _ = m.write(*o as usize, d);
                    }
                    Ok(PeerReply::Ok)
                }
                None => Err(Error::OutOfRange),
            }
        }
        PeerRequest::Trigger { intr, data } => {
            node.lock().trigger_interrupt(sid, intr, data.as_deref()).map(|_| PeerReply::Ok)
        }
        PeerRequest::ScifConnect { port, from, conn } => {
            crate::scif_link::serve_connect(&node, sid, from_node_check(from, peer.id), port, conn).await
        }
        PeerRequest::ScifData { conn, data } => {
            node.lock().scif.to_relay(conn, crate::scif::RelayIn::Data(data)).map(|_| PeerReply::Ok)
        }
        PeerRequest::ScifClose { conn } => {
            node.lock().scif.to_relay(conn, crate::scif::RelayIn::PeerClosed).map(|_| PeerReply::Ok)
        }
        PeerRequest::ScifWrite { conn, offset, data } => {
            crate::scif_link::serve_write(&node, peer.id, conn, offset, &data).map(|_| PeerReply::Ok)
        }
        PeerRequest::ScifCheck { conn, offset, len, prot } => {
            node.lock().scif.remote_rma_pieces(peer.id, conn, offset, len, prot & 3).map(|_| PeerReply::Ok)
        }
        PeerRequest::ScifRead { conn, offset, len } => {
            crate::scif_link::serve_read(&node, peer.id, conn, offset, len).map(PeerReply::Data)
        }
    };
    node.changed.notify_waiters();
    r
}

/// Start the transport: the listener and one task per cluster node on another host.
pub async fn start(node: Arc<Node>) -> std::io::Result<()> {
    let Some(cluster) = node.config.cluster.clone() else { return Ok(()) };
    let me = cluster
        .addr(node.config.node)
        .cloned()
        .ok_or_else(|| std::io::Error::other("this node is not in the cluster file"))?;
    let listener = tokio::net::TcpListener::bind((me.host.as_str(), me.port)).await?;
    tracing::info!("listening for peers on {}:{}", me.host, me.port);
    for n in &cluster.nodes {
        if n.id == node.config.node {
            continue;
        }
        let peer = Arc::new(TcpPeer::new(&node, n.id, format!("{}:{}", n.host, n.port)));
        node.links.lock().unwrap_or_else(|p| p.into_inner()).insert(n.id, peer.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        *peer.inbound.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        tokio::spawn(run_peer(node.clone(), peer, rx));
    }
    let n2 = node.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, from)) = listener.accept().await else { continue };
            let node = n2.clone();
            tokio::spawn(async move {
                if let Err(e) = accept_one(node, stream).await {
                    tracing::warn!(%from, "peer connection refused: {e}");
                }
            });
        }
    });
    Ok(())
}

async fn accept_one(node: Arc<Node>, stream: TcpStream) -> std::io::Result<()> {
    let std = stream.into_std()?;
    std.set_nonblocking(false)?;
    std.set_read_timeout(Some(Duration::from_secs(5)))?;
    let n2 = node.clone();
    let (std, peer_id, flow, inc) = tokio::task::spawn_blocking(move || {
        let mut s = std;
        accept_handshake(&mut s, &n2).map(|(p, f, i)| (s, p, f, i))
    })
    .await
    .map_err(std::io::Error::other)??;
    std.set_read_timeout(None)?;
    let peer = node
        .links
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&peer_id)
        .cloned()
        .ok_or_else(|| std::io::Error::other(format!("no link for node {peer_id}")))?;
    match flow {
        Flow::Control => {
            std.set_nonblocking(true)?;
            let tx = peer.inbound.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(tx) = tx {
                let _ = tx.send((TcpStream::from_std(std)?, inc));
            }
        }
        Flow::Bulk => start_bulk(&node, &peer, std)?,
        Flow::Pager => {
            if peer.peer_incarnation.load(Ordering::SeqCst) != inc {
                return Err(std::io::Error::other(format!(
                    "a pager flow from an unknown start of node {peer_id}"
                )));
            }
            let id = peer.next.fetch_add(1, Ordering::Relaxed);
            {
                let mut flows = peer.pager_flows.lock().unwrap_or_else(|p| p.into_inner());
                if flows.len() >= MAX_PAGER_FLOWS {
                    return Err(std::io::Error::other(format!(
                        "node {peer_id} holds {MAX_PAGER_FLOWS} pager flows already"
                    )));
                }
                flows.insert(id, (std.try_clone()?, None));
            }
            let _ = std.set_nodelay(true);
            // A process that stops reading cannot hold the thread forever, nor can a host
            // that vanished without closing the connection.
            let _ = std.set_write_timeout(Some(Duration::from_secs(30)));
            let sock = socket2::SockRef::from(&std);
            let _ = sock.set_tcp_keepalive(
                &socket2::TcpKeepalive::new()
                    .with_time(Duration::from_secs(5))
                    .with_interval(Duration::from_secs(1))
                    .with_retries(5),
            );
            let _ = sock.set_tcp_user_timeout(Some(Duration::from_secs(10)));
            let n = Arc::downgrade(&node);
            let p = peer.clone();
            let spawned = std::thread::Builder::new().name("remora-pager-flow".into()).spawn(move || {
                // The flow leaves the books however the thread ends.
                struct Forget(Arc<TcpPeer>, u64);
                impl Drop for Forget {
                    fn drop(&mut self) {
                        self.0.pager_flows.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.1);
                    }
                }
                let _forget = Forget(peer.clone(), id);
                let mut s = std;
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let bound = match read_frame::<LinkMsg>(&mut s) {
                    Ok(LinkMsg::PagerBind { conn }) => Bound::Segment(conn),
                    Ok(LinkMsg::PagerBindScif { conn }) => Bound::Scif(conn),
                    other => {
                        tracing::warn!(peer = peer.id, "a pager flow began with {other:?}; closed");
                        return;
                    }
                };
                {
                    // A process shares one flow per connection: a few more (redials after a
                    // failure, maps made at once) are fine, a flood is not.
                    let mut flows = peer.pager_flows.lock().unwrap_or_else(|p| p.into_inner());
                    let same = flows.values().filter(|(_, b)| *b == Some(bound)).count();
                    if same >= MAX_FLOWS_PER_TARGET {
                        tracing::warn!(peer = peer.id, "{same} pager flows for {bound:?} already; closed");
                        return;
                    }
                    if let Some(f) = flows.get_mut(&id) {
                        f.1 = Some(bound);
                    }
                }
                if s.set_read_timeout(None).is_ok() {
                    pager_flow(n, peer.clone(), s, bound);
                }
            });
            if let Err(e) = spawned {
                p.pager_flows.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The most pager flows one peer node may hold to this node at once.
const MAX_PAGER_FLOWS: usize = 1024;
/// The most pager flows bound to one connection at once.
const MAX_FLOWS_PER_TARGET: usize = 16;

impl TcpPeer {
    /// Dial a [`Flow::Pager`] to this peer for a DSM pager of this node (blocking: call it
    /// off the runtime's threads). The stream is authenticated as this node and bound to
    /// the peer's connection `conn`: the process it is handed to can reach nothing else.
    ///
    /// # Errors
    /// The peer cannot be reached or refuses the handshake.
    pub fn dial_pager(&self, node: &Node, bind: LinkMsg) -> std::io::Result<StdStream> {
        let addr: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&self.addr)?.collect();
        let a = addr.first().ok_or_else(|| std::io::Error::other("address does not resolve"))?;
        let mut s = StdStream::connect_timeout(a, Duration::from_secs(1))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let inc = dial_handshake(&mut s, node, self.id, Flow::Pager)?;
        if self.peer_incarnation.load(Ordering::SeqCst) != inc {
            return Err(std::io::Error::other(format!("node {} restarted", self.id)));
        }
        write_frame(&mut s, &bind)?;
        s.set_read_timeout(None)?;
        s.set_nodelay(true)?;
        Ok(s)
    }
}

/// Serve a pager flow until it breaks: pages of connections served for `peer` go out
/// (`Read` → `Data`), stores come in (`Write`, acked when asked), both straight between the
/// socket and the segment's mapping. Any other frame, or one naming another connection
/// than `conn` (the one the dialing daemon bound the flow to), ends the flow.
/// What a pager flow may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// A connection to a segment of this node.
    Segment(u64),
    /// The registered windows of this node's end of a SCIF connection.
    Scif(u64),
}

fn pager_flow(node: Weak<Node>, peer: Arc<TcpPeer>, s: StdStream, bound: Bound) {
    let (Bound::Segment(conn) | Bound::Scif(conn)) = bound;
    remora_sys::sync::urgent_thread(true);
    let Ok(rd) = s.try_clone() else { return };
    let mut rd = std::io::BufReader::with_capacity(64 << 10, rd);
    let mut wr = s;
    let mut scratch = vec![0u8; 64 << 10];
    // Grows to the largest SCIF frame seen.
    let mut big: Vec<u8> = Vec::new();
    while let Some(hdr) = read_header(&mut rd, peer.id, "pager") {
        let Some(node) = node.upgrade() else { break };
        peer.bytes_in.fetch_add(BULK_FRAME as u64 + hdr.len, Ordering::Relaxed);
        if hdr.conn != conn {
            tracing::warn!(peer = peer.id, "a pager flow bound to connection {conn} named {}", hdr.conn);
            break;
        }
        let r = match (bound, hdr.op) {
            (Bound::Scif(_), BulkOp::Write) => {
                // Stores into the registered windows (DSM diffs, or RMA in frames of up to
                // `MAX_SCIF_FRAME`).
                let n = hdr.len as usize;
                if n > MAX_SCIF_FRAME {
                    break;
                }
                if big.len() < n {
                    big.resize(n, 0);
                }
                if rd.read_exact(&mut big[..n]).is_err() {
                    break;
                }
                let stored = crate::scif_link::serve_write_up_to(
                    &node,
                    peer.id,
                    conn,
                    hdr.offset,
                    &big[..n],
                    MAX_SCIF_FRAME,
                );
                match (stored, hdr.ok) {
                    // An RMA frame (it asks for an answer): a refusal (no window there, no
                    // write access) is said in the answer, and the process asks the daemons
                    // for the precise error.
                    (r, true) => {
                        let ack = BulkHeader { op: BulkOp::Ack, ok: r.is_ok(), len: 0, ..hdr };
                        wr.write_all(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&ack)))
                    }
                    (Ok(()), false) => Ok(()),
                    // A map's store nobody waits for: end the flow, the pager sees the loss.
                    (Err(e), false) => {
                        tracing::info!(
                            peer = peer.id,
                            conn,
                            "a SCIF pager flow's store failed ({e:?}); closed"
                        );
                        break;
                    }
                }
            }
            (Bound::Scif(_), BulkOp::Read) => {
                let got =
                    u32::try_from(hdr.len).ok().filter(|&n| n as usize <= MAX_SCIF_FRAME).and_then(|n| {
                        crate::scif_link::serve_read_up_to(
                            &node,
                            peer.id,
                            conn,
                            hdr.offset,
                            n,
                            MAX_SCIF_FRAME,
                        )
                        .ok()
                    });
                let data = BulkHeader {
                    op: BulkOp::Data,
                    ok: got.is_some(),
                    len: got.as_ref().map_or(0, |d| d.len() as u64),
                    ..hdr
                };
                peer.bytes_out.fetch_add(BULK_FRAME as u64 + data.len, Ordering::Relaxed);
                wr.write_all(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&data)))
                    .and_then(|()| wr.write_all(got.as_deref().unwrap_or(&[])))
            }
            (Bound::Segment(_), BulkOp::Write) => {
                // A store the segment cannot take (the connection is gone, or the range is
                // outside it) ends the flow: the process sees the loss at its next send.
                let Some(m) = served_mapping(&node, &peer, hdr.conn, hdr.offset, hdr.len) else {
                    tracing::info!(peer = peer.id, conn, "a pager flow's store has no target; closed");
                    break;
                };
                m.fill_from_reader(hdr.offset as usize, hdr.len as usize, &mut rd).and_then(|()| {
                    if !hdr.ok {
                        return Ok(());
                    }
                    let ack = BulkHeader { op: BulkOp::Ack, ok: true, len: 0, ..hdr };
                    wr.write_all(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&ack)))
                })
            }
            (Bound::Segment(_), BulkOp::Read) => {
                let target = served_mapping(&node, &peer, hdr.conn, hdr.offset, hdr.len);
                let data = BulkHeader {
                    op: BulkOp::Data,
                    ok: target.is_some(),
                    len: if target.is_some() { hdr.len } else { 0 },
                    ..hdr
                };
                peer.bytes_out.fetch_add(BULK_FRAME as u64 + data.len, Ordering::Relaxed);
                match target {
                    // Header and page in one segment: the reader waits for both.
                    Some(m) if hdr.len as usize <= scratch.len() - BULK_FRAME => {
                        let n = hdr.len as usize;
                        scratch[..BULK_FRAME]
                            .copy_from_slice(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&data)));
                        m.read(hdr.offset as usize, &mut scratch[BULK_FRAME..BULK_FRAME + n])
                            .and_then(|()| wr.write_all(&scratch[..BULK_FRAME + n]))
                    }
                    Some(m) => wr
                        .write_all(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&data)))
                        .and_then(|()| m.write_to(hdr.offset as usize, hdr.len as usize, &mut wr)),
                    None => wr.write_all(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&data))),
                }
            }
            (_, op) => {
                tracing::warn!(peer = peer.id, "a pager flow sent {op:?}, closing the flow");
                break;
            }
        };
        if r.is_err() {
            break;
        }
    }
}

fn start_bulk(node: &Arc<Node>, peer: &Arc<TcpPeer>, s: StdStream) -> std::io::Result<()> {
    let _ = s.set_nodelay(true);
    // A peer that stops reading cannot hold a writer forever.
    let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
    let reader = s.try_clone()?;
    let writer = s.try_clone()?;
    let (tx, rx) = std::sync::mpsc::channel::<BulkOut>();
    if let Some((old, _)) = peer.bulk.lock().unwrap_or_else(|p| p.into_inner()).replace((s, tx)) {
        let _ = old.shutdown(std::net::Shutdown::Both);
    }
    let (n, p) = (Arc::downgrade(node), peer.clone());
    std::thread::Builder::new().name("remora-bulk".into()).spawn(move || bulk_reader(n, p, reader))?;
    let p = peer.clone();
    std::thread::Builder::new().name("remora-bulk-out".into()).spawn(move || bulk_writer(p, writer, rx))?;
    Ok(())
}

/// A bulk frame waiting for the writer thread.
struct BulkOut {
    hdr: BulkHeader,
    payload: Option<(Arc<Mapping>, usize)>,
}

/// Write queued bulk frames until the flow breaks or is replaced.
fn bulk_writer(peer: Arc<TcpPeer>, mut s: StdStream, rx: std::sync::mpsc::Receiver<BulkOut>) {
    while let Ok(out) = rx.recv() {
        let r =
            s.write_all(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&out.hdr))).and_then(|()| {
                peer.bytes_out.fetch_add(BULK_FRAME as u64, Ordering::Relaxed);
                match &out.payload {
                    Some((m, off)) => {
                        peer.bytes_out.fetch_add(out.hdr.len, Ordering::Relaxed);
                        m.write_to(*off, out.hdr.len as usize, &mut s)
                    }
                    None => Ok(()),
                }
            });
        if r.is_err() {
            // The reader sees the flow close and fails every waiting operation.
            let _ = s.shutdown(std::net::Shutdown::Both);
            break;
        }
    }
}

/// Serve the incoming side of a bulk flow until it breaks.
fn bulk_reader(node: Weak<Node>, peer: Arc<TcpPeer>, mut s: StdStream) {
    let mut scratch = vec![0u8; 64 << 10];
    while let Some(hdr) = read_header(&mut s, peer.id, "bulk") {
        let Some(node) = node.upgrade() else { break };
        peer.bytes_in.fetch_add(hdr.len, Ordering::Relaxed);
        let ok = match hdr.op {
            BulkOp::Write => {
                let target = served_mapping(&node, &peer, hdr.conn, hdr.offset, hdr.len);
                let r = match &target {
                    Some(m) => m.fill_from_reader(hdr.offset as usize, hdr.len as usize, &mut s),
                    None => discard(&mut s, hdr.len, &mut scratch),
                };
                if r.is_err() {
                    break;
                }
                let ack = BulkHeader { op: BulkOp::Ack, ok: target.is_some(), len: 0, ..hdr };
                peer.bulk_send(ack, None, None).is_ok()
            }
            BulkOp::Read => {
                let target = served_mapping(&node, &peer, hdr.conn, hdr.offset, hdr.len);
                let data = BulkHeader {
                    op: BulkOp::Data,
                    ok: target.is_some(),
                    len: if target.is_some() { hdr.len } else { 0 },
                    ..hdr
                };
                peer.bulk_send(data, target.map(|m| (m, hdr.offset as usize)), None).is_ok()
            }
            BulkOp::Data => {
                let w = peer.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&hdr.tag);
                match w {
                    Some(BulkWait::Read { dest, off, len, done }) if hdr.ok && hdr.len == len => {
                        let r = dest.fill_from_reader(off, hdr.len as usize, &mut s);
                        let _ = done.send(r.is_ok());
                        r.is_ok()
                    }
                    Some(BulkWait::Read { done, .. }) => {
                        let _ = done.send(false);
                        discard(&mut s, hdr.len, &mut scratch).is_ok()
                    }
                    _ => discard(&mut s, hdr.len, &mut scratch).is_ok(),
                }
            }
            BulkOp::Ack => {
                if let Some(BulkWait::Ack(tx)) =
                    peer.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&hdr.tag)
                {
                    let _ = tx.send(hdr.ok);
                }
                true
            }
        };
        if !ok {
            break;
        }
    }
    peer.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// The next bulk frame header of a flow; `None` when the flow ended or sent a malformed
/// header (logged: the flow is then closed).
fn read_header(r: &mut impl Read, peer: u32, flow: &str) -> Option<BulkHeader> {
    let mut raw = [0u8; BULK_FRAME];
    r.read_exact(&mut raw).ok()?;
    match BulkFrame::parse(&raw) {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!(peer, "malformed {flow} frame, closing the flow: {e}");
            None
        }
    }
}

fn discard(s: &mut impl Read, mut len: u64, scratch: &mut [u8]) -> std::io::Result<()> {
    while len > 0 {
        let n = (len as usize).min(scratch.len());
        s.read_exact(&mut scratch[..n])?;
        len -= n as u64;
    }
    Ok(())
}

/// The mapping of connection `conn`, if a session served for `peer` holds it, it is alive,
/// and the range is inside it.
fn served_mapping(node: &Node, peer: &TcpPeer, conn: u64, off: u64, len: u64) -> Option<Arc<Mapping>> {
    let mut reg = node.lock();
    let c = reg.conns.get(&conn)?;
    let holder = reg.sessions.get(&c.session)?;
    if holder.role != (Role::Peer { node: peer.id }) || holder.pid != 0 || !c.alive {
        return None;
    }
    if off.checked_add(len)? > c.size {
        return None;
    }
    let session = c.session;
    match reg.dma_remote(session, conn) {
        Ok(crate::registry::DmaTarget::Map(m)) => Some(m),
        _ => None,
    }
}

/// Keep the link to one peer up: dial (if our id is smaller) or take inbound connections,
/// run the control flow, heartbeat, and redial with back-off.
async fn run_peer(
    node: Arc<Node>,
    peer: Arc<TcpPeer>,
    mut inbound: mpsc::UnboundedReceiver<(TcpStream, u64)>,
) {
    let dialer = node.config.node < peer.id;
    let hb = node.config.cluster.as_ref().map(|c| c.heartbeat).unwrap_or(Duration::from_millis(200));
    let mut backoff = Duration::from_millis(50);
    let mut down_since: Option<Instant> = None;
    loop {
        let got = if dialer {
            match dial(&node, &peer).await {
                Ok(x) => Some(x),
                Err(e) => {
                    refused_or_silent(&node, &peer, &e, &mut down_since, hb);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            }
        } else {
            tokio::select! {
                x = inbound.recv() => x,
                _ = tokio::time::sleep(hb) => {
                    if down_since.is_some() {
                        // Not our turn to dial: see whether the peer's daemon still listens.
                        if let Err(e) = probe_port(&peer).await {
                            refused_or_silent(&node, &peer, &e, &mut down_since, hb);
                        }
                    }
                    continue;
                }
            }
        };
        let Some((stream, incarnation)) = got else { return };
        backoff = Duration::from_millis(50);
        let old = peer.peer_incarnation.swap(incarnation, Ordering::SeqCst);
        if old != 0 && old != incarnation {
            tracing::info!(peer = peer.id, "node restarted: its old connections are lost");
            peer.set_state(LinkState::Lost);
        }
        run_control(&node, &peer, stream, hb, &mut inbound).await;
        peer.fail_all();
        *peer.ctrl.lock().unwrap_or_else(|p| p.into_inner()) = None;
        if peer.state() == LinkState::Up {
            peer.set_state(LinkState::NotOperational);
        }
        down_since = Some(Instant::now());
    }
}

/// After a failed dial: a refused connection means the peer's daemon is gone (lost); a
/// silent one means the route is down (not operational, lost after a long while).
fn refused_or_silent(
    node: &Arc<Node>,
    peer: &Arc<TcpPeer>,
    e: &std::io::Error,
    since: &mut Option<Instant>,
    hb: Duration,
) {
    let _ = node;
    let start = *since.get_or_insert_with(Instant::now);
    let st = peer.state();
    if e.kind() == std::io::ErrorKind::ConnectionRefused && st != LinkState::Down && st != LinkState::Lost {
        peer.set_state(LinkState::Lost);
    } else if st == LinkState::Up {
        peer.set_state(LinkState::NotOperational);
    } else if st == LinkState::NotOperational && start.elapsed() > hb * 150 {
        peer.set_state(LinkState::Lost);
    }
}

async fn probe_port(peer: &TcpPeer) -> std::io::Result<()> {
    match tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(&peer.addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::from(std::io::ErrorKind::TimedOut)),
    }
}

/// Dial both flows; returns the control stream and the peer's incarnation.
async fn dial(node: &Arc<Node>, peer: &Arc<TcpPeer>) -> std::io::Result<(TcpStream, u64)> {
    let connect = |flow: Flow| {
        let (node, peer) = (node.clone(), peer.clone());
        tokio::task::spawn_blocking(move || -> std::io::Result<(StdStream, u64)> {
            let addr: Vec<std::net::SocketAddr> =
                std::net::ToSocketAddrs::to_socket_addrs(&peer.addr)?.collect();
            let a = addr.first().ok_or_else(|| std::io::Error::other("address does not resolve"))?;
            let mut s = StdStream::connect_timeout(a, Duration::from_secs(1))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            let inc = dial_handshake(&mut s, &node, peer.id, flow)?;
            s.set_read_timeout(None)?;
            Ok((s, inc))
        })
    };
    let (ctrl, inc) = connect(Flow::Control).await.map_err(std::io::Error::other)??;
    let (bulk, _) = connect(Flow::Bulk).await.map_err(std::io::Error::other)??;
    start_bulk(node, peer, bulk)?;
    ctrl.set_nonblocking(true)?;
    Ok((TcpStream::from_std(ctrl)?, inc))
}

/// Run the control flow until it breaks (or a newer inbound connection replaces it).
async fn run_control(
    node: &Arc<Node>,
    peer: &Arc<TcpPeer>,
    stream: TcpStream,
    hb: Duration,
    inbound: &mut mpsc::UnboundedReceiver<(TcpStream, u64)>,
) {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<LinkMsg>();
    *peer.ctrl.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
    *peer.last_rx.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    peer.set_state(LinkState::Up);
    // Sessions that ended while the link was down: the peer still holds their resources.
    let ended: Vec<u64> = std::mem::take(&mut *peer.ended.lock().unwrap_or_else(|p| p.into_inner()));
    for origin in ended {
        peer.send(LinkMsg::SessionEnd { origin });
    }
    let p = peer.clone();
    let writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let Ok(body) = encode(&m) else { continue };
            let mut out = Vec::with_capacity(4 + body.len());
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(&body);
            p.bytes_out.fetch_add(out.len() as u64, Ordering::Relaxed);
            if wr.write_all(&out).await.is_err() {
                break;
            }
        }
    });
    let mut tick = tokio::time::interval(hb);
    let mut seq = 0u64;
    let mut sent: HashMap<u64, Instant> = HashMap::new();
    loop {
        tokio::select! {
            r = read_frame_async(&mut rd) => {
                let (m, n) = match r {
                    Ok(x) => x,
                    Err(e) => {
                        if e.kind() == std::io::ErrorKind::InvalidData {
                            tracing::warn!(peer = peer.id, "malformed frame from peer, closing the link: {e}");
                        }
                        break;
                    }
                };
                peer.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                *peer.last_rx.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                if peer.state() == LinkState::NotOperational {
                    peer.set_state(LinkState::Up);
                }
                match m {
                    LinkMsg::Ping { seq } => { peer.send(LinkMsg::Pong { seq }); }
                    LinkMsg::Pong { seq } => {
                        if let Some(t) = sent.remove(&seq) {
                            peer.rtt_us.store(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                        }
                    }
                    LinkMsg::Request { id, origin, req } => {
                        let (node, p) = (node.clone(), peer.clone());
                        tokio::spawn(async move {
                            let result = serve_request(node, p.clone(), origin, req).await;
                            p.send(LinkMsg::Reply { id, result });
                        });
                    }
                    LinkMsg::Reply { id, result } => {
                        if let Some(tx) = peer.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                            let _ = tx.send(result);
                        }
                    }
                    LinkMsg::Event { origin, event } => deliver_event(node, peer.id, origin, event),
                    LinkMsg::SessionEnd { origin } => {
                        let sid = peer.served.lock().unwrap_or_else(|p| p.into_inner()).remove(&origin);
                        if let Some(sid) = sid {
                            node.lock().end_session(sid);
                            node.changed.notify_waiters();
                        }
                    }
                    other => {
                        tracing::warn!(peer = peer.id, "unexpected {other:?} on an established link; closing it");
                        break;
                    }
                }
            }
            _ = tick.tick() => {
                seq += 1;
                sent.insert(seq, Instant::now());
                sent.retain(|k, _| *k + 64 > seq);
                peer.send(LinkMsg::Ping { seq });
                let silent = peer.last_rx.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
                if silent > hb * 3 && peer.state() == LinkState::Up {
                    peer.set_state(LinkState::NotOperational);
                }
                if silent > hb * 150 {
                    // Silent far past any pause: give the connection up, fail what waits on
                    // it, and let redial (or loss) decide.
                    tracing::warn!(peer = peer.id, "no frame for {silent:?}: closing the link");
                    break;
                }
            }
            Some((newer, inc)) = inbound.recv() => {
                // The peer redialled (its side saw the old connection die): switch to it.
                writer.abort();
                *peer.ctrl.lock().unwrap_or_else(|p| p.into_inner()) = None;
                for (_, tx) in peer.pending.lock().unwrap_or_else(|p| p.into_inner()).drain() {
                    let _ = tx.send(Err(Error::NodeNotResponding));
                }
                let old = peer.peer_incarnation.swap(inc, Ordering::SeqCst);
                if old != inc {
                    peer.set_state(LinkState::Lost);
                }
                // Close the old connection before serving the new one.
                drop(rd);
                Box::pin(run_control(node, peer, newer, hb, inbound)).await;
                return;
            }
        }
    }
    writer.abort();
}

/// An event from the peer for one of our sessions: translate its handles to ours.
fn deliver_event(node: &Node, peer: u32, origin: u64, event: Event) {
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
        other => tracing::debug!(peer, "ignoring {other:?} from a peer"),
    }
    drop(reg);
    node.changed.notify_waiters();
}
