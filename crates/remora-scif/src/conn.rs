//! A connected endpoint's shared state: the message region, the peer's doorbell, both
//! ends' window lists, and the port ids of both ends.

use crate::{Error, Result};
use remora_client::dsm::Route;
use remora_client::Session;
use remora_proto::{Reply, Request, ScifRequest, ScifWindow};
use remora_sys::msgring::MsgRegion;
use remora_sys::Mapping;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// One sender (or one receiver) at a time on an endpoint: the rings have one producer and
/// one consumer. Taking it costs one atomic exchange and releasing it a plain store (a
/// mutex costs an exchange more, on the message path); a second thread spins briefly,
/// then sleeps in growing steps (a receiver may hold it while it waits for data).
#[derive(Default)]
pub(crate) struct Excl(AtomicBool);

pub(crate) struct ExclGuard<'a>(&'a AtomicBool);

impl Excl {
    pub(crate) fn lock(&self) -> ExclGuard<'_> {
        let mut tries = 0u32;
        loop {
            if !self.0.swap(true, Ordering::Acquire) {
                return ExclGuard(&self.0);
            }
            tries += 1;
            if tries < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros((tries as u64 - 63).min(1000)));
            }
        }
    }
}

impl Excl {
    /// Take the lock and keep it past this call (let it go with [`Excl::unlock`]).
    pub(crate) fn hold(&self) {
        std::mem::forget(self.lock());
    }

