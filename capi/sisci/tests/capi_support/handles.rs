//! Queries, handles of the wrong kind, NULL handles and error pointers, registered memory.

use super::*;
use sisci::consts::*;
use sisci::*;
use std::ffi::{c_uint, CStr};
use std::ptr::null_mut;

/// SCIQuery commands that need no handle (after SCIInitialize).
pub(crate) fn queries_without_handles() {
    let mut buf = [0u8; 64];
    assert_eq!(query_string(SCI_Q_VENDORID, &mut buf), SCI_ERR_OK);
    let vendor = CStr::from_bytes_until_nul(&buf).unwrap().to_str().unwrap().to_owned();
    assert!(vendor.starts_with("Remora"), "{vendor}");
    // Truncated to the buffer, NUL-terminated, nothing written past it.
    let mut small = [0xaau8; 8];
    assert_eq!(query_string(SCI_Q_VENDORID, &mut small[..4]), SCI_ERR_OK);
    assert_eq!(&small[..4], &vendor.as_bytes()[..3].iter().copied().chain([0]).collect::<Vec<_>>()[..]);
    assert_eq!(small[4], 0xaa);
    assert_eq!(query_string(SCI_Q_VENDORID, &mut small[..0]), SCI_ERR_ILLEGAL_PARAMETER);
    let mut q = sci_query_string_t { str: null_mut(), length: 16 };
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_API, std::ptr::addr_of_mut!(q).cast(), 0));
    assert_eq!(query_string(SCI_Q_API, &mut buf), SCI_ERR_OK);
    let api = CStr::from_bytes_until_nul(&buf).unwrap().to_str().unwrap();
    assert!(api.contains("2.0"), "{api}");
    assert_eq!(query_string(SCI_Q_SISCI_DRIVER_VERSION, &mut buf), SCI_ERR_OK);

    assert_eq!(query_adapter(SCI_Q_ADAPTER_NODEID, 0, 0), (NODE, SCI_ERR_OK));
    assert_eq!(query_adapter(SCI_Q_ADAPTER_NODE_ID, 0, 0), (NODE, SCI_ERR_OK));
    assert_eq!(query_adapter(SCI_Q_ADAPTER_NODEID, 1, 0).1, SCI_ERR_NO_SUCH_ADAPTERNO);
    assert_eq!(query_adapter(SCI_Q_ADAPTER_NUMBER_OF_LINKS, 0, 0), (1, SCI_ERR_OK));
    assert_eq!(query_adapter(SCI_Q_ADAPTER_LINK_OPERATIONAL, 0, 0), (1, SCI_ERR_OK));
    assert_eq!(query_adapter(SCI_Q_ADAPTER_LINK_OPERATIONAL, 0, 1).1, SCI_ERR_ILLEGAL_PARAMETER);
    assert_eq!(query_adapter(SCI_Q_ADAPTER_CONFIGURED, 0, 0), (1, SCI_ERR_OK));
    assert_eq!(query_adapter(SCI_Q_ADAPTER_SERIAL_NUMBER, 0, 0), (0, SCI_ERR_OK));
    assert_eq!(query_adapter(SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT, 0, 0), (1, SCI_ERR_OK));
    assert_eq!(query_adapter(SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT, 0, 0), (1, SCI_ERR_OK));
    let (mtu, err) = query_adapter(SCI_Q_ADAPTER_DMA_MTU, 0, 0);
    assert!(err == SCI_ERR_OK && mtu > 0);
    let (min_dma, err) = query_adapter(SCI_Q_ADAPTER_SUGGESTED_MIN_DMA_SIZE, 0, 0);
    assert!(err == SCI_ERR_OK && min_dma > 0);
    let (card, err) = query_adapter(SCI_Q_ADAPTER_CARD_TYPE, 0, 0);
    assert_eq!((card, err), (REMORA_CARD_TYPE, SCI_ERR_OK));
    // SAFETY: static NUL-terminated strings.
    let (ty, fam) = unsafe {
        (CStr::from_ptr(SCIGetAdapterTypeString(card)), CStr::from_ptr(SCIGetAdapterFamilyString(0)))
    };
    assert!(!ty.is_empty() && !fam.is_empty());
    assert_eq!(query_adapter(999, 0, 0).1, SCI_ERR_ILLEGAL_QUERY);
    let mut qa = sci_query_adapter_t {
        localAdapterNo: 0,
        portNo: 0,
        subcommand: SCI_Q_ADAPTER_NODEID,
        data: null_mut(),
    };
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_ADAPTER, std::ptr::addr_of_mut!(qa).cast(), 0));

    let mut line: c_uint = 0;
    let mut qs = sci_query_system_t {
        subcommand: SCI_Q_SYSTEM_CPU_CACHE_LINE_SIZE,
        data: std::ptr::addr_of_mut!(line).cast(),
    };
    ok!(SCIQuery(SCI_Q_SYSTEM, std::ptr::addr_of_mut!(qs).cast(), 0));
    assert!(line.is_power_of_two() && line >= 16, "{line}");
    qs.subcommand = 99;
    fails!(SCI_ERR_ILLEGAL_QUERY, SCIQuery(SCI_Q_SYSTEM, std::ptr::addr_of_mut!(qs).cast(), 0));

    let mut avail: c_uint = 7;
    let mut qd = sci_query_dma_t {
        localAdapterNo: 0,
        subcommand: SCI_Q_DMA_AVAILABLE,
        data: std::ptr::addr_of_mut!(avail).cast(),
    };
    ok!(SCIQuery(SCI_Q_DMA, std::ptr::addr_of_mut!(qd).cast(), SCI_FLAG_DMA_GLOBAL));
    assert_eq!(avail, 1);
    let mut caps = sci_dma_capabilities_t::default();
    qd.subcommand = SCI_Q_DMA_CAPABILITIES;
    qd.data = std::ptr::addr_of_mut!(caps).cast();
    ok!(SCIQuery(SCI_Q_DMA, std::ptr::addr_of_mut!(qd).cast(), 0));
    assert!(caps.num_channels >= 1 && caps.max_vector_length >= 1 && caps.support_mem2io == 1, "{caps:?}");
    qd.data = null_mut();
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_DMA, std::ptr::addr_of_mut!(qd).cast(), 0));
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIQuery(SCI_Q_DMA, std::ptr::addr_of_mut!(qd).cast(), 0x8));

    fails!(SCI_ERR_ILLEGAL_QUERY, SCIQuery(77, std::ptr::addr_of_mut!(qs).cast(), 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_ADAPTER, null_mut(), 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_LOCAL_SEGMENT, null_mut(), 0));
    fails!(SCI_ERR_NOT_SUPPORTED, SCIQuery(SCI_Q_DEVICE, std::ptr::addr_of_mut!(qs).cast(), 0));
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIQuery(SCI_Q_SYSTEM, std::ptr::addr_of_mut!(qs).cast(), 0x1));
}

