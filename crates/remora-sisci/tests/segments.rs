//! The SISCI safe API on one host: every call, its rules and its error codes.

mod common;
use common::Sci as _;

use remora_sisci::*;
use std::time::{Duration, Instant};

fn exported(dev: &Descriptor, id: u32, size: usize) -> LocalSegment {
    let s = LocalSegment::create(dev, Some(id), size, CreateFlags::default()).unwrap();
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    s
}

#[test]
fn local_segment_state_machine() {
    let h = common::Harness::new();
    let sci = h.sci(4);
    let dev = Descriptor::open(&sci).unwrap();
    let s = LocalSegment::create(&dev, Some(10), 4096, CreateFlags::default()).unwrap();
    assert_eq!(s.id(), 10);
    assert_eq!(s.size(), 4096);
    assert_eq!(s.set_available(0), Err(Error::NotPrepared));
    assert_eq!(s.set_unavailable(0, false, false), Err(Error::IllegalOperation));
    assert_eq!(s.prepare(1), Err(Error::NoSuchAdapter));
    s.prepare(0).unwrap();
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    s.set_unavailable(0, false, false).unwrap();
    assert_eq!(s.set_unavailable(0, false, false), Err(Error::IllegalOperation));
    s.set_available(0).unwrap();
    assert_eq!(
        LocalSegment::create(&dev, Some(10), 4096, CreateFlags::default()).unwrap_err(),
        Error::SegmentIdUsed
    );
    assert!(matches!(
        LocalSegment::create(&dev, Some(11), 0, CreateFlags::default()),
        Err(Error::IllegalParameter(_))
    ));
    s.remove().unwrap();
    assert!(s.remove().is_err(), "a removed segment is a stale handle");
    // The id is free again.
    LocalSegment::create(&dev, Some(10), 4096, CreateFlags::default()).unwrap().remove().unwrap();
}

#[test]
fn private_empty_and_auto_id() {
    let h = common::Harness::new();
    let dev = Descriptor::open(&h.sci(4)).unwrap();
    let p = LocalSegment::create(&dev, Some(1), 4096, CreateFlags { private: true, empty: false }).unwrap();
    p.prepare(0).unwrap();
    assert_eq!(p.set_available(0), Err(Error::IllegalOperation));
    assert_eq!(p.share(), Err(Error::IllegalOperation));
    let a = LocalSegment::create(&dev, None, 4096, CreateFlags::default()).unwrap();
    let b = LocalSegment::create(&dev, None, 4096, CreateFlags::default()).unwrap();
    assert_ne!(a.id(), b.id());
    let e = LocalSegment::create(&dev, Some(2), 4096, CreateFlags { private: false, empty: true }).unwrap();
    assert_eq!(e.prepare(0), Err(Error::IllegalOperation));
    assert_eq!(e.map(0, 4096, None, MapFlags::default()).unwrap_err(), Error::IllegalOperation);
}

#[test]
fn forced_removal_goes_despite_dependants_and_maps_keep_their_memory() {
    let h = common::Harness::new();
    let sci = h.sci(4);
    let dev = Descriptor::open(&sci).unwrap();
    let s = exported(&dev, 21, 8192);
    let m = s.map(0, 8192, None, MapFlags::default()).unwrap();
    m.write(100, b"kept").unwrap();
    s.share().unwrap();
    // Another process of the node attaches it: a plain remove is refused.
    let other = Descriptor::open(&h.sci(4)).unwrap();
    let att = LocalSegment::attach(&other, 21, None).unwrap();
    assert_eq!(s.remove(), Err(Error::Busy));
    s.remove_forced().unwrap();
    assert!(s.remove().is_err(), "gone");
    // The map is memory of this process: still there until unmapped.
    let mut b = [0u8; 4];
    m.read(100, &mut b).unwrap();
    assert_eq!(&b, b"kept");
    m.unmap().unwrap();
    // The id is free at once.
    let again = exported(&dev, 21, 4096);
    again.remove().unwrap();
    drop(att);
}

