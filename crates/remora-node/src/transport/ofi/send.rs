//! What the fabric sends to peers: messages and RMA pieces, each posted only while its
//! connection is routed, and under the routes' lock (the link's task takes the peer's
//! address out of the endpoint only after unrouting it, and the provider, rxm, crashes on
//! an operation posted to an address removed). A send or RMA piece refused, one whose queue
//! stays full past the link's patience, or one that completes with an error takes the link
//! of its connection down ([`Fabric::broke`]; why: [`NotPosted::why`]).
//!
//! The patience is the link's own budget ([`GIVE_UP_PERIODS`] heartbeats, as its liveness
//! gives a silent peer; at least [`MIN_PATIENCE`]): a peer paused that long keeps its link
//! on ofi as on tcp, whose bulk writes wait as long.
//!
//! Threads that may block (the link's writer in the blocking pool, a transfer's caller) wait
//! for room themselves. Answers to a peer's requests never do: the progress thread, which
//! sends most of them, is the only thread that drives the provider's progress, and the link's
//! task runs on the runtime. An answer that finds the queue full waits in the fabric's queue
//! of unsent answers, with those after it to the same connection (in order: none overtakes
//! another), and is tried again after each read of completions ([`Fabric::retry_unsent`]).
//!
//! [`GIVE_UP_PERIODS`]: crate::transport::liveness::GIVE_UP_PERIODS

use super::{Fabric, Route, Waiting};
use crate::transport::tcp::peer::TcpPeer;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The least a send waits for room in a full queue before its link is given up.
pub(super) const MIN_PATIENCE: Duration = Duration::from_secs(5);
/// Answers to one connection that may wait for room at once; one more takes its link down.
const MAX_UNSENT: usize = 1024;

/// Why an operation was not posted.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::transport::ofi) enum NotPosted {
    /// Its connection is gone (its link went down meanwhile): nothing to take down.
    Gone,
    /// The queue is full (without waiting), or stayed full past the link's patience.
    Full,
    /// The endpoint refused it.
    Failed(remora_ofi_sys::Error),
}

impl NotPosted {
    /// Why its link is taken down ([`Fabric::broke`]); `None`: its connection is gone.
    pub(in crate::transport::ofi) fn why(&self) -> Option<String> {
        match self {
            NotPosted::Gone => None,
            NotPosted::Full => Some("its send queue stayed full past the link's patience".into()),
            NotPosted::Failed(e) => Some(format!("the endpoint refused it: {e}")),
        }
    }
}

/// An answer to a peer waiting for room in the send queue.
pub(super) struct Unsent {
    /// The peer's endpoint and token (its connection).
    to: (u64, u64),
    bytes: Vec<u8>,
    /// Since when it waits.
    since: Instant,
}

impl Fabric {
    /// The peer of the connection `to` while it is routed (in `held`, the routes' map when
    /// the caller holds its lock).
    fn routed(routes: &HashMap<u64, Route>, to: (u64, u64)) -> Option<&Route> {
        routes.values().find(|r| r.reply == Some(to))
    }

    /// The peer of the connection `to`, while it is routed.
    pub(super) fn peer_of(&self, to: (u64, u64)) -> Option<std::sync::Arc<TcpPeer>> {
        let routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        Self::routed(&routes, to).map(|r| r.peer.clone())
    }

    /// How long an operation of the connection `to` waits for room (`None`: it is gone):
    /// its link's budget, at least [`MIN_PATIENCE`]. The one measure of both the senders
    /// that wait themselves ([`Fabric::post_routed`]) and the unsent answers
    /// ([`Fabric::retry_unsent`]).
    pub(super) fn patience_of(&self, to: (u64, u64)) -> Option<Duration> {
        let budget = self.peer_of(to)?.live().budget();
        #[cfg(test)]
        if let Some(p) = super::tests::patience(self) {
            return Some(p);
        }
        Some(budget.max(MIN_PATIENCE))
    }

