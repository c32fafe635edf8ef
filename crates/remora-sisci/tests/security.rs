//! Security checks of issue 18.4, as tests: a peer with the wrong cluster secret is
//! refused and logged; nothing secret reaches a log, even at trace level; a client reaches
//! nothing outside what it connected to (every edge of a segment, offsets near `u64::MAX`),
//! through the Rust API and through raw client frames, on this node and over TCP; a
//! read-only map refuses stores; SCIF ports below 1024 need root; a process of another user
//! cannot reach a node unless its runtime directory is shared (sticky and world-writable,
//! as `/tmp`). (The MMU side of read-only maps,
//! a store through the pointer killing the process with SIGSEGV, is `tests/c/readonly_fault.c`,
//! run by `remora-cli`'s `c_programs` test.)
//!
//! The checks that need another user run this test binary again as `nobody` (setuid by
//! `Command::uid`), which only root can do; elsewhere they say why they skip.

mod common;
use common::Sci as _;

use remora_client::{ClientError, Session};
use remora_proto::{Error as Proto, Reply, Request, ScifRequest};
use remora_sisci::*;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;
/// Set in the child run as `nobody`: which check it plays, and the runtime directory.
const ROLE: &str = "REMORA_SECURITY_ROLE";
const DIR: &str = "REMORA_SECURITY_DIR";

fn is_root() -> bool {
    remora_sys::is_root()
}

/// This process's effective user (the owner of its `/proc` entry).
fn euid() -> u32 {
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap())
}

