//! Known gaps of issue 18.5, each as a fault and the answer the API promises, within a
//! bound: interrupt connections to a node that went away, restarted or fell silent fail
//! their triggers with `NodeNotResponding` (`SCI_ERR_NODE_NOT_RESPONDING`) instead of
//! succeeding into nothing, hanging, or reaching whatever the restarted node now calls by
//! the old handle; a map of a segment whose home does not answer is made (or refused) at
//! once rather than after the pager flow's dial gives up, and its faults hold up no other
//! home's (each home's maps have a pager of their own), while a flag stored after
//! `SCIFlush` to another home still waits for its data. Over TCP between two nodes of
//! this host (a killed or stopped daemon), and across two namespace hosts where one can
//! be made (a pulled cable).

mod common;
use common::{daemon_pid, retried, signal, Sci as _, Stopped, Watched};

use remora_sisci::*;
use std::time::{Duration, Instant};

/// Trigger both connections until they fail (within `limit`); each failing trigger must
/// answer within `each`. Returns the error.
fn triggers_fail(r: &RemoteInterrupt, rd: &RemoteDataInterrupt, limit: Duration, each: Duration) -> Error {
    let t = Instant::now();
    loop {
        let one = Instant::now();
        let got = r.trigger().and_then(|_| rd.trigger(b"ping"));
        let took = one.elapsed();
        if let Err(e) = got {
            assert!(took < each, "a failing trigger took {took:?}");
            return e;
        }
        assert!(t.elapsed() < limit, "triggers still succeed {limit:?} after the fault");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Interrupt 77 and data interrupt 78 of `a`, connected from `b`, checked to work.
fn connected(
    a: &Descriptor,
    b: &Descriptor,
    node: u32,
) -> (Interrupt, DataInterrupt, RemoteInterrupt, RemoteDataInterrupt) {
    let intr = Interrupt::create(a, 0, Some(77), false, None).unwrap();
    let dintr = DataInterrupt::create(a, 0, Some(78), None).unwrap();
    let r = RemoteInterrupt::connect(b, node, 0, 77, Some(Duration::from_secs(10))).unwrap();
    let rd = RemoteDataInterrupt::connect(b, node, 0, 78, Some(Duration::from_secs(10))).unwrap();
    r.trigger().unwrap();
    intr.wait(Some(Duration::from_secs(5))).unwrap();
    rd.trigger(b"hello").unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(dintr.wait(&mut buf, Some(Duration::from_secs(5))).unwrap(), 5);
    (intr, dintr, r, rd)
}

#[test]
fn interrupt_connections_to_a_killed_node_are_lost_also_after_its_restart() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_i, _d, r, rd) = connected(&a, &b, 4);
    signal(daemon_pid(&h, 4), "KILL");
    let t = Instant::now();
    assert_eq!(
        triggers_fail(&r, &rd, Duration::from_secs(3), Duration::from_millis(1500)),
        Error::NodeNotResponding
    );
    eprintln!("triggers failed {:?} after the kill", t.elapsed());

    // Node 4 comes back (a process of it starts its daemon) with the same numbers. The old
    // connections stay lost, promptly; they never reach the new interrupts; new
    // connections work.
    let a2 = retried(|| Descriptor::open(&h.sci(4)));
    let intr2 = Interrupt::create(&a2, 0, Some(77), false, None).unwrap();
    let dintr2 = DataInterrupt::create(&a2, 0, Some(78), None).unwrap();
    // A connect answers NodeNotResponding while the link is still coming back: retried.
    let r2 = retried(|| RemoteInterrupt::connect(&b, 4, 0, 77, Some(Duration::from_secs(10))));
    let rd2 = RemoteDataInterrupt::connect(&b, 4, 0, 78, Some(Duration::from_secs(10))).unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        assert_eq!(r.trigger().unwrap_err(), Error::NodeNotResponding);
        assert_eq!(rd.trigger(b"stale").unwrap_err(), Error::NodeNotResponding);
        assert!(t.elapsed() < Duration::from_millis(200), "lost triggers took {:?}", t.elapsed());
    }
    assert_eq!(intr2.wait(Some(Duration::from_millis(200))).unwrap_err(), Error::Timeout);
    r2.trigger().unwrap();
    intr2.wait(Some(Duration::from_secs(5))).unwrap();
    rd2.trigger(b"fresh").unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(dintr2.wait(&mut buf, Some(Duration::from_secs(5))).unwrap(), 5);
    assert_eq!(&buf[..5], b"fresh", "no stale payload came first");
}

