//! Numeric SISCI constants and the `#[repr(C)]` structures that `SCIQuery`
//! exchanges with C callers.
//!
//! Every value here mirrors Remora's public C headers (`include/sisci_error.h`,
//! `include/sisci_types.h`, `include/sisci_api.h`) and must stay identical to
//! them: `tests/c/consts_check.c` prints the C side as `NAME 0x<hex>` lines
//! so that a test can diff it against this file.  Values are written as plain
//! literals (no expressions) to keep that comparison trivial.
//!
//! All constants are `u32`, matching the C `unsigned int` flag arguments and
//! the (int-sized) C enums.  Names deliberately keep their C spelling.

// C type and field names are kept verbatim so the Rust and C sides read alike.
#![allow(non_camel_case_types, non_snake_case)]
// This module is an exhaustive ABI table; not every entry is used internally.
#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_ushort, c_void};

// ---- Error codes (`sci_error_t`, sisci_error.h) ----------------------------

/// Bit 30, set in every SISCI error value except `SCI_ERR_OK`.
pub const SCI_ERR_MASK: u32 = 0x4000_0000;
/// Same as `SCI_ERR_MASK`, under the API 2.0 spelling.
pub const SISCI_ERR_MASK: u32 = 0x4000_0000;
/// Bit 0 marks an error that the remote side reported.
pub const SCI_ERR_REMOTE_MASK: u32 = 0x1;
/// Success.
pub const SCI_ERR_OK: u32 = 0x0;
/// Resource is in use; retry later or release dependants first.
pub const SCI_ERR_BUSY: u32 = 0x4000_0900;
/// A flag that is valid but not implemented by this library.
pub const SCI_ERR_FLAG_NOT_IMPLEMENTED: u32 = 0x4000_0901;
/// A flag that is not valid for this function.
pub const SCI_ERR_ILLEGAL_FLAG: u32 = 0x4000_0902;
/// Out of resources (generic).
pub const SCI_ERR_NOSPC: u32 = 0x4000_0904;
/// Out of resources inside the API library.
pub const SCI_ERR_API_NOSPC: u32 = 0x4000_0905;
/// Out of hardware (or emulated hardware) resources.
pub const SCI_ERR_HW_NOSPC: u32 = 0x4000_0906;
/// The requested function is not implemented.
pub const SCI_ERR_NOT_IMPLEMENTED: u32 = 0x4000_0907;
/// Adapter number is out of the valid range.
pub const SCI_ERR_ILLEGAL_ADAPTERNO: u32 = 0x4000_0908;
/// No adapter with this number exists.
pub const SCI_ERR_NO_SUCH_ADAPTERNO: u32 = 0x4000_0909;
/// The operation did not complete within the given timeout.
pub const SCI_ERR_TIMEOUT: u32 = 0x4000_090a;
/// Offset and/or size exceed the bounds of the object.
pub const SCI_ERR_OUT_OF_RANGE: u32 = 0x4000_090b;
/// No segment with the given id exists on the target node.
pub const SCI_ERR_NO_SUCH_SEGMENT: u32 = 0x4000_090c;
/// Node id is not valid.
pub const SCI_ERR_ILLEGAL_NODEID: u32 = 0x4000_090d;
/// The remote side refused the connection.
pub const SCI_ERR_CONNECTION_REFUSED: u32 = 0x4000_090e;
/// The remote segment is not (or no longer) connected.
pub const SCI_ERR_SEGMENT_NOT_CONNECTED: u32 = 0x4000_090f;
/// Size does not meet the alignment requirement.
pub const SCI_ERR_SIZE_ALIGNMENT: u32 = 0x4000_0910;
/// Offset does not meet the alignment requirement.
pub const SCI_ERR_OFFSET_ALIGNMENT: u32 = 0x4000_0911;
/// A parameter has an invalid value.
pub const SCI_ERR_ILLEGAL_PARAMETER: u32 = 0x4000_0912;
/// A queue or table is full.
pub const SCI_ERR_MAX_ENTRIES: u32 = 0x4000_0913;
/// The local segment has not been prepared on the adapter.
pub const SCI_ERR_SEGMENT_NOT_PREPARED: u32 = 0x4000_0914;
/// An address argument is not valid.
pub const SCI_ERR_ILLEGAL_ADDRESS: u32 = 0x4000_0915;
/// The operation is not allowed in the current state.
pub const SCI_ERR_ILLEGAL_OPERATION: u32 = 0x4000_0916;
/// Unknown query command or sub-command.
pub const SCI_ERR_ILLEGAL_QUERY: u32 = 0x4000_0917;
/// The segment id is already in use on this node.
pub const SCI_ERR_SEGMENTID_USED: u32 = 0x4000_0918;
/// An operating-system call failed.
pub const SCI_ERR_SYSTEM: u32 = 0x4000_0919;
/// The wait was cancelled because the object was removed.
pub const SCI_ERR_CANCELLED: u32 = 0x4000_091a;
/// The object is not connected.
pub const SCI_ERR_NOT_CONNECTED: u32 = 0x4000_091b;
/// The resource is currently not available.
pub const SCI_ERR_NOT_AVAILABLE: u32 = 0x4000_091c;
/// Library and driver (daemon) versions do not match.
pub const SCI_ERR_INCONSISTENT_VERSIONS: u32 = 0x4000_091d;
/// A conditional interrupt raced with its enable call.
pub const SCI_ERR_COND_INT_RACE_PROBLEM: u32 = 0x4000_091e;
/// A counter overflowed.
pub const SCI_ERR_OVERFLOW: u32 = 0x4000_091f;
/// `SCIInitialize()` has not been called.
pub const SCI_ERR_NOT_INITIALIZED: u32 = 0x4000_0920;
/// Access denied.
pub const SCI_ERR_ACCESS: u32 = 0x4000_0921;
/// The call needs hardware that Remora does not emulate.
pub const SCI_ERR_NOT_SUPPORTED: u32 = 0x4000_0922;
/// The call or flag is deprecated.
pub const SCI_ERR_DEPRECATED: u32 = 0x4000_0923;
/// No DMA engine of the requested kind is available.
pub const SCI_ERR_DMA_NOT_AVAILABLE: u32 = 0x4000_0924;
/// DMA has been disabled.
pub const SCI_ERR_DMA_DISABLED: u32 = 0x4000_0925;
/// Interrupt number not found; shares its value with `SCI_ERR_NO_SUCH_SEGMENT`.
pub const SCI_ERR_NO_SUCH_INTNO: u32 = 0x4000_090c;
/// The fixed interrupt number is already in use.
pub const SCI_ERR_INTNO_USED: u32 = 0x4000_0926;
/// No SmartIO device with this fabric device id.
pub const SCI_ERR_NO_SUCH_FDID: u32 = 0x4000_0927;
/// No node with this id is known.
pub const SCI_ERR_NO_SUCH_NODEID: u32 = 0x4000_0a00;
/// The remote node does not answer.
pub const SCI_ERR_NODE_NOT_RESPONDING: u32 = 0x4000_0a02;
/// The remote node's link is down.
pub const SCI_ERR_NO_REMOTE_LINK_ACCESS: u32 = 0x4000_0a04;
/// The local link is down.
pub const SCI_ERR_NO_LINK_ACCESS: u32 = 0x4000_0a05;
/// A data transfer failed.
pub const SCI_ERR_TRANSFER_FAILED: u32 = 0x4000_0a06;
/// The operation would block (not used by the SISCI calls themselves).
pub const SCI_ERR_EWOULD_BLOCK: u32 = 0x4000_0b00;
/// The remote side is busy; shares its value with `SCI_ERR_EWOULD_BLOCK`.
pub const SCI_ERR_REMOTE_BUSY: u32 = 0x4000_0b00;
/// A semaphore count limit was exceeded.
pub const SCI_ERR_SEMAPHORE_COUNT_EXCEEDED: u32 = 0x4000_0b01;
/// Called at an illegal interrupt request level (kernel API only).
pub const SCI_ERR_IRQL_ILLEGAL: u32 = 0x4000_0b02;
/// The local side is busy.
pub const SCI_ERR_LOCAL_BUSY: u32 = 0x4000_0b03;
/// Both local and remote sides are busy.
pub const SCI_ERR_ALL_BUSY: u32 = 0x4000_0b04;

