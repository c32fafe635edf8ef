//! Connects and disconnects to a node of this host whose daemon is held up keep the
//! caller's time, as they do to a node of another host (`connect_given_up.rs`): a connect
//! with a timeout answers `Timeout` within about its timeout, a disconnect returns within
//! a second or two, and the held-up node, once it answers again, holds nothing for them.
//! Two nodes of this host over the shared-memory transport (the session's proxy on node
//! 4's daemon); node 4's daemon stopped with `SIGSTOP` is the held-up node. Before, each
//! of these calls waited until node 4 was resumed.

mod common;
use common::{daemon_pid, retried, signal, Sci as _, Watched};

use remora_sisci::*;
use std::time::{Duration, Instant};

/// Wait (at most 15 s) until node 4 holds `want` for node 8.
fn until_booked(h: &common::Harness, want: (usize, usize)) {
    let t = Instant::now();
    while common::booked_for_node_8(h) != want {
        assert!(t.elapsed() < Duration::from_secs(15), "node 4 holds {:?}", common::booked_for_node_8(h));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How long a held-up node of this host is left stopped at most: a call that waits for
/// it (before this change) returns only then, and fails its bound.
const HELD: Duration = Duration::from_secs(30);

/// `connect` fails with `Timeout` within `bound`.
fn times_out_within(what: &str, bound: Duration, connect: impl FnOnce() -> Result<()>) {
    let t = Instant::now();
    let err = connect().expect_err(what);
    let took = t.elapsed();
    eprintln!("{what} failed with {err:?} after {took:?}");
    assert_eq!(err, Error::Timeout, "{what}");
    assert!(took < bound, "{what} took {took:?}");
}

#[test]
fn a_connect_to_a_held_up_node_of_this_host_times_out_and_leaves_nothing_booked() {
    let h = common::Harness::new();
    // The session's route to node 4 (here its proxy there) stands before node 4 is stopped.
    let (a, b, _seg, _intr) = common::given_up_start(&h);

    // Asked while node 4 is stopped and given up by node 8; the requests wait unread in
    // node 4's socket. Segment 43 does not exist yet: node 4 would wait for it.
    let (limit, bound) = (Duration::from_secs(2), Duration::from_secs(9));
    let held = Watched::stop(daemon_pid(&h, 4), HELD);
    times_out_within("a segment connect", bound, || {
        RemoteSegment::connect(&b, 4, 42, 0, Some(limit)).map(drop)
    });
    times_out_within("an interrupt connect", bound, || {
        RemoteInterrupt::connect(&b, 4, 0, 78, Some(limit)).map(drop)
    });
    times_out_within("a connect to a segment to come", bound, || {
        RemoteSegment::connect(&b, 4, 43, 0, Some(limit)).map(drop)
    });
    assert!(!held.resume(), "the connects waited for node 4");
    // Node 4 serves the requests (it makes the connections) and then learns they were
    // given up. Segment 43 comes within the time node 4 waits for it.
    let _late = common::available_segment(&a, 43);
    // A connect asked after them is served after them.
    let kept = retried(|| RemoteSegment::connect(&b, 4, 42, 0, Some(limit)));
    // Longer than node 4 would have waited for segment 43.
    std::thread::sleep(limit + Duration::from_millis(500));
    until_booked(&h, (1, 0));
    common::only_the_kept_connection_is_booked(&h, kept);
}

#[test]
fn a_disconnect_from_a_held_up_node_of_this_host_returns_and_the_node_learns_of_it() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_seg, _intr, remote, intr) = common::connected_to_segment_and_interrupt(&h, &a, &b);
    let held = Watched::stop(daemon_pid(&h, 4), HELD);
    let t = Instant::now();
    remote.disconnect().unwrap();
    intr.disconnect().unwrap();
    let took = t.elapsed();
    eprintln!("both disconnects took {took:?}");
    assert!(took < Duration::from_secs(6), "the disconnects took {took:?}");
    assert!(!held.resume(), "the disconnects waited for node 4");
    until_booked(&h, (0, 0));
    // Node 8's books agree: a new connect works and is the only one booked.
    let again = retried(|| RemoteSegment::connect(&b, 4, 45, 0, Some(Duration::from_secs(2))));
    assert_eq!(common::booked_for_node_8(&h), (1, 0));
    again.disconnect().unwrap();
    assert_eq!(common::booked_for_node_8(&h), (0, 0));
}

/// A connect without a time limit waits for a held-up node of this host (as for one of
/// another host), and ends when that node's daemon dies.
#[test]
fn a_connect_without_a_timeout_ends_when_the_held_up_node_dies() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let _seg = common::available_segment(&a, 46);
    RemoteSegment::connect(&b, 4, 46, 0, Some(Duration::from_secs(10))).unwrap().disconnect().unwrap();
    let pid = daemon_pid(&h, 4);
    signal(pid, "STOP");
    let killer = std::thread::spawn(move || {
        // Longer than a timed connect's grace: the connect still waits then.
        std::thread::sleep(Duration::from_secs(3));
        signal(pid, "KILL");
    });
    let t = Instant::now();
    let r = RemoteSegment::connect(&b, 4, 46, 0, None).map(drop);
    let took = t.elapsed();
    killer.join().unwrap();
    eprintln!("the connect ended with {r:?} after {took:?}");
    assert!(r.is_err(), "a connect to a dead node");
    assert!(took >= Duration::from_secs(3), "the connect gave up before the node died ({took:?})");
    assert!(took < HELD, "the connect waited past the node's death ({took:?})");
}