#[test]
fn interrupt_triggers_fail_promptly_while_the_node_is_silent_and_work_after() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (intr, _d, r, rd) = connected(&a, &b, 4);
    let stopped = Stopped::new(daemon_pid(&h, 4));
    let err = triggers_fail(&r, &rd, Duration::from_secs(3), Duration::from_millis(1500));
    drop(stopped);
    assert_eq!(err, Error::NodeNotResponding);
    // Silent is not lost: once the route answers again, the same connections work.
    let t = Instant::now();
    while r.trigger().is_err() {
        assert!(t.elapsed() < Duration::from_secs(10), "the connection never worked again");
        std::thread::sleep(Duration::from_millis(50));
    }
    intr.wait(Some(Duration::from_secs(5))).unwrap();
}

#[test]
fn interrupt_connections_across_hosts_follow_the_cable_and_the_daemon() {
    let Some(mut c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let node = c.node(1);
    let (intr, _d, r, rd) = connected(&a, &b, node);

    // The cable is pulled: triggers fail (each at once once the route is known silent).
    c.link_down(1);
    let err = triggers_fail(&r, &rd, Duration::from_secs(5), Duration::from_millis(2500));
    c.link_up(1);
    assert_eq!(err, Error::NodeNotResponding);
    let t = Instant::now();
    while r.trigger().is_err() {
        assert!(t.elapsed() < Duration::from_secs(15), "the connection never worked again");
        std::thread::sleep(Duration::from_millis(50));
    }
    intr.wait(Some(Duration::from_secs(5))).unwrap();

    // The daemon is killed: lost. It restarts: still lost, at once.
    c.kill_daemon(1);
    assert_eq!(
        triggers_fail(&r, &rd, Duration::from_secs(5), Duration::from_millis(2500)),
        Error::NodeNotResponding
    );
    c.start_daemon(1);
    let a2 = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let intr2 = Interrupt::create(&a2, 0, Some(77), false, None).unwrap();
    let r2 = retried(|| RemoteInterrupt::connect(&b, node, 0, 77, Some(Duration::from_secs(15))));
    let t = Instant::now();
    assert_eq!(r.trigger().unwrap_err(), Error::NodeNotResponding);
    assert!(t.elapsed() < Duration::from_millis(200), "a lost trigger took {:?}", t.elapsed());
    assert_eq!(intr2.wait(Some(Duration::from_millis(200))).unwrap_err(), Error::Timeout);
    r2.trigger().unwrap();
    intr2.wait(Some(Duration::from_secs(5))).unwrap();
}

/// Segment 31 of `a` (64 KiB, `b"home data"` at 0), connected from `b`.
fn exported_and_connected(a: &Descriptor, b: &Descriptor, node: u32) -> (LocalSegment, RemoteSegment) {
    let seg = LocalSegment::create(a, Some(31), 65536, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    seg.map(0, 65536, None, MapFlags::default()).unwrap().write(0, b"home data").unwrap();
    let remote = RemoteSegment::connect(b, node, 31, 0, Some(Duration::from_secs(10))).unwrap();
    (seg, remote)
}

/// A map made while the home does not answer: made within `bound` (its pager flow is
/// asked for in the background: it comes if the home answers the dial in time, else the
/// pager goes through the daemons), and it reads the home's bytes once the home answers
/// again.
fn map_while(remote: &RemoteSegment, bound: Duration, silence: impl FnOnce(), answer: impl FnOnce()) {
    silence();
    let t = Instant::now();
    let map = remote.map(0, 65536, None, MapFlags::default());
    let took = t.elapsed();
    answer();
    eprintln!("the map of an unreachable home answered in {took:?}");
    assert!(took < bound, "the map of an unreachable home took {took:?}");
    let map = map.unwrap();
    assert!(map.dsm_direct().is_some(), "a map of another host's segment");
    let mut buf = [0u8; 9];
    map.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"home data");
}

#[test]
fn a_map_of_a_stopped_home_is_made_at_once_and_reads_after() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_seg, remote) = exported_and_connected(&a, &b, 4);
    // Stopped a moment ago: the link still looks up, the kernel takes the dial's
    // connection, and nobody answers its handshake.
    let pid = daemon_pid(&h, 4);
    let stopped = std::cell::Cell::new(None);
    map_while(
        &remote,
        Duration::from_millis(1500),
        || stopped.set(Some(Stopped::new(pid))),
        || drop(stopped.take()),
    );
}

