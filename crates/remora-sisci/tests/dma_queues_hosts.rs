//! Several DMA queues at once into (and out of) one segment of another host: the node's
//! engine spreads the queues over the link's bulk lanes, and every byte still lands where
//! it was sent, and within a queue a later piece lands after an earlier one that it
//! overlaps. Needs root and iproute2; elsewhere each test says why it skips.

mod common;

use remora_sisci::*;
use std::time::Duration;

const LONG: Option<Duration> = Some(Duration::from_secs(30));
const QUEUES: usize = 4;
/// Each queue's quarter: several of the engine's 4 MiB chunks, so some are in flight at once.
const PART: usize = 10 << 20;
const SIZE: usize = QUEUES * PART;
const WAIT: DmaFlags = DmaFlags { read: false, wait: true };
const READ: DmaFlags = DmaFlags { read: true, wait: true };

/// The byte at `at` of queue `k`'s data in round `r` (differs by position, queue and round).
fn byte(k: usize, r: usize, at: usize) -> u8 {
    (at.wrapping_mul(7) ^ (at >> 12) ^ (k * 61) ^ (r * 17)) as u8
}

#[test]
fn four_queues_at_once_land_intact_and_in_order_within_each_queue() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    let home = LocalSegment::create(&a, Some(31), SIZE, CreateFlags::default()).unwrap();
    home.prepare(0).unwrap();
    home.set_available(0).unwrap();
    let hm = home.map(0, SIZE, None, MapFlags::default()).unwrap();
    let remote = RemoteSegment::connect(&b, c.node(1), 31, 0, LONG).unwrap();
    let src = LocalSegment::create(&b, Some(32), SIZE, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let sm = src.map(0, SIZE, None, MapFlags::default()).unwrap();
    let dst = LocalSegment::create(&b, Some(33), SIZE, CreateFlags::default()).unwrap();
    dst.prepare(0).unwrap();
    let dm = dst.map(0, SIZE, None, MapFlags::default()).unwrap();
    let qs: Vec<DmaQueue> = (0..QUEUES).map(|_| DmaQueue::create(&b, 0, 4).unwrap()).collect();
    let mut got = vec![0u8; SIZE];
    // The second piece of each queue's vector: 64 KiB from the start of its quarter into
    // the end of it, over bytes of the first piece's last chunk, which the engine still has
    // in flight when it sends the second.
    let over_len = 64 << 10;
    let over = PART - over_len - 4093;

    for r in 0..3 {
        let data: Vec<u8> = (0..SIZE).map(|at| byte(at / PART, r, at)).collect();
        sm.write(0, &data).unwrap();

        // Writes: each queue its quarter, all at once.
        std::thread::scope(|s| {
            for (k, q) in qs.iter().enumerate() {
                let (src, remote) = (&src, &remote);
                s.spawn(move || q.start(src, remote, k * PART, PART, k * PART, WAIT, None).unwrap());
            }
        });
        hm.read(0, &mut got).unwrap();
        for k in 0..QUEUES {
            let part = k * PART..(k + 1) * PART;
            assert!(got[part.clone()] == data[part], "round {r}: queue {k}'s quarter at the home");
        }

        // A vector per queue whose second piece overlaps its first: the second's bytes stay.
        hm.write(0, &vec![0u8; SIZE]).unwrap();
        std::thread::scope(|s| {
            for (k, q) in qs.iter().enumerate() {
                let (src, remote) = (&src, &remote);
                let v = [
                    DmaVec { size: PART, local_offset: k * PART, remote_offset: k * PART },
                    DmaVec { size: over_len, local_offset: k * PART, remote_offset: k * PART + over },
                ];
                s.spawn(move || q.start_vec(src, remote, &v, WAIT, None).unwrap());
            }
        });
        hm.read(0, &mut got).unwrap();
        for k in 0..QUEUES {
            let base = k * PART;
            let second = base + over..base + over + over_len;
            assert!(
                got[second.clone()] == data[base..base + over_len],
                "round {r}: queue {k}'s later piece landed before its earlier one"
            );
            assert!(got[base..second.start] == data[base..second.start], "round {r}: queue {k}, before");
            assert!(
                got[second.end..base + PART] == data[second.end..base + PART],
                "round {r}: queue {k}, after"
            );
        }

        // Reads: each queue its quarter of the home into its quarter here, all at once.
        let back: Vec<u8> = (0..SIZE).map(|at| !byte(at / PART, r, at)).collect();
        hm.write(0, &back).unwrap();
        dm.write(0, &vec![0u8; SIZE]).unwrap();
        std::thread::scope(|s| {
            for (k, q) in qs.iter().enumerate() {
                let (dst, remote) = (&dst, &remote);
                s.spawn(move || q.start(dst, remote, k * PART, PART, k * PART, READ, None).unwrap());
            }
        });
        dm.read(0, &mut got).unwrap();
        for k in 0..QUEUES {
            let part = k * PART..(k + 1) * PART;
            assert!(got[part.clone()] == back[part], "round {r}: queue {k}'s quarter read back");
        }
    }
    for q in qs {
        q.remove().unwrap();
    }
}

