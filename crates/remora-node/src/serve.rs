//! Serving one connection of a process (or a peer daemon of this host, or the CLI): the
//! hello, the request loop, events, and the release of everything the session held when
//! the connection closes. Requests of a personality go to its module.

use crate::send_msg;
use crate::session::{Outcome, Session};
use crate::Node;
use remora_proto::link::PeerRequest;
use remora_proto::{
    decode, Error, MapStatus, Reply, Request, RequestFrame, Role, ScifRequest, ServerMsg, MAX_FRAME, NO_REPLY,
};
use remora_sys::async_conn::AsyncConn;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::unbounded_channel;

/// Serve one connection until it closes, then release everything it held.
pub async fn run(node: Arc<Node>, fd: OwnedFd) {
    let pid = remora_sys::seqpacket::peer_pid(fd.as_fd()).unwrap_or(0);
    let uid = remora_sys::seqpacket::peer_uid(fd.as_fd()).unwrap_or(u32::MAX);
    let gid = remora_sys::seqpacket::peer_gid(fd.as_fd()).unwrap_or(u32::MAX);
    let conn = match AsyncConn::new(fd) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(pid, "cannot serve connection: {e}");
            return;
        }
    };
    let mut buf = vec![0u8; MAX_FRAME];
    let event_sock: Option<AsyncConn>;
    let role = match tokio::time::timeout(Duration::from_secs(5), conn.recv(&mut buf)).await {
        Ok(Ok((n, _))) if n > 0 => match decode::<RequestFrame>(&buf[..n]) {
            Ok(RequestFrame { id, req: Request::Hello { role, .. } }) => {
                // Application processes get a second socket for events, so that replies
                // and events never interleave on one stream.
                let pair = if role == Role::Client {
                    match remora_sys::seqpacket::pair() {
                        Ok(p) => Some(p),
                        Err(e) => {
                            tracing::warn!(pid, "cannot make an event socket: {e}");
                            return;
                        }
                    }
                } else {
                    None
                };
                let reply = ServerMsg::Reply { id, result: Ok(Reply::Hello { node: node.config.node }) };
                let fds: Vec<BorrowedFd<'_>> = pair.iter().map(|(_, theirs)| theirs.as_fd()).collect();
                if send_msg(&conn, &reply, &fds).await.is_err() {
                    return;
                }
                event_sock = match pair.map(|(ours, _)| AsyncConn::new(ours)).transpose() {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!(pid, "cannot serve the event socket: {e}");
                        return;
                    }
                };
                role
            }
            Ok(other) => {
                tracing::warn!(pid, "first message is not a hello ({:?}); closing", other.req);
                return;
            }
            Err(e @ remora_proto::DecodeError::Version { .. }) => {
                // Answer in this daemon's version, so the library can say what is wrong
                // (its decoder names both versions) instead of seeing a closed session.
                tracing::warn!(pid, "a client of another protocol version; closing: {e}");
                let why = remora_proto::Error::Protocol(e.to_string());
                let _ = send_msg(&conn, &ServerMsg::Reply { id: 0, result: Err(why) }, &[]).await;
                return;
            }
            Err(e) => {
                tracing::warn!(pid, "malformed first frame; closing: {e}");
                return;
            }
        },
        Ok(_) => return,
        Err(_) => {
            tracing::warn!(pid, "no hello within 5 s; closing");
            return;
        }
    };
    let (tx, mut rx) = unbounded_channel();
    let sid = node.lock().add_session(pid, role, tx);
    node.stats.sessions_opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::debug!(sid, pid, ?role, "session open");
    let mut s = Session { node: node.clone(), sid, pid, role, uid, gid, conn };
    // Application processes have an event socket of their own: forward events there from a
    // task of their own, so they flow even while a request of the session waits (a long
    // connect, say). Other roles get events between requests on the main socket.
    // `keep` holds the sending side of the idle channel the loop listens on when events
    // go through the forwarding task.
    let (keep, idle) = unbounded_channel::<remora_proto::Event>();
    let mut rx = match event_sock {
        Some(ev_sock) => {
            let node = node.clone();
            tokio::spawn(async move {
                // The process asks for a local segment's events on this socket
                // (`Request::SegmentEvents`, core/exports/events.rs): no request of the
                // session's own socket, however long, holds the ask up.
                let mut asked = vec![0u8; MAX_FRAME];
                let mut reading = true;
                loop {
                    tokio::select! {
                        ev = rx.recv() => {
                            let Some(ev) = ev else { break };
                            // One turn of the loop first: a reply made in the same turn
                            // leaves before the event.
                            tokio::task::yield_now().await;
                            let msg = gather(&node, ev, &mut rx);
                            if send_msg(&ev_sock, &msg, &[]).await.is_err() {
                                break;
                            }
                        }
                        r = ev_sock.recv(&mut asked), if reading => match r {
                            Ok((n, _)) if n > 0 => ask_on_event_socket(&node, sid, pid, &asked[..n]),
                            // Closed by the process (or unreadable): events still go out.
                            _ => reading = false,
                        },
                    }
                }
            });
            idle
        }
        None => rx,
    };
    loop {
        tokio::select! {
            r = s.conn.recv(&mut buf) => {
                let (n, fds) = match r {
                    Ok((0, _)) => break,
                    Ok(x) => x,
                    Err(e) => match remora_sys::seqpacket::descriptors_lost(&e) {
                        // The request came without its descriptors (this daemon is out of
                        // them, or too many were sent): refused, the session goes on.
                        Some(n) => {
                            tracing::warn!(sid, pid, "a request came without its descriptors: {e}");
                            if refuse_without_fds(&s.conn, &buf[..n]).await.is_err() {
                                break;
                            }
                            continue;
                        }
                        None => {
                            tracing::warn!(sid, pid, "receive failed, closing session: {e}");
                            break;
                        }
                    },
                };
                let frame = match decode::<RequestFrame>(&buf[..n]) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!(sid, pid, "malformed frame, closing session: {e}");
                        break;
                    }
                };
                let (result, out_fds) = handle(&mut s, frame.req, fds).await;
                s.node.changed.notify_waiters();
                if frame.id != NO_REPLY {
                    let borrowed: Vec<BorrowedFd<'_>> = out_fds.iter().map(|f| f.as_fd()).collect();
                    let msg = ServerMsg::Reply { id: frame.id, result };
                    if let Err(e) = send_msg(&s.conn, &msg, &borrowed).await {
                        // A reply that cannot be sent as made (too many descriptors, too
                        // long) is answered with the reason; a session whose socket is
                        // gone ends.
                        let reason = Error::System(format!("the reply could not be sent: {e}"));
                        let plain = ServerMsg::Reply { id: frame.id, result: Err(reason) };
                        if !remora_sys::seqpacket::unsendable(&e) || send_msg(&s.conn, &plain, &[]).await.is_err()
                        {
                            break;
                        }
                        tracing::warn!(sid, pid, "a reply could not be sent: {e}");
                    }
                }
            }
            Some(ev) = rx.recv() => {
                let msg = gather(&s.node, ev, &mut rx);
                if send_msg(&s.conn, &msg, &[]).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(keep);
    node.transports().session_end(sid);
    node.end_session(sid);
    node.changed.notify_waiters();
    tracing::debug!(sid, pid, "session closed; its resources are released");
}