    /// Let go of a lock taken with [`Excl::hold`].
    pub(crate) fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Drop for ExclGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A SCIF port identifier: a node and a port on it (`struct scif_portID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortId {
    /// The node id.
    pub node: u32,
    /// The port.
    pub port: u16,
}

/// A connected endpoint's shared state.
pub(crate) struct Conn {
    pub(crate) session: Arc<Session>,
    pub(crate) region: MsgRegion,
    /// The peer is on another host: RMA goes through the daemons, maps are refused.
    pub(crate) remote: bool,
    /// The peer is on another host and the messages go over the two processes' own TCP
    /// flow, which is the endpoint's descriptor (`remora_sys::flow`), not through the
    /// region and the daemons' relays.
    pub(crate) direct: bool,
    /// 0 for the connecting end, 1 for the accepting end.
    pub(crate) side: usize,
    pub(crate) peer_ringer: OwnedFd,
    pub(crate) local: PortId,
    pub(crate) peer: PortId,
    pub(crate) send_lock: Excl,
    pub(crate) recv_lock: Excl,
    /// Both ends' window lists as last fetched, behind the data paths' lock (taken by every
    /// RMA, most often by one thread again and again: biased to it, no locked instruction).
    pub(crate) own_windows: remora_sys::lock::Lock<WinCache>,
    pub(crate) peer_windows: remora_sys::lock::Lock<WinCache>,
    /// Both lists together, for `scif_writeto` and `scif_readfrom` (one reference taken
    /// an RMA instead of two): the generations of both ends they were fetched at.
    pub(crate) both_windows: remora_sys::lock::Lock<Option<BothWindows>>,
    /// The leases of our registered windows on the process's arena, by window offset and
    /// with the window's length: a window's pages keep their place while it lives.
    pub(crate) leases: Mutex<std::collections::BTreeMap<u64, (u64, remora_sys::user_memory::Lease)>>,
    /// The memfd our windows' pages move into (made at the first `scif_register`).
    pub(crate) arena: Mutex<Option<remora_sys::user_memory::Arena>>,
    /// Non-blocking receives that found nothing: every 64th asks whether the node daemon
    /// is still there (a system call).
    pub(crate) empty_polls: AtomicU32,
    /// A call on the connection answered ECONNRESET: the connection is lost for good, as
    /// if the peer had closed (what was received can still be taken), whatever a later
    /// look at the peer's node would say.
    pub(crate) reset: AtomicBool,
}

impl Conn {
    /// Whether this endpoint's node daemon is gone, as far as a cheap look tells: the
    /// event thread's flag always, the session socket's hang-up every 64th call. Bytes
    /// relayed from the peer come through that daemon, so nothing more will arrive.
    pub(crate) fn daemon_lost_lately(&self) -> bool {
        if self.session.daemon_gone() {
            return true;
        }
        self.empty_polls.fetch_add(1, Ordering::Relaxed) % 64 == 63 && self.session.hung_up()
    }

    /// Whether the peer is gone: it closed (or its node was lost, as the daemon tells), or
    /// a call on the connection answered ECONNRESET before.
    pub(crate) fn peer_closed(&self) -> bool {
        self.reset.load(Ordering::Acquire) || self.region.closed(1 - self.side).load(Ordering::Acquire) != 0
    }

    /// `r`, the outcome of a call on the connection; an ECONNRESET makes the connection
    /// lost for good (every later call answers it too, never ENODEV or a success). So does
    /// this node's daemon gone (ENODEV from it: it held the connection, and the peer has
    /// lost it too).
    pub(crate) fn lost_if<T>(&self, r: Result<T>) -> Result<T> {
        let r = match r {
            Err(Error::NoDevice) if self.session.hung_up() => Err(Error::Reset),
            r => r,
        };
        if matches!(r, Err(Error::Reset)) {
            self.reset.store(true, Ordering::Release);
        }
        r
    }
}

impl Conn {
    /// The connection of a `ScifConnected` answer, and the direct flow that came with it
    /// (a third descriptor: the caller makes it the endpoint's descriptor).
    pub(crate) fn adopt(
        session: Session,
        reply: Reply,
        mut fds: Vec<OwnedFd>,
        local: PortId,
    ) -> Result<(Conn, Option<OwnedFd>)> {
        let Reply::ScifConnected { side, remote, peer_node, peer_port } = reply else {
            return Err(Error::Invalid(format!("unexpected answer {reply:?}")));
        };
        let flow = match fds.len() {
            3 if remote && remora_sys::flow::is_flow(fds[2].as_fd()) => fds.pop(),
            _ => None,
        };
        if fds.len() != 2 || side > 1 {
            return Err(Error::Invalid("connection answer without its descriptors".into()));
        }
        let peer_ringer = fds.pop().expect("two");
        let region_fd = fds.pop().expect("two");
        let region = MsgRegion::open(region_fd.as_fd()).map_err(|e| Error::NoMemory(e.to_string()))?;
        let conn = Conn {
            session: Arc::new(session),
            region,
            remote,
            direct: flow.is_some(),
            side: side as usize,
            peer_ringer,
            local,
            peer: PortId { node: peer_node, port: peer_port },
            send_lock: Excl::default(),
            recv_lock: Excl::default(),
            own_windows: Default::default(),
            leases: Mutex::default(),
            arena: Mutex::default(),
            peer_windows: Default::default(),
            both_windows: Default::default(),
            empty_polls: AtomicU32::new(0),
            reset: AtomicBool::new(false),
        };
        Ok((conn, flow))
    }
}

/// One window as this process sees it: mapped (its pieces in one map), with the memfd of
/// each piece.
pub(crate) struct Win {
    pub(crate) info: ScifWindow,
    pub(crate) fds: Vec<Arc<OwnedFd>>,
    pub(crate) map: Arc<Mapping>,
    /// Each piece's memfd: device and inode.
    pub(crate) files: Vec<(u64, u64)>,
}

/// Our windows and the peer's, as [`Conn::windows`](crate::conn::Conn) gave them.
pub(crate) type WinPair = (Arc<Vec<Win>>, Arc<Vec<Win>>);

/// A [`WinPair`] and the generations of our list and the peer's it was made at.
pub(crate) type BothWindows = ((u32, u32), Arc<WinPair>);

/// The windows of one end, valid for one generation of its window list.
#[derive(Default)]
pub(crate) struct WinCache {
    pub(crate) gen: Option<u32>,
    pub(crate) list: Arc<Vec<Win>>,
}

/// The registered windows of an endpoint's peer on another host, as the DSM pager and RMA
/// reach them: through the endpoint session's pager flow, else through the daemons. A map's
/// has the connection too, for the route to the peer's node.
#[derive(Debug)]
struct PeerWindows {
    /// The connection of a map (`None` for RMA, which never asks for the route).
    conn: Option<Weak<Conn>>,
    /// The route as last seen (a look while another request holds the session answers it).
    seen: AtomicU8,
}

impl remora_client::dsm::RemoteRange for PeerWindows {
    fn key(&self) -> u64 {
        // One endpoint session has one peer.
        u64::MAX
    }

    fn flow_request(&self) -> Request {
        Request::Scif(ScifRequest::PagerFlow)
    }

    fn read_request(&self, offset: u64, len: u32) -> Request {
        Request::Scif(ScifRequest::RemoteRead { offset, len })
    }

    fn write_requests(&self, runs: Vec<(u64, Vec<u8>)>) -> Vec<Request> {
        if runs.is_empty() {
            return vec![Request::Scif(ScifRequest::RemoteWrite { offset: 0, data: Vec::new() })];
        }
        runs.into_iter()
            .map(|(offset, data)| Request::Scif(ScifRequest::RemoteWrite { offset, data }))
            .collect()
    }

    /// Lost once the connection is (reset, the peer closed, its node or this node's daemon
    /// lost); else up while this node's daemon counts the peer's node among those it
    /// reaches now, silent while it does not (a cable cut): a pager whose flow failed waits
    /// for the route then, as SISCI's maps do.
    fn route(&self) -> Route {
        let Some(c) = self.conn.as_ref().and_then(Weak::upgrade) else { return Route::Lost };
        if c.peer_closed() || c.session.daemon_gone() {
            return Route::Lost;
        }
        let asked = c.session.try_request(Request::Scif(ScifRequest::Nodes), &[]);
        // The daemon's events (a lost node's connections) came in before its answer.
        let route = match asked {
            _ if c.session.any_lost().is_some() => Route::Lost,
            None => return seen_route(self.seen.load(Ordering::Acquire)),
            Some(Ok((Reply::ScifNodes(nodes), _))) if nodes.contains(&c.peer.node) => Route::Up,
            Some(Ok((Reply::ScifNodes(_), _))) => Route::Silent,
            Some(Err(remora_client::ClientError::DaemonGone)) => Route::Lost,
            Some(_) => return seen_route(self.seen.load(Ordering::Acquire)),
        };
        if route == Route::Lost {
            // Lost for good: every call on the connection answers ECONNRESET from now on.
            c.reset.store(true, Ordering::Release);
        }
        self.seen.store(route as u8, Ordering::Release);
        route
    }
}

fn seen_route(v: u8) -> Route {
    match v {
        x if x == Route::Up as u8 => Route::Up,
        x if x == Route::Silent as u8 => Route::Silent,
        _ => Route::Lost,
    }
}

/// The peer's windows as a [`remora_client::dsm::RemoteRange`] for RMA.
pub(crate) fn peer_windows() -> Arc<dyn remora_client::dsm::RemoteRange> {
    Arc::new(PeerWindows { conn: None, seen: AtomicU8::new(Route::Up as u8) })
}

/// The peer's windows as a map of them reaches them: with the route to the peer's node.
pub(crate) fn mapped_peer_windows(conn: &Arc<Conn>) -> Arc<dyn remora_client::dsm::RemoteRange> {
    Arc::new(PeerWindows { conn: Some(Arc::downgrade(conn)), seen: AtomicU8::new(Route::Up as u8) })
}
