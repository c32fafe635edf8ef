//! Copies between maps and the copy routine: the API 1.x block transfers
//! (`SCITransferBlock`, `SCITransferBlockAsync`, `SCIWaitForBlockTransfer`,
//! `SCIAbortBlockTransfer`), `SCIMemCpy_dual`, and `GetSciMemCopyFunction` /
//! `SetSciMemCopyFunction`, which choose how the store direction of the `SCIMemCpy` family
//! writes into a map.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::callbacks;
use crate::consts::*;
use crate::errors::{check_flags, run, run_quiet, ErrorOut, Fail, Out, Outcome};
use crate::handles::{self, handle, key};
use crate::types::{sci_block_transfer_t, sci_cb_block_transfer_t, sci_error_t, sci_map_t, sci_sequence_t};
use crate::wait_time;
use remora_sisci::{BlockTransfer, CopyRoutine, Map, Sequence, SequenceStatus};
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

/// The routine id `SetSciMemCopyFunction` chose last (`REMORA_MEMCOPY_*`).
static ROUTINE: AtomicI32 = AtomicI32::new(REMORA_MEMCOPY_DEFAULT as i32);

/// The routine an id selects; `None` for an unknown id.
fn routine_of(id: c_int) -> Option<CopyRoutine> {
    Some(match u32::try_from(id).ok()? {
        REMORA_MEMCOPY_DEFAULT | REMORA_MEMCOPY_MEMCPY => CopyRoutine::Memcpy,
        REMORA_MEMCOPY_WORDS64 => CopyRoutine::Words64,
        REMORA_MEMCOPY_CACHE_LINES => CopyRoutine::CacheLines,
        REMORA_MEMCOPY_FLUSHED => CopyRoutine::Flushed,
        _ => return None,
    })
}

/// Store `data` into `map` at `offset` with the routine in use: the store direction of
/// `SCIMemCpy`, `SCIMemCopy` and `SCIMemCpy_dual`.
pub(crate) fn store(map: &Map, offset: usize, data: &[u8]) -> Outcome<()> {
    let routine = routine_of(ROUTINE.load(Ordering::Relaxed)).unwrap_or_default();
    Ok(remora_sisci::store_with(routine, data, map, offset)?)
}

/// `GetSciMemCopyFunction`: the id of the copy routine in use (a `REMORA_MEMCOPY_*`
/// value; `REMORA_MEMCOPY_DEFAULT` until `SetSciMemCopyFunction` chose another).
///
/// # Errors
/// None (no error argument).
#[no_mangle]
pub extern "C-unwind" fn GetSciMemCopyFunction() -> c_int {
    run_quiet(REMORA_MEMCOPY_DEFAULT as c_int, || Ok(ROUTINE.load(Ordering::Relaxed)))
}

/// `SetSciMemCopyFunction`: use copy routine `function` (a `REMORA_MEMCOPY_*` id, given as
/// a plain `int`) for the store direction of `SCIMemCpy`, `SCIMemCopy` and
/// `SCIMemCpy_dual`, in the whole process. Returns the id in use afterwards.
///
/// # Errors
/// None reported (no error argument): an unknown id changes nothing, which the returned
/// id shows.
#[no_mangle]
pub extern "C-unwind" fn SetSciMemCopyFunction(function: c_int) -> c_int {
    run_quiet(REMORA_MEMCOPY_DEFAULT as c_int, || {
        if routine_of(function).is_some() {
            ROUTINE.store(function, Ordering::Relaxed);
        }
        Ok(ROUTINE.load(Ordering::Relaxed))
    })
}

