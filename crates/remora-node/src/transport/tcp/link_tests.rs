//! The link's redial back-off and the end of its connection (`link.rs`).

use super::*;
use crate::transport::nobody::Nobody;
use remora_proto::link::PeerRequest;
use remora_proto::Error;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::Duration;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// A link that ends before it was stable waits the back-off, which doubles up to a
/// second; one that stayed up [`STABLE_PERIODS`] heartbeats starts it over and is
/// redialled at once. The back-off started over after one heartbeat up before: a peer
/// that drops its links a little later than that was redialled every 50 ms.
#[test]
fn the_back_off_starts_over_only_after_a_stable_link() {
    let hb = MS(200);
    let mut backoff = FIRST_PAUSE;
    // Links that each lasted a heartbeat and a half: longer than one, not stable.
    let pauses: Vec<_> = (0..8).map(|_| after_link(&mut backoff, MS(300), hb)).collect();
    let want = [50, 100, 200, 400, 800, 1000, 1000, 1000].map(|ms| Some(MS(ms)));
    assert_eq!(pauses, want, "a flapping link is redialled ever more slowly");
    // Ended at once (the peer closed it after the handshake): as before.
    assert_eq!(after_link(&mut backoff, MS(0), hb), Some(MAX_PAUSE));
    // Just short of stable, then stable: the back-off starts over, no pause.
    assert_eq!(after_link(&mut backoff, hb * STABLE_PERIODS - MS(1), hb), Some(MAX_PAUSE));
    assert_eq!(after_link(&mut backoff, hb * STABLE_PERIODS, hb), None);
    assert_eq!(backoff, FIRST_PAUSE);
    assert_eq!(after_link(&mut backoff, MS(10), hb), Some(FIRST_PAUSE), "then it doubles again");
    assert_eq!(backoff, MS(100));
}

/// Node `node`'s view of a cluster of nodes 4 and 8 on loopback at `ports`, with a
/// heartbeat of 100 ms.
fn env(node: u32, dir: &std::path::Path, [p4, p8]: [u16; 2]) -> Env {
    let text = format!(
        "secret = \"tcp-link-tests-secret-0123456789\"\nheartbeat_ms = 100\n\
         [[node]]\nid = 4\nhost = \"127.0.0.1\"\nport = {p4}\n\
         [[node]]\nid = 8\nhost = \"127.0.0.1\"\nport = {p8}\n"
    );
    Env {
        node,
        runtime_dir: dir.join(format!("n{node}")),
        cluster: Some(crate::cluster::Cluster::parse(&text, dir).unwrap()),
        incarnation: 77,
        features: 0,
        peer_features: Default::default(),
        congestion: Default::default(),
    }
}

/// A fake node 8 ([`flapping_peer`]): the control flows it took; its listener and accept
/// thread end when it is dropped.
struct Flapping {
    links: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// Set by the accept thread once it has closed the listener, as it ends.
    closed: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
    accepts: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Flapping {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept (a connection it takes, sees the stop, and drops with the listener).
        let _ = std::net::TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accepts.take() {
            let _ = t.join();
        }
    }
}

/// A fake node 8 at `listener`: it authenticates every flow node 4 dials, reads the first
/// frame of each control flow and holds it `hold` after that, then drops it (its bulk flows
/// too); counts the control flows it took.
fn flapping_peer(env: Env, listener: std::net::TcpListener, hold: Duration) -> Flapping {
    let (count, env) = (Arc::new(AtomicUsize::new(0)), Arc::new(env));
    let (stop, closed) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let addr = listener.local_addr().unwrap();
    let (c, halt, shut) = (count.clone(), stop.clone(), closed.clone());
    let accepts = std::thread::spawn(move || {
        for s in listener.incoming() {
            if halt.load(Ordering::SeqCst) {
                break;
            }
            let Ok(mut s) = s else { break };
            let (env, c) = (env.clone(), c.clone());
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let Ok((_, flow, _, ())) = super::accept_handshake(&mut s, &env, |_| Ok(())) else { return };
                let mut first = [0u8; 4];
                if flow == Flow::Control && s.read_exact(&mut first).is_ok() {
                    c.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(hold);
            });
        }
        drop(listener);
        shut.store(true, Ordering::SeqCst);
    });
    Flapping { links: count, stop, closed, addr, accepts: Some(accepts) }
}

/// Node 8 takes node 4's links and drops each a heartbeat and a half after it is up (a
/// flapping peer). The back-off started over after any link up a heartbeat, so node 4
/// redialled at once, a link every ~160 ms (about 18 in 3 s); now only a stable link starts
/// it over: 200 + 400 + 800 + 1000 ms of pauses, about four links in 3 s, fewer under load.
#[test]
fn a_peer_that_drops_its_links_after_a_heartbeat_is_redialled_with_back_off() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ports = [remora_testkit::free_port(), listener.local_addr().unwrap().port()];
    let node8 = flapping_peer(env(8, dir.path(), ports), listener, MS(150));
    let links = node8.links.clone();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (peer, rx) = TcpPeer::with_accepts(Arc::new(Nobody), 8, format!("127.0.0.1:{}", ports[1]));
    let task = rt.spawn(run_peer(Arc::new(env(4, dir.path(), ports)), peer, rx));
    let t = Instant::now();
    while links.load(Ordering::SeqCst) < 2 {
        assert!(t.elapsed() < Duration::from_secs(30), "node 4 never redialled");
        std::thread::sleep(MS(5));
    }
    let first = links.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(3));
    let n = links.load(Ordering::SeqCst) - first;
    task.abort();
    // Checked by the accept thread's word, not by dialling the port: a test running in
    // parallel may bind it as soon as it is free.
    let closed = node8.closed.clone();
    drop(node8);
    assert!(closed.load(Ordering::SeqCst), "node 8's listener closed with the test");
    assert!(n <= 9, "node 4 redialled a flapping peer {n} times in 3 s: no back-off");
}

