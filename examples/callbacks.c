/*
 * callbacks: every kind of SISCI callback in one program.
 *
 * One descriptor exports (a segment with a local-segment callback, an
 * interrupt and a data interrupt with callbacks); a second descriptor of
 * the same program imports them over the loopback to this node (an
 * asynchronous connect with a remote-segment callback, a DMA transfer
 * whose completion callback raises a flag, triggers).  Each callback
 * records what it was given; the main thread checks the handle, the
 * argument, the reason and the status, and that SCI_CALLBACK_CANCEL stops
 * an interrupt callback.  Callbacks run on the library's own thread, so the
 * flags they share with the main thread are accessed atomically.
 *
 *   REMORA_NODE=4 ./callbacks           # prints "callbacks: ok"
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sisci_api.h"

#define SEG_ID        21
#define SRC_ID        22
#define SEG_SIZE      4096
#define INTR_NO       4711
#define DATA_INTR_NO  4712
#define ADAPTER_NO    0
#define CANCEL_AFTER  3

#define LOAD(p)      __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define STORE(p, v)  __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define BUMP(p)      __atomic_add_fetch((p), 1, __ATOMIC_SEQ_CST)

/* What the local-segment callback saw. */
struct seg_seen {
    sci_local_segment_t segment;
    unsigned int segment_id; /* read back through the API inside the callback */
    int connects, disconnects;
    unsigned int node, adapter;
    sci_error_t error;
};

/* What the remote-segment callback saw. */
struct rseg_seen {
    sci_remote_segment_t segment;
    int connects, disconnects;
    sci_error_t status;
};

/* What the DMA callback saw. */
struct dma_seen {
    sci_dma_queue_t queue;
    int done;
    sci_error_t status;
};

/* What the interrupt callback saw. */
struct intr_seen {
    sci_local_interrupt_t interrupt;
    int calls;
    int wrong_handle;
};

/* What the data-interrupt callback saw. */
struct data_seen {
    sci_local_data_interrupt_t interrupt;
    int calls;
    unsigned int length;
    unsigned char first[8];
    int payload_ok;
};

static struct seg_seen seg_seen;
static struct rseg_seen rseg_seen;
static struct dma_seen dma_seen;
static struct intr_seen intr_seen;
static struct data_seen data_seen;

/* Handles the callbacks compare against, published before anything can fire
 * (the library hands the callback the same handle value). */
static sci_local_interrupt_t the_interrupt;
static sci_local_data_interrupt_t the_data_interrupt;

static void die(const char *what, sci_error_t err)
{
    fprintf(stderr, "callbacks: %s: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
    exit(1);
}

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "callbacks: check failed: %s\n", what);
        exit(1);
    }
}

static void pause_ms(long ms)
{
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&t, NULL);
}

/* Wait up to 10 s for *counter to reach `want`. */
static int wait_for(int *counter, int want)
{
    int i;
    for (i = 0; i < 10000 && LOAD(counter) < want; i++)
        pause_ms(1);
    return LOAD(counter) >= want;
}

static sci_callback_action_t on_segment(void *arg, sci_local_segment_t segment, sci_segment_cb_reason_t reason,
                                        unsigned int node, unsigned int adapter, sci_error_t error)
{
    struct seg_seen *s = arg;
    s->segment = segment;
    s->segment_id = SCIGetLocalSegmentId(segment);
    s->node = node;
    s->adapter = adapter;
    s->error = error;
    if (reason == SCI_CB_CONNECT)
        BUMP(&s->connects);
    else if (reason == SCI_CB_DISCONNECT)
        BUMP(&s->disconnects);
    return SCI_CALLBACK_CONTINUE;
}

static sci_callback_action_t on_remote_segment(void *arg, sci_remote_segment_t segment,
                                               sci_segment_cb_reason_t reason, sci_error_t status)
{
    struct rseg_seen *s = arg;
    s->segment = segment;
    s->status = status;
    if (reason == SCI_CB_CONNECT)
        BUMP(&s->connects);
    else if (reason == SCI_CB_DISCONNECT)
        BUMP(&s->disconnects);
    return SCI_CALLBACK_CONTINUE;
}

static sci_callback_action_t on_dma(void *arg, sci_dma_queue_t queue, sci_error_t status)
{
    struct dma_seen *s = arg;
    s->queue = queue;
    s->status = status;
    BUMP(&s->done);
    return SCI_CALLBACK_CONTINUE;
}

