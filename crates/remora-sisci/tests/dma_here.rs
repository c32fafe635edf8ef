//! DMA between segments of one host, which the posting thread copies itself up to 1 MiB
//! (256 KiB unwaited; any size waited for, without the queue's lock) and the engine
//! beyond: bytes intact both ways, for single transfers, vectors of scattered pieces and
//! vectors longer than the queue; the queue's states, errors and callbacks as with the
//! engine.

mod common;
use common::{pattern, Sci as _};

use remora_sisci::*;
use std::sync::mpsc;
use std::time::Duration;

const SIZE: usize = 4 << 20;

struct Pair {
    _h: common::Harness,
    target: LocalSegment,
    src: LocalSegment,
    remote: RemoteSegment,
    q: DmaQueue,
    /// The target as node 4 maps it, and the source as node 8 does.
    tm: Map,
    sm: Map,
}

/// Node 8's process pushes into (and pulls from) node 4's segment on the same host.
fn pair() -> Pair {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let target = LocalSegment::create(&a, Some(21), SIZE, CreateFlags::default()).unwrap();
    target.prepare(0).unwrap();
    target.set_available(0).unwrap();
    let src = LocalSegment::create(&b, Some(22), SIZE, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let remote = RemoteSegment::connect(&b, 4, 21, 0, Some(Duration::from_secs(10))).unwrap();
    assert!(remote.is_on_this_host());
    let q = DmaQueue::create(&b, 0, 16).unwrap();
    let tm = target.map(0, SIZE, None, MapFlags::default()).unwrap();
    let sm = src.map(0, SIZE, None, MapFlags::default()).unwrap();
    Pair { _h: h, target, src, remote, q, tm, sm }
}

/// The DMA jobs the engine of `node` made so far.
fn engine_jobs(p: &Pair, node: u32) -> u64 {
    let s = remora_client::Session::open_control(&p._h.config(node)).unwrap();
    match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.dma_jobs,
        other => panic!("{other:?}"),
    }
}

fn read(m: &Map, off: usize, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    m.read(off, &mut v).unwrap();
    v
}

#[test]
fn transfers_of_every_size_land_intact_both_ways_and_end_done() {
    let p = pair();
    let data = pattern(SIZE, 11);
    p.sm.write(0, &data).unwrap();
    let wait = DmaFlags { read: false, wait: true };
    // Sizes on both sides of each limit, waited for and not, at odd offsets.
    for (i, size) in
        [1, 8, 4096, 64 << 10, (256 << 10) + 1, 1 << 20, (1 << 20) + 7, 3 << 20].into_iter().enumerate()
    {
        let (loff, roff) = (i * 13, 100 + i * 17);
        for waited in [true, false] {
            p.tm.write(roff, &vec![0u8; size]).unwrap();
            p.q.start(&p.src, &p.remote, loff, size, roff, DmaFlags { read: false, wait: waited }, None)
                .unwrap();
            if !waited {
                assert_eq!(p.q.wait(Some(Duration::from_secs(20))).unwrap(), DmaState::Done, "{size} B");
            }
            assert_eq!(p.q.state(), DmaState::Done, "{size} B");
            assert!(read(&p.tm, roff, size) == data[loff..loff + size], "{size} B pushed (waited: {waited})");
        }
    }
    // Pull back into other places.
    let back = pattern(1 << 20, 12);
    p.tm.write(0, &back).unwrap();
    for (size, waited) in [(64 << 10, true), (64 << 10, false), (200 << 10, false), (1 << 20, true)] {
        let loff = SIZE - size;
        p.q.start(&p.src, &p.remote, loff, size, 0, DmaFlags { read: true, wait: waited }, None).unwrap();
        assert_eq!(p.q.wait(Some(Duration::from_secs(20))).unwrap(), DmaState::Done);
        assert!(read(&p.sm, loff, size) == back[..size], "{size} B pulled");
    }
    // A finished queue is posted again, reset, and its errors stay the documented ones.
    p.q.abort().unwrap();
    assert_eq!(p.q.state(), DmaState::Done);
    p.q.reset().unwrap();
    assert_eq!(p.q.state(), DmaState::Idle);
    assert_eq!(p.q.start(&p.src, &p.remote, SIZE - 8, 16, 0, wait, None).unwrap_err(), Error::OutOfRange);
    assert_eq!(p.q.start(&p.src, &p.remote, 0, 16, SIZE - 8, wait, None).unwrap_err(), Error::OutOfRange);
    assert_eq!(p.q.start(&p.src, &p.remote, 0, 0, 0, wait, None).unwrap_err(), Error::OutOfRange);
    let cb = Some(Box::new(|_: &DmaQueue, _| CallbackAction::Continue) as DmaCallback);
    assert_eq!(p.q.start(&p.src, &p.remote, 0, 16, 0, wait, cb).unwrap_err(), Error::IllegalOperation);
    p.q.start(&p.src, &p.remote, 0, 64 << 10, 0, wait, None).unwrap();
    assert_eq!(p.q.state(), DmaState::Done);
}

