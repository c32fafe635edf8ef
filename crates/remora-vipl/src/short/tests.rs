//! The short path's poll against a disconnect that comes between its look and its lock.

use crate::layout;
use crate::testing::{connect, post_recv, send, two, Mem, Two};
use remora_testkit::Harness;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A one-host pair with one receive of 64 bytes posted on the server and an 8-byte
/// message sent to it, and what a poll looks at before it takes the receive queue's lock:
/// the completion's number `k` and the connection `conn`, once the entry shows it.
struct Seen {
    two: Two,
    sbuf: Mem,
    sdesc: Mem,
    _client: (Mem, Mem),
    k: u64,
    conn: u32,
}

fn seen(h: &Harness, disc: &[u8]) -> Seen {
    let two = two(h, None);
    let Two { snic, cnic, sp, cp, server, client } = &two;
    let (sbuf, sdesc) = (Mem::new(snic, 4096, *sp), Mem::new(snic, 1024, *sp));
    let (cbuf, cdesc) = (Mem::new(cnic, 4096, *cp), Mem::new(cnic, 1024, *cp));
    post_recv(snic, server, &sdesc, 0, &sbuf, 0, 64);
    connect(snic, server, cnic, client, disc);
    assert!(server.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
    send(cnic, client, &cdesc, 0, &cbuf, 0, &[5u8; 8]);
    let k = server.inner.recv_next.load(Ordering::Acquire);
    let conn = server.inner.conn();
    let shown =
        || server.inner.map.load(layout::completion_at(k) + layout::SEQ) == layout::tagged(conn, k + 1);
    let t = Instant::now();
    while !shown() {
        assert!(t.elapsed() < Duration::from_secs(20), "completion 0 never appeared");
        std::thread::yield_now();
    }
    Seen { two, sbuf, sdesc, _client: (cbuf, cdesc), k, conn }
}

/// A poll saw the last connection's completion 0 and waits for the receive queue's lock;
/// meanwhile the VI is disconnected (the count starts at zero again, the entries are
/// wiped), the flushed receive is taken and a new one posted. The poll, given the lock,
/// must not complete the new receive from the wiped entry (it did: the next connection's
/// first message was then never taken): the connection it saw is no longer the VI's.
#[test]
fn a_completion_seen_under_the_last_connection_completes_no_receive_posted_after_it() {
    let h = Harness::with_cluster(&[4, 8], false);
    let Seen { two, sbuf, sdesc, k, conn, .. } = seen(&h, b"short-seen");
    let server = &two.server;
    // The disconnect, the flushed receive taken, a new receive posted.
    server.disconnect().unwrap();
    server.recv_done().expect("the receive posted before the disconnect completed");
    post_recv(&two.snic, server, &sdesc, 64, &sbuf, 64, 64);
    // Now the poll has the lock: nothing waits in the done queue (the look at the entry is
    // what decides), the new receive is posted.
    let mut q = server.inner.recv.lock();
    assert!(q.done.is_empty() && q.posted.len() == 1, "the queue is not as the poll finds it");
    let e = server.inner.map.line(layout::completion_at(k)).expect("the entry's line");
    assert_eq!(
        server.inner.recv_short_seen(&mut q, k, conn, e),
        None,
        "a receive completed from the last connection's entry"
    );
}

/// A poll saw a completion of this connection and waits for the lock; meanwhile the VI,
/// reset after a disconnect (its number already the next connection's), connects to a peer
/// on another host (`establish` says so, the number unchanged). The poll, given the lock,
/// must not take the entry by its number alone: a far peer's completions go the general
/// way (its stream's bookkeeping).
#[test]
fn a_completion_seen_before_the_peer_moved_away_is_not_taken_short() {
    let h = Harness::with_cluster(&[4, 8], false);
    let Seen { two, k, conn, .. } = seen(&h, b"short-moved");
    let server = &two.server;
    // Where the peer is, as `establish` writes it for one on another host.
    server.inner.peer_here.store(false, Ordering::Relaxed);
    let mut q = server.inner.recv.lock();
    let e = server.inner.map.line(layout::completion_at(k)).expect("the entry's line");
    let got = server.inner.recv_short_seen(&mut q, k, conn, e);
    drop(q);
    server.inner.peer_here.store(true, Ordering::Relaxed);
    assert_eq!(got, None, "a far peer's completion taken by its number alone");
    server.recv_done().expect("the completion, the general way");
}

/// A receive the sender learns right after a short send (`learn_ahead`) is noted with
/// where its buffers lie, as one learned by a send's look at the count: a long send to it
/// then copies without reading its ring A entry again (before, only the sizes were noted
/// that way, and a mixed short/long stream read the entry of every such receive twice).
#[test]
fn a_receive_learned_after_a_short_send_is_noted_with_its_buffers() {
    let h = Harness::with_cluster(&[4, 8], false);
    let Two { snic, cnic, sp, cp, server, client } = two(&h, None);
    let (sbuf, sdesc) = (Mem::new(&snic, 3 * 4096, sp), Mem::new(&snic, 1024, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 4096, cp), Mem::new(&cnic, 1024, cp));
    post_recv(&snic, &server, &sdesc, 0, &sbuf, 0, 4096);
    post_recv(&snic, &server, &sdesc, 64, &sbuf, 4096, 4096);
    connect(&snic, &server, &cnic, &client, b"short-ahead");
    assert!(client.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
    // The first send looks at the count: receives 0 and 1 are learned.
    send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[1u8; 8]);
    assert_eq!(client.inner.send.lock().seen, 2, "the first send did not learn both receives");
    // Receive 2, described at once (the server never sends); then the short send that uses
    // receive 1, the last one known, which learns receive 2 right after (the descriptor
    // of the first send again: the short path takes only a descriptor it has seen).
    post_recv(&snic, &server, &sdesc, 128, &sbuf, 8192, 3000);
    let t = Instant::now();
    while layout::count_in(client.inner.conn(), client.inner.map.load(layout::PEER_POSTED), 2) < 3 {
        assert!(t.elapsed() < Duration::from_secs(20), "receive 2 was never described");
        std::thread::yield_now();
    }
    send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[2u8; 8]);
    let sq = client.inner.send.lock();
    assert_eq!(sq.seen, 3, "the short send did not learn receive 2");
    assert_eq!(sq.rooms[2], 3000, "receive 2's size");
    let head = sq.heads.get(2).copied().unwrap_or_default();
    assert_eq!(head.k, 3, "receive 2's buffers were not noted");
    assert_eq!(head.conn, client.inner.conn(), "noted under another connection");
    assert_eq!((head.chunks, head.first.len), (1, 3000), "receive 2's piece as noted");
}
