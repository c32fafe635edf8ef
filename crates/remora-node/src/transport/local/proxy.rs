//! One session's link to the daemon of another node of this host (a *proxy*).
//!
//! A session that reaches node N opens its own connection to N's daemon (role `Peer`) and
//! keeps it for as long as it lives. So N's books for that link are exactly the session's
//! imports: when the session ends, the link closes and N releases them; when N goes away,
//! the link closes and the session's connections to N are lost.
//!
//! Requests may be in flight together (a disconnect awaited in the background, say); each
//! reply goes to its request by id. N serves them in turn, so a request its caller gave up
//! (N held up past the caller's time) is still served when N runs again: what its reply
//! made (a connection to a segment or an interrupt) is then undone by a disconnect the
//! proxy sends right after it, and N keeps nothing of it.

use crate::transport::{Env, Inbound};
use remora_proto::{
    decode, encode, paths, Error, Reply, Request, RequestFrame, Role, ServerMsg, MAX_FRAME, NO_REPLY, VERSION,
};
use remora_sys::async_conn::AsyncConn;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;

type ReplyMsg = (Result<Reply, Error>, Vec<OwnedFd>);

/// A session's link to another node's daemon.
pub struct Proxy {
    conn: Arc<AsyncConn>,
    /// The requests waiting for their reply, by id (the reader hands each its reply).
    pending: Pending,
    /// What a given-up connect made, to be undone (sent by the reader).
    undo: UnboundedSender<Request>,
    next: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
}

/// The requests waiting for their reply, by id, and whether the reader has stopped (no
/// reply can come any more: a request then fails at once, and the transport dials afresh).
type Pending = Arc<Mutex<Waiters>>;

#[derive(Default)]
struct Waiters {
    by_id: HashMap<u64, oneshot::Sender<ReplyMsg>>,
    closed: bool,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The request that undoes what the reply of a request given up made (a SISCI connection
/// to a segment or an interrupt; anything else stays until the session's end).
fn undo_of(msg: &ReplyMsg) -> Option<Request> {
    match &msg.0 {
        Ok(Reply::Connected { conn, .. }) => Some(Request::Disconnect { conn: *conn }),
        Ok(Reply::Interrupt { intr, .. }) => Some(Request::DisconnectInterrupt { intr: *intr }),
        _ => None,
    }
}

/// A request sent and waiting for its reply. Dropped before the reply was taken (the
/// caller gave the request up), it has what the reply made undone when it comes.
struct Waiting<'a> {
    proxy: &'a Proxy,
    id: u64,
    reply: Option<oneshot::Receiver<ReplyMsg>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(mut reply) = self.reply.take() else { return };
        // Under the lock the reader hands replies over with: either it comes later (and
        // finds no one waits), or it came already and is here.
        let came = {
            let mut pending = self.proxy.pending.lock().unwrap_or_else(|p| p.into_inner());
            pending.by_id.remove(&self.id);
            reply.try_recv().ok()
        };
        if let Some(undo) = came.as_ref().and_then(undo_of) {
            let _ = self.proxy.undo.send(undo);
        }
    }
}

async fn exchange(conn: &AsyncConn, req: Request) -> Result<ReplyMsg, Error> {
    let bytes = encode(&RequestFrame { id: 1, req }).map_err(|e| Error::Protocol(e.to_string()))?;
    conn.send(&bytes, &[]).await.map_err(|_| Error::NodeNotResponding)?;
    let mut buf = vec![0u8; MAX_FRAME];
    let (n, fds) = conn.recv(&mut buf).await.map_err(|_| Error::NodeNotResponding)?;
    if n == 0 {
        return Err(Error::NodeNotResponding);
    }
    match decode::<ServerMsg>(&buf[..n]) {
        Ok(ServerMsg::Reply { result, .. }) => Ok((result, fds)),
        Ok(ServerMsg::Event(_) | ServerMsg::Events(_)) => Err(Error::Protocol("event before hello".into())),
        Err(e) => Err(Error::Protocol(e.to_string())),
    }
}

