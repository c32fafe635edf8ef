//! The fabric's routing and registrations (`fabric.rs`).

use super::*;
use crate::transport::nobody::Nobody;
use remora_proto::link::LinkMsg;
use std::time::Instant;

/// Messages a test loses on their way (`LOSE.hit`), as a provider loses one whose
/// connection breaks under it, and reports it in the send's completion (libfabric's tcp
/// provider gives no way to break one connection of an endpoint): sent in their stead are
/// bytes the peer drops as malformed, and the send's completion is made an error
/// completion ([`fail_lost`]).
pub(in crate::transport::ofi) static LOSE: Hook = Hook(Mutex::new(Vec::new()));

/// Sends a test finds the queue full for (`FULL.hit`).
pub(in crate::transport::ofi) static FULL: Hook = Hook(Mutex::new(Vec::new()));

/// Fabrics (by their node's bootstrap address) whose patience a test shortens.
pub(in crate::transport::ofi) static PATIENCE: Mutex<Vec<(String, Duration)>> = Mutex::new(Vec::new());

/// The patience hook: `f`'s patience if a test shortened it.
pub(super) fn patience(f: &Fabric) -> Option<Duration> {
    let me = f.label.lock().unwrap_or_else(|p| p.into_inner()).clone();
    PATIENCE.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(at, _)| *at == me).map(|(_, p)| *p)
}

/// Messages a test names: by the sending node's bootstrap address, what they carry (a part
/// of their `Debug`), and how many more.
pub(in crate::transport::ofi) struct Hook(pub Mutex<Vec<(String, &'static str, usize)>>);

impl Hook {
    /// Whether `f`'s message `bytes` is one of them (one fewer to come).
    pub(super) fn hit(&self, f: &Fabric, bytes: &[u8]) -> bool {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if list.is_empty() {
            return false;
        }
        let what = decode::<Wire>(bytes).map(|w| format!("{:?}", w.body)).unwrap_or_default();
        let me = f.label.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let found = list.iter_mut().find(|(at, w, n)| *at == me && *n > 0 && what.contains(w));
        found.map(|(_, _, n)| *n -= 1).is_some()
    }
}

/// The completion hook: the completion of a message the test lost (`LOSE`) reports an
/// error, as a provider's does when the connection under it breaks, so that the production
/// path takes it.
pub(super) fn fail_lost(
    waiter: Option<&Waiting>,
    mut c: remora_ofi_sys::Completion,
) -> remora_ofi_sys::Completion {
    if matches!(waiter, Some(Waiting::Send { lost: true, .. })) && c.error.is_none() {
        c.error = Some(remora_ofi_sys::Error { code: 5, what: "lost by the test".into() });
    }
    c
}

/// A fabric on loopback with token 42 routed to a link of node 8 (`reply`: the peer's
/// endpoint and token, once known), and that link's queue; `None`, said, where libfabric
/// is missing.
fn routed(
    reply: Option<(u64, u64)>,
    waiters: Waiters,
    early: Arc<AtomicUsize>,
) -> Option<(Arc<Fabric>, mpsc::UnboundedReceiver<Body>)> {
    routed_as(reply, waiters, early, Arc::new(Notify::new()))
}

/// As [`routed`], telling `broken` when the link's messages are lost.
fn routed_with(
    reply: Option<(u64, u64)>,
    broken: Arc<Notify>,
) -> Option<(Arc<Fabric>, mpsc::UnboundedReceiver<Body>)> {
    routed_as(reply, Waiters::default(), Arc::default(), broken)
}

fn routed_as(
    reply: Option<(u64, u64)>,
    waiters: Waiters,
    early: Arc<AtomicUsize>,
    broken: Arc<Notify>,
) -> Option<(Arc<Fabric>, mpsc::UnboundedReceiver<Body>)> {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return None;
    }
    let f = Fabric::open("tcp;ofi_rxm", Some("127.0.0.1")).unwrap();
    let (peer, _) = TcpPeer::with_accepts(Arc::new(Nobody), 8, "127.0.0.1:1".into());
    let (tx, rx) = mpsc::unbounded_channel();
    f.route(42, Routing { peer, tx, waiters, reply, served: Served::default(), early, broken });
    Some((f, rx))
}

#[test]
fn a_mapping_is_registered_once_per_access_and_closed_when_it_goes() {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return;
    }
    let f = Fabric::open("tcp;ofi_rxm", Some("127.0.0.1")).unwrap();
    let fd = remora_sys::Memfd::create("ofi-regs", 1 << 20).unwrap();
    let map = Arc::new(Mapping::new(remora_sys::AsFd::as_fd(&fd), 0, 1 << 20, Default::default()).unwrap());
    let w = f.region(&map, Access::RemoteWrite).unwrap();
    for _ in 0..5 {
        let again = f.region(&map, Access::RemoteWrite).unwrap();
        assert!(Arc::ptr_eq(&w, &again), "the same registration serves every transfer");
    }
    let r = f.region(&map, Access::RemoteRead).unwrap();
    assert_ne!(r.key(), w.key(), "reads and writes have registrations (and keys) of their own");
    assert_eq!(f.registrations(), (2, 2));
    // The mapping's holder (a connection) goes; a transfer still holds the write
    // registration: it stays open for it, and is not handed out again.
    drop((map, r));
    f.sweep();
    assert_eq!(f.registrations(), (2, 0), "registrations of a mapping that went are closed");
    assert!(w.mapping().is_some_and(|m| m.len() == 1 << 20), "a transfer's registration outlives the sweep");
    drop(w);
}