/// A job larger than 1 MiB that the caller waits for is made by the posting thread too (the
/// engine's hand-offs, each a wake-up of a thread whose core went idle, cost it a third of
/// `memcpy`'s speed), a vector of pieces as well; not waited for, it still goes to the
/// engine and the post returns at once. Meanwhile the queue is POSTED to other threads,
/// whose state query, wait and abort end as documented.
#[test]
fn large_waited_jobs_are_made_here_and_unwaited_ones_by_the_engine() {
    let p = pair();
    let data = pattern(SIZE, 41);
    p.sm.write(0, &data).unwrap();
    let before = engine_jobs(&p, 8);
    let wait = DmaFlags { read: false, wait: true };
    for size in [(1 << 20) + 1, 3 << 20, SIZE] {
        p.tm.write(0, &vec![0u8; SIZE]).unwrap();
        p.q.start(&p.src, &p.remote, SIZE - size, size, 0, wait, None).unwrap();
        assert_eq!(p.q.state(), DmaState::Done);
        assert!(read(&p.tm, 0, size) == data[SIZE - size..], "{size} B pushed");
    }
    let adjacent: Vec<DmaVec> =
        (0..16).map(|i| DmaVec { size: 256 << 10, local_offset: i << 18, remote_offset: i << 18 }).collect();
    p.tm.write(0, &vec![0u8; SIZE]).unwrap();
    p.q.start_vec(&p.src, &p.remote, &adjacent, wait, None).unwrap();
    assert!(read(&p.tm, 0, SIZE) == data, "16 × 256 KiB pushed");
    let back = pattern(SIZE, 42);
    p.tm.write(0, &back).unwrap();
    p.q.start(&p.src, &p.remote, 0, SIZE, 0, DmaFlags { read: true, wait: true }, None).unwrap();
    assert!(read(&p.sm, 0, SIZE) == back, "4 MiB pulled");
    assert_eq!(engine_jobs(&p, 8), before, "a waited job went to the engine");
    // Not waited for: the engine's, DONE once it has made it.
    p.sm.write(0, &data).unwrap();
    p.q.start(&p.src, &p.remote, 0, SIZE, 0, DmaFlags::default(), None).unwrap();
    assert_eq!(p.q.wait(Some(Duration::from_secs(20))).unwrap(), DmaState::Done);
    assert!(read(&p.tm, 0, SIZE) == data, "4 MiB pushed, not waited for");
    assert_eq!(engine_jobs(&p, 8), before + 1, "an unwaited job was not the engine's");
    // Another thread during waited jobs made here: it sees POSTED or the end, its wait ends
    // DONE or ABORTED, and so does its abort; the posting call answers the same.
    let q2 = p.q.clone();
    let (tx, rx) = mpsc::channel();
    let watcher = std::thread::spawn(move || {
        let mut seen = Vec::new();
        while rx.try_recv().is_err() {
            seen.push(q2.state());
            if let Ok(s) = q2.wait(Some(Duration::from_secs(20))) {
                seen.push(s);
            }
            let _ = q2.abort();
            seen.push(q2.state());
        }
        seen
    });
    for _ in 0..20 {
        match p.q.start(&p.src, &p.remote, 0, SIZE, 0, wait, None) {
            Ok(()) => assert_eq!(p.q.state(), DmaState::Done),
            Err(e) => {
                assert_eq!(e, Error::Cancelled);
                assert_eq!(p.q.state(), DmaState::Aborted);
            }
        }
    }
    tx.send(()).unwrap();
    let seen = watcher.join().unwrap();
    let ok = [DmaState::Posted, DmaState::Done, DmaState::Aborted];
    assert!(seen.iter().all(|s| ok.contains(s)), "{seen:?}");
    p.q.start(&p.src, &p.remote, 0, SIZE, 0, wait, None).unwrap();
    assert!(read(&p.tm, 0, SIZE) == data, "4 MiB pushed after the aborts");
    assert_eq!(engine_jobs(&p, 8), before + 1, "a waited job went to the engine");
}

/// The program's own memory (`SCIStartDmaTransferMem`) to and from a segment of this host:
/// copied by the posting thread up to the limits, by the engine beyond; bytes intact both
/// ways, the queue DONE, waited for or not.
#[test]
fn the_programs_memory_moves_intact_both_ways_on_either_side_of_the_limits() {
    let p = pair();
    for (i, size) in
        [1, 8, 4096, 64 << 10, (256 << 10) + 1, 1 << 20, (1 << 20) + 7, 3 << 20].into_iter().enumerate()
    {
        let roff = 100 + i * 17;
        for waited in [true, false] {
            let out = pattern(size, 20 + i as u64);
            let mem: &'static mut [u8] = Box::leak(out.clone().into_boxed_slice());
            p.tm.write(roff, &vec![0u8; size]).unwrap();
            p.q.start_mem(
                UserRegion::from_static(mem),
                &p.remote,
                roff,
                DmaFlags { read: false, wait: waited },
                None,
            )
            .unwrap();
            assert_eq!(p.q.wait(Some(Duration::from_secs(20))).unwrap(), DmaState::Done, "{size} B");
            assert!(
                read(&p.tm, roff, size) == out,
                "{size} B pushed from the program's memory (waited: {waited})"
            );
            let back = pattern(size, 40 + i as u64);
            p.tm.write(roff, &back).unwrap();
            let into: &'static mut [u8] = Box::leak(vec![0u8; size].into_boxed_slice());
            let region = UserRegion::from_static(into);
            p.q.start_mem(region, &p.remote, roff, DmaFlags { read: true, wait: waited }, None).unwrap();
            assert_eq!(p.q.wait(Some(Duration::from_secs(20))).unwrap(), DmaState::Done, "{size} B");
            let mut got = vec![0u8; size];
            region.read(0, &mut got).unwrap();
            assert!(got == back, "{size} B pulled into the program's memory (waited: {waited})");
        }
    }
}

