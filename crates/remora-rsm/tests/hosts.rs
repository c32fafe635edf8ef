//! The RSM safe API across hosts (two nodes joined over TCP on loopback): `put`/`get` of
//! the program's memory named by region (what the C library uses across hosts) move every
//! byte both ways, at sizes on both sides of the engine's threshold and over several flow
//! frames; a read-only import refuses them; an unpublished export is reported.

use remora_rsm::*;
use remora_testkit::{checksum, pattern, Harness};
use std::time::Duration;

const PAGE: usize = 4096;
const MIB: usize = 1 << 20;

use remora_testkit::data::leaked_pages as pages;

/// A region of `len` fresh bytes of this process (not page-aligned on purpose).
fn region(len: usize) -> UserRegion {
    let mem: &'static mut [u8] = Box::leak(vec![0u8; len + 1].into_boxed_slice());
    UserRegion::from_static(&mut mem[1..])
}

#[test]
fn region_put_and_get_across_hosts_move_every_byte() {
    let h = Harness::with_cluster(&[4, 8], true);
    let ectl = Controller::with_config("remora0", h.config(4)).unwrap();
    let ictl = Controller::with_config("remora0", h.config(8)).unwrap();
    let export = ExportSegment::create(&ectl, pages(3 * MIB / PAGE), CreateFlags::default()).unwrap();
    let id = export.publish(0x40_0101, None).unwrap();
    let imp = ImportSegment::connect(&ictl, 4, id, Permission::READ_WRITE).unwrap();
    assert!(!imp.is_on_this_host());
    // 1 MiB, more than one flow frame at an odd offset, the threshold and just below it
    // (which goes through the node), and a small one.
    let cases = [(0, MIB), (12345, 2 * MIB + 777), (3 * PAGE, 64 << 10), (100, (64 << 10) - 1), (7, 5000)];
    for (k, (off, len)) in cases.into_iter().enumerate() {
        // Out: the region's bytes are in the export, as a `get` through the node sees them.
        let data = pattern(len, k as u64 + 1);
        let src = region(len);
        src.write(0, &data).unwrap();
        imp.put_region(off, src).unwrap();
        let mut seen = vec![0u8; len];
        imp.get(off, &mut seen).unwrap();
        assert_eq!(checksum(&seen), checksum(&data), "put of {len} bytes at {off}");
        // Back: bytes put through the node come back into a region.
        let other = pattern(len, k as u64 + 100);
        imp.put(off, &other).unwrap();
        let dst = region(len);
        imp.get_region(off, dst).unwrap();
        let mut got = vec![0u8; len];
        dst.read(0, &mut got).unwrap();
        assert_eq!(checksum(&got), checksum(&other), "get of {len} bytes at {off}");
    }
    // The range is checked before anything moves.
    assert_eq!(imp.put_region(3 * MIB - PAGE, region(2 * PAGE)), Err(Error::BadLength));
    let ro = ImportSegment::connect(&ictl, 4, id, Permission::READ).unwrap();
    assert_eq!(ro.put_region(0, region(MIB)), Err(Error::PermDenied));
    ro.get_region(0, region(MIB)).unwrap();
    ro.disconnect().unwrap();

    // Once the export is unpublished, large puts and gets fail (the cut reaches the
    // importer over the link), and never pass in silence.
    export.unpublish().unwrap();
    let t = std::time::Instant::now();
    let put = loop {
        match imp.put_region(0, region(MIB)) {
            Ok(()) if t.elapsed() < Duration::from_secs(5) => std::thread::sleep(Duration::from_millis(5)),
            other => break other,
        }
    };
    assert_eq!(put, Err(Error::ConnAborted));
    assert_eq!(imp.get_region(0, region(MIB)), Err(Error::ConnAborted));
    imp.disconnect().unwrap();
}
