//! C callbacks: how a `sci_cb_*_t` function pointer and its `void *arg` become a closure of
//! the safe API.
//!
//! * A callback is used only when the call that registers it gets `SCI_FLAG_USE_CALLBACK`
//!   **and** a non-NULL function; a function passed without the flag is ignored (real
//!   programs pass one and rely on that), and the flag with a NULL function means "no
//!   callback" (the wait calls then work).
//! * The C function receives the very handle value the program holds: objects created with
//!   a callback get their handle reserved first (see `handles::reserve`), and the closure
//!   waits on the reservation's gate, so even a callback that fires at once can use it.
//! * Callbacks run on the library's event thread (the asynchronous connect reports from
//!   its own thread). No lock of the handle table is held meanwhile, so they may call any
//!   function of the API, including the one that removes their own object.
//! * The return value: `SCI_CALLBACK_CANCEL` stops further calls; any other value
//!   (normally `SCI_CALLBACK_CONTINUE`) keeps the callback.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::consts::*;
use crate::errors::code;
use crate::handles::{handle, Gate};
use crate::types::{
    sci_callback_action_t, sci_cb_block_transfer_t, sci_cb_data_interrupt_t, sci_cb_dma_t,
    sci_cb_interrupt_t, sci_cb_local_segment_t, sci_cb_remote_segment_t, sci_segment_cb_reason_t,
};
use remora_sisci::{
    BlockCallback, CallbackAction, DataInterrupt, DmaQueue, Interrupt, LocalCallback, RemoteCallback,
    SegmentReason, MAX_DATA_INTERRUPT,
};
use std::ffi::{c_uint, c_void};
use std::sync::Arc;

/// A DMA completion closure of the safe API.
pub(crate) type DmaClosure = Box<dyn FnMut(&DmaQueue, remora_sisci::Result<()>) -> CallbackAction + Send>;
/// An interrupt closure of the safe API.
pub(crate) type InterruptClosure = Box<dyn FnMut(&Interrupt) -> CallbackAction + Send>;
/// A data-interrupt closure of the safe API.
pub(crate) type DataClosure = Box<dyn FnMut(&DataInterrupt, &[u8]) -> CallbackAction + Send>;

/// The `void *arg` a program registered with its callback, carried to the thread that
/// calls the callback.
#[derive(Debug, Clone, Copy)]
struct CallbackArg(*mut c_void);

// SAFETY: the library never dereferences the pointer: it only hands it back, unchanged, to
// the program's own callback. SISCI callbacks run asynchronously by design, so the program
// that registered `arg` is responsible for what it points to being usable from the thread
// that delivers events; moving the bare pointer value between threads is sound.
unsafe impl Send for CallbackArg {}

impl CallbackArg {
    /// The pointer (a method, so closures capture the whole `Send` wrapper, not the field).
    fn get(self) -> *mut c_void {
        self.0
    }
}

/// Whether a registering call asked for its callback: the flag and a function.
fn wanted<F>(callback: Option<F>, flags: u32) -> Option<F> {
    callback.filter(|_| flags & SCI_FLAG_USE_CALLBACK != 0)
}

/// The safe API's reading of a callback's return value.
pub(crate) fn action(value: sci_callback_action_t) -> CallbackAction {
    if value == SCI_CALLBACK_CANCEL {
        CallbackAction::Cancel
    } else {
        CallbackAction::Continue
    }
}

/// The `SCI_CB_*` value of a segment event.
pub(crate) fn reason_code(reason: SegmentReason) -> sci_segment_cb_reason_t {
    match reason {
        SegmentReason::Connect => SCI_CB_CONNECT,
        SegmentReason::Disconnect => SCI_CB_DISCONNECT,
        SegmentReason::NotOperational => SCI_CB_NOT_OPERATIONAL,
        SegmentReason::Operational => SCI_CB_OPERATIONAL,
        SegmentReason::Lost => SCI_CB_LOST,
    }
}

