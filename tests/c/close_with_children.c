/*
 * close_with_children: SCIClose of a descriptor whose segment (mapped locally, connected,
 * mapped remotely, with a sequence), DMA queue and interrupt are all still open succeeds
 * and tears them down, as Dolphin's library does (test suites close without unmapping);
 * the node frees the segment id and the interrupt number at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include "sisci_api.h"

static void want(sci_error_t got, sci_error_t expected, int line)
{
    if (got != expected) {
        fprintf(stderr, "close_with_children: line %d: got 0x%x, want 0x%x (%s)\n", line,
                (unsigned)got, (unsigned)expected, SCIGetErrorString(expected));
        exit(1);
    }
}
#define WANT(e, x) want((e), (x), __LINE__)

int main(void)
{
    sci_desc_t dev, other;
    sci_local_segment_t seg, again;
    sci_remote_segment_t rseg;
    sci_map_t lmap, rmap;
    sci_sequence_t seq;
    sci_dma_queue_t dq;
    sci_local_interrupt_t intr, intr2;
    unsigned int node, no = 4242;
    sci_error_t err;
    volatile unsigned int *p;

    SCIInitialize(0, &err);
    WANT(err, SCI_ERR_OK);
    SCIGetLocalNodeId(0, &node, 0, &err);
    SCIOpen(&dev, 0, &err);
    WANT(err, SCI_ERR_OK);
    SCIOpen(&other, 0, &err);
    WANT(err, SCI_ERR_OK);
    SCICreateSegment(dev, &seg, 4242, 4096, NULL, NULL, 0, &err);
    WANT(err, SCI_ERR_OK);
    SCIPrepareSegment(seg, 0, 0, &err);
    SCISetSegmentAvailable(seg, 0, 0, &err);
    WANT(err, SCI_ERR_OK);
    SCIMapLocalSegment(seg, &lmap, 0, 4096, NULL, 0, &err);
    WANT(err, SCI_ERR_OK);
    SCIConnectSegment(dev, &rseg, node, 4242, 0, NULL, NULL, 1000, 0, &err);
    WANT(err, SCI_ERR_OK);
    p = (volatile unsigned int *)SCIMapRemoteSegment(rseg, &rmap, 0, 4096, NULL, 0, &err);
    WANT(err, SCI_ERR_OK);
    p[0] = 7;
    SCICreateMapSequence(rmap, &seq, 0, &err);
    WANT(err, SCI_ERR_OK);
    SCICreateDMAQueue(dev, &dq, 0, 4, 0, &err);
    WANT(err, SCI_ERR_OK);
    SCICreateInterrupt(dev, &intr, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    WANT(err, SCI_ERR_OK);

    SCIClose(dev, 0, &err);
    WANT(err, SCI_ERR_OK);
    /* Every handle is stale now. */
    SCIRemoveSegment(seg, 0, &err);
    WANT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIUnmapSegment(rmap, 0, &err);
    WANT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIDisconnectSegment(rseg, 0, &err);
    WANT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIRemoveDMAQueue(dq, 0, &err);
    WANT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIRemoveInterrupt(intr, 0, &err);
    WANT(err, SCI_ERR_ILLEGAL_PARAMETER);
    /* The node let go: the id and the number are free for another descriptor. */
    SCICreateSegment(other, &again, 4242, 4096, NULL, NULL, 0, &err);
    WANT(err, SCI_ERR_OK);
    SCICreateInterrupt(other, &intr2, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    WANT(err, SCI_ERR_OK);
    SCIClose(other, 0, &err);
    WANT(err, SCI_ERR_OK);
    SCITerminate();
    printf("close_with_children: passed\n");
    return 0;
}
