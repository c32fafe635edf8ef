//! The import side: connect, disconnect, the access functions, maps, scatter/gather,
//! barriers and their modes.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use crate::errors::{
    guard, Code, RSMERR_BAD_ADDR, RSMERR_BAD_BARRIER_PTR, RSMERR_BAD_LENGTH, RSMERR_BAD_MEM_ALIGNMENT,
    RSMERR_BAD_MODE, RSMERR_BAD_OFFSET, RSMERR_BAD_SGIO, RSMERR_BARRIER_UNINITIALIZED,
};
use crate::handles::{self, Entry};
use crate::{h, ptr, region};
use remora_rsm::{
    Barrier, BarrierMode, BarrierType, ImportSegment, IoVec, LocalSide, MapAttr, Permission, MAX_SGIOREQS,
};
use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::sync::Arc;

versioned!(
    rsm_memseg_import_close_barrier,
    rsm_memseg_import_connect,
    rsm_memseg_import_destroy_barrier,
    rsm_memseg_import_disconnect,
    rsm_memseg_import_get,
    rsm_memseg_import_get16,
    rsm_memseg_import_get32,
    rsm_memseg_import_get64,
    rsm_memseg_import_get8,
    rsm_memseg_import_get_mode,
    rsm_memseg_import_getv,
    rsm_memseg_import_init_barrier,
    rsm_memseg_import_map,
    rsm_memseg_import_open_barrier,
    rsm_memseg_import_order_barrier,
    rsm_memseg_import_put,
    rsm_memseg_import_put16,
    rsm_memseg_import_put32,
    rsm_memseg_import_put64,
    rsm_memseg_import_put8,
    rsm_memseg_import_putv,
    rsm_memseg_import_set_mode,
    rsm_memseg_import_unmap,
);

/// `RSM_HANDLE_TYPE`.
pub const RSM_HANDLE_TYPE: c_int = 0x01;
/// `RSM_VA_TYPE`.
pub const RSM_VA_TYPE: c_int = 0x02;
/// `RSM_IMPLICIT_SIGPOST`.
pub const RSM_IMPLICIT_SIGPOST: c_uint = 0x01;
/// `RSM_SIGPOST_NO_ACCUMULATE`.
pub const RSM_SIGPOST_NO_ACCUMULATE: c_uint = 0x02;

/// `rsm_iovec_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RsmIovec {
    /// `io_type`: `RSM_HANDLE_TYPE` or `RSM_VA_TYPE`.
    pub io_type: c_int,
    /// `local`: a local-memory handle or an address.
    pub local: *mut c_void,
    /// `local_offset`.
    pub local_offset: usize,
    /// `remote_offset`.
    pub remote_offset: usize,
    /// `transfer_length`.
    pub transfer_length: usize,
}

/// `rsm_scat_gath_t`.
#[repr(C)]
#[derive(Debug)]
pub struct RsmScatGath {
    /// `local_nodeid`.
    pub local_nodeid: u32,
    /// `io_request_count`.
    pub io_request_count: c_ulong,
    /// `io_residual_count`: entries not done.
    pub io_residual_count: c_ulong,
    /// `flags`: `RSM_IMPLICIT_SIGPOST`, `RSM_SIGPOST_NO_ACCUMULATE`.
    pub flags: c_uint,
    /// `remote_handle`.
    pub remote_handle: *mut c_void,
    /// `iovec`.
    pub iovec: *mut RsmIovec,
}

/// `rsmapi_barrier_t`: the caller's storage; the library keeps its state in the table and
/// marks the storage with `gnum`.
#[repr(C)]
#[derive(Debug)]
pub struct RsmapiBarrier {
    /// The import handle.
    pub seg: *mut c_void,
    /// [`BARRIER_MARK`] once initialised.
    pub gnum: u16,
    /// The barrier's handle in the table.
    pub privdata: *mut c_void,
}

/// What `gnum` holds in an initialised barrier.
pub const BARRIER_MARK: u16 = 0x5253;

