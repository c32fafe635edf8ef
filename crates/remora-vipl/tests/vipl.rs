//! The VIPL safe API on one host: connections (client/server, rejected, peer-to-peer, on
//! one node and across two nodes), sends of every size with immediate data (short ones
//! travel inside the completion: both sides of that boundary), RDMA write and
//! read with their protection checks, completion queues, disconnect flushing receives, and
//! the error paths of a reliable VI.

mod common;
use common::{connect, mem, send};

use remora_testkit::Harness;
use remora_vipl::layout::{control, status};
use remora_vipl::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(10));

fn attrs(ptag: ProtectionTag, reliability: u16, rdma: bool) -> ViAttributes {
    ViAttributes {
        reliability,
        max_transfer: MAX_TRANSFER,
        ptag,
        rdma_write: rdma,
        rdma_read: rdma && reliability != UNRELIABLE,
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn pair(
    h: &Harness,
    snode: u32,
    cnode: u32,
    reliability: u16,
) -> (Nic, Vi, Nic, Vi, ProtectionTag, ProtectionTag) {
    let snic = Nic::open_with_config("/dev/via0", h.config(snode)).unwrap();
    let cnic = Nic::open_with_config("remora0", h.config(cnode)).unwrap();
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let server = Vi::create(&snic, attrs(sp, reliability, true), None, None).unwrap();
    let client = Vi::create(&cnic, attrs(cp, reliability, true), None, None).unwrap();
    (snic, server, cnic, client, sp, cp)
}

fn send_and_check(snic: &Nic, server: &Vi, cnic: &Nic, client: &Vi, sp: ProtectionTag, cp: ProtectionTag) {
    let sdesc = mem(snic, 4096, sp, false);
    let cdesc = mem(cnic, 4096, cp, false);
    let big = 1 << 20;
    let rbuf = mem(snic, big + 100, sp, false);
    let sbuf = mem(cnic, big, cp, false);
    for (i, &n) in [1usize, 8, 40, 41, 4096, 65536, big].iter().enumerate() {
        let data = pattern(n, i as u8);
        sbuf.put(0, &data);
        // A receive of two segments; a send of two when it can.
        let half = n.div_ceil(2);
        let rd = Descriptor {
            length: (n + 100) as u32,
            segments: vec![rbuf.seg(0, half), rbuf.seg(half, n + 100 - half)],
            ..Default::default()
        };
        snic.write_descriptor(sdesc.addr(0), sdesc.handle, &rd).unwrap();
        server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
        let segs =
            if n > 1 { vec![sbuf.seg(0, n / 2), sbuf.seg(n / 2, n - n / 2)] } else { vec![sbuf.seg(0, 1)] };
        let sd = Descriptor {
            control: control::IMMEDIATE,
            immediate: 0xdead_0000 + i as u32,
            length: n as u32,
            segments: segs,
            ..Default::default()
        };
        cnic.write_descriptor(cdesc.addr(0), cdesc.handle, &sd).unwrap();
        client.post_send(cdesc.addr(0), cdesc.handle).unwrap();
        assert_eq!(client.send_wait(T).unwrap(), (cdesc.addr(0), cdesc.handle));
        let done = cnic.read_descriptor(cdesc.addr(0), cdesc.handle).unwrap();
        assert_eq!(
            done.status & (status::DONE | status::ERROR_MASK),
            status::DONE,
            "send of {n}: {:#x}",
            done.status
        );
        assert_eq!(server.recv_wait(T).unwrap(), (sdesc.addr(0), sdesc.handle));
        let got = snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap();
        assert_eq!(got.status, status::DONE | status::OP_RECEIVE | status::IMMEDIATE, "receive of {n}");
        assert_eq!(got.length, n as u32);
        assert_eq!(got.immediate, 0xdead_0000 + i as u32);
        let back = rbuf.get(0, n);
        let first = back.iter().zip(&data).position(|(a, b)| a != b);
        assert!(
            first.is_none(),
            "{n} bytes intact: first difference at {first:?} of {n}, rbuf {:#x} sbuf {:#x}",
            rbuf.addr(0),
            sbuf.addr(0)
        );
    }
}

#[test]
fn client_server_on_one_node_and_across_two_nodes() {
    let h = Harness::new();
    for (snode, cnode) in [(4, 4), (4, 8)] {
        let (snic, server, cnic, client, sp, cp) = pair(&h, snode, cnode, RELIABLE_DELIVERY);
        connect(&snic, &server, &cnic, &client, format!("srv{cnode}").as_bytes());
        assert_eq!(server.state(), ViState::Connected);
        assert_eq!(client.state(), ViState::Connected);
        send_and_check(&snic, &server, &cnic, &client, sp, cp);

        // RDMA write (with immediate data, which takes a receive) and read.
        let target = mem(&snic, 8192, sp, true);
        let local = mem(&cnic, 8192, cp, false);
        let sdesc = mem(&snic, 128, sp, false);
        let cdesc = mem(&cnic, 128, cp, false);
        local.put(0, &pattern(5000, 9));
        snic.write_descriptor(sdesc.addr(0), sdesc.handle, &Descriptor::default()).unwrap();
        server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
        let w = Descriptor {
            control: control::OP_RDMAWRITE | control::IMMEDIATE,
            immediate: 77,
            length: 5000,
            segments: vec![
                DataSegment { addr: target.addr(100) as u64, handle: target.handle, len: 0 },
                local.seg(0, 5000),
            ],
            ..Default::default()
        };
        cnic.write_descriptor(cdesc.addr(0), cdesc.handle, &w).unwrap();
        client.post_send(cdesc.addr(0), cdesc.handle).unwrap();
        client.send_done().unwrap();
        assert_eq!(
            cnic.read_descriptor(cdesc.addr(0), cdesc.handle).unwrap().status,
            status::DONE | status::OP_RDMA_WRITE
        );
        server.recv_wait(T).unwrap();
        let r = snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap();
        assert_eq!(r.status, status::DONE | status::OP_REMOTE_RDMA_WRITE | status::IMMEDIATE);
        assert_eq!(r.immediate, 77);
        assert!(target.get(100, 5000) == pattern(5000, 9));
        target.put(6000, b"read me back");
        let rd = Descriptor {
            control: control::OP_RDMAREAD,
            length: 12,
            segments: vec![
                DataSegment { addr: target.addr(6000) as u64, handle: target.handle, len: 0 },
                local.seg(7000, 12),
            ],
            ..Default::default()
        };
        cnic.write_descriptor(cdesc.addr(0), cdesc.handle, &rd).unwrap();
        client.post_send(cdesc.addr(0), cdesc.handle).unwrap();
        client.send_done().unwrap();
        assert_eq!(
            cnic.read_descriptor(cdesc.addr(0), cdesc.handle).unwrap().status,
            status::DONE | status::OP_RDMA_READ
        );
        assert_eq!(local.get(7000, 12), b"read me back");

        // A disconnect flushes the receives still posted, on both sides.
        server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
        client.disconnect().unwrap();
        assert_eq!(client.state(), ViState::Idle);
        let mut seen = ViState::Connected;
        for _ in 0..500 {
            seen = server.state();
            if seen == ViState::Error {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(seen, ViState::Error, "the peer's disconnect breaks the server's VI");
        server.disconnect().unwrap();
        server.recv_done().unwrap();
        assert_ne!(
            snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap().status & status::DESC_FLUSHED_ERROR,
            0
        );
        assert_eq!(server.state(), ViState::Idle);
    }
}

#[test]
fn rejected_then_accepted_and_no_match_without_a_waiter() {
    let h = Harness::new();
    let (snic, server, cnic, client, _, _) = pair(&h, 4, 4, RELIABLE_DELIVERY);
    let addr = NetAddress::new(snic.node(), b"rej");
    let me = NetAddress::new(cnic.node(), b"c");
    assert_eq!(client.connect_request(&me, &addr, Some(Duration::from_millis(200))), Err(Error::NoMatch));
    assert_eq!(client.state(), ViState::Idle);
    let (nic, a, s) = (snic.clone(), addr.clone(), server.clone());
    let t = std::thread::spawn(move || {
        nic.connect_wait(&a, T).unwrap().reject().unwrap();
        nic.connect_wait(&a, T).unwrap().accept(&s).unwrap();
    });
    let mut outcomes = Vec::new();
    while outcomes.last() != Some(&Ok(())) {
        match client.connect_request(&me, &addr, T) {
            Err(Error::NoMatch) => std::thread::sleep(Duration::from_millis(2)),
            other => outcomes.push(other.map(|_| ())),
        }
    }
    t.join().unwrap();
    assert_eq!(outcomes, vec![Err(Error::Rejected), Ok(())]);
    assert_eq!(snic.connect_wait(&addr, Some(Duration::from_millis(50))).err(), Some(Error::Timeout));
}

#[test]
fn peer_to_peer_across_two_nodes() {
    let h = Harness::new();
    let (a, va, b, vb, _, _) = pair(&h, 4, 8, RELIABLE_RECEPTION);
    let (la, lb) = (NetAddress::new(4, b"left"), NetAddress::new(8, b"right"));
    va.connect_peer_request(&la, &lb, T).unwrap();
    assert_eq!(va.state(), ViState::ConnectPending);
    vb.connect_peer_request(&lb, &la, T).unwrap();
    va.connect_peer_wait().unwrap();
    vb.connect_peer_wait().unwrap();
    assert_eq!((va.state(), vb.state()), (ViState::Connected, ViState::Connected));
    let _ = (a, b);
}

/// A peer that never comes: `Timeout` on the side that waits for the other's request and on
/// the side that requests (which heard "nobody waits there" to the end), the VI idle.
#[test]
fn a_peer_request_to_nobody_times_out_on_either_side_and_leaves_the_vi_idle() {
    let h = Harness::new();
    let (a, va, b, vb, _, _) = pair(&h, 4, 8, RELIABLE_RECEPTION);
    let short = Some(Duration::from_millis(200));
    // Node 4 is the smaller: it waits; node 8 requests.
    va.connect_peer_request(&NetAddress::new(4, b"a"), &NetAddress::new(8, b"nobody"), short).unwrap();
    vb.connect_peer_request(&NetAddress::new(8, b"b"), &NetAddress::new(4, b"nobody"), short).unwrap();
    assert_eq!(va.connect_peer_wait(), Err(Error::Timeout));
    assert_eq!(vb.connect_peer_wait(), Err(Error::Timeout));
    assert_eq!((va.state(), vb.state()), (ViState::Idle, ViState::Idle));
    let _ = (a, b);
}

#[test]
fn reliable_errors_unreliable_drops_and_completion_queues() {
    let h = Harness::new();
    let (snic, server, cnic, client, sp, cp) = pair(&h, 4, 4, RELIABLE_DELIVERY);
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    snic.set_error_handler(Some(Arc::new(move |e: &ErrorEvent| {
        assert!(e.vi.is_some());
        c.fetch_add(1, Ordering::SeqCst);
    })));
    connect(&snic, &server, &cnic, &client, b"e");
    let (sdesc, cdesc) = (mem(&snic, 64, sp, false), mem(&cnic, 64, cp, false));
    let (rbuf, sbuf) = (mem(&snic, 16, sp, false), mem(&cnic, 64, cp, false));
    // Too big for the receive: a length error there, both VIs broken, the callback called.
    snic.write_descriptor(
        sdesc.addr(0),
        sdesc.handle,
        &Descriptor { length: 16, segments: vec![rbuf.seg(0, 16)], ..Default::default() },
    )
    .unwrap();
    server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
    cnic.write_descriptor(
        cdesc.addr(0),
        cdesc.handle,
        &Descriptor { length: 64, segments: vec![sbuf.seg(0, 64)], ..Default::default() },
    )
    .unwrap();
    client.post_send(cdesc.addr(0), cdesc.handle).unwrap();
    server.recv_wait(T).unwrap();
    assert_ne!(snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap().status & status::LENGTH_ERROR, 0);
    for _ in 0..500 {
        if server.state() == ViState::Error && calls.load(Ordering::SeqCst) > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!((client.state(), server.state()), (ViState::Error, ViState::Error));
    assert!(calls.load(Ordering::SeqCst) > 0, "the error callback ran");
    client.disconnect().unwrap();
    server.disconnect().unwrap();

    // Unreliable: a send that finds no receive is dropped; the VI stays connected.
    let cq = CompletionQueue::create(&snic, 8).unwrap();
    assert_eq!(cq.done().err(), Some(Error::NotDone));
    let us = Vi::create(&snic, attrs(sp, UNRELIABLE, false), None, Some(&cq)).unwrap();
    let uc = Vi::create(&cnic, attrs(cp, UNRELIABLE, false), None, None).unwrap();
    connect(&snic, &us, &cnic, &uc, b"u");
    cnic.write_descriptor(
        cdesc.addr(0),
        cdesc.handle,
        &Descriptor { length: 8, segments: vec![sbuf.seg(0, 8)], ..Default::default() },
    )
    .unwrap();
    uc.post_send(cdesc.addr(0), cdesc.handle).unwrap();
    assert_eq!(uc.send_done().map(|_| ()), Ok(()));
    assert_eq!(cnic.read_descriptor(cdesc.addr(0), cdesc.handle).unwrap().status, status::DONE);
    assert_eq!(uc.state(), ViState::Connected);
    // With a receive posted, the CQ names the VI.
    snic.write_descriptor(
        sdesc.addr(0),
        sdesc.handle,
        &Descriptor { length: 16, segments: vec![rbuf.seg(0, 16)], ..Default::default() },
    )
    .unwrap();
    us.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
    uc.post_send(cdesc.addr(0), cdesc.handle).unwrap();
    let (vi, recv) = cq.wait(T).unwrap();
    assert!(recv && vi.id() == us.id());
    us.recv_done().unwrap();
    assert_eq!(cq.destroy().err().map(|e| matches!(e, Error::Resource(_))), Some(true));
}

#[test]
fn a_descriptor_posted_again_is_checked_against_the_registrations_of_now() {
    let h = Harness::new();
    let nic = Nic::open_with_config("remora0", h.config(1)).unwrap();
    let (p, other) = (nic.create_ptag(), nic.create_ptag());
    let vi = Vi::create(&nic, attrs(p, RELIABLE_DELIVERY, false), None, None).unwrap();
    let desc = mem(&nic, 4096, p, false);
    let buf = mem(&nic, 4096, p, false);
    let d = Descriptor { length: 64, segments: vec![buf.seg(0, 64)], ..Default::default() };
    nic.write_descriptor(desc.addr(0), desc.handle, &d).unwrap();
    // Seen once, while the buffer carries the VI's tag: posted and pending.
    vi.post_recv(desc.addr(0), desc.handle).unwrap();
    assert!(matches!(vi.recv_done(), Err(Error::NotDone)));
    // The buffer moves to another tag: the same descriptor now names memory the VI may
    // not use, and completes at once with a protection error.
    let moved = MemAttributes { ptag: other, rdma_write: false, rdma_read: false };
    nic.set_mem_attributes(buf.addr(0), buf.handle, moved).unwrap();
    vi.post_recv(desc.addr(0), desc.handle).unwrap();
    assert_eq!(vi.recv_done().unwrap().0, desc.addr(0));
    let st = u32::from_le_bytes(desc.get(28, 4).try_into().unwrap());
    assert_eq!(st & (status::DONE | status::PROTECTION_ERROR), status::DONE | status::PROTECTION_ERROR);
    // Deregistered, the same: nothing is taken from what was found before.
    let back = MemAttributes { ptag: p, rdma_write: false, rdma_read: false };
    nic.set_mem_attributes(buf.addr(0), buf.handle, back).unwrap();
    vi.post_recv(desc.addr(0), desc.handle).unwrap();
    assert!(matches!(vi.recv_done(), Err(Error::NotDone)));
    nic.deregister(buf.addr(0), buf.handle).unwrap();
    vi.post_recv(desc.addr(0), desc.handle).unwrap();
    assert_eq!(vi.recv_done().unwrap().0, desc.addr(0));
    let st = u32::from_le_bytes(desc.get(28, 4).try_into().unwrap());
    assert_ne!(st & status::PROTECTION_ERROR, 0);
}

/// A destroyed VI frees its protection tag at once, even while another thread (here a
/// clone; in a program the NIC's watcher or a notify handler) still holds the VI.
#[test]
fn a_destroyed_vi_frees_its_ptag_while_another_thread_holds_it() {
    let h = Harness::new();
    let nic = Nic::open_with_config("remora0", h.config(1)).unwrap();
    let p = nic.create_ptag();
    let vi = Vi::create(&nic, attrs(p, RELIABLE_DELIVERY, false), None, None).unwrap();
    let held = vi.clone();
    assert!(matches!(nic.destroy_ptag(p), Err(Error::Resource(_))), "a live VI carries the tag");
    vi.destroy().unwrap();
    nic.destroy_ptag(p).unwrap();
    drop(held);
}

/// A `MemoryRegion` answers for its memory while it lives (attributes read and changed,
/// a send from it arrives) and deregisters it when dropped: the handle is stale then, and
/// the protection tag is free (a region under a tag of its own, which no VI carries: the
/// first region's tag is the client VI's, busy while the VI lives).
#[test]
fn a_memory_region_deregisters_its_memory_when_dropped() {
    let h = Harness::new();
    let (snic, server, cnic, client, sp, cp) = pair(&h, 4, 4, RELIABLE_DELIVERY);
    connect(&snic, &server, &cnic, &client, b"region");
    let (sdesc, cdesc) = (mem(&snic, 4096, sp, false), mem(&cnic, 4096, cp, false));
    let rbuf = mem(&snic, 4096, sp, false);
    let buf: &'static mut [u8] = Box::leak(vec![0u8; 4096].into_boxed_slice());
    let plain = MemAttributes { ptag: cp, rdma_write: false, rdma_read: false };
    let region = cnic.register_region(UserRegion::from_static(buf), plain).unwrap();
    assert_eq!(region.attributes().unwrap(), plain);
    let rdma = MemAttributes { rdma_write: true, ..plain };
    region.set_attributes(rdma).unwrap();
    assert_eq!(cnic.query_mem(region.addr(0), region.handle()).unwrap(), rdma);
    let data = pattern(300, 7);
    region.region().write(0, &data).unwrap();
    let rd = Descriptor { length: 300, segments: vec![rbuf.seg(0, 300)], ..Default::default() };
    snic.write_descriptor(sdesc.addr(0), sdesc.handle, &rd).unwrap();
    server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
    let sd = Descriptor { length: 300, segments: vec![region.segment(0, 300)], ..Default::default() };
    assert_eq!(send(&cnic, &client, &cdesc, &sd) & status::DONE, status::DONE);
    assert_eq!(server.recv_wait(T).unwrap().0, sdesc.addr(0));
    assert_eq!(rbuf.get(0, 300), data);
    let (addr, handle) = (region.addr(0), region.handle());
    drop(region);
    assert!(matches!(cnic.query_mem(addr, handle), Err(Error::InvalidParameter(_))));
    // Deregistered by hand: the answer is given, and nothing is deregistered twice.
    let buf: &'static mut [u8] = Box::leak(vec![0u8; 4096].into_boxed_slice());
    let other = cnic.register_region(UserRegion::from_static(buf), plain).unwrap();
    let (addr, handle) = (other.addr(0), other.handle());
    other.deregister().unwrap();
    assert!(matches!(cnic.query_mem(addr, handle), Err(Error::InvalidParameter(_))));
    // A tag that only a region carries is busy while the region lives, free once it is
    // dropped.
    let own = cnic.create_ptag();
    let buf: &'static mut [u8] = Box::leak(vec![0u8; 4096].into_boxed_slice());
    let attrs = MemAttributes { ptag: own, ..plain };
    let region = cnic.register_region(UserRegion::from_static(buf), attrs).unwrap();
    assert!(matches!(cnic.destroy_ptag(own), Err(Error::Resource(_))), "the region's tag was free");
    drop(region);
    cnic.destroy_ptag(own).unwrap();
}