#[test]
fn vectors_scattered_adjacent_and_longer_than_the_queue_land_intact() {
    let p = pair();
    let data = pattern(SIZE, 21);
    p.sm.write(0, &data).unwrap();
    let wait = DmaFlags { read: false, wait: true };
    // Scattered pieces, in no order, some adjacent.
    let vec = [
        DmaVec { size: 4096, local_offset: 70_000, remote_offset: 0 },
        DmaVec { size: 10, local_offset: 3, remote_offset: 500_000 },
        DmaVec { size: 60_000, local_offset: 10, remote_offset: 500_010 },
        DmaVec { size: 1, local_offset: 900_000, remote_offset: 4096 },
    ];
    p.q.start_vec(&p.src, &p.remote, &vec, wait, None).unwrap();
    assert_eq!(p.q.state(), DmaState::Done);
    for v in &vec {
        let want = &data[v.local_offset..v.local_offset + v.size];
        assert!(read(&p.tm, v.remote_offset, v.size) == want, "piece {v:?}");
    }
    // Sixteen adjacent pieces of 64 KiB, pulled.
    let back = pattern(1 << 20, 22);
    p.tm.write(1 << 20, &back).unwrap();
    let adj: Vec<DmaVec> = (0..16)
        .map(|i| DmaVec {
            size: 64 << 10,
            local_offset: (2 << 20) + i * (64 << 10),
            remote_offset: (1 << 20) + i * (64 << 10),
        })
        .collect();
    p.q.start_vec(&p.src, &p.remote, &adj, DmaFlags { read: true, wait: true }, None).unwrap();
    assert!(read(&p.sm, 2 << 20, 1 << 20) == back, "adjacent pieces pulled");
    // More pieces than the queue holds: a small job made at once, a large one in the
    // engine's turns.
    for piece in [8usize, 4096] {
        let many: Vec<DmaVec> = (0..(MIN_CAPACITY as usize * 2 + 3))
            .map(|i| DmaVec { size: piece, local_offset: piece * i, remote_offset: SIZE - piece * (i + 1) })
            .collect();
        p.q.start_vec(&p.src, &p.remote, &many, wait, None).unwrap();
        assert_eq!(p.q.state(), DmaState::Done);
        for (i, v) in many.iter().enumerate() {
            let want = read(&p.sm, v.local_offset, piece);
            assert!(read(&p.tm, v.remote_offset, piece) == want, "piece {i} of {piece} B");
        }
    }
}

#[test]
fn callbacks_and_lost_connections_behave_as_with_the_engine() {
    let p = pair();
    // A job with a callback goes to the engine, small or large (made at once, DONE at
    // return, its callback's slot could be taken by the next post before the event thread
    // ran it): each callback fires once, with the outcome, after the bytes landed.
    let (tx, rx) = mpsc::channel();
    for (k, size) in [64usize << 10, 512 << 10, 4096].into_iter().enumerate() {
        let data = pattern(size, 31 + k as u64);
        p.sm.write(0, &data).unwrap();
        let tx = tx.clone();
        let cb: DmaCallback = Box::new(move |q, r| {
            tx.send((r, q.state())).unwrap();
            CallbackAction::Continue
        });
        p.q.start(&p.src, &p.remote, 0, size, 0, DmaFlags::default(), Some(cb)).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), (Ok(()), DmaState::Done), "{size} B");
        assert_eq!(p.q.state(), DmaState::Done);
        assert!(read(&p.tm, 0, size) == data, "{size} B with a callback");
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "a callback fired twice");
    }
    // The exporter forces the connection away: once this process knows, a transfer is
    // refused and moves nothing.
    p.tm.write(0, &[0u8; 4096]).unwrap();
    p.target.set_unavailable(0, true, false).unwrap();
    let t = std::time::Instant::now();
    while !p.remote.is_lost() {
        assert!(t.elapsed() < Duration::from_secs(10), "the forced disconnect never arrived");
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = p.q.start(&p.src, &p.remote, 0, 4096, 0, DmaFlags { read: false, wait: true }, None);
    assert_eq!(r.unwrap_err(), Error::NotConnected);
    assert!(read(&p.tm, 0, 4096).iter().all(|&b| b == 0), "a refused transfer moved bytes");
}
