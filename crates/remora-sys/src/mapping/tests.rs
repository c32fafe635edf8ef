//! Tests of `Mapping`.

use super::*;
use crate::Memfd;
use std::os::fd::AsFd;

#[test]
fn unaligned_offset_and_shared_views() {
    let fd = Memfd::create("m", 3 * 4096).unwrap();
    let a = Mapping::new(fd.as_fd(), 0, 3 * 4096, MapOptions::default()).unwrap();
    let b = Mapping::new(fd.as_fd(), 5000, 100, MapOptions::default()).unwrap();
    a.write(5000, b"xyz").unwrap();
    let mut out = [0u8; 3];
    b.read(0, &mut out).unwrap();
    assert_eq!(&out, b"xyz");
    assert!(b.read(98, &mut out).is_err());
    assert!(b.write(usize::MAX, b"a").is_err());
}

#[test]
fn readonly_refuses_writes() {
    let fd = Memfd::create("r", 4096).unwrap();
    let m = Mapping::new(fd.as_fd(), 0, 4096, MapOptions { readonly: true, fixed_addr: None }).unwrap();
    assert!(m.write(0, b"a").is_err());
    assert!(m.atomic_u64(0).is_none());
    assert_eq!(m.load_u64(0), Some(0));
}

#[test]
fn fixed_address_no_replace() {
    let fd = Memfd::create("f", 4096).unwrap();
    let first = Mapping::new(fd.as_fd(), 0, 4096, MapOptions::default()).unwrap();
    let addr = first.as_ptr() as usize;
    let clash = Mapping::new(fd.as_fd(), 0, 4096, MapOptions { readonly: false, fixed_addr: Some(addr) });
    assert!(clash.is_err());
    drop(first);
    let again =
        Mapping::new(fd.as_fd(), 0, 4096, MapOptions { readonly: false, fixed_addr: Some(addr) }).unwrap();
    assert_eq!(again.as_ptr() as usize, addr);
}

/// A placed map over the program's reservation whose second piece cannot be mapped
/// leaves an inaccessible reservation there, not a hole.
#[test]
fn a_failed_placed_map_leaves_a_reservation() {
    let page = crate::page_size();
    // SAFETY: a fresh inaccessible reservation at an address the kernel picks.
    let at = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            2 * page,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::NORESERVE,
        )
    }
    .unwrap() as usize;
    let good = Memfd::create("g", page as u64).unwrap();
    // A socket cannot be mapped.
    let (sock, _other) = std::os::unix::net::UnixStream::pair().unwrap();
    let pieces = [(good.as_fd(), 0, page), (sock.as_fd(), 0, page)];
    // SAFETY: the range is the reservation this test made.
    assert!(unsafe { Mapping::new_pieces_at(&pieces, false, Some(at)) }.is_err());
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let here = maps.lines().find(|l| l.starts_with(&format!("{at:x}-"))).expect("the range is still mapped");
    assert!(here.contains(&format!("{:x} ---p", at + 2 * page)), "inaccessible, both pages: {here}");
    // SAFETY: the test's own reservation.
    unsafe { rustix::mm::munmap(at as *mut _, 2 * page) }.unwrap();
}

#[test]
fn word_runs_are_checked_once_as_a_whole() {
    let fd = Memfd::create("w", 4096).unwrap();
    let m = Mapping::new(fd.as_fd(), 0, 4096, MapOptions::default()).unwrap();
    let line = m.atomic_u64s::<8>(64).unwrap();
    line[7].store(0x1122_3344_5566_7788, std::sync::atomic::Ordering::Relaxed);
    // Word 7 of the line at 64 is the word at 120.
    assert_eq!(m.atomic_u64(120).unwrap().load(std::sync::atomic::Ordering::Relaxed), 0x1122_3344_5566_7788);
    assert!(m.atomic_u64s::<8>(4096 - 64).is_some());
    assert!(m.atomic_u64s::<8>(4096 - 56).is_none(), "past the end");
    assert!(m.atomic_u64s::<8>(usize::MAX - 8).is_none(), "overflowing");
    assert!(m.atomic_u64s::<8>(68).is_none(), "unaligned");
    let ro = Mapping::new(fd.as_fd(), 0, 4096, MapOptions { readonly: true, ..Default::default() }).unwrap();
    assert!(ro.atomic_u64s::<8>(0).is_none(), "read-only");
}
