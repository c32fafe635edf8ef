//! Named interrupts (`SCICreateNamedInterrupt`, Remora's choice of signature: Dolphin
//! publishes only the name) and flag interrupts: `SCIRegisterInterruptFlag`, with
//! `SCIEnableConditionalInterrupt`, `SCIDisableConditionalInterrupt` and
//! `SCIGetConditionalInterruptTrigCounter` for conditional ones.
//!
//! A flag interrupt is an ordinary `sci_local_interrupt_t` (wait for it, give it a
//! callback, remove it with the interrupt calls) whose triggers are stores to a 32-bit
//! word of a local segment, made by peers through their ordinary maps. No hardware traps
//! the store: a watcher thread of the library sees the word change (it spins briefly after
//! each trigger, then sleeps on the word with timeouts of at most 1 ms; while a
//! conditional interrupt is disabled it sleeps without looking).

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::callbacks;
use crate::consts::*;
use crate::errors::{check_flags, run, ErrorOut, Fail, Out};
use crate::handles::{self, handle, key};
use crate::types::{sci_cb_interrupt_t, sci_desc_t, sci_error_t, sci_local_interrupt_t, sci_local_segment_t};
use remora_sisci::{Descriptor, Interrupt, LocalSegment};
use std::ffi::{c_char, c_uint, c_void, CStr};

/// `SCICreateNamedInterrupt` (Remora's prototype): create an interrupt whose number
/// follows from `name`, so that a process of any node that knows the name connects to it
/// with `SCIConnectInterrupt` and that number, and store its handle in `*interrupt` and
/// the number in `*interrupt_no` (which may be NULL). The number is
/// `0x20000000 | (FNV-1a-32 of the name's bytes & 0x1fffffff)` (`RemoraNamedInterruptNo`
/// in `sisci_api.h` computes it). `SCI_FLAG_SHARED_INT` lets several processes of the
/// node create the same name; `SCI_FLAG_COUNTING_INT` and `SCI_FLAG_USE_CALLBACK` work as
/// for `SCICreateInterrupt`.
///
/// # Errors
/// `SCI_ERR_INTNO_USED` when the name's number is taken (the same name created without
/// `SCI_FLAG_SHARED_INT`, or another name or fixed number that maps to it);
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad descriptor, a NULL `interrupt`, or a NULL or
/// empty `name`; `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_FLAG` for a flag other than
/// `SCI_FLAG_USE_CALLBACK`, `SCI_FLAG_COUNTING_INT`, `SCI_FLAG_SHARED_INT` and
/// `SCI_FLAG_SHARE_EXTERNAL` (accepted as `SCICreateInterrupt` does), also for
/// `SCI_FLAG_FIXED_INTNO` (the name fixes the number).
///
/// # Safety
/// `interrupt`, `interrupt_no` and `error` are NULL or writable; `name` is NULL or a
/// NUL-terminated string. A callback is a valid `sci_cb_interrupt_t`, usable with
/// `callback_arg` until the interrupt is removed.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCICreateNamedInterrupt(
    sd: sci_desc_t,
    interrupt: *mut sci_local_interrupt_t,
    local_adapter_no: c_uint,
    name: *const c_char,
    interrupt_no: *mut c_uint,
    callback: sci_cb_interrupt_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(
            flags,
            SCI_FLAG_USE_CALLBACK | SCI_FLAG_COUNTING_INT | SCI_FLAG_SHARED_INT | SCI_FLAG_SHARE_EXTERNAL,
            0,
        )?;
        // SAFETY: `interrupt` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(interrupt) }?;
        let number_out = if interrupt_no.is_null() {
            None
        } else {
            // SAFETY: `interrupt_no` is NULL or writable (this function's contract).
            Some(unsafe { Out::new(interrupt_no) }?)
        };
        if name.is_null() {
            return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
        }
        // SAFETY: non-NULL and NUL-terminated (this function's contract); the bytes are
        // copied before the call returns.
        let name = unsafe { CStr::from_ptr(name) }.to_bytes().to_vec();
        let desc: Descriptor = handles::get(key(sd))?;
        let slot = handles::reserve::<Interrupt>()?;
        let cb = callbacks::interrupt(callback, callback_arg, flags, slot.key(), slot.gate());
        let counting = flags & SCI_FLAG_COUNTING_INT != 0;
        let shared = flags & SCI_FLAG_SHARED_INT != 0;
        let intr = Interrupt::create_named(&desc, local_adapter_no, &name, counting, shared, cb)?;
        if let Some(o) = number_out {
            o.set(intr.number());
        }
        out.set(handle(slot.fill(intr)));
        Ok(())
    })
}

