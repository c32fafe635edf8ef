//! One session's link to the daemon of another node of this host (a *proxy*).
//!
//! A session that reaches node N opens its own connection to N's daemon (role `Peer`) and
//! keeps it for as long as it lives. So N's books for that link are exactly the session's
//! imports: when the session ends, the link closes and N releases them; when N goes away,
//! the link closes and the session's connections to N are lost.

use crate::transport::{Env, Inbound};
use remora_proto::{
    decode, encode, paths, Error, Reply, Request, RequestFrame, Role, ServerMsg, MAX_FRAME, VERSION,
};
use remora_sys::async_conn::AsyncConn;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

type ReplyMsg = (Result<Reply, Error>, Vec<OwnedFd>);

/// A session's link to another node's daemon.
pub struct Proxy {
    conn: Arc<AsyncConn>,
    replies: tokio::sync::Mutex<UnboundedReceiver<(u64, ReplyMsg)>>,
    next: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.reader.abort();
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
        let (tx, rx) = unbounded_channel();
        let reader = tokio::spawn(read_loop(inbound, session, target, conn.clone(), tx));
        Ok(Proxy { conn, replies: tokio::sync::Mutex::new(rx), next: AtomicU64::new(1), reader })
    }

    /// Send a request and wait for its reply.
    pub async fn request(&self, req: Request) -> Result<ReplyMsg, Error> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let bytes = encode(&RequestFrame { id, req }).map_err(|e| Error::Protocol(e.to_string()))?;
        let mut replies = self.replies.lock().await;
        self.conn.send(&bytes, &[]).await.map_err(|_| Error::NodeNotResponding)?;
        loop {
            match replies.recv().await {
                Some((rid, msg)) if rid == id => return Ok(msg),
                Some(_) => continue,
                None => return Err(Error::NodeNotResponding),
            }
        }
    }
}

async fn read_loop(
    inbound: Arc<dyn Inbound>,
    session: u64,
    target: u32,
    conn: Arc<AsyncConn>,
    replies: UnboundedSender<(u64, ReplyMsg)>,
) {
    let mut buf = vec![0u8; MAX_FRAME];
    loop {
        let (n, fds) = match conn.recv(&mut buf).await {
            Ok((n, fds)) if n > 0 => (n, fds),
            _ => break,
        };
        match decode::<ServerMsg>(&buf[..n]) {
            Ok(ServerMsg::Reply { id, result }) => {
                let _ = replies.send((id, (result, fds)));
            }
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
    inbound.route_lost(target, session);
}
