//! An `ofi` link to one peer. Its bootstrap is a TCP connection to the peer's `ofi_port`
//! that starts with the tcp transport's authenticated handshake (the cluster secret, both
//! ways); only then do the two nodes exchange their endpoint names and the tokens their
//! fabric messages must carry ([`Boot`]); each side routes its token before its frame goes
//! out, so a peer that is up first and sends at once loses nothing to a side still reading
//! (what comes early waits in the link's queue). The connection stays open as the link's life line:
//! when it breaks, the link is down and redialled (the node with the smaller id dials), and
//! a refused redial means the peer's daemon is gone. The link goes down too when a message
//! to the peer is lost on the fabric (its bootstrap connection is closed, which takes the
//! peer's side down as well). A link that ends before it stayed up a few heartbeats (its
//! bootstrap connection closed, or a send failed), or whose bootstrap fails, is followed by
//! a pause that doubles each time (50 ms up to a second; a failed send pauses even a link
//! that worked), as a refused dial is: a link that flaps is redialled ever more slowly.
//! Control messages (requests, replies, events, heartbeats, session ends) then travel as
//! fabric messages; the decisions about the link's state are
//! the shared [`crate::transport::liveness`] machine's, carried out by the same peer type
//! as the tcp transport's.

use super::fabric::Routing;
use super::wire::{Body, Boot};
use super::{rma, Ofi, OfiLink};
use crate::transport::tcp::framing::{read_frame, write_frame};
use crate::transport::tcp::handshake::dial_handshake;
use crate::transport::tcp::link::{accept_in_place, await_peer, connected, dial_failed, STABLE_PERIODS};
use crate::transport::{Env, LinkState};
use remora_proto::link::{Flow, LinkMsg};
use std::collections::HashMap;
use std::net::TcpStream as StdStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

/// Take one bootstrap connection: the handshake (under a place and a deadline, as the tcp
/// transport's), then hand it to the peer's link.
pub(super) async fn accept_one(ofi: Arc<Ofi>, stream: TcpStream) -> std::io::Result<()> {
    let o = ofi.clone();
    // A node this transport does not carry is refused before the welcome.
    let admit = move |node: u32| {
        o.links.get(&node).cloned().ok_or_else(|| format!("node {node} is not reached over ofi here"))
    };
    let (std, flow, inc, link) = accept_in_place(&ofi.admission, ofi.env.clone(), stream, admit).await?;
    if flow == Flow::Pager {
        // A DSM pager's own flow (a TCP stream a process holds), served as the tcp
        // transport serves them.
        return crate::transport::tcp::pager::accept(&link.peer, std, inc);
    }
    std.set_nonblocking(true)?;
    let tx = link.peer.accepted.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(tx) = tx {
        let _ = tx.send((TcpStream::from_std(std)?, inc));
    }
    Ok(())
}

/// Dial the peer's bootstrap port and authenticate; returns the stream and its incarnation.
async fn dial(env: &Arc<Env>, link: &Arc<OfiLink>) -> std::io::Result<(TcpStream, u64)> {
    let (env, peer) = (env.clone(), link.peer.clone());
    let (s, inc) = tokio::task::spawn_blocking(move || -> std::io::Result<(StdStream, u64)> {
        let addr: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&peer.addr)?.collect();
        let a = addr.first().ok_or_else(|| std::io::Error::other("address does not resolve"))?;
        let mut s = StdStream::connect_timeout(a, Duration::from_secs(1))?;
        crate::transport::tcp::cap_backoff(&s, &env);
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let inc = dial_handshake(&mut s, &env, peer.id, Flow::Control)?;
        crate::transport::tcp::tune_congestion(&s, &env, peer.id);
        Ok((s, inc))
    })
    .await
    .map_err(std::io::Error::other)??;
    s.set_nonblocking(true)?;
    Ok((TcpStream::from_std(s)?, inc))
}

