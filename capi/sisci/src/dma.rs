//! DMA queues: create, start (single, vector, user memory), the API 1.x enqueue/post/reset
//! calls, state, wait, abort, remove.
//!
//! The node daemon is the DMA engine. A queue follows the guide's state machine
//! (IDLE → POSTED → DONE | ERROR | ABORTED, GATHER for the 1.x calls); a call the state does
//! not allow gives `SCI_ERR_ILLEGAL_OPERATION`.
//!
//! Flags of the transfer calls: `SCI_FLAG_DMA_READ` (remote → local), `SCI_FLAG_DMA_WAIT`
//! (return when the transfer has ended), `SCI_FLAG_USE_CALLBACK` (with a non-NULL callback:
//! `callback(arg, queue, status)` runs on the library's event thread when the transfer
//! ends, and `SCIWaitForDMAQueue` is illegal meanwhile), and `SCI_FLAG_DMA_GLOBAL`,
//! `SCI_FLAG_DMA_SYSDMA` (engine choices, accepted without effect: there is one engine).
//! `SCI_FLAG_BROADCAST` gives `SCI_ERR_FLAG_NOT_IMPLEMENTED` (multicast comes later).

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::callbacks::{self, DmaClosure};
use crate::consts::*;
use crate::errors::{check_flags, run, run_quiet, run_with, ErrorOut, Fail, Out, Outcome};
use crate::handles::{self, handle, key};
use crate::types::{
    sci_cb_dma_t, sci_desc_t, sci_dma_queue_state_t, sci_dma_queue_t, sci_error_t, sci_local_segment_t,
    sci_remote_segment_t,
};
use crate::wait_time;
use remora_sisci::{DmaFlags, DmaQueue, DmaState, DmaVec, Error, LocalSegment, RemoteSegment, UserRegion};
use std::ffi::{c_uint, c_void};

/// Flags the transfer calls take.
const START_ACCEPTED: u32 =
    SCI_FLAG_DMA_READ | SCI_FLAG_USE_CALLBACK | SCI_FLAG_DMA_WAIT | SCI_FLAG_DMA_GLOBAL | SCI_FLAG_DMA_SYSDMA;
/// Transfer flags of features that arrive later (multicast).
const START_LATER: u32 = SCI_FLAG_BROADCAST;

/// The `SCI_DMAQUEUE_*` value of a state.
pub(crate) fn state_code(state: DmaState) -> sci_dma_queue_state_t {
    match state {
        DmaState::Idle => SCI_DMAQUEUE_IDLE,
        DmaState::Gather => SCI_DMAQUEUE_GATHER,
        DmaState::Posted => SCI_DMAQUEUE_POSTED,
        DmaState::Done => SCI_DMAQUEUE_DONE,
        DmaState::Aborted => SCI_DMAQUEUE_ABORTED,
        DmaState::Error => SCI_DMAQUEUE_ERROR,
    }
}

/// The queue a handle names.
fn queue(dq: sci_dma_queue_t) -> Outcome<DmaQueue> {
    handles::get(key(dq))
}

/// The local segment a handle names.
fn local(segment: sci_local_segment_t) -> Outcome<LocalSegment> {
    handles::get(key(segment))
}

/// The remote segment a handle names.
fn remote(segment: sci_remote_segment_t) -> Outcome<RemoteSegment> {
    handles::get(key(segment))
}

/// Check a transfer call's flags and build its options and callback closure.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_FLAG`, `SCI_ERR_FLAG_NOT_IMPLEMENTED`; `SCI_ERR_ILLEGAL_OPERATION` for
/// `SCI_FLAG_DMA_WAIT` together with a callback (a callback forbids waiting).
fn transfer_options(
    flags: u32,
    callback: sci_cb_dma_t,
    callback_arg: *mut c_void,
    dq: sci_dma_queue_t,
) -> Outcome<(DmaFlags, Option<DmaClosure>)> {
    check_flags(flags, START_ACCEPTED, START_LATER)?;
    let cb = callbacks::dma(callback, callback_arg, flags, key(dq));
    let wait = flags & SCI_FLAG_DMA_WAIT != 0;
    if wait && cb.is_some() {
        return Err(Fail(SCI_ERR_ILLEGAL_OPERATION));
    }
    Ok((DmaFlags { read: flags & SCI_FLAG_DMA_READ != 0, wait }, cb))
}

/// After a transfer call with `SCI_FLAG_DMA_WAIT`: the outcome of the finished job.
fn waited_outcome(q: &DmaQueue) -> Outcome<()> {
    match q.state() {
        DmaState::Error => Err(q.last_error().unwrap_or(Error::TransferFailed).into()),
        DmaState::Aborted => Err(Error::Cancelled.into()),
        _ => Ok(()),
    }
}

