//! A take that hands the program a receive from the done queue counts it as taken when it
//! judges whether a held count of posts goes: with 8 messages left to take after it (one
//! less than before), a count held because 8 or more waited goes with that take. A receive
//! that completed with an error is what the error callback names, also when another thread
//! breaks the VI between its take and its report.

use crate::layout::{self, status};
use crate::testing::{connect, post_recv, send, two, Mem, Two};
use crate::{ErrorCode, ErrorEvent, ViState};
use remora_testkit::wait_until as wait_for;
use remora_testkit::Harness;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn a_take_from_the_done_queue_counts_the_message_it_hands_out_as_taken() {
    let h = Harness::with_cluster(&[4, 8], true);
    // The server's watcher never looks within the test: only takes and posts tell counts.
    let Two { snic, cnic, sp, cp, server, client } = two(&h, Some(Duration::from_secs(3600)));
    let (sbuf, sdesc) = (Mem::new(&snic, 4096 * 20, sp), Mem::new(&snic, 64 * 20, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 4096, cp), Mem::new(&cnic, 64, cp));
    connect(&snic, &server, &cnic, &client, b"unread-at-take");
    let known = || layout::count_in(client.inner.conn(), client.inner.map.load(layout::PEER_POSTED), 0);
    for i in 0..16 {
        post_recv(&snic, &server, &sdesc, 64 * i, &sbuf, 4096 * i, 4096);
    }
    assert!(wait_for(|| known() == 16), "the first 16 posts were not told (the client knows {})", known());
    // Nine messages land, and are taken in (not out): nine wait for the program.
    const N: usize = 9;
    for k in 0..N {
        let st = send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[k as u8; 4096]);
        assert_eq!(st, status::DONE | status::OP_SEND, "message {k}");
    }
    let landed = || layout::count_in(server.inner.conn(), server.inner.map.load(layout::DONE), 0);
    assert!(wait_for(|| landed() == N as u64), "the messages did not land: {}", landed());
    server.inner.take_completions().unwrap();
    assert_eq!(server.inner.recv.lock().done.len(), N, "the messages were not taken in");
    // A post now is held: 9 messages wait to be taken here.
    post_recv(&snic, &server, &sdesc, 64 * 16, &sbuf, 4096 * 16, 4096);
    let link = server.inner.link().unwrap();
    assert_eq!(link.posted_queued(), 17, "the post's count was not queued");
    let alone = server.posts_told_alone();
    // The first take out leaves 8 waiting: still held.
    assert_eq!(server.recv_done().unwrap(), (sdesc.addr(0), sdesc.handle));
    assert_eq!(server.posts_told_alone(), alone, "the count went while 8 messages wait");
    // The second leaves 7 (the message it hands out is taken): the count goes with it.
    assert_eq!(server.recv_done().unwrap(), (sdesc.addr(64), sdesc.handle));
    assert_eq!(server.posts_told_alone(), alone + 1, "the count waited with 7 messages left");
    assert!(wait_for(|| known() == 17), "the count never reached the client: {}", known());
    for k in 2..N {
        assert_eq!(server.recv_done().unwrap(), (sdesc.addr(64 * k), sdesc.handle), "message {k}");
        assert_eq!(sbuf.get(4096 * k, 8), vec![k as u8; 8], "message {k} did not land whole");
    }
    drop(link);
    client.disconnect().unwrap();
    server.disconnect().unwrap();
}

/// The race of a reap with the NIC's watcher, played in order: the receive's completion
/// (refused: too short) is taken in, and before the taker breaks the VI, the watcher sees
/// the peer's word (the peer broke when it wrote the completion) and breaks it first. The
/// callback names the receive (`VIP_ERROR_POST_DESC`, its descriptor), not the word's
/// `VIP_ERROR_CONN_LOST`.
#[test]
fn the_peer_s_word_seen_between_a_take_and_its_report_names_the_refused_receive() {
    let h = Harness::with_cluster(&[4, 8], true);
    // The server's watcher never looks within the test: the test plays it.
    let Two { snic, cnic, sp, cp, server, client } = two(&h, Some(Duration::from_secs(3600)));
    let events = Arc::new(Mutex::new(Vec::new()));
    let e = events.clone();
    snic.set_error_handler(Some(Arc::new(move |ev: &ErrorEvent| {
        e.lock().unwrap().push((ev.code, ev.descriptor, ev.resource));
    })));
    let (sbuf, sdesc) = (Mem::new(&snic, 4096, sp), Mem::new(&snic, 64, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 4096, cp), Mem::new(&cnic, 64, cp));
    connect(&snic, &server, &cnic, &client, b"word-after-take");
    post_recv(&snic, &server, &sdesc, 0, &sbuf, 0, 16);
    let st = send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[7u8; 1000]);
    assert_eq!(st & status::DONE, status::DONE, "{st:#x}");
    assert!(wait_for(|| server.inner.peer_said() != 0), "the client never said it broke");
    // The reap's take: the refused receive is taken in, the VI not broken yet.
    assert_eq!(server.inner.take_completions().unwrap(), Some(sdesc.addr(0)));
    assert_eq!(server.state(), ViState::Connected);
    // The watcher's look, before the reap reports: it finds no completion left.
    server.inner.check_peer(&snic);
    assert_eq!(server.state(), ViState::Error);
    assert!(wait_for(|| !events.lock().unwrap().is_empty()), "the callback was never told");
    std::thread::sleep(Duration::from_millis(100));
    let got = events.lock().unwrap().clone();
    assert_eq!(got, vec![(ErrorCode::PostDesc, Some(sdesc.addr(0)), 3)], "the callback heard {got:?}");
    let d = snic.read_descriptor(sdesc.addr(0), sdesc.handle).unwrap();
    assert_eq!(d.status & status::LENGTH_ERROR, status::LENGTH_ERROR, "{:#x}", d.status);
    client.disconnect().unwrap();
    server.disconnect().unwrap();
}
