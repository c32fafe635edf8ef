//! Error codes (`sci_error_t`, `sisci_error.h`).

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
