//! A window over the pages of many earlier windows: over 16 one-page windows that still
//! live (on every other page, and side by side), and again once they are gone, on two
//! nodes of one host and across hosts. The bytes every window sees stay the program's
//! memory: an RMA through one window lands in the program's memory and is seen through
//! every window over the page, and the program's stores are seen through all of them.

mod common;
use common::{pair, wait_for_link};
use remora_scif::*;
use remora_testkit::Harness;

const PAGE: usize = 4096;

/// Page-aligned, private anonymous memory that lives for the rest of the test process.
fn anon(len: usize) -> UserRegion {
    let v = Box::leak(vec![0u8; len + PAGE].into_boxed_slice());
    let start = (PAGE - (v.as_ptr() as usize % PAGE)) % PAGE;
    UserRegion::from_static(&mut v[start..start + len])
}

fn peek(r: &UserRegion, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    r.read(off, &mut v).unwrap();
    v
}

fn read(c: &Endpoint, off: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    c.vread_from(&mut v, off, RmaFlags::default()).unwrap();
    v
}

/// `s` registers one-page windows on every `step`-th page of `buf` (16 of them), then
/// one window `big` over all those pages; `c` is its peer. Every page's bytes are checked
/// through the small window, the big one and the program's memory.
fn over_small_windows(c: &Endpoint, s: &Endpoint, buf: &UserRegion, step: usize, small: u64, big: u64) {
    let pages = 15 * step + 1;
    let span = buf.sub(0, pages * PAGE);
    for k in 0..16 {
        let at = small + (k * PAGE) as u64;
        assert_eq!(s.register(buf.sub(k * step * PAGE, PAGE), at, Prot::RW, true).unwrap(), at);
    }
    buf.write(3 * step * PAGE + 10, b"before the big one").unwrap();
    assert_eq!(s.register(span, big, Prot::RW, true).unwrap(), big, "a window over 16 live windows");
    assert_eq!(&read(c, big + (3 * step * PAGE + 10) as u64, 18), b"before the big one");
    for k in 0..16 {
        let page = k * step * PAGE;
        let word = format!("small {k:2}");
        c.vwrite_to(word.as_bytes(), small + (k * PAGE) as u64 + 40, RmaFlags::default()).unwrap();
        assert_eq!(peek(buf, page + 40, 8), word.as_bytes(), "window {k}'s RMA in the program's memory");
        assert_eq!(
            read(c, big + page as u64 + 40, 8),
            word.as_bytes(),
            "window {k}'s RMA seen through the big one"
        );
        let word = format!("big   {k:2}");
        c.vwrite_to(word.as_bytes(), big + page as u64 + 80, RmaFlags::default()).unwrap();
        assert_eq!(peek(buf, page + 80, 8), word.as_bytes());
        assert_eq!(read(c, small + (k * PAGE) as u64 + 80, 8), word.as_bytes(), "seen through window {k}");
        buf.write(page + 120, b"program").unwrap();
        assert_eq!(&read(c, small + (k * PAGE) as u64 + 120, 7), b"program");
        assert_eq!(&read(c, big + page as u64 + 120, 7), b"program");
    }
    // Pages between the small windows (fresh memory then) are the program's too.
    if step > 1 {
        let between = PAGE as u64 * step as u64 + 1000;
        c.vwrite_to(b"between", big + between, RmaFlags::default()).unwrap();
        assert_eq!(&peek(buf, between as usize, 7), b"between");
    }
    // One RMA across the whole span.
    let data: Vec<u8> = (0..pages * PAGE).map(|i| (i * 7 % 253) as u8).collect();
    c.vwrite_to(&data, big, RmaFlags::default()).unwrap();
    assert!(peek(buf, 0, data.len()) == data, "the RMA across every piece");
    assert!(read(c, small + 5 * PAGE as u64, PAGE) == data[5 * step * PAGE..][..PAGE]);
    // All gone, then one window over the same pages again: it keeps the bytes.
    for k in 0..16 {
        s.unregister(small + (k * PAGE) as u64, PAGE as u64).unwrap();
    }
    s.unregister(big, (pages * PAGE) as u64).unwrap();
    assert_eq!(s.register(span, big, Prot::RW, true).unwrap(), big, "a window over 16 windows gone");
    assert!(read(c, big, data.len()) == data, "the pages kept their bytes");
    c.vwrite_to(b"again", big + (7 * step * PAGE) as u64, RmaFlags::default()).unwrap();
    assert_eq!(&peek(buf, 7 * step * PAGE, 5), b"again", "the new window is the program's memory");
    buf.write(9 * step * PAGE, b"store").unwrap();
    assert_eq!(&read(c, big + (9 * step * PAGE) as u64, 5), b"store");
    s.unregister(big, (pages * PAGE) as u64).unwrap();
}

fn many_windows(c: &Endpoint, s: &Endpoint) {
    let alternate = anon(31 * PAGE);
    over_small_windows(c, s, &alternate, 2, 0x100000, 0x200000);
    let adjacent = anon(16 * PAGE);
    over_small_windows(c, s, &adjacent, 1, 0x300000, 0x400000);
}

#[test]
fn a_window_over_many_windows_on_two_nodes() {
    let h = Harness::new();
    let (c, s) = pair(&h, 8, 4);
    many_windows(&c, &s);
    // Far more live windows than 8 under one window: 300 on every other page.
    let buf = anon(599 * PAGE);
    for k in 0..300 {
        s.register(buf.sub(2 * k * PAGE, PAGE), 0x1000000 + (k * PAGE) as u64, Prot::RW, true).unwrap();
    }
    assert_eq!(s.register(buf, 0x2000000, Prot::RW, true).unwrap(), 0x2000000);
    c.vwrite_to(b"far in", 0x2000000 + (598 * PAGE) as u64, RmaFlags::default()).unwrap();
    assert_eq!(&peek(&buf, 598 * PAGE, 6), b"far in");
    assert_eq!(&read(&c, 0x1000000 + (299 * PAGE) as u64, 6), b"far in");
}

#[test]
fn a_window_over_many_windows_across_hosts() {
    let h = Harness::with_cluster(&[4, 8], true);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    many_windows(&c, &s);
}
