//! Direct flows: a TCP stream between a process of this node and a process of the peer (a
//! SCIF connection's messages), without a daemon in between. The dialing node dials and
//! authenticates it exactly as a pager flow (`Flow::Pager`, a pooled one when there is one), binds it with
//! [`LinkMsg::FlowBind`] to the key and one-time token the peer handed out, and waits for
//! the peer's [`LinkMsg::Welcome`], which the peer writes only once it has given the stream
//! to the process that waited for it; then both hand it to their process.

use super::framing::{read_frame, write_frame};
use super::peer::TcpPeer;
use super::pool::Pool;
use crate::transport::LinkState;
use remora_proto::link::LinkMsg;
use remora_proto::Error;
use std::net::TcpStream as StdStream;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

/// How long it waits for the peer's word that the stream was handed over: longer than the
/// peer waits for the flow (`personality/scif/direct.rs`), so that only a peer that stopped
/// answering makes the two ends decide differently.
const HANDED_OVER: Duration = Duration::from_secs(8);

/// A direct flow to `peer` for `key` and `token`, as the descriptor a process gets.
///
/// # Errors
/// [`Error::NodeNotResponding`] at once when the link is not up; the dial's failure, or
/// the peer's refusal (it closed the flow instead of welcoming it).
pub(in crate::transport) async fn dial_flow(pool: Arc<Pool>, key: u64, token: u64) -> Result<OwnedFd, Error> {
    if pool.peer().state() != LinkState::Up {
        return Err(Error::NodeNotResponding);
    }
    let node = pool.peer().id;
    let s = tokio::task::spawn_blocking(move || dial(&pool, key, token))
        .await
        .map_err(|e| Error::Protocol(e.to_string()))?
        .map_err(|e| Error::Protocol(format!("direct flow to node {node}: {e}")))?;
    Ok(OwnedFd::from(s))
}

fn dial(pool: &Arc<Pool>, key: u64, token: u64) -> std::io::Result<StdStream> {
    // Authenticated as a pager flow; a pooled one when there is one (`pool.rs`).
    let mut s = pool.flow()?;
    s.set_nodelay(true)?;
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
