//! Interrupts and data interrupts: create, wait, remove on the owning side; connect,
//! trigger, disconnect on the triggering side.
//!
//! A trigger that arrives while nobody waits is kept: the next wait returns at once.
//! Without `SCI_FLAG_COUNTING_INT` several such triggers count as one; with it, each
//! trigger satisfies one wait (or one callback). Data interrupts carry up to
//! `SCI_MAX_DATA_INTERRUPT_LENGTH` (1024) bytes each, delivered in order.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::callbacks;
use crate::consts::*;
use crate::errors::{check_flags, run, run_waiting_on, ErrorOut, Fail, Out, Outcome};
use crate::handles::{self, handle, key};
use crate::types::{
    sci_cb_data_interrupt_t, sci_cb_interrupt_t, sci_desc_t, sci_error_t, sci_local_data_interrupt_t,
    sci_local_interrupt_t, sci_remote_data_interrupt_t, sci_remote_interrupt_t,
};
use crate::wait_time;
use remora_sisci::{
    DataInterrupt, Descriptor, Interrupt, RemoteDataInterrupt, RemoteInterrupt, MAX_DATA_INTERRUPT,
};
use std::ffi::{c_uint, c_void};

// The header's limit is the library's.
const _: () = assert!(SCI_MAX_DATA_INTERRUPT_LENGTH as usize == MAX_DATA_INTERRUPT);

/// The interrupt number a create call asks for: `*interrupt_no` with
/// `SCI_FLAG_FIXED_INTNO`, else none (the node chooses); and where to store the result.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` when `interrupt_no` is NULL or misaligned.
///
/// # Safety
/// `interrupt_no` is NULL or readable and writable for one `c_uint` for the rest of the
/// call.
unsafe fn requested_number(interrupt_no: *mut c_uint, flags: u32) -> Outcome<(Option<u32>, Out<c_uint>)> {
    // SAFETY: NULL or writable (this function's contract); `Out::new` checks both.
    let out = unsafe { Out::new(interrupt_no) }?;
    let wanted = if flags & SCI_FLAG_FIXED_INTNO != 0 {
        // SAFETY: non-NULL and aligned (checked by `Out::new`), readable by this
        // function's contract.
        Some(unsafe { interrupt_no.read() })
    } else {
        None
    };
    Ok((wanted, out))
}

/// `SCICreateInterrupt`: create an interrupt that other nodes (and this one) can trigger
/// and store its handle in `*interrupt`. With `SCI_FLAG_FIXED_INTNO` the number is
/// `*interrupt_no`; otherwise the node chooses one and stores it in `*interrupt_no`.
/// `SCI_FLAG_COUNTING_INT` counts triggers (see the module documentation).
/// `SCI_FLAG_SHARED_INT` lets other processes create the same number with the same flag;
/// every trigger then reaches all of them. With
/// `SCI_FLAG_USE_CALLBACK` and a non-NULL `callback`, each trigger runs
/// `callback(callback_arg, interrupt, SCI_ERR_OK)` on the library's event thread (until it
/// returns `SCI_CALLBACK_CANCEL`), and `SCIWaitForInterrupt` is illegal.
///
/// # Errors
/// `SCI_ERR_INTNO_USED`; `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_PARAMETER` for a
/// bad descriptor or a NULL `interrupt` or `interrupt_no`; `SCI_ERR_ILLEGAL_FLAG`.
/// `SCI_FLAG_SHARE_EXTERNAL` (the interrupt may be reached by other processes and
/// adapters) is accepted: every Remora interrupt is, by its node and number.
///
/// # Safety
/// `interrupt` and `error` are NULL or writable; `interrupt_no` is NULL or readable and
/// writable. A callback is a valid `sci_cb_interrupt_t`, usable with `callback_arg` until
/// the interrupt is removed.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCICreateInterrupt(
    sd: sci_desc_t,
    interrupt: *mut sci_local_interrupt_t,
    local_adapter_no: c_uint,
    interrupt_no: *mut c_uint,
    callback: sci_cb_interrupt_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        let accepted = SCI_FLAG_FIXED_INTNO
            | SCI_FLAG_USE_CALLBACK
            | SCI_FLAG_COUNTING_INT
            | SCI_FLAG_SHARED_INT
            | SCI_FLAG_SHARE_EXTERNAL;
        check_flags(flags, accepted, 0)?;
        // SAFETY: `interrupt` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(interrupt) }?;
        // SAFETY: `interrupt_no` is NULL or readable and writable (this function's contract).
        let (wanted, number_out) = unsafe { requested_number(interrupt_no, flags) }?;
        let desc: Descriptor = handles::get(key(sd))?;
        let slot = handles::reserve::<Interrupt>()?;
        let cb = callbacks::interrupt(callback, callback_arg, flags, slot.key(), slot.gate());
        let counting = flags & SCI_FLAG_COUNTING_INT != 0;
        let shared = flags & SCI_FLAG_SHARED_INT != 0;
        let intr = Interrupt::create_with(&desc, local_adapter_no, wanted, counting, shared, cb)?;
        number_out.set(intr.number());
        out.set(handle(slot.fill(intr)));
        Ok(())
    })
}

