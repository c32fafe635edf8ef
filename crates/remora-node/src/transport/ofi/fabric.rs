//! The node's fabric endpoint and its progress thread: one `FI_EP_RDM` endpoint for every
//! peer, receive buffers posted once, and one thread that waits for completions without
//! spinning (the endpoint's wait: `fi_trywait`, then `poll` on the completion queue's fd)
//! and hands each message to the link whose token it carries, and each RMA completion to
//! whoever waits for it. A message to a peer that is lost — its send refused, its queue
//! full past the link's patience, or completed with an error — takes the link of its
//! connection down ([`Fabric::broke`]), as a write error ends a TCP link: nothing waits for
//! an answer that cannot come, and notices are told again on the next connection. Sends and
//! RMA pieces are posted only while their connection is routed; answers that find the send
//! queue full wait, in order, for the progress thread to try them again (`send.rs`).

use super::window::Window;
use super::wire::{Body, Wire};
use crate::transport::tcp::peer::TcpPeer;
use remora_ofi_sys::{Access, Endpoint, Region};
use remora_proto::link::{RangeRef, MAX_LINK_FRAME};
use remora_proto::{decode, encode};
use remora_sys::Mapping;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

/// Receive buffers posted (each takes one message of up to a control frame).
const RECVS: usize = 64;
/// Room for the token and the body's framing around the largest control frame.
const RECV_SIZE: usize = MAX_LINK_FRAME + 1024;
/// How often registrations whose mapping went away are closed, at most.
const SWEEP: Duration = Duration::from_millis(500);

/// Our transfers waiting for a peer's answers, by tag.
pub(super) type Waiters = Arc<Mutex<HashMap<u64, std::sync::mpsc::Sender<Body>>>>;

/// The registrations a peer's open transfers reach, by its tag (kept open until the
/// transfer's close, even if the connection goes meanwhile).
pub(super) type Served = Arc<Mutex<HashMap<u64, Arc<Region>>>>;

/// Transfers one peer may hold open at once.
const MAX_OPEN: usize = 256;

/// Where messages carrying one token go: answers to our transfers straight to whoever
/// waits for them, the rest to the link's task.
struct Route {
    peer: Arc<TcpPeer>,
    tx: mpsc::UnboundedSender<Body>,
    waiters: Waiters,
    /// Where answers to the peer go, and their token (`None` until the peer's bootstrap
    /// frame is read: its requests go to the link's task meanwhile).
    reply: Option<(u64, u64)>,
    served: Served,
    early: Arc<AtomicUsize>,
    /// Told when a message to the peer was lost on the fabric (a send refused, or one that
    /// completed with an error): the link's task takes the link down.
    broken: Arc<Notify>,
    /// That loss was said (once per connection).
    said: bool,
}

/// A link's routing, as [`Fabric::route`] takes it.
pub(super) struct Routing {
    /// The peer.
    pub peer: Arc<TcpPeer>,
    /// Its control messages and RMA requests, for the link's task.
    pub tx: mpsc::UnboundedSender<Body>,
    /// Our transfers waiting for its answers.
    pub waiters: Waiters,
    /// Its endpoint and the token its messages must carry, once known
    /// ([`Fabric::reply_to`]).
    pub reply: Option<(u64, u64)>,
    /// The registrations its open transfers reach.
    pub served: Served,
    /// Its RMA requests queued for the link's task and not yet served there ([`served_early`]):
    /// while any are, later ones queue behind them, so that none overtakes them.
    pub early: Arc<AtomicUsize>,
    /// Told when a message to the peer was lost on the fabric ([`Fabric::broke`]).
    pub broken: Arc<Notify>,
}

/// The link's task served an RMA request of the peer (`rma::serve`): if it was one queued
/// while the link came up, one fewer waits (never below none: requests queued once the link
/// is up, behind the early ones, are not counted).
pub(super) fn served_early(early: &AtomicUsize) {
    let _ = early.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
}

/// An RMA operation waiting for its completion: who waits, and the link's window its
/// bytes are given back to when it completes (`window.rs`).
struct Op {
    /// The peer's endpoint and token (the connection it went on).
    to: (u64, u64),
    done: std::sync::mpsc::Sender<Result<(), String>>,
    window: Arc<Window>,
    bytes: usize,
    /// The window's generation they were taken under.
    gen: u64,
}

/// An operation posted and not completed yet.
enum Waiting {
    /// An RMA operation, and who waits for it.
    Rma(Op),
    /// A message to the peer's endpoint under its token (its connection): should it fail,
    /// that connection lost it.
    Send {
        to: (u64, u64),
        /// Tests: a message the test lost on its way (`fabric_tests.rs`).
        #[cfg(test)]
        lost: bool,
    },
}

