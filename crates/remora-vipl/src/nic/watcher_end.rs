//! The NIC's watcher's end ([`Watching`]'s drop: its NIC still there, a panic unwinding it)
//! sends the counts of posted receives that waited for it (`Link::posted_later`): no VI
//! is left with a count nobody sends.

use super::Watching;
use crate::layout;
use crate::testing::{connect, post_recv, two, Mem, Two};
use remora_testkit::Harness;
use std::sync::Arc;
use std::time::Duration;

use remora_testkit::wait_until as wait_for;

/// A receiver on another host posts one receive more than its sender knows enough of: the
/// count waits for the NIC's watcher (here one that never looks again), and reaches the
/// sender's segment when the watcher ends.
#[test]
fn a_count_held_for_the_watcher_goes_when_the_watcher_ends() {
    let h = Harness::with_cluster(&[4, 8], true);
    // The server's watcher never looks within the test.
    let Two { snic, cnic, sp, server, client, .. } = two(&h, Some(Duration::from_secs(3600)));
    let (sbuf, sdesc) = (Mem::new(&snic, 64 * 32, sp), Mem::new(&snic, 64 * 32, sp));
    connect(&snic, &server, &cnic, &client, b"watcher-end");
    // What the client's segment says the server posted.
    let known = || {
        let w = client.inner.map.load(layout::PEER_POSTED);
        layout::count_in(client.inner.conn(), w, 0)
    };
    // Told one by one while the client knows fewer than 16 unused: the 17th is held (the
    // client still knows 16, and one is less than a batch).
    for i in 0..16 {
        post_recv(&snic, &server, &sdesc, 64 * i, &sbuf, 64 * i, 64);
    }
    assert!(wait_for(|| known() == 16), "the first 16 posts were not told (the client knows {})", known());
    post_recv(&snic, &server, &sdesc, 64 * 16, &sbuf, 64 * 16, 64);
    let link = server.inner.link().unwrap();
    assert_eq!(link.posted_queued(), 17, "the 17th post's count was not queued");
    // Held: nothing sends it while the watcher does not look (told at once, it would
    // have landed by now).
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(known(), 16, "the 17th post was told at once: nothing held for the watcher");
    // The watcher's end (as its thread's would): the count goes.
    drop(Watching(Arc::downgrade(&snic.inner)));
    assert!(wait_for(|| known() == 17), "the count held at the watcher's end never came: {}", known());
    assert!(!snic.watcher_runs(), "a watcher that ended still counts as running");
    drop(link);
    client.disconnect().unwrap();
    server.disconnect().unwrap();
}
