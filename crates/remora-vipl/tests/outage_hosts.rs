//! A cable cut between the two hosts of a connected VI pair, longer than the link's budget
//! (150 heartbeats: 30 s in the test cluster): both VIs move to ERROR with `ConnLost`
//! through the error callback (here about 60 s after the cut: the link's budget, then the
//! connection's), a receive wait with a limit far beyond that (180 s) ends well before it,
//! and a send posted after the loss completes flushed. Once the cable is back the same VIs
//! disconnect, connect again and carry data. A cut of a few seconds is ridden out. Needs a
//! namespace cluster (root); skips without one.

mod common;
use common::{mem, Mem};

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

/// A reliable VI on each host of `c` (the server on host 1), connected, with error
/// callbacks recorded, four receive descriptors of 4 KiB slots on the server and one send
/// descriptor on the client.
struct Pair {
    snic: Nic,
    cnic: Nic,
    server: Vi,
    client: Vi,
    scodes: Arc<Mutex<Vec<ErrorCode>>>,
    ccodes: Arc<Mutex<Vec<ErrorCode>>>,
    sdesc: Mem,
    cdesc: Mem,
    rbuf: Mem,
    sbuf: Mem,
}

const SLOT: usize = 4096;

impl Pair {
    fn new(c: &remora_testkit::NetCluster, disc: &[u8]) -> Pair {
        let configs = (remora_testkit::net_config(c, 1), remora_testkit::net_config(c, 2));
        let (snic, cnic, sp, cp, server, client) = common::vis_with(configs, RELIABLE_DELIVERY);
        let (scodes, ccodes) = (recorded(&snic), recorded(&cnic));
        connect_patiently(&snic, &server, &cnic, &client, disc);
        let (sdesc, cdesc) = (mem(&snic, 4 * 64, sp, false), mem(&cnic, 64, cp, false));
        let (rbuf, sbuf) = (mem(&snic, 4 * SLOT, sp, false), mem(&cnic, SLOT, cp, false));
        let d = Descriptor { length: SLOT as u32, segments: vec![sbuf.seg(0, SLOT)], ..Default::default() };
        cnic.write_descriptor(cdesc.addr(0), cdesc.handle, &d).unwrap();
        Pair { snic, cnic, server, client, scodes, ccodes, sdesc, cdesc, rbuf, sbuf }
    }

    /// Post the server's receive `i` (of 4).
    fn post_recv(&self, i: usize) {
        let d = Descriptor {
            length: SLOT as u32,
            segments: vec![self.rbuf.seg(SLOT * i, SLOT)],
            ..Default::default()
        };
        self.snic.write_descriptor(self.sdesc.addr(64 * i), self.sdesc.handle, &d).unwrap();
        self.server.post_recv(self.sdesc.addr(64 * i), self.sdesc.handle).unwrap();
    }

    /// The client sends a slot of `seed` bytes and waits for its completion: its status.
    fn send(&self, seed: u8) -> u32 {
        self.sbuf.put(0, &[seed; SLOT]);
        self.client.post_send(self.cdesc.addr(0), self.cdesc.handle).unwrap();
        self.client.send_wait(Some(Duration::from_secs(60))).unwrap();
        self.cnic.read_descriptor(self.cdesc.addr(0), self.cdesc.handle).unwrap().status
    }

    /// The server takes receive `i`, which holds a slot of `seed` bytes.
    fn takes(&self, i: usize, seed: u8) {
        assert_eq!(self.server.recv_wait(Some(Duration::from_secs(60))).unwrap().0, self.sdesc.addr(64 * i));
        assert_eq!(self.rbuf.get(SLOT * i, SLOT), vec![seed; SLOT], "receive {i}");
    }

    /// Neither NIC's error callback was called.
    fn no_callback(&self) -> bool {
        self.scodes.lock().unwrap().is_empty() && self.ccodes.lock().unwrap().is_empty()
    }
}

