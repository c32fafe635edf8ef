//! One peer node of another host: the link's liveness (the decisions are
//! [`Liveness`]'s; this file carries out its actions), its control flow's pending requests,
//! and its bulk flow's waiting operations. The `ofi` transport keeps its peers in the same
//! type: its control messages travel as fabric messages instead of a TCP stream (the bulk
//! and pager fields stay empty there).

use crate::transport::liveness::{Action, Liveness};
use crate::transport::{Inbound, LinkInfo, LinkState};
use remora_proto::link::{BulkHeader, LinkMsg, PeerReply, PeerRequest, RangeRef};
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

/// A bulk frame waiting for the writer thread.
pub(in crate::transport) struct BulkOut {
    pub(in crate::transport) hdr: BulkHeader,
    pub(in crate::transport) payload: Option<(Arc<Mapping>, usize)>,
}

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
    pub(in crate::transport) bulk: Mutex<Option<(StdStream, std::sync::mpsc::Sender<BulkOut>)>>,
    /// The pager flows this peer's processes hold to us (shut down when the peer is lost).
    /// With what each is bound to, once its first frame came.
    pub(in crate::transport) pager_flows: Mutex<HashMap<u64, (StdStream, Option<RangeRef>)>>,
    pub(in crate::transport) bulk_wait: Mutex<HashMap<u64, BulkWait>>,
    pub(in crate::transport) accepted: Mutex<Option<mpsc::UnboundedSender<(TcpStream, u64)>>>,
    pub(in crate::transport) changed: Notify,
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
            bulk: Mutex::new(None),
            pager_flows: Mutex::new(HashMap::new()),
            bulk_wait: Mutex::new(HashMap::new()),
            accepted: Mutex::new(None),
            changed: Notify::new(),
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
        self.live().holds(origin);
        if !self.send(LinkMsg::Request { id, origin, req }) {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            return Err(Error::NodeNotResponding);
        }
        rx.await.unwrap_or(Err(Error::NodeNotResponding))
    }

    /// Session `origin` of this node ended: tell the peer to release what it held for it.
    pub fn session_end(self: &Arc<Self>, origin: u64) {
        let acts = self.live().session_ended(origin);
        self.apply(acts);
    }

    /// Queue a bulk frame for the link's writer thread; `wait` (for our own operations,
    /// never for replies) is registered under the frame's tag before it leaves. Never blocks
    /// on the socket, so a reader answering a request cannot deadlock against the peer.
    pub(in crate::transport) fn bulk_send(
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
                    for (_, tx) in self.pending.lock().unwrap_or_else(|p| p.into_inner()).drain() {
                        let _ = tx.send(Err(Error::NodeNotResponding));
                    }
                }
                Action::ResetDataFlows => {
                    self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).clear();
                    if let Some((s, _)) = self.bulk.lock().unwrap_or_else(|p| p.into_inner()).take() {
                        let _ = s.shutdown(std::net::Shutdown::Both);
                    }
                }
                // The control loop sends heartbeats and closes connections itself.
                Action::Ping | Action::Close => {}
                Action::SendSessionEnd(origin) => {
                    if !self.send(LinkMsg::SessionEnd { origin }) {
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
                let served = self.inbound.request(self.id, origin, req);
                tokio::spawn(async move {
                    let result = served.await;
                    p.send(LinkMsg::Reply { id, result });
                });
            }
            LinkMsg::Reply { id, result } => {
                if let Some(tx) = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                    let _ = tx.send(result);
                }
            }
            LinkMsg::Event { origin, event } => self.inbound.event(self.id, origin, event),
            LinkMsg::SessionEnd { origin } => self.inbound.session_end(self.id, origin),
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
        }
    }
}