#[test]
fn a_map_of_a_home_behind_a_pulled_cable_is_made_at_once_and_reads_after() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let (_seg, remote) = exported_and_connected(&a, &b, c.node(1));
    // Pulled long enough for the link to be known silent (three heartbeats of 200 ms).
    map_while(
        &remote,
        Duration::from_millis(500),
        || {
            c.link_down(1);
            std::thread::sleep(Duration::from_millis(1000));
        },
        || c.link_up(1),
    );
}

/// A DMA of `size` bytes from `b` into `a`'s segment 41 while `silence` keeps the home
/// quiet: the queue must end in ERROR (not wait for the home to answer again, nor time
/// out) within `bound`; after `answer`, a new transfer is DONE with the bytes intact.
fn dma_while_silent(
    a: &Descriptor,
    b: &Descriptor,
    node: u32,
    bound: Duration,
    silence: impl FnOnce(),
    answer: impl FnOnce(),
) {
    let size = 32 << 20;
    let seg = LocalSegment::create(a, Some(41), size, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    let remote = RemoteSegment::connect(b, node, 41, 0, Some(Duration::from_secs(10))).unwrap();
    let src = LocalSegment::create(b, Some(42), size, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + i / 4096) as u8).collect();
    src.map(0, size, None, MapFlags::default()).unwrap().write(0, &data).unwrap();
    let q = DmaQueue::create(b, 0, 1).unwrap();
    silence();
    let t = Instant::now();
    q.start(&src, &remote, 0, size, 0, DmaFlags::default(), None).unwrap();
    let end = q.wait(Some(bound + Duration::from_secs(2)));
    let took = t.elapsed();
    answer();
    assert_eq!(end, Ok(DmaState::Error), "a DMA in flight to a silent home after {took:?}");
    assert!(took < bound, "the DMA reported ERROR only after {took:?}");
    // The link comes back: transfers work again, every byte where it belongs.
    let t = Instant::now();
    loop {
        let r = q
            .start(&src, &remote, 0, size, 0, DmaFlags::default(), None)
            .and_then(|_| q.wait(Some(Duration::from_secs(20))));
        match r {
            Ok(DmaState::Done) => break,
            other => {
                assert!(t.elapsed() < Duration::from_secs(15), "transfers never worked again: {other:?}")
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut got = vec![0u8; size];
    seg.map(0, size, None, MapFlags::default()).unwrap().read(0, &mut got).unwrap();
    assert!(got == data, "the bytes of the transfer after the silence");
}

#[test]
fn a_dma_in_flight_to_a_stopped_home_ends_in_error() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let pid = daemon_pid(&h, 4);
    let stopped = std::cell::Cell::new(None);
    // Heartbeats of 50 ms: NOT_OPERATIONAL after 150 ms of silence.
    dma_while_silent(
        &a,
        &b,
        4,
        Duration::from_millis(1500),
        || stopped.set(Some(Stopped::new(pid))),
        || drop(stopped.take()),
    );
}

#[test]
fn a_dma_in_flight_behind_a_pulled_cable_ends_in_error() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    // Heartbeats of 200 ms: NOT_OPERATIONAL after 600 ms of silence.
    dma_while_silent(&a, &b, c.node(1), Duration::from_millis(2000), || c.link_down(1), || c.link_up(1));
}

#[test]
fn a_second_map_of_a_connection_is_made_while_the_first_waits_on_a_stopped_home() {
    // The maps of one connection share their pager flow; a page fetch from a home that
    // stopped answering holds that flow up to its patience, and a new map of the
    // connection must not wait for it.
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_seg, remote) = exported_and_connected(&a, &b, 4);
    let m1 = remote.map(0, 65536, None, MapFlags::default()).unwrap();
    let mut buf = [0u8; 8];
    m1.read(0, &mut buf).unwrap();
    assert_eq!(m1.dsm_direct(), Some(true));
    let stopped = Stopped::new(daemon_pid(&h, 4));
    let m1c = m1.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 8];
        let _ = m1c.read(32768, &mut buf);
    });
    std::thread::sleep(Duration::from_millis(20));
    let t = Instant::now();
    let m2 = remote.map(4096, 8192, None, MapFlags::default());
    let took = t.elapsed();
    drop(stopped);
    reader.join().unwrap();
    assert!(m2.is_ok(), "{:?}", m2.err());
    assert!(took < Duration::from_millis(500), "the second map took {took:?}");
}

