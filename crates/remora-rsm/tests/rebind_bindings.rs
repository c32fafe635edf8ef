//! `rsm_memseg_export_rebind` of parts of a segment: exactly the memory a rebind replaces
//! becomes the program's own again, whatever was bound before, and destroy gives back
//! every binding.

use remora_rsm::*;
use remora_sys::user_memory::UserRegion;
use remora_testkit::Harness;

const PAGE: usize = 4096;

/// Page-aligned memory that lives for the rest of the test process, filled with `byte`.
fn pages(n: usize, byte: u8) -> UserRegion {
    let mem: &'static mut [u8] = Box::leak(vec![byte; (n + 1) * PAGE].into_boxed_slice());
    let skip = (PAGE - mem.as_ptr() as usize % PAGE) % PAGE;
    UserRegion::from_static(&mut mem[skip..skip + n * PAGE])
}

fn at(region: &UserRegion, off: usize) -> u8 {
    let mut b = [0u8];
    region.read(off, &mut b).unwrap();
    b[0]
}

fn seg(imp: &ImportSegment, off: usize) -> u8 {
    let mut b = [0u8];
    imp.get(off, &mut b).unwrap();
    b[0]
}

#[test]
fn partial_rebinds_give_back_exactly_the_memory_they_replace() {
    let h = Harness::new();
    let ctl = Controller::with_config("remora0", h.config(4)).unwrap();
    let a = pages(2, b'a');
    let export =
        ExportSegment::create_region(&ctl, a, CreateFlags { allow_rebind: true, dont_wait: false }).unwrap();
    let id = export.publish(0, None).unwrap();
    let imp = ImportSegment::connect(&ctl, 4, id, Permission::READ_WRITE).unwrap();

    // Two partial rebinds of the same page: B, then C.
    let (b, c) = (pages(1, b'b'), pages(1, b'c'));
    export.rebind(b, 0).unwrap();
    export.rebind(c, 0).unwrap();
    assert_eq!(seg(&imp, 0), b'c');
    b.write(0, b"X").unwrap();
    assert_eq!((seg(&imp, 0), at(&c, 0)), (b'c', b'c'), "B is no longer bound");
    a.write(0, b"Y").unwrap();
    assert_eq!(seg(&imp, 0), b'c', "nor is A's first page");
    // A's second page is still bound.
    a.write(PAGE, b"Z").unwrap();
    assert_eq!(seg(&imp, PAGE), b'Z');

    // A full rebind replaces C and A's second page.
    let d = pages(2, b'd');
    export.rebind(d, 0).unwrap();
    assert_eq!((seg(&imp, 0), seg(&imp, PAGE)), (b'd', b'd'), "the segment took D's bytes");
    assert_eq!((at(&c, 0), at(&a, PAGE)), (b'c', b'Z'), "C and A kept theirs");
    c.write(0, b"1").unwrap();
    a.write(PAGE, b"2").unwrap();
    assert_eq!((seg(&imp, 0), seg(&imp, PAGE)), (b'd', b'd'), "C and A are the program's own");
    d.write(PAGE, b"3").unwrap();
    assert_eq!(seg(&imp, PAGE), b'3', "D is bound");

    // A partial rebind over part of D, then destroy: D's other page and E both go back.
    let e = pages(1, b'e');
    export.rebind(e, PAGE).unwrap();
    assert_eq!((seg(&imp, PAGE), at(&d, PAGE)), (b'e', b'3'));
    let m = imp.map(None, MapAttr::None, Permission::READ_WRITE, 0, 2 * PAGE).unwrap();
    assert_ne!(m, 0);
    let word = |off| imp.with_atomic(off, |w| w.load(std::sync::atomic::Ordering::SeqCst)).unwrap();
    let (before0, before1) = (word(0), word(PAGE));
    export.destroy().unwrap();
    d.write(0, &[0xee; 8]).unwrap();
    e.write(0, &[0xee; 8]).unwrap();
    assert_eq!((word(0), word(PAGE)), (before0, before1), "destroy gave back every binding");
    imp.unmap().unwrap();
}
