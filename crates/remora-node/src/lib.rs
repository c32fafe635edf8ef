//! The Remora node daemon: one `remorad` plays one node (the adapter plus its driver).
//!
//! It owns the memory of every segment of its node (sealed memfds), hands it to processes
//! over SCM_RIGHTS, keeps the books of every session (segments, connections, maps) and
//! releases everything a process held as soon as its socket closes. Nodes of one host find
//! each other in the runtime directory; a connection to a segment of another node of this
//! host goes through that node's daemon, which hands the memfd over, so the map is zero-copy.
//!
//! ```no_run
//! let cfg = remora_node::Config::new(4, std::path::PathBuf::from("/tmp/remora-doc"));
//! remora_node::run(cfg).unwrap();
//! ```

/// The cluster file (read and checked by `remora_config`).
pub use remora_config::cluster;
pub mod core;
/// The bodies of the fuzz targets (`fuzz/`) and their seeds; not an API.
#[doc(hidden)]
pub mod fuzzing;
mod inbound;
pub mod metrics;
pub mod personality;
mod serve;
mod session;
pub mod transport;

use crate::core::Registry;
use remora_proto::paths;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How a daemon runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The node id.
    pub node: u32,
    /// The runtime directory (socket, lock).
    pub runtime_dir: PathBuf,
    /// Exit after this long without client or peer sessions (`None`: never).
    pub idle_exit: Option<Duration>,
    /// Started by the library rather than by a person.
    pub auto_started: bool,
    /// The cluster: other hosts' nodes and the secret (`None`: this host only).
    pub cluster: Option<cluster::Cluster>,
    /// Where to serve Prometheus metrics (`None`: nowhere).
    pub metrics: Option<std::net::SocketAddr>,
}

impl Config {
    /// A daemon for `node` in `runtime_dir` that never exits by itself.
    pub fn new(node: u32, runtime_dir: PathBuf) -> Config {
        Config { node, runtime_dir, idle_exit: None, auto_started: false, cluster: None, metrics: None }
    }
}

/// Counters of what the node moved since it started (read by the metrics endpoint).
#[derive(Debug, Default)]
pub struct Stats {
    /// DMA jobs (one post each) that completed.
    pub dma_jobs: std::sync::atomic::AtomicU64,
    /// DMA jobs that ended in error or were aborted.
    pub dma_failed: std::sync::atomic::AtomicU64,
    /// Bytes the DMA engine moved.
    pub dma_bytes: std::sync::atomic::AtomicU64,
    /// Sessions opened since the start.
    pub sessions_opened: std::sync::atomic::AtomicU64,
    /// SCIF RMA stores into this node's registered windows served for peers on other hosts
    /// (pager-flow frames the sender waits for, and link requests).
    pub scif_rma_writes: std::sync::atomic::AtomicU64,
    /// Bytes of [`Stats::scif_rma_writes`].
    pub scif_rma_written_bytes: std::sync::atomic::AtomicU64,
    /// Reads of this node's registered SCIF windows served for peers on other hosts (RMA
    /// reads, and the pages `scif_mmap` maps of those windows fetch over the same flow).
    pub scif_rma_reads: std::sync::atomic::AtomicU64,
    /// Bytes of [`Stats::scif_rma_reads`].
    pub scif_rma_read_bytes: std::sync::atomic::AtomicU64,
    /// Pages that DSM pagers of other hosts fetched from this node's segments.
    pub dsm_page_fetches: std::sync::atomic::AtomicU64,
    /// Bytes of [`Stats::dsm_page_fetches`].
    pub dsm_fetched_bytes: std::sync::atomic::AtomicU64,
    /// Runs of changed bytes that DSM pagers of other hosts flushed into this node's
    /// memory (segments, and SCIF windows mapped with `scif_mmap`).
    pub dsm_flush_runs: std::sync::atomic::AtomicU64,
    /// Bytes of [`Stats::dsm_flush_runs`].
    pub dsm_flushed_bytes: std::sync::atomic::AtomicU64,
    /// Pager flows this node dialed to other hosts for its processes.
    pub pager_flows_dialed: std::sync::atomic::AtomicU64,
    /// Pager flows of other hosts bound to this node's memory.
    pub pager_flows_served: std::sync::atomic::AtomicU64,
}

