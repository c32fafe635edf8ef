//! DMA queues, interrupts, data interrupts, segment events and callbacks on one host.

mod common;
use common::Sci as _;

use remora_sisci::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

fn exported(dev: &Descriptor, id: u32, size: usize) -> LocalSegment {
    let s = LocalSegment::create(dev, Some(id), size, CreateFlags::default()).unwrap();
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    s
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn dma_push_pull_vec_and_state_machine() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let target = exported(&a, 1, 1 << 20);
    let src = LocalSegment::create(&b, Some(2), 1 << 20, CreateFlags::default()).unwrap();
    let remote = RemoteSegment::connect(&b, 4, 1, 0, None).unwrap();
    let q = DmaQueue::create(&b, 0, 4).unwrap();
    assert_eq!(q.state(), DmaState::Idle);
    // Not prepared yet.
    assert_eq!(q.start(&src, &remote, 0, 16, 0, DmaFlags::default(), None).unwrap_err(), Error::NotPrepared);
    src.prepare(0).unwrap();
    let data = pattern(1 << 20, 7);
    let sm = src.map(0, 1 << 20, None, MapFlags::default()).unwrap();
    sm.write(0, &data).unwrap();
    // Illegal calls from IDLE.
    assert_eq!(q.wait(None).unwrap_err(), Error::IllegalOperation);
    assert_eq!(q.abort().unwrap_err(), Error::IllegalOperation);
    // Out of range.
    assert_eq!(
        q.start(&src, &remote, 1, 1 << 20, 0, DmaFlags::default(), None).unwrap_err(),
        Error::OutOfRange
    );
    // Push the whole segment.
    q.start(&src, &remote, 0, 1 << 20, 0, DmaFlags::default(), None).unwrap();
    assert_eq!(q.wait(Some(Duration::from_secs(10))).unwrap(), DmaState::Done);
    let tm = target.map(0, 1 << 20, None, MapFlags::default()).unwrap();
    let mut got = vec![0u8; 1 << 20];
    tm.read(0, &mut got).unwrap();
    assert!(got == data, "pushed bytes differ");
    // A finished queue may be posted again: pull a vector back into other places.
    let vec = [
        DmaVec { size: 4096, local_offset: 100_000, remote_offset: 0 },
        DmaVec { size: 10, local_offset: 0, remote_offset: 500_000 },
    ];
    sm.write(0, &[0u8; 10]).unwrap();
    q.start_vec(&src, &remote, &vec, DmaFlags { read: true, wait: true }, None).unwrap();
    assert_eq!(q.state(), DmaState::Done);
    let mut small = vec![0u8; 4096];
    sm.read(100_000, &mut small).unwrap();
    assert_eq!(small, &data[..4096]);
    sm.read(0, &mut small[..10]).unwrap();
    assert_eq!(&small[..10], &data[500_000..500_010]);
    // More entries than the queue holds: accepted and done in turns (as Dolphin's library
    // does; benchmark suites size their queues smaller than their vectors).
    let many: Vec<DmaVec> = (0..(MIN_CAPACITY as usize * 2 + 3))
        .map(|i| DmaVec { size: 8, local_offset: 8 * i, remote_offset: 200_000 + 8 * i })
        .collect();
    sm.write(0, &data[..8 * many.len()]).unwrap();
    q.start_vec(&src, &remote, &many, DmaFlags { read: false, wait: true }, None).unwrap();
    assert_eq!(q.state(), DmaState::Done);
    let mut landed = vec![0u8; 8 * many.len()];
    tm.read(200_000, &mut landed).unwrap();
    assert_eq!(landed, &data[..8 * many.len()], "every turn of a split vector lands");
    // A posted transfer makes its segments busy; the queue cannot be removed meanwhile.
    let big = DmaQueue::create(&b, 0, 1).unwrap();
    big.start(&src, &remote, 0, 1 << 20, 0, DmaFlags::default(), None).unwrap();
    let posted = big.state() == DmaState::Posted;
    if posted {
        assert_eq!(src.remove().unwrap_err(), Error::Busy);
        assert_eq!(big.remove().unwrap_err(), Error::IllegalOperation);
        assert_eq!(
            big.start(&src, &remote, 0, 1, 0, DmaFlags::default(), None).unwrap_err(),
            Error::IllegalOperation
        );
    }
    assert_eq!(big.wait(None).unwrap(), DmaState::Done);
    big.remove().unwrap();
    q.remove().unwrap();
    assert!(q.state() == DmaState::Done);
    assert!(q.start(&src, &remote, 0, 1, 0, DmaFlags::default(), None).is_err(), "removed queue is stale");
}

