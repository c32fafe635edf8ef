//! userfaultfd: the kernel hook behind Remora's distributed shared memory.
//!
//! A [`Uffd`] owns one userfaultfd of this process; each [`UffdRegion`] is an anonymous
//! private mapping registered with it for *missing* and *write-protect* faults. The pager
//! thread reads [`Fault`]s, fills missing pages with [`Uffd::copy_page`] (installed
//! write-protected, so the first store is seen too), lifts the protection of a page being
//! written with [`Uffd::protect`], and poisons pages it can never fill ([`Uffd::poison`]:
//! the access then raises SIGBUS rather than hanging).
//!
//! Only user-mode faults are requested (`UFFD_USER_MODE_ONLY`), so unprivileged processes
//! may use it where the kernel allows.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
mod freeze;

pub use freeze::{freeze_writes, write_holds, Frozen};
use rustix::ioctl::{opcode, Ioctl, Opcode, Updater};
use rustix::mm::{MapFlags, ProtFlags, UserfaultfdFlags};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

const PAGE: usize = 4096;
const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: u32 = 1;
const FEATURE_PAGEFAULT_FLAG_WP: u64 = 1 << 0;
const FEATURE_THREAD_ID: u64 = 1 << 8;
const FEATURE_POISON: u64 = 1 << 14;
const REGISTER_MODE_MISSING: u64 = 1;
const REGISTER_MODE_WP: u64 = 2;
const COPY_MODE_WP: u64 = 2;
const WRITEPROTECT_MODE_WP: u64 = 1;
const EVENT_PAGEFAULT: u8 = 0x12;
const PAGEFAULT_FLAG_WRITE: u64 = 1;
const PAGEFAULT_FLAG_WP: u64 = 2;

#[repr(C)]
struct Api {
    api: u64,
    features: u64,
    ioctls: u64,
}
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Range {
    start: u64,
    len: u64,
}
#[repr(C)]
struct Register {
    range: Range,
    mode: u64,
    ioctls: u64,
}
#[repr(C)]
struct Copy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}
#[repr(C)]
struct WriteProtect {
    range: Range,
    mode: u64,
}
#[repr(C)]
struct Poison {
    range: Range,
    mode: u64,
    updated: i64,
}

const OP_API: Opcode = opcode::read_write::<Api>(0xAA, 0x3F);
const OP_REGISTER: Opcode = opcode::read_write::<Register>(0xAA, 0x00);
const OP_UNREGISTER: Opcode = opcode::read::<Range>(0xAA, 0x01);
const OP_WAKE: Opcode = opcode::read::<Range>(0xAA, 0x02);
const OP_COPY: Opcode = opcode::read_write::<Copy>(0xAA, 0x03);
const OP_WRITEPROTECT: Opcode = opcode::read_write::<WriteProtect>(0xAA, 0x06);
const OP_POISON: Opcode = opcode::read_write::<Poison>(0xAA, 0x08);

/// An ioctl that passes a pointer to a value the kernel only reads.
struct Reader<'a, const OP: Opcode, T>(&'a T);

// SAFETY: the opcode encodes a read-direction ioctl whose argument is exactly `T`; the
// pointer is valid for the duration of the call and the kernel does not write through it.
unsafe impl<const OP: Opcode, T> Ioctl for Reader<'_, OP, T> {
    type Output = ();
    const IS_MUTATING: bool = false;
    fn opcode(&self) -> Opcode {
        OP
    }
    fn as_ptr(&mut self) -> *mut std::ffi::c_void {
        self.0 as *const T as *mut std::ffi::c_void
    }
    unsafe fn output_from_ptr(
        _: rustix::ioctl::IoctlOutput,
        _: *mut std::ffi::c_void,
    ) -> rustix::io::Result<()> {
        Ok(())
    }
}

