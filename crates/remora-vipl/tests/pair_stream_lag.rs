//! A VI pair's own stream across hosts when its receiver polls or lags (reviewer 98's
//! findings): a poller takes messages that came on the stream even once a later message's
//! done count landed, a spinning poller never stops getting them, the marks of a
//! short-then-long pattern do not pile up unread in the receiver's socket, and an acceptor
//! whose requester cannot dial does not wait for a dial.

mod common;
use common::pair::{bytes, pair, Side, SLOT, T};

use remora_testkit::Harness;
use remora_vipl::layout::status;
use remora_vipl::*;
use std::time::{Duration, Instant};

/// The bytes waiting unread in this process's TCP sockets (the pair's stream among them):
/// the receive queues of `/proc/self/net/tcp{,6}` whose inode is one of this process's
/// descriptors.
fn unread_bytes() -> u64 {
    let mine: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut n = 0;
    for f in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(t) = std::fs::read_to_string(f) else { continue };
        for l in t.lines().skip(1) {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() > 9 && mine.contains(w[9]) {
                let rx = w[4].split(':').nth(1).unwrap_or("0");
                n += u64::from_str_radix(rx, 16).unwrap_or(0);
            }
        }
    }
    n
}

/// Take the next completed receive by polling (`VipRecvDone`) for up to 20 s: the slot it
/// names, after checking its status and bytes.
fn poll_one(s: &Side, data: &[u8], what: &str) -> usize {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok((addr, _)) = s.vi.recv_done() {
            let i = (addr - s.desc.addr(0)) / 64;
            let d = s.nic.read_descriptor(addr, s.desc.handle).unwrap();
            assert_eq!(d.status, status::DONE | status::OP_RECEIVE, "{what}: status");
            assert!(s.buf.get(i * SLOT, data.len()) == data, "{what}: bytes");
            return i;
        }
        assert!(Instant::now() < until, "{what}: a poller got nothing in 20 s");
    }
}

/// Two short messages ride the stream between a first short one and a long one; the
/// receiver polls only once the long one's done count landed. (Before the fix the count
/// covered the long one while the stream's entries sat unread in the socket, and no poll
/// ever read it: the poller got the first message and then nothing.)
#[test]
fn a_poller_takes_stream_messages_once_a_later_long_one_landed() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = pair(&h, b"poller");
    let sizes = [8, 8, 8, 4096];
    for (n, len) in sizes.iter().enumerate() {
        c.send(n, &bytes(*len, n), None, None);
    }
    std::thread::sleep(Duration::from_millis(300));
    for (n, len) in sizes.iter().enumerate() {
        assert_eq!(poll_one(&s, &bytes(*len, n), &format!("message {n}")), n);
    }
    assert_eq!(s.vi.state(), ViState::Connected);
}

/// A receiver that spins on `VipRecvDone` (reposting each receive) while the sender sends
/// groups of three 8-byte messages and one of 64 KiB: every message comes, intact.
/// (Before the fix the poller stopped getting messages within the first groups.)
#[test]
fn a_spinning_poller_gets_every_message_of_short_and_long_groups() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = pair(&h, b"spin");
    const GROUPS: usize = 150;
    let len = |n: usize| if n % 4 == 3 { 64 << 10 } else { 8 };
    let sender = std::thread::spawn(move || {
        for n in 0..4 * GROUPS {
            c.send(n, &bytes(len(n), n % 4), None, None);
        }
        c
    });
    for n in 0..4 * GROUPS {
        let i = poll_one(&s, &bytes(len(n), n % 4), &format!("message {n}"));
        s.post(i);
    }
    let c = sender.join().expect("the sender failed");
    assert_eq!((s.vi.state(), c.vi.state()), (ViState::Connected, ViState::Connected));
}

/// Header (short) and body (long) pairs to a receiver that lags (it looks once a round
/// landed): each body after a header is announced by a mark on the stream, and the
/// receiver, which takes the body by its done count, reads the mark too. Without that the
/// marks piled up unread (72 bytes each, 216 KB here) until the sender's write blocked
/// and the VI broke (some 35 000 messages in).
#[test]
fn marks_of_a_lagging_receiver_do_not_pile_up_unread() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = pair(&h, b"marks");
    let body = bytes(4096, 1);
    for round in 0..150 {
        for n in 0..20 {
            c.send(2 * n, &bytes(8, n), None, None);
            c.send(2 * n + 1, &body, None, None);
        }
        std::thread::sleep(Duration::from_millis(5));
        for _ in 0..40 {
            let (addr, _) = s.vi.recv_wait(T).unwrap_or_else(|e| panic!("round {round}: {e:?}"));
            let d = s.nic.read_descriptor(addr, s.desc.handle).unwrap();
            assert_eq!(d.status & status::ERROR_MASK, 0, "round {round}");
            s.post((addr - s.desc.addr(0)) / 64);
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let unread = unread_bytes();
    assert!(unread < 16 << 10, "{unread} bytes unread in this process's sockets");
    assert_eq!((s.vi.state(), c.vi.state()), (ViState::Connected, ViState::Connected));
}

fn vi_on(nic: &Nic) -> Vi {
    let attrs = ViAttributes {
        reliability: RELIABLE_DELIVERY,
        max_transfer: MAX_TRANSFER,
        ptag: nic.create_ptag(),
        rdma_write: true,
        rdma_read: true,
    };
    Vi::create(nic, attrs, None, None).unwrap()
}

/// A requester whose configuration names no cluster file cannot dial the acceptor's
/// stream: it says so in its VI description, and `VipConnectAccept` offers none and
/// returns without waiting for a dial (it waited the 3 s of the stream's handshake).
#[test]
fn an_acceptor_does_not_wait_for_a_requester_that_cannot_dial() {
    let h = Harness::with_cluster(&[4, 8], true);
    // A first pair whose requester dials (the two nodes link then).
    let _dialed = pair(&h, b"dials");
    let snic = Nic::open_with_config("remora0", h.config(4)).unwrap();
    let mut cfg = h.config(8);
    cfg.cluster = None;
    let cnic = Nic::open_with_config("remora0", cfg).unwrap();
    let (s, c) = (vi_on(&snic), vi_on(&cnic));
    let addr = NetAddress::new(snic.node(), b"nodial");
    let (sv, a, n) = (s.clone(), addr.clone(), snic.clone());
    let waiter = std::thread::spawn(move || {
        let r = n.connect_wait(&a, T).unwrap();
        let t = Instant::now();
        r.accept(&sv).unwrap();
        t.elapsed()
    });
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        match c.connect_request(&NetAddress::new(cnic.node(), b"client"), &addr, T) {
            Err(Error::NoMatch) if Instant::now() < until => std::thread::sleep(Duration::from_millis(2)),
            other => {
                other.unwrap();
                break;
            }
        }
    }
    let took = waiter.join().unwrap();
    assert!(took < Duration::from_millis(2500), "VipConnectAccept took {took:?}");
    assert_eq!((s.state(), c.state()), (ViState::Connected, ViState::Connected));
}
