//! The `local` transport: the other nodes of this host, whose daemons share this node's
//! runtime directory. It shares memory: a peer daemon answers a connect with the region's
//! memfd (and an interrupt connection with the interrupt's page and eventfd), so a map is a
//! plain `mmap` and the DMA engine copies locally. Streaming and pager flows are
//! unsupported (nothing needs them here).
//!
//! Each session of this node that reaches node N holds its own proxy: a `SOCK_SEQPACKET`
//! connection to N's daemon with the `Peer` role, over which requests travel in the client
//! protocol (the peer daemon serves them as it serves its own processes). The proxy closes
//! with the session, so N releases everything the session held there; when N goes away the
//! proxy's socket closes and the session's route to N is lost.
//!
//! | file | object |
//! | --- | --- |
//! | `proxy.rs` | one session's link to one peer daemon |

mod proxy;

use crate::transport::{unsupported, Answer, BoxFuture, Env, Inbound, LinkInfo, Transport};
use proxy::Proxy;
use remora_proto::link::{PeerReply, PeerRequest};
use remora_proto::{paths, Error, Reply, Request, RsmPeerRequest, RsmRequest, ViplPeerRequest, ViplRequest};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The `local` transport of a running node.
pub struct Local {
    env: Env,
    inbound: Arc<dyn Inbound>,
    proxies: Mutex<HashMap<(u64, u32), Arc<Proxy>>>,
}

/// Open the transport (nothing to start: proxies are dialled on demand).
///
/// # Errors
/// None today; the signature is the table's.
pub fn open(env: &Env, inbound: Arc<dyn Inbound>) -> std::io::Result<Arc<dyn Transport>> {
    Ok(Arc::new(Local { env: env.clone(), inbound, proxies: Mutex::new(HashMap::new()) }))
}

/// The client-protocol request that carries `req` to node `node`'s daemon.
fn translate(node: u32, req: PeerRequest) -> Result<Request, Error> {
    Ok(match req {
        PeerRequest::Connect { id, timeout_ms } => Request::Connect { node, id, timeout_ms },
        PeerRequest::Disconnect { conn } => Request::Disconnect { conn },
        PeerRequest::ConnectInterrupt { intno, data, timeout_ms } => {
            Request::ConnectInterrupt { node, intno, data, timeout_ms }
        }
        PeerRequest::DisconnectInterrupt { intr } => Request::DisconnectInterrupt { intr },
        PeerRequest::Trigger { intr, data } => Request::TriggerInterrupt { intr, data },
        PeerRequest::Read { conn, offset, len } => Request::SegRead { conn, offset, len },
        PeerRequest::Write { conn, runs } => Request::SegWrite { conn, runs },
        PeerRequest::Rsm(RsmPeerRequest::Connect { id, perm, creds, signal }) => {
            Request::Rsm(RsmRequest::Connect { node, id, perm, signal, creds: Some(creds) })
        }
        PeerRequest::Vipl(ViplPeerRequest::Request(ask)) => Request::Vipl(ViplRequest::Request { node, ask }),
        PeerRequest::GroupMemory { group } => Request::GroupMemory { group },
        // A node of this host shares the group's memory: it is never a leg.
        PeerRequest::Probe
        | PeerRequest::Scif(_)
        | PeerRequest::ConnectGroup { .. }
        | PeerRequest::GroupMembers { .. } => {
            return Err(unsupported("local", "this request through a proxy"))
        }
    })
}

/// The peer reply a client-protocol reply stands for.
fn untranslate(reply: Reply) -> Result<PeerReply, Error> {
    Ok(match reply {
        Reply::Ok => PeerReply::Ok,
        Reply::Connected { conn, size } => PeerReply::Connected { conn, size },
        // A node of this host: its flows never carry triggers back (no owner named).
        Reply::Interrupt { intr, intno } => PeerReply::Interrupt { intr, intno, owner: 0 },
        Reply::Data(d) => PeerReply::Data(d),
        Reply::RsmConnected { conn, size, signal, writable } => {
            PeerReply::RsmConnected { conn, size, signal, writable }
        }
        Reply::ViplAccepted(info) => PeerReply::ViplAccepted(info),
        other => return Err(Error::Protocol(format!("unexpected answer {other:?}"))),
    })
}

impl Local {
    async fn proxy(&self, origin: u64, node: u32) -> Result<Arc<Proxy>, Error> {
        if let Some(p) = self.proxies.lock().unwrap_or_else(|p| p.into_inner()).get(&(origin, node)) {
            return Ok(p.clone());
        }
        let p = Arc::new(Proxy::open(&self.env, self.inbound.clone(), origin, node).await?);
        let mut proxies = self.proxies.lock().unwrap_or_else(|p| p.into_inner());
        Ok(proxies.entry((origin, node)).or_insert(p).clone())
    }
}

impl Transport for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn shares_memory(&self) -> bool {
        true
    }

    fn reaches(&self, node: u32) -> bool {
        let forced = self.env.cluster.as_ref().is_some_and(|c| c.force_tcp && c.addr(node).is_some());
        node != self.env.node && !forced && paths::socket_path(&self.env.runtime_dir, node).exists()
    }

    fn request(&self, node: u32, origin: u64, req: PeerRequest) -> BoxFuture<'_, Result<Answer, Error>> {
        Box::pin(async move {
            if req == PeerRequest::Probe {
                return match proxy::probe(&self.env, node).await {
                    true => Ok((PeerReply::Ok, Vec::new())),
                    false => Err(Error::NodeNotResponding),
                };
            }
            let req = translate(node, req)?;
            let proxy = self.proxy(origin, node).await?;
            match proxy.request(req).await {
                Ok((result, fds)) => Ok((untranslate(result?)?, fds)),
                Err(e) => {
                    // The link itself failed: the next request dials afresh. Only this
                    // proxy is forgotten, not one another request dialled meanwhile.
                    let mut proxies = self.proxies.lock().unwrap_or_else(|p| p.into_inner());
                    if proxies.get(&(origin, node)).is_some_and(|p| Arc::ptr_eq(p, &proxy)) {
                        proxies.remove(&(origin, node));
                    }
                    Err(e)
                }
            }
        })
    }

    fn session_end(&self, origin: u64) {
        self.proxies.lock().unwrap_or_else(|p| p.into_inner()).retain(|(o, _), _| *o != origin);
    }

    fn links(&self) -> Vec<LinkInfo> {
        Vec::new()
    }
}
