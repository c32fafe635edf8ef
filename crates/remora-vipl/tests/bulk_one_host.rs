//! 64 KiB messages between two nodes of one host (issue 15's bulk path): where a receive's
//! buffers lie is noted when the sender learns the receive, and the peer's piece written
//! last (and its table) is kept by the send queue. Over more messages than ring A has
//! entries (so every note is taken again for a later receive), each message's bytes land
//! whole in its own receive, with the status bits, length and immediate data VIA gives;
//! sends and RDMA writes with immediate data alike. A receiver that deregisters its
//! buffers and registers new ones between messages gets the next message in the new
//! memory, the old left as it was.

mod common;
use common::mem;

use remora_testkit::Harness;
use remora_vipl::layout::{control, status};
use remora_vipl::*;
use std::time::Duration;

const KIB64: usize = 64 << 10;
/// More than ring A's 256 entries.
const MESSAGES: usize = 300;
/// Receives kept posted.
const SLOTS: usize = 8;
const T: Option<Duration> = Some(Duration::from_secs(20));

fn pattern(i: usize) -> Vec<u8> {
    (0..KIB64).map(|j| (j as u8).wrapping_mul(31) ^ (i as u8).wrapping_mul(101) ^ (j >> 9) as u8).collect()
}

struct Ends {
    _h: Harness,
    snic: Nic,
    cnic: Nic,
    sp: ProtectionTag,
    cp: ProtectionTag,
    server: Vi,
    client: Vi,
    /// The server's receive descriptors (one per slot), the client's send descriptor.
    rdesc: common::Mem,
    cdesc: common::Mem,
    /// The client's source.
    src: common::Mem,
}

fn ends(disc: &[u8]) -> Ends {
    let h = Harness::new();
    let snic = Nic::open_with_config("remora0", h.config(4)).unwrap();
    let cnic = Nic::open_with_config("remora0", h.config(8)).unwrap();
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let attrs = |ptag| ViAttributes {
        reliability: RELIABLE_DELIVERY,
        max_transfer: MAX_TRANSFER,
        ptag,
        rdma_write: true,
        rdma_read: true,
    };
    let server = Vi::create(&snic, attrs(sp), None, None).unwrap();
    let client = Vi::create(&cnic, attrs(cp), None, None).unwrap();
    common::connect(&snic, &server, &cnic, &client, disc);
    let rdesc = mem(&snic, 64 * SLOTS, sp, false);
    let (cdesc, src) = (mem(&cnic, 64, cp, false), mem(&cnic, KIB64, cp, true));
    Ends { _h: h, snic, cnic, sp, cp, server, client, rdesc, cdesc, src }
}

impl Ends {
    /// Post receive `slot` of 64 KiB into `buf` at `slot` × 64 KiB.
    fn post(&self, slot: usize, buf: &common::Mem) {
        let d = Descriptor {
            length: KIB64 as u32,
            segments: vec![buf.seg(slot * KIB64, KIB64)],
            ..Default::default()
        };
        self.snic.write_descriptor(self.rdesc.addr(slot * 64), self.rdesc.handle, &d).unwrap();
        self.server.post_recv(self.rdesc.addr(slot * 64), self.rdesc.handle).unwrap();
    }

    /// Send message `i` (an RDMA write with immediate data `i` into `rdma`'s start when
    /// given); the send's status bits.
    fn send(&self, i: usize, rdma: Option<DataSegment>) -> u32 {
        self.src.put(0, &pattern(i));
        let (control, segments) = match rdma {
            Some(r) => (control::OP_RDMAWRITE | control::IMMEDIATE, vec![r, self.src.seg(0, KIB64)]),
            None => (0, vec![self.src.seg(0, KIB64)]),
        };
        let d =
            Descriptor { control, length: KIB64 as u32, immediate: i as u32, segments, ..Default::default() };
        common::send(&self.cnic, &self.client, &self.cdesc, &d)
    }

    /// Wait for the next receive: it is slot `slot`'s; its descriptor.
    fn received(&self, slot: usize) -> Descriptor {
        assert_eq!(self.server.recv_wait(T).unwrap(), (self.rdesc.addr(slot * 64), self.rdesc.handle));
        self.snic.read_descriptor(self.rdesc.addr(slot * 64), self.rdesc.handle).unwrap()
    }
}

#[test]
fn many_64_kib_sends_land_whole_in_their_receives_on_one_host() {
    let e = ends(b"bulk-send");
    let buf = mem(&e.snic, SLOTS * KIB64, e.sp, false);
    for s in 0..SLOTS {
        e.post(s, &buf);
    }
    for i in 0..MESSAGES {
        let slot = i % SLOTS;
        assert_eq!(e.send(i, None), status::DONE | status::OP_SEND, "send {i}");
        let d = e.received(slot);
        assert_eq!(d.status, status::DONE | status::OP_RECEIVE, "receive {i}");
        assert_eq!(d.length, KIB64 as u32, "receive {i}");
        assert!(buf.get(slot * KIB64, KIB64) == pattern(i), "message {i} landed whole in slot {slot}");
        e.post(slot, &buf);
    }
    assert_eq!((e.client.state(), e.server.state()), (ViState::Connected, ViState::Connected));
}

