//! Clusters that mix transports (issue 20): a node on `tcp` and a node on `ofi+tcp` link over
//! tcp (the ofi node answers on its TCP port too), with requests and transfers intact both
//! ways; a node that fell back to tcp while its peer still runs `ofi+tcp` is not linked, and
//! both sides say why, naming the node and the transports. Skips with a message where
//! libfabric is absent.

use remora_node::transport::{BoxFuture, Env, Inbound, LinkState, PeerMemory, Transports};
use remora_proto::link::{PeerReply, PeerRequest, RangeRef};
use remora_proto::{Error, Event};
use remora_sys::{AsFd, Mapping, Memfd};
use remora_testkit::{free_port, pattern};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const HANDLE: u64 = 7;
const MEM: usize = 4 << 20;

/// Everything the daemons of this test binary log (warnings and up).
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Sink;

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        LOG.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = tracing_subscriber::fmt()
            .with_writer(|| Sink)
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .try_init();
    });
}

fn logged(what: &str) -> bool {
    String::from_utf8_lossy(&LOG.lock().unwrap_or_else(|p| p.into_inner())).contains(what)
}

fn wait(what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mapping(len: usize) -> Arc<Mapping> {
    let fd = Memfd::create("mixed", len as u64).unwrap();
    Arc::new(Mapping::new(fd.as_fd(), 0, len, Default::default()).unwrap())
}

/// A node that answers probes and serves one memory as connection [`HANDLE`]; it keeps
/// every link change its transports told it.
struct Node(Arc<Mapping>, Arc<Mutex<Vec<(u32, LinkState)>>>);

struct Window(Arc<Mapping>);

impl PeerMemory for Window {
    fn resolve(&self, offset: u64, len: u64, _write: bool) -> Option<Vec<(Arc<Mapping>, usize, usize)>> {
        let end = offset.checked_add(len)?;
        (end <= self.0.len() as u64).then(|| vec![(self.0.clone(), offset as usize, len as usize)])
    }
}

impl Inbound for Node {
    fn request(&self, _: u32, _: u64, req: PeerRequest) -> BoxFuture<'static, Result<PeerReply, Error>> {
        Box::pin(async move {
            match req {
                PeerRequest::Probe => Ok(PeerReply::Ok),
                _ => Err(Error::NoSuchSegment),
            }
        })
    }
    fn session_end(&self, _: u32, _: u64) {}
    fn event(&self, _: u32, _: u64, _: Event) {}
    fn link_changed(&self, node: u32, state: LinkState) {
        self.1.lock().unwrap_or_else(|p| p.into_inner()).push((node, state));
    }
    fn route_lost(&self, _: u32, _: u64) {}
    fn memory(&self, _: u32, target: RangeRef) -> Option<Arc<dyn PeerMemory>> {
        (target == RangeRef::connection(HANDLE))
            .then(|| Arc::new(Window(self.0.clone())) as Arc<dyn PeerMemory>)
    }
}

/// One node: its runtime, transports and memory.
struct Host {
    rt: tokio::runtime::Runtime,
    transports: Transports,
    mem: Arc<Mapping>,
    node: u32,
    /// The link changes the node was told, in order.
    told: Arc<Mutex<Vec<(u32, LinkState)>>>,
}

impl Host {
    fn open(node: u32, dir: &std::path::Path, cluster: &str) -> Host {
        let env = Env {
            node,
            runtime_dir: dir.join(format!("n{node}")),
            cluster: Some(remora_node::cluster::Cluster::parse(cluster, dir).unwrap()),
            incarnation: remora_node::new_incarnation(),
            features: 0,
            peer_features: Default::default(),
            congestion: Default::default(),
        };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let mem = mapping(MEM);
        let told = Arc::new(Mutex::new(Vec::new()));
        let transports = {
            let _g = rt.enter();
            Transports::open(&env, Arc::new(Node(mem.clone(), told.clone()))).unwrap()
        };
        Host { rt, transports, mem, node, told }
    }

    /// The changes of its link to `node` the node was told.
    fn told_of(&self, node: u32) -> Vec<LinkState> {
        let told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        told.iter().filter(|(n, _)| *n == node).map(|(_, s)| *s).collect()
    }

    fn transport_to(&self, node: u32) -> &'static str {
        self.transports.to(node).map(|t| t.name()).unwrap_or("none")
    }

    fn probe(&self, node: u32) -> Result<PeerReply, Error> {
        let t = self.transports.to(node).cloned().ok_or(Error::NoSuchNode)?;
        self.rt
            .block_on(async move {
                tokio::time::timeout(Duration::from_secs(2), t.request(node, 1, PeerRequest::Probe)).await
            })
            .unwrap_or(Err(Error::Timeout))
            .map(|a| a.0)
    }

    /// 1 MiB written into and read back from `peer`'s memory, every byte checked.
    fn transfer(&self, peer: &Host) {
        let t = self.transports.to(peer.node).cloned().unwrap();
        let (local, back) = (mapping(1 << 20), mapping(1 << 20));
        let data = pattern(1 << 20, u64::from(self.node));
        local.write(0, &data).unwrap();
        t.write_range(peer.node, HANDLE, 4096, &local, 0, 1 << 20).unwrap();
        let mut seen = vec![0u8; 1 << 20];
        peer.mem.read(4096, &mut seen).unwrap();
        assert!(seen == data, "bytes written from node {} arrive intact", self.node);
        t.read_range(peer.node, HANDLE, 4096, &back, 0, 1 << 20).unwrap();
        back.read(0, &mut seen).unwrap();
        assert!(seen == data, "bytes read by node {} arrive intact", self.node);
    }
}

