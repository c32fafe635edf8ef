/*
 * hello_sender: the sending half of the SISCI "Hello, World!" over a mapped segment.
 *
 * Connects to segment HELLO_SEG_ID of node RECEIVER (argv[1], default 4), waiting until the
 * receiver has made it available, maps it, and stores the print command into its first
 * word: a plain CPU store that lands in the receiver's memory.
 *
 *   REMORA_NODE=8 ./hello_sender 4
 */
#define PROGRAM "hello_sender"
#include "example.h"

#define HELLO_SEG_ID   4

int main(int argc, char *argv[])
{
    sci_desc_t dev;
    sci_remote_segment_t segment;
    sci_map_t map;
    sci_sequence_t seq;
    sci_sequence_status_t status;
    sci_error_t err;
    volatile int *word;
    size_t size;
    unsigned int receiver = node_arg(argc, argv);

    if (open_sisci(&dev) != 0) return 1;

    /* Synchronous connect: waits (here up to 30 s) for the receiver's segment.
     * A node whose daemon has not started yet is unknown at once: ask again shortly. */
    err = connect_segment(dev, &segment, receiver, HELLO_SEG_ID);
    if (err != SCI_ERR_OK) return fail("SCIConnectSegment", err);
    size = SCIGetRemoteSegmentSize(segment);

    word = (volatile int *)SCIMapRemoteSegment(segment, &map, 0, size, NULL, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIMapRemoteSegment", err);
    SCICreateMapSequence(map, &seq, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCICreateMapSequence", err);

    do {
        status = SCIStartSequence(seq, 0, &err);
    } while (status == SCI_SEQ_PENDING);
    if (status != SCI_SEQ_OK) return fail("SCIStartSequence", err);

    *word = PRINT_COMMAND;

    status = SCICheckSequence(seq, 0, &err);
    if (err != SCI_ERR_OK || status != SCI_SEQ_OK) return fail("SCICheckSequence", err);
    printf("sent the print command to node %u segment %d (%lu bytes)\n", receiver, HELLO_SEG_ID, (unsigned long)size);

    SCIRemoveSequence(seq, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIRemoveSequence", err);
    SCIUnmapSegment(map, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIUnmapSegment", err);
    SCIDisconnectSegment(segment, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIDisconnectSegment", err);
    SCIClose(dev, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIClose", err);
    SCITerminate();
    return 0;
}
