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

fn fresh_pages(n: usize) -> UserRegion {
    let len = n * crate::page_size();
    // SAFETY: a fresh private anonymous mapping, owned by the test that asked for it.
    let p = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        )
    }
    .unwrap();
    // SAFETY: the mapping just made, alive while the test uses the region.
    unsafe { UserRegion::from_raw_parts(p.cast(), len) }
}

/// Windows over the pages of live windows keep those pages where the live windows have
/// them; once the windows are gone, a window over the same pages is one piece again, with
/// the bytes; more pieces than allowed is ENOMEM and moves nothing.
#[test]
fn windows_share_live_pages_and_join_pages_no_window_uses() {
    let page = crate::page_size();
    let ar = Arena::new().unwrap();
    let r = fresh_pages(3);
    r.write(0, b"page zero").unwrap();
    r.write(2 * page, b"page two").unwrap();
    let w1 = share_window(&ar, r.sub(0, 2 * page), 8).unwrap();
    assert_eq!(w1.pieces.len(), 1);
    let (arena, o1, n1) = (w1.pieces[0].0.clone(), w1.pieces[0].1, w1.pieces[0].2);
    assert_eq!(n1, 2 * page as u64);
    let w2 = share_window(&ar, r.sub(page, 2 * page), 8).unwrap();
    assert!(std::sync::Arc::ptr_eq(&w2.pieces[0].0, &arena), "one memfd for every window");
    assert_eq!(w2.pieces[0].1, o1 + page as u64, "page 1 stays where W1 has it");
    assert_eq!(w2.pieces.iter().map(|p| p.2).sum::<u64>(), 2 * page as u64);
    let view = crate::Mapping::new(arena.as_fd(), o1, 2 * page, Default::default()).unwrap();
    r.write(page + 5, b"shared").unwrap();
    let mut b = [0u8; 6];
    view.read(page + 5, &mut b).unwrap();
    assert_eq!(&b, b"shared", "the program's store is in the window's memory");
    drop((w1, w2));
    let w3 = share_window(&ar, r, 8).unwrap();
    assert_eq!(w3.pieces.len(), 1, "pages no window uses are one piece again");
    let mut b = [0u8; 9];
    r.read(0, &mut b).unwrap();
    assert_eq!(&b, b"page zero");
    r.read(2 * page, &mut b[..8]).unwrap();
    assert_eq!(&b[..8], b"page two");
    let (o3, _) = (w3.pieces[0].1, w3.pieces[0].2);
    let v3 = crate::Mapping::new(arena.as_fd(), o3, 3 * page, Default::default()).unwrap();
    v3.read(page + 5, &mut b[..6]).unwrap();
    assert_eq!(&b[..6], b"shared");
    // Another endpoint's window over a live window's page keeps it in that arena; the
    // page no window uses moves into its own.
    let other = Arena::new().unwrap();
    let w4 = share_window(&other, r.sub(page, page), 8).unwrap();
    assert!(std::sync::Arc::ptr_eq(&w4.pieces[0].0, &arena));
    drop(w3);
    let w5 = share_window(&other, r.sub(2 * page, page), 8).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&w5.pieces[0].0, &arena), "moved into the other arena");
    r.read(2 * page, &mut b[..8]).unwrap();
    assert_eq!(&b[..8], b"page two");
    let w3 = share_window(&ar, r.sub(0, page), 8).unwrap();
    drop((w4, w5));
    // Live windows on every other page: a window over all of them has a piece each.
    let many = fresh_pages(9);
    let small: Vec<_> =
        (0..9).step_by(2).map(|i| share_window(&ar, many.sub(i * page, page), 8).unwrap()).collect();
    let e = share_window(&ar, many, 8).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory);
    assert!(is_private_anonymous(many.addr() + page, page), "nothing moved");
    let all = share_window(&ar, many, 9).unwrap();
    assert_eq!(all.pieces.len(), 9);
    drop((small, all, w3));
}

