//! Maps of segments on other hosts (the DSM), across a cluster of network namespaces:
//! ping-pong through mapped memory only, a torture test of several importers writing
//! checksummed records into one segment, and what happens when the home node is lost
//! (an access to a page that is not resident raises SIGBUS; nothing hangs).
//! Needs root and iproute2; elsewhere each test says why it skips.

mod common;

use remora_sisci::*;
use remora_testkit::NetCluster;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn cluster(hosts: usize) -> Option<NetCluster> {
    common::net_cluster(hosts)
}

fn sci(c: &NetCluster, k: usize) -> Sisci {
    common::net_sci(c, k)
}

fn export(dev: &Descriptor, id: u32, size: usize) -> LocalSegment {
    let s = LocalSegment::create(dev, Some(id), size, CreateFlags::default()).unwrap();
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    s
}

#[test]
fn ping_pong_through_maps_across_hosts() {
    let Some(c) = cluster(2) else { return };
    let (sa, sb) = (sci(&c, 1), sci(&c, 2));
    let a = Descriptor::open(&sa).unwrap();
    let b = Descriptor::open(&sb).unwrap();
    let seg_a = export(&a, 1, 4096);
    let seg_b = export(&b, 2, 4096);
    let to_b = RemoteSegment::connect(&a, 8, 2, 0, Some(Duration::from_secs(10))).unwrap();
    let to_a = RemoteSegment::connect(&b, 4, 1, 0, Some(Duration::from_secs(10))).unwrap();
    assert!(!to_b.is_on_this_host());
    let (la, lb) = (
        seg_a.map(0, 4096, None, MapFlags::default()).unwrap(),
        seg_b.map(0, 4096, None, MapFlags::default()).unwrap(),
    );
    let (ra, rb) = (
        to_a.map(0, 4096, None, MapFlags::default()).unwrap(),
        to_b.map(0, 4096, None, MapFlags::default()).unwrap(),
    );
    // The pager talks to the home over a flow of its own, not through the daemons.
    assert_eq!(rb.dsm_direct(), Some(true));
    assert_eq!(ra.dsm_direct(), Some(true));
    assert_eq!(la.dsm_direct(), None);
    // SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET: a map of another host's segment is not local memory.
    assert!(!rb.is_local_target() && !ra.is_local_target() && la.is_local_target());
    const ROUNDS: u64 = 200;
    // Every round carries 7 data words, then `SCIFlush`, then the flag word 0: the flag
    // never arrives ahead of its data. (Without the flush the stores may land in any
    // order, as through the write-combining buffers of the adapters.)
    fn send(m: &Map, i: u64) {
        for k in 1..8u64 {
            m.with_atomic(8 * k as usize, |w| w.store(i * 1000 + k, Ordering::Relaxed)).unwrap();
        }
        remora_sisci::flush();
        m.with_atomic(0, |w| w.store(i, Ordering::Release)).unwrap();
    }
    fn receive(m: &Map, i: u64, what: &str) {
        let t = Instant::now();
        while m.with_atomic(0, |w| w.load(Ordering::Acquire)).unwrap() != i {
            assert!(t.elapsed() < Duration::from_secs(10), "{what} {i} never arrived");
            std::hint::spin_loop();
        }
        for k in 1..8u64 {
            let v = m.with_atomic(8 * k as usize, |w| w.load(Ordering::Relaxed)).unwrap();
            assert_eq!(v, i * 1000 + k, "{what} {i}: word {k} behind its flag");
        }
    }
    let responder = std::thread::spawn(move || {
        // Host 2's side: wait for i in its own segment, answer i into host 1's segment.
        for i in 1..=ROUNDS {
            receive(&lb, i, "round");
            send(&ra, i);
        }
    });
    for i in 1..=ROUNDS {
        send(&rb, i);
        receive(&la, i, "answer");
    }
    responder.join().unwrap();
}