static sci_callback_action_t on_interrupt(void *arg, sci_local_interrupt_t interrupt, sci_error_t status)
{
    struct intr_seen *s = arg;
    if (interrupt != LOAD(&the_interrupt) || status != SCI_ERR_OK)
        STORE(&s->wrong_handle, 1);
    s->interrupt = interrupt;
    /* Cancel on the third call: no call may follow. */
    return BUMP(&s->calls) >= CANCEL_AFTER ? SCI_CALLBACK_CANCEL : SCI_CALLBACK_CONTINUE;
}

static sci_callback_action_t on_data(void *arg, sci_local_data_interrupt_t interrupt, void *data,
                                     unsigned int length, sci_error_t status)
{
    struct data_seen *s = arg;
    const unsigned char *bytes = data;
    unsigned int i;
    int ok = interrupt == LOAD(&the_data_interrupt) && status == SCI_ERR_OK;
    for (i = 0; i < length; i++)
        if (i >= 5 && bytes[i] != (unsigned char)i)
            ok = 0;
    s->interrupt = interrupt;
    s->length = length;
    memcpy(s->first, bytes, length < sizeof s->first ? length : sizeof s->first);
    STORE(&s->payload_ok, ok);
    BUMP(&s->calls);
    return SCI_CALLBACK_CONTINUE;
}

/* A callback passed without SCI_FLAG_USE_CALLBACK must never run. */
static int ignored_calls;
static sci_callback_action_t never_called(void *arg, sci_dma_queue_t queue, sci_error_t status)
{
    (void)arg;
    (void)queue;
    (void)status;
    BUMP(&ignored_calls);
    return SCI_CALLBACK_CONTINUE;
}