#[test]
fn messages_without_a_live_links_token_are_dropped() {
    let waiters = Waiters::default();
    let Some((f, mut rx)) = routed(Some((0, 0)), waiters.clone(), Arc::default()) else { return };
    let msg = |token, body| encode(&Wire { token, body }).unwrap();
    let ping = |seq| Body::Link(LinkMsg::Ping { seq });
    deliver(&f, &msg(41, ping(1)));
    assert!(rx.try_recv().is_err(), "a message under another token is dropped");
    assert!(!deliver(&f, b"not a message"), "a malformed message is reported, to be said rate-limited");
    assert!(rx.try_recv().is_err(), "a malformed message is dropped");
    let (wtx, wrx) = std::sync::mpsc::channel();
    waiters.lock().unwrap().insert(5, wtx);
    deliver(&f, &msg(41, Body::RmaKey { tag: 5, ok: true, addr: 0, key: 1 }));
    assert!(wrx.try_recv().is_err(), "nor does an answer under another token reach a waiter");
    deliver(&f, &msg(42, ping(1)));
    assert_eq!(rx.try_recv().ok(), Some(ping(1)), "the link's own token is served");
    f.unroute(42);
    deliver(&f, &msg(42, ping(2)));
    assert!(rx.try_recv().is_err(), "a link's token is dead once the link went down");
}

#[test]
fn requests_before_the_peer_is_known_wait_for_the_links_task() {
    // Routed before our token was handed out; the peer's address is not known yet.
    let Some((f, mut rx)) = routed(None, Waiters::default(), Arc::default()) else { return };
    let put = Body::Put { tag: 1, conn: 7, offset: 0, data: vec![1, 2, 3] };
    let open = Body::RmaOpen { tag: 2, conn: 7, offset: 0, len: 16, write: true };
    let ping = Body::Link(LinkMsg::Ping { seq: 1 });
    for b in [put, open, Body::RmaClose { tag: 3 }, Body::Get { tag: 4, conn: 7, offset: 0, len: 3 }, ping] {
        let want = format!("{b:?}");
        deliver(&f, &encode(&Wire { token: 42, body: b }).unwrap());
        assert_eq!(rx.try_recv().map(|b| format!("{b:?}")).ok(), Some(want), "kept for the link's task");
    }
}