#[test]
fn flush_orders_stores_across_maps_and_segments() {
    // Data in one map, `SCIFlush`, flag in another map: of the same segment (the maps share
    // a pager flow) and of another segment of the same home (another flow). The home never
    // sees the flag before the data.
    let Some(c) = cluster(2) else { return };
    let (sa, sb) = (sci(&c, 1), sci(&c, 2));
    let a = Descriptor::open(&sa).unwrap();
    let b = Descriptor::open(&sb).unwrap();
    const DATA: usize = 15 * 4096;
    let (seg_x, seg_y) = (export(&a, 30, DATA + 4096), export(&a, 31, 4096));
    let (home_x, home_y) = (
        seg_x.map(0, DATA + 4096, None, MapFlags::default()).unwrap(),
        seg_y.map(0, 4096, None, MapFlags::default()).unwrap(),
    );
    let to_x = RemoteSegment::connect(&b, 4, 30, 0, Some(Duration::from_secs(10))).unwrap();
    let to_y = RemoteSegment::connect(&b, 4, 31, 0, Some(Duration::from_secs(10))).unwrap();
    // Many pages of data, so that its frames are still on their way when the flag's go.
    let data = to_x.map(0, DATA, None, MapFlags::default()).unwrap();
    let flag_same = to_x.map(DATA, 4096, None, MapFlags::default()).unwrap();
    let flag_other = to_y.map(0, 4096, None, MapFlags::default()).unwrap();
    for (flag, home_flag, what) in
        [(&flag_same, &home_x, "same segment"), (&flag_other, &home_y, "other segment")]
    {
        let off = if std::ptr::eq(home_flag, &home_x) { DATA } else { 0 };
        let fill: Vec<u8> = vec![0; DATA];
        for i in 1..=30u64 {
            let mut fill = fill.clone();
            for w in fill.chunks_mut(8) {
                w.copy_from_slice(&i.to_le_bytes());
            }
            data.write(0, &fill).unwrap();
            remora_sisci::flush();
            flag.with_atomic(0, |w| w.store(i, Ordering::Release)).unwrap();
            let t = Instant::now();
            while home_flag.with_atomic(off, |w| w.load(Ordering::Acquire)).unwrap() != i {
                assert!(t.elapsed() < Duration::from_secs(10), "{what}: flag {i} never arrived");
                std::hint::spin_loop();
            }
            for k in (0..DATA).step_by(512) {
                let v = home_x.with_atomic(k, |w| w.load(Ordering::Relaxed)).unwrap();
                assert_eq!(v, i, "{what}: data at {k} behind flag {i}");
            }
        }
    }
    assert_eq!(data.dsm_direct(), Some(true));
}

