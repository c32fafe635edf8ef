//! The short path's poll against a disconnect that comes between its look and its lock.

use crate::late_stores::{connect, post_recv, send, two, Mem, Two};
use crate::layout;
use remora_testkit::Harness;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A poll saw the last connection's completion 0 and waits for the receive queue's lock;
/// meanwhile the VI is disconnected (the count starts at zero again, the entries are
/// wiped), the flushed receive is taken and a new one posted. The poll, given the lock,
/// must not complete the new receive from the wiped entry (it did: the next connection's
/// first message was then never taken): the connection it saw is no longer the VI's.
#[test]
fn a_completion_seen_under_the_last_connection_completes_no_receive_posted_after_it() {
    let h = Harness::with_cluster(&[4, 8], false);
    let Two { snic, cnic, sp, cp, server, client } = two(&h, None);
    let (sbuf, sdesc) = (Mem::new(&snic, 4096, sp), Mem::new(&snic, 1024, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 4096, cp), Mem::new(&cnic, 1024, cp));
    post_recv(&snic, &server, &sdesc, 0, &sbuf, 0, 64);
    connect(&snic, &server, &cnic, &client, b"short-seen");
    assert!(server.inner.peer_here.load(Ordering::Relaxed), "the pair is not on one host");
    send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[5u8; 8]);
    // What the poll looks at before it takes the lock.
    let k = server.inner.recv_next.load(Ordering::Acquire);
    let conn = server.inner.conn();
    let seen =
        || server.inner.map.load(layout::completion_at(k) + layout::SEQ) == layout::tagged(conn, k + 1);
    let t = Instant::now();
    while !seen() {
        assert!(t.elapsed() < Duration::from_secs(20), "completion 0 never appeared");
        std::thread::yield_now();
    }
    // The disconnect, the flushed receive taken, a new receive posted.
    server.disconnect().unwrap();
    server.recv_done().expect("the receive posted before the disconnect completed");
    post_recv(&snic, &server, &sdesc, 64, &sbuf, 64, 64);
    // Now the poll has the lock: nothing waits in the done queue (the look at the entry is
    // what decides), the new receive is posted.
    let mut q = server.inner.recv.lock();
    assert!(q.done.is_empty() && q.posted.len() == 1, "the queue is not as the poll finds it");
    assert_eq!(
        server.inner.recv_short_seen(&mut q, k, conn),
        None,
        "a receive completed from the last connection's entry"
    );
}