/// Arena pages no window uses and the program unmapped keep their bytes for whoever else
/// maps them (a child of `fork`, a peer's `scif_mmap`): nothing is cut out of an arena.
/// Once the arena wastes much, the endpoint's next window goes into a new arena, and the
/// old one leaves the book when no live window uses it; maps of it still see the bytes.
#[test]
fn let_go_pages_keep_their_bytes_and_a_wasteful_arena_is_replaced() {
    let page = crate::page_size();
    let big = 2 << 20;
    let ar = Arena::new().unwrap();
    let (a, b) = (fresh_pages(big / page), fresh_pages(1));
    a.write(0, b"gone").unwrap();
    b.write(0, b"kept").unwrap();
    let (wa, wb) = (share_window(&ar, a, 8).unwrap(), share_window(&ar, b, 8).unwrap());
    let (arena, oa, ob) = (wa.pieces[0].0.clone(), wa.pieces[0].1, wb.pieces[0].1);
    let view = |o| crate::Mapping::new(arena.as_fd(), o, page, Default::default()).unwrap();
    // Another's map of the window's memory (a child's, a peer's).
    let elsewhere = view(oa);
    drop(wa);
    // SAFETY: the test's own pages, no longer used through `a`.
    unsafe { rustix::mm::munmap(a.addr() as *mut _, big).unwrap() };
    prune_shared();
    let mut got = [0u8; 4];
    elsewhere.read(0, &mut got).unwrap();
    assert_eq!(&got, b"gone", "pages let go keep their bytes for other maps");
    view(ob).read(0, &mut got).unwrap();
    assert_eq!(&got, b"kept", "a live window's page stays");
    // All but a page (the one mapped elsewhere here) of 2 MiB and a page is wasted: the
    // next window lies in a new arena.
    let c = fresh_pages(1);
    let wc = share_window(&ar, c, 8).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&wc.pieces[0].0, &arena), "a new arena");
    let wc2 = share_window(&ar, fresh_pages(1), 8).unwrap();
    assert!(std::sync::Arc::ptr_eq(&wc.pieces[0].0, &wc2.pieces[0].0), "later windows share it");
    drop(wb);
    prune_shared();
    assert_eq!(std::sync::Arc::strong_count(&arena), 1, "the old arena left the book");
    elsewhere.read(0, &mut got).unwrap();
    assert_eq!(&got, b"gone");
    // The program's page of the old arena is copied into the new one by a window over it.
    let wb2 = share_window(&ar, b, 8).unwrap();
    assert!(std::sync::Arc::ptr_eq(&wb2.pieces[0].0, &wc.pieces[0].0));
    b.read(0, &mut got).unwrap();
    assert_eq!(&got, b"kept");
    drop((wc, wc2, wb2));
}

/// A window over the program's own shared memory is that memory when it is a memfd sealed
/// against shrinking (pages of the file, where the mapping lies in it; the mapping is not
/// moved); an unsealed one is EFAULT.
#[test]
fn a_sealed_memfd_of_the_program_is_shared_as_it_is() {
    use rustix::fs::{MemfdFlags, SealFlags};
    let page = crate::page_size();
    let make = |seal: bool| {
        let fd =
            rustix::fs::memfd_create("program", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
        rustix::fs::ftruncate(&fd, 4 * page as u64).unwrap();
        if seal {
            rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW).unwrap();
        }
        let m = crate::Mapping::new(fd.as_fd(), 0, 4 * page, Default::default()).unwrap();
        (fd, m)
    };
    let ar = Arena::new().unwrap();
    let (fd, m) = make(true);
    // SAFETY: the test's own mapping, alive while the region is used.
    let r = unsafe { UserRegion::from_raw_parts(m.as_ptr().add(page), 2 * page) };
    let w = share_window(&ar, r, 8).unwrap();
    assert_eq!(w.pieces.len(), 1);
    let (got, off, len) = &w.pieces[0];
    assert_eq!((*off, *len), (page as u64, 2 * page as u64), "where the mapping lies in the file");
    assert_eq!(crate::inode_of(got.as_fd()), crate::inode_of(fd.as_fd()), "the program's own memfd");
    let view = crate::Mapping::new(got.as_fd(), page as u64, page, Default::default()).unwrap();
    view.write(10, b"through the window").unwrap();
    let mut b = [0u8; 18];
    m.read(page + 10, &mut b).unwrap();
    assert_eq!(&b, b"through the window");
    let (_fd2, m2) = make(false);
    // SAFETY: as above.
    let r2 = unsafe { UserRegion::from_raw_parts(m2.as_ptr(), page) };
    assert_eq!(share_window(&ar, r2, 8).unwrap_err().raw_os_error(), Some(14), "unsealed: EFAULT");
}

