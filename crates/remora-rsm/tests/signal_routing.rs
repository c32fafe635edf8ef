//! Signals reach only the party they are meant for: an export's post reaches the importer
//! connected now (not an earlier one's interrupt number), and an import whose export is
//! gone fails its post instead of signalling whatever took the exporter's number.

use remora_rsm::*;
use remora_testkit::Harness;
use std::time::Duration;

use remora_testkit::data::leaked_pages as pages;

#[test]
fn an_export_post_reaches_the_importer_connected_after_another_left() {
    let h = Harness::new();
    for node in [4, 8] {
        let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
        let export = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
        let id = export.publish(0, None).unwrap();
        let ictl = Controller::with_config("remora0", h.config(node)).unwrap();
        let a = ImportSegment::connect(&ictl, 4, id, Permission::READ_WRITE).unwrap();
        export.signal_post(false).unwrap();
        a.signal_wait(Some(Duration::from_secs(5))).unwrap();
        a.disconnect().unwrap();
        // As `rsm_memseg_import_disconnect` frees the handle: its interrupt goes.
        drop(a);
        let b = ImportSegment::connect(&ictl, 4, id, Permission::READ_WRITE).unwrap();
        export.signal_post(false).unwrap();
        assert_eq!(b.signal_wait(Some(Duration::from_secs(5))), Ok(()), "node {node}: B gets the post");
        b.disconnect().unwrap();
        export.destroy().unwrap();
    }
}

#[test]
fn an_import_of_a_destroyed_export_never_signals_a_newer_one() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    for node in [4, 8] {
        let e1 = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
        let id = e1.publish(0, None).unwrap();
        let ictl = Controller::with_config("remora0", h.config(node)).unwrap();
        let a = ImportSegment::connect(&ictl, 4, id, Permission::READ_WRITE).unwrap();
        e1.destroy().unwrap();
        // As `rsm_memseg_export_destroy` frees the handle: its interrupt goes.
        drop(e1);
        let e2 = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
        e2.publish(0, None).unwrap();
        assert_eq!(a.signal_post(false), Err(Error::ConnAborted), "node {node}: the export is gone");
        assert_eq!(
            e2.signal_wait(Some(Duration::from_millis(300))),
            Err(Error::Timeout),
            "node {node}: an unrelated export got the stale import's post"
        );
        e2.destroy().unwrap();
    }
}

#[test]
fn an_import_whose_outbox_was_connected_fails_once_the_export_is_gone() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let e1 = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
    let id = e1.publish(0, None).unwrap();
    let a = ImportSegment::connect(&ctl, 4, id, Permission::READ_WRITE).unwrap();
    a.signal_post(false).unwrap();
    e1.signal_wait(Some(Duration::from_secs(5))).unwrap();
    e1.destroy().unwrap();
    let e2 = ExportSegment::create(&ctl, pages(1), CreateFlags::default()).unwrap();
    e2.publish(0, None).unwrap();
    assert_eq!(a.signal_post(false), Err(Error::ConnAborted));
    assert_eq!(e2.signal_wait(Some(Duration::from_millis(300))), Err(Error::Timeout));
}