#[test]
fn requests_after_early_ones_wait_until_the_task_served_those() {
    let early = Arc::new(AtomicUsize::new(0));
    let Some((f, mut rx)) = routed(None, Waiters::default(), early.clone()) else { return };
    let msg = |body| encode(&Wire { token: 42, body }).unwrap();
    let put = |tag, byte| Body::Put { tag, conn: 7, offset: 0, data: vec![byte; 8] };
    // Two puts come before the peer is known: both wait for the link's task.
    deliver(&f, &msg(put(1, 1)));
    deliver(&f, &msg(put(2, 2)));
    // The link is up here now (answers go to our own endpoint, under a token nobody routes).
    let me = f.ep.insert(&f.ep.name().unwrap()).unwrap();
    f.reply_to(42, me, 99);
    // A third overlapping put: the early ones are not served yet, so it queues behind them
    // rather than being written at once by this thread, before them.
    deliver(&f, &msg(put(3, 3)));
    deliver(&f, &msg(Body::RmaClose { tag: 4 }));
    let queued: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok()).map(|b| format!("{b:?}")).collect();
    let want = [put(1, 1), put(2, 2), put(3, 3), Body::RmaClose { tag: 4 }].map(|b| format!("{b:?}"));
    assert_eq!(queued, want, "later requests wait behind the early ones, in order");
    assert_eq!(early.load(Ordering::SeqCst), 4);
    // The task serves them one by one; until the last is served, newcomers still queue.
    for _ in 0..3 {
        served_early(&early);
    }
    deliver(&f, &msg(Body::RmaClose { tag: 5 }));
    assert!(rx.try_recv().is_ok(), "one early request unserved: the next still queues");
    served_early(&early);
    served_early(&early);
    assert_eq!(early.load(Ordering::SeqCst), 0, "all served (and never below none)");
    deliver(&f, &msg(Body::RmaClose { tag: 6 }));
    assert!(rx.try_recv().is_err(), "all early requests served: this thread serves the next");
    served_early(&early);
    assert_eq!(early.load(Ordering::SeqCst), 0, "a request not queued early is not counted");
    f.unroute(42);
}

#[test]
fn a_lost_message_breaks_its_connection_and_none_is_sent_once_it_is_gone() {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return;
    }
    let f = Fabric::open("tcp;ofi_rxm", Some("127.0.0.1")).unwrap();
    let (peer, _) = TcpPeer::with_accepts(Arc::new(Nobody), 8, "127.0.0.1:1".into());
    let (tx, _rx) = mpsc::unbounded_channel();
    let broken = Arc::new(Notify::new());
    // The peer's endpoint (our own here) and its token: this connection's address.
    let me = f.ep.insert(&f.ep.name().unwrap()).unwrap();
    let routing = |broken| Routing {
        peer: peer.clone(),
        tx: tx.clone(),
        waiters: Waiters::default(),
        reply: Some((me, 99)),
        served: Served::default(),
        early: Arc::default(),
        broken,
    };
    f.route(42, routing(broken.clone()));
    let told = |n: &Notify| ready_at_once(n.notified());
    // A loss of another connection (an older token of the peer) is not this one's.
    f.broke((me, 98), "test");
    assert!(!told(&broken), "another connection's loss does not break this one");
    f.broke((me, 99), "test");
    assert!(told(&broken), "the link's task is told its connection lost a message");
    // Gone: a message for it is not posted to an address the link's task may have
    // removed from the endpoint (rxm crashed on one), and breaks nothing.
    f.unroute(42);
    let bytes = encode(&Wire { token: 99, body: Body::Link(LinkMsg::Ping { seq: 1 }) }).unwrap();
    assert_eq!(f.send_bytes((me, 99), &bytes, true), Err(false));
    assert!(!told(&broken));
}

/// Whether `fut` is ready at its first poll.
fn ready_at_once<F: std::future::Future>(fut: F) -> bool {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    fut.as_mut().poll(&mut cx).is_ready()
}