#[test]
fn dma_legacy_calls_user_memory_abort_and_callbacks() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let target = exported(&a, 3, 64 << 20);
    let src = exported(&b, 4, 64 << 20);
    let remote = RemoteSegment::connect(&b, 4, 3, 0, None).unwrap();
    let q = DmaQueue::create(&b, 0, 8).unwrap();
    // 1.x: enqueue, post, wait, reset.
    assert_eq!(q.post_gathered(None).unwrap_err(), Error::IllegalOperation);
    assert_eq!(q.enqueue(&src, &remote, 0, 0, 64, false).unwrap(), DmaState::Gather);
    assert_eq!(q.enqueue(&src, &remote, 64, 4096, 64, false).unwrap(), DmaState::Gather);
    assert_eq!(q.state(), DmaState::Gather);
    q.post_gathered(None).unwrap();
    assert_eq!(q.wait(None).unwrap(), DmaState::Done);
    assert_eq!(q.enqueue(&src, &remote, 0, 0, 1, false).unwrap_err(), Error::IllegalOperation);
    q.reset().unwrap();
    assert_eq!(q.state(), DmaState::Idle);

    // From (and into) unregistered user memory.
    let msg: &'static mut [u8] = Box::leak(b"straight from user memory".to_vec().into_boxed_slice());
    q.start_mem(UserRegion::from_static(msg), &remote, 777, DmaFlags { read: false, wait: true }, None)
        .unwrap();
    assert_eq!(q.state(), DmaState::Done);
    let tm = target.map(0, 64 << 20, None, MapFlags::default()).unwrap();
    let mut got = [0u8; 25];
    tm.read(777, &mut got).unwrap();
    assert_eq!(&got, b"straight from user memory");
    tm.write(9000, b"pulled back").unwrap();
    let back: &'static mut [u8] = Box::leak(vec![0u8; 11].into_boxed_slice());
    let back_ptr = back.as_ptr();
    q.start_mem(UserRegion::from_static(back), &remote, 9000, DmaFlags { read: true, wait: true }, None)
        .unwrap();
    assert_eq!(q.state(), DmaState::Done);
    let _ = back_ptr;

    // Abort a long job: it ends ABORTED (or DONE if it won the race).
    q.start(&src, &remote, 0, 64 << 20, 0, DmaFlags::default(), None).unwrap();
    q.abort().unwrap();
    assert!(matches!(q.state(), DmaState::Aborted | DmaState::Done));
    q.abort().unwrap(); // a no-op in a final state

    // Completion callback; a callback forbids waiting.
    let (tx, rx) = mpsc::channel();
    q.start(
        &src,
        &remote,
        0,
        4096,
        0,
        DmaFlags::default(),
        Some(Box::new(move |_q, r| {
            tx.send(r).unwrap();
            CallbackAction::Continue
        })),
    )
    .unwrap();
    let posted = q.state() == DmaState::Posted;
    if posted {
        assert_eq!(q.wait(None).unwrap_err(), Error::IllegalOperation);
    }
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), Ok(()));
    assert_eq!(q.state(), DmaState::Done);
}

