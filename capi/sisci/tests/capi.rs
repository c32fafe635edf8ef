//! The C ABI of `libsisci`, called directly through the rlib: the ordered life of a
//! program (initialise, open, create, connect, map, copy, query, release, terminate),
//! every kind of bad handle, NULL error pointers, and the hardware-only calls.
//!
//! The library keeps process-wide state, so everything that depends on `SCIInitialize`
//! runs in one ordered test (`scenario`); the other tests use no library state.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use sisci::consts::*;
use sisci::*;
use std::ffi::{c_uint, c_void, CStr};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The node this test process belongs to.
const NODE: u32 = 12;
/// A node no daemon plays.
const NO_NODE: u32 = 200;

/// Call a SISCI function with a fresh error argument appended; `(return value, error)`.
macro_rules! sci {
    ($f:ident($($a:expr),* $(,)?)) => {{
        let mut err: sci_error_t = 0xdead_beef;
        // SAFETY: every pointer argument the tests pass is NULL, a live local, or a
        // deliberately bogus handle value (which the library never dereferences).
        #[allow(unused_unsafe)]
        let ret = unsafe { $f($($a,)* &mut err) };
        (ret, err)
    }};
}

/// Like `sci!`, and assert the call succeeded; the return value.
macro_rules! ok {
    ($f:ident($($a:expr),* $(,)?)) => {{
        let (ret, err) = sci!($f($($a),*));
        assert_eq!(err, SCI_ERR_OK, "{} failed: {:#x} {}", stringify!($f), err, describe(err));
        ret
    }};
}

/// Assert a call failed with `code`; the return value.
macro_rules! fails {
    ($code:expr, $f:ident($($a:expr),* $(,)?)) => {{
        let (ret, err) = sci!($f($($a),*));
        assert_eq!(err, $code, "{}: got {:#x} {}", stringify!($f), err, describe(err));
        ret
    }};
}

fn describe(code: sci_error_t) -> String {
    // SAFETY: SCIGetErrorString returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(SCIGetErrorString(code)) }.to_string_lossy().into_owned()
}

/// Reinterpret a handle as another kind (what a confused C program might pass).
fn as_kind<A, B>(h: *mut A) -> *mut B {
    h.cast::<B>()
}

fn query_string(command: u32, buf: &mut [u8]) -> sci_error_t {
    let mut q = sci_query_string_t { str: buf.as_mut_ptr().cast(), length: buf.len() as c_uint };
    sci!(SCIQuery(command, std::ptr::addr_of_mut!(q).cast(), 0)).1
}

fn query_adapter(sub: u32, adapter: u32, port: u32) -> (u32, sci_error_t) {
    let mut v: c_uint = 0xffff_ffff;
    let mut q = sci_query_adapter_t {
        localAdapterNo: adapter,
        portNo: port,
        subcommand: sub,
        data: std::ptr::addr_of_mut!(v).cast(),
    };
    let err = sci!(SCIQuery(SCI_Q_ADAPTER, std::ptr::addr_of_mut!(q).cast(), 0)).1;
    (v, err)
}

