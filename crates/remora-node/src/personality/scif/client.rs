//! The SCIF requests of an endpoint's session: ports, listeners, connections (same host:
//! through this node's books; another host: booked here and relayed), windows, RMA into a
//! peer on another host, and the pager flows of `scif_mmap` of such a peer's windows.

use super::books::{RelayStart, RemoteEnd};
use super::relay;
use crate::core::ConnectWait;
use crate::session::{is_memfd, Outcome, Session};
use remora_proto::link::{PeerReply, PeerRequest, RangeRef, ScifPeerReply, ScifPeerRequest};
use remora_proto::{Error, Reply, ScifRequest};
use std::os::fd::OwnedFd;

/// Dial a pager flow to node `node`, bound to the windows of its end of SCIF connection
/// `conn`, for the caller's DSM pager.
async fn pager_flow(s: &Session, node: u32, conn: u64) -> Result<OwnedFd, Error> {
    let t = s.node.transports().to(node).cloned().ok_or(Error::NoSuchNode)?;
    let fd = t.pager_flow(node, RangeRef::registered(conn)).await?;
    s.node.stats.pager_flows_dialed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(fd)
}

/// Serve one SCIF request of endpoint session `s`.
/// The SCIF requests of an endpoint's session.
pub(crate) async fn handle(s: &mut Session, req: ScifRequest, mut fds: Vec<OwnedFd>) -> Outcome {
    let sid = s.sid;
    let me = s.me();
    // A connect in the background is a connect whose messages keep to the relays, and so is
    // every connect of a daemon with direct flows off: it asks for none, so the accepting
    // daemon does not wait for a flow that will not be dialed.
    let flow = !matches!(req, ScifRequest::ConnectWithoutFlow { .. }) && super::direct::enabled();
    match req {
        ScifRequest::Bind { port, privileged } => {
            let r = s.node.scif().bind(sid, port, privileged && s.uid == 0);
            (r.map(|port| Reply::ScifPort { port }), vec![])
        }
        ScifRequest::Listen { backlog } => {
            let r = s.node.scif().listen(sid, backlog, fds);
            (r.map(|token| Reply::ScifListening { token }), vec![])
        }
        ScifRequest::Connect { node, port, from_node, from_port }
        | ScifRequest::ConnectWithoutFlow { node, port, from_node, from_port } => {
            if fds.len() != 1 {
                return (Err(Error::IllegalParameter("connect needs a doorbell".into())), vec![]);
            }
            let ringer = fds.remove(0);
            if node != me {
                // A node of this host whose daemon is still starting is waited for a moment.
                return match s.reach(node, None).await.map(|t| t.shares_memory()) {
                    Ok(false) => connect_out(s, node, port, (from_node, from_port), ringer, flow).await,
                    Ok(true) => (Ok(Reply::ScifDialDirect), vec![]),
                    Err(e) => (Err(e), vec![]),
                };
            }
            let queued = s.node.scif().request(sid, port, (from_node, from_port), ringer, None);
            let (id, rx) = match queued {
                Ok(x) => x,
                Err(e) => return (Err(e), vec![]),
            };
            s.node.changed.notify_waiters();
            let answer = tokio::select! {
                a = rx => a.unwrap_or(Err(Error::ConnRefused)),
                _ = s.hangup() => {
                    s.node.scif().withdraw(port, id);
                    return (Err(Error::Protocol("caller hung up".into())), vec![]);
                }
            };
            match answer {
                Ok(a) => (
                    Ok(Reply::ScifConnected {
                        side: 0,
                        remote: false,
                        peer_node: a.peer.0,
                        peer_port: a.peer.1,
                    }),
                    vec![a.region, a.peer_ringer],
                ),
                Err(e) => (Err(e), vec![]),
            }
        }
        ScifRequest::Accept { port, token, sync } => {
            if fds.len() != 1 {
                return (Err(Error::IllegalParameter("accept needs a doorbell".into())), vec![]);
            }
            let ringer = fds.remove(0);
            let attempt = || match s.node.scif().accept(sid, me, port, token, &ringer) {
                Ok(x) => Ok(x),
                Err(Error::Again) if sync => Err(ConnectWait::Unavailable),
                Err(e) => Err(ConnectWait::Failed(e)),
            };
            match s.wait_with(None, Error::Again, attempt).await {
                Ok((region, theirs, from, remote, direct)) => {
                    let mut fds = vec![region, theirs];
                    // The connector's daemon dials the flow once it has our answer: the
                    // socket, when it comes, is the third descriptor.
                    if let Some((conn, rx)) = direct {
                        fds.extend(super::direct::await_flow(&s.node, conn, rx).await);
                    }
                    let reply =
                        Reply::ScifConnected { side: 1, remote, peer_node: from.0, peer_port: from.1 };
                    (Ok(reply), fds)
                }
                Err(e) => (Err(e), vec![]),
            }
        }
        ScifRequest::Register { offset, prot, fixed, pieces } => {
            if fds.is_empty() || !fds.iter().all(is_memfd) {
                return (Err(Error::IllegalParameter("register needs the pieces' memfds".into())), vec![]);
            }
            let mut memfds = Vec::with_capacity(fds.len());
            for fd in fds.drain(..) {
                match remora_sys::Memfd::from_fd(fd) {
                    Ok(m) if m.is_size_sealed() => memfds.push(std::sync::Arc::new(m)),
                    Ok(_) => return (Err(Error::IllegalParameter("memfd not sealed".into())), vec![]),
                    Err(e) => return (Err(Error::System(e.to_string())), vec![]),
                }
            }
            let mut parts = Vec::with_capacity(pieces.len());
            for p in pieces {
                let Some(m) = memfds.get(p.fd as usize) else {
                    return (Err(Error::IllegalParameter("a piece names no memfd".into())), vec![]);
                };
                parts.push((m.clone(), p.memfd_offset, p.len));
            }
            let r = s.node.scif().register(sid, offset, prot, fixed, parts);
            (r.map(|offset| Reply::ScifOffset { offset }), vec![])
        }
        ScifRequest::Unregister { offset, len } => {
            (s.node.scif().unregister(sid, offset, len).map(|_| Reply::Ok), vec![])
        }
        ScifRequest::Windows { peer, from } => match s.node.scif().windows(sid, peer, from) {
            Ok((windows, more, fds)) => (Ok(Reply::ScifWindows { windows, more }), fds),
            Err(e) => (Err(e), vec![]),
        },
        ScifRequest::Close => {
            s.node.scif().close(sid);
            (Ok(Reply::Ok), vec![])
        }
        ScifRequest::RemoteWrite { offset, data } => {
            let far = s.node.scif().far_of(sid);
            let r = match far {
                Ok((node, conn)) => {
                    s.ask(node, PeerRequest::Scif(ScifPeerRequest::Write { conn, offset, data })).await
                }
                Err(e) => Err(e),
            };
            (r.map(|_| Reply::Ok), vec![])
        }
        ScifRequest::RemoteCheck { offset, len, prot } => {
            let far = s.node.scif().far_of(sid);
            let r = match far {
                Ok((node, conn)) => {
                    s.ask(node, PeerRequest::Scif(ScifPeerRequest::Check { conn, offset, len, prot })).await
                }
                Err(e) => Err(e),
            };
            (r.map(|_| Reply::Ok), vec![])
        }
        ScifRequest::RemoteRead { offset, len } => {
            let far = s.node.scif().far_of(sid);
            let r = match far {
                Ok((node, conn)) => s
                    .ask(node, PeerRequest::Scif(ScifPeerRequest::Read { conn, offset, len }))
                    .await
                    .map(|a| a.0),
                Err(e) => Err(e),
            };
            match r {
                Ok(PeerReply::Data(v)) if v.len() == len as usize => (Ok(Reply::Data(v)), vec![]),
                Ok(other) => (Err(Error::Protocol(format!("unexpected answer {other:?}"))), vec![]),
                Err(e) => (Err(e), vec![]),
            }
        }
        ScifRequest::PagerFlow => {
            let far = s.node.scif().far_of(sid);
            match far {
                Ok((node, conn)) => match pager_flow(s, node, conn).await {
                    Ok(fd) => (Ok(Reply::DsmFlow { remote: conn, size: u64::MAX }), vec![fd]),
                    Err(e) => (Err(e), vec![]),
                },
                Err(e) => (Err(e), vec![]),
            }
        }
        ScifRequest::Nodes => (Ok(Reply::ScifNodes(s.reachable_nodes())), vec![]),
        ScifRequest::PeerRmaCounts { until } => {
            let far = s.node.scif().far_of(sid);
            let r = match far {
                Ok((node, conn)) => s
                    .ask(node, PeerRequest::Scif(ScifPeerRequest::RmaCounts { conn, until }))
                    .await
                    .map(|a| a.0),
                Err(e) => Err(e),
            };
            match r {
                Ok(PeerReply::Data(v)) if v.len() == 16 => (Ok(Reply::Data(v)), vec![]),
                Ok(other) => (Err(Error::Protocol(format!("unexpected answer {other:?}"))), vec![]),
                Err(e) => (Err(e), vec![]),
            }
        }
    }
}