int main(void)
{
    sci_desc_t owner, importer;
    sci_local_segment_t seg, src;
    sci_remote_segment_t rseg;
    sci_map_t seg_map, src_map;
    sci_dma_queue_t queue;
    sci_local_interrupt_t intr;
    sci_remote_interrupt_t rintr;
    sci_local_data_interrupt_t dintr;
    sci_remote_data_interrupt_t rdintr;
    sci_error_t err;
    unsigned int node, src_node = 0, src_adapter = 0, intr_no = INTR_NO, data_no = DATA_INTR_NO;
    volatile unsigned char *seg_bytes;
    unsigned char *src_bytes;
    unsigned char payload[SCI_MAX_DATA_INTERRUPT_LENGTH];
    int i;

    SCIInitialize(0, &err);
    if (err != SCI_ERR_OK) die("SCIInitialize", err);
    SCIOpen(&owner, 0, &err);
    if (err != SCI_ERR_OK) die("SCIOpen", err);
    SCIOpen(&importer, 0, &err);
    if (err != SCI_ERR_OK) die("SCIOpen", err);
    SCIGetLocalNodeId(ADAPTER_NO, &node, 0, &err);
    if (err != SCI_ERR_OK) die("SCIGetLocalNodeId", err);

    /* ---- A segment with a local-segment callback --------------------------- */
    SCICreateSegment(owner, &seg, SEG_ID, SEG_SIZE, on_segment, &seg_seen, SCI_FLAG_USE_CALLBACK, &err);
    if (err != SCI_ERR_OK) die("SCICreateSegment", err);
    SCIWaitForLocalSegmentEvent(seg, &src_node, &src_adapter, 10, 0, &err);
    check(err == SCI_ERR_ILLEGAL_OPERATION, "a segment with a callback refuses SCIWaitForLocalSegmentEvent");
    seg_bytes = SCIMapLocalSegment(seg, &seg_map, 0, SEG_SIZE, NULL, 0, &err);
    if (err != SCI_ERR_OK) die("SCIMapLocalSegment", err);
    SCIPrepareSegment(seg, ADAPTER_NO, 0, &err);
    if (err != SCI_ERR_OK) die("SCIPrepareSegment", err);

    /* ---- An asynchronous connect with a remote-segment callback ------------ */
    /* Issued before the segment is available: it completes when it becomes so. */
    SCIConnectSegment(importer, &rseg, node, SEG_ID, ADAPTER_NO, on_remote_segment, &rseg_seen,
                      SCI_INFINITE_TIMEOUT, SCI_FLAG_ASYNCHRONOUS_CONNECT | SCI_FLAG_USE_CALLBACK, &err);
    if (err != SCI_ERR_OK) die("SCIConnectSegment (asynchronous)", err);
    SCISetSegmentAvailable(seg, ADAPTER_NO, 0, &err);
    if (err != SCI_ERR_OK) die("SCISetSegmentAvailable", err);

    check(wait_for(&rseg_seen.connects, 1), "the remote-segment callback reports CONNECT");
    check(rseg_seen.segment == rseg, "the remote-segment callback gets the program's handle");
    check(rseg_seen.status == SCI_ERR_OK, "a successful connect reports SCI_ERR_OK");
    check(SCIGetRemoteSegmentSize(rseg) == SEG_SIZE, "the asynchronously connected segment is usable");

    check(wait_for(&seg_seen.connects, 1), "the local-segment callback reports CONNECT");
    check(seg_seen.segment == seg, "the local-segment callback gets the program's handle");
    check(seg_seen.segment_id == SEG_ID, "a callback may call the API with its handle");
    check(seg_seen.node == node && seg_seen.adapter == ADAPTER_NO, "the callback names the importing node");
    check(seg_seen.error == SCI_ERR_OK, "a connect event carries SCI_ERR_OK");

    /* ---- A DMA transfer whose completion callback raises a flag ------------ */
    SCICreateSegment(importer, &src, SRC_ID, SEG_SIZE, NULL, NULL, 0, &err);
    if (err != SCI_ERR_OK) die("SCICreateSegment (source)", err);
    src_bytes = SCIMapLocalSegment(src, &src_map, 0, SEG_SIZE, NULL, 0, &err);
    if (err != SCI_ERR_OK) die("SCIMapLocalSegment (source)", err);
    for (i = 0; i < 256; i++)
        src_bytes[i] = (unsigned char)(255 - i);
    SCIPrepareSegment(src, ADAPTER_NO, 0, &err);
    if (err != SCI_ERR_OK) die("SCIPrepareSegment (source)", err);
    SCICreateDMAQueue(importer, &queue, ADAPTER_NO, 4, 0, &err);
    if (err != SCI_ERR_OK) die("SCICreateDMAQueue", err);

    SCIStartDmaTransfer(queue, src, rseg, 0, 256, 1024, on_dma, &dma_seen, SCI_FLAG_USE_CALLBACK, &err);
    if (err != SCI_ERR_OK) die("SCIStartDmaTransfer (callback)", err);
    check(wait_for(&dma_seen.done, 1), "the DMA callback runs when the transfer ends");
    check(dma_seen.queue == queue && dma_seen.status == SCI_ERR_OK, "the DMA callback gets its queue and OK");
    check(SCIDMAQueueState(queue) == SCI_DMAQUEUE_DONE, "the queue is DONE");
    for (i = 0; i < 256; i++)
        check(seg_bytes[1024 + i] == (unsigned char)(255 - i), "the DMA moved the bytes");

    /* Without SCI_FLAG_USE_CALLBACK the callback is ignored and waiting works. */
    SCIStartDmaTransfer(queue, src, rseg, 0, 16, 0, never_called, NULL, 0, &err);
    if (err != SCI_ERR_OK) die("SCIStartDmaTransfer (no flag)", err);
    check(SCIWaitForDMAQueue(queue, 10000, 0, &err) == SCI_DMAQUEUE_DONE && err == SCI_ERR_OK,
          "a transfer started without the flag can be waited for");
    pause_ms(50);
    check(LOAD(&ignored_calls) == 0, "a callback without SCI_FLAG_USE_CALLBACK is ignored");
    check(LOAD(&dma_seen.done) == 1, "the earlier callback ran exactly once");

    /* ---- An interrupt whose callback cancels itself ------------------------- */
    SCICreateInterrupt(owner, &intr, ADAPTER_NO, &intr_no, on_interrupt, &intr_seen,
                       SCI_FLAG_USE_CALLBACK | SCI_FLAG_FIXED_INTNO | SCI_FLAG_COUNTING_INT, &err);
    if (err != SCI_ERR_OK) die("SCICreateInterrupt", err);
    STORE(&the_interrupt, intr);
    check(intr_no == INTR_NO, "a fixed interrupt number is kept");
    SCIWaitForInterrupt(intr, 10, 0, &err);
    check(err == SCI_ERR_ILLEGAL_OPERATION, "an interrupt with a callback refuses SCIWaitForInterrupt");
    SCIConnectInterrupt(importer, &rintr, node, ADAPTER_NO, INTR_NO, 5000, 0, &err);
    if (err != SCI_ERR_OK) die("SCIConnectInterrupt", err);
    for (i = 0; i < CANCEL_AFTER + 2; i++) {
        SCITriggerInterrupt(rintr, 0, &err);
        if (err != SCI_ERR_OK) die("SCITriggerInterrupt", err);
        pause_ms(20);
    }
    check(wait_for(&intr_seen.calls, CANCEL_AFTER), "the interrupt callback runs per trigger");
    pause_ms(200);
    check(LOAD(&intr_seen.calls) == CANCEL_AFTER, "SCI_CALLBACK_CANCEL stops the interrupt callback");
    check(!LOAD(&intr_seen.wrong_handle), "the interrupt callback gets the program's handle and OK");

    /* ---- A data interrupt with a callback ----------------------------------- */
    SCICreateDataInterrupt(owner, &dintr, ADAPTER_NO, &data_no, on_data, &data_seen,
                           SCI_FLAG_USE_CALLBACK | SCI_FLAG_FIXED_INTNO, &err);
    if (err != SCI_ERR_OK) die("SCICreateDataInterrupt", err);
    STORE(&the_data_interrupt, dintr);
    SCIConnectDataInterrupt(importer, &rdintr, node, ADAPTER_NO, DATA_INTR_NO, 5000, 0, &err);
    if (err != SCI_ERR_OK) die("SCIConnectDataInterrupt", err);
    memcpy(payload, "hello", 5);
    SCITriggerDataInterrupt(rdintr, payload, 5, 0, &err);
    if (err != SCI_ERR_OK) die("SCITriggerDataInterrupt", err);
    check(wait_for(&data_seen.calls, 1), "the data-interrupt callback runs");
    check(data_seen.length == 5 && memcmp(data_seen.first, "hello", 5) == 0, "the callback gets the payload");
    check(LOAD(&data_seen.payload_ok), "the data-interrupt callback gets the program's handle and OK");
    for (i = 5; i < (int)sizeof payload; i++)
        payload[i] = (unsigned char)i;
    SCITriggerDataInterrupt(rdintr, payload, sizeof payload, 0, &err);
    if (err != SCI_ERR_OK) die("SCITriggerDataInterrupt (largest)", err);
    check(wait_for(&data_seen.calls, 2), "the data-interrupt callback runs again");
    check(data_seen.length == SCI_MAX_DATA_INTERRUPT_LENGTH && LOAD(&data_seen.payload_ok),
          "the largest payload arrives whole");

    /* ---- Disconnect events ---------------------------------------------------- */
    /* NOTIFY tells the importer: DISCONNECT on its callback. */
    SCISetSegmentUnavailable(seg, ADAPTER_NO, SCI_FLAG_NOTIFY, &err);
    if (err != SCI_ERR_OK) die("SCISetSegmentUnavailable", err);
    check(wait_for(&rseg_seen.disconnects, 1), "the remote-segment callback reports DISCONNECT");
    /* The importer lets go: DISCONNECT on the owner's callback. */
    SCIRemoveDMAQueue(queue, 0, &err);
    if (err != SCI_ERR_OK) die("SCIRemoveDMAQueue", err);
    SCIDisconnectSegment(rseg, 0, &err);
    if (err != SCI_ERR_OK) die("SCIDisconnectSegment", err);
    check(wait_for(&seg_seen.disconnects, 1), "the local-segment callback reports DISCONNECT");
    check(seg_seen.node == node, "the disconnect names the importing node");

    /* ---- Clean up --------------------------------------------------------------- */
    SCIDisconnectDataInterrupt(rdintr, 0, &err);
    if (err != SCI_ERR_OK) die("SCIDisconnectDataInterrupt", err);
    SCIRemoveDataInterrupt(dintr, 0, &err);
    if (err != SCI_ERR_OK) die("SCIRemoveDataInterrupt", err);
    SCIDisconnectInterrupt(rintr, 0, &err);
    if (err != SCI_ERR_OK) die("SCIDisconnectInterrupt", err);
    SCIRemoveInterrupt(intr, 0, &err);
    if (err != SCI_ERR_OK) die("SCIRemoveInterrupt", err);
    SCIUnmapSegment(src_map, 0, &err);
    if (err != SCI_ERR_OK) die("SCIUnmapSegment (source)", err);
    SCIRemoveSegment(src, 0, &err);
    if (err != SCI_ERR_OK) die("SCIRemoveSegment (source)", err);
    SCIUnmapSegment(seg_map, 0, &err);
    if (err != SCI_ERR_OK) die("SCIUnmapSegment", err);
    SCIRemoveSegment(seg, 0, &err);
    if (err != SCI_ERR_OK) die("SCIRemoveSegment", err);
    SCIClose(importer, 0, &err);
    if (err != SCI_ERR_OK) die("SCIClose (importer)", err);
    SCIClose(owner, 0, &err);
    if (err != SCI_ERR_OK) die("SCIClose (owner)", err);
    SCITerminate();
    printf("callbacks: ok\n");
    return 0;
}
