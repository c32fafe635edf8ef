//! Reliable reception completes a send with the outcome of the receive it went into: a
//! send too big for the receive completes with `REMOTE_DESC_ERROR` (the receive with
//! `LENGTH_ERROR`), and both VIs break; on one host and across hosts.

mod common;

use remora_testkit::Harness;
use remora_vipl::layout::status;
use remora_vipl::*;
use std::time::{Duration, Instant};

const T: Option<Duration> = Some(Duration::from_secs(10));

fn a_refused_send_fails_with_the_receive(h: Harness) {
    let (_h, snic, cnic, sp, cp, server, client) = common::vis(h, RELIABLE_RECEPTION);
    common::connect(&snic, &server, &cnic, &client, b"rr");
    let (sdesc, cdesc) = (common::mem(&snic, 64, sp, false), common::mem(&cnic, 64, cp, false));
    let (rbuf, sbuf) = (common::mem(&snic, 4096, sp, false), common::mem(&cnic, 8192, cp, false));

    // One that fits first: it completes as a success on both sides.
    let fits = Descriptor { length: 100, segments: vec![sbuf.seg(0, 100)], ..Default::default() };
    let room = Descriptor { length: 4096, segments: vec![rbuf.seg(0, 4096)], ..Default::default() };
    snic.write_descriptor(sdesc.addr(0), sdesc.handle, &room).unwrap();
    server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
    assert_eq!(common::send(&cnic, &client, &cdesc, &fits), status::DONE | status::OP_SEND);
    server.recv_wait(T).unwrap();
    assert_eq!(
        snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap().status,
        status::DONE | status::OP_RECEIVE
    );

    // Too big for the receive: the receive's length error is the send's remote error.
    snic.write_descriptor(sdesc.addr(0), sdesc.handle, &room).unwrap();
    server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
    let big = Descriptor { length: 8192, segments: vec![sbuf.seg(0, 8192)], ..Default::default() };
    let st = common::send(&cnic, &client, &cdesc, &big);
    assert_eq!(st & (status::DONE | status::ERROR_MASK), status::DONE | status::REMOTE_DESC_ERROR, "{st:#x}");
    server.recv_wait(T).unwrap();
    assert_eq!(
        snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap().status,
        status::DONE | status::OP_RECEIVE | status::LENGTH_ERROR
    );
    let until = Instant::now() + Duration::from_secs(5);
    while (client.state(), server.state()) != (ViState::Error, ViState::Error) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!((client.state(), server.state()), (ViState::Error, ViState::Error));
    client.disconnect().unwrap();
    server.disconnect().unwrap();
}

#[test]
fn reliable_reception_fails_a_send_its_receive_refused_on_one_host() {
    a_refused_send_fails_with_the_receive(Harness::new());
}

#[test]
fn reliable_reception_fails_a_send_its_receive_refused_across_hosts() {
    a_refused_send_fails_with_the_receive(Harness::with_cluster(&[4, 8], true));
}
