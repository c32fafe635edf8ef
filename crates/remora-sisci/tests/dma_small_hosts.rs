//! Small DMA transfers across namespace hosts, which go over the process's own pager flow
//! to the segment's node instead of through the node daemons' engine: the bytes arrive
//! intact, a transfer lands after the queue's earlier (large, engine-made) one, reads bring
//! the home's bytes, edges are refused before anything moves, and the queue's state machine
//! is the same. Needs root and iproute2; elsewhere each test says why it skips.

mod common;

use remora_sisci::*;
use std::time::Duration;

const LONG: Option<Duration> = Some(Duration::from_secs(10));
const SIZE: usize = 4 << 20;
const WAIT: DmaFlags = DmaFlags { read: false, wait: true };
const READ: DmaFlags = DmaFlags { read: true, wait: true };

#[test]
fn small_dma_across_hosts_is_intact_and_after_the_queues_earlier_transfers() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let home = LocalSegment::create(&a, Some(21), SIZE, CreateFlags::default()).unwrap();
    home.prepare(0).unwrap();
    home.set_available(0).unwrap();
    let hm = home.map(0, SIZE, None, MapFlags::default()).unwrap();
    let remote = RemoteSegment::connect(&b, c.node(1), 21, 0, LONG).unwrap();
    let src = LocalSegment::create(&b, Some(22), SIZE, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let sm = src.map(0, SIZE, None, MapFlags::default()).unwrap();
    let q = DmaQueue::create(&b, 0, 4).unwrap();
    let mut got = vec![0u8; SIZE];

    for round in 0..20u8 {
        // A large transfer (the engine's), not waited for, then a small one into its
        // middle once the queue says the first is done: the small one's bytes are what
        // the home keeps there.
        sm.write(0, &vec![round; SIZE]).unwrap();
        q.start(&src, &remote, 0, SIZE, 0, DmaFlags::default(), None).unwrap();
        let small: Vec<u8> = (0..8).map(|k| !round ^ k).collect();
        // A queue runs one job at a time (unless the first one ended already; this one
        // then stores the same bytes the first did).
        if let Err(e) = q.start(&src, &remote, 0, 8, 4096, WAIT, None) {
            assert_eq!(e, Error::IllegalOperation, "a second job while the first runs");
        }
        assert_eq!(q.wait(LONG).unwrap(), DmaState::Done);
        sm.write(100, &small).unwrap();
        let off = 4096 * round as usize + round as usize;
        q.start(&src, &remote, 100, 8, off, WAIT, None).unwrap();
        assert_eq!(q.state(), DmaState::Done);
        hm.read(0, &mut got).unwrap();
        assert_eq!(&got[off..off + 8], &small[..], "round {round}: the small transfer's bytes");
        assert!(got[..off].iter().chain(&got[off + 8..]).all(|&x| x == round), "round {round}");
    }

    // Sizes up to the flow's limit and past it (the engine's), both ways, at odd offsets.
    for (i, len) in [1usize, 7, 8, 100, 4096, 8 << 10, (8 << 10) + 1, 64 << 10].into_iter().enumerate() {
        let data: Vec<u8> = (0..len).map(|k| (k * 31 + i) as u8).collect();
        let (loff, roff) = (3 + i * 11, SIZE - len - 5 * i);
        sm.write(loff, &data).unwrap();
        q.start(&src, &remote, loff, len, roff, WAIT, None).unwrap();
        hm.read(roff, &mut got[..len]).unwrap();
        assert_eq!(&got[..len], &data[..], "write of {len} bytes");
        let back: Vec<u8> = data.iter().map(|x| !x).collect();
        hm.write(roff, &back).unwrap();
        q.start(&src, &remote, loff, len, roff, READ, None).unwrap();
        sm.read(loff, &mut got[..len]).unwrap();
        assert_eq!(&got[..len], &back[..], "read of {len} bytes");
    }

    // Not waited for: done all the same once waited for; with a callback (the engine's).
    sm.write(0, b"no wait!").unwrap();
    q.start(&src, &remote, 0, 8, 8, DmaFlags::default(), None).unwrap();
    assert_eq!(q.wait(LONG).unwrap(), DmaState::Done);
    hm.read(8, &mut got[..8]).unwrap();
    assert_eq!(&got[..8], b"no wait!");
    let (tx, rx) = std::sync::mpsc::channel();
    sm.write(0, b"callback").unwrap();
    let cb: DmaCallback = Box::new(move |_, r| {
        tx.send(r).unwrap();
        CallbackAction::Cancel
    });
    q.start(&src, &remote, 0, 8, 16, DmaFlags::default(), Some(cb)).unwrap();
    rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    hm.read(16, &mut got[..8]).unwrap();
    assert_eq!(&got[..8], b"callback");

    // Edges are refused before anything moves.
    assert_eq!(q.start(&src, &remote, 0, 16, SIZE - 8, WAIT, None).unwrap_err(), Error::OutOfRange);
    assert_eq!(q.start(&src, &remote, SIZE - 4, 8, 0, WAIT, None).unwrap_err(), Error::OutOfRange);
}