#[test]
fn maps_of_a_stopped_home_do_not_hold_up_another_homes_first_access() {
    // The flows of maps are asked for in the background; dials to a home that stopped
    // answering take up to their timeouts each, and must not delay another home's flow.
    let h = common::Harness::with_cluster(&[4, 8, 12], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let c = Descriptor::open(&h.sci(12)).unwrap();
    let b1 = Descriptor::open(&h.sci(8)).unwrap();
    let b2 = Descriptor::open(&h.sci(8)).unwrap();
    let mut exports = vec![];
    let mut remotes = vec![];
    for id in 31..35u32 {
        let seg = LocalSegment::create(&a, Some(id), 65536, CreateFlags::default()).unwrap();
        seg.prepare(0).unwrap();
        seg.set_available(0).unwrap();
        exports.push(seg);
        remotes.push(RemoteSegment::connect(&b1, 4, id, 0, Some(Duration::from_secs(10))).unwrap());
    }
    let seg12 = LocalSegment::create(&c, Some(41), 65536, CreateFlags::default()).unwrap();
    seg12.prepare(0).unwrap();
    seg12.set_available(0).unwrap();
    seg12.map(0, 65536, None, MapFlags::default()).unwrap().write(0, b"other home").unwrap();
    let r12 = RemoteSegment::connect(&b2, 12, 41, 0, Some(Duration::from_secs(10))).unwrap();
    let stopped = Stopped::new(daemon_pid(&h, 4));
    let maps: Vec<_> = remotes.iter().map(|r| r.map(0, 65536, None, MapFlags::default()).unwrap()).collect();
    let t = Instant::now();
    let m12 = r12.map(0, 65536, None, MapFlags::default()).unwrap();
    let mut buf = [0u8; 10];
    m12.read(0, &mut buf).unwrap();
    let took = t.elapsed();
    drop(stopped);
    assert_eq!(&buf, b"other home");
    drop(maps);
    assert!(took < Duration::from_millis(500), "a healthy home's first read took {took:?}");
}

#[test]
fn a_stopped_home_does_not_hold_up_another_homes_map_of_the_same_descriptor() {
    // One descriptor maps a segment of a home that stopped answering, then one of a
    // healthy home: the second map's flow must not wait behind the first one's dial.
    let h = common::Harness::with_cluster(&[4, 8, 12], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let c = Descriptor::open(&h.sci(12)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_seg4, r4) = exported_and_connected(&a, &b, 4);
    let (_seg12, home12) = common::available(&c, 41, 65536);
    home12.write(0, b"other home").unwrap();
    let r12 = RemoteSegment::connect(&b, 12, 41, 0, Some(Duration::from_secs(10))).unwrap();
    // Held up behind the stopped home, the healthy one's work would wait for it: resumed
    // after 3 s, it then fails the bound.
    let stopped = Watched::stop(daemon_pid(&h, 4), Duration::from_secs(3));
    let t = Instant::now();
    let m4 = r4.map(0, 65536, None, MapFlags::default());
    let map4_took = t.elapsed();
    let t = Instant::now();
    let m12 = r12.map(0, 65536, None, MapFlags::default()).unwrap();
    let mut buf = [0u8; 10];
    m12.read(0, &mut buf).unwrap();
    m12.write(100, b"stored beside a stopped home").unwrap();
    let flushed = m12.flush();
    let took = t.elapsed();
    let late = stopped.resume();
    eprintln!("the stopped home's map: {map4_took:?}; the healthy home's map, read, store: {took:?}");
    assert!(!late, "held up until the stopped home was resumed: {map4_took:?}, then {took:?}");
    assert!(map4_took < Duration::from_millis(1500), "the map of the stopped home took {map4_took:?}");
    assert_eq!(&buf, b"other home");
    assert!(flushed, "the healthy home's store did not reach it");
    let mut home = [0u8; 28];
    home12.read(100, &mut home).unwrap();
    assert_eq!(&home, b"stored beside a stopped home");
    assert!(took < Duration::from_millis(500), "the healthy home's map, read and store took {took:?}");
    // The stopped home answers again: its map reads its bytes.
    let m4 = m4.unwrap();
    let mut buf = [0u8; 9];
    m4.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"home data");
}

#[test]
fn a_stopped_node_of_one_cluster_does_not_hold_up_the_same_node_of_another() {
    // Two clusters in one process (as the tests of one binary, in parallel threads), each
    // with its own node 4: a fault in flight on a map of one's node 4, stopped, must not hold
    // up the other's node 4 maps (a pager per home node of each cluster).
    let (h1, h2) =
        (common::Harness::with_cluster(&[4, 8], true), common::Harness::with_cluster(&[4, 8], true));
    let (a1, b1) = (Descriptor::open(&h1.sci(4)).unwrap(), Descriptor::open(&h1.sci(8)).unwrap());
    let (a2, b2) = (Descriptor::open(&h2.sci(4)).unwrap(), Descriptor::open(&h2.sci(8)).unwrap());
    let (seg1, r1) = exported_and_connected(&a1, &b1, 4);
    seg1.map(0, 65536, None, MapFlags::default()).unwrap().write(32768, b"far data").unwrap();
    let (seg2, r2) = exported_and_connected(&a2, &b2, 4);
    let home2 = seg2.map(0, 65536, None, MapFlags::default()).unwrap();
    let m1 = r1.map(0, 65536, None, MapFlags::default()).unwrap();
    let mut buf = [0u8; 9];
    m1.read(0, &mut buf).unwrap();
    assert_eq!(m1.dsm_direct(), Some(true));
    let stopped = Watched::stop(daemon_pid(&h1, 4), Duration::from_secs(3));
    let stopped_reader = std::thread::spawn(move || {
        let mut buf = [0u8; 8];
        m1.read(32768, &mut buf).map(|()| buf)
    });
    // The stopped home's page fault is being served (its fetch waits for an answer).
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    let m2 = r2.map(0, 65536, None, MapFlags::default()).unwrap();
    m2.read(0, &mut buf).unwrap();
    m2.write(100, b"stored").unwrap();
    let flushed = m2.flush();
    let took = t.elapsed();
    let late = stopped.resume();
    eprintln!("the other cluster's node 4: map, first read, store, flush in {took:?}");
    assert_eq!(&buf, b"home data");
    assert!(flushed, "the store to the other cluster's node 4 did not reach it");
    let mut stored = [0u8; 6];
    home2.read(100, &mut stored).unwrap();
    assert_eq!(&stored, b"stored");
    assert_eq!(&stopped_reader.join().unwrap().unwrap(), b"far data");
    assert!(!late, "held up until the other cluster's node 4 was resumed ({took:?})");
    assert!(took < Duration::from_millis(500), "the other cluster's node 4 map took {took:?}");
}

#[test]
fn a_fault_on_a_stopped_homes_map_does_not_hold_up_another_homes_first_read() {
    // A thread faults on a map of a home that stopped answering (its flow already in use,
    // so the fault waits up to the flow's patience); maps of a healthy home, made by the
    // same descriptor and by another one, are read for the first time, stored into and
    // flushed meanwhile: none of it may wait behind the stopped home's fault.
    let h = common::Harness::with_cluster(&[4, 8, 12], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let c = Descriptor::open(&h.sci(12)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let b2 = Descriptor::open(&h.sci(8)).unwrap();
    let (seg4, r4) = exported_and_connected(&a, &b, 4);
    seg4.map(0, 65536, None, MapFlags::default()).unwrap().write(32768, b"far data").unwrap();
    let (_seg12, home12) = common::available(&c, 41, 65536);
    home12.write(0, b"other home").unwrap();
    let r12 = RemoteSegment::connect(&b, 12, 41, 0, Some(Duration::from_secs(10))).unwrap();
    let r12b = RemoteSegment::connect(&b2, 12, 41, 0, Some(Duration::from_secs(10))).unwrap();
    let m4 = r4.map(0, 65536, None, MapFlags::default()).unwrap();
    let mut buf = [0u8; 9];
    m4.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"home data");
    assert_eq!(m4.dsm_direct(), Some(true));

    let mut stopped = Some(Stopped::new(daemon_pid(&h, 4)));
    let stopped_reader = std::thread::spawn(move || {
        let mut buf = [0u8; 8];
        m4.read(32768, &mut buf).map(|()| buf)
    });
    // The stopped home's page fault is being served (its fetch waits for an answer).
    std::thread::sleep(Duration::from_millis(50));
    let (tx, rx) = std::sync::mpsc::channel();
    let healthy = std::thread::spawn(move || {
        for (k, r) in [&r12, &r12b].into_iter().enumerate() {
            let t = Instant::now();
            let m = r.map(0, 65536, None, MapFlags::default()).unwrap();
            let mut buf = [0u8; 10];
            m.read(0, &mut buf).unwrap();
            m.write(100 + k, b"x").unwrap();
            let flushed = m.flush();
            tx.send((t.elapsed(), buf, flushed)).unwrap();
        }
    });
    let mut took = vec![];
    for _ in 0..2 {
        // Never waits for ever: a read still held after 2 s is let go by waking the home.
        let got = rx.recv_timeout(Duration::from_secs(2)).or_else(|_| {
            drop(stopped.take());
            rx.recv_timeout(Duration::from_secs(30))
        });
        let (t, buf, flushed) = got.expect("the healthy home's read never completed");
        assert_eq!(&buf, b"other home");
        assert!(flushed, "a store to the healthy home did not reach it");
        took.push(t);
    }
    drop(stopped.take());
    healthy.join().unwrap();
    eprintln!("the healthy home's first read, store, flush (same descriptor, another one): {took:?}");
    let mut stored = [0u8; 2];
    home12.read(100, &mut stored).unwrap();
    assert_eq!(&stored, b"xx");
    // The stopped home answers again before its flow's patience ran out: its reader gets
    // the page.
    assert_eq!(&stopped_reader.join().unwrap().unwrap(), b"far data");
    for t in took {
        assert!(t < Duration::from_millis(500), "a healthy home's first read, store and flush took {t:?}");
    }
}

#[test]
fn a_flush_keeps_a_flag_to_one_home_behind_data_to_another_that_stopped() {
    // Data stored into a map of home 4, `SCIFlush`, a flag stored into a map of home 12:
    // the maps have a pager each, and only the wait for home 4's answer keeps the flag
    // behind the data. Home 4 stops right before the data's last store (its page still
    // resident: the store stays local until sent): the flush returns once it answers again,
    // and the flag is never seen before the data.
    let h = common::Harness::with_cluster(&[4, 8, 12], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let c = Descriptor::open(&h.sci(12)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (seg4, r4) = exported_and_connected(&a, &b, 4);
    let home4 = seg4.map(0, 4096, None, MapFlags::default()).unwrap();
    let (_seg12, home12) = common::available(&c, 41, 4096);
    let r12 = RemoteSegment::connect(&b, 12, 41, 0, Some(Duration::from_secs(10))).unwrap();
    let (data, flag) = (
        r4.map(0, 4096, None, MapFlags::default()).unwrap(),
        r12.map(0, 4096, None, MapFlags::default()).unwrap(),
    );
    let pid = daemon_pid(&h, 4);
    let word = |m: &Map, off: usize| {
        let mut b = [0u8; 8];
        m.read(off, &mut b).unwrap();
        u64::from_le_bytes(b)
    };
    for i in 1..=5u64 {
        data.write(8, &i.to_le_bytes()).unwrap();
        remora_sys::send_signal(pid, remora_sys::ProcessSignal::Stop).unwrap();
        let stopped = Stopped(pid);
        // The home answers again in a while whatever happens next: should the page have
        // been dropped meanwhile (this thread kept from its core past a refresh), the store
        // below waits for the home, which must come back before the flow gives up.
        let answer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(stopped);
        });
        data.write(16, &i.to_le_bytes()).unwrap();
        flush();
        flag.write(0, &i.to_le_bytes()).unwrap();
        let t = Instant::now();
        while word(&home12, 0) != i {
            assert!(t.elapsed() < Duration::from_secs(5), "flag {i} never arrived");
            std::thread::yield_now();
        }
        assert_eq!((word(&home4, 8), word(&home4, 16)), (i, i), "data behind flag {i}");
        answer.join().unwrap();
    }
}

#[test]
fn a_second_map_is_not_held_behind_the_first_maps_dial_of_a_stopped_home() {
    // The first map's flow request waits on the stopped home's dial (on the pager
    // session); a second map of the same connection is made at once all the same, and
    // both show in the daemon's books once the home answers.
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let (_seg, remote) = exported_and_connected(&a, &b, 4);
    let watched = Watched::stop(daemon_pid(&h, 4), Duration::from_secs(3));
    let m1 = remote.map(0, 65536, None, MapFlags::default()).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let t = Instant::now();
    let m2 = remote.map(4096, 8192, None, MapFlags::default()).unwrap();
    let took = t.elapsed();
    assert!(!watched.resume(), "the second map was held until the watchdog");
    assert!(took < Duration::from_millis(200), "the second map took {took:?}");
    let mut got = [0u8; 9];
    m1.read(0, &mut got).unwrap();
    assert_eq!(&got, b"home data");
    assert_eq!((m1.dsm_direct(), m2.dsm_direct()), (Some(true), Some(true)));
}
