//! The `tcp` transport: nodes of other hosts, reached at their cluster-file address.
//!
//! Every pair of nodes keeps authenticated TCP connections (see `remora_proto::link`): a
//! control flow served by tokio tasks (`link.rs`), and
//! [`BULK_LANES`](remora_proto::link::BULK_LANES) bulk flows (lanes), each served by one
//! plain thread per direction that moves DMA payload straight between the socket and the
//! mappings (`bulk.rs`; a sending thread keeps to one lane). DSM pagers get flows of their
//! own (`pager.rs`). Every connection starts with the same authenticated handshake
//! (`handshake.rs`); frames are read and
//! written by `framing.rs`. `peer.rs` is the state kept per peer node.
//!
//! | file | object |
//! | --- | --- |
//! | `handshake.rs` | challenge-response authentication of every flow |
//! | `admission.rs` | places for handshakes under way: strangers' and the cluster's addresses' |
//! | `framing.rs` | control frames and bulk headers on the wire |
//! | `peer.rs` | one peer: link state, pending requests, sessions it holds for us |
//! | `notices.rs` | requests given up and session ends, told again until the peer notes them |
//! | `link.rs` | dialing, accepting, the control flow and its heartbeats |
//! | `bulk.rs` | the bulk flows (lanes) and streaming reads and writes |
//! | `bulk_tx.rs` | the bulk flow's sending side: frames written by their sender when idle |
//! | `pager.rs` | pager flows: dialing, binding, serving |
//! | `direct.rs` | direct flows between two processes: dialing, binding, the hand-over |
//! | `pool.rs` | flows dialed and authenticated ahead of need, bound when taken |
//! | `fuzzing.rs` | the decoders above driven with bytes, for the fuzz targets (`fuzz/`) |

pub(in crate::transport) mod admission;
mod bulk;
#[cfg(test)]
mod bulk_tests;
mod bulk_tx;
pub(in crate::transport) mod direct;
mod follow;
pub(in crate::transport) mod framing;
#[doc(hidden)]
pub mod fuzzing;
mod gather;
pub(in crate::transport) mod handshake;
pub(in crate::transport) mod link;
mod notices;
pub(in crate::transport) mod pager;
pub(in crate::transport) mod peer;
pub(in crate::transport) mod pool;

use crate::transport::{unsupported, Answer, BoxFuture, Env, Inbound, LinkInfo, Pending, Transport};
use peer::TcpPeer;
use remora_proto::link::{LinkMsg, PeerRequest, RangeRef};
use remora_proto::{Error, Event};
use remora_sys::Mapping;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

/// How many pager-flow threads of this process are held to the core their frames come in
/// on (`follow.rs`): the metric `remora_flow_threads_held`. Infallible.
pub fn flow_threads_held() -> u32 {
    follow::held_total()
}

/// Cap the retransmission back-off of a connection of this node (control, bulk lane, pager
/// or direct flow, either end: [`remora_sys::flow::cap_backoff`], at a tenth of the links'
/// budget, [`GIVE_UP_PERIODS`](crate::transport::liveness::GIVE_UP_PERIODS) heartbeats of
/// the cluster's): after a cable cut what was sent meanwhile goes again within that of the
/// cable's return, so the requests, transfers and RMAs that waited on it resume then, not
/// at TCP's next doubling retry; and TCP gives the connection up no sooner than the link's
/// budget. A kernel without the option (before 6.15) keeps its own back-off; that is said
/// once.
pub(in crate::transport) fn cap_backoff(s: &impl std::os::fd::AsFd, env: &Env) {
    static SAID: std::sync::Once = std::sync::Once::new();
    let heartbeat = env.cluster.as_ref().map(|c| c.heartbeat).unwrap_or(Duration::from_millis(200));
    let budget = heartbeat * crate::transport::liveness::GIVE_UP_PERIODS;
    if let Err(e) = remora_sys::flow::cap_backoff(s.as_fd(), budget) {
        SAID.call_once(|| {
            tracing::info!("TCP's retransmission back-off cannot be capped ({e}): after a cable cut, links resume at TCP's next retry")
        });
    }
}

