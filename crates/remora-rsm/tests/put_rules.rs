//! `put`/`get` as the C library makes them on this host (`put_needing_barrier`,
//! `get_needing_barrier`): Solaris's checks in their order under one lock, the barrier
//! rule of implicit mode, the bytes through the library's own map of the export's memory,
//! and the loss of the export seen by the next access.

use remora_rsm::*;
use remora_testkit::Harness;
use std::time::Duration;

const PAGE: usize = 4096;

use remora_testkit::data::leaked_pages as pages;

#[test]
fn puts_and_gets_keep_the_checks_order_and_the_barrier_rule() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let export = ExportSegment::create(&ctl, pages(2), CreateFlags::default()).unwrap();
    let id = export.publish(0x40_0301, Some(&[AccessEntry { node: 8, perm: 0o666 }])).unwrap();
    let c8 = Controller::with_config("remora0", h.config(8)).unwrap();
    let imp = ImportSegment::connect(&c8, 4, id, Permission::READ_WRITE).unwrap();
    let mut out = [0u8; 8];

    // Implicit mode (the default) without a barrier: refused, after the range.
    assert_eq!(imp.put_needing_barrier(8, &7u64.to_ne_bytes()), Err(Error::BarrierUninitialized));
    assert_eq!(imp.get_needing_barrier(8, &mut out), Err(Error::BarrierUninitialized));
    assert_eq!(imp.put_needing_barrier(2 * PAGE, &[1; 8]), Err(Error::BadLength));
    assert_eq!(imp.get_needing_barrier(2 * PAGE - 4, &mut out), Err(Error::BadLength));
    // The plain forms have no such rule.
    imp.put(8, &1u64.to_ne_bytes()).unwrap();

    // Explicit mode needs no barrier for the access itself.
    imp.set_mode(BarrierMode::Explicit).unwrap();
    imp.put_needing_barrier(16, &2u64.to_ne_bytes()).unwrap();
    imp.set_mode(BarrierMode::Implicit).unwrap();

    // A map narrows the range: outside it is BadOffset, before the barrier rule (no
    // barrier yet); inside it the barrier rule still holds.
    imp.map(None, MapAttr::None, Permission::READ_WRITE, 0, PAGE).unwrap();
    assert_eq!(imp.put_needing_barrier(PAGE, &[1; 8]), Err(Error::BadOffset));
    assert_eq!(imp.get_needing_barrier(PAGE, &mut out), Err(Error::BadOffset));
    assert_eq!(imp.put_needing_barrier(0, &[1; 8]), Err(Error::BarrierUninitialized));
    imp.unmap().unwrap();

    let bar = imp.init_barrier(BarrierType::Segment).unwrap();
    for i in 0..64u64 {
        imp.put_needing_barrier(8 * (i as usize % 32), &(1000 + i).to_ne_bytes()).unwrap();
    }
    imp.get_needing_barrier(8, &mut out).unwrap();
    assert_eq!(u64::from_ne_bytes(out), 1033);
    // The bytes are in the export's memory: a second import reads them.
    let other = ImportSegment::connect(&c8, 4, id, Permission::READ).unwrap();
    other.get(0, &mut out).unwrap();
    assert_eq!(u64::from_ne_bytes(out), 1032);

    // A read-only import: PermDenied first.
    assert_eq!(other.put_needing_barrier(2 * PAGE, &[1; 8]), Err(Error::PermDenied));

    // Once the export is gone the next access says so.
    export.unpublish().unwrap();
    let t = std::time::Instant::now();
    while imp.put_needing_barrier(0, &[3; 8]).is_ok() {
        assert!(t.elapsed() < Duration::from_secs(20), "puts still pass after unpublish");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(imp.put_needing_barrier(0, &[3; 8]), Err(Error::ConnAborted));
    assert_eq!(imp.get_needing_barrier(0, &mut out), Err(Error::ConnAborted));
    bar.destroy().unwrap();
    imp.disconnect().unwrap();
    assert_eq!(imp.put_needing_barrier(0, &[3; 8]), Err(Error::BadSegment));
    assert_eq!(imp.get_needing_barrier(0, &mut out), Err(Error::BadSegment));
}

