//! `mmap`ed views of segment memory.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use rustix::mm::{MapFlags, ProtFlags};
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// Copy `len` bytes; small copies (message slots, words) inline instead of a `memcpy` call.
///
/// # Safety
/// As `copy_nonoverlapping`: both ranges valid for `len` bytes and not overlapping.
#[inline(always)]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    if len <= 16 {
        let mut i = 0;
        while i + 8 <= len {
            // SAFETY: i + 8 <= len, inside both ranges; unaligned access is explicit.
            unsafe { dst.add(i).cast::<u64>().write_unaligned(src.add(i).cast::<u64>().read_unaligned()) };
            i += 8;
        }
        while i < len {
            // SAFETY: i < len, inside both ranges.
            unsafe { *dst.add(i) = *src.add(i) };
            i += 1;
        }
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
    }
}

/// How to map.
#[derive(Debug, Clone, Copy, Default)]
pub struct MapOptions {
    /// Map read-only: the MMU faults any store.
    pub readonly: bool,
    /// Place the first byte of the mapping at this address. The kernel refuses
    /// (`EEXIST`) rather than replace memory already mapped there (`MAP_FIXED_NOREPLACE`).
    pub fixed_addr: Option<usize>,
}

/// A shared mapping of `len` bytes of a file starting at byte `offset`.
///
/// The offset need not be page-aligned: the mapping starts at the page below it and the
/// pointer points at the requested byte. The mapping is removed on drop.
#[derive(Debug)]
pub struct Mapping {
    base: *mut u8,
    map_len: usize,
    ptr: *mut u8,
    len: usize,
    readonly: bool,
}

