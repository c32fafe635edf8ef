//! `remorad` as an operator runs it: `--detach` leaves the terminal alone and logs plain
//! text to `node-N.log`; SIGTERM and SIGINT end it cleanly, leaving neither socket nor lock.

use std::os::fd::AsFd;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The daemon's pid, from the socket's peer credentials.
fn daemon_pid(sock: &Path) -> u32 {
    let fd = remora_sys::seqpacket::connect(sock, false).unwrap();
    remora_sys::seqpacket::peer_pid(fd.as_fd()).unwrap()
}

#[test]
fn detached_daemon_logs_plain_text_and_exits_cleanly_on_signals() {
    for signal in ["-TERM", "-INT"] {
        let dir = tempfile::Builder::new().prefix("remora-daemon").tempdir().unwrap();
        let node = 44;
        let out = Command::new(env!("CARGO_BIN_EXE_remorad"))
            .args(["--detach", "--node", &node.to_string(), "--runtime-dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "detached means nothing on the terminal");
        let sock = remora_proto::paths::socket_path(dir.path(), node);
        let lock = remora_proto::paths::lock_path(dir.path(), node);
        wait_until("the socket", || sock.exists());
        let log = dir.path().join(format!("node-{node}.log"));
        wait_until("the log line", || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.contains("node daemon up"))
        });
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(!text.contains('\u{1b}'), "no colour codes in a log file: {text:?}");
        let pid = daemon_pid(&sock);
        assert!(Command::new("kill").arg(signal).arg(pid.to_string()).status().unwrap().success());
        wait_until("the daemon to leave", || !Path::new(&format!("/proc/{pid}")).exists() || !sock.exists());
        wait_until("the socket and lock to go", || !sock.exists() && !lock.exists());
        wait_until("the last log line", || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.contains("node daemon down"))
        });
    }
}

fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn metrics_endpoint_reports_the_books_and_moves_with_them() {
    let dir = tempfile::Builder::new().prefix("remora-metrics").tempdir().unwrap();
    let node = 46;
    let port = remora_testkit::free_port();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_remorad"))
        .args(["--node", &node.to_string(), "--metrics", &format!("127.0.0.1:{port}"), "--runtime-dir"])
        .arg(dir.path())
        .spawn()
        .unwrap();
    let sock = remora_proto::paths::socket_path(dir.path(), node);
    wait_until("the socket", || sock.exists());
    wait_until("the metrics endpoint", || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    let before = http_get(port, "/metrics");
    assert!(before.starts_with("HTTP/1.1 200"), "{before}");
    assert!(before.contains("remora_node 46") && before.contains("remora_sessions"), "{before}");
    assert!(!before.contains("remora_segments{state=\"created\"} 1"), "{before}");
    // A process creates a segment: the next scrape shows it.
    let cfg = remora_client::Config {
        node,
        runtime_dir: dir.path().to_path_buf(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(60),
        cluster: None,
    };
    let session = remora_client::Session::open(&cfg).unwrap();
    let req = remora_proto::Request::CreateSegment { id: Some(9), size: 4096, private: false, empty: false };
    session.request(req, &[]).unwrap();
    let after = http_get(port, "/metrics");
    assert!(after.contains("remora_segments{state=\"created\"} 1"), "{after}");
    assert!(after.contains("remora_sessions 1"), "{after}");
    assert!(
        after.contains("remora_dma_bytes_total 0") && after.contains("remora_sessions_opened_total"),
        "{after}"
    );
    assert!(http_get(port, "/other").starts_with("HTTP/1.1 404"));
    // Every metric the Grafana dashboard plots is one the endpoint exports.
    let dash = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../contrib/grafana/remora-nodes.json"
    ))
    .unwrap();
    for name in
        dash.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("remora_"))
    {
        assert!(
            after.contains(&format!("# TYPE {name} "))
                || after.contains(&format!("\n{name} "))
                || after.contains(&format!("# TYPE {} ", name.trim_end_matches("_total"))),
            "the dashboard plots {name}, which is not exported: {after}"
        );
    }
    drop(session);
    let _ = daemon.kill();
    let _ = daemon.wait();
}

