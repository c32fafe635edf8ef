//! SCIF connections between endpoints on two hosts: each host's daemon holds the region
//! its endpoint uses and relays messages, in order, over the node link; RMA into the far
//! peer's windows is done by the far daemon on request.
//!
//! The local endpoint talks to its region exactly as to a peer on the same host. The
//! relay stands in for the far peer: it is the consumer of the endpoint's outgoing ring
//! (the endpoint's doorbell rings the relay) and the producer of its incoming ring (the
//! relay rings the endpoint, and, when that ring is full, waits until the endpoint takes
//! bytes, using the same doorbell stuffing as endpoints use between themselves).
//!
//! Messages flow on credit: a relay sends at most [`SCIF_RELAY_WINDOW`] bytes (and the
//! message under way) that the far relay has not yet put into its endpoint's ring; beyond
//! that it leaves the bytes in the local ring, so the local sender blocks (or sends short)
//! as it would on a full ring to a peer on its own host. The far relay gives the credit
//! back ([`ScifPeerRequest::Credit`]) once the bytes are in its endpoint's ring, every
//! quarter window, so neither daemon holds more than a window of a connection's messages.

use super::books::{RelayIn, RelayStart, RemoteEnd};
use crate::transport::Posted;
use crate::Node;
use remora_proto::link::{PeerReply, PeerRequest, ScifPeerReply, ScifPeerRequest};
use remora_proto::{Error, MAX_DATA_IO, SCIF_RELAY_WINDOW};
use remora_sys::bell;
use remora_sys::msgring::MsgRegion;
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// The link origin a relay uses: its own, so that its session at the far node ends only
/// when the relay has delivered everything.
pub fn origin_of(conn: u64) -> u64 {
    (1 << 63) | conn
}

/// The bytes a relay lets its endpoint's ring take before it gives credit back.
const CREDIT_EVERY: u64 = (SCIF_RELAY_WINDOW / 4) as u64;
/// The most bytes a relay queues for its endpoint: a window, the message under way and
/// the credit still on its way back. A far relay that sends more ignores the credit: the
/// connection is dropped rather than the daemon's memory.
const INBOUND_LIMIT: usize = 2 * SCIF_RELAY_WINDOW + MAX_DATA_IO;

/// Post `req` (in order with the relay's others), or ask it when the link cannot take a
/// post now. `false`: it failed (the far relay hears nothing more from us; logged, with
/// why, as the end of connection `conn`).
async fn forward(
    peer: &Arc<dyn crate::transport::Transport>,
    (far_node, origin, conn): (u32, u64, u64),
    req: PeerRequest,
    watch: &mut Option<Posted>,
) -> bool {
    match peer.post(far_node, origin, req, watch.as_ref().map(|w| w.id)) {
        Ok(w) => {
            *watch = Some(w);
            true
        }
        Err(req) => match peer.request(far_node, origin, req).await {
            Ok(_) => true,
            Err(e) => {
                dropped(conn, far_node, &format!("the link could not carry the relay's bytes ({e})"));
                false
            }
        },
    }
}

/// Connection `conn` is reset because its relay can reach the far relay no more: said at
/// warn level, with `why` (its endpoints see `ECONNRESET`).
fn dropped(conn: u64, far_node: u32, why: &str) {
    tracing::warn!(conn, far_node, "SCIF relayed connection reset: {why}");
}

/// Ring `d` (the endpoint's incoming one) is full: make our doorbell unwritable until the
/// endpoint takes bytes (its `took` unstuffs it, and the edge wakes us). `false`: room came
/// meanwhile, deliver again.
///
/// Stuffed every time, not only when the flag is down: the endpoint lowers the flag before
/// it unstuffs and reads until the doorbell is empty, so an unstuff of its still reading
/// when we stuffed anew takes our new stuffing too. The doorbell is then writable with the
/// flag up, the endpoint's next `took` has nothing to read, no edge comes, and the relay
/// slept until its fallback timer (a 64 KiB ring moved 0.03 GB/s). A stuffing that is
/// still there costs one refused `send`.
fn wait_for_room(region: &MsgRegion, d: usize, reader: BorrowedFd<'_>, proxy_ringer: BorrowedFd<'_>) -> bool {
    bell::stuff(reader);
    let flag = region.tx_stuffed(d);
    // A fresh flag races with a release the endpoint made an instant before without seeing
    // it (see `stuffed_wait`); a flag that stayed up since our last look was seen by every
    // release since, so the ring as it is now tells.
    let fresh = flag.swap(1, Ordering::SeqCst) == 0;
    let room = if fresh { region.stuffed_wait(d) } else { region.has_room(d) };
    if room && flag.swap(0, Ordering::SeqCst) == 1 {
        bell::unstuff(proxy_ringer);
        return false;
    }
    true
}

/// Start the relay of a connection.
pub fn spawn(node: Arc<Node>, start: RelayStart) {
    tokio::spawn(run(node, start));
}

