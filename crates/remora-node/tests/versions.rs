//! A library and a daemon of different protocol versions: each side names both versions
//! instead of a closed session ("node not responding"), so a person knows to stop the old
//! daemon.

use remora_client::{ClientError, Config, Session};
use remora_proto::{decode, Error, ServerMsg, MAGIC, VERSION};
use std::os::fd::AsFd;
use std::process::Command;
use std::time::{Duration, Instant};

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A frame header of another version, and a body no version would accept.
fn foreign_frame() -> Vec<u8> {
    let mut f = MAGIC.to_vec();
    f.extend_from_slice(&(VERSION + 1).to_le_bytes());
    f.extend_from_slice(&[0xff; 8]);
    f
}

#[test]
fn the_daemon_answers_a_client_of_another_version_with_both_versions() {
    let dir = tempfile::Builder::new().prefix("remora-versions").tempdir().unwrap();
    let node = 47;
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_remorad"))
        .args(["--node", &node.to_string(), "--runtime-dir"])
        .arg(dir.path())
        .spawn()
        .unwrap();
    let sock = remora_proto::paths::socket_path(dir.path(), node);
    wait_until("the socket", || sock.exists());
    let fd = remora_sys::seqpacket::connect(&sock, false).unwrap();
    remora_sys::seqpacket::send(fd.as_fd(), &foreign_frame(), &[]).unwrap();
    let mut buf = vec![0u8; 4096];
    let (n, _) = remora_sys::seqpacket::recv(fd.as_fd(), &mut buf).unwrap();
    match decode::<ServerMsg>(&buf[..n]).unwrap() {
        ServerMsg::Reply { result: Err(Error::Protocol(why)), .. } => {
            let (theirs, ours) = (format!("{}", VERSION + 1), format!("{VERSION}"));
            assert!(why.contains(&theirs) && why.contains(&ours), "{why}");
        }
        other => panic!("expected a refusal naming the versions, got {other:?}"),
    }
    // Then it closes that connection, and serves others as before.
    let (n, _) = remora_sys::seqpacket::recv(fd.as_fd(), &mut buf).unwrap_or((0, vec![]));
    assert_eq!(n, 0, "the connection closes after the refusal");
    let cfg = Config {
        node,
        runtime_dir: dir.path().to_path_buf(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(30),
        cluster: None,
    };
    Session::open(&cfg).expect("a client of this version is still served");
    let _ = daemon.kill();
    let _ = daemon.wait();
}

#[test]
fn the_library_names_a_daemon_of_another_version() {
    let dir = tempfile::Builder::new().prefix("remora-versions").tempdir().unwrap();
    let node = 48;
    let sock = remora_proto::paths::socket_path(dir.path(), node);
    // A stand-in for a daemon of a newer build: it answers every frame in its version.
    let listener = remora_sys::seqpacket::listen(&sock).unwrap();
    // The listener is non-blocking (made for the daemon's reactor): the stand-in waits in
    // accept until the library connects, however the threads are scheduled.
    remora_sys::seqpacket::set_nonblocking(listener.as_fd(), false).unwrap();
    let server = std::thread::spawn(move || {
        let c = remora_sys::seqpacket::accept(listener.as_fd()).unwrap();
        // Accepted sockets are non-blocking (made for the daemon's reactor); wait here.
        remora_sys::seqpacket::set_nonblocking(c.as_fd(), false).unwrap();
        let mut buf = vec![0u8; 4096];
        let _ = remora_sys::seqpacket::recv(c.as_fd(), &mut buf).unwrap();
        remora_sys::seqpacket::send(c.as_fd(), &foreign_frame(), &[]).unwrap();
    });
    let cfg = Config {
        node,
        runtime_dir: dir.path().to_path_buf(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(30),
        cluster: None,
    };
    match Session::open(&cfg) {
        Err(e @ ClientError::Version { node: 48, daemon, library }) => {
            assert_eq!((daemon, library), (VERSION + 1, VERSION));
            let said = e.to_string();
            assert!(said.contains("stop it"), "the message says what to do: {said}");
        }
        Err(other) => panic!("expected a version error, got {other}"),
        Ok(_) => panic!("a session with a daemon of another version"),
    }
    server.join().unwrap();
}