impl Stats {
    /// Add one operation of `bytes` bytes to the pair `ops`, `total`.
    pub(crate) fn count(
        ops: &std::sync::atomic::AtomicU64,
        total: &std::sync::atomic::AtomicU64,
        bytes: u64,
    ) {
        ops.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        total.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Errors that stop a daemon from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another daemon already plays this node.
    #[error("node {0} already has a daemon")]
    AlreadyRunning(u32),
    /// A system call failed.
    #[error("{0}: {1}")]
    Io(&'static str, std::io::Error),
}

/// The shared state of a running daemon.
pub struct Node {
    /// The configuration.
    pub config: Config,
    /// The books.
    pub reg: Mutex<Registry>,
    /// Rung on every change that a waiting connect might care about.
    pub changed: Notify,
    /// Rung to stop the daemon.
    pub shutdown: Notify,
    started: Instant,
    last_active: Mutex<Instant>,
    /// Changes at every start: peers use it to tell a restart from a pause.
    pub incarnation: u64,
    /// The books of the SCIF personality.
    pub scif: Mutex<personality::scif::Books>,
    /// The books of the RSM personality.
    pub rsm: Mutex<personality::rsm::Books>,
    /// The VIPL personality's connection books.
    pub vipl: Mutex<personality::vipl::Books>,
    /// Counters of the node's traffic, for the metrics.
    pub stats: Stats,
    /// The transports, opened when the daemon's runtime starts.
    transports: std::sync::OnceLock<transport::Transports>,
    /// The feature word each peer said in its last link handshake (the transports note it;
    /// the bits' meanings are the node's, [`FEATURE_INTR_PAIR`]).
    peer_features: Arc<transport::features::PeerFeatures>,
}

/// Bit of a node's feature word (said to every peer in the link handshake,
/// `transport::Env::features`): its cluster file allows the interrupt pairing
/// (`intr_pair`, [`Node::intr_pair`]).
pub const FEATURE_INTR_PAIR: u32 = 1 << 0;

impl Node {
    /// Whether a process pair's plain interrupt triggers may share one TCP connection both
    /// ways (the cluster file's `intr_pair`, on unless it says false; `inbound/back_flow.rs`).
    pub fn intr_pair(&self) -> bool {
        self.config.cluster.as_ref().is_some_and(|c| c.intr_pair)
    }

    /// Whether the pairing is used with `node`: this node's cluster file allows it
    /// ([`Node::intr_pair`]) and so did `node`'s in its last link handshake (a lower node
    /// that does not read what comes back on its flows, or a higher one that never sends
    /// back, would otherwise lose or never use it).
    pub fn intr_pair_with(&self, node: u32) -> bool {
        self.intr_pair() && self.peer_features.of(node) & FEATURE_INTR_PAIR != 0
    }

    /// This node's feature word, said to every peer in the link handshake.
    pub fn features(&self) -> u32 {
        if self.intr_pair() {
            FEATURE_INTR_PAIR
        } else {
            0
        }
    }

    /// The books, locked.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic while holding the lock would poison it; the books are still consistent
        // at every statement boundary, so keep serving.
        self.reg.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The SCIF personality's books, locked (never while the core's books are locked).
    pub fn scif(&self) -> std::sync::MutexGuard<'_, personality::scif::Books> {
        self.scif.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The RSM personality's books, locked (never while the core's books are locked).
    pub fn rsm(&self) -> std::sync::MutexGuard<'_, personality::rsm::Books> {
        self.rsm.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The VIPL personality's books, locked (never while the core's books are locked).
    pub fn vipl(&self) -> std::sync::MutexGuard<'_, personality::vipl::Books> {
        self.vipl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The transports to other nodes (none before the runtime started them).
    pub fn transports(&self) -> &transport::Transports {
        static NONE: std::sync::OnceLock<transport::Transports> = std::sync::OnceLock::new();
        self.transports.get().unwrap_or_else(|| NONE.get_or_init(transport::Transports::none))
    }

    /// Release everything session `sid` held, in every personality and in the core.
    pub fn end_session(&self, sid: u64) {
        personality::end_session(self, sid);
        self.lock().end_session(sid);
    }
}