#[test]
fn interrupts_wake_waiters_and_callbacks() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let intr = Interrupt::create(&a, 0, Some(12345), false, None).unwrap();
    assert_eq!(intr.number(), 12345);
    assert_eq!(Interrupt::create(&a, 0, Some(12345), false, None).unwrap_err(), Error::IntnoUsed);
    let auto = Interrupt::create(&a, 0, None, false, None).unwrap();
    assert_ne!(auto.number(), 12345);
    assert_eq!(intr.wait(Some(Duration::from_millis(20))).unwrap_err(), Error::Timeout);
    assert_eq!(
        RemoteInterrupt::connect(&b, 4, 0, 999, Some(Duration::from_millis(50))).unwrap_err(),
        Error::NoSuchIntno
    );
    let r = RemoteInterrupt::connect(&b, 4, 0, 12345, Some(Duration::from_secs(1))).unwrap();
    // A blocked waiter wakes.
    let w = intr.clone();
    let t = std::thread::spawn(move || w.wait(Some(Duration::from_secs(10))));
    std::thread::sleep(Duration::from_millis(50));
    r.trigger().unwrap();
    t.join().unwrap().unwrap();
    // A trigger before the wait is kept.
    r.trigger().unwrap();
    intr.wait(Some(Duration::from_secs(1))).unwrap();
    // Removing wakes a blocked waiter with CANCELLED; triggers then fail without hanging.
    let w = intr.clone();
    let t = std::thread::spawn(move || w.wait(None));
    std::thread::sleep(Duration::from_millis(50));
    intr.remove().unwrap();
    assert_eq!(t.join().unwrap().unwrap_err(), Error::Cancelled);
    assert_eq!(r.trigger().unwrap_err(), Error::NoSuchIntno);
    r.disconnect().unwrap();
    assert!(r.disconnect().is_err());

    // Callbacks run on the library thread; CANCEL stops them; waiting is then illegal.
    let hits = Arc::new(AtomicU32::new(0));
    let h2 = hits.clone();
    let cbi = Interrupt::create(
        &a,
        0,
        Some(77),
        true,
        Some(Box::new(move |_i| {
            if h2.fetch_add(1, Ordering::SeqCst) + 1 >= 3 {
                CallbackAction::Cancel
            } else {
                CallbackAction::Continue
            }
        })),
    )
    .unwrap();
    assert_eq!(cbi.wait(Some(Duration::from_millis(1))).unwrap_err(), Error::IllegalOperation);
    let r = RemoteInterrupt::connect(&b, 4, 0, 77, None).unwrap();
    for _ in 0..5 {
        r.trigger().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    while hits.load(Ordering::SeqCst) < 3 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(hits.load(Ordering::SeqCst), 3, "the callback stops after CANCEL");
}

#[test]
fn waits_without_end_return_when_the_daemon_dies() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let intr = Interrupt::create(&a, 0, None, false, None).unwrap();
    let data = DataInterrupt::create(&a, 0, None, None).unwrap();
    let seg = exported(&b, 5, 4096);
    let remote = RemoteSegment::connect(&a, 8, 5, 0, Some(Duration::from_secs(5))).unwrap();
    let local = exported(&a, 6, 4096);
    let seq = remote.map(0, 4096, None, MapFlags::default()).unwrap().create_sequence().unwrap();
    let (w, d) = (intr.clone(), data.clone());
    let t1 = std::thread::spawn(move || w.wait(None));
    let t2 = std::thread::spawn(move || d.wait(&mut [0u8; 64], None));
    let r2 = remote.clone();
    let t3 = std::thread::spawn(move || r2.wait_event(None));
    let l2 = local.clone();
    let t4 = std::thread::spawn(move || l2.wait_event(None));
    std::thread::sleep(Duration::from_millis(100));
    let s = remora_client::Session::open_control(&h.config(4)).unwrap();
    let pid = match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.pid,
        other => panic!("{other:?}"),
    };
    assert!(std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap().success());
    let t = Instant::now();
    assert!(matches!(t1.join().unwrap(), Err(Error::System(_))));
    assert!(matches!(t2.join().unwrap(), Err(Error::System(_))));
    // The remote segment is lost as its node would be; local segment waits end.
    assert_eq!(t3.join().unwrap().unwrap().reason, SegmentReason::Lost);
    assert_eq!(t4.join().unwrap().unwrap_err(), Error::Cancelled);
    assert!(remote.is_lost());
    assert_eq!(seq.start().unwrap_err(), Error::NodeNotResponding, "gone for good: an error, not a status");
    assert!(t.elapsed() < Duration::from_secs(5), "the waits took {:?}", t.elapsed());
    drop(seg);
}