fn err(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// This process's userfaultfd.
#[derive(Debug)]
pub struct Uffd {
    fd: OwnedFd,
    poison: bool,
}

/// A registered region: anonymous private memory whose pages the pager fills.
#[derive(Debug)]
pub struct UffdRegion {
    base: usize,
    len: usize,
}

/// The regions of this process that exist (first address, length, writable).
static REGIONS: std::sync::Mutex<Vec<(usize, usize, bool)>> = std::sync::Mutex::new(Vec::new());

/// Whether `addr..addr + len` overlaps a registered region of this process: touching it
/// may wait for the pager (a thread holding something the pager needs must not).
pub fn overlaps_registered(addr: usize, len: usize) -> bool {
    let end = addr.saturating_add(len);
    let regions = REGIONS.lock().unwrap_or_else(|p| p.into_inner());
    regions.iter().any(|&(b, l, _)| addr < b + l && b < end)
}

/// The parts of `addr..addr + len` that lie in registered regions of this process, in
/// address order, each as (start, end, writable): memory a load of this process fetches
/// (and a store, where writable) through the pager, though the kernel's own accesses to
/// pages not fetched yet fail (only user-mode faults are served). Empty, and no
/// allocation, when the range touches none.
pub fn registered_parts(addr: usize, len: usize) -> Vec<(usize, usize, bool)> {
    let end = addr.saturating_add(len);
    let regions = REGIONS.lock().unwrap_or_else(|p| p.into_inner());
    let mut parts: Vec<(usize, usize, bool)> = regions
        .iter()
        .filter(|&&(b, l, _)| addr < b + l && b < end)
        .map(|&(b, l, w)| (b.max(addr), (b + l).min(end), w))
        .collect();
    parts.sort_unstable_by_key(|p| p.0);
    parts
}

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The faulting address (page-aligned).
    pub addr: usize,
    /// A write to a write-protected page (otherwise: a missing page).
    pub wp: bool,
    /// The access was a write.
    pub write: bool,
    /// The faulting thread's id, as [`this_thread`] gives it (0 where the kernel does not
    /// tell).
    pub tid: u32,
}

/// The calling thread's id (the kernel's), as a [`Fault`] names the thread that faulted:
/// asked of the kernel once per thread (and again in a child of `fork`).
pub fn this_thread() -> u32 {
    thread_local!(static TID: std::cell::Cell<(u32, u32)> = const { std::cell::Cell::new((0, 0)) });
    let pid = crate::sched::own_pid();
    TID.with(|t| match t.get() {
        (p, tid) if p == pid => tid,
        _ => {
            let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
            t.set((pid, tid));
            tid
        }
    })
}

impl Uffd {
    /// Open a userfaultfd (non-blocking, close-on-exec, user faults only) and negotiate
    /// write-protect faults.
    ///
    /// # Errors
    /// `EPERM`/`ENOSYS` where userfaultfd is unavailable; `EINVAL` where write-protect
    /// faults are not supported.
    pub fn new() -> io::Result<Uffd> {
        let flags = UserfaultfdFlags::CLOEXEC
            | UserfaultfdFlags::NONBLOCK
            | UserfaultfdFlags::from_bits_retain(UFFD_USER_MODE_ONLY);
        // SAFETY: userfaultfd(2) has no memory-safety preconditions; it returns a new fd.
        let fd = unsafe { rustix::mm::userfaultfd(flags) }.map_err(err)?;
        let want = FEATURE_PAGEFAULT_FLAG_WP | FEATURE_THREAD_ID;
        let mut api = Api { api: UFFD_API, features: want | FEATURE_POISON, ioctls: 0 };
        // SAFETY: UFFDIO_API takes a struct uffdio_api, which `Api` lays out exactly.
        let r = unsafe { rustix::ioctl::ioctl(&fd, Updater::<OP_API, Api>::new(&mut api)) };
        let poison = match r {
            Ok(()) => api.features & FEATURE_POISON != 0,
            Err(_) => {
                // Older kernels: ask again without poison (a fd accepts one UFFDIO_API).
                // SAFETY: as above.
                let fd = unsafe { rustix::mm::userfaultfd(flags) }.map_err(err)?;
                let mut api = Api { api: UFFD_API, features: want, ioctls: 0 };
                // SAFETY: as above.
                unsafe { rustix::ioctl::ioctl(&fd, Updater::<OP_API, Api>::new(&mut api)) }.map_err(err)?;
                return Ok(Uffd { fd, poison: false });
            }
        };
        Ok(Uffd { fd, poison })
    }

    /// Whether pages can be poisoned (SIGBUS on access).
    pub fn supports_poison(&self) -> bool {
        self.poison
    }

