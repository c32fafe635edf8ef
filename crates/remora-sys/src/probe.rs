//! Whether a range of this process's memory may be read (or written), asked of the kernel
//! instead of found out by a fault: for C entry points handed a buffer address
//! (`scif_vwriteto`, `scif_vreadfrom`) that must answer `EFAULT` for a bad one rather
//! than die of `SIGSEGV` in the copy.
//!
//! [`user_range`] asks two things of the kernel, neither of which copies a byte:
//! - `msync(MS_ASYNC)` over the whole range, which since Linux 2.6.19 only walks the
//!   range's mappings (no page is looked at) and answers `ENOMEM` when a part of it is not
//!   mapped: a NULL, freed or made-up buffer, a length running off its mapping. It costs the
//!   same ~0.1 µs for 64 KiB as for 1 MiB.
//! - `madvise(MADV_POPULATE_READ / MADV_POPULATE_WRITE)` (Linux 5.14) of the range's first
//!   and last page, which refuses a page its mapping does not allow the access (`EINVAL`,
//!   or `EFAULT` where a fault would raise a signal): a read-only buffer to be written, a
//!   guard page at either end.
//!
//! A mapping with no access (or no write access) strictly inside a range whose ends are
//! good is not seen: the copy faults there, as MPSS's library would not. The exact check
//! (populating every page) cost about half a 64 KiB `memcpy` from cache and a sixth of a
//! 1 MiB one: through `libscif`, `scif_vwriteto` of 64 KiB on one host went from 0.78 to 0.50
//! of `memcpy`'s rate with it, of 1 MiB from 0.95 to 0.69; a user's buffer with a hole in
//! its middle is rarer than every transfer. Copying through
//! `process_vm_readv`/`process_vm_writev` (which would report `EFAULT` in the copy itself)
//! measured 2-2.5 times a 64 KiB `memcpy`. On a kernel without the populate advices, the
//! end pages are probed with `process_vm_readv` of one byte (and, to write, the same byte
//! written back with `process_vm_writev`).
//!
//! A range inside a map of another host's memory (a region of this process's userfaultfd,
//! [`crate::uffd::registered_parts`]) is judged by the map's protection instead: the kernel
//! cannot fetch its missing pages, which only the process's own faults fill.
//!
//! The answer holds when it is given: another thread that unmaps the range before the copy
//! still makes the copy fault, as it would in a system call's own copy after its check.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use rustix::mm::Advice;
use std::ffi::c_void;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};

/// Whether the kernel knows the populate advices: 0 not asked yet, 1 yes, 2 no.
static POPULATE: AtomicU8 = AtomicU8::new(0);

fn efault() -> io::Error {
    io::Error::from_raw_os_error(rustix::io::Errno::FAULT.raw_os_error())
}

/// Check that `len` bytes at `addr` in this process are mapped readable, and writable when
/// `write`.
///
/// Parts of the range inside a region of this process's userfaultfd (a map of another
/// host's memory: [`crate::uffd::registered_parts`]) are good when the region allows the
/// access (a load always, a store where it is writable): the kernel cannot fetch their
/// pages (the pager serves only the process's own faults), the copy that follows can. The
/// rest is asked of the kernel; a range touching no such region costs one system call.
///
/// # Errors
/// `EFAULT` when they are not (or the range wraps around the address space).
pub fn user_range(addr: usize, len: usize, write: bool) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let end = addr.checked_add(len).ok_or_else(efault)?;
    let parts = crate::uffd::registered_parts(addr, len);
    if parts.is_empty() {
        return populated(addr, len, write);
    }
    walk(addr, end, write, parts)
}