/// Nodes 4 and 8 on loopback; `global` and `per_node` are lines of the cluster file.
fn cluster(ports: [u16; 4], global: &str, per_node: [&str; 2]) -> String {
    let [p4, o4, p8, o8] = ports;
    format!(
        "secret = \"mixed-transports-secret-0123\"\nheartbeat_ms = 50\n{global}\n\
         [[node]]\nid = 4\nhost = \"127.0.0.1\"\nport = {p4}\nofi_port = {o4}\n{}\n\
         [[node]]\nid = 8\nhost = \"127.0.0.1\"\nport = {p8}\nofi_port = {o8}\n{}\n",
        per_node[0], per_node[1]
    )
}

fn ports() -> [u16; 4] {
    [free_port(), free_port(), free_port(), free_port()]
}

fn libfabric() -> bool {
    let here = remora_ofi_sys::installed();
    if !here {
        eprintln!("SKIP mixed transports: libfabric is not installed (apt-get install libfabric-dev)");
    }
    here
}

#[test]
fn a_tcp_node_and_an_ofi_node_link_over_tcp() {
    if !libfabric() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = cluster(ports(), "", ["transport = \"tcp\"", "transport = \"ofi+tcp\""]);
    let (a, b) = (Host::open(4, dir.path(), &text), Host::open(8, dir.path(), &text));
    assert_eq!(a.transport_to(8), "tcp", "the tcp node reaches the ofi node over tcp");
    assert_eq!(b.transport_to(4), "tcp", "the ofi node answers the tcp node on tcp");
    wait("the link to come up", || a.transports.link_state(8) == Some(LinkState::Up));
    wait("the link to come up", || b.transports.link_state(4) == Some(LinkState::Up));
    assert_eq!(a.probe(8), Ok(PeerReply::Ok));
    assert_eq!(b.probe(4), Ok(PeerReply::Ok));
    a.transfer(&b);
    b.transfer(&a);
}

#[test]
fn two_providers_link_over_tcp() {
    if !libfabric() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = cluster(ports(), "", ["transport = \"ofi+tcp\"", "transport = \"ofi+shm\""]);
    let shm_before = shm_files();
    let (a, b) = (Host::open(4, dir.path(), &text), Host::open(8, dir.path(), &text));
    assert_eq!((a.transport_to(8), b.transport_to(4)), ("tcp", "tcp"));
    wait("the link to come up", || a.transports.link_state(8) == Some(LinkState::Up));
    assert_eq!(a.probe(8), Ok(PeerReply::Ok));
    a.transfer(&b);
    // Dropped transports close their endpoints: the shm provider's region goes with node 8's.
    drop((a, b));
    let left: Vec<String> = shm_files().into_iter().filter(|f| !shm_before.contains(f)).collect();
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

/// The names in `/dev/shm`.
fn shm_files() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// `fallen`'s provider is missing and it fell back to tcp; `other` runs `ofi+tcp`. The two
/// cluster files name the same transport for both (each node reads its own copy: only the
/// provider's presence differs, which one process can only stage with two names).
fn fallen_back(fallen: u32, other: u32) {
    let dir = tempfile::tempdir().unwrap();
    let ports = ports();
    let missing = cluster(ports, "transport = \"ofi+no_such_provider\"\nfallback = \"tcp\"", ["", ""]);
    let here = cluster(ports, "transport = \"ofi+tcp\"", ["", ""]);
    let f = Host::open(fallen, dir.path(), &missing);
    let o = Host::open(other, dir.path(), &here);
    assert_eq!(f.transport_to(other), "tcp", "the node that fell back uses tcp");
    assert_eq!(o.transport_to(fallen), "ofi", "the other still reaches it over ofi only");
    // The one that dials says why the link does not come up, naming the node and transports.
    let told = match fallen < other {
        // The fallen node dials the other's tcp port, which refuses it in the handshake:
        // the listener says so, and the dialer is told why (it never saw the link up).
        true => format!(
            "handshake with the peer failed: node {fallen} dialed over tcp, but the cluster file \
             names ofi+tcp for it"
        ),
        // The other dials the fallen node's ofi bootstrap port, which nobody binds.
        false => format!("node {fallen} answers on its tcp port"),
    };
    wait(&format!("the log to say: {told}"), || logged(&told));
    assert!(logged("fallen back to tcp"), "the reason is given");
    assert_ne!(o.transports.link_state(fallen), Some(LinkState::Up), "no link over ofi");
    assert_ne!(f.transports.link_state(other), Some(LinkState::Up), "no link over tcp");
    // Not even for a moment: a link that came up for each refused dial would tell the
    // node's processes their peer went not operational and operational again, over and over.
    assert_eq!(f.told_of(other), [], "the node that fell back was told of no link change");
    assert_eq!(o.told_of(fallen), [], "nor was the other");
    // No request gets through (a request waits for a link that is down a while: the probe
    // gives up after 2 s).
    assert!(o.probe(fallen).is_err(), "no request gets through");
    assert!(f.probe(other).is_err(), "either way");
}

#[test]
fn a_node_that_fell_back_is_refused_by_name_when_it_dials() {
    if !libfabric() {
        return;
    }
    capture_logs();
    fallen_back(4, 8);
}

#[test]
fn a_node_that_fell_back_is_named_when_it_is_dialed() {
    if !libfabric() {
        return;
    }
    capture_logs();
    fallen_back(8, 4);
}
