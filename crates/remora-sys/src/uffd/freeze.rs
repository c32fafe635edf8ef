//! Holding every write to a range of this process's memory while it is copied and mapped
//! anew (`user_memory.rs`: memory moved into a memfd in place, or given back).
//!
//! A move copies the pages and maps the copy over the same addresses. A store another
//! thread makes between the copy and the remap lands in the old pages and is lost; for
//! heap memory the pages hold other allocations too, and a lost store of malloc's own
//! bookkeeping corrupts the heap (seen once as glibc's "unaligned tcache chunk" abort in a
//! test binary whose threads allocate while VIPL registers a buffer). So the range is
//! write-protected through a userfaultfd of its own for that moment: a thread that stores
//! into it sleeps in its fault until the guard is dropped, then retries its store against
//! whatever is mapped there now. Loads go on.
//!
//! Only a userfaultfd that also holds the kernel's own stores is used (`copy_to_user` of a
//! system call another thread makes into those pages, a signal frame pushed onto a stack
//! there): one limited to user-mode faults would make such a system call fail with `EFAULT`
//! (a datagram then lost) and a signal delivery kill the process. Where that kind cannot be
//! had, the move goes on unguarded, as before: the system call gives that kind to root,
//! `CAP_SYS_PTRACE` or everyone with `vm.unprivileged_userfaultfd=1`; where it refuses,
//! `/dev/userfaultfd` (Linux 6.1, `USERFAULTFD_IOC_NEW`) gives it to whoever may open the
//! device, which an administrator can grant a group without widening the sysctl. Where
//! neither serves, or the memory cannot be write-protected, the move is unguarded. Stores the kernel
//! makes without a retriable fault (pages pinned before: `O_DIRECT`, `io_uring` fixed
//! buffers; some futex operations) are not held.
//!
//! The thread that holds the guard must not store into the range itself (it would wait for
//! itself): no allocation between freezing and thawing, whose bookkeeping may live in
//! those pages.

use super::{err, Api, Range, Reader, Register, WriteProtect, OP_API, OP_REGISTER, OP_UNREGISTER, OP_WAKE};
use super::{FEATURE_PAGEFAULT_FLAG_WP, OP_WRITEPROTECT, REGISTER_MODE_WP, UFFD_API, WRITEPROTECT_MODE_WP};
use crate::seqpacket::retry_intr;
use rustix::ioctl::{Ioctl, IoctlOutput, Opcode, Updater};
use rustix::mm::UserfaultfdFlags;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::OnceLock;

const FEATURE_WP_HUGETLBFS_SHMEM: u64 = 1 << 12;
const FEATURE_WP_UNPOPULATED: u64 = 1 << 13;

/// Writes to a range held until this drops ([`freeze_writes`]).
#[derive(Debug)]
pub struct Frozen {
    fd: OwnedFd,
    range: Range,
}

/// The features a userfaultfd for holding writes is opened with, as first found to work in
/// this process (`None`: none can be had here; not asked again).
static FEATURES: OnceLock<Option<u64>> = OnceLock::new();

/// `USERFAULTFD_IOC_NEW` of `/dev/userfaultfd` (`_IO(0xAA, 0x00)`).
const OP_NEW: Opcode = rustix::ioctl::opcode::none(0xAA, 0x00);

/// The device's ioctl that makes a userfaultfd: its argument is the new fd's flags (an
/// integer, not a pointer), its result the new fd.
struct NewFromDevice(UserfaultfdFlags);

// SAFETY: `USERFAULTFD_IOC_NEW` takes its flags as the integer argument and touches no
// memory of ours; a successful call returns a new file descriptor, which we then own.
unsafe impl Ioctl for NewFromDevice {
    type Output = OwnedFd;
    const IS_MUTATING: bool = false;
    fn opcode(&self) -> Opcode {
        OP_NEW
    }
    fn as_ptr(&mut self) -> *mut std::ffi::c_void {
        std::ptr::without_provenance_mut(self.0.bits() as usize)
    }
    unsafe fn output_from_ptr(out: IoctlOutput, _: *mut std::ffi::c_void) -> rustix::io::Result<OwnedFd> {
        // SAFETY: the caller passes the return value of a successful call: a new fd.
        Ok(unsafe { OwnedFd::from_raw_fd(out) })
    }
}