/// `addr..end` checked part by part: `parts` (start, end, writable, in address order,
/// inside the range) by their protection, the rest asked of the kernel.
fn walk(addr: usize, end: usize, write: bool, parts: Vec<(usize, usize, bool)>) -> io::Result<()> {
    let mut at = addr;
    for (start, stop, writable) in parts {
        if at < start {
            populated(at, start - at, write)?;
        }
        if write && !writable {
            return Err(efault());
        }
        at = at.max(stop);
    }
    if at < end {
        populated(at, end - at, write)?;
    }
    Ok(())
}

/// [`user_range`] asked of the kernel alone, `len` > 0: the whole range mapped, its end
/// pages allowing the access.
fn populated(addr: usize, len: usize, write: bool) -> io::Result<()> {
    let page = crate::page_size();
    let end = addr.checked_add(len).and_then(|e| e.checked_next_multiple_of(page)).ok_or_else(efault)?;
    let start = addr - addr % page;
    // SAFETY: `MS_ASYNC` writes nothing back and changes no mapping (Linux has made it a
    // walk over the range's mappings since 2.6.19); it only reports a part not mapped.
    match unsafe { rustix::mm::msync(start as *mut c_void, end - start, rustix::mm::MsyncFlags::ASYNC) } {
        Ok(()) => {}
        Err(rustix::io::Errno::NOMEM) => return Err(efault()),
        // Nothing else is expected; the ends below still decide.
        Err(_) => {}
    }
    page_allows(start, write)?;
    if end - start > page {
        page_allows(end - page, write)?;
    }
    Ok(())
}

/// Whether the page at `start` (page-aligned) is mapped with the access.
fn page_allows(start: usize, write: bool) -> io::Result<()> {
    let page = crate::page_size();
    match POPULATE.load(Ordering::Relaxed) {
        0 => {
            let known = populate_known();
            POPULATE.store(if known { 1 } else { 2 }, Ordering::Relaxed);
            if !known {
                return by_copy(start, start + page, write);
            }
        }
        2 => return by_copy(start, start + page, write),
        _ => {}
    }
    let advice = if write { Advice::LinuxPopulateWrite } else { Advice::LinuxPopulateRead };
    // SAFETY: populating page tables changes no memory contents and no mapping: it faults
    // in a page the mapping already allows (as a read or a write of it would; a private
    // page copied on write keeps its bytes), and fails for anything else.
    match unsafe { rustix::mm::madvise(start as *mut c_void, page, advice) } {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => by_copy(start, start + page, write),
        Err(_) => Err(efault()),
    }
}

/// Whether `MADV_POPULATE_READ` is known: asked of a page this process surely maps.
fn populate_known() -> bool {
    let probe = [0u8; 1];
    let page = crate::page_size();
    let start = probe.as_ptr() as usize / page * page;
    // SAFETY: as in `user_range`: the page of a live stack variable, only populated.
    unsafe { rustix::mm::madvise(start as *mut c_void, page, Advice::LinuxPopulateRead) }.is_ok()
}

#[repr(C)]
struct IoVec {
    base: *mut c_void,
    len: usize,
}

unsafe extern "C" {
    fn process_vm_readv(
        pid: i32,
        local: *const IoVec,
        liovcnt: u64,
        remote: *const IoVec,
        riovcnt: u64,
        flags: u64,
    ) -> isize;
    fn process_vm_writev(
        pid: i32,
        local: *const IoVec,
        liovcnt: u64,
        remote: *const IoVec,
        riovcnt: u64,
        flags: u64,
    ) -> isize;
}