/// `rsm_memseg_import_connect`.
///
/// # Safety
/// `im_memseg` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_connect(
    controller: *mut c_void,
    node_id: u32,
    segment_id: u32,
    perm: u32,
    im_memseg: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let ctl = handles::controller(h(controller))?;
        if im_memseg.is_null() {
            return Err(Code(RSMERR_BAD_ADDR));
        }
        let i = ImportSegment::connect(&ctl, node_id, segment_id, Permission(perm))?;
        let k = handles::insert(Entry::Import(i));
        // SAFETY: checked non-NULL.
        unsafe { *im_memseg = ptr(k) };
        Ok(())
    })
}

/// `rsm_memseg_import_disconnect`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_disconnect(im_memseg: *mut c_void) -> c_int {
    guard(|| {
        handles::import(h(im_memseg))?.disconnect()?;
        handles::remove(h(im_memseg));
        Ok(())
    })
}

/// Check the offset and the caller's buffer of an access of `n` items of `size` bytes.
///
/// Solaris's library checks, in this order: a NULL buffer (`RSMERR_BAD_ADDR`), a buffer or an
/// offset not aligned to the item (`RSMERR_BAD_MEM_ALIGNMENT` for both); then the import's
/// access, range and barrier (below).
fn check_items(offset: i64, data: *const c_void, size: usize) -> Result<usize, Code> {
    if data.is_null() {
        return Err(Code(RSMERR_BAD_ADDR));
    }
    if !(data as usize).is_multiple_of(size) || !(offset as u64).is_multiple_of(size as u64) {
        return Err(Code(RSMERR_BAD_MEM_ALIGNMENT));
    }
    if offset < 0 {
        return Err(Code(RSMERR_BAD_OFFSET));
    }
    Ok(offset as usize)
}

/// In implicit barrier mode Solaris's library needs a barrier initialised on the import
/// before any `put`/`get` (`RSMERR_BARRIER_UNINITIALIZED`), as the guide says.
fn check_barrier(i: &ImportSegment) -> Result<(), Code> {
    if i.mode()? == BarrierMode::Implicit && !i.has_barrier() {
        return Err(Code(RSMERR_BARRIER_UNINITIALIZED));
    }
    Ok(())
}

/// `get`: `rep_cnt` items of `size` bytes from `offset` into `datap`.
///
/// # Safety
/// `datap` NULL or `rep_cnt * size` writable bytes.
unsafe fn get_items(
    im: *mut c_void,
    offset: i64,
    datap: *mut c_void,
    rep_cnt: c_ulong,
    size: usize,
) -> c_int {
    guard(|| {
        let i = handles::import(h(im))?;
        let off = check_items(offset, datap, size)?;
        let len = (rep_cnt as usize).checked_mul(size).ok_or(Code(RSMERR_BAD_LENGTH))?;
        if !i.is_on_this_host() {
            i.check_access(off, len, false)?;
            check_barrier(&i)?;
            // SAFETY: `len` writable bytes of the caller's, by contract, for the call.
            return Ok(i.get_region(off, unsafe { region(datap, len) })?);
        }
        // SAFETY: `len` writable bytes of the caller's, by contract, for the call; no slice
        // is made over them: they are written only once the access, the range and the
        // barrier were checked, in that order, under the import's lock taken once.
        Ok(i.get_region_needing_barrier(off, unsafe { region(datap, len) })?)
    })
}

/// `put`: `rep_cnt` items of `size` bytes from `datap` into the segment at `offset`.
///
/// # Safety
/// `datap` NULL or `rep_cnt * size` readable bytes.
unsafe fn put_items(
    im: *mut c_void,
    offset: i64,
    datap: *const c_void,
    rep_cnt: c_ulong,
    size: usize,
) -> c_int {
    guard(|| {
        let i = handles::import(h(im))?;
        let off = check_items(offset, datap, size)?;
        let len = (rep_cnt as usize).checked_mul(size).ok_or(Code(RSMERR_BAD_LENGTH))?;
        if !i.is_on_this_host() {
            i.check_access(off, len, true)?;
            check_barrier(&i)?;
            // SAFETY: `len` readable bytes of the caller's, by contract, for the call (the
            // engine only reads them).
            return Ok(i.put_region(off, unsafe { region(datap.cast_mut(), len) })?);
        }
        // SAFETY: `len` readable bytes of the caller's, by contract, for the call (only
        // read); no slice is made over them: they are read only once the access, the range
        // and the barrier were checked, in that order, under the import's lock taken once.
        Ok(i.put_region_needing_barrier(off, unsafe { region(datap.cast_mut(), len) })?)
    })
}

