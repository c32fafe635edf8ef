//! Short messages between two VIs of one host, each shape sent twice from the same
//! descriptor: the first through the general path (the descriptor not seen before), the
//! second through the short one (`short.rs`: a descriptor posted again as it is, a payload
//! that travels in the completion entry, a receive already described), and each receive
//! reaped by polling. Every message must land whole, with its length, immediate data and
//! status, whichever way it went; a descriptor whose segment changed between two posts
//! sends from its new segment.

mod common;

use remora_testkit::Harness;
use remora_vipl::layout::{control, status};
use remora_vipl::*;
use std::time::{Duration, Instant};

/// Receives posted ahead (the sender learns all their rooms with its first send).
const POSTED: usize = 32;
/// Bytes of a receive buffer.
const BUF: usize = 64;

/// A send of `data`'s pieces (one data segment each, from `src` at 256-byte steps), with
/// immediate data when given.
fn send_desc(src: &common::Mem, pieces: &[&[u8]], imm: Option<u32>) -> Descriptor {
    let mut segments = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        src.put(i * 256, p);
        segments.push(src.seg(i * 256, p.len()));
    }
    let length = pieces.iter().map(|p| p.len() as u32).sum();
    let control = if imm.is_some() { control::IMMEDIATE } else { 0 };
    Descriptor { control, immediate: imm.unwrap_or(0), length, segments, ..Default::default() }
}

/// A message sent: its descriptor's slot, its pieces, its immediate data.
type Shape<'a> = (usize, Vec<&'a [u8]>, Option<u32>);

/// Poll `vi` for its next completed receive (10 s at most).
fn reap(vi: &Vi) -> (usize, u32) {
    let start = Instant::now();
    loop {
        match vi.recv_done() {
            Ok(d) => return d,
            Err(Error::NotDone) if start.elapsed() < Duration::from_secs(10) => std::hint::spin_loop(),
            Err(e) => panic!("no receive: {e}"),
        }
    }
}

#[test]
fn short_messages_land_whole_whichever_path_they_take() {
    let (_h, snic, cnic, sp, cp, server, client) = common::reliable_vis(Harness::new());
    common::connect(&snic, &server, &cnic, &client, b"short");
    let rdesc = common::mem(&snic, POSTED * 64, sp, false);
    let rbuf = common::mem(&snic, POSTED * BUF, sp, false);
    let sdesc = common::mem(&cnic, 8 * 64, cp, false);
    let src = common::mem(&cnic, 4096, cp, false);
    let other = common::mem(&cnic, 4096, cp, false);

    // Receive `i`: its own buffer, in one segment, or in two (3 bytes, then the rest) for
    // every fourth (a short payload for two buffers goes the general way).
    let post = |i: usize| {
        rbuf.put(i * BUF, &[0xEE; BUF]);
        let segments = if i % 4 == 3 {
            vec![rbuf.seg(i * BUF, 3), rbuf.seg(i * BUF + 3, BUF - 3)]
        } else {
            vec![rbuf.seg(i * BUF, BUF)]
        };
        let d = Descriptor { length: BUF as u32, segments, ..Default::default() };
        snic.write_descriptor(rdesc.addr(i * 64), rdesc.handle, &d).unwrap();
        server.post_recv(rdesc.addr(i * 64), rdesc.handle).unwrap();
    };
    for i in 0..POSTED {
        post(i);
    }

    let bytes = |n: usize, seed: u8| -> Vec<u8> {
        (0..n).map(|j| seed.wrapping_add((j as u8).wrapping_mul(7))).collect()
    };
    let (b8, b13, b3, b5, b40, b41) =
        (bytes(8, 1), bytes(13, 2), bytes(3, 3), bytes(5, 4), bytes(40, 5), bytes(41, 6));
    let shapes: Vec<Shape<'_>> = vec![
        (0, vec![&b8], None),
        (1, vec![&b13], None),
        (2, vec![&b3, &b5], None),
        (3, vec![&b40], None),
        (4, vec![&b41], None),
        (5, vec![&b8], Some(0xC0FF_EE01)),
        (6, vec![], Some(0x1234_5678)),
    ];
    let mut next = 0usize;
    let mut check = |want: &[u8], imm: Option<u32>| {
        let (addr, handle) = reap(&server);
        assert_eq!((addr, handle), (rdesc.addr(next % POSTED * 64), rdesc.handle), "receives in order");
        let d = snic.read_descriptor(addr, handle).unwrap();
        let mut st = status::DONE | status::OP_RECEIVE;
        if imm.is_some() {
            st |= status::IMMEDIATE;
        }
        assert_eq!(d.status, st, "message {next}: status");
        assert_eq!(d.length, want.len() as u32, "message {next}: length");
        if let Some(i) = imm {
            assert_eq!(d.immediate, i, "message {next}: immediate data");
        }
        let got = rbuf.get(next % POSTED * BUF, want.len());
        assert_eq!(got, want, "message {next}: payload");
        assert_eq!(rbuf.get(next % POSTED * BUF + want.len(), 1), vec![0xEE], "message {next}: past the end");
        post(next % POSTED);
        next += 1;
    };
    for round in 0..3 {
        for (slot, pieces, imm) in &shapes {
            let d = send_desc(&src, pieces, *imm);
            let at = sdesc.addr(slot * 64);
            if round == 0 {
                cnic.write_descriptor(at, sdesc.handle, &d).unwrap();
            } else {
                // Posted again as it is: only its payload changed.
                let fresh: Vec<u8> = pieces.concat().iter().map(|b| b ^ round as u8).collect();
                let mut o = 0;
                for (i, p) in pieces.iter().enumerate() {
                    src.put(i * 256, &fresh[o..o + p.len()]);
                    o += p.len();
                }
            }
            client.post_send(at, sdesc.handle).unwrap();
            assert_eq!(client.send_done().unwrap(), (at, sdesc.handle));
            let sd = cnic.read_descriptor(at, sdesc.handle).unwrap();
            assert_eq!(sd.status, status::DONE | status::OP_SEND, "send status");
            let want: Vec<u8> = pieces.concat().iter().map(|b| b ^ round as u8).collect();
            check(&want, *imm);
        }
    }

    // A descriptor posted before whose segment now names other memory sends from there.
    let at = sdesc.addr(0);
    let moved = Descriptor { length: 8, segments: vec![other.seg(512, 8)], ..Default::default() };
    other.put(512, b"elsewher");
    cnic.write_descriptor(at, sdesc.handle, &moved).unwrap();
    client.post_send(at, sdesc.handle).unwrap();
    client.send_done().unwrap();
    check(b"elsewher", None);
    client.post_send(at, sdesc.handle).unwrap();
    client.send_done().unwrap();
    check(b"elsewher", None);
    assert_eq!((server.state(), client.state()), (ViState::Connected, ViState::Connected));
}
