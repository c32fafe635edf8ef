//! The SCIF personality between processes' endpoints on one host: nodes 4 and 8 with
//! daemons the library starts itself, in a private runtime directory.

use remora_scif::*;
use std::time::{Duration, Instant};

use remora_testkit::Harness;

mod common;
use common::{exchange, last_words, over_tcp, pair, wait_for_link, ScifOf};

/// Start nodes 8 and 4 and wait until 4 reaches 8 over the link.
fn ready(ep: &Endpoint, write: bool) -> remora_sys::bell::Ready {
    remora_sys::bell::wait(ep.as_fd(), write, Some(Duration::ZERO)).unwrap()
}

#[test]
fn messages_flow_in_order_across_nodes_and_in_loopback() {
    let h = Harness::new();
    for (a, b) in [(8, 4), (4, 4)] {
        let (c, s) = pair(&h, a, b);
        for i in 0u64..200 {
            assert_eq!(c.send(&i.to_le_bytes(), true).unwrap(), 8);
            let mut b = [0u8; 8];
            assert_eq!(s.recv(&mut b, true).unwrap(), 8);
            assert_eq!(u64::from_le_bytes(b), i);
        }
        // Bigger than the ring: blocking flow control in both directions.
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        let s2 = s.clone();
        let t = std::thread::spawn(move || {
            let mut got = vec![0u8; 3_000_000];
            assert_eq!(s2.recv(&mut got, true).unwrap(), got.len());
            got
        });
        assert_eq!(c.send(&big, true).unwrap(), big.len());
        assert!(t.join().unwrap() == big);
        let mut none = [0u8; 4];
        assert_eq!(s.recv(&mut none, false).unwrap(), 0);
    }
}

#[test]
fn descriptors_report_readiness() {
    let h = Harness::new();
    let sb = h.scif(4);
    let l = Endpoint::open(&sb).unwrap();
    let port = l.bind(0).unwrap();
    l.listen(4).unwrap();
    assert!(!ready(&l, false).readable);
    assert_eq!(l.accept(false).unwrap_err(), Error::Again);
    let sa = h.scif(8);
    let c = Endpoint::open(&sa).unwrap();
    let t = std::thread::spawn(move || {
        c.connect(PortId { node: 4, port }).unwrap();
        c
    });
    let r = remora_sys::bell::wait(l.as_fd(), false, Some(Duration::from_secs(10))).unwrap();
    assert!(r.readable, "a waiting request makes the listener readable");
    let (s, _) = l.accept(false).unwrap();
    let c = t.join().unwrap();
    assert!(!ready(&l, false).readable, "nothing waits any more");
    assert!(!ready(&s, false).readable);
    assert!(ready(&s, true).writable);
    c.send(b"abc", false).unwrap();
    let r = remora_sys::bell::wait(s.as_fd(), false, Some(Duration::from_secs(5))).unwrap();
    assert!(r.readable);
    let mut b = [0u8; 2];
    assert_eq!(s.recv(&mut b, false).unwrap(), 2);
    assert!(ready(&s, false).readable, "one byte is still there");
    let mut b = [0u8; 8];
    assert_eq!(s.recv(&mut b, false).unwrap(), 1);
    assert!(!ready(&s, false).readable);
    // Fill the ring: the sender stops being writable, and is again once the peer reads.
    let junk = vec![7u8; 200_000];
    let n = c.send(&junk, false).unwrap();
    assert!(n < junk.len());
    assert!(!ready(&c, true).writable);
    let mut sink = vec![0u8; n];
    assert_eq!(s.recv(&mut sink, true).unwrap(), n);
    assert!(ready(&c, true).writable);
    // Close: the peer sees hang-up, drains, then gets Reset.
    c.send(b"bye", true).unwrap();
    c.close().unwrap();
    assert_eq!(c.send(b"x", true).unwrap_err(), Error::BadEndpoint);
    let r = remora_sys::bell::wait(s.as_fd(), false, Some(Duration::from_secs(5))).unwrap();
    assert!(r.hung_up);
    let mut b = [0u8; 3];
    assert_eq!(s.recv(&mut b, true).unwrap(), 3);
    assert_eq!(&b, b"bye");
    assert_eq!(s.recv(&mut b, true).unwrap_err(), Error::Reset);
    assert_eq!(s.send(b"x", true).unwrap_err(), Error::Reset);
}