/// Every call family given a live handle of the wrong kind, or a forged value.
pub(crate) fn wrong_kind_handles(
    sd: sci_desc_t,
    seg: sci_local_segment_t,
    rseg: sci_remote_segment_t,
    map: sci_map_t,
    seq: sci_sequence_t,
) {
    const BAD: sci_error_t = SCI_ERR_ILLEGAL_PARAMETER;
    let mut buf = [0u8; 8];
    let mut local_var = 0u64;
    // A pointer to real memory and an arbitrary number: neither is followed.
    let forged_map: sci_map_t = std::ptr::addr_of_mut!(local_var).cast();
    let odd_map: sci_map_t = 0x1234 as sci_map_t;

    // Descriptors.
    fails!(BAD, SCIClose(as_kind(seg), 0));
    assert_eq!(fails!(BAD, SCIProbeNode(as_kind(map), 0, NODE, 0)), 0);
    let mut s: sci_local_segment_t = null_mut();
    fails!(BAD, SCICreateSegment(as_kind(rseg), &mut s, 99, 4096, None, null_mut(), 0));
    fails!(BAD, SCIAttachLocalSegment(as_kind(seq), &mut s, 10, null_mut(), None, null_mut(), 0));
    let mut r: sci_remote_segment_t = null_mut();
    fails!(BAD, SCIConnectSegment(as_kind(seg), &mut r, NODE, 10, 0, None, null_mut(), 100, 0));
    assert!(s.is_null() && r.is_null());

    // Local segments.
    fails!(BAD, SCIPrepareSegment(as_kind(map), 0, 0));
    fails!(BAD, SCISetSegmentAvailable(as_kind(rseg), 0, 0));
    fails!(BAD, SCISetSegmentUnavailable(as_kind(sd), 0, 0));
    fails!(BAD, SCIRemoveSegment(as_kind(rseg), 0));
    fails!(BAD, SCIShareSegment(as_kind(seq), 0));
    fails!(BAD, SCIRegisterSegmentMemory(buf.as_mut_ptr().cast(), 4096, as_kind(map), 0));
    assert_eq!(SCIGetLocalSegmentId(as_kind(rseg)), 0);
    assert_eq!(SCIGetLocalSegmentSize(as_kind(map)), 0);
    let mut m: sci_map_t = null_mut();
    assert!(fails!(BAD, SCIMapLocalSegment(as_kind(rseg), &mut m, 0, 4096, null_mut(), 0)).is_null());

    // Remote segments.
    fails!(BAD, SCIDisconnectSegment(as_kind(seg), 0));
    assert_eq!(SCIGetRemoteSegmentSize(as_kind(seg)), 0);
    assert_eq!(SCIGetRemoteSegmentId(as_kind(map)), 0);
    assert_eq!(SCIGetRemoteSegmentNodeId(as_kind(sd)), 0);
    assert!(fails!(BAD, SCIMapRemoteSegment(as_kind(seg), &mut m, 0, 4096, null_mut(), 0)).is_null());
    assert!(m.is_null());

    // Maps.
    fails!(BAD, SCIUnmapSegment(as_kind(seq), 0));
    fails!(BAD, SCIUnmapSegment(forged_map, 0));
    fails!(BAD, SCIUnmapSegment(odd_map, 0));
    assert!(SCIGetMapPointer(as_kind(seg)).is_null());
    assert!(SCIGetMapPointer(forged_map).is_null());
    let mut q: sci_sequence_t = null_mut();
    fails!(BAD, SCICreateMapSequence(as_kind(rseg), &mut q, 0));
    assert!(q.is_null());
    fails!(BAD, SCIMemCpy(null_mut(), buf.as_mut_ptr().cast(), as_kind(seg), 0, 8, 0));
    fails!(BAD, SCIMemCpy(null_mut(), buf.as_mut_ptr().cast(), odd_map, 0, 8, 0));
    fails!(BAD, SCIMemCopy(buf.as_mut_ptr().cast(), as_kind(sd), 0, 8, 0));
    fails!(BAD, SCICacheSync(as_kind(seq), buf.as_mut_ptr().cast(), 8, SCI_FLAG_CACHE_FLUSH));
    assert_eq!(SCIGetMapPhysAddr(map), 0);

    // Sequences.
    fails!(BAD, SCIRemoveSequence(as_kind(map), 0));
    assert_eq!(fails!(BAD, SCIStartSequence(as_kind(sd), 0)), SCI_SEQ_NOT_RETRIABLE);
    assert_eq!(fails!(BAD, SCICheckSequence(as_kind(seg), 0)), SCI_SEQ_NOT_RETRIABLE);
    fails!(BAD, SCIMemCpy(as_kind(map), buf.as_mut_ptr().cast(), map, 0, 8, 0));
    SCIStoreBarrier(as_kind(map), 0);

    // Events.
    fails!(BAD, SCIWaitForLocalSegmentEvent(as_kind(rseg), null_mut(), null_mut(), 10, 0));
    fails!(BAD, SCIWaitForRemoteSegmentEvent(as_kind(seg), null_mut(), 10, 0));

    // Queries.
    let mut qr = sci_query_remote_segment_t {
        segment: seg.cast(),
        subcommand: SCI_Q_REMOTE_SEGMENT_IOADDR,
        data: sci_query_segment_data_t::default(),
    };
    fails!(BAD, SCIQuery(SCI_Q_REMOTE_SEGMENT, std::ptr::addr_of_mut!(qr).cast(), 0));
    let mut qm = sci_query_map_t { map: seq.cast(), subcommand: SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET, data: 0 };
    fails!(BAD, SCIQuery(SCI_Q_MAP, std::ptr::addr_of_mut!(qm).cast(), 0));
}

