//! DMA queues, interrupts and data interrupts through the C ABI, with their callbacks.

use super::*;
use sisci::consts::*;
use sisci::*;
use std::ffi::{c_uint, c_void};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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

pub(crate) fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// DMA queues, interrupts and data interrupts through the C ABI (loopback on this node):
/// the state machine, callbacks with the program's handles, wrong kinds and stale handles.
pub(crate) fn dma_and_interrupts(
    sd: sci_desc_t,
    seg: sci_local_segment_t,
    rseg: sci_remote_segment_t,
    lmap: sci_map_t,
) {
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