/// `SCICreateDMAQueue`: create a queue for up to `max_entries` transfers (1 to 65536) on
/// adapter `local_adapter_no` and store its handle in `*dq`. The queue starts IDLE.
///
/// # Errors
/// `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_PARAMETER` for a bad descriptor, a NULL
/// `dq`, or `max_entries` 0 or above 65536; `SCI_ERR_NOT_SUPPORTED` for
/// `SCI_FLAG_DMA_PHDMA` (physical DMA); `SCI_ERR_ILLEGAL_FLAG` for other flags.
///
/// # Safety
/// `dq` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCICreateDMAQueue(
    sd: sci_desc_t,
    dq: *mut sci_dma_queue_t,
    local_adapter_no: c_uint,
    max_entries: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_DMA_PHDMA, 0)?;
        if flags & SCI_FLAG_DMA_PHDMA != 0 {
            return Err(Fail(SCI_ERR_NOT_SUPPORTED));
        }
        // SAFETY: `dq` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(dq) }?;
        let desc = handles::get(key(sd))?;
        let q = DmaQueue::create(&desc, local_adapter_no, max_entries)?;
        out.set(handle(handles::insert(q)?));
        Ok(())
    })
}

/// `SCIRemoveDMAQueue`: release an IDLE, DONE, ERROR or ABORTED queue; its handle becomes
/// invalid.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` while a transfer is posted; `SCI_ERR_ILLEGAL_PARAMETER` for
/// a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIRemoveDMAQueue(
    dq: sci_dma_queue_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        queue(dq)?.remove()?;
        handles::remove(key(dq));
        Ok(())
    })
}

/// `SCIAbortDMAQueue`: stop the posted transfer and wait until the engine has stopped.
/// The state is then ABORTED, or DONE/ERROR when the transfer ended first (check it with
/// `SCIDMAQueueState`). A no-op in a final state.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` when IDLE or GATHER; `SCI_ERR_ILLEGAL_PARAMETER` for a bad
/// handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIAbortDMAQueue(
    dq: sci_dma_queue_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        queue(dq)?.abort()?;
        Ok(())
    })
}

/// `SCIDMAQueueState`: the queue's state (`SCI_DMAQUEUE_*`); asking does not change it.
///
/// # Errors
/// None reported (no error argument). A NULL, stale or wrong-kind handle answers
/// `SCI_DMAQUEUE_ERROR`, so that a program polling for a final state stops.
#[no_mangle]
pub extern "C-unwind" fn SCIDMAQueueState(dq: sci_dma_queue_t) -> sci_dma_queue_state_t {
    run_quiet(SCI_DMAQUEUE_ERROR, || Ok(state_code(queue(dq)?.state())))
}

/// `SCIWaitForDMAQueue`: wait up to `timeout` ms (`SCI_INFINITE_TIMEOUT`: no limit) for
/// the posted transfer to end and return the final state (DONE, ERROR or ABORTED; whether
/// the data moved is in that state, the error is `SCI_ERR_OK` either way). In a final state
/// it returns at once. On failure it returns the queue's current state
/// (`SCI_DMAQUEUE_ERROR` for a bad handle).
///
/// # Errors
/// `SCI_ERR_TIMEOUT`; `SCI_ERR_ILLEGAL_OPERATION` when IDLE or GATHER, or when the
/// transfer was started with a callback; `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIWaitForDMAQueue(
    dq: sci_dma_queue_t,
    timeout: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) -> sci_dma_queue_state_t {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    // Waited in slices, with a cancellation point between them (see `run_waiting`).
    let mut state = SCI_DMAQUEUE_ERROR;
    crate::errors::run_waiting(status, wait_time(timeout), |slice| {
        let q = queue(dq)?;
        state = state_code(q.state());
        check_flags(flags, 0, 0)?;
        let r = q.wait(slice);
        state = state_code(q.state());
        state = state_code(r?);
        Ok(())
    });
    state
}

/// `SCIStartDmaTransfer`: copy `size` bytes from `local_segment` at `local_offset` to
/// `remote_segment` at `remote_offset` (the other way with `SCI_FLAG_DMA_READ`). Returns
/// once the engine has the transfer, or when it has ended with `SCI_FLAG_DMA_WAIT` (then
/// the error is the transfer's outcome). See the module documentation for the flags.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` while the queue is POSTED or GATHER, or for
/// `SCI_FLAG_DMA_WAIT` with a callback; `SCI_ERR_SEGMENT_NOT_PREPARED`;
/// `SCI_ERR_NOT_CONNECTED` for a connection that is lost or not yet made;
/// `SCI_ERR_OUT_OF_RANGE` for a zero size or a range outside either segment;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG`,
/// `SCI_ERR_FLAG_NOT_IMPLEMENTED`.
///
/// # Safety
/// `error` is NULL or writable. A callback is a valid `sci_cb_dma_t`, usable with
/// `callback_arg` until the transfer has ended.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIStartDmaTransfer(
    dq: sci_dma_queue_t,
    local_segment: sci_local_segment_t,
    remote_segment: sci_remote_segment_t,
    local_offset: usize,
    size: usize,
    remote_offset: usize,
    callback: sci_cb_dma_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        let (how, cb) = transfer_options(flags, callback, callback_arg, dq)?;
        let q = queue(dq)?;
        let (l, r) = (local(local_segment)?, remote(remote_segment)?);
        q.start(&l, &r, local_offset, size, remote_offset, how, cb)?;
        if how.wait {
            waited_outcome(&q)?;
        }
        Ok(())
    })
}