/// `SCIRemoveInterrupt`: remove the interrupt; its handle becomes invalid. Threads blocked
/// in `SCIWaitForInterrupt` return `SCI_ERR_CANCELLED`; later triggers fail with
/// `SCI_ERR_NO_SUCH_INTNO`.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIRemoveInterrupt(
    interrupt: sci_local_interrupt_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        handles::get::<Interrupt>(key(interrupt))?.remove()?;
        handles::remove(key(interrupt));
        Ok(())
    })
}

/// `SCIWaitForInterrupt`: wait up to `timeout` ms (`SCI_INFINITE_TIMEOUT`: no limit) for a
/// trigger (one that came earlier counts).
///
/// # Errors
/// `SCI_ERR_TIMEOUT`; `SCI_ERR_CANCELLED` when the interrupt is removed meanwhile;
/// `SCI_ERR_ILLEGAL_OPERATION` when it was created with a callback;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIWaitForInterrupt(
    interrupt: sci_local_interrupt_t,
    timeout: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    crate::errors::run_waiting(status, wait_time(timeout), |slice| {
        check_flags(flags, 0, 0)?;
        handles::get::<Interrupt>(key(interrupt))?.wait(slice)?;
        Ok(())
    })
}

/// `SCIConnectInterrupt`: connect to interrupt `interrupt_no` of node `node_id` (this node
/// included), waiting up to `timeout` ms (`SCI_INFINITE_TIMEOUT`: no limit) for it to be
/// created, and store the handle in `*interrupt`. `SCI_FLAG_COUNTING_INT` is accepted
/// (counting is the owner's choice).
///
/// # Errors
/// `SCI_ERR_NO_SUCH_NODEID` for an unknown node; `SCI_ERR_NO_SUCH_INTNO` when no such
/// interrupt appeared in time; `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_PARAMETER`
/// for a bad descriptor or a NULL `interrupt`; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `interrupt` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIConnectInterrupt(
    sd: sci_desc_t,
    interrupt: *mut sci_remote_interrupt_t,
    node_id: c_uint,
    local_adapter_no: c_uint,
    interrupt_no: c_uint,
    timeout: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    // Waited in slices, a cancellation point between two (each a connect that waits at
    // most 100 ms for the interrupt to be created).
    run_waiting_on(status, wait_time(timeout), &[SCI_ERR_NO_SUCH_INTNO], |wait| {
        check_flags(flags, SCI_FLAG_COUNTING_INT, 0)?;
        // SAFETY: `interrupt` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(interrupt) }?;
        let desc: Descriptor = handles::get(key(sd))?;
        let r = RemoteInterrupt::connect(&desc, node_id, local_adapter_no, interrupt_no, wait)?;
        out.set(handle(handles::insert(r)?));
        Ok(())
    })
}

/// `SCIDisconnectInterrupt`: drop the connection; its handle becomes invalid.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIDisconnectInterrupt(
    interrupt: sci_remote_interrupt_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        handles::get::<RemoteInterrupt>(key(interrupt))?.disconnect()?;
        handles::remove(key(interrupt));
        Ok(())
    })
}

/// `SCITriggerInterrupt`: wake the interrupt's owner (a waiter, or its callback).
///
/// # Errors
/// `SCI_ERR_NO_SUCH_INTNO` when the owner removed the interrupt (the call never blocks);
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCITriggerInterrupt(
    interrupt: sci_remote_interrupt_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        handles::get::<RemoteInterrupt>(key(interrupt))?.trigger()?;
        Ok(())
    })
}