/// Open a connection to node `target`'s daemon and say hello as `role`.
async fn dial(env: &Env, target: u32, role: Role) -> Result<AsyncConn, Error> {
    let path = paths::socket_path(&env.runtime_dir, target);
    if !path.exists() {
        return Err(Error::NoSuchNode);
    }
    // A daemon whose backlog is full would block connect(2): keep it off the runtime thread.
    let fd = tokio::task::spawn_blocking(move || remora_sys::seqpacket::connect(&path, true))
        .await
        .map_err(|_| Error::NoSuchNode)?
        .map_err(|_| Error::NoSuchNode)?;
    let conn = AsyncConn::new(fd).map_err(|e| Error::System(e.to_string()))?;
    let hello = tokio::time::timeout(
        Duration::from_secs(2),
        exchange(&conn, Request::Hello { version: VERSION, role }),
    )
    .await
    .map_err(|_| Error::NodeNotResponding)??;
    match hello.0 {
        Ok(Reply::Hello { node: n }) if n == target => Ok(conn),
        Ok(_) => Err(Error::Protocol(format!("socket of node {target} answered as another node"))),
        Err(e) => Err(e),
    }
}

/// `SCIProbeNode` for another node of this host: a full hello round trip.
pub async fn probe(env: &Env, target: u32) -> bool {
    dial(env, target, Role::Control).await.is_ok()
}

impl Proxy {
    /// Link session `session` to node `target`.
    pub async fn open(
        env: &Env,
        inbound: Arc<dyn Inbound>,
        session: u64,
        target: u32,
    ) -> Result<Proxy, Error> {
        let conn = Arc::new(dial(env, target, Role::Peer { node: env.node }).await?);
        let pending = Pending::default();
        let (undo, undone) = unbounded_channel();
        let link = Link { inbound, session, target, conn: conn.clone(), pending: pending.clone() };
        let reader = tokio::spawn(read_loop(link, undo.clone(), undone));
        Ok(Proxy { conn, pending, undo, next: AtomicU64::new(1), reader })
    }

    /// Send a request and wait for its reply. A request given up meanwhile (the future
    /// dropped) is still served by the peer, which serves the session's requests in turn:
    /// what its reply made (a connection) is then undone, by a disconnect sent after it.
    pub async fn request(&self, req: Request) -> Result<ReplyMsg, Error> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let bytes = encode(&RequestFrame { id, req }).map_err(|e| Error::Protocol(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            // The reader stopped (the peer closed the link, or sent what cannot be read):
            // no reply would ever come.
            if pending.closed {
                return Err(Error::NodeNotResponding);
            }
            pending.by_id.insert(id, tx);
        }
        let mut waiting = Waiting { proxy: self, id, reply: Some(rx) };
        self.conn.send(&bytes, &[]).await.map_err(|_| Error::NodeNotResponding)?;
        let reply = waiting.reply.as_mut().expect("waiting").await;
        waiting.reply = None;
        reply.map_err(|_| Error::NodeNotResponding)
    }
}

/// What the reader of a proxy's socket serves.
struct Link {
    inbound: Arc<dyn Inbound>,
    session: u64,
    target: u32,
    conn: Arc<AsyncConn>,
    pending: Pending,
}

impl Link {
    /// Hand reply `id` to whoever waits for it; the undo of what it made when no one does.
    fn reply(&self, id: u64, msg: ReplyMsg, undo: &UnboundedSender<Request>) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let left = match pending.by_id.remove(&id) {
            Some(waiter) => waiter.send(msg).err(),
            None => Some(msg),
        };
        drop(pending);
        if let Some(req) = left.as_ref().and_then(undo_of) {
            tracing::debug!(node = self.target, id, "a request given up: {req:?}");
            let _ = undo.send(req);
        }
    }
}