/// Answer the request in `bytes`, whose descriptors did not come, with the reason (nothing
/// of it is done). A frame that is no request ends the session, as any other.
async fn refuse_without_fds(conn: &AsyncConn, bytes: &[u8]) -> Result<(), ()> {
    let frame = decode::<RequestFrame>(bytes).map_err(|_| ())?;
    if frame.id == NO_REPLY {
        return Ok(());
    }
    let reason = Error::System(format!(
        "the daemon could not take the request's descriptors (it is out of them, or more than {} \
         were sent); nothing was done",
        remora_sys::seqpacket::MAX_FDS
    ));
    let msg = ServerMsg::Reply { id: frame.id, result: Err(reason) };
    send_msg(conn, &msg, &[]).await.map_err(|_| ())
}

/// A message the process sent on its event socket: only [`Request::SegmentEvents`] is
/// served there (with no reply; its answer is an event); anything else is logged and
/// dropped.
fn ask_on_event_socket(node: &Node, sid: u64, pid: u32, bytes: &[u8]) {
    match decode::<RequestFrame>(bytes) {
        Ok(RequestFrame { req: Request::SegmentEvents { seg }, .. }) => {
            node.lock().want_segment_events(sid, seg)
        }
        Ok(other) => tracing::warn!(sid, pid, "not served on the event socket: {:?}", other.req),
        Err(e) => tracing::warn!(sid, pid, "malformed frame on the event socket: {e}"),
    }
}