#[test]
fn log_json_writes_one_object_a_line() {
    let dir = tempfile::Builder::new().prefix("remora-logjson").tempdir().unwrap();
    let node = 47;
    let out = Command::new(env!("CARGO_BIN_EXE_remorad"))
        .args(["--detach", "--log-json", "--node", &node.to_string(), "--runtime-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let sock = remora_proto::paths::socket_path(dir.path(), node);
    wait_until("the socket", || sock.exists());
    let log = dir.path().join(format!("node-{node}.log"));
    wait_until("the log line", || std::fs::read_to_string(&log).is_ok_and(|t| t.contains("node daemon up")));
    let pid = daemon_pid(&sock);
    assert!(Command::new("kill").arg(pid.to_string()).status().unwrap().success());
    wait_until("the socket to go", || !sock.exists());
    let text = std::fs::read_to_string(&log).unwrap();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        assert!(l.starts_with('{') && l.ends_with('}') && l.contains("\"level\""), "not a JSON line: {l}");
    }
}

/// The value of the sample `name` (with its labels) in a scrape.
fn sample(scrape: &str, name: &str) -> u64 {
    let line = scrape.lines().find(|l| l.starts_with(&format!("{name} ")));
    let v = line.unwrap_or_else(|| panic!("no {name} in {scrape}"));
    v[name.len() + 1..].trim().parse().unwrap_or_else(|_| panic!("{v}"))
}

/// One frame on a pager flow, and the answer when one is asked for (`Read`, or `Write` with
/// `ok`): the answer's header and payload.
fn flow_frame(
    s: &mut std::net::TcpStream,
    h: remora_proto::link::BulkHeader,
    data: &[u8],
) -> Option<(remora_proto::link::BulkHeader, Vec<u8>)> {
    use remora_proto::link::{BulkFrame, BulkOp, BULK_FRAME};
    use std::io::{Read as _, Write as _};
    s.write_all(zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&h))).unwrap();
    s.write_all(data).unwrap();
    if h.op == BulkOp::Write && !h.ok {
        return None;
    }
    let mut raw = [0u8; BULK_FRAME];
    s.read_exact(&mut raw).unwrap();
    let a = BulkFrame::parse(&raw).unwrap();
    let mut payload = vec![0u8; if a.op == BulkOp::Data { a.len as usize } else { 0 }];
    s.read_exact(&mut payload).unwrap();
    Some((a, payload))
}

