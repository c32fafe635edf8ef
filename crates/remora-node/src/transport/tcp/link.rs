//! The link to one peer: dial (the node with the smaller id dials) or take the peer's
//! connections, run the control flow (requests, replies, events, heartbeats), and redial
//! with back-off. The connection's end, seen by a read (an error, the peer's close) or by a
//! write that failed, takes the link down at once (what waits on it fails) and it is
//! redialled: at once after a link that was stable ([`STABLE_PERIODS`] heartbeats up),
//! else after a pause that doubles from 50 ms up to a second, as after a failed dial, so a
//! peer that accepts and then drops the link again and again is redialled ever more
//! slowly. Three silent heartbeat periods make the link *not operational*; frames
//! coming again make it *operational*; a peer that refuses connections (its daemon is
//! gone) or comes back with another incarnation (it restarted) is *lost*. Those decisions
//! are [`Liveness`](crate::transport::liveness::Liveness)'s: this file feeds it what the sockets and the
//! timers show and carries out its actions.

use super::admission::{Admission, KNOWN_AT_ONCE, STRANGERS_AT_ONCE};
use super::bulk::start_bulk;
use super::framing::FrameReader;
use super::handshake::{accept_handshake, dial_handshake};
use super::peer::TcpPeer;
use super::Tcp;
use crate::transport::liveness::Action;
use crate::transport::{Env, LinkState};
use remora_proto::encode;
use remora_proto::link::{Flow, LinkMsg};
use std::collections::HashMap;
use std::net::TcpStream as StdStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long a connection may take to authenticate, in all (each read also has its own
/// bound): a peer that drips bytes must not hold a thread of ours for ever.
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

/// Authenticate an accepted connection (`accept_handshake`, with `admit`) on a blocking
/// thread, under a place of `admission` (none free: closed at once) and within
/// [`HANDSHAKE_DEADLINE`] (past it the socket is shut down under the handshake, whose read
/// then ends). The node that authenticated makes its address known to `admission`. Returns
/// the stream (blocking, no read timeout), its flow, the peer's incarnation and what
/// `admit` gave.
pub(in crate::transport) async fn accept_in_place<A, F>(
    admission: &Arc<Admission>,
    env: Arc<Env>,
    stream: TcpStream,
    admit: F,
) -> std::io::Result<(StdStream, Flow, u64, A)>
where
    A: Send + 'static,
    F: FnOnce(u32) -> Result<A, String> + Send + 'static,
{
    let from = stream.peer_addr()?.ip();
    let place = admission.take(from).ok_or_else(|| {
        std::io::Error::other(format!(
            "no handshake place free ({STRANGERS_AT_ONCE} at once from strangers, {KNOWN_AT_ONCE} more \
             from the cluster's addresses)"
        ))
    })?;
    let std = stream.into_std()?;
    std.set_nonblocking(false)?;
    super::cap_backoff(&std, &env);
    std.set_read_timeout(Some(Duration::from_secs(5)))?;
    let watch = std.try_clone()?;
    let learn = admission.clone();
    let handshake = tokio::task::spawn_blocking(move || {
        let mut s = std;
        let r = accept_handshake(&mut s, &env, admit);
        if let Ok((node, ..)) = &r {
            learn.learn(*node, from);
            super::tune_congestion(&s, &env, *node);
        }
        drop(place);
        r.map(|(_, f, i, a)| (s, f, i, a))
    });
    let (std, flow, inc, a) = match tokio::time::timeout(HANDSHAKE_DEADLINE, handshake).await {
        Ok(r) => r.map_err(std::io::Error::other)??,
        Err(_) => {
            let _ = watch.shutdown(std::net::Shutdown::Both);
            return Err(std::io::Error::other("the handshake took too long"));
        }
    };
    drop(watch);
    std.set_read_timeout(None)?;
    Ok((std, flow, inc, a))
}

pub(super) async fn accept_one(tcp: Arc<Tcp>, stream: TcpStream) -> std::io::Result<()> {
    let t = tcp.clone();
    // A node we keep no link with is refused by name before the welcome.
    let admit = move |node: u32| {
        t.peers.get(&node).cloned().ok_or_else(|| {
            crate::transport::carrier::refusal(&t.env, node)
                .unwrap_or_else(|| format!("no link for node {node}"))
        })
    };
    let (std, flow, inc, peer) = accept_in_place(&tcp.admission, tcp.env.clone(), stream, admit).await?;
    match flow {
        Flow::Control => {
            std.set_nonblocking(true)?;
            let tx = peer.accepted.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(tx) = tx {
                let _ = tx.send((TcpStream::from_std(std)?, inc));
            }
        }
        Flow::Bulk => start_bulk(&peer, std, 0)?,
        Flow::BulkLane(k) if k > 0 => start_bulk(&peer, std, k.into())?,
        Flow::BulkLane(_) => return Err(std::io::Error::other("bulk lane 0 named as a lane")),
        Flow::Pager => super::pager::accept(&peer, std, inc)?,
    }
    Ok(())
}

/// Accept connections on `listener` for ever, each served by `serve(t, stream)` in a task
/// of its own; a refused one is logged with `what`.
pub(in crate::transport) fn accept_loop<T, F, Fut>(
    listener: tokio::net::TcpListener,
    t: Arc<T>,
    what: &'static str,
    serve: F,
) where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>, TcpStream) -> Fut + Send + Sync + Copy + 'static,
    Fut: std::future::Future<Output = std::io::Result<()>> + Send + 'static,
{
    let log = Arc::new(super::admission::RefusalLog::default());
    tokio::spawn(async move {
        loop {
            let (stream, from) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors, say: the error stays until some close, so wait a
                    // little rather than spin on it.
                    tracing::debug!("{what}: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let (t, log) = (t.clone(), log.clone());
            tokio::spawn(async move {
                if let Err(e) = serve(t, stream).await {
                    match log.refused() {
                        Some(0) => tracing::warn!(%from, "{what} refused: {e}"),
                        Some(unsaid) => {
                            tracing::warn!(%from, "{what} refused: {e} ({unsaid} more refused before, not logged)")
                        }
                        None => {}
                    }
                }
            });
        }
    });
}

/// Keep the link to one peer up: dial (if our id is smaller) or take inbound connections,
/// run the control flow, heartbeat, and redial with back-off.
pub(super) async fn run_peer(
    env: Arc<Env>,
    peer: Arc<TcpPeer>,
    mut inbound: mpsc::UnboundedReceiver<(TcpStream, u64)>,
) {
    let dialer = env.node < peer.id;
    let hb = env.cluster.as_ref().map(|c| c.heartbeat).unwrap_or(Duration::from_millis(200));
    peer.live().set_heartbeat(hb);
    let mut backoff = FIRST_PAUSE;
    loop {
        let got = if dialer {
            match dial(&env, &peer).await {
                Ok(x) => Some(x),
                Err(e) => {
                    dial_failed(&peer, &e, &mut backoff).await;
                    continue;
                }
            }
        } else {
            match await_peer(&peer, &mut inbound, hb).await {
                Some(x) => x,
                None => continue,
            }
        };
        let Some((stream, incarnation)) = got else { return };
        let up = Instant::now();
        run_control(&peer, stream, incarnation, hb, &mut inbound).await;
        *peer.ctrl.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let acts = peer.live().disconnected(Instant::now());
        peer.apply(acts);
        // A connection that ends before it was stable (the peer closes it right after the
        // handshake, or a while later, again and again; a peer that keeps no link with us
        // refuses us in the handshake instead, and the dial fails) is redialled with
        // back-off, not in a loop. Only by the side that dials: the other makes no
        // connection, and a pause would only keep it from serving one already
        // authenticated (the dialer's next try, after its own pause).
        let pause = after_link(&mut backoff, up.elapsed(), hb);
        if let (true, Some(pause)) = (dialer, pause) {
            tokio::time::sleep(pause).await;
        }
    }
}

/// Heartbeat periods a link must stay up to count as stable, for the tcp and ofi transports
/// alike: only a link that ends after that long starts its redial back-off over (and is
/// redialled at once). One that ends sooner is followed by the back-off's pause, which
/// doubles up to [`MAX_PAUSE`]: a flapping peer (one that accepts, then drops the link a
/// heartbeat or two later, again and again) is redialled ever more slowly, at most once in
/// this many heartbeats however long its links last.
pub(in crate::transport) const STABLE_PERIODS: u32 = 3;
/// The redial back-off's first pause.
pub(in crate::transport) const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// The redial back-off's longest pause.
pub(in crate::transport) const MAX_PAUSE: Duration = Duration::from_secs(1);

/// A link that was up for `up_for` (heartbeat `hb`) ended: the pause before the next one
/// (`None`: redial at once), and the back-off after it. A stable link
/// ([`STABLE_PERIODS`] heartbeats) starts the back-off over at [`FIRST_PAUSE`]; one that
/// ended sooner waits `backoff`, which then doubles (up to [`MAX_PAUSE`]).
pub(in crate::transport) fn after_link(
    backoff: &mut Duration,
    up_for: Duration,
    hb: Duration,
) -> Option<Duration> {
    if up_for >= hb * STABLE_PERIODS {
        *backoff = FIRST_PAUSE;
        return None;
    }
    let pause = *backoff;
    *backoff = (pause * 2).min(MAX_PAUSE);
    Some(pause)
}

/// A dial failed: say why when the peer answered, but not with a handshake we accept (as
/// the listener says whom it refused; one that does not answer is not said), judge the
/// peer's reachability, and wait the back-off (doubled, up to a second).
pub(in crate::transport) async fn dial_failed(
    peer: &Arc<TcpPeer>,
    e: &std::io::Error,
    backoff: &mut Duration,
) {
    use std::io::ErrorKind::{InvalidData, Other, PermissionDenied};
    if matches!(e.kind(), InvalidData | PermissionDenied | Other) {
        tracing::warn!(peer = peer.id, "handshake with the peer failed: {e}");
    }
    refused_or_silent(peer, e);
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(MAX_PAUSE);
}

/// Not our turn to dial: wait up to a heartbeat period for the peer's connection
/// (`Some`: it came, or `Some(None)`: the transport is gone); while the link is down, see
/// whether the peer's daemon still listens (`None`: wait again).
pub(in crate::transport) async fn await_peer(
    peer: &Arc<TcpPeer>,
    accepted: &mut mpsc::UnboundedReceiver<(TcpStream, u64)>,
    hb: Duration,
) -> Option<Option<(TcpStream, u64)>> {
    tokio::select! {
        x = accepted.recv() => Some(x),
        _ = tokio::time::sleep(hb) => {
            let (connected, state) = { let l = peer.live(); (l.is_connected(), l.state()) };
            if !connected && state != LinkState::Down {
                if let Err(e) = probe_port(peer).await {
                    refused_or_silent(peer, &e);
                }
            }
            None
        }
    }
}

/// After a failed dial: a refused connection means the peer's daemon is gone (lost); a
/// silent one means the route is down (not operational, lost after a long while).
fn refused_or_silent(peer: &Arc<TcpPeer>, e: &std::io::Error) {
    let refused = e.kind() == std::io::ErrorKind::ConnectionRefused;
    let acts = peer.live().unreachable(refused, Instant::now());
    peer.apply(acts);
}

/// A connection to the peer's start `incarnation` is up, writing to `tx`. A restarted
/// peer is lost before the sender is installed (what sessions ask from then on is held by
/// the new start); what the peer has not noted yet (`notices.rs`) goes out first on the
/// new connection, then the link is up, and remembered session ends go out.
pub(in crate::transport) fn connected(
    peer: &Arc<TcpPeer>,
    incarnation: u64,
    tx: mpsc::UnboundedSender<LinkMsg>,
) {
    let mut acts = {
        let mut live = peer.live();
        let acts = live.connected(incarnation, Instant::now());
        let old = peer.peer_incarnation.swap(incarnation, Ordering::SeqCst);
        if old != 0 && old != incarnation {
            peer.notices().clear();
        }
        acts
    };
    if acts.contains(&Action::VoidPeerStart) {
        tracing::info!(peer = peer.id, "node restarted: its old connections are lost");
    }
    let up = acts
        .iter()
        .position(|a| matches!(a, Action::Changed { to: LinkState::Up, .. } | Action::SendSessionEnd(_)));
    let after = acts.split_off(up.unwrap_or(acts.len()));
    peer.apply(acts);
    *peer.ctrl.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
    peer.tell_again();
    peer.apply(after);
}

async fn probe_port(peer: &TcpPeer) -> std::io::Result<()> {
    match tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(&peer.addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::from(std::io::ErrorKind::TimedOut)),
    }
}