/// The most events sent as one message (each is a few dozen bytes: far below a frame).
const BATCH: usize = 64;

/// `first` and the events queued behind it, as one message. An operation of the books that
/// tells a session several things (every connection to an export lost, say) queues them
/// while it holds the books: taking them once here waits for it to finish, so its events
/// leave together and the process applies them as one.
fn gather(
    node: &Node,
    first: remora_proto::Event,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<remora_proto::Event>,
) -> ServerMsg {
    drop(node.lock());
    let mut events = vec![first];
    while events.len() < BATCH {
        match rx.try_recv() {
            Ok(ev) => events.push(ev),
            Err(_) => break,
        }
    }
    match events.len() {
        1 => ServerMsg::Event(events.pop().expect("one")),
        _ => ServerMsg::Events(events),
    }
}

async fn handle(s: &mut Session, req: Request, fds: Vec<OwnedFd>) -> Outcome {
    if s.role == Role::Control && !matches!(req, Request::Probe { .. } | Request::Status | Request::Shutdown)
    {
        return (Err(Error::Access), vec![]);
    }
    let scif_req = matches!(req, Request::Scif(_));
    if scif_req != (s.role == Role::Scif)
        && !matches!(req, Request::Probe { .. } | Request::Scif(ScifRequest::Nodes))
    {
        return (Err(Error::Access), vec![]);
    }
    let sid = s.sid;
    match req {
        Request::Hello { .. } => (Err(Error::Protocol("second hello".into())), vec![]),
        Request::Scif(r) => crate::personality::scif::client::handle(s, r, fds).await,
        Request::Rsm(r) => crate::personality::rsm::handle(s, r, fds).await,
        Request::Vipl(r) => crate::personality::vipl::handle(s, r, fds).await,
        Request::MapNote { map, target, offset, size, readonly } => {
            s.node.lock().map_note(sid, MapStatus { session: sid, map, target, offset, size, readonly });
            (Ok(Reply::Ok), vec![])
        }
        Request::UnmapNote { map } => {
            s.node.lock().unmap_note(sid, map);
            (Ok(Reply::Ok), vec![])
        }
        Request::Probe { node } => {
            // Three answers, as Dolphin's driver gives them: the node answers; a node some
            // transport reaches (a node of this host, or one of the cluster) does not
            // answer (NODE_NOT_RESPONDING); no transport reaches it at all (NO_SUCH_NODEID).
            if node == s.me() {
                return (Ok(Reply::Probe { reachable: true }), vec![]);
            }
            if s.node.transports().to(node).is_none() {
                return (Err(Error::NoSuchNode), vec![]);
            }
            match tokio::time::timeout(Duration::from_secs(2), s.ask(node, PeerRequest::Probe)).await {
                Ok(Ok(_)) => (Ok(Reply::Probe { reachable: true }), vec![]),
                _ => (Err(Error::NodeNotResponding), vec![]),
            }
        }
        Request::Status => (Ok(Reply::Status(Box::new(status(s)))), vec![]),
        Request::Shutdown => {
            s.node.shutdown.notify_one();
            (Ok(Reply::Ok), vec![])
        }
        other => crate::personality::sisci::handle(s, other, fds).await,
    }
}

fn status(s: &Session) -> remora_proto::NodeStatus {
    snapshot(&s.node)
}

/// What `remora status` shows, and what the metrics are made of.
pub(crate) fn snapshot(node: &Node) -> remora_proto::NodeStatus {
    let up = node.started.elapsed().as_secs();
    let mut st = node.lock().status(std::process::id(), node.config.auto_started, up);
    st.scif = node.scif().counts();
    st.dma_bytes = node.stats.dma_bytes.load(std::sync::atomic::Ordering::Relaxed);
    st.dma_jobs = node.stats.dma_jobs.load(std::sync::atomic::Ordering::Relaxed);
    st.peers = node
        .transports()
        .links()
        .into_iter()
        .map(|l| remora_proto::PeerStatus {
            node: l.node,
            addr: l.addr,
            state: l.state.word().into(),
            rtt_us: l.rtt_us,
            bytes_in: l.bytes_in,
            bytes_out: l.bytes_out,
        })
        .collect();
    st
}
