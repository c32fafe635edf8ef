//! `libsisci.so`: Dolphin's SISCI API as a C ABI, over Remora's safe Rust API
//! (`remora-sisci`). C programs include Remora's `include/sisci_api.h` and link with
//! `-lsisci`; every function that header declares is exported here under its plain name,
//! with the header's signature. Rust code may call the same functions through the rlib.
//!
//! # How calls are made safe
//!
//! * **Handles are table keys.** `sci_desc_t`, `sci_local_segment_t`,
//!   `sci_remote_segment_t`, `sci_map_t`, `sci_sequence_t`, `sci_dma_queue_t`,
//!   `sci_local_interrupt_t`, `sci_remote_interrupt_t`, `sci_local_data_interrupt_t`,
//!   `sci_remote_data_interrupt_t`, `sci_block_transfer_t` and `sci_dma_channel_t` are never
//!   dereferenced: each is a non-zero integer that
//!   names an entry of a global table, with the kind of object in its low bits and a
//!   counter that never repeats above them. NULL, stale (released) and wrong-kind handles
//!   give `SCI_ERR_ILLEGAL_PARAMETER` (or 0/NULL, or `SCI_DMAQUEUE_ERROR` from
//!   `SCIDMAQueueState`, for the calls without an error argument); releasing calls
//!   (`SCIClose`, `SCIRemoveSegment`, `SCIDisconnectSegment`, `SCIUnmapSegment`,
//!   `SCIRemoveSequence`, `SCIRemoveDMAQueue`, `SCIRemoveInterrupt`,
//!   `SCIDisconnectInterrupt`, `SCIRemoveDataInterrupt`, `SCIDisconnectDataInterrupt`,
//!   `SCIReturnDMAChannel`, and `SCIWaitForBlockTransfer` once it reports the outcome)
//!   forget the handle.
//! * **Callbacks** (`sci_cb_*_t`) run only when the registering call gets
//!   `SCI_FLAG_USE_CALLBACK` and a non-NULL function (a function without the flag is
//!   ignored). They run on the library's event thread, receive the same handle value the
//!   program holds, and may call any function of the API: no lock of the library is held
//!   while they run. `SCI_CALLBACK_CANCEL` stops further calls.
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
//! * Queries: `SCI_Q_DEVICE`, `SCI_Q_LOCAL_SEGMENT_PHYS_ADDR`,
//!   `SCI_Q_LOCAL_SEGMENT_VIRTUAL_KERNEL_ADDR`, `SCI_Q_MAP_IOADDR`, `SCI_Q_MAP_PHYS_ADDR`,
//!   `SCI_Q_SYSTEM_HOSTBRIDGE`, and the adapter's `SCI_LINK_FREQUENCY`,
//!   `B_LINK_FREQUENCY`, `IO_BUS_FREQUENCY`, `BDF`, `LINK_WIDTH`, `LINK_SPEED`. Every
//!   other sub-command the reference lists answers a value (`adapter_facts`).
//! * Physical DMA: `SCIphDmaEnqueue`, `SCIphDmaStart` (returns `SCI_DMAQUEUE_IDLE`), and
//!   `SCICreateDMAQueue` with `SCI_FLAG_DMA_PHDMA`.
//! * Maps whose loads or stores start an adapter operation: `SCIMapRemoteSegment` /
//!   `SCIMapLocalSegment` with `SCI_FLAG_LOCK_OPERATION` (a load that is a remote
//!   fetch-and-add), `SCI_FLAG_CONDITIONAL_INTERRUPT_MAP` or
//!   `SCI_FLAG_UNCONDITIONAL_DATA_INTERRUPT_MAP` (a store that raises a remote interrupt):
//!   on an ordinary mapping nothing but memory sees a load or a store.
//!
//! `SCICacheSync` is not among them: Remora's memory is coherent, so it is a memory fence
//! that succeeds. Nor is `SCIGetNodeIdByAdapterName` (with `SCIGetNodeInfoByAdapterName`):
//! the name is a host name, resolved through the cluster file (`names`).
//!
//! # DMA, interrupts and events
//!
//! The node daemon is the DMA engine (`SCICreateDMAQueue`, `SCIStartDmaTransfer`,
//! `…Vec`, `…Mem`, the API 1.x `SCIEnqueueDMATransfer`/`SCIPostDMAQueue`/
//! `SCIResetDMAQueue`, `SCIDMAQueueState`, `SCIWaitForDMAQueue`, `SCIAbortDMAQueue`,
//! `SCIRemoveDMAQueue`, and `DISStartDmaTransfer`/`…Vec` under their `DIS` names); the
//! engine choices `SCI_FLAG_DMA_GLOBAL`/`SCI_FLAG_DMA_SYSDMA` are accepted without effect.
//! Its channels are reserved node-wide with `SCIRequestDMAChannel`, bound to a queue with
//! `SCIAssignDMAChannel` and freed with `SCIReturnDMAChannel` (`channels`). The API 1.x
//! block transfers copy between two maps, the asynchronous form on a thread of its own
//! (`copies`, with `SCIMemCpy_dual` and the copy routine of `SetSciMemCopyFunction`). Interrupts and data interrupts (payloads up to
//! `SCI_MAX_DATA_INTERRUPT_LENGTH` bytes) are shared-memory wake-ups. Segment events
//! (`SCIWaitForLocalSegmentEvent`, `SCIWaitForRemoteSegmentEvent`, the segment callbacks)
//! and `SCI_FLAG_ASYNCHRONOUS_CONNECT` work as the guide describes.
//!
//! `SCI_FLAG_SHARED_INT` works on interrupts and data interrupts: every creator of the
//! number hears each trigger, or gets each payload. `SCICreateNamedInterrupt` has Remora's
//! signature (Dolphin publishes only the name): the name fixes the number
//! (`flag_interrupts`). Flag interrupts (`SCIRegisterInterruptFlag`) and the conditional
//! calls (`SCIEnableConditionalInterrupt`, `SCIDisableConditionalInterrupt`,
//! `SCIGetConditionalInterruptTrigCounter`) fire on a peer's store to a word of a local
//! segment through an ordinary map, seen by a watcher thread of the library (no hardware
//! traps the store): a store that changes the word fires within about a millisecond.
//!
//! Reflective memory (`segments`, `maps`): `SCICreateSegment` with `SCI_FLAG_BROADCAST`
//! and a group (0–5) as the id makes this node's member of the group (`SCIPrepareSegment`
//! and `SCIMapLocalSegment` take the flag too); `SCIConnectSegment` to
//! `DIS_BROADCAST_NODEID_GROUP_ALL` with `SCI_FLAG_BROADCAST` is the group's multicast
//! segment, and one store through its map (`SCIMapRemoteSegment` with the flag) is in
//! every member's segment. The members of a group on one host share one memory, so this
//! costs a plain store; a late member sees the current contents. Across hosts (nodes of
//! the cluster file), the multicast map is a DSM map whose changed bytes go to one member
//! of every other host that has one (and into this host's memory): after `SCIFlush`
//! every member sees the store within about a network round trip, `SCIStoreBarrier`
//! waits until every member host has it, and a host's first member fetches the contents
//! at its join. A member host that is lost drops out; the others keep receiving.
//! `SCI_FLAG_ALLOW_UNICAST` lets ordinary connects reach a member.
//! `SCI_Q_ADAPTER_MCAST_MAX_GROUPS` answers 6.
//!
//! # Not yet implemented (they arrive with later versions)
//!
//! * Flags, `SCI_ERR_FLAG_NOT_IMPLEMENTED`: `SCI_FLAG_BROADCAST` on DMA transfers, data
//!   interrupts and `SCIAttachLocalSegment`. (`SCI_FLAG_SHARE_EXTERNAL` is accepted by the
//!   interrupt-creating calls: every interrupt is reachable by other processes.)
//!
//! Unknown flags give `SCI_ERR_ILLEGAL_FLAG` everywhere.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
// The exported functions keep the C API's names.
#![allow(non_snake_case)]