#[test]
fn dependencies_give_busy() {
    let h = common::Harness::new();
    let sci = h.sci(4);
    let dev = Descriptor::open(&sci).unwrap();
    let s = exported(&dev, 20, 8192);
    assert_eq!(dev.close(), Err(Error::Busy));
    let m = s.map(0, 8192, None, MapFlags::default()).unwrap();
    assert_eq!(s.remove(), Err(Error::Busy));
    let r = RemoteSegment::connect(&dev, 4, 20, 0, None).unwrap();
    let rm = r.map(0, 4096, None, MapFlags::default()).unwrap();
    assert_eq!(r.disconnect(), Err(Error::Busy));
    let seq = rm.create_sequence().unwrap();
    // Unmapping while a sequence exists is allowed (programs rely on it); the sequence
    // goes on reporting the connection's state until it is removed.
    rm.unmap().unwrap();
    assert_eq!(seq.start().unwrap(), SequenceStatus::Ok);
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Ok);
    seq.remove().unwrap();
    assert!(rm.unmap().is_err());
    r.disconnect().unwrap();
    m.unmap().unwrap();
    s.remove().unwrap();
    dev.close().unwrap();
    assert_eq!(dev.close(), Err(Error::IllegalOperation));
}

#[test]
fn connect_rules_and_waiting() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    // A node of this host that never comes up: NO_SUCH_NODEID once the start-up grace (3 s)
    // or the caller's shorter timeout has passed, even with an infinite timeout.
    let t = Instant::now();
    assert_eq!(RemoteSegment::connect(&b, 99, 1, 0, None).unwrap_err(), Error::NoSuchNode);
    assert!(t.elapsed() >= Duration::from_secs(2) && t.elapsed() < Duration::from_secs(10));
    let t = Instant::now();
    let short = Some(Duration::from_millis(100));
    assert_eq!(RemoteSegment::connect(&b, 99, 1, 0, short).unwrap_err(), Error::NoSuchNode);
    assert!(t.elapsed() < Duration::from_secs(2));
    // A node whose daemon starts after the connect began (a client started a moment before
    // its server) is waited for, as Dolphin's driver waits for a node coming up.
    let late = std::thread::spawn({
        let cfg = h.config(16);
        move || {
            std::thread::sleep(Duration::from_millis(300));
            let d = Descriptor::open(&Sisci::with_config(cfg)).unwrap();
            let s = LocalSegment::create(&d, Some(5), 4096, CreateFlags::default()).unwrap();
            s.prepare(0).unwrap();
            s.set_available(0).unwrap();
            std::thread::sleep(Duration::from_secs(2));
            drop((s, d));
        }
    });
    let r = RemoteSegment::connect(&b, 16, 5, 0, Some(Duration::from_secs(10))).unwrap();
    assert_eq!(r.size(), 4096);
    r.disconnect().unwrap();
    late.join().unwrap();
    // Missing segment: NO_SUCH_SEGMENT when the wait runs out.
    let t = Instant::now();
    assert_eq!(
        RemoteSegment::connect(&b, 4, 30, 0, Some(Duration::from_millis(200))).unwrap_err(),
        Error::NoSuchSegment
    );
    assert!(t.elapsed() >= Duration::from_millis(190));
    // Existing but not available: TIMEOUT.
    let s = LocalSegment::create(&a, Some(30), 4096, CreateFlags::default()).unwrap();
    assert_eq!(
        RemoteSegment::connect(&b, 4, 30, 0, Some(Duration::from_millis(100))).unwrap_err(),
        Error::Timeout
    );
    assert_eq!(RemoteSegment::connect(&b, 4, 30, 1, None).unwrap_err(), Error::NoSuchAdapter);
    // A connect that waits is completed when the segment becomes available.
    let s2 = s.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        s2.prepare(0).unwrap();
        s2.set_available(0).unwrap();
    });
    let r = RemoteSegment::connect(&b, 4, 30, 0, None).unwrap();
    t.join().unwrap();
    assert_eq!((r.node(), r.id(), r.size()), (4, 30, 4096));
    // Loopback: node 4 connects to its own segment.
    let own = RemoteSegment::connect(&a, 4, 30, 0, Some(Duration::from_secs(1))).unwrap();
    assert_eq!(own.node(), 4);
    // Removing the segment succeeds while connections remain; their memory lives on.
    let rm = r.map(0, 4096, None, MapFlags::default()).unwrap();
    s.remove().unwrap();
    rm.write(0, b"still here").unwrap();
    let mut back = [0u8; 10];
    rm.read(0, &mut back).unwrap();
    assert_eq!(&back, b"still here");
    rm.unmap().unwrap();
    r.disconnect().unwrap();
    own.disconnect().unwrap();
}

