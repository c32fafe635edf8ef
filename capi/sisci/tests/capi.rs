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

mod capi_support;
use capi_support::*;

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
    // Multicast members (tests/c/reflective.c): unicast only beside BROADCAST.
    fails!(
        SCI_ERR_ILLEGAL_FLAG,
        SCICreateSegment(sd, &mut seg, ID, SIZE, None, null_mut(), SCI_FLAG_ALLOW_UNICAST)
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
    fails!(SCI_ERR_ILLEGAL_FLAG, SCICheckSequence(seq, 0x8));
    assert_ne!(SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY, SCI_FLAG_NO_FLUSH);
    assert_eq!(ok!(SCICheckSequence(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY)), SCI_SEQ_OK);
    assert_eq!(ok!(SCICheckSequence(null_mut(), SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY)), SCI_SEQ_OK);
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCICheckSequence(null_mut(), 0));
    SCIStoreBarrier(seq, 0);
    SCIFlush(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
    SCIFlush(null_mut(), 0);
    SCIFlushReadBuffers(seq);

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
    // Unmapping while the map's sequence exists is allowed, as by Dolphin's library; the
    // sequence still answers until it is removed.
    ok!(SCIUnmapSegment(rmap, 0));
    assert_eq!(ok!(SCIStartSequence(seq, 0)), SCI_SEQ_OK);
    ok!(SCIRemoveSequence(seq, 0));
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
    // As with Dolphin's library, a disconnected handle still tells its segment's id and
    // node (programs read them to tell the owner which segment to remove).
    assert_eq!(SCIGetRemoteSegmentId(rseg), ID);
    assert_eq!(SCIGetRemoteSegmentNodeId(rseg), NODE);
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSegment(seg, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIPrepareSegment(seg, 0, 0));
    assert_eq!(SCIGetLocalSegmentId(seg), 0);
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIClose(sd2, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIProbeNode(sd2, 0, NODE, 0));

    // ---- Registered user memory ------------------------------------------------------------
    registered_memory(sd);

    // ---- SCIClose with everything still open tears it all down, as Dolphin's does -----------
    close_tears_down(sd);

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

/// Open a descriptor, leave a segment (mapped, connected, mapped remotely, with a sequence), a
/// DMA queue and an interrupt open, and close it: the close succeeds, every handle is stale
/// afterwards, and the node freed the segment id and the interrupt number.
fn close_tears_down(other: sci_desc_t) {
    const ID: u32 = 77;
    const SIZE: usize = 4096;
    let mut sd: sci_desc_t = null_mut();
    ok!(SCIOpen(&mut sd, 0));
    let mut seg: sci_local_segment_t = null_mut();
    ok!(SCICreateSegment(sd, &mut seg, ID, SIZE, None, null_mut(), 0));
    ok!(SCIPrepareSegment(seg, 0, 0));
    ok!(SCISetSegmentAvailable(seg, 0, 0));
    let mut lmap: sci_map_t = null_mut();
    ok!(SCIMapLocalSegment(seg, &mut lmap, 0, SIZE, null_mut(), 0));
    let mut rseg: sci_remote_segment_t = null_mut();
    ok!(SCIConnectSegment(sd, &mut rseg, NODE, ID, 0, None, null_mut(), 1000, 0));
    let mut rmap: sci_map_t = null_mut();
    ok!(SCIMapRemoteSegment(rseg, &mut rmap, 0, SIZE, null_mut(), 0));
    let mut seq: sci_sequence_t = null_mut();
    ok!(SCICreateMapSequence(rmap, &mut seq, 0));
    let mut dq: sci_dma_queue_t = null_mut();
    ok!(SCICreateDMAQueue(sd, &mut dq, 0, 4, 0));
    let mut intr: sci_local_interrupt_t = null_mut();
    let mut no: c_uint = 777;
    ok!(SCICreateInterrupt(sd, &mut intr, 0, &mut no, None, null_mut(), SCI_FLAG_FIXED_INTNO));
    ok!(SCIClose(sd, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSegment(seg, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIUnmapSegment(rmap, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSequence(seq, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveDMAQueue(dq, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveInterrupt(intr, 0));
    fails!(SCI_ERR_ILLEGAL_PARAMETER, SCIClose(sd, 0));
    // The node let go of the id and the number: another descriptor takes them again.
    let mut again: sci_local_segment_t = null_mut();
    ok!(SCICreateSegment(other, &mut again, ID, SIZE, None, null_mut(), 0));
    ok!(SCIRemoveSegment(again, 0));
    let mut intr2: sci_local_interrupt_t = null_mut();
    ok!(SCICreateInterrupt(other, &mut intr2, 0, &mut no, None, null_mut(), SCI_FLAG_FIXED_INTNO));
    ok!(SCIRemoveInterrupt(intr2, 0));
}

#[test]
fn hardware_only_calls_are_not_supported() {
    const NS: sci_error_t = SCI_ERR_NOT_SUPPORTED;
    let mut seg: sci_remote_segment_t = null_mut();
    let mut dev: sci_smartio_device_t = null_mut();
    let mut ioaddr: sci_ioaddr_t = 0;
    let mut fdids = [0 as c_uint; 4];
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
    assert!(seg.is_null() && dev.is_null() && ioaddr == 0);
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
