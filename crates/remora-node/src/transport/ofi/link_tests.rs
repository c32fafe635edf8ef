//! The link's bring-up: a peer that is slow to finish its side loses nothing sent to it.

use crate::transport::nobody::Nobody;
use crate::transport::{Env, LinkState};
use remora_proto::link::PeerRequest;
use remora_proto::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Links (by their peer's bootstrap address) that stop once, after their bootstrap
/// exchange and before they are up, until the test opens their gate: the other side is up
/// and sending meanwhile.
static GATES: Mutex<Vec<(String, Arc<Notify>)>> = Mutex::new(Vec::new());

/// The bring-up's hook: hold the link to `peer` at its gate if a test asked for it (a
/// minute at most: a failing test must not hang).
pub(super) async fn pause_after_boot(peer: &str) {
    let gate = {
        let mut p = GATES.lock().unwrap_or_else(|p| p.into_inner());
        let at = p.iter().position(|(a, _)| a == peer);
        at.map(|i| p.remove(i).1)
    };
    if let Some(g) = gate {
        let _ = tokio::time::timeout(Duration::from_secs(60), g.notified()).await;
    }
}

/// Links a test acts on, by their peer's bootstrap address, and how many times it did.
pub(in crate::transport::ofi) struct Counted(Mutex<Vec<(String, usize)>>);

impl Counted {
    /// The link's hook: whether to act on this link to `peer` (counted).
    pub(in crate::transport::ofi) fn hit(&self, peer: &str) -> bool {
        let mut r = self.0.lock().unwrap_or_else(|p| p.into_inner());
        r.iter_mut().find(|(a, _)| a == peer).map(|(_, n)| *n += 1).is_some()
    }

    /// How many times it acted on links to `peer`.
    fn count(&self, peer: &str) -> usize {
        self.0.lock().unwrap().iter().find(|(a, _)| a == peer).map_or(0, |(_, n)| *n)
    }

    /// Act on links to each of `peers` from now on.
    fn on(&self, peers: &[&str]) {
        self.0.lock().unwrap().extend(peers.iter().map(|a| (a.to_string(), 0)));
    }

    /// No more on links to `peers`.
    fn off(&self, peers: &[&str]) {
        self.0.lock().unwrap().retain(|(a, _)| !peers.contains(&a.as_str()));
    }
}

/// Links whose fabric sends the writer refuses (one count a link-up: it stops at the first).
pub(super) static REFUSED: Counted = Counted(Mutex::new(Vec::new()));

/// Links that end as soon as they are up, as if their bootstrap connection closed.
pub(super) static CLOSING: Counted = Counted(Mutex::new(Vec::new()));

/// Links whose RMA pieces the endpoint refuses (`rma.rs`).
pub(in crate::transport::ofi) static RMA_REFUSED: Counted = Counted(Mutex::new(Vec::new()));

/// Links whose RMA pieces find the queue full (`FI_EAGAIN`, `rma.rs`), at every try.
pub(in crate::transport::ofi) static RMA_FULL: Counted = Counted(Mutex::new(Vec::new()));

fn env(node: u32, dir: &std::path::Path, [p4, o4, p8, o8]: [u16; 4]) -> Env {
    // A heartbeat long enough that node 4 does not take node 8's pause for silence.
    let text = format!(
        "secret = \"link-tests-secret-0123456789\"\nheartbeat_ms = 3000\ntransport = \"ofi+tcp\"\n\
         [[node]]\nid = 4\nhost = \"127.0.0.1\"\nport = {p4}\nofi_port = {o4}\n\
         [[node]]\nid = 8\nhost = \"127.0.0.1\"\nport = {p8}\nofi_port = {o8}\n"
    );
    Env {
        node,
        runtime_dir: dir.join(format!("n{node}")),
        cluster: Some(crate::cluster::Cluster::parse(&text, dir).unwrap()),
        incarnation: crate::new_incarnation(),
        features: 0,
        peer_features: Default::default(),
        congestion: Default::default(),
    }
}

type Nodes =
    (tokio::runtime::Runtime, Arc<dyn crate::transport::Transport>, Arc<dyn crate::transport::Transport>);

/// A runtime, and nodes 8 (`far`) and 4 (`near`) over ofi on loopback at `ports` (the
/// test's hooks set before).
fn nodes(dir: &std::path::Path, ports: [u16; 4]) -> Nodes {
    nodes_with(dir, ports, Arc::new(Nobody))
}

/// As [`nodes`], with node 8's inbound.
fn nodes_with(dir: &std::path::Path, ports: [u16; 4], far_in: Arc<dyn crate::transport::Inbound>) -> Nodes {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let _g = rt.enter();
    let far = super::super::open(&env(8, dir, ports), far_in).unwrap();
    let near = super::super::open(&env(4, dir, ports), Arc::new(Nobody)).unwrap();
    drop(_g);
    (rt, far, near)
}

/// A directory for the nodes' files and four free ports, or `None` (said) where libfabric
/// is not installed.
fn ready() -> Option<(tempfile::TempDir, [u16; 4])> {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return None;
    }
    Some((tempfile::tempdir().unwrap(), [(); 4].map(|_| remora_testkit::free_port())))
}

