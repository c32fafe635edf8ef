//! One peer node of another host: the link's liveness (the decisions are
//! [`Liveness`]'s; this file carries out its actions), its control flow's pending requests,
//! and its bulk flow's waiting operations. The `ofi` transport keeps its peers in the same
//! type: its control messages travel as fabric messages instead of a TCP stream (the bulk
//! and pager fields stay empty there).

use crate::transport::liveness::{Action, Liveness};
use crate::transport::{Inbound, LinkInfo, LinkState};
use remora_proto::link::{BulkHeader, LinkMsg, PeerReply, PeerRequest, RangeRef, BULK_LANES};
use remora_proto::Error;
use remora_sys::Mapping;
use std::collections::HashMap;
use std::net::TcpStream as StdStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};

type Pending = HashMap<u64, oneshot::Sender<Result<PeerReply, Error>>>;

/// The bit of a request's id that makes it a post ([`TcpPeer::post`]): the peer answers it
/// only when it failed. Plain ids count up from 1 and never reach it.
pub(in crate::transport) const QUIET: u64 = 1 << 63;

/// What waits for a bulk operation's answer.
pub(in crate::transport) enum BulkWait {
    Ack(std::sync::mpsc::Sender<bool>),
    Read { dest: Arc<Mapping>, off: usize, len: u64, done: std::sync::mpsc::Sender<bool> },
}

/// One remote node.
pub struct TcpPeer {
    /// Its node id.
    pub id: u32,
    /// Its address.
    pub addr: String,
    pub(in crate::transport) inbound: Arc<dyn Inbound>,
    /// The link's state, the peer's start, the sessions of ours it holds something for and
    /// the ends waiting to be told: every decision about them.
    pub(in crate::transport) live: Mutex<Liveness>,
    pub(in crate::transport) ctrl: Mutex<Option<mpsc::UnboundedSender<LinkMsg>>>,
    pub(in crate::transport) pending: Mutex<Pending>,
    pub(in crate::transport) next: AtomicU64,
    /// The peer's incarnation as [`Liveness`] last saw it, for the flows that check it
    /// without taking the lock.
    pub(in crate::transport) peer_incarnation: AtomicU64,
    pub(in crate::transport) rtt_us: AtomicU64,
    /// Bytes received.
    pub bytes_in: AtomicU64,
    /// Bytes sent.
    pub bytes_out: AtomicU64,
    /// The sending sides of the link's bulk flows, by lane ([`Flow::Bulk`] is lane 0, the
    /// [`Flow::BulkLane`]s the others; a lane not up sends on lane 0).
    ///
    /// [`Flow::Bulk`]: remora_proto::link::Flow::Bulk
    /// [`Flow::BulkLane`]: remora_proto::link::Flow::BulkLane
    pub(in crate::transport) bulk: Mutex<[Option<Arc<super::bulk_tx::BulkTx>>; BULK_LANES]>,
    /// The pager flows this peer's processes hold to us (shut down when the peer is lost).
    /// With what each is bound to, once its first frame came.
    pub(in crate::transport) pager_flows: Mutex<HashMap<u64, (StdStream, Option<RangeRef>)>>,
    pub(in crate::transport) bulk_wait: Mutex<HashMap<u64, BulkWait>>,
    pub(in crate::transport) accepted: Mutex<Option<mpsc::UnboundedSender<(TcpStream, u64)>>>,
    pub(in crate::transport) changed: Notify,
    /// Requests given up and session ends the peer has not noted yet (`notices.rs`).
    pub(in crate::transport) notices: Mutex<super::notices::Notices>,
}

impl std::fmt::Debug for TcpPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpPeer").field("id", &self.id).field("addr", &self.addr).finish()
    }
}

impl TcpPeer {
    pub(in crate::transport) fn new(inbound: Arc<dyn Inbound>, id: u32, addr: String) -> TcpPeer {
        TcpPeer {
            id,
            addr,
            inbound,
            live: Mutex::new(Liveness::new(Duration::from_millis(200))),
            ctrl: Mutex::new(None),
            pending: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            peer_incarnation: AtomicU64::new(0),
            rtt_us: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            bulk: Mutex::new(Default::default()),
            pager_flows: Mutex::new(HashMap::new()),
            bulk_wait: Mutex::new(HashMap::new()),
            accepted: Mutex::new(None),
            changed: Notify::new(),
            notices: Mutex::new(Default::default()),
        }
    }