/// `SCIStartDmaTransferVec`: `vec_length` transfers between one local and one remote
/// segment, as one job (`vec[i].size` bytes from `local_offset` to `remote_offset`, or
/// back with `SCI_FLAG_DMA_READ`). Each element's `flags` field is ignored (programs often
/// leave it unset). Flags and callback as for `SCIStartDmaTransfer`.
///
/// # Errors
/// As `SCIStartDmaTransfer`; `SCI_ERR_ILLEGAL_PARAMETER` for a NULL `vec` or a zero
/// `vec_length`; `SCI_ERR_MAX_ENTRIES` for more elements than the queue holds (the vector
/// is then not read).
///
/// # Safety
/// `error` is NULL or writable; `vec` is NULL or points to `vec_length` readable elements.
/// A callback is a valid `sci_cb_dma_t`, usable with `callback_arg` until the transfer has
/// ended.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIStartDmaTransferVec(
    dq: sci_dma_queue_t,
    local_segment: sci_local_segment_t,
    remote_segment: sci_remote_segment_t,
    vec_length: usize,
    vec: *mut dis_dma_vec_t,
    callback: sci_cb_dma_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        let (how, cb) = transfer_options(flags, callback, callback_arg, dq)?;
        if vec.is_null() || !vec.is_aligned() || vec_length == 0 {
            return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
        }
        let q = queue(dq)?;
        let (l, r) = (local(local_segment)?, remote(remote_segment)?);
        // A vector longer than the queue holds is done in turns, but a length no queue
        // could hold is refused before the vector is read.
        if vec_length > remora_sys::dma::MAX_ENTRIES as usize {
            return Err(Fail(SCI_ERR_MAX_ENTRIES));
        }
        // SAFETY: `vec` is non-NULL and aligned, and by this function's contract points to
        // `vec_length` readable elements; the slice lives only during this call.
        let elements = unsafe { std::slice::from_raw_parts(vec.cast_const(), vec_length) };
        let list: Vec<DmaVec> = elements
            .iter()
            .map(|e| DmaVec {
                size: e.size as usize,
                local_offset: e.local_offset as usize,
                remote_offset: e.remote_offset as usize,
            })
            .collect();
        q.start_vec(&l, &r, &list, how, cb)?;
        if how.wait {
            waited_outcome(&q)?;
        }
        Ok(())
    })
}

/// `SCIStartDmaTransferMem`: copy `size` bytes of this process's memory at
/// `local_address` (any memory: no segment needed) to `remote_segment` at
/// `remote_offset`, or with `SCI_FLAG_DMA_READ` from there into that memory. The engine
/// reads or writes the memory directly. Flags and callback as for `SCIStartDmaTransfer`.
///
/// # Errors
/// As `SCIStartDmaTransfer`; `SCI_ERR_ILLEGAL_PARAMETER` for a NULL `local_address`;
/// `SCI_ERR_OUT_OF_RANGE` for a zero size or a range that wraps around the address space.
///
/// # Safety
/// `error` is NULL or writable. `local_address..local_address+size` is memory of this
/// process that stays mapped, and that the program neither frees nor (for a read) touches,
/// until the transfer has ended (the SISCI contract for this call). A callback is a valid
/// `sci_cb_dma_t`, usable with `callback_arg` until the transfer has ended.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIStartDmaTransferMem(
    dq: sci_dma_queue_t,
    local_address: *mut c_void,
    remote_segment: sci_remote_segment_t,
    size: usize,
    remote_offset: usize,
    callback: sci_cb_dma_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        let (how, cb) = transfer_options(flags, callback, callback_arg, dq)?;
        if local_address.is_null() {
            return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
        }
        if size == 0 || size > isize::MAX as usize || (local_address as usize).checked_add(size).is_none() {
            return Err(Fail(SCI_ERR_OUT_OF_RANGE));
        }
        let q = queue(dq)?;
        let r = remote(remote_segment)?;
        // SAFETY: the range is non-NULL and does not wrap; by this function's contract the
        // C caller keeps it mapped and leaves it alone until the transfer ends, as the
        // SISCI contract for SCIStartDmaTransferMem says. The region is only an address
        // and a length: the engine (in the node daemon) reads or writes the memory.
        let mem = unsafe { UserRegion::from_raw_parts(local_address.cast(), size) };
        q.start_mem(mem, &r, remote_offset, how, cb)?;
        if how.wait {
            waited_outcome(&q)?;
        }
        Ok(())
    })
}

