//! The straight line of a long send and an RDMA write (`short/long.rs`): what it carries
//! arrives as on the general path, and what it leaves to that path (a receive too small,
//! an RDMA write the peer does not allow) ends with the same statuses. Each descriptor is
//! posted twice, so that its second post finds it in the send queue's cache with the
//! peer's receive learned: the straight line's case.

use crate::layout::{self, control, status};
use crate::testing::{connect, post_recv, post_send, send, two, two_with, Mem, Two, T};
use crate::{
    CompletionQueue, DataSegment, Descriptor, MemAttributes, Nic, ProtectionTag, Vi, ViAttributes, ViState,
};
use crate::{MAX_TRANSFER, UNRELIABLE};
use remora_testkit::Harness;
use std::sync::atomic::Ordering;

/// Posts of this thread the straight line carried out so far.
fn lines() -> u64 {
    super::LINES.with(|n| n.get())
}

/// The descriptor of the receive `vi` completes next (its status and length).
fn received(nic: &Nic, vi: &Vi) -> Descriptor {
    let (addr, handle) = vi.recv_wait(T).unwrap();
    nic.read_descriptor(addr, handle).unwrap()
}

/// Post the RDMA write (with immediate data `imm`, when given) of `buf[..len]` to the
/// peer's memory at `to`, its descriptor at `desc`; its status bits.
fn rdma_write(
    nic: &Nic,
    vi: &Vi,
    desc: &Mem,
    buf: &Mem,
    len: usize,
    to: DataSegment,
    imm: Option<u32>,
) -> u32 {
    let seg = DataSegment { addr: buf.addr(0) as u64, handle: buf.handle, len: len as u32 };
    let d = Descriptor {
        control: control::OP_RDMAWRITE | if imm.is_some() { control::IMMEDIATE } else { 0 },
        immediate: imm.unwrap_or(0),
        length: len as u32,
        segments: vec![to, seg],
        ..Default::default()
    };
    nic.write_descriptor(desc.addr(0), desc.handle, &d).unwrap();
    vi.post_send(desc.addr(0), desc.handle).unwrap();
    assert_eq!(vi.send_wait(T).unwrap(), (desc.addr(0), desc.handle));
    nic.read_descriptor(desc.addr(0), desc.handle).unwrap().status
}

#[test]
fn long_sends_and_rdma_writes_arrive_whole_with_their_completions() {
    let h = Harness::with_cluster(&[4, 8], false);
    let Two { snic, cnic, sp, cp, server, client } = two_with(&h, None, true);
    let (sbuf, sdesc) = (Mem::new(&snic, 6 * 8192, sp), Mem::new(&snic, 1024, sp));
    let target = register(&snic, 8192, sp, true);
    let (cbuf, cdesc) = (Mem::new(&cnic, 8192, cp), Mem::new(&cnic, 1024, cp));
    for i in 0..6 {
        post_recv(&snic, &server, &sdesc, 64 * i, &sbuf, 8192 * i, 8192);
    }
    connect(&snic, &server, &cnic, &client, b"long-whole");
    assert!(client.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
    let l0 = lines();
    for (i, byte) in [7u8, 9].into_iter().enumerate() {
        let st = send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[byte; 5000]);
        assert_eq!(st, status::DONE | status::OP_SEND, "send {i}");
        let r = received(&snic, &server);
        assert_eq!((r.status, r.length), (status::DONE | status::OP_RECEIVE, 5000), "receive {i}");
        assert_eq!(sbuf.get(8192 * i, 5000), vec![byte; 5000], "payload {i}");
    }
    assert_eq!(lines() - l0, 1, "the second send did not take the straight line");
    let l0 = lines();
    let to = DataSegment { addr: target.addr(100) as u64, handle: target.handle, len: 0 };
    for (i, imm) in [11u32, 12].into_iter().enumerate() {
        fill(&cbuf, 3000, imm as u8);
        let st = rdma_write(&cnic, &client, &cdesc, &cbuf, 3000, to, Some(imm));
        assert_eq!(st, status::DONE | status::OP_RDMA_WRITE, "write {i}");
        let r = received(&snic, &server);
        let want = status::DONE | status::OP_REMOTE_RDMA_WRITE | status::IMMEDIATE;
        assert_eq!((r.status, r.length, r.immediate), (want, 3000, imm), "write {i}'s completion");
        assert_eq!(target.get(100, 3000), vec![imm as u8; 3000], "write {i}'s bytes");
    }
    assert!(lines() - l0 >= 1, "no RDMA write took the straight line");
    let l0 = lines();
    // Without immediate data: the bytes land, no receive is consumed (the fifth stays
    // posted, and the next send's payload reaches it).
    for (i, byte) in [21u8, 22].into_iter().enumerate() {
        fill(&cbuf, 3000, byte);
        let st = rdma_write(&cnic, &client, &cdesc, &cbuf, 3000, to, None);
        assert_eq!(st, status::DONE | status::OP_RDMA_WRITE, "plain write {i}");
        assert_eq!(target.get(100, 3000), vec![byte; 3000], "plain write {i}'s bytes");
    }
    assert!(lines() - l0 >= 1, "no plain RDMA write took the straight line");
    assert_eq!(client.inner.send.lock().consumed, 4, "a write without immediate data consumed a receive");
    send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[6u8; 5000]);
    let r = received(&snic, &server);
    assert_eq!((r.status, r.length), (status::DONE | status::OP_RECEIVE, 5000), "the fifth receive");
    assert_eq!(sbuf.get(8192 * 4, 5000), vec![6u8; 5000], "the fifth receive's payload");
}

