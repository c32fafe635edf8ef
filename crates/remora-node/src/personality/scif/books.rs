//! The SCIF books of a node: bound ports, listeners with their waiting connection
//! requests, connections (their shared region and both sides' doorbells) and each side's
//! registered windows.
//!
//! A connection lives in the daemon of the node that listened; both ends hold the region
//! and each other's doorbell ringer, so messages go process to process. Every endpoint
//! has a session of its own, so a session holds at most one port, one listener and one
//! connection side, and the session's end closes them (process death included).

mod windows;

use super::queue_bytes;
use remora_proto::Error;
use remora_sys::bell;
use remora_sys::msgring::MsgRegion;
use remora_sys::Memfd;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use tokio::sync::oneshot;

/// The first port `scif_bind(epd, 0)` hands out (`SCIF_PORT_RSVD`).
pub const PORT_RSVD: u16 = 1088;
/// Ports below this need root (`SCIF_ADMIN_PORT_END`).
pub const ADMIN_PORT_END: u16 = 1024;
/// Where windows registered without `SCIF_MAP_FIXED` are placed (far above the fixed
/// offsets programs hard-code).
const AUTO_BASE: u64 = 1 << 32;
/// The largest offset a window may reach (`off_t` stays positive).
const OFFSET_LIMIT: u64 = 1 << 62;

/// What a connecting session gets when a listener accepts it.
#[derive(Debug)]
pub struct Accepted {
    /// The connection.
    pub conn: u64,
    /// The relay to start (a connector on another host).
    pub relay: Option<RelayStart>,
    /// The region memfd.
    pub region: OwnedFd,
    /// The acceptor's ringer.
    pub peer_ringer: OwnedFd,
    /// The acceptor's node and port.
    pub peer: (u32, u16),
    /// The one-time token of the direct flow the acceptor's daemon awaits (a connector on
    /// another host, direct flows on).
    pub direct: Option<u64>,
}

struct Pending {
    id: u64,
    sid: u64,
    from: (u32, u16),
    ringer: OwnedFd,
    /// A connector on another host: the relay's end of the doorbell it will use.
    remote: Option<RemoteEnd>,
    reply: oneshot::Sender<Result<Accepted, Error>>,
}

/// The far end of a connection whose peer is on another host.
#[derive(Debug)]
pub struct RemoteEnd {
    /// The peer's node.
    pub node: u32,
    /// The peer daemon's handle of the connection.
    pub conn: u64,
    /// The reader of the doorbell the local endpoint rings (the relay watches it).
    pub reader: OwnedFd,
    /// The connector's daemon would dial a direct flow (on the accepting side).
    pub flow: bool,
}

/// What a connection's relay task hears from the books.
#[derive(Debug)]
pub enum RelayIn {
    /// Bytes from the peer on the other host, for the local endpoint.
    Data(Vec<u8>),
    /// The far relay put this many more of our bytes into its endpoint's ring: we may
    /// send that many more.
    Credit(u64),
    /// The peer on the other host closed (or its node is lost).
    PeerClosed,
    /// The local endpoint closed: forward what it sent, then tell the peer.
    LocalClosed,
}

/// What starts a relay: everything it needs outside the books.
#[derive(Debug)]
pub struct RelayStart {
    /// The connection.
    pub conn: u64,
    /// Its region.
    pub region: std::sync::Arc<MsgRegion>,
    /// The local endpoint's side.
    pub local: usize,
    /// The local endpoint's ringer (the relay rings it and unstuffs it).
    pub ringer: OwnedFd,
    /// The ringer of the relay's own doorbell (to undo its own stuffing).
    pub proxy_ringer: OwnedFd,
    /// The far end.
    pub remote: RemoteEnd,
    /// Where the books send news.
    pub rx: tokio::sync::mpsc::UnboundedReceiver<RelayIn>,
}

struct Listener {
    sid: u64,
    token: u64,
    reader: OwnedFd,
    ringer: OwnedFd,
    backlog: usize,
    pending: VecDeque<Pending>,
}

impl Listener {
    /// Keep the listener readable exactly while requests wait.
    fn level(&self) {
        bell::drain(self.reader.as_fd());
        if !self.pending.is_empty() {
            bell::ring(self.ringer.as_fd());
        }
    }
}

