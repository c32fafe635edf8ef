//! A ring A entry of another connection (a late store of the VI's previous peer, see
//! `layout`'s module doc) within the peer's posted count is no receive for the sender:
//! `learn_entries` notes it [`NOT_OURS`] and no buffer for it, and the real entry after it
//! is learned as usual.

use super::NOT_OURS;
use crate::layout::{self, Chunk, ENTRY};
use crate::testing::{connect, post_recv, two, Mem, Two};
use remora_testkit::{wait_until, Harness};
use std::time::Duration;

#[test]
fn an_entry_of_another_connection_is_no_receive() {
    let h = Harness::new();
    let Two { snic, cnic, cp, server, client, .. } = two(&h, None);
    let (cbuf, cdesc) = (Mem::new(&cnic, 8192, cp), Mem::new(&cnic, 1024, cp));
    connect(&snic, &server, &cnic, &client, b"learn-not-ours");
    // The client's receives 0 and 1, described in the server's ring A.
    post_recv(&cnic, &client, &cdesc, 0, &cbuf, 0, 4096);
    post_recv(&cnic, &client, &cdesc, 64, &cbuf, 4096, 2048);
    let conn = server.inner.conn();
    let posted = || layout::count_in(conn, server.inner.map.load(layout::PEER_POSTED), 0);
    assert!(wait_until(|| posted() == 2), "the client's two receives were not described: {}", posted());
    let entry_conn = |k| server.inner.map.load(layout::entry_at(k) + layout::ENTRY_CONN) as u32;
    assert_eq!((entry_conn(0), entry_conn(1)), (conn, conn), "the entries are not of this connection");

    // A store of the previous peer lands late on entry 0: a receive of 999 bytes in its
    // own piece, under the previous connection's number.
    let old = conn.wrapping_sub(1);
    let mut e = [0u8; ENTRY];
    let stale = Chunk { seg: 0x7777, len: 999, off: 512 };
    let n = layout::encode_entry(999, old, &[stale], &mut e);
    server.inner.map.write(layout::entry_at(0), &e[..n]).unwrap();
    assert_eq!(entry_conn(0), old);

    // The server's send path asks for the client's receives 0 and 1 (learning both, the
    // count covering them): 0 is none, 1 is the real one, where the client's buffer lies.
    let mut sq = server.inner.send.lock();
    assert_eq!(sq.seen, 0, "the server learned the client's receives before the test");
    assert_eq!(
        server.inner.peer_room(&mut sq, 0, Duration::ZERO),
        None,
        "the previous peer's entry was taken for a receive"
    );
    assert_eq!(sq.seen, 2, "the entries were not learned");
    assert_eq!(sq.rooms[0], NOT_OURS);
    assert_eq!(sq.heads[0].k, 0, "the previous peer's buffer was noted for receive 0");
    assert_eq!(server.inner.peer_room(&mut sq, 1, Duration::ZERO), Some(2048), "the real receive after it");
    let head = sq.heads[1];
    assert_eq!((head.k, head.conn, head.chunks), (2, conn, 1), "receive 1's head");
    assert_eq!(head.first.len, 2048, "receive 1's buffer");
    assert_ne!(head.first.seg, stale.seg, "receive 1 noted in the previous peer's piece");
    drop(sq);
    client.disconnect().unwrap();
    server.disconnect().unwrap();
}