    /// A new peer, and the receiving end of the connections its listener accepts for it.
    pub(in crate::transport) fn with_accepts(
        inbound: Arc<dyn Inbound>,
        id: u32,
        addr: String,
    ) -> (Arc<TcpPeer>, mpsc::UnboundedReceiver<(TcpStream, u64)>) {
        let peer = Arc::new(TcpPeer::new(inbound, id, addr));
        let (tx, rx) = mpsc::unbounded_channel();
        *peer.accepted.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        (peer, rx)
    }

    /// The link's state.
    pub fn state(&self) -> LinkState {
        self.live().state()
    }

    pub(in crate::transport) fn live(&self) -> std::sync::MutexGuard<'_, Liveness> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(in crate::transport) fn notices(&self) -> std::sync::MutexGuard<'_, super::notices::Notices> {
        self.notices.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Request `id` was given up before its answer was taken: the peer is told (now if the
    /// link is up, else on the next connection), so that it releases what it made.
    fn gave_up(&self, id: u64) {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        let m = self.notices().gave_up(id);
        self.send(m);
    }

    /// `m` does not fit in a frame, so the link's writer cannot send it: a request fails at
    /// once (its caller would wait for ever for the answer to a message that never left),
    /// and a reply becomes a refusal (or the peer's caller would). What to send instead.
    pub(in crate::transport) fn unsendable(&self, m: LinkMsg) -> Option<LinkMsg> {
        match m {
            LinkMsg::Request { id, .. } => {
                tracing::warn!(peer = self.id, "a request too large for a link frame failed");
                let waiter = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                if let Some(tx) = waiter {
                    let _ = tx.send(Err(Error::IllegalParameter(
                        "the request does not fit in a link frame".into(),
                    )));
                }
                None
            }
            LinkMsg::Reply { id, .. } => {
                tracing::warn!(peer = self.id, "an answer too large for a link frame was refused");
                Some(LinkMsg::Reply {
                    id,
                    result: Err(Error::System("the answer does not fit in a link frame".into())),
                })
            }
            _ => {
                tracing::warn!(peer = self.id, "a link message too large for a frame was not sent");
                None
            }
        }
    }

    /// A new connection to the peer's start is up (its sender installed): tell again what
    /// the peer has not noted yet, before anything else goes on it.
    pub(in crate::transport) fn tell_again(&self) {
        let again = self.notices().again();
        for m in again {
            self.send(m);
        }
    }

    /// The last heartbeat round trip.
    pub fn rtt_us(&self) -> u64 {
        self.rtt_us.load(Ordering::Relaxed)
    }

    pub(in crate::transport) fn send(&self, m: LinkMsg) -> bool {
        match self.ctrl.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(tx) => tx.send(m).is_ok(),
            None => false,
        }
    }

    /// Ask the peer, for session `origin` of this node; waits for the answer (or the link's
    /// loss). Waits for a link that is coming up, for up to 5 seconds. A request sent whose
    /// answer is not taken (the future is dropped, or the connection broke first) is told
    /// to the peer as given up ([`LinkMsg::GaveUp`]).
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
        self.live().holds(origin);
        if !self.send(LinkMsg::Request { id, origin, req }) {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            return Err(Error::NodeNotResponding);
        }
        // From here the peer may serve it: unless its answer is taken, it is given up.
        let mut untaken = Untaken { peer: self, id: Some(id) };
        match rx.await {
            Ok(answer) => {
                untaken.id = None;
                answer
            }
            // The connection broke first (its requests' senders were dropped).
            Err(_) => Err(Error::NodeNotResponding),
        }
    }