// ---- `sci_segment_cb_reason_t` values --------------------------------------

/// A connection was made.
pub const SCI_CB_CONNECT: u32 = 1;
/// A connection was closed.
pub const SCI_CB_DISCONNECT: u32 = 2;
/// The path is temporarily down.
pub const SCI_CB_NOT_OPERATIONAL: u32 = 3;
/// The path is working again.
pub const SCI_CB_OPERATIONAL: u32 = 4;
/// The connection is gone for good.
pub const SCI_CB_LOST: u32 = 5;

// ---- `sci_dma_queue_state_t` values ----------------------------------------

/// Created or reset, nothing queued.
pub const SCI_DMAQUEUE_IDLE: u32 = 0;
/// Transfers are being queued.
pub const SCI_DMAQUEUE_GATHER: u32 = 1;
/// Handed to the DMA engine, in progress.
pub const SCI_DMAQUEUE_POSTED: u32 = 2;
/// All transfers completed.
pub const SCI_DMAQUEUE_DONE: u32 = 3;
/// Stopped by `SCIAbortDMAQueue()`.
pub const SCI_DMAQUEUE_ABORTED: u32 = 4;
/// A transfer failed.
pub const SCI_DMAQUEUE_ERROR: u32 = 5;

// ---- `sci_sequence_status_t` values ----------------------------------------

/// No errors since the sequence started.
pub const SCI_SEQ_OK: u32 = 0;
/// A transient error; redo the transfer.
pub const SCI_SEQ_RETRIABLE: u32 = 1;
/// A fatal error; the connection is broken.
pub const SCI_SEQ_NOT_RETRIABLE: u32 = 2;
/// Error state not yet known; check again.
pub const SCI_SEQ_PENDING: u32 = 3;

// ---- `sci_callback_action_t` values ----------------------------------------

/// Stop delivering callbacks.
pub const SCI_CALLBACK_CANCEL: u32 = 1;
/// Keep the callback registered.
pub const SCI_CALLBACK_CONTINUE: u32 = 2;

// ---- Versions and miscellaneous constants ----------------------------------

