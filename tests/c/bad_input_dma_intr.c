/*
 * bad_input_dma_intr: the DMA, interrupt, data-interrupt and segment-event entry points
 * called with NULL, stale, wrong-kind and out-of-range arguments and in states that forbid
 * them. Each must return its documented code, never crash and never hang.
 * Prints "bad_input_dma_intr: N checks passed" and exits 0, or names the first failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "sisci_api.h"

#define BIG      (16u << 20) /* big enough that a transfer is still POSTED right after it starts */
#define SMALL    65536u
#define NO_NODE  250u

static int checks;

#define EXPECT(call_err, want)                                                            \
    do {                                                                                  \
        checks++;                                                                         \
        if ((call_err) != (want)) {                                                       \
            fprintf(stderr, "bad_input_dma_intr: line %d: got 0x%x (%s), want 0x%x (%s)\n", \
                    __LINE__, (unsigned)(call_err), SCIGetErrorString(call_err),          \
                    (unsigned)(want), SCIGetErrorString(want));                           \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        checks++;                                                                         \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "bad_input_dma_intr: line %d: %s\n", __LINE__, #cond);        \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static sci_callback_action_t dma_cb(void *arg, sci_dma_queue_t q, sci_error_t status)
{
    (void)arg;
    (void)q;
    (void)status;
    return SCI_CALLBACK_CONTINUE;
}

static sci_callback_action_t intr_cb(void *arg, sci_local_interrupt_t i, sci_error_t status)
{
    (void)arg;
    (void)i;
    (void)status;
    return SCI_CALLBACK_CONTINUE;
}

static sci_callback_action_t data_cb(void *arg, sci_local_data_interrupt_t i, void *data, unsigned int len,
                                     sci_error_t status)
{
    (void)arg;
    (void)i;
    (void)data;
    (void)len;
    (void)status;
    return SCI_CALLBACK_CONTINUE;
}

int main(void)
{
    sci_desc_t dev, dev2;
    sci_local_segment_t target, src, big_target, big_src;
    sci_remote_segment_t rseg, big_rseg, pending;
    sci_dma_queue_t dq, dq2, stale_dq;
    sci_local_interrupt_t intr, intr2, cb_intr, stale_intr;
    sci_remote_interrupt_t rintr, stale_rintr;
    sci_local_data_interrupt_t dintr, stale_dintr;
    sci_remote_data_interrupt_t rdintr;
    sci_dma_queue_state_t state;
    sci_error_t err, status;
    sci_segment_cb_reason_t reason;
    dis_dma_vec_t vec[3];
    unsigned int node, from, adapter, no, len;
    char buf[SCI_MAX_DATA_INTERRUPT_LENGTH + 8];
    char small[4];

    SCIInitialize(0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIOpen(&dev, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIOpen(&dev2, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIGetLocalNodeId(0, &node, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* ---- Segments the transfers use: target exported by dev, source of dev2 ---- */
    SCICreateSegment(dev, &target, 31, SMALL, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIPrepareSegment(target, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCISetSegmentAvailable(target, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIConnectSegment(dev2, &rseg, node, 31, 0, NULL, NULL, 5000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateSegment(dev2, &src, 32, SMALL, NULL, NULL, 0, &err); /* not prepared yet */
    EXPECT(err, SCI_ERR_OK);

    /* ---- Segment events: waits, NULL pointers, timeouts, async connect ------------ */
    reason = SCIWaitForLocalSegmentEvent(NULL, &from, &adapter, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    CHECK(reason == 0);
    reason = SCIWaitForLocalSegmentEvent(target, &from, &adapter, 5000, 0, &err);
    EXPECT(err, SCI_ERR_OK); /* dev2's connect came while nobody waited: it was kept */
    CHECK(reason == SCI_CB_CONNECT && from == node && adapter == 0);
    SCIWaitForLocalSegmentEvent(target, NULL, NULL, 10, 0, &err);
    EXPECT(err, SCI_ERR_TIMEOUT);
    SCIWaitForLocalSegmentEvent(target, &from, &adapter, 10, 0x4, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIWaitForLocalSegmentEvent((sci_local_segment_t)rseg, &from, &adapter, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIWaitForRemoteSegmentEvent(NULL, &status, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIWaitForRemoteSegmentEvent(rseg, &status, 10, 0, &err);
    EXPECT(err, SCI_ERR_TIMEOUT);
    SCIWaitForRemoteSegmentEvent(rseg, NULL, 10, 0x8, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    /* An asynchronous connect to nothing: OK now, DISCONNECT with the reason later. */
    SCIConnectSegment(dev2, &pending, node, 4242, 0, NULL, NULL, 50, SCI_FLAG_ASYNCHRONOUS_CONNECT, &err);
    EXPECT(err, SCI_ERR_OK);
    status = SCI_ERR_OK;
    reason = SCIWaitForRemoteSegmentEvent(pending, &status, 10000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(reason == SCI_CB_DISCONNECT);
    EXPECT(status, SCI_ERR_NO_SUCH_SEGMENT);
    SCIDisconnectSegment(pending, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIWaitForRemoteSegmentEvent(pending, &status, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER); /* stale */

    /* ---- DMA queues: create ------------------------------------------------------- */
    SCICreateDMAQueue(NULL, &dq, 0, 2, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateDMAQueue(dev2, NULL, 0, 2, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateDMAQueue(dev2, &dq, 3, 2, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_ADAPTERNO);
    /* maxEntries 0 is accepted, as by Dolphin's library (benchmarks pass it). */
    SCICreateDMAQueue(dev2, &dq, 0, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveDMAQueue(dq, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateDMAQueue(dev2, &dq, 0, 1u << 20, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateDMAQueue(dev2, &dq, 0, 2, 0x8000, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCICreateDMAQueue(dev2, &dq, 0, 2, SCI_FLAG_DMA_PHDMA, &err);
    EXPECT(err, SCI_ERR_NOT_SUPPORTED);
    SCICreateDMAQueue((sci_desc_t)target, &dq, 0, 2, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateDMAQueue(dev2, &dq, 0, 2, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* ---- State machine from IDLE --------------------------------------------------- */
    CHECK(SCIDMAQueueState(dq) == SCI_DMAQUEUE_IDLE);
    CHECK(SCIDMAQueueState(NULL) == SCI_DMAQUEUE_ERROR);
    CHECK(SCIDMAQueueState((sci_dma_queue_t)rseg) == SCI_DMAQUEUE_ERROR);
    state = SCIWaitForDMAQueue(dq, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    CHECK(state == SCI_DMAQUEUE_IDLE);
    state = SCIWaitForDMAQueue(NULL, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    CHECK(state == SCI_DMAQUEUE_ERROR);
    SCIWaitForDMAQueue(dq, 10, 0x1, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIAbortDMAQueue(dq, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    SCIAbortDMAQueue(NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIPostDMAQueue(dq, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    SCIResetDMAQueue(dq, 0x2, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);

    /* ---- Start: preparation, handles, ranges, flags --------------------------------- */
    SCIStartDmaTransfer(dq, src, rseg, 0, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_SEGMENT_NOT_PREPARED);
    SCIPrepareSegment(src, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIStartDmaTransfer(NULL, src, rseg, 0, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIStartDmaTransfer(dq, NULL, rseg, 0, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIStartDmaTransfer(dq, src, NULL, 0, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIStartDmaTransfer(dq, (sci_local_segment_t)rseg, rseg, 0, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIStartDmaTransfer((sci_dma_queue_t)src, src, rseg, 0, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIStartDmaTransfer(dq, src, rseg, 1, SMALL, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIStartDmaTransfer(dq, src, rseg, 0, SMALL, 1, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIStartDmaTransfer(dq, src, rseg, 0, 0, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIStartDmaTransfer(dq, src, rseg, (size_t)-8, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIStartDmaTransfer(dq, src, rseg, 0, 16, 0, NULL, NULL, 0x8000, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIStartDmaTransfer(dq, src, rseg, 0, 16, 0, NULL, NULL, SCI_FLAG_BROADCAST, &err);
    EXPECT(err, SCI_ERR_FLAG_NOT_IMPLEMENTED);
    SCIStartDmaTransfer(dq, src, rseg, 0, 16, 0, dma_cb, NULL, SCI_FLAG_USE_CALLBACK | SCI_FLAG_DMA_WAIT, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION); /* a callback forbids waiting */
    CHECK(SCIDMAQueueState(dq) == SCI_DMAQUEUE_IDLE); /* nothing was posted by the failures */

    /* Vectors. */
    memset(vec, 0, sizeof vec);
    vec[0].size = 16;
    vec[1].size = 16;
    vec[1].local_offset = 100;
    vec[1].remote_offset = 200;
    vec[2].size = 16;
    SCIStartDmaTransferVec(dq, src, rseg, 2, NULL, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIStartDmaTransferVec(dq, src, rseg, 0, vec, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    /* More elements than the queue was created for: accepted, as by Dolphin's library. */
    SCIStartDmaTransferVec(dq, src, rseg, 3, vec, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    if (SCIWaitForDMAQueue(dq, SCI_INFINITE_TIMEOUT, 0, &err) != SCI_DMAQUEUE_DONE || err != SCI_ERR_OK) {
        fprintf(stderr, "bad_input_dma_intr: the 3-element vector did not complete (0x%x)\n", (unsigned)err);
        return 1;
    }
    SCIStartDmaTransferVec(dq, src, rseg, (size_t)-1, vec, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_MAX_ENTRIES); /* refused before the vector is read */
    vec[1].remote_offset = SMALL - 8;
    SCIStartDmaTransferVec(dq, src, rseg, 2, vec, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    vec[1].remote_offset = 200;
    vec[0].flags = 0xdeadbeef; /* per-element flags are ignored */
    SCIStartDmaTransferVec(dq, src, rseg, 2, vec, NULL, NULL, SCI_FLAG_DMA_WAIT, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(SCIDMAQueueState(dq) == SCI_DMAQUEUE_DONE);

    /* User memory. */
    SCIStartDmaTransferMem(dq, NULL, rseg, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIStartDmaTransferMem(dq, buf, rseg, 0, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIStartDmaTransferMem(dq, buf, rseg, 16, SMALL - 8, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIStartDmaTransferMem(dq, (void *)(~(size_t)0 - 4), rseg, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE); /* wraps around the address space */
    SCIStartDmaTransferMem(dq, buf, (sci_remote_segment_t)src, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    strcpy(buf, "from user memory");
    SCIStartDmaTransferMem(dq, buf, rseg, 17, 300, NULL, NULL, SCI_FLAG_DMA_WAIT, &err);
    EXPECT(err, SCI_ERR_OK);
    memset(buf, 0, sizeof buf);
    SCIStartDmaTransferMem(dq, buf, rseg, 17, 300, NULL, NULL, SCI_FLAG_DMA_WAIT | SCI_FLAG_DMA_READ, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(strcmp(buf, "from user memory") == 0);
    /* Memory that is not mapped (any more): the transfer fails, the caller never faults. */
    {
        void *hole = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(hole != MAP_FAILED);
        CHECK(munmap(hole, 4096) == 0);
        SCIStartDmaTransferMem(dq, hole, rseg, 16, 300, NULL, NULL, SCI_FLAG_DMA_WAIT, &err);
        EXPECT(err, SCI_ERR_TRANSFER_FAILED);
        SCIStartDmaTransferMem(dq, hole, rseg, 16, 300, NULL, NULL, SCI_FLAG_DMA_WAIT | SCI_FLAG_DMA_READ, &err);
        EXPECT(err, SCI_ERR_TRANSFER_FAILED);
        CHECK(SCIDMAQueueState(dq) == SCI_DMAQUEUE_ERROR);
        /* The queue takes the next transfer. */
        SCIStartDmaTransferMem(dq, buf, rseg, 17, 300, NULL, NULL, SCI_FLAG_DMA_WAIT, &err);
        EXPECT(err, SCI_ERR_OK);
    }

    /* A final state may be waited for (a no-op) and aborted (a no-op). */
    state = SCIWaitForDMAQueue(dq, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(state == SCI_DMAQUEUE_DONE);
    SCIAbortDMAQueue(dq, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* ---- API 1.x: enqueue, post, reset ---------------------------------------------- */
    state = SCIEnqueueDMATransfer(NULL, src, rseg, 0, 0, 16, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    CHECK(state == SCI_DMAQUEUE_ERROR);
    SCIEnqueueDMATransfer(dq, src, rseg, 0, 0, 16, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION); /* only from IDLE or GATHER */
    SCIResetDMAQueue(dq, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(SCIDMAQueueState(dq) == SCI_DMAQUEUE_IDLE);
    SCIEnqueueDMATransfer(dq, src, rseg, 0, 0, 16, 0x8000, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    state = SCIEnqueueDMATransfer(dq, src, rseg, 0, SMALL, 16, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    CHECK(state == SCI_DMAQUEUE_IDLE);
    state = SCIEnqueueDMATransfer(dq, src, rseg, 0, 0, 16, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(state == SCI_DMAQUEUE_GATHER);
    state = SCIEnqueueDMATransfer(dq, src, rseg, 16, 16, 16, SCI_FLAG_DMA_READ, &err);
    EXPECT(err, SCI_ERR_OK);
    state = SCIEnqueueDMATransfer(dq, src, rseg, 32, 32, 16, 0, &err);
    EXPECT(err, SCI_ERR_MAX_ENTRIES);
    CHECK(state == SCI_DMAQUEUE_GATHER);
    SCIStartDmaTransfer(dq, src, rseg, 0, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION); /* gathering */
    SCIWaitForDMAQueue(dq, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    SCIPostDMAQueue(dq, NULL, NULL, SCI_FLAG_DMA_READ, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIPostDMAQueue(dq, NULL, NULL, SCI_FLAG_DMA_WAIT, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(SCIDMAQueueState(dq) == SCI_DMAQUEUE_DONE);
    SCIResetDMAQueue(NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIResetDMAQueue(dq, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* ---- POSTED: remove and start are illegal; abort; callbacks forbid waiting ----- */
    SCICreateSegment(dev, &big_target, 33, BIG, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIPrepareSegment(big_target, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCISetSegmentAvailable(big_target, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIConnectSegment(dev2, &big_rseg, node, 33, 0, NULL, NULL, 5000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateSegment(dev2, &big_src, 34, BIG, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIPrepareSegment(big_src, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateDMAQueue(dev2, &dq2, 0, 1, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIStartDmaTransfer(dq2, big_src, big_rseg, 0, BIG, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveDMAQueue(dq2, 0, &err);
    if (err == SCI_ERR_OK) {
        /* The engine won the race: the queue was DONE already, and is gone now. */
        fprintf(stderr, "bad_input_dma_intr: the transfer ended before SCIRemoveDMAQueue; "
                        "the POSTED checks were skipped\n");
        CHECK(SCIDMAQueueState(dq2) == SCI_DMAQUEUE_ERROR);
        SCICreateDMAQueue(dev2, &dq2, 0, 1, 0, &err);
        EXPECT(err, SCI_ERR_OK);
    } else {
        EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
        /* Still POSTED (refused), or it ended meanwhile (then this starts a new job). */
        SCIStartDmaTransfer(dq2, big_src, big_rseg, 0, 16, 0, NULL, NULL, 0, &err);
        CHECK(err == SCI_ERR_ILLEGAL_OPERATION || err == SCI_ERR_OK);
        state = SCIWaitForDMAQueue(dq2, 30000, 0, &err);
        EXPECT(err, SCI_ERR_OK);
        CHECK(state == SCI_DMAQUEUE_DONE);
    }
    /* Abort a long transfer: ABORTED, or DONE if it ended first. */
    SCIStartDmaTransfer(dq2, big_src, big_rseg, 0, BIG, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIAbortDMAQueue(dq2, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    state = SCIDMAQueueState(dq2);
    CHECK(state == SCI_DMAQUEUE_ABORTED || state == SCI_DMAQUEUE_DONE);
    /* A callback forbids waiting while the transfer is posted. */
    SCIStartDmaTransfer(dq2, big_src, big_rseg, 0, BIG, 0, dma_cb, NULL, SCI_FLAG_USE_CALLBACK, &err);
    EXPECT(err, SCI_ERR_OK);
    state = SCIWaitForDMAQueue(dq2, 30000, 0, &err);
    CHECK(err == SCI_ERR_ILLEGAL_OPERATION || (err == SCI_ERR_OK && state == SCI_DMAQUEUE_DONE));
    while (SCIDMAQueueState(dq2) == SCI_DMAQUEUE_POSTED)
        ;
    CHECK(SCIDMAQueueState(dq2) == SCI_DMAQUEUE_DONE);

    /* Physical DMA needs hardware. */
    SCIphDmaEnqueue(dq, 16, 0, node, 0, 0, 0, &err);
    EXPECT(err, SCI_ERR_NOT_SUPPORTED);
    SCIphDmaStart(dq, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_NOT_SUPPORTED);

    /* ---- Remove; the handles are stale afterwards --------------------------------- */
    SCIRemoveDMAQueue(dq, 0x1, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIRemoveDMAQueue(dq, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    stale_dq = dq;
    SCIRemoveDMAQueue(stale_dq, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    CHECK(SCIDMAQueueState(stale_dq) == SCI_DMAQUEUE_ERROR);
    SCIStartDmaTransfer(stale_dq, src, rseg, 0, 16, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIWaitForDMAQueue(stale_dq, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIRemoveDMAQueue(dq2, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* ---- Interrupts ------------------------------------------------------------------ */
    no = 4242;
    SCICreateInterrupt(NULL, &intr, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateInterrupt(dev, NULL, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateInterrupt(dev, &intr, 0, NULL, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateInterrupt(dev, &intr, 0, NULL, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateInterrupt(dev, &intr, 3, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_ADAPTERNO);
    SCICreateInterrupt(dev, &intr, 0, &no, NULL, NULL, 0x8000, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    {
        /* SCI_FLAG_SHARE_EXTERNAL: reachable by other processes, as every interrupt is. */
        sci_local_interrupt_t ext;
        unsigned int ext_no = 0;
        SCICreateInterrupt(dev, &ext, 0, &ext_no, NULL, NULL, SCI_FLAG_SHARE_EXTERNAL, &err);
        EXPECT(err, SCI_ERR_OK);
        SCIRemoveInterrupt(ext, 0, &err);
        EXPECT(err, SCI_ERR_OK);
    }
    SCICreateInterrupt(dev, &intr, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(no == 4242);
    SCICreateInterrupt(dev2, &intr2, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_INTNO_USED);
    no = 0;
    SCICreateInterrupt(dev, &intr2, 0, &no, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(no != 4242);

    SCIWaitForInterrupt(intr, 10, 0, &err);
    EXPECT(err, SCI_ERR_TIMEOUT);
    SCIWaitForInterrupt(intr, 0, 0, &err);
    EXPECT(err, SCI_ERR_TIMEOUT);
    SCIWaitForInterrupt(intr, 10, 0x1, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIWaitForInterrupt(NULL, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIWaitForInterrupt((sci_local_interrupt_t)rseg, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);

    SCIConnectInterrupt(dev2, &rintr, node, 0, 9999, 50, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_INTNO);
    SCIConnectInterrupt(dev2, &rintr, NO_NODE, 0, 4242, 50, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_NODEID);
    SCIConnectInterrupt(dev2, NULL, node, 0, 4242, 50, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIConnectInterrupt(NULL, &rintr, node, 0, 4242, 50, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIConnectInterrupt(dev2, &rintr, node, 5, 4242, 50, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_ADAPTERNO);
    SCIConnectInterrupt(dev2, &rintr, node, 0, 4242, 50, 0x8000, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIConnectInterrupt(dev2, &rintr, node, 0, 4242, 5000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCITriggerInterrupt(rintr, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIWaitForInterrupt(intr, 5000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCITriggerInterrupt(NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCITriggerInterrupt((sci_remote_interrupt_t)intr, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCITriggerInterrupt(rintr, 0x2, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);

    /* A callback forbids waiting; a callback without the flag is ignored. */
    no = 4243;
    SCICreateInterrupt(dev, &cb_intr, 0, &no, intr_cb, NULL, SCI_FLAG_FIXED_INTNO | SCI_FLAG_USE_CALLBACK, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIWaitForInterrupt(cb_intr, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    SCIRemoveInterrupt(cb_intr, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateInterrupt(dev, &cb_intr, 0, &no, intr_cb, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIWaitForInterrupt(cb_intr, 10, 0, &err);
    EXPECT(err, SCI_ERR_TIMEOUT);
    SCIRemoveInterrupt(cb_intr, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* Remove: triggers then fail at once instead of hanging; the handle is stale. */
    SCIRemoveInterrupt(intr, 0x1, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIRemoveInterrupt(intr, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    stale_intr = intr;
    SCITriggerInterrupt(rintr, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_INTNO);
    SCIRemoveInterrupt(stale_intr, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIWaitForInterrupt(stale_intr, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIDisconnectInterrupt(rintr, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    stale_rintr = rintr;
    SCIDisconnectInterrupt(stale_rintr, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCITriggerInterrupt(stale_rintr, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIRemoveInterrupt(intr2, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* ---- Data interrupts -------------------------------------------------------------- */
    no = 77;
    SCICreateDataInterrupt(NULL, &dintr, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateDataInterrupt(dev, NULL, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateDataInterrupt(dev, &dintr, 0, NULL, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateDataInterrupt(dev, &dintr, 0, &no, NULL, NULL, SCI_FLAG_COUNTING_INT, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCICreateDataInterrupt(dev, &dintr, 0, &no, data_cb, NULL, SCI_FLAG_FIXED_INTNO | SCI_FLAG_USE_CALLBACK,
                           &err);
    EXPECT(err, SCI_ERR_OK);
    len = sizeof buf;
    SCIWaitForDataInterrupt(dintr, buf, &len, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    SCIRemoveDataInterrupt(dintr, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateDataInterrupt(dev, &dintr, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateDataInterrupt(dev, &stale_dintr, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_INTNO_USED);
    SCIConnectDataInterrupt(dev2, &rdintr, node, 0, 78, 50, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_INTNO);
    SCIConnectDataInterrupt(dev2, NULL, node, 0, 77, 50, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIConnectDataInterrupt(dev2, &rdintr, node, 0, 77, 50, SCI_FLAG_BROADCAST, &err);
    EXPECT(err, SCI_ERR_FLAG_NOT_IMPLEMENTED);
    SCIConnectDataInterrupt(dev2, &rdintr, node, 0, 77, 5000, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    memset(buf, 'x', sizeof buf);
    SCITriggerDataInterrupt(rdintr, buf, SCI_MAX_DATA_INTERRUPT_LENGTH + 1, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCITriggerDataInterrupt(rdintr, NULL, 5, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCITriggerDataInterrupt(NULL, buf, 5, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCITriggerDataInterrupt(rdintr, buf, 5, 0x1, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCITriggerDataInterrupt(rdintr, "payload", 8, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCITriggerDataInterrupt(rdintr, NULL, 0, 0, &err); /* an empty payload */
    EXPECT(err, SCI_ERR_OK);

    SCIWaitForDataInterrupt(dintr, buf, NULL, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    len = 16;
    SCIWaitForDataInterrupt(dintr, NULL, &len, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    len = sizeof small;
    SCIWaitForDataInterrupt(dintr, small, &len, 1000, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE); /* too small: unchanged, and the payload stays */
    CHECK(len == sizeof small);
    len = sizeof buf;
    SCIWaitForDataInterrupt(dintr, buf, &len, 1000, 0x4, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIWaitForDataInterrupt(dintr, buf, &len, 1000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(len == 8 && strcmp(buf, "payload") == 0);
    len = 0;
    SCIWaitForDataInterrupt(dintr, NULL, &len, 1000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(len == 0);
    len = sizeof buf;
    SCIWaitForDataInterrupt(dintr, buf, &len, 10, 0, &err);
    EXPECT(err, SCI_ERR_TIMEOUT);
    SCIWaitForDataInterrupt((sci_local_data_interrupt_t)rdintr, buf, &len, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);

    SCIRemoveDataInterrupt(dintr, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    stale_dintr = dintr;
    SCITriggerDataInterrupt(rdintr, "late", 4, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_INTNO);
    SCIRemoveDataInterrupt(stale_dintr, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIWaitForDataInterrupt(stale_dintr, buf, &len, 10, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIDisconnectDataInterrupt(rdintr, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIDisconnectDataInterrupt(rdintr, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);

    /* ---- Orderly teardown ----------------------------------------------------------- */
    SCIDisconnectSegment(big_rseg, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIDisconnectSegment(rseg, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(big_src, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(src, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(big_target, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(target, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIClose(dev2, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIClose(dev, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCITerminate();
    printf("bad_input_dma_intr: %d checks passed\n", checks);
    return 0;
}