#[test]
fn shared_interrupt_numbers_wake_every_creator() {
    let h = common::Harness::new();
    // Two processes' worth of sessions on node 4 create the same number, shared.
    let a1 = Descriptor::open(&h.sci(4)).unwrap();
    let a2 = Descriptor::open(&h.sci(4)).unwrap();
    let i1 = Interrupt::create_with(&a1, 0, Some(777), false, true, None).unwrap();
    let i2 = Interrupt::create_with(&a2, 0, Some(777), false, true, None).unwrap();
    assert_eq!(i2.number(), 777);
    // A number that is not shared is not joined, and a shared one is not taken plainly.
    assert_eq!(Interrupt::create(&a1, 0, Some(777), false, None).unwrap_err(), Error::IntnoUsed);
    let plain = Interrupt::create(&a1, 0, Some(778), false, None).unwrap();
    assert_eq!(Interrupt::create_with(&a2, 0, Some(778), false, true, None).unwrap_err(), Error::IntnoUsed);
    // One trigger from another node of the host reaches both creators.
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let r = RemoteInterrupt::connect(&b, 4, 0, 777, Some(Duration::from_secs(5))).unwrap();
    let (w1, w2) = (i1.clone(), i2.clone());
    let t1 = std::thread::spawn(move || w1.wait(Some(Duration::from_secs(10))));
    let t2 = std::thread::spawn(move || w2.wait(Some(Duration::from_secs(10))));
    std::thread::sleep(Duration::from_millis(50));
    r.trigger().unwrap();
    t1.join().unwrap().unwrap();
    t2.join().unwrap().unwrap();
    // A member that leaves stops hearing; the other still does; the last one frees the number.
    i1.remove().unwrap();
    r.trigger().unwrap();
    i2.wait(Some(Duration::from_secs(5))).unwrap();
    i2.remove().unwrap();
    assert_eq!(r.trigger().unwrap_err(), Error::NoSuchIntno);
    r.disconnect().unwrap();
    let again = Interrupt::create(&a1, 0, Some(777), false, None).unwrap();
    again.remove().unwrap();
    plain.remove().unwrap();
}

#[test]
fn data_interrupts_carry_payloads_in_order() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let d = DataInterrupt::create(&a, 0, Some(5), None).unwrap();
    let r = RemoteDataInterrupt::connect(&b, 4, 0, 5, None).unwrap();
    r.trigger(b"first").unwrap();
    r.trigger(&[9u8; MAX_DATA_INTERRUPT]).unwrap();
    assert_eq!(r.trigger(&[0u8; MAX_DATA_INTERRUPT + 1]).unwrap_err(), Error::OutOfRange);
    let mut buf = [0u8; 16];
    assert_eq!(d.wait(&mut buf, Some(Duration::from_secs(1))).unwrap(), 5);
    assert_eq!(&buf[..5], b"first");
    // A buffer too small leaves the payload queued.
    assert_eq!(d.wait(&mut buf, Some(Duration::from_secs(1))).unwrap_err(), Error::OutOfRange);
    let mut big = vec![0u8; MAX_DATA_INTERRUPT];
    assert_eq!(d.wait(&mut big, Some(Duration::from_secs(1))).unwrap(), MAX_DATA_INTERRUPT);
    assert!(big.iter().all(|&x| x == 9));
    assert_eq!(d.wait(&mut big, Some(Duration::from_millis(10))).unwrap_err(), Error::Timeout);
    // Callbacks get the payload.
    let (tx, rx) = mpsc::channel();
    let dc = DataInterrupt::create(
        &a,
        0,
        Some(6),
        Some(Box::new(move |_i, data| {
            tx.send(data.to_vec()).unwrap();
            CallbackAction::Continue
        })),
    )
    .unwrap();
    let rc = RemoteDataInterrupt::connect(&b, 4, 0, 6, None).unwrap();
    for i in 0..10u8 {
        rc.trigger(&[i; 3]).unwrap();
    }
    for i in 0..10u8 {
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), vec![i; 3]);
    }
    dc.remove().unwrap();
    assert_eq!(rc.trigger(b"x").unwrap_err(), Error::NoSuchIntno);
}