#[test]
fn a_vector_of_adjacent_pieces_across_hosts_is_intact_both_ways() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    const LEN: usize = 2 << 20;
    let home = LocalSegment::create(&a, Some(34), LEN, CreateFlags::default()).unwrap();
    home.prepare(0).unwrap();
    home.set_available(0).unwrap();
    let hm = home.map(0, LEN, None, MapFlags::default()).unwrap();
    let remote = RemoteSegment::connect(&b, c.node(1), 34, 0, LONG).unwrap();
    let src = LocalSegment::create(&b, Some(35), LEN, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let sm = src.map(0, LEN, None, MapFlags::default()).unwrap();
    let q = DmaQueue::create(&b, 0, 16).unwrap();
    let mut got = vec![0u8; LEN];
    // Pieces that follow each other on both sides (one transfer over the process's flow up
    // to 64 KiB, the engine's past it), and pieces with a gap (the engine's).
    for (i, (pieces, part, gap)) in
        [(16usize, 4096usize, 0usize), (16, 4096 + 1, 0), (4, 4096, 512), (16, 64 << 10, 0)]
            .into_iter()
            .enumerate()
    {
        let (loff, roff) = (7 + i * 13, 3 + i * 4099);
        let vec: Vec<DmaVec> = (0..pieces)
            .map(|k| DmaVec {
                size: part,
                local_offset: loff + k * (part + gap),
                remote_offset: roff + k * (part + gap),
            })
            .collect();
        let span = pieces * (part + gap);
        let data: Vec<u8> = (0..span).map(|at| (at * 13 + i * 7 + (at >> 8)) as u8).collect();
        sm.write(loff, &data).unwrap();
        hm.write(roff, &vec![0u8; span]).unwrap();
        q.start_vec(&src, &remote, &vec, WAIT, None).unwrap();
        assert_eq!(q.state(), DmaState::Done);
        hm.read(roff, &mut got[..span]).unwrap();
        for v in &vec {
            let (at, l) = (v.remote_offset - roff, v.size);
            assert_eq!(&got[at..at + l], &data[at..at + l], "write {i}: piece at {at}");
        }
        let back: Vec<u8> = data.iter().map(|x| !x).collect();
        hm.write(roff, &back).unwrap();
        sm.write(loff, &vec![0u8; span]).unwrap();
        q.start_vec(&src, &remote, &vec, READ, None).unwrap();
        sm.read(loff, &mut got[..span]).unwrap();
        for v in &vec {
            let (at, l) = (v.local_offset - loff, v.size);
            assert_eq!(&got[at..at + l], &back[at..at + l], "read {i}: piece at {at}");
        }
    }
    // The pieces' own ranges are checked before anything moves.
    let past = [
        DmaVec { size: 4096, local_offset: 0, remote_offset: LEN - 4096 },
        DmaVec { size: 4096, local_offset: 4096, remote_offset: LEN },
    ];
    assert_eq!(q.start_vec(&src, &remote, &past, WAIT, None).unwrap_err(), Error::OutOfRange);
    q.remove().unwrap();
}

