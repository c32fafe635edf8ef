//! Connects to a node of another host keep the caller's time while that node is silent
//! (a connect with a 2 s timeout took 29 s during a cable cut) and wait out a far daemon
//! held up a moment, and a connect given up
//! leaves nothing booked on the far node once it answers again: the far node is told,
//! in order after the request, that it was given up, and refuses it or releases what it
//! made. Two nodes of this host over TCP (`force_tcp`); node 4's daemon stopped with
//! `SIGSTOP` is the silent node (as behind a pulled cable: the link's connection stays,
//! nothing is read).

mod common;
use common::{daemon_pid, retried, Sci as _, Stopped};

use remora_sisci::*;
use std::time::{Duration, Instant};

/// `connect` fails with a timeout or a silent node's error, within `bound`.
fn fails_within(what: &str, bound: Duration, connect: impl FnOnce() -> Result<()>) {
    let t = Instant::now();
    let err = connect().expect_err(what);
    let took = t.elapsed();
    eprintln!("{what} failed with {err:?} after {took:?}");
    assert!(matches!(err, Error::Timeout | Error::NodeNotResponding), "{what}: {err:?}");
    assert!(took < bound, "{what} took {took:?}");
}

#[test]
fn connects_keep_the_callers_time_while_the_node_is_silent() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let _seg = common::available_segment(&a, 41);
    let _intr = Interrupt::create(&a, 0, Some(77), false, None).unwrap();
    RemoteSegment::connect(&b, 4, 41, 0, Some(Duration::from_secs(10))).unwrap().disconnect().unwrap();
    let stopped = Stopped::new(daemon_pid(&h, 4));
    // The first request goes while the link still looks up; it waited (before) until the
    // link was closed, 150 heartbeats (7.5 s) after node 4 fell silent. The second goes
    // once the route is known silent (it waited 5 s for a new connection).
    let (limit, bound) = (Duration::from_secs(2), Duration::from_secs(6));
    fails_within("a segment connect", bound, || RemoteSegment::connect(&b, 4, 41, 0, Some(limit)).map(drop));
    fails_within("an interrupt connect", bound, || {
        RemoteInterrupt::connect(&b, 4, 0, 77, Some(limit)).map(drop)
    });
    drop(stopped);
    retried(|| RemoteSegment::connect(&b, 4, 41, 0, Some(limit))).disconnect().unwrap();
    retried(|| RemoteInterrupt::connect(&b, 4, 0, 77, Some(limit))).disconnect().unwrap();
}

/// A far daemon held up for a second (three missed heartbeats: the route is reported
/// silent) is not a reason to give a connect up: one without a time limit, or with a long
/// one, connects once the daemon answers (the bounded connect answered
/// NODE_NOT_RESPONDING after ~0.2 s here, reviewer 84).
#[test]
fn a_connect_waits_out_a_far_daemon_held_up_a_moment() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let _seg = common::available_segment(&a, 51);
    RemoteSegment::connect(&b, 4, 51, 0, Some(Duration::from_secs(10))).unwrap().disconnect().unwrap();
    for timeout in [None, Some(Duration::from_secs(30))] {
        let pid = daemon_pid(&h, 4);
        let stopper = std::thread::spawn(move || {
            let stopped = Stopped::new(pid);
            std::thread::sleep(Duration::from_secs(1));
            drop(stopped);
        });
        std::thread::sleep(Duration::from_millis(20));
        let r = RemoteSegment::connect(&b, 4, 51, 0, timeout);
        stopper.join().unwrap();
        r.unwrap_or_else(|e| panic!("a connect ({timeout:?}) across a 1 s pause: {e:?}"))
            .disconnect()
            .unwrap();
    }
}

#[test]
fn a_connect_given_up_leaves_nothing_booked_on_the_far_node() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    // The session's route to node 4 (here its proxy there) stands before node 4 is stopped.
    let (a, b, _seg, _intr) = common::given_up_start(&h);

    // Asked while node 4 is stopped, given up by node 8; the requests wait unread in node
    // 4's socket. Segment 43 does not exist yet: node 4 would wait for it.
    let limit = Duration::from_secs(2);
    {
        let _stopped = Stopped::new(daemon_pid(&h, 4));
        assert!(RemoteSegment::connect(&b, 4, 42, 0, Some(limit)).is_err());
        assert!(RemoteInterrupt::connect(&b, 4, 0, 78, Some(limit)).is_err());
        assert!(RemoteSegment::connect(&b, 4, 43, 0, Some(limit)).is_err());
    }
    // Node 4 reads the requests (it made the connections before this change, and kept
    // them for as long as `b` stays open), and that they were given up. Segment 43 comes
    // within the time node 4 would have waited for it.
    let _late = common::available_segment(&a, 43);
    // A connect asked after them is served after them.
    let kept = retried(|| RemoteSegment::connect(&b, 4, 42, 0, Some(limit)));
    // Longer than node 4 would have waited for segment 43.
    std::thread::sleep(limit + Duration::from_millis(500));
    assert_eq!(common::booked_for_node_8(&h), (1, 0), "only the connection node 8 holds");
    common::only_the_kept_connection_is_booked(&h, kept);
}