macro_rules! access {
    ($get:ident, $put:ident, $t:ty) => {
        /// `rsm_memseg_import_getN`: `rep_cnt` items from `offset` (aligned to the item).
        ///
        /// # Safety
        /// `datap` NULL or `rep_cnt` writable items.
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $get(
            im_memseg: *mut c_void,
            offset: i64,
            datap: *mut $t,
            rep_cnt: c_ulong,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { get_items(im_memseg, offset, datap.cast(), rep_cnt, std::mem::size_of::<$t>()) }
        }

        /// `rsm_memseg_import_putN`: `rep_cnt` items to `offset` (aligned to the item).
        ///
        /// # Safety
        /// `datap` NULL or `rep_cnt` readable items.
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $put(
            im_memseg: *mut c_void,
            offset: i64,
            datap: *const $t,
            rep_cnt: c_ulong,
        ) -> c_int {
            // SAFETY: the caller's contract.
            unsafe { put_items(im_memseg, offset, datap.cast(), rep_cnt, std::mem::size_of::<$t>()) }
        }
    };
}

access!(rsm_memseg_import_get8, rsm_memseg_import_put8, u8);
access!(rsm_memseg_import_get16, rsm_memseg_import_put16, u16);
access!(rsm_memseg_import_get32, rsm_memseg_import_put32, u32);
access!(rsm_memseg_import_get64, rsm_memseg_import_put64, u64);

/// `rsm_memseg_import_get`: `length` bytes from `offset` into `dst_addr`.
///
/// # Safety
/// `dst_addr` NULL or `length` writable bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_get(
    im_memseg: *mut c_void,
    offset: i64,
    dst_addr: *mut c_void,
    length: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { get_items(im_memseg, offset, dst_addr, length as c_ulong, 1) }
}

/// `rsm_memseg_import_put`: `length` bytes from `src_addr` to `offset`.
///
/// # Safety
/// `src_addr` NULL or `length` readable bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_put(
    im_memseg: *mut c_void,
    offset: i64,
    src_addr: *const c_void,
    length: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { put_items(im_memseg, offset, src_addr, length as c_ulong, 1) }
}

/// Read a scatter/gather request into the safe API's form.
///
/// # Safety
/// `sg` readable; its `iovec` has `io_request_count` readable entries whose local memory
/// is the caller's.
unsafe fn vector(sg: &RsmScatGath) -> Result<(ImportSegment, Vec<IoVec>), Code> {
    let imp = handles::import(h(sg.remote_handle))?;
    let n = sg.io_request_count as usize;
    if n == 0 || n > MAX_SGIOREQS || sg.iovec.is_null() {
        return Err(Code(RSMERR_BAD_SGIO));
    }
    // SAFETY: `n` readable entries by contract.
    let raw = unsafe { std::slice::from_raw_parts(sg.iovec, n) };
    let mut v = Vec::with_capacity(n);
    for e in raw {
        let local = match e.io_type {
            RSM_VA_TYPE => {
                if e.local.is_null() {
                    return Err(Code(RSMERR_BAD_ADDR));
                }
                let end = e.local_offset.checked_add(e.transfer_length).ok_or(Code(RSMERR_BAD_LENGTH))?;
                // SAFETY: the caller's memory, by contract.
                LocalSide::Region(unsafe { region(e.local, end) })
            }
            RSM_HANDLE_TYPE => LocalSide::Handle(handles::local_mem(h(e.local))?),
            _ => return Err(Code(RSMERR_BAD_SGIO)),
        };
        v.push(IoVec {
            local,
            local_offset: e.local_offset,
            remote_offset: e.remote_offset,
            len: e.transfer_length,
        });
    }
    Ok((imp, v))
}