#[test]
fn an_aborted_queue_leaves_another_queue_to_the_same_host_intact_and_is_usable_again() {
    let Some(c) = common::net_cluster(2) else { return };
    let a = Descriptor::open(&common::net_sci(&c, 1)).unwrap();
    let b = Descriptor::open(&common::net_sci(&c, 2)).unwrap();
    // Queue 0's part is long (many of the engine's chunks), so the abort lands mid-way.
    const LONG_PART: usize = 64 << 20;
    const LEN: usize = LONG_PART + PART;
    let home = LocalSegment::create(&a, Some(36), LEN, CreateFlags::default()).unwrap();
    home.prepare(0).unwrap();
    home.set_available(0).unwrap();
    let hm = home.map(0, LEN, None, MapFlags::default()).unwrap();
    let remote = RemoteSegment::connect(&b, c.node(1), 36, 0, LONG).unwrap();
    let src = LocalSegment::create(&b, Some(37), LEN, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let sm = src.map(0, LEN, None, MapFlags::default()).unwrap();
    let qs: Vec<DmaQueue> = (0..2).map(|_| DmaQueue::create(&b, 0, 4).unwrap()).collect();
    let mut aborted = 0;
    // At least three rounds, and more (up to ten) until an abort has landed mid-transfer:
    // a round whose test thread lost its core for the transfer's tens of milliseconds
    // (a loaded machine) ends before its abort.
    let mut rounds = 0;
    for r in 0..10 {
        if r >= 3 && aborted > 0 {
            break;
        }
        rounds += 1;
        let data: Vec<u8> = (0..LEN).map(|at| byte(usize::from(at >= LONG_PART), r, at)).collect();
        sm.write(0, &data).unwrap();
        hm.write(0, &vec![0u8; LEN]).unwrap();
        let nowait = DmaFlags { read: false, wait: false };
        qs[0].start(&src, &remote, 0, LONG_PART, 0, nowait, None).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| qs[1].start(&src, &remote, LONG_PART, PART, LONG_PART, WAIT, None).unwrap());
            qs[0].abort().unwrap();
        });
        // The other queue's transfer is whole; the aborted one stopped (or ended first).
        assert_eq!(qs[1].state(), DmaState::Done, "round {r}: the other queue");
        let mut got = vec![0u8; PART];
        hm.read(LONG_PART, &mut got).unwrap();
        assert!(got == data[LONG_PART..], "round {r}: the other queue's part at the home");
        match qs[0].state() {
            DmaState::Aborted => aborted += 1,
            DmaState::Done => {}
            s => panic!("round {r}: the aborted queue ended {s:?}"),
        }
        // The aborted queue moves its whole part again, intact.
        qs[0].start(&src, &remote, 0, LONG_PART, 0, WAIT, None).unwrap();
        assert_eq!(qs[0].state(), DmaState::Done, "round {r}: the aborted queue again");
        let mut got = vec![0u8; LONG_PART];
        hm.read(0, &mut got).unwrap();
        assert!(got == data[..LONG_PART], "round {r}: the aborted queue's part, sent again");
    }
    // A 64 MiB part takes tens of milliseconds across the namespaces, the abort a few
    // microseconds after the start: ten transfers that all ended first would mean the
    // abort never reached a transfer under way (and this test showed nothing).
    eprintln!("{aborted} of {rounds} rounds aborted mid-way (the others ended first)");
    assert!(aborted >= 1, "no abort of the {rounds} landed while the transfer was under way");
    for q in qs {
        q.remove().unwrap();
    }
}
