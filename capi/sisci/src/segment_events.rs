//! Waiting for segment events: `SCIWaitForLocalSegmentEvent` and
//! `SCIWaitForRemoteSegmentEvent`, each waited in slices with a cancellation point between
//! them (see `errors::run_waiting`).

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::callbacks::{reason_code, status_code};
use crate::consts::SCI_ERR_CANCELLED;
use crate::errors::{check_flags, ErrorOut, Fail};
use crate::segments::{local, optional_out, remote};
use crate::types::{sci_error_t, sci_local_segment_t, sci_remote_segment_t, sci_segment_cb_reason_t};
use crate::wait_time;
use std::ffi::c_uint;

/// `SCIWaitForLocalSegmentEvent`: wait up to `timeout` ms (`SCI_INFINITE_TIMEOUT`: no
/// limit) for the next event of the segment (an importer connected or disconnected) and
/// return its `SCI_CB_*` reason, with the node concerned in `*source_node_id` and the
/// adapter in `*local_adapter_no` (either pointer may be NULL when the caller does not
/// need it). Events that came while nobody waited are kept, in order. Returns 0 on
/// failure.
///
/// # Errors
/// `SCI_ERR_TIMEOUT`; `SCI_ERR_CANCELLED` when the segment is removed meanwhile;
/// `SCI_ERR_ILLEGAL_OPERATION` when the segment was created with a callback;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `source_node_id`, `local_adapter_no` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIWaitForLocalSegmentEvent(
    segment: sci_local_segment_t,
    source_node_id: *mut c_uint,
    local_adapter_no: *mut c_uint,
    timeout: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) -> sci_segment_cb_reason_t {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    let (mut reason, mut found) = (0, false);
    // Waited in slices, with a cancellation point between them (see `run_waiting`).
    crate::errors::run_waiting(status, wait_time(timeout), |slice| {
        check_flags(flags, 0, 0)?;
        // SAFETY: both are NULL or writable (this function's contract).
        let (node_out, adapter_out) =
            unsafe { (optional_out(source_node_id)?, optional_out(local_adapter_no)?) };
        // A handle gone after the first slice found it was removed meanwhile (keys are
        // never reused): the wait was cancelled.
        let seg = local(segment).map_err(|e| if found { Fail(SCI_ERR_CANCELLED) } else { e })?;
        found = true;
        let event = seg.wait_event(slice)?;
        if let Some(o) = node_out {
            o.set(event.node);
        }
        if let Some(o) = adapter_out {
            o.set(event.adapter);
        }
        reason = reason_code(event.reason);
        Ok(())
    });
    reason
}

/// `SCIWaitForRemoteSegmentEvent`: wait up to `timeout` ms (`SCI_INFINITE_TIMEOUT`: no
/// limit) for the next event of the connection and return its `SCI_CB_*` reason, with
/// its status in `*status` (`SCI_ERR_OK`, or why an asynchronous connect failed or the
/// connection ended; `status` may be NULL). Returns 0 on failure.
///
/// # Errors
/// `SCI_ERR_TIMEOUT`; `SCI_ERR_CANCELLED` when the segment is disconnected meanwhile;
/// `SCI_ERR_ILLEGAL_OPERATION` when the connection has a callback;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `status` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIWaitForRemoteSegmentEvent(
    segment: sci_remote_segment_t,
    status: *mut sci_error_t,
    timeout: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) -> sci_segment_cb_reason_t {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let report = unsafe { ErrorOut::new(error) };
    let (mut reason, mut found) = (0, false);
    // Waited in slices, with a cancellation point between them (see `run_waiting`).
    crate::errors::run_waiting(report, wait_time(timeout), |slice| {
        check_flags(flags, 0, 0)?;
        // SAFETY: `status` is NULL or writable (this function's contract).
        let status_out = unsafe { optional_out(status) }?;
        // As for local segments: a handle gone after the first slice was disconnected.
        let seg = remote(segment).map_err(|e| if found { Fail(SCI_ERR_CANCELLED) } else { e })?;
        found = true;
        let event = seg.wait_event(slice)?;
        if let Some(o) = status_out {
            o.set(status_code(event.status.as_ref().map_or(Ok(()), Err)));
        }
        reason = reason_code(event.reason);
        Ok(())
    });
    reason
}