mod adapter_facts;
mod aliases;
mod callbacks;
mod channels;
pub mod consts;

/// Dolphin's data symbols for the numeric constants (`_SISCI_PUBLIC_CONST_<name>`),
/// generated from [`consts`] by the build script.
#[allow(non_upper_case_globals, unsafe_code)] // exported `no_mangle` statics, nothing else
pub mod abi_consts {
    include!(concat!(env!("OUT_DIR"), "/abi_consts.rs"));
}
mod copies;
mod dma;
mod errors;
mod flag_interrupts;
mod handles;
mod hardware;
mod interrupts;
mod library;
mod maps;
mod names;
mod query;
mod segment_events;
mod segments;
mod sequences;
pub mod types;

pub use channels::*;
pub use copies::*;
pub use dma::*;
pub use flag_interrupts::*;
pub use hardware::*;
pub use interrupts::*;
pub use library::*;
pub use maps::*;
pub use names::*;
pub use query::{segment_ioaddr, SCIQuery, REMORA_CARD_TYPE};
pub use segment_events::*;
pub use segments::*;
pub use sequences::*;
pub use types::*;

/// A C timeout in milliseconds as the safe API takes it: `SCI_INFINITE_TIMEOUT` is no
/// limit.
pub(crate) fn wait_time(ms: std::ffi::c_uint) -> Option<std::time::Duration> {
    match ms {
        consts::SCI_INFINITE_TIMEOUT => None,
        ms => Some(std::time::Duration::from_millis(u64::from(ms))),
    }
}
