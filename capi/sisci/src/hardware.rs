//! Calls that need Dolphin hardware (CSR registers, physical memory, raw interconnect
//! addresses, physical DMA, PCIe requesters, SmartIO device lending). They are exported so
//! that programs link and run; each reports `SCI_ERR_NOT_SUPPORTED`.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::consts::{sci_address_t, sci_ioaddr_t, sci_smartio_device_info_t, SCI_ERR_NOT_SUPPORTED};
use crate::errors::{run, run_quiet, ErrorOut, Fail};
use crate::types::{
    sci_cb_dma_t, sci_cb_remote_segment_t, sci_desc_t, sci_dma_queue_state_t, sci_dma_queue_t, sci_error_t,
    sci_local_segment_t, sci_remote_segment_t, sci_smartio_device_t,
};
use std::ffi::{c_uint, c_ulonglong, c_void};

/// Defines exported functions that only report `SCI_ERR_NOT_SUPPORTED` (through a trailing
/// `error` argument the macro adds) and return `0` where they return a value.
macro_rules! not_supported {
    ($(
        $(#[doc = $doc:expr])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;
    )*) => {$(
        $(#[doc = $doc])*
        ///
        /// # Errors
        /// Always `SCI_ERR_NOT_SUPPORTED`: this needs interconnect hardware.
        ///
        /// # Safety
        /// `error` is NULL or writable; no other pointer argument is used.
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $name($($arg: $ty,)* error: *mut sci_error_t) $(-> $ret)? {
            let _ = ($($arg,)*);
            // SAFETY: `error` is NULL or writable (this function's contract).
            let status = unsafe { ErrorOut::new(error) };
            run(status, Default::default(), || Err(Fail(SCI_ERR_NOT_SUPPORTED)))
        }
    )*};
}

not_supported! {
    /// `SCIAttachPhysicalMemory`: back an empty segment with physical or device memory.
    fn SCIAttachPhysicalMemory(
        ioaddress: sci_ioaddr_t,
        address: *mut c_void,
        bus_no: c_uint,
        size: usize,
        segment: sci_local_segment_t,
        flags: c_uint,
    );

    /// `SCIConnectSCISpace`: connect to a raw interconnect address range.
    fn SCIConnectSCISpace(
        sd: sci_desc_t,
        local_adapter_no: c_uint,
        segment: *mut sci_remote_segment_t,
        address: sci_address_t,
        size: usize,
        flags: c_uint,
    );

    /// `SCIGetCSRRegister`: read a CSR register of a node; returns 0.
    fn SCIGetCSRRegister(
        sd: sci_desc_t,
        local_adapter_no: c_uint,
        sci_node_id: c_uint,
        csr_offset: c_uint,
        flags: c_uint,
    ) -> c_uint;

    /// `SCISetCSRRegister`: write a CSR register of a node.
    fn SCISetCSRRegister(
        sd: sci_desc_t,
        local_adapter_no: c_uint,
        sci_node_id: c_uint,
        csr_offset: c_uint,
        csr_value: c_uint,
        flags: c_uint,
    );

    /// `SCIGetLocalCSR`: read a CSR register of a local adapter; returns 0.
    fn SCIGetLocalCSR(sd: sci_desc_t, local_adapter_no: c_uint, csr_offset: c_uint, flags: c_uint) -> c_uint;

    /// `SCISetLocalCSR`: write a CSR register of a local adapter.
    fn SCISetLocalCSR(
        sd: sci_desc_t,
        local_adapter_no: c_uint,
        csr_offset: c_uint,
        csr_value: c_uint,
        flags: c_uint,
    );

    /// `SCIphDmaEnqueue` (API 1.x): queue a DMA transfer between physical bus addresses.
    fn SCIphDmaEnqueue(
        dq: sci_dma_queue_t,
        size: c_uint,
        local_bus_addr: sci_ioaddr_t,
        remote_node_id: c_uint,
        remote_high_addr: c_uint,
        remote_low_addr: c_uint,
        flags: c_uint,
    );

    /// `SCIphDmaStart` (API 1.x): start the physical DMA queue; returns 0
    /// (`SCI_DMAQUEUE_IDLE`).
    fn SCIphDmaStart(
        dq: sci_dma_queue_t,
        callback: sci_cb_dma_t,
        callback_arg: *mut c_void,
        flags: c_uint,
    ) -> sci_dma_queue_state_t;

    /// `SCIRegisterPCIeRequester`: let a local PCIe device reach remote memory.
    fn SCIRegisterPCIeRequester(sd: sci_desc_t, local_adapter_no: c_uint, bus: c_uint, devfn: c_uint, flags: c_uint);

    /// `SCIUnregisterPCIeRequester`: undo `SCIRegisterPCIeRequester`.
    fn SCIUnregisterPCIeRequester(
        sd: sci_desc_t,
        local_adapter_no: c_uint,
        bus: c_uint,
        devfn: c_uint,
        flags: c_uint,
    );

    /// `SCIBorrowDevice`: borrow a SmartIO device; nothing is written to `device`.
    fn SCIBorrowDevice(sd: sci_desc_t, device: *mut sci_smartio_device_t, fdid: c_ulonglong, flags: c_uint);

    /// `SCIReturnDevice`: give a borrowed device back.
    fn SCIReturnDevice(device: sci_smartio_device_t, flags: c_uint);

    /// `SCIReleaseExclusiveBorrow`: downgrade an exclusive borrow.
    fn SCIReleaseExclusiveBorrow(device: sci_smartio_device_t, flags: c_uint);

    /// `SCIGetDeviceList`: list SmartIO devices; returns 0 and writes nothing.
    fn SCIGetDeviceList(
        sd: sci_desc_t,
        fdids: *mut c_uint,
        length: usize,
        filter: *const sci_smartio_device_info_t,
        flags: c_uint,
    ) -> usize;

    /// `SCIConnectDeviceSegment`: connect to device memory.
    fn SCIConnectDeviceSegment(
        device: sci_smartio_device_t,
        segment: *mut sci_remote_segment_t,
        segment_id: c_uint,
        memory_type: c_uint,
        callback: sci_cb_remote_segment_t,
        callback_arg: *mut c_void,
        flags: c_uint,
    );

    /// `SCIConnectDeviceSegmentPath`: `SCIConnectDeviceSegment` through a given adapter.
    fn SCIConnectDeviceSegmentPath(
        device: sci_smartio_device_t,
        segment: *mut sci_remote_segment_t,
        local_adapter_no: c_uint,
        segment_id: c_uint,
        memory_type: c_uint,
        callback: sci_cb_remote_segment_t,
        callback_arg: *mut c_void,
        flags: c_uint,
    );

    /// `SCIConnectDeviceMemory`: the older call to connect to device memory.
    fn SCIConnectDeviceMemory(
        sd: sci_desc_t,
        segment: *mut sci_remote_segment_t,
        local_adapter_no: c_uint,
        device: sci_smartio_device_t,
        segment_no: c_uint,
        offset: c_uint,
        flags: c_uint,
    );

    /// `SCICreateDeviceSegment`: allocate memory for a device.
    fn SCICreateDeviceSegment(
        device: sci_smartio_device_t,
        segment_id: c_uint,
        size: usize,
        memory_type: c_uint,
        access_hints: c_uint,
        flags: c_uint,
    );

    /// `SCIMapRemoteSegmentForDevice`: make a remote segment reachable by a device.
    fn SCIMapRemoteSegmentForDevice(
        segment: sci_remote_segment_t,
        device: sci_smartio_device_t,
        ioaddr: *mut sci_ioaddr_t,
        offset: usize,
        size: usize,
        flags: c_uint,
    );

    /// `SCIUnmapRemoteSegmentForDevice`: undo `SCIMapRemoteSegmentForDevice`.
    fn SCIUnmapRemoteSegmentForDevice(segment: sci_remote_segment_t, device: sci_smartio_device_t, flags: c_uint);

    /// `SCIMapLocalSegmentForDevice`: make a local segment reachable by a device.
    fn SCIMapLocalSegmentForDevice(
        segment: sci_local_segment_t,
        local_adapter_no: c_uint,
        device: sci_smartio_device_t,
        ioaddr: *mut sci_ioaddr_t,
        offset: usize,
        size: usize,
        flags: c_uint,
    );

    /// `SCIUnmapLocalSegmentForDevice`: undo `SCIMapLocalSegmentForDevice`.
    fn SCIUnmapLocalSegmentForDevice(
        segment: sci_local_segment_t,
        local_adapter_no: c_uint,
        device: sci_smartio_device_t,
        flags: c_uint,
    );
}

/// `SCIGetFabricDeviceId`: the fabric id of a borrowed device. No device can be borrowed
/// without hardware (and there is no error argument): always 0.
///
/// # Errors
/// None reported (no error argument).
#[no_mangle]
pub extern "C-unwind" fn SCIGetFabricDeviceId(device: sci_smartio_device_t) -> c_uint {
    let _ = device;
    run_quiet(0, || Ok(0))
}