#[test]
fn a_pager_flow_reaches_its_own_connection_only_and_bad_frames_close_it() {
    use remora_proto::link::{BulkFrame, BulkHeader, BulkOp, BULK_FRAME};
    use std::io::{Read, Write};
    use zerocopy::IntoBytes;
    let Some(c) = cluster(2) else { return };
    let (sa, sb) = (sci(&c, 1), sci(&c, 2));
    let a = Descriptor::open(&sa).unwrap();
    let b = Descriptor::open(&sb).unwrap();
    let (mine, other) = (export(&a, 40, 4096), export(&a, 41, 4096));
    let other_home = other.map(0, 4096, None, MapFlags::default()).unwrap();
    let to_mine = RemoteSegment::connect(&b, 4, 40, 0, Some(Duration::from_secs(10))).unwrap();
    let to_other = RemoteSegment::connect(&b, 4, 41, 0, Some(Duration::from_secs(10))).unwrap();
    let flow = |conn: u64| {
        let (reply, mut fds) = b.raw_session().request(remora_proto::Request::DsmFlow { conn }, &[]).unwrap();
        let remora_proto::Reply::DsmFlow { remote, .. } = reply else { panic!("{reply:?}") };
        let s = std::net::TcpStream::from(fds.pop().unwrap());
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        (s, remote)
    };
    let closed = |s: &mut std::net::TcpStream| {
        let mut b = [0u8; 64];
        matches!(s.read(&mut b), Ok(0) | Err(_))
    };
    let frame = |op, conn, offset, len, ok| {
        BulkFrame::from_header(&BulkHeader { op, tag: 1, conn, offset, len, ok }).as_bytes().to_vec()
    };
    // A store naming the other connection (held by the same node): the flow closes and the
    // other segment is untouched.
    let (mut s, remote) = flow(to_mine.handle());
    let (_, remote_other) = flow(to_other.handle());
    assert_ne!(remote, remote_other);
    let mut f = frame(BulkOp::Write, remote_other, 0, 8, true);
    f.extend_from_slice(&[0xee; 8]);
    s.write_all(&f).unwrap();
    assert!(closed(&mut s), "a flow that named another connection stayed open");
    assert_eq!(other_home.with_atomic(0, |w| w.load(Ordering::SeqCst)).unwrap(), 0);
    // A read past the end is refused in its answer; the flow stays usable.
    let (mut s, _) = flow(to_mine.handle());
    s.write_all(&frame(BulkOp::Read, remote, 4000, 4096, false)).unwrap();
    let mut answer = [0u8; BULK_FRAME];
    s.read_exact(&mut answer).unwrap();
    let h = BulkFrame::parse(&answer).unwrap();
    assert!(h.op == BulkOp::Data && !h.ok && h.len == 0, "{h:?}");
    s.write_all(&frame(BulkOp::Read, remote, 0, 8, false)).unwrap();
    s.read_exact(&mut answer).unwrap();
    assert!(BulkFrame::parse(&answer).unwrap().ok);
    // Garbage, and a frame only a home sends: each closes its flow.
    let mut garbage = b"RM\x09garbage".to_vec();
    garbage.resize(BULK_FRAME, 0x55);
    for junk in [garbage, frame(BulkOp::Ack, remote, 0, 0, true)] {
        let (mut s, _) = flow(to_mine.handle());
        s.write_all(&junk).unwrap();
        assert!(closed(&mut s), "a flow stayed open after {junk:02x?}");
    }
    // A flood of flows for one connection: at most 16 are served at once.
    let mut flood = Vec::new();
    let mut served = 0;
    for _ in 0..20 {
        let (mut s, _) = flow(to_mine.handle());
        s.write_all(&frame(BulkOp::Read, remote, 0, 8, false)).unwrap();
        let mut answer = [0u8; BULK_FRAME];
        if s.read_exact(&mut answer).is_ok() {
            served += 1;
        }
        flood.push(s);
    }
    assert!((1..=16).contains(&served), "{served} of 20 flows for one connection were served");
    drop(flood);
    // (their threads end when they see the close)
    std::thread::sleep(Duration::from_millis(200));
    // The daemons serve on: a map of the segment works.
    let m = to_mine.map(0, 4096, None, MapFlags::default()).unwrap();
    m.with_atomic(8, |w| w.store(77, Ordering::SeqCst)).unwrap();
    assert!(m.flush());
    let home = mine.map(0, 4096, None, MapFlags::default()).unwrap();
    assert_eq!(home.with_atomic(8, |w| w.load(Ordering::SeqCst)).unwrap(), 77);
}

#[test]
fn stores_land_before_the_interrupt_that_follows_them() {
    // Data through a map of host 1's segment, then an interrupt of host 1 (which travels
    // through the daemons): the woken waiter finds the data.
    let Some(c) = cluster(2) else { return };
    let (sa, sb) = (sci(&c, 1), sci(&c, 2));
    let a = Descriptor::open(&sa).unwrap();
    let b = Descriptor::open(&sb).unwrap();
    const DATA: usize = 16 * 4096;
    let seg = export(&a, 50, DATA);
    let home = seg.map(0, DATA, None, MapFlags::default()).unwrap();
    let intr = Interrupt::create(&a, 0, None, false, None).unwrap();
    let to_a = RemoteSegment::connect(&b, 4, 50, 0, Some(Duration::from_secs(10))).unwrap();
    let trig = RemoteInterrupt::connect(&b, 4, 0, intr.number(), Some(Duration::from_secs(10))).unwrap();
    let m = to_a.map(0, DATA, None, MapFlags::default()).unwrap();
    for i in 1..=20u64 {
        let mut fill = vec![0u8; DATA];
        for w in fill.chunks_mut(8) {
            w.copy_from_slice(&i.to_le_bytes());
        }
        m.write(0, &fill).unwrap();
        trig.trigger().unwrap();
        intr.wait(Some(Duration::from_secs(10))).unwrap();
        for k in (0..DATA).step_by(1024) {
            let v = home.with_atomic(k, |w| w.load(Ordering::Relaxed)).unwrap();
            assert_eq!(v, i, "round {i}: data at {k} behind the interrupt");
        }
    }
}

