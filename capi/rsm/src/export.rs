//! The export side: create, publish, republish, unpublish, rebind, destroy.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use crate::errors::{guard, Code, RSMERR_BAD_ACL, RSMERR_BAD_MODE, RSMERR_BAD_SEG_HNDL};
use crate::handles::{self, Entry};
use crate::{h, ptr, region};
use remora_rsm::{AccessEntry, CreateFlags, ExportSegment};
use std::ffi::{c_int, c_uint, c_void};

versioned!(
    rsm_memseg_export_create,
    rsm_memseg_export_destroy,
    rsm_memseg_export_publish,
    rsm_memseg_export_rebind,
    rsm_memseg_export_republish,
    rsm_memseg_export_unpublish,
);

/// `RSM_ALLOW_REBIND`.
pub const RSM_ALLOW_REBIND: c_uint = 0x01;
/// `RSM_CREATE_SEG_DONTWAIT`.
pub const RSM_CREATE_SEG_DONTWAIT: c_uint = 0x02;

/// `rsmapi_access_entry_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RsmAccessEntry {
    /// `ae_node`.
    pub ae_node: u32,
    /// `ae_permission`.
    pub ae_permission: u32,
}

/// `rsm_memseg_export_create`: the memory at `vaddr` (page-aligned, `size` a page
/// multiple) becomes the segment, in place: the program keeps its pointers.
///
/// # Safety
/// `vaddr..vaddr+size` is the caller's memory for the segment's life; `memseg` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_export_create(
    controller: *mut c_void,
    memseg: *mut *mut c_void,
    vaddr: *mut c_void,
    size: usize,
    flags: c_uint,
) -> c_int {
    guard(|| {
        let ctl = handles::controller(h(controller))?;
        if memseg.is_null() {
            return Err(Code(RSMERR_BAD_SEG_HNDL));
        }
        if flags & !(RSM_ALLOW_REBIND | RSM_CREATE_SEG_DONTWAIT) != 0 {
            return Err(Code(RSMERR_BAD_MODE));
        }
        let f = CreateFlags {
            allow_rebind: flags & RSM_ALLOW_REBIND != 0,
            dont_wait: flags & RSM_CREATE_SEG_DONTWAIT != 0,
        };
        // SAFETY: the caller's contract.
        let e = ExportSegment::create_region(&ctl, unsafe { region(vaddr, size) }, f)?;
        let k = handles::insert(Entry::Export(e));
        // SAFETY: checked non-NULL.
        unsafe { *memseg = ptr(k) };
        Ok(())
    })
}

/// `rsm_memseg_export_destroy`: importers are cut off; the memory is the program's again.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_export_destroy(memseg: *mut c_void) -> c_int {
    guard(|| {
        let e = handles::export(h(memseg))?;
        e.destroy()?;
        handles::remove(h(memseg));
        Ok(())
    })
}

/// `rsm_memseg_export_rebind`: the bytes from `off` on are now the memory at `vaddr`.
///
/// # Safety
/// As for `rsm_memseg_export_create`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_export_rebind(
    memseg: *mut c_void,
    vaddr: *mut c_void,
    off: i64,
    size: usize,
) -> c_int {
    guard(|| {
        let e = handles::export(h(memseg))?;
        if off < 0 {
            return Err(Code(crate::errors::RSMERR_BAD_OFFSET));
        }
        // SAFETY: the caller's contract.
        e.rebind(unsafe { region(vaddr, size) }, off as usize)?;
        Ok(())
    })
}

/// Read the caller's access list.
///
/// # Safety
/// `list` NULL or `len` readable entries.
unsafe fn acl(list: *const RsmAccessEntry, len: c_uint) -> Result<Option<Vec<AccessEntry>>, Code> {
    if len == 0 {
        return Ok(None);
    }
    if list.is_null() {
        return Err(Code(RSMERR_BAD_ACL));
    }
    // SAFETY: `len` readable entries by contract.
    let entries = unsafe { std::slice::from_raw_parts(list, len as usize) };
    Ok(Some(entries.iter().map(|e| AccessEntry { node: e.ae_node, perm: e.ae_permission }).collect()))
}

/// `rsm_memseg_export_publish`: `*segment_id` 0 lets the node pick an id (written back).
///
/// # Safety
/// `segment_id` NULL or read/writable; `access_list` NULL or `access_list_length` entries.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_export_publish(
    memseg: *mut c_void,
    segment_id: *mut u32,
    access_list: *const RsmAccessEntry,
    access_list_length: c_uint,
) -> c_int {
    guard(|| {
        if segment_id.is_null() {
            return Err(Code(crate::errors::RSMERR_BAD_SEGID));
        }
        let e = handles::export(h(memseg))?;
        // SAFETY: the caller's contract.
        let list = unsafe { acl(access_list, access_list_length) }?;
        // SAFETY: checked non-NULL.
        let want = unsafe { *segment_id };
        let id = e.publish(want, list.as_deref())?;
        // SAFETY: checked non-NULL.
        unsafe { *segment_id = id };
        Ok(())
    })
}

/// `rsm_memseg_export_republish`.
///
/// # Safety
/// `access_list` NULL or `access_list_length` entries.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_export_republish(
    memseg: *mut c_void,
    access_list: *const RsmAccessEntry,
    access_list_length: c_uint,
) -> c_int {
    guard(|| {
        let e = handles::export(h(memseg))?;
        // SAFETY: the caller's contract.
        let list = unsafe { acl(access_list, access_list_length) }?;
        e.republish(list.as_deref())?;
        Ok(())
    })
}

/// `rsm_memseg_export_unpublish`: importers' next access fails with `RSMERR_CONN_ABORTED`.
///
/// # Safety
/// Any value.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsm_memseg_export_unpublish(memseg: *mut c_void) -> c_int {
    guard(|| {
        handles::export(h(memseg)).map_err(|_| Code(RSMERR_BAD_SEG_HNDL))?.unpublish()?;
        Ok(())
    })
}
