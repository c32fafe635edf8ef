//! A small pool of flows to one peer, dialed and authenticated ahead of need: a pager flow
//! (a map of the peer's memory, SCIF RMA, an interrupt's triggers, a VIPL channel, small
//! DMA's held flow) or a direct flow takes one at once and only binds it, instead of
//! paying the TCP connect and the handshake's two round trips first.
//!
//! A pooled flow is authenticated exactly as a fresh one ([`dial_handshake`], the peer's
//! incarnation checked) and is bound to nothing until taken: the peer serves it only once
//! its binding frame comes. Pooling starts with the first take (a peer nobody maps from
//! holds none) and refills in the background after every take, up to
//! `REMORA_PAGER_POOL` flows (default [`remora_config::PAGER_POOL_DEFAULT`]; `0`: none,
//! every flow is dialed when asked for). A pooled flow is never handed out when the link
//! is not up, the peer restarted since it was dialed, it is older than [`MAX_AGE`] (the
//! peer waits [`BIND_WAIT`] for a binding), or its far end closed or sent anything
//! (checked just before it is handed): then it is dropped and a fresh flow dialed. The
//! pool is emptied as soon as the link leaves `Up` or the peer's incarnation changes
//! (checked every [`TICK`]), and when the transport is dropped.

use super::handshake::dial_handshake;
use super::peer::TcpPeer;
use crate::transport::{Env, LinkState};
use remora_proto::link::Flow;
use std::net::TcpStream as StdStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a flow's dial waits for the TCP connection.
const DIAL_CONNECT: Duration = Duration::from_millis(300);
/// How long a flow's dial waits for each answer of the handshake.
const DIAL_ANSWER: Duration = Duration::from_millis(700);
/// How long a pooled flow is kept before it is replaced.
pub(super) const MAX_AGE: Duration = Duration::from_secs(60);
/// How long a node waits for an accepted pager flow's binding frame (longer than a pooled
/// flow is kept, so a pooled flow is never closed under its dialer's hand).
pub(super) const BIND_WAIT: Duration = Duration::from_secs(90);
/// How often the pool looks at the link.
const TICK: Duration = Duration::from_millis(200);

/// One pooled flow: the stream, the peer's incarnation it authenticated, when.
struct Pooled {
    s: StdStream,
    inc: u64,
    born: Instant,
}

#[derive(Default)]
struct State {
    flows: Vec<Pooled>,
    /// A refilling thread runs.
    refilling: bool,
    /// A flow was taken since the link came up (the pool is kept full only then).
    wanted: bool,
    /// The peer's incarnation at the last look ([`Pool::sweep`]): a new start of the peer
    /// is a new link, whose pool is wanted only once a flow is taken from it.
    seen_inc: u64,
}

/// The pooled flows to one peer.
pub(in crate::transport) struct Pool {
    env: Arc<Env>,
    peer: Arc<TcpPeer>,
    size: usize,
    state: Mutex<State>,
}

impl Pool {
    /// The pool of flows to `peer`, sized by `REMORA_PAGER_POOL`. Call it on the runtime:
    /// a task watches the link while the pool lives.
    pub(in crate::transport) fn new(env: Arc<Env>, peer: Arc<TcpPeer>) -> Arc<Pool> {
        let size = remora_config::Config::get().pager_pool;
        let pool = Arc::new(Pool { env, peer, size, state: Mutex::new(State::default()) });
        if size > 0 {
            tokio::spawn(watch(Arc::downgrade(&pool)));
        }
        pool
    }