/// Dial both flows; returns the control stream and the peer's incarnation.
async fn dial(env: &Arc<Env>, peer: &Arc<TcpPeer>) -> std::io::Result<(TcpStream, u64)> {
    let connect = |flow: Flow| {
        let (env, peer) = (env.clone(), peer.clone());
        tokio::task::spawn_blocking(move || -> std::io::Result<(StdStream, u64)> {
            let addr: Vec<std::net::SocketAddr> =
                std::net::ToSocketAddrs::to_socket_addrs(&peer.addr)?.collect();
            let a = addr.first().ok_or_else(|| std::io::Error::other("address does not resolve"))?;
            let mut s = StdStream::connect_timeout(a, Duration::from_secs(1))?;
            super::cap_backoff(&s, &env);
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            let inc = dial_handshake(&mut s, &env, peer.id, flow)?;
            super::tune_congestion(&s, &env, peer.id);
            s.set_read_timeout(None)?;
            Ok((s, inc))
        })
    };
    let (ctrl, inc) = connect(Flow::Control).await.map_err(std::io::Error::other)??;
    let (bulk, _) = connect(Flow::Bulk).await.map_err(std::io::Error::other)??;
    start_bulk(peer, bulk, 0)?;
    // The other lanes; one that fails leaves its threads' frames on lane 0.
    for k in 1..remora_proto::link::BULK_LANES as u8 {
        match connect(Flow::BulkLane(k)).await.map_err(std::io::Error::other) {
            Ok(Ok((s, _))) => start_bulk(peer, s, k.into())?,
            Ok(Err(e)) | Err(e) => tracing::warn!(peer = peer.id, "bulk lane {k} not dialed: {e}"),
        }
    }
    ctrl.set_nonblocking(true)?;
    Ok((TcpStream::from_std(ctrl)?, inc))
}

