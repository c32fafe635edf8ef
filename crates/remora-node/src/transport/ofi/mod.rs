//! The `ofi` transport: nodes of other hosts over libfabric (OFI), so that one line of the
//! cluster file moves a cluster from TCP to an RDMA fabric (verbs, EFA, CXI, ...); proven
//! here over libfabric's `tcp` (`tcp;ofi_rxm`) and `shm` providers.
//!
//! A node whose cluster-file transport is `ofi+<provider>` opens one reliable-datagram
//! endpoint of that provider (`fabric.rs`) and keeps a link to every node of another host
//! that names the same transport (`link.rs`): an authenticated TCP bootstrap (the tcp
//! transport's handshake, on the node's `ofi_port`) exchanges the endpoint names and the
//! tokens every fabric message must carry (`wire.rs`), after which requests, replies,
//! events, heartbeats and session ends are fabric messages, and DMA / RMA transfers are
//! `fi_write` / `fi_read` straight into the peer's memory, within the range its node checked
//! for the transfer, in the registration of the connection's memory made once at its first
//! transfer and closed with the connection (`rma.rs`). Link state, requests in flight and
//! session ends are kept by the same peer type and liveness machine as the tcp transport's.
//!
//! | file | object |
//! | --- | --- |
//! | `fabric.rs` | the endpoint, routes by token, local registrations, serving small transfers |
//! | `send.rs` | sends and RMA pieces while routed, the link's patience, answers waiting for room (a lost message takes its link down) |
//! | `progress.rs` | the progress thread: completions, messages to their links, failed receives |
//! | `wire.rs` | the bootstrap frame and the fabric messages |
//! | `link.rs` | bootstrap (dial, accept, exchange) and the link's loop |
//! | `rma.rs` | streaming reads and writes as RMA, and the ranges opened for peers |
//! | `window.rs` | the bytes of RMA a link keeps in flight, so that its control messages never wait behind more |
//! | `fuzzing.rs` | the message decoders driven with bytes, for the fuzz target `ofi_messages` |
//!
//! Pager flows (a DSM pager's, or SCIF RMA's, own connection to the home node) stay TCP
//! streams, dialed to the peer's bootstrap port with the same handshake and served as the
//! tcp transport serves them: the process holds the flow as a socket, which a fabric
//! endpoint of the daemon cannot be. With an RDMA NIC the next step is the process's own
//! endpoint (`fi_read`/`fi_write` of pages straight from the pager).
//!
//! A node whose provider is missing says so and refuses to start, unless the cluster file
//! allows `fallback = "tcp"`: then the tcp transport carries its links. A fallback is for
//! the whole cluster: a node that fell back is not reached by nodes still on ofi, and both
//! sides say so by name (`link.rs`: the bootstrap port refuses while the tcp port answers;
//! [`carrier::refusal`]: the tcp transport refuses its connection in the handshake, the
//! reason sent to the dialer). Nodes whose cluster-file
//! transports differ (one `tcp`, one `ofi+tcp`, or two providers) link over tcp: an ofi node
//! keeps its tcp transport for every node that does not name its own transport.

mod fabric;
#[doc(hidden)]
pub mod fuzzing;
mod link;
mod rma;
mod window;
mod wire;

use crate::transport::carrier;
use crate::transport::tcp::peer::TcpPeer;
use crate::transport::{Answer, BoxFuture, Env, Inbound, LinkInfo, Pending, Transport};
use fabric::Fabric;
use remora_config::cluster::LinkKind;
use remora_proto::link::{LinkMsg, PeerRequest, RangeRef};
use remora_proto::{Error, Event};
use remora_sys::Mapping;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

/// One peer reached over the fabric.
pub(super) struct OfiLink {
    /// Its liveness, requests in flight and sessions (the tcp transport's peer type).
    peer: Arc<TcpPeer>,
    /// Where its messages go and the token they carry, while the link is up.
    dest: Mutex<Option<(u64, u64)>>,
    /// Our transfers waiting for its answers, by tag.
    rma_wait: fabric::Waiters,
    /// The registrations its open transfers reach, by its tag.
    served: fabric::Served,
    /// Its fall back to tcp was told (`link.rs`), since the link was last up.
    told_fallback: std::sync::atomic::AtomicBool,
    /// Pager and direct flows dialed ahead of need (`tcp/pool.rs`).
    pool: Arc<crate::transport::tcp::pool::Pool>,
    /// The bytes of RMA in flight to it (`window.rs`).
    window: Arc<window::Window>,
    /// Its RMA requests that came while the link came up, queued for the link's task and
    /// not yet served there (`fabric.rs`; set to none at each link-up).
    early: Arc<std::sync::atomic::AtomicUsize>,
}