    /// The peer this pool dials.
    pub(in crate::transport) fn peer(&self) -> &Arc<TcpPeer> {
        &self.peer
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An authenticated flow to the peer, bound to nothing yet: a sound pooled one, else
    /// one dialed now (blocking: call it off the runtime's threads). Its read and write
    /// timeouts are the dial's; the caller binds it.
    ///
    /// # Errors
    /// The peer cannot be reached, refuses the handshake, or restarted since the link came
    /// up.
    pub(in crate::transport) fn flow(self: &Arc<Self>) -> std::io::Result<StdStream> {
        let s = match self.take()? {
            Some(s) => s,
            None => handshaken(&self.env, &self.peer).map(|(s, _)| s)?,
        };
        keep_for(&s, self.peer.live().budget());
        Ok(s)
    }

    /// As [`Pool::flow`], on the runtime: a flow dialed now is dialed and authenticated
    /// there (no hand-off to a blocking thread and back, each a wake-up of another core).
    ///
    /// # Errors
    /// As [`Pool::flow`].
    pub(in crate::transport) async fn flow_async(self: &Arc<Self>) -> std::io::Result<StdStream> {
        let s = match self.take()? {
            Some(s) => s,
            None => handshaken_async(&self.env, &self.peer).await.map(|(s, _)| s)?,
        };
        keep_for(&s, self.peer.live().budget());
        Ok(s)
    }

    /// A sound pooled flow, with the dial's timeouts (`None`: none pooled, or no pool);
    /// the pool refills behind it.
    fn take(self: &Arc<Self>) -> std::io::Result<Option<StdStream>> {
        if self.size == 0 {
            return Ok(None);
        }
        let taken = {
            let mut st = self.state();
            st.wanted = true;
            st.seen_inc = self.peer.peer_incarnation.load(Ordering::SeqCst);
            let mut got = None;
            while let Some(p) = st.flows.pop() {
                if self.sound(&p) {
                    got = Some(p.s);
                    break;
                }
            }
            got
        };
        self.refill();
        match taken {
            Some(s) => {
                s.set_read_timeout(Some(DIAL_ANSWER))?;
                s.set_write_timeout(Some(DIAL_ANSWER))?;
                Ok(Some(s))
            }
            None => Ok(None),
        }
    }

    /// Whether `p` may be handed out: the link is up, the peer is the start `p`
    /// authenticated, `p` is young enough, and its far end neither closed nor spoke.
    fn sound(&self, p: &Pooled) -> bool {
        self.peer.state() == LinkState::Up
            && self.peer.peer_incarnation.load(Ordering::SeqCst) == p.inc
            && p.born.elapsed() < MAX_AGE
            && quiet(&p.s)
    }

    /// Start a thread that dials flows until the pool is full, unless one runs.
    fn refill(self: &Arc<Self>) {
        // Flows of a later start of the peer than the one the pool was wanted for are not
        // kept: that start's pool fills once a flow is taken from it.
        let start_inc = {
            let mut st = self.state();
            if st.refilling || !st.wanted || st.flows.len() >= self.size {
                return;
            }
            st.refilling = true;
            st.seen_inc
        };
        let me = self.clone();
        let spawned = std::thread::Builder::new().name("remora-flow-pool".into()).spawn(move || {
            // The lowest CPU share: a refill is never on anyone's critical path, and on a
            // small machine it would otherwise compete with the map that just took a flow.
            remora_sys::sync::background_thread();
            loop {
                if me.peer.state() != LinkState::Up || me.state().flows.len() >= me.size {
                    break;
                }
                match handshaken(&me.env, &me.peer) {
                    Ok((s, inc)) => {
                        let mut st = me.state();
                        // The link may have gone while it was dialed: not kept then.
                        let now = me.peer.peer_incarnation.load(Ordering::SeqCst);
                        if !st.wanted || now != inc || inc != start_inc {
                            break;
                        }
                        st.flows.push(Pooled { s, inc, born: Instant::now() });
                    }
                    Err(e) => {
                        tracing::debug!(peer = me.peer.id, "a pooled flow's dial failed: {e}");
                        break;
                    }
                }
            }
            me.state().refilling = false;
        });
        if spawned.is_err() {
            self.state().refilling = false;
        }
    }

    /// Drop the flows that may no longer be handed out; all of them (and forget the
    /// pool was wanted) when the link is not up or the peer started again.
    fn sweep(self: &Arc<Self>) {
        let up = self.peer.state() == LinkState::Up;
        let inc = self.peer.peer_incarnation.load(Ordering::SeqCst);
        let dropped = {
            let mut st = self.state();
            // The link went, or came back with a new start of the peer between two looks.
            if !up || st.seen_inc != inc {
                st.wanted = false;
                st.seen_inc = inc;
            }
            let before = st.flows.len();
            st.flows.retain(|p| up && p.inc == inc && p.born.elapsed() < MAX_AGE);
            before - st.flows.len()
        };
        if dropped > 0 {
            tracing::debug!(peer = self.peer.id, "{dropped} pooled flows dropped");
        }
        if up {
            self.refill();
        }
    }
}

/// Watch the link for the pool while it lives.
async fn watch(pool: Weak<Pool>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(p) = pool.upgrade() else { return };
        p.sweep();
    }
}