#[test]
fn close_wakes_blocked_threads() {
    let h = Harness::new();
    let (c, s) = pair(&h, 8, 4);
    let s2 = s.clone();
    let t = std::thread::spawn(move || {
        let mut b = [0u8; 4];
        s2.recv(&mut b, true)
    });
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    s.close().unwrap();
    assert!(t.join().unwrap().is_err());
    assert!(t0.elapsed() < Duration::from_secs(2));
    drop(c);
    // A blocking accept wakes when its listener closes.
    let sb = h.scif(4);
    let l = Endpoint::open(&sb).unwrap();
    l.bind(0).unwrap();
    l.listen(1).unwrap();
    let l2 = l.clone();
    let t = std::thread::spawn(move || l2.accept(true).map(|_| ()));
    std::thread::sleep(Duration::from_millis(200));
    l.close().unwrap();
    assert!(t.join().unwrap().is_err());
}

#[test]
fn bind_listen_connect_errors() {
    let h = Harness::new();
    let s = h.scif(4);
    let a = Endpoint::open(&s).unwrap();
    let p = a.bind(0).unwrap();
    assert!(matches!(a.bind(0), Err(Error::Invalid(_))));
    let b = Endpoint::open(&s).unwrap();
    assert!(matches!(b.bind(p), Err(Error::Invalid(_))), "a bound port: EINVAL as the header says");
    assert!(matches!(b.listen(1), Err(Error::Invalid(_))));
    if !remora_sys::is_root() {
        assert_eq!(b.bind(80).unwrap_err(), Error::Access);
    }
    assert_eq!(b.connect(PortId { node: 4, port: p }).unwrap_err(), Error::Refused);
    let c = Endpoint::open(&s).unwrap();
    assert_eq!(c.connect(PortId { node: 999, port: 5000 }).unwrap_err(), Error::NoDevice);
    assert_eq!(c.send(b"x", false).unwrap_err(), Error::NotConnected);
    assert!(matches!(a.accept(false), Err(Error::Invalid(_))));
    let ids = s.node_ids().unwrap();
    assert!(ids.contains(&4));
    // The port is free again once its endpoint closes.
    a.close().unwrap();
    assert_eq!(a.close().unwrap_err(), Error::BadEndpoint);
    let d = Endpoint::open(&s).unwrap();
    assert_eq!(d.bind(p).unwrap(), p);
}

/// Page-aligned, private anonymous memory that lives for the rest of the test process.
fn anon(len: usize) -> UserRegion {
    let v = Box::leak(vec![0u8; len + 4096].into_boxed_slice());
    let start = (4096 - (v.as_ptr() as usize % 4096)) % 4096;
    UserRegion::from_static(&mut v[start..start + len])
}

fn peek(r: &UserRegion, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    r.read(off, &mut v).unwrap();
    v
}