/// NULL handles for every call family.
pub(crate) fn null_handles() {
    const BAD: sci_error_t = SCI_ERR_ILLEGAL_PARAMETER;
    let mut buf = [0u8; 8];
    let mut s: sci_local_segment_t = null_mut();
    let mut r: sci_remote_segment_t = null_mut();
    let mut m: sci_map_t = null_mut();
    let mut q: sci_sequence_t = null_mut();
    fails!(BAD, SCIClose(null_mut(), 0));
    assert_eq!(fails!(BAD, SCIProbeNode(null_mut(), 0, NODE, 0)), 0);
    fails!(BAD, SCICreateSegment(null_mut(), &mut s, 1, 4096, None, null_mut(), 0));
    fails!(BAD, SCIConnectSegment(null_mut(), &mut r, NODE, 1, 0, None, null_mut(), 10, 0));
    fails!(BAD, SCIPrepareSegment(null_mut(), 0, 0));
    fails!(BAD, SCISetSegmentAvailable(null_mut(), 0, 0));
    fails!(BAD, SCIRemoveSegment(null_mut(), 0));
    fails!(BAD, SCIRegisterSegmentMemory(buf.as_mut_ptr().cast(), 8, null_mut(), 0));
    assert_eq!(SCIGetLocalSegmentSize(null_mut()), 0);
    fails!(BAD, SCIDisconnectSegment(null_mut(), 0));
    assert_eq!(SCIGetRemoteSegmentSize(null_mut()), 0);
    assert!(fails!(BAD, SCIMapRemoteSegment(null_mut(), &mut m, 0, 8, null_mut(), 0)).is_null());
    assert!(fails!(BAD, SCIMapLocalSegment(null_mut(), &mut m, 0, 8, null_mut(), 0)).is_null());
    fails!(BAD, SCIUnmapSegment(null_mut(), 0));
    assert!(SCIGetMapPointer(null_mut()).is_null());
    fails!(BAD, SCICreateMapSequence(null_mut(), &mut q, 0));
    fails!(BAD, SCIRemoveSequence(null_mut(), 0));
    fails!(BAD, SCIStartSequence(null_mut(), 0));
    fails!(BAD, SCICheckSequence(null_mut(), 0));
    fails!(BAD, SCIMemCpy(null_mut(), buf.as_mut_ptr().cast(), null_mut(), 0, 8, 0));
    fails!(BAD, SCIMemCopy(buf.as_mut_ptr().cast(), null_mut(), 0, 8, 0));
    // SCIStoreBarrier, SCIFlush and SCICacheSync accept a NULL sequence or map.
    SCIStoreBarrier(null_mut(), 0);
    SCIFlush(null_mut(), 0);
    ok!(SCICacheSync(
        null_mut(),
        buf.as_mut_ptr().cast(),
        8,
        SCI_FLAG_CACHE_FLUSH | SCI_FLAG_CACHE_INVALIDATE
    ));
    fails!(SCI_ERR_ILLEGAL_FLAG, SCICacheSync(null_mut(), buf.as_mut_ptr().cast(), 8, 0x1));
    assert!(s.is_null() && r.is_null() && m.is_null() && q.is_null());
}

