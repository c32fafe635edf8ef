//! The smallest end-to-end check: two nodes of one host share a segment.

mod common;
use common::Sci as _;
use remora_sisci::*;

#[test]
fn two_nodes_share_memory() {
    let h = common::Harness::new();
    let a = h.sci(4);
    let b = h.sci(8);
    let da = Descriptor::open(&a).unwrap();
    let db = Descriptor::open(&b).unwrap();
    let seg = LocalSegment::create(&da, Some(1), 8192, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    let r = RemoteSegment::connect(&db, 4, 1, 0, None).unwrap();
    assert_eq!(r.size(), 8192);
    let m = r.map(0, 8192, None, MapFlags::default()).unwrap();
    m.write(100, b"hi").unwrap();
    let lm = seg.map(0, 8192, None, MapFlags::default()).unwrap();
    let mut out = [0u8; 2];
    lm.read(100, &mut out).unwrap();
    assert_eq!(&out, b"hi");
}
