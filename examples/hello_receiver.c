/*
 * hello_receiver: the receiving half of the SISCI "Hello, World!" over a mapped segment.
 *
 * Creates segment HELLO_SEG_ID on this node, maps it, clears the first word, exports it,
 * and polls the first word until the sender (on any node of the cluster) stores the print
 * command into it through its own mapping. Then it cleans up in dependency order.
 *
 *   REMORA_NODE=4 ./hello_receiver        # node 4 owns the segment
 */
#define PROGRAM "hello_receiver"
#include "example.h"

#define HELLO_SEG_ID   4
#define HELLO_SEG_SIZE 4096

int main(void)
{
    sci_desc_t dev;
    sci_local_segment_t segment;
    sci_map_t map;
    sci_error_t err;
    volatile int *word;
    unsigned int node = 0;

    if (open_sisci(&dev) != 0) return 1;
    SCIGetLocalNodeId(ADAPTER_NO, &node, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIGetLocalNodeId", err);

    SCICreateSegment(dev, &segment, HELLO_SEG_ID, HELLO_SEG_SIZE, NULL, NULL, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCICreateSegment", err);
    word = (volatile int *)SCIMapLocalSegment(segment, &map, 0, HELLO_SEG_SIZE, NULL, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIMapLocalSegment", err);

    /* Clear the word before anyone can connect, so a fast sender's store is never lost. */
    *word = ~PRINT_COMMAND;

    SCIPrepareSegment(segment, ADAPTER_NO, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIPrepareSegment", err);
    SCISetSegmentAvailable(segment, ADAPTER_NO, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCISetSegmentAvailable", err);
    printf("node %u: segment %d is available, waiting for the sender\n", node, HELLO_SEG_ID);
    fflush(stdout);

    while (*word != PRINT_COMMAND)
        ;
    printf("Hello, World!\n");
    fflush(stdout);

    SCISetSegmentUnavailable(segment, ADAPTER_NO, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCISetSegmentUnavailable", err);
    SCIUnmapSegment(map, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIUnmapSegment", err);
    SCIRemoveSegment(segment, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIRemoveSegment", err);
    SCIClose(dev, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIClose", err);
    SCITerminate();
    return 0;
}