/// A userfaultfd made by `/dev/userfaultfd`, for whoever may open the device (it holds
/// the kernel's stores like one the system call makes for a privileged process).
fn from_device(flags: UserfaultfdFlags) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let dev = rustix::fs::open("/dev/userfaultfd", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).ok()?;
    // SAFETY: the ioctl's argument is an integer (see `NewFromDevice`).
    unsafe { rustix::ioctl::ioctl(&dev, NewFromDevice(flags)) }.ok()
}

/// A userfaultfd that holds the kernel's stores too: the system call's (no
/// `UFFD_USER_MODE_ONLY`), else the device's.
fn new_fd(flags: UserfaultfdFlags) -> Option<OwnedFd> {
    // SAFETY: userfaultfd(2) has no memory-safety preconditions; it returns a new fd.
    match unsafe { rustix::mm::userfaultfd(flags) } {
        Ok(fd) => Some(fd),
        Err(_) => from_device(flags),
    }
}

/// A userfaultfd that holds the kernel's stores too, with write-protect faults (and, where
/// the kernel has them, on shared memory and on pages not populated yet); and its features.
fn open() -> Option<(OwnedFd, u64)> {
    open_with(new_fd)
}

/// [`open`] with the userfaultfd made by `make`.
fn open_with(make: fn(UserfaultfdFlags) -> Option<OwnedFd>) -> Option<(OwnedFd, u64)> {
    let flags = UserfaultfdFlags::CLOEXEC | UserfaultfdFlags::NONBLOCK;
    let try_open = |features: u64| {
        let fd = make(flags)?;
        let mut api = Api { api: UFFD_API, features, ioctls: 0 };
        // SAFETY: UFFDIO_API takes a struct uffdio_api, which `Api` lays out exactly.
        unsafe { rustix::ioctl::ioctl(&fd, Updater::<OP_API, Api>::new(&mut api)) }.ok()?;
        Some(fd)
    };
    if let Some(known) = FEATURES.get() {
        let features = (*known)?;
        return try_open(features).map(|fd| (fd, features));
    }
    let found = [
        FEATURE_PAGEFAULT_FLAG_WP | FEATURE_WP_HUGETLBFS_SHMEM | FEATURE_WP_UNPOPULATED,
        FEATURE_PAGEFAULT_FLAG_WP,
    ]
    .into_iter()
    .find_map(|features| try_open(features).map(|fd| (fd, features)));
    let _ = FEATURES.set(found.as_ref().map(|(_, f)| *f));
    found
}

/// Hold every store to `addr..addr+len` (page-aligned memory of this process) until the
/// returned guard drops; `None` where that cannot be done here (see the module's doc).
/// Allocates nothing once it returns.
pub fn freeze_writes(addr: usize, len: usize) -> Option<Frozen> {
    freeze_with(open()?, addr, len)
}

/// Whether this process can hold writes while its memory moves ([`freeze_writes`]), and
/// through what: `Some("the userfaultfd system call")`, `Some("/dev/userfaultfd")`, or
/// `None` (moves are unguarded here).
pub fn write_holds() -> Option<&'static str> {
    let flags = UserfaultfdFlags::CLOEXEC | UserfaultfdFlags::NONBLOCK;
    // SAFETY: userfaultfd(2) has no memory-safety preconditions; it returns a new fd.
    let how = match unsafe { rustix::mm::userfaultfd(flags) } {
        Ok(_) => "the userfaultfd system call",
        Err(_) => "/dev/userfaultfd",
    };
    open().map(|_| how)
}

