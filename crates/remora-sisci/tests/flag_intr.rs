//! Flag and conditional interrupts, named interrupts and shared data interrupts on one
//! host (node 4 owns, node 8 is the peer that stores, connects and triggers).

mod common;
use common::Sci as _;

use remora_sisci::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SHORT: Duration = Duration::from_millis(200);
const LONG: Duration = Duration::from_secs(10);

fn exported(dev: &Descriptor, id: u32, size: usize) -> LocalSegment {
    let s = LocalSegment::create(dev, Some(id), size, CreateFlags::default()).unwrap();
    s.prepare(0).unwrap();
    s.set_available(0).unwrap();
    s
}

/// The peer's ordinary map of node 4's segment `id`.
fn peer_map(dev: &Descriptor, id: u32, size: usize) -> (RemoteSegment, Map) {
    let r = RemoteSegment::connect(dev, 4, id, 0, Some(LONG)).unwrap();
    let m = r.map(0, size, None, MapFlags::default()).unwrap();
    (r, m)
}

fn store(m: &Map, off: usize, v: u32) {
    m.write(off, &v.to_ne_bytes()).unwrap();
}

#[test]
fn a_conditional_interrupt_fires_on_a_peers_store_only_while_enabled() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let seg = exported(&a, 30, 8192);
    let intr = Interrupt::register_flag(&seg, 0, 4100, true, false, None).unwrap();
    assert_eq!(intr.flag_enabled(), Some(false));
    let (_r, m) = peer_map(&b, 30, 8192);

    // Disabled: a store does not trigger, and is reported by the next enable.
    store(&m, 4100, 1);
    assert_eq!(intr.wait(Some(SHORT)).unwrap_err(), Error::Timeout);
    assert_eq!(intr.trigger_counter().unwrap(), 0);
    assert_eq!(intr.enable_conditional().unwrap_err(), Error::CondIntRace);
    assert_eq!(intr.flag_enabled(), Some(false));
    intr.enable_conditional().unwrap();
    assert_eq!(intr.flag_enabled(), Some(true));

    // Enabled: each store that changes the word is one trigger.
    for (i, v) in [2u32, 3, 4].into_iter().enumerate() {
        let t = Instant::now();
        store(&m, 4100, v);
        intr.wait(Some(LONG)).unwrap();
        assert!(t.elapsed() < Duration::from_secs(1), "seen after {:?}", t.elapsed());
        assert_eq!(intr.trigger_counter().unwrap(), i as u32 + 1);
    }
    // A store to another word is no trigger.
    store(&m, 4104, 9);
    assert_eq!(intr.wait(Some(SHORT)).unwrap_err(), Error::Timeout);
    assert_eq!(intr.trigger_counter().unwrap(), 3);
    // Enabling again restarts the counter.
    intr.enable_conditional().unwrap();
    assert_eq!(intr.trigger_counter().unwrap(), 0);
    // A store just before the disable still counts; the disable resets the counter.
    store(&m, 4100, 5);
    intr.disable_conditional().unwrap();
    assert_eq!(intr.trigger_counter().unwrap(), 0);
    intr.wait(Some(LONG)).unwrap();
    store(&m, 4100, 6);
    assert_eq!(intr.wait(Some(SHORT)).unwrap_err(), Error::Timeout);
    assert_eq!(intr.trigger_counter().unwrap(), 0);
    assert_eq!(intr.enable_conditional().unwrap_err(), Error::CondIntRace);
    intr.enable_conditional().unwrap();
    store(&m, 4100, 7);
    intr.wait(Some(LONG)).unwrap();
    assert_eq!(intr.trigger_counter().unwrap(), 1);

    // The segment is busy while the interrupt watches it.
    assert_eq!(seg.remove().unwrap_err(), Error::Busy);
    intr.remove().unwrap();
    assert!(matches!(intr.enable_conditional().unwrap_err(), Error::IllegalParameter(_)));
    assert!(matches!(intr.trigger_counter().unwrap_err(), Error::IllegalParameter(_)));
    m.unmap().unwrap();
    seg.remove().unwrap();
}

#[test]
fn a_flag_interrupt_without_the_condition_always_fires_and_runs_its_callback() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let seg = exported(&a, 31, 4096);
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let cb: InterruptCallback = Box::new(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
        CallbackAction::Continue
    });
    let intr = Interrupt::register_flag(&seg, 0, 0, false, true, Some(cb)).unwrap();
    assert_eq!(intr.flag_enabled(), Some(true));
    assert_eq!(intr.enable_conditional().unwrap_err(), Error::IllegalOperation);
    assert_eq!(intr.disable_conditional().unwrap_err(), Error::IllegalOperation);
    let (_r, m) = peer_map(&b, 31, 4096);
    for v in 1..=3u32 {
        store(&m, 0, v);
        let t = Instant::now();
        while calls.load(Ordering::SeqCst) < v && t.elapsed() < LONG {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(calls.load(Ordering::SeqCst), v);
    }
    assert_eq!(intr.trigger_counter().unwrap(), 3);
    intr.remove().unwrap();
    m.unmap().unwrap();
    seg.remove().unwrap();
}