    /// Reserve `len` bytes (rounded up to pages) of anonymous memory and register them for
    /// missing and write-protect faults. `readonly` maps them read-only.
    ///
    /// # Errors
    /// The errno of `mmap` or `UFFDIO_REGISTER`.
    pub fn register(&self, len: usize, readonly: bool) -> io::Result<UffdRegion> {
        let len = crate::page_round_up(len.max(1));
        // SAFETY: a fresh anonymous mapping at an address the kernel picks.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .map_err(err)? as usize;
        let region = UffdRegion { base, len };
        REGIONS.lock().unwrap_or_else(|p| p.into_inner()).push((base, len, !readonly));
        let mut reg = Register {
            range: Range { start: base as u64, len: len as u64 },
            mode: REGISTER_MODE_MISSING | if readonly { 0 } else { REGISTER_MODE_WP },
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER takes a struct uffdio_register over memory we own.
        unsafe { rustix::ioctl::ioctl(&self.fd, Updater::<OP_REGISTER, Register>::new(&mut reg)) }
            .map_err(err)?;
        if readonly {
            // SAFETY: our own mapping; stores now fault with SIGSEGV, loads still fill.
            unsafe { rustix::mm::mprotect(base as *mut _, len, rustix::mm::MprotectFlags::READ) }
                .map_err(err)?;
        }
        Ok(region)
    }

    /// The next fault, if one waits.
    ///
    /// # Errors
    /// The errno of `read` (other than `EAGAIN`).
    pub fn next_fault(&self) -> io::Result<Option<Fault>> {
        let mut msg = [0u8; 32];
        match rustix::io::read(&self.fd, &mut msg) {
            Ok(32) => {}
            Ok(_) => return Ok(None),
            Err(rustix::io::Errno::AGAIN) => return Ok(None),
            Err(e) => return Err(err(e)),
        }
        if msg[0] != EVENT_PAGEFAULT {
            return Ok(None);
        }
        let flags = u64::from_ne_bytes(msg[8..16].try_into().expect("8 bytes"));
        let addr = u64::from_ne_bytes(msg[16..24].try_into().expect("8 bytes")) as usize & !(PAGE - 1);
        // `feat.ptid`, filled with UFFD_FEATURE_THREAD_ID.
        let tid = u32::from_ne_bytes(msg[24..28].try_into().expect("4 bytes"));
        Ok(Some(Fault {
            addr,
            wp: flags & PAGEFAULT_FLAG_WP != 0,
            write: flags & PAGEFAULT_FLAG_WRITE != 0,
            tid,
        }))
    }

    /// Fill the missing page at `addr` of `region` with `data` (one page), optionally
    /// write-protected, and wake the faulting thread. `Ok(false)` when the page was already
    /// there.
    ///
    /// # Errors
    /// `EINVAL` for an address outside the region or a short page; the errno of `UFFDIO_COPY`.
    pub fn copy_page(
        &self,
        region: &UffdRegion,
        addr: usize,
        data: &[u8],
        write_protect: bool,
    ) -> io::Result<bool> {
        if data.len() != PAGE || !region.contains(addr, PAGE) {
            return Err(io::Error::from_raw_os_error(libc_einval()));
        }
        let mut c = Copy {
            dst: addr as u64,
            src: data.as_ptr() as u64,
            len: PAGE as u64,
            mode: if write_protect { COPY_MODE_WP } else { 0 },
            copy: 0,
        };
        // SAFETY: UFFDIO_COPY reads one page from `data` (a live slice of that length) into
        // a page of a region registered with this fd.
        match unsafe { rustix::ioctl::ioctl(&self.fd, Updater::<OP_COPY, Copy>::new(&mut c)) } {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::EXIST) => {
                self.wake(region, addr, PAGE)?;
                Ok(false)
            }
            Err(e) => Err(err(e)),
        }
    }

    /// Set (`on`) or lift write protection on `addr..addr+len` of `region`; lifting it
    /// wakes threads waiting on it.
    ///
    /// # Errors
    /// `EINVAL` outside the region; the errno of `UFFDIO_WRITEPROTECT`.
    pub fn protect(&self, region: &UffdRegion, addr: usize, len: usize, on: bool) -> io::Result<()> {
        if !region.contains(addr, len) {
            return Err(io::Error::from_raw_os_error(libc_einval()));
        }
        let mut w = WriteProtect {
            range: Range { start: addr as u64, len: len as u64 },
            mode: if on { WRITEPROTECT_MODE_WP } else { 0 },
        };
        // SAFETY: UFFDIO_WRITEPROTECT on a range of a region registered with this fd.
        unsafe { rustix::ioctl::ioctl(&self.fd, Updater::<OP_WRITEPROTECT, WriteProtect>::new(&mut w)) }
            .map_err(err)
    }

    /// Wake threads waiting on faults in `addr..addr+len` (they retry the access).
    ///
    /// # Errors
    /// The errno of `UFFDIO_WAKE`.
    pub fn wake(&self, region: &UffdRegion, addr: usize, len: usize) -> io::Result<()> {
        if !region.contains(addr, len) {
            return Err(io::Error::from_raw_os_error(libc_einval()));
        }
        let r = Range { start: addr as u64, len: len as u64 };
        // SAFETY: UFFDIO_WAKE only reads the range struct.
        unsafe { rustix::ioctl::ioctl(&self.fd, Reader::<OP_WAKE, Range>(&r)) }.map_err(err)
    }

