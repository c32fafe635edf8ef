/*
 * dma_receiver: the receiving half of the SISCI "Hello, World!" over DMA.
 *
 * The receiver does not care how the data arrives: it exports segment
 * RECEIVER_SEG_ID, clears its first word, and polls that word until the
 * sender's DMA transfer has written the print command into it.
 *
 *   REMORA_NODE=4 ./dma_receiver        # node 4 owns the segment
 */
#define PROGRAM "dma_receiver"
#include "example.h"

#define RECEIVER_SEG_ID   4
#define RECEIVER_SEG_SIZE 4096

int main(void)
{
    sci_desc_t dev;
    sci_local_segment_t segment;
    sci_map_t map;
    sci_error_t err;
    volatile int *word;
    unsigned int node = 0;

    if (open_sisci(&dev) != 0) return 1;
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