/// `SCICreateDataInterrupt`: create a data interrupt and store its handle in
/// `*interrupt`; the number works as for `SCICreateInterrupt` (`SCI_FLAG_FIXED_INTNO`).
/// With `SCI_FLAG_USE_CALLBACK` and a non-NULL `callback`, each payload runs
/// `callback(callback_arg, interrupt, data, length, SCI_ERR_OK)` on the library's event
/// thread (`data` is the library's copy, valid during the call), and
/// `SCIWaitForDataInterrupt` is illegal. Up to 64 payloads wait unconsumed.
/// `SCI_FLAG_SHARED_INT` lets other processes of the node create the same number with the
/// same flag; every payload sent to the number then reaches each of them (a member with 64
/// payloads unconsumed misses it).
///
/// # Errors
/// `SCI_ERR_INTNO_USED` (also for a number taken without `SCI_FLAG_SHARED_INT` when the
/// flag is given, and the reverse); `SCI_ERR_NO_SUCH_ADAPTERNO`;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad descriptor or a NULL `interrupt` or
/// `interrupt_no`; `SCI_ERR_FLAG_NOT_IMPLEMENTED` for `SCI_FLAG_BROADCAST`;
/// `SCI_ERR_ILLEGAL_FLAG`. `SCI_FLAG_SHARE_EXTERNAL` is accepted (as `SCICreateInterrupt`
/// does).
///
/// # Safety
/// `interrupt` and `error` are NULL or writable; `interrupt_no` is NULL or readable and
/// writable. A callback is a valid `sci_cb_data_interrupt_t`, usable with `callback_arg`
/// until the interrupt is removed.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCICreateDataInterrupt(
    sd: sci_desc_t,
    interrupt: *mut sci_local_data_interrupt_t,
    local_adapter_no: c_uint,
    interrupt_no: *mut c_uint,
    callback: sci_cb_data_interrupt_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        let accepted =
            SCI_FLAG_FIXED_INTNO | SCI_FLAG_USE_CALLBACK | SCI_FLAG_SHARED_INT | SCI_FLAG_SHARE_EXTERNAL;
        check_flags(flags, accepted, SCI_FLAG_BROADCAST)?;
        // SAFETY: `interrupt` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(interrupt) }?;
        // SAFETY: `interrupt_no` is NULL or readable and writable (this function's contract).
        let (wanted, number_out) = unsafe { requested_number(interrupt_no, flags) }?;
        let desc: Descriptor = handles::get(key(sd))?;
        let slot = handles::reserve::<DataInterrupt>()?;
        let cb = callbacks::data_interrupt(callback, callback_arg, flags, slot.key(), slot.gate());
        let shared = flags & SCI_FLAG_SHARED_INT != 0;
        let intr = DataInterrupt::create_with(&desc, local_adapter_no, wanted, shared, cb)?;
        number_out.set(intr.number());
        out.set(handle(slot.fill(intr)));
        Ok(())
    })
}

/// `SCIRemoveDataInterrupt`: remove the data interrupt; its handle becomes invalid.
/// Blocked waiters return `SCI_ERR_CANCELLED`; later triggers fail.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIRemoveDataInterrupt(
    interrupt: sci_local_data_interrupt_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        handles::get::<DataInterrupt>(key(interrupt))?.remove()?;
        handles::remove(key(interrupt));
        Ok(())
    })
}

/// `SCIWaitForDataInterrupt`: wait up to `timeout` ms (`SCI_INFINITE_TIMEOUT`: no limit)
/// for the next payload and copy it to `data`. `*length` is in/out: the buffer's size on
/// entry, the payload's length on return. When the payload is longer than the buffer the
/// call fails with `SCI_ERR_OUT_OF_RANGE`, leaves `*length` unchanged and keeps the
/// payload queued (a buffer of `SCI_MAX_DATA_INTERRUPT_LENGTH` bytes always suffices).
///
/// # Errors
/// `SCI_ERR_TIMEOUT`; `SCI_ERR_CANCELLED` when removed meanwhile; `SCI_ERR_OUT_OF_RANGE`
/// (above); `SCI_ERR_ILLEGAL_OPERATION` when it was created with a callback;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle, a NULL `length`, or a NULL `data` with a
/// non-zero `*length`; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable; `length` is NULL or readable and writable; `data` is NULL
/// or writable for `*length` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIWaitForDataInterrupt(
    interrupt: sci_local_data_interrupt_t,
    data: *mut c_void,
    length: *mut c_uint,
    timeout: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    crate::errors::run_waiting(status, wait_time(timeout), |slice| {
        check_flags(flags, 0, 0)?;
        // SAFETY: `length` is NULL or readable and writable (this function's contract).
        let length_out = unsafe { Out::new(length) }?;
        // SAFETY: non-NULL and aligned (checked by `Out::new`), readable by this
        // function's contract.
        let room = unsafe { length.read() } as usize;
        if data.is_null() && room > 0 {
            return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
        }
        let intr: DataInterrupt = handles::get(key(interrupt))?;
        // No payload is longer than this: the rest of a bigger buffer is never touched.
        let room = room.min(MAX_DATA_INTERRUPT);
        let buf: &mut [u8] = if room == 0 {
            &mut []
        } else {
            // SAFETY: `data` is non-NULL and, by this function's contract, writable for
            // `*length` bytes, of which this is a prefix; the slice lives only during
            // this call.
            unsafe { std::slice::from_raw_parts_mut(data.cast::<u8>(), room) }
        };
        let n = intr.wait(buf, slice)?;
        length_out.set(n as c_uint);
        Ok(())
    })
}