/// [`freeze_writes`] through `fd`, opened with `features`.
fn freeze_with((fd, features): (OwnedFd, u64), addr: usize, len: usize) -> Option<Frozen> {
    if features & FEATURE_WP_UNPOPULATED == 0 {
        // Write protection holds present pages only on such a kernel: map the pages not
        // touched yet (the zero page for anonymous memory, no memory taken; contents
        // unchanged).
        // SAFETY: MADV_POPULATE_READ only faults the range's pages in; it changes no byte.
        let _ = unsafe { rustix::mm::madvise(addr as *mut _, len, rustix::mm::Advice::LinuxPopulateRead) };
    }
    let range = Range { start: addr as u64, len: len as u64 };
    let mut reg = Register { range, mode: REGISTER_MODE_WP, ioctls: 0 };
    // A signal does not leave the range unguarded: the call is made again.
    // SAFETY: UFFDIO_REGISTER takes a struct uffdio_register; the range is the caller's
    // memory, registered for write-protect faults only.
    retry_intr(|| unsafe { rustix::ioctl::ioctl(&fd, Updater::<OP_REGISTER, Register>::new(&mut reg)) })
        .ok()?;
    let frozen = Frozen { fd, range };
    let mut w = WriteProtect { range, mode: WRITEPROTECT_MODE_WP };
    // SAFETY: UFFDIO_WRITEPROTECT on the range just registered with this fd.
    retry_intr(|| unsafe {
        rustix::ioctl::ioctl(&frozen.fd, Updater::<OP_WRITEPROTECT, WriteProtect>::new(&mut w))
    })
    .map_err(err)
    .ok()?;
    Some(frozen)
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // Where the range is still the memory that was frozen (the remap failed), it is
        // writable again; the stores held wake and retry (against the new mapping, where
        // the remap was made); then the fd lets go of the range.
        let mut w = WriteProtect { range: self.range, mode: 0 };
        // A signal meanwhile does not leave the held stores waiting: each call is made again.
        // SAFETY: UFFDIO_WRITEPROTECT on the range registered with this fd (an error where
        // it was mapped anew meanwhile, which is ignored).
        let _ = retry_intr(|| unsafe {
            rustix::ioctl::ioctl(&self.fd, Updater::<OP_WRITEPROTECT, WriteProtect>::new(&mut w))
        });
        // SAFETY: UFFDIO_WAKE and UFFDIO_UNREGISTER only read the range struct.
        let _ =
            retry_intr(|| unsafe { rustix::ioctl::ioctl(&self.fd, Reader::<OP_WAKE, Range>(&self.range)) });
        // SAFETY: as above.
        let _ = retry_intr(|| unsafe {
            rustix::ioctl::ioctl(&self.fd, Reader::<OP_UNREGISTER, Range>(&self.range))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::freeze_writes;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_store_made_while_frozen_waits_and_lands_after() {
        store_waits_for(freeze_writes);
    }

    #[test]
    fn the_device_makes_a_userfaultfd_that_holds_stores_too() {
        if rustix::fs::access("/dev/userfaultfd", rustix::fs::Access::READ_OK | rustix::fs::Access::WRITE_OK)
            .is_err()
        {
            return eprintln!("skipped: /dev/userfaultfd is not there or not ours to open");
        }
        store_waits_for(|base, len| super::freeze_with(super::open_with(super::from_device)?, base, len));
    }

    /// A thread's store into a page frozen by `freeze` waits until the guard drops, then
    /// lands.
    fn store_waits_for(freeze: impl Fn(usize, usize) -> Option<super::Frozen>) {
        let page = crate::page_size();
        // A fresh page of our own (anonymous, private), a word in it, and a thread storing
        // into it while the page is frozen.
        // SAFETY: a fresh anonymous mapping at an address the kernel picks.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                page,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap() as usize;
        // SAFETY: `base` is a live, page-aligned mapping of ours; AtomicU64 needs 8-byte
        // alignment, which a page has.
        let word: &'static AtomicU64 = unsafe { &*(base as *const AtomicU64) };
        let Some(frozen) = freeze(base, page) else {
            return eprintln!("skipped: no userfaultfd write protection here");
        };
        let stored = Arc::new(AtomicBool::new(false));
        let s = stored.clone();
        let writer = std::thread::spawn(move || {
            word.store(7, Ordering::SeqCst);
            s.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!stored.load(Ordering::SeqCst), "a store went through while the page was frozen");
        assert_eq!(word.load(Ordering::SeqCst), 0, "loads go on, and see no store yet");
        drop(frozen);
        writer.join().unwrap();
        assert_eq!(word.load(Ordering::SeqCst), 7);
        // SAFETY: our own mapping, no longer used.
        unsafe { rustix::mm::munmap(base as *mut _, page) }.unwrap();
    }
}
