//! The peer port's places for handshakes under way: connections that drip their handshake
//! from an address that is not the cluster's, as many as fill the strangers' places and
//! renewed as each is cut off or refused, never keep a cluster node's connect out.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Daemons killed when the test ends, also when it fails.
struct Killed(Vec<std::process::Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A connection from 127.0.0.2 (an address of this host that is not the cluster's) that
/// announces a 64-byte frame and sends nothing more yet.
fn stranger(to: SocketAddr) -> Option<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    s.bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into()).ok()?;
    s.connect(&to.into()).ok()?;
    let mut s: TcpStream = s.into();
    s.write_all(&64u32.to_le_bytes()).ok()?;
    s.set_nonblocking(true).ok()?;
    Some(s)
}

/// Keep `n` dripping connections from a stranger's address open on `to` until `stop`: a
/// byte each every 500 ms, and each one closed (cut off at its deadline, or refused for
/// want of a place) opened again at once.
fn drip(to: SocketAddr, n: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
        let mut last = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let tick = last.elapsed() >= Duration::from_millis(500);
            if tick {
                last = Instant::now();
            }
            for c in conns.iter_mut() {
                let closed = match c {
                    None => true,
                    Some(s) => {
                        let mut b = [0u8; 64];
                        let gone = match s.read(&mut b) {
                            Ok(_) => true,
                            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                        };
                        gone || (tick && s.write_all(&[0]).is_err())
                    }
                };
                if closed {
                    *c = stranger(to);
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

fn link_state(dir: &std::path::Path, cluster: &std::path::Path, node: u32, peer: u32) -> Option<String> {
    let s = remora_client::Session::open_control(&remora_client::Config {
        node,
        runtime_dir: dir.to_path_buf(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(60),
        cluster: Some(cluster.to_path_buf()),
    })
    .ok()?;
    match s.request(remora_proto::Request::Status, &[]).ok()?.0 {
        remora_proto::Reply::Status(st) => st.peers.iter().find(|p| p.node == peer).map(|p| p.state.clone()),
        _ => None,
    }
}

/// Node 8's peer port is full of strangers' dripping handshakes (more than there are places
/// for them, each renewed at once); node 4, a node of the cluster, dials it (the smaller id
/// dials) and the link comes up. With one cap for all, node 4's connections were refused
/// for want of a place as long as the strangers kept it full.
#[test]
fn strangers_dripping_handshakes_never_keep_a_cluster_node_out() {
    let dir = tempfile::Builder::new().prefix("remora-places").tempdir().unwrap();
    let cluster = dir.path().join("cluster.toml");
    let port8 = remora_testkit::free_port();
    let text = format!(
        "secret = \"remora-test-secret-0123456789\"\n[[node]]\nid = 4\nhost = \"127.0.0.1\"\nport = {}\n\
         [[node]]\nid = 8\nhost = \"127.0.0.1\"\nport = {port8}\n",
        remora_testkit::free_port()
    );
    std::fs::write(&cluster, text).unwrap();
    let log8 = dir.path().join("node-8.stderr");
    let daemon = |node: u32, err: Stdio| {
        Command::new(env!("CARGO_BIN_EXE_remorad"))
            .args(["--node", &node.to_string(), "--cluster"])
            .arg(&cluster)
            .arg("--runtime-dir")
            .arg(dir.path())
            .env("REMORA_LOG", "info")
            .stderr(err)
            .spawn()
            .unwrap()
    };
    let mut daemons = Killed(vec![daemon(8, Stdio::from(std::fs::File::create(&log8).unwrap()))]);
    let to = SocketAddr::from(([127, 0, 0, 1], port8));
    wait_until("node 8's peer port", Duration::from_secs(20), || TcpStream::connect(to).is_ok());
    if stranger(to).is_none() {
        return eprintln!("skipping: cannot connect from 127.0.0.2 here");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let dripper = drip(to, 80, stop.clone());
    // The strangers' places are full: one of them was refused for want of a place.
    wait_until("a stranger refused for want of a place", Duration::from_secs(30), || {
        std::fs::read_to_string(&log8).is_ok_and(|t| t.contains("no handshake place free"))
    });
    daemons.0.push(daemon(4, Stdio::null()));
    let up = Instant::now();
    let mut seen = None;
    while up.elapsed() < Duration::from_secs(40) {
        seen = link_state(dir.path(), &cluster, 8, 4);
        if seen.as_deref() == Some("up") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    dripper.join().unwrap();
    assert_eq!(seen.as_deref(), Some("up"), "node 8's link to node 4 while strangers drip");
}