#[test]
fn many_64_kib_rdma_writes_with_immediate_data_land_whole_on_one_host() {
    let e = ends(b"bulk-rdma");
    let buf = mem(&e.snic, SLOTS * KIB64, e.sp, false);
    let target = mem(&e.snic, 4 * KIB64, e.sp, true);
    for s in 0..SLOTS {
        e.post(s, &buf);
    }
    for i in 0..MESSAGES {
        let (slot, at) = (i % SLOTS, (i % 4) * KIB64);
        let remote = DataSegment { addr: target.addr(at) as u64, handle: target.handle, len: 0 };
        assert_eq!(e.send(i, Some(remote)), status::DONE | status::OP_RDMA_WRITE, "write {i}");
        let d = e.received(slot);
        assert_eq!(
            d.status,
            status::DONE | status::OP_REMOTE_RDMA_WRITE | status::IMMEDIATE,
            "the receive write {i} took"
        );
        assert_eq!(d.immediate, i as u32, "write {i}");
        assert!(target.get(at, KIB64) == pattern(i), "write {i} landed whole at {at}");
        e.post(slot, &buf);
    }
    assert_eq!((e.client.state(), e.server.state()), (ViState::Connected, ViState::Connected));
}

#[test]
fn a_64_kib_send_after_the_receiver_changed_its_memory_lands_in_the_new_memory() {
    let e = ends(b"bulk-change");
    let old = mem(&e.snic, KIB64, e.sp, false);
    for i in 0..3 {
        e.post(0, &old);
        assert_eq!(e.send(i, None), status::DONE, "send {i}");
        assert_eq!(e.received(0).status, status::DONE | status::OP_RECEIVE);
        assert!(old.get(0, KIB64) == pattern(i), "message {i}");
    }
    // No receive posted: the old memory goes, new memory (another piece) comes.
    e.snic.deregister(old.addr(0), old.handle).unwrap();
    let new = mem(&e.snic, KIB64, e.sp, false);
    for i in 3..6 {
        e.post(0, &new);
        assert_eq!(e.send(i, None), status::DONE, "send {i}");
        assert_eq!(e.received(0).status, status::DONE | status::OP_RECEIVE, "receive {i}");
        assert!(new.get(0, KIB64) == pattern(i), "message {i} in the new memory");
    }
    assert!(old.get(0, KIB64) == pattern(2), "the old memory, the program's again, untouched");
    assert_eq!((e.client.state(), e.server.state()), (ViState::Connected, ViState::Connected));
}

/// Short and 64 KiB sends mixed over 700 messages into 7 slots: the short path learns
/// receives without noting where their buffers lie, so a note left from 256 receives
/// earlier (another slot, as 7 does not divide 256) must be told apart from the receive's
/// own (the note's check of receive and connection; without it, message 257 landed in
/// another slot).
#[test]
fn short_and_64_kib_sends_mixed_over_ring_wraps_land_in_their_own_receives() {
    const S: usize = 7; // not a divisor of 256: entry k and k - 256 name other buffers
    let e = ends(b"bulk-mixed");
    let buf = mem(&e.snic, S * KIB64, e.sp, false);
    let rdesc = mem(&e.snic, 64 * S, e.sp, false);
    let post = |slot: usize| {
        let d = Descriptor {
            length: KIB64 as u32,
            segments: vec![buf.seg(slot * KIB64, KIB64)],
            ..Default::default()
        };
        e.snic.write_descriptor(rdesc.addr(slot * 64), rdesc.handle, &d).unwrap();
        e.server.post_recv(rdesc.addr(slot * 64), rdesc.handle).unwrap();
    };
    for s in 0..S {
        post(s);
    }
    let (sdesc, ssrc) = (mem(&e.cnic, 64, e.cp, false), mem(&e.cnic, 64, e.cp, false));
    for i in 0..700 {
        let slot = i % S;
        let short = i % 2 == 0;
        let len = if short { 16 } else { KIB64 };
        let p = pattern(i);
        let (src, desc) = if short { (&ssrc, &sdesc) } else { (&e.src, &e.cdesc) };
        src.put(0, &p[..len]);
        let d = Descriptor { length: len as u32, segments: vec![src.seg(0, len)], ..Default::default() };
        assert_eq!(common::send(&e.cnic, &e.client, desc, &d), status::DONE, "send {i}");
        assert_eq!(e.server.recv_wait(T).unwrap(), (rdesc.addr(slot * 64), rdesc.handle));
        let r = e.snic.read_descriptor(rdesc.addr(slot * 64), rdesc.handle).unwrap();
        assert_eq!(r.length, len as u32, "receive {i}");
        assert!(buf.get(slot * KIB64, len) == p[..len], "message {i} in slot {slot}");
        post(slot);
    }
}