#[test]
fn segment_events_callbacks_and_async_connect() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let s = exported(&a, 9, 4096);
    // Waiting: connect and disconnect events with the importing node.
    let r = RemoteSegment::connect(&b, 4, 9, 0, None).unwrap();
    let e = s.wait_event(Some(Duration::from_secs(5))).unwrap();
    assert_eq!((e.reason, e.node), (SegmentReason::Connect, 8));
    r.disconnect().unwrap();
    let e = s.wait_event(Some(Duration::from_secs(5))).unwrap();
    assert_eq!((e.reason, e.node), (SegmentReason::Disconnect, 8));
    assert_eq!(s.wait_event(Some(Duration::from_millis(10))).unwrap_err(), Error::Timeout);
    // Removing the segment cancels a waiter.
    let s2 = s.clone();
    let (tid_tx, tid_rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        tid_tx.send(std::fs::read_link("/proc/thread-self").unwrap()).unwrap();
        s2.wait_event(None)
    });
    // Remove only once the waiter sleeps inside the wait (a fixed pause raced a loaded
    // machine's scheduler: the removal came first and the wait found no segment).
    let task = std::path::Path::new("/proc").join(tid_rx.recv().unwrap()).join("stat");
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let stat = std::fs::read_to_string(&task).unwrap_or_default();
        // The state follows the command's closing parenthesis.
        if stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('S')) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(5));
    s.remove().unwrap();
    assert_eq!(t.join().unwrap().unwrap_err(), Error::Cancelled);

    // Callbacks may call the API (here: read the segment's id).
    let (tx, rx) = mpsc::channel();
    let cb = LocalSegment::create_with_callback(
        &a,
        Some(10),
        4096,
        CreateFlags::default(),
        Some(Box::new(move |seg, ev| {
            tx.send((seg.id(), ev.reason, ev.node)).unwrap();
            CallbackAction::Continue
        })),
    )
    .unwrap();
    assert_eq!(cb.wait_event(Some(Duration::from_millis(1))).unwrap_err(), Error::IllegalOperation);
    cb.prepare(0).unwrap();
    // Asynchronous connect returns at once and completes when the segment appears.
    let (rtx, rrx) = mpsc::channel();
    let pending = RemoteSegment::connect_with(
        &b,
        4,
        10,
        0,
        None,
        ConnectFlags { asynchronous: true },
        Some(Box::new(move |_r, ev| {
            rtx.send(ev).unwrap();
            CallbackAction::Continue
        })),
    )
    .unwrap();
    assert!(!pending.is_connected());
    assert_eq!(pending.map(0, 4096, None, MapFlags::default()).unwrap_err(), Error::NotConnected);
    cb.set_available(0).unwrap();
    let ev = rrx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(ev.reason, SegmentReason::Connect);
    assert!(pending.is_connected());
    assert_eq!(pending.size(), 4096);
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), (10, SegmentReason::Connect, 8));
    // NOTIFY tells the importer (DISCONNECT); force-disconnect loses it.
    cb.set_unavailable(0, false, true).unwrap();
    assert_eq!(rrx.recv_timeout(Duration::from_secs(5)).unwrap().reason, SegmentReason::Disconnect);
    // An asynchronous connect that fails ends in DISCONNECT with the reason.
    let failing = RemoteSegment::connect_with(
        &b,
        4,
        4242,
        0,
        Some(Duration::from_millis(50)),
        ConnectFlags { asynchronous: true },
        None,
    )
    .unwrap();
    let ev = failing.wait_event(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(ev.reason, SegmentReason::Disconnect);
    assert_eq!(ev.status, Some(Error::NoSuchSegment));
    failing.disconnect().unwrap();
    pending.disconnect().unwrap();
}
