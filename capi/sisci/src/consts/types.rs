//! Plain data types and the `#[repr(C)]` structures `SCIQuery` exchanges.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_ushort, c_void};

// ---- Plain data types ------------------------------------------------------

/// Bus (I/O) address as seen by a device; 64 bits in API 2.0 (`sci_ioaddr_t`).
pub type sci_ioaddr_t = c_ulonglong;

/// A global interconnect address: node id plus a 48-bit offset.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct sci_address_t {
    /// Node that owns the address.
    pub nodeId: c_ushort,
    /// Bits 47..32 of the offset.
    pub offsHi: c_ushort,
    /// Bits 31..0 of the offset.
    pub offsLo: c_uint,
}

/// One element of a vectored DMA transfer (`dis_dma_vec_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct dis_dma_vec_t {
    /// Bytes to move.
    pub size: c_uint,
    /// Offset into the local segment.
    pub local_offset: c_uint,
    /// Offset into the remote segment.
    pub remote_offset: c_uint,
    /// Per-element flags, normally 0.
    pub flags: c_uint,
}

/// DMA engine capabilities, the answer to `SCI_Q_DMA_CAPABILITIES`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct sci_dma_capabilities_t {
    /// Number of independent DMA channels.
    pub num_channels: c_uint,
    /// Largest single transfer in bytes.
    pub max_transfer_size: c_uint,
    /// Largest accepted `dis_dma_vec_t` array.
    pub max_vector_length: c_uint,
    /// Non-zero if local memory -> remote transfers are supported.
    pub support_mem2io: c_uint,
    /// Non-zero if remote -> local memory transfers are supported.
    pub support_io2mem: c_uint,
    /// Non-zero if remote -> remote transfers are supported.
    pub support_io2io: c_uint,
    /// Required alignment in bytes.
    pub min_align_bytes: c_uint,
    /// Alignment in bytes that gives the best speed.
    pub suggested_align_bytes: c_uint,
}

// ---- SCIQuery argument structures --------------------------------------------
//
// Handle fields (`sci_local_segment_t`, `sci_map_t`, ...) are opaque pointers
// in C and appear here as `*mut c_void`.

/// Argument of `SCI_Q_VENDORID`, `SCI_Q_API` and `SCI_Q_SISCI_DRIVER_VERSION`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sci_query_string_t {
    /// Caller's buffer that receives a NUL-terminated string.
    pub str: *mut c_char,
    /// Size of the buffer in bytes.
    pub length: c_uint,
}

/// Argument of `SCI_Q_ADAPTER`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sci_query_adapter_t {
    /// Adapter to ask about.
    pub localAdapterNo: c_uint,
    /// Link/port number for the per-link sub-commands.
    pub portNo: c_uint,
    /// One of the `SCI_Q_ADAPTER_*` sub-commands.
    pub subcommand: c_uint,
    /// Where the answer is written (usually an `unsigned int`).
    pub data: *mut c_void,
}

/// Argument of `SCI_Q_SYSTEM`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sci_query_system_t {
    /// One of the `SCI_Q_SYSTEM_*` sub-commands.
    pub subcommand: c_uint,
    /// Where the answer is written.
    pub data: *mut c_void,
}

/// The `data` member of the segment query structures.
///
/// In C this is an anonymous one-member union `{ sci_ioaddr_t ioaddr; }`;
/// a one-field struct has the same size, alignment and offset.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct sci_query_segment_data_t {
    /// The answer (an address).
    pub ioaddr: sci_ioaddr_t,
}

/// Argument of `SCI_Q_LOCAL_SEGMENT`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sci_query_local_segment_t {
    /// Segment to ask about (`sci_local_segment_t`).
    pub segment: *mut c_void,
    /// One of the `SCI_Q_LOCAL_SEGMENT_*` sub-commands.
    pub subcommand: c_uint,
    /// The answer.
    pub data: sci_query_segment_data_t,
}

/// Argument of `SCI_Q_REMOTE_SEGMENT`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sci_query_remote_segment_t {
    /// Segment to ask about (`sci_remote_segment_t`).
    pub segment: *mut c_void,
    /// One of the `SCI_Q_REMOTE_SEGMENT_*` sub-commands.
    pub subcommand: c_uint,
    /// The answer.
    pub data: sci_query_segment_data_t,
}

/// Argument of `SCI_Q_MAP`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sci_query_map_t {
    /// Mapping to ask about (`sci_map_t`).
    pub map: *mut c_void,
    /// One of the `SCI_Q_MAP_*` sub-commands.
    pub subcommand: c_uint,
    /// The answer.
    pub data: c_ulonglong,
}

/// Argument of `SCI_Q_DMA`; the DMA engine kind travels in `SCIQuery`'s flags.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sci_query_dma_t {
    /// Adapter to ask about.
    pub localAdapterNo: c_uint,
    /// One of the `SCI_Q_DMA_*` sub-commands.
    pub subcommand: c_uint,
    /// Points to an `unsigned int` or a [`sci_dma_capabilities_t`].
    pub data: *mut c_void,
}

/// Description of a SmartIO PCIe device (also used as a search filter).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sci_smartio_device_info_t {
    /// Fabric device id.
    pub fdid: c_ulonglong,
    /// PCI device id.
    pub pci_device_id: c_ushort,
    /// PCI vendor id.
    pub pci_vendor_id: c_ushort,
    /// PCI class code.
    pub pci_class: c_uint,
    /// PCI subsystem device id.
    pub pci_subsystem_device_id: c_ushort,
    /// PCI subsystem vendor id.
    pub pci_subsystem_vendor_id: c_ushort,
    /// Device serial number.
    pub pci_serial_number: c_ulonglong,
    /// Bus/device/function on the host that owns the device.
    pub remote_bdf: c_ushort,
    /// Bus/device/function as seen locally.
    pub local_bdf: c_ushort,
    /// Local adapter through which the device is reached.
    pub adapter: c_uint,
    /// Node that hosts the device.
    pub nodeid: c_uint,
    /// Physical slot number.
    pub physical_slot: c_int,
    /// Administrator-assigned name, NUL-terminated.
    pub user_name: [c_char; 64],
    /// Textual UUID, NUL-terminated.
    pub uuid: [c_char; 37],
}

/// Argument of `SCI_Q_DEVICE`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sci_smartio_query_device_t {
    /// Device to ask about.
    pub fdid: c_ulonglong,
    /// One of the `SCI_Q_DEVICE_*` sub-commands.
    pub subcommand: c_uint,
    /// Where the answer is written.
    pub data: *mut c_void,
}
