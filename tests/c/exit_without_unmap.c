/*
 * exit_without_unmap: store the hello world's print command through a map of a segment on
 * another host, then exit at once without unmapping: the store must still reach its home
 * (the library flushes maps of other hosts at exit).
 */
#include <stdio.h>
#include <stdlib.h>
#include "sisci_api.h"

int main(int argc, char *argv[])
{
    sci_desc_t dev;
    sci_remote_segment_t seg;
    sci_map_t map;
    sci_error_t err;
    volatile int *word;
    unsigned int node = argc > 1 ? (unsigned int)strtoul(argv[1], NULL, 0) : 4;

    SCIInitialize(0, &err);
    SCIOpen(&dev, 0, &err);
    if (err != SCI_ERR_OK) return 2;
    SCIConnectSegment(dev, &seg, node, 4, 0, NULL, NULL, 30000, 0, &err);
    if (err != SCI_ERR_OK) return 3;
    word = (volatile int *)SCIMapRemoteSegment(seg, &map, 0, 4096, NULL, 0, &err);
    if (err != SCI_ERR_OK) return 4;
    *word = 1;
    return 0; /* no unmap, no flush, no close */
}
