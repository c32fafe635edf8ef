//! A send into a receive whose memory the receiver deregistered after posting it: the
//! piece the receive names is gone, and the sender learns so at once (it used to wait the
//! whole 10 s a connect to a piece may take, issue 15). The receive completes with a
//! protection error, a reliable reception send with the remote descriptor error, and both
//! reliable VIs break; on one node, on two nodes of one host and across hosts.

mod common;

use remora_testkit::Harness;
use remora_vipl::layout::status;
use remora_vipl::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const T: Option<Duration> = Some(Duration::from_secs(20));

/// Well under the 10 s a connect to a piece waits, and far above the few milliseconds the
/// send takes now, on a loaded two-core machine too.
const PROMPT: Duration = Duration::from_secs(4);

/// `len` bytes (a multiple of the page size) of whole pages of their own, registered on
/// `nic`: no other region shares their piece, so deregistering them removes it.
fn own_pages(nic: &Nic, len: usize, ptag: ProtectionTag) -> common::Mem {
    let page = 4096;
    let buf: &'static mut [u8] = Box::leak(vec![0u8; len + page].into_boxed_slice());
    let skip = (page - buf.as_ptr() as usize % page) % page;
    let region = UserRegion::from_static(&mut buf[skip..skip + len]);
    let attrs = MemAttributes { ptag, rdma_write: false, rdma_read: false };
    common::Mem { region, handle: nic.register(region, attrs).unwrap() }
}

fn a_send_into_deregistered_memory_fails_at_once(h: Harness, nodes: (u32, u32), reliability: u16) {
    let (snic, cnic, sp, cp, server, client) = common::vis_on(&h, nodes, reliability);
    let codes = Arc::new(Mutex::new(Vec::new()));
    let k = codes.clone();
    cnic.set_error_handler(Some(Arc::new(move |e: &ErrorEvent| k.lock().unwrap().push(e.code))));
    common::connect(&snic, &server, &cnic, &client, b"gone");
    let (rdesc, cdesc) = (common::mem(&snic, 64, sp, false), common::mem(&cnic, 64, cp, false));
    let rbuf = own_pages(&snic, 16384, sp);
    let sbuf = common::mem(&cnic, 4096, cp, false);
    sbuf.put(0, &[0x5a; 4096]);

    // Posted (so described to the client), then its memory deregistered: its piece goes.
    let room = Descriptor { length: 16384, segments: vec![rbuf.seg(0, 16384)], ..Default::default() };
    snic.write_descriptor(rdesc.addr(0), rdesc.handle, &room).unwrap();
    server.post_recv(rdesc.addr(0), rdesc.handle).unwrap();
    snic.deregister(rbuf.addr(0), rbuf.handle).unwrap();

    // Longer than what travels inside the completion: it is written into the piece.
    let d = Descriptor { length: 4096, segments: vec![sbuf.seg(0, 4096)], ..Default::default() };
    cnic.write_descriptor(cdesc.addr(0), cdesc.handle, &d).unwrap();
    let start = Instant::now();
    client.post_send(cdesc.addr(0), cdesc.handle).unwrap();
    let took = start.elapsed();
    assert_eq!(client.send_wait(T).unwrap(), (cdesc.addr(0), cdesc.handle));
    assert!(took < PROMPT, "the send into a removed piece took {took:?}");
    let st = cnic.read_descriptor(cdesc.addr(0), cdesc.handle).unwrap().status;
    let expected = if reliability == RELIABLE_RECEPTION { status::REMOTE_DESC_ERROR } else { 0 };
    assert_eq!(st & (status::DONE | status::ERROR_MASK), status::DONE | expected, "{st:#x}");

    // The receive completes with a protection error; nothing is written into the memory.
    server.recv_wait(T).unwrap();
    assert_eq!(
        snic.read_descriptor(rdesc.addr(0), rdesc.handle).unwrap().status,
        status::DONE | status::OP_RECEIVE | status::PROTECTION_ERROR
    );
    assert_eq!(rbuf.get(0, 4096), vec![0u8; 4096], "the deregistered memory is the program's, untouched");
    // Both VIs break; the sender's error callback (run on a thread of the library) is told.
    let until = Instant::now() + Duration::from_secs(5);
    while ((client.state(), server.state()) != (ViState::Error, ViState::Error)
        || codes.lock().unwrap().is_empty())
        && Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!((client.state(), server.state()), (ViState::Error, ViState::Error));
    assert_eq!(codes.lock().unwrap().first(), Some(&ErrorCode::PostDesc));
    client.disconnect().unwrap();
    server.disconnect().unwrap();
}

#[test]
fn a_send_into_deregistered_memory_fails_at_once_on_one_node() {
    a_send_into_deregistered_memory_fails_at_once(Harness::new(), (1, 1), RELIABLE_DELIVERY);
}

#[test]
fn a_send_into_deregistered_memory_fails_at_once_on_two_nodes_of_one_host() {
    a_send_into_deregistered_memory_fails_at_once(Harness::new(), (4, 8), RELIABLE_DELIVERY);
}

#[test]
fn a_reliable_reception_send_into_deregistered_memory_fails_at_once_on_one_host() {
    a_send_into_deregistered_memory_fails_at_once(Harness::new(), (4, 8), RELIABLE_RECEPTION);
}

#[test]
fn a_send_into_deregistered_memory_fails_at_once_across_hosts() {
    a_send_into_deregistered_memory_fails_at_once(
        Harness::with_cluster(&[4, 8], true),
        (4, 8),
        RELIABLE_DELIVERY,
    );
}

#[test]
fn a_reliable_reception_send_into_deregistered_memory_fails_at_once_across_hosts() {
    a_send_into_deregistered_memory_fails_at_once(
        Harness::with_cluster(&[4, 8], true),
        (4, 8),
        RELIABLE_RECEPTION,
    );
}