struct Window {
    len: u64,
    prot: u8,
    /// The window's memory, in order: a memfd, where the piece starts in it, bytes (one
    /// page may back several windows, so a window over pages of an earlier one holds
    /// those pages where the earlier window has them).
    pieces: Vec<(std::sync::Arc<Memfd>, u64, u64)>,
    /// The daemon's own mapping of the window, made on the first RMA from another host
    /// and kept while the window is registered (RMA frames reach it with no `mmap` and no
    /// page faults of their own).
    map: std::sync::OnceLock<std::sync::Arc<remora_sys::Mapping>>,
}

struct Side {
    sid: Option<u64>,
    ringer: OwnedFd,
    windows: BTreeMap<u64, Window>,
    /// The memfds this side's windows lie in, by device and inode: a register that sends
    /// one again (every window of an endpoint lies in its arena) gets the one held, and the
    /// new descriptor is closed, so the daemon holds one descriptor per memfd, not per
    /// window.
    memfds: Vec<((u64, u64), std::sync::Weak<Memfd>)>,
}

struct Conn {
    memfd: Memfd,
    region: std::sync::Arc<MsgRegion>,
    sides: [Side; 2],
    /// Set when the peer is on another host: the relay task of the connection.
    relay: Option<tokio::sync::mpsc::UnboundedSender<RelayIn>>,
    /// Which side stands for the peer on the other host.
    proxy: Option<usize>,
    /// The far peer's node and its daemon's handle of the connection.
    far: Option<(u32, u64)>,
    /// The far peer's node was lost (its daemon died or restarted): the connection is reset
    /// for good, whatever the relay still delivers, and nothing of it reaches that node
    /// again (a restarted daemon hands out the same connection handles anew).
    lost: bool,
}

impl Conn {
    /// Whether the peer of side `s` is gone: it closed, or its node was lost.
    fn peer_gone(&self, s: usize) -> bool {
        self.lost || self.region.closed(1 - s).load(Ordering::Acquire) != 0
    }
}

/// The SCIF books.
#[derive(Default)]
pub struct Books {
    ports: HashMap<u16, u64>,
    listeners: HashMap<u16, Listener>,
    conns: HashMap<u64, Conn>,
    /// Session → (connection, side).
    sides: HashMap<u64, (u64, usize)>,
    next: u64,
    /// Direct flows awaited and held, by connection.
    pub(super) flows: super::direct::Flows,
}

/// A connection just accepted, as [`Books::accept`] answers: the region memfd, the
/// connector's ringer, its port id, whether it is on another host, and the direct flow
/// awaited (connection, receiver).
pub type AcceptedHere = (OwnedFd, OwnedFd, (u32, u16), bool, Option<(u64, oneshot::Receiver<OwnedFd>)>);

fn sys(e: std::io::Error) -> Error {
    Error::System(e.to_string())
}

impl Books {
    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// The port session `sid` is bound to.
    pub fn port_of(&self, sid: u64) -> Option<u16> {
        self.ports.iter().find(|(_, s)| **s == sid).map(|(p, _)| *p)
    }

    /// `scif_bind`.
    ///
    /// # Errors
    /// `IllegalParameter` when this endpoint or the port is already bound, `Access` for a
    /// port below 1024 without privilege, `NoSpace` when no port is free.
    pub fn bind(&mut self, sid: u64, port: u16, privileged: bool) -> Result<u16, Error> {
        if self.port_of(sid).is_some() {
            return Err(Error::IllegalParameter("endpoint already bound".into()));
        }
        if self.sides.contains_key(&sid) {
            return Err(Error::IsConnected);
        }
        let port = if port == 0 {
            (PORT_RSVD..=u16::MAX).find(|p| !self.ports.contains_key(p)).ok_or(Error::NoSpace)?
        } else {
            if port < ADMIN_PORT_END && !privileged {
                return Err(Error::Access);
            }
            if self.ports.contains_key(&port) {
                // The kernel header's answer for a port that is already bound: EINVAL.
                return Err(Error::IllegalParameter(format!("port {port} is already bound")));
            }
            port
        };
        self.ports.insert(port, sid);
        Ok(port)
    }

