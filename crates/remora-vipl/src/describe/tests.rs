//! A post that held its count for the NIC's watcher sends it itself when the watcher ended
//! between its first look and the hold (the watcher's end may have flushed before the
//! count was queued); while the watcher still runs, it leaves the count held.

use crate::layout;
use crate::testing::{connect, post_recv, two, Mem, Two};
use remora_testkit::wait_until as wait_for;
use remora_testkit::Harness;
use std::cell::Cell;
use std::time::Duration;

#[test]
fn a_count_held_as_the_watcher_ends_goes_with_the_post() {
    let h = Harness::with_cluster(&[4, 8], true);
    // The server's watcher never looks within the test: what it would send stays held.
    let Two { snic, cnic, sp, server, client, .. } = two(&h, Some(Duration::from_secs(3600)));
    let (sbuf, sdesc) = (Mem::new(&snic, 64 * 32, sp), Mem::new(&snic, 64 * 32, sp));
    connect(&snic, &server, &cnic, &client, b"post-after-watcher");
    // What the client's segment says the server posted.
    let known = || layout::count_in(client.inner.conn(), client.inner.map.load(layout::PEER_POSTED), 0);
    // Told one by one while the client knows fewer than 16 unused; the 17th is held (the
    // client still knows 16, and one is less than a batch).
    for i in 0..17 {
        post_recv(&snic, &server, &sdesc, 64 * i, &sbuf, 64 * i, 64);
    }
    assert!(wait_for(|| known() == 16), "the first 16 posts were not told (the client knows {})", known());
    let link = server.inner.link().unwrap();
    assert_eq!(link.posted_queued(), 17, "the 17th post's count was not queued");
    let alone = server.posts_told_alone();
    // The post's telling of that count again, the watcher running at both looks: held.
    assert!(server.inner.tell_posted(&link, 17, 0, 0, || true), "a held count failed the post");
    assert_eq!(server.posts_told_alone(), alone, "a count held for a running watcher was sent");
    assert!(snic.watcher_runs(), "the watcher stopped");
    // The watcher running at the first look and gone at the second: the count goes.
    let looks = Cell::new(0);
    let runs = || {
        looks.set(looks.get() + 1);
        looks.get() == 1
    };
    assert!(server.inner.tell_posted(&link, 17, 0, 0, runs), "the count could not be sent");
    assert_eq!(looks.get(), 2, "the watcher was not looked at again after the hold");
    assert_eq!(server.posts_told_alone(), alone + 1, "the count held as the watcher ended was not sent");
    assert!(wait_for(|| known() == 17), "the count never reached the client: {}", known());
    drop(link);
    client.disconnect().unwrap();
    server.disconnect().unwrap();
}