#[test]
fn scenario() {
    // ---- Before SCIInitialize -------------------------------------------------------
    let mut sd: sci_desc_t = null_mut();
    fails!(SCI_ERR_NOT_INITIALIZED, SCIOpen(&mut sd, 0));
    let mut node: c_uint = 0;
    fails!(SCI_ERR_NOT_INITIALIZED, SCIGetLocalNodeId(0, &mut node, 0));
    let mut buf = [0u8; 64];
    assert_eq!(query_string(SCI_Q_VENDORID, &mut buf), SCI_ERR_NOT_INITIALIZED);
    // SAFETY: a NULL error pointer is allowed.
    unsafe { SCIOpen(&mut sd, 0, null_mut()) };
    assert!(sd.is_null());
    SCITerminate(); // unmatched: harmless

    let cleanup = remora_testkit::Harness::new();
    std::env::set_var("REMORA_RUNTIME_DIR", cleanup.runtime_dir());
    std::env::set_var("REMORA_DAEMON", remora_testkit::daemon_path());
    std::env::set_var("REMORA_IDLE_EXIT", "5");
    std::env::set_var("REMORA_NODE", "not-a-number");
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIInitialize(0));
    std::env::set_var("REMORA_NODE", NODE.to_string());
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIInitialize(0x4));
    fails!(SCI_ERR_NOT_INITIALIZED, SCIOpen(&mut sd, 0));

    // ---- Initialise (twice), open ----------------------------------------------------
    ok!(SCIInitialize(0));
    ok!(SCIInitialize(0));
    ok!(SCIGetLocalNodeId(0, &mut node, 0));
    assert_eq!(node, NODE);
    fails!(SCI_ERR_NO_SUCH_ADAPTERNO, SCIGetLocalNodeId(1, &mut node, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIGetLocalNodeId(0, null_mut(), 0));

    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIOpen(null_mut(), 0));
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIOpen(&mut sd, 0x10));
    ok!(SCIOpen(&mut sd, SCI_FLAG_THREAD_SAFE));
    assert!(!sd.is_null());
    let mut sd2: sci_desc_t = null_mut();
    // SAFETY: `sd2` is a live local; a NULL error pointer is allowed.
    unsafe { SCIOpen(&mut sd2, 0, null_mut()) };
    assert!(!sd2.is_null() && sd2 != sd);

    assert_eq!(ok!(SCIProbeNode(sd, 0, NODE, 0)), 1);
    assert_eq!(fails!(SCI_ERR_NO_SUCH_NODEID, SCIProbeNode(sd, 0, NO_NODE, 0)), 0);
    assert_eq!(fails!(SCI_ERR_NO_SUCH_ADAPTERNO, SCIProbeNode(sd, 3, NODE, 0)), 0);

    // ---- Queries ---------------------------------------------------------------------
    queries_without_handles();

    // ---- Local segment: create, flags, prepare, available ----------------------------
    const ID: u32 = 10;
    const SIZE: usize = 8192;
    let mut seg: sci_local_segment_t = null_mut();
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCICreateSegment(sd, null_mut(), ID, SIZE, None, null_mut(), 0));
    fails!(SCI_ERR_ILLEGAL_FLAG, SCICreateSegment(sd, &mut seg, ID, SIZE, None, null_mut(), 0x8000));
    fails!(
        SCI_ERR_FLAG_NOT_IMPLEMENTED,
        SCICreateSegment(sd, &mut seg, ID, SIZE, None, null_mut(), SCI_FLAG_BROADCAST)
    );
    fails!(
        SCI_ERR_NOT_SUPPORTED,
        SCICreateSegment(sd, &mut seg, ID, SIZE, None, null_mut(), SCI_FLAG_PHYSICAL)
    );
    assert!(seg.is_null());
    ok!(SCICreateSegment(sd, &mut seg, ID, SIZE, None, null_mut(), SCI_FLAG_USE_CALLBACK));
    assert_eq!(SCIGetLocalSegmentId(seg), ID);
    assert_eq!(SCIGetLocalSegmentSize(seg), SIZE);
    let mut dup: sci_local_segment_t = null_mut();
    fails!(SCI_ERR_SEGMENTID_USED, SCICreateSegment(sd2, &mut dup, ID, SIZE, None, null_mut(), 0));

    let mut auto: sci_local_segment_t = null_mut();
    ok!(SCICreateSegment(sd, &mut auto, 0, 4096, None, null_mut(), SCI_FLAG_AUTO_ID));
    assert_ne!(SCIGetLocalSegmentId(auto), 0);
    assert_ne!(auto, seg);
    ok!(SCIRemoveSegment(auto, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSegment(auto, 0));
    assert_eq!(SCIGetLocalSegmentSize(auto), 0);

    fails!(SCI_ERR_SEGMENT_NOT_PREPARED, SCISetSegmentAvailable(seg, 0, 0));
    fails!(SCI_ERR_NO_SUCH_ADAPTERNO, SCIPrepareSegment(seg, 1, 0));
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIPrepareSegment(seg, 0, 0x100));
    ok!(SCIPrepareSegment(seg, 0, SCI_FLAG_DMA_SOURCE_ONLY));
    ok!(SCISetSegmentAvailable(seg, 0, 0));
    ok!(SCISetSegmentUnavailable(seg, 0, SCI_FLAG_NOTIFY));
    ok!(SCISetSegmentAvailable(seg, 0, 0));

    // A descriptor with a live segment cannot close.
    fails!(SCI_ERR_BUSY, SCIClose(sd, 0));

    // ---- Local map ---------------------------------------------------------------------
    let mut lmap: sci_map_t = null_mut();
    let lptr = ok!(SCIMapLocalSegment(seg, &mut lmap, 0, SIZE, null_mut(), 0));
    assert!(!lptr.is_null());
    assert_eq!(SCIGetMapPointer(lmap), lptr);
    fails!(SCI_ERR_BUSY, SCIRemoveSegment(seg, 0));

    // ---- Remote segment ----------------------------------------------------------------
    let mut rseg: sci_remote_segment_t = null_mut();
    let inf = SCI_INFINITE_TIMEOUT;
    fails!(
        SCI_ERR_NO_SUCH_NODEID,
        SCIConnectSegment(sd, &mut rseg, NO_NODE, ID, 0, None, null_mut(), inf, 0)
    );
    // An asynchronous connect returns a handle at once; its outcome is an event.
    let mut pending: sci_remote_segment_t = null_mut();
    ok!(SCIConnectSegment(
        sd,
        &mut pending,
        NODE,
        ID,
        0,
        None,
        null_mut(),
        inf,
        SCI_FLAG_ASYNCHRONOUS_CONNECT
    ));
    let mut status: sci_error_t = 0xdead;
    assert_eq!(ok!(SCIWaitForRemoteSegmentEvent(pending, &mut status, 10_000, 0)), SCI_CB_CONNECT);
    assert_eq!(status, SCI_ERR_OK);
    assert_eq!(SCIGetRemoteSegmentSize(pending), SIZE);
    ok!(SCIDisconnectSegment(pending, 0));
    fails!(
        SCI_ERR_NO_SUCH_SEGMENT,
        SCIConnectSegment(sd, &mut rseg, NODE, ID + 1, 0, None, null_mut(), 100, 0)
    );
    fails!(
        SCI_ERR_ILLEGAL_PARAMETER,
        SCIConnectSegment(sd, null_mut(), NODE, ID, 0, None, null_mut(), inf, 0)
    );
    assert!(rseg.is_null());
    ok!(SCIConnectSegment(sd, &mut rseg, NODE, ID, 0, None, null_mut(), inf, SCI_FLAG_USE_CALLBACK));
    assert_eq!(SCIGetRemoteSegmentSize(rseg), SIZE);
    assert_eq!(SCIGetRemoteSegmentId(rseg), ID);
    assert_eq!(SCIGetRemoteSegmentNodeId(rseg), NODE);

    // ---- Remote maps -------------------------------------------------------------------
    let mut rmap: sci_map_t = null_mut();
    fails!(SCI_ERR_OUT_OF_RANGE, SCIMapRemoteSegment(rseg, &mut rmap, 4096, SIZE, null_mut(), 0));
    fails!(SCI_ERR_SIZE_ALIGNMENT, SCIMapRemoteSegment(rseg, &mut rmap, 0, 0, null_mut(), 0));
    fails!(
        SCI_ERR_ILLEGAL_ADDRESS,
        SCIMapRemoteSegment(rseg, &mut rmap, 0, SIZE, null_mut(), SCI_FLAG_FIXED_MAP_ADDR)
    );
    fails!(
        SCI_ERR_NOT_SUPPORTED,
        SCIMapRemoteSegment(rseg, &mut rmap, 0, SIZE, null_mut(), SCI_FLAG_LOCK_OPERATION)
    );
    fails!(
        SCI_ERR_NOT_SUPPORTED,
        SCIMapRemoteSegment(rseg, &mut rmap, 0, SIZE, null_mut(), SCI_FLAG_CONDITIONAL_INTERRUPT_MAP)
    );
    fails!(
        SCI_ERR_FLAG_NOT_IMPLEMENTED,
        SCIMapRemoteSegment(rseg, &mut rmap, 0, SIZE, null_mut(), SCI_FLAG_BROADCAST)
    );
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIMapRemoteSegment(rseg, &mut rmap, 0, SIZE, null_mut(), 0x1_0000));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIMapRemoteSegment(rseg, null_mut(), 0, SIZE, null_mut(), 0));
    assert!(rmap.is_null());
    let hints = SCI_FLAG_NO_MEMORY_LOOPBACK | SCI_FLAG_READ_PREFETCH_AGGR_HOLD_MAP | SCI_FLAG_IO_MAP_IOSPACE;
    let rptr = ok!(SCIMapRemoteSegment(rseg, &mut rmap, 0, SIZE, null_mut(), hints));
    assert!(!rptr.is_null());
    assert_ne!(rptr.cast::<c_void>(), lptr, "each map is its own mapping");
    fails!(SCI_ERR_BUSY, SCIDisconnectSegment(rseg, 0));

    // ---- Copies through the maps -------------------------------------------------------
    let mut hello = *b"hello, remora";
    ok!(SCIMemCpy(null_mut(), hello.as_mut_ptr().cast(), rmap, 100, hello.len(), 0));
    let mut back = [0u8; 13];
    ok!(SCIMemCpy(null_mut(), back.as_mut_ptr().cast(), lmap, 100, back.len(), SCI_FLAG_BLOCK_READ));
    assert_eq!(&back, b"hello, remora");
    // SAFETY: `lptr` maps SIZE bytes of the segment; 100..113 is inside.
    let direct = unsafe { std::slice::from_raw_parts(lptr.cast::<u8>().add(100), 13) };
    assert_eq!(direct, b"hello, remora");
    fails!(
        SCI_ERR_OUT_OF_RANGE,
        SCIMemCpy(null_mut(), hello.as_mut_ptr().cast(), rmap, SIZE - 4, hello.len(), 0)
    );
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(null_mut(), null_mut(), rmap, 0, 8, 0));
    ok!(SCIMemCpy(null_mut(), null_mut(), rmap, 0, 0, 0));
    fails!(
        SCI_ERR_OUT_OF_RANGE,
        SCIMemCpy(null_mut(), hello.as_mut_ptr().cast(), rmap, usize::MAX - 2, 8, 0)
    );
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIMemCpy(null_mut(), hello.as_mut_ptr().cast(), rmap, 0, 4, 0x1));
    // The buffer may not be the mapped range itself.
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(null_mut(), rptr.cast(), rmap, 0, 16, 0));
    // API 1.x form.
    let mut word = *b"1.x!";
    ok!(SCIMemCopy(word.as_mut_ptr().cast(), rmap, 200, 4, 0));
    let mut word_back = [0u8; 4];
    ok!(SCIMemCopy(word_back.as_mut_ptr().cast(), lmap, 200, 4, SCI_FLAG_BLOCK_READ));
    assert_eq!(&word_back, b"1.x!");
    fails!(SCI_ERR_OUT_OF_RANGE, SCIMemCopy(word.as_mut_ptr().cast(), rmap, SIZE as c_uint, 4, 0));

    // SCIMemWrite into a mapped address, and outside every map.
    let mut abc = *b"abc";
    // SAFETY: 300..303 is inside the remote map.
    let target = unsafe { rptr.cast::<u8>().add(300) }.cast::<c_void>();
    ok!(SCIMemWrite(abc.as_mut_ptr().cast(), target, 3, 0));
    let mut abc_back = [0u8; 3];
    ok!(SCIMemCpy(null_mut(), abc_back.as_mut_ptr().cast(), lmap, 300, 3, SCI_FLAG_BLOCK_READ));
    assert_eq!(&abc_back, b"abc");
    let mut elsewhere = [0u8; 16];
    fails!(SCI_ERR_OUT_OF_RANGE, SCIMemWrite(abc.as_mut_ptr().cast(), elsewhere.as_mut_ptr().cast(), 3, 0));
    // SAFETY: SIZE - 1 is the last byte of the map; the call must refuse the 3 bytes.
    let edge = unsafe { rptr.cast::<u8>().add(SIZE - 1) }.cast::<c_void>();
    fails!(SCI_ERR_OUT_OF_RANGE, SCIMemWrite(abc.as_mut_ptr().cast(), edge, 3, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIMemWrite(null_mut(), target, 3, 0));
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIMemWrite(abc.as_mut_ptr().cast(), target, 3, 0x2));

    // A read-only map refuses writes and allows reads.
    let mut romap: sci_map_t = null_mut();
    ok!(SCIMapRemoteSegment(rseg, &mut romap, 0, 4096, null_mut(), SCI_FLAG_READONLY_MAP));
    fails!(SCI_ERR_ILLEGAL_OPERATION, SCIMemCpy(null_mut(), hello.as_mut_ptr().cast(), romap, 0, 4, 0));
    let mut ro_back = [0u8; 13];
    ok!(SCIMemCpy(null_mut(), ro_back.as_mut_ptr().cast(), romap, 100, 13, SCI_FLAG_BLOCK_READ));
    assert_eq!(&ro_back, b"hello, remora");
    ok!(SCIUnmapSegment(romap, 0));

    // ---- Sequences ---------------------------------------------------------------------
    let mut seq: sci_sequence_t = null_mut();
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCICreateMapSequence(rmap, null_mut(), 0));
    ok!(SCICreateMapSequence(rmap, &mut seq, SCI_FLAG_FAST_BARRIER));
    assert_eq!(ok!(SCIStartSequence(seq, 0)), SCI_SEQ_OK);
    ok!(SCIMemCpy(seq, hello.as_mut_ptr().cast(), rmap, 0, hello.len(), SCI_FLAG_ERROR_CHECK));
    assert_eq!(ok!(SCICheckSequence(seq, 0)), SCI_SEQ_OK);
    assert_eq!(ok!(SCICheckSequence(seq, SCI_FLAG_NO_FLUSH | SCI_FLAG_NO_STORE_BARRIER)), SCI_SEQ_OK);
    fails!(SCI_ERR_ILLEGAL_FLAG, SCICheckSequence(seq, 0x4));
    SCIStoreBarrier(seq, 0);
    SCIFlush(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
    SCIFlush(null_mut(), 0);
    SCIFlushReadBuffers(seq);
    fails!(SCI_ERR_BUSY, SCIUnmapSegment(rmap, 0));

    // ---- Handle-based queries ----------------------------------------------------------
    let mut ql = sci_query_local_segment_t {
        segment: seg.cast(),
        subcommand: SCI_Q_LOCAL_SEGMENT_IOADDR,
        data: sci_query_segment_data_t::default(),
    };
    ok!(SCIQuery(SCI_Q_LOCAL_SEGMENT, std::ptr::addr_of_mut!(ql).cast(), 0));
    assert_eq!(ql.data.ioaddr, (u64::from(NODE) << 32) | u64::from(ID));
    assert_eq!(ql.data.ioaddr, segment_ioaddr(NODE, ID));
    ql.subcommand = SCI_Q_REMOTE_SEGMENT_IOADDR;
    fails!(SCI_ERR_ILLEGAL_QUERY, SCIQuery(SCI_Q_LOCAL_SEGMENT, std::ptr::addr_of_mut!(ql).cast(), 0));
    ql.subcommand = SCI_Q_LOCAL_SEGMENT_PHYS_ADDR;
    fails!(SCI_ERR_NOT_SUPPORTED, SCIQuery(SCI_Q_LOCAL_SEGMENT, std::ptr::addr_of_mut!(ql).cast(), 0));
    ql.subcommand = SCI_Q_LOCAL_SEGMENT_IOADDR;
    ql.segment = rseg.cast();
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_LOCAL_SEGMENT, std::ptr::addr_of_mut!(ql).cast(), 0));

    let mut qr = sci_query_remote_segment_t {
        segment: rseg.cast(),
        subcommand: SCI_Q_REMOTE_SEGMENT_IOADDR,
        data: sci_query_segment_data_t::default(),
    };
    ok!(SCIQuery(SCI_Q_REMOTE_SEGMENT, std::ptr::addr_of_mut!(qr).cast(), 0));
    assert_eq!(qr.data.ioaddr, segment_ioaddr(NODE, ID));

    let mut qm = sci_query_map_t { map: rmap.cast(), subcommand: SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET, data: 7 };
    ok!(SCIQuery(SCI_Q_MAP, std::ptr::addr_of_mut!(qm).cast(), 0));
    assert_eq!(qm.data, 1);
    qm.subcommand = SCI_Q_MAP_PHYS_ADDR;
    fails!(SCI_ERR_NOT_SUPPORTED, SCIQuery(SCI_Q_MAP, std::ptr::addr_of_mut!(qm).cast(), 0));
    qm.subcommand = 999;
    fails!(SCI_ERR_ILLEGAL_QUERY, SCIQuery(SCI_Q_MAP, std::ptr::addr_of_mut!(qm).cast(), 0));

    // ---- Sharing and attaching -----------------------------------------------------------
    let mut attached: sci_local_segment_t = null_mut();
    let mut attached_size = 0usize;
    fails!(
        SCI_ERR_ACCESS,
        SCIAttachLocalSegment(sd2, &mut attached, ID, &mut attached_size, None, null_mut(), 0)
    );
    ok!(SCIShareSegment(seg, 0));
    ok!(SCIAttachLocalSegment(sd2, &mut attached, ID, &mut attached_size, None, null_mut(), 0));
    assert_eq!(attached_size, SIZE);
    assert_eq!(SCIGetLocalSegmentId(attached), ID);
    ok!(SCIRemoveSegment(attached, 0));

    // ---- Wrong-kind, forged and NULL handles, family by family ------------------------
    wrong_kind_handles(sd, seg, rseg, rmap, seq);
    null_handles();
    null_error_pointers(rmap);

    // ---- Segment events ------------------------------------------------------------------
    // `seg` got SCI_FLAG_USE_CALLBACK without a function: its events queue up for waits.
    let (mut src, mut adapter) = (0u32, 7u32);
    let first = ok!(SCIWaitForLocalSegmentEvent(seg, &mut src, &mut adapter, 5000, 0));
    assert_eq!((first, src, adapter), (SCI_CB_CONNECT, NODE, 0));
    loop {
        let (reason, err) = sci!(SCIWaitForLocalSegmentEvent(seg, null_mut(), null_mut(), 50, 0));
        if err == SCI_ERR_TIMEOUT {
            assert_eq!(reason, 0);
            break;
        }
        assert_eq!(err, SCI_ERR_OK);
        assert!(reason == SCI_CB_CONNECT || reason == SCI_CB_DISCONNECT, "{reason}");
    }
    fails!(SCI_ERR_ILLEGAL_FLAG, SCIWaitForLocalSegmentEvent(seg, &mut src, &mut adapter, 10, 0x2));
    let mut status: sci_error_t = 0;
    fails!(SCI_ERR_TIMEOUT, SCIWaitForRemoteSegmentEvent(rseg, &mut status, 10, 0));

    // ---- DMA and interrupts, with callbacks ------------------------------------------------
    dma_and_interrupts(sd, seg, rseg, lmap);

    // ---- Release in order ----------------------------------------------------------------
    ok!(SCIRemoveSequence(seq, 0));
    ok!(SCIUnmapSegment(rmap, 0));
    ok!(SCIDisconnectSegment(rseg, 0));
    ok!(SCIUnmapSegment(lmap, 0));
    ok!(SCIRemoveSegment(seg, 0));
    ok!(SCIClose(sd2, 0));

    // Every released handle is stale now.
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSequence(seq, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIStartSequence(seq, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIUnmapSegment(rmap, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(null_mut(), hello.as_mut_ptr().cast(), rmap, 0, 4, 0));
    fails!(SCI_ERR_OUT_OF_RANGE, SCIMemWrite(abc.as_mut_ptr().cast(), target, 3, 0));
    assert!(SCIGetMapPointer(lmap).is_null());
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectSegment(rseg, 0));
    assert_eq!(SCIGetRemoteSegmentSize(rseg), 0);
    assert_eq!(SCIGetRemoteSegmentId(rseg), 0);
    assert_eq!(SCIGetRemoteSegmentNodeId(rseg), 0);
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSegment(seg, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIPrepareSegment(seg, 0, 0));
    assert_eq!(SCIGetLocalSegmentId(seg), 0);
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIClose(sd2, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIProbeNode(sd2, 0, NODE, 0));

    // ---- Registered user memory ------------------------------------------------------------
    registered_memory(sd);

    // ---- Terminate -------------------------------------------------------------------------
    ok!(SCIClose(sd, 0));
    SCITerminate();
    let mut sd3: sci_desc_t = null_mut();
    ok!(SCIOpen(&mut sd3, 0)); // one SCIInitialize is still unmatched
    SCITerminate();
    let mut sd4: sci_desc_t = null_mut();
    fails!(SCI_ERR_NOT_INITIALIZED, SCIOpen(&mut sd4, 0));
    // A descriptor opened earlier stays usable until it is closed.
    assert_eq!(ok!(SCIProbeNode(sd3, 0, NODE, 0)), 1);
    ok!(SCIClose(sd3, 0));
    drop(cleanup);
}