/// The `ofi` transport of a running node.
pub struct Ofi {
    env: Arc<Env>,
    fabric: Arc<Fabric>,
    links: HashMap<u32, Arc<OfiLink>>,
    /// The bootstrap listener's places for handshakes under way (as the tcp transport's).
    admission: Arc<crate::transport::tcp::admission::Admission>,
}

/// The libfabric provider `env`'s node is configured for, if any.
fn provider(env: &Env) -> Option<String> {
    match env.cluster.as_ref()?.kind(env.node)? {
        LinkKind::Ofi(p) => Some(p),
        LinkKind::Tcp => None,
    }
}

/// Open the transport: the endpoint of the configured provider, the bootstrap listener, a
/// link task per peer that names the same transport. Without such a configuration it
/// reaches nothing.
///
/// # Errors
/// The provider cannot open an endpoint here and the cluster file does not allow the
/// fallback to tcp; the bootstrap port cannot be bound.
pub fn open(env: &Env, inbound: Arc<dyn Inbound>) -> std::io::Result<Arc<dyn Transport>> {
    let Some(prov) = provider(env) else { return Ok(Arc::new(Nothing)) };
    let cluster = env.cluster.clone().expect("a provider comes from the cluster file");
    let kind = cluster.kind(env.node).map(|k| k.name()).unwrap_or_default();
    let me = cluster.addr(env.node).cloned().expect("the node is in the cluster file");
    let fabric = match Fabric::open(&prov, Some(&me.host)) {
        Ok(f) => f,
        Err(e) if cluster.fallback_tcp => {
            let same: Vec<String> = cluster
                .nodes
                .iter()
                .filter(|n| n.id != env.node && cluster.kind(n.id) == cluster.kind(env.node))
                .map(|n| n.id.to_string())
                .collect();
            tracing::warn!(
                "transport {kind} is not available here ({e}): falling back to tcp; nodes that \
                 name {kind} too ({}) reach this one over {kind} only and will not link with it \
                 unless they fall back as well (a fallback is for the whole cluster)",
                same.join(", ")
            );
            return Ok(Arc::new(Nothing));
        }
        Err(e) => {
            return Err(std::io::Error::other(format!(
                "transport {kind} is not available here: {e} (the cluster file may allow fallback = \"tcp\")"
            )))
        }
    };
    let port = cluster.ofi_port(env.node).ok_or_else(|| std::io::Error::other("no ofi_port"))?;
    let listener = std::net::TcpListener::bind((me.host.as_str(), port))?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    tracing::info!("ofi transport: provider {}, bootstrap on {}:{port}", fabric.ep.provider(), me.host);
    #[cfg(test)]
    {
        *fabric.label.lock().unwrap_or_else(|p| p.into_inner()) = format!("{}:{port}", me.host);
    }
    carrier::fabric_opened(env);
    let env = Arc::new(env.clone());
    let mut links = HashMap::new();
    let mut starts = Vec::new();
    for n in &cluster.nodes {
        if !carrier::over_fabric(&env, n.id) {
            continue;
        }
        let Some(p) = cluster.ofi_port(n.id) else { continue };
        let (peer, rx) = TcpPeer::with_accepts(inbound.clone(), n.id, format!("{}:{p}", n.host));
        let pool = crate::transport::tcp::pool::Pool::new(env.clone(), peer.clone());
        let link = Arc::new(OfiLink {
            peer,
            pool,
            dest: Mutex::new(None),
            rma_wait: Arc::new(Mutex::new(HashMap::new())),
            served: fabric::Served::default(),
            told_fallback: std::sync::atomic::AtomicBool::new(false),
            window: Arc::new(window::Window::new(window::WINDOW)),
            early: Arc::default(),
        });
        links.insert(n.id, link.clone());
        starts.push((link, rx));
    }
    let admission = crate::transport::tcp::admission::Admission::new(&cluster);
    let ofi = Arc::new(Ofi { env, fabric, links, admission });
    for (link, rx) in starts {
        tokio::spawn(link::run_link(ofi.clone(), link, rx));
    }
    crate::transport::tcp::link::accept_loop(
        listener,
        ofi.clone(),
        "ofi bootstrap connection",
        link::accept_one,
    );
    Ok(ofi)
}

impl Ofi {
    fn link(&self, node: u32) -> Result<&Arc<OfiLink>, Error> {
        self.links.get(&node).ok_or(Error::NoSuchNode)
    }
}

