//! Windows, maps, RMA and fences.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use super::*;

/// `scif_register`: returns the window's offset, or `SCIF_REGISTER_FAILED`.
///
/// # Safety
/// `addr..addr+len` is memory of this process that stays mapped while registered.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_register(
    epd: scif_epd_t,
    addr: *mut c_void,
    len: usize,
    off: i64,
    prot_flags: c_int,
    map_flags: c_int,
) -> i64 {
    guard(SCIF_REGISTER_FAILED, || {
        let e = ep(epd)?;
        let p = prot(prot_flags)?;
        if map_flags & !SCIF_MAP_FIXED != 0 {
            return Err(inval("unknown map flags"));
        }
        let o = offset(off)?;
        // SAFETY: the caller's contract; the range is checked for alignment and kind of
        // memory before anything is done with it.
        let region = unsafe { UserRegion::from_raw_parts(addr as *mut u8, len) };
        Ok(e.register(region, o, p, map_flags & SCIF_MAP_FIXED != 0)? as i64)
    })
}

/// `scif_unregister`.
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scif_unregister(epd: scif_epd_t, off: i64, len: usize) -> c_int {
    guard(-1, || {
        ep(epd)?.unregister(offset(off)?, len as u64)?;
        Ok(0)
    })
}

/// `scif_mmap`: map the peer's registered range; `SCIF_MMAP_FAILED` on failure. A negative
/// offset lies in no window: `ENXIO`, as `scif.h` documents (misalignment is `EINVAL`). A
/// peer on another host: `EOPNOTSUPP` where userfaultfd is unavailable (the DSM's maps need
/// it), `ENOMEM` where the process is out of descriptors or memory for one now.
///
/// # Safety
/// With `SCIF_MAP_FIXED`, `addr..addr+len` is the program's to replace.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_mmap(
    addr: *mut c_void,
    len: usize,
    prot_flags: c_int,
    map_flags: c_int,
    epd: scif_epd_t,
    off: i64,
) -> *mut c_void {
    guard(usize::MAX as *mut c_void, || {
        let e = ep(epd)?;
        let p = prot(prot_flags)?;
        if map_flags & !SCIF_MAP_FIXED != 0 {
            return Err(inval("unknown map flags"));
        }
        let pieces = match e.mmap_peer(rma_offset(off)?, len, p, map_flags & SCIF_MAP_FIXED != 0)? {
            remora_scif::PeerMapping::Far(addr) => {
                flush_at_exit_once();
                return Ok(addr as *mut c_void);
            }
            remora_scif::PeerMapping::Near(pieces) => pieces,
        };
        let parts: Vec<_> =
            pieces.iter().map(|x| (std::os::fd::AsFd::as_fd(&*x.fd), x.offset, x.len)).collect();
        let at = (map_flags & SCIF_MAP_FIXED != 0).then_some(addr as usize);
        // SAFETY: without a fixed address nothing is replaced; with one, the caller's
        // contract hands the range over.
        let m = unsafe { remora_sys::Mapping::new_pieces_at(&parts, !p.write, at) }
            .map_err(|e| Error::NoMemory(e.to_string()))?;
        Ok(m.leak().0 as *mut c_void)
    })
}

/// `scif_munmap`.
///
/// # Safety
/// `addr..addr+len` holds nothing the program still uses.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_munmap(addr: *mut c_void, len: usize) -> c_int {
    guard(-1, || {
        let page = remora_sys::page_size();
        if len == 0 || !(addr as usize).is_multiple_of(page) {
            return Err(inval("unaligned address or empty range"));
        }
        if remora_scif::munmap_peer(addr as usize) {
            // A DSM map of another host's window: its stores went home, and it is gone.
            return Ok(0);
        }
        // SAFETY: the caller's contract.
        unsafe { rustix::mm::munmap(addr, len) }.map_err(|_| inval("munmap refused"))?;
        Ok(0)
    })
}

/// `scif_readfrom`.
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scif_readfrom(
    epd: scif_epd_t,
    loffset: i64,
    len: usize,
    roffset: i64,
    rma: c_int,
) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        let f = rma_flags(rma)?;
        e.read_from(rma_offset(loffset)?, len, rma_offset(roffset)?, f)?;
        Ok(0)
    })
}

/// `scif_writeto`.
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scif_writeto(
    epd: scif_epd_t,
    loffset: i64,
    len: usize,
    roffset: i64,
    rma: c_int,
) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        let f = rma_flags(rma)?;
        e.write_to(rma_offset(loffset)?, len, rma_offset(roffset)?, f)?;
        Ok(0)
    })
}