/// Another library's move of pages a live window uses is EFAULT (it would take them from
/// the window); once the window is gone they move.
#[test]
fn pages_of_a_live_window_are_not_moved_by_other_libraries() {
    let page = crate::page_size();
    let ar = Arena::new().unwrap();
    let r = fresh_pages(2);
    r.write(page, b"window").unwrap();
    let w = share_window(&ar, r.sub(page, page), 8).unwrap();
    assert_eq!(share_region(r, "t").unwrap_err().raw_os_error(), Some(14));
    assert_eq!(move_region(r.sub(page, page), "t").unwrap_err().raw_os_error(), Some(14));
    let (_fd, off) = share_region(r.sub(0, page), "t").unwrap();
    assert_eq!(off, 0, "the page beside it moves");
    drop(w);
    let (fd, off) = share_region(r.sub(page, page), "t").unwrap();
    let view = crate::Mapping::new(fd.as_fd(), off, page, Default::default()).unwrap();
    let mut b = [0u8; 6];
    view.read(0, &mut b).unwrap();
    assert_eq!(&b, b"window", "moved with its bytes once no window uses it");
}

/// Arenas and memory other libraries shared are known by device and inode: a shared map
/// of another device's file with the same inode number is neither (EFAULT, as any other
/// shared file), and a range moved before is not taken for it.
#[test]
fn maps_of_another_device_with_the_same_inode_are_not_an_arena() {
    let ar = Arena::new().unwrap();
    let (lo, hi) = (0x7e00_0000_0000usize, 0x7e00_0000_2000usize);
    let line = |dev: &str, ino: u64, path: &str| format!("{lo:x}-{hi:x} rw-s 00000000 {dev} {ino} {path}\n");
    let (((major, minor), ino), _) = arena::classified(&ar, &[], "", lo, hi);
    let classify = |shared: &[super::Moved], maps: &str| arena::classified(&ar, shared, maps, lo, hi).1;
    let arena_dev = format!("{major:02x}:{minor:02x}");
    let own = classify(&[], &line(&arena_dev, ino, "/memfd:remora:scif-window (deleted)")).unwrap();
    assert_eq!(own, ["in place"], "the arena's own pages");
    let other_dev = format!("{:02x}:{:02x}", major + 1, minor + 7);
    let e = classify(&[], &line(&other_dev, ino, "/dev/hugepages/data")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(14), "another device's file: EFAULT");
    // Memory another library shared, known by its device and inode too.
    let fd = std::sync::Arc::new(crate::Memfd::create("t", 0x2000).unwrap());
    let id = super::file_id(fd.as_fd()).unwrap();
    let shared = [(lo, hi - lo, fd.clone(), id)];
    let ((major, minor), ino) = id;
    let kept =
        classify(&shared, &line(&format!("{major:02x}:{minor:02x}"), ino, "/memfd:remora:t (deleted)"));
    assert_eq!(kept.unwrap(), ["keep"], "the shared memfd stays as it is");
    let e = classify(&shared, &line(&other_dev, ino, "/dev/hugepages/data")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(14), "another device's file is not the shared memfd");
}
