//! An import granted no read never reads the export: not by `get`, not by a map, and its
//! node hands it none of the export's memory (so no map of its own could read it either),
//! on this node, on another node of this host and on another host. What it was granted
//! (write) still works, through the node.

use remora_rsm::*;
use remora_testkit::Harness;

const PAGE: usize = 4096;

/// Page-aligned memory that lives for the rest of the test process, holding `text`.
fn secret(text: &[u8]) -> &'static mut [u8] {
    let mem: &'static mut [u8] = Box::leak(vec![0u8; 2 * PAGE].into_boxed_slice());
    let skip = (PAGE - mem.as_ptr() as usize % PAGE) % PAGE;
    let mem = &mut mem[skip..skip + PAGE];
    mem[..text.len()].copy_from_slice(text);
    mem
}

/// The checks on one importing node `node` of an export of node 4.
fn no_read_for(h: &Harness, node: u32, id_base: u32) {
    let ectl = Controller::with_config("remora0", h.config(4)).unwrap();
    let ictl = Controller::with_config("remora0", h.config(node)).unwrap();
    let export = ExportSegment::create(&ectl, secret(b"secret"), CreateFlags::default()).unwrap();
    // The access list names the importing node with no access at all.
    let id = export.publish(id_base, Some(&[AccessEntry { node, perm: 0 }])).unwrap();
    assert_eq!(
        ImportSegment::connect(&ictl, 4, id, Permission::READ).err(),
        Some(Error::PermDenied),
        "node {node}: read asked, none granted"
    );
    // Asking for nothing is admitted, as on Solaris, and holds nothing.
    let none = ImportSegment::connect(&ictl, 4, id, Permission::NONE).unwrap();
    assert!(!none.is_on_this_host(), "node {node}: the export's memory was handed to an import without read");
    assert_eq!(none.map(None, MapAttr::None, Permission::READ, 0, PAGE), Err(Error::BadPerms));
    assert_eq!(none.map(None, MapAttr::None, Permission::NONE, 0, PAGE), Err(Error::BadPerms));
    let mut buf = [0u8; 6];
    assert_eq!(none.get(0, &mut buf), Err(Error::PermDenied));
    assert_eq!(none.put(0, b"x"), Err(Error::PermDenied));
    none.disconnect().unwrap();

    // Write only: puts land, reads and maps are refused.
    export.republish(Some(&[AccessEntry { node, perm: 0o200 }])).unwrap();
    let w = ImportSegment::connect(&ictl, 4, id, Permission::WRITE).unwrap();
    assert!(!w.is_on_this_host(), "node {node}: the export's memory was handed to a write-only import");
    assert_eq!(w.map(None, MapAttr::None, Permission::READ, 0, PAGE), Err(Error::BadPerms));
    assert_eq!(w.map(None, MapAttr::None, Permission::WRITE, 0, PAGE), Err(Error::BadPerms));
    assert_eq!(w.get(0, &mut buf), Err(Error::PermDenied));
    let _barrier = w.init_barrier(BarrierType::Segment).unwrap();
    w.put(0, b"public").unwrap();
    w.disconnect().unwrap();

    // A reader granted read sees what the writer stored.
    export.republish(Some(&[AccessEntry { node, perm: 0o600 }])).unwrap();
    let r = ImportSegment::connect(&ictl, 4, id, Permission::READ).unwrap();
    r.get(0, &mut buf).unwrap();
    assert_eq!(&buf, b"public", "node {node}");
    r.disconnect().unwrap();
    export.unpublish().unwrap();
    export.destroy().unwrap();
}

#[test]
fn an_import_without_read_reads_nothing_on_this_node_and_another_of_this_host() {
    let h = Harness::new();
    no_read_for(&h, 4, 0x40_0301);
    no_read_for(&h, 8, 0x40_0302);
}

#[test]
fn an_import_without_read_reads_nothing_across_hosts() {
    let h = Harness::with_cluster(&[4, 8], true);
    no_read_for(&h, 8, 0x40_0303);
}