#[test]
fn a_cable_cut_past_the_link_budget_moves_both_vis_to_error_with_conn_lost() {
    let c = remora_testkit::cluster_or_skip!(2);
    let p = Pair::new(&c, b"cut");
    p.post_recv(0);
    assert_eq!(p.send(1) & status::ERROR_MASK, 0);
    p.takes(0, 1);

    // A receive posted and waited for when the cable goes, with a limit far beyond the loss
    // (not none: a wait that never ended would hang the test at the join).
    const LONG: Duration = Duration::from_secs(180);
    p.post_recv(1);
    let waiting = p.server.clone();
    let waiter = std::thread::spawn(move || {
        let start = Instant::now();
        (waiting.recv_wait(Some(LONG)), start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    c.link_down(1);
    let cut = Instant::now();
    let until = cut + Duration::from_secs(120);
    while (p.scodes.lock().unwrap().is_empty() || p.ccodes.lock().unwrap().is_empty())
        && Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("both sides heard the loss {:?} after the cut", cut.elapsed());
    assert_eq!(p.scodes.lock().unwrap().first(), Some(&ErrorCode::ConnLost), "the server's callback");
    assert_eq!(p.ccodes.lock().unwrap().first(), Some(&ErrorCode::ConnLost), "the client's callback");
    assert_eq!(p.server.state(), ViState::Error);
    assert_eq!(p.client.state(), ViState::Error);
    // The waiter ends, before its limit: with the receive completed flushed, or with the
    // VI's error.
    let (got, took) = waiter.join().unwrap();
    assert!(
        took < LONG && !matches!(got, Err(Error::Timeout)),
        "the receive wait did not end with the loss: {got:?} after {took:?}"
    );
    match got {
        Ok((addr, _)) => {
            assert_eq!(addr, p.sdesc.addr(64));
            let st = p.snic.read_descriptor(p.sdesc.addr(64), p.sdesc.handle).unwrap().status;
            assert_ne!(st & status::DESC_FLUSHED_ERROR, 0, "status {st:#x}");
        }
        Err(e) => eprintln!("the receive wait ended with {e:?}"),
    }
    // A send posted now completes at once, flushed.
    assert_ne!(p.send(2) & status::DESC_FLUSHED_ERROR, 0);

    // The cable back: the same VIs go back to IDLE, connect again and carry data.
    c.link_up(1);
    p.server.disconnect().unwrap();
    p.client.disconnect().unwrap();
    assert_eq!(p.server.state(), ViState::Idle);
    assert_eq!(p.client.state(), ViState::Idle);
    connect_patiently(&p.snic, &p.server, &p.cnic, &p.client, b"cut-again");
    p.post_recv(2);
    assert_eq!(p.send(3) & status::ERROR_MASK, 0);
    p.takes(2, 3);
    p.client.disconnect().unwrap();
}

/// A cable cut of a few seconds, well inside the link's budget, is ridden out: a send
/// posted during the cut completes once the cable is back with its bytes intact, neither
/// VI leaves CONNECTED and no error callback is called.
#[test]
fn a_short_cable_cut_is_ridden_out() {
    let c = remora_testkit::cluster_or_skip!(2);
    let p = Pair::new(&c, b"short");
    p.post_recv(0);
    p.post_recv(1);
    assert_eq!(p.send(1) & status::ERROR_MASK, 0);
    p.takes(0, 1);
    c.link_down(1);
    let cable = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(4));
        c.link_up(1);
        c
    });
    let st = p.send(2);
    let c = cable.join().unwrap();
    assert_eq!(st & status::ERROR_MASK, 0, "the send during the cut: {st:#x}");
    p.takes(1, 2);
    assert_eq!(p.server.state(), ViState::Connected);
    assert_eq!(p.client.state(), ViState::Connected);
    assert!(p.no_callback());
    p.client.disconnect().unwrap();
    drop(c);
}
