//! Receives posted to a VI whose peer is on another host (nodes joined over TCP, so the VI
//! segments are reached through the DSM pager): the sender must read each receive's room
//! as it was posted, never the ring entry of a lap ago. Found by `remora soak`: the count
//! of posted receives could reach the sender before the entry describing the receive (the
//! pager sends dirty pages home in its own order), and a send into a receive big enough
//! completed with `LENGTH_ERROR`.

mod common;

use remora_testkit::Harness;
use remora_vipl::layout::status;
use remora_vipl::*;
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(10));

#[test]
fn every_receive_posted_across_hosts_is_seen_with_its_own_room() {
    let h = Harness::with_cluster(&[4, 8], true);
    let snic = Nic::open_with_config("remora0", h.config(4)).unwrap();
    let cnic = Nic::open_with_config("remora0", h.config(8)).unwrap();
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
    common::connect(&snic, &server, &cnic, &client, b"rooms");

    let mem = |nic: &Nic, len: usize, ptag: ProtectionTag| {
        let m = common::mem(nic, len, ptag, false);
        (m.region, m.handle)
    };
    let (sdesc, sdh) = mem(&snic, 4096, sp);
    let (cdesc, cdh) = mem(&cnic, 4096, cp);
    let (rbuf, rh) = mem(&snic, 64 << 10, sp);
    let (sbuf, sh) = mem(&cnic, 64 << 10, cp);
    // One receive at a time, each of another size, over more than a lap of the ring (the
    // first lap's stale rooms are 0: any send into them would be a length error).
    for i in 0..600usize {
        let n = 41 + (i * 397) % 16000;
        let data: Vec<u8> = (0..n).map(|j| (j + i) as u8).collect();
        sbuf.write(0, &data).unwrap();
        let rd = Descriptor {
            length: n as u32,
            segments: vec![DataSegment { addr: rbuf.addr() as u64, handle: rh, len: n as u32 }],
            ..Default::default()
        };
        snic.write_descriptor(sdesc.addr(), sdh, &rd).unwrap();
        server.post_recv(sdesc.addr(), sdh).unwrap();
        let sd = Descriptor {
            length: n as u32,
            segments: vec![DataSegment { addr: sbuf.addr() as u64, handle: sh, len: n as u32 }],
            ..Default::default()
        };
        cnic.write_descriptor(cdesc.addr(), cdh, &sd).unwrap();
        client.post_send(cdesc.addr(), cdh).unwrap();
        client.send_wait(T).unwrap();
        let st = cnic.read_descriptor(cdesc.addr(), cdh).unwrap().status;
        assert_eq!(st & (status::DONE | status::ERROR_MASK), status::DONE, "send {i} of {n} bytes: {st:#x}");
        server.recv_wait(T).unwrap();
        let got = snic.read_descriptor(sdesc.addr(), sdh).unwrap();
        assert_eq!(got.status, status::DONE | status::OP_RECEIVE, "receive {i} of {n} bytes");
        assert_eq!(got.length, n as u32);
        let mut back = vec![0u8; n];
        rbuf.read(0, &mut back).unwrap();
        assert!(back == data, "receive {i}: {n} bytes intact");
    }
}