/// Set the congestion control a connection of this node with node `peer` runs (control,
/// bulk lane, pager or direct flow, either end, once its handshake said the peer's kernel):
/// `env.congestion` for that link ([`remora_config::TcpCongestion::for_link`]), nothing for
/// the machine's default. On a link within one machine (loopback, or network namespaces
/// joined by veth) `auto` sets [`remora_config::LOCAL_CONGESTION`]: a pacing algorithm
/// such as BBR holds a long-lived stream there to the rate it measured before (Remora's
/// 16 MiB transfers on loopback swung between 2 and 7 GB/s from run to run with BBR; a raw
/// stream ran about 8 with CUBIC). An algorithm the kernel lacks or refuses leaves the default; that is said
/// once.
pub(in crate::transport) fn tune_congestion(s: &impl std::os::fd::AsFd, env: &Env, peer: u32) {
    static SAID: std::sync::Once = std::sync::Once::new();
    let Some(name) = env.congestion.for_link(env.peer_features.same_kernel(peer)) else { return };
    if let Err(e) = remora_sys::flow::set_congestion(s.as_fd(), name) {
        SAID.call_once(|| {
            tracing::info!("TCP congestion control {name:?} cannot be set ({e}): links keep the machine's")
        });
    }
}

/// A flow's stream as this node reads it: a frame's payload of `min` bytes or more is read
/// polling while its segments come, up to `REMORA_SPIN_US` between two
/// ([`remora_sys::flow::Eager`]); a reader waiting for a frame sleeps at once.
pub(super) fn eager<S>(s: S, min: usize) -> remora_sys::flow::Eager<S> {
    remora_sys::flow::Eager::new(s, remora_config::Config::get().spin, min)
}

/// The `tcp` transport of a running node.
pub struct Tcp {
    env: Arc<Env>,
    peers: HashMap<u32, Arc<TcpPeer>>,
    /// The flows dialed ahead of need, per peer (`pool.rs`).
    pools: HashMap<u32, Arc<pool::Pool>>,
    /// The listener's places for handshakes under way (`admission.rs`).
    admission: Arc<admission::Admission>,
}

/// Open the transport: bind the cluster listener and start one task per node of the
/// cluster file on another host. Without a cluster file it reaches nothing.
///
/// # Errors
/// This node is missing from the cluster file, or its address cannot be bound.
pub fn open(env: &Env, inbound: Arc<dyn Inbound>) -> std::io::Result<Arc<dyn Transport>> {
    let env = Arc::new(env.clone());
    let Some(cluster) = env.cluster.clone() else {
        return Ok(Arc::new(Tcp {
            env,
            peers: HashMap::new(),
            pools: HashMap::new(),
            admission: Arc::default(),
        }));
    };
    let me = cluster
        .addr(env.node)
        .cloned()
        .ok_or_else(|| std::io::Error::other("this node is not in the cluster file"))?;
    let listener = std::net::TcpListener::bind((me.host.as_str(), me.port))?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    tracing::info!("listening for peers on {}:{}", me.host, me.port);
    let mut peers = HashMap::new();
    let mut starts = Vec::new();
    for n in &cluster.nodes {
        // Nodes the ofi transport (opened before this one) carries are not ours.
        if n.id == env.node || crate::transport::carrier::over_fabric(&env, n.id) {
            continue;
        }
        let (peer, rx) = TcpPeer::with_accepts(inbound.clone(), n.id, format!("{}:{}", n.host, n.port));
        peers.insert(n.id, peer.clone());
        starts.push((peer, rx));
    }
    let pools = peers.iter().map(|(n, p)| (*n, pool::Pool::new(env.clone(), p.clone()))).collect();
    let admission = admission::Admission::new(&cluster);
    let tcp = Arc::new(Tcp { env: env.clone(), peers, pools, admission });
    for (peer, rx) in starts {
        tokio::spawn(link::run_peer(env.clone(), peer, rx));
    }
    link::accept_loop(listener, tcp.clone(), "peer connection", link::accept_one);
    Ok(tcp)
}

impl Tcp {
    fn peer(&self, node: u32) -> Result<&Arc<TcpPeer>, Error> {
        self.peers.get(&node).ok_or(Error::NoSuchNode)
    }

    fn pool(&self, node: u32) -> Result<Arc<pool::Pool>, Error> {
        self.pools.get(&node).cloned().ok_or(Error::NoSuchNode)
    }
}

