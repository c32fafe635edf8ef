/*
 * hello_sender: the sending half of the SISCI "Hello, World!" over a mapped segment.
 *
 * Connects to segment HELLO_SEG_ID of node RECEIVER (argv[1], default 4), waiting until the
 * receiver has made it available, maps it, and stores the print command into its first
 * word: a plain CPU store that lands in the receiver's memory.
 *
 *   REMORA_NODE=8 ./hello_sender 4
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "sisci_api.h"

#define HELLO_SEG_ID   4
#define ADAPTER_NO     0
#define PRINT_COMMAND  1

static int fail(const char *what, sci_error_t err)
{
    fprintf(stderr, "hello_sender: %s failed: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
    return 1;
}

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
    unsigned int receiver = argc > 1 ? (unsigned int)strtoul(argv[1], NULL, 0) : 4;
    struct timespec pause = {0, 20 * 1000 * 1000};
    time_t give_up;

    SCIInitialize(0, &err);
    if (err != SCI_ERR_OK) return fail("SCIInitialize", err);
    SCIOpen(&dev, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIOpen", err);

    /* Synchronous connect: waits (here up to 30 s) for the receiver's segment.
     * A node whose daemon has not started yet is unknown at once: ask again shortly. */
    give_up = time(NULL) + 30;
    for (;;) {
        SCIConnectSegment(dev, &segment, receiver, HELLO_SEG_ID, ADAPTER_NO, NULL, NULL, 30000, 0, &err);
        if (err != SCI_ERR_NO_SUCH_NODEID || time(NULL) > give_up)
            break;
        nanosleep(&pause, NULL);
    }
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
