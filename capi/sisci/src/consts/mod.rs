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

mod errors;
mod flags;
mod query;
mod types;
mod values;

pub use errors::*;
pub use flags::*;
pub use query::*;
pub use types::*;
pub use values::*;

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
        // SCICheckSequence and SCIFlush (SCIStartSequence takes none).
        assert_disjoint(&[SCI_FLAG_NO_FLUSH, SCI_FLAG_NO_STORE_BARRIER, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY]);
        assert_eq!(FLUSH_CPU_BUFFERS_ONLY, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
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
