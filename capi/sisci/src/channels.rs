//! DMA channels (`SCIRequestDMAChannel`, `SCIAssignDMAChannel`, `SCIReturnDMAChannel`)
//! and the `DIS` spellings of the transfer calls (`DISStartDmaTransfer`,
//! `DISStartDmaTransferVec`).
//!
//! The node's DMA engine has `remora_sisci::DMA_CHANNELS` channels per adapter; a request
//! reserves one for every process of the node (see `remora_sisci::DmaChannel`) until it
//! is returned, its descriptor closed, or its process gone.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::consts::*;
use crate::errors::{check_flags, run, ErrorOut, Fail, Out, Outcome};
use crate::handles::{self, handle, key};
use crate::types::{
    sci_cb_dma_t, sci_desc_t, sci_dma_channel_t, sci_dma_queue_t, sci_dma_type_t, sci_error_t,
    sci_local_segment_t, sci_remote_segment_t,
};
use remora_sisci::{DmaChannel, DmaKind, DmaQueue};
use std::ffi::{c_uint, c_void};

/// The engine kind an `SCI_DMA_TYPE_*` value names.
fn kind_of(value: sci_dma_type_t) -> Outcome<DmaKind> {
    Ok(match value {
        SCI_DMA_TYPE_DONTCARE => DmaKind::DontCare,
        SCI_DMA_TYPE_ADAPTER => DmaKind::Adapter,
        SCI_DMA_TYPE_GLOBAL => DmaKind::Global,
        SCI_DMA_TYPE_SYSTEM => DmaKind::System,
        SCI_DMA_TYPE_TRANSPARENT => DmaKind::Transparent,
        _ => return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER)),
    })
}

/// The channel a handle names.
fn channel_of(channel: sci_dma_channel_t) -> Outcome<DmaChannel> {
    handles::get(key(channel))
}

/// `SCIRequestDMAChannel`: reserve channel `channel_id` (`SCI_DMA_CHANNEL_ID_DONTCARE`:
/// the lowest free one) of the node's DMA engine on `local_adapter_no` and store its handle
/// in `*channel`. `dma_type` is an `SCI_DMA_TYPE_*` value; one engine serves every kind.
/// With `SCI_FLAG_DMA_CHANNEL_SHARED` the channel is held together with other shared
/// holders.
///
/// # Errors
/// `SCI_ERR_BUSY` when the channel is held by another holder (exclusively, or at all for an
/// exclusive request); `SCI_ERR_NOSPC` when `SCI_DMA_CHANNEL_ID_DONTCARE` finds no free
/// channel; `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_PARAMETER` for a bad descriptor,
/// a NULL `channel`, an unknown type or a channel id past the last channel;
/// `SCI_ERR_ILLEGAL_FLAG`.
///
/// # Safety
/// `channel` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIRequestDMAChannel(
    sd: sci_desc_t,
    channel: *mut sci_dma_channel_t,
    local_adapter_no: c_uint,
    dma_type: sci_dma_type_t,
    channel_id: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, SCI_FLAG_DMA_CHANNEL_SHARED, 0)?;
        // SAFETY: `channel` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(channel) }?;
        let desc = handles::get(key(sd))?;
        let kind = kind_of(dma_type)?;
        let id = (channel_id != SCI_DMA_CHANNEL_ID_DONTCARE).then_some(channel_id);
        let shared = flags & SCI_FLAG_DMA_CHANNEL_SHARED != 0;
        let ch = DmaChannel::request(&desc, local_adapter_no, kind, id, shared)?;
        out.set(handle(handles::insert(ch)?));
        Ok(())
    })
}

/// `SCIAssignDMAChannel`: serve queue `dq` with the channel. Assigning it again moves it
/// to the new queue.
///
/// # Errors
/// `SCI_ERR_BUSY` while the queue it serves now has a transfer posted;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad channel or queue handle; `SCI_ERR_ILLEGAL_FLAG`
/// for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIAssignDMAChannel(
    channel: sci_dma_channel_t,
    dq: sci_dma_queue_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        let ch = channel_of(channel)?;
        let q: DmaQueue = handles::get(key(dq))?;
        Ok(ch.assign(&q)?)
    })
}

/// `SCIReturnDMAChannel`: end the reservation (another request may take the channel at
/// once) and detach it from its queue; the handle becomes invalid. As in the programs that
/// use it, there is no flags argument.
///
/// # Errors
/// `SCI_ERR_BUSY` while its queue has a transfer posted (the channel stays held);
/// `SCI_ERR_ILLEGAL_PARAMETER` for a bad handle.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIReturnDMAChannel(channel: sci_dma_channel_t, error: *mut sci_error_t) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        channel_of(channel)?.give_back()?;
        handles::remove(key(channel));
        Ok(())
    })
}

/// `DISStartDmaTransfer`: `SCIStartDmaTransfer` under its `DIS` name, with the same
/// arguments, flags and callback.
///
/// # Errors
/// As `SCIStartDmaTransfer`.
///
/// # Safety
/// As `SCIStartDmaTransfer`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe extern "C-unwind" fn DISStartDmaTransfer(
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
    // SAFETY: the same arguments under the same contract.
    unsafe {
        crate::SCIStartDmaTransfer(
            dq,
            local_segment,
            remote_segment,
            local_offset,
            size,
            remote_offset,
            callback,
            callback_arg,
            flags,
            error,
        )
    }
}

/// `DISStartDmaTransferVec`: `SCIStartDmaTransferVec` under its `DIS` name, with the same
/// arguments, flags and callback.
///
/// # Errors
/// As `SCIStartDmaTransferVec`.
///
/// # Safety
/// As `SCIStartDmaTransferVec`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe extern "C-unwind" fn DISStartDmaTransferVec(
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
    // SAFETY: the same arguments under the same contract.
    unsafe {
        crate::SCIStartDmaTransferVec(
            dq,
            local_segment,
            remote_segment,
            vec_length,
            vec,
            callback,
            callback_arg,
            flags,
            error,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dma_types_map_to_kinds_and_unknown_ones_are_refused() {
        assert_eq!(kind_of(SCI_DMA_TYPE_SYSTEM), Ok(DmaKind::System));
        assert_eq!(kind_of(SCI_DMA_TYPE_DONTCARE), Ok(DmaKind::DontCare));
        assert_eq!(kind_of(0), Err(Fail(SCI_ERR_ILLEGAL_PARAMETER)));
        assert_eq!(kind_of(6), Err(Fail(SCI_ERR_ILLEGAL_PARAMETER)));
    }
}