// SAFETY: a Mapping is a plain address range of shared memory; it carries no thread-affine
// state, and all access through it goes through methods that are sound from any thread
// (copies into shared memory that other processes may also write, like any shm segment).
unsafe impl Send for Mapping {}
// SAFETY: see Send; `&Mapping` only allows copies and atomics into the range.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes of `fd` from `offset`.
    ///
    /// # Errors
    /// `EINVAL` for a zero length or a fixed address whose page offset differs from the
    /// offset's; otherwise the errno of `mmap` (`EEXIST` when the fixed range is in use).
    pub fn new(fd: BorrowedFd<'_>, offset: u64, len: usize, opts: MapOptions) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
        }
        let page = crate::page_size() as u64;
        let delta = (offset % page) as usize;
        let file_off = offset - delta as u64;
        let map_len = crate::page_round_up(len + delta);
        let prot = if opts.readonly { ProtFlags::READ } else { ProtFlags::READ | ProtFlags::WRITE };
        let mut flags = MapFlags::SHARED;
        let hint = match opts.fixed_addr {
            Some(addr) => {
                if addr % page as usize != delta {
                    return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
                }
                flags |= MapFlags::FIXED_NOREPLACE;
                (addr - delta) as *mut std::ffi::c_void
            }
            None => std::ptr::null_mut(),
        };
        // SAFETY: with a null hint the kernel picks unused addresses; with a hint we pass
        // MAP_FIXED_NOREPLACE, so no existing mapping of this process is replaced. The fd
        // is borrowed for the duration of the call only; the mapping keeps its own reference.
        let base = unsafe { rustix::mm::mmap(hint, map_len, prot, flags, fd, file_off)? } as *mut u8;
        if let Some(addr) = opts.fixed_addr {
            // Old kernels ignore FIXED_NOREPLACE and treat it as a hint.
            if base as usize != addr - delta {
                // SAFETY: `base..base+map_len` was just mapped by us and is not shared.
                unsafe {
                    let _ = rustix::mm::munmap(base.cast(), map_len);
                }
                return Err(io::Error::from_raw_os_error(rustix::io::Errno::EXIST.raw_os_error()));
            }
        }
        // SAFETY: delta < page <= map_len, so the pointer stays inside the mapping.
        let ptr = unsafe { base.add(delta) };
        Ok(Mapping { base, map_len, ptr, len, readonly: opts.readonly })
    }

    /// Map several page-aligned pieces of files one after another into one contiguous
    /// range of addresses (a SCIF map across adjacent windows). Each piece is
    /// `(fd, offset, len)`; offsets and lengths must be page multiples.
    ///
    /// # Errors
    /// `EINVAL` for an empty list or unaligned pieces; the errno of `mmap`.
    pub fn new_pieces(pieces: &[(BorrowedFd<'_>, u64, usize)], readonly: bool) -> io::Result<Mapping> {
        // SAFETY: no address is requested, so nothing of the process is replaced.
        unsafe { Mapping::new_pieces_at(pieces, readonly, None) }
    }

    /// [`Mapping::new_pieces`] at address `at`, replacing whatever the process had mapped
    /// there (`MAP_FIXED`), as `scif_mmap` with `SCIF_MAP_FIXED` does.
    ///
    /// # Errors
    /// As [`Mapping::new_pieces`]; `EINVAL` when `at` is not page-aligned. A map at `at`
    /// that fails after its first step leaves an inaccessible reservation over the range
    /// (what the program had there is gone, as with a failed `MAP_FIXED`).
    ///
    /// # Safety
    /// With `Some(at)`, the caller owns `at..at+total` (nothing else of the program relies on
    /// what was mapped there).
    pub unsafe fn new_pieces_at(
        pieces: &[(BorrowedFd<'_>, u64, usize)],
        readonly: bool,
        at: Option<usize>,
    ) -> io::Result<Mapping> {
        let page = crate::page_size();
        let inval = || io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error());
        if pieces.is_empty()
            || pieces.iter().any(|&(_, off, len)| len == 0 || off % page as u64 != 0 || len % page != 0)
            || at.is_some_and(|a| a % page != 0)
        {
            return Err(inval());
        }
        let total: usize = pieces.iter().map(|p| p.2).sum();
        let prot = if readonly { ProtFlags::READ } else { ProtFlags::READ | ProtFlags::WRITE };
        let mut flags = MapFlags::PRIVATE | MapFlags::NORESERVE;
        if at.is_some() {
            flags |= MapFlags::FIXED;
        }
        let hint = at.map_or(std::ptr::null_mut(), |a| a as *mut std::ffi::c_void);
        // SAFETY: an anonymous inaccessible reservation; with a fixed address the caller
        // vouched for the range, otherwise the kernel picks unused addresses.
        let base = unsafe { rustix::mm::mmap_anonymous(hint, total, ProtFlags::empty(), flags)? } as *mut u8;
        let mut done = 0usize;
        for &(fd, off, len) in pieces {
            // SAFETY: `base+done..+len` lies inside the reservation we own; MAP_FIXED
            // replaces only our own reservation.
            let r = unsafe {
                rustix::mm::mmap(
                    base.add(done).cast(),
                    len,
                    prot,
                    MapFlags::SHARED | MapFlags::FIXED,
                    fd,
                    off,
                )
            };
            if let Err(e) = r {
                if at.is_some() {
                    // The caller's range (a reservation of its own, `RSM_MAP_RESERVED`):
                    // an inaccessible reservation again rather than a hole another mapping
                    // could land in.
                    // SAFETY: the range is the caller's by this function's contract, and
                    // holds only our reservation and pieces now; MAP_FIXED replaces them.
                    let _ = unsafe {
                        rustix::mm::mmap_anonymous(
                            base.cast(),
                            total,
                            ProtFlags::empty(),
                            MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::FIXED,
                        )
                    };
                } else {
                    // SAFETY: the whole reservation is ours.
                    unsafe {
                        let _ = rustix::mm::munmap(base.cast(), total);
                    }
                }
                return Err(e.into());
            }
            done += len;
        }
        Ok(Mapping { base, map_len: total, ptr: base, len: total, readonly })
    }

    /// Give up ownership of the range without unmapping it; returns its address and length.
    /// The range stays mapped until the program unmaps it (`scif_munmap`).
    pub fn leak(self) -> (*mut u8, usize) {
        let me = std::mem::ManuallyDrop::new(self);
        (me.base, me.map_len)
    }

    /// Replace the mapping with an inaccessible reservation of the same addresses
    /// (`PROT_NONE`, anonymous, no swap booked) and give the range up to the program, which
    /// had reserved it before a map was placed over it (`RSM_MAP_RESERVED`): no hole opens
    /// where another mapping could land. Returns the range's address and length.
    ///
    /// # Errors
    /// The errno of `mmap`; the mapping is then removed as on drop.
    pub fn into_reservation(self) -> io::Result<(*mut u8, usize)> {
        let flags = MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::FIXED;
        // SAFETY: `base..base+map_len` is this mapping's own range (it is consumed here, so
        // nothing of ours refers to it afterwards); MAP_FIXED replaces only that range.
        let r =
            unsafe { rustix::mm::mmap_anonymous(self.base.cast(), self.map_len, ProtFlags::empty(), flags) };
        match r {
            Ok(_) => Ok(self.leak()),
            Err(e) => Err(e.into()),
        }
    }

    /// The address of the first mapped byte (the requested offset).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The number of bytes the caller asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a mapping has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether stores fault.
    pub fn is_readonly(&self) -> bool {
        self.readonly
    }

    /// Whether `addr..addr+len` lies inside the mapping; returns the offset if so.
    pub fn offset_of(&self, addr: usize, len: usize) -> Option<usize> {
        let start = self.ptr as usize;
        let off = addr.checked_sub(start)?;
        (off.checked_add(len)? <= self.len).then_some(off)
    }

    #[inline]
    fn check(&self, off: usize, len: usize) -> io::Result<()> {
        match off.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(io::Error::from_raw_os_error(rustix::io::Errno::RANGE.raw_os_error())),
        }
    }

    /// Copy `data` into the mapping at `off`.
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the mapping, `EACCES` on a read-only mapping.
    #[inline]
    pub fn write(&self, off: usize, data: &[u8]) -> io::Result<()> {
        self.check(off, data.len())?;
        if self.readonly {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error()));
        }
        // SAFETY: the range was checked to be inside the live, writable mapping; `data` is
        // a valid slice that cannot overlap shared memory we hand out only as raw pointers.
        unsafe { copy_bytes(data.as_ptr(), self.ptr.add(off), data.len()) };
        Ok(())
    }

    /// Copy from the mapping at `off` into `out`.
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the mapping.
    #[inline]
    pub fn read(&self, off: usize, out: &mut [u8]) -> io::Result<()> {
        self.check(off, out.len())?;
        // SAFETY: the range was checked to be inside the live mapping; `out` is an exclusive
        // slice of our own memory.
        unsafe { copy_bytes(self.ptr.add(off), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copy `len` bytes of `src` from `src_off` into the mapping at `off`: one copy from a
    /// program's memory into shared memory.
    ///
    /// # Errors
    /// `ERANGE` when either range leaves its memory, `EACCES` on a read-only mapping.
    pub fn write_from(
        &self,
        off: usize,
        src: &crate::user_memory::UserRegion,
        src_off: usize,
        len: usize,
    ) -> io::Result<()> {
        self.check(off, len)?;
        if src_off.checked_add(len).is_none_or(|e| e > src.len()) {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::RANGE.raw_os_error()));
        }
        if self.readonly {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error()));
        }
        // SAFETY: both ranges were checked to lie inside live memory: the mapping's, and the
        // region's, which its creator vouched stays mapped (the `UserRegion` contract).
        unsafe { copy_bytes((src.addr() + src_off) as *const u8, self.ptr.add(off), len) };
        Ok(())
    }

    /// Copy `len` bytes of the mapping at `off` into `dst` at `dst_off`.
    ///
    /// # Errors
    /// `ERANGE` when either range leaves its memory.
    pub fn read_into(
        &self,
        off: usize,
        dst: &crate::user_memory::UserRegion,
        dst_off: usize,
        len: usize,
    ) -> io::Result<()> {
        self.check(off, len)?;
        if dst_off.checked_add(len).is_none_or(|e| e > dst.len()) {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::RANGE.raw_os_error()));
        }
        // SAFETY: as in `write_from`; the region is writable memory its creator handed over.
        unsafe { copy_bytes(self.ptr.add(off), (dst.addr() + dst_off) as *mut u8, len) };
        Ok(())
    }

    /// An atomic view of the 8 bytes at `off` (8-byte aligned, inside, writable mapping).
    #[inline]
    pub fn atomic_u64(&self, off: usize) -> Option<&AtomicU64> {
        self.atomic_u64s::<1>(off).map(|[w]| w)
    }

    /// An atomic view of the `N` words at `off` (8-byte aligned, inside, writable mapping):
    /// one check for a whole run of words (a cache line's), where [`Mapping::atomic_u64`]
    /// checks each.
    #[inline]
    pub fn atomic_u64s<const N: usize>(&self, off: usize) -> Option<&[AtomicU64; N]> {
        if self.readonly
            || !(self.ptr as usize).wrapping_add(off).is_multiple_of(8)
            || self.check(off, 8 * N).is_err()
        {
            return None;
        }
        // SAFETY: `N` consecutive words, 8-aligned and all inside the mapping (checked
        // above), which outlives the returned reference (it is tied to &self); an array of
        // AtomicU64 has the layout of `N` of them in a row, and AtomicU64 permits shared
        // mutation, which is what shared memory is.
        Some(unsafe { &*(self.ptr.add(off) as *const [AtomicU64; N]) })
    }

    /// An atomic view of the 4 bytes at `off` (4-byte aligned, inside, writable mapping).
    #[inline]
    pub fn atomic_u32(&self, off: usize) -> Option<&AtomicU32> {
        if self.readonly
            || !(self.ptr as usize).wrapping_add(off).is_multiple_of(4)
            || self.check(off, 4).is_err()
        {
            return None;
        }
        // SAFETY: aligned, in range, mapping alive for the returned lifetime; AtomicU32
        // permits shared mutation.
        Some(unsafe { &*(self.ptr.add(off) as *const AtomicU32) })
    }

    /// Copy `len` bytes inside the mapping from `src` to `dst` (ranges may overlap).
    ///
    /// # Errors
    /// `ERANGE` when either range leaves the mapping; `EACCES` on a read-only mapping.
    pub fn copy_within(&self, src: usize, dst: usize, len: usize) -> io::Result<()> {
        self.check(src, len)?;
        self.check(dst, len)?;
        if self.readonly {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error()));
        }
        // SAFETY: both ranges were checked to lie inside the live writable mapping;
        // `copy` handles overlap.
        unsafe { std::ptr::copy(self.ptr.add(src), self.ptr.add(dst), len) };
        Ok(())
    }

    /// Copy `len` bytes from `src` (at `src_off`) into this mapping at `dst_off`.
    ///
    /// # Errors
    /// `ERANGE` when either range leaves its mapping; `EACCES` when this one is read-only.
    pub fn copy_from(&self, dst_off: usize, src: &Mapping, src_off: usize, len: usize) -> io::Result<()> {
        if std::ptr::eq(self, src) {
            return self.copy_within(src_off, dst_off, len);
        }
        src.check(src_off, len)?;
        self.check(dst_off, len)?;
        if self.readonly {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error()));
        }
        // SAFETY: both ranges were checked against their live mappings. Two mappings of
        // the same memfd may alias, so use `copy` (memmove), which permits overlap.
        unsafe { std::ptr::copy(src.ptr.add(src_off), self.ptr.add(dst_off), len) };
        Ok(())
    }

    /// Fill `len` bytes at `off` from `file` at `file_off` (`pread`): how the DMA engine
    /// reads a process's memory through `/proc/PID/mem`.
    ///
    /// # Errors
    /// `ERANGE`/`EACCES` as [`Mapping::write`]; the I/O error of reading, or
    /// `UnexpectedEof` when the file ended early.
    pub fn fill_from_file(
        &self,
        off: usize,
        len: usize,
        file: &std::fs::File,
        file_off: u64,
    ) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.check(off, len)?;
        if self.readonly {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error()));
        }
        // SAFETY: the range is inside the live writable mapping. It is shared memory that
        // other processes may also touch; the kernel writes it like any other store.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) };
        file.read_exact_at(dst, file_off)
    }

    /// Write `len` bytes at `off` into `file` at `file_off` (`pwrite`).
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the mapping; the I/O error of writing.
    pub fn drain_to_file(
        &self,
        off: usize,
        len: usize,
        file: &std::fs::File,
        file_off: u64,
    ) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.check(off, len)?;
        // SAFETY: the range is inside the live mapping; we only read it.
        let src = unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) };
        file.write_all_at(src, file_off)
    }

    /// Fill `len` bytes at `off` from a stream (`read_exact`): how bulk payload arriving
    /// from another node lands in a segment with no intermediate buffer.
    ///
    /// # Errors
    /// `ERANGE`/`EACCES` as [`Mapping::write`]; the stream's I/O error.
    pub fn fill_from_reader(&self, off: usize, len: usize, r: &mut impl std::io::Read) -> io::Result<()> {
        self.check(off, len)?;
        if self.readonly {
            return Err(io::Error::from_raw_os_error(rustix::io::Errno::ACCESS.raw_os_error()));
        }
        // SAFETY: the range is inside the live writable mapping (shared memory other
        // processes may also touch; the kernel stores into it like any other writer).
        let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) };
        r.read_exact(dst)
    }

    /// Write `len` bytes at `off` to a stream (`write_all`), with no intermediate buffer.
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the mapping; the stream's I/O error.
    pub fn write_to(&self, off: usize, len: usize, w: &mut impl std::io::Write) -> io::Result<()> {
        self.check(off, len)?;
        // SAFETY: the range is inside the live mapping; we only read it.
        let src = unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) };
        w.write_all(src)
    }

    /// Write `head`, then `len` bytes at `off`, to a stream with gathering writes
    /// (`writev`): a frame header and its payload leave together, with no intermediate
    /// buffer (and no segment of the header alone on a `TCP_NODELAY` socket).
    ///
    /// # Errors
    /// `ERANGE` when the range leaves the mapping; the stream's I/O error.
    pub fn write_to_after(
        &self,
        head: &[u8],
        off: usize,
        len: usize,
        w: &mut impl std::io::Write,
    ) -> io::Result<()> {
        self.check(off, len)?;
        // SAFETY: the range is inside the live mapping; we only read it.
        let src = unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) };
        write_all_vectored(w, &mut [io::IoSlice::new(head), io::IoSlice::new(src)])
    }

    /// Load the 8 bytes at `off` with acquire ordering (works on read-only maps too).
    pub fn load_u64(&self, off: usize) -> Option<u64> {
        if !(self.ptr as usize).wrapping_add(off).is_multiple_of(8) || self.check(off, 8).is_err() {
            return None;
        }
        // SAFETY: aligned, in range, mapping alive; an atomic load never writes.
        let a = unsafe { &*(self.ptr.add(off) as *const AtomicU64) };
        Some(a.load(std::sync::atomic::Ordering::Acquire))
    }
}

/// Write every byte of `bufs` to `w`, gathering them into as few writes as the stream
/// takes (`Write::write_all_vectored` is not stable yet).
///
/// # Errors
/// The stream's I/O error; `WriteZero` when it takes nothing.
pub fn write_all_vectored(w: &mut impl std::io::Write, mut bufs: &mut [io::IoSlice<'_>]) -> io::Result<()> {
    io::IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base..base+map_len` is the range this value mapped and still owns.
        unsafe {
            let _ = rustix::mm::munmap(self.base.cast(), self.map_len);
        }
    }
}

#[cfg(test)]
mod tests;
