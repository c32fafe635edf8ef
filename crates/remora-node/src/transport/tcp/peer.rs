//! One peer node of another host: the link's state, its control flow's pending requests,
//! the sessions of ours it holds something for, and its bulk flow's waiting operations.

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
pub(super) struct BulkOut {
    pub(super) hdr: BulkHeader,
    pub(super) payload: Option<(Arc<Mapping>, usize)>,
}

/// What waits for a bulk operation's answer.
pub(super) enum BulkWait {
    Ack(std::sync::mpsc::Sender<bool>),
    Read { dest: Arc<Mapping>, off: usize, len: u64, done: std::sync::mpsc::Sender<bool> },
}

/// One remote node.
pub struct TcpPeer {
    /// Its node id.
    pub id: u32,
    /// Its address.
    pub addr: String,
    pub(super) inbound: Arc<dyn Inbound>,
    pub(super) state: Mutex<LinkState>,
    pub(super) ctrl: Mutex<Option<mpsc::UnboundedSender<LinkMsg>>>,
    pub(super) pending: Mutex<Pending>,
    pub(super) next: AtomicU64,
    pub(super) last_rx: Mutex<Instant>,
    pub(super) peer_incarnation: AtomicU64,
    pub(super) rtt_us: AtomicU64,
    /// Bytes received.
    pub bytes_in: AtomicU64,
    /// Bytes sent.
    pub bytes_out: AtomicU64,
    pub(super) bulk: Mutex<Option<(StdStream, std::sync::mpsc::Sender<BulkOut>)>>,
    /// The pager flows this peer's processes hold to us (shut down when the peer is lost).
    /// With what each is bound to, once its first frame came.
    pub(super) pager_flows: Mutex<HashMap<u64, (StdStream, Option<RangeRef>)>>,
    pub(super) bulk_wait: Mutex<HashMap<u64, BulkWait>>,
    pub(super) accepted: Mutex<Option<mpsc::UnboundedSender<(TcpStream, u64)>>>,
    pub(super) changed: Notify,
    /// Sessions of this node that hold something at the peer (for SessionEnd).
    pub(super) vsessions: Mutex<HashMap<u64, u64>>,
    /// Sessions that ended while the link was down: told when it comes back.
    pub(super) ended: Mutex<Vec<u64>>,
}

impl std::fmt::Debug for TcpPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpPeer").field("id", &self.id).field("addr", &self.addr).finish()
    }
}

impl TcpPeer {
    pub(super) fn new(inbound: Arc<dyn Inbound>, id: u32, addr: String) -> TcpPeer {
        TcpPeer {
            id,
            addr,
            inbound,
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
            accepted: Mutex::new(None),
            changed: Notify::new(),
            vsessions: Mutex::new(HashMap::new()),
            ended: Mutex::new(Vec::new()),
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

    pub(super) fn send(&self, m: LinkMsg) -> bool {
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
    pub(super) fn bulk_send(
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

    pub(super) fn fail_all(&self) {
        for (_, tx) in self.pending.lock().unwrap_or_else(|p| p.into_inner()).drain() {
            let _ = tx.send(Err(Error::NodeNotResponding));
        }
        self.bulk_wait.lock().unwrap_or_else(|p| p.into_inner()).clear();
        if let Some((s, _)) = self.bulk.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    pub(super) fn set_state(self: &Arc<Self>, new: LinkState) {
        let old = std::mem::replace(&mut *self.state.lock().unwrap_or_else(|p| p.into_inner()), new);
        if old == new {
            return;
        }
        tracing::info!(peer = self.id, "link {old:?} -> {new:?}");
        self.changed.notify_waiters();
        if new == LinkState::Lost {
            // Everything of the old start is void: its pager flows, and what it held for
            // sessions of ours.
            for (_, (s, _)) in self.pager_flows.lock().unwrap_or_else(|p| p.into_inner()).drain() {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            self.vsessions.lock().unwrap_or_else(|p| p.into_inner()).clear();
            self.ended.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        let tell = matches!(
            (old, new),
            (LinkState::NotOperational, LinkState::Up)
                | (LinkState::Up, LinkState::NotOperational)
                | (_, LinkState::Lost)
        );
        if tell {
            self.inbound.link_changed(self.id, new);
        }
    }

    /// What status shows of this link.
    pub(super) fn info(&self) -> LinkInfo {
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