#[test]
fn large_stores_go_home_in_order_and_keep_other_threads_stores() {
    // A store of many pages (`SCIMemCpy`) goes home straight over the pager flow: stores
    // made before it land first, stores after it land after it, the map shows it (pages
    // resident before it are refetched), and another thread's stores to the bytes around
    // it, in the same pages, meanwhile, are all kept.
    let Some(c) = cluster(2) else { return };
    let (sa, sb) = (sci(&c, 1), sci(&c, 2));
    let a = Descriptor::open(&sa).unwrap();
    let b = Descriptor::open(&sb).unwrap();
    const SIZE: usize = 304 * 4096;
    const AT: usize = 1000;
    // Sent by the pager (a copy), and by the storing thread (over 1 MiB).
    const LENS: [usize; 2] = [36 * 4096, 300 * 4096];
    assert!(LENS[0] >= remora_client::dsm::THROUGH);
    let seg = export(&a, 60, SIZE);
    let home = seg.map(0, SIZE, None, MapFlags::default()).unwrap();
    let to_a = RemoteSegment::connect(&b, 4, 60, 0, Some(Duration::from_secs(10))).unwrap();
    let m = to_a.map(0, SIZE, None, MapFlags::default()).unwrap();
    assert_eq!(m.dsm_direct(), Some(true));
    for round in 1..=6u64 {
        let len = LENS[round as usize % 2];
        // The words another thread stores, all outside AT..AT + len: in the first and the
        // last page the large store reaches, and beyond.
        let others: Vec<usize> =
            (0..AT).step_by(8).chain(((AT + len).div_ceil(8) * 8..SIZE).step_by(8)).collect();
        let others = &others;
        let pat = vec![round as u8; len];
        // A page inside the range read (resident, clean), a word inside written (watched),
        // both before the large store.
        let mut one = [0u8; 8];
        m.read(AT + 8 * 4096, &mut one).unwrap();
        m.with_atomic(AT + 4 * 4096, |w| w.store(u64::MAX, Ordering::Relaxed)).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            let other = sc.spawn(|| {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) || n < 3 {
                    n += 1;
                    for &k in others {
                        m.with_atomic(k, |w| w.store(round << 32 | n, Ordering::Relaxed)).unwrap();
                    }
                }
                n
            });
            m.write(AT, &pat).unwrap();
            // After it: a word inside the range.
            m.with_atomic(AT + 16 * 4096, |w| w.store(round, Ordering::Relaxed)).unwrap();
            stop.store(true, Ordering::Relaxed);
            let last = other.join().unwrap();
            assert!(m.flush(), "round {round}: flush");
            let mut mine = vec![0u8; len];
            m.read(AT, &mut mine).unwrap();
            let mut there = vec![0u8; len];
            home.read(AT, &mut there).unwrap();
            for (what, got) in [("the map", &mine), ("the home", &there)] {
                let word = |k: usize| u64::from_le_bytes(got[k..k + 8].try_into().unwrap());
                assert_eq!(word(16 * 4096), round, "round {round}: {what} lost the store after");
                let mut expect = pat.clone();
                expect[16 * 4096..16 * 4096 + 8].copy_from_slice(&round.to_le_bytes());
                assert!(got == &expect, "round {round}: {what} does not hold the large store");
            }
            for &k in others {
                let v = home.with_atomic(k, |w| w.load(Ordering::Relaxed)).unwrap();
                assert_eq!(
                    v,
                    round << 32 | last,
                    "round {round}: the home lost the other thread's store at {k}"
                );
            }
        });
    }
    // Once the refresh dropped every page (none resident, none watched), a large store goes
    // without the pager; the map then reads it from the home.
    std::thread::sleep(Duration::from_millis(50));
    for len in LENS {
        let pat = vec![0x5a ^ len as u8; len];
        m.write(AT, &pat).unwrap();
        let (mut mine, mut there) = (vec![0u8; len], vec![0u8; len]);
        home.read(AT, &mut there).unwrap();
        m.read(AT, &mut mine).unwrap();
        assert!(there == pat && mine == pat, "a store of {len} bytes with no page resident");
    }
}