async fn run(node: Arc<Node>, st: RelayStart) {
    let RelayStart { conn, region, local, ringer, proxy_ringer, remote, mut rx } = st;
    let RemoteEnd { node: far_node, conn: far, reader, .. } = remote;
    let origin = origin_of(conn);
    let peer = node.transports().to(far_node).cloned();
    let proxy = 1 - local;
    let hang_up_local = || {
        region.closed(proxy).store(1, Ordering::Release);
        bell::hang_up(ringer.as_fd());
    };
    let (Some(peer), Ok(reader)) = (peer, remora_sys::async_conn::register(reader)) else {
        hang_up_local();
        return;
    };
    let (out_dir, in_dir) = (local, proxy);
    let mut inbound: VecDeque<Vec<u8>> = VecDeque::new();
    // Bytes queued in `inbound`; bytes sent without credit back; bytes put into the local
    // ring not yet credited to the far relay; whether the far relay broke the window.
    let (mut queued, mut unacked, mut delivered, mut overrun) = (0usize, 0u64, 0u64, false);
    let (mut local_closed, mut peer_closed) = (false, false);
    let mut buf = vec![0u8; MAX_DATA_IO];
    // The watch of the last chunk posted (the transport answers a post only when it failed,
    // so a chunk costs one packet and the next goes without waiting).
    let mut watch: Option<Posted> = None;
    loop {
        // Forward what the endpoint sent, in order, as far as the credit goes: posted where
        // the transport can, else one chunk per round trip. Once the far end is gone, what
        // the endpoint sends is dropped.
        loop {
            if !peer_closed && unacked >= SCIF_RELAY_WINDOW as u64 {
                break;
            }
            let n = region.pop(out_dir, &mut buf);
            if n == 0 {
                break;
            }
            fence(Ordering::SeqCst);
            if region.tx_stuffed(out_dir).swap(0, Ordering::SeqCst) == 1 {
                bell::unstuff(ringer.as_fd());
            }
            if !peer_closed {
                let req = PeerRequest::Scif(ScifPeerRequest::Data { conn: far, data: buf[..n].to_vec() });
                unacked += n as u64;
                if !forward(&peer, (far_node, origin, conn), req, &mut watch).await {
                    peer_closed = true;
                }
            }
        }
        // Deliver what the far peer sent, as far as the ring takes it.
        let mut full = false;
        while let Some(front) = inbound.front_mut() {
            let (n, unseen) = region.push(in_dir, front);
            if n > 0 && unseen.is_some() {
                bell::ring_once(region.bell_pending(in_dir), ringer.as_fd());
            }
            front.drain(..n);
            queued -= n;
            delivered += n as u64;
            if !front.is_empty() {
                full = true;
                break;
            }
            inbound.pop_front();
        }
        // Give the credit back for what the ring took.
        if delivered >= CREDIT_EVERY && !peer_closed {
            let req = PeerRequest::Scif(ScifPeerRequest::Credit { conn: far, bytes: delivered });
            delivered = 0;
            if !forward(&peer, (far_node, origin, conn), req, &mut watch).await {
                peer_closed = true;
            }
        }
        if full && !wait_for_room(&region, in_dir, reader.get_ref().as_fd(), proxy_ringer.as_fd()) {
            continue;
        }
        if local_closed && !region.has_data(out_dir) {
            if !peer_closed {
                let req = PeerRequest::Scif(ScifPeerRequest::Close { conn: far });
                let _ = peer.request(far_node, origin, req).await;
            }
            break;
        }
        if peer_closed && inbound.is_empty() {
            hang_up_local();
            if local_closed {
                break;
            }
        }
        tokio::select! {
            g = reader.readable() => {
                if let Ok(mut g) = g {
                    if !bell::take(region.bell_pending(out_dir), reader.get_ref().as_fd()) {
                        bell::drain(reader.get_ref().as_fd());
                    }
                    g.clear_ready();
                    fence(Ordering::SeqCst);
                }
            }
            g = reader.writable(), if full => {
                if let Ok(mut g) = g {
                    g.clear_ready();
                }
            }
            // While the ring is full, look again now and then whatever the doorbell says.
            _ = tokio::time::sleep(std::time::Duration::from_millis(5)), if full => {}
            // The last post failed there, or the connection it went on broke: as a failed
            // request (the far end then hears of nothing more from us).
            r = async {
                match watch.as_mut() {
                    Some(w) => w.outcome.as_mut().await,
                    None => std::future::pending().await,
                }
            }, if watch.is_some() => {
                watch = None;
                match r {
                    Ok(_) => {}
                    // The far end closed (a message in flight when it did): an ordinary
                    // close, not a reset worth a warning (reviewer 88).
                    Err(e @ remora_proto::Error::NotConnected) => {
                        tracing::debug!(conn, far_node, "a message to the far relay found it closed ({e})");
                        peer_closed = true;
                    }
                    Err(e) => {
                        dropped(conn, far_node, &format!("a message to the far relay failed there, or the link's connection broke under it ({e})"));
                        peer_closed = true;
                    }
                }
            }
            m = rx.recv() => match m {
                Some(RelayIn::Data(_)) if overrun => {}
                Some(RelayIn::Data(d)) if queued + d.len() > INBOUND_LIMIT => {
                    tracing::warn!(conn, far_node, "the far SCIF relay sent beyond its credit: connection dropped");
                    (overrun, peer_closed, queued) = (true, true, 0);
                    inbound.clear();
                    // The far end hears of it as of a close, so its endpoint sees a reset.
                    let req = PeerRequest::Scif(ScifPeerRequest::Close { conn: far });
                    let _ = peer.request(far_node, origin, req).await;
                }
                Some(RelayIn::Data(d)) => {
                    queued += d.len();
                    inbound.push_back(d);
                }
                Some(RelayIn::Credit(b)) => unacked = unacked.saturating_sub(b),
                Some(RelayIn::PeerClosed) => peer_closed = true,
                Some(RelayIn::LocalClosed) => local_closed = true,
                None => break,
            },
        }
    }
    if let Some(w) = watch {
        peer.unwatch(far_node, w.id);
    }
    tracing::debug!(conn, fd = reader.get_ref().as_raw_fd(), "SCIF relay done");
    peer.session_end(origin);
}