/// Node 8 reads node 4's bootstrap frame and then stalls (a loaded machine) before its side
/// of the link is up; node 4 has read node 8's frame, is up and asks at once. The request
/// was dropped at node 8 for want of its token's route, and node 4 waited for ever (a user's
/// call hung): now the token is routed before it is handed out, and the request waits at
/// node 8 until its side is up.
#[test]
fn a_request_sent_before_the_peer_is_up_is_answered() {
    let Some((dir, ports)) = ready() else { return };
    let gate = Arc::new(Notify::new());
    GATES.lock().unwrap().push((format!("127.0.0.1:{}", ports[1]), gate.clone()));
    let (rt, far, near) = nodes(dir.path(), ports);
    let t = Instant::now();
    while near.link_state(8) != Some(LinkState::Up) {
        assert!(t.elapsed() < Duration::from_secs(30), "node 4's link never came up");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_ne!(far.link_state(4), Some(LinkState::Up), "node 8 is held at its gate (the window under test)");
    // Bytes in and out of a node's link to another.
    let io = |t: &Arc<dyn crate::transport::Transport>, node| {
        t.links().into_iter().find(|l| l.node == node).map_or((0, 0), |l| (l.bytes_in, l.bytes_out))
    };
    let before = io(&near, 8).1;
    let n = near.clone();
    let ask = rt.spawn(async move {
        tokio::time::timeout(Duration::from_secs(30), n.request(8, 1, PeerRequest::Probe)).await
    });
    // The request left node 4 and reached node 8, whose side of the link is not up yet.
    let t = Instant::now();
    loop {
        let out = io(&near, 8).1;
        if out > before && io(&far, 4).0 >= out {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "node 4's request never reached node 8's link (dropped for want of its token's route?)"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_ne!(far.link_state(4), Some(LinkState::Up), "node 8 is still held at its gate");
    gate.notify_one();
    let asked = rt.block_on(ask).unwrap();
    // Nobody refuses every request: the refusal is node 8's answer.
    assert!(matches!(asked, Ok(Err(Error::NoSuchSegment))), "node 8 answers the request: {asked:?}");
    assert_eq!(far.link_state(4), Some(LinkState::Up));
    drop((far, near));
}

/// Node 4 redials a link that fails (`count`: how many of its links failed so far) ever
/// more slowly: at most 20 links in 3 s (50 + 100 + 200 + 400 + 800 + 1000 ms of back-off:
/// about seven, fewer under load; without it, dozens to hundreds).
fn assert_redialled_with_back_off(count: impl Fn() -> usize) {
    let t = Instant::now();
    while count() < 2 {
        assert!(t.elapsed() < Duration::from_secs(30), "node 4 never redialled its failing link");
        std::thread::sleep(Duration::from_millis(5));
    }
    let first = count();
    std::thread::sleep(Duration::from_secs(3));
    let links = count() - first;
    assert!(links <= 20, "node 4 redialled {links} times in 3 s: no back-off");
}

/// A fabric that refuses every send while the bootstrap ports answer: each link-up fails at
/// its first message. The dialer redialled at once and the back-off started over at every
/// bootstrap, a loop of millisecond-long links (hundreds a second, each told to user code
/// as down, then up); now a link that failed before it worked is redialled ever more slowly.
#[test]
fn a_link_whose_sends_fail_is_redialled_with_back_off() {
    let Some((dir, ports)) = ready() else { return };
    let (to8, to4) = (format!("127.0.0.1:{}", ports[3]), format!("127.0.0.1:{}", ports[1]));
    REFUSED.on(&[&to8, &to4]);
    let (rt, far, near) = nodes(dir.path(), ports);
    assert_redialled_with_back_off(|| REFUSED.count(&to8));
    // The fabric works again: the link comes up and serves requests.
    REFUSED.off(&[&to8, &to4]);
    both_up(&far, &near);
    let ask =
        async { tokio::time::timeout(Duration::from_secs(30), near.request(8, 1, PeerRequest::Probe)).await };
    let asked = rt.block_on(ask);
    assert!(matches!(asked, Ok(Err(Error::NoSuchSegment))), "node 8 answers the request: {asked:?}");
    drop((far, near));
}

/// Wait until both nodes' links are up (half a minute at most).
fn both_up(far: &Arc<dyn crate::transport::Transport>, near: &Arc<dyn crate::transport::Transport>) {
    let t = Instant::now();
    while near.link_state(8) != Some(LinkState::Up) || far.link_state(4) != Some(LinkState::Up) {
        assert!(t.elapsed() < Duration::from_secs(30), "the link never came up");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Lose `n` messages node `from` (by its bootstrap address) sends carrying `what`.
fn lose(from: &str, what: &'static str, n: usize) {
    super::super::fabric::tests::LOSE.0.lock().unwrap().push((from.to_string(), what, n));
}

/// How many of the losses a test asked for are still to come.
fn unlost(from: &str, what: &str) -> usize {
    let lose = super::super::fabric::tests::LOSE.0.lock().unwrap();
    lose.iter().filter(|(a, w, _)| a == from && *w == what).map(|(_, _, n)| n).sum()
}

/// Node 8's answer to a request is lost after it left (the provider completes its send with
/// an error, as when the connection under it breaks). It was logged at debug and the link
/// stayed up: node 4's caller waited for ever (the heartbeats still came). Now the lost
/// message takes the link down as a broken TCP connection does: the request fails with the
/// transport's error, and the link comes back and serves.
#[test]
fn an_answer_lost_on_the_fabric_takes_the_link_down_and_its_request_fails() {
    let Some((dir, ports)) = ready() else { return };
    let (rt, far, near) = nodes(dir.path(), ports);
    both_up(&far, &near);
    let at8 = format!("127.0.0.1:{}", ports[3]);
    lose(&at8, "Reply {", 1);
    let ask = || async {
        tokio::time::timeout(Duration::from_secs(30), near.request(8, 1, PeerRequest::Probe)).await
    };
    let asked = rt.block_on(ask());
    assert_eq!(unlost(&at8, "Reply {"), 0, "node 8's answer was lost");
    assert!(matches!(asked, Ok(Err(Error::NodeNotResponding))), "the request fails with its link: {asked:?}");
    both_up(&far, &near);
    let asked = rt.block_on(ask());
    assert!(matches!(asked, Ok(Err(Error::NoSuchSegment))), "node 8 answers again: {asked:?}");
    drop((far, near));
}

/// Sessions of node 4 whose ends node 8 was told, by origin; node 8's link states, as
/// they changed; and its memory of every connection (`None`: none).
#[derive(Default)]
struct Ends(Mutex<Vec<u64>>, Mutex<Vec<LinkState>>, Option<Arc<remora_sys::Mapping>>);

/// All of a connection's memory: one mapping.
struct Whole(Arc<remora_sys::Mapping>);

impl crate::transport::PeerMemory for Whole {
    fn resolve(
        &self,
        offset: u64,
        len: u64,
        _: bool,
    ) -> Option<Vec<(Arc<remora_sys::Mapping>, usize, usize)>> {
        let end = offset.checked_add(len)?;
        (end <= self.0.len() as u64).then(|| vec![(self.0.clone(), offset as usize, len as usize)])
    }
}

/// A mapping of `len` bytes of fresh memory.
fn mapping(len: usize) -> Arc<remora_sys::Mapping> {
    use remora_sys::AsFd;
    let fd = remora_sys::Memfd::create("ofi-link-tests", len as u64).unwrap();
    Arc::new(remora_sys::Mapping::new(fd.as_fd(), 0, len, Default::default()).unwrap())
}

impl crate::transport::Inbound for Ends {
    fn request(
        &self,
        _: u32,
        _: u64,
        _: PeerRequest,
    ) -> crate::transport::BoxFuture<'static, Result<remora_proto::link::PeerReply, Error>> {
        Box::pin(async { Err(Error::NoSuchSegment) })
    }
    fn session_end(&self, _: u32, origin: u64) {
        self.0.lock().unwrap().push(origin);
    }
    fn event(&self, _: u32, _: u64, _: remora_proto::Event) {}
    fn link_changed(&self, _: u32, to: LinkState) {
        self.1.lock().unwrap().push(to);
    }
    fn route_lost(&self, _: u32, _: u64) {}
    fn memory(
        &self,
        _: u32,
        _: remora_proto::link::RangeRef,
    ) -> Option<Arc<dyn crate::transport::PeerMemory>> {
        self.2.clone().map(|m| Arc::new(Whole(m)) as Arc<dyn crate::transport::PeerMemory>)
    }
}

/// The end of a session that held something at node 8 is lost after it left node 4. It
/// vanished (the link stayed up, so it was never told again): node 8 kept what the session
/// held. Now the link goes down and the end is told again on the next connection.
#[test]
fn a_session_end_lost_on_the_fabric_is_told_again_on_the_next_connection() {
    let Some((dir, ports)) = ready() else { return };
    let ends = Arc::new(Ends::default());
    let (rt, far, near) = nodes_with(dir.path(), ports, ends.clone());
    both_up(&far, &near);
    // Session 5 asks node 8 something: its end must reach node 8.
    let asked = rt.block_on(async { near.request(8, 5, PeerRequest::Probe).await });
    assert!(matches!(asked, Err(Error::NoSuchSegment)), "{asked:?}");
    let at4 = format!("127.0.0.1:{}", ports[1]);
    lose(&at4, "SessionEnd {", 1);
    near.session_end(5);
    let t = Instant::now();
    while !ends.0.lock().unwrap().contains(&5) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "node 8 never heard of session 5's end (lost: {})",
            unlost(&at4, "SessionEnd {") == 0
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(unlost(&at4, "SessionEnd {"), 0, "the first telling was lost");
    both_up(&far, &near);
    drop((far, near));
}

/// Node 4's answers to node 8's pings are lost on the fabric (the send's completion fails,
/// `Fabric::broke`): node 4 has heard its peer (the ping) before its link fails. The back-off
/// started over whenever the peer was heard from: a redial every 50 ms. Now it starts over
/// only once a link stayed up a few heartbeats. (The test refused node 4's first send
/// before: its own ping, sent before node 8's could arrive, so it passed with the old rule.)
#[test]
fn a_link_whose_sends_fail_one_way_is_redialled_with_back_off() {
    let Some((dir, ports)) = ready() else { return };
    let at4 = format!("127.0.0.1:{}", ports[1]);
    const MANY: usize = 1 << 20;
    lose(&at4, "Pong {", MANY);
    let (_rt, far, near) = nodes(dir.path(), ports);
    assert_redialled_with_back_off(|| MANY - unlost(&at4, "Pong {"));
    super::super::fabric::tests::LOSE.0.lock().unwrap().retain(|(a, w, _)| !(a == &at4 && *w == "Pong {"));
    both_up(&far, &near);
    drop((far, near));
}

/// Node 4's link ends as soon as it is up (its bootstrap connection closed), again and
/// again; no send fails. Only a failed send paused before the next link, so node 4
/// redialled at once, a loop of links hundreds a second; now every link that ends before it
/// worked is followed by a pause that doubles.
#[test]
fn a_link_that_ends_at_once_is_redialled_with_back_off() {
    let Some((dir, ports)) = ready() else { return };
    let to8 = format!("127.0.0.1:{}", ports[3]);
    CLOSING.on(&[&to8]);
    let (_rt, far, near) = nodes(dir.path(), ports);
    assert_redialled_with_back_off(|| CLOSING.count(&to8));
    CLOSING.off(&[&to8]);
    both_up(&far, &near);
    drop((far, near));
}

/// Nodes 8 (`far`, lending 1 MiB of memory to every connection) and 4 (`near`) with their
/// link up and a first RMA write of node 4 done; node 8's link states, and node 4's memory.
fn rma_nodes(dir: &std::path::Path, ports: [u16; 4]) -> (Nodes, Arc<Ends>, Arc<remora_sys::Mapping>) {
    let ends = Arc::new(Ends(Mutex::default(), Mutex::default(), Some(mapping(1 << 20))));
    let (rt, far, near) = nodes_with(dir, ports, ends.clone());
    both_up(&far, &near);
    let local = mapping(1 << 20);
    let done = rma_write(&near, &local);
    assert!(matches!(done, Ok(Ok(()))), "a write works: {done:?}");
    ((rt, far, near), ends, local)
}

/// Node 4 writes 256 KiB of `local` into node 8 by RMA: how it went.
fn rma_write(
    near: &Arc<dyn crate::transport::Transport>,
    local: &Arc<remora_sys::Mapping>,
) -> Result<Result<(), Error>, Error> {
    near.start_range(8, 5, 0, local, 0, 256 << 10, true).map(|wait| wait())
}

/// Wait until node 8 saw its link leave `Up` (after the first `states` changes it saw).
fn left_up(ends: &Ends, states: usize) {
    let t = Instant::now();
    while !ends.1.lock().unwrap()[states..].iter().any(|s| *s != LinkState::Up) {
        assert!(t.elapsed() < Duration::from_secs(20), "the link stayed up: {:?}", ends.1.lock().unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A piece of node 4's RMA write to node 8 is refused by the endpoint. The transfer failed
/// but its link stayed up (the write's close then waited on the same link: a second
/// patience when the queue was full); now the link goes down at once, as for a refused
/// message: node 8 sees it leave `Up`, and it comes back.
#[test]
fn a_refused_rma_piece_takes_its_link_down() {
    let Some((dir, ports)) = ready() else { return };
    let to8 = format!("127.0.0.1:{}", ports[3]);
    let ((_rt, far, near), ends, local) = rma_nodes(dir.path(), ports);
    let states = ends.1.lock().unwrap().len();
    RMA_REFUSED.on(&[&to8]);
    let done = rma_write(&near, &local);
    let refused = RMA_REFUSED.count(&to8);
    RMA_REFUSED.off(&[&to8]);
    assert!(refused >= 1, "the write's piece was refused");
    assert!(!matches!(done, Ok(Ok(()))), "the refused write fails: {done:?}");
    left_up(&ends, states);
    both_up(&far, &near);
    drop((far, near));
}

/// A piece of node 4's RMA write to node 8 finds the queue full (`FI_EAGAIN`) at every try,
/// past the link's patience (shortened here to 300 ms; the link's budget otherwise). It
/// takes its link down through the refused piece's branch (`Fabric::broke`), after waiting
/// for room (tried again and again, not failed at the first): the write fails, node 8 sees
/// the link leave `Up`, and it comes back.
#[test]
fn an_rma_piece_whose_queue_stays_full_takes_its_link_down() {
    let Some((dir, ports)) = ready() else { return };
    let (at4, to8) = (format!("127.0.0.1:{}", ports[1]), format!("127.0.0.1:{}", ports[3]));
    let ((_rt, far, near), ends, local) = rma_nodes(dir.path(), ports);
    let states = ends.1.lock().unwrap().len();
    let patience = Duration::from_millis(300);
    super::super::fabric::tests::PATIENCE.lock().unwrap().push((at4.clone(), patience));
    RMA_FULL.on(&[&to8]);
    let t = Instant::now();
    let done = rma_write(&near, &local);
    let (waited, tries) = (t.elapsed(), RMA_FULL.count(&to8));
    RMA_FULL.off(&[&to8]);
    super::super::fabric::tests::PATIENCE.lock().unwrap().retain(|(a, _)| *a != at4);
    assert!(tries >= 2, "the full queue was tried again ({tries} tries)");
    assert!(waited >= patience, "the piece waited its patience for room (failed after {waited:?})");
    assert!(!matches!(done, Ok(Ok(()))), "the write fails: {done:?}");
    left_up(&ends, states);
    both_up(&far, &near);
    drop((far, near));
}