/// Failing and succeeding calls with a NULL error pointer neither crash nor misbehave.
pub(crate) fn null_error_pointers(map: sci_map_t) {
    let mut buf = *b"nullerr!";
    // SAFETY: NULL error pointers are allowed; the other pointers are live locals or
    // handles.
    unsafe {
        SCIClose(null_mut(), 0, null_mut());
        SCIRemoveSegment(null_mut(), 0, null_mut());
        SCIQuery(77, null_mut(), 0, null_mut());
        SCIMemCpy(null_mut(), buf.as_mut_ptr().cast(), map, usize::MAX - 2, 8, 0, null_mut());
        SCIMemCpy(null_mut(), buf.as_mut_ptr().cast(), map, 1000, 8, 0, null_mut());
        let mut back = [0u8; 8];
        SCIMemCpy(null_mut(), back.as_mut_ptr().cast(), map, 1000, 8, SCI_FLAG_BLOCK_READ, null_mut());
        assert_eq!(&back, b"nullerr!");
        SCIGetCSRRegister(null_mut(), 0, 0, 0, 0, null_mut());
        assert_eq!(SCIStartSequence(null_mut(), 0, null_mut()), SCI_SEQ_NOT_RETRIABLE);
    }
}

/// SCIRegisterSegmentMemory: page-aligned anonymous memory becomes a segment in place.
pub(crate) fn registered_memory(sd: sci_desc_t) {
    const LEN: usize = 256 * 1024;
    let mut seg: sci_local_segment_t = null_mut();
    ok!(SCICreateSegment(sd, &mut seg, 0, 0, None, null_mut(), SCI_FLAG_EMPTY | SCI_FLAG_AUTO_ID));
    let mut map: sci_map_t = null_mut();
    fails!(SCI_ERR_ILLEGAL_OPERATION, SCIMapLocalSegment(seg, &mut map, 0, 4096, null_mut(), 0));
    fails!(SCI_ERR_ILLEGAL_ADDRESS, SCIRegisterSegmentMemory(null_mut(), LEN, seg, 0));
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIRegisterSegmentMemory(null_mut(), LEN, seg, 0x1));

    // Page-aligned heap memory, never freed: it belongs to the segment from now on.
    let layout = std::alloc::Layout::from_size_align(LEN, 4096).unwrap();
    // SAFETY: the layout has a non-zero size.
    let mem = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!mem.is_null());
    // SAFETY: `mem` is a fresh allocation of LEN bytes.
    unsafe { mem.add(5000).copy_from_nonoverlapping(b"before".as_ptr(), 6) };
    ok!(SCIRegisterSegmentMemory(mem.cast(), LEN, seg, SCI_FLAG_LOCK_USER_MEM));
    assert_eq!(SCIGetLocalSegmentSize(seg), LEN);
    fails!(SCI_ERR_ILLEGAL_OPERATION, SCIRegisterSegmentMemory(mem.cast(), LEN, seg, 0));

    ok!(SCIPrepareSegment(seg, 0, 0));
    let ptr = ok!(SCIMapLocalSegment(seg, &mut map, 0, LEN, null_mut(), 0));
    assert_ne!(ptr.cast::<u8>(), mem, "the map is a second view of the memory");
    let mut back = [0u8; 6];
    ok!(SCIMemCpy(null_mut(), back.as_mut_ptr().cast(), map, 5000, 6, SCI_FLAG_BLOCK_READ));
    assert_eq!(&back, b"before");
    // Stores through the program's own pointer reach the segment, and the other way.
    // SAFETY: `mem` still addresses LEN bytes (now the segment's memory).
    unsafe { mem.add(6000).copy_from_nonoverlapping(b"after".as_ptr(), 5) };
    let mut after = [0u8; 5];
    ok!(SCIMemCpy(null_mut(), after.as_mut_ptr().cast(), map, 6000, 5, SCI_FLAG_BLOCK_READ));
    assert_eq!(&after, b"after");
    let mut via_map = *b"mapped";
    ok!(SCIMemCpy(null_mut(), via_map.as_mut_ptr().cast(), map, 7000, 6, 0));
    // SAFETY: as above.
    assert_eq!(unsafe { std::slice::from_raw_parts(mem.add(7000), 6) }, b"mapped");

    ok!(SCIUnmapSegment(map, 0));
    ok!(SCIRemoveSegment(seg, 0));
}