impl Transport for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn shares_memory(&self) -> bool {
        false
    }

    fn reaches(&self, node: u32) -> bool {
        self.peers.contains_key(&node)
    }

    fn request(&self, node: u32, origin: u64, req: PeerRequest) -> BoxFuture<'_, Result<Answer, Error>> {
        Box::pin(async move {
            let peer = self.peer(node)?.clone();
            peer.request(origin, req).await.map(|r| (r, Vec::new()))
        })
    }

    fn post(
        &self,
        node: u32,
        origin: u64,
        req: PeerRequest,
        replaces: Option<u64>,
    ) -> Result<crate::transport::Posted, PeerRequest> {
        match self.peers.get(&node) {
            Some(peer) => peer.post(origin, req, replaces),
            None => Err(req),
        }
    }

    fn unwatch(&self, node: u32, id: u64) {
        if let Some(peer) = self.peers.get(&node) {
            peer.unwatch(id);
        }
    }

    fn session_end(&self, origin: u64) {
        for p in self.peers.values() {
            p.session_end(origin);
        }
    }

    fn links(&self) -> Vec<LinkInfo> {
        self.peers.values().map(|p| p.info()).collect()
    }

    fn link_state(&self, node: u32) -> Option<crate::transport::LinkState> {
        self.peers.get(&node).map(|p| p.state())
    }

    fn send_event(&self, node: u32, origin: u64, event: Event) {
        if let Some(p) = self.peers.get(&node) {
            p.send(LinkMsg::Event { origin, event });
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
        match self.peer(node)?.bulk_write(conn, offset, src, src_off, len) {
            true => Ok(()),
            false => Err(Error::NodeNotResponding),
        }
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
        match self.peer(node)?.bulk_read(conn, offset, dest, dest_off, len) {
            true => Ok(()),
            false => Err(Error::NodeNotResponding),
        }
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
        let peer = self.peer(node)?.clone();
        let waits = match write {
            true => peer.bulk_write_start(conn, offset, mem, mem_off, len),
            false => peer.bulk_read_start(conn, offset, mem, mem_off, len),
        };
        let waits = waits.ok_or(Error::NodeNotResponding)?;
        Ok(Box::new(move || match peer.all_answered(waits) {
            true => Ok(()),
            false => Err(Error::NodeNotResponding),
        }))
    }

    fn pager_flow(&self, node: u32, target: RangeRef) -> BoxFuture<'_, Result<OwnedFd, Error>> {
        Box::pin(async move {
            if self.env.cluster.is_none() {
                return Err(unsupported("tcp", "pager flows without a cluster"));
            }
            pager::dial_flow(self.pool(node)?, target).await
        })
    }

    fn pager_flows(
        &self,
        node: u32,
        targets: Vec<RangeRef>,
        watch: Option<(u64, u64)>,
    ) -> BoxFuture<'_, Result<OwnedFd, Error>> {
        Box::pin(async move {
            if self.env.cluster.is_none() {
                return Err(unsupported("tcp", "pager flows without a cluster"));
            }
            pager::dial_flows(self.pool(node)?, targets, watch).await
        })
    }

    fn direct_flow(&self, node: u32, key: u64, token: u64) -> BoxFuture<'_, Result<OwnedFd, Error>> {
        Box::pin(async move {
            if self.env.cluster.is_none() {
                return Err(unsupported("tcp", "direct flows without a cluster"));
            }
            direct::dial_flow(self.pool(node)?, key, token).await
        })
    }
}

#[cfg(test)]
mod congestion_tests {
    //! A link's sockets run the congestion control `REMORA_TCP_CONGESTION` chose for it.
    use super::*;
    use remora_config::{TcpCongestion, LOCAL_CONGESTION};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// A connected socket, its congestion control set to `reno` first (so a change shows
    /// whatever the machine's default is), after [`tune_congestion`] with `choice`, for a
    /// peer on this kernel or not.
    fn tuned(choice: TcpCongestion, same_kernel: bool) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        remora_sys::flow::set_congestion(s.as_fd(), "reno").unwrap();
        let mut env = fuzzing::loopback_env(4, b"congestion-test-secret-012345678", 0);
        env.congestion = choice;
        env.peer_features.note(8, 0, same_kernel);
        tune_congestion(&s, &env, 8);
        remora_sys::flow::congestion(s.as_fd()).unwrap()
    }

    #[test]
    fn auto_sets_the_local_algorithm_only_within_one_machine() {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        if let Err(e) = remora_sys::flow::set_congestion(probe.as_fd(), LOCAL_CONGESTION) {
            eprintln!("skipped: this kernel will not set {LOCAL_CONGESTION} here ({e})");
            return;
        }
        assert_eq!(tuned(TcpCongestion::Auto, true), LOCAL_CONGESTION);
        assert_eq!(tuned(TcpCongestion::Auto, false), "reno", "another machine keeps the socket's");
        assert_eq!(tuned(TcpCongestion::System, true), "reno");
        assert_eq!(tuned(TcpCongestion::Named("reno".into()), false), "reno");
        assert_eq!(tuned(TcpCongestion::Named(LOCAL_CONGESTION.into()), false), LOCAL_CONGESTION);
        // An algorithm the kernel lacks leaves the socket as it was.
        assert_eq!(tuned(TcpCongestion::Named("no_such_cc".into()), true), "reno");
    }
}