/// The peer's bootstrap port refuses: if its tcp port answers, its daemon runs but not on
/// this transport — it fell back to tcp. Said once (until the link comes up again).
async fn fell_back(env: &Arc<Env>, link: &Arc<OfiLink>) {
    let Some(c) = env.cluster.as_ref() else { return };
    let (id, kind) = (link.peer.id, c.kind(env.node).map(|k| k.name()).unwrap_or_default());
    let Some(a) = c.addr(id) else { return };
    if link.told_fallback.load(Ordering::Relaxed) {
        return;
    }
    let at = format!("{}:{}", a.host, a.port);
    let answers =
        matches!(tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(&at)).await, Ok(Ok(_)));
    if answers && !link.told_fallback.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            peer = id,
            "node {id} answers on its tcp port ({at}) but refuses its {kind} bootstrap ({}): it \
             must have fallen back to tcp (its provider is missing there), and this node reaches it \
             over {kind} only; a fallback is for the whole cluster",
            link.peer.addr
        );
    }
}

/// Both ways over an authenticated bootstrap connection: our endpoint's name and the token
/// we want, theirs back.
async fn boot(ofi: &Arc<Ofi>, stream: TcpStream, token: u64) -> std::io::Result<(TcpStream, Boot)> {
    let name = ofi.fabric.ep.name().map_err(std::io::Error::other)?;
    let std = stream.into_std()?;
    std.set_nonblocking(false)?;
    std.set_read_timeout(Some(Duration::from_secs(5)))?;
    let (std, theirs) = tokio::task::spawn_blocking(move || -> std::io::Result<(StdStream, Boot)> {
        let mut s = std;
        write_frame(&mut s, &Boot { name, token })?;
        let theirs: Boot = read_frame(&mut s)?;
        Ok((s, theirs))
    })
    .await
    .map_err(std::io::Error::other)??;
    std.set_read_timeout(None)?;
    std.set_nonblocking(true)?;
    Ok((TcpStream::from_std(std)?, theirs))
}

fn token() -> u64 {
    let mut b = [0u8; 8];
    let _ = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
    u64::from_le_bytes(b) | 1
}