#[test]
fn torture_several_importers_on_several_hosts() {
    let Some(c) = cluster(3) else { return };
    let home = Descriptor::open(&sci(&c, 1)).unwrap();
    const SLOT: usize = 64;
    const WRITERS: usize = 4; // two per importing host
    const RECORDS: u64 = 300;
    let seg = export(&home, 10, 4096);
    let hm = seg.map(0, 4096, None, MapFlags::default()).unwrap();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let s = sci(&c, 2 + w % 2);
        writers.push(std::thread::spawn(move || {
            let dev = Descriptor::open(&s).unwrap();
            let r = RemoteSegment::connect(&dev, 4, 10, 0, Some(Duration::from_secs(10))).unwrap();
            let m = r.map(0, 4096, None, MapFlags::default()).unwrap();
            let seq = m.create_sequence().unwrap();
            // Each writer owns slot w: [seq u64][payload 48 bytes][checksum u64], all in one page.
            for n in 1..=RECORDS {
                let mut rec = [0u8; SLOT];
                rec[..8].copy_from_slice(&n.to_le_bytes());
                for (i, b) in rec[8..56].iter_mut().enumerate() {
                    *b = (n as u8).wrapping_mul(7).wrapping_add(i as u8).wrapping_add(w as u8);
                }
                let sum = common::checksum(&rec[..56]);
                rec[56..].copy_from_slice(&sum.to_le_bytes());
                m.write(w * SLOT, &rec).unwrap();
                if n % 50 == 0 {
                    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Ok);
                }
            }
            seq.store_barrier();
        }));
    }
    // The home reads while they write: never a torn record (a record whose checksum fails
    // is one being written; it must be whole by the end).
    let t = Instant::now();
    let mut last = [0u64; WRITERS];
    loop {
        for (w, l) in last.iter_mut().enumerate() {
            let mut rec = [0u8; SLOT];
            hm.read(w * SLOT, &mut rec).unwrap();
            let n = u64::from_le_bytes(rec[..8].try_into().unwrap());
            let sum = u64::from_le_bytes(rec[56..].try_into().unwrap());
            if n > 0 && sum == common::checksum(&rec[..56]) {
                assert!(n >= *l, "writer {w} went backwards: {n} after {l}");
                *l = n;
            }
        }
        if last.iter().all(|&n| n == RECORDS) {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "records stalled at {last:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    for w in writers {
        w.join().unwrap();
    }
    // Nothing lost, nothing torn: every slot holds its writer's last record, whole.
    for w in 0..WRITERS {
        let mut rec = [0u8; SLOT];
        hm.read(w * SLOT, &mut rec).unwrap();
        assert_eq!(u64::from_le_bytes(rec[..8].try_into().unwrap()), RECORDS);
        assert_eq!(u64::from_le_bytes(rec[56..].try_into().unwrap()), common::checksum(&rec[..56]));
    }
}

const CHILD: &str = "REMORA_TEST_DSM_LOST_CHILD";