    /// `scif_listen`: returns the listener's token.
    ///
    /// # Errors
    /// `IllegalParameter` when unbound (or the doorbell is missing), `IsConnected` when
    /// connected or already listening.
    pub fn listen(&mut self, sid: u64, backlog: u32, mut fds: Vec<OwnedFd>) -> Result<u64, Error> {
        if self.sides.contains_key(&sid) {
            return Err(Error::IsConnected);
        }
        let port = self.port_of(sid).ok_or_else(|| Error::IllegalParameter("endpoint not bound".into()))?;
        if self.listeners.contains_key(&port) {
            return Err(Error::IsConnected);
        }
        if fds.len() != 2 {
            return Err(Error::IllegalParameter("listen needs the endpoint's doorbell".into()));
        }
        let ringer = fds.pop().expect("two");
        let reader = fds.pop().expect("two");
        let token = rand_u64();
        let backlog = backlog.clamp(1, 4096) as usize;
        self.listeners
            .insert(port, Listener { sid, token, reader, ringer, backlog, pending: VecDeque::new() });
        Ok(token)
    }

    /// Queue a connection request on `port`. Returns the request id and where the answer
    /// comes.
    ///
    /// # Errors
    /// `ConnRefused` when nobody listens or the queue is full; `IsConnected` when the
    /// session already has a connection.
    pub fn request(
        &mut self,
        sid: u64,
        port: u16,
        from: (u32, u16),
        ringer: OwnedFd,
        remote: Option<RemoteEnd>,
    ) -> Result<(u64, oneshot::Receiver<Result<Accepted, Error>>), Error> {
        if self.sides.contains_key(&sid) {
            return Err(Error::IsConnected);
        }
        let id = self.id();
        let l = self.listeners.get_mut(&port).ok_or(Error::ConnRefused)?;
        if l.pending.len() >= l.backlog {
            return Err(Error::ConnRefused);
        }
        let (tx, rx) = oneshot::channel();
        l.pending.push_back(Pending { id, sid, from, ringer, remote, reply: tx });
        l.level();
        Ok((id, rx))
    }

    /// Withdraw request `id` (its session hung up while waiting).
    pub fn withdraw(&mut self, port: u16, id: u64) {
        if let Some(l) = self.listeners.get_mut(&port) {
            l.pending.retain(|p| p.id != id);
            l.level();
        }
    }

    /// `scif_accept` on session `sid` (the new endpoint's): take the first waiting request
    /// of the listener on `port`. Returns the region, the connector's ringer and its port,
    /// whether it is on another host, and the direct flow this daemon awaits for it.
    ///
    /// # Errors
    /// `IllegalParameter` when nobody with that token listens on `port`, `Again` when no
    /// request waits, `IsConnected` when the session is already connected.
    pub fn accept(
        &mut self,
        sid: u64,
        me: u32,
        port: u16,
        token: u64,
        ringer: &OwnedFd,
    ) -> Result<AcceptedHere, Error> {
        if self.sides.contains_key(&sid) || self.port_of(sid).is_some() {
            return Err(Error::IsConnected);
        }
        loop {
            let l = self
                .listeners
                .get_mut(&port)
                .filter(|l| l.token == token)
                .ok_or_else(|| Error::IllegalParameter("not a listening endpoint".into()))?;
            let Some(p) = l.pending.pop_front() else { return Err(Error::Again) };
            l.level();
            let memfd = MsgRegion::create(queue_bytes(p.remote.is_some())).map_err(sys)?;
            let region = std::sync::Arc::new(MsgRegion::open(memfd.as_fd()).map_err(sys)?);
            let conn = self.id();
            let dup = |f: &OwnedFd| f.try_clone().map_err(sys);
            let far = p.remote.as_ref().map(|r| (r.node, r.conn));
            let flow_to = p.remote.as_ref().filter(|r| r.flow).map(|r| r.node);
            let (relay, relay_tx) = match p.remote {
                Some(remote) => {
                    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                    let start = RelayStart {
                        conn,
                        region: region.clone(),
                        local: 1,
                        ringer: dup(ringer)?,
                        proxy_ringer: dup(&p.ringer)?,
                        remote,
                        rx,
                    };
                    (Some(start), Some(tx))
                }
                None => (None, None),
            };
            let remote_connector = relay.is_some();
            let direct = match flow_to {
                Some(node) if super::direct::enabled() => {
                    let token = rand_u64();
                    Some((token, self.flows.expect(conn, node, token)))
                }
                _ => None,
            };
            let accepted = Accepted {
                conn,
                relay,
                region: memfd.try_clone().map_err(sys)?.into_fd(),
                peer_ringer: dup(ringer)?,
                peer: (me, port),
                direct: direct.as_ref().map(|d| d.0),
            };
            let theirs = dup(&p.ringer)?;
            let p_sid = p.sid;
            let sides = [
                Side { sid: Some(p.sid), ringer: p.ringer, windows: BTreeMap::new(), memfds: Vec::new() },
                Side { sid: Some(sid), ringer: dup(ringer)?, windows: BTreeMap::new(), memfds: Vec::new() },
            ];
            let region_fd = memfd.try_clone().map_err(sys)?.into_fd();
            let proxy = remote_connector.then_some(0);
            self.conns.insert(conn, Conn { memfd, region, sides, relay: relay_tx, proxy, far, lost: false });
            if p.reply.send(Ok(accepted)).is_err() {
                // The connector gave up meanwhile: forget this one and take the next.
                self.conns.remove(&conn);
                self.flows.release(conn);
                continue;
            }
            self.sides.insert(p_sid, (conn, 0));
            self.sides.insert(sid, (conn, 1));
            let direct = direct.map(|(_, rx)| (conn, rx));
            return Ok((region_fd, theirs, p.from, remote_connector, direct));
        }
    }