#[test]
fn windows_rma_fences_and_maps() {
    let h = Harness::new();
    let (c, s) = pair(&h, 8, 4);
    let creg = anon(16 * 4096);
    let sreg = anon(16 * 4096);
    let pattern: Vec<u8> = (0..16 * 4096).map(|i| (i % 241) as u8).collect();
    creg.write(0, &pattern).unwrap();
    let coff = c.register(creg, 0x80000, Prot::RW, true).unwrap();
    assert_eq!(coff, 0x80000);
    assert_eq!(c.register(creg, 0x81000, Prot::RW, true).unwrap_err(), Error::AddrInUse);
    let soff = s.register(sreg, 0, Prot::RW, false).unwrap();
    assert_eq!(soff % 4096, 0);
    c.write_to(coff + 13, 30_000, soff + 7, RmaFlags::default()).unwrap();
    let mark = c.fence_mark(FenceInit::SelfInit).unwrap();
    c.fence_wait(mark).unwrap();
    let mark = s.fence_mark(FenceInit::Peer).unwrap();
    s.fence_wait(mark).unwrap();
    assert!(matches!(c.fence_wait(mark + 1000), Err(Error::Invalid(_))), "a mark never handed out");
    let sview = |off: usize, len: usize| peek(&sreg, off, len);
    let want: Vec<u8> = (13..13 + 30_000).map(|i| (i % 241) as u8).collect();
    assert!(sview(7, 30_000) == want, "writeto arrived intact");
    let mut back = vec![0u8; 1000];
    c.vread_from(&mut back, soff + 7, RmaFlags::default()).unwrap();
    assert_eq!(&back[..], &want[..1000]);
    c.vwrite_to(b"vwrite!", soff + 100_000 % 65536, RmaFlags { ordered: true, ..Default::default() })
        .unwrap();
    s.read_from(soff + 40_000, 4096, coff, RmaFlags { sync: true, ..Default::default() }).unwrap();
    assert_eq!(sview(40_000, 16), (0..16).map(|i| (i % 241) as u8).collect::<Vec<_>>());
    // Out of the windows, and protections.
    assert_eq!(c.write_to(coff, 4096, soff + 16 * 4096, RmaFlags::default()).unwrap_err(), Error::NoWindow);
    assert_eq!(c.write_to(coff, 8192, soff + 15 * 4096, RmaFlags::default()).unwrap_err(), Error::NoWindow);
    // Fence signal, local and remote.
    s.fence_signal(Some((soff + 64, 0xfeed)), Some((coff + 128, 0xbeef)), FenceInit::SelfInit).unwrap();
    assert_eq!(u64::from_ne_bytes(sview(64, 8).try_into().unwrap()), 0xfeed);
    assert_eq!(u64::from_ne_bytes(peek(&creg, 128, 8).try_into().unwrap()), 0xbeef);
    assert!(matches!(s.fence_signal(Some((soff + 2, 1)), None, FenceInit::SelfInit), Err(Error::Invalid(_))));
    s.fence_signal(Some((soff + 4, 0x1122_3344_5566_7788)), None, FenceInit::SelfInit).unwrap();
    assert_eq!(u64::from_ne_bytes(sview(4, 8).try_into().unwrap()), 0x1122_3344_5566_7788);
    // Map the peer's window; stores land in its memory.
    let m = c.map_peer(soff, 2 * 4096, Prot::RW).unwrap();
    m.write(4096 + 5, b"mapped").unwrap();
    assert_eq!(&sview(4096 + 5, 6), b"mapped");
    assert_eq!(c.map_peer(soff + 16 * 4096, 4096, Prot::RW).unwrap_err(), Error::NoWindow);
    // Unregister: RMA to the range fails; the existing map still works.
    s.unregister(soff, 16 * 4096).unwrap();
    assert_eq!(c.write_to(coff, 64, soff, RmaFlags::default()).unwrap_err(), Error::NoWindow);
    assert_eq!(s.unregister(soff, 16 * 4096).unwrap_err(), Error::NoWindow);
    assert!(matches!(c.unregister(coff, 4096), Err(Error::Invalid(_))), "cutting a window: EINVAL");
    m.write(0, b"still").unwrap();
    assert_eq!(&sview(0, 5), b"still");
    // A read-only window refuses being written and mapped writable.
    let ro = anon(4096);
    let roff = s.register(ro, 0x200000, Prot { read: true, write: false }, true).unwrap();
    assert_eq!(c.write_to(coff, 64, roff, RmaFlags::default()).unwrap_err(), Error::Access);
    assert_eq!(c.map_peer(roff, 4096, Prot::RW).unwrap_err(), Error::Access);
    c.read_from(coff, 64, roff, RmaFlags::default()).unwrap();
    // After the peer closes, its maps stay readable and RMAs fail with Reset.
    s.close().unwrap();
    let mut b = [0u8; 5];
    m.read(0, &mut b).unwrap();
    assert_eq!(&b, b"still");
    assert_eq!(c.write_to(coff, 64, roff, RmaFlags::default()).unwrap_err(), Error::Reset);
}

