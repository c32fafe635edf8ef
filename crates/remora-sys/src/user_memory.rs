//! Turning a process's own anonymous memory into shareable segment memory, in place.
//!
//! Private anonymous pages cannot be handed to another process. To share them without a
//! kernel module, their contents are copied into a new memfd, and the memfd is mapped with
//! `MAP_FIXED | MAP_SHARED` over the very same addresses. The program keeps its pointers;
//! the memory is now a memfd that the daemon can pass to importers.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::Memfd;
use rustix::mm::{MapFlags, ProtFlags};
use std::io;

fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// Whether every byte of `addr..addr+len` lies in mappings of this process that `ok`
/// accepts, given each mapping's permissions (`rw-p` …) and path (empty for anonymous).
fn all_mapped(addr: usize, len: usize, ok: impl Fn(&str, &str) -> bool) -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    let Some(end) = addr.checked_add(len) else { return false };
    let mut cursor = addr;
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms)) = (parts.next(), parts.next()) else {
            continue;
        };
        let path = parts.nth(3).unwrap_or("");
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) else {
            continue;
        };
        if hi <= cursor || lo > cursor {
            continue;
        }
        if !ok(perms, path) {
            return false;
        }
        cursor = hi;
        if cursor >= end {
            return true;
        }
    }
    false
}

fn private_anonymous(perms: &str, path: &str) -> bool {
    perms.starts_with("rw") && perms.ends_with('p') && (path.is_empty() || path == "[heap]")
}

/// Whether every byte of `addr..addr+len` lies in private, anonymous, writable mappings of
/// this process (heap, `malloc`ed or `mmap`ed memory, not files, not the stack).
pub fn is_private_anonymous(addr: usize, len: usize) -> bool {
    all_mapped(addr, len, private_anonymous)
}

/// Whether every byte of `addr..addr+len` is writable memory that [`share_region`] may
/// move: private anonymous pages, or pages an earlier move put into a Remora memfd — save
/// pages a live SCIF window uses (`arena.rs`): moving them would take them from it.
fn is_movable(addr: usize, len: usize) -> bool {
    all_mapped(addr, len, movable) && !arena::in_live_window(addr, len)
}

/// Whether a mapping with these permissions and path is memory a move may take: private
/// anonymous pages, a stack, or pages an earlier move put into a Remora memfd.
fn movable(perms: &str, path: &str) -> bool {
    private_anonymous(perms, path)
        || perms.starts_with("rw") && perms.ends_with('p') && path == "[stack]"
        || perms.starts_with("rw") && perms.ends_with('s') && path.starts_with("/memfd:remora:")
}

/// Hold other threads' stores to `addr..addr+len` while it is copied and mapped anew
/// (`uffd/freeze.rs`): for pages that also hold other allocations (the heap), a store lost
/// between the copy and the remap would corrupt them. Not for a range near this thread's
/// own stack, which this thread writes itself meanwhile (it would wait for itself): such a
/// move goes on unguarded, as a move where userfaultfd cannot be had does.
fn hold_stores(addr: usize, len: usize) -> Option<crate::uffd::Frozen> {
    // The stack this thread writes while the range is held: its frames from here down
    // (the copy, the remap, a signal handler that runs meanwhile) and its caller's frame
    // just above (`remap_held`'s or `unshare_region`'s, a few hundred bytes; the frames
    // above that are not written until the range is let go).
    let here = &addr as *const usize as usize;
    let (below, above) = (256 << 10, 8 << 10);
    if addr < here.saturating_add(above) && here.saturating_sub(below) < addr + len {
        return None;
    }
    crate::uffd::freeze_writes(addr, len)
}