/// `putv`/`getv`.
///
/// # Safety
/// As [`vector`]; `sg` NULL or writable.
unsafe fn vectored(sg: *mut RsmScatGath, put: bool) -> c_int {
    guard(|| {
        if sg.is_null() {
            return Err(Code(RSMERR_BAD_SGIO));
        }
        // SAFETY: checked non-NULL; the caller's structure.
        let sg = unsafe { &mut *sg };
        // SAFETY: the caller's contract.
        let (imp, v) = unsafe { vector(sg) }?;
        let sigpost = sg.flags & RSM_IMPLICIT_SIGPOST != 0;
        let no_acc = sg.flags & RSM_SIGPOST_NO_ACCUMULATE != 0;
        let (r, residual) = if put { imp.putv(&v, sigpost, no_acc) } else { imp.getv(&v, sigpost, no_acc) };
        sg.io_residual_count = residual as c_ulong;
        r.map_err(Code::from)
    })
}

/// `rsm_memseg_import_putv`.
///
/// # Safety
/// `sg_io` NULL or a valid request whose local memory is the caller's.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_putv(sg_io: *mut RsmScatGath) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { vectored(sg_io, true) }
}

/// `rsm_memseg_import_getv`.
///
/// # Safety
/// As `rsm_memseg_import_putv`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_getv(sg_io: *mut RsmScatGath) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { vectored(sg_io, false) }
}

/// `rsm_memseg_import_map`: `RSM_MAP_NONE` (0) anywhere, `RSM_MAP_FIXED` (1) and
/// `RSM_MAP_RESERVED` (2) at `*address`, replacing what the program had mapped there (as
/// Solaris's `MAP_FIXED`); `rsm_memseg_import_unmap` of a `RSM_MAP_RESERVED` map puts an
/// inaccessible reservation back over the range.
///
/// # Safety
/// `address` NULL or read/writable. With `RSM_MAP_FIXED` or `RSM_MAP_RESERVED`,
/// `*address..*address+length` (rounded up to pages) is the program's to replace.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_map(
    im_memseg: *mut c_void,
    address: *mut *mut c_void,
    attr: c_int,
    perm: u32,
    offset: i64,
    length: usize,
) -> c_int {
    guard(|| {
        let i = handles::import(h(im_memseg))?;
        if address.is_null() {
            return Err(Code(RSMERR_BAD_ADDR));
        }
        let attr = match attr {
            0 => MapAttr::None,
            1 => MapAttr::Fixed,
            2 => MapAttr::Reserved,
            _ => return Err(Code(RSMERR_BAD_MODE)),
        };
        if offset < 0 {
            return Err(Code(RSMERR_BAD_OFFSET));
        }
        // SAFETY: checked non-NULL.
        let want = unsafe { *address } as usize;
        let at = match attr {
            MapAttr::None => i.map(None, attr, Permission(perm), offset as usize, length)?,
            MapAttr::Fixed | MapAttr::Reserved => {
                i.map_over(want, attr, Permission(perm), offset as usize, length, |p| {
                    // SAFETY: the caller's contract hands `want..want+p.len` over (checked
                    // page-aligned and non-NULL by `map_over`); MAP_FIXED replaces it.
                    unsafe {
                        remora_sys::Mapping::new_pieces_at(&[(p.fd, p.offset, p.len)], p.readonly, Some(want))
                    }
                })?
            }
        };
        // SAFETY: checked non-NULL.
        unsafe { *address = at as *mut c_void };
        Ok(())
    })
}

/// `rsm_memseg_import_unmap`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_unmap(im_memseg: *mut c_void) -> c_int {
    guard(|| {
        handles::import(h(im_memseg))?.unmap()?;
        Ok(())
    })
}