/// `scif_writeto` keeps both ends' window lists as one (one reference an RMA): a window
/// registered anew at the offset of one unregistered, on either end, gets the bytes, the
/// old memory none.
#[test]
fn writeto_follows_windows_registered_anew_at_the_same_offset() {
    let h = Harness::new();
    let (c, s) = pair(&h, 4, 8);
    let (src1, src2, dst1, dst2) = (anon(4096), anon(4096), anon(4096), anon(4096));
    src1.write(0, &[1u8; 64]).unwrap();
    src2.write(0, &[2u8; 64]).unwrap();
    let (coff, soff) = (0x300000, 0x500000);
    c.register(src1, coff, Prot::RW, true).unwrap();
    s.register(dst1, soff, Prot::RW, true).unwrap();
    c.write_to(coff, 64, soff, RmaFlags::default()).unwrap();
    assert_eq!(peek(&dst1, 0, 64), vec![1u8; 64]);
    s.unregister(soff, 4096).unwrap();
    s.register(dst2, soff, Prot::RW, true).unwrap();
    c.write_to(coff, 64, soff, RmaFlags::default()).unwrap();
    assert_eq!(peek(&dst2, 0, 64), vec![1u8; 64], "the peer's new window got the bytes");
    c.unregister(coff, 4096).unwrap();
    c.register(src2, coff, Prot::RW, true).unwrap();
    c.write_to(coff, 64, soff, RmaFlags::default()).unwrap();
    assert_eq!(peek(&dst2, 0, 64), vec![2u8; 64], "our new window was the source");
    assert_eq!(peek(&dst1, 0, 64), vec![1u8; 64], "the unregistered window was written");
}

#[test]
fn windows_span_contiguous_registrations() {
    let h = Harness::new();
    let (c, s) = pair(&h, 4, 8);
    let a = anon(4096);
    let b = anon(4096);
    s.register(a, 0x100000, Prot::RW, true).unwrap();
    s.register(b, 0x101000, Prot::RW, true).unwrap();
    let data: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 256) as u8).collect();
    c.vwrite_to(&data, 0x100000, RmaFlags::default()).unwrap();
    assert_eq!(peek(&a, 4095, 1)[0], data[4095]);
    assert_eq!(peek(&b, 0, 1)[0], data[4096]);
    let m = c.map_peer(0x100000, 8192, Prot::RW).unwrap();
    let mut back = vec![0u8; 8192];
    m.read(0, &mut back).unwrap();
    assert!(back == data);
}

