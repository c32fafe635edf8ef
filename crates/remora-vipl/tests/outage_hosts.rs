//! A cable cut between the two hosts of a connected VI pair, longer than the link's budget
//! (150 heartbeats: 30 s in the test cluster): both VIs move to ERROR with `ConnLost`
//! through the error callback (here about 60 s after the cut: the link's budget, then the
//! connection's), a receive wait with a limit far beyond that (180 s) ends well before it,
//! and a send posted after the loss completes flushed. Once the cable is back the same VIs
//! disconnect, connect again and carry data. A cut of a few seconds is ridden out. Needs a
//! namespace cluster (root); skips without one.

mod common;
use common::mem;

use remora_vipl::layout::status;
use remora_vipl::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The error codes a NIC's error callback was given.
fn recorded(nic: &Nic) -> Arc<Mutex<Vec<ErrorCode>>> {
    let codes = Arc::new(Mutex::new(Vec::new()));
    let k = codes.clone();
    nic.set_error_handler(Some(Arc::new(move |e: &ErrorEvent| k.lock().unwrap().push(e.code))));
    codes
}

/// Connect `client` to `server` on `disc`, asking again on any refusal for up to 90 s (the
/// link may still be coming back).
fn connect_patiently(snic: &Nic, server: &Vi, cnic: &Nic, client: &Vi, disc: &[u8]) {
    let long = Some(Duration::from_secs(90));
    let addr = NetAddress::new(snic.node(), disc);
    let (s, a, nic) = (server.clone(), addr.clone(), snic.clone());
    let waiter = std::thread::spawn(move || nic.connect_wait(&a, long).and_then(|r| r.accept(&s)));
    let until = Instant::now() + Duration::from_secs(90);
    let me = NetAddress::new(cnic.node(), b"client");
    while let Err(e) = client.connect_request(&me, &addr, Some(Duration::from_secs(5))) {
        assert!(Instant::now() < until, "no connection 90 s after the cable came back: {e:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    waiter.join().unwrap().unwrap();
}

#[test]
fn a_cable_cut_past_the_link_budget_moves_both_vis_to_error_with_conn_lost() {
    let c = remora_testkit::cluster_or_skip!(2);
    let snic = Nic::open_with_config("remora0", remora_testkit::net_config(&c, 1)).unwrap();
    let cnic = Nic::open_with_config("remora0", remora_testkit::net_config(&c, 2)).unwrap();
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let attrs = |ptag| ViAttributes {
        reliability: RELIABLE_DELIVERY,
        max_transfer: MAX_TRANSFER,
        ptag,
        rdma_write: false,
        rdma_read: false,
    };
    let server = Vi::create(&snic, attrs(sp), None, None).unwrap();
    let client = Vi::create(&cnic, attrs(cp), None, None).unwrap();
    let (scodes, ccodes) = (recorded(&snic), recorded(&cnic));
    connect_patiently(&snic, &server, &cnic, &client, b"cut");

    let (sdesc, cdesc) = (mem(&snic, 4 * 64, sp, false), mem(&cnic, 64, cp, false));
    let (rbuf, sbuf) = (mem(&snic, 4 * 512, sp, false), mem(&cnic, 512, cp, false));
    let post_recv = |i: usize| {
        let d = Descriptor { length: 512, segments: vec![rbuf.seg(512 * i, 512)], ..Default::default() };
        snic.write_descriptor(sdesc.addr(64 * i), sdesc.handle, &d).unwrap();
        server.post_recv(sdesc.addr(64 * i), sdesc.handle).unwrap();
    };
    let send = |seed: u8| {
        sbuf.put(0, &[seed; 512]);
        let d = Descriptor { length: 512, segments: vec![sbuf.seg(0, 512)], ..Default::default() };
        cnic.write_descriptor(cdesc.addr(0), cdesc.handle, &d).unwrap();
        client.post_send(cdesc.addr(0), cdesc.handle).unwrap();
        client.send_wait(Some(Duration::from_secs(60))).unwrap();
        cnic.read_descriptor(cdesc.addr(0), cdesc.handle).unwrap().status
    };
    post_recv(0);
    assert_eq!(send(1) & status::ERROR_MASK, 0);
    assert_eq!(server.recv_wait(Some(Duration::from_secs(20))).unwrap().0, sdesc.addr(0));
    assert_eq!(rbuf.get(0, 512), vec![1u8; 512]);

    // A receive posted and waited for when the cable goes, with a limit far beyond the loss
    // (not none: a wait that never ended would hang the test at the join).
    const LONG: Duration = Duration::from_secs(180);
    post_recv(1);
    let waiting = server.clone();
    let waiter = std::thread::spawn(move || {
        let start = Instant::now();
        (waiting.recv_wait(Some(LONG)), start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    c.link_down(1);
    let cut = Instant::now();
    let until = cut + Duration::from_secs(120);
    while (scodes.lock().unwrap().is_empty() || ccodes.lock().unwrap().is_empty()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("both sides heard the loss {:?} after the cut", cut.elapsed());
    assert_eq!(scodes.lock().unwrap().first(), Some(&ErrorCode::ConnLost), "the server's callback");
    assert_eq!(ccodes.lock().unwrap().first(), Some(&ErrorCode::ConnLost), "the client's callback");
    assert_eq!(server.state(), ViState::Error);
    assert_eq!(client.state(), ViState::Error);
    // The waiter ends, before its limit: with the receive completed flushed, or with the
    // VI's error.
    let (got, took) = waiter.join().unwrap();
    assert!(
        took < LONG && !matches!(got, Err(Error::Timeout)),
        "the receive wait did not end with the loss: {got:?} after {took:?}"
    );
    match got {
        Ok((addr, _)) => {
            assert_eq!(addr, sdesc.addr(64));
            let st = snic.read_descriptor(sdesc.addr(64), sdesc.handle).unwrap().status;
            assert_ne!(st & status::DESC_FLUSHED_ERROR, 0, "status {st:#x}");
        }
        Err(e) => eprintln!("the unlimited receive wait ended with {e:?}"),
    }
    // A send posted now completes at once, flushed.
    assert_ne!(send(2) & status::DESC_FLUSHED_ERROR, 0);

    // The cable back: the same VIs go back to IDLE, connect again and carry data.
    c.link_up(1);
    server.disconnect().unwrap();
    client.disconnect().unwrap();
    assert_eq!(server.state(), ViState::Idle);
    assert_eq!(client.state(), ViState::Idle);
    connect_patiently(&snic, &server, &cnic, &client, b"cut-again");
    post_recv(2);
    assert_eq!(send(3) & status::ERROR_MASK, 0);
    assert_eq!(server.recv_wait(Some(Duration::from_secs(20))).unwrap().0, sdesc.addr(128));
    assert_eq!(rbuf.get(1024, 512), vec![3u8; 512]);
    client.disconnect().unwrap();
}

/// A cable cut of a few seconds, well inside the link's budget, is ridden out: a send
/// posted during the cut completes once the cable is back with its bytes intact, neither
/// VI leaves CONNECTED and no error callback is called.
#[test]
fn a_short_cable_cut_is_ridden_out() {
    let c = remora_testkit::cluster_or_skip!(2);
    let snic = Nic::open_with_config("remora0", remora_testkit::net_config(&c, 1)).unwrap();
    let cnic = Nic::open_with_config("remora0", remora_testkit::net_config(&c, 2)).unwrap();
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let attrs = |ptag| ViAttributes {
        reliability: RELIABLE_DELIVERY,
        max_transfer: MAX_TRANSFER,
        ptag,
        rdma_write: false,
        rdma_read: false,
    };
    let server = Vi::create(&snic, attrs(sp), None, None).unwrap();
    let client = Vi::create(&cnic, attrs(cp), None, None).unwrap();
    let (scodes, ccodes) = (recorded(&snic), recorded(&cnic));
    connect_patiently(&snic, &server, &cnic, &client, b"short");
    let (sdesc, cdesc) = (mem(&snic, 2 * 64, sp, false), mem(&cnic, 64, cp, false));
    let (rbuf, sbuf) = (mem(&snic, 2 * 4096, sp, false), mem(&cnic, 4096, cp, false));
    for i in 0..2 {
        let d = Descriptor { length: 4096, segments: vec![rbuf.seg(4096 * i, 4096)], ..Default::default() };
        snic.write_descriptor(sdesc.addr(64 * i), sdesc.handle, &d).unwrap();
        server.post_recv(sdesc.addr(64 * i), sdesc.handle).unwrap();
    }
    let d = Descriptor { length: 4096, segments: vec![sbuf.seg(0, 4096)], ..Default::default() };
    cnic.write_descriptor(cdesc.addr(0), cdesc.handle, &d).unwrap();
    let send = |seed: u8| {
        sbuf.put(0, &[seed; 4096]);
        client.post_send(cdesc.addr(0), cdesc.handle).unwrap();
        client.send_wait(Some(Duration::from_secs(60))).unwrap();
        cnic.read_descriptor(cdesc.addr(0), cdesc.handle).unwrap().status
    };
    assert_eq!(send(1) & status::ERROR_MASK, 0);
    assert_eq!(server.recv_wait(Some(Duration::from_secs(20))).unwrap().0, sdesc.addr(0));
    c.link_down(1);
    let cable = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(4));
        c.link_up(1);
        c
    });
    let st = send(2);
    let c = cable.join().unwrap();
    assert_eq!(st & status::ERROR_MASK, 0, "the send during the cut: {st:#x}");
    assert_eq!(server.recv_wait(Some(Duration::from_secs(60))).unwrap().0, sdesc.addr(64));
    assert_eq!(rbuf.get(4096, 4096), vec![2u8; 4096]);
    assert_eq!(server.state(), ViState::Connected);
    assert_eq!(client.state(), ViState::Connected);
    assert!(scodes.lock().unwrap().is_empty() && ccodes.lock().unwrap().is_empty());
    client.disconnect().unwrap();
    drop(c);
}