/// Run check `role` in a child of this test binary as `nobody`; whether it passed.
fn as_nobody(role: &str, dir: &Path) -> bool {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["child_role", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DIR, dir)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    eprintln!(
        "child {role}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.status.success()
}

/// The checks a child plays as `nobody` (a no-op in an ordinary run).
#[test]
fn child_role() {
    let (Ok(role), Ok(dir)) = (std::env::var(ROLE), std::env::var(DIR)) else { return };
    assert_eq!(euid(), NOBODY);
    let cfg = |node| remora_client::Config {
        node,
        runtime_dir: dir.clone().into(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(60),
        cluster: None,
    };
    match role.as_str() {
        "private" => {
            let sock = remora_proto::paths::socket_path(Path::new(&dir), 4);
            let e = remora_sys::seqpacket::connect(&sock, false).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(13), "a private node's socket: {e}");
            assert!(Session::open_control(&cfg(4)).is_err());
        }
        "scif_port" => {
            let s = Session::open_scif(&cfg(4), false).unwrap();
            let bind = |port| s.request(Request::Scif(ScifRequest::Bind { port, privileged: true }), &[]);
            match bind(80) {
                Err(ClientError::Daemon(Proto::Access)) => {}
                other => panic!("port 80 as nobody: {other:?}"),
            }
            assert!(matches!(bind(2080), Ok((Reply::ScifPort { port: 2080 }, _))));
        }
        other => panic!("unknown role {other}"),
    }
    println!("{role}: as expected");
}

#[test]
fn another_user_cannot_reach_a_node_unless_its_runtime_directory_is_shared() {
    if !is_root() {
        eprintln!("skipping: setting another user's id needs root");
        return;
    }
    let h = common::Harness::new();
    let _d = Descriptor::open(&h.sci(4)).unwrap();
    assert!(as_nobody("private", h.runtime_dir()), "nobody reached a private node");
}

#[test]
fn scif_ports_below_1024_need_root() {
    if !is_root() {
        eprintln!("skipping: setting another user's id needs root");
        return;
    }
    // A runtime directory shared like /tmp (sticky, world-writable): the node lets every
    // local user in, and the personalities decide what each may do.
    let h = common::Harness::new();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(h.runtime_dir(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let _d = Descriptor::open(&h.sci(4)).unwrap();
    let root = Session::open_scif(&h.config(4), false).unwrap();
    let r = root.request(Request::Scif(ScifRequest::Bind { port: 81, privileged: true }), &[]);
    assert!(matches!(r, Ok((Reply::ScifPort { port: 81 }, _))), "root binds port 81: {r:?}");
    assert!(as_nobody("scif_port", h.runtime_dir()), "nobody bound a port below 1024");
}

/// Every out-of-bounds map, access and transfer of an 8 KiB segment, and the segment's
/// bytes untouched by them.
fn bounds(home: &LocalSegment, remote: &RemoteSegment, raw: &Session, conn: u64) {
    const SIZE: usize = 8192;
    let edges: [(usize, usize); 7] = [
        (0, SIZE + 1),
        (SIZE, 1),
        (SIZE - 1, 2),
        (usize::MAX - 1, 2),
        (4096, usize::MAX),
        (usize::MAX, usize::MAX),
        (SIZE + 4096, 4096),
    ];
    for (off, len) in edges {
        assert!(remote.map(off, len, None, MapFlags::default()).is_err(), "map of {off}+{len}");
        assert!(home.map(off, len, None, MapFlags::default()).is_err(), "local map of {off}+{len}");
    }
    let m = remote.map(4096, 4096, None, MapFlags::default()).unwrap();
    let mut b = [0u8; 2];
    assert!(m.read(4095, &mut b).is_err() && m.read(usize::MAX - 1, &mut b).is_err());
    assert!(m.write(4095, b"xy").is_err() && m.write(usize::MAX - 1, b"xy").is_err());
    let ro = remote.map(0, 4096, None, MapFlags { readonly: true }).unwrap();
    assert_eq!(ro.write(0, b"x").unwrap_err(), Error::IllegalOperation);

    let d = home.descriptor();
    let src = LocalSegment::create(d, None, SIZE, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let q = DmaQueue::create(d, 0, 4).unwrap();
    let flags = DmaFlags { read: false, wait: true };
    for (loff, len, roff) in [
        (0, SIZE + 1, 0),
        (0, 2, SIZE - 1),
        (SIZE - 1, 2, 0),
        (0, 2, usize::MAX - 1),
        (usize::MAX - 1, 2, 0),
        (0, usize::MAX, 0),
    ] {
        assert!(q.start(&src, remote, loff, len, roff, flags, None).is_err(), "DMA {loff}/{roff}+{len}");
    }

    // Raw frames, as a client that skips the library's checks would send them.
    let read = |offset, len| raw.request(Request::SegRead { conn, offset, len }, &[]);
    let write = |offset, data: &[u8]| {
        raw.request(Request::SegWrite { conn, runs: vec![(offset, data.to_vec())] }, &[])
    };
    for (off, len) in
        [(SIZE as u64, 1), (SIZE as u64 - 1, 2), (u64::MAX - 1, 2), (u64::MAX, 1), (0, u32::MAX)]
    {
        assert!(read(off, len).is_err(), "raw read {off}+{len}");
        if off > 0 {
            assert!(write(off, &vec![0xee; (len as usize).min(4096)]).is_err(), "raw write {off}+{len}");
        }
    }
    assert!(write(SIZE as u64 - 4095, &[0xee; 4096]).is_err(), "raw write over the end");
    assert!(raw.request(Request::SegRead { conn: conn + 1000, offset: 0, len: 1 }, &[]).is_err());
    assert!(matches!(read(SIZE as u64 - 2, 2), Ok((Reply::Data(d), _)) if d.len() == 2), "the last bytes");

    let mut all = vec![0u8; SIZE];
    home.map(0, SIZE, None, MapFlags::default()).unwrap().read(0, &mut all).unwrap();
    assert!(all.iter().all(|&b| b == 0x5a), "bytes changed by a refused access");
}

fn bounds_between(h: &common::Harness, home_node: u32, importer: u32) {
    let a = Descriptor::open(&h.sci(home_node)).unwrap();
    let b = Descriptor::open(&h.sci(importer)).unwrap();
    let home = LocalSegment::create(&a, Some(5), 8192, CreateFlags::default()).unwrap();
    home.map(0, 8192, None, MapFlags::default()).unwrap().write(0, &[0x5a; 8192]).unwrap();
    home.prepare(0).unwrap();
    home.set_available(0).unwrap();
    let remote = RemoteSegment::connect(&b, home_node, 5, 0, Some(Duration::from_secs(10))).unwrap();
    let raw = Session::open(&h.config(importer)).unwrap();
    let req = Request::Connect { node: home_node, id: 5, timeout_ms: Some(10_000) };
    let Ok((Reply::Connected { conn, size: 8192 }, _)) = raw.request(req, &[]) else { panic!("raw connect") };
    // The DMA source must be the importer's: transfers go from its node.
    let _ = &b;
    bounds(&home, &remote, &raw, conn);
}

#[test]
fn no_access_outside_a_segment_on_this_node() {
    let h = common::Harness::new();
    bounds_between(&h, 4, 4);
}

#[test]
fn no_access_outside_a_segment_over_tcp() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    bounds_between(&h, 4, 8);
}

/// A daemon of node `node` with the cluster file `cluster`, logging at trace level into
/// `log`.
fn daemon(dir: &Path, node: u32, cluster: &Path, log: &Path) -> Child {
    let sock = remora_proto::paths::socket_path(dir, node);
    let _ = std::fs::remove_file(&sock);
    let c = Command::new(remora_testkit::daemon_path())
        .args(["--node", &node.to_string(), "--cluster"])
        .arg(cluster)
        .arg("--runtime-dir")
        .arg(dir)
        .env("REMORA_LOG", "trace")
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !sock.exists() {
        assert!(t.elapsed() < Duration::from_secs(10), "node {node} never came up");
        std::thread::sleep(Duration::from_millis(10));
    }
    c
}

fn cluster_file(path: &Path, secret: &str, ports: [u16; 2]) {
    let mut text = format!("secret = \"{secret}\"\nheartbeat_ms = 50\nforce_tcp = true\n");
    for (n, port) in [4, 8].into_iter().zip(ports) {
        text += &format!("[[node]]\nid = {n}\nhost = \"127.0.0.1\"\nport = {port}\n");
    }
    std::fs::write(path, text).unwrap();
}

fn stop(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

#[test]
fn a_wrong_secret_is_refused_and_logged_and_no_secret_is_ever_logged() {
    const GOOD: &str = "remora-security-secret-GOOD-6f1d2c";
    const BAD: &str = "remora-security-secret-BAD-93ab0e";
    let dir = tempfile::Builder::new().prefix("remora-security").tempdir().unwrap();
    let d = dir.path();
    let ports = [remora_testkit::free_port(), remora_testkit::free_port()];
    let (good, bad) = (d.join("good.toml"), d.join("bad.toml"));
    cluster_file(&good, GOOD, ports);
    cluster_file(&bad, BAD, ports);
    let (log4, log8) = (d.join("n4.log"), d.join("n8.log"));
    let cfg = |node, cluster: &Path| remora_client::Config {
        node,
        runtime_dir: d.to_path_buf(),
        daemon: None,
        spawn: false,
        idle_exit: Duration::from_secs(60),
        cluster: Some(cluster.to_path_buf()),
    };

    // Node 8 has the wrong secret: node 4 refuses it, both say so, nothing connects.
    let n4 = daemon(d, 4, &good, &log4);
    let n8 = daemon(d, 8, &bad, &log8);
    let a = Descriptor::open(&Sisci::with_config(cfg(4, &good))).unwrap();
    let seg = LocalSegment::create(&a, Some(6), 8192, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    let b = Descriptor::open(&Sisci::with_config(cfg(8, &bad))).unwrap();
    let t = Instant::now();
    assert!(RemoteSegment::connect(&b, 4, 6, 0, Some(Duration::from_secs(2))).is_err());
    assert!(t.elapsed() < Duration::from_secs(10));
    let t = Instant::now();
    while !std::fs::read_to_string(&log4).unwrap().contains("failed authentication") {
        assert!(t.elapsed() < Duration::from_secs(10), "node 4 never logged the refusal");
        std::thread::sleep(Duration::from_millis(20));
    }
    let l8 = std::fs::read_to_string(&log8).unwrap();
    assert!(l8.contains("failed authentication"), "node 8 never logged the refusal: {l8}");
    drop((seg, a, b));
    stop(n8);
    stop(n4);

    // The right secret: a session of traffic at trace level (connect, DSM map, DMA,
    // interrupts).
    let n4 = daemon(d, 4, &good, &log4);
    let n8 = daemon(d, 8, &good, &log8);
    let a = Descriptor::open(&Sisci::with_config(cfg(4, &good))).unwrap();
    let b = Descriptor::open(&Sisci::with_config(cfg(8, &good))).unwrap();
    let seg = LocalSegment::create(&a, Some(6), 8192, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    let remote = RemoteSegment::connect(&b, 4, 6, 0, Some(Duration::from_secs(10))).unwrap();
    let m = remote.map(0, 8192, None, MapFlags::default()).unwrap();
    m.write(0, b"traffic").unwrap();
    m.unmap().unwrap();
    let src = LocalSegment::create(&b, None, 8192, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let q = DmaQueue::create(&b, 0, 1).unwrap();
    q.start(&src, &remote, 0, 8192, 0, DmaFlags { read: false, wait: true }, None).unwrap();
    let intr = Interrupt::create(&a, 0, None, false, None).unwrap();
    RemoteInterrupt::connect(&b, 4, 0, intr.number(), Some(Duration::from_secs(5)))
        .unwrap()
        .trigger()
        .unwrap();
    intr.wait(Some(Duration::from_secs(5))).unwrap();
    drop((q, src, remote, seg, intr, a, b));
    stop(n8);
    stop(n4);

    // Neither secret in any form: as text, as Debug prints bytes, or in hex.
    let logs = std::fs::read_to_string(&log4).unwrap() + &std::fs::read_to_string(&log8).unwrap();
    assert!(logs.contains("DEBUG") && logs.contains("link Down -> Up"), "trace logs were written: {logs}");
    for secret in [GOOD, BAD] {
        let bytes = format!("{:?}", secret.as_bytes());
        let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
        let tail = &secret[secret.len() - 6..];
        for form in [secret, &bytes[1..bytes.len() - 1], &hex, tail] {
            assert!(!logs.contains(form), "a log holds the secret ({form})");
        }
    }
}