#[test]
fn flag_interrupts_check_their_arguments() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let seg = exported(&a, 32, 4096);
    assert_eq!(Interrupt::register_flag(&seg, 0, 2, true, false, None).unwrap_err(), Error::OffsetAlignment);
    assert_eq!(Interrupt::register_flag(&seg, 0, 4096, true, false, None).unwrap_err(), Error::OutOfRange);
    assert_eq!(
        Interrupt::register_flag(&seg, 0, 4094, true, false, None).unwrap_err(),
        Error::OffsetAlignment
    );
    assert_eq!(Interrupt::register_flag(&seg, 1, 0, true, false, None).unwrap_err(), Error::NoSuchAdapter);
    let empty = LocalSegment::create(&a, Some(33), 4096, CreateFlags { empty: true, ..Default::default() });
    if let Ok(empty) = empty {
        assert_eq!(
            Interrupt::register_flag(&empty, 0, 0, true, false, None).unwrap_err(),
            Error::IllegalOperation
        );
    }
    // A plain interrupt is no flag interrupt.
    let plain = Interrupt::create(&a, 0, None, false, None).unwrap();
    assert_eq!(plain.enable_conditional().unwrap_err(), Error::IllegalOperation);
    assert_eq!(plain.trigger_counter().unwrap_err(), Error::IllegalOperation);
    assert_eq!(plain.flag_enabled(), None);
    plain.remove().unwrap();
    seg.remove().unwrap();
    assert!(matches!(
        Interrupt::register_flag(&seg, 0, 0, true, false, None).unwrap_err(),
        Error::IllegalParameter(_)
    ));
}

#[test]
fn named_interrupts_connect_by_the_names_number() {
    let h = common::Harness::new();
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let a2 = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let intr = Interrupt::create_named(&a, 0, b"gpu-doorbell", false, false, None).unwrap();
    let n = named_interrupt_number(b"gpu-doorbell");
    assert_eq!(intr.number(), n);
    assert_eq!(
        Interrupt::create_named(&a2, 0, b"gpu-doorbell", false, false, None).unwrap_err(),
        Error::IntnoUsed
    );
    assert!(matches!(
        Interrupt::create_named(&a, 0, b"", false, false, None),
        Err(Error::IllegalParameter(_))
    ));
    assert!(matches!(
        Interrupt::create_named(&a, 0, b"a\0b", false, false, None),
        Err(Error::IllegalParameter(_))
    ));
    let r = RemoteInterrupt::connect(&b, 4, 0, n, Some(LONG)).unwrap();
    r.trigger().unwrap();
    intr.wait(Some(LONG)).unwrap();
    // Shared names: every creator hears the trigger.
    let s1 = Interrupt::create_named(&a, 0, b"shared-name", false, true, None).unwrap();
    let s2 = Interrupt::create_named(&a2, 0, b"shared-name", false, true, None).unwrap();
    let rs = RemoteInterrupt::connect(&b, 4, 0, named_interrupt_number(b"shared-name"), Some(LONG)).unwrap();
    rs.trigger().unwrap();
    s1.wait(Some(LONG)).unwrap();
    s2.wait(Some(LONG)).unwrap();
    r.disconnect().unwrap();
    rs.disconnect().unwrap();
    intr.remove().unwrap();
    s1.remove().unwrap();
    s2.remove().unwrap();
}

#[test]
fn shared_data_interrupts_deliver_every_payload_to_every_creator() {
    let h = common::Harness::new();
    let a1 = Descriptor::open(&h.sci(4)).unwrap();
    let a2 = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let d1 = DataInterrupt::create_with(&a1, 0, Some(900), true, None).unwrap();
    let d2 = DataInterrupt::create_with(&a2, 0, Some(900), true, None).unwrap();
    assert_eq!(d2.number(), 900);
    // Not joined without the flag, and a plain data interrupt's number is not shared.
    assert_eq!(DataInterrupt::create(&a1, 0, Some(900), None).unwrap_err(), Error::IntnoUsed);
    let lone = DataInterrupt::create(&a1, 0, Some(901), None).unwrap();
    assert_eq!(DataInterrupt::create_with(&a2, 0, Some(901), true, None).unwrap_err(), Error::IntnoUsed);
    // Plain interrupts have numbers of their own.
    let plain = Interrupt::create_with(&a1, 0, Some(900), false, true, None).unwrap();
    // From another node of the host and from this node.
    let r = RemoteDataInterrupt::connect(&b, 4, 0, 900, Some(LONG)).unwrap();
    let own = RemoteDataInterrupt::connect(&a1, 4, 0, 900, Some(LONG)).unwrap();
    r.trigger(b"first").unwrap();
    own.trigger(b"second").unwrap();
    let mut buf = [0u8; MAX_DATA_INTERRUPT];
    for d in [&d1, &d2] {
        let n = d.wait(&mut buf, Some(LONG)).unwrap();
        assert_eq!(&buf[..n], b"first");
        let n = d.wait(&mut buf, Some(LONG)).unwrap();
        assert_eq!(&buf[..n], b"second");
    }
    assert_eq!(plain.wait(Some(SHORT)).unwrap_err(), Error::Timeout);
    // A member that leaves stops hearing; the last one frees the number.
    d1.remove().unwrap();
    r.trigger(&[7u8; MAX_DATA_INTERRUPT]).unwrap();
    let n = d2.wait(&mut buf, Some(LONG)).unwrap();
    assert_eq!(&buf[..n], &[7u8; MAX_DATA_INTERRUPT][..]);
    d2.remove().unwrap();
    assert_eq!(r.trigger(b"late").unwrap_err(), Error::NoSuchIntno);
    r.disconnect().unwrap();
    own.disconnect().unwrap();
    let again = DataInterrupt::create(&a1, 0, Some(900), None).unwrap();
    again.remove().unwrap();
    lone.remove().unwrap();
    plain.remove().unwrap();
}