    /// Start a connection to a listener on another host (the connecting side, on the
    /// connector's node): books the connection with side 1 standing for the far peer,
    /// whose doorbell is `(reader, ringer)`. Returns the connection, its region memfd and
    /// where the relay's news will come.
    ///
    /// # Errors
    /// `IsConnected` when the session is already connected; a system error.
    #[allow(clippy::type_complexity)]
    pub fn connect_out(
        &mut self,
        sid: u64,
        ringer: OwnedFd,
        proxy_ringer: OwnedFd,
    ) -> Result<(u64, std::sync::Arc<MsgRegion>, OwnedFd, tokio::sync::mpsc::UnboundedReceiver<RelayIn>), Error>
    {
        if self.sides.contains_key(&sid) {
            return Err(Error::IsConnected);
        }
        let memfd = MsgRegion::create(queue_bytes(true)).map_err(sys)?;
        let region = std::sync::Arc::new(MsgRegion::open(memfd.as_fd()).map_err(sys)?);
        let conn = self.id();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sides = [
            Side { sid: Some(sid), ringer, windows: BTreeMap::new(), memfds: Vec::new() },
            Side { sid: None, ringer: proxy_ringer, windows: BTreeMap::new(), memfds: Vec::new() },
        ];
        let fd = memfd.try_clone().map_err(sys)?.into_fd();
        self.conns.insert(
            conn,
            Conn {
                memfd,
                region: region.clone(),
                sides,
                relay: Some(tx),
                proxy: Some(1),
                far: None,
                lost: false,
            },
        );
        self.sides.insert(sid, (conn, 0));
        Ok((conn, region, fd, rx))
    }

    /// The local endpoint of connection `conn`'s ringer (for its relay).
    pub fn local_ringer(&self, conn: u64, side: usize) -> Option<OwnedFd> {
        self.conns.get(&conn).and_then(|c| c.sides[side].ringer.try_clone().ok())
    }

    /// News for connection `conn`'s relay (data, credit or a close from the other host),
    /// sent by node `from`: only the connection's far node may send it (a connection whose
    /// far end is not recorded yet, a moment after its connect, takes it from any).
    pub fn to_relay(&mut self, conn: u64, from: u32, msg: RelayIn) -> Result<(), Error> {
        if self.conns.get(&conn).and_then(|c| c.far).is_some_and(|(n, _)| n != from) {
            return Err(Error::NotConnected);
        }
        if matches!(msg, RelayIn::PeerClosed) {
            self.flows.peer_closed(conn);
        }
        match self.conns.get(&conn).and_then(|c| c.relay.as_ref()) {
            Some(tx) => tx.send(msg).map_err(|_| Error::NotConnected),
            None => Err(Error::NotConnected),
        }
    }

    /// The far peer of every connection to `node` is gone: their endpoints see a reset,
    /// for good. This node's ends of them (session, connection), to be told so.
    pub fn lose_node(&mut self, node: u32) -> Vec<(u64, u64)> {
        let mut ends = Vec::new();
        for (id, c) in &mut self.conns {
            if let (Some(tx), Some((n, _))) = (&c.relay, c.far) {
                if n == node {
                    c.lost = true;
                    self.flows.lost(*id);
                    let _ = tx.send(RelayIn::PeerClosed);
                    ends.extend(c.proxy.and_then(|p| c.sides[1 - p].sid).map(|sid| (sid, *id)));
                }
            }
        }
        ends
    }