/// The barrier a caller's `rsmapi_barrier_t` holds.
///
/// # Safety
/// `b` NULL or readable.
unsafe fn barrier(b: *const RsmapiBarrier) -> Result<Arc<Barrier>, Code> {
    if b.is_null() {
        return Err(Code(RSMERR_BAD_BARRIER_PTR));
    }
    // SAFETY: checked non-NULL; the caller's structure.
    let b = unsafe { &*b };
    if b.gnum != BARRIER_MARK {
        return Err(Code(RSMERR_BARRIER_UNINITIALIZED));
    }
    match handles::get(h(b.privdata)) {
        Some(Entry::Barrier(x)) => Ok(x),
        _ => Err(Code(RSMERR_BARRIER_UNINITIALIZED)),
    }
}

/// `rsm_memseg_import_init_barrier`.
///
/// # Safety
/// `barrier` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_init_barrier(
    im_memseg: *mut c_void,
    kind: c_int,
    barrier: *mut RsmapiBarrier,
) -> c_int {
    guard(|| {
        let i = handles::import(h(im_memseg))?;
        if barrier.is_null() {
            return Err(Code(RSMERR_BAD_BARRIER_PTR));
        }
        let kind = match kind {
            0x01 => BarrierType::Segment,
            0x02 => BarrierType::Node,
            0x11 => BarrierType::SegmentThread,
            0x12 => BarrierType::NodeThread,
            _ => return Err(Code(RSMERR_BAD_MODE)),
        };
        let b = i.init_barrier(kind)?;
        let k = handles::insert(Entry::Barrier(Arc::new(b)));
        // SAFETY: checked non-NULL; the caller's storage.
        unsafe { barrier.write(RsmapiBarrier { seg: im_memseg, gnum: BARRIER_MARK, privdata: ptr(k) }) };
        Ok(())
    })
}

/// `rsm_memseg_import_open_barrier`.
///
/// # Safety
/// `barrier` NULL or readable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_open_barrier(barrier: *mut RsmapiBarrier) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| Ok(unsafe { self::barrier(barrier) }?.open()?))
}

/// `rsm_memseg_import_close_barrier`: 0 means every access since the open completed.
///
/// # Safety
/// `barrier` NULL or readable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_close_barrier(barrier: *mut RsmapiBarrier) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| Ok(unsafe { self::barrier(barrier) }?.close()?))
}

/// `rsm_memseg_import_order_barrier`.
///
/// # Safety
/// `barrier` NULL or readable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_order_barrier(barrier: *mut RsmapiBarrier) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| Ok(unsafe { self::barrier(barrier) }?.order()?))
}

/// `rsm_memseg_import_destroy_barrier`.
///
/// # Safety
/// `barrier` NULL or read/writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_destroy_barrier(barrier: *mut RsmapiBarrier) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { self::barrier(barrier) }?;
        b.destroy()?;
        // SAFETY: `barrier` was checked readable above; the caller's storage.
        unsafe {
            handles::remove(h((*barrier).privdata));
            (*barrier).gnum = 0;
        }
        Ok(())
    })
}

/// `rsm_memseg_import_set_mode`: `RSM_BARRIER_MODE_EXPLICIT` (0) or `_IMPLICIT` (1).
///
/// # Safety
/// Any values.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_set_mode(im_memseg: *mut c_void, mode: c_int) -> c_int {
    guard(|| {
        let i = handles::import(h(im_memseg))?;
        let m = match mode {
            0 => BarrierMode::Explicit,
            1 => BarrierMode::Implicit,
            _ => return Err(Code(RSMERR_BAD_MODE)),
        };
        i.set_mode(m)?;
        Ok(())
    })
}

/// `rsm_memseg_import_get_mode`.
///
/// # Safety
/// `mode` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_import_get_mode(
    im_memseg: *mut c_void,
    mode: *mut c_int,
) -> c_int {
    guard(|| {
        let i = handles::import(h(im_memseg))?;
        if mode.is_null() {
            return Err(Code(RSMERR_BAD_ADDR));
        }
        let m = match i.mode()? {
            BarrierMode::Explicit => 0,
            BarrierMode::Implicit => 1,
        };
        // SAFETY: checked non-NULL.
        unsafe { *mode = m };
        Ok(())
    })
}