impl Node {
    /// A node's books for `config`: no runtime, socket nor transports yet (`run` adds them;
    /// the unit tests of what the daemon's threads do with the books use them bare).
    fn with_config(config: Config) -> Arc<Node> {
        Arc::new(Node {
            reg: Mutex::new(Registry::new(config.node)),
            config,
            changed: Notify::new(),
            shutdown: Notify::new(),
            started: Instant::now(),
            last_active: Mutex::new(Instant::now()),
            incarnation: new_incarnation(),
            scif: Mutex::new(Default::default()),
            rsm: Mutex::new(Default::default()),
            vipl: Mutex::new(Default::default()),
            stats: Stats::default(),
            transports: std::sync::OnceLock::new(),
            peer_features: Arc::default(),
        })
    }

    /// A node with its books only, for unit tests.
    #[cfg(test)]
    pub(crate) fn bare(node: u32) -> Arc<Node> {
        Node::with_config(Config::new(node, PathBuf::from("/nonexistent")))
    }
}

/// A fresh number for this daemon start: peers tell a restart from a pause by it, and
/// handles differ from one start to the next.
pub fn new_incarnation() -> u64 {
    let mut n = [0u8; 8];
    let _ = rustix::rand::getrandom(&mut n, rustix::rand::GetRandomFlags::empty());
    u64::from_le_bytes(n) | 1
}

/// Run a daemon until it is shut down, idles out or gets SIGTERM/SIGINT.
///
/// # Errors
/// [`StartError`] when the directory, lock or socket cannot be set up.
pub fn run(config: Config) -> Result<(), StartError> {
    paths::ensure_dir(&config.runtime_dir).map_err(|e| StartError::Io("runtime directory", e))?;
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(paths::lock_path(&config.runtime_dir, config.node))
        .map_err(|e| StartError::Io("lock file", e))?;
    if rustix::fs::flock(lock_file.as_fd(), rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        return Err(StartError::AlreadyRunning(config.node));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StartError::Io("runtime", e))?;
    // SIGTERM and SIGINT are taken before the socket exists: whoever finds the socket (and
    // signals the pid it reads from it) reaches a daemon that will clean up. Taken later,
    // a signal in between killed the daemon with the socket and the lock file left behind.
    let signals = {
        let _in_runtime = rt.enter();
        let take = |kind| tokio::signal::unix::signal(kind).map_err(|e| StartError::Io("signal", e));
        Signals {
            term: take(tokio::signal::unix::SignalKind::terminate())?,
            int: take(tokio::signal::unix::SignalKind::interrupt())?,
        }
    };
    let sock = paths::socket_path(&config.runtime_dir, config.node);
    let _ = std::fs::remove_file(&sock);
    let node = Node::with_config(config);
    // The runtime's thread (this one) is a hop of every request, SCIF message relayed to
    // another host and interrupt triggered across hosts; its work per wake is short. At the
    // ordinary weight a wake waited behind the programs that keep a small machine's cores
    // busy (pollers, compilers): 20-40 µs per hop, two or three hops per message. It never
    // spins; the threads it starts run at the ordinary weight; `REMORA_URGENT=0` leaves it
    // at the ordinary weight.
    remora_sys::sched::urgent_event_loop();
    let result = rt.block_on(serve(node.clone(), &sock, signals));
    // A clean exit (shutdown, idle, SIGTERM, SIGINT) leaves nothing behind: the socket and
    // the lock file go (the lock is still held while its file is removed).
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(paths::lock_path(&node.config.runtime_dir, node.config.node));
    drop(lock_file);
    tracing::info!(node = node.config.node, "node daemon down");
    result
}