/// The endpoint, the routes of live links, and the operations waiting for completion.
pub(super) struct Fabric {
    pub(super) ep: Arc<Endpoint>,
    routes: Mutex<HashMap<u64, Route>>,
    ops: Mutex<HashMap<u64, Waiting>>,
    /// Answers waiting for room in the send queue, oldest first (`send.rs`).
    unsent: Mutex<std::collections::VecDeque<send::Unsent>>,
    /// Registrations of this node's mappings, made once per mapping and kind of access and
    /// closed once nothing but them holds the mapping ([`Fabric::region`]).
    regs: Mutex<Registrations>,
    stop: AtomicBool,
    /// Tests: the node's bootstrap address, which names its fabric in the tests' hooks.
    #[cfg(test)]
    pub(super) label: Mutex<String>,
    /// The progress thread, which holds the endpoint too (joined at the drop).
    progress: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Fabric {
    /// Open the endpoint of `provider` at `host` and start the progress thread.
    pub(super) fn open(provider: &str, host: Option<&str>) -> Result<Arc<Fabric>, remora_ofi_sys::Error> {
        let ep = Endpoint::open(provider, host, RECVS, RECV_SIZE)?;
        let f = Arc::new(Fabric {
            ep,
            routes: Mutex::new(HashMap::new()),
            ops: Mutex::new(HashMap::new()),
            unsent: Mutex::default(),
            regs: Mutex::new(Registrations::default()),
            stop: AtomicBool::new(false),
            #[cfg(test)]
            label: Mutex::default(),
            progress: Mutex::new(None),
        });
        let weak = Arc::downgrade(&f);
        let ep = f.ep.clone();
        let thread = std::thread::Builder::new()
            .name("remora-ofi".into())
            .spawn(move || progress::progress(ep, weak))
            .map_err(|e| remora_ofi_sys::Error { code: 0, what: e.to_string() })?;
        *f.progress.lock().unwrap_or_else(|p| p.into_inner()) = Some(thread);
        Ok(f)
    }

    /// Messages carrying `token` go to `tx` (a link is coming up: routed before the token
    /// is handed to the peer, so that nothing it sends under it is dropped).
    pub(super) fn route(&self, token: u64, r: Routing) {
        let route = Route {
            peer: r.peer,
            tx: r.tx,
            waiters: r.waiters,
            reply: r.reply,
            served: r.served,
            early: r.early,
            broken: r.broken,
            said: false,
        };
        self.routes.lock().unwrap_or_else(|p| p.into_inner()).insert(token, route);
    }

    /// The peer of the link routed under `token` is at `dest` and wants `theirs` in its
    /// messages: its requests are answered by this thread from now on.
    pub(super) fn reply_to(&self, token: u64, dest: u64, theirs: u64) {
        if let Some(r) = self.routes.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&token) {
            r.reply = Some((dest, theirs));
        }
    }

    /// Messages carrying `token` are dropped from now on (the link went down); what its
    /// connection had in flight or waiting is forgotten ([`Fabric::forget_connection`]).
    pub(super) fn unroute(&self, token: u64) {
        let gone = self.routes.lock().unwrap_or_else(|p| p.into_inner()).remove(&token);
        if let Some(to) = gone.and_then(|r| r.reply) {
            self.forget_connection(to);
        }
    }

