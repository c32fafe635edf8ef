//! A count of posted receives the NIC's watcher could not send (another thread held the
//! channel) leaves with the next short send on the pair's own stream
//! ([`Link::posted_urgent`]'s `watcher_missed`), which otherwise does not carry it.

use crate::layout::{self, status};
use crate::link::Link;
use crate::testing::{connect, post_recv, send, two, Mem, Two};
use remora_testkit::wait_until as wait_for;
use remora_testkit::Harness;
use std::sync::atomic::Ordering;
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(20));

/// The server (node 4) answers its client on another host with short messages and posts
/// one receive more than the client knows enough of: the count is held (a batch is not
/// there yet, the client still knows 16 unused). A short send on the pair's stream leaves
/// it held; the watcher's look that finds the channel taken marks it missed, and the next
/// short send sends it, a write of its own. The server's watcher never looks by itself:
/// what moves the count is the sends' doing.
#[test]
fn a_count_the_watcher_missed_leaves_with_the_next_short_send_on_the_pairs_stream() {
    let h = Harness::with_cluster(&[4, 8], true);
    let Two { snic, cnic, sp, cp, server, client } = two(&h, Some(Duration::from_secs(3600)));
    let (sbuf, sdesc) = (Mem::new(&snic, 64 * 32, sp), Mem::new(&snic, 64 * 32, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 64 * 4, cp), Mem::new(&cnic, 64 * 4, cp));
    connect(&snic, &server, &cnic, &client, b"watcher-missed");
    let link: std::sync::Arc<Link> = server.inner.link().unwrap();
    assert!(link.direct().is_some(), "the pair has no stream of its own");
    // What the client's segment says the server posted.
    let known = || layout::count_in(client.inner.conn(), client.inner.map.load(layout::PEER_POSTED), 0);
    for i in 0..3 {
        post_recv(&cnic, &client, &cdesc, 64 * i, &cbuf, 64 * i, 64);
    }
    // Told one by one while the client knows fewer than 16 unused.
    for i in 0..16 {
        post_recv(&snic, &server, &sdesc, 64 * i, &sbuf, 64 * i, 64);
    }
    assert!(wait_for(|| known() == 16), "the first 16 posts were not told (the client knows {})", known());
    // Each answer is taken whole by the client. The first takes the channel (no message
    // before it was short), the next ones the pair's stream.
    let mut taken = 0;
    let mut answer = |m: &[u8; 8]| {
        let st = send(&snic, &server, &sdesc, 64 * 20, &sbuf, 64 * 20, m);
        assert_eq!(st, status::DONE | status::OP_SEND, "answer {taken}");
        let at = 64 * taken;
        assert_eq!(client.recv_wait(T).unwrap(), (cdesc.addr(at), cdesc.handle), "answer {taken}");
        assert_eq!(cbuf.get(at, 8), m.to_vec(), "answer {taken} did not land whole");
        taken += 1;
    };
    answer(b"answer-0");
    // The 17th post waits: less than a batch, and the client still knows 16 unused.
    post_recv(&snic, &server, &sdesc, 64 * 16, &sbuf, 64 * 16, 64);
    assert_eq!(link.posted_queued(), 17, "the 17th post's count was not queued");
    assert!(!link.posted_urgent(), "the 17th post's count counts as urgent");
    let alone = server.posts_told_alone();
    // A short send on the pair's stream leaves it where it is.
    answer(b"answer-1");
    assert_eq!(server.posts_told_alone(), alone, "a short send sent a count that may wait");
    assert!(!link.posted_urgent(), "the count became urgent by itself");
    assert_eq!(known(), 16, "the 17th post was told");
    // The watcher looks while another thread holds the channel (here this one): it sends
    // nothing, and notes the miss.
    let late = link.told_late();
    link.far(|_| {
        link.flush_posted_late();
        Ok(())
    });
    assert_eq!(link.told_late(), late, "the watcher sent a count through a held channel");
    assert!(link.watcher_missed.load(Ordering::Relaxed), "the watcher's miss was not noted");
    assert!(link.posted_urgent(), "a count the watcher missed is not urgent");
    // The next short send on the pair's stream sends it: a write of its own, counted.
    answer(b"answer-2");
    assert_eq!(server.posts_told_alone(), alone + 1, "the missed count did not leave on its own");
    assert!(!link.watcher_missed.load(Ordering::Relaxed), "the miss outlived the count's sending");
    assert!(wait_for(|| known() == 17), "the missed count never reached the client: {}", known());
    drop(link);
    client.disconnect().unwrap();
    server.disconnect().unwrap();
}