/// `SCIMemCpy_dual`: store the same `size` bytes of `mem_addr` into `remote_map` at
/// `remote_offset` and into `remote_map2` at `remote_offset2` (a mirror), with the copy
/// routine in use. Both ranges are checked before a byte moves. With
/// `SCI_FLAG_ERROR_CHECK` and a sequence (which may be NULL), the sequence is checked
/// afterwards.
///
/// # Errors
/// `SCI_ERR_OUT_OF_RANGE` when a range leaves its map; `SCI_ERR_ILLEGAL_OPERATION` for a
/// read-only map; `SCI_ERR_TRANSFER_FAILED` when the checked sequence reports an error;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad map or sequence, a NULL `mem_addr` with a non-zero
/// size, or a buffer overlapping either map; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable; `mem_addr` is NULL or valid for reads of `size` bytes that
/// nothing writes during the call.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe extern "C-unwind" fn SCIMemCpy_dual(
    sequence: sci_sequence_t,
    mem_addr: *mut c_void,
    remote_map: sci_map_t,
    remote_offset: usize,
    remote_map2: sci_map_t,
    remote_offset2: usize,
    size: usize,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_ERROR_CHECK, 0)?;
        let maps: [Map; 2] = [handles::get(key(remote_map))?, handles::get(key(remote_map2))?];
        let seq: Option<Sequence> =
            if sequence.is_null() { None } else { Some(handles::get(key(sequence))?) };
        if size == 0 {
            return Ok(());
        }
        if mem_addr.is_null() || size > isize::MAX as usize {
            return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
        }
        let start = mem_addr as usize;
        let end = start.checked_add(size).ok_or(Fail(SCI_ERR_ILLEGAL_PARAMETER))?;
        for (map, off) in maps.iter().zip([remote_offset, remote_offset2]) {
            let (lo, hi) = (map.as_ptr() as usize, map.as_ptr() as usize + map.size());
            if start < hi && lo < end {
                return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
            }
            if off.checked_add(size).is_none_or(|e| e > map.size()) {
                return Err(Fail(SCI_ERR_OUT_OF_RANGE));
            }
        }
        // SAFETY: `mem_addr` is non-NULL, the range neither wraps nor exceeds isize::MAX nor
        // overlaps either map, and by this function's contract it is readable and not
        // written during the call.
        let data = unsafe { std::slice::from_raw_parts(mem_addr.cast::<u8>().cast_const(), size) };
        store(&maps[0], remote_offset, data)?;
        store(&maps[1], remote_offset2, data)?;
        if let (Some(s), true) = (seq, flags & SCI_FLAG_ERROR_CHECK != 0) {
            if s.check(false, false)? != SequenceStatus::Ok {
                return Err(remora_sisci::Error::TransferFailed.into());
            }
        }
        Ok(())
    })
}

/// The maps of a block transfer.
fn block_maps(source: sci_map_t, destination: sci_map_t) -> Outcome<(Map, Map)> {
    Ok((handles::get(key(source))?, handles::get(key(destination))?))
}

/// `SCITransferBlock` (API 1.x): copy `size` bytes of `source_map` at `source_offset` into
/// `destination_map` at `destination_offset`, and return when they are in the
/// destination's memory. Either map may be of a local or a remote segment; the direction is
/// the argument order, so `SCI_FLAG_BLOCK_READ` is accepted without effect.
///
/// # Errors
/// `SCI_ERR_OUT_OF_RANGE` when either range leaves its map; `SCI_ERR_ILLEGAL_OPERATION`
/// for a read-only destination; `SCI_ERR_TRANSFER_FAILED` when a map's connection is
/// lost; `SCI_ERR_ILLEGAL_PARAMETER` for a bad map handle; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCITransferBlock(
    source_map: sci_map_t,
    source_offset: c_uint,
    destination_map: sci_map_t,
    destination_offset: c_uint,
    size: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_BLOCK_READ, 0)?;
        let (src, dst) = block_maps(source_map, destination_map)?;
        let (so, doff, n) = (source_offset as usize, destination_offset as usize, size as usize);
        Ok(remora_sisci::transfer_block(&src, so, &dst, doff, n)?)
    })
}