/// SCIQuery commands that need no handle (after SCIInitialize).
fn queries_without_handles() {
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
fn wrong_kind_handles(
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
fn null_handles() {
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
fn null_error_pointers(map: sci_map_t) {
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
fn registered_memory(sd: sci_desc_t) {
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

#[test]
fn hardware_only_calls_are_not_supported() {
    const NS: sci_error_t = SCI_ERR_NOT_SUPPORTED;
    let mut seg: sci_remote_segment_t = null_mut();
    let mut dev: sci_smartio_device_t = null_mut();
    let mut ioaddr: sci_ioaddr_t = 0;
    let mut fdids = [0 as c_uint; 4];
    let mut list: dis_nodeId_list_t = [0; 5];
    let mut kind: dis_virt_adapter_t = 0;
    let mut name = *b"host\0";
    fails!(NS, SCIGetNodeIdByAdapterName(name.as_mut_ptr().cast(), &mut list, &mut kind, 0));
    fails!(NS, SCIAttachPhysicalMemory(0, null_mut(), 0, 4096, null_mut(), 0));
    fails!(NS, SCIConnectSCISpace(null_mut(), 0, &mut seg, sci_address_t::default(), 4096, 0));
    assert_eq!(fails!(NS, SCIGetCSRRegister(null_mut(), 0, 4, 0, 0)), 0);
    fails!(NS, SCISetCSRRegister(null_mut(), 0, 4, 0, 1, 0));
    assert_eq!(fails!(NS, SCIGetLocalCSR(null_mut(), 0, 0, 0)), 0);
    fails!(NS, SCISetLocalCSR(null_mut(), 0, 0, 1, 0));
    fails!(NS, SCIRegisterPCIeRequester(null_mut(), 0, 1, 0, 0));
    fails!(NS, SCIUnregisterPCIeRequester(null_mut(), 0, 1, 0, 0));
    fails!(NS, SCIBorrowDevice(null_mut(), &mut dev, 1, 0));
    fails!(NS, SCIReturnDevice(dev, 0));
    fails!(NS, SCIReleaseExclusiveBorrow(dev, 0));
    assert_eq!(fails!(NS, SCIGetDeviceList(null_mut(), fdids.as_mut_ptr(), fdids.len(), null(), 0)), 0);
    assert_eq!(SCIGetFabricDeviceId(dev), 0);
    fails!(NS, SCIConnectDeviceSegment(dev, &mut seg, 1, SCI_MEMTYPE_BAR, None, null_mut(), 0));
    fails!(NS, SCIConnectDeviceSegmentPath(dev, &mut seg, 0, 1, SCI_MEMTYPE_BAR, None, null_mut(), 0));
    fails!(NS, SCIConnectDeviceMemory(null_mut(), &mut seg, 0, dev, 0, 0, SCI_FLAG_BAR));
    fails!(NS, SCICreateDeviceSegment(dev, 1, 4096, SCI_MEMTYPE_PRIVATE, SCI_MEMACCESS_HOST_READ, 0));
    fails!(NS, SCIMapRemoteSegmentForDevice(seg, dev, &mut ioaddr, 0, 4096, 0));
    fails!(NS, SCIUnmapRemoteSegmentForDevice(seg, dev, 0));
    fails!(NS, SCIMapLocalSegmentForDevice(null_mut(), 0, dev, &mut ioaddr, 0, 4096, 0));
    fails!(NS, SCIUnmapLocalSegmentForDevice(null_mut(), 0, dev, 0));
    assert_eq!(SCIGetMapPhysAddr(null_mut()), 0);
    fails!(NS, SCIphDmaEnqueue(null_mut(), 4096, 0, 4, 0, 0, 0));
    assert_eq!(fails!(NS, SCIphDmaStart(null_mut(), None, null_mut(), 0)), SCI_DMAQUEUE_IDLE);
    assert!(seg.is_null() && dev.is_null() && ioaddr == 0 && list == [0; 5]);
    // SAFETY: NULL error pointers are allowed.
    unsafe { SCIReturnDevice(null_mut(), 0, null_mut()) };
}

#[test]
fn every_error_code_has_a_description() {
    let codes = [
        SCI_ERR_OK,
        SCI_ERR_BUSY,
        SCI_ERR_FLAG_NOT_IMPLEMENTED,
        SCI_ERR_ILLEGAL_FLAG,
        SCI_ERR_NOSPC,
        SCI_ERR_API_NOSPC,
        SCI_ERR_HW_NOSPC,
        SCI_ERR_NOT_IMPLEMENTED,
        SCI_ERR_ILLEGAL_ADAPTERNO,
        SCI_ERR_NO_SUCH_ADAPTERNO,
        SCI_ERR_TIMEOUT,
        SCI_ERR_OUT_OF_RANGE,
        SCI_ERR_NO_SUCH_SEGMENT,
        SCI_ERR_ILLEGAL_NODEID,
        SCI_ERR_CONNECTION_REFUSED,
        SCI_ERR_SEGMENT_NOT_CONNECTED,
        SCI_ERR_SIZE_ALIGNMENT,
        SCI_ERR_OFFSET_ALIGNMENT,
        SCI_ERR_ILLEGAL_PARAMETER,
        SCI_ERR_MAX_ENTRIES,
        SCI_ERR_SEGMENT_NOT_PREPARED,
        SCI_ERR_ILLEGAL_ADDRESS,
        SCI_ERR_ILLEGAL_OPERATION,
        SCI_ERR_ILLEGAL_QUERY,
        SCI_ERR_SEGMENTID_USED,
        SCI_ERR_SYSTEM,
        SCI_ERR_CANCELLED,
        SCI_ERR_NOT_CONNECTED,
        SCI_ERR_NOT_AVAILABLE,
        SCI_ERR_INCONSISTENT_VERSIONS,
        SCI_ERR_COND_INT_RACE_PROBLEM,
        SCI_ERR_OVERFLOW,
        SCI_ERR_NOT_INITIALIZED,
        SCI_ERR_ACCESS,
        SCI_ERR_NOT_SUPPORTED,
        SCI_ERR_DEPRECATED,
        SCI_ERR_DMA_NOT_AVAILABLE,
        SCI_ERR_DMA_DISABLED,
        SCI_ERR_NO_SUCH_INTNO,
        SCI_ERR_INTNO_USED,
        SCI_ERR_NO_SUCH_FDID,
        SCI_ERR_NO_SUCH_NODEID,
        SCI_ERR_NODE_NOT_RESPONDING,
        SCI_ERR_NO_REMOTE_LINK_ACCESS,
        SCI_ERR_NO_LINK_ACCESS,
        SCI_ERR_TRANSFER_FAILED,
        SCI_ERR_EWOULD_BLOCK,
        SCI_ERR_REMOTE_BUSY,
        SCI_ERR_SEMAPHORE_COUNT_EXCEEDED,
        SCI_ERR_IRQL_ILLEGAL,
        SCI_ERR_LOCAL_BUSY,
        SCI_ERR_ALL_BUSY,
    ];
    for code in codes {
        let p = SCIGetErrorString(code);
        assert!(!p.is_null());
        let text = describe(code);
        assert!(!text.is_empty() && text != "Unknown error", "{code:#x}: {text}");
    }
    assert_eq!(describe(SCI_ERR_OK), "OK");
    for unknown in [1, 0x1234, SCI_ERR_MASK, 0x4000_0999, u32::MAX] {
        assert_eq!(describe(unknown), "Unknown error");
    }
    // The same pointer every time: static strings.
    assert_eq!(SCIGetErrorString(SCI_ERR_BUSY), SCIGetErrorString(SCI_ERR_BUSY));
}

/// What the test callbacks saw: the handle they were given and how often they ran.
static DMA_HANDLE: AtomicUsize = AtomicUsize::new(0);
static DMA_STATUS: AtomicU32 = AtomicU32::new(u32::MAX);
static DMA_CALLS: AtomicU32 = AtomicU32::new(0);
static INTR_HANDLE: AtomicUsize = AtomicUsize::new(0);
static INTR_CALLS: AtomicU32 = AtomicU32::new(0);
static DATA_LEN: AtomicU32 = AtomicU32::new(u32::MAX);
static DATA_HANDLE: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn on_dma(arg: *mut c_void, queue: sci_dma_queue_t, status: sci_error_t) -> u32 {
    assert_eq!(arg as usize, 0x5150);
    DMA_HANDLE.store(queue as usize, Ordering::SeqCst);
    DMA_STATUS.store(status, Ordering::SeqCst);
    DMA_CALLS.fetch_add(1, Ordering::SeqCst);
    SCI_CALLBACK_CONTINUE
}

unsafe extern "C" fn on_intr(_arg: *mut c_void, intr: sci_local_interrupt_t, _status: sci_error_t) -> u32 {
    INTR_HANDLE.store(intr as usize, Ordering::SeqCst);
    // The handle is usable from inside the callback: waiting on it is illegal (a callback
    // is registered), not a bad handle.
    let mut err = 0;
    // SAFETY: `err` is a live local; the handle is the library's own.
    unsafe { SCIWaitForInterrupt(intr, 0, 0, &mut err) };
    assert_eq!(err, SCI_ERR_ILLEGAL_OPERATION);
    if INTR_CALLS.fetch_add(1, Ordering::SeqCst) + 1 >= 2 {
        SCI_CALLBACK_CANCEL
    } else {
        SCI_CALLBACK_CONTINUE
    }
}

unsafe extern "C" fn on_data(
    _arg: *mut c_void,
    intr: sci_local_data_interrupt_t,
    data: *mut c_void,
    length: c_uint,
    _status: sci_error_t,
) -> u32 {
    // SAFETY: the library passes `length` readable bytes at `data`.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), length as usize) };
    assert_eq!(bytes, b"data!");
    DATA_HANDLE.store(intr as usize, Ordering::SeqCst);
    DATA_LEN.store(length, Ordering::SeqCst);
    SCI_CALLBACK_CONTINUE
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// DMA queues, interrupts and data interrupts through the C ABI (loopback on this node):
/// the state machine, callbacks with the program's handles, wrong kinds and stale handles.
fn dma_and_interrupts(sd: sci_desc_t, seg: sci_local_segment_t, rseg: sci_remote_segment_t, lmap: sci_map_t) {
    const BAD: sci_error_t = SCI_ERR_ILLEGAL_PARAMETER;
    let mut dq: sci_dma_queue_t = null_mut();
    fails!(BAD, SCICreateDMAQueue(as_kind(seg), &mut dq, 0, 4, 0));
    ok!(SCICreateDMAQueue(sd, &mut dq, 0, 4, 0));
    assert_eq!(SCIDMAQueueState(dq), SCI_DMAQUEUE_IDLE);
    assert_eq!(SCIDMAQueueState(as_kind(seg)), SCI_DMAQUEUE_ERROR);
    assert_eq!(fails!(SCI_ERR_ILLEGAL_OPERATION, SCIWaitForDMAQueue(dq, 10, 0)), SCI_DMAQUEUE_IDLE);

    // Within the one segment (local side and remote side are the same memory here).
    let mut pattern = *b"dma through the C ABI";
    ok!(SCIMemCpy(null_mut(), pattern.as_mut_ptr().cast(), lmap, 0, pattern.len(), 0));
    let n = pattern.len();
    fails!(BAD, SCIStartDmaTransfer(dq, as_kind(rseg), rseg, 0, n, 4096, None, null_mut(), 0));
    fails!(BAD, SCIStartDmaTransfer(as_kind(seg), seg, rseg, 0, n, 4096, None, null_mut(), 0));
    fails!(SCI_ERR_OUT_OF_RANGE, SCIStartDmaTransfer(dq, seg, rseg, 0, n, 8190, None, null_mut(), 0));
    ok!(SCIStartDmaTransfer(
        dq,
        seg,
        rseg,
        0,
        n,
        4096,
        Some(on_dma),
        0x5150 as *mut c_void,
        SCI_FLAG_USE_CALLBACK
    ));
    wait_until("the DMA callback", || DMA_CALLS.load(Ordering::SeqCst) == 1);
    assert_eq!(DMA_HANDLE.load(Ordering::SeqCst), dq as usize, "the callback gets the program's handle");
    assert_eq!(DMA_STATUS.load(Ordering::SeqCst), SCI_ERR_OK);
    assert_eq!(SCIDMAQueueState(dq), SCI_DMAQUEUE_DONE);
    let mut back = [0u8; 21];
    ok!(SCIMemCpy(null_mut(), back.as_mut_ptr().cast(), lmap, 4096, n, SCI_FLAG_BLOCK_READ));
    assert_eq!(&back, &pattern);
    // Vector and user memory, waiting in the call.
    let mut vec = [
        dis_dma_vec_t { size: 4, local_offset: 0, remote_offset: 6000, flags: 0 },
        dis_dma_vec_t { size: 4, local_offset: 4, remote_offset: 6004, flags: 0 },
    ];
    ok!(SCIStartDmaTransferVec(dq, seg, rseg, 2, vec.as_mut_ptr(), None, null_mut(), SCI_FLAG_DMA_WAIT));
    let mut eight = [0u8; 8];
    ok!(SCIMemCpy(null_mut(), eight.as_mut_ptr().cast(), lmap, 6000, 8, SCI_FLAG_BLOCK_READ));
    assert_eq!(&eight, &pattern[..8]);
    let mut user = [0u8; 8];
    let flags = SCI_FLAG_DMA_WAIT | SCI_FLAG_DMA_READ;
    ok!(SCIStartDmaTransferMem(dq, user.as_mut_ptr().cast(), rseg, 8, 6000, None, null_mut(), flags));
    assert_eq!(&user, &pattern[..8]);
    assert_eq!(ok!(SCIWaitForDMAQueue(dq, 0, 0)), SCI_DMAQUEUE_DONE);
    // A DMA queue depends on its descriptor.
    fails!(SCI_ERR_BUSY, SCIClose(sd, 0));
    ok!(SCIRemoveDMAQueue(dq, 0));
    fails!(BAD, SCIRemoveDMAQueue(dq, 0));
    assert_eq!(SCIDMAQueueState(dq), SCI_DMAQUEUE_ERROR);

    // An interrupt whose callback cancels itself after two calls.
    let mut intr: sci_local_interrupt_t = null_mut();
    let mut no: c_uint = 0;
    let flags = SCI_FLAG_USE_CALLBACK | SCI_FLAG_COUNTING_INT;
    ok!(SCICreateInterrupt(sd, &mut intr, 0, &mut no, Some(on_intr), null_mut(), flags));
    assert_ne!(no, 0);
    fails!(SCI_ERR_ILLEGAL_OPERATION, SCIWaitForInterrupt(intr, 10, 0));
    let mut rintr: sci_remote_interrupt_t = null_mut();
    fails!(BAD, SCIConnectInterrupt(as_kind(intr), &mut rintr, NODE, 0, no, 10, 0));
    ok!(SCIConnectInterrupt(sd, &mut rintr, NODE, 0, no, 1000, 0));
    fails!(BAD, SCITriggerInterrupt(as_kind(intr), 0));
    for _ in 0..4 {
        ok!(SCITriggerInterrupt(rintr, 0));
    }
    wait_until("two interrupt callbacks", || INTR_CALLS.load(Ordering::SeqCst) >= 2);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(INTR_CALLS.load(Ordering::SeqCst), 2, "SCI_CALLBACK_CANCEL stops the callback");
    assert_eq!(INTR_HANDLE.load(Ordering::SeqCst), intr as usize);
    fails!(BAD, SCIRemoveInterrupt(as_kind(rintr), 0));
    ok!(SCIRemoveInterrupt(intr, 0));
    fails!(SCI_ERR_NO_SUCH_INTNO, SCITriggerInterrupt(rintr, 0));
    ok!(SCIDisconnectInterrupt(rintr, 0));
    fails!(BAD, SCIDisconnectInterrupt(rintr, 0));

    // A data interrupt with a callback.
    let mut dintr: sci_local_data_interrupt_t = null_mut();
    let mut dno: c_uint = 0;
    ok!(SCICreateDataInterrupt(
        sd,
        &mut dintr,
        0,
        &mut dno,
        Some(on_data),
        null_mut(),
        SCI_FLAG_USE_CALLBACK
    ));
    let mut rd: sci_remote_data_interrupt_t = null_mut();
    ok!(SCIConnectDataInterrupt(sd, &mut rd, NODE, 0, dno, 1000, 0));
    let mut payload = *b"data!";
    fails!(
        SCI_ERR_OUT_OF_RANGE,
        SCITriggerDataInterrupt(rd, payload.as_mut_ptr().cast(), SCI_MAX_DATA_INTERRUPT_LENGTH + 1, 0)
    );
    ok!(SCITriggerDataInterrupt(rd, payload.as_mut_ptr().cast(), 5, 0));
    wait_until("the data-interrupt callback", || DATA_LEN.load(Ordering::SeqCst) == 5);
    assert_eq!(DATA_HANDLE.load(Ordering::SeqCst), dintr as usize);
    let mut len: c_uint = 16;
    let mut buf = [0u8; 16];
    fails!(
        SCI_ERR_ILLEGAL_OPERATION,
        SCIWaitForDataInterrupt(dintr, buf.as_mut_ptr().cast(), &mut len, 10, 0)
    );
    fails!(BAD, SCIWaitForDataInterrupt(as_kind(rd), buf.as_mut_ptr().cast(), &mut len, 10, 0));
    ok!(SCIDisconnectDataInterrupt(rd, 0));
    ok!(SCIRemoveDataInterrupt(dintr, 0));
    fails!(BAD, SCIRemoveDataInterrupt(dintr, 0));
}