    /// Send a request that the peer answers only when it fails (`QUIET`), in order with
    /// every other; see [`crate::transport::Transport::post`]. The watch is a pending entry
    /// like a request's, so a connection that breaks fails it; `replaces` (the caller's
    /// previous watch) is dropped. `Err` gives the request back when the link is not up.
    pub(in crate::transport) fn post(
        &self,
        origin: u64,
        req: PeerRequest,
        replaces: Option<u64>,
    ) -> Result<crate::transport::Posted, PeerRequest> {
        let Some(ctrl) = self.ctrl.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return Err(req);
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed) | QUIET;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(old) = replaces {
                pending.remove(&old);
            }
            pending.insert(id, tx);
        }
        self.live().holds(origin);
        let outcome: crate::transport::BoxFuture<'static, _> =
            if ctrl.send(LinkMsg::Request { id, origin, req }).is_ok() {
                Box::pin(async move { rx.await.unwrap_or(Err(Error::NodeNotResponding)) })
            } else {
                // The connection ended under us: as a request sent now fails at once.
                self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                Box::pin(async { Err(Error::NodeNotResponding) })
            };
        Ok(crate::transport::Posted { id, outcome })
    }

    /// Drop the watch of a post.
    pub(in crate::transport) fn unwatch(&self, id: u64) {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }

    /// Session `origin` of this node ended: tell the peer to release what it held for it.
    pub fn session_end(self: &Arc<Self>, origin: u64) {
        let acts = self.live().session_ended(origin);
        self.apply(acts);
    }

    /// Send a bulk frame on the link's bulk flow `lane` (`bulk_tx.rs`; lane 0 when that one
    /// is not up); `wait` (for our own operations, never for replies) is registered under
    /// the frame's tag before it leaves. Never blocks on the socket, so a reader answering
    /// a request cannot deadlock against the peer, and a DMA worker notices a silent link.
    pub(in crate::transport) fn bulk_send(
        &self,
        lane: usize,
        hdr: BulkHeader,
        payload: Option<(Arc<Mapping>, usize)>,
        wait: Option<BulkWait>,
    ) -> Result<(), ()> {
        let own = wait.is_some();
        if let Some(wait) = wait {
            self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).insert(hdr.tag, wait);
        }
        let tx = {
            let lanes = self.bulk.lock().unwrap_or_else(|p| p.into_inner());
            if own {
                stuck_lane(self as *const TcpPeer as usize, &lanes, lane)
            } else {
                lanes.get(lane).cloned().flatten().or_else(|| lanes[0].clone())
            }
        };
        let bytes = remora_proto::link::BULK_FRAME as u64 + if payload.is_some() { hdr.len } else { 0 };
        match tx.map(|tx| tx.send(super::bulk_tx::BulkOut { hdr, payload })) {
            Some(Ok(())) => {
                self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
                Ok(())
            }
            _ => {
                self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).remove(&hdr.tag);
                Err(())
            }
        }
    }

    /// Carry out what [`Liveness`] decided (never with its lock held: the node's handler
    /// of a link change may call back into this peer).
    pub(in crate::transport) fn apply(self: &Arc<Self>, acts: Vec<Action>) {
        for a in acts {
            match a {
                Action::Changed { from, to } => {
                    tracing::info!(peer = self.id, "link {from:?} -> {to:?}");
                    self.changed.notify_waiters();
                }
                Action::VoidPeerStart => {
                    // Everything of the old start is void: its pager flows (what it held
                    // for sessions of ours is forgotten by `Liveness`).
                    for (_, (s, _)) in self.pager_flows.lock().unwrap_or_else(|p| p.into_inner()).drain() {
                        let _ = s.shutdown(std::net::Shutdown::Both);
                    }
                }
                Action::Report(state) => self.inbound.link_changed(self.id, state),
                Action::FailRequests => {
                    // Dropped unanswered: each waiter fails with `NodeNotResponding` and
                    // tells the peer its request was given up (the peer may have it).
                    drop(std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner())));
                }
                Action::ResetDataFlows => {
                    self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).clear();
                    for tx in self.bulk.lock().unwrap_or_else(|p| p.into_inner()).iter_mut() {
                        if let Some(tx) = tx.take() {
                            tx.close();
                        }
                    }
                }
                // The control loop sends heartbeats and closes connections itself.
                Action::Ping | Action::Close => {}
                Action::SendSessionEnd(origin) => {
                    // Kept until the peer notes it (told again on the next connection).
                    let m = self.notices().ended(origin);
                    if !self.send(m) {
                        self.notices().unsent_end(origin);
                        self.live().remember(origin);
                    }
                }
            }
        }
    }

    /// Serve one control message that came from the peer; `sent` holds the heartbeats
    /// waiting for their answer. `false`: a message that has no place on an established
    /// link (the caller closes it).
    pub(in crate::transport) fn serve_ctrl(
        self: &Arc<Self>,
        m: LinkMsg,
        sent: &mut HashMap<u64, Instant>,
    ) -> bool {
        let acts = self.live().heard(Instant::now());
        self.apply(acts);
        match m {
            LinkMsg::Ping { seq } => {
                self.send(LinkMsg::Pong { seq });
            }
            LinkMsg::Pong { seq } => {
                if let Some(t) = sent.remove(&seq) {
                    self.rtt_us.store(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                }
            }
            LinkMsg::Request { id, origin, req } => {
                let p = self.clone();
                let mut served = self.inbound.request_numbered(self.id, origin, id, req);
                if id & QUIET != 0 {
                    // A post is served here and now as far as it goes, so that posts done at
                    // once (a relay's bytes) take effect in the order they came, whatever
                    // order the runtime runs its tasks in; it is answered only when it failed.
                    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                    if let std::task::Poll::Ready(result) = served.as_mut().poll(&mut cx) {
                        if result.is_err() {
                            self.send(LinkMsg::Reply { id, result });
                        }
                        return true;
                    }
                }
                tokio::spawn(async move {
                    let result = served.await;
                    if id & QUIET == 0 || result.is_err() {
                        p.send(LinkMsg::Reply { id, result });
                    }
                });
            }
            LinkMsg::Reply { id, result } => {
                if let Some(tx) = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                    let _ = tx.send(result);
                }
            }
            LinkMsg::Event { origin, event } => self.inbound.event(self.id, origin, event),
            LinkMsg::SessionEnd { origin } => {
                self.inbound.session_end(self.id, origin);
                self.send(LinkMsg::SessionEndNoted { origin });
            }
            LinkMsg::GaveUp { id } => {
                self.inbound.gave_up(self.id, id);
                self.send(LinkMsg::GaveUpNoted { id });
            }
            m @ (LinkMsg::GaveUpNoted { .. } | LinkMsg::SessionEndNoted { .. }) => self.notices().noted(&m),
            other => {
                tracing::warn!(peer = self.id, "unexpected {other:?} on an established link; closing it");
                return false;
            }
        }
        true
    }

    /// A heartbeat period passed: ping when [`Liveness`] says so. `false`: silent far
    /// past any pause, the caller gives the connection up (failing what waits on it, and
    /// letting redial, or loss, decide).
    pub(in crate::transport) fn heartbeat_tick(
        self: &Arc<Self>,
        seq: &mut u64,
        sent: &mut HashMap<u64, Instant>,
    ) -> bool {
        let acts = self.live().tick(Instant::now());
        if acts.contains(&Action::Ping) {
            *seq += 1;
            sent.insert(*seq, Instant::now());
            sent.retain(|k, _| *k + 64 > *seq);
            self.send(LinkMsg::Ping { seq: *seq });
        }
        let close = acts.contains(&Action::Close);
        self.apply(acts);
        if close {
            let n = crate::transport::liveness::GIVE_UP_PERIODS;
            tracing::warn!(peer = self.id, "no frame for {n} heartbeats: closing the link");
        }
        !close
    }

    /// What status shows of this link.
    pub(in crate::transport) fn info(&self) -> LinkInfo {
        LinkInfo {
            node: self.id,
            addr: self.addr.clone(),
            state: self.state(),
            rtt_us: self.rtt_us(),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            rma_peak: 0,
        }
    }
}