/// Whether nothing can be read from `s` now: no bytes and no end (a pooled flow's peer
/// says nothing before the binding; anything readable means it closed or broke).
fn quiet(s: &StdStream) -> bool {
    if s.set_nonblocking(true).is_err() {
        return false;
    }
    let mut b = [0u8; 1];
    let r = s.peek(&mut b);
    let back = s.set_nonblocking(false).is_ok();
    back && matches!(r, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Dial `peer` and authenticate the stream as this node ([`Flow::Pager`]; blocking).
/// Returns the stream, with the dial's timeouts, and the peer's incarnation.
///
/// # Errors
/// The peer cannot be reached, refuses the handshake, or restarted since the link came up.
pub(in crate::transport) fn handshaken(env: &Env, peer: &TcpPeer) -> std::io::Result<(StdStream, u64)> {
    let addr: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&peer.addr)?.collect();
    let a = addr.first().ok_or_else(|| std::io::Error::other("address does not resolve"))?;
    // A map waits for this dial before it falls back to the daemons' path: a home that
    // does not answer is given up within DIAL_CONNECT + DIAL_ANSWER.
    let mut s = StdStream::connect_timeout(a, DIAL_CONNECT)?;
    super::cap_backoff(&s, env);
    s.set_read_timeout(Some(DIAL_ANSWER))?;
    s.set_write_timeout(Some(DIAL_ANSWER))?;
    let inc = dial_handshake(&mut s, env, peer.id, Flow::Pager)?;
    super::tune_congestion(&s, env, peer.id);
    if peer.peer_incarnation.load(Ordering::SeqCst) != inc {
        return Err(std::io::Error::other(format!("node {} restarted", peer.id)));
    }
    Ok((s, inc))
}

/// [`handshaken`] on the runtime: the connect and the handshake's answers awaited there,
/// each within the same time as the blocking dial's. A peer address that is not a plain
/// socket address (a name to resolve) is dialed on a blocking thread.
///
/// # Errors
/// As [`handshaken`].
pub(in crate::transport) async fn handshaken_async(
    env: &Arc<Env>,
    peer: &Arc<TcpPeer>,
) -> std::io::Result<(StdStream, u64)> {
    use super::framing::{read_frame_async, write_frame_async};
    use super::handshake::Dialer;
    use tokio::time::timeout;
    let Ok(a) = peer.addr.parse::<std::net::SocketAddr>() else {
        let (env, peer) = (env.clone(), peer.clone());
        return tokio::task::spawn_blocking(move || handshaken(&env, &peer))
            .await
            .map_err(std::io::Error::other)?;
    };
    let late = |what: &str| std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no {what} in time"));
    let mut s =
        timeout(DIAL_CONNECT, tokio::net::TcpStream::connect(a)).await.map_err(|_| late("connection"))??;
    super::cap_backoff(&s, env);
    let d = Dialer::new(env, peer.id);
    timeout(DIAL_ANSWER, write_frame_async(&mut s, &d.hello(Flow::Pager)))
        .await
        .map_err(|_| late("room"))??;
    let (answer, _) =
        timeout(DIAL_ANSWER, read_frame_async(&mut s)).await.map_err(|_| late("challenge"))??;
    let (auth, inc) = match d.challenged(answer) {
        Ok(x) => x,
        Err((refusal, e)) => {
            if let Some(r) = refusal {
                let _ = timeout(DIAL_ANSWER, write_frame_async(&mut s, &r)).await;
            }
            return Err(e);
        }
    };
    timeout(DIAL_ANSWER, write_frame_async(&mut s, &auth)).await.map_err(|_| late("room"))??;
    let (answer, _) = timeout(DIAL_ANSWER, read_frame_async(&mut s)).await.map_err(|_| late("welcome"))??;
    Dialer::welcomed(answer)?;
    if peer.peer_incarnation.load(Ordering::SeqCst) != inc {
        return Err(std::io::Error::other(format!("node {} restarted", peer.id)));
    }
    let s = s.into_std()?;
    super::tune_congestion(&s, env, peer.id);
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(DIAL_ANSWER))?;
    s.set_write_timeout(Some(DIAL_ANSWER))?;
    Ok((s, inc))
}

/// Keep flow `s` of a process (pager, trigger or direct SCIF flow, either end) as long as
/// its link is kept, `budget`: a cable out for less loses nothing, one out for longer (or a
/// host that vanished) ends it, on both ends alike. Idle, a first keepalive probe after 5 s
/// at most (a peer whose process is gone answers it with a reset: the flow, and what it
/// holds, goes at once), then five spread over the rest of the budget; with bytes
/// unacknowledged, the budget.
pub(in crate::transport) fn keep_for(s: &StdStream, budget: std::time::Duration) {
    let sock = socket2::SockRef::from(s);
    // The kernel counts keepalive times in whole seconds (0 is refused).
    let second = std::time::Duration::from_secs(1);
    let idle = (budget / 2).min(5 * second).max(second);
    let _ = sock.set_tcp_keepalive(
        &socket2::TcpKeepalive::new()
            .with_time(idle)
            .with_interval((budget.saturating_sub(idle) / 5).max(second))
            .with_retries(5),
    );
    let _ = sock.set_tcp_user_timeout(Some(budget));
}