    /// Run `post` (an operation to the peer of the connection `to`) while `to` is routed,
    /// under the routes' lock; with `wait`, again while the queue is full, for up to the
    /// link's patience (sleeping between tries: 50 µs, growing to 1 ms).
    pub(in crate::transport::ofi) fn post_routed(
        &self,
        to: (u64, u64),
        wait: bool,
        mut post: impl FnMut() -> Result<(), remora_ofi_sys::Error>,
    ) -> Result<(), NotPosted> {
        let t = Instant::now();
        let mut nap = Duration::from_micros(50);
        let mut patience: Option<Duration> = None;
        loop {
            let posted = {
                let routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
                if Self::routed(&routes, to).is_none() {
                    return Err(NotPosted::Gone);
                }
                post()
            };
            match posted {
                Ok(()) => return Ok(()),
                Err(e) if e.is_full() => {
                    if !wait {
                        return Err(NotPosted::Full);
                    }
                    let patience = match patience {
                        Some(p) => p,
                        None => *patience.insert(self.patience_of(to).ok_or(NotPosted::Gone)?),
                    };
                    if t.elapsed() > patience {
                        return Err(NotPosted::Full);
                    }
                    std::thread::sleep(nap);
                    nap = (nap * 2).min(Duration::from_millis(1));
                }
                Err(e) => return Err(NotPosted::Failed(e)),
            }
        }
    }

    /// Send `body` to `dest` under its `token`, waiting for room in a full queue (for
    /// threads that may block: not the runtime's, not the progress thread); `None` when it
    /// was not sent, and then the link of that connection is taken down, unless it is gone
    /// already ([`Fabric::broke`]).
    pub(in crate::transport::ofi) fn send(&self, dest: u64, token: u64, body: super::Body) -> Option<usize> {
        let bytes = remora_proto::encode(&super::Wire { token, body }).ok()?;
        self.send_bytes((dest, token), &bytes, true).ok()
    }

    /// Send an encoded message to the peer's endpoint under its token (`to`); with `wait`,
    /// again while the queue is full (up to the link's patience), else `Err(true)` at once
    /// when it is full. `Err(false)`: not sent, and the link of that connection is taken
    /// down ([`Fabric::broke`]; nothing when it is gone already), as is one whose message
    /// fails after it was posted.
    pub(in crate::transport::ofi) fn send_bytes(
        &self,
        to: (u64, u64),
        bytes: &[u8],
        wait: bool,
    ) -> Result<usize, bool> {
        match self.post_send(to, bytes, wait) {
            Ok(n) => Ok(n),
            Err(NotPosted::Full) if !wait => Err(true),
            Err(e) => {
                if let Some(why) = e.why() {
                    self.broke(to, &why);
                }
                Err(false)
            }
        }
    }