#[test]
fn process_death_hangs_up_the_peer() {
    let h = Harness::new();
    let (c, s) = pair(&h, 8, 4);
    // Dropping every handle without close ends the endpoint's sessions, as an exit does.
    drop(c);
    let r = remora_sys::bell::wait(s.as_fd(), false, Some(Duration::from_secs(5))).unwrap();
    assert!(r.hung_up);
    let mut b = [0u8; 1];
    assert_eq!(s.recv(&mut b, true).unwrap_err(), Error::Reset);
    // Once both ends are gone, the daemons hold nothing of them.
    drop(s);
    let t0 = Instant::now();
    loop {
        let held: Vec<_> = [4, 8]
            .iter()
            .map(|n| {
                let ctl = remora_client::Session::open_control(&h.config(*n)).unwrap();
                match ctl.request(remora_proto::Request::Status, &[]).unwrap().0 {
                    remora_proto::Reply::Status(st) => st.scif,
                    other => panic!("unexpected {other:?}"),
                }
            })
            .collect();
        if held.iter().all(|c| *c == (0, 0, 0)) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "SCIF books not released: {held:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn endpoints_on_two_hosts_exchange_messages_and_rma_through_the_link() {
    let h = over_tcp(&[4, 8]);
    // Start node 8's daemon (the listener's) and let the link come up.
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(c.is_direct() && s.is_direct(), "the messages take a flow of their own");
    exchange(&c, &s, 50, 300_000);
    // RMA through the daemons.
    let creg = anon(64 * 1024);
    let sreg = anon(64 * 1024);
    let pattern: Vec<u8> = (0..64 * 1024).map(|i| (i % 199) as u8).collect();
    creg.write(0, &pattern).unwrap();
    let coff = c.register(creg, 0x10000, Prot::RW, true).unwrap();
    let soff = s.register(sreg, 0x20000, Prot::RW, true).unwrap();
    c.write_to(coff, 60_000, soff + 100, RmaFlags::default()).unwrap();
    assert!(peek(&sreg, 100, 60_000) == pattern[..60_000]);
    let mut v = vec![0u8; 500];
    c.vread_from(&mut v, soff + 100, RmaFlags::default()).unwrap();
    assert_eq!(&v[..], &pattern[..500]);
    s.vwrite_to(b"from afar", coff + 8, RmaFlags::default()).unwrap();
    assert_eq!(&peek(&creg, 8, 9), b"from afar");
    s.read_from(soff, 4096, coff + 4096, RmaFlags::default()).unwrap();
    assert!(peek(&sreg, 0, 4096) == pattern[4096..8192]);
    assert_eq!(c.write_to(coff, 64, 0x90000, RmaFlags::default()).unwrap_err(), Error::NoWindow);
    c.fence_signal(None, Some((soff + 8, 77)), FenceInit::SelfInit).unwrap();
    assert_eq!(u64::from_ne_bytes(peek(&sreg, 8, 8).try_into().unwrap()), 77);
    assert_eq!(c.map_peer(soff, 4096, Prot::RW).unwrap_err(), Error::NoDevice, "a far window needs map_far");
    // A DSM map of the far window: loads fetch the peer's pages, stores reach it before
    // the next message.
    let m = c.map_far(soff, 2 * 4096, Prot::RW).unwrap();
    assert!(m.is_direct(), "the pager reaches the peer's windows over a flow of its own");
    let mut got = vec![0u8; 100];
    m.read(100, &mut got).unwrap();
    assert!(got == peek(&sreg, 100, 100), "the peer's window through the map");
    m.write(3000, b"stored through a DSM map").unwrap();
    c.send(b"!", true).unwrap();
    let mut b1 = [0u8; 1];
    s.recv(&mut b1, true).unwrap();
    assert_eq!(&peek(&sreg, 3000, 24), b"stored through a DSM map");
    assert_eq!(c.map_far(0x900000, 4096, Prot::RW).unwrap_err(), Error::NoWindow);
    drop(m);
    // A close crosses the link after the data sent before it.
    last_words(&c, &s);
}

/// Messages between hosts linked over the ofi transport (libfabric's tcp provider), over
/// the processes' own flow as over tcp: in order both ways, more than a ring's worth at once, and a close after the
/// data it follows.
#[test]
fn endpoints_on_two_hosts_exchange_messages_over_ofi() {
    if !remora_ofi_sys::installed() {
        eprintln!("skipping: libfabric is not installed (apt-get install libfabric-dev libfabric1)");
        return;
    }
    let h = Harness::with_cluster_keys(&[4, 8], "force_tcp = true\ntransport = \"ofi+tcp\"\n");
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    assert!(c.is_direct() && s.is_direct(), "the messages' own flow, dialed to the bootstrap port");
    exchange(&c, &s, 200, 300_000);
    last_words(&c, &s);
}

#[test]
fn nonblocking_connect_completes_in_the_background() {
    let h = Harness::new();
    let sb = h.scif(4);
    let l = Endpoint::open(&sb).unwrap();
    let port = l.bind(0).unwrap();
    l.listen(2).unwrap();
    assert!(!ready(&l, true).writable, "a listener is never writable");
    let c = Endpoint::open(&h.scif(8)).unwrap();
    remora_sys::seqpacket::set_nonblocking(c.as_fd(), true).unwrap();
    assert_eq!(c.connect(PortId { node: 4, port }).unwrap_err(), Error::InProgress);
    assert_eq!(c.connect(PortId { node: 4, port }).unwrap_err(), Error::InProgress);
    assert!(!ready(&c, true).writable, "not writable while the connect is under way");
    let (s, _) = l.accept(true).unwrap();
    let r = remora_sys::bell::wait(c.as_fd(), true, Some(Duration::from_secs(5))).unwrap();
    assert!(r.writable, "writable once connected");
    let p = c.connect(PortId { node: 4, port }).unwrap();
    assert_eq!(c.local_port().unwrap().port, p);
    assert_eq!(c.connect(PortId { node: 4, port }).unwrap_err(), Error::IsConnected);
    c.send(b"hi", true).unwrap();
    let mut b = [0u8; 2];
    s.recv(&mut b, true).unwrap();
    assert_eq!(&b, b"hi");
}

#[test]
fn losing_the_far_node_resets_its_connections() {
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    c.send(b"x", true).unwrap();
    let mut b = [0u8; 1];
    s.recv(&mut b, true).unwrap();
    // The far daemon goes away: the connection ends with a reset, nothing hangs.
    let ctl = remora_client::Session::open_control(&h.config(8)).unwrap();
    let _ = ctl.request(remora_proto::Request::Shutdown, &[]);
    let r = remora_sys::bell::wait(c.as_fd(), false, Some(Duration::from_secs(20))).unwrap();
    assert!(r.hung_up, "the endpoint hears of the loss");
    assert_eq!(c.recv(&mut b, true).unwrap_err(), Error::Reset);
    assert_eq!(c.send(b"y", true).unwrap_err(), Error::Reset);
}

/// A receiver driven by poll(2) and non-blocking receives (an event loop) against a
/// sender with irregular pauses: every message arrives and no wake-up is lost.
fn poll_driven(h: &Harness, a: u32, b: u32) {
    let (c, s) = pair(h, a, b);
    const N: u64 = 20_000;
    let t = std::thread::spawn(move || {
        for i in 0..N {
            c.send(&i.to_le_bytes(), true).unwrap();
            if i % 97 == 0 {
                std::thread::sleep(Duration::from_micros(i % 300));
            }
        }
        c
    });
    let mut next = 0u64;
    let mut buf = [0u8; 8 * 64];
    let mut partial = Vec::new();
    while next < N {
        let r = remora_sys::bell::wait(s.as_fd(), false, Some(Duration::from_secs(10))).unwrap();
        assert!(r.readable, "poll reported nothing within 10 s with {next} of {N} received");
        loop {
            let n = s.recv(&mut buf, false).unwrap();
            if n == 0 {
                break;
            }
            partial.extend_from_slice(&buf[..n]);
            while partial.len() >= 8 {
                let v = u64::from_le_bytes(partial[..8].try_into().unwrap());
                assert_eq!(v, next, "in order");
                next += 1;
                partial.drain(..8);
            }
        }
    }
    let _c = t.join().unwrap();
    // Nothing is left that would keep poll(2) answering.
    assert!(!ready(&s, false).readable, "no stale readiness once everything is taken");
}

#[test]
fn a_poll_driven_receiver_misses_nothing_on_one_host() {
    let h = Harness::new();
    poll_driven(&h, 8, 4);
}

#[test]
fn a_poll_driven_receiver_misses_nothing_across_hosts() {
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    poll_driven(&h, 4, 8);
}

/// MPSS's endpoint queue: with the receiver idle, non-blocking sends of one byte each are
/// taken until exactly `queue - 1` bytes wait (MPSS's circular buffer of `queue` bytes
/// holds one less; slot headers cost nothing), the next is refused (0 bytes, not an error); a blocking send of one more byte waits until the receiver
/// takes some; everything arrives intact and in order; a big non-blocking send queues
/// exactly `queue - 1` bytes.
fn queue_holds(c: &Endpoint, s: &Endpoint, queue: usize) {
    let queue = queue - 1;
    let mut sent = Vec::new();
    loop {
        let b = [(sent.len() % 251) as u8];
        match c.send(&b, false).unwrap() {
            1 => sent.push(b[0]),
            0 => break,
            n => panic!("a one-byte send queued {n} bytes"),
        }
        assert!(sent.len() <= queue, "more than {queue} bytes queued");
    }
    assert_eq!(sent.len(), queue, "the queue holds {queue} bytes");
    assert_eq!(c.send(b"xy", false).unwrap(), 0, "still full");
    assert!(!ready(c, true).writable, "a full queue is not writable");
    let c2 = c.clone();
    let t = std::thread::spawn(move || c2.send(&[0xee], true).unwrap());
    std::thread::sleep(Duration::from_millis(200));
    assert!(!t.is_finished(), "a blocking send into a full queue waits");
    let mut got = vec![0u8; queue + 1];
    assert_eq!(s.recv(&mut got[..1], true).unwrap(), 1);
    assert_eq!(t.join().unwrap(), 1, "and completes once the receiver took a byte");
    assert_eq!(s.recv(&mut got[1..], true).unwrap(), queue);
    sent.push(0xee);
    assert!(got == sent, "bytes intact and in order");
    let big: Vec<u8> = (0..queue * 3).map(|i| (i % 253) as u8).collect();
    assert_eq!(c.send(&big, false).unwrap(), queue, "a big non-blocking send queues the queue");
    let mut got = vec![0u8; queue];
    assert_eq!(s.recv(&mut got, true).unwrap(), queue);
    assert!(got[..] == big[..queue]);
    assert_eq!(s.recv(&mut got, false).unwrap(), 0);
}

#[test]
fn the_send_queue_holds_mpss_4_kib_by_default() {
    let h = Harness::new();
    for (a, b) in [(8, 4), (4, 4)] {
        let (c, s) = pair(&h, a, b);
        queue_holds(&c, &s, 4096);
        queue_holds(&s, &c, 4096);
    }
}

#[test]
fn remora_scif_queue_bytes_sizes_the_queue() {
    let h = Harness::new();
    // The daemon of the listening node sizes the connections it makes: start node 4's with
    // the variable set, as a program that sets it and starts the daemon would.
    let dir = h.runtime_dir().to_path_buf();
    let st = std::process::Command::new(remora_testkit::daemon_path())
        .args(["--node", "4", "--idle-exit", "60", "--detach", "--runtime-dir"])
        .arg(&dir)
        .env("REMORA_SCIF_QUEUE_BYTES", "16384")
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    while !remora_proto::paths::socket_path(&dir, 4).exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "node 4 came up");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (c, s) = pair(&h, 8, 4);
    queue_holds(&c, &s, 16384);
    queue_holds(&s, &c, 16384);
}

