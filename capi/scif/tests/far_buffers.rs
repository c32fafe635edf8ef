//! `scif_vwriteto`/`scif_vreadfrom` with buffers in maps of another host's memory, through
//! the C entry points: the source of a `vwriteto` in a SISCI map of a far segment that this
//! process never touched moves the segment's bytes, a `vreadfrom` into it fills it, and a
//! `vreadfrom` into a read-only `scif_mmap` of far windows answers `EFAULT` (no crash).
//! Two nodes of this host joined over TCP on loopback, as two hosts are.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use remora_scif::{Endpoint, Prot, Scif, UserRegion};
use remora_sisci::{CreateFlags, Descriptor, LocalSegment, MapFlags, RemoteSegment, Sisci};
use remora_testkit::{daemon_path, Harness};
use scif::*;
use std::ffi::c_void;
use std::time::{Duration, Instant};

const PG: usize = 4096;
const LEN: usize = 4 * PG;

fn anon(len: usize) -> UserRegion {
    let v = Box::leak(vec![0u8; len + PG].into_boxed_slice());
    let start = (PG - (v.as_ptr() as usize % PG)) % PG;
    UserRegion::from_static(&mut v[start..start + len])
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn retried<T, E: std::fmt::Debug>(mut f: impl FnMut() -> Result<T, E>) -> T {
    let t = Instant::now();
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if t.elapsed() > Duration::from_secs(10) => panic!("still failing after 10 s: {e:?}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[test]
fn rma_buffers_in_far_maps_move_the_right_bytes_and_a_read_only_one_is_efault() {
    if let Err(e) = remora_sys::uffd::Uffd::new() {
        return eprintln!("skipped: userfaultfd unavailable here ({e}): no maps of another host's memory");
    }
    let h = Harness::with_cluster(&[4, 8], true);
    // libscif of this process is node 4 (its configuration comes from the environment).
    // Set before any thread of this test reads the environment; the binary holds this
    // one test.
    std::env::set_var("REMORA_RUNTIME_DIR", h.runtime_dir());
    std::env::set_var("REMORA_NODE", "4");
    std::env::set_var("REMORA_DAEMON", daemon_path());
    std::env::set_var("REMORA_CLUSTER", h.cluster.as_ref().unwrap());
    std::env::remove_var("REMORA_NO_SPAWN");
    // Node 8: a SISCI segment holding a pattern, and a SCIF listener with a window.
    let pattern: Vec<u8> = (0..LEN).map(|i| (i % 241) as u8 ^ 0x5a).collect();
    let d8 = Descriptor::open(&Sisci::with_config(h.config(8))).unwrap();
    let seg = LocalSegment::create(&d8, Some(31), LEN, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    let home = seg.map(0, LEN, None, MapFlags::default()).unwrap();
    home.write(0, &pattern).unwrap();
    let s8 = Scif::with_config(h.config(8));
    let l = Endpoint::open(&s8).unwrap();
    let port = l.bind(0).unwrap();
    l.listen(1).unwrap();
    let accepter = std::thread::spawn(move || l.accept(true).unwrap().0);

    // Node 4 (this process): the far segment mapped through SISCI, not touched.
    let d4 = Descriptor::open(&Sisci::with_config(h.config(4))).unwrap();
    let far = retried(|| RemoteSegment::connect(&d4, 8, 31, 0, Some(Duration::from_secs(10))));
    assert!(!far.is_on_this_host());
    let fmap = far.map(0, LEN, None, MapFlags::default()).unwrap();
    assert!(fmap.dsm_direct().is_some(), "a map of another host's segment is a DSM map");

    let epd = scif_open();
    assert!(epd >= 0);
    let dst = ScifPortId { node: 8, port };
    // SAFETY: `dst` is a live scif_portID.
    assert!(unsafe { scif_connect(epd, &dst) } >= 0, "connect: errno {}", errno());
    let peer = accepter.join().unwrap();
    let window = anon(LEN);
    let woff = peer.register(window, 0, Prot::RW, true).unwrap();
    let flags = 0;

    // vwriteto from the untouched SISCI far map: the segment's bytes land in the window.
    // SAFETY: the map's LEN bytes are this process's, mapped readable.
    let r = unsafe { scif_vwriteto(epd, fmap.as_ptr().cast::<c_void>(), LEN, woff as i64, flags) };
    assert_eq!(r, 0, "vwriteto from a SISCI map of a far segment: errno {}", errno());
    let mut got = vec![0u8; LEN];
    window.read(0, &mut got).unwrap();
    assert!(got == pattern, "the far segment's bytes reached the window");

    // vreadfrom into the (writable) SISCI far map: the window's bytes come back into it.
    let other: Vec<u8> = (0..LEN).map(|i| (i % 13) as u8 + 1).collect();
    window.write(0, &other).unwrap();
    // SAFETY: the map's LEN bytes are this process's, mapped writable; no reference to
    // them is held.
    let r = unsafe { scif_vreadfrom(epd, fmap.as_ptr().cast::<c_void>(), LEN, woff as i64, flags) };
    assert_eq!(r, 0, "vreadfrom into a SISCI map of a far segment: errno {}", errno());
    let mut back = vec![0u8; LEN];
    fmap.read(0, &mut back).unwrap();
    assert!(back == other, "the window's bytes landed in the far map");

    // A read-only scif_mmap of the far window: a source, never a destination.
    // SAFETY: no fixed address: nothing of the process is replaced.
    let ro = unsafe { scif_mmap(std::ptr::null_mut(), LEN, SCIF_PROT_READ, 0, epd, woff as i64) };
    assert_ne!(ro as usize, usize::MAX, "scif_mmap of the far window: errno {}", errno());
    // SAFETY: `ro` maps LEN bytes; the call must refuse to write them.
    let r = unsafe { scif_vreadfrom(epd, ro, LEN, woff as i64, flags) };
    assert_eq!((r, errno()), (-1, 14), "vreadfrom into a read-only far map is EFAULT");
    // SAFETY: `ro` maps LEN readable bytes.
    let r = unsafe { scif_vwriteto(epd, ro.cast::<u8>().add(PG).cast(), PG, woff as i64, flags) };
    assert_eq!(r, 0, "vwriteto from a read-only far map: errno {}", errno());
    window.read(0, &mut got[..PG]).unwrap();
    assert!(got[..PG] == other[PG..2 * PG], "the far map's second page moved to the window's first");
    // SAFETY: `ro` is the map scif_mmap returned, LEN bytes.
    assert_eq!(unsafe { scif_munmap(ro, LEN) }, 0);
    assert_eq!(scif_close(epd), 0);
    drop(peer);
}
