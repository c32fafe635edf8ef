//! Pages registered, deregistered and registered again, by one NIC or by several NICs of
//! one process: a peer's message into the registration of now lands in the program's
//! memory. Registered again, the pages are new pieces, which a peer that wrote into the
//! old ones never takes for those; and while one NIC registers and deregisters a buffer
//! again and again, another NIC's registration of the same pages stays shared all along
//! (the deregistration's give-back of the pages never runs under a registration that
//! found them shared). A receive posted before its memory was deregistered and registered
//! again fails (the message went to the pieces it described, which are gone).

mod common;
use common::{connect, mem};

use remora_testkit::Harness;
use remora_vipl::layout::status;
use remora_vipl::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(10));

/// `pages` fresh pages of the heap, page-aligned, that live for the rest of the process.
fn fresh_pages(pages: usize) -> UserRegion {
    let page = 4096;
    let buf: &'static mut [u8] = Box::leak(vec![0u8; (pages + 1) * page].into_boxed_slice());
    let skip = (page - buf.as_ptr() as usize % page) % page;
    UserRegion::from_static(&mut buf[skip..skip + pages * page])
}

fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| (i ^ seed.wrapping_mul(7)) as u8).collect()
}

/// Post a receive of `n` bytes into `buf` at `at` (registered as `handle` on `snic`), send
/// `n` bytes of `seed`'s pattern from the client, and check that they are where the
/// program put its buffer.
fn message_lands(
    (snic, server, sdesc): (&Nic, &Vi, &common::Mem),
    (cnic, client, cdesc, cbuf): (&Nic, &Vi, &common::Mem, &common::Mem),
    buf: UserRegion,
    handle: MemHandle,
    at: usize,
    n: usize,
    seed: usize,
) -> bool {
    buf.write(at, &vec![0u8; n]).unwrap();
    let rd = Descriptor {
        length: n as u32,
        segments: vec![DataSegment { addr: (buf.addr() + at) as u64, handle, len: n as u32 }],
        ..Default::default()
    };
    snic.write_descriptor(sdesc.addr(0), sdesc.handle, &rd).unwrap();
    server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
    let data = pattern(n, seed);
    cbuf.put(0, &data);
    let sd = Descriptor { length: n as u32, segments: vec![cbuf.seg(0, n)], ..Default::default() };
    let st = common::send(cnic, client, cdesc, &sd);
    assert_eq!(st, status::DONE | status::OP_SEND, "send {st:#x}");
    assert_eq!(server.recv_wait(T).unwrap(), (sdesc.addr(0), sdesc.handle));
    let got = snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap();
    assert_eq!(got.status, status::DONE | status::OP_RECEIVE);
    let mut back = vec![0u8; n];
    buf.read(at, &mut back).unwrap();
    back == data
}

#[test]
fn memory_registered_again_takes_the_next_message() {
    let h = Harness::new();
    let (_h, snic, cnic, sp, cp, server, client) = common::reliable_vis(h);
    connect(&snic, &server, &cnic, &client, b"again");
    let buf = fresh_pages(2);
    let (sdesc, cdesc) = (mem(&snic, 256, sp, false), mem(&cnic, 256, cp, false));
    let cbuf = mem(&cnic, 4096, cp, false);
    let attrs = MemAttributes { ptag: sp, rdma_write: false, rdma_read: false };
    for round in 0..4 {
        let handle = snic.register(buf, attrs).unwrap();
        let landed = message_lands(
            (&snic, &server, &sdesc),
            (&cnic, &client, &cdesc, &cbuf),
            buf,
            handle,
            (round % 2) * 4096,
            4096,
            round,
        );
        assert!(landed, "registration {round}: the message did not reach the program's memory");
        snic.deregister(buf.addr(), handle).unwrap();
    }
}