/// Node `node` with no cluster file (a heartbeat of 200 ms).
fn lone(node: u32) -> Env {
    Env {
        node,
        runtime_dir: std::env::temp_dir(),
        cluster: None,
        incarnation: 1,
        features: 0,
        peer_features: Default::default(),
        congestion: Default::default(),
    }
}

/// Node 8 does not dial node 4 (the smaller id dials), it serves the connections node 4
/// makes. After links that did not last it waited the back-off's pause all the same before
/// serving the next, already authenticated (50, 100, ... ms, then a second each: 4.5 s over
/// nine links); only the dialer pauses now, so each new link is up at once (milliseconds
/// each: the 2.5 s allowed is for a loaded machine).
#[test]
fn the_side_that_does_not_dial_serves_each_new_link_at_once() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let env = lone(8);
    let (peer, inbound) = TcpPeer::with_accepts(Arc::new(Nobody), 4, addr.to_string());
    let task = rt.spawn(run_peer(Arc::new(env), peer.clone(), inbound));
    let tx = peer.accepted.lock().unwrap().clone().unwrap();
    let mut waited = Duration::ZERO;
    for _ in 0..9 {
        // Node 4's next link (authenticated: the handshake is the listener's, before this).
        let ours = std::net::TcpStream::connect(addr).unwrap();
        let (theirs, _) = listener.accept().unwrap();
        let (stop, twin) = (Arc::new(AtomicBool::new(false)), theirs.try_clone().unwrap());
        pinging(theirs, stop.clone());
        ours.set_nonblocking(true).unwrap();
        let t = Instant::now();
        rt.block_on(async { tx.send((TcpStream::from_std(ours).unwrap(), 5)).unwrap() });
        while peer.state() != LinkState::Up {
            assert!(t.elapsed() < Duration::from_secs(30), "the link never came up");
            std::thread::sleep(MS(1));
        }
        waited += t.elapsed();
        // Node 4 drops it at once: a link that did not last.
        stop.store(true, Ordering::SeqCst);
        twin.shutdown(std::net::Shutdown::Both).unwrap();
        let t = Instant::now();
        while peer.state() == LinkState::Up {
            assert!(t.elapsed() < Duration::from_secs(30), "the link never went down");
            std::thread::sleep(MS(1));
        }
    }
    task.abort();
    assert!(waited < Duration::from_millis(2500), "node 8 served 9 links in {waited:?}: it paused");
}

/// Node 8's side of an accepted control connection that keeps pinging node 4 (every
/// 50 ms, until `stop`) and never reads: node 4 keeps hearing it.
fn pinging(mut s: std::net::TcpStream, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut seq = 0;
        while !stop.load(Ordering::SeqCst) {
            seq += 1;
            let body = encode(&LinkMsg::Ping { seq }).unwrap();
            let mut out = (body.len() as u32).to_le_bytes().to_vec();
            out.extend_from_slice(&body);
            if s.write_all(&out).is_err() {
                return;
            }
            std::thread::sleep(MS(50));
        }
    });
}

/// Node 9's link to node 8 can no longer write (its socket's sending side is shut, as when
/// the connection breaks under a write) while node 8's pings still come in. The writer
/// ended alone and the link stayed up, heard: a request waited for ever (the budget of
/// silence never runs out while the peer is heard). Now the failed write takes the link
/// down at once, as a read error does: the request fails within a few heartbeats.
#[test]
fn a_write_that_fails_takes_the_link_down_at_once() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let env = lone(9);
    // Node 8's address answers (the listener): a probe while the link is down finds it.
    let (peer, inbound) = TcpPeer::with_accepts(Arc::new(Nobody), 8, addr.to_string());
    rt.spawn(run_peer(Arc::new(env), peer.clone(), inbound));
    let ours = std::net::TcpStream::connect(addr).unwrap();
    let (theirs, _) = listener.accept().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    pinging(theirs, stop.clone());
    ours.set_nonblocking(true).unwrap();
    let twin = ours.try_clone().unwrap();
    let tx = peer.accepted.lock().unwrap().clone().unwrap();
    rt.block_on(async { tx.send((TcpStream::from_std(ours).unwrap(), 5)).unwrap() });
    let t = Instant::now();
    while peer.state() != LinkState::Up {
        assert!(t.elapsed() < Duration::from_secs(30), "the link never came up");
        std::thread::sleep(MS(5));
    }
    // A request waits for its answer (node 8 answers none); then writes fail.
    let p = peer.clone();
    let ask = rt.spawn(async move { p.request(1, PeerRequest::Probe).await });
    while peer.pending.lock().unwrap().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(30), "the request was never sent");
        std::thread::sleep(MS(2));
    }
    twin.shutdown(std::net::Shutdown::Write).unwrap();
    let t = Instant::now();
    let asked = rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), ask).await });
    stop.store(true, Ordering::SeqCst);
    let asked = asked.map(|r| r.unwrap());
    assert_eq!(asked, Ok(Err(Error::NodeNotResponding)), "the request fails with its link");
    assert!(t.elapsed() < Duration::from_secs(2), "seen after {:?}", t.elapsed());
    assert_ne!(peer.state(), LinkState::Up, "the link is down");
}
