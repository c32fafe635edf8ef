//! Sequences, barriers and flushes: `SCICreateMapSequence`, `SCIRemoveSequence`,
//! `SCIStartSequence`, `SCICheckSequence`, `SCIStoreBarrier`, `SCIFlush`,
//! `SCIFlushReadBuffers`.
//!
//! The statuses follow the guide's error-checking model (see `remora_sisci::Sequence` for
//! the table of states): `SCI_SEQ_PENDING` while the route to the segment's node is down,
//! `SCI_SEQ_RETRIABLE` from the first check after an outage the link came back from,
//! `SCI_SEQ_NOT_RETRIABLE` once the segment is gone for good — and then
//! `SCIStartSequence` also sets its error argument, so the guide's loop
//! `do { status = SCIStartSequence(…, &error); if (error != SCI_ERR_OK) … } while (status != SCI_SEQ_OK);`
//! leaves by its error path instead of spinning forever.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::consts::*;
use crate::errors::{check_flags, run, run_quiet, ErrorOut, Out};
use crate::handles::{self, handle, key};
use crate::maps::{map_of, sequence_of};
use crate::types::{sci_error_t, sci_map_t, sci_sequence_status_t, sci_sequence_t};
use remora_sisci::SequenceStatus;
use std::ffi::c_uint;
use std::sync::atomic::{fence, Ordering};

/// `SCICreateMapSequence`: create an error-checking sequence for the map and store its
/// handle in `*sequence`. `SCI_FLAG_FAST_BARRIER` is accepted (every barrier is a fence).
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad map or a NULL `sequence`; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `sequence` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCICreateMapSequence(
    map: sci_map_t,
    sequence: *mut sci_sequence_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_FAST_BARRIER, 0)?;
        // SAFETY: `sequence` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(sequence) }?;
        let seq = map_of(map)?.create_sequence()?;
        out.set(handle(handles::insert(seq)?));
        Ok(())
    })
}

/// `SCIRemoveSequence`: remove the sequence; its handle becomes invalid.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIRemoveSequence(
    sequence: sci_sequence_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        sequence_of(sequence)?.remove()?;
        handles::remove(key(sequence));
        Ok(())
    })
}

/// The C value of a sequence status.
fn status_code(s: SequenceStatus) -> sci_sequence_status_t {
    match s {
        SequenceStatus::Ok => SCI_SEQ_OK,
        SequenceStatus::Retriable => SCI_SEQ_RETRIABLE,
        SequenceStatus::NotRetriable => SCI_SEQ_NOT_RETRIABLE,
        SequenceStatus::Pending => SCI_SEQ_PENDING,
    }
}

/// `SCIStartSequence`: begin a checked transfer. `SCI_SEQ_OK`; `SCI_SEQ_PENDING` while
/// the route to the segment's node is down (after waiting 10 ms for it; call again);
/// `SCI_SEQ_NOT_RETRIABLE` with the error set when the segment is gone for good, and on
/// any other error.
///
/// # Errors
/// `SCI_ERR_NOT_CONNECTED` when the exporter forced a disconnect;
/// `SCI_ERR_NODE_NOT_RESPONDING` when the exporting process, its node or this node's
/// daemon went away; `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG`
/// for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIStartSequence(
    sequence: sci_sequence_t,
    flags: c_uint,
    error: *mut sci_error_t,
) -> sci_sequence_status_t {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, SCI_SEQ_NOT_RETRIABLE, || {
        check_flags(flags, 0, 0)?;
        Ok(status_code(sequence_of(sequence)?.start()?))
    })
}

/// `SCICheckSequence`: flush (unless `SCI_FLAG_NO_FLUSH`), wait for stores (unless
/// `SCI_FLAG_NO_STORE_BARRIER` or `SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY`), and report whether
/// the transfers since the last start/check completed: `SCI_SEQ_OK`; `SCI_SEQ_PENDING`
/// while the route to the segment's node is down; `SCI_SEQ_RETRIABLE` once after the link
/// came back from an outage (or stores could not be confirmed on a live connection);
/// `SCI_SEQ_NOT_RETRIABLE` when the segment is gone for good (and on any error).
///
/// A NULL sequence with `SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY` flushes as `SCIFlush(NULL, …)`
/// does and answers `SCI_SEQ_OK` (the guide's advice for programs that store through a
/// map without `SCIMemCpy`).
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle (a NULL one without
/// `SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY`); `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCICheckSequence(
    sequence: sci_sequence_t,
    flags: c_uint,
    error: *mut sci_error_t,
) -> sci_sequence_status_t {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, SCI_SEQ_NOT_RETRIABLE, || {
        let known = SCI_FLAG_NO_FLUSH | SCI_FLAG_NO_STORE_BARRIER | SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY;
        check_flags(flags, known, 0)?;
        let cpu_only = flags & SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY != 0;
        if sequence.is_null() && cpu_only {
            remora_sisci::flush();
            return Ok(SCI_SEQ_OK);
        }
        let no_flush = flags & SCI_FLAG_NO_FLUSH != 0;
        let no_barrier = flags & SCI_FLAG_NO_STORE_BARRIER != 0 || cpu_only;
        Ok(status_code(sequence_of(sequence)?.check(no_flush, no_barrier)?))
    })
}

/// `SCIStoreBarrier`: every store made before it has reached the segment's memory.
/// There is no error argument: a bad handle still gets the (harmless) barrier.
///
/// # Errors
/// None reported (no error argument).
#[no_mangle]
pub extern "C-unwind" fn SCIStoreBarrier(sequence: sci_sequence_t, flags: c_uint) {
    let _ = flags;
    run_quiet((), || {
        match sequence_of(sequence) {
            Ok(seq) => seq.store_barrier(),
            Err(_) => fence(Ordering::SeqCst),
        }
        Ok(())
    })
}

/// `SCIFlush`: drain this CPU's store buffers (a full fence) and send the stores made so
/// far to maps of other hosts' segments home: stores made after it reach each home after
/// them. Where the maps that can be written are all of one home it does not wait for them
/// to land; with maps of several homes it waits for the homes' answers (at most 5 s), so
/// that a store to another home cannot overtake them. A store to this node's own memory
/// after it is not held back (`SCIStoreBarrier` waits). The sequence may be NULL; with or
/// without `SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY` it does the same. There is no error argument.
///
/// # Errors
/// None reported (no error argument).
#[no_mangle]
pub extern "C-unwind" fn SCIFlush(sequence: sci_sequence_t, flags: c_uint) {
    // Both forms push the stores out of this process: on the adapters, CPU buffers only
    // means the write-combining buffers, whose stores the adapter then sends anyway.
    let _ = (sequence, flags);
    run_quiet((), || {
        remora_sisci::flush();
        Ok(())
    })
}

/// `SCIFlushReadBuffers` (API 1.x): drop prefetched read data. Remora maps have no read
/// buffers other than the CPU caches, which are coherent: a fence is all it takes.
///
/// # Errors
/// None reported (no error argument).
#[no_mangle]
pub extern "C-unwind" fn SCIFlushReadBuffers(sequence: sci_sequence_t) {
    let _ = sequence;
    run_quiet((), || {
        fence(Ordering::SeqCst);
        Ok(())
    })
}
