//! The RSM safe API on one host: exports, imports on this node and on another node of the
//! host, put/get, maps, barriers, signals, access control and the error codes.

use remora_rsm::*;
use remora_testkit::Harness;
use std::time::Duration;

const PAGE: usize = 4096;

use remora_testkit::data::leaked_pages as pages;

#[test]
fn export_publish_import_put_get_map() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let mem = pages(4);
    for (i, b) in mem.iter_mut().enumerate() {
        *b = (i * 7) as u8;
    }
    let addr = mem.as_ptr() as usize;
    let export =
        ExportSegment::create(&ctl, mem, CreateFlags { allow_rebind: true, dont_wait: false }).unwrap();
    assert_eq!(export.publish(0x100, None), Err(Error::ReservedSegId));
    assert_eq!(export.publish(0x8000_0001, None), Err(Error::ReservedSegId));
    let id = export.publish(0x40_0001, None).unwrap();
    assert_eq!(id, 0x40_0001);
    assert_eq!(export.publish(0x40_0002, None), Err(Error::AlreadyPublished));

    // This node, and another node of this host (zero-copy both).
    for node in [4, 8] {
        let ictl = Controller::with_config("sci0", h.config(node)).unwrap();
        let imp = ImportSegment::connect(&ictl, 4, id, Permission::READ_WRITE).unwrap();
        assert_eq!(imp.size(), 4 * PAGE);
        let mut got = [0u8; 16];
        imp.get(100, &mut got).unwrap();
        assert_eq!(got.to_vec(), (100..116).map(|i| (i * 7) as u8).collect::<Vec<_>>());
        imp.put(PAGE, b"remora rsm").unwrap();
        let mut back = [0u8; 10];
        imp.get(PAGE, &mut back).unwrap();
        assert_eq!(&back, b"remora rsm");
        let p = imp.map(None, MapAttr::None, Permission::READ, 0, 4 * PAGE).unwrap();
        assert_ne!(p, 0);
        assert_eq!(imp.map(None, MapAttr::None, Permission::READ, 0, PAGE), Err(Error::AlreadyMapped));
        assert_eq!(imp.disconnect(), Err(Error::StillMapped));
        imp.unmap().unwrap();
        assert_eq!(imp.unmap(), Err(Error::NotMapped));
        assert_eq!(imp.get(4 * PAGE, &mut got), Err(Error::BadLength));
        imp.disconnect().unwrap();
    }
    let _ = addr;
    export.unpublish().unwrap();
    assert_eq!(export.unpublish(), Err(Error::NotPublished));
    export.destroy().unwrap();
}