/// A stranger sends more messages too large for any receive buffer than the endpoint has
/// buffers (each receive fails, truncated), then a link's peer sends a ping: every failed
/// receive's buffer was posted again (none is lost, so the ping finds one), and no link is
/// closed for them (their sender is not known: the link is routed to the stranger's own
/// endpoint, and still not closed). This passed before the receive path was changed too
/// (the buffer was posted again already); it keeps both promises.
#[test]
fn failed_receives_lose_no_buffer_and_close_no_link() {
    let broken = Arc::new(Notify::new());
    let Some((f, mut rx)) = routed_with(None, broken.clone()) else { return };
    let me = f.ep.name().unwrap();
    let stranger = Endpoint::open("tcp;ofi_rxm", Some("127.0.0.1"), 4, 4096).unwrap();
    let to = stranger.insert(&me).unwrap();
    // The link's connection is known (its peer's endpoint is the stranger's), so that a
    // `broke` for it would find it: the last assertion means something.
    let theirs = f.ep.insert(&stranger.name().unwrap()).unwrap();
    f.reply_to(42, theirs, 99);
    let big = vec![7u8; RECV_SIZE + 1];
    let ping = encode(&Wire { token: 42, body: Body::Link(LinkMsg::Ping { seq: 1 }) }).unwrap();
    let (mut sent, mut done) = (0, 0);
    let t = Instant::now();
    while done < RECVS + 9 {
        assert!(t.elapsed() < Duration::from_secs(60), "{sent} sent, {done} completed");
        let msg: &[u8] = if sent < RECVS + 8 { &big } else { &ping };
        if sent < RECVS + 9 && stranger.send(to, msg, 1 + sent as u64).is_ok() {
            sent += 1;
        }
        done += stranger.completions(Duration::from_millis(1)).unwrap().len();
    }
    let got = loop {
        match rx.try_recv() {
            Ok(b) => break b,
            Err(_) => {
                assert!(t.elapsed() < Duration::from_secs(60), "the ping never came: receive buffers lost");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    assert_eq!(got, Body::Link(LinkMsg::Ping { seq: 1 }));
    assert!(!ready_at_once(broken.notified()), "a stranger's junk closes no link");
}

/// A fabric whose token 42 is a link to node 8 at our own endpoint under token 99 (so that
/// its answers come back here), and token 99 routed to `waiters` (where they arrive); the
/// fabric's test label is `label`.
fn answering_itself(label: &str, waiters: Waiters, broken: Arc<Notify>) -> Option<(Arc<Fabric>, (u64, u64))> {
    let (f, _) = routed_as(None, Waiters::default(), Arc::default(), broken)?;
    *f.label.lock().unwrap() = label.into();
    let me = f.ep.insert(&f.ep.name().unwrap()).unwrap();
    f.reply_to(42, me, 99);
    let (peer, _) = TcpPeer::with_accepts(Arc::new(Nobody), 9, "127.0.0.1:1".into());
    let (tx, _) = mpsc::unbounded_channel();
    let early = Arc::default();
    f.route(
        99,
        Routing { peer, tx, waiters, reply: None, served: Served::default(), early, broken: Arc::default() },
    );
    Some((f, (me, 99)))
}

/// A get of tag `tag` under token 42, as the peer sends it.
fn get(tag: u64) -> Vec<u8> {
    encode(&Wire { token: 42, body: Body::Get { tag, conn: 7, offset: 0, len: 8 } }).unwrap()
}

/// The first answer finds the send queue full, again and again; four more answers follow.
/// A thread was spawned for each answer that found the queue full while the others went at
/// once: they overtook it (and a full queue could spawn threads without bound). Now the
/// answers queue behind it on the progress thread and go, in order, once there is room.
#[test]
fn answers_that_find_the_send_queue_full_wait_and_go_in_order() {
    let waiters = Waiters::default();
    let label = "answers-in-order";
    let Some((f, _)) = answering_itself(label, waiters.clone(), Arc::default()) else { return };
    let (tx, rx) = std::sync::mpsc::channel();
    for tag in 1..=5 {
        waiters.lock().unwrap().insert(tag, tx.clone());
    }
    FULL.0.lock().unwrap().push((label.into(), "tag: 1,", 1 << 30));
    for tag in 1..=5 {
        deliver(&f, &get(tag));
    }
    assert!(f.has_unsent(), "the first answer waits for room");
    // Long enough for answers sent at once to come back (they take a millisecond).
    let early = rx.recv_timeout(Duration::from_millis(500));
    assert!(early.is_err(), "an answer overtook the first, which waits for room: {early:?}");
    FULL.0.lock().unwrap().retain(|(at, _, _)| at != label);
    let tags: Vec<u64> = (0..5)
        .map(|_| match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Body::Done { tag, .. }) => tag,
            other => panic!("an answer did not come: {other:?}"),
        })
        .collect();
    assert_eq!(tags, [1, 2, 3, 4, 5], "in the order they were asked");
    assert!(!f.has_unsent());
}

/// An answer finds the send queue full past the link's patience (its budget, at least
/// 5 s): the link is told broken, and its waiting answers are dropped. (A thread did this
/// before the queue of unsent answers, with a fixed 5 s; this passed then too.)
#[test]
fn an_answer_that_waits_past_the_patience_takes_its_link_down() {
    let broken = Arc::new(Notify::new());
    let label = "answer-past-patience";
    let Some((f, to)) = answering_itself(label, Waiters::default(), broken.clone()) else { return };
    // A 10 ms heartbeat: a budget of 1.5 s, so the least patience (5 s) applies.
    f.peer_of(to).unwrap().live().set_heartbeat(Duration::from_millis(10));
    FULL.0.lock().unwrap().push((label.into(), "tag: 1,", 1 << 30));
    let t = Instant::now();
    deliver(&f, &get(1));
    deliver(&f, &get(2));
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let told = rt.block_on(async { tokio::time::timeout(Duration::from_secs(60), broken.notified()).await });
    assert!(told.is_ok(), "the link was never told");
    assert!(t.elapsed() >= send::MIN_PATIENCE, "told after {:?}, before its patience", t.elapsed());
    assert!(!f.has_unsent(), "its waiting answers are dropped");
    FULL.0.lock().unwrap().retain(|(at, _, _)| at != label);
}

/// A send waits for room as long as the link's liveness gives a silent peer (its budget),
/// not a fixed 5 s (a peer paused 5 to 30 s lost its link on ofi, not on tcp); at least
/// 5 s.
#[test]
fn a_sends_patience_is_its_links_budget() {
    let Some((f, to)) = answering_itself("patience", Waiters::default(), Arc::default()) else { return };
    let peer = f.peer_of(to).unwrap();
    peer.live().set_heartbeat(Duration::from_millis(200));
    assert_eq!(f.patience_of(to), Some(Duration::from_secs(30)), "150 heartbeats, as tcp's bulk writes wait");
    peer.live().set_heartbeat(Duration::from_millis(10));
    assert_eq!(f.patience_of(to), Some(send::MIN_PATIENCE));
    f.unroute(42);
    assert_eq!(f.patience_of(to), None, "a connection gone has none");
}

/// A sender that waits for room itself (the link's writer, a transfer's pieces, its close:
/// `post_routed`) waits the link's budget too: a queue full for 5.5 s does not fail a send
/// whose link's budget is 9 s (it did with a fixed 5 s).
#[test]
fn a_waiting_sender_waits_its_links_budget() {
    let Some((f, to)) = answering_itself("patience-posted", Waiters::default(), Arc::default()) else {
        return;
    };
    f.peer_of(to).unwrap().live().set_heartbeat(Duration::from_millis(60));
    let t = Instant::now();
    let posted = f.post_routed(to, true, || match t.elapsed() < Duration::from_millis(5500) {
        true => {
            Err(remora_ofi_sys::Error { code: remora_ofi_sys::EAGAIN, what: "full, says the test".into() })
        }
        false => Ok(()),
    });
    assert_eq!(posted, Ok(()), "gave up after {:?}", t.elapsed());
}

/// The link's task unroutes a connection while a message and an RMA of it are in flight
/// and an answer waits for room. Their entries stayed for ever (a completion may never
/// come once the address leaves the endpoint); now the send is forgotten, the RMA's waiter
/// fails with its bytes given back to the window, the answer is dropped, and the
/// operations of another connection stay.
#[test]
fn unrouting_a_connection_forgets_what_it_had_in_flight() {
    let label = "unroute-forgets";
    let Some((f, to)) = answering_itself(label, Waiters::default(), Arc::default()) else { return };
    let other = (to.0, 98);
    let send = |to| Waiting::Send { to, lost: false };
    f.ops.lock().unwrap().extend([(1 << 40, send(to)), ((1 << 40) + 1, send(other))]);
    let window = Arc::new(Window::new(1 << 20));
    let gen = window.take(4096, || false).unwrap();
    let rma = f.expect((1 << 40) + 2, to, &window, (4096, gen));
    FULL.0.lock().unwrap().push((label.into(), "tag: 1,", 1 << 30));
    deliver(&f, &get(1));
    assert!(f.has_unsent());
    f.unroute(42);
    let left: Vec<u64> = f.ops.lock().unwrap().keys().copied().filter(|id| *id >= 1 << 40).collect();
    assert_eq!(left, [(1 << 40) + 1], "only the other connection's operation stays");
    assert!(matches!(rma.try_recv(), Ok(Err(_))), "the RMA's waiter is failed");
    assert_eq!(window.in_flight(), 0, "its bytes are given back");
    assert!(!f.has_unsent(), "the waiting answer is dropped");
    FULL.0.lock().unwrap().retain(|(at, _, _)| at != label);
}

/// `len` bytes of fresh memory.
fn memory(len: usize) -> Arc<Mapping> {
    let fd = remora_sys::Memfd::create("ofi-fabric-tests", len as u64).unwrap();
    Arc::new(Mapping::new(remora_sys::AsFd::as_fd(&fd), 0, len, Default::default()).unwrap())
}

/// An RMA write to a peer that stops driving its progress never completes; its link goes
/// and unroutes the connection, which fails the write's waiter. The endpoint still held the
/// write's registration for its completion, and the registration held the endpoint: when
/// the fabric went, neither was closed (for the life of the process). Now the registration
/// is held until the endpoint is closed (no sooner: the provider may still touch it), and
/// closed with it.
#[test]
fn a_write_that_never_completes_holds_its_registration_until_the_endpoint_closes() {
    let Some((f, _)) = routed(None, Waiters::default(), Arc::default()) else { return };
    let regs = f.ep.registrations();
    let base = regs.open();
    let silent = remora_ofi_sys::Endpoint::open("tcp;ofi_rxm", Some("127.0.0.1"), 8, 4096).unwrap();
    let to = f.ep.insert(&silent.name().unwrap()).unwrap();
    let _ = silent.insert(&f.ep.name().unwrap()).unwrap();
    // The connection is made (the fabric's progress thread drives its side), then the peer
    // reads its queue no more.
    let t = Instant::now();
    while f.ep.send(to, b"hello", f.ep.next_id()).is_err() {
        assert!(t.elapsed() < Duration::from_secs(20), "the hello never left");
        let _ = silent.completions(Duration::from_millis(1));
    }
    while !silent.completions(Duration::from_millis(1)).unwrap().iter().any(|c| c.slot.is_some()) {
        assert!(t.elapsed() < Duration::from_secs(20), "the hello never came");
    }
    f.reply_to(42, to, 7);
    // Larger than the sockets' buffers: it cannot all leave while the peer does not read.
    const N: usize = 64 << 20;
    let theirs = silent.register(&memory(N), 0, N, Access::RemoteWrite).unwrap();
    let (map, window) = (memory(N), Arc::new(Window::new(1 << 20)));
    let local = f.region(&map, Access::Local).unwrap();
    let gen = window.take(4096, || false).unwrap();
    let id = f.ep.next_id();
    let done = f.expect(id, (to, 7), &window, (4096, gen));
    let at = remora_ofi_sys::Remote { dest: to, addr: theirs.remote_addr(0), key: theirs.key() };
    assert_eq!(f.post_routed((to, 7), true, || f.ep.write(&local, 0, N, at, id)), Ok(()));
    std::thread::sleep(Duration::from_millis(300));
    assert!(done.try_recv().is_err(), "the write completed: the peer read its queue");
    f.unroute(42);
    assert!(matches!(done.try_recv(), Ok(Err(_))), "its waiter fails with the link");
    drop((local, map));
    f.sweep();
    assert_eq!(regs.open(), base + 1, "the write's registration is held while the endpoint is open");
    // Its peer's address goes as the link's does: the write is counted stranded, still held.
    assert_eq!((f.ep.remove(to), f.ep.stranded()), (1, 1));
    assert_eq!(regs.open(), base + 1);
    drop(f);
    // The progress thread may hold the fabric a moment longer (it drops its reference after
    // its wait, and the last holder does not join itself): the endpoint closes then.
    let t = Instant::now();
    while regs.open() != 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "the endpoint closed, the registration is closed");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop((theirs, silent));
}