/// Maximum number of `dis_dma_vec_t` entries in one vectored DMA request.
pub const DIS_DMA_MAX_VECLEN: u32 = 256;
/// Largest payload of one data interrupt, in bytes (`SCITriggerDataInterrupt`).
pub const SCI_MAX_DATA_INTERRUPT_LENGTH: u32 = 1024;
/// Major version of the implemented SISCI API.
pub const SISCI_API_VER_MAJOR: u32 = 2;
/// Minor version of the implemented SISCI API.
pub const SISCI_API_VER_MINOR: u32 = 0;
/// Micro version of the implemented SISCI API.
pub const SISCI_API_VER_MICRO: u32 = 0;
/// Packed API version: major << 24 | minor << 12 | micro.
pub const SISCI_API_VERSION: u32 = 0x0200_0000;
/// Bits of `SISCI_API_VERSION` that library and driver must agree on.
pub const SISCI_SIGN_VERSION_MASK: u32 = 0xffff_f000;
/// Timeout value meaning "wait forever".
pub const SCI_INFINITE_TIMEOUT: u32 = 0xffff_ffff;
/// Node id that addresses every node of a multicast/broadcast group.
pub const DIS_BROADCAST_NODEID_GROUP_ALL: u32 = 252;
/// Placeholder node id meaning "this host".
pub const SCI_LOCAL_HOST: u32 = 0;

// ---- Flags (`SCI_FLAG_*`); each function has its own flag namespace --------

/// Any call taking a callback: deliver events by callback.
pub const SCI_FLAG_USE_CALLBACK: u32 = 0x1;
/// `SCICreateSegment`: create segment without memory.
pub const SCI_FLAG_EMPTY: u32 = 0x2;
/// `SCICreateSegment`: segment can never be connected.
pub const SCI_FLAG_PRIVATE: u32 = 0x4;
/// `SCIPrepareSegment`: the segment is only used as a DMA source.
pub const SCI_FLAG_DMA_SOURCE_ONLY: u32 = 0x8;
/// `SCIRemoveSegment`: remove the segment even if it is in use.
pub const SCI_FLAG_FORCE_REMOVE: u32 = 0x20;
/// `SCICreateSegment`: broadcast segment also takes unicast.
pub const SCI_FLAG_ALLOW_UNICAST: u32 = 0x80;
/// `SCIRegisterSegmentMemory`: pin the registered user memory.
pub const SCI_FLAG_LOCK_USER_MEM: u32 = 0x400;
/// `SCICreateSegment`: segment backed by physical memory.
pub const SCI_FLAG_PHYSICAL: u32 = 0x1000;
/// `SCICreateSegment`: attach a CUDA device buffer.
pub const SCI_FLAG_CUDA_BUFFER: u32 = 0x2000;
/// `SCICreateSegment`: attach a SCIF buffer.
pub const SCI_FLAG_SCIF_BUFFER: u32 = 0x4000;
/// `SCICreateSegment`: library chooses the segment id.
pub const SCI_FLAG_AUTO_ID: u32 = 0x2000_0000;
/// `SCIOpen`: serialise use of the descriptor.
pub const SCI_FLAG_THREAD_SAFE: u32 = 0x1;
/// `SCIConnectSegment`: return before the connection completes.
pub const SCI_FLAG_ASYNCHRONOUS_CONNECT: u32 = 0x100;
/// Create/connect/map/DMA: operate on a multicast group.
pub const SCI_FLAG_BROADCAST: u32 = 0x0004_0000;
/// Alias of `SCI_FLAG_BROADCAST` (multicast and broadcast are the same flag).
pub const SCI_FLAG_MULTICAST: u32 = 0x0004_0000;
/// `SCISetSegmentUnavailable`: tell connected nodes.
pub const SCI_FLAG_NOTIFY: u32 = 0x8;
/// `SCISetSegmentUnavailable`: drop existing connections.
pub const SCI_FLAG_FORCE_DISCONNECT: u32 = 0x10;
/// Map: map at the suggested address.
pub const SCI_FLAG_FIXED_MAP_ADDR: u32 = 0x1;
/// Map: map read-only.
pub const SCI_FLAG_READONLY_MAP: u32 = 0x2;
/// Map: map for atomic fetch-and-add.
pub const SCI_FLAG_LOCK_OPERATION: u32 = 0x4;
/// Map: stores trigger conditional interrupts.
pub const SCI_FLAG_CONDITIONAL_INTERRUPT_MAP: u32 = 0x8;
/// Map: stores also raise an interrupt.
pub const SCI_FLAG_UNCONDITIONAL_DATA_INTERRUPT_MAP: u32 = 0x10;
/// Map: aggressive prefetch, hold data.
pub const SCI_FLAG_READ_PREFETCH_AGGR_HOLD_MAP: u32 = 0x20;
/// Map: prefetch without holding data.
pub const SCI_FLAG_READ_PREFETCH_NO_HOLD_MAP: u32 = 0x40;
/// Map: uncached I/O mapping, no prefetch.
pub const SCI_FLAG_IO_MAP_IOSPACE: u32 = 0x80;
/// Map: map for DMOVE transfers.
pub const SCI_FLAG_DMOVE_MAP: u32 = 0x100;
/// Map: no write gathering.
pub const SCI_FLAG_WRITES_DISABLE_GATHER_MAP: u32 = 0x200;
/// Map: limit packet size.
pub const SCI_FLAG_DISABLE_128_BYTES_PACKETS: u32 = 0x400;
/// Map: loop local targets through the adapter.
pub const SCI_FLAG_NO_MEMORY_LOOPBACK: u32 = 0x800;
/// API 1.x name of `SCI_FLAG_NO_MEMORY_LOOPBACK`.
pub const SCI_FLAG_NO_MEMORY_LOOPBACK_MAP: u32 = 0x800;
/// Map: share the mapping.
pub const SCI_FLAG_SHARED_MAP: u32 = 0x2000;
/// Map: cached map; user must flush.
pub const SCI_FLAG_WRITE_BACK_CACHE_MAP: u32 = 0x0800_0000;
/// `SCICreateMapSequence`: cheap barrier.
pub const SCI_FLAG_FAST_BARRIER: u32 = 0x1;
/// `SCICheckSequence`: skip the flush.
pub const SCI_FLAG_NO_FLUSH: u32 = 0x1;
/// `SCICheckSequence`: skip the barrier.
pub const SCI_FLAG_NO_STORE_BARRIER: u32 = 0x2;
/// `SCIFlush`: only write-combining buffers.
pub const SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY: u32 = 0x1;
/// Old alias of `SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY`.
pub const FLUSH_CPU_BUFFERS_ONLY: u32 = 0x1;
/// `SCIMemCpy`/`SCIMemCopy`: copy remote -> local.
pub const SCI_FLAG_BLOCK_READ: u32 = 0x40;
/// `SCIMemCpy`/`SCIMemCopy`: check the transfer for errors.
pub const SCI_FLAG_ERROR_CHECK: u32 = 0x80;
/// DMA channel calls: share the channel with other users.
pub const SCI_FLAG_DMA_CHANNEL_SHARED: u32 = 0x1;
/// DMA: block until the transfer is done.
pub const SCI_FLAG_DMA_WAIT: u32 = 0x4;
/// DMA: pull remote -> local.
pub const SCI_FLAG_DMA_READ: u32 = 0x10;
/// DMA: physical DMA (privileged).
pub const SCI_FLAG_DMA_PHDMA: u32 = 0x20;
/// DMA: use the global DMA engine.
pub const SCI_FLAG_DMA_GLOBAL: u32 = 0x40;
/// DMA: use the system DMA engine.
pub const SCI_FLAG_DMA_SYSDMA: u32 = 0x100;
/// DMA: source is plain user memory.
pub const SCI_FLAG_DMA_USER_MEM: u32 = 0x200;
/// DMA: use the adapter DMA engine.
pub const SCI_FLAG_DMA_ADAPTER: u32 = 0x800;
/// DMA: post the queue immediately.
pub const SCI_FLAG_DMA_POST: u32 = 0x1000;
/// DMA: reset the queue after completion.
pub const SCI_FLAG_DMA_RESET: u32 = 0x2000;