/// One move in place at a time: two moves whose page spans share a page (two heap buffers
/// in one page) could not both hold it.
static MOVING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Copy `addr..addr+len` into `into` (a mapping of `fd` from `offset`, `len` bytes) and
/// map `fd` from `offset` over the range; other threads' stores to the range wait
/// meanwhile ([`hold_stores`]), and land in `fd` once it is mapped there (it already holds
/// the bytes).
///
/// # Safety
/// The range is this process's mapped, readable and writable memory that the caller may
/// replace (the `UserRegion` contract); `into` maps `fd` at `offset`, outside the range.
unsafe fn remap_held(
    addr: *mut u8,
    len: usize,
    into: &crate::Mapping,
    fd: &Memfd,
    offset: u64,
) -> io::Result<()> {
    let _moving = MOVING.lock().unwrap_or_else(|p| p.into_inner());
    let held = hold_stores(addr as usize, len);
    // Nothing is allocated from here until `held` drops: the allocator's bookkeeping may
    // live in the held pages.
    // SAFETY: the caller's range is mapped readable memory; `into` is a distinct mapping
    // of `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(addr, into.as_ptr(), len) };
    let rw = ProtFlags::READ | ProtFlags::WRITE;
    // SAFETY: MAP_FIXED over the caller's range, which the contract hands over; `fd` holds
    // its bytes from `offset` on.
    let mapped =
        unsafe { rustix::mm::mmap(addr.cast(), len, rw, MapFlags::SHARED | MapFlags::FIXED, fd, offset) };
    drop(held);
    mapped.map(|_| ()).map_err(errno)
}

/// Copy `addr..addr+len` into a new sealed memfd and map it over the same addresses.
///
/// # Safety
/// As [`move_into_memfd`]; the range must have been checked to be mapped and writable.
unsafe fn rehome(addr: *mut u8, len: usize, name: &str) -> io::Result<Memfd> {
    let fd = Memfd::create(name, len as u64)?;
    let tmp = crate::Mapping::new(std::os::fd::AsFd::as_fd(&fd), 0, len, Default::default())?;
    // SAFETY: the caller's contract; `tmp` maps the new memfd, outside the range.
    unsafe { remap_held(addr, len, &tmp, &fd, 0)? };
    Ok(fd)
}

/// Move the pages at `addr..addr+len` into a new sealed memfd, keeping their addresses and
/// contents. Returns the memfd, which now backs those addresses.
///
/// # Errors
/// `EINVAL` when `addr` or `len` is not page-aligned or `len` is zero, `EFAULT` when the
/// range is not private anonymous writable memory, or the errno of `memfd_create`/`mmap`.
///
/// # Safety
/// No other thread may write to the range while this runs (such stores could be lost
/// between the copy and the remap). The range must not be memory that Rust code holds a
/// reference-typed view of across this call with assumptions about its mapping identity
/// (its bytes are preserved exactly).
pub unsafe fn move_into_memfd(addr: *mut u8, len: usize, name: &str) -> io::Result<Memfd> {
    let page = crate::page_size();
    if len == 0 || !(addr as usize).is_multiple_of(page) || !len.is_multiple_of(page) {
        return Err(errno(rustix::io::Errno::INVAL));
    }
    if !is_private_anonymous(addr as usize, len) {
        return Err(errno(rustix::io::Errno::FAULT));
    }
    // SAFETY: the range was checked to be private anonymous writable memory of this
    // process; the caller's contract hands it over for the move.
    unsafe { rehome(addr, len, name) }
}

/// Move an exclusively borrowed, page-aligned slice of private anonymous memory into a
/// memfd in place (the safe form of [`move_into_memfd`]).
///
/// # Errors
/// As [`move_into_memfd`].
pub fn move_slice_into_memfd(mem: &'static mut [u8], name: &str) -> io::Result<Memfd> {
    // SAFETY: the exclusive 'static borrow guarantees no other code writes the range during
    // the move, and the bytes are preserved, so the slice stays valid afterwards.
    unsafe { move_into_memfd(mem.as_mut_ptr(), mem.len(), name) }
}

/// A range of this process's memory that the node's DMA engine may read or write
/// (`SCIStartDmaTransferMem`). Creating one from raw parts is `unsafe`: the caller vouches
/// that the range stays valid, and is not otherwise accessed in conflicting ways, until the
/// transfer that uses it has ended. The default is the empty region at address 0.
#[derive(Debug, Clone, Copy, Default)]
pub struct UserRegion {
    addr: usize,
    len: usize,
}

/// A part of a gathering write ([`UserRegion::write_gathered`]).
#[derive(Debug, Clone, Copy)]
pub enum Gather<'a> {
    /// Bytes of the caller's.
    Bytes(&'a [u8]),
    /// A region of the program's memory.
    Region(UserRegion),
}

impl UserRegion {
    /// A region over memory that lives forever and that the caller gives up to the engine.
    pub fn from_static(mem: &'static mut [u8]) -> UserRegion {
        UserRegion { addr: mem.as_mut_ptr() as usize, len: mem.len() }
    }

