//! Direct flows: a TCP stream between a process of this node and a process of the peer (a
//! SCIF connection's messages), without a daemon in between. The dialing node dials and
//! authenticates it exactly as a pager flow ([`Flow::Pager`]), binds it with
//! [`LinkMsg::FlowBind`] to the key and one-time token the peer handed out, and waits for
//! the peer's [`LinkMsg::Welcome`], which the peer writes only once it has given the stream
//! to the process that waited for it; then both hand it to their process.

use super::framing::{read_frame, write_frame};
use super::handshake::dial_handshake;
use super::peer::TcpPeer;
use crate::transport::{Env, LinkState};
use remora_proto::link::{Flow, LinkMsg};
use remora_proto::Error;
use std::net::TcpStream as StdStream;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long a direct flow's dial waits for the TCP connection.
const DIAL_CONNECT: Duration = Duration::from_millis(300);
/// How long it waits for each answer of the handshake.
const DIAL_ANSWER: Duration = Duration::from_millis(700);
/// How long it waits for the peer's word that the stream was handed over: longer than the
/// peer waits for the flow (`personality/scif/direct.rs`), so that only a peer that stopped
/// answering makes the two ends decide differently.
const HANDED_OVER: Duration = Duration::from_secs(8);

/// A direct flow to `peer` for `key` and `token`, as the descriptor a process gets.
///
/// # Errors
/// [`Error::NodeNotResponding`] at once when the link is not up; the dial's failure, or
/// the peer's refusal (it closed the flow instead of welcoming it).
pub(in crate::transport) async fn dial_flow(
    env: Arc<Env>,
    peer: Arc<TcpPeer>,
    key: u64,
    token: u64,
) -> Result<OwnedFd, Error> {
    if peer.state() != LinkState::Up {
        return Err(Error::NodeNotResponding);
    }
    let node = peer.id;
    let s = tokio::task::spawn_blocking(move || dial(&env, &peer, key, token))
        .await
        .map_err(|e| Error::Protocol(e.to_string()))?
        .map_err(|e| Error::Protocol(format!("direct flow to node {node}: {e}")))?;
    Ok(OwnedFd::from(s))
}

fn dial(env: &Env, peer: &TcpPeer, key: u64, token: u64) -> std::io::Result<StdStream> {
    let addr: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&peer.addr)?.collect();
    let a = addr.first().ok_or_else(|| std::io::Error::other("address does not resolve"))?;
    let mut s = StdStream::connect_timeout(a, DIAL_CONNECT)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(DIAL_ANSWER))?;
    s.set_write_timeout(Some(DIAL_ANSWER))?;
    let inc = dial_handshake(&mut s, env, peer.id, Flow::Pager)?;
    if peer.peer_incarnation.load(Ordering::SeqCst) != inc {
        return Err(std::io::Error::other(format!("node {} restarted", peer.id)));
    }
    write_frame(&mut s, &LinkMsg::FlowBind { key, token })?;
    s.set_read_timeout(Some(HANDED_OVER))?;
    match read_frame::<LinkMsg>(&mut s)? {
        LinkMsg::Welcome => {}
        other => return Err(std::io::Error::other(format!("the peer answered {other:?}"))),
    }
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)?;
    Ok(s)
}

/// A flow bound with [`LinkMsg::FlowBind`] arrived from `peer`: give it to whoever waits
/// for `key` and `token` on this node, then welcome it; or close it.
pub(super) fn hand_over(peer: &TcpPeer, s: StdStream, key: u64, token: u64) {
    let Some(give) = peer.inbound.direct_flow(peer.id, key, token) else {
        tracing::info!(peer = peer.id, key, "a direct flow nobody waits for; closed");
        return;
    };
    let mut s = s;
    let ready = s.set_read_timeout(None).and_then(|()| s.set_nodelay(true));
    // Welcomed before it is given: the process's first bytes come after the answer.
    if ready.and_then(|()| write_frame(&mut s, &LinkMsg::Welcome)).is_ok() {
        let _ = s.set_write_timeout(None);
        give(OwnedFd::from(s));
    }
    // Otherwise `give` is dropped unused: the waiter falls back to its relay.
}