/// `SCIConnectDataInterrupt`: connect to data interrupt `interrupt_no` of node `node_id`,
/// waiting up to `timeout` ms (`SCI_INFINITE_TIMEOUT`: no limit) for it to be created, and
/// store the handle in `*interrupt`.
///
/// # Errors
/// `SCI_ERR_NO_SUCH_NODEID`; `SCI_ERR_NO_SUCH_INTNO` when no such data interrupt appeared
/// in time; `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_PARAMETER` for a bad descriptor
/// or a NULL `interrupt`; `SCI_ERR_FLAG_NOT_IMPLEMENTED` for `SCI_FLAG_BROADCAST`;
/// `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `interrupt` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIConnectDataInterrupt(
    sd: sci_desc_t,
    interrupt: *mut sci_remote_data_interrupt_t,
    node_id: c_uint,
    local_adapter_no: c_uint,
    interrupt_no: c_uint,
    timeout: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    // Waited in slices, as `SCIConnectInterrupt`.
    run_waiting_on(status, wait_time(timeout), &[SCI_ERR_NO_SUCH_INTNO], |wait| {
        check_flags(flags, 0, SCI_FLAG_BROADCAST)?;
        // SAFETY: `interrupt` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(interrupt) }?;
        let desc: Descriptor = handles::get(key(sd))?;
        let r = RemoteDataInterrupt::connect(&desc, node_id, local_adapter_no, interrupt_no, wait)?;
        out.set(handle(handles::insert(r)?));
        Ok(())
    })
}

/// `SCIDisconnectDataInterrupt`: drop the connection; its handle becomes invalid.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIDisconnectDataInterrupt(
    interrupt: sci_remote_data_interrupt_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        handles::get::<RemoteDataInterrupt>(key(interrupt))?.disconnect()?;
        handles::remove(key(interrupt));
        Ok(())
    })
}

/// `SCITriggerDataInterrupt`: deliver the `length` bytes at `data` (0 to
/// `SCI_MAX_DATA_INTERRUPT_LENGTH`) to the interrupt's owner.
///
/// # Errors
/// `SCI_ERR_OUT_OF_RANGE` for more than `SCI_MAX_DATA_INTERRUPT_LENGTH` bytes (nothing is
/// read); `SCI_ERR_NOSPC` when 64 payloads wait unconsumed; `SCI_ERR_NO_SUCH_INTNO` when
/// the owner removed it (the call never blocks); `SCI_ERR_ILLEGAL_PARAMETER` for a bad
/// handle or a NULL `data` with a non-zero `length`; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable; `data` is NULL or readable for `length` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCITriggerDataInterrupt(
    interrupt: sci_remote_data_interrupt_t,
    data: *mut c_void,
    length: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        let r: RemoteDataInterrupt = handles::get(key(interrupt))?;
        let len = length as usize;
        if len > MAX_DATA_INTERRUPT {
            return Err(Fail(SCI_ERR_OUT_OF_RANGE));
        }
        if data.is_null() && len > 0 {
            return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
        }
        let payload: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: `data` is non-NULL and readable for `length` bytes (this function's
            // contract), at most SCI_MAX_DATA_INTERRUPT_LENGTH; the slice lives only
            // during this call.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>().cast_const(), len) }
        };
        r.trigger(payload)?;
        Ok(())
    })
}