    /// Record the far end of a connection made with [`Books::connect_out`].
    pub fn set_far(&mut self, conn: u64, node: u32, far: u64) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.far = Some((node, far));
        }
    }

    /// Forget a connection made with [`Books::connect_out`] that the far node refused.
    pub fn abort_out(&mut self, sid: u64) {
        if let Some((conn, _)) = self.sides.remove(&sid) {
            self.conns.remove(&conn);
            self.flows.release(conn);
        }
    }

    /// Whether connection `conn` is still booked.
    pub fn has_conn(&self, conn: u64) -> bool {
        self.conns.contains_key(&conn)
    }

    /// The far end (node, its handle) of session `sid`'s connection, when relayed; fails
    /// with `ConnReset` once the far peer has closed or its node was lost.
    ///
    /// # Errors
    /// `NotConnected` without a relayed connection, `ConnReset` after the far close or the
    /// far node's loss.
    pub fn far_of(&self, sid: u64) -> Result<(u32, u64), Error> {
        let (conn, s) = self.sides.get(&sid).ok_or(Error::NotConnected)?;
        let c = self.conns.get(conn).ok_or(Error::NotConnected)?;
        if c.peer_gone(*s) {
            return Err(Error::ConnReset);
        }
        c.far.ok_or(Error::NotConnected)
    }

    /// Whether the connection of session `sid` reaches its peer through a relay, and the
    /// connection handle.
    pub fn relayed(&self, sid: u64) -> Option<u64> {
        let (conn, _) = self.sides.get(&sid)?;
        self.conns.get(conn).filter(|c| c.relay.is_some()).map(|_| *conn)
    }

    fn side_of(&mut self, sid: u64) -> Result<(&mut Conn, usize), Error> {
        let (conn, side) = *self.sides.get(&sid).ok_or(Error::NotConnected)?;
        let c = self.conns.get_mut(&conn).ok_or(Error::NotConnected)?;
        Ok((c, side))
    }

    /// Close session `sid`'s side of its connection: its windows go (maps of them stay
    /// valid), the peer sees hang-up. The connection goes when both sides have closed.
    pub fn close(&mut self, sid: u64) {
        let Some((conn, s)) = self.sides.remove(&sid) else { return };
        let Some(c) = self.conns.get_mut(&conn) else { return };
        c.sides[s].sid = None;
        c.sides[s].windows.clear();
        c.region.win_gen(s).fetch_add(1, Ordering::AcqRel);
        match (&c.relay, c.proxy) {
            // The far peer's stand-in ended (its node's session or link): the relay tells
            // the local endpoint, after the data already here.
            (Some(tx), Some(p)) if p == s => {
                let _ = tx.send(RelayIn::PeerClosed);
                self.flows.peer_closed(conn);
            }
            // The local endpoint closed: the relay forwards what it sent, then the close;
            // its direct flow ends after what it sent.
            (Some(tx), Some(_)) => {
                c.region.closed(s).store(1, Ordering::Release);
                let _ = tx.send(RelayIn::LocalClosed);
                self.flows.release(conn);
            }
            _ => {
                c.region.closed(s).store(1, Ordering::Release);
                bell::hang_up(c.sides[1 - s].ringer.as_fd());
            }
        }
        let local_gone = match c.proxy {
            Some(p) => c.sides[1 - p].sid.is_none(),
            None => c.sides.iter().all(|x| x.sid.is_none()),
        };
        if local_gone {
            let _ = &c.memfd;
            self.conns.remove(&conn);
            self.flows.release(conn);
        }
    }

    /// Release everything session `sid` held.
    pub fn end_session(&mut self, sid: u64) {
        self.close(sid);
        if let Some(port) = self.port_of(sid) {
            self.ports.remove(&port);
            if let Some(l) = self.listeners.remove(&port) {
                for p in l.pending {
                    let _ = p.reply.send(Err(Error::ConnRefused));
                }
                bell::hang_up(l.ringer.as_fd());
            }
        }
        self.listeners.retain(|_, l| l.sid != sid);
    }

    /// Counts for status: (ports, listeners, connections).
    pub fn counts(&self) -> (u32, u32, u32) {
        (self.ports.len() as u32, self.listeners.len() as u32, self.conns.len() as u32)
    }
}

fn rand_u64() -> u64 {
    crate::new_incarnation()
}

impl std::fmt::Debug for Books {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (ports, listeners, conns) = self.counts();
        f.debug_struct("Scif")
            .field("ports", &ports)
            .field("listeners", &listeners)
            .field("conns", &conns)
            .finish()
    }
}

#[cfg(test)]
mod tests;