#[test]
fn maps_offsets_readonly_and_fixed_addresses() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let s = exported(&a, 40, 3 * 4096);
    let lm = s.map(0, 3 * 4096, None, MapFlags::default()).unwrap();
    let pattern: Vec<u8> = (0..3 * 4096).map(|i| (i % 251) as u8).collect();
    lm.write(0, &pattern).unwrap();
    let r = RemoteSegment::connect(&b, 4, 40, 0, None).unwrap();
    // Any offset and size inside the segment.
    let part = r.map(5000, 333, None, MapFlags::default()).unwrap();
    let mut got = vec![0u8; 333];
    part.read(0, &mut got).unwrap();
    assert_eq!(got, &pattern[5000..5333]);
    assert_eq!(part.read(1, &mut got).unwrap_err(), Error::OutOfRange);
    assert_eq!(r.map(3 * 4096 - 10, 11, None, MapFlags::default()).unwrap_err(), Error::OutOfRange);
    assert_eq!(r.map(usize::MAX, 2, None, MapFlags::default()).unwrap_err(), Error::OutOfRange);
    // Read-only maps refuse stores.
    let ro = r.map(0, 4096, None, MapFlags { readonly: true }).unwrap();
    assert_eq!(ro.write(0, b"x").unwrap_err(), Error::IllegalOperation);
    assert_eq!(ro.with_atomic(0, |_| ()).unwrap_err(), Error::IllegalOperation);
    ro.read(0, &mut got[..10]).unwrap();
    assert_eq!(got[..10], pattern[..10]);
    // A fixed address: the same place again after unmapping.
    let m = r.map(4096, 4096, None, MapFlags::default()).unwrap();
    let addr = m.as_ptr() as usize;
    assert_eq!(r.map(4096, 4096, Some(addr), MapFlags::default()).unwrap_err(), Error::IllegalAddress);
    m.unmap().unwrap();
    let again = r.map(4096, 4096, Some(addr), MapFlags::default()).unwrap();
    assert_eq!(again.as_ptr() as usize, addr);
    let mut one = [0u8; 1];
    again.read(0, &mut one).unwrap();
    assert_eq!(one[0], pattern[4096]);
}

#[test]
fn mem_copy_both_directions_and_sequences() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let s = exported(&a, 50, 1 << 20);
    let r = RemoteSegment::connect(&b, 4, 50, 0, None).unwrap();
    let m = r.map(0, 1 << 20, None, MapFlags::default()).unwrap();
    let seq = m.create_sequence().unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    mem_copy(Some(&seq), &data, &m, 1000, true).unwrap();
    let mut back = vec![0u8; 100_000];
    mem_read(None, &mut back, &m, 1000, false).unwrap();
    assert_eq!(back, data);
    assert_eq!(mem_copy(None, &back, &m, (1 << 20) - 10, false).unwrap_err(), Error::OutOfRange);
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::Ok);
    assert_eq!(seq.check(true, true).unwrap(), SequenceStatus::Ok);
    seq.store_barrier();
    flush();
    // The owner sees the bytes in its own map.
    let lm = s.map(1000, 100_000, None, MapFlags::default()).unwrap();
    lm.read(0, &mut back).unwrap();
    assert_eq!(back, data);
}

#[test]
fn forced_disconnect_is_reported_to_the_importer() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let s = exported(&a, 60, 4096);
    let r = RemoteSegment::connect(&b, 4, 60, 0, None).unwrap();
    let m = r.map(0, 4096, None, MapFlags::default()).unwrap();
    let seq = m.create_sequence().unwrap();
    assert_eq!(seq.start().unwrap(), SequenceStatus::Ok);
    s.set_unavailable(0, true, true).unwrap();
    let t = Instant::now();
    while !r.is_lost() {
        assert!(t.elapsed() < Duration::from_secs(2), "the importer was never told");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(seq.check(false, false).unwrap(), SequenceStatus::NotRetriable);
    assert_eq!(seq.start().unwrap_err(), Error::NotConnected);
    // New connections are refused while unavailable.
    assert_eq!(
        RemoteSegment::connect(&b, 4, 60, 0, Some(Duration::from_millis(50))).unwrap_err(),
        Error::Timeout
    );
}