// ---- DMA channel types and ids ---------------------------------------------

/// DMA channel type: any engine.
pub const SCI_DMA_TYPE_DONTCARE: u32 = 1;
/// DMA channel type: the adapter's engine.
pub const SCI_DMA_TYPE_ADAPTER: u32 = 2;
/// DMA channel type: the global engine.
pub const SCI_DMA_TYPE_GLOBAL: u32 = 3;
/// DMA channel type: the system (host) engine.
pub const SCI_DMA_TYPE_SYSTEM: u32 = 4;
/// DMA channel type: transparent engine.
pub const SCI_DMA_TYPE_TRANSPARENT: u32 = 5;
/// DMA channel id meaning "any channel".
pub const SCI_DMA_CHANNEL_ID_DONTCARE: u32 = 0xffff_ffff;

// ---- Interrupt, cache, PCIe-requester and SmartIO flags --------------------

/// `SCICreateInterrupt`: caller chooses the interrupt number.
pub const SCI_FLAG_FIXED_INTNO: u32 = 0x2;
/// `SCICreateInterrupt`: several owners share the number.
pub const SCI_FLAG_SHARED_INT: u32 = 0x4;
/// `SCIRegisterInterruptFlag`: make the interrupt conditional.
pub const SCI_FLAG_CONDITIONAL_INTERRUPT: u32 = 0x8;
/// `SCICreateInterrupt`: count triggers instead of merging.
pub const SCI_FLAG_COUNTING_INT: u32 = 0x20;
/// `SCICreateInterrupt`: allow sharing with other processes.
pub const SCI_FLAG_SHARE_EXTERNAL: u32 = 0x40;
/// `SCICacheSync`: write back dirty lines.
pub const SCI_FLAG_CACHE_FLUSH: u32 = 0x0010_0000;
/// `SCICacheSync`: discard cached lines.
pub const SCI_FLAG_CACHE_INVALIDATE: u32 = 0x0020_0000;
/// `SCIRegisterPCIeRequester`: the requester is valid on all adapters.
pub const SCI_FLAG_PCIE_REQUESTER_GLOBAL: u32 = 0x1;
/// `SCIConnectDeviceMemory`: connect to a device BAR.
pub const SCI_FLAG_BAR: u32 = 0x1;
/// `SCIBorrowDevice`: borrow the device exclusively.
pub const SCI_FLAG_EXCLUSIVE: u32 = 0x0100_0000;
/// SmartIO: place memory near the device.
pub const SCI_FLAG_DEVICE_SIDE_ONLY: u32 = 0x0200_1000;
/// SmartIO: place memory on this host.
pub const SCI_FLAG_LOCAL_ONLY: u32 = 0x0200_2000;
/// SmartIO: optimise for device bandwidth.
pub const SCI_FLAG_DEVICE_PREFER_BANDWIDTH: u32 = 0x0400_0001;
/// SmartIO: optimise for host bandwidth.
pub const SCI_FLAG_HOST_PREFER_BANDWIDTH: u32 = 0x0400_0002;
/// SmartIO: caller selects the adapter path.
pub const SCI_FLAG_SPECIFY_PATH: u32 = 0x1000_0000;
/// SmartIO: caller selects the slot.
pub const SCI_FLAG_SPECIFY_SLOT: u32 = 0x2000_0000;