    /// Make every later access to `addr..addr+len` raise SIGBUS (the memory can never be
    /// filled), and wake the threads waiting there.
    ///
    /// # Errors
    /// `EOPNOTSUPP` without kernel support; the errno of `UFFDIO_POISON`.
    pub fn poison(&self, region: &UffdRegion, addr: usize, len: usize) -> io::Result<()> {
        if !self.poison {
            return Err(io::Error::from_raw_os_error(95));
        }
        if !region.contains(addr, len) {
            return Err(io::Error::from_raw_os_error(libc_einval()));
        }
        let mut p = Poison { range: Range { start: addr as u64, len: len as u64 }, mode: 0, updated: 0 };
        // SAFETY: UFFDIO_POISON on a range of a region registered with this fd.
        match unsafe { rustix::ioctl::ioctl(&self.fd, Updater::<OP_POISON, Poison>::new(&mut p)) } {
            Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
            Err(e) => Err(err(e)),
        }
    }

    /// Stop handling faults for `region` and unmap it.
    pub fn release(&self, region: UffdRegion) {
        let r = Range { start: region.base as u64, len: region.len as u64 };
        // SAFETY: UFFDIO_UNREGISTER only reads the range struct.
        let _ = unsafe { rustix::ioctl::ioctl(&self.fd, Reader::<OP_UNREGISTER, Range>(&r)) };
        drop(region);
    }
}

fn libc_einval() -> i32 {
    rustix::io::Errno::INVAL.raw_os_error()
}

impl AsFd for Uffd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl UffdRegion {
    /// The first address.
    pub fn base(&self) -> usize {
        self.base
    }

    /// The length (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `addr..addr+len` lies inside.
    pub fn contains(&self, addr: usize, len: usize) -> bool {
        addr >= self.base && addr.checked_add(len).is_some_and(|e| e <= self.base + self.len)
    }

    /// Whether the page at `addr` differs from `twin`, compared in place (one pass, no
    /// copy). Only for pages known to be present, as [`UffdRegion::read_present_page`].
    ///
    /// # Errors
    /// `EINVAL` outside the region or for a short twin.
    pub fn present_page_differs(&self, addr: usize, twin: &[u8]) -> io::Result<bool> {
        if twin.len() != PAGE || !self.contains(addr, PAGE) || !addr.is_multiple_of(8) {
            return Err(io::Error::from_raw_os_error(libc_einval()));
        }
        let mut i = 0;
        while i < PAGE {
            let mut w = [0u8; 8];
            w.copy_from_slice(&twin[i..i + 8]);
            // SAFETY: an aligned word inside our live mapping, read as an atomic because other
            // threads may store to it meanwhile. (Present, by the caller's contract, only so
            // that the pager never faults on a page it serves itself.)
            let now = unsafe { std::sync::atomic::AtomicU64::from_ptr((addr + i) as *mut u64) }
                .load(std::sync::atomic::Ordering::Relaxed);
            if now != u64::from_ne_bytes(w) {
                return Ok(true);
            }
            i += 8;
        }
        Ok(false)
    }

    /// Copy the page at `addr` out. Only for pages known to be present (the pager's own
    /// reads must never fault: the pager is the thread that resolves faults).
    ///
    /// # Errors
    /// `EINVAL` outside the region or for a short buffer.
    pub fn read_present_page(&self, addr: usize, out: &mut [u8]) -> io::Result<()> {
        if out.len() != PAGE || !self.contains(addr, PAGE) {
            return Err(io::Error::from_raw_os_error(libc_einval()));
        }
        // SAFETY: the range is inside our mapping and, by the caller's contract, resident, so
        // the copy does not fault; concurrent stores by other threads are like any shared
        // memory race and cannot make the copy read outside the page.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), PAGE) };
        Ok(())
    }