    /// Post a message to the connection `to` ([`Fabric::post_routed`]), its completion
    /// awaited by the progress thread (an error there takes the link down); the link is
    /// not taken down here.
    fn post_send(&self, to: (u64, u64), bytes: &[u8], wait: bool) -> Result<usize, NotPosted> {
        let id = self.ep.next_id();
        #[cfg(test)]
        let (lost, full) = (super::tests::LOSE.hit(self, bytes), super::tests::FULL.hit(self, bytes));
        #[cfg(test)]
        let bytes: &[u8] = if lost { b"lost by the test" } else { bytes };
        // Known before it is posted: its completion may come at once.
        let waiting = Waiting::Send {
            to,
            #[cfg(test)]
            lost,
        };
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).insert(id, waiting);
        let posted = self.post_routed(to, wait, || {
            #[cfg(test)]
            if full {
                return Err(remora_ofi_sys::Error {
                    code: remora_ofi_sys::EAGAIN,
                    what: "full, says the test".into(),
                });
            }
            self.ep.send(to.0, bytes, id)
        });
        if posted.is_err() {
            self.ops.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        }
        posted.map(|()| bytes.len())
    }

    /// Send an answer to the peer's endpoint under its token (`to`) without waiting (from
    /// any thread): should the queue be full, or answers to that connection wait already, it
    /// waits in the queue of unsent answers, sent in order after reads of completions.
    /// Refused: the link of that connection is taken down.
    pub(in crate::transport::ofi) fn answer(&self, to: (u64, u64), bytes: Vec<u8>) {
        let mut unsent = self.unsent.lock().unwrap_or_else(|p| p.into_inner());
        let waiting = unsent.iter().filter(|u| u.to == to).count();
        if waiting >= MAX_UNSENT {
            unsent.retain(|u| u.to != to);
            drop(unsent);
            self.broke(to, "too many answers wait for room in its send queue");
            return;
        }
        if waiting > 0 {
            unsent.push_back(Unsent { to, bytes, since: Instant::now() });
            return;
        }
        match self.post_send(to, &bytes, false) {
            Ok(_) | Err(NotPosted::Gone) => {}
            Err(NotPosted::Full) => unsent.push_back(Unsent { to, bytes, since: Instant::now() }),
            Err(e) => {
                drop(unsent);
                self.broke(to, &e.why().unwrap_or_default());
            }
        }
    }

    /// Whether answers wait for room (the progress thread then reads completions with a
    /// short wait, so that they are tried again soon).
    pub(super) fn has_unsent(&self) -> bool {
        !self.unsent.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    /// Try the unsent answers again, in order (after a read of completions, which may have
    /// made room): per connection, up to the first that still finds the queue full. A
    /// connection whose oldest answer waited past the link's patience, or whose answer is
    /// refused, is taken down (its answers dropped); answers of a connection gone are
    /// dropped.
    pub(super) fn retry_unsent(&self) {
        let mut unsent = self.unsent.lock().unwrap_or_else(|p| p.into_inner());
        // Connections whose oldest answer still waits; those to take down, and why.
        let mut stuck: Vec<(u64, u64)> = Vec::new();
        let mut broken: Vec<((u64, u64), String)> = Vec::new();
        let mut i = 0;
        while i < unsent.len() {
            let u = &unsent[i];
            if stuck.contains(&u.to) || broken.iter().any(|(to, _)| *to == u.to) {
                i += 1;
                continue;
            }
            match self.post_send(u.to, &u.bytes, false) {
                Ok(_) | Err(NotPosted::Gone) => {
                    unsent.remove(i);
                }
                Err(NotPosted::Full) => {
                    match self.patience_of(u.to) {
                        Some(p) if u.since.elapsed() > p => {
                            let why = format!("an answer waited {p:?} for room in its send queue");
                            broken.push((u.to, why));
                        }
                        _ => stuck.push(u.to),
                    }
                    i += 1;
                }
                Err(e) => {
                    broken.push((u.to, e.why().unwrap_or_default()));
                    i += 1;
                }
            }
        }
        unsent.retain(|u| !broken.iter().any(|(to, _)| *to == u.to));
        drop(unsent);
        for (to, why) in broken {
            self.broke(to, &why);
        }
    }

    /// A message to the peer's endpoint under its token `to` was lost (refused, or failed
    /// after it was posted): the link of that connection goes down, as a TCP link whose
    /// connection broke (its task closes the bootstrap connection, so the peer's side goes
    /// down too; requests in flight fail, notices are told again on the next connection).
    /// Nothing when that connection is gone already.
    pub(in crate::transport::ofi) fn broke(&self, to: (u64, u64), why: &str) {
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let Some(r) = routes.values_mut().find(|r| r.reply == Some(to)) else {
            tracing::debug!("an ofi message of a connection gone already failed: {why}");
            return;
        };
        if !std::mem::replace(&mut r.said, true) {
            tracing::warn!(
                peer = r.peer.id,
                "a message to the peer was lost on the fabric ({why}): closing the ofi link"
            );
        }
        r.broken.notify_one();
    }

    /// The connection routed under `token` went: its answers waiting for room are dropped,
    /// and so are its operations in flight (their completions may never come once its
    /// address leaves the endpoint): an RMA's waiter fails, its bytes go back to its window.
    /// Its local registration stays held by the endpoint, which the provider may still touch
    /// it through, until its completion comes or the endpoint closes (`remora-ofi-sys`).
    pub(super) fn forget_connection(&self, to: (u64, u64)) {
        self.unsent.lock().unwrap_or_else(|p| p.into_inner()).retain(|u| u.to != to);
        let mut ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        let gone: Vec<u64> = ops
            .iter()
            .filter(|(_, w)| match w {
                Waiting::Send { to: t, .. } => *t == to,
                Waiting::Rma(op) => op.to == to,
            })
            .map(|(id, _)| *id)
            .collect();
        let gone: Vec<Waiting> = gone.into_iter().filter_map(|id| ops.remove(&id)).collect();
        drop(ops);
        for w in gone {
            if let Waiting::Rma(op) = w {
                op.window.give(op.bytes, op.gen);
                let _ = op.done.send(Err("the ofi link went down".into()));
            }
        }
    }
}