// ---- SmartIO memory types and access hints ---------------------------------

/// A device BAR.
pub const SCI_MEMTYPE_BAR: u32 = 1;
/// Memory private to the borrower.
pub const SCI_MEMTYPE_PRIVATE: u32 = 2;
/// Memory shared between borrowers.
pub const SCI_MEMTYPE_SHARED: u32 = 4;
/// SmartIO access hint: the device reads the memory.
pub const SCI_MEMACCESS_DEVICE_READ: u32 = 0x1;
/// SmartIO access hint: the device writes the memory.
pub const SCI_MEMACCESS_DEVICE_WRITE: u32 = 0x2;
/// SmartIO access hint: the host reads the memory.
pub const SCI_MEMACCESS_HOST_READ: u32 = 0x4;
/// SmartIO access hint: the host writes the memory.
pub const SCI_MEMACCESS_HOST_WRITE: u32 = 0x8;
/// SmartIO access hint: several hosts read the memory.
pub const SCI_MEMACCESS_MULTIHOST_READ: u32 = 0x14;
/// SmartIO access hint: several hosts write the memory.
pub const SCI_MEMACCESS_MULTIHOST_WRITE: u32 = 0x18;
/// SmartIO access hint: peer devices read the memory.
pub const SCI_MEMACCESS_P2P_READ: u32 = 0x21;
/// SmartIO access hint: peer devices write the memory.
pub const SCI_MEMACCESS_P2P_WRITE: u32 = 0x22;

// ---- `SCIQuery` major commands ---------------------------------------------

/// Sci_query_string_t: vendor name.
pub const SCI_Q_VENDORID: u32 = 1;
/// Sci_query_string_t: API version.
pub const SCI_Q_API: u32 = 2;
/// Sci_query_adapter_t.
pub const SCI_Q_ADAPTER: u32 = 3;
/// Sci_query_system_t.
pub const SCI_Q_SYSTEM: u32 = 4;
/// Sci_query_local_segment_t.
pub const SCI_Q_LOCAL_SEGMENT: u32 = 5;
/// Sci_query_remote_segment_t.
pub const SCI_Q_REMOTE_SEGMENT: u32 = 6;
/// Sci_query_map_t.
pub const SCI_Q_MAP: u32 = 7;
/// Sci_query_dma_t.
pub const SCI_Q_DMA: u32 = 8;
/// Sci_smartio_query_device_t.
pub const SCI_Q_DEVICE: u32 = 9;
/// Sci_query_string_t: driver version.
pub const SCI_Q_SISCI_DRIVER_VERSION: u32 = 10;

// ---- `SCI_Q_ADAPTER` sub-commands ------------------------------------------