/// A long send whose receive is too small: the receive completes with a length error and
/// the (reliable) VI breaks, as the general path ends it.
#[test]
fn a_long_send_to_a_receive_too_small_ends_as_on_the_general_path() {
    let h = Harness::with_cluster(&[4, 8], false);
    let Two { snic, cnic, sp, cp, server, client } = two(&h, None);
    let (sbuf, sdesc) = (Mem::new(&snic, 8192, sp), Mem::new(&snic, 1024, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 8192, cp), Mem::new(&cnic, 1024, cp));
    post_recv(&snic, &server, &sdesc, 0, &sbuf, 0, 4096);
    post_recv(&snic, &server, &sdesc, 64, &sbuf, 4096, 1000);
    connect(&snic, &server, &cnic, &client, b"long-small");
    assert!(client.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
    assert_eq!(send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[3u8; 2000]), status::DONE | status::OP_SEND);
    assert_eq!(client.inner.send.lock().seen, 2, "the small receive was not learned");
    assert_eq!(received(&snic, &server).length, 2000);
    // The same descriptor again, into the 1000-byte receive: the straight line leaves it.
    let l0 = lines();
    let st = send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[4u8; 2000]);
    assert_eq!(lines(), l0, "a receive too small was taken on the straight line");
    assert_eq!(st, status::DONE | status::OP_SEND, "the sender's status");
    let r = received(&snic, &server);
    assert_eq!(r.status, status::DONE | status::OP_RECEIVE | status::LENGTH_ERROR, "the receive's status");
    assert_eq!(sbuf.get(4096, 1000), vec![0u8; 1000], "bytes landed in a receive too small");
    let t = std::time::Instant::now();
    while client.state() != ViState::Error {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "the sender's VI did not break");
        std::thread::yield_now();
    }
}

