/*
 * dma_sender: the sending half of the SISCI "Hello, World!" over DMA.
 *
 * Puts the print command into a segment of its own, connects to the
 * receiver's segment (waiting until it is available), and lets the DMA
 * engine copy the command across: no CPU store touches the receiver's
 * memory.  A DMA source segment must be prepared first.
 *
 *   REMORA_NODE=8 ./dma_sender 4        # the receiver runs as node 4
 */
#define _POSIX_C_SOURCE 200809L
#define PROGRAM "dma_sender"
#include "example.h"

#define RECEIVER_SEG_ID  4
#define SENDER_SEG_ID    4
#define SENDER_SEG_SIZE  4096

int main(int argc, char *argv[])
{
    sci_desc_t dev;
    sci_local_segment_t local;
    sci_remote_segment_t remote;
    sci_map_t map;
    sci_dma_queue_t queue;
    sci_dma_queue_state_t state;
    sci_error_t err;
    int *command;
    unsigned int receiver = node_arg(argc, argv);

    if (open_sisci(&dev) != 0) return 1;

    /* The source of the transfer: a segment of this node, mapped to fill it. */
    SCICreateSegment(dev, &local, SENDER_SEG_ID, SENDER_SEG_SIZE, NO_CALLBACK, NO_ARG, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCICreateSegment", err);
    command = (int *)SCIMapLocalSegment(local, &map, 0, SENDER_SEG_SIZE, NULL, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIMapLocalSegment", err);
    SCIPrepareSegment(local, ADAPTER_NO, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIPrepareSegment", err);

    SCICreateDMAQueue(dev, &queue, ADAPTER_NO, 1 /* max entries */, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCICreateDMAQueue", err);

    /* Synchronous connect: waits (here up to 30 s) for the receiver's segment.
     * A node that has not started yet is unknown at once: ask again shortly. */
    err = connect_segment(dev, &remote, receiver, RECEIVER_SEG_ID);
    if (err != SCI_ERR_OK) return fail("SCIConnectSegment", err);

    *command = PRINT_COMMAND;

    /* Local offset 0, sizeof(int) bytes, to remote offset 0. */
    SCIStartDmaTransfer(queue, local, remote, 0, sizeof(int), 0, NO_CALLBACK, NO_ARG, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIStartDmaTransfer", err);
    state = SCIWaitForDMAQueue(queue, SCI_INFINITE_TIMEOUT, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIWaitForDMAQueue", err);
    if (state != SCI_DMAQUEUE_DONE || SCIDMAQueueState(queue) != SCI_DMAQUEUE_DONE) {
        fprintf(stderr, "dma_sender: the transfer ended in state %d\n", (int)state);
        return 1;
    }
    printf("sent the print command to node %u segment %d by DMA\n", receiver, RECEIVER_SEG_ID);

    SCIRemoveDMAQueue(queue, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIRemoveDMAQueue", err);
    SCIDisconnectSegment(remote, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIDisconnectSegment", err);
    SCIUnmapSegment(map, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIUnmapSegment", err);
    SCIRemoveSegment(local, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIRemoveSegment", err);
    SCIClose(dev, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIClose", err);
    SCITerminate();
    return 0;
}