    /// Wait for RMA operation `id`'s completion on the receiver returned; its `bytes`,
    /// taken from `window` under generation `gen`, are given back when it completes (or
    /// when its connection `to` is unrouted first, and then it fails).
    pub(super) fn expect(
        &self,
        id: u64,
        to: (u64, u64),
        window: &Arc<Window>,
        (bytes, gen): (usize, u64),
    ) -> std::sync::mpsc::Receiver<Result<(), String>> {
        let (done, rx) = std::sync::mpsc::channel();
        let op = Op { to, done, window: window.clone(), bytes, gen };
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Waiting::Rma(op));
        rx
    }

    /// Forget a wait (the operation was not posted): its bytes go back to its window.
    pub(super) fn forget(&self, id: u64) {
        let op = self.ops.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        if let Some(Waiting::Rma(op)) = op {
            op.window.give(op.bytes, op.gen);
        }
    }

    /// `map` registered for `access`: made at the first use, then the same registration
    /// until nothing but registrations holds the mapping any more. For local use (the
    /// sources of our writes, the destinations of our reads) that is this node's own
    /// mapping; for a peer's access it is the daemon's mapping of the peer's connection to
    /// one of our exports, so the registration lives as long as that connection and is
    /// handed only to the peer whose checked ranges lie in it (`rma.rs`).
    pub(super) fn region(
        &self,
        map: &Arc<Mapping>,
        access: Access,
    ) -> Result<Arc<Region>, remora_ofi_sys::Error> {
        let mut regs = self.regs.lock().unwrap_or_else(|p| p.into_inner());
        regs.sweep();
        let at = (map.as_ptr() as usize, access);
        if let Some(r) = regs.by_map.get(&at).filter(|r| r.mapping().is_some_and(|m| Arc::ptr_eq(m, map))) {
            return Ok(r.clone());
        }
        let r = self.ep.register(map, 0, map.len(), access)?;
        regs.by_map.insert(at, r.clone());
        regs.made += 1;
        Ok(r)
    }

    /// `map`'s registration for `access` if it was made already.
    fn cached(&self, map: &Arc<Mapping>, access: Access) -> Option<Arc<Region>> {
        let regs = self.regs.lock().unwrap_or_else(|p| p.into_inner());
        let r = regs.by_map.get(&(map.as_ptr() as usize, access))?;
        r.mapping().is_some_and(|m| Arc::ptr_eq(m, map)).then(|| r.clone())
    }

    /// How many registrations were made since the endpoint opened, and how many are open.
    #[cfg(test)]
    pub(super) fn registrations(&self) -> (u64, usize) {
        let regs = self.regs.lock().unwrap_or_else(|p| p.into_inner());
        (regs.made, regs.by_map.len())
    }

    /// Close the registrations of mappings nobody else holds any more (also called by the
    /// progress thread, so that a connection's goes soon after the connection).
    pub(super) fn sweep(&self) {
        self.regs.lock().unwrap_or_else(|p| p.into_inner()).sweep();
    }
}

/// The registrations of [`Fabric::region`], by mapping address and access.
#[derive(Default)]
struct Registrations {
    by_map: HashMap<(usize, Access), Arc<Region>>,
    /// Registrations made so far.
    made: u64,
}

impl Registrations {
    /// Drop the registrations whose mapping is held by nothing but them (a transfer that
    /// still holds one keeps it open until it ends).
    fn sweep(&mut self) {
        let mut ours: HashMap<usize, usize> = HashMap::new();
        for (at, _) in self.by_map.keys() {
            *ours.entry(*at).or_default() += 1;
        }
        self.by_map.retain(|(at, _), r| r.mapping().is_some_and(|m| Arc::strong_count(m) > ours[at]));
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The endpoint closes (and a provider's resources go: shm's region file) only once
        // the progress thread has let go of it too: wait for it (at most its completion
        // wait, 200 ms), so that a process that drops its transports and exits leaves
        // nothing behind. Not when the progress thread itself drops the last reference.
        let thread = self.progress.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread.filter(|t| t.thread().id() != std::thread::current().id()) {
            let _ = t.join();
        }
    }
}

/// Transfers up to this size travel in the messages themselves (a receive buffer holds a
/// control frame of 64 KiB).
pub(super) const EAGER: usize = 32 << 10;

/// The mapping and offset of `len` bytes at `offset` of this node's connection `conn`, as
/// `peer` may reach them (one piece: a connection is one region).
fn reach(peer: &TcpPeer, conn: u64, offset: u64, len: u64, write: bool) -> Option<(Arc<Mapping>, usize)> {
    let mem = peer.inbound.memory(peer.id, RangeRef::connection(conn))?;
    let mut pieces = mem.resolve(offset, len, write)?;
    match (pieces.pop(), pieces.is_empty()) {
        (Some((m, at, n)), true) if n as u64 == len => Some((m, at)),
        _ => None,
    }
}

/// Open `len` bytes at `offset` of this node's connection `conn` for transfer `tag` of
/// `peer`: checked by this node's books, then answered with the key and address of the range
/// in the registration of the connection's memory, held for the tag until its close. `None`
/// when that registration is not made yet and `register` is false (a registration may pin
/// pages: the caller hands the request to a thread that may take that long).
#[allow(clippy::too_many_arguments)]
pub(super) fn open_range(
    f: &Fabric,
    peer: &TcpPeer,
    served: &Served,
    tag: u64,
    (conn, offset, len): (u64, u64, u64),
    write: bool,
    register: bool,
) -> Option<Body> {
    let refused = Some(Body::RmaKey { tag, ok: false, addr: 0, key: 0 });
    let Some((m, at)) = reach(peer, conn, offset, len, write) else { return refused };
    let access = if write { Access::RemoteWrite } else { Access::RemoteRead };
    let r = match (f.cached(&m, access), register) {
        (Some(r), _) => r,
        (None, false) => return None,
        // The connection's whole mapping, registered once (the range was checked just
        // above; the provider checks every access against the registration's bounds).
        (None, true) => match f.region(&m, access) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(peer = peer.id, "registering a connection's memory for the peer failed: {e}");
                return refused;
            }
        },
    };
    let mut served = served.lock().unwrap_or_else(|p| p.into_inner());
    if served.len() >= MAX_OPEN {
        tracing::warn!(peer = peer.id, "the peer holds {MAX_OPEN} open RMA transfers: refusing more");
        return refused;
    }
    let (addr, key) = (r.remote_addr(at), r.key());
    served.insert(tag, r);
    Some(Body::RmaKey { tag, ok: true, addr, key })
}