    /// A region from an address and a length.
    ///
    /// # Safety
    /// `addr..addr+len` must be memory of this process that stays mapped, and that no one
    /// else reads or writes in conflict with the transfer, until the transfer ends.
    pub unsafe fn from_raw_parts(addr: *mut u8, len: usize) -> UserRegion {
        UserRegion { addr: addr as usize, len }
    }

    /// The first address.
    pub fn addr(&self) -> usize {
        self.addr
    }

    /// The length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The part `off..off+len` of the region (clamped to it): the same contract holds.
    pub fn sub(&self, off: usize, len: usize) -> UserRegion {
        let off = off.min(self.len);
        UserRegion { addr: self.addr + off, len: len.min(self.len - off) }
    }

    /// The whole pages that hold the region (the region itself when it is page-aligned):
    /// memory is mapped by pages, so they are mapped as long as the region is. Moving them
    /// in place keeps every byte, which is all the wider range is used for.
    pub fn page_span(&self) -> UserRegion {
        let page = crate::page_size();
        let start = self.addr - self.addr % page;
        let end = (self.addr + self.len).div_ceil(page) * page;
        UserRegion { addr: start, len: end - start }
    }

    /// A region of the same memory seen from `addr` for `len` bytes, if that lies inside
    /// this one.
    pub fn within(&self, addr: usize, len: usize) -> Option<UserRegion> {
        let off = addr.checked_sub(self.addr)?;
        (off.checked_add(len)? <= self.len).then_some(UserRegion { addr, len })
    }

