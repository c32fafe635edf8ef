//! Flags (`SCI_FLAG_*`), DMA channels, interrupt, cache and SmartIO flags.

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
/// `SCIFlush`, `SCICheckSequence`: only the CPU's write-combining buffers. Dolphin's
/// value is not public: Remora's differs from every flag of the calls that take it
/// (`SCI_FLAG_NO_FLUSH`, `SCI_FLAG_NO_STORE_BARRIER`).
pub const SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY: u32 = 0x4;
/// Old alias of `SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY`.
pub const FLUSH_CPU_BUFFERS_ONLY: u32 = 0x4;
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