/// Serve a small transfer of `peer` carried in messages (here, on the progress thread, as
/// the tcp transport's bulk reader serves its frames): its answer.
pub(super) fn serve_small(peer: &TcpPeer, body: Body) -> Option<Body> {
    match body {
        Body::Put { tag, conn, offset, data } => {
            let ok = reach(peer, conn, offset, data.len() as u64, true)
                .is_some_and(|(m, at)| m.write(at, &data).is_ok());
            Some(Body::Done { tag, ok, data: Vec::new() })
        }
        Body::Get { tag, conn, offset, len } => {
            let mut data = vec![0u8; len.min(EAGER as u64) as usize];
            let ok = len <= EAGER as u64
                && reach(peer, conn, offset, len, false).is_some_and(|(m, at)| m.read(at, &mut data).is_ok());
            Some(Body::Done { tag, ok, data: if ok { data } else { Vec::new() } })
        }
        _ => None,
    }
}

/// A received message: to the link whose token it carries, or dropped. `false`: it was
/// malformed (dropped; the caller says so, rate-limited, as anyone who reaches the endpoint
/// can send them).
fn deliver(f: &Arc<Fabric>, bytes: &[u8]) -> bool {
    let Ok(w) = decode::<Wire>(bytes) else { return false };
    if matches!(w.body, Body::Put { .. } | Body::Get { .. } | Body::RmaOpen { .. } | Body::RmaClose { .. }) {
        let routes = f.routes.lock().unwrap_or_else(|p| p.into_inner());
        let Some(r) = routes.get(&w.token) else { return true };
        r.peer.bytes_in.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let (dest, token) = match r.reply {
            Some(reply) if r.early.load(Ordering::SeqCst) == 0 => reply,
            _ => {
                // The peer read our bootstrap frame before we read its own: its request
                // waits for the link's task, which serves it once the link is up here too —
                // and so do the requests after it, until the task has served the early ones
                // (a put served here at once could land before an earlier one still queued).
                // Counted and queued under the routes' lock, so that none slips between.
                r.early.fetch_add(1, Ordering::SeqCst);
                let _ = r.tx.send(w.body);
                return true;
            }
        };
        let (peer, served, tx) = (r.peer.clone(), r.served.clone(), r.tx.clone());
        drop(routes);
        let answer = match w.body {
            // Opened here when the connection's memory is registered already; else by the
            // link's task, which may register it.
            Body::RmaOpen { tag, conn, offset, len, write } => {
                let got = open_range(f, &peer, &served, tag, (conn, offset, len), write, false);
                if got.is_none() {
                    let _ = tx.send(Body::RmaOpen { tag, conn, offset, len, write });
                }
                got
            }
            Body::RmaClose { tag } => {
                served.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
                Some(Body::RmaClosed { tag })
            }
            body => serve_small(&peer, body),
        };
        // This thread drives the provider's progress: it never waits for room in a full
        // send queue itself (the answer waits in the queue of unsent answers, `send.rs`).
        if let Some(bytes) = answer.and_then(|b| encode(&Wire { token, body: b }).ok()) {
            f.answer((dest, token), bytes);
        }
        return true;
    }
    let routes = f.routes.lock().unwrap_or_else(|p| p.into_inner());
    match routes.get(&w.token) {
        Some(r) => {
            r.peer.bytes_in.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            match w.body {
                Body::RmaKey { tag, .. } | Body::RmaClosed { tag } | Body::Done { tag, .. } => {
                    let waiter = r.waiters.lock().unwrap_or_else(|p| p.into_inner()).remove(&tag);
                    if let Some(tx) = waiter {
                        let _ = tx.send(w.body);
                    }
                }
                body => {
                    let _ = r.tx.send(body);
                }
            }
        }
        None => tracing::debug!("ofi message without a live link's token dropped"),
    }
    true
}

#[path = "progress.rs"]
mod progress;
#[path = "send.rs"]
mod send;

#[cfg(test)]
#[path = "fabric_tests.rs"]
pub(super) mod tests;