    /// Copy bytes of the region at `off` into `out` (what the program would see at those
    /// addresses).
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the region.
    #[inline]
    pub fn read(&self, off: usize, out: &mut [u8]) -> io::Result<()> {
        if off.checked_add(out.len()).is_none_or(|e| e > self.len) {
            return Err(errno(rustix::io::Errno::RANGE));
        }
        // SAFETY: the range lies inside the region, which its creator vouched stays mapped
        // (`from_static` or the `from_raw_parts` contract).
        unsafe { std::ptr::copy((self.addr + off) as *const u8, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Write `head`, then `len` bytes of the region at `off`, to a stream with gathering
    /// writes (`writev`): a frame's header and its payload leave together, straight from
    /// the program's memory, with no copy of the payload on the way.
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the region; the stream's I/O error.
    pub fn write_to_after(
        &self,
        head: &[u8],
        off: usize,
        len: usize,
        w: &mut impl io::Write,
    ) -> io::Result<()> {
        if off.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(errno(rustix::io::Errno::RANGE));
        }
        // SAFETY: the range lies inside the region, which its creator vouched stays mapped
        // (`from_static` or the `from_raw_parts` contract); the bytes are only read, by the
        // kernel, while the slice lives.
        let src = unsafe { std::slice::from_raw_parts((self.addr + off) as *const u8, len) };
        crate::write_all_vectored(w, &mut [io::IoSlice::new(head), io::IoSlice::new(src)])
    }

    /// Write `parts` in order to a stream with gathering writes (`writev`): queued bytes
    /// and regions of the program's memory interleaved, none copied on the way.
    ///
    /// # Errors
    /// The stream's I/O error.
    pub fn write_gathered(w: &mut impl io::Write, parts: &[Gather<'_>]) -> io::Result<()> {
        let mut slices = Vec::with_capacity(parts.len());
        for p in parts {
            match p {
                Gather::Bytes(b) => slices.push(io::IoSlice::new(b)),
                // SAFETY: a region lies inside memory its creator vouched stays mapped
                // (`from_static` or the `from_raw_parts` contract; `sub` and `within` stay
                // inside it); the bytes are only read, by the kernel, while the slice lives.
                Gather::Region(r) => slices.push(io::IoSlice::new(unsafe {
                    std::slice::from_raw_parts(r.addr as *const u8, r.len)
                })),
            }
        }
        crate::write_all_vectored(w, &mut slices)
    }

    /// Copy `data` into the region at `off`.
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the region.
    #[inline]
    pub fn write(&self, off: usize, data: &[u8]) -> io::Result<()> {
        if off.checked_add(data.len()).is_none_or(|e| e > self.len) {
            return Err(errno(rustix::io::Errno::RANGE));
        }
        // SAFETY: as in `read`; the region is writable memory the creator handed over.
        unsafe { std::ptr::copy(data.as_ptr(), (self.addr + off) as *mut u8, data.len()) };
        Ok(())
    }

    /// Read exactly `len` bytes from a stream into the region at `off` (`read_exact`),
    /// straight into the program's memory, with no buffer in between.
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the region; the stream's I/O error (the bytes read
    /// before it are in the region).
    pub fn fill_from_reader(&self, off: usize, len: usize, r: &mut impl io::Read) -> io::Result<()> {
        if off.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(errno(rustix::io::Errno::RANGE));
        }
        // SAFETY: the range lies inside the region, which its creator vouched stays mapped,
        // writable and not otherwise accessed in conflict while the transfer runs
        // (`from_static` or the `from_raw_parts` contract); the slice lives for the read only.
        let dst = unsafe { std::slice::from_raw_parts_mut((self.addr + off) as *mut u8, len) };
        r.read_exact(dst)
    }

    /// Copy `len` bytes of `src` at `src_off` into the region at `off` (the ranges may
    /// overlap).
    ///
    /// # Errors
    /// `ERANGE` when either range leaves its region.
    pub fn copy_from(&self, off: usize, src: &UserRegion, src_off: usize, len: usize) -> io::Result<()> {
        let outside = |o: usize, r: &UserRegion| o.checked_add(len).is_none_or(|e| e > r.len);
        if outside(off, self) || outside(src_off, src) {
            return Err(errno(rustix::io::Errno::RANGE));
        }
        // SAFETY: both ranges lie inside their regions, which their creators vouched stay
        // mapped and writable (this one) or readable (`src`); `copy` allows overlap.
        unsafe { std::ptr::copy((src.addr + src_off) as *const u8, (self.addr + off) as *mut u8, len) };
        Ok(())
    }
}

/// One range moved by [`share_region`]: `(start, len, memfd, its file id)`.
pub(crate) type Moved = (usize, usize, std::sync::Arc<Memfd>, FileId);

/// A file as `/proc/self/maps` names it: device (major, minor) and inode number. The
/// inode number alone is not enough: files of two filesystems may have the same one.
pub(crate) type FileId = ((u32, u32), u64);

/// The [`FileId`] of an open file.
fn file_id(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<FileId> {
    let st = rustix::fs::fstat(fd).map_err(errno)?;
    Ok(((rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev)), st.st_ino))
}

/// Memory already moved into memfds by [`share_region`]. Taken before the arenas' book
/// (`arena.rs`) by whoever takes both.
static SHARED: std::sync::Mutex<Vec<Moved>> = std::sync::Mutex::new(Vec::new());

/// The file mapped at `addr` in this process, from `/proc/self/maps`.
fn file_at(addr: usize) -> Option<FileId> {
    file_in(&std::fs::read_to_string("/proc/self/maps").ok()?, addr)
}

/// The file mapped at `addr` according to `maps` (`/proc/self/maps`' text).
fn file_in(maps: &str, addr: usize) -> Option<FileId> {
    maps::vmas(maps).find(|v| v.lo <= addr && addr < v.hi).map(|v| (v.dev, v.ino))
}

/// Forget the ranges [`share_region`] moved whose addresses no longer map their memfd
/// (the program unmapped them, or mapped something else there): the memfd's memory then
/// goes once every window, segment and map of it is gone, instead of staying with the
/// process until it exits. Called at each [`share_region`] and when windows go
/// (`scif_unregister`, `scif_close`).
/// Arenas ([`share_window`]) that waste much memory (handed out, used by no live window,
/// no longer mapped by the program) stop taking moves, and arenas that take no moves and
/// that no live window uses are let go (their pages go with the last map of them).
pub fn prune_shared() {
    // Both books are locked before the maps are read (SHARED first, as everywhere): maps
    // read earlier would not show memory another thread moved, registered and unregistered
    // meanwhile, which the program still maps.
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if shared.is_empty() && !arena::holds_any() {
        return;
    }
    let mut book = arena::book();
    // Unreadable maps (no descriptor left, say): keep everything rather than guess.
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return };
    prune_in(&mut shared, &maps);
    arena::prune(&mut book, &maps);
}

fn prune_locked(shared: &mut Vec<Moved>) {
    if shared.is_empty() {
        return;
    }
    // Unreadable maps (no descriptor left, say): keep everything rather than guess.
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return };
    prune_in(shared, &maps);
}

/// [`prune_locked`] as `maps` (`/proc/self/maps`' text) shows the process.
fn prune_in(shared: &mut Vec<Moved>, maps: &str) {
    let page = crate::page_size();
    shared.retain(|(s, l, _, id)| file_in(maps, *s) == Some(*id) && file_in(maps, s + l - page) == Some(*id));
}