#[test]
fn the_loss_of_one_import_leaves_the_others_of_the_session_working() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let acl = [AccessEntry { node: 8, perm: 0o666 }];
    let gone = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
    let gone_id = gone.publish(0x40_0311, Some(&acl)).unwrap();
    let kept = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
    let kept_id = kept.publish(0x40_0312, Some(&acl)).unwrap();
    // Both imports on one controller: one session, as a C program's imports share.
    let c8 = Controller::with_config("remora0", h.config(8)).unwrap();
    let lost = ImportSegment::connect(&c8, 4, gone_id, Permission::READ_WRITE).unwrap();
    let alive = ImportSegment::connect(&c8, 4, kept_id, Permission::READ_WRITE).unwrap();
    let (_b1, _b2) =
        (lost.init_barrier(BarrierType::Segment).unwrap(), alive.init_barrier(BarrierType::Segment).unwrap());
    alive.put_needing_barrier(0, &1u64.to_ne_bytes()).unwrap();

    gone.unpublish().unwrap();
    let t = std::time::Instant::now();
    while lost.put_needing_barrier(0, &[3; 8]).is_ok() {
        assert!(t.elapsed() < Duration::from_secs(20), "puts still pass after unpublish");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut out = [0u8; 8];
    for i in 0..100u64 {
        alive.put_needing_barrier(8 * (i as usize % 16), &(500 + i).to_ne_bytes()).unwrap();
        assert_eq!(lost.put_needing_barrier(0, &[3; 8]), Err(Error::ConnAborted));
        assert_eq!(lost.get_needing_barrier(0, &mut out), Err(Error::ConnAborted));
    }
    alive.get_needing_barrier(8 * 3, &mut out).unwrap();
    assert_eq!(u64::from_ne_bytes(out), 599);
    assert!(lost.is_lost() && !alive.is_lost());
    // A later import of the session works too.
    let again = ImportSegment::connect(&c8, 4, kept_id, Permission::READ).unwrap();
    again.get(8 * 3, &mut out).unwrap();
    assert_eq!(u64::from_ne_bytes(out), 599);
}

#[test]
fn region_puts_and_gets_check_before_they_touch_the_callers_memory() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let export = ExportSegment::create(&ctl, pages(2), CreateFlags::default()).unwrap();
    let id = export.publish(0x40_0321, Some(&[AccessEntry { node: 8, perm: 0o666 }])).unwrap();
    let c8 = Controller::with_config("remora0", h.config(8)).unwrap();
    let imp = ImportSegment::connect(&c8, 4, id, Permission::READ_WRITE).unwrap();
    let src: &'static mut [u8] = pages(3);
    for (i, b) in src.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let src = UserRegion::from_static(src);
    let dst = UserRegion::from_static(pages(3));

    // The same checks in the same order as the slice forms, before any byte moves.
    assert_eq!(imp.put_region_needing_barrier(0, src.sub(0, 8)), Err(Error::BarrierUninitialized));
    assert_eq!(imp.put_region_needing_barrier(PAGE, src), Err(Error::BadLength));
    assert_eq!(imp.get_region_needing_barrier(PAGE, dst), Err(Error::BadLength));
    imp.map(None, MapAttr::None, Permission::READ_WRITE, 0, PAGE).unwrap();
    assert_eq!(imp.put_region_needing_barrier(PAGE - 4, src.sub(0, 8)), Err(Error::BadOffset));
    imp.unmap().unwrap();
    let _bar = imp.init_barrier(BarrierType::Segment).unwrap();
    assert_eq!(imp.put_region_needing_barrier(8, src), Err(Error::BadLength));

    // Through: the bytes land in the export and come back.
    imp.put_region_needing_barrier(100, src.sub(7, 5000)).unwrap();
    imp.get_region_needing_barrier(0, dst.sub(1, 2 * PAGE)).unwrap();
    let mut back = vec![0u8; 5000];
    dst.read(101, &mut back).unwrap();
    let want: Vec<u8> = (7..5007).map(|i| (i % 251) as u8).collect();
    assert_eq!(back, want);
    let mut head = [9u8; 8];
    dst.read(1, &mut head).unwrap();
    assert_eq!(head, [0; 8]);

    let ro = ImportSegment::connect(&c8, 4, id, Permission::READ).unwrap();
    assert_eq!(ro.put_region_needing_barrier(0, src.sub(0, 8)), Err(Error::PermDenied));
    imp.disconnect().unwrap();
    assert_eq!(imp.put_region_needing_barrier(0, src.sub(0, 8)), Err(Error::BadSegment));
    assert_eq!(imp.get_region_needing_barrier(0, dst.sub(0, 8)), Err(Error::BadSegment));
}
