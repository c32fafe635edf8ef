//! `scif_fence_signal` stores only into one window registered writable, as the kernel's
//! window query requires: a read-only window is `EPERM` and keeps its bytes, 8 bytes
//! that would run across a window's end are `ENXIO` and touch neither window. On one
//! host and with the peer on another.

mod common;
use common::*;
use remora_scif::*;
use remora_testkit::Harness;

const PG: usize = 4096;

/// Page-aligned, private anonymous memory that lives for the rest of the test process.
fn anon(len: usize) -> UserRegion {
    let v = Box::leak(vec![0u8; len + PG].into_boxed_slice());
    let start = (PG - (v.as_ptr() as usize % PG)) % PG;
    UserRegion::from_static(&mut v[start..start + len])
}

fn word(r: &UserRegion, off: usize) -> u64 {
    let mut b = [0u8; 8];
    r.read(off, &mut b).unwrap();
    u64::from_ne_bytes(b)
}

/// The pair of `h` (client on node 8, server on node 4) and the checks.
fn signal_targets(c: &Endpoint, s: &Endpoint) {
    const RO: u64 = 0x10_0000;
    const W1: u64 = 0x20_0000;
    let ro = anon(PG);
    ro.write(0, &[0x11; PG]).unwrap();
    let (w1, w2) = (anon(PG), anon(PG));
    let lro = anon(PG);
    s.register(ro, RO, Prot { read: true, write: false }, true).unwrap();
    s.register(w1, W1, Prot::RW, true).unwrap();
    s.register(w2, W1 + PG as u64, Prot::RW, true).unwrap();
    c.register(lro, RO, Prot { read: true, write: false }, true).unwrap();
    let own = anon(PG);
    c.register(own, W1, Prot::RW, true).unwrap();
    let me = FenceInit::SelfInit;
    // Into the peer's read-only window: EPERM, its bytes as they were.
    assert_eq!(c.fence_signal(None, Some((RO + 8, 0xdead_beef)), me).unwrap_err(), Error::Permission);
    assert_eq!(word(&ro, 8), 0x1111_1111_1111_1111, "the read-only window kept its bytes");
    // Into our own read-only window, with or without a good remote target.
    assert_eq!(c.fence_signal(Some((RO, 5)), None, me).unwrap_err(), Error::Permission);
    assert_eq!(c.fence_signal(Some((RO, 5)), Some((W1, 6)), me).unwrap_err(), Error::Permission);
    assert_eq!(word(&w1, 0), 0, "nothing stored when one target is refused");
    // Across the end of a window, into the next: ENXIO, neither window touched.
    let edge = W1 + PG as u64 - 4;
    assert_eq!(c.fence_signal(None, Some((edge, u64::MAX)), me).unwrap_err(), Error::NoWindow);
    assert_eq!(word(&w1, PG - 8), 0);
    assert_eq!(word(&w2, 0), 0);
    assert_eq!(c.fence_signal(None, Some((0x90_0000, 1)), me).unwrap_err(), Error::NoWindow);
    // Fine: inside one writable window, DWORD- and QWORD-aligned.
    c.fence_signal(Some((W1 + 12, 7)), Some((edge - 4, 0x0102_0304_0506_0708)), me).unwrap();
    assert_eq!(word(&own, 12), 7);
    assert_eq!(word(&w1, PG - 8), 0x0102_0304_0506_0708);
}

#[test]
fn a_fence_signal_needs_one_writable_window_on_one_host() {
    let h = Harness::new();
    let (c, s) = pair(&h, 8, 4);
    signal_targets(&c, &s);
}

#[test]
fn a_fence_signal_needs_one_writable_window_of_a_peer_on_another_host() {
    let h = over_tcp(&[4, 8]);
    wait_for_link(&h);
    let (c, s) = pair(&h, 8, 4);
    signal_targets(&c, &s);
}