/// Keep the link to one peer up: dial (if our id is smaller) or take its bootstrap
/// connections, run the link, redial with back-off.
pub(super) async fn run_link(
    ofi: Arc<Ofi>,
    link: Arc<OfiLink>,
    mut accepted: mpsc::UnboundedReceiver<(TcpStream, u64)>,
) {
    let env = ofi.env.clone();
    let peer = link.peer.clone();
    let dialer = env.node < peer.id;
    let hb = env.cluster.as_ref().map(|c| c.heartbeat).unwrap_or(Duration::from_millis(200));
    peer.live().set_heartbeat(hb);
    let mut backoff = Duration::from_millis(50);
    let mut next: Option<(TcpStream, u64)> = None;
    loop {
        let got = if let Some(n) = next.take() {
            Some(n)
        } else if dialer {
            match dial(&env, &link).await {
                Ok(x) => Some(x),
                Err(e) => {
                    if e.kind() == std::io::ErrorKind::ConnectionRefused {
                        fell_back(&env, &link).await;
                    }
                    dial_failed(&peer, &e, &mut backoff).await;
                    continue;
                }
            }
        } else {
            match await_peer(&peer, &mut accepted, hb).await {
                Some(x) => x,
                None => {
                    if peer.state() == LinkState::Lost {
                        fell_back(&env, &link).await;
                    }
                    continue;
                }
            }
        };
        let Some((stream, incarnation)) = got else { return };
        let mine = token();
        // Our token is routed before our bootstrap frame hands it to the peer: the peer
        // declares the link up and sends as soon as it has read that frame, which may be
        // before we have read its own (each side writes, then reads), and a message under a
        // token not yet routed would be dropped — a request lost with no answer ever. What
        // comes before the link is up here waits in the link's queue until it is.
        let (in_tx, in_rx) = mpsc::unbounded_channel::<Body>();
        // Told when a message of this connection is lost on the fabric (`fabric.rs`).
        let broken = Arc::new(Notify::new());
        // The last link's queue went with its task (its token is unrouted): nothing waits.
        link.early.store(0, Ordering::SeqCst);
        let routing = Routing {
            peer: peer.clone(),
            tx: in_tx,
            waiters: link.rma_wait.clone(),
            reply: None,
            served: link.served.clone(),
            early: link.early.clone(),
            broken: broken.clone(),
        };
        ofi.fabric.route(mine, routing);
        let (stream, theirs) = match boot(&ofi, stream, mine).await {
            Ok(x) => x,
            Err(e) => {
                ofi.fabric.unroute(mine);
                tracing::warn!(peer = peer.id, "ofi bootstrap failed: {e}");
                if dialer {
                    // The side that does not dial waits for the dialer's next link anyway.
                    pause(&mut backoff).await;
                }
                continue;
            }
        };
        let dest = match ofi.fabric.ep.insert(&theirs.name) {
            Ok(d) => d,
            Err(e) => {
                ofi.fabric.unroute(mine);
                tracing::warn!(peer = peer.id, "the peer's endpoint name is refused: {e}");
                if dialer {
                    // The side that does not dial waits for the dialer's next link anyway.
                    pause(&mut backoff).await;
                }
                continue;
            }
        };
        #[cfg(test)]
        tests::pause_after_boot(&peer.addr).await;
        link.told_fallback.store(false, Ordering::Relaxed);
        let to = (dest, mine, theirs.token);
        let up = Instant::now();
        let end = run_connected(&ofi, &link, stream, incarnation, to, (in_rx, broken), &mut accepted).await;
        // The back-off starts over only once a link has worked: stayed up a few heartbeats
        // (stable, by the tcp transport's rule). A link that comes up and ends at once, again
        // and again, is redialled ever more slowly (below) — also when the peer was heard
        // from meanwhile (only our sends fail).
        let worked = up.elapsed() >= hb * STABLE_PERIODS;
        if worked {
            backoff = Duration::from_millis(50);
        }
        let wait = match end {
            End::Newer(_) => false,
            End::SendFailed => true,
            End::Closed => !worked,
        };
        next = match end {
            End::Newer(n) => Some(n),
            End::SendFailed | End::Closed => None,
        };
        ofi.fabric.unroute(mine);
        *link.dest.lock().unwrap_or_else(|p| p.into_inner()) = None;
        rma::link_down(&link);
        let stranded = ofi.fabric.ep.remove(dest);
        if stranded > 0 {
            // libfabric may never complete them (fi_av_remove leaves them undefined), and
            // their registrations cannot be closed safely before: held until the endpoint
            // closes (remora-ofi-sys, keep.rs).
            tracing::warn!(
                "ofi link to node {}: {stranded} RMA operations still in flight to it may never \
                 complete; their registrations stay held ({} such in all)",
                peer.id,
                ofi.fabric.ep.stranded()
            );
        }
        *peer.ctrl.lock().unwrap_or_else(|p| p.into_inner()) = None;
        if next.is_none() {
            let acts = peer.live().disconnected(Instant::now());
            peer.apply(acts);
        }
        if wait && dialer {
            // A send failed, or the link ended before it worked, while the bootstrap port
            // answers: redialling at once would make a loop of millisecond-long links, each
            // told to user code as down, then up. (The side that does not dial makes no
            // link: a pause would only delay serving the dialer's next one.)
            pause(&mut backoff).await;
        }
    }
}

/// Wait `backoff` before the next link, and double it (up to a second).
async fn pause(backoff: &mut Duration) {
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(Duration::from_secs(1));
}

/// Why a connected link ended.
enum End {
    /// The peer redialled: this bootstrap connection is served next.
    Newer((TcpStream, u64)),
    /// A send over the fabric was refused (or its queue stayed full), or failed after it
    /// was posted.
    SendFailed,
    /// Its bootstrap connection closed, or the peer fell silent for good.
    Closed,
}