/// The reply of `req` on `s`, with the descriptors that came with it.
fn ask(
    s: &remora_client::Session,
    req: remora_proto::Request,
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> (remora_proto::Reply, Vec<std::os::fd::OwnedFd>) {
    s.request(req, fds).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn metrics_count_scif_rma_and_dsm_traffic_of_another_host() {
    use remora_proto::link::{BulkHeader, BulkOp};
    use remora_proto::{Reply, Request, ScifRequest};
    let dir = tempfile::Builder::new().prefix("remora-metrics2").tempdir().unwrap();
    // Nodes 4 and 8 of this host, talking over TCP as nodes of two hosts do.
    let cluster = dir.path().join("cluster.toml");
    let mut text =
        "secret = \"remora-test-secret-0123456789\"\nheartbeat_ms = 50\nforce_tcp = true\n".to_string();
    for n in [4, 8] {
        text +=
            &format!("[[node]]\nid = {n}\nhost = \"127.0.0.1\"\nport = {}\n", remora_testkit::free_port());
    }
    std::fs::write(&cluster, text).unwrap();
    let ports = [remora_testkit::free_port(), remora_testkit::free_port()];
    let mut daemons = Killed(Vec::new());
    for (node, port) in [4u32, 8].into_iter().zip(ports) {
        daemons.0.push(
            Command::new(env!("CARGO_BIN_EXE_remorad"))
                .args(["--node", &node.to_string(), "--metrics", &format!("127.0.0.1:{port}"), "--cluster"])
                .arg(&cluster)
                .arg("--runtime-dir")
                .arg(dir.path())
                .spawn()
                .unwrap(),
        );
        let sock = remora_proto::paths::socket_path(dir.path(), node);
        wait_until("the socket", || sock.exists());
        wait_until("the metrics endpoint", || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    }
    let cfg = |node| remora_client::Config {
        node,
        runtime_dir: dir.path().to_path_buf(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(60),
        cluster: Some(cluster.clone()),
    };
    let map = |fd: &std::os::fd::OwnedFd| {
        remora_sys::Mapping::new(fd.as_fd(), 0, 8192, Default::default()).unwrap()
    };

    // DSM: a process of node 8 maps node 4's segment; its pager fetches a page, flushes a
    // run of changed bytes and waits for it to land.
    let owner = remora_client::Session::open(&cfg(4)).unwrap();
    let req = Request::CreateSegment { id: Some(9), size: 8192, private: false, empty: false };
    let (Reply::Segment { seg, .. }, seg_fds) = ask(&owner, req, &[]) else { panic!("no segment") };
    ask(&owner, Request::Prepare { seg, adapter: 0 }, &[]);
    ask(&owner, Request::SetAvailable { seg, adapter: 0 }, &[]);
    let seg_mem = map(&seg_fds[0]);
    seg_mem.write(0, b"home").unwrap();
    let importer = remora_client::Session::open(&cfg(8)).unwrap();
    let req = Request::Connect { node: 4, id: 9, timeout_ms: Some(10_000) };
    let (Reply::Connected { conn, .. }, _) = ask(&importer, req, &[]) else { panic!("not connected") };
    let (Reply::DsmFlow { remote, .. }, mut fds) = ask(&importer, Request::DsmFlow { conn }, &[]) else {
        panic!("no pager flow")
    };
    let mut flow = std::net::TcpStream::from(fds.pop().unwrap());
    // A flow is kept as long as its link (150 heartbeats of 50 ms), on the end its daemon
    // dialed as on the end the other accepted: not 10 s on one and unbounded on the other.
    assert_eq!(rustix::net::sockopt::tcp_user_timeout(&flow).unwrap(), 7500);
    // Keepalive after half of it (5 s at most), five probes over the rest, in whole seconds.
    assert_eq!(rustix::net::sockopt::tcp_keepidle(&flow).unwrap(), Duration::from_secs(3));
    assert_eq!(rustix::net::sockopt::tcp_keepintvl(&flow).unwrap(), Duration::from_secs(1));
    let h = |op, tag, offset, len, ok| BulkHeader { op, tag, conn: remote, offset, len, ok };
    let (a, page) = flow_frame(&mut flow, h(BulkOp::Read, 1, 0, 4096, false), &[]).unwrap();
    assert!(a.ok && page.starts_with(b"home"), "{a:?}");
    assert!(flow_frame(&mut flow, h(BulkOp::Write, 2, 100, 5, false), b"diffs").is_none());
    let (a, _) = flow_frame(&mut flow, h(BulkOp::Write, 3, 0, 0, true), &[]).unwrap();
    assert!(a.op == BulkOp::Ack && a.ok, "{a:?}");
    let mut got = [0u8; 5];
    seg_mem.read(100, &mut got).unwrap();
    assert_eq!(&got, b"diffs");

    // SCIF: an endpoint of node 8 connects to a listener of node 4, whose accepted end
    // registers a window; node 8 writes and reads it through the daemons and over its
    // pager flow.
    let scif = |node| remora_client::Session::open_scif(&cfg(node), false).unwrap();
    let listener = scif(4);
    let (Reply::ScifPort { port }, _) =
        ask(&listener, Request::Scif(ScifRequest::Bind { port: 0, privileged: false }), &[])
    else {
        panic!("not bound")
    };
    let (reader, ringer) = remora_sys::bell::pair().unwrap();
    let req = Request::Scif(ScifRequest::Listen { backlog: 1 });
    let (Reply::ScifListening { token }, _) = ask(&listener, req, &[reader.as_fd(), ringer.as_fd()]) else {
        panic!("not listening")
    };
    let cfg8 = cfg(8);
    let connecting = std::thread::spawn(move || {
        let s = remora_client::Session::open_scif(&cfg8, false).unwrap();
        let (_r, ringer) = remora_sys::bell::pair().unwrap();
        let req = Request::Scif(ScifRequest::Connect { node: 4, port, from_node: 8, from_port: 4242 });
        let (reply, fds) = ask(&s, req, &[ringer.as_fd()]);
        assert!(matches!(reply, Reply::ScifConnected { remote: true, .. }), "{reply:?}");
        (s, fds, ringer)
    });
    let accepted = scif(4);
    let (_r, ringer) = remora_sys::bell::pair().unwrap();
    let req = Request::Scif(ScifRequest::Accept { port, token, sync: true });
    let (reply, _accept_fds) = ask(&accepted, req, &[ringer.as_fd()]);
    assert!(matches!(reply, Reply::ScifConnected { .. }), "{reply:?}");
    let (near, _conn_fds, _ringer) = connecting.join().unwrap();
    let window = remora_sys::Memfd::create("window", 8192).unwrap();
    let pieces = vec![remora_proto::ScifPiece { fd: 0, memfd_offset: 0, len: 8192 }];
    let req = Request::Scif(ScifRequest::Register { offset: 0, prot: 3, fixed: true, pieces });
    let (Reply::ScifOffset { offset: 0 }, _) = ask(&accepted, req, &[window.as_fd()]) else {
        panic!("not registered")
    };
    let win_mem = remora_sys::Mapping::new(window.as_fd(), 0, 8192, Default::default()).unwrap();
    let req = Request::Scif(ScifRequest::RemoteWrite { offset: 0, data: b"rma by request".to_vec() });
    ask(&near, req, &[]);
    let (Reply::Data(d), _) = ask(&near, Request::Scif(ScifRequest::RemoteRead { offset: 0, len: 14 }), &[])
    else {
        panic!("no data")
    };
    assert_eq!(d, b"rma by request");
    let (Reply::DsmFlow { remote, .. }, mut fds) = ask(&near, Request::Scif(ScifRequest::PagerFlow), &[])
    else {
        panic!("no pager flow")
    };
    let mut flow = std::net::TcpStream::from(fds.pop().unwrap());
    let h = |op, tag, offset, len, ok| BulkHeader { op, tag, conn: remote, offset, len, ok };
    let (a, _) = flow_frame(&mut flow, h(BulkOp::Write, 1, 4096, 11, true), b"rma by flow").unwrap();
    assert!(a.op == BulkOp::Ack && a.ok, "{a:?}");
    let (a, d) = flow_frame(&mut flow, h(BulkOp::Read, 2, 4096, 11, false), &[]).unwrap();
    assert!(a.ok && d == b"rma by flow", "{a:?}");
    let mut got = [0u8; 11];
    win_mem.read(4096, &mut got).unwrap();
    assert_eq!(&got, b"rma by flow");

    // The home node counted what it served; the importer's node the flows it dialed. A
    // flow's server counts an operation once it has answered it, so the count may come a
    // moment after the answer: read the page again until every sample is there (or 5 s).
    let wanted = [
        ("remora_dsm_page_fetches_total", 1),
        ("remora_dsm_fetched_bytes_total", 4096),
        ("remora_dsm_flush_runs_total", 1),
        ("remora_dsm_flushed_bytes_total", 5),
        ("remora_scif_rma_operations_total{op=\"write\"}", 2),
        ("remora_scif_rma_bytes_total{op=\"write\"}", 14 + 11),
        ("remora_scif_rma_operations_total{op=\"read\"}", 2),
        ("remora_scif_rma_bytes_total{op=\"read\"}", 14 + 11),
        ("remora_pager_flows_served_total", 2),
        ("remora_pager_flows_dialed_total", 0),
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut home = http_get(ports[0], "/metrics");
    while wanted.iter().any(|&(name, want)| sample(&home, name) != want)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
        home = http_get(ports[0], "/metrics");
    }
    for (name, want) in wanted {
        assert_eq!(sample(&home, name), want, "{name} in {home}");
    }
    let far = http_get(ports[1], "/metrics");
    assert_eq!(sample(&far, "remora_pager_flows_dialed_total"), 2, "{far}");
    assert_eq!(sample(&far, "remora_dsm_page_fetches_total"), 0, "{far}");
    drop((flow, near, accepted, listener, importer, owner));
    drop(daemons);
}

/// Daemons a test started, killed when it ends, also when it fails (a daemon left behind
/// keeps the test's output pipe open).
struct Killed(Vec<std::process::Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for d in &mut self.0 {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

/// A request whose descriptors the daemon could not take (more than a message carries
/// here; the same as a daemon out of descriptors) is refused with the reason, and the
/// session goes on: the client keeps its resources.
#[test]
fn a_request_without_its_descriptors_is_refused_and_the_session_goes_on() {
    use remora_proto::{decode, encode, Error, Reply, Request, RequestFrame, Role, ServerMsg, MAX_FRAME};
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    let dir = tempfile::Builder::new().prefix("remora-fds").tempdir().unwrap();
    let node = 45;
    let _daemon = Killed(vec![Command::new(env!("CARGO_BIN_EXE_remorad"))
        .args(["--node", &node.to_string(), "--runtime-dir"])
        .arg(dir.path())
        .spawn()
        .unwrap()]);
    let sock = remora_proto::paths::socket_path(dir.path(), node);
    wait_until("the socket", || sock.exists());
    let fd = remora_sys::seqpacket::connect(&sock, false).unwrap();
    let reply = |fd: &OwnedFd| {
        let mut buf = vec![0u8; MAX_FRAME];
        let (n, _) = remora_sys::seqpacket::recv(fd.as_fd(), &mut buf).unwrap();
        match decode::<ServerMsg>(&buf[..n]).unwrap() {
            ServerMsg::Reply { result, .. } => result,
            other => panic!("expected a reply, got {other:?}"),
        }
    };
    let frame = |id, req| encode(&RequestFrame { id, req }).unwrap();
    let hello = Request::Hello { version: remora_proto::VERSION, role: Role::Client };
    remora_sys::seqpacket::send(fd.as_fd(), &frame(1, hello), &[]).unwrap();
    reply(&fd).unwrap();
    // A request with more descriptors than a receive takes.
    let many: Vec<OwnedFd> =
        (0..remora_sys::seqpacket::MAX_FDS + 4).map(|_| rustix::io::dup(fd.as_fd()).unwrap()).collect();
    let borrowed: Vec<BorrowedFd<'_>> = many.iter().map(|f| f.as_fd()).collect();
    let mut space = vec![std::mem::MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(32))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    assert!(control.push(SendAncillaryMessage::ScmRights(&borrowed)));
    let bytes = frame(2, Request::Status);
    sendmsg(fd.as_fd(), &[std::io::IoSlice::new(&bytes)], &mut control, SendFlags::NOSIGNAL).unwrap();
    match reply(&fd) {
        Err(Error::System(why)) => assert!(why.contains("descriptors"), "{why}"),
        other => panic!("expected the refusal, got {other:?}"),
    }
    // The same session still answers.
    remora_sys::seqpacket::send(fd.as_fd(), &frame(3, Request::Status), &[]).unwrap();
    assert!(matches!(reply(&fd), Ok(Reply::Status(_))), "the session goes on");
}

/// A connection to the peer port that drips its handshake, a byte at a time, is closed
/// once the handshake's deadline passes (it held a thread of the daemon for as long as it
/// kept dripping); the daemon goes on serving.
#[test]
fn a_dripping_handshake_is_cut_off_at_its_deadline() {
    use std::io::{Read as _, Write as _};
    let dir = tempfile::Builder::new().prefix("remora-drip").tempdir().unwrap();
    let cluster = dir.path().join("cluster.toml");
    let peer_port = remora_testkit::free_port();
    let text = format!(
        "secret = \"remora-test-secret-0123456789\"\n[[node]]\nid = 4\nhost = \"127.0.0.1\"\nport = {peer_port}\n\
         [[node]]\nid = 8\nhost = \"127.0.0.1\"\nport = {}\n",
        remora_testkit::free_port()
    );
    std::fs::write(&cluster, text).unwrap();
    let _daemon = Killed(vec![Command::new(env!("CARGO_BIN_EXE_remorad"))
        .args(["--node", "4", "--cluster"])
        .arg(&cluster)
        .arg("--runtime-dir")
        .arg(dir.path())
        .spawn()
        .unwrap()]);
    let sock = remora_proto::paths::socket_path(dir.path(), 4);
    wait_until("the socket", || sock.exists());
    wait_until("the peer port", || std::net::TcpStream::connect(("127.0.0.1", peer_port)).is_ok());
    let mut s = std::net::TcpStream::connect(("127.0.0.1", peer_port)).unwrap();
    // A frame of 64 bytes announced, then a byte every 500 ms.
    s.write_all(&64u32.to_le_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let t = Instant::now();
    let mut b = [0u8; 16];
    loop {
        assert!(t.elapsed() < Duration::from_secs(20), "the dripping handshake was never cut off");
        if s.write_all(&[0]).is_err() {
            break;
        }
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    assert!(t.elapsed() > Duration::from_secs(5), "cut off early: {:?}", t.elapsed());
    // Still serving.
    remora_client::Session::open(&remora_client::Config {
        node: 4,
        runtime_dir: dir.path().to_path_buf(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(60),
        cluster: Some(cluster.clone()),
    })
    .unwrap();
}