/// `SCIRegisterInterruptFlag`: create an interrupt (of `segment`'s descriptor, numbered by
/// the node) triggered by stores to the 32-bit word at `offset` of the local `segment`,
/// and store its handle in `*interrupt`. With `SCI_FLAG_CONDITIONAL_INTERRUPT` it starts
/// disabled: stores trigger only between `SCIEnableConditionalInterrupt` and
/// `SCIDisableConditionalInterrupt`; without it, every store triggers. A store is seen when
/// it changes the word's value; stores between two looks of the watcher count as one.
/// Stores from another host trigger once the DSM brings them to this host (within its
/// flush bound, `REMORA_DSM_FLUSH_US`; at once after the writer's `SCIFlush`). Wait with `SCIWaitForInterrupt` (or give `SCI_FLAG_USE_CALLBACK` and a
/// callback), remove with `SCIRemoveInterrupt`; the segment cannot be removed
/// (`SCI_ERR_BUSY`) before. `SCI_FLAG_COUNTING_INT` counts triggers as for
/// `SCICreateInterrupt`.
///
/// # Errors
/// `SCI_ERR_OFFSET_ALIGNMENT` when `offset` is not a multiple of 4; `SCI_ERR_OUT_OF_RANGE`
/// when the word is not inside the segment; `SCI_ERR_ILLEGAL_OPERATION` for a segment
/// without memory; `SCI_ERR_ILLEGAL_PARAMETER` for a bad segment handle or a NULL
/// `interrupt`; `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `interrupt` and `error` are NULL or writable. A callback is a valid
/// `sci_cb_interrupt_t`, usable with `callback_arg` until the interrupt is removed.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIRegisterInterruptFlag(
    local_adapter_no: c_uint,
    interrupt: *mut sci_local_interrupt_t,
    segment: sci_local_segment_t,
    offset: c_uint,
    callback: sci_cb_interrupt_t,
    callback_arg: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(
            flags,
            SCI_FLAG_CONDITIONAL_INTERRUPT | SCI_FLAG_USE_CALLBACK | SCI_FLAG_COUNTING_INT,
            0,
        )?;
        // SAFETY: `interrupt` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(interrupt) }?;
        let seg: LocalSegment = handles::get(key(segment))?;
        let slot = handles::reserve::<Interrupt>()?;
        let cb = callbacks::interrupt(callback, callback_arg, flags, slot.key(), slot.gate());
        let conditional = flags & SCI_FLAG_CONDITIONAL_INTERRUPT != 0;
        let counting = flags & SCI_FLAG_COUNTING_INT != 0;
        let intr =
            Interrupt::register_flag(&seg, local_adapter_no, offset as usize, conditional, counting, cb)?;
        out.set(handle(slot.fill(intr)));
        Ok(())
    })
}

/// `SCIEnableConditionalInterrupt`: stores to the flag word trigger from now on; the
/// trigger counter restarts at 0. When the word changed while the interrupt was disabled
/// (since it was registered or last disabled), a store came that no trigger reported: the
/// interrupt stays disabled, the change counts as seen, and the call fails with
/// `SCI_ERR_COND_INT_RACE_PROBLEM`, so the program looks at the word and enables again.
///
/// # Errors
/// `SCI_ERR_COND_INT_RACE_PROBLEM` (above); `SCI_ERR_ILLEGAL_OPERATION` for an interrupt
/// not registered with `SCI_FLAG_CONDITIONAL_INTERRUPT`; `SCI_ERR_ILLEGAL_PARAMETER` for a
/// bad handle; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIEnableConditionalInterrupt(
    interrupt: sci_local_interrupt_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        handles::get::<Interrupt>(key(interrupt))?.enable_conditional()?;
        Ok(())
    })
}

/// `SCIDisableConditionalInterrupt`: stores after the call no longer trigger (one that
/// landed before it still does); the trigger counter restarts at 0.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_OPERATION` for an interrupt not registered with
/// `SCI_FLAG_CONDITIONAL_INTERRUPT`; `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIDisableConditionalInterrupt(
    interrupt: sci_local_interrupt_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        handles::get::<Interrupt>(key(interrupt))?.disable_conditional()?;
        Ok(())
    })
}

/// `SCIGetConditionalInterruptTrigCounter`: store in `*interrupt_trig_counter` the
/// triggers since the last enable or disable (for a flag interrupt without
/// `SCI_FLAG_CONDITIONAL_INTERRUPT`, since it was registered).
///
/// # Errors
/// `SCI_ERR_OVERFLOW` when the count does not fit an `unsigned int`;
/// `SCI_ERR_ILLEGAL_OPERATION` for an interrupt that is not a flag interrupt;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle or a NULL `interrupt_trig_counter`;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `interrupt_trig_counter` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIGetConditionalInterruptTrigCounter(
    interrupt: sci_local_interrupt_t,
    interrupt_trig_counter: *mut c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        // SAFETY: `interrupt_trig_counter` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(interrupt_trig_counter) }?;
        let n = handles::get::<Interrupt>(key(interrupt))?.trigger_counter()?;
        out.set(n);
        Ok(())
    })
}
