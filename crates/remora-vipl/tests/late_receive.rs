//! A send between two nodes joined over TCP (two hosts) that finds the peer's receives all
//! used waits for the peer to post another, within the grace a send gives a receive across
//! hosts (500 ms): a receive posted 150 ms later takes the message intact and both VIs stay
//! connected, where a reliable VI used to break after 100 ms (a receiving thread kept off a
//! loaded machine's cores that long broke streams that reposted in time). A receive that
//! never comes still breaks the reliable VI: `hosts.rs`.

mod common;
use common::mem;

use remora_testkit::Harness;
use remora_vipl::layout::status;
use remora_vipl::*;
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(20));

#[test]
fn a_receive_posted_150_ms_late_across_hosts_takes_the_message() {
    let (_h, snic, cnic, sp, cp, server, client) = common::reliable_vis(Harness::with_cluster(&[4, 8], true));
    common::connect(&snic, &server, &cnic, &client, b"late");

    let (rbuf, sdesc) = (mem(&snic, 2 * 4096, sp, false), mem(&snic, 128, sp, false));
    let (sbuf, cdesc) = (mem(&cnic, 2 * 4096, cp, false), mem(&cnic, 128, cp, false));
    for i in 0..2 {
        let rd = Descriptor { length: 4096, segments: vec![rbuf.seg(i * 4096, 4096)], ..Default::default() };
        snic.write_descriptor(sdesc.addr(64 * i), sdesc.handle, &rd).unwrap();
        let bytes: Vec<u8> = (0..4096).map(|j| (j as u8).wrapping_mul(7).wrapping_add(i as u8 + 1)).collect();
        sbuf.put(i * 4096, &bytes);
        let sd = Descriptor { length: 4096, segments: vec![sbuf.seg(i * 4096, 4096)], ..Default::default() };
        cnic.write_descriptor(cdesc.addr(64 * i), cdesc.handle, &sd).unwrap();
    }
    // One receive posted: the first send takes it.
    server.post_recv(sdesc.addr(0), sdesc.handle).unwrap();
    client.post_send(cdesc.addr(0), cdesc.handle).unwrap();
    assert_eq!(client.send_wait(T).unwrap(), (cdesc.addr(0), cdesc.handle));
    assert_eq!(server.recv_wait(T).unwrap(), (sdesc.addr(0), sdesc.handle));

    // The second finds none and waits; the receive comes 150 ms later (past the 100 ms a
    // reliable VI once waited, with 350 ms to spare for a loaded machine's threads).
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(150));
            server.post_recv(sdesc.addr(64), sdesc.handle).unwrap();
        });
        client.post_send(cdesc.addr(64), cdesc.handle).unwrap();
    });
    assert_eq!(client.send_wait(T).unwrap(), (cdesc.addr(64), cdesc.handle));
    assert_eq!(
        cnic.read_descriptor(cdesc.addr(64), cdesc.handle).unwrap().status,
        status::DONE | status::OP_SEND
    );
    assert_eq!(server.recv_wait(T).unwrap(), (sdesc.addr(64), sdesc.handle));
    let d = snic.read_descriptor(sdesc.addr(64), sdesc.handle).unwrap();
    assert_eq!(d.status, status::DONE | status::OP_RECEIVE);
    assert_eq!(rbuf.get(4096, 4096), sbuf.get(4096, 4096));
    assert_eq!((client.state(), server.state()), (ViState::Connected, ViState::Connected));
}
