//! The link to one peer: dial (the node with the smaller id dials) or take the peer's
//! connections, run the control flow (requests, replies, events, heartbeats), and redial
//! with back-off. Three silent heartbeat periods make the link *not operational*; frames
//! coming again make it *operational*; a peer that refuses connections (its daemon is
//! gone) or comes back with another incarnation (it restarted) is *lost*. Those decisions
//! are [`Liveness`](crate::transport::liveness::Liveness)'s: this file feeds it what the sockets and the
//! timers show and carries out its actions.

use super::bulk::start_bulk;
use super::framing::read_frame_async;
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

pub(super) async fn accept_one(tcp: Arc<Tcp>, stream: TcpStream) -> std::io::Result<()> {
    let std = stream.into_std()?;
    std.set_nonblocking(false)?;
    std.set_read_timeout(Some(Duration::from_secs(5)))?;
    let env = tcp.env.clone();
    let (std, peer_id, flow, inc) = tokio::task::spawn_blocking(move || {
        let mut s = std;
        accept_handshake(&mut s, &env).map(|(p, f, i)| (s, p, f, i))
    })
    .await
    .map_err(std::io::Error::other)??;
    std.set_read_timeout(None)?;
    let peer = tcp
        .peers
        .get(&peer_id)
        .cloned()
        .ok_or_else(|| std::io::Error::other(format!("no link for node {peer_id}")))?;
    match flow {
        Flow::Control => {
            std.set_nonblocking(true)?;
            let tx = peer.accepted.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(tx) = tx {
                let _ = tx.send((TcpStream::from_std(std)?, inc));
            }
        }
        Flow::Bulk => start_bulk(&peer, std)?,
        Flow::Pager => super::pager::accept(&peer, std, inc)?,
    }
    Ok(())
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
    let mut backoff = Duration::from_millis(50);
    loop {
        let got = if dialer {
            match dial(&env, &peer).await {
                Ok(x) => Some(x),
                Err(e) => {
                    // A peer that answers, but not with a handshake we accept, is said (as
                    // the listener says whom it refused); one that does not answer is not.
                    use std::io::ErrorKind::{InvalidData, Other, PermissionDenied};
                    if matches!(e.kind(), InvalidData | PermissionDenied | Other) {
                        tracing::warn!(peer = peer.id, "handshake with the peer failed: {e}");
                    }
                    refused_or_silent(&peer, &e);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            }
        } else {
            tokio::select! {
                x = inbound.recv() => x,
                _ = tokio::time::sleep(hb) => {
                    let (connected, state) = { let l = peer.live(); (l.is_connected(), l.state()) };
                    if !connected && state != LinkState::Down {
                        // Not our turn to dial: see whether the peer's daemon still listens.
                        if let Err(e) = probe_port(&peer).await {
                            refused_or_silent(&peer, &e);
                        }
                    }
                    continue;
                }
            }
        };
        let Some((stream, incarnation)) = got else { return };
        backoff = Duration::from_millis(50);
        run_control(&peer, stream, incarnation, hb, &mut inbound).await;
        *peer.ctrl.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let acts = peer.live().disconnected(Instant::now());
        peer.apply(acts);
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
/// the new start); the link is up, and remembered session ends go out, after.
fn connected(peer: &Arc<TcpPeer>, incarnation: u64, tx: mpsc::UnboundedSender<LinkMsg>) {
    let mut acts = {
        let mut live = peer.live();
        let acts = live.connected(incarnation, Instant::now());
        peer.peer_incarnation.store(incarnation, Ordering::SeqCst);
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
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            let inc = dial_handshake(&mut s, &env, peer.id, flow)?;
            s.set_read_timeout(None)?;
            Ok((s, inc))
        })
    };
    let (ctrl, inc) = connect(Flow::Control).await.map_err(std::io::Error::other)??;
    let (bulk, _) = connect(Flow::Bulk).await.map_err(std::io::Error::other)??;
    start_bulk(peer, bulk)?;
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
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<LinkMsg>();
    // Up (lost first if the peer restarted); sessions that ended while the link was down
    // are told now: the peer still holds their resources.
    connected(peer, incarnation, tx);
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
                let acts = peer.live().heard(Instant::now());
                peer.apply(acts);
                match m {
                    LinkMsg::Ping { seq } => { peer.send(LinkMsg::Pong { seq }); }
                    LinkMsg::Pong { seq } => {
                        if let Some(t) = sent.remove(&seq) {
                            peer.rtt_us.store(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                        }
                    }
                    LinkMsg::Request { id, origin, req } => {
                        let p = peer.clone();
                        let served = peer.inbound.request(peer.id, origin, req);
                        tokio::spawn(async move {
                            let result = served.await;
                            p.send(LinkMsg::Reply { id, result });
                        });
                    }
                    LinkMsg::Reply { id, result } => {
                        if let Some(tx) = peer.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                            let _ = tx.send(result);
                        }
                    }
                    LinkMsg::Event { origin, event } => peer.inbound.event(peer.id, origin, event),
                    LinkMsg::SessionEnd { origin } => peer.inbound.session_end(peer.id, origin),
                    other => {
                        tracing::warn!(peer = peer.id, "unexpected {other:?} on an established link; closing it");
                        break;
                    }
                }
            }
            _ = tick.tick() => {
                let acts = peer.live().tick(Instant::now());
                if acts.contains(&Action::Ping) {
                    seq += 1;
                    sent.insert(seq, Instant::now());
                    sent.retain(|k, _| *k + 64 > seq);
                    peer.send(LinkMsg::Ping { seq });
                }
                let close = acts.contains(&Action::Close);
                peer.apply(acts);
                if close {
                    // Silent far past any pause: give the connection up, fail what waits on
                    // it, and let redial (or loss) decide.
                    tracing::warn!(peer = peer.id, "no frame for {} heartbeats: closing the link", crate::transport::liveness::GIVE_UP_PERIODS);
                    break;
                }
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