impl Transport for Ofi {
    fn name(&self) -> &'static str {
        "ofi"
    }

    fn shares_memory(&self) -> bool {
        false
    }

    fn reaches(&self, node: u32) -> bool {
        self.links.contains_key(&node)
    }

    fn request(&self, node: u32, origin: u64, req: PeerRequest) -> BoxFuture<'_, Result<Answer, Error>> {
        Box::pin(async move {
            let peer = self.link(node)?.peer.clone();
            peer.request(origin, req).await.map(|r| (r, Vec::new()))
        })
    }

    /// Posts go as control messages do (fabric messages, sent in order: `FI_ORDER_SAS`).
    fn post(
        &self,
        node: u32,
        origin: u64,
        req: PeerRequest,
        replaces: Option<u64>,
    ) -> Result<crate::transport::Posted, PeerRequest> {
        match self.links.get(&node) {
            Some(l) => l.peer.post(origin, req, replaces),
            None => Err(req),
        }
    }

    fn unwatch(&self, node: u32, id: u64) {
        if let Some(l) = self.links.get(&node) {
            l.peer.unwatch(id);
        }
    }

    fn session_end(&self, origin: u64) {
        for l in self.links.values() {
            l.peer.session_end(origin);
        }
    }

    fn links(&self) -> Vec<LinkInfo> {
        self.links.values().map(|l| LinkInfo { rma_peak: l.window.peak() as u64, ..l.peer.info() }).collect()
    }

    fn link_state(&self, node: u32) -> Option<crate::transport::LinkState> {
        self.links.get(&node).map(|l| l.peer.state())
    }

    fn send_event(&self, node: u32, origin: u64, event: Event) {
        if let Some(l) = self.links.get(&node) {
            l.peer.send(LinkMsg::Event { origin, event });
        }
    }

    fn write_range(
        &self,
        node: u32,
        conn: u64,
        offset: u64,
        src: &Arc<Mapping>,
        src_off: usize,
        len: usize,
    ) -> Result<(), Error> {
        self.start_range(node, conn, offset, src, src_off, len, true)?()
    }

    fn read_range(
        &self,
        node: u32,
        conn: u64,
        offset: u64,
        dest: &Arc<Mapping>,
        dest_off: usize,
        len: usize,
    ) -> Result<(), Error> {
        self.start_range(node, conn, offset, dest, dest_off, len, false)?()
    }

    fn start_range(
        &self,
        node: u32,
        conn: u64,
        offset: u64,
        mem: &Arc<Mapping>,
        mem_off: usize,
        len: usize,
        write: bool,
    ) -> Result<Pending, Error> {
        let link = self.link(node)?.clone();
        rma::start(&self.fabric, &link, conn, offset, mem, mem_off, len, write)
    }

    fn pager_flow(&self, node: u32, target: RangeRef) -> BoxFuture<'_, Result<OwnedFd, Error>> {
        Box::pin(async move {
            let pool = self.link(node)?.pool.clone();
            crate::transport::tcp::pager::dial_flow(pool, target).await
        })
    }

    fn pager_flows(
        &self,
        node: u32,
        targets: Vec<RangeRef>,
        watch: Option<(u64, u64)>,
    ) -> BoxFuture<'_, Result<OwnedFd, Error>> {
        Box::pin(async move {
            let pool = self.link(node)?.pool.clone();
            crate::transport::tcp::pager::dial_flows(pool, targets, watch).await
        })
    }

    /// Over the same TCP stream a pager flow takes (the process has no fabric endpoint).
    fn direct_flow(&self, node: u32, key: u64, token: u64) -> BoxFuture<'_, Result<OwnedFd, Error>> {
        Box::pin(async move {
            let pool = self.link(node)?.pool.clone();
            crate::transport::tcp::direct::dial_flow(pool, key, token).await
        })
    }
}

/// The transport of a node not configured for ofi (or fallen back to tcp): reaches nothing.
struct Nothing;

impl Transport for Nothing {
    fn name(&self) -> &'static str {
        "ofi"
    }
    fn shares_memory(&self) -> bool {
        false
    }
    fn reaches(&self, _node: u32) -> bool {
        false
    }
    fn request(&self, _node: u32, _origin: u64, _req: PeerRequest) -> BoxFuture<'_, Result<Answer, Error>> {
        Box::pin(async { Err(Error::NoSuchNode) })
    }
    fn session_end(&self, _origin: u64) {}
    fn links(&self) -> Vec<LinkInfo> {
        Vec::new()
    }
}
