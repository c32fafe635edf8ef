/*
 * dma_receiver: the receiving half of the SISCI "Hello, World!" over DMA.
 *
 * The receiver does not care how the data arrives: it exports segment
 * RECEIVER_SEG_ID, clears its first word, and polls that word until the
 * sender's DMA transfer has written the print command into it.
 *
 *   REMORA_NODE=4 ./dma_receiver        # node 4 owns the segment
 */
#include <stdio.h>
#include <stdlib.h>
#include "sisci_api.h"

#define RECEIVER_SEG_ID   4
#define RECEIVER_SEG_SIZE 4096
#define ADAPTER_NO        0
#define NO_CALLBACK       NULL
#define NO_ARG            NULL
#define NO_FLAGS          0
#define PRINT_COMMAND     1

static int fail(const char *what, sci_error_t err)
{
    fprintf(stderr, "dma_receiver: %s failed: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
    return 1;
}

int main(void)
{
    sci_desc_t dev;
    sci_local_segment_t segment;
    sci_map_t map;
    sci_error_t err;
    volatile int *word;
    unsigned int node = 0;

    SCIInitialize(NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIInitialize", err);
    SCIOpen(&dev, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIOpen", err);
    SCIGetLocalNodeId(ADAPTER_NO, &node, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIGetLocalNodeId", err);

    SCICreateSegment(dev, &segment, RECEIVER_SEG_ID, RECEIVER_SEG_SIZE, NO_CALLBACK, NO_ARG, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCICreateSegment", err);
    word = (volatile int *)SCIMapLocalSegment(segment, &map, 0, RECEIVER_SEG_SIZE, NULL, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIMapLocalSegment", err);

    /* Anything but the command, set before the segment can be reached. */
    *word = ~PRINT_COMMAND;

    SCIPrepareSegment(segment, ADAPTER_NO, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIPrepareSegment", err);
    SCISetSegmentAvailable(segment, ADAPTER_NO, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCISetSegmentAvailable", err);
    printf("node %u: segment %d is available, waiting for the DMA\n", node, RECEIVER_SEG_ID);
    fflush(stdout);

    while (*word != PRINT_COMMAND)
        ;
    printf("Hello, World!\n");
    fflush(stdout);

    SCISetSegmentUnavailable(segment, ADAPTER_NO, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCISetSegmentUnavailable", err);
    SCIUnmapSegment(map, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIUnmapSegment", err);
    SCIRemoveSegment(segment, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIRemoveSegment", err);
    SCIClose(dev, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIClose", err);
    SCITerminate();
    return 0;
}
