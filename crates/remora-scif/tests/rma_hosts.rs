//! SCIF RMA between endpoints of two nodes joined over TCP (as between hosts), large
//! enough for many frames in flight, over ranges that span several windows on both sides
//! at unaligned offsets: every byte lands where it should, and a refused range still gives
//! the precise error. Over the tcp transport and over the ofi transport.

mod common;
use common::{pair, wait_for_link};
use remora_scif::*;
use remora_testkit::Harness;

/// Page-aligned, private anonymous memory that lives for the rest of the test process.
fn anon(len: usize) -> UserRegion {
    let v = Box::leak(vec![0u8; len + 4096].into_boxed_slice());
    let start = (4096 - (v.as_ptr() as usize % 4096)) % 4096;
    UserRegion::from_static(&mut v[start..start + len])
}

fn peek(r: &UserRegion, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    r.read(off, &mut v).unwrap();
    v
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 253) as u8).collect()
}

#[test]
fn large_rma_across_hosts_spans_windows_on_both_sides() {
    large_rma(Harness::with_cluster(&[4, 8], true));
}

/// The same over the ofi transport (libfabric's tcp provider): SCIF RMA goes through pager
/// flows to the peer's ofi bootstrap port.
#[test]
fn large_rma_across_hosts_over_ofi_tcp() {
    if !remora_ofi_sys::installed() {
        eprintln!("skipping: libfabric is not installed (apt-get install libfabric-dev libfabric1)");
        return;
    }
    large_rma(Harness::with_cluster_keys(&[4, 8], "force_tcp = true\ntransport = \"ofi+tcp\"\n"));
}

fn large_rma(h: Harness) {
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    // Three windows on each side, of sizes that cut the 1 MiB frames at odd places.
    const MIB: usize = 1 << 20;
    let ours = [anon(3 * MIB + 4096), anon(2 * MIB), anon(5 * MIB)];
    let theirs = [anon(MIB + 8192), anon(6 * MIB), anon(3 * MIB)];
    let mut at = 0x100_0000u64;
    let coff = at;
    for r in ours {
        c.register(r, at, Prot::RW, true).unwrap();
        at += r.len() as u64;
    }
    let mut at = 0x800_0000u64;
    let soff = at;
    for r in theirs {
        s.register(r, at, Prot::RW, true).unwrap();
        at += r.len() as u64;
    }
    let len = 9 * MIB + 777;
    let data = pattern(len, 7);
    let (cskip, sskip) = (4096 + 13, 5);
    // Fill our windows with the pattern, one window's part at a time.
    let mut off = 0;
    let mut left = cskip;
    for r in ours {
        let take = r.len().saturating_sub(left).min(len - off);
        if take > 0 {
            r.write(left.min(r.len()), &data[off..off + take]).unwrap();
            off += take;
        }
        left = left.saturating_sub(r.len());
    }
    assert_eq!(off, len);
    c.write_to(coff + cskip as u64, len, soff + sskip as u64, RmaFlags::default()).unwrap();
    // The peer's windows hold it, from `sskip` on.
    let mut got = Vec::new();
    let mut left = sskip;
    for r in theirs {
        let take = r.len().saturating_sub(left).min(len - got.len());
        got.extend_from_slice(&peek(&r, left.min(r.len()), take));
        left = left.saturating_sub(r.len());
    }
    assert!(got == data, "scif_writeto across hosts and windows");
    // Back again into other offsets of ours, and by vread_from into a buffer.
    c.read_from(coff + 3, len, soff + sskip as u64, RmaFlags::default()).unwrap();
    let mut back = peek(&ours[0], 3, ours[0].len() - 3);
    back.extend(peek(&ours[1], 0, ours[1].len()));
    back.extend(peek(&ours[2], 0, len - back.len()));
    assert!(back == data, "scif_readfrom across hosts and windows");
    let mut buf = vec![0u8; len];
    c.vread_from(&mut buf, soff + sskip as u64, RmaFlags::default()).unwrap();
    assert!(buf == data, "scif_vreadfrom across hosts");
    // A range that leaves the peer's windows, and a window the peer may only read.
    let end = soff + (MIB + 8192 + 6 * MIB + 3 * MIB) as u64;
    assert_eq!(
        c.write_to(coff, 2 * MIB, end - MIB as u64, RmaFlags::default()).unwrap_err(),
        Error::NoWindow
    );
    assert_eq!(
        c.read_from(coff, 2 * MIB, end - MIB as u64, RmaFlags::default()).unwrap_err(),
        Error::NoWindow
    );
    let ro = anon(2 * MIB);
    let roff = s.register(ro, 0x2000_0000, Prot { read: true, write: false }, true).unwrap();
    assert_eq!(c.write_to(coff, 2 * MIB, roff, RmaFlags::default()).unwrap_err(), Error::Access);
    c.read_from(coff, 2 * MIB, roff, RmaFlags::default()).unwrap();
    assert!(peek(&ours[0], 0, 2 * MIB).iter().all(|b| *b == 0), "the read-only window's zeroes");
    // The flow still works after the refusals.
    c.write_to(coff + cskip as u64, len, soff + sskip as u64, RmaFlags::default()).unwrap();
}

/// Overlapping windows on the far side (one page backing two windows): RMA from another
/// host into W1 at the shared page lands in the program's memory and is seen through W2;
/// the program's store there is seen through both.
#[test]
fn overlapping_windows_share_their_pages_across_hosts() {
    let h = Harness::with_cluster(&[4, 8], true);
    wait_for_link(&h);
    let (c, s) = pair(&h, 4, 8);
    let buf = anon(3 * 4096);
    let (w1, w2) = (0x300000u64, 0x400000u64);
    s.register(buf.sub(0, 8192), w1, Prot::RW, true).unwrap();
    s.register(buf.sub(4096, 8192), w2, Prot::RW, true).unwrap();
    let read = |off: u64, len: usize| {
        let mut v = vec![0u8; len];
        c.vread_from(&mut v, off, RmaFlags::default()).unwrap();
        v
    };
    c.vwrite_to(b"through W1", w1 + 4096 + 8, RmaFlags::default()).unwrap();
    assert_eq!(&peek(&buf, 4096 + 8, 10), b"through W1", "the RMA reached the program's memory");
    assert_eq!(&read(w2 + 8, 10), b"through W1", "seen through W2");
    buf.write(4096 + 100, b"program's store").unwrap();
    assert_eq!(&read(w1 + 4096 + 100, 15), b"program's store", "the store seen through W1");
    assert_eq!(&read(w2 + 100, 15), b"program's store", "the store seen through W2");
    let data = pattern(6000, 3);
    c.vwrite_to(&data, w2 + 2000, RmaFlags::default()).unwrap();
    assert!(peek(&buf, 4096 + 2000, 6000) == data, "RMA across W2's two pieces");
}