#[test]
fn lost_home_fails_api_calls_and_raises_sigbus_on_loads_instead_of_hanging() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::ExitStatusExt;
    if let Ok(spec) = std::env::var(CHILD) {
        // Child: map 4 pages of the home's segment, touch page 0, then wait for the parent
        // to kill the home and touch page 3 (never resident): SIGBUS, not a hang.
        let mut parts = spec.split('|');
        let cfg = Config {
            node: parts.next().unwrap().parse().unwrap(),
            runtime_dir: parts.next().unwrap().into(),
            daemon: None,
            spawn: false,
            idle_exit: Duration::from_secs(60),
            cluster: Some(parts.next().unwrap().into()),
        };
        let dev = Descriptor::open(&Sisci::with_config(cfg)).unwrap();
        let r = RemoteSegment::connect(&dev, 4, 20, 0, Some(Duration::from_secs(10))).unwrap();
        let m = r.map(0, 4 * 4096, None, MapFlags::default()).unwrap();
        let mut b = [0u8; 1];
        m.read(0, &mut b).unwrap();
        println!("ready {}", b[0]);
        std::io::stdout().flush().unwrap();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
        // Once the map knows its home is lost, a call of the API answers an error
        // (SCIMemCpy: SCI_ERR_TRANSFER_FAILED) rather than fault in the library...
        let t = Instant::now();
        while !m.is_lost() {
            assert!(t.elapsed() < Duration::from_secs(20), "the map never learned its home is lost");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(m.read(3 * 4096, &mut b).unwrap_err(), Error::TransferFailed);
        assert_eq!(m.write(3 * 4096, &b).unwrap_err(), Error::TransferFailed);
        println!("api error");
        // ...and a load of the program's own from a page never fetched raises SIGBUS.
        m.with_atomic(3 * 4096, |a| a.load(std::sync::atomic::Ordering::SeqCst)).unwrap();
        println!("no fault");
        return;
    }
    let Some(mut c) = cluster(2) else { return };
    let home = Descriptor::open(&sci(&c, 1)).unwrap();
    let seg = export(&home, 20, 4 * 4096);
    seg.map(0, 4096, None, MapFlags::default()).unwrap().write(0, &[42]).unwrap();
    let spec = format!("{}|{}|{}", c.node(2), c.runtime_dir(2).display(), c.cluster_file().display());
    let mut kid = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lost_home_fails_api_calls_and_raises_sigbus_on_loads_instead_of_hanging",
            "--nocapture",
        ])
        .env(CHILD, spec)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(kid.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child died before it was ready");
    }
    assert_eq!(line.trim(), "ready 42");
    drop(home);
    c.kill_daemon(1);
    std::thread::sleep(Duration::from_millis(300));
    kid.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = kid.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "access to a lost home's page hung");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(rest.contains("api error") && !rest.contains("no fault"), "{rest}");
    assert_eq!(status.signal(), Some(7), "expected SIGBUS, got {status:?}: {rest}");
}