/// The status a callback or wait reports for an outcome of the safe API.
pub(crate) fn status_code(outcome: Result<(), &remora_sisci::Error>) -> u32 {
    match outcome {
        Ok(()) => SCI_ERR_OK,
        Err(e) => code(e),
    }
}

/// The closure for a local segment's `sci_cb_local_segment_t`, or `None` when the program
/// asked for no callback. `key` is the segment's (reserved) handle.
pub(crate) fn local_segment(
    callback: sci_cb_local_segment_t,
    arg: *mut c_void,
    flags: u32,
    key: usize,
    gate: Arc<Gate>,
) -> Option<LocalCallback> {
    let f = wanted(callback, flags)?;
    let arg = CallbackArg(arg);
    Some(Box::new(move |_segment, event| {
        if !gate.wait() {
            return CallbackAction::Cancel;
        }
        // SAFETY: `f` is the program's callback of type sci_cb_local_segment_t, registered
        // with SCI_FLAG_USE_CALLBACK; by the SISCI contract it and `arg` stay valid while the
        // segment exists. Every argument is a plain value of the C signature.
        let r = unsafe {
            f(arg.get(), handle(key), reason_code(event.reason), event.node, event.adapter, SCI_ERR_OK)
        };
        action(r)
    }))
}

/// The closure for a remote segment's `sci_cb_remote_segment_t`, or `None`.
pub(crate) fn remote_segment(
    callback: sci_cb_remote_segment_t,
    arg: *mut c_void,
    flags: u32,
    key: usize,
    gate: Arc<Gate>,
) -> Option<RemoteCallback> {
    let f = wanted(callback, flags)?;
    let arg = CallbackArg(arg);
    Some(Box::new(move |_segment, event| {
        if !gate.wait() {
            return CallbackAction::Cancel;
        }
        let status = status_code(event.status.as_ref().map_or(Ok(()), Err));
        // SAFETY: `f` is the program's sci_cb_remote_segment_t callback, registered with
        // SCI_FLAG_USE_CALLBACK; it and `arg` stay valid while the connection exists (the
        // SISCI contract). The arguments are plain values.
        let r = unsafe { f(arg.get(), handle(key), reason_code(event.reason), status) };
        action(r)
    }))
}

/// The closure for a DMA queue's `sci_cb_dma_t`, or `None`. `key` is the queue's handle
/// (it exists already: callbacks are given per transfer).
pub(crate) fn dma(callback: sci_cb_dma_t, arg: *mut c_void, flags: u32, key: usize) -> Option<DmaClosure> {
    let f = wanted(callback, flags)?;
    let arg = CallbackArg(arg);
    Some(Box::new(move |_queue, outcome| {
        let status = status_code(outcome.as_ref().map(|_| ()));
        // SAFETY: `f` is the program's sci_cb_dma_t callback, registered with
        // SCI_FLAG_USE_CALLBACK for this transfer; it and `arg` stay valid until the transfer
        // has ended (the SISCI contract). The arguments are plain values.
        let r = unsafe { f(arg.get(), handle(key), status) };
        action(r)
    }))
}

/// The closure for an asynchronous block transfer's `sci_cb_block_transfer_t`, or `None`.
/// `key` is the transfer's (reserved) handle; the closure runs on the transfer's thread.
pub(crate) fn block(
    callback: sci_cb_block_transfer_t,
    arg: *mut c_void,
    flags: u32,
    key: usize,
    gate: Arc<Gate>,
) -> Option<BlockCallback> {
    let f = wanted(callback, flags)?;
    let arg = CallbackArg(arg);
    Some(Box::new(move |outcome| {
        if !gate.wait() {
            return;
        }
        let status = status_code(outcome.as_ref().map(|_| ()));
        // SAFETY: `f` is the program's sci_cb_block_transfer_t callback, registered with
        // SCI_FLAG_USE_CALLBACK for this transfer; it and `arg` stay valid until the transfer
        // has ended (the SISCI contract). The arguments are plain values; the return value
        // carries no meaning for a transfer that has ended.
        let _ = unsafe { f(arg.get(), handle(key), status) };
    }))
}