/// One page backing two windows (the SCIF user guide's overlapping windows): W1 over
/// pages 0-1 of a buffer, W2 over pages 1-2, W3 over all three. The peer's RMA into W1 at
/// page 1 lands in the program's memory and is seen through W2 and W3; the program's own
/// store there is seen through all of them; maps and RMA across W2's two pieces reach the
/// right pages; W2 keeps working after W1 goes; a window over five others and the pages
/// between them.
#[test]
fn overlapping_windows_share_their_pages() {
    let h = Harness::new();
    let (c, s) = pair(&h, 8, 4);
    let buf = anon(3 * 4096);
    let (w1, w2, w3) = (0x300000u64, 0x400000u64, 0x500000u64);
    assert_eq!(s.register(buf.sub(0, 8192), w1, Prot::RW, true).unwrap(), w1);
    assert_eq!(s.register(buf.sub(4096, 8192), w2, Prot::RW, true).unwrap(), w2);
    assert_eq!(s.register(buf, w3, Prot::RW, true).unwrap(), w3);
    let read = |off: u64, len: usize| {
        let mut v = vec![0u8; len];
        c.vread_from(&mut v, off, RmaFlags::default()).unwrap();
        v
    };
    c.vwrite_to(b"through W1", w1 + 4096 + 8, RmaFlags::default()).unwrap();
    assert_eq!(&peek(&buf, 4096 + 8, 10), b"through W1", "the RMA reached the program's memory");
    assert_eq!(&read(w2 + 8, 10), b"through W1", "seen through W2");
    assert_eq!(&read(w3 + 4096 + 8, 10), b"through W1", "seen through W3");
    buf.write(4096 + 100, b"program's store").unwrap();
    assert_eq!(&read(w1 + 4096 + 100, 15), b"program's store", "the store seen through W1");
    assert_eq!(&read(w2 + 100, 15), b"program's store", "the store seen through W2");
    // Across W2's two pieces (page 1 shared with W1, page 2 its own), by RMA and by map.
    let data: Vec<u8> = (0..8192u32).map(|i| (i * 13 % 251) as u8).collect();
    c.vwrite_to(&data[..6000], w2 + 2000, RmaFlags::default()).unwrap();
    assert!(peek(&buf, 4096 + 2000, 6000) == data[..6000], "RMA across the pieces");
    assert!(read(w1 + 4096 + 2000, 2096) == data[..2096], "W1 sees the shared part");
    let m = c.map_peer(w2, 8192, Prot::RW).unwrap();
    m.write(4090, b"0123456789").unwrap();
    assert_eq!(&peek(&buf, 4096 + 4090, 10), b"0123456789", "a map across the pieces");
    assert_eq!(&read(w3 + 4096 + 4090, 10), b"0123456789");
    let own = s.map_own(w1, 8192, Prot::RW).unwrap();
    let mut b = [0u8; 10];
    own.read(4096 + 8, &mut b).unwrap();
    assert_eq!(&b, b"through W1", "the program's own map of W1");
    // W2 keeps its pages when W1 goes.
    s.unregister(w1, 8192).unwrap();
    c.vwrite_to(b"after W1", w2 + 300, RmaFlags::default()).unwrap();
    assert_eq!(&peek(&buf, 4096 + 300, 8), b"after W1");
    assert_eq!(&read(w3 + 4096 + 300, 8), b"after W1");
    // A window of 9 pieces (windows on every other page, fresh pages between; many more
    // in `windows_many.rs`).
    let many = anon(9 * 4096);
    for i in (0..9).step_by(2) {
        s.register(many.sub(i * 4096, 4096), 0x600000 + i as u64 * 4096, Prot::RW, true).unwrap();
    }
    assert_eq!(s.register(many, 0x700000, Prot::RW, true).unwrap(), 0x700000);
    c.vwrite_to(b"pages 6 and 7", 0x700000 + 7 * 4096 - 6, RmaFlags::default()).unwrap();
    assert_eq!(&peek(&many, 7 * 4096 - 6, 13), b"pages 6 and 7");
    assert_eq!(&read(0x606000 + 4096 - 6, 6), b"pages ", "seen through page 6's own window");
}