/// `SCITransferBlockAsync` (API 1.x): start the copy `SCITransferBlock` makes on a thread
/// of the library and store the transfer's handle in `*block`. With
/// `SCI_FLAG_USE_CALLBACK` and a non-NULL callback, `callback(callback_arg, *block,
/// status)` runs on that thread when the copy has ended (never inside this call). The
/// handle lives until `SCIWaitForBlockTransfer` reports the outcome (or `SCIClose`).
///
/// # Errors
/// As `SCITransferBlock` for what is found before the copy starts (then no handle is
/// stored); `SCI_ERR_ILLEGAL_PARAMETER` for a NULL `block`; `SCI_ERR_SYSTEM` when no
/// thread could be started.
///
/// # Safety
/// `block` and `error` are NULL or writable. A callback is a valid
/// `sci_cb_block_transfer_t`, usable with `callback_arg` until the transfer has ended.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe extern "C-unwind" fn SCITransferBlockAsync(
    source_map: sci_map_t,
    source_offset: c_uint,
    destination_map: sci_map_t,
    destination_offset: c_uint,
    size: c_uint,
    block: *mut sci_block_transfer_t,
    callback: sci_cb_block_transfer_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_BLOCK_READ | SCI_FLAG_USE_CALLBACK, 0)?;
        // SAFETY: `block` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(block) }?;
        let (src, dst) = block_maps(source_map, destination_map)?;
        let reserved = handles::reserve::<BlockTransfer>()?;
        let cb = callbacks::block(callback, callback_arg, flags, reserved.key(), reserved.gate());
        let (so, doff, n) = (source_offset as usize, destination_offset as usize, size as usize);
        let transfer = BlockTransfer::start(&src, so, &dst, doff, n, cb)?;
        out.set(handle(reserved.fill(transfer)));
        Ok(())
    })
}

/// `SCIWaitForBlockTransfer` (API 1.x): wait up to `timeout` ms (`SCI_INFINITE_TIMEOUT`:
/// no limit) until the transfer has ended and its callback, if any, has returned. The
/// error is then the transfer's outcome (`SCI_ERR_OK`, the copy's error, or
/// `SCI_ERR_CANCELLED` after `SCIAbortBlockTransfer`) and the handle becomes invalid.
///
/// # Errors
/// `SCI_ERR_TIMEOUT` (the handle stays valid); `SCI_ERR_ILLEGAL_OPERATION` when called from
/// the transfer's own callback; `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag; else the outcome.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIWaitForBlockTransfer(
    block: sci_block_transfer_t,
    timeout: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    // Waited in slices, with a cancellation point between them (see `run_waiting`).
    crate::errors::run_waiting(status, wait_time(timeout), |slice| {
        check_flags(flags, 0, 0)?;
        let t: BlockTransfer = handles::get(key(block))?;
        let outcome = t.wait(slice);
        if !matches!(outcome, Err(remora_sisci::Error::Timeout | remora_sisci::Error::IllegalOperation)) {
            handles::remove(key(block));
        }
        Ok(outcome?)
    });
}

/// `SCIAbortBlockTransfer` (API 1.x): stop a running transfer at its next 1 MiB boundary
/// and return once it has stopped; its outcome is then `SCI_ERR_CANCELLED` (or
/// `SCI_ERR_OK` when its last piece was already under way). `SCIWaitForBlockTransfer`
/// still reports it and releases the handle.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` when the transfer had already ended (the documented code);
/// `SCI_ERR_ILLEGAL_PARAMETER` for a handle that names no transfer (NULL, stale, another
/// kind); `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIAbortBlockTransfer(
    block: sci_block_transfer_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        let t: BlockTransfer = handles::get(key(block))?;
        Ok(t.abort()?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_routine_ids_round_trip_and_unknown_ids_change_nothing() {
        let before = GetSciMemCopyFunction();
        assert_eq!(SetSciMemCopyFunction(REMORA_MEMCOPY_WORDS64 as c_int), REMORA_MEMCOPY_WORDS64 as c_int);
        assert_eq!(GetSciMemCopyFunction(), REMORA_MEMCOPY_WORDS64 as c_int);
        assert_eq!(SetSciMemCopyFunction(77), REMORA_MEMCOPY_WORDS64 as c_int);
        assert_eq!(SetSciMemCopyFunction(-1), REMORA_MEMCOPY_WORDS64 as c_int);
        assert_eq!(SetSciMemCopyFunction(before), before);
    }

    #[test]
    fn bad_block_handles_are_illegal_parameters() {
        let mut err = SCI_ERR_OK;
        // SAFETY: `err` is a live local; the handle is never dereferenced.
        unsafe { SCIAbortBlockTransfer(std::ptr::null_mut(), 0, &mut err) };
        assert_eq!(err, SCI_ERR_ILLEGAL_PARAMETER);
        // SAFETY: as above.
        unsafe { SCIWaitForBlockTransfer(std::ptr::null_mut(), 0, 0, &mut err) };
        assert_eq!(err, SCI_ERR_ILLEGAL_PARAMETER);
    }
}