/// A node whose runtime directory is shared by every user, as `/tmp` is (world-writable
/// with the sticky bit), accepts every local user on its socket: users of one host then
/// share its nodes, and the personalities decide who may do what (RSM's access lists
/// check each importer's user and group). A private runtime directory keeps the node to
/// its owner, whatever the socket's mode.
fn open_to_all_if_shared(dir: &std::path::Path, sock: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let shared = std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o1002 == 0o1002);
    if shared {
        if let Err(e) = std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o666)) {
            tracing::warn!("cannot open the socket to every user of the shared runtime directory: {e}");
        }
    }
}

/// The signals that end a daemon cleanly.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

/// Open the transports, then listen at `sock`: the socket appears only once the node can
/// serve (a client or `remorad --detach` that sees it finds a node that is up, and a node
/// whose transports fail to open leaves no socket behind to wait at), and serve until the
/// end.
async fn serve(node: Arc<Node>, sock: &std::path::Path, signals: Signals) -> Result<(), StartError> {
    let env = transport::Env {
        node: node.config.node,
        runtime_dir: node.config.runtime_dir.clone(),
        cluster: node.config.cluster.clone(),
        incarnation: node.incarnation,
        features: node.features(),
        peer_features: node.peer_features.clone(),
        congestion: remora_config::Config::get().tcp_congestion.clone(),
    };
    let inbound = Arc::new(inbound::NodeInbound::new(Arc::downgrade(&node)));
    let transports =
        transport::Transports::open(&env, inbound).map_err(|e| StartError::Io("transports", e))?;
    let _ = node.transports.set(transports);
    if let Some(addr) = node.config.metrics {
        tokio::spawn(metrics::serve(node.clone(), addr));
    }
    let listener = remora_sys::seqpacket::listen(sock).map_err(|e| StartError::Io("listen", e))?;
    open_to_all_if_shared(&node.config.runtime_dir, sock);
    tracing::info!(node = node.config.node, socket = %sock.display(), "node daemon up");
    let listener = remora_sys::async_conn::register(listener).map_err(|e| StartError::Io("listener", e))?;
    let Signals { mut term, mut int } = signals;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            r = listener.readable() => {
                let Ok(mut guard) = r else { continue };
                match guard.try_io(|l| remora_sys::seqpacket::accept(l.get_ref().as_fd())) {
                    Ok(Ok(fd)) => {
                        let node = node.clone();
                        tokio::spawn(async move { serve::run(node, fd).await });
                    }
                    Ok(Err(e)) => {
                        // Out of descriptors, say: the listener stays readable, so wait a
                        // little rather than spin (and log) on it.
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(_) => {}
                }
            }
            _ = node.shutdown.notified() => { tracing::info!("shutdown requested"); break }
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = tick.tick() => {
                if let Some(idle) = node.config.idle_exit {
                    let active = node.lock().active_sessions();
                    let mut last = node.last_active.lock().unwrap_or_else(|p| p.into_inner());
                    if active > 0 {
                        *last = Instant::now();
                    } else if last.elapsed() >= idle {
                        tracing::info!("no clients for {:?}: exiting", idle);
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Encode and send a daemon message on a connection.
pub(crate) async fn send_msg(
    conn: &remora_sys::async_conn::AsyncConn,
    msg: &remora_proto::ServerMsg,
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> std::io::Result<()> {
    let bytes =
        remora_proto::encode(msg).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    conn.send(&bytes, fds).await
}