#[test]
fn share_and_attach_between_processes_of_a_node() {
    let h = common::Harness::new();
    let sci = h.sci(4);
    let owner = Descriptor::open(&sci).unwrap();
    let other = Descriptor::open(&sci).unwrap();
    let s = LocalSegment::create(&owner, Some(70), 4096, CreateFlags::default()).unwrap();
    assert_eq!(LocalSegment::attach(&other, 70, None).unwrap_err(), Error::Access);
    assert_eq!(LocalSegment::attach(&other, 71, None).unwrap_err(), Error::NoSuchSegment);
    s.share().unwrap();
    let att = LocalSegment::attach(&other, 70, None).unwrap();
    assert_eq!(att.size(), 4096);
    att.map(0, 4096, None, MapFlags::default()).unwrap().write(8, b"shared").unwrap();
    let mut b = [0u8; 6];
    s.map(0, 4096, None, MapFlags::default()).unwrap().read(8, &mut b).unwrap();
    assert_eq!(&b, b"shared");
    // State is shared: the attacher prepares, the owner sees it prepared.
    att.prepare(0).unwrap();
    s.set_available(0).unwrap();
    assert_eq!(s.remove(), Err(Error::Busy));
    att.remove().unwrap();
    s.remove().unwrap();
}

#[derive(zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::KnownLayout, zerocopy::Immutable)]
#[repr(C, align(4096))]
struct Page([u8; 4096]);

#[test]
fn registered_user_memory_is_shared_in_place() {
    use zerocopy::IntoBytes;
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let pages: &'static mut [Page] =
        Box::leak((0..64).map(|_| Page([0; 4096])).collect::<Vec<_>>().into_boxed_slice());
    let mem: &'static mut [u8] = pages.as_mut_bytes();
    mem[..5].copy_from_slice(b"early");
    let addr = mem.as_ptr() as usize;
    let s = LocalSegment::create(&a, Some(80), 0, CreateFlags { private: false, empty: true }).unwrap();
    let mem_ptr: *const u8 = mem.as_ptr();
    s.register_memory(mem).unwrap();
    assert_eq!(s.size(), 64 * 4096);
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    let r = RemoteSegment::connect(&b, 4, 80, 0, None).unwrap();
    let m = r.map(0, r.size(), None, MapFlags::default()).unwrap();
    let mut got = [0u8; 5];
    m.read(0, &mut got).unwrap();
    assert_eq!(&got, b"early", "contents survive the move into shared memory");
    m.write(4096 * 63, b"late").unwrap();
    // The same addresses of this process now show the importer's store.
    let lm = s.map(0, s.size(), None, MapFlags::default()).unwrap();
    assert!(lm.as_ptr() as usize != 0);
    let _ = (addr, mem_ptr);
    let mut late = [0u8; 4];
    lm.read(4096 * 63, &mut late).unwrap();
    assert_eq!(&late, b"late");
    // A second registration is illegal; unaligned memory is refused.
    let e = LocalSegment::create(&a, Some(81), 0, CreateFlags { private: false, empty: true }).unwrap();
    let odd: &'static mut [u8] = Box::leak(vec![0u8; 8192 + 1].into_boxed_slice());
    assert!(matches!(e.register_memory(&mut odd[1..]), Err(Error::OffsetAlignment | Error::SizeAlignment)));
}

#[test]
fn probe_and_queries() {
    let h = common::Harness::new();
    let sci4 = h.sci(4);
    let a = Descriptor::open(&sci4).unwrap();
    let _b = Descriptor::open(&h.sci(8)).unwrap();
    assert_eq!(a.probe_node(0, 4), Ok(true));
    assert_eq!(a.probe_node(0, 8), Ok(true));
    assert_eq!(a.probe_node(0, 12), Err(Error::NoSuchNode));
    assert_eq!(a.probe_node(3, 8), Err(Error::NoSuchAdapter));
    let info = sci4.adapter_info(0).unwrap();
    assert_eq!(info.node_id, 4);
    assert!(info.configured && info.link_operational);
    assert_eq!(info.number_of_links, 1);
    assert!(sci4.adapter_info(1).is_err());
    assert!(sci4.cache_line_size() >= 32);
}