/// `SCIEnqueueDMATransfer` (API 1.x): add one transfer of `size` bytes between
/// `local_offset` and `remote_offset` (note the 1.x order: local offset, remote offset,
/// size) to the queue, which gathers (GATHER) until `SCIPostDMAQueue`. Flags:
/// `SCI_FLAG_DMA_READ`; `SCI_FLAG_DMA_GLOBAL`, `SCI_FLAG_DMA_SYSDMA` (no effect). Returns
/// the queue's state (`SCI_DMAQUEUE_GATHER`), or on failure its current state
/// (`SCI_DMAQUEUE_ERROR` for a bad handle).
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` unless IDLE or GATHER; `SCI_ERR_MAX_ENTRIES` when the
/// queue is full; `SCI_ERR_SEGMENT_NOT_PREPARED`; `SCI_ERR_NOT_CONNECTED`;
/// `SCI_ERR_OUT_OF_RANGE`; `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle;
/// `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIEnqueueDMATransfer(
    dq: sci_dma_queue_t,
    local_segment: sci_local_segment_t,
    remote_segment: sci_remote_segment_t,
    local_offset: c_uint,
    remote_offset: c_uint,
    size: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) -> sci_dma_queue_state_t {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run_with(status, SCI_DMAQUEUE_ERROR, |now| {
        let q = queue(dq)?;
        *now = state_code(q.state());
        check_flags(flags, SCI_FLAG_DMA_READ | SCI_FLAG_DMA_GLOBAL | SCI_FLAG_DMA_SYSDMA, 0)?;
        let (l, r) = (local(local_segment)?, remote(remote_segment)?);
        let read = flags & SCI_FLAG_DMA_READ != 0;
        let state = q.enqueue(&l, &r, local_offset as usize, remote_offset as usize, size as usize, read)?;
        Ok(state_code(state))
    })
}

/// `SCIPostDMAQueue` (API 1.x): start the gathered transfers. Flags:
/// `SCI_FLAG_USE_CALLBACK` (with a non-NULL callback, as for `SCIStartDmaTransfer`),
/// `SCI_FLAG_DMA_WAIT` (return when the transfers have ended; the error is then their
/// outcome), `SCI_FLAG_DMA_GLOBAL`, `SCI_FLAG_DMA_SYSDMA` (no effect).
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` unless GATHER, or for `SCI_FLAG_DMA_WAIT` with a callback;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable. A callback is a valid `sci_cb_dma_t`, usable with
/// `callback_arg` until the transfers have ended.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIPostDMAQueue(
    dq: sci_dma_queue_t,
    callback: sci_cb_dma_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        let accepted = SCI_FLAG_USE_CALLBACK | SCI_FLAG_DMA_WAIT | SCI_FLAG_DMA_GLOBAL | SCI_FLAG_DMA_SYSDMA;
        check_flags(flags, accepted, 0)?;
        let (how, cb) = transfer_options(flags, callback, callback_arg, dq)?;
        let q = queue(dq)?;
        q.post_gathered(cb)?;
        if how.wait {
            q.wait(None)?;
            waited_outcome(&q)?;
        }
        Ok(())
    })
}

/// `SCIResetDMAQueue` (API 1.x): back to IDLE, dropping gathered transfers.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` while POSTED; `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIResetDMAQueue(
    dq: sci_dma_queue_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        queue(dq)?.reset()?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_have_the_header_values() {
        assert_eq!(state_code(DmaState::Idle), 0);
        assert_eq!(state_code(DmaState::Gather), 1);
        assert_eq!(state_code(DmaState::Posted), 2);
        assert_eq!(state_code(DmaState::Done), 3);
        assert_eq!(state_code(DmaState::Aborted), 4);
        assert_eq!(state_code(DmaState::Error), 5);
    }

    #[test]
    fn bad_queue_handles_answer_error() {
        assert_eq!(SCIDMAQueueState(std::ptr::null_mut()), SCI_DMAQUEUE_ERROR);
        let mut err = SCI_ERR_OK;
        // SAFETY: `err` is a live local; the handle is never dereferenced.
        let s = unsafe { SCIWaitForDMAQueue(std::ptr::null_mut(), 0, 0, &mut err) };
        assert_eq!((s, err), (SCI_DMAQUEUE_ERROR, SCI_ERR_ILLEGAL_PARAMETER));
    }
}