/// Run the control flow until it breaks (or a newer inbound connection replaces it).
async fn run_control(
    peer: &Arc<TcpPeer>,
    stream: TcpStream,
    incarnation: u64,
    hb: Duration,
    inbound: &mut mpsc::UnboundedReceiver<(TcpStream, u64)>,
) {
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    // Frames are small and come in bursts (a request and a reply, a relayed message and the
    // next): one recv(2) takes all that is there, where reading the length and then the body
    // took two per frame and a third to find the socket empty. The reader keeps a frame read
    // in part when the loop's `select!` takes another branch.
    let mut rd = FrameReader::new(rd);
    let (tx, mut rx) = mpsc::unbounded_channel::<LinkMsg>();
    // Up (lost first if the peer restarted); sessions that ended while the link was down
    // are told now: the peer still holds their resources.
    connected(peer, incarnation, tx);
    let p = peer.clone();
    // The writer ends with the error of a write that failed (`None`: the link's sender is
    // gone); the loop below takes the link down with it, as for a read error.
    let mut writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let body = match encode(&m) {
                Ok(b) => b,
                // Too large for a frame: its caller (or the peer's) is answered instead.
                Err(_) => match p.unsendable(m).map(|r| encode(&r)) {
                    Some(Ok(b)) => b,
                    _ => continue,
                },
            };
            let mut out = Vec::with_capacity(4 + body.len());
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(&body);
            p.bytes_out.fetch_add(out.len() as u64, Ordering::Relaxed);
            if let Err(e) = wr.write_all(&out).await {
                return Some(e);
            }
        }
        None
    });
    let mut tick = tokio::time::interval(hb);
    let mut seq = 0u64;
    let mut sent: HashMap<u64, Instant> = HashMap::new();
    loop {
        tokio::select! {
            r = rd.next() => {
                let (m, n) = match r {
                    Ok(x) => x,
                    Err(e) => {
                        // Said, as what waits on the connection fails with it (a relayed
                        // SCIF connection is reset): the peer's close is ordinary.
                        match e.kind() {
                            std::io::ErrorKind::InvalidData => {
                                tracing::warn!(peer = peer.id, "malformed frame from peer, closing the link: {e}")
                            }
                            std::io::ErrorKind::UnexpectedEof => {
                                tracing::info!(peer = peer.id, "the peer closed the link's connection")
                            }
                            _ => tracing::warn!(peer = peer.id, "the link's connection broke: {e}"),
                        }
                        break;
                    }
                };
                peer.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                if !peer.serve_ctrl(m, &mut sent) {
                    break;
                }
            }
            _ = tick.tick() => {
                if !peer.heartbeat_tick(&mut seq, &mut sent) {
                    break;
                }
            }
            w = &mut writer => {
                // A write failed (the connection broke under it, or was reset): the message
                // is lost, and the peer may still be heard (its frames were sent before),
                // so the read side would see nothing until its heartbeat budget ran out.
                // The link goes down now, as on a read error: its waiters fail and it is
                // redialled.
                match w {
                    Ok(Some(e)) => {
                        tracing::warn!(peer = peer.id, "writing to the link's connection failed: {e}")
                    }
                    _ => tracing::warn!(peer = peer.id, "the link's writer ended"),
                }
                break;
            }
            Some((newer, inc)) = inbound.recv() => {
                // The peer redialled (its side saw the old connection die): switch to it.
                writer.abort();
                *peer.ctrl.lock().unwrap_or_else(|p| p.into_inner()) = None;
                let acts = peer.live().superseded();
                peer.apply(acts);
                // Close the old connection before serving the new one (lost first, when it
                // comes from another start of the peer).
                drop(rd);
                Box::pin(run_control(peer, newer, inc, hb, inbound)).await;
                return;
            }
        }
    }
    writer.abort();
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;