/// The closure for an interrupt's `sci_cb_interrupt_t`, or `None`.
pub(crate) fn interrupt(
    callback: sci_cb_interrupt_t,
    arg: *mut c_void,
    flags: u32,
    key: usize,
    gate: Arc<Gate>,
) -> Option<InterruptClosure> {
    let f = wanted(callback, flags)?;
    let arg = CallbackArg(arg);
    Some(Box::new(move |_interrupt| {
        if !gate.wait() {
            return CallbackAction::Cancel;
        }
        // SAFETY: `f` is the program's sci_cb_interrupt_t callback, registered with
        // SCI_FLAG_USE_CALLBACK; it and `arg` stay valid while the interrupt exists (the
        // SISCI contract). The arguments are plain values.
        let r = unsafe { f(arg.get(), handle(key), SCI_ERR_OK) };
        action(r)
    }))
}

/// The closure for a data interrupt's `sci_cb_data_interrupt_t`, or `None`. The program
/// gets a pointer to a private copy of the payload, valid during the call (the C signature
/// lets it write there).
pub(crate) fn data_interrupt(
    callback: sci_cb_data_interrupt_t,
    arg: *mut c_void,
    flags: u32,
    key: usize,
    gate: Arc<Gate>,
) -> Option<DataClosure> {
    let f = wanted(callback, flags)?;
    let arg = CallbackArg(arg);
    let mut copy = vec![0u8; MAX_DATA_INTERRUPT];
    Some(Box::new(move |_interrupt, payload| {
        if !gate.wait() {
            return CallbackAction::Cancel;
        }
        let n = payload.len().min(copy.len());
        copy[..n].copy_from_slice(&payload[..n]);
        // SAFETY: `f` is the program's sci_cb_data_interrupt_t callback, registered with
        // SCI_FLAG_USE_CALLBACK; it and `arg` stay valid while the interrupt exists (the
        // SISCI contract). `copy` is this closure's own buffer of MAX_DATA_INTERRUPT bytes,
        // of which the first `n` hold the payload; the callback may read or write them
        // during the call, and nothing else touches the buffer meanwhile.
        let r = unsafe { f(arg.get(), handle(key), copy.as_mut_ptr().cast(), n as c_uint, SCI_ERR_OK) };
        action(r)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_is_the_only_value_that_stops_a_callback() {
        assert_eq!(action(SCI_CALLBACK_CANCEL), CallbackAction::Cancel);
        assert_eq!(action(SCI_CALLBACK_CONTINUE), CallbackAction::Continue);
        assert_eq!(action(0), CallbackAction::Continue);
    }

    #[test]
    fn reasons_have_the_header_values() {
        assert_eq!(reason_code(SegmentReason::Connect), 1);
        assert_eq!(reason_code(SegmentReason::Disconnect), 2);
        assert_eq!(reason_code(SegmentReason::NotOperational), 3);
        assert_eq!(reason_code(SegmentReason::Operational), 4);
        assert_eq!(reason_code(SegmentReason::Lost), 5);
    }

    unsafe extern "C" fn never(_: *mut c_void, _: crate::types::sci_dma_queue_t, _: u32) -> u32 {
        SCI_CALLBACK_CONTINUE
    }

    #[test]
    fn a_callback_needs_the_flag_and_a_function() {
        assert!(dma(Some(never), std::ptr::null_mut(), 0, 6).is_none());
        assert!(dma(None, std::ptr::null_mut(), SCI_FLAG_USE_CALLBACK, 6).is_none());
        assert!(dma(Some(never), std::ptr::null_mut(), SCI_FLAG_USE_CALLBACK, 6).is_some());
    }
}