/// Run a connected link until its bootstrap connection breaks, the peer falls silent for
/// good, it redials, or a message to it is lost on the fabric (`broken` is told); says why
/// it ended. `mine` is routed to `in_rx` and `broken` already.
async fn run_connected(
    ofi: &Arc<Ofi>,
    link: &Arc<OfiLink>,
    stream: TcpStream,
    incarnation: u64,
    (dest, mine, theirs): (u64, u64, u64),
    (mut in_rx, broken): (mpsc::UnboundedReceiver<Body>, Arc<Notify>),
    accepted: &mut mpsc::UnboundedReceiver<(TcpStream, u64)>,
) -> End {
    let peer = &link.peer;
    ofi.fabric.reply_to(mine, dest, theirs);
    *link.dest.lock().unwrap_or_else(|p| p.into_inner()) = Some((dest, theirs));
    let (tx, mut rx) = mpsc::unbounded_channel::<LinkMsg>();
    let (f, p) = (ofi.fabric.clone(), peer.clone());
    // The writer: control messages in order, as fabric messages (a full queue is waited
    // for in the blocking pool, not on a runtime thread).
    let mut writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let wire = |m| super::wire::Wire { token: theirs, body: Body::Link(m) };
            let w = wire(m);
            let bytes = match remora_proto::encode(&w) {
                Ok(b) => b,
                // Too large for a message: its caller (or the peer's) is answered instead.
                Err(_) => {
                    let Body::Link(m) = w.body else { continue };
                    match p.unsendable(m).map(|r| remora_proto::encode(&wire(r))) {
                        Some(Ok(b)) => b,
                        _ => continue,
                    }
                }
            };
            #[cfg(test)]
            if tests::REFUSED.hit(&p.addr) {
                break;
            }
            let sent = match f.send_bytes((dest, theirs), &bytes, false) {
                Err(true) => {
                    let f = f.clone();
                    tokio::task::spawn_blocking(move || f.send_bytes((dest, theirs), &bytes, true))
                        .await
                        .unwrap_or(Err(false))
                }
                other => other,
            };
            match sent {
                Ok(n) => {
                    p.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(_) => break,
            }
        }
    });
    connected(peer, incarnation, tx);
    #[cfg(test)]
    if tests::CLOSING.hit(&peer.addr) {
        writer.abort();
        return End::Closed;
    }
    let mut tick = tokio::time::interval(peer.live().heartbeat());
    let mut seq = 0u64;
    let mut sent: HashMap<u64, Instant> = HashMap::new();
    let mut scratch = [0u8; 64];
    let end = loop {
        tokio::select! {
            b = in_rx.recv() => {
                let Some(b) = b else { break End::Closed };
                match b {
                    Body::Link(m) => {
                        if !peer.serve_ctrl(m, &mut sent) {
                            break End::Closed;
                        }
                    }
                    other => rma::serve(&ofi.fabric, link, other),
                }
            }
            _ = tick.tick() => {
                if !peer.heartbeat_tick(&mut seq, &mut sent) {
                    break End::Closed;
                }
            }
            r = stream.readable() => {
                // Nothing is sent on the bootstrap connection after the bootstrap: any
                // readiness is its end (or junk, which ends it too).
                if r.is_err() || !matches!(stream.try_read(&mut scratch), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock) {
                    tracing::info!(peer = peer.id, "the ofi link's bootstrap connection closed");
                    break End::Closed;
                }
            }
            _ = &mut writer => {
                // A send was refused (or its queue stayed full): that message is lost, and
                // what waits for its answer must not wait for the peer's silence to end the
                // link (the peer still pings us, so this side would not see any).
                let why = "sending to the peer over the fabric failed: closing the ofi link";
                tracing::warn!(peer = peer.id, "{why}");
                break End::SendFailed;
            }
            _ = broken.notified() => {
                // A message was lost after it left (`Fabric::broke` said which): whatever
                // it was — a request, an answer, a notice, an event — the link goes down
                // as a TCP link whose connection broke, so that nothing waits for it and
                // notices are told again on the next connection.
                break End::SendFailed;
            }
            Some(newer) = accepted.recv() => {
                // The peer redialled (its side saw the old link die): switch to it.
                let acts = peer.live().superseded();
                peer.apply(acts);
                break End::Newer(newer);
            }
        }
    };
    writer.abort();
    end
}

#[cfg(test)]
#[path = "link_tests.rs"]
pub(super) mod tests;