    /// Copy `data` into the region at byte `off` from an application thread (pages fault
    /// in through the pager as they are touched). Never call this on the pager thread.
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the region.
    pub fn write_at(&self, off: usize, data: &[u8]) -> io::Result<()> {
        if !self.contains(self.base + off.min(self.len), data.len()) || off > self.len {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::RANGE.raw_os_error()));
        }
        // SAFETY: the range is inside our live mapping; missing or protected pages make this
        // thread wait for the pager, which fills or unprotects them.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (self.base + off) as *mut u8, data.len()) };
        Ok(())
    }

    /// Copy from the region at byte `off` into `out` (application threads only).
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the region.
    pub fn read_at(&self, off: usize, out: &mut [u8]) -> io::Result<()> {
        if !self.contains(self.base + off.min(self.len), out.len()) || off > self.len {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::RANGE.raw_os_error()));
        }
        // SAFETY: as in `write_at`, reading.
        unsafe { std::ptr::copy_nonoverlapping((self.base + off) as *const u8, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// An atomic view of the 8 bytes at `off` (8-aligned, inside; application threads only).
    pub fn atomic_u64(&self, off: usize) -> Option<&std::sync::atomic::AtomicU64> {
        if !(self.base + off).is_multiple_of(8) || off > self.len || !self.contains(self.base + off, 8) {
            return None;
        }
        // SAFETY: aligned, inside the live mapping for the lifetime of &self.
        Some(unsafe { &*((self.base + off) as *const std::sync::atomic::AtomicU64) })
    }

    /// Drop the pages at `addr..addr+len`: the next access faults as missing again.
    ///
    /// # Errors
    /// `EINVAL` outside the region; the errno of `madvise`.
    pub fn drop_pages(&self, addr: usize, len: usize) -> io::Result<()> {
        if !self.contains(addr, len) {
            return Err(io::Error::from_raw_os_error(libc_einval()));
        }
        // SAFETY: MADV_DONTNEED on our own anonymous mapping: the contents are discarded,
        // which is the point (the pager refetches them); no reference into it is held.
        unsafe { rustix::mm::madvise(addr as *mut _, len, rustix::mm::Advice::LinuxDontNeed) }.map_err(err)
    }
}

impl Drop for UffdRegion {
    fn drop(&mut self) {
        REGIONS.lock().unwrap_or_else(|p| p.into_inner()).retain(|&(b, _, _)| b != self.base);
        // SAFETY: the region's own mapping, no longer registered or used.
        unsafe {
            let _ = rustix::mm::munmap(self.base as *mut _, self.len);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// The tests that register regions run one at a time (a region freed by one may come
    /// back at the same address in another).
    pub(crate) static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn registered_regions_are_known_while_they_live() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let u = match Uffd::new() {
            Ok(u) => u,
            Err(e) => return eprintln!("userfaultfd unavailable here ({e}); skipping"),
        };
        let region = u.register(3 * PAGE, false).unwrap();
        let base = region.base();
        assert!(overlaps_registered(base, 1));
        assert!(overlaps_registered(base + 3 * PAGE - 1, 100));
        assert!(overlaps_registered(base - 10, 11));
        assert!(!overlaps_registered(base - 10, 10));
        assert!(!overlaps_registered(base + 3 * PAGE, PAGE));
        drop(region);
        assert!(!overlaps_registered(base, 3 * PAGE));
    }

    #[test]
    fn missing_and_write_protect_faults() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let u = match Uffd::new() {
            Ok(u) => Arc::new(u),
            Err(e) => {
                eprintln!("userfaultfd unavailable here ({e}); skipping");
                return;
            }
        };
        let region = Arc::new(u.register(2 * PAGE, false).unwrap());
        let base = region.base();
        let (u2, r2) = (u.clone(), region.clone());
        let pager = std::thread::spawn(move || {
            let mut seen = Vec::new();
            while seen.len() < 2 {
                let mut fds = [rustix::event::PollFd::new(&u2.fd, rustix::event::PollFlags::IN)];
                let _ = rustix::event::poll(&mut fds, None);
                while let Some(f) = u2.next_fault().unwrap() {
                    seen.push(f);
                    if f.wp {
                        u2.protect(&r2, f.addr, PAGE, false).unwrap();
                    } else {
                        u2.copy_page(&r2, f.addr, &[7u8; PAGE], true).unwrap();
                    }
                }
            }
            seen
        });
        // SAFETY: test-only access to the registered region; the pager resolves faults.
        let word = unsafe { &*(base as *const AtomicU64) };
        assert_eq!(word.load(Ordering::SeqCst), 0x0707_0707_0707_0707);
        word.store(1, Ordering::SeqCst);
        let seen = pager.join().unwrap();
        assert!(!seen[0].wp && seen[1].wp && seen[1].write);
        // Each fault names the thread that took it.
        assert!(seen.iter().all(|f| f.tid == this_thread()), "{seen:?} on thread {}", this_thread());
        let mut out = [0u8; PAGE];
        region.read_present_page(base, &mut out).unwrap();
        assert_eq!(out[0], 1);
        assert_eq!(out[8], 7);
    }
}