#[test]
fn signals_go_both_ways_and_poll_wakes() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let export = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
    let id = export.publish(0, None).unwrap();
    assert!(id >= AUTO_ID_BASE, "the node picks ids from 0x80000000: {id:#x}");
    let ictl = Controller::with_config("remora0", h.config(8)).unwrap();
    let imp = ImportSegment::connect(&ictl, 4, id, Permission::READ_WRITE).unwrap();
    assert_eq!(export.signal_wait(Some(Duration::from_millis(30))), Err(Error::Timeout));
    imp.signal_post(false).unwrap();
    imp.signal_post(false).unwrap();
    export.signal_wait(Some(Duration::from_secs(5))).unwrap();
    export.signal_wait(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(
        export.signal_wait(Some(Duration::from_millis(10))),
        Err(Error::Timeout),
        "each post is one event"
    );
    // NO_ACCUMULATE drops a post while one is pending.
    imp.signal_post(true).unwrap();
    imp.signal_post(true).unwrap();
    export.signal_wait(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(export.signal_wait(Some(Duration::from_millis(10))), Err(Error::Timeout));
    // The exporter's post reaches the importer; its poll descriptor wakes.
    let fd = imp.pollfd().unwrap();
    export.signal_post(false).unwrap();
    let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
    let n = rustix::event::poll(&mut fds, Some(&rustix::time::Timespec { tv_sec: 5, tv_nsec: 0 })).unwrap();
    assert_eq!(n, 1);
    assert!(imp.signal_take());
    assert_eq!(imp.disconnect(), Err(Error::PollFdInUse));
    drop(fd);
    imp.release_pollfd().unwrap();
    imp.disconnect().unwrap();
    export.destroy().unwrap();
}

#[test]
fn barriers_report_a_lost_export_and_unpublish_cuts_importers_off() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let export = ExportSegment::create(&ctl, pages(2), CreateFlags::default()).unwrap();
    let id = export.publish(0x40_0010, None).unwrap();
    let ictl = Controller::with_config("remora0", h.config(8)).unwrap();
    let imp = ImportSegment::connect(&ictl, 4, id, Permission::READ_WRITE).unwrap();
    let bar = imp.init_barrier(BarrierType::Node).unwrap();
    assert_eq!(bar.close(), Err(Error::BarrierNotOpened));
    imp.set_mode(BarrierMode::Explicit).unwrap();
    bar.open().unwrap();
    imp.put(0, &[1; 64]).unwrap();
    bar.close().unwrap();
    export.unpublish().unwrap();
    // In explicit mode the failure waits for the close, which must not pass in silence once
    // the cut has reached the importer (an event, within microseconds on this host).
    let t = std::time::Instant::now();
    let closed = loop {
        bar.open().unwrap();
        let _ = imp.put(0, &[2; 64]);
        match bar.close() {
            Ok(()) if t.elapsed() < Duration::from_secs(2) => std::thread::sleep(Duration::from_millis(1)),
            other => break other,
        }
    };
    assert_eq!(closed, Err(Error::ConnAborted));
    imp.set_mode(BarrierMode::Implicit).unwrap();
    let t = std::time::Instant::now();
    while imp.put(0, &[3; 8]).is_ok() {
        assert!(t.elapsed() < Duration::from_secs(2), "puts still pass after unpublish");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(imp.put(0, &[3; 8]), Err(Error::ConnAborted));
    // The id is free again at once.
    let again = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
    assert_eq!(again.publish(0x40_0010, None), Ok(0x40_0010));
    let other = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
    assert_eq!(other.publish(0x40_0010, None), Err(Error::SegIdInUse));
    bar.destroy().unwrap();
    imp.disconnect().unwrap();
}

#[test]
fn access_lists_and_read_only_imports() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let export = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
    let acl = [AccessEntry { node: 8, perm: 0o444 }];
    let id = export.publish(0x40_0020, Some(&acl)).unwrap();
    let c8 = Controller::with_config("remora0", h.config(8)).unwrap();
    let c12 = Controller::with_config("remora0", h.config(12)).unwrap();
    assert_eq!(ImportSegment::connect(&c12, 4, id, Permission::READ).unwrap_err(), Error::NotPublishedToNode);
    assert_eq!(ImportSegment::connect(&c8, 4, id, Permission::READ_WRITE).unwrap_err(), Error::PermDenied);
    assert_eq!(ImportSegment::connect(&c8, 4, id, Permission(0o100)).unwrap_err(), Error::PermDenied);
    assert_eq!(ImportSegment::connect(&c8, 4, 0x40_0099, Permission::READ).unwrap_err(), Error::NotPublished);
    let ro = ImportSegment::connect(&c8, 4, id, Permission::READ).unwrap();
    assert!(!ro.is_writable());
    assert_eq!(ro.put(0, b"x"), Err(Error::PermDenied));
    assert_eq!(ro.map(None, MapAttr::None, Permission::READ_WRITE, 0, PAGE), Err(Error::BadPerms));
    ro.map(None, MapAttr::None, Permission::READ, 0, PAGE).unwrap();
    ro.unmap().unwrap();
    let mut b = [0u8; 4];
    ro.get(0, &mut b).unwrap();
    // Republish widens the list for later connects.
    export
        .republish(Some(&[AccessEntry { node: 8, perm: 0o666 }, AccessEntry { node: 12, perm: 0o666 }]))
        .unwrap();
    ImportSegment::connect(&c12, 4, id, Permission::READ_WRITE).unwrap();
    assert_eq!(
        export.publish(0x40_0021, Some(&[AccessEntry { node: 8, perm: 0o1000 }])),
        Err(Error::AlreadyPublished)
    );
    assert_eq!(Controller::get("nosuch0").unwrap_err(), Error::ControllerNotPresent);
    assert_eq!(Controller::with_config("remora1", h.config(4)).unwrap_err(), Error::ControllerNotPresent);
}

#[test]
fn rebind_is_seen_through_existing_maps_and_putv_getv() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let first = pages(2);
    first.fill(0x11);
    let export =
        ExportSegment::create(&ctl, first, CreateFlags { allow_rebind: true, dont_wait: false }).unwrap();
    let id = export.publish(0x40_0030, None).unwrap();
    let imp = ImportSegment::connect(&ctl, 4, id, Permission::READ_WRITE).unwrap();
    let second = pages(2);
    second.fill(0x22);
    export.rebind(UserRegion::from_static(second), 0).unwrap();
    let mut b = [0u8; 8];
    imp.get(PAGE + 3, &mut b).unwrap();
    assert_eq!(b, [0x22; 8], "the import sees the new memory");
    let fixed = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
    assert_eq!(fixed.rebind(UserRegion::from_static(pages(1)), 0), Err(Error::RebindNotAllowed));

    // putv/getv with a region and a local-memory handle.
    let src = pages(1);
    src[..4].copy_from_slice(b"abcd");
    src[100..104].copy_from_slice(b"wxyz");
    let src = UserRegion::from_static(src);
    let handle = LocalMemory::new(src).unwrap();
    let v = [
        IoVec { local: LocalSide::Region(src), local_offset: 0, remote_offset: 10, len: 4 },
        IoVec { local: LocalSide::Handle(handle), local_offset: 100, remote_offset: 5000, len: 4 },
    ];
    let (r, residual) = imp.putv(&v, true, false);
    r.unwrap();
    assert_eq!(residual, 0);
    export.signal_wait(Some(Duration::from_secs(5))).unwrap();
    let dst = UserRegion::from_static(pages(1));
    let g = [
        IoVec { local: LocalSide::Region(dst), local_offset: 0, remote_offset: 10, len: 4 },
        IoVec { local: LocalSide::Region(dst), local_offset: 4, remote_offset: 5000, len: 4 },
    ];
    let (r, residual) = imp.getv(&g, false, false);
    r.unwrap();
    assert_eq!(residual, 0);
    let mut out = [0u8; 8];
    dst.read(0, &mut out).unwrap();
    assert_eq!(&out, b"abcdwxyz");
    let (r, residual) = imp.getv(&[], false, false);
    assert_eq!((r, residual), (Err(Error::BadSgio), 0));
}
