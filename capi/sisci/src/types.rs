//! The C types of the exported functions: opaque handles, enum-valued integers and
//! callback signatures, spelled as in `include/sisci_types.h`.
//!
//! Handles are pointers to opaque structures that C code only passes around. Remora never
//! dereferences them: the pointer's value is a key of the crate's handle table (see the
//! `handles` module), so a forged or stale handle is looked up, never followed.

#![allow(unsafe_code)]
// this file is part of the unsafe layer: every block has a SAFETY comment
// C type names are kept verbatim so the Rust and C sides read alike.
#![allow(non_camel_case_types)]

use std::ffi::{c_uint, c_void};

/// `sci_error_t`: a C enum of `unsigned int` size holding an `SCI_ERR_*` value.
pub type sci_error_t = c_uint;
/// `sci_segment_cb_reason_t`: an `SCI_CB_*` value.
pub type sci_segment_cb_reason_t = c_uint;
/// `sci_sequence_status_t`: an `SCI_SEQ_*` value.
pub type sci_sequence_status_t = c_uint;
/// `sci_callback_action_t`: an `SCI_CALLBACK_*` value.
pub type sci_callback_action_t = c_uint;
/// `sci_dma_queue_state_t`: an `SCI_DMAQUEUE_*` value.
pub type sci_dma_queue_state_t = c_uint;
/// `dis_nodeId_list_t`: node ids sharing one adapter name, ended by a 0 entry.
pub type dis_nodeId_list_t = [c_uint; 5];
/// `dis_virt_adapter_t`: the kind of (virtual) adapter behind a name.
pub type dis_virt_adapter_t = c_uint;
/// `dis_adapter_type_t`: the kinds of the adapters of a name, one per entry.
pub type dis_adapter_type_t = [c_uint; 4];
/// `sci_dma_type_t`: an `SCI_DMA_TYPE_*` value.
pub type sci_dma_type_t = c_uint;

/// Declares an opaque C structure and the handle type that points to it.
macro_rules! opaque_handle {
    ($(#[$doc:meta] $strukt:ident => $handle:ident;)*) => {$(
        #[$doc]
        ///
        /// Opaque: it has no fields and is never dereferenced.
        #[repr(C)]
        #[derive(Debug)]
        pub struct $strukt {
            _opaque: [u8; 0],
        }
        #[doc = concat!("A handle: a pointer to [`", stringify!($strukt), "`], used as a table key.")]
        pub type $handle = *mut $strukt;
    )*};
}

opaque_handle! {
    /// `struct sci_desc`: a virtual device (`SCIOpen`).
    sci_desc => sci_desc_t;
    /// `struct sci_local_segment`: a segment of this node (`SCICreateSegment`).
    sci_local_segment => sci_local_segment_t;
    /// `struct sci_remote_segment`: a connection to a segment (`SCIConnectSegment`).
    sci_remote_segment => sci_remote_segment_t;
    /// `struct sci_map`: a mapping of a segment (`SCIMapRemoteSegment`, `SCIMapLocalSegment`).
    sci_map => sci_map_t;
    /// `struct sci_sequence`: an error-checking sequence (`SCICreateMapSequence`).
    sci_sequence => sci_sequence_t;
    /// `struct sci_smartio_device`: a borrowed SmartIO device (hardware only; never issued).
    sci_smartio_device => sci_smartio_device_t;
    /// `struct sci_dma_queue`: a DMA queue (`SCICreateDMAQueue`).
    sci_dma_queue => sci_dma_queue_t;
    /// `struct sci_local_interrupt`: an interrupt of this process (`SCICreateInterrupt`).
    sci_local_interrupt => sci_local_interrupt_t;
    /// `struct sci_remote_interrupt`: a connection to an interrupt (`SCIConnectInterrupt`).
    sci_remote_interrupt => sci_remote_interrupt_t;
    /// `struct sci_local_data_interrupt`: a data interrupt of this process.
    sci_local_data_interrupt => sci_local_data_interrupt_t;
    /// `struct sci_remote_data_interrupt`: a connection to a data interrupt.
    sci_remote_data_interrupt => sci_remote_data_interrupt_t;
    /// `struct sci_block_transfer`: an asynchronous block transfer (`SCITransferBlockAsync`).
    sci_block_transfer => sci_block_transfer_t;
    /// `struct sci_dma_channel`: a reserved DMA channel (`SCIRequestDMAChannel`).
    sci_dma_channel => sci_dma_channel_t;
}

/// `sci_cb_local_segment_t`: an event on a local segment (connect, disconnect).
pub type sci_cb_local_segment_t = Option<
    unsafe extern "C" fn(
        arg: *mut c_void,
        segment: sci_local_segment_t,
        reason: sci_segment_cb_reason_t,
        nodeId: c_uint,
        localAdapterNo: c_uint,
        error: sci_error_t,
    ) -> sci_callback_action_t,
>;

/// `sci_cb_remote_segment_t`: an event on a remote segment (asynchronous connect done or
/// failed, disconnect notice, lost connection).
pub type sci_cb_remote_segment_t = Option<
    unsafe extern "C" fn(
        arg: *mut c_void,
        segment: sci_remote_segment_t,
        reason: sci_segment_cb_reason_t,
        status: sci_error_t,
    ) -> sci_callback_action_t,
>;

/// `sci_cb_dma_t`: a DMA queue finished (`status` is `SCI_ERR_OK` or why it failed).
pub type sci_cb_dma_t = Option<
    unsafe extern "C" fn(
        arg: *mut c_void,
        queue: sci_dma_queue_t,
        status: sci_error_t,
    ) -> sci_callback_action_t,
>;

/// `sci_cb_interrupt_t`: an interrupt arrived.
pub type sci_cb_interrupt_t = Option<
    unsafe extern "C" fn(
        arg: *mut c_void,
        interrupt: sci_local_interrupt_t,
        status: sci_error_t,
    ) -> sci_callback_action_t,
>;

/// `sci_cb_data_interrupt_t`: a data interrupt arrived with `length` bytes at `data`.
pub type sci_cb_data_interrupt_t = Option<
    unsafe extern "C" fn(
        arg: *mut c_void,
        interrupt: sci_local_data_interrupt_t,
        data: *mut c_void,
        length: c_uint,
        status: sci_error_t,
    ) -> sci_callback_action_t,
>;

/// `sci_cb_block_transfer_t`: an asynchronous block transfer ended (`status` is
/// `SCI_ERR_OK` or why it failed). The return value is ignored.
pub type sci_cb_block_transfer_t = Option<
    unsafe extern "C" fn(
        arg: *mut c_void,
        block: sci_block_transfer_t,
        status: sci_error_t,
    ) -> std::ffi::c_int,
>;
