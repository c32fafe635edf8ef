//! Unit tests of moving memory in place.

#![allow(unsafe_code)] // tests of the unsafe layer: every block has a SAFETY comment

use super::*;
use std::os::fd::AsFd;

#[test]
fn anonymous_pages_become_a_memfd_in_place() {
    let len = 3 * crate::page_size();
    // SAFETY: a fresh private anonymous mapping, owned by this test.
    let p = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        )
    }
    .unwrap() as *mut u8;
    // SAFETY: p is a valid writable mapping of len bytes.
    unsafe { std::ptr::write_bytes(p, 0xab, len) };
    assert!(is_private_anonymous(p as usize, len));
    // SAFETY: single-threaded test, nobody else writes the range.
    let fd = unsafe { move_into_memfd(p, len, "t") }.unwrap();
    assert!(!is_private_anonymous(p as usize, len));
    let view = crate::Mapping::new(fd.as_fd(), 0, len, Default::default()).unwrap();
    let mut b = [0u8; 1];
    view.read(len - 1, &mut b).unwrap();
    assert_eq!(b[0], 0xab);
    // SAFETY: p..p+len is still mapped (now shared); writing through it is fine.
    unsafe { *p = 7 };
    view.read(0, &mut b).unwrap();
    assert_eq!(b[0], 7);
    // SAFETY: unmapping the range this test created.
    unsafe { rustix::mm::munmap(p.cast(), len).unwrap() };
}

#[test]
fn refuses_unaligned_and_file_memory() {
    let x = Box::new([0u8; 64]);
    // SAFETY: the call fails before touching anything.
    assert!(unsafe { move_into_memfd(x.as_ptr() as *mut u8, 64, "x") }.is_err());
}

#[test]
fn stores_another_thread_makes_during_a_move_are_not_lost() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let page = crate::page_size();
    // SAFETY: a fresh private anonymous page, owned by this test.
    let p = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            page,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        )
    }
    .unwrap() as usize;
    // A word of the page another thread keeps counting in (as malloc's bookkeeping
    // beside a registered buffer), while the page moves into a memfd and back.
    if hold_stores(p, page).is_none() {
        return eprintln!(
            "skipped: the page cannot be held here (no such userfaultfd, or beside this stack)"
        );
    }
    // SAFETY: the page is live until the end of the test; the word is aligned.
    let counter: &'static AtomicU64 = unsafe { &*((p + page - 8) as *const AtomicU64) };
    static STOP: AtomicBool = AtomicBool::new(false);
    let writer = std::thread::spawn(move || {
        let mut mine = 0u64;
        while !STOP.load(Ordering::Relaxed) {
            counter.fetch_add(1, Ordering::SeqCst);
            mine += 1;
        }
        mine
    });
    // SAFETY: the page is ours; only the writer thread stores into it meanwhile, which
    // the move holds (the point of this test).
    let region = unsafe { UserRegion::from_raw_parts(p as *mut u8, page) };
    for _ in 0..300 {
        let _fd = move_region(region, "held").unwrap();
        unshare_region(region).unwrap();
    }
    STOP.store(true, Ordering::Relaxed);
    let mine = writer.join().unwrap();
    assert_eq!(counter.load(Ordering::SeqCst), mine, "stores made during the moves were lost");
    // SAFETY: the test's page, no longer used.
    unsafe { rustix::mm::munmap(p as *mut _, page) }.unwrap();
}

/// A range the program freed, or mapped something else over, after it was shared is left
/// alone by `unshare_region` (before, the copy faulted in the library, or the remap
/// replaced the program's new mapping).
#[test]
fn unshare_leaves_a_freed_or_remapped_range_alone() {
    let page = crate::page_size();
    let fresh = || {
        // SAFETY: a fresh private anonymous mapping, owned by this test.
        unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                2 * page,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .unwrap() as usize
    };
    let region = |a: usize| {
        // SAFETY: the test's own mapping of two pages, alive while the region is used.
        unsafe { UserRegion::from_raw_parts(a as *mut u8, 2 * page) }
    };
    // Freed: unmapped after it was shared.
    let a = fresh();
    let _fd = share_region(region(a), "t").unwrap();
    // SAFETY: the test's own range.
    unsafe { rustix::mm::munmap(a as *mut _, 2 * page).unwrap() };
    assert!(unshare_region(region(a)).is_ok(), "nothing to give back, no fault");
    // Remapped: something else lies there now, and stays.
    let b = fresh();
    let _fd = share_region(region(b), "t").unwrap();
    // SAFETY: replaces the test's own range with a private page of its own.
    unsafe {
        rustix::mm::mmap_anonymous(
            b as *mut _,
            2 * page,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE | MapFlags::FIXED,
        )
        .unwrap();
        *(b as *mut u8) = 0x5a;
    }
    assert!(unshare_region(region(b)).is_ok());
    // SAFETY: b is still the test's private mapping.
    assert_eq!(unsafe { *(b as *const u8) }, 0x5a, "the program's new mapping is untouched");
    // SAFETY: the test's own range.
    unsafe { rustix::mm::munmap(b as *mut _, 2 * page).unwrap() };
}