/// Make `region` shareable and say where it lives: the memfd that backs it and the byte
/// offset of its first page in that memfd. Private anonymous memory is moved into a new
/// memfd in place (as [`move_into_memfd`]); memory that an earlier call moved is found
/// again, so registering the same pages twice shares them (`scif_register` of one buffer
/// in two windows).
///
/// # Errors
/// `EINVAL` when the region is not page-aligned or empty; `EFAULT` when it is neither
/// private anonymous memory nor memory moved before (a file mapping, say).
pub fn share_region(region: UserRegion, name: &str) -> io::Result<(std::sync::Arc<Memfd>, u64)> {
    let page = crate::page_size();
    let (addr, len) = (region.addr(), region.len());
    if len == 0 || !addr.is_multiple_of(page) || !len.is_multiple_of(page) {
        return Err(errno(rustix::io::Errno::INVAL));
    }
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    prune_locked(&mut shared);
    if let Some((start, _, fd, id)) =
        shared.iter().find(|(s, l, _, _)| addr >= *s && addr.checked_add(len).is_some_and(|e| e <= s + l))
    {
        let (mapped_first, mapped_last) = (file_at(addr), file_at(addr + len - 1));
        if mapped_first == Some(*id) && mapped_last == Some(*id) {
            return Ok((fd.clone(), (addr - start) as u64));
        }
    }
    // A range that is partly memory moved before moves as a whole into a new memfd, and
    // whatever was shared before no longer sees these addresses: callers that want one
    // page to back several windows cut the range with `shared_splits` first and share the
    // parts one by one (`scif_register`, `VipRegisterMem`).
    if !is_movable(addr, len) {
        return Err(errno(rustix::io::Errno::FAULT));
    }
    // SAFETY: the `UserRegion` contract: the range is this process's memory, stays mapped
    // and is not accessed in conflict while we move it; it was checked to be writable
    // memory of a movable kind; its bytes are preserved.
    let fd = unsafe { rehome(addr as *mut u8, len, name)? };
    let id = file_id(std::os::fd::AsFd::as_fd(&fd))?;
    shared.retain(|(s, l, _, _)| s + l <= addr || *s >= addr + len);
    let fd = std::sync::Arc::new(fd);
    shared.push((addr, len, fd.clone(), id));
    Ok((fd, 0))
}

/// `region` (page-aligned) cut where memory shared by [`share_region`] begins or ends, so
/// that each part lies wholly inside one shared range or wholly outside all of them:
/// sharing the parts one by one never moves pages an earlier call shared.
pub fn shared_splits(region: UserRegion) -> Vec<UserRegion> {
    let (start, end) = (region.addr(), region.addr() + region.len());
    let shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    let mut cuts: Vec<usize> =
        shared.iter().flat_map(|(s, l, _, _)| [*s, s + l]).filter(|c| *c > start && *c < end).collect();
    cuts.push(start);
    cuts.push(end);
    cuts.sort_unstable();
    cuts.dedup();
    cuts.windows(2).map(|w| region.sub(w[0] - start, w[1] - w[0])).collect()
}

/// Move `region` into a memfd of its own, in place (as [`move_into_memfd`]), whatever kind
/// of writable private memory it is: heap, anonymous `mmap`, a thread's or the main
/// thread's stack, or memory an earlier move put into a Remora memfd (which is copied out
/// of that one). Returns the memfd, which now backs exactly those addresses.
///
/// # Errors
/// `EINVAL` when the region is not page-aligned or empty; `EFAULT` when it is not
/// movable memory (a file mapping, read-only memory, a hole).
pub fn move_region(region: UserRegion, name: &str) -> io::Result<Memfd> {
    let page = crate::page_size();
    let (addr, len) = (region.addr(), region.len());
    if len == 0 || !addr.is_multiple_of(page) || !len.is_multiple_of(page) {
        return Err(errno(rustix::io::Errno::INVAL));
    }
    if !is_movable(addr, len) {
        return Err(errno(rustix::io::Errno::FAULT));
    }
    // SAFETY: the `UserRegion` contract (the range is this process's, stays mapped and is
    // not written by others during the move); checked writable and movable above; the
    // bytes are preserved.
    unsafe { rehome(addr as *mut u8, len, name) }
}