async fn read_loop(link: Link, undo: UnboundedSender<Request>, mut undone: UnboundedReceiver<Request>) {
    let Link { inbound, session, target, .. } = &link;
    let (session, target, conn) = (*session, *target, link.conn.clone());
    let mut buf = vec![0u8; MAX_FRAME];
    loop {
        let (n, fds) = tokio::select! {
            r = conn.recv(&mut buf) => match r {
                Ok((n, fds)) if n > 0 => (n, fds),
                _ => break,
            },
            Some(req) = undone.recv() => {
                // No reply: the peer serves it after the request it undoes.
                match encode(&RequestFrame { id: NO_REPLY, req }) {
                    Ok(bytes) if conn.send(&bytes, &[]).await.is_ok() => continue,
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(node = target, "an undo could not be encoded: {e}");
                        continue;
                    }
                }
            }
        };
        match decode::<ServerMsg>(&buf[..n]) {
            Ok(ServerMsg::Reply { id, result }) => link.reply(id, (result, fds), &undo),
            Ok(ServerMsg::Event(ev)) => inbound.event(target, session, ev),
            Ok(ServerMsg::Events(evs)) => {
                for ev in evs {
                    inbound.event(target, session, ev);
                }
            }
            Err(e) => {
                tracing::warn!(node = target, "malformed frame from peer daemon, closing link: {e}");
                break;
            }
        }
    }
    // Whoever still waits learns the link is gone, and so does every later request (the
    // transport then dials afresh); the peer sees the link end, and releases the session's
    // books there.
    {
        let mut pending = link.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.closed = true;
        pending.by_id.clear();
    }
    let _ = rustix::net::shutdown(conn.fd(), rustix::net::Shutdown::Both);
    inbound.route_lost(target, session);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::nobody::Nobody;
    use std::os::fd::AsFd;

    /// A proxy whose reader stopped on a frame it cannot read, its socket still open (the
    /// peer alive, reading requests and never answering them): a later request fails at
    /// once (the transport then dials afresh) instead of waiting for a reply no one reads.
    #[test]
    fn a_request_after_the_reader_stopped_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let listener = remora_sys::seqpacket::listen(&paths::socket_path(dir.path(), 9)).unwrap();
        let peer = std::thread::spawn(move || {
            // The listener does not block: look until the proxy dials.
            let fd = loop {
                match remora_sys::seqpacket::accept(listener.as_fd()) {
                    Ok(fd) => break fd,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(e) => panic!("{e}"),
                }
            };
            remora_sys::seqpacket::set_nonblocking(fd.as_fd(), false).unwrap();
            let mut buf = vec![0u8; MAX_FRAME];
            let _ = remora_sys::seqpacket::recv(fd.as_fd(), &mut buf).unwrap();
            let hello = ServerMsg::Reply { id: 1, result: Ok(Reply::Hello { node: 9 }) };
            remora_sys::seqpacket::send(fd.as_fd(), &encode(&hello).unwrap(), &[]).unwrap();
            remora_sys::seqpacket::send(fd.as_fd(), &[0xff; 7], &[]).unwrap();
            // Read what comes until the proxy's side ends; answer nothing.
            while matches!(remora_sys::seqpacket::recv(fd.as_fd(), &mut buf), Ok((n, _)) if n > 0) {}
        });
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let env = Env {
                node: 4,
                runtime_dir: dir.path().to_path_buf(),
                cluster: None,
                incarnation: 1,
                features: 0,
                peer_features: Default::default(),
                congestion: Default::default(),
            };
            let proxy = Proxy::open(&env, Arc::new(Nobody), 7, 9).await.unwrap();
            // The reader meets the frame it cannot read and stops.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let asked = tokio::time::timeout(Duration::from_secs(10), proxy.request(Request::Status)).await;
            assert!(matches!(asked, Ok(Err(Error::NodeNotResponding))), "{asked:?}");
        });
        peer.join().unwrap();
    }
}