/// A request sent whose answer was not taken yet: dropped while it still names the
/// request, it tells the peer the request was given up.
struct Untaken<'a> {
    peer: &'a TcpPeer,
    id: Option<u64>,
}

impl Drop for Untaken<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.peer.gave_up(id);
        }
    }
}

type Lanes = [Option<Arc<super::bulk_tx::BulkTx>>; BULK_LANES];

thread_local! {
    /// Per peer (by its address), the bulk flow this thread's own frames took last.
    static STUCK: std::cell::RefCell<Vec<(usize, std::sync::Weak<super::bulk_tx::BulkTx>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The flow for the calling thread's own frames to peer `key`: the one it used last while
/// that is still one of the link's lanes, else `lane` (lane 0 when `lane` is not up). A
/// thread that began on lane 0 because its lane was not up yet (the accepting side, in the
/// first moments of a link) stays there: moving to its lane when that came up would put a
/// transfer's later chunks on another stream than its earlier ones, and an overlapping
/// later piece could land first.
fn stuck_lane(key: usize, lanes: &Lanes, lane: usize) -> Option<Arc<super::bulk_tx::BulkTx>> {
    let current = |tx: &Arc<super::bulk_tx::BulkTx>| lanes.iter().flatten().any(|l| Arc::ptr_eq(l, tx));
    let fresh = || lanes.get(lane).cloned().flatten().or_else(|| lanes[0].clone());
    STUCK
        .try_with(|s| {
            let mut s = s.borrow_mut();
            s.retain(|(_, w)| w.strong_count() > 0);
            let last = s.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade());
            match last {
                Some(tx) if current(&tx) => Some(tx),
                _ => {
                    let tx = fresh()?;
                    s.retain(|(k, _)| *k != key);
                    s.push((key, Arc::downgrade(&tx)));
                    Some(tx)
                }
            }
        })
        .unwrap_or_else(|_| fresh())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::transport::{BoxFuture, PeerMemory};

    /// Answers `Probe` with Ok and everything else with a refusal.
    struct Answers;

    impl Inbound for Answers {
        fn request(&self, _: u32, _: u64, req: PeerRequest) -> BoxFuture<'static, Result<PeerReply, Error>> {
            let ok = req == PeerRequest::Probe;
            let answer = if ok { Ok(PeerReply::Ok) } else { Err(Error::NotConnected) };
            Box::pin(async move { answer })
        }
        fn session_end(&self, _: u32, _: u64) {}
        fn event(&self, _: u32, _: u64, _: remora_proto::Event) {}
        fn link_changed(&self, _: u32, _: LinkState) {}
        fn route_lost(&self, _: u32, _: u64) {}
        fn memory(&self, _: u32, _: RangeRef) -> Option<Arc<dyn PeerMemory>> {
            None
        }
    }

    /// A peer whose link is up, and what it sends.
    pub(in crate::transport) fn peer() -> (Arc<TcpPeer>, mpsc::UnboundedReceiver<LinkMsg>) {
        let p = Arc::new(TcpPeer::new(Arc::new(Answers), 8, "nowhere:1".into()));
        let (tx, rx) = mpsc::unbounded_channel();
        *p.ctrl.lock().unwrap() = Some(tx);
        (p, rx)
    }

    #[test]
    fn a_thread_keeps_the_lane_it_began_on_while_that_lane_lives() {
        use super::super::bulk_tx::BulkTx;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let flow = || {
            let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let _ = l.accept().unwrap();
            Arc::new(BulkTx::new(s))
        };
        let (zero, one) = (flow(), flow());
        let mut lanes: Lanes = Default::default();
        lanes[0] = Some(zero.clone());
        // Lane 1 not up yet: lane 0, and still lane 0 once lane 1 came up.
        assert!(Arc::ptr_eq(&stuck_lane(7, &lanes, 1).unwrap(), &zero));
        lanes[1] = Some(one.clone());
        assert!(Arc::ptr_eq(&stuck_lane(7, &lanes, 1).unwrap(), &zero));
        // Another peer, or another thread, takes its own lane at once.
        assert!(Arc::ptr_eq(&stuck_lane(8, &lanes, 1).unwrap(), &one));
        let l2 = lanes.clone();
        let other = std::thread::spawn(move || stuck_lane(7, &l2, 1).unwrap()).join().unwrap();
        assert!(Arc::ptr_eq(&other, &one));
        // Lane 0 replaced (a new flow after a break): the thread goes to its own lane.
        lanes[0] = Some(flow());
        assert!(Arc::ptr_eq(&stuck_lane(7, &lanes, 1).unwrap(), &one));
    }

    #[test]
    fn a_post_is_answered_only_when_it_failed_and_a_broken_connection_fails_its_watch() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (p, mut out) = peer();
            // Without a link the request comes back, to be asked the ordinary way.
            let idle = Arc::new(TcpPeer::new(Arc::new(Answers), 9, "nowhere:1".into()));
            assert!(matches!(idle.post(1, PeerRequest::Probe, None), Err(PeerRequest::Probe)));
            // A post goes out at once, with the quiet bit; the next replaces its watch.
            let first = p.post(1, PeerRequest::Probe, None).ok().unwrap();
            let Some(LinkMsg::Request { id, .. }) = out.recv().await else { panic!("no request sent") };
            assert_eq!((id, id & QUIET), (first.id, QUIET));
            let second = p.post(1, PeerRequest::Probe, Some(first.id)).ok().unwrap();
            assert!(!p.pending.lock().unwrap().contains_key(&first.id), "the older watch is dropped");
            // The peer's side: a post that succeeded is not answered, one that failed is.
            let mut sent = HashMap::new();
            p.serve_ctrl(LinkMsg::Request { id: 5 | QUIET, origin: 1, req: PeerRequest::Probe }, &mut sent);
            let refused = PeerRequest::Disconnect { conn: 3 };
            p.serve_ctrl(LinkMsg::Request { id: 6 | QUIET, origin: 1, req: refused }, &mut sent);
            out.recv().await.unwrap(); // the second post
            match out.recv().await {
                Some(LinkMsg::Reply { id, result: Err(Error::NotConnected) }) => assert_eq!(id, 6 | QUIET),
                other => panic!("expected only the failure's answer, got {other:?}"),
            }
            // The connection breaks: the watch fails, as a request in flight would.
            p.apply(vec![Action::FailRequests]);
            assert_eq!(second.outcome.await.unwrap_err(), Error::NodeNotResponding);
            // An error answer to a post fails its watch too.
            let third = p.post(1, PeerRequest::Probe, None).ok().unwrap();
            p.serve_ctrl(LinkMsg::Reply { id: third.id, result: Err(Error::NotConnected) }, &mut sent);
            assert_eq!(third.outcome.await.unwrap_err(), Error::NotConnected);
            p.unwatch(third.id);
        });
    }
}