/// An RDMA write the peer does not allow (its VI without RDMA write, or its memory),
/// posted twice on an unreliable VI (which does not break): both times a protection
/// error, nothing written, no receive consumed.
#[test]
fn an_rdma_write_the_peer_does_not_allow_fails_the_same_each_time() {
    for (vi_allows, mem_allows) in [(false, true), (true, false)] {
        let h = Harness::with_cluster(&[4, 8], false);
        let snic = Nic::open_with_config("remora0", h.config(4)).unwrap();
        let cnic = Nic::open_with_config("remora0", h.config(8)).unwrap();
        let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
        let attrs = |ptag, rdma_write| ViAttributes {
            reliability: UNRELIABLE,
            max_transfer: MAX_TRANSFER,
            ptag,
            rdma_write,
            rdma_read: false,
        };
        let server = Vi::create(&snic, attrs(sp, vi_allows), None, None).unwrap();
        let client = Vi::create(&cnic, attrs(cp, true), None, None).unwrap();
        let (sbuf, sdesc) = (Mem::new(&snic, 3 * 4096, sp), Mem::new(&snic, 1024, sp));
        let target = register(&snic, 8192, sp, mem_allows);
        let (cbuf, cdesc) = (Mem::new(&cnic, 8192, cp), Mem::new(&cnic, 1024, cp));
        for i in 0..3 {
            post_recv(&snic, &server, &sdesc, 64 * i, &sbuf, 4096 * i, 4096);
        }
        connect(&snic, &server, &cnic, &client, b"long-refused");
        assert!(client.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
        // A send learns the three receives.
        send(&cnic, &client, &cdesc, 64, &cbuf, 0, &[1u8; 8]);
        assert_eq!(received(&snic, &server).length, 8);
        assert_eq!(client.inner.send.lock().seen, 3, "the receives were not learned");
        fill(&cbuf, 3000, 5);
        let to = DataSegment { addr: target.addr(0) as u64, handle: target.handle, len: 0 };
        for i in 0..2 {
            let st = rdma_write(&cnic, &client, &cdesc, &cbuf, 3000, to, Some(77));
            let want = status::DONE | status::OP_RDMA_WRITE | status::RDMA_PROT_ERROR;
            assert_eq!(st, want, "write {i} (VI allows: {vi_allows}, memory: {mem_allows})");
        }
        assert_eq!(target.get(0, 3000), vec![0u8; 3000], "a refused write landed");
        assert_eq!(client.inner.send.lock().consumed, 1, "a refused write consumed a receive");
        assert_eq!(client.state(), ViState::Connected, "the unreliable VI broke");
    }
}

/// A long send into a receive whose memory the receiver deregistered after the sender
/// learned it, on the straight line (the descriptor posted once before, into a live
/// receive): the piece is gone, and the send ends as on the general path
/// (`tests/deregistered_pieces.rs`): the receive completes with a protection error,
/// nothing written, the sender's status without an error bit, and both reliable VIs break.
#[test]
fn a_long_send_into_deregistered_memory_ends_as_on_the_general_path() {
    let h = Harness::with_cluster(&[4, 8], false);
    let Two { snic, cnic, sp, cp, server, client } = two(&h, None);
    let (sbuf, sdesc) = (Mem::new(&snic, 8192, sp), Mem::new(&snic, 1024, sp));
    let gone = Mem::own_pages(&snic, 16384, sp);
    let (cbuf, cdesc) = (Mem::new(&cnic, 8192, cp), Mem::new(&cnic, 1024, cp));
    post_recv(&snic, &server, &sdesc, 0, &sbuf, 0, 8192);
    post_recv(&snic, &server, &sdesc, 64, &gone, 0, 16384);
    connect(&snic, &server, &cnic, &client, b"long-gone");
    assert!(client.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
    assert_eq!(send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[3u8; 4096]), status::DONE | status::OP_SEND);
    assert_eq!(client.inner.send.lock().seen, 2, "the second receive was not learned");
    let r = received(&snic, &server);
    assert_eq!((r.status, r.length), (status::DONE | status::OP_RECEIVE, 4096), "the first receive");
    // Its piece goes.
    snic.deregister(gone.addr(0), gone.handle).unwrap();
    let st = send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[4u8; 4096]);
    assert_eq!(st, status::DONE | status::OP_SEND, "the sender's status");
    let r = received(&snic, &server);
    assert_eq!(
        r.status,
        status::DONE | status::OP_RECEIVE | status::PROTECTION_ERROR,
        "the receive's status"
    );
    assert_eq!(gone.get(0, 4096), vec![0u8; 4096], "bytes landed in deregistered memory");
    let t = std::time::Instant::now();
    while (client.state(), server.state()) != (ViState::Error, ViState::Error) {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "the reliable VIs did not break");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// RDMA writes on a reliable VI (with and without immediate data) whose peer takes RDMA
/// write away from the target's memory after the writes took the straight line: the next
/// post of the same descriptor (the line's case) is refused with the protection error,
/// nothing written, and the VI breaks, as on the general path (`tests/rdma_peer_change.rs`).
#[test]
fn an_rdma_write_refused_on_the_straight_line_breaks_a_reliable_vi() {
    for imm in [None, Some(31u32)] {
        let h = Harness::with_cluster(&[4, 8], false);
        let Two { snic, cnic, sp, cp, server, client } = two_with(&h, None, true);
        let (sbuf, sdesc) = (Mem::new(&snic, 3 * 4096, sp), Mem::new(&snic, 1024, sp));
        let target = register(&snic, 8192, sp, true);
        let (cbuf, cdesc) = (Mem::new(&cnic, 8192, cp), Mem::new(&cnic, 1024, cp));
        for i in 0..3 {
            post_recv(&snic, &server, &sdesc, 64 * i, &sbuf, 4096 * i, 4096);
        }
        connect(&snic, &server, &cnic, &client, b"long-prot");
        assert!(client.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
        // A send learns the receives.
        send(&cnic, &client, &cdesc, 64, &cbuf, 0, &[1u8; 8]);
        assert_eq!(received(&snic, &server).length, 8);
        assert_eq!(client.inner.send.lock().seen, 3, "the receives were not learned");
        let to = DataSegment { addr: target.addr(100) as u64, handle: target.handle, len: 0 };
        for i in 0..2u8 {
            fill(&cbuf, 3000, 40 + i);
            let st = rdma_write(&cnic, &client, &cdesc, &cbuf, 3000, to, imm);
            assert_eq!(st, status::DONE | status::OP_RDMA_WRITE, "write {i} (immediate: {imm:?})");
            if imm.is_some() {
                assert_eq!(received(&snic, &server).length, 3000, "write {i}'s completion");
            }
        }
        assert_eq!(target.get(100, 3000), vec![41u8; 3000], "the writes' bytes");
        let no_write = MemAttributes { ptag: sp, rdma_write: false, rdma_read: false };
        snic.set_mem_attributes(target.addr(0), target.handle, no_write).unwrap();
        fill(&cbuf, 3000, 99);
        let st = rdma_write(&cnic, &client, &cdesc, &cbuf, 3000, to, imm);
        let want = status::DONE | status::OP_RDMA_WRITE | status::RDMA_PROT_ERROR;
        assert_eq!(st, want, "the write after the change (immediate: {imm:?})");
        assert_eq!(target.get(100, 3000), vec![41u8; 3000], "a refused write landed");
        let t = std::time::Instant::now();
        while client.state() != ViState::Error {
            assert!(t.elapsed() < std::time::Duration::from_secs(20), "the reliable VI did not break");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// A repeated long send (the straight line) tells whoever waits: a receiver asleep in
/// `recv_wait` gets its receive, a thread asleep in `send_wait` its descriptor (the send
/// sequence it sleeps on moves), the send completion queue an entry; and a receiver whose
/// waiting flag is up is rung (its bell has a trigger to take).
#[test]
fn a_long_send_on_the_straight_line_wakes_its_waiters() {
    let h = Harness::with_cluster(&[4, 8], false);
    let snic = Nic::open_with_config("remora0", h.config(4)).unwrap();
    let cnic = Nic::open_with_config("remora0", h.config(8)).unwrap();
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let cq = CompletionQueue::create(&cnic, 8).unwrap();
    let attrs = |ptag| ViAttributes {
        reliability: crate::RELIABLE_DELIVERY,
        max_transfer: MAX_TRANSFER,
        ptag,
        rdma_write: false,
        rdma_read: false,
    };
    let server = Vi::create(&snic, attrs(sp), None, None).unwrap();
    let client = Vi::create(&cnic, attrs(cp), Some(&cq), None).unwrap();
    let (sbuf, sdesc) = (Mem::new(&snic, 3 * 8192, sp), Mem::new(&snic, 1024, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 8192, cp), Mem::new(&cnic, 1024, cp));
    for i in 0..3 {
        post_recv(&snic, &server, &sdesc, 64 * i, &sbuf, 8192 * i, 8192);
    }
    connect(&snic, &server, &cnic, &client, b"long-waiters");
    assert!(client.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
    let sent = |byte: u8| {
        let (vi, recv) = cq.wait(T).unwrap();
        assert_eq!((vi.id(), recv), (client.id(), false), "send {byte}'s completion queue entry");
        assert!(cq.done().is_err(), "send {byte} pushed more than one entry");
    };
    // The first post: the general way.
    assert_eq!(send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[1u8; 5000]), status::DONE | status::OP_SEND);
    sent(1);
    assert_eq!(received(&snic, &server).length, 5000);

    // Asleep before the second post: a receiver in `recv_wait`, a sender in `send_wait`.
    let (s, nic) = (server.clone(), snic.clone());
    let receiver = std::thread::spawn(move || received(&nic, &s));
    let c = client.clone();
    let sender = std::thread::spawn(move || c.send_wait(T).unwrap());
    let t = std::time::Instant::now();
    while !client.inner.flag_up(layout::PEER_WAITING) || client.inner.send_waiters.load(Ordering::SeqCst) == 0
    {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "the waiters did not wait");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // Past their spins, asleep.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (seq, l0) = (client.inner.send_seq.load(Ordering::SeqCst), lines());
    post_send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[2u8; 5000]);
    assert_eq!(lines() - l0, 1, "the second post did not take the straight line");
    assert_eq!(sender.join().unwrap(), (cdesc.addr(0), cdesc.handle), "the waiting sender's descriptor");
    assert_ne!(client.inner.send_seq.load(Ordering::SeqCst), seq, "the sleeping sender was not woken");
    assert_eq!(
        cnic.read_descriptor(cdesc.addr(0), cdesc.handle).unwrap().status,
        status::DONE | status::OP_SEND
    );
    sent(2);
    let r = receiver.join().unwrap();
    assert_eq!((r.status, r.length), (status::DONE | status::OP_RECEIVE, 5000), "the sleeping receiver's");
    assert_eq!(sbuf.get(8192, 5000), vec![2u8; 5000], "the second payload");

    // A receiver whose waiting flag is up (raised here as `recv_wait` raises it) is rung.
    let bell = &server.inner.bell;
    while bell.wait_with_spin(Some(std::time::Duration::from_millis(1)), std::time::Duration::ZERO).is_ok() {}
    let l = server.inner.link().unwrap();
    l.store(layout::PEER_WAITING, l.tag(1));
    let l0 = lines();
    post_send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[3u8; 5000]);
    assert_eq!(lines() - l0, 1, "the third post did not take the straight line");
    assert!(
        bell.wait_with_spin(T, std::time::Duration::ZERO).is_ok(),
        "the waiting receiver's bell was not rung"
    );
    l.store(layout::PEER_WAITING, l.tag(0));
    assert_eq!(client.send_wait(T).unwrap(), (cdesc.addr(0), cdesc.handle));
    sent(3);
    assert_eq!(received(&snic, &server).length, 5000);
    assert_eq!(sbuf.get(2 * 8192, 5000), vec![3u8; 5000], "the third payload");
}

/// `len` bytes of `fill` at the start of `m`.
fn fill(m: &Mem, len: usize, fill: u8) {
    m.region().write(0, &vec![fill; len]).unwrap();
}

/// Memory registered with RDMA write allowed or not.
fn register(nic: &Nic, len: usize, ptag: ProtectionTag, rdma_write: bool) -> Mem {
    Mem::with(nic, len, MemAttributes { ptag, rdma_write, rdma_read: false })
}