/// `scif_connect` to a listener on a node of another host: book the connection here,
/// ask that node over the link, and start the relay once it accepts.
async fn connect_out(
    s: &Session,
    node: u32,
    port: u16,
    from: (u32, u16),
    ringer: OwnedFd,
    flow: bool,
) -> Outcome {
    let sys = |e: std::io::Error| Error::System(e.to_string());
    let made = (|| {
        let (reader, proxy_ringer) = remora_sys::bell::pair().map_err(sys)?;
        let theirs = proxy_ringer.try_clone().map_err(sys)?;
        let keep = proxy_ringer.try_clone().map_err(sys)?;
        let booked = s.node.scif().connect_out(s.sid, ringer, proxy_ringer)?;
        Ok::<_, Error>((reader, theirs, keep, booked))
    })();
    let (reader, theirs, keep, (conn, region, region_fd, rx)) = match made {
        Ok(x) => x,
        Err(e) => return (Err(e), vec![]),
    };
    let peer = s.node.transports().to(node).cloned();
    let Some(peer) = peer else {
        s.node.scif().abort_out(s.sid);
        return (Err(Error::NoSuchNode), vec![]);
    };
    let origin = relay::origin_of(conn);
    let req = PeerRequest::Scif(match flow {
        true => ScifPeerRequest::Connect { port, from, conn },
        false => ScifPeerRequest::ConnectWithoutFlow { port, from, conn },
    });
    let answer = tokio::select! {
        a = peer.request(node, origin, req) => a.map(|a| a.0),
        _ = s.hangup() => Err(Error::Protocol("caller hung up".into())),
    };
    let answer = match answer {
        Ok(PeerReply::Scif(ScifPeerReply::AcceptedDirect { conn, port, token })) => {
            Ok((conn, port, Some(token)))
        }
        Ok(PeerReply::Scif(ScifPeerReply::Accepted { conn, port })) => Ok((conn, port, None)),
        other => Err(other),
    };
    match answer {
        Ok((far, far_port, token)) => {
            let local_ringer = {
                let mut books = s.node.scif();
                books.set_far(conn, node, far);
                books.local_ringer(conn, 0)
            };
            let Some(local_ringer) = local_ringer else {
                return (Err(Error::NotConnected), vec![]);
            };
            let start = RelayStart {
                conn,
                region,
                local: 0,
                ringer: local_ringer,
                proxy_ringer: keep,
                remote: RemoteEnd { node, conn: far, reader, flow: false },
                rx,
            };
            relay::spawn(s.node.clone(), start);
            let mut fds = vec![region_fd, theirs];
            // The messages' own flow, when the acceptor's daemon offers one and it can be
            // dialed; otherwise (and always for the closes) the relays carry them.
            if let Some(token) = token.filter(|_| flow) {
                match peer.direct_flow(node, far, token).await {
                    Ok(fd) => fds.extend(super::direct::keep(&s.node, conn, fd)),
                    Err(e) => tracing::info!(node, "SCIF connection without a direct flow: {e}"),
                }
            }
            let reply = Reply::ScifConnected { side: 0, remote: true, peer_node: node, peer_port: far_port };
            (Ok(reply), fds)
        }
        Err(other) => {
            s.node.scif().abort_out(s.sid);
            peer.session_end(origin);
            let e = match other {
                Err(e) => e,
                Ok(o) => Error::Protocol(format!("unexpected answer {o:?}")),
            };
            (Err(e), vec![])
        }
    }
}
