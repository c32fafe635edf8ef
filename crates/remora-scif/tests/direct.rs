//! SCIF connections between two hosts (nodes joined over TCP on loopback) whose messages
//! go over the two processes' own TCP flow: data intact both ways and larger than any
//! socket buffer, the end of a peer (closed, its handles dropped as at an exit, or its
//! process killed) mid-stream, and no descriptor left behind by `scif_close`. The relay they fall back to
//! is tested in `direct_off.rs`.

use remora_scif::*;
use std::time::{Duration, Instant};

mod common;
use common::{last_words, over_tcp, pair, wait_for_link};

/// Start nodes 8 and 4 and wait until 4 reaches 8 over the link.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The descriptors open in node `node`'s daemon.
fn daemon_fds(h: &remora_testkit::Harness, node: u32) -> usize {
    let ctl = remora_client::Session::open_control(&h.config(node)).unwrap();
    let pid = match ctl.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.pid,
        other => panic!("unexpected {other:?}"),
    };
    drop(ctl);
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| ((i as u64 * 7 + seed as u64) % 251) as u8).collect()
}

#[test]
fn direct_flows_carry_messages_both_ways_and_scif_close_frees_every_descriptor() {
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    // A first pair sets up what a process keeps (sessions, the event thread).
    let (c, s) = pair(&h, 4, 8);
    c.close().unwrap();
    s.close().unwrap();
    drop((c, s));
    std::thread::sleep(Duration::from_millis(100));
    let before = open_fds();
    let daemons_before = [daemon_fds(&h, 4), daemon_fds(&h, 8)];
    for round in 0..3u8 {
        let (c, s) = pair(&h, 4, 8);
        assert!(c.is_direct() && s.is_direct(), "the messages take a flow of their own");
        for i in 0u64..100 {
            c.send(&i.to_le_bytes(), true).unwrap();
            let mut b = [0u8; 8];
            assert_eq!(s.recv(&mut b, true).unwrap(), 8);
            assert_eq!(u64::from_le_bytes(b), i);
            s.send(&b, true).unwrap();
            assert_eq!(c.recv(&mut b, true).unwrap(), 8);
            assert_eq!(u64::from_le_bytes(b), i);
        }
        // 24 MiB each way at once, far beyond both socket buffers: blocking sends and
        // receives resume after every partial write and read.
        let (up, down) = (pattern(24 << 20, round), pattern(24 << 20, round + 1));
        let (s2, up2, down2) = (s.clone(), up.clone(), down.clone());
        let t = std::thread::spawn(move || {
            let s3 = s2.clone();
            let len = down2.len();
            let w = std::thread::spawn(move || s3.send(&down2, true).unwrap());
            let mut got = vec![0u8; up2.len()];
            assert_eq!(s2.recv(&mut got, true).unwrap(), got.len());
            assert!(got == up2, "intact, in order");
            assert_eq!(w.join().unwrap(), len);
        });
        let c2 = c.clone();
        let w = std::thread::spawn(move || c2.send(&up, true).unwrap());
        let mut got = vec![0u8; down.len()];
        assert_eq!(c.recv(&mut got, true).unwrap(), got.len());
        assert!(got == down, "intact, in order");
        assert_eq!(w.join().unwrap(), 24 << 20);
        t.join().unwrap();
        // Non-blocking receives take what is there, and nothing is not an error.
        let mut b = [0u8; 16];
        assert_eq!(s.recv(&mut b, false).unwrap(), 0);
        c.send(b"polled", true).unwrap();
        let r = remora_sys::bell::wait(s.as_fd(), false, Some(Duration::from_secs(5))).unwrap();
        assert!(r.readable && !r.hung_up, "readable when a message waits");
        let mut n = 0;
        while n < 6 {
            n += s.recv(&mut b[n..6], false).unwrap();
        }
        assert_eq!(&b[..6], b"polled");
        // A close reaches the peer after the data sent before it; then ECONNRESET and
        // hang-up, and sends fail.
        last_words(&c, &s);
        assert_eq!(s.send(b"x", true).unwrap_err(), Error::Reset);
        assert_eq!(c.send(b"x", true).unwrap_err(), Error::BadEndpoint);
        s.close().unwrap();
        drop((c, s));
    }
    // Every descriptor the connections used is gone (the daemons' sessions close with a
    // moment's delay).
    let t0 = Instant::now();
    while open_fds() > before {
        assert!(t0.elapsed() < Duration::from_secs(5), "{} descriptors open, {before} before", open_fds());
        std::thread::sleep(Duration::from_millis(20));
    }
    // And every one the daemons held for them (their duplicates of the flows included).
    let t0 = Instant::now();
    loop {
        let now = [daemon_fds(&h, 4), daemon_fds(&h, 8)];
        if now[0] <= daemons_before[0] && now[1] <= daemons_before[1] {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "daemons hold {now:?} descriptors, {daemons_before:?} before"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The peer's process goes mid-stream (every handle dropped without a close, as at an
/// exit: its sessions end and its descriptors close): a sender blocked in a large send and
/// a receiver blocked in a receive both get ECONNRESET (or the count moved before it), and
/// nothing hangs.
#[test]
fn a_peer_gone_mid_stream_resets_blocked_senders_and_receivers() {
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    // A sender blocked on a receiver that stops reading and goes.
    let (c, s) = pair(&h, 4, 8);
    assert!(c.is_direct() && s.is_direct());
    let big = pattern(64 << 20, 3);
    let c2 = c.clone();
    let t = std::thread::spawn(move || c2.send(&big, true));
    let mut first = vec![0u8; 1 << 20];
    assert_eq!(s.recv(&mut first, true).unwrap(), first.len());
    assert!(first == pattern(64 << 20, 3)[..1 << 20]);
    drop(s);
    match t.join().unwrap() {
        Ok(n) => assert!(n < 64 << 20, "all of it sent to nobody"),
        Err(e) => assert_eq!(e, Error::Reset),
    }
    assert_eq!(c.send(b"x", true).unwrap_err(), Error::Reset);
    // A receiver blocked in the middle of a message whose sender goes.
    let (c, s) = pair(&h, 4, 8);
    assert!(c.is_direct() && s.is_direct());
    c.send(b"half", true).unwrap();
    let s2 = s.clone();
    let t = std::thread::spawn(move || {
        let mut b = [0u8; 8];
        let r = s2.recv(&mut b, true);
        (r, b)
    });
    std::thread::sleep(Duration::from_millis(100));
    drop(c);
    let (r, b) = t.join().unwrap();
    assert_eq!(r.unwrap(), 4, "the bytes that came, then the end");
    assert_eq!(&b[..4], b"half");
    let mut b = [0u8; 8];
    assert_eq!(s.recv(&mut b, true).unwrap_err(), Error::Reset);
    let r = remora_sys::bell::wait(s.as_fd(), false, Some(Duration::from_secs(5))).unwrap();
    assert!(r.hung_up);
}

/// A thread blocked in a receive on the direct flow wakes when its own endpoint is closed.
#[test]
fn close_wakes_a_receiver_blocked_on_the_flow() {
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(s.is_direct());
    let s2 = s.clone();
    let t = std::thread::spawn(move || {
        let mut b = [0u8; 8];
        s2.recv(&mut b, true)
    });
    std::thread::sleep(Duration::from_millis(150));
    s.close().unwrap();
    assert_eq!(t.join().unwrap().unwrap_err(), Error::BadEndpoint);
    let mut b = [0u8; 1];
    assert_eq!(c.recv(&mut b, true).unwrap_err(), Error::Reset);
}

/// The sliced waits the C library makes (so that a cancelled thread ends between two) on a
/// direct flow: a receive or a send with nothing to move returns within its slice (plus
/// the flow's own blocking slice) with what it moved, the stream stays whole, and the held
/// side keeps other threads' receives out until it is let go.
#[test]
fn sliced_receives_and_sends_on_the_flow_return_in_time_and_lose_nothing() {
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(c.is_direct() && s.is_direct());
    let mut b = [0u8; 8];
    let t = std::time::Instant::now();
    let r = s.hold_recv().unwrap();
    assert_eq!(r.recv_for(&mut b, Duration::from_millis(50)).unwrap(), 0, "nothing came");
    assert!(t.elapsed() < Duration::from_secs(2), "the slice ended the wait: {:?}", t.elapsed());
    // Part of a message, then a slice ends with what came; the rest follows in order.
    c.send(&[1, 2, 3], true).unwrap();
    assert_eq!(r.recv_for(&mut b, Duration::from_millis(50)).unwrap(), 3);
    c.send(&[4, 5, 6, 7, 8], true).unwrap();
    assert_eq!(r.recv_for(&mut b[3..], Duration::from_millis(50)).unwrap(), 5);
    assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
    // While held, another thread's receive waits for the held side to be let go.
    let s2 = s.clone();
    let other = std::thread::spawn(move || {
        let mut one = [0u8; 1];
        s2.recv(&mut one, true).map(|_| one[0])
    });
    c.send(&[42], true).unwrap();
    assert_eq!(r.recv_for(&mut b[..1], Duration::from_millis(200)).unwrap(), 1, "the holder takes it");
    assert_eq!(b[0], 42);
    drop(r);
    c.send(&[43], true).unwrap();
    assert_eq!(other.join().unwrap().unwrap(), 43, "the other receive ran once the side was let go");
    // A sender whose peer does not read fills the socket, then a slice ends its wait.
    let chunk = vec![9u8; 1 << 20];
    let t = std::time::Instant::now();
    let mut sent = 0;
    let w = c.hold_send().unwrap();
    loop {
        let n = w.send_for(&chunk, Duration::from_millis(50)).unwrap();
        sent += n;
        if n < chunk.len() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "the socket never filled");
    }
    drop(w);
    let mut got = vec![0u8; sent];
    assert_eq!(s.recv(&mut got, true).unwrap(), sent, "every byte queued arrives");
    assert!(got.iter().all(|&x| x == 9));
}

/// A connect in the background (`O_NONBLOCK`) keeps the endpoint's file, so an epoll set
/// that watched the descriptor before the connect still hears of its messages: such a
/// connection stays on the relays.
#[test]
fn a_background_connect_keeps_the_file_an_epoll_set_watches() {
    use common::ScifOf;
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let l = Endpoint::open(&h.scif(8)).unwrap();
    let port = l.bind(0).unwrap();
    l.listen(2).unwrap();
    let c = Endpoint::open(&h.scif(4)).unwrap();
    remora_sys::seqpacket::set_nonblocking(c.as_fd(), true).unwrap();
    let set = remora_sys::poller::Poller::new().unwrap();
    set.add(c.as_fd(), 7).unwrap();
    let dst = PortId { node: 8, port };
    assert_eq!(c.connect(dst).unwrap_err(), Error::InProgress);
    let (s, _) = l.accept(true).unwrap();
    let r = remora_sys::bell::wait(c.as_fd(), true, Some(Duration::from_secs(10))).unwrap();
    assert!(r.writable, "writable once connected");
    assert_eq!(c.connect(dst).unwrap(), c.local_port().unwrap().port);
    assert!(!c.is_direct() && !s.is_direct(), "a background connect keeps to the relays");
    s.send(b"hello", true).unwrap();
    assert_eq!(set.wait(Some(Duration::from_secs(10))).unwrap(), vec![7], "the epoll set hears of it");
    let mut b = [0u8; 5];
    let mut n = 0;
    while n < 5 {
        n += c.recv(&mut b[n..], true).unwrap();
    }
    assert_eq!(&b, b"hello");
}

/// The other process of [`a_killed_peer_process_resets_its_blocked_sender`]: this test
/// binary run again with `SCIF_TEST_CHILD` set (a plain run does nothing here). It listens
/// on node 8, accepts one connection, takes 1 MiB, says so, and waits to be killed.
#[test]
fn child_peer_process() {
    let Ok(dir) = std::env::var("SCIF_TEST_CHILD") else { return };
    let cluster = std::env::var_os("SCIF_TEST_CLUSTER").map(std::path::PathBuf::from);
    let cfg = remora_testkit::child_config(8, dir, cluster.as_deref(), true);
    let scif = Scif::with_config(cfg);
    let l = Endpoint::open(&scif).unwrap();
    l.bind(3001).unwrap();
    l.listen(1).unwrap();
    let (s, _) = l.accept(true).unwrap();
    assert!(s.is_direct());
    let mut b = vec![0u8; 1 << 20];
    assert_eq!(s.recv(&mut b, true).unwrap(), b.len());
    s.send(b"took", true).unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

/// A peer process killed (SIGKILL) while our sender is blocked in a large send: the send
/// ends with ECONNRESET (or the count moved before the kill), the next one fails
/// ECONNRESET, the descriptor reports hang-up; nothing hangs.
#[test]
fn a_killed_peer_process_resets_its_blocked_sender() {
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_peer_process", "--nocapture"])
        .env("SCIF_TEST_CHILD", h.runtime_dir())
        .env("SCIF_TEST_CLUSTER", h.config(8).cluster.unwrap())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let c = Endpoint::open(&common::ScifOf::scif(&h, 4)).unwrap();
    let t0 = Instant::now();
    loop {
        match c.connect(PortId { node: 8, port: 3001 }) {
            Ok(_) => break,
            Err(Error::Refused) if t0.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("connect to the child: {e:?}"),
        }
    }
    assert!(c.is_direct());
    let big = pattern(64 << 20, 9);
    let c2 = c.clone();
    let t = std::thread::spawn(move || c2.send(&big, true));
    let mut b = [0u8; 4];
    assert_eq!(c.recv(&mut b, true).unwrap(), 4);
    assert_eq!(&b, b"took");
    child.kill().unwrap();
    child.wait().unwrap();
    match t.join().unwrap() {
        Ok(n) => assert!(n < 64 << 20, "all of it sent to a killed process"),
        Err(e) => assert_eq!(e, Error::Reset),
    }
    assert_eq!(c.send(b"x", true).unwrap_err(), Error::Reset);
    assert_eq!(c.recv(&mut b, true).unwrap_err(), Error::Reset);
    let r = remora_sys::bell::wait(c.as_fd(), false, Some(Duration::from_secs(5))).unwrap();
    assert!(r.hung_up);
}

/// A first slice of a blocking send that ends short (the C library's `scif_send` in
/// slices) keeps the sending side: another thread's send cannot slip its bytes into the
/// middle of the call's message before the rest of it goes; the receiver reads the whole
/// message, then the other one.
fn first_slice_keeps_the_side(c: Endpoint, s: Endpoint) {
    let big = pattern(8 << 20, 3);
    let (n, held) = c.send_within(&big, Duration::from_millis(50)).unwrap();
    assert!(n < big.len(), "the peer does not read: the first slice ends short");
    let held = held.expect("a short first slice hands its side over");
    let other = {
        let c = c.clone();
        std::thread::spawn(move || c.send(b"other", true))
    };
    // The other send waits for the side; the receiver reads as the rest goes out.
    let reader = std::thread::spawn(move || {
        let mut got = vec![0u8; 8 << 20];
        assert_eq!(s.recv(&mut got, true).unwrap(), got.len());
        let mut tail = [0u8; 5];
        assert_eq!(s.recv(&mut tail, true).unwrap(), 5);
        (got, tail, s)
    });
    let mut done = n;
    while done < big.len() {
        done += held.send_for(&big[done..], Duration::from_millis(100)).unwrap();
    }
    drop(held);
    assert_eq!(other.join().unwrap().unwrap(), 5);
    let (got, tail, _s) = reader.join().unwrap();
    assert!(got == big, "the message arrived whole, nothing in its middle");
    assert_eq!(&tail, b"other");
    // A first slice that moves everything holds nothing: another send goes at once.
    let (n, held) = c.send_within(b"x", Duration::from_millis(50)).unwrap();
    assert!(n == 1 && held.is_none(), "a whole first slice holds nothing");
    assert_eq!(c.send(b"y", false).unwrap(), 1);
}

#[test]
fn a_short_first_slice_keeps_the_sending_side_on_one_host_and_on_a_flow() {
    let h = remora_testkit::Harness::new();
    let (c, s) = pair(&h, 4, 8);
    assert!(!c.is_direct());
    first_slice_keeps_the_side(c, s);
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(c.is_direct());
    first_slice_keeps_the_side(c, s);
}