/// A waited transfer of the program's memory across hosts goes over the process's own flow
/// without holding the queue: while it is stalled (the home's daemon stopped, so the flow's
/// socket fills), another thread reads the state (POSTED) at once, and a second post and a
/// removal are refused as while the engine makes a job; once the home goes on, the first
/// transfer ends DONE with every byte home.
#[test]
fn a_stalled_transfer_over_the_flow_leaves_the_queue_answering() {
    use common::Sci;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;
    const BIG: usize = 32 << 20;
    let h = remora_testkit::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let home = LocalSegment::create(&a, Some(23), BIG, CreateFlags::default()).unwrap();
    home.prepare(0).unwrap();
    home.set_available(0).unwrap();
    let remote = common::retried(|| RemoteSegment::connect(&b, 4, 23, 0, LONG));
    let mem = UserRegion::from_static(Box::leak(vec![0x5au8; BIG].into_boxed_slice()));
    let q = DmaQueue::create(&b, 0, 4).unwrap();
    // The first transfer makes the flow (a dial to a stopped daemon would fall back).
    q.start_mem(mem, &remote, 0, WAIT, None).unwrap();

    let pid = common::daemon_pid(&h, 4).to_string();
    let signal =
        |s: &str| assert!(std::process::Command::new("kill").args([s, &pid]).status().unwrap().success());
    signal("-STOP");
    let continued = Arc::new(AtomicBool::new(false));
    // However the checks below go, the home's daemon goes on within 5 s.
    let (done, checked) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let (continued, pid) = (continued.clone(), pid.clone());
        std::thread::spawn(move || {
            if checked.recv_timeout(Duration::from_secs(5)).is_err() {
                continued.store(true, Ordering::SeqCst);
                let _ = std::process::Command::new("kill").args(["-CONT", &pid]).status();
            }
        })
    };
    let poster = {
        let (q, remote) = (q.clone(), remote.clone());
        std::thread::spawn(move || q.start_mem(mem, &remote, 0, WAIT, None))
    };
    let t0 = Instant::now();
    while q.state() != DmaState::Posted {
        assert!(t0.elapsed() < Duration::from_secs(4), "the transfer was posted");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Still stalled (32 MiB do not fit the sockets' buffers): the queue answers meanwhile.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(q.state(), DmaState::Posted);
    assert_eq!(q.start_mem(mem, &remote, 0, WAIT, None), Err(Error::IllegalOperation));
    assert_eq!(q.remove(), Err(Error::IllegalOperation));
    assert!(!continued.load(Ordering::SeqCst), "the queue answered only once the home went on");
    signal("-CONT");
    let _ = done.send(());
    assert_eq!(poster.join().unwrap(), Ok(()));
    assert_eq!(q.state(), DmaState::Done);
    watchdog.join().unwrap();
    let hm = home.map(0, BIG, None, MapFlags::default()).unwrap();
    let mut got = vec![0u8; BIG];
    hm.read(0, &mut got).unwrap();
    assert!(got.iter().all(|&x| x == 0x5a), "every byte home");
}

/// A large transfer waited for goes over the process's own flow too, both ways, so it
/// needs no daemon of this host: with this host's daemon stopped, 1 MiB moves each way and
/// the queue ends DONE (the engine, in that daemon, would make it only once it went on).
#[test]
fn a_waited_large_transfer_needs_no_daemon_of_this_host() {
    use common::Sci;
    const LEN: usize = 1 << 20;
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let home = LocalSegment::create(&a, Some(24), 2 * LEN, CreateFlags::default()).unwrap();
    home.prepare(0).unwrap();
    home.set_available(0).unwrap();
    let hm = home.map(0, 2 * LEN, None, MapFlags::default()).unwrap();
    let remote = common::retried(|| RemoteSegment::connect(&b, 4, 24, 0, LONG));
    let src = LocalSegment::create(&b, Some(25), LEN, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let sm = src.map(0, LEN, None, MapFlags::default()).unwrap();
    let q = DmaQueue::create(&b, 0, 4).unwrap();
    // The first transfer asks this host's daemon for the flow.
    q.start(&src, &remote, 0, LEN, 0, WAIT, None).unwrap();

    let data: Vec<u8> = (0..LEN).map(|k| (k % 253) as u8).collect();
    sm.write(0, &data).unwrap();
    hm.write(0, &vec![0xc3; LEN]).unwrap();
    let stopped = common::Stopped::new(common::daemon_pid(&h, 8));
    let (tx, rx) = std::sync::mpsc::channel();
    let (q2, src2, remote2) = (q.clone(), src.clone(), remote.clone());
    let mover = std::thread::spawn(move || {
        let w = q2.start(&src2, &remote2, 0, LEN, LEN, WAIT, None);
        let r = w.and_then(|()| q2.start(&src2, &remote2, 0, LEN, 0, READ, None));
        let _ = tx.send(r.map(|()| q2.state()));
    });
    let got = rx.recv_timeout(Duration::from_secs(20));
    drop(stopped);
    mover.join().unwrap();
    assert_eq!(got, Ok(Ok(DmaState::Done)), "both transfers ended while this host's daemon was stopped");
    let mut back = vec![0u8; LEN];
    hm.read(LEN, &mut back).unwrap();
    assert!(back == data, "the write's bytes are home");
    sm.read(0, &mut back).unwrap();
    assert!(back.iter().all(|&x| x == 0xc3), "the read brought the home's bytes");
}
