//! Callback reasons, DMA queue states, sequence statuses, callback actions, versions.

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
/// Entries of the per-adapter lists of `SCIGetNodeInfoByAdapterName` (adapter numbers and
/// types); `dis_nodeId_list_t` holds one more, so a 0 always ends it.
pub const DIS_MAX_NSCIS: u32 = 4;
/// `SetSciMemCopyFunction` id: the library's choice (today `REMORA_MEMCOPY_MEMCPY`).
pub const REMORA_MEMCOPY_DEFAULT: u32 = 0;
/// `SetSciMemCopyFunction` id: one block copy of the whole range.
pub const REMORA_MEMCOPY_MEMCPY: u32 = 1;
/// `SetSciMemCopyFunction` id: aligned 8-byte stores in address order.
pub const REMORA_MEMCOPY_WORDS64: u32 = 2;
/// `SetSciMemCopyFunction` id: 64-byte pieces, a full fence after each.
pub const REMORA_MEMCOPY_CACHE_LINES: u32 = 3;
/// `SetSciMemCopyFunction` id: a block copy, then a flush of the map.
pub const REMORA_MEMCOPY_FLUSHED: u32 = 4;
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