/// A connection request from an endpoint on another host (`ScifPeerRequest::Connect`, or
/// `ConnectWithoutFlow` when `flow` is false): queue it on the listener like a local one
/// and wait for an accept.
pub async fn serve_connect(
    node: &Arc<Node>,
    sid: u64,
    from: (u32, u16),
    port: u16,
    far: u64,
    flow: bool,
) -> Result<PeerReply, Error> {
    let (reader, ringer) = bell::pair().map_err(|e| Error::System(e.to_string()))?;
    let remote = RemoteEnd { node: from.0, conn: far, reader, flow };
    let (_, rx) = node.scif().request(sid, port, from, ringer, Some(remote))?;
    node.changed.notify_waiters();
    let accepted = rx.await.unwrap_or(Err(Error::ConnRefused))?;
    let conn = accepted.conn;
    let port = accepted.peer.1;
    if let Some(start) = accepted.relay {
        spawn(node.clone(), start);
    }
    Ok(PeerReply::Scif(match accepted.direct {
        Some(token) => ScifPeerReply::AcceptedDirect { conn, port, token },
        None => ScifPeerReply::Accepted { conn, port },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn writable(fd: BorrowedFd<'_>) -> bool {
        bell::wait(fd, true, Some(Duration::ZERO)).unwrap().writable
    }

    /// The endpoint's `took` lowers the flag, then reads its doorbell's ringer until empty:
    /// a relay that stuffed anew meanwhile lost its stuffing with the flag up. Waiting again
    /// stuffs again, so the endpoint's next `took` has something to read and wakes us.
    #[test]
    fn a_stuffing_an_unstuff_took_with_the_flag_up_is_made_again() {
        let region = MsgRegion::open(MsgRegion::create(256).unwrap().as_fd()).unwrap();
        let (reader, proxy_ringer) = bell::pair().unwrap();
        let (r, p) = (reader.as_fd(), proxy_ringer.as_fd());
        assert_eq!(region.push(0, &[7u8; 300]).0, 255, "the ring is full");
        assert!(wait_for_room(&region, 0, r, p), "no room: wait");
        assert!(!writable(r), "stuffed");
        assert_eq!(region.tx_stuffed(0).load(Ordering::SeqCst), 1);
        // The tail of an earlier unstuff of the endpoint's, still reading.
        bell::unstuff(p);
        assert!(writable(r));
        assert!(wait_for_room(&region, 0, r, p), "still no room: wait");
        assert!(!writable(r), "stuffed again: the endpoint's next took makes an edge");
        // The endpoint takes bytes and unstuffs (its `took`): writable, and room is seen.
        let mut b = [0u8; 100];
        assert_eq!(region.pop(0, &mut b), 100);
        if region.tx_stuffed(0).swap(0, Ordering::SeqCst) == 1 {
            bell::unstuff(p);
        }
        assert!(writable(r), "the endpoint's took wakes the relay");
        // Full again, and the endpoint takes before the relay looks at the flag.
        assert_eq!(region.push(0, &[7u8; 300]).0, 100);
        assert!(wait_for_room(&region, 0, r, p));
        assert_eq!(region.pop(0, &mut b), 100);
        assert!(!wait_for_room(&region, 0, r, p), "room came: deliver again");
        assert!(writable(r), "and the stuffing is undone");
        assert_eq!(region.tx_stuffed(0).load(Ordering::SeqCst), 0);
    }
}