/// The child of [`a_session_end_sent_on_a_connection_that_broke_is_sent_again`]: a
/// process of node 8 (runtime directory `dir`) connected to node 4's segment 44.
fn child(dir: &str) {
    let cfg = remora_client::Config {
        node: 8,
        runtime_dir: dir.into(),
        daemon: Some(common::daemon_path()),
        spawn: false,
        idle_exit: Duration::from_secs(60),
        cluster: Some(std::path::Path::new(dir).join("cluster.toml")),
    };
    let b = Descriptor::open(&Sisci::with_config(cfg)).unwrap();
    let _r = RemoteSegment::connect(&b, 4, 44, 0, Some(Duration::from_secs(10))).unwrap();
    println!("ready");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

const CHILD_ENV: &str = "REMORA_TEST_SESSION_END_CHILD";

/// A session's end sent on a connection that breaks before the far node reads it is sent
/// again on the next one. A process of node 8 holding a connection to node 4's segment is
/// killed while node 4 is stopped: its session's end goes on the link's connection, which
/// node 8 then gives up (150 silent heartbeats, 7.5 s), and which node 4, when it resumes,
/// may close before it reads what is still in it. Before, the end was lost with it (about
/// one run in two) and node 4 kept the connection for good.
#[test]
fn a_session_end_sent_on_a_connection_that_broke_is_sent_again() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
        return;
    }
    use std::io::BufRead as _;
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let _seg = common::available_segment(&a, 44);
    let _b = Descriptor::open(&h.sci(8)).unwrap();
    let mut kid = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_session_end_sent_on_a_connection_that_broke_is_sent_again", "--nocapture"])
        .env(CHILD_ENV, h.runtime_dir())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(kid.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child died before it was ready");
    }
    assert_eq!(common::booked_for_node_8(&h), (1, 0));
    {
        let _stopped = Stopped::new(daemon_pid(&h, 4));
        std::thread::sleep(Duration::from_millis(300));
        kid.kill().unwrap();
        kid.wait().unwrap();
        // Past the link's budget: node 8 gives the connection up.
        std::thread::sleep(Duration::from_secs(9));
    }
    let t = Instant::now();
    while common::booked_for_node_8(&h) != (0, 0) {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "node 4 still holds {:?}",
            common::booked_for_node_8(&h)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A disconnect from a node that does not answer is done at once (it waited until the
/// link was closed, 150 silent heartbeats, 7.5 s here), and the node learns of it once it
/// answers again: here after the connection the disconnects went on was given up (node 4
/// may close it unread), so they are sent again on the next one.
#[test]
fn a_disconnect_does_not_wait_for_a_silent_node_which_learns_of_it_later() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_seg, _intr, remote, intr) = common::connected_to_segment_and_interrupt(&h, &a, &b);
    {
        let _stopped = Stopped::new(daemon_pid(&h, 4));
        // Three silent heartbeats: the route is known silent.
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        remote.disconnect().unwrap();
        intr.disconnect().unwrap();
        let took = t.elapsed();
        eprintln!("both disconnects took {took:?}");
        assert!(took < Duration::from_secs(3), "the disconnects took {took:?}");
        // Past the link's budget: node 8 gives the connection up.
        std::thread::sleep(Duration::from_secs(9));
    }
    let t = Instant::now();
    while common::booked_for_node_8(&h) != (0, 0) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "node 4 still holds {:?}",
            common::booked_for_node_8(&h)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Node 8's books agree: a new connect works and is the only one booked.
    let again = retried(|| RemoteSegment::connect(&b, 4, 45, 0, Some(Duration::from_secs(2))));
    assert_eq!(common::booked_for_node_8(&h), (1, 0));
    again.disconnect().unwrap();
    assert_eq!(common::booked_for_node_8(&h), (0, 0));
}