#[test]
fn a_deregistration_on_another_nic_never_unshares_a_registration() {
    let h = Harness::new();
    let (h, snic, cnic, sp, cp, server, client) = common::reliable_vis(h);
    connect(&snic, &server, &cnic, &client, b"shared-pages");
    let churn_nic = Nic::open_with_config("remora0", h.config(4)).unwrap();
    let churn_tag = churn_nic.create_ptag();
    let buf = fresh_pages(2);
    let (sdesc, cdesc) = (mem(&snic, 256, sp, false), mem(&cnic, 256, cp, false));
    let cbuf = mem(&cnic, 4096, cp, false);

    // Another NIC registers and deregisters the same pages meanwhile.
    let stop = Arc::new(AtomicBool::new(false));
    let churned = Arc::new(AtomicUsize::new(0));
    let churn = {
        let (stop, churned) = (stop.clone(), churned.clone());
        std::thread::spawn(move || {
            let attrs = MemAttributes { ptag: churn_tag, rdma_write: false, rdma_read: false };
            while !stop.load(Ordering::Relaxed) {
                let handle = churn_nic.register(buf, attrs).unwrap();
                churn_nic.deregister(buf.addr(), handle).unwrap();
                churned.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let attrs = MemAttributes { ptag: sp, rdma_write: false, rdma_read: false };
    for round in 0..400 {
        let handle = snic.register(buf, attrs).unwrap();
        let landed = message_lands(
            (&snic, &server, &sdesc),
            (&cnic, &client, &cdesc, &cbuf),
            buf,
            handle,
            (round % 2) * 4096,
            4096,
            round,
        );
        assert!(
            landed,
            "round {round} ({} churns): the message did not reach the program's memory \
             (the pages were unshared under the registration)",
            churned.load(Ordering::Relaxed)
        );
        snic.deregister(buf.addr(), handle).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    assert!(churned.load(Ordering::Relaxed) > 0, "the other NIC never registered");
}

#[test]
fn a_receive_posted_before_its_memory_was_registered_again_fails() {
    let h = Harness::new();
    let (_h, snic, cnic, sp, cp, server, client) = common::reliable_vis(h);
    connect(&snic, &server, &cnic, &client, b"posted-before");
    let buf = fresh_pages(1);
    let (sdesc, cdesc) = (mem(&snic, 256, sp, false), mem(&cnic, 256, cp, false));
    let cbuf = mem(&cnic, 4096, cp, false);
    let attrs = MemAttributes { ptag: sp, rdma_write: false, rdma_read: false };
    let first = snic.register(buf, attrs).unwrap();
    // A first message: the client learns the receive's pieces.
    let landed =
        message_lands((&snic, &server, &sdesc), (&cnic, &client, &cdesc, &cbuf), buf, first, 0, 4096, 0);
    assert!(landed, "the first message did not reach the program's memory");
    let seg = DataSegment { addr: buf.addr() as u64, handle: first, len: 4096 };
    let rd = Descriptor { length: 4096, segments: vec![seg], ..Default::default() };
    snic.write_descriptor(sdesc.addr(0), sdesc.handle, &rd).unwrap();
    server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
    // The memory goes, and comes back at the same address: new pieces, which the client
    // was never told of (it writes into those the receive described, which it holds).
    snic.deregister(buf.addr(), first).unwrap();
    let again = snic.register(buf, attrs).unwrap();
    let data = pattern(4096, 1);
    cbuf.put(0, &data);
    let sd = Descriptor { length: 4096, segments: vec![cbuf.seg(0, 4096)], ..Default::default() };
    let _ = common::send(&cnic, &client, &cdesc, &sd);
    assert_eq!(server.recv_wait(T).unwrap(), (sdesc.addr(0), sdesc.handle));
    let got = snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap();
    let mut back = vec![0u8; 4096];
    buf.read(0, &mut back).unwrap();
    assert_ne!(
        got.status & status::PROTECTION_ERROR,
        0,
        "the receive completed with status {:#x}, the message in its buffer: {}",
        got.status,
        back == data
    );
    snic.deregister(buf.addr(), again).unwrap();
}
