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
