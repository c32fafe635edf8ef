//! A server VI reused after `VipDisconnect` (it accepts the next client on the same VI):
//! nothing of its previous connection reaches the next one. The old client's send after
//! the server disconnected is not taken as the new connection's first message (a reliable
//! client delivers nothing: it breaks, its send flushed; an unreliable one's is dropped),
//! a receive it posts late is not described to the server, and its late disconnect leaves
//! the new connection up; the new client's messages then land intact both ways. On one
//! node, across two nodes of one host, and across two hosts (every store down the VI's
//! channel).

mod common;
use common::{connect, mem, Mem};

use remora_testkit::Harness;
use remora_vipl::layout::status;
use remora_vipl::*;
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(20));

fn attrs(ptag: ProtectionTag, reliability: u16) -> ViAttributes {
    ViAttributes { reliability, max_transfer: MAX_TRANSFER, ptag, rdma_write: false, rdma_read: false }
}

/// Post a receive of `len` bytes at `buf[off..]` with its descriptor at `desc + at`.
fn post_recv(nic: &Nic, vi: &Vi, desc: &Mem, at: usize, buf: &Mem, off: usize, len: usize) {
    let d = Descriptor { length: len as u32, segments: vec![buf.seg(off, len)], ..Default::default() };
    nic.write_descriptor(desc.addr(at), desc.handle, &d).unwrap();
    vi.post_recv(desc.addr(at), desc.handle).unwrap();
}

/// Post a send of `data` (put at `buf[off..]`) with its descriptor at `desc + at`, wait
/// for it, and return its status bits.
fn send(nic: &Nic, vi: &Vi, desc: &Mem, at: usize, buf: &Mem, off: usize, data: &[u8]) -> u32 {
    buf.put(off, data);
    let d = Descriptor {
        length: data.len() as u32,
        segments: vec![buf.seg(off, data.len())],
        ..Default::default()
    };
    nic.write_descriptor(desc.addr(at), desc.handle, &d).unwrap();
    vi.post_send(desc.addr(at), desc.handle).unwrap();
    assert_eq!(vi.send_wait(T).unwrap(), (desc.addr(at), desc.handle));
    nic.read_descriptor(desc.addr(at), desc.handle).unwrap().status
}

fn reused_server_hears_nothing_of_its_old_client(h: &Harness, snode: u32, cnode: u32, reliability: u16) {
    let what = format!("nodes {snode}/{cnode}, reliability {reliability}");
    let snic = Nic::open_with_config("remora0", h.config(snode)).unwrap();
    let cnic = Nic::open_with_config("remora0", h.config(cnode)).unwrap();
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let server = Vi::create(&snic, attrs(sp, reliability), None, None).unwrap();
    let old = Vi::create(&cnic, attrs(cp, reliability), None, None).unwrap();
    let new = Vi::create(&cnic, attrs(cp, reliability), None, None).unwrap();
    let (sbuf, sdesc) = (mem(&snic, 8192, sp, false), mem(&snic, 1024, sp, false));
    let (cbuf, cdesc) = (mem(&cnic, 8192, cp, false), mem(&cnic, 1024, cp, false));

    // The first connection: the server has a receive posted, and disconnects.
    post_recv(&snic, &server, &sdesc, 0, &sbuf, 0, 1024);
    connect(&snic, &server, &cnic, &old, format!("old{snode}{cnode}{reliability}").as_bytes());
    server.disconnect().unwrap();
    assert_eq!(server.recv_wait(T).unwrap(), (sdesc.addr(0), sdesc.handle), "{what}");
    let flushed = snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap().status;
    assert_ne!(flushed & status::DESC_FLUSHED_ERROR, 0, "{what}: {flushed:#x}");

    // The old client has not noticed and sends.
    let st = send(&cnic, &old, &cdesc, 0, &cbuf, 0, b"OLD-C1!!");
    if reliability != UNRELIABLE {
        assert_ne!(st & status::ERROR_MASK, 0, "{what}: a reliable send to a peer gone: {st:#x}");
        assert_eq!(old.state(), ViState::Error, "{what}");
    } else {
        // Dropped, as an unreliable send that finds no receive (or flushed, when the VI
        // heard of the disconnect first and broke).
        let flushed = st & status::DESC_FLUSHED_ERROR != 0;
        assert!(st == status::DONE | status::OP_SEND || flushed, "{what}: {st:#x}");
    }

    // The server takes the next client on the same VI.
    post_recv(&snic, &server, &sdesc, 64, &sbuf, 1024, 1024);
    connect(&snic, &server, &cnic, &new, format!("new{snode}{cnode}{reliability}").as_bytes());
    assert_eq!((server.state(), new.state()), (ViState::Connected, ViState::Connected), "{what}");
    // The old client posts a receive late, then disconnects late.
    post_recv(&cnic, &old, &cdesc, 64, &cbuf, 4096, 1024);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(server.recv_done().err(), Some(Error::NotDone), "{what}: the old client's send came in");
    old.disconnect().unwrap();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(server.recv_done().err(), Some(Error::NotDone), "{what}");
    }
    assert_eq!(
        (server.state(), new.state()),
        (ViState::Connected, ViState::Connected),
        "{what}: the old client's late disconnect"
    );
    assert_eq!(sbuf.get(1024, 8), vec![0u8; 8], "{what}");

    // The new connection works both ways.
    let st = send(&cnic, &new, &cdesc, 128, &cbuf, 2048, b"NEW-C2-1");
    assert_eq!(st, status::DONE | status::OP_SEND, "{what}");
    assert_eq!(server.recv_wait(T).unwrap(), (sdesc.addr(64), sdesc.handle), "{what}");
    let got = snic.read_descriptor(sdesc.addr(64), sdesc.handle).unwrap();
    assert_eq!((got.status, got.length), (status::DONE | status::OP_RECEIVE, 8), "{what}");
    assert_eq!(sbuf.get(1024, 8), b"NEW-C2-1", "{what}");
    post_recv(&cnic, &new, &cdesc, 192, &cbuf, 6144, 1024);
    let st = send(&snic, &server, &sdesc, 128, &sbuf, 4096, b"S-TO-C2!");
    assert_eq!(st, status::DONE | status::OP_SEND, "{what}");
    assert_eq!(new.recv_wait(T).unwrap(), (cdesc.addr(192), cdesc.handle), "{what}");
    assert_eq!(cbuf.get(6144, 8), b"S-TO-C2!", "{what}");
    // The old client's late receive got nothing (its disconnect flushed it).
    assert_eq!(cbuf.get(4096, 8), vec![0u8; 8], "{what}");
    assert_eq!((server.state(), new.state()), (ViState::Connected, ViState::Connected), "{what}");
    new.disconnect().unwrap();
    server.disconnect().unwrap();
}

#[test]
fn a_reused_vi_hears_nothing_of_its_old_peer_on_one_host() {
    let h = Harness::new();
    for (snode, cnode) in [(4, 4), (4, 8)] {
        for reliability in [RELIABLE_DELIVERY, UNRELIABLE] {
            reused_server_hears_nothing_of_its_old_client(&h, snode, cnode, reliability);
        }
    }
}

#[test]
fn a_reused_vi_hears_nothing_of_its_old_peer_across_hosts() {
    let h = Harness::with_cluster(&[4, 8], true);
    for reliability in [RELIABLE_DELIVERY, UNRELIABLE] {
        reused_server_hears_nothing_of_its_old_client(&h, 4, 8, reliability);
    }
}
