//! `libsisci.so`: Dolphin's SISCI API as a C ABI, over Remora's safe Rust API
//! (`remora-sisci`). C programs include Remora's `include/sisci_api.h` and link with
//! `-lsisci`; every function that header declares is exported here under its plain name,
//! with the header's signature. Rust code may call the same functions through the rlib.
//!
//! # How calls are made safe
//!
//! * **Handles are table keys.** `sci_desc_t`, `sci_local_segment_t`,
//!   `sci_remote_segment_t`, `sci_map_t` and `sci_sequence_t` are never dereferenced: each
//!   is a non-zero integer that names an entry of a global table, with the kind of object
//!   in its low bits and a counter that never repeats above them. NULL, stale (released)
//!   and wrong-kind handles give `SCI_ERR_ILLEGAL_PARAMETER` (or 0/NULL from the calls
//!   without an error argument); releasing calls (`SCIClose`, `SCIRemoveSegment`,
//!   `SCIDisconnectSegment`, `SCIUnmapSegment`, `SCIRemoveSequence`) forget the handle.
//! * **One error table.** Errors of the safe API become `SCI_ERR_*` codes in one function
//!   (`errors::code`). Every `sci_error_t *error` argument may be NULL.
//! * **No unwinding into C.** Every entry point runs its body under `catch_unwind`; a panic
//!   is reported as `SCI_ERR_SYSTEM`.
//! * **State.** `SCIInitialize` reads the node and runtime directory from the environment
//!   (`REMORA_NODE`, `REMORA_RUNTIME_DIR`, `REMORA_DAEMON`, …); it may be called several
//!   times and the last matching `SCITerminate` drops the library state. Before that,
//!   `SCIOpen`, `SCIGetLocalNodeId` and the library-wide `SCIQuery` commands give
//!   `SCI_ERR_NOT_INITIALIZED`. Handles opened earlier stay usable until released.
//!
//! # Synthetic addresses
//!
//! Remora has no I/O bus. `SCIQuery(SCI_Q_LOCAL_SEGMENT | SCI_Q_REMOTE_SEGMENT, …_IOADDR)`
//! answers `(node << 32) | segment id` ([`segment_ioaddr`]), a value that names the segment
//! across the cluster; `SCIGetMapPhysAddr` answers 0.
//!
//! # Hardware-only calls (`SCI_ERR_NOT_SUPPORTED`, returning 0 or NULL where they return)
//!
//! * CSR registers: `SCIGetCSRRegister`, `SCISetCSRRegister`, `SCIGetLocalCSR`,
//!   `SCISetLocalCSR`.
//! * Physical memory and raw addresses: `SCIAttachPhysicalMemory`, `SCIConnectSCISpace`;
//!   `SCIGetMapPhysAddr` (no error argument: returns 0); `SCICreateSegment` with
//!   `SCI_FLAG_PHYSICAL`, `SCI_FLAG_CUDA_BUFFER` or `SCI_FLAG_SCIF_BUFFER`.
//! * PCIe requesters: `SCIRegisterPCIeRequester`, `SCIUnregisterPCIeRequester`.
//! * SmartIO device lending: `SCIBorrowDevice`, `SCIReturnDevice`,
//!   `SCIReleaseExclusiveBorrow`, `SCIGetDeviceList` (returns 0), `SCIGetFabricDeviceId`
//!   (no error argument: returns 0), `SCIConnectDeviceSegment`,
//!   `SCIConnectDeviceSegmentPath`, `SCIConnectDeviceMemory`, `SCICreateDeviceSegment`,
//!   `SCIMapRemoteSegmentForDevice`, `SCIUnmapRemoteSegmentForDevice`,
//!   `SCIMapLocalSegmentForDevice`, `SCIUnmapLocalSegmentForDevice`.
//! * Name directory: `SCIGetNodeIdByAdapterName`.
//! * Queries: `SCI_Q_DEVICE`, `SCI_Q_LOCAL_SEGMENT_PHYS_ADDR`,
//!   `SCI_Q_LOCAL_SEGMENT_VIRTUAL_KERNEL_ADDR`, `SCI_Q_MAP_IOADDR`, `SCI_Q_MAP_PHYS_ADDR`.
//!
//! `SCICacheSync` is not among them: Remora's memory is coherent, so it is a memory fence
//! that succeeds.
//!
//! # Not yet implemented (they arrive with later versions)
//!
//! * `SCIWaitForLocalSegmentEvent`, `SCIWaitForRemoteSegmentEvent`:
//!   `SCI_ERR_NOT_IMPLEMENTED` (the events task). Callbacks passed with
//!   `SCI_FLAG_USE_CALLBACK` are accepted but not called yet.
//! * Flags, `SCI_ERR_FLAG_NOT_IMPLEMENTED`: `SCI_FLAG_ASYNCHRONOUS_CONNECT` (events),
//!   `SCI_FLAG_BROADCAST` and `SCI_FLAG_ALLOW_UNICAST` (multicast), `SCI_FLAG_DMA_GLOBAL`
//!   on `SCICreateSegment` (DMA), `SCI_FLAG_LOCK_OPERATION` and the interrupt map flags,
//!   `SCI_FLAG_FORCE_REMOVE`.
//! * DMA: `SCIQuery(SCI_Q_DMA, SCI_Q_DMA_AVAILABLE)` answers 0 and
//!   `SCI_Q_DMA_CAPABILITIES` gives `SCI_ERR_DMA_NOT_AVAILABLE`; the DMA and interrupt
//!   calls are not exported yet.
//!
//! Unknown flags give `SCI_ERR_ILLEGAL_FLAG` everywhere.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]
// The exported functions keep the C API's names.
#![allow(non_snake_case)]

pub mod consts;
mod errors;
mod handles;
mod hardware;
mod library;
mod maps;
mod query;
mod segments;
pub mod types;

pub use hardware::*;
pub use library::*;
pub use maps::*;
pub use query::{segment_ioaddr, SCIQuery, REMORA_CARD_TYPE};
pub use segments::*;
pub use types::*;