/// The fallback: one byte of every page of `start..end` (page-aligned) read through the
/// kernel, and written back unchanged when `write`.
fn by_copy(start: usize, end: usize, write: bool) -> io::Result<()> {
    const BATCH: usize = 512;
    let page = crate::page_size();
    let pid = rustix::process::getpid().as_raw_nonzero().get();
    let mut bytes = [0u8; BATCH];
    let mut at = start;
    while at < end {
        let n = ((end - at) / page).min(BATCH);
        let remote: Vec<IoVec> =
            (0..n).map(|i| IoVec { base: (at + i * page) as *mut c_void, len: 1 }).collect();
        let local = IoVec { base: bytes.as_mut_ptr().cast(), len: n };
        // SAFETY: the kernel reads the remote addresses of our own process, checking each
        // (EFAULT, or a short count, for a bad one); it writes only into `bytes`, a local
        // array of at least `n` bytes that `local` describes and that outlives the call.
        let got = unsafe { process_vm_readv(pid, &local, 1, remote.as_ptr(), n as u64, 0) };
        if got != n as isize {
            return Err(efault());
        }
        if write {
            // SAFETY: each remote byte receives the value just read from it, so memory
            // whose value anything depends on is unchanged (a store another thread makes
            // between the read and the write-back may be undone: the caller is about to
            // overwrite the range, which is the buffer it asked to be written); the kernel
            // checks each remote address for write and reads only from `bytes`.
            let put = unsafe { process_vm_writev(pid, &local, 1, remote.as_ptr(), n as u64, 0) };
            if put != n as isize {
                return Err(efault());
            }
        }
        at += n * page;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::mm::{MapFlags, ProtFlags};

    /// A fresh anonymous mapping of two pages with protections `prot`.
    fn map(prot: ProtFlags) -> usize {
        // SAFETY: a new private anonymous mapping at an address the kernel picks; leaked
        // for the test process's life, touched only through the kernel.
        unsafe { rustix::mm::mmap_anonymous(std::ptr::null_mut(), 8192, prot, MapFlags::PRIVATE) }.unwrap()
            as usize
    }

    /// A fresh private anonymous mapping of three writable pages.
    fn three_pages() -> usize {
        // SAFETY: a new private anonymous mapping at an address the kernel picks; leaked
        // for the test process's life, changed only by the test that asked for it.
        unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                3 * crate::page_size(),
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .unwrap() as usize
    }

    fn check_all(probe: impl Fn(usize, usize, bool) -> io::Result<()>) {
        let rw = map(ProtFlags::READ | ProtFlags::WRITE);
        let ro = map(ProtFlags::READ);
        let none = map(ProtFlags::empty());
        assert!(probe(rw + 5, 8000, true).is_ok());
        assert!(probe(ro + 5, 100, false).is_ok());
        assert_eq!(probe(ro + 5, 100, true).unwrap_err().raw_os_error(), Some(14));
        assert_eq!(probe(none, 1, false).unwrap_err().raw_os_error(), Some(14));
        assert_eq!(probe(0x1000, 16, false).unwrap_err().raw_os_error(), Some(14));
        assert_eq!(probe(usize::MAX - 8, 64, false).unwrap_err().raw_os_error(), Some(14));
        let text = efault as fn() -> io::Error as usize;
        assert!(probe(text, 16, false).is_ok());
        assert_eq!(probe(text, 16, true).unwrap_err().raw_os_error(), Some(14));
        // A range that runs from good memory into bad.
        let half = map(ProtFlags::READ | ProtFlags::WRITE);
        // SAFETY: the second page of our own fresh mapping, which nothing else uses.
        unsafe {
            rustix::mm::mprotect((half + 4096) as *mut c_void, 4096, rustix::mm::MprotectFlags::empty())
        }
        .unwrap();
        assert!(probe(half + 100, 3000, true).is_ok());
        assert_eq!(probe(half + 100, 5000, false).unwrap_err().raw_os_error(), Some(14));
    }

    #[test]
    fn bad_ranges_are_efault() {
        check_all(user_range);
    }

    #[test]
    fn a_hole_in_the_middle_is_efault() {
        let page = crate::page_size();
        let base = three_pages();
        // SAFETY: the middle page of our own fresh mapping, which nothing else uses.
        unsafe { rustix::mm::munmap((base + page) as *mut c_void, page) }.unwrap();
        assert!(user_range(base, page, true).is_ok());
        assert!(user_range(base + 2 * page, page, true).is_ok());
        assert_eq!(user_range(base + 10, 3 * page - 20, false).unwrap_err().raw_os_error(), Some(14));
        assert_eq!(user_range(base + 10, 3 * page - 20, true).unwrap_err().raw_os_error(), Some(14));
    }

    #[test]
    fn a_map_of_another_hosts_memory_is_good_as_its_protection_says() {
        let _one = crate::uffd::tests::ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let u = match crate::uffd::Uffd::new() {
            Ok(u) => u,
            Err(e) => return eprintln!("userfaultfd unavailable here ({e}); skipping"),
        };
        let page = crate::page_size();
        // No pager runs: the pages stay missing, as in a far map nobody touched yet.
        let rw = u.register(2 * page, false).unwrap();
        let ro = u.register(2 * page, true).unwrap();
        assert!(user_range(rw.base() + 5, 2 * page - 5, true).is_ok());
        assert!(user_range(ro.base(), 2 * page, false).is_ok());
        assert_eq!(user_range(ro.base() + 1, 10, true).unwrap_err().raw_os_error(), Some(14));
        // A range across two maps (when the kernel placed them side by side, as it mostly
        // does): loads pass, a store fails for the read-only one's part.
        let (low, high) = (rw.base().min(ro.base()), rw.base().max(ro.base()));
        if low + 2 * page == high {
            assert!(user_range(low + page, 2 * page, false).is_ok());
            assert_eq!(user_range(low + page, 2 * page, true).unwrap_err().raw_os_error(), Some(14));
        } else {
            eprintln!("the two maps are not side by side; skipped the range across both");
        }
        drop(rw);
        drop(ro);
    }

    #[test]
    fn a_range_across_maps_and_ordinary_memory_is_judged_part_by_part() {
        let page = crate::page_size();
        let base = three_pages();
        let mid = (base + page, base + 2 * page);
        let end = base + 3 * page;
        // The middle page stands for a map of another host's memory: the kernel is not
        // asked about it, so even a page no access may touch passes for what the map says.
        // SAFETY: the middle page of our own fresh mapping, which nothing else uses.
        unsafe { rustix::mm::mprotect(mid.0 as *mut c_void, page, rustix::mm::MprotectFlags::empty()) }
            .unwrap();
        assert!(walk(base + 10, end - 10, true, vec![(mid.0, mid.1, true)]).is_ok());
        assert!(walk(base + 10, end - 10, false, vec![(mid.0, mid.1, false)]).is_ok());
        assert_eq!(walk(base, end, true, vec![(mid.0, mid.1, false)]).unwrap_err().raw_os_error(), Some(14));
        // Asked of the kernel, a page no access may touch is seen at either end of a range
        // (not in its middle: the module's doc says why).
        assert_eq!(walk(base + page, end, false, vec![]).unwrap_err().raw_os_error(), Some(14));
        assert_eq!(walk(base, mid.1, false, vec![]).unwrap_err().raw_os_error(), Some(14));
        assert!(walk(base, end, false, vec![]).is_ok());
        // Two maps side by side, then ordinary memory that may not be written.
        let two = vec![(base, mid.0, true), (mid.0, mid.1, true)];
        assert!(walk(base, end, true, two.clone()).is_ok());
        // SAFETY: the last page of our own fresh mapping.
        unsafe { rustix::mm::mprotect(mid.1 as *mut c_void, page, rustix::mm::MprotectFlags::READ) }.unwrap();
        assert!(walk(base, end, false, two.clone()).is_ok());
        assert_eq!(walk(base, end, true, two).unwrap_err().raw_os_error(), Some(14));
    }

    #[test]
    fn the_fallback_agrees() {
        check_all(|addr, len, write| {
            let page = crate::page_size();
            let end =
                addr.checked_add(len).and_then(|e| e.checked_next_multiple_of(page)).ok_or_else(efault)?;
            by_copy(addr - addr % page, end, write)
        });
    }
}
