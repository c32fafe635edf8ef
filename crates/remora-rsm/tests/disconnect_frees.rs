//! A disconnect frees what the import held, even with a barrier never destroyed (the C
//! library keeps such a barrier in its table until `rsm_memseg_import_destroy_barrier`):
//! no descriptor of the process and no interrupt of the node outlives it, and the barrier's
//! calls then answer `BarrierUninitialized`. Alone in its test binary: it counts the
//! process's descriptors, which the node of the harness (in this process) shares.

use remora_rsm::*;
use remora_testkit::Harness;

const PAGE: usize = 4096;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The interrupts node 4 holds now.
fn node_interrupts(h: &Harness) -> usize {
    let s = remora_client::Session::open_control(&h.config(4)).unwrap();
    match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.interrupts.len(),
        other => panic!("unexpected answer {other:?}"),
    }
}

#[test]
fn disconnect_frees_descriptors_and_interrupts_whatever_barriers_remain() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let mem: &'static mut [u8] = Box::leak(vec![0u8; 2 * PAGE].into_boxed_slice());
    let skip = (PAGE - mem.as_ptr() as usize % PAGE) % PAGE;
    let export = ExportSegment::create(&ctl, &mut mem[skip..skip + PAGE], CreateFlags::default()).unwrap();
    let id = export.publish(0x40_0311, None).unwrap();

    let round = |kept: &mut Vec<Barrier>, i: u32| {
        let imp = ImportSegment::connect(&ctl, 4, id, Permission::READ_WRITE).unwrap();
        let b = imp.init_barrier(BarrierType::Segment).unwrap();
        b.open().unwrap();
        imp.put(0, &i.to_ne_bytes()).unwrap();
        imp.signal_post(false).unwrap();
        imp.disconnect().unwrap();
        kept.push(b);
    };
    // One round first: whatever the library and the node make once is made.
    let mut kept = Vec::new();
    round(&mut kept, 0);
    let (before, intrs) = (open_fds(), node_interrupts(&h));
    for i in 1..=100 {
        round(&mut kept, i);
    }
    let after = open_fds();
    assert!(after <= before + 2, "descriptors grew from {before} to {after} over 100 connect/disconnect");
    assert_eq!(node_interrupts(&h), intrs, "the node kept the disconnected imports' interrupts");

    // The barriers' imports are gone: their calls say the barrier is not initialised, and
    // destroy still frees them (once).
    let b = kept.pop().unwrap();
    assert!(b.import().is_none());
    assert_eq!(b.open(), Err(Error::BarrierUninitialized));
    assert_eq!(b.close(), Err(Error::BarrierUninitialized));
    assert_eq!(b.order(), Err(Error::BarrierUninitialized));
    b.destroy().unwrap();
    assert_eq!(b.destroy(), Err(Error::BarrierUninitialized));

    // The node keeps no interrupt of the disconnected imports: an export's post reaches no
    // importer, and a new import's signal still works.
    export.signal_post(false).unwrap();
    let imp = ImportSegment::connect(&ctl, 4, id, Permission::READ_WRITE).unwrap();
    export.signal_post(false).unwrap();
    imp.signal_wait(Some(std::time::Duration::from_secs(5))).unwrap();
    imp.disconnect().unwrap();
    drop(kept);
    export.unpublish().unwrap();
    export.destroy().unwrap();
}