/// Required DMA size alignment in bytes.
pub const SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT: u32 = 1;
/// Required DMA offset alignment in bytes.
pub const SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT: u32 = 2;
/// Largest DMA transfer unit in bytes.
pub const SCI_Q_ADAPTER_DMA_MTU: u32 = 3;
/// Smallest transfer for which DMA beats PIO.
pub const SCI_Q_ADAPTER_SUGGESTED_MIN_DMA_SIZE: u32 = 4;
/// Smallest transfer for which block transfer pays off.
pub const SCI_Q_ADAPTER_SUGGESTED_MIN_BLOCK_SIZE: u32 = 5;
/// Node id of the adapter.
pub const SCI_Q_ADAPTER_NODEID: u32 = 6;
/// Alias of `SCI_Q_ADAPTER_NODEID` (user-guide spelling).
pub const SCI_Q_ADAPTER_NODE_ID: u32 = 6;
/// Adapter serial number.
pub const SCI_Q_ADAPTER_SERIAL_NUMBER: u32 = 7;
/// Adapter card type (see `SCIGetAdapterTypeString`).
pub const SCI_Q_ADAPTER_CARD_TYPE: u32 = 8;
/// Number of stream buffers.
pub const SCI_Q_ADAPTER_NUMBER_OF_STREAMS: u32 = 9;
/// Size of one stream buffer in bytes.
pub const SCI_Q_ADAPTER_STREAM_BUFFER_SIZE: u32 = 10;
/// Non-zero if the adapter is configured.
pub const SCI_Q_ADAPTER_CONFIGURED: u32 = 11;
/// Non-zero if the link (`portNo`) is operational.
pub const SCI_Q_ADAPTER_LINK_OPERATIONAL: u32 = 12;
/// Non-zero if the hardware reports a good link.
pub const SCI_Q_ADAPTER_HW_LINK_STATUS_IS_OK: u32 = 13;
/// Adapter number.
pub const SCI_Q_ADAPTER_NUMBER: u32 = 14;
/// Driver instance number of the adapter.
pub const SCI_Q_ADAPTER_INSTANCE_NUMBER: u32 = 15;
/// Non-zero if the adapter firmware is good.
pub const SCI_Q_ADAPTER_FIRMWARE_OK: u32 = 16;
/// Non-zero if the adapter is cabled to a switch.
pub const SCI_Q_ADAPTER_CONNECTED_TO_SWITCH: u32 = 17;
/// Type of the attached switch.
pub const SCI_Q_ADAPTER_LOCAL_SWITCH_TYPE: u32 = 18;
/// Switch port the adapter is attached to.
pub const SCI_Q_ADAPTER_LOCAL_SWITCH_PORT_NUMBER: u32 = 19;
/// Non-zero if cabled to the configured switch port.
pub const SCI_Q_ADAPTER_CONNECTED_TO_EXPECTED_SWITCH_PORT: u32 = 20;
/// Address-translation page size.
pub const SCI_Q_ADAPTER_ATT_PAGE_SIZE: u32 = 21;
/// Total address-translation entries.
pub const SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES: u32 = 22;
/// Free address-translation entries.
pub const SCI_Q_ADAPTER_ATT_AVAILABLE_ENTRIES: u32 = 23;
/// Physical memory node id (SCI era).
pub const SCI_Q_ADAPTER_PHYS_MEM_NODEID: u32 = 24;
/// Physical mailbox node id (SCI era).
pub const SCI_Q_ADAPTER_PHYS_MBX_NODEID: u32 = 25;
/// Physical link port node id (SCI era).
pub const SCI_Q_ADAPTER_PHYS_LINK_PORT_NODEID: u32 = 26;
/// SCI link frequency.
pub const SCI_Q_ADAPTER_SCI_LINK_FREQUENCY: u32 = 27;
/// B-link frequency.
pub const SCI_Q_ADAPTER_B_LINK_FREQUENCY: u32 = 28;
/// I/O bus frequency.
pub const SCI_Q_ADAPTER_IO_BUS_FREQUENCY: u32 = 29;
/// Number of multicast groups supported.
pub const SCI_Q_ADAPTER_MCAST_MAX_GROUPS: u32 = 30;
/// PCI address packed as bus << 8 | dev << 3 | fn.
pub const SCI_Q_ADAPTER_BDF: u32 = 31;
/// Number of links on the adapter.
pub const SCI_Q_ADAPTER_NUMBER_OF_LINKS: u32 = 32;
/// Lane width of the link (`portNo`).
pub const SCI_Q_ADAPTER_LINK_WIDTH: u32 = 33;
/// PCIe generation of the link (`portNo`).
pub const SCI_Q_ADAPTER_LINK_SPEED: u32 = 34;
/// Time the link (`portNo`) has been up.
pub const SCI_Q_ADAPTER_LINK_UPTIME: u32 = 35;
/// Time the link (`portNo`) has been down.
pub const SCI_Q_ADAPTER_LINK_DOWNTIME: u32 = 36;
/// Non-zero if a cable is inserted in link `portNo`.
pub const SCI_Q_ADAPTER_LINK_CABLE_INSERTED: u32 = 37;
/// Non-zero if link `portNo` is enabled.
pub const SCI_Q_ADAPTER_LINK_ENABLED: u32 = 38;
/// Port number at the far end of link `portNo`.
pub const SCI_Q_ADAPTER_LINK_PARTNER_PORT_NO: u32 = 39;

// ---- `SCI_Q_SYSTEM` sub-commands -------------------------------------------

/// Host bridge type.
pub const SCI_Q_SYSTEM_HOSTBRIDGE: u32 = 1;
/// Non-zero if write posting is enabled.
pub const SCI_Q_SYSTEM_WRITE_POSTING_ENABLED: u32 = 2;
/// Non-zero if write combining is enabled.
pub const SCI_Q_SYSTEM_WRITE_COMBINING_ENABLED: u32 = 3;
/// CPU cache line size in bytes.
pub const SCI_Q_SYSTEM_CPU_CACHE_LINE_SIZE: u32 = 4;

// ---- Segment and map sub-commands (no overlap across the three majors) -----

