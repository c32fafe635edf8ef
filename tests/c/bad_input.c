/*
 * bad_input: every family of entry points, called with NULL, stale and out-of-range
 * arguments, must return its documented code and never crash.
 * Prints "bad_input: N checks passed" and exits 0, or names the first failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sisci_api.h"

static int checks;

#define EXPECT(call_err, want)                                                            \
    do {                                                                                  \
        checks++;                                                                         \
        if ((call_err) != (want)) {                                                       \
            fprintf(stderr, "bad_input: line %d: got 0x%x (%s), want 0x%x (%s)\n",        \
                    __LINE__, (unsigned)(call_err), SCIGetErrorString(call_err),          \
                    (unsigned)(want), SCIGetErrorString(want));                           \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

int main(void)
{
    sci_desc_t dev, dev2;
    sci_local_segment_t seg, stale_seg, tmp;
    sci_remote_segment_t rseg;
    sci_map_t map, stale_map, lmap;
    sci_sequence_t seq;
    sci_error_t err;
    unsigned int node;
    char buf[64];
    sci_query_string_t qs;
    sci_query_adapter_t qa;
    volatile char *p;

    /* Before SCIInitialize. */
    SCIOpen(&dev, 0, &err);
    EXPECT(err, SCI_ERR_NOT_INITIALIZED);

    SCIInitialize(0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIOpen(NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIOpen(&dev, 0, NULL); /* a NULL error pointer must not crash */
    SCIOpen(&dev, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIOpen(&dev2, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIClose(NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);

    SCIGetLocalNodeId(0, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIGetLocalNodeId(7, &node, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_ADAPTERNO);
    SCIGetLocalNodeId(0, &node, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* Queries. */
    SCIQuery(9999, buf, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_QUERY);
    SCIQuery(SCI_Q_API, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    qs.str = buf;
    qs.length = sizeof buf;
    SCIQuery(SCI_Q_VENDORID, &qs, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    qa.localAdapterNo = 0;
    qa.portNo = 0;
    qa.subcommand = 0xdead;
    qa.data = &node;
    SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_QUERY);

    /* Local segments. */
    SCICreateSegment(NULL, &seg, 1, 4096, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateSegment(dev, NULL, 1, 4096, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateSegment(dev, &seg, 1, 4096, NULL, NULL, 0x10000000u, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCICreateSegment(dev, &seg, 1, 4096, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateSegment(dev2, &tmp, 1, 4096, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_SEGMENTID_USED);
    SCISetSegmentAvailable(seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_SEGMENT_NOT_PREPARED);
    SCIPrepareSegment(seg, 5, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_ADAPTERNO);
    SCIPrepareSegment(NULL, 0, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIPrepareSegment(seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCISetSegmentAvailable(seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    if (SCIGetLocalSegmentSize(NULL) != 0) { fprintf(stderr, "size of NULL\n"); return 1; }
    if (SCIGetLocalSegmentSize(seg) != 4096) { fprintf(stderr, "size\n"); return 1; }

    /* A stale segment handle. */
    SCICreateSegment(dev2, &stale_seg, 2, 4096, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(stale_seg, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(stale_seg, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIPrepareSegment(stale_seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIMapLocalSegment(stale_seg, &map, 0, 4096, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);

    /* Remote segments and maps. */
    SCIConnectSegment(dev, &rseg, 250, 1, 0, NULL, NULL, SCI_INFINITE_TIMEOUT, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_NODEID);
    SCIConnectSegment(dev, &rseg, node, 12345, 0, NULL, NULL, 100, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_SEGMENT);
    SCIConnectSegment(dev, NULL, node, 1, 0, NULL, NULL, 100, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIConnectSegment(dev, &rseg, node, 1, 0, NULL, NULL, SCI_INFINITE_TIMEOUT, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    if (SCIGetRemoteSegmentSize(rseg) != 4096) { fprintf(stderr, "remote size\n"); return 1; }
    if (SCIGetRemoteSegmentNodeId(rseg) != node) { fprintf(stderr, "remote node\n"); return 1; }
    SCIMapRemoteSegment(rseg, &map, 4000, 200, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIMapRemoteSegment(rseg, NULL, 0, 4096, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIMapRemoteSegment((sci_remote_segment_t)seg, &map, 0, 4096, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER); /* a local handle is not a remote one */
    p = (volatile char *)SCIMapRemoteSegment(rseg, &map, 100, 300, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    p[0] = 'x';
    SCIMemCpy(NULL, buf, map, 299, 2, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIMemCpy(NULL, NULL, map, 0, 2, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIMemCpy(NULL, buf, NULL, 0, 2, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    strcpy(buf, "hello");
    SCIMemCpy(NULL, buf, map, 10, 6, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIMemWrite(buf, p + 295, 10, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIMemWrite(buf, p + 20, 6, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    memset(buf, 0, sizeof buf);
    SCIMemCpy(NULL, buf, map, 20, 6, SCI_FLAG_BLOCK_READ, &err);
    EXPECT(err, SCI_ERR_OK);
    if (strcmp(buf, "hello") != 0) { fprintf(stderr, "read back %s\n", buf); return 1; }

    /* Dependencies: BUSY. */
    SCICreateMapSequence(map, &seq, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIDisconnectSegment(rseg, 0, &err);
    EXPECT(err, SCI_ERR_BUSY);
    SCIStartSequence(NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    if (SCIStartSequence(seq, 0, &err) != SCI_SEQ_OK) { fprintf(stderr, "start\n"); return 1; }
    if (SCICheckSequence(seq, SCI_FLAG_NO_FLUSH, &err) != SCI_SEQ_OK) { fprintf(stderr, "check\n"); return 1; }
    SCIStoreBarrier(seq, 0);
    SCIFlush(NULL, 0);
    SCIStoreBarrier(NULL, 0); /* must not crash */
    /* Unmapping while the map's sequence exists is allowed, as by Dolphin's library; the
     * sequence still answers until it is removed. */
    SCIUnmapSegment(map, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    if (SCIStartSequence(seq, 0, &err) != SCI_SEQ_OK) { fprintf(stderr, "start after unmap\n"); return 1; }
    SCIRemoveSequence(seq, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSequence(seq, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    stale_map = map;
    SCIUnmapSegment(stale_map, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    if (SCIGetMapPointer(stale_map) != NULL) { fprintf(stderr, "stale map pointer\n"); return 1; }
    SCIMemCpy(NULL, buf, stale_map, 0, 1, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);

    SCIMapLocalSegment(seg, &lmap, 0, 4096, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(seg, 0, &err);
    EXPECT(err, SCI_ERR_BUSY);
    SCIUnmapSegment(lmap, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* Hardware-only calls. */
    SCIGetCSRRegister(dev, 0, node, 0, 0, &err);
    EXPECT(err, SCI_ERR_NOT_SUPPORTED);
    SCIAttachPhysicalMemory(0, NULL, 0, 4096, seg, 0, &err);
    EXPECT(err, SCI_ERR_NOT_SUPPORTED);

    /* Orderly teardown. */
    SCIDisconnectSegment(rseg, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(seg, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIClose(dev, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIClose(dev, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIClose(dev2, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCITerminate();
    printf("bad_input: %d checks passed\n", checks);
    return 0;
}