/// Give `region` private memory again, with the bytes it holds now: the addresses stop
/// showing the memfd they were moved into (an RSM export destroyed or rebound elsewhere:
/// what the program writes there afterwards is its own again). A range that no longer
/// shows a memfd of Remora's (the program freed it, or mapped something else there) is
/// left alone: there is nothing to give back, and copying it would fault or overwrite
/// what is there now.
///
/// # Errors
/// `EINVAL` when not page-aligned or empty; the errno of `mmap`.
pub fn unshare_region(region: UserRegion) -> io::Result<()> {
    let page = crate::page_size();
    let (addr, len) = (region.addr(), region.len());
    if len == 0 || !addr.is_multiple_of(page) || !len.is_multiple_of(page) {
        return Err(errno(rustix::io::Errno::INVAL));
    }
    if !all_mapped(addr, len, |perms, path| perms.ends_with('s') && path.starts_with("/memfd:remora:")) {
        return Ok(());
    }
    // Fresh private pages elsewhere get the bytes, then move over the range in one step
    // (a store never finds the new pages before they hold the bytes); other threads'
    // stores to the range wait meanwhile.
    let rw = ProtFlags::READ | ProtFlags::WRITE;
    // SAFETY: a fresh anonymous mapping at an address the kernel picks.
    let fresh = unsafe { rustix::mm::mmap_anonymous(std::ptr::null_mut(), len, rw, MapFlags::PRIVATE) }
        .map_err(errno)?;
    let _moving = MOVING.lock().unwrap_or_else(|p| p.into_inner());
    let held = hold_stores(addr, len);
    // Nothing is allocated until `held` drops (see `remap_held`).
    // SAFETY: the caller's range is mapped readable memory (`UserRegion` contract);
    // `fresh` is our new mapping of `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, fresh.cast::<u8>(), len) };
    // SAFETY: moves our `fresh` pages over the caller's range, which the contract hands
    // over (the old pages there are unmapped); `fresh` is gone afterwards.
    let moved = unsafe {
        rustix::mm::mremap_fixed(fresh, len, len, rustix::mm::MremapFlags::MAYMOVE, addr as *mut _)
    };
    if moved.is_err() {
        // The move may have failed after unmapping the range: private pages there again,
        // with the bytes, before anyone held may store (then `fresh` goes).
        // SAFETY: MAP_FIXED over the caller's range, as above; `fresh` is still ours and
        // holds the bytes.
        unsafe {
            if rustix::mm::mmap_anonymous(addr as *mut _, len, rw, MapFlags::PRIVATE | MapFlags::FIXED)
                .is_ok()
            {
                std::ptr::copy_nonoverlapping(fresh.cast::<u8>(), addr as *mut u8, len);
            }
            let _ = rustix::mm::munmap(fresh, len);
        }
    }
    drop(held);
    moved.map(|_| ()).map_err(errno)
}

/// Make `region` show `fd` from byte `offset` on, after copying the bytes the region holds
/// into that part of `fd` (RSM's `rsm_memseg_export_rebind`: new memory behind an export,
/// seen through every importer's existing map).
///
/// # Errors
/// `EINVAL` when not page-aligned, empty or beyond `fd`; `EFAULT` when the region is not
/// movable memory; the errno of `mmap`.
pub fn rebind_region(region: UserRegion, fd: &Memfd, offset: u64) -> io::Result<()> {
    let page = crate::page_size();
    let (addr, len) = (region.addr(), region.len());
    let fits = offset.checked_add(len as u64).is_some_and(|e| e <= fd.size());
    if len == 0
        || !addr.is_multiple_of(page)
        || !len.is_multiple_of(page)
        || !(offset as usize).is_multiple_of(page)
        || !fits
    {
        return Err(errno(rustix::io::Errno::INVAL));
    }
    if !is_movable(addr, len) {
        return Err(errno(rustix::io::Errno::FAULT));
    }
    let tmp = crate::Mapping::new(std::os::fd::AsFd::as_fd(fd), offset, len, Default::default())?;
    // SAFETY: the `UserRegion` contract hands the range over; `tmp` maps `fd` at `offset`,
    // outside it.
    unsafe { remap_held(addr as *mut u8, len, &tmp, fd, offset) }
}

mod arena;
mod maps;
mod ranges;
mod shared_file;
pub use arena::{share_window, Arena, Lease, WindowMemory};

#[cfg(test)]
mod tests;
