/*
 * readonly_fault: a map made with SCI_FLAG_READONLY_MAP is enforced by the MMU.
 * Reads work; the store at the end must kill the process with SIGSEGV (the test runner
 * checks the signal). Exits 0 only if the store did NOT fault, which is a failure.
 */
#include <stdio.h>
#include "sisci_api.h"

int main(void)
{
    sci_desc_t dev;
    sci_local_segment_t seg;
    sci_remote_segment_t rseg;
    sci_map_t map, wmap;
    sci_error_t err;
    unsigned int node;
    volatile int *ro, *rw;

    SCIInitialize(0, &err);
    SCIOpen(&dev, 0, &err);
    if (err != SCI_ERR_OK) return 2;
    SCIGetLocalNodeId(0, &node, 0, &err);
    SCICreateSegment(dev, &seg, 0, 4096, NULL, NULL, SCI_FLAG_AUTO_ID, &err);
    if (err != SCI_ERR_OK) return 2;
    rw = (volatile int *)SCIMapLocalSegment(seg, &wmap, 0, 4096, NULL, 0, &err);
    rw[1] = 42;
    SCIPrepareSegment(seg, 0, 0, &err);
    SCISetSegmentAvailable(seg, 0, 0, &err);
    SCIConnectSegment(dev, &rseg, node, SCIGetLocalSegmentId(seg), 0, NULL, NULL, 1000, 0, &err);
    if (err != SCI_ERR_OK) return 2;
    ro = (volatile int *)SCIMapRemoteSegment(rseg, &map, 0, 4096, NULL, SCI_FLAG_READONLY_MAP, &err);
    if (err != SCI_ERR_OK || ro[1] != 42) return 2;
    printf("read-only map reads fine; now storing\n");
    fflush(stdout);
    ro[0] = 1; /* must fault */
    return 0;
}
