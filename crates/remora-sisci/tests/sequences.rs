//! Sequence statuses in every state of the link, as the guide's error-checking loops read
//! them: OK while up, PENDING while the route is down, RETRIABLE once after it came back,
//! NOT_RETRIABLE (and an error from start) once the segment is gone for good. Over TCP
//! between two nodes of this host (a stopped daemon is a silent peer), and across two
//! hosts of a namespace cluster where one can be made (a pulled cable).

mod common;
use common::Sci as _;

use remora_sisci::*;
use std::time::{Duration, Instant};

fn daemon_pid(h: &common::Harness, node: u32) -> i32 {
    let s = remora_client::Session::open_control(&h.config(node)).unwrap();
    match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.pid as i32,
        other => panic!("{other:?}"),
    }
}

fn signal(pid: i32, sig: &str) {
    assert!(std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

fn exported(d: &Descriptor, id: u32, size: usize) -> LocalSegment {
    let s = LocalSegment::create(d, Some(id), size, CreateFlags::default()).unwrap();
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    s
}

/// The guide's loop: start until OK, counting the PENDING answers; an error leaves it.
fn start_until_ok(seq: &Sequence, limit: Duration) -> Result<u32> {
    let t = Instant::now();
    let mut pending = 0;
    loop {
        match seq.start()? {
            SequenceStatus::Ok => return Ok(pending),
            SequenceStatus::Pending => pending += 1,
            other => panic!("start answered {other:?}"),
        }
        assert!(t.elapsed() < limit, "start was PENDING for {limit:?}");
    }
}

/// A change made to the link (from the test's thread or a helper thread).
type Edge<'a> = dyn Fn() + Sync + 'a;

/// Every state through `pause`/`resume` of the route between the map's process and the
/// segment's node; `kill` ends the segment's node.
fn every_state(map: &Map, remote: &RemoteSegment, pause: &Edge<'_>, resume: &Edge<'_>, kill: &Edge<'_>) {
    let seq = map.create_sequence().unwrap();
    map.write(0, b"before").unwrap();
    assert_eq!(seq.start().unwrap(), SequenceStatus::Ok);
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Ok);

    // Down: the check cannot tell what became of the transfer; start waits a little, then
    // says so too. Nothing touches the map meanwhile (a load would wait for the home).
    pause();
    common::expect_event(remote, SegmentReason::NotOperational, Duration::from_secs(10));
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Pending);
    assert_eq!(seq.check(false, true).unwrap(), SequenceStatus::Pending);
    let t = Instant::now();
    assert_eq!(seq.start().unwrap(), SequenceStatus::Pending);
    assert!(t.elapsed() >= Duration::from_millis(9), "start waited {:?}", t.elapsed());
    resume();
    common::expect_event(remote, SegmentReason::Operational, Duration::from_secs(10));
    // Back: the outage is a transient error, reported once.
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Retriable);
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Ok);

    // An outage a start clears (the guide: start after PENDING or NOT_RETRIABLE).
    pause();
    common::expect_event(remote, SegmentReason::NotOperational, Duration::from_secs(10));
    resume();
    common::expect_event(remote, SegmentReason::Operational, Duration::from_secs(10));
    assert_eq!(seq.start().unwrap(), SequenceStatus::Ok);
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Ok);

    // The guide's loop around start rides out an outage: PENDING until the route is back.
    pause();
    common::expect_event(remote, SegmentReason::NotOperational, Duration::from_secs(10));
    let pending = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            resume();
        });
        start_until_ok(&seq, Duration::from_secs(20)).unwrap()
    });
    assert!(pending >= 1, "start never said PENDING");
    common::expect_event(remote, SegmentReason::Operational, Duration::from_secs(10));
    map.write(0, b"after").unwrap();
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Ok);

    // Gone for good: the check is NOT_RETRIABLE, the start an error (its loop ends).
    kill();
    common::expect_event(remote, SegmentReason::Lost, Duration::from_secs(10));
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::NotRetriable);
    assert_eq!(seq.check(true, true).unwrap(), SequenceStatus::NotRetriable);
    assert_eq!(start_until_ok(&seq, Duration::from_secs(1)).unwrap_err(), Error::NodeNotResponding);
    seq.remove().unwrap();
}

#[test]
fn statuses_follow_the_link_over_tcp() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let _seg = exported(&a, 21, 8192);
    let remote = RemoteSegment::connect(&b, 4, 21, 0, Some(Duration::from_secs(5))).unwrap();
    let map = remote.map(0, 8192, None, MapFlags::default()).unwrap();
    let pid = daemon_pid(&h, 4);
    every_state(&map, &remote, &|| signal(pid, "STOP"), &|| signal(pid, "CONT"), &|| signal(pid, "KILL"));
}

#[test]
fn a_forced_disconnect_is_not_retriable_and_start_says_not_connected() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let seg = exported(&a, 22, 4096);
    let remote = RemoteSegment::connect(&a, 4, 22, 0, None).unwrap();
    let map = remote.map(0, 4096, None, MapFlags::default()).unwrap();
    let seq = map.create_sequence().unwrap();
    assert_eq!(seq.start().unwrap(), SequenceStatus::Ok);
    // Every flag combination of a healthy map is OK (a map of this host has no outages).
    for (f, b) in [(false, false), (false, true), (true, false), (true, true)] {
        assert_eq!(seq.check(f, b).unwrap(), SequenceStatus::Ok);
    }
    seg.set_unavailable(0, true, false).unwrap();
    common::expect_event(&remote, SegmentReason::Disconnect, Duration::from_secs(10));
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::NotRetriable);
    assert_eq!(start_until_ok(&seq, Duration::from_secs(1)).unwrap_err(), Error::NotConnected);
    // A sequence of a local segment's map never fails.
    let lseq = seg.map(0, 4096, None, MapFlags::default()).unwrap().create_sequence().unwrap();
    assert_eq!(lseq.start().unwrap(), SequenceStatus::Ok);
    assert_eq!(lseq.check(false, false).unwrap(), SequenceStatus::Ok);
}

#[test]
fn statuses_follow_the_link_across_hosts() {
    let Some(mut c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let _seg = exported(&a, 23, 8192);
    let remote = RemoteSegment::connect(&b, c.node(1), 23, 0, Some(Duration::from_secs(10))).unwrap();
    let map = remote.map(0, 8192, None, MapFlags::default()).unwrap();
    let cell = std::sync::Mutex::new(&mut c);
    let down = || cell.lock().unwrap().link_down(1);
    let up = || cell.lock().unwrap().link_up(1);
    let kill = || cell.lock().unwrap().kill_daemon(1);
    every_state(&map, &remote, &down, &up, &kill);
}
