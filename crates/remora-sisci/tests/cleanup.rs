//! A process that dies loses nothing of anyone else's, and its node frees all it held.
//! A client that writes garbage is disconnected; the daemon serves everyone else.

mod common;
use common::Sci as _;

use remora_proto::{Reply, Request};
use remora_sisci::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "REMORA_TEST_CLEANUP_CHILD";

fn status(h: &common::Harness, node: u32) -> remora_proto::NodeStatus {
    let s = remora_client::Session::open_control(&h.config(node)).unwrap();
    match s.request(Request::Status, &[]).unwrap().0 {
        Reply::Status(st) => *st,
        other => panic!("{other:?}"),
    }
}

/// The child: on node 8 it owns a segment (mapped), and imports node 4's segment (mapped,
/// with a sequence); then it waits to be killed.
fn child(dir: &str) {
    let mut cfg = remora_sisci::Config::from_env().unwrap();
    cfg.runtime_dir = dir.into();
    cfg.node = 8;
    cfg.daemon = Some(common::daemon_path());
    let sci = Sisci::with_config(cfg);
    let dev = Descriptor::open(&sci).unwrap();
    let own = LocalSegment::create(&dev, Some(77), 65536, CreateFlags::default()).unwrap();
    own.prepare(0).unwrap();
    own.set_available(0).unwrap();
    let _own_map = own.map(0, 65536, None, MapFlags::default()).unwrap();
    let r = RemoteSegment::connect(&dev, 4, 5, 0, None).unwrap();
    let m = r.map(0, 4096, None, MapFlags::default()).unwrap();
    let _seq = m.create_sequence().unwrap();
    m.write(0, b"child was here").unwrap();
    println!("ready");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn sigkilled_client_is_cleaned_up_within_a_second() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
        return;
    }
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let s = LocalSegment::create(&a, Some(5), 4096, CreateFlags::default()).unwrap();
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    // Node 8 must exist before the child so that our importer below can reach it.
    let b = Descriptor::open(&h.sci(8)).unwrap();

    let mut kid = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sigkilled_client_is_cleaned_up_within_a_second", "--nocapture"])
        .env(CHILD_ENV, h.dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(kid.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child died before it was ready");
    }
    // We import the child's segment too: we must be told when its owner dies.
    let theirs = RemoteSegment::connect(&b, 8, 77, 0, Some(Duration::from_secs(5))).unwrap();
    let st8 = status(&h, 8);
    assert!(st8.segments.iter().any(|x| x.id == Some(77) && x.importers == 1));
    assert!(st8.maps.len() >= 2, "the child's maps are on the books: {:?}", st8.maps);
    assert_eq!(status(&h, 4).segments.iter().find(|x| x.id == Some(5)).unwrap().importers, 1);

    kid.kill().unwrap();
    kid.wait().unwrap();
    let t = Instant::now();
    loop {
        let st8 = status(&h, 8);
        let st4 = status(&h, 4);
        let child_gone = !st8.segments.iter().any(|x| x.id == Some(77) && !x.state.contains("removed"))
            && st8.maps.is_empty()
            && st4.segments.iter().find(|x| x.id == Some(5)).unwrap().importers == 0;
        if child_gone {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(1), "not cleaned up within a second: {st8:?} {st4:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Its id is free again, and the importer is told its connection is lost (the event
    // reaches this process's event thread a moment after the books change).
    let t = Instant::now();
    while !theirs.is_lost() {
        assert!(t.elapsed() < Duration::from_secs(2), "the importer was not told its connection is lost");
        std::thread::sleep(Duration::from_millis(5));
    }
    let again = LocalSegment::create(&b, Some(77), 4096, CreateFlags::default()).unwrap();
    again.remove().unwrap();
    // The child's store into our segment is still there: nothing of ours was lost.
    let mut buf = [0u8; 14];
    s.map(0, 4096, None, MapFlags::default()).unwrap().read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"child was here");
}

#[test]
fn garbage_on_the_socket_closes_only_that_session() {
    let h = common::Harness::new();
    let dev = Descriptor::open(&h.sci(4)).unwrap();
    let s = LocalSegment::create(&dev, Some(9), 4096, CreateFlags::default()).unwrap();
    let path = remora_proto::paths::socket_path(h.dir.path(), 4);
    for junk in [&b"\x00\x01garbage"[..], b"RM\x01\x00\xff\xff\xff\xff\xff", b"RM\x63\x00", b""] {
        let fd = remora_sys::seqpacket::connect(&path, false).unwrap();
        use std::os::fd::AsFd;
        let _ = remora_sys::seqpacket::send(fd.as_fd(), junk, &[]);
        let mut buf = [0u8; 256];
        // The daemon hangs up on us (an empty datagram waits for the hello timeout); a
        // frame that names another protocol version first gets a refusal in the daemon's.
        if !junk.is_empty() {
            let (mut n, _) = remora_sys::seqpacket::recv(fd.as_fd(), &mut buf).unwrap();
            if junk.starts_with(b"RM") && n > 0 {
                assert!(buf.starts_with(b"RM"), "a refusal is a frame: {:?}", &buf[..n]);
                n = remora_sys::seqpacket::recv(fd.as_fd(), &mut buf).unwrap().0;
            }
            assert_eq!(n, 0, "daemon should close a session that sent {junk:?}");
        }
    }
    // Garbage after a valid hello, too: the session is closed and what it held is freed.
    {
        use std::os::fd::AsFd;
        let fd = remora_sys::seqpacket::connect(&path, false).unwrap();
        let hello = remora_proto::RequestFrame {
            id: 1,
            req: Request::Hello { version: remora_proto::VERSION, role: remora_proto::Role::Client },
        };
        remora_sys::seqpacket::send(fd.as_fd(), &remora_proto::encode(&hello).unwrap(), &[]).unwrap();
        let mut buf = vec![0u8; remora_proto::MAX_FRAME];
        let (n, _) = remora_sys::seqpacket::recv(fd.as_fd(), &mut buf).unwrap();
        assert!(n > 0, "hello answered");
        let create = remora_proto::RequestFrame {
            id: 2,
            req: Request::CreateSegment { id: Some(123), size: 4096, private: false, empty: false },
        };
        remora_sys::seqpacket::send(fd.as_fd(), &remora_proto::encode(&create).unwrap(), &[]).unwrap();
        let (n, _) = remora_sys::seqpacket::recv(fd.as_fd(), &mut buf).unwrap();
        assert!(n > 0, "create answered");
        remora_sys::seqpacket::send(fd.as_fd(), b"RM\x01\x00\x63garbage", &[]).unwrap();
        let (n, _) = remora_sys::seqpacket::recv(fd.as_fd(), &mut buf).unwrap();
        assert_eq!(n, 0, "daemon closes a session that sends garbage after hello");
        // Its segment id is free again.
        LocalSegment::create(&dev, Some(123), 4096, CreateFlags::default()).unwrap().remove().unwrap();
    }
    // Everyone else is still served.
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    let r = RemoteSegment::connect(&dev, 4, 9, 0, Some(Duration::from_secs(1))).unwrap();
    assert_eq!(r.size(), 4096);
}

const DMA_CHILD_ENV: &str = "REMORA_TEST_DMA_CHILD";

/// The child: on node 8, a DMA queue pushing 64 MiB into node 4's segment 50, over and
/// over, until it is killed.
fn dma_child(dir: &str) {
    let mut cfg = remora_sisci::Config::from_env().unwrap();
    cfg.runtime_dir = dir.into();
    cfg.node = 8;
    cfg.daemon = Some(common::daemon_path());
    let sci = Sisci::with_config(cfg);
    let dev = Descriptor::open(&sci).unwrap();
    let src = LocalSegment::create(&dev, Some(51), 64 << 20, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    src.map(0, 64 << 20, None, MapFlags::default()).unwrap().write(0, &vec![0xee; 64 << 20]).unwrap();
    let r = RemoteSegment::connect(&dev, 4, 50, 0, None).unwrap();
    let q = DmaQueue::create(&dev, 0, 1).unwrap();
    println!("ready");
    loop {
        q.start(&src, &r, 0, 64 << 20, 0, DmaFlags::default(), None).unwrap();
        let _ = q.wait(None);
    }
}

#[test]
fn killed_during_dma_frees_the_queue_and_touches_nothing_else() {
    if let Ok(dir) = std::env::var(DMA_CHILD_ENV) {
        dma_child(&dir);
        return;
    }
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let target = LocalSegment::create(&a, Some(50), 64 << 20, CreateFlags::default()).unwrap();
    target.prepare(0).unwrap();
    target.set_available(0).unwrap();
    let bystander = LocalSegment::create(&a, Some(52), 1 << 20, CreateFlags::default()).unwrap();
    let bm = bystander.map(0, 1 << 20, None, MapFlags::default()).unwrap();
    bm.write(0, &vec![0x11; 1 << 20]).unwrap();
    let mut kid = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "killed_during_dma_frees_the_queue_and_touches_nothing_else", "--nocapture"])
        .env(DMA_CHILD_ENV, h.dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(kid.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child died before it was ready");
    }
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(status(&h, 8).dma_queues.len(), 1);
    kid.kill().unwrap();
    kid.wait().unwrap();
    let t = Instant::now();
    while !status(&h, 8).dma_queues.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(1), "queue not freed within a second");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The bystander segment is untouched; the target holds only the child's bytes or zeros.
    let mut got = vec![0u8; 1 << 20];
    bm.read(0, &mut got).unwrap();
    assert!(got.iter().all(|&b| b == 0x11));
    let tm = target.map(0, 64 << 20, None, MapFlags::default()).unwrap();
    let mut big = vec![0u8; 64 << 20];
    tm.read(0, &mut big).unwrap();
    assert!(big.iter().all(|&b| b == 0xee || b == 0));
    // The node still serves DMA.
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let src = LocalSegment::create(&b, Some(53), 4096, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let r = RemoteSegment::connect(&b, 4, 50, 0, None).unwrap();
    let q = DmaQueue::create(&b, 0, 1).unwrap();
    q.start(&src, &r, 0, 4096, 0, DmaFlags { read: false, wait: true }, None).unwrap();
    assert_eq!(q.state(), DmaState::Done);
}

#[test]
fn a_dead_dma_engine_ends_the_wait_in_error() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let target = LocalSegment::create(&a, Some(1), 64 << 20, CreateFlags::default()).unwrap();
    target.prepare(0).unwrap();
    target.set_available(0).unwrap();
    let src = LocalSegment::create(&a, Some(2), 64 << 20, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let r = RemoteSegment::connect(&a, 4, 1, 0, None).unwrap();
    let q = DmaQueue::create(&a, 0, 1).unwrap();
    let pid = status(&h, 4).pid;
    // Keep posting until one is caught in flight, then kill the engine.
    q.start(&src, &r, 0, 64 << 20, 0, DmaFlags::default(), None).unwrap();
    assert!(std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap().success());
    let t = Instant::now();
    let end = q.wait(None).unwrap();
    assert!(matches!(end, DmaState::Done | DmaState::Error), "{end:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "the wait outlived the engine by {:?}", t.elapsed());
    // Further calls report the dead daemon instead of hanging.
    assert!(q.start(&src, &r, 0, 4096, 0, DmaFlags { read: false, wait: true }, None).is_err());
}