/// The checks `scif_vreadfrom` and `scif_vwriteto` share, then `op` on the endpoint with
/// the buffer's address, the offset and the flags. The buffer must be mapped readable, and
/// writable when the RMA `fills` it (`scif_vreadfrom`): else `EFAULT`, as the driver's
/// copy from or to user memory answers, rather than a fault in our copy.
fn v_rma(
    epd: scif_epd_t,
    addr: *mut c_void,
    len: usize,
    off: i64,
    rma: c_int,
    fills: bool,
    op: impl FnOnce(&Endpoint, *mut u8, u64, RmaFlags) -> Result<(), Error>,
) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        let f = rma_flags(rma)?;
        let o = rma_offset(off)?;
        if addr.is_null() {
            return Err(Error::Fault);
        }
        if len == 0 {
            return Err(inval("zero length"));
        }
        // Parts in a map of another host's memory (a `scif_mmap` of far windows, a SISCI or
        // RSM map of a far segment) are judged by the map's protection: the kernel cannot
        // fetch their untouched pages, which the copy's own faults fill.
        if remora_sys::probe::user_range(addr as usize, len, fills).is_err() {
            return Err(Error::Fault);
        }
        op(&e, addr as *mut u8, o, f)?;
        Ok(0)
    })
}

/// `scif_vreadfrom`.
///
/// # Safety
/// `addr` points to `len` bytes the program lets the library write, or to memory not
/// mapped writable (`EFAULT`).
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_vreadfrom(
    epd: scif_epd_t,
    addr: *mut c_void,
    len: usize,
    off: i64,
    rma: c_int,
) -> c_int {
    v_rma(epd, addr, len, off, rma, true, |e, p, o, f| {
        // SAFETY: `p` is non-NULL and its `len` bytes mapped writable (both checked) and, by
        // the contract, not memory Rust code of this process holds references to.
        let buf = unsafe { std::slice::from_raw_parts_mut(p, len) };
        e.vread_from(buf, o, f)
    })
}

/// `scif_vwriteto`.
///
/// # Safety
/// `addr` points to `len` bytes the program lets the library read, or to memory not
/// mapped readable (`EFAULT`).
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_vwriteto(
    epd: scif_epd_t,
    addr: *mut c_void,
    len: usize,
    off: i64,
    rma: c_int,
) -> c_int {
    v_rma(epd, addr, len, off, rma, false, |e, p, o, f| {
        // SAFETY: `p` is non-NULL and its `len` bytes mapped readable (both checked).
        let data = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        e.vwrite_to(data, o, f)
    })
}

fn fence_init(flags: c_int) -> Result<FenceInit, Error> {
    match flags & (SCIF_FENCE_INIT_SELF | SCIF_FENCE_INIT_PEER) {
        SCIF_FENCE_INIT_SELF => Ok(FenceInit::SelfInit),
        SCIF_FENCE_INIT_PEER => Ok(FenceInit::Peer),
        _ => Err(inval("exactly one of SCIF_FENCE_INIT_SELF and SCIF_FENCE_INIT_PEER")),
    }
}

/// `scif_fence_mark`.
///
/// # Safety
/// `mark` is NULL or points to a writable int.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn scif_fence_mark(epd: scif_epd_t, flags: c_int, mark: *mut c_int) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        if flags & !(SCIF_FENCE_INIT_SELF | SCIF_FENCE_INIT_PEER) != 0 {
            return Err(inval("unknown fence flags"));
        }
        let init = fence_init(flags)?;
        if mark.is_null() {
            return Err(inval("NULL mark"));
        }
        let m = e.fence_mark(init)?;
        // SAFETY: non-NULL, writable by the contract.
        unsafe { *mark = m };
        Ok(0)
    })
}

/// `scif_fence_wait`.
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scif_fence_wait(epd: scif_epd_t, mark: c_int) -> c_int {
    guard(-1, || {
        ep(epd)?.fence_wait(mark)?;
        Ok(0)
    })
}

/// `scif_fence_signal`.
#[unsafe(no_mangle)]
pub extern "C-unwind" fn scif_fence_signal(
    epd: scif_epd_t,
    loff: i64,
    lval: u64,
    roff: i64,
    rval: u64,
    flags: c_int,
) -> c_int {
    guard(-1, || {
        let e = ep(epd)?;
        let known = SCIF_FENCE_INIT_SELF | SCIF_FENCE_INIT_PEER | SCIF_SIGNAL_LOCAL | SCIF_SIGNAL_REMOTE;
        if flags & !known != 0 {
            return Err(inval("unknown fence flags"));
        }
        let init = fence_init(flags)?;
        let local = if flags & SCIF_SIGNAL_LOCAL != 0 { Some((rma_offset(loff)?, lval)) } else { None };
        let remote = if flags & SCIF_SIGNAL_REMOTE != 0 { Some((rma_offset(roff)?, rval)) } else { None };
        e.fence_signal(local, remote, init)?;
        Ok(0)
    })
}

versioned!(
    scif_register,
    scif_unregister,
    scif_mmap,
    scif_munmap,
    scif_readfrom,
    scif_writeto,
    scif_vreadfrom,
    scif_vwriteto,
    scif_fence_mark,
    scif_fence_wait,
    scif_fence_signal,
);