/// Bus address of a local segment.
pub const SCI_Q_LOCAL_SEGMENT_IOADDR: u32 = 1;
/// Kernel virtual address of a local segment.
pub const SCI_Q_LOCAL_SEGMENT_VIRTUAL_KERNEL_ADDR: u32 = 2;
/// Physical address of a local segment.
pub const SCI_Q_LOCAL_SEGMENT_PHYS_ADDR: u32 = 3;
/// Local bus address through which a remote segment is reached.
pub const SCI_Q_REMOTE_SEGMENT_IOADDR: u32 = 4;
/// Non-zero if the map points at memory on this host.
pub const SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET: u32 = 5;
/// Non-zero if a remote map loops back to this host.
pub const SCI_Q_MAP_QUERY_REMOTE_MAPPED_TO_LOCAL_TARGET: u32 = 6;
/// Bus address behind a map.
pub const SCI_Q_MAP_IOADDR: u32 = 7;
/// Physical address behind a map.
pub const SCI_Q_MAP_PHYS_ADDR: u32 = 8;

// ---- `SCI_Q_DMA` and `SCI_Q_DEVICE` sub-commands ---------------------------

/// Data: unsigned int.
pub const SCI_Q_DMA_AVAILABLE: u32 = 1;
/// Data: sci_dma_capabilities_t.
pub const SCI_Q_DMA_CAPABILITIES: u32 = 2;
/// Data: sci_smartio_device_info_t.
pub const SCI_Q_DEVICE_INFO: u32 = 1;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn error_values() {
        assert_eq!(SCI_ERR_OK, 0);
        assert_eq!(SCI_ERR_BUSY, 0x4000_0900);
        assert_eq!(SCI_ERR_NO_SUCH_SEGMENT, 0x4000_090C);
        assert_eq!(SCI_ERR_NO_SUCH_INTNO, SCI_ERR_NO_SUCH_SEGMENT);
        assert_eq!(SCI_ERR_ACCESS, 0x4000_0921);
        assert_eq!(SCI_ERR_NOT_SUPPORTED, 0x4000_0922);
        assert_eq!(SCI_ERR_TRANSFER_FAILED, 0x4000_0A06);
        assert_eq!(SCI_ERR_REMOTE_BUSY, SCI_ERR_EWOULD_BLOCK);
        assert_eq!(SCI_ERR_ALL_BUSY, 0x4000_0B04);
        assert_eq!(SISCI_ERR_MASK, SCI_ERR_MASK);
    }

    #[test]
    fn every_error_but_ok_has_the_mask_bit() {
        let errors = [
            SCI_ERR_BUSY,
            SCI_ERR_ILLEGAL_FLAG,
            SCI_ERR_NO_SUCH_FDID,
            SCI_ERR_NO_SUCH_NODEID,
            SCI_ERR_SEMAPHORE_COUNT_EXCEEDED,
        ];
        for e in errors {
            assert_eq!(e & SCI_ERR_MASK, SCI_ERR_MASK, "{e:#x}");
        }
    }

    #[test]
    fn flag_and_query_values() {
        assert_eq!(SCI_INFINITE_TIMEOUT, 0xffff_ffff);
        assert_eq!(SCI_FLAG_AUTO_ID, 0x2000_0000);
        assert_eq!(SCI_FLAG_BROADCAST, 0x4_0000);
        assert_eq!(SCI_FLAG_DMA_SOURCE_ONLY, 0x8);
        assert_eq!(SCI_FLAG_NO_MEMORY_LOOPBACK_MAP, SCI_FLAG_NO_MEMORY_LOOPBACK);
        assert_eq!(SCI_Q_ADAPTER_NODE_ID, SCI_Q_ADAPTER_NODEID);
        assert_eq!(DIS_BROADCAST_NODEID_GROUP_ALL, 252);
        assert_eq!(SCI_MEMACCESS_P2P_WRITE, 0x20 | SCI_MEMACCESS_DEVICE_WRITE);
        assert_eq!(
            SISCI_API_VERSION,
            (SISCI_API_VER_MAJOR << 24) | (SISCI_API_VER_MINOR << 12) | SISCI_API_VER_MICRO
        );
    }

    #[test]
    fn flags_accepted_by_one_function_do_not_overlap() {
        // SCIMemCpy.
        assert_eq!(SCI_FLAG_BLOCK_READ & SCI_FLAG_ERROR_CHECK, 0);
        // SCISetSegmentUnavailable.
        assert_eq!(SCI_FLAG_NOTIFY & SCI_FLAG_FORCE_DISCONNECT, 0);
        // SCICheckSequence.
        assert_eq!(SCI_FLAG_NO_FLUSH & SCI_FLAG_NO_STORE_BARRIER, 0);
        // SCIConnectSegment.
        let connect = [SCI_FLAG_USE_CALLBACK, SCI_FLAG_ASYNCHRONOUS_CONNECT, SCI_FLAG_BROADCAST];
        assert_disjoint(&connect);
        // SCIMapRemoteSegment.
        let map = [
            SCI_FLAG_FIXED_MAP_ADDR,
            SCI_FLAG_READONLY_MAP,
            SCI_FLAG_LOCK_OPERATION,
            SCI_FLAG_CONDITIONAL_INTERRUPT_MAP,
            SCI_FLAG_UNCONDITIONAL_DATA_INTERRUPT_MAP,
            SCI_FLAG_READ_PREFETCH_AGGR_HOLD_MAP,
            SCI_FLAG_READ_PREFETCH_NO_HOLD_MAP,
            SCI_FLAG_IO_MAP_IOSPACE,
            SCI_FLAG_DMOVE_MAP,
            SCI_FLAG_WRITES_DISABLE_GATHER_MAP,
            SCI_FLAG_DISABLE_128_BYTES_PACKETS,
            SCI_FLAG_NO_MEMORY_LOOPBACK,
            SCI_FLAG_SHARED_MAP,
            SCI_FLAG_BROADCAST,
            SCI_FLAG_WRITE_BACK_CACHE_MAP,
        ];
        assert_disjoint(&map);
        // SCICreateSegment.
        let create = [
            SCI_FLAG_USE_CALLBACK,
            SCI_FLAG_EMPTY,
            SCI_FLAG_PRIVATE,
            SCI_FLAG_DMA_GLOBAL,
            SCI_FLAG_ALLOW_UNICAST,
            SCI_FLAG_PHYSICAL,
            SCI_FLAG_CUDA_BUFFER,
            SCI_FLAG_SCIF_BUFFER,
            SCI_FLAG_BROADCAST,
            SCI_FLAG_AUTO_ID,
        ];
        assert_disjoint(&create);
        // DMA transfers and queues.
        let dma = [
            SCI_FLAG_USE_CALLBACK,
            SCI_FLAG_DMA_WAIT,
            SCI_FLAG_DMA_READ,
            SCI_FLAG_DMA_PHDMA,
            SCI_FLAG_DMA_GLOBAL,
            SCI_FLAG_DMA_SYSDMA,
            SCI_FLAG_DMA_USER_MEM,
            SCI_FLAG_DMA_ADAPTER,
            SCI_FLAG_DMA_POST,
            SCI_FLAG_DMA_RESET,
            SCI_FLAG_BROADCAST,
        ];
        assert_disjoint(&dma);
        // SCICreateInterrupt.
        let intr = [
            SCI_FLAG_USE_CALLBACK,
            SCI_FLAG_FIXED_INTNO,
            SCI_FLAG_SHARED_INT,
            SCI_FLAG_COUNTING_INT,
            SCI_FLAG_SHARE_EXTERNAL,
        ];
        assert_disjoint(&intr);
    }

    #[test]
    fn segment_and_map_subcommands_are_distinct() {
        let subs = [
            SCI_Q_LOCAL_SEGMENT_IOADDR,
            SCI_Q_LOCAL_SEGMENT_VIRTUAL_KERNEL_ADDR,
            SCI_Q_LOCAL_SEGMENT_PHYS_ADDR,
            SCI_Q_REMOTE_SEGMENT_IOADDR,
            SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET,
            SCI_Q_MAP_QUERY_REMOTE_MAPPED_TO_LOCAL_TARGET,
            SCI_Q_MAP_IOADDR,
            SCI_Q_MAP_PHYS_ADDR,
        ];
        for (i, a) in subs.iter().enumerate() {
            for b in &subs[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    fn assert_disjoint(flags: &[u32]) {
        for (i, a) in flags.iter().enumerate() {
            for b in &flags[i + 1..] {
                assert_eq!(a & b, 0, "{a:#x} overlaps {b:#x}");
            }
        }
    }

    #[test]
    fn struct_layouts_match_c() {
        // Layouts valid for every target (all-u32 structures).
        assert_eq!(size_of::<sci_address_t>(), 8);
        assert_eq!(size_of::<dis_dma_vec_t>(), 16);
        assert_eq!(size_of::<sci_dma_capabilities_t>(), 32);
        assert_eq!(size_of::<sci_ioaddr_t>(), 8);
    }

    #[cfg(all(target_pointer_width = "64", not(windows)))]
    #[test]
    fn struct_layouts_match_c_lp64() {
        // Sizes and offsets measured from the C headers on x86_64/aarch64 Linux.
        assert_eq!(size_of::<sci_query_string_t>(), 16);
        assert_eq!(size_of::<sci_query_adapter_t>(), 24);
        assert_eq!(offset_of!(sci_query_adapter_t, data), 16);
        assert_eq!(size_of::<sci_query_system_t>(), 16);
        assert_eq!(size_of::<sci_query_local_segment_t>(), 24);
        assert_eq!(offset_of!(sci_query_local_segment_t, data), 16);
        assert_eq!(size_of::<sci_query_remote_segment_t>(), 24);
        assert_eq!(offset_of!(sci_query_remote_segment_t, data), 16);
        assert_eq!(size_of::<sci_query_map_t>(), 24);
        assert_eq!(offset_of!(sci_query_map_t, data), 16);
        assert_eq!(size_of::<sci_query_dma_t>(), 16);
        assert_eq!(size_of::<sci_smartio_query_device_t>(), 24);
        assert_eq!(size_of::<sci_smartio_device_info_t>(), 152);
        assert_eq!(align_of::<sci_smartio_device_info_t>(), 8);
        assert_eq!(offset_of!(sci_smartio_device_info_t, pci_serial_number), 24);
        assert_eq!(offset_of!(sci_smartio_device_info_t, remote_bdf), 32);
        assert_eq!(offset_of!(sci_smartio_device_info_t, adapter), 36);
        assert_eq!(offset_of!(sci_smartio_device_info_t, physical_slot), 44);
        assert_eq!(offset_of!(sci_smartio_device_info_t, user_name), 48);
        assert_eq!(offset_of!(sci_smartio_device_info_t, uuid), 112);
    }
}