#[test]
fn stores_and_loads_straight_home_are_current_when_the_call_returns() {
    // `Map::store_home`: a few small runs go home in order and are there when the call
    // returns, straight over the pager flow (no page of the map resident), and through the
    // map and a flush when a store through the map left a page watched (that store lands
    // too).
    let Some(c) = cluster(2) else { return };
    let (sa, sb) = (sci(&c, 1), sci(&c, 2));
    let a = Descriptor::open(&sa).unwrap();
    let b = Descriptor::open(&sb).unwrap();
    const SIZE: usize = 4 * 4096;
    let seg = export(&a, 51, SIZE);
    let home = seg.map(0, SIZE, None, MapFlags::default()).unwrap();
    let to_a = RemoteSegment::connect(&b, 4, 51, 0, Some(Duration::from_secs(10))).unwrap();
    let m = to_a.map(0, SIZE, None, MapFlags::default()).unwrap();
    let word = |at: usize| home.with_atomic(at, |w| w.load(Ordering::Acquire)).unwrap();
    for i in 1..=200u64 {
        let through_map = i % 50 == 0;
        if through_map {
            m.write(3 * 4096, &i.to_le_bytes()).unwrap();
        }
        let v = i.to_le_bytes();
        m.store_home(&[(64, &[i as u8; 40]), (104, &v), (4096 + 8, &v)]).unwrap();
        assert_eq!(word(4096 + 8), i, "round {i}: the last run not home");
        assert_eq!(word(104), i, "round {i}: the second run not home");
        let mut line = [0u8; 40];
        home.read(64, &mut line).unwrap();
        assert!(line.iter().all(|&x| x == i as u8), "round {i}: the first run not home");
        if through_map {
            assert_eq!(word(3 * 4096), i, "round {i}: the store through the map made before not home");
        }
    }
    assert!(matches!(m.store_home(&[(SIZE - 4, &[0u8; 8])]), Err(Error::OutOfRange)));
    // `Map::load_home`: what the home holds now, the map's own stores included.
    let mut w = [0u8; 8];
    for i in 1..=50u64 {
        home.with_atomic(2 * 4096, |x| x.store(i, Ordering::Release)).unwrap();
        m.load_home(2 * 4096, &mut w).unwrap();
        assert_eq!(u64::from_le_bytes(w), i, "round {i}: load_home behind the home");
        m.write(2 * 4096 + 8, &(i + 1000).to_le_bytes()).unwrap();
        m.load_home(2 * 4096 + 8, &mut w).unwrap();
        assert_eq!(u64::from_le_bytes(w), i + 1000, "round {i}: load_home missed this map's store");
    }
    assert!(matches!(m.load_home(SIZE - 4, &mut w), Err(Error::OutOfRange)));
}

/// What node `k`'s `remora status` shows.
fn status(c: &NetCluster, k: usize) -> remora_proto::NodeStatus {
    let s = remora_client::Session::open_control(&remora_testkit::net_config(c, k)).unwrap();
    match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => *st,
        other => panic!("{other:?}"),
    }
}

/// A map of another host's segment tells its daemon of itself just before its flow request,
/// from the thread that makes that request (not from the mapping thread): it is on the
/// books by the time its flow is, and off them once unmapped or dropped. Maps unmapped at
/// once, before their note could go, leave nothing behind either: an unmap note never
/// overtakes its map's note (a late note would stay on the books for good).
#[test]
fn maps_of_other_hosts_are_on_the_books_from_their_flow_on_and_off_them_after() {
    let Some(c) = cluster(2) else { return };
    let (sa, sb) = (sci(&c, 1), sci(&c, 2));
    let a = Descriptor::open(&sa).unwrap();
    let b = Descriptor::open(&sb).unwrap();
    let _seg = export(&b, 3, 1 << 20);
    let r = RemoteSegment::connect(&a, 8, 3, 0, Some(Duration::from_secs(10))).unwrap();
    let target = remora_proto::MapTarget::Remote { conn: r.handle() };
    let m = r.map(4096, 8192, None, MapFlags::default()).unwrap();
    assert_eq!(m.dsm_direct(), Some(true));
    // The daemon read the note before the flow request it answered.
    let maps = status(&c, 1).maps;
    assert!(
        maps.iter().any(|x| x.target == target && x.offset == 4096 && x.size == 8192),
        "the map is not on the books: {maps:?}"
    );
    m.unmap().unwrap();
    let kept = r.map(0, 4096, None, MapFlags::default()).unwrap();
    assert_eq!(kept.dsm_direct(), Some(true));
    drop(kept);
    for k in 0..64 {
        let m = r.map(0, 4096 * (1 + k % 4), None, MapFlags::default()).unwrap();
        if k % 2 == 0 {
            m.unmap().unwrap();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !status(&c, 1).maps.is_empty() {
        assert!(Instant::now() < deadline, "maps left on the books: {:?}", status(&c, 1).maps);
        std::thread::sleep(Duration::from_millis(10));
    }
    // And none comes back late.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(status(&c, 1).maps, vec![]);
    r.disconnect().unwrap();
}
