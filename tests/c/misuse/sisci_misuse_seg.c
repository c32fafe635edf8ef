/*
 * sisci_misuse_seg: the misuse matrix of SISCI's library, descriptor, segment, map,
 * sequence, copy and block-transfer calls (issue 18 item 3). Each call is made with a NULL
 * handle, a freed (stale) handle, a handle of another kind, NULL pointers, flags that do not
 * belong, out-of-range offsets and sizes, and in states that forbid it; each must answer
 * the code libsisci documents (capi/sisci: a bad handle is SCI_ERR_ILLEGAL_PARAMETER, a
 * call without an error argument answers 0 or NULL). One ROW line per row (misuse.h).
 * The DMA, interrupt and hardware-only calls are in sisci_misuse_dma.c.
 */
#include "misuse.h"
#include "sisci_api.h"

#define SEG 4096u
#define ID 7101u
#define ID2 7102u
#define NO_NODE 250u
#define BADFLAG 0x40000000u

/* A row whose answer is the error argument: `stmt` passes `&e_`. */
#define R(call, misuse, want, ...)                                                                     \
    do {                                                                                               \
        sci_error_t e_ = (sci_error_t)0x7eadbeef;                                                      \
        __VA_ARGS__;                                                                                   \
        ROW(call, misuse, want, e_);                                                                   \
    } while (0)

static sci_desc_t dev, fdev;
static sci_local_segment_t seg, fseg, unprep, priv;
static sci_remote_segment_t rseg, frseg;
static sci_map_t map, fmap, lmap;
static sci_sequence_t seq, fseq;
static unsigned int node;

static void library_calls(void)
{
    dis_nodeId_list_t list;
    dis_virt_adapter_t type;
    unsigned int adapters[4];
    dis_adapter_type_t types[4];
    unsigned int n;
    sci_desc_t d;
    char buf[64];
    sci_query_string_t qs;

    R("SCIInitialize", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIInitialize(BADFLAG, &e_));
    R("SCIOpen", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIOpen(NULL, 0, &e_));
    R("SCIOpen", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIOpen(&d, BADFLAG, &e_));
    R("SCIClose", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIClose(NULL, 0, &e_));
    R("SCIClose", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIClose(fdev, 0, &e_));
    R("SCIClose", KIND, SCI_ERR_ILLEGAL_PARAMETER, SCIClose((sci_desc_t)seg, 0, &e_));
    R("SCIClose", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIClose(dev, BADFLAG, &e_));
    R("SCIGetLocalNodeId", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIGetLocalNodeId(0, NULL, 0, &e_));
    R("SCIGetLocalNodeId", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO, SCIGetLocalNodeId(9, &n, 0, &e_));
    R("SCIGetLocalNodeId", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIGetLocalNodeId(0, &n, BADFLAG, &e_));
    R("SCIProbeNode", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIProbeNode(NULL, 0, node, 0, &e_));
    R("SCIProbeNode", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIProbeNode(fdev, 0, node, 0, &e_));
    R("SCIProbeNode", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO, SCIProbeNode(dev, 9, node, 0, &e_));
    R("SCIProbeNode", UNKNOWN, SCI_ERR_NO_SUCH_NODEID, SCIProbeNode(dev, 0, NO_NODE, 0, &e_));
    R("SCIProbeNode", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIProbeNode(dev, 0, node, BADFLAG, &e_));
    R("SCIQuery", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_VENDORID, NULL, 0, &e_));
    R("SCIQuery", UNKNOWN, SCI_ERR_ILLEGAL_QUERY, SCIQuery(0x7777, buf, 0, &e_));
    qs.str = buf;
    qs.length = sizeof buf;
    R("SCIQuery", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIQuery(SCI_Q_VENDORID, &qs, BADFLAG, &e_));
    R("SCIGetNodeIdByAdapterName", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIGetNodeIdByAdapterName(NULL, &list, &type, 0, &e_));
    R("SCIGetNodeIdByAdapterName", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIGetNodeIdByAdapterName("localhost", NULL, &type, 0, &e_));
    R("SCIGetNodeIdByAdapterName", UNKNOWN, SCI_ERR_NO_SUCH_NODEID,
      SCIGetNodeIdByAdapterName("no-such-host.invalid", &list, &type, 0, &e_));
    R("SCIGetNodeIdByAdapterName", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIGetNodeIdByAdapterName("localhost", &list, &type, BADFLAG, &e_));
    R("SCIGetNodeInfoByAdapterName", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIGetNodeInfoByAdapterName(NULL, adapters, &list, types, 0, &e_));
    R("SCIGetNodeInfoByAdapterName", UNKNOWN, SCI_ERR_NO_SUCH_NODEID,
      SCIGetNodeInfoByAdapterName("no-such-host.invalid", adapters, &list, types, 0, &e_));
    ROW("SCIGetErrorString", UNKNOWN, 1, SCIGetErrorString((sci_error_t)0x7eadbeef) != NULL);
}

static void local_segment_calls(void)
{
    sci_local_segment_t s;
    size_t size;
    unsigned int from, adapter;
    void *mem = NULL;

    R("SCICreateSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCICreateSegment(NULL, &s, ID2, SEG, NULL, NULL, 0, &e_));
    R("SCICreateSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCICreateSegment(fdev, &s, ID2, SEG, NULL, NULL, 0, &e_));
    R("SCICreateSegment", KIND, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateSegment((sci_desc_t)rseg, &s, ID2, SEG, NULL, NULL, 0, &e_));
    R("SCICreateSegment", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCICreateSegment(dev, NULL, ID2, SEG, NULL, NULL, 0, &e_));
    R("SCICreateSegment", FLAG, SCI_ERR_ILLEGAL_FLAG, SCICreateSegment(dev, &s, ID2, SEG, NULL, NULL, BADFLAG, &e_));
    R("SCICreateSegment", HW, SCI_ERR_NOT_SUPPORTED,
      SCICreateSegment(dev, &s, ID2, SEG, NULL, NULL, SCI_FLAG_PHYSICAL, &e_));
    R("SCICreateSegment", STATE, SCI_ERR_SEGMENTID_USED, SCICreateSegment(dev, &s, ID, SEG, NULL, NULL, 0, &e_));

    R("SCIPrepareSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIPrepareSegment(NULL, 0, 0, &e_));
    R("SCIPrepareSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIPrepareSegment(fseg, 0, 0, &e_));
    R("SCIPrepareSegment", KIND, SCI_ERR_ILLEGAL_PARAMETER, SCIPrepareSegment((sci_local_segment_t)rseg, 0, 0, &e_));
    R("SCIPrepareSegment", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO, SCIPrepareSegment(unprep, 9, 0, &e_));
    R("SCIPrepareSegment", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIPrepareSegment(unprep, 0, BADFLAG, &e_));

    R("SCISetSegmentAvailable", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCISetSegmentAvailable(NULL, 0, 0, &e_));
    R("SCISetSegmentAvailable", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCISetSegmentAvailable(fseg, 0, 0, &e_));
    R("SCISetSegmentAvailable", STATE, SCI_ERR_SEGMENT_NOT_PREPARED, SCISetSegmentAvailable(unprep, 0, 0, &e_));
    R("SCISetSegmentAvailable", FLAG, SCI_ERR_ILLEGAL_FLAG, SCISetSegmentAvailable(seg, 0, BADFLAG, &e_));
    R("SCISetSegmentAvailable", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO, SCISetSegmentAvailable(seg, 9, 0, &e_));

    R("SCISetSegmentUnavailable", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCISetSegmentUnavailable(NULL, 0, 0, &e_));
    R("SCISetSegmentUnavailable", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCISetSegmentUnavailable(fseg, 0, 0, &e_));
    R("SCISetSegmentUnavailable", FLAG, SCI_ERR_ILLEGAL_FLAG, SCISetSegmentUnavailable(seg, 0, BADFLAG, &e_));

    R("SCIRemoveSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSegment(NULL, 0, &e_));
    R("SCIRemoveSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSegment(fseg, 0, &e_));
    R("SCIRemoveSegment", KIND, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSegment((sci_local_segment_t)map, 0, &e_));
    R("SCIRemoveSegment", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIRemoveSegment(seg, BADFLAG, &e_));
    R("SCIRemoveSegment", STATE, SCI_ERR_BUSY, SCIRemoveSegment(seg, 0, &e_)); /* mapped (lmap) */

    R("SCIWaitForLocalSegmentEvent", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCIWaitForLocalSegmentEvent(NULL, &from, &adapter, 10, 0, &e_));
    R("SCIWaitForLocalSegmentEvent", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIWaitForLocalSegmentEvent(fseg, &from, &adapter, 10, 0, &e_));
    R("SCIWaitForLocalSegmentEvent", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIWaitForLocalSegmentEvent(seg, &from, &adapter, 10, BADFLAG, &e_));

    ROW("SCIGetLocalSegmentId", NULLH, 0, SCIGetLocalSegmentId(NULL));
    ROW("SCIGetLocalSegmentId", FREED, 0, SCIGetLocalSegmentId(fseg));
    ROW("SCIGetLocalSegmentSize", NULLH, 0, SCIGetLocalSegmentSize(NULL));
    ROW("SCIGetLocalSegmentSize", FREED, 0, SCIGetLocalSegmentSize(fseg));

    MUST(posix_memalign(&mem, 4096, SEG) == 0);
    R("SCIRegisterSegmentMemory", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIRegisterSegmentMemory(mem, SEG, NULL, 0, &e_));
    R("SCIRegisterSegmentMemory", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIRegisterSegmentMemory(mem, SEG, fseg, 0, &e_));
    R("SCIRegisterSegmentMemory", NULLP, SCI_ERR_ILLEGAL_ADDRESS, SCIRegisterSegmentMemory(NULL, SEG, seg, 0, &e_));
    R("SCIRegisterSegmentMemory", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCIRegisterSegmentMemory((void *)(~(size_t)0 - 4095), 2 * SEG, seg, 0, &e_));
    R("SCIRegisterSegmentMemory", STATE, SCI_ERR_ILLEGAL_OPERATION, SCIRegisterSegmentMemory(mem, SEG, seg, 0, &e_));
    R("SCIRegisterSegmentMemory", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIRegisterSegmentMemory(mem, SEG, seg, BADFLAG, &e_));
    free(mem);

    R("SCIShareSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIShareSegment(NULL, 0, &e_));
    R("SCIShareSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIShareSegment(fseg, 0, &e_));
    R("SCIShareSegment", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIShareSegment(seg, BADFLAG, &e_));
    R("SCIShareSegment", STATE, SCI_ERR_ILLEGAL_OPERATION, SCIShareSegment(priv, 0, &e_));

    R("SCIAttachLocalSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCIAttachLocalSegment(NULL, &s, ID, &size, NULL, NULL, 0, &e_));
    R("SCIAttachLocalSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIAttachLocalSegment(fdev, &s, ID, &size, NULL, NULL, 0, &e_));
    R("SCIAttachLocalSegment", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIAttachLocalSegment(dev, NULL, ID, &size, NULL, NULL, 0, &e_));
    R("SCIAttachLocalSegment", UNKNOWN, SCI_ERR_NO_SUCH_SEGMENT,
      SCIAttachLocalSegment(dev, &s, 4242424, &size, NULL, NULL, 0, &e_));
    R("SCIAttachLocalSegment", STATE, SCI_ERR_ACCESS, /* not shared */
      SCIAttachLocalSegment(dev, &s, ID2 + 1, &size, NULL, NULL, 0, &e_));
    R("SCIAttachLocalSegment", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIAttachLocalSegment(dev, &s, ID, &size, NULL, NULL, BADFLAG, &e_));
}

static void remote_segment_calls(void)
{
    sci_remote_segment_t r;
    sci_error_t status;

    R("SCIConnectSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCIConnectSegment(NULL, &r, node, ID, 0, NULL, NULL, 100, 0, &e_));
    R("SCIConnectSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIConnectSegment(fdev, &r, node, ID, 0, NULL, NULL, 100, 0, &e_));
    R("SCIConnectSegment", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIConnectSegment(dev, NULL, node, ID, 0, NULL, NULL, 100, 0, &e_));
    R("SCIConnectSegment", UNKNOWN, SCI_ERR_NO_SUCH_NODEID,
      SCIConnectSegment(dev, &r, NO_NODE, ID, 0, NULL, NULL, 100, 0, &e_));
    R("SCIConnectSegment", UNKNOWN, SCI_ERR_NO_SUCH_SEGMENT,
      SCIConnectSegment(dev, &r, node, 4242424, 0, NULL, NULL, 50, 0, &e_));
    R("SCIConnectSegment", STATE, SCI_ERR_TIMEOUT, SCIConnectSegment(dev, &r, node, ID2 + 1, 0, NULL, NULL, 50, 0, &e_));
    R("SCIConnectSegment", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO,
      SCIConnectSegment(dev, &r, node, ID, 9, NULL, NULL, 100, 0, &e_));
    R("SCIConnectSegment", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIConnectSegment(dev, &r, node, ID, 0, NULL, NULL, 100, BADFLAG, &e_));
    R("SCIConnectSegment", FLAG, SCI_ERR_ILLEGAL_PARAMETER,
      SCIConnectSegment(dev, &r, node, ID, 0, NULL, NULL, 100, SCI_FLAG_BROADCAST, &e_));

    R("SCIDisconnectSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectSegment(NULL, 0, &e_));
    R("SCIDisconnectSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectSegment(frseg, 0, &e_));
    R("SCIDisconnectSegment", KIND, SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectSegment((sci_remote_segment_t)seg, 0, &e_));
    R("SCIDisconnectSegment", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIDisconnectSegment(rseg, BADFLAG, &e_));
    R("SCIDisconnectSegment", STATE, SCI_ERR_BUSY, SCIDisconnectSegment(rseg, 0, &e_)); /* mapped */

    ROW("SCIGetRemoteSegmentSize", NULLH, 0, SCIGetRemoteSegmentSize(NULL));
    ROW("SCIGetRemoteSegmentSize", FREED, 0, SCIGetRemoteSegmentSize(frseg));
    ROW("SCIGetRemoteSegmentId", NULLH, 0, SCIGetRemoteSegmentId(NULL));
    /* Documented: a handle keeps its id and node after SCIDisconnectSegment, as Dolphin's. */
    ROWAS("SCIGetRemoteSegmentId", FREED, "the id it had", ID, SCIGetRemoteSegmentId(frseg));
    ROW("SCIGetRemoteSegmentNodeId", NULLH, 0, SCIGetRemoteSegmentNodeId(NULL));
    ROWAS("SCIGetRemoteSegmentNodeId", FREED, "the node it had", node, SCIGetRemoteSegmentNodeId(frseg));

    R("SCIWaitForRemoteSegmentEvent", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCIWaitForRemoteSegmentEvent(NULL, &status, 10, 0, &e_));
    R("SCIWaitForRemoteSegmentEvent", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIWaitForRemoteSegmentEvent(frseg, &status, 10, 0, &e_));
    R("SCIWaitForRemoteSegmentEvent", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIWaitForRemoteSegmentEvent(rseg, &status, 10, BADFLAG, &e_));
    {
        sci_address_t a;
        memset(&a, 0, sizeof a);
        R("SCIConnectSCISpace", HW, SCI_ERR_NOT_SUPPORTED, SCIConnectSCISpace(dev, 0, &r, a, SEG, 0, &e_));
    }
}

static void map_calls(void)
{
    sci_map_t m;
    sci_sequence_t q;
    char buf[64];

    R("SCIMapRemoteSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIMapRemoteSegment(NULL, &m, 0, SEG, NULL, 0, &e_));
    R("SCIMapRemoteSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIMapRemoteSegment(frseg, &m, 0, SEG, NULL, 0, &e_));
    R("SCIMapRemoteSegment", KIND, SCI_ERR_ILLEGAL_PARAMETER,
      SCIMapRemoteSegment((sci_remote_segment_t)seg, &m, 0, SEG, NULL, 0, &e_));
    R("SCIMapRemoteSegment", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIMapRemoteSegment(rseg, NULL, 0, SEG, NULL, 0, &e_));
    R("SCIMapRemoteSegment", RANGE, SCI_ERR_OUT_OF_RANGE, SCIMapRemoteSegment(rseg, &m, SEG - 8, 16, NULL, 0, &e_));
    R("SCIMapRemoteSegment", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCIMapRemoteSegment(rseg, &m, ~(size_t)0 - 8, 16, NULL, 0, &e_));
    R("SCIMapRemoteSegment", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIMapRemoteSegment(rseg, &m, 0, SEG, NULL, BADFLAG, &e_));
    R("SCIMapRemoteSegment", HW, SCI_ERR_NOT_SUPPORTED,
      SCIMapRemoteSegment(rseg, &m, 0, SEG, NULL, SCI_FLAG_LOCK_OPERATION, &e_));

    R("SCIMapLocalSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIMapLocalSegment(NULL, &m, 0, SEG, NULL, 0, &e_));
    R("SCIMapLocalSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIMapLocalSegment(fseg, &m, 0, SEG, NULL, 0, &e_));
    R("SCIMapLocalSegment", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIMapLocalSegment(seg, NULL, 0, SEG, NULL, 0, &e_));
    R("SCIMapLocalSegment", RANGE, SCI_ERR_OUT_OF_RANGE, SCIMapLocalSegment(seg, &m, SEG, 1, NULL, 0, &e_));
    R("SCIMapLocalSegment", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIMapLocalSegment(seg, &m, 0, SEG, NULL, BADFLAG, &e_));

    R("SCIUnmapSegment", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIUnmapSegment(NULL, 0, &e_));
    R("SCIUnmapSegment", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIUnmapSegment(fmap, 0, &e_));
    R("SCIUnmapSegment", KIND, SCI_ERR_ILLEGAL_PARAMETER, SCIUnmapSegment((sci_map_t)seq, 0, &e_));
    R("SCIUnmapSegment", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIUnmapSegment(map, BADFLAG, &e_));
    ROW("SCIGetMapPointer", NULLH, NULL, SCIGetMapPointer(NULL));
    ROW("SCIGetMapPointer", FREED, NULL, SCIGetMapPointer(fmap));
    ROW("SCIGetMapPhysAddr", HW, 0, SCIGetMapPhysAddr(map));

    R("SCICreateMapSequence", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCICreateMapSequence(NULL, &q, 0, &e_));
    R("SCICreateMapSequence", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCICreateMapSequence(fmap, &q, 0, &e_));
    R("SCICreateMapSequence", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCICreateMapSequence(map, NULL, 0, &e_));
    R("SCICreateMapSequence", FLAG, SCI_ERR_ILLEGAL_FLAG, SCICreateMapSequence(map, &q, BADFLAG, &e_));
    R("SCIRemoveSequence", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSequence(NULL, 0, &e_));
    R("SCIRemoveSequence", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSequence(fseq, 0, &e_));
    R("SCIRemoveSequence", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIRemoveSequence(seq, BADFLAG, &e_));
    R("SCIStartSequence", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIStartSequence(NULL, 0, &e_));
    R("SCIStartSequence", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIStartSequence(fseq, 0, &e_));
    ROW("SCIStartSequence (return)", FREED, SCI_SEQ_NOT_RETRIABLE, SCIStartSequence(fseq, 0, NULL));
    R("SCIStartSequence", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIStartSequence(seq, BADFLAG, &e_));
    R("SCICheckSequence", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCICheckSequence(NULL, 0, &e_));
    R("SCICheckSequence", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCICheckSequence(fseq, 0, &e_));
    R("SCICheckSequence", FLAG, SCI_ERR_ILLEGAL_FLAG, SCICheckSequence(seq, BADFLAG, &e_));
    RETURNS("SCIStoreBarrier", NULLH, SCIStoreBarrier(NULL, 0));
    RETURNS("SCIStoreBarrier", FREED, SCIStoreBarrier(fseq, 0));
    RETURNS("SCIFlush", FREED, SCIFlush(fseq, 0));
    RETURNS("SCIFlushReadBuffers", NULLH, SCIFlushReadBuffers(NULL));
    RETURNS("SCIFlushReadBuffers", FREED, SCIFlushReadBuffers(fseq));

    R("SCIMemCpy", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(NULL, buf, NULL, 0, 8, 0, &e_));
    R("SCIMemCpy", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(NULL, buf, fmap, 0, 8, 0, &e_));
    R("SCIMemCpy", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(fseq, buf, map, 0, 8, SCI_FLAG_ERROR_CHECK, &e_));
    R("SCIMemCpy", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(NULL, NULL, map, 0, 8, 0, &e_));
    R("SCIMemCpy", RANGE, SCI_ERR_OUT_OF_RANGE, SCIMemCpy(NULL, buf, map, SEG - 4, 8, 0, &e_));
    R("SCIMemCpy", RANGE, SCI_ERR_OUT_OF_RANGE, SCIMemCpy(NULL, buf, map, ~(size_t)0 - 2, 8, 0, &e_));
    R("SCIMemCpy", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIMemCpy(NULL, buf, map, 0, 8, BADFLAG, &e_));
    R("SCIMemCopy", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIMemCopy(buf, fmap, 0, 8, 0, &e_));
    R("SCIMemCopy", RANGE, SCI_ERR_OUT_OF_RANGE, SCIMemCopy(buf, map, SEG - 4, 8, 0, &e_));
    R("SCIMemCopy", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIMemCopy(buf, map, 0, 8, BADFLAG, &e_));
    R("SCIMemWrite", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIMemWrite(NULL, SCIGetMapPointer(map), 8, 0, &e_));
    R("SCIMemWrite", NULLP, SCI_ERR_OUT_OF_RANGE, SCIMemWrite(buf, NULL, 8, 0, &e_)); /* no map holds it */
    R("SCIMemWrite", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCIMemWrite(buf, (volatile char *)SCIGetMapPointer(map) + SEG - 4, 8, 0, &e_));
    R("SCIMemWrite", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIMemWrite(buf, SCIGetMapPointer(map), 8, BADFLAG, &e_));
    R("SCIMemCpy_dual", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy_dual(NULL, buf, map, 0, fmap, 0, 8, 0, &e_));
    R("SCIMemCpy_dual", RANGE, SCI_ERR_OUT_OF_RANGE, SCIMemCpy_dual(NULL, buf, map, 0, lmap, SEG - 4, 8, 0, &e_));
    R("SCICacheSync", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCICacheSync(fmap, buf, 8, 0, &e_));
    R("SCICacheSync", FLAG, SCI_ERR_ILLEGAL_FLAG, SCICacheSync(map, buf, 8, BADFLAG, &e_));
}

static void block_calls(void)
{
    sci_block_transfer_t b, fb;
    R("SCITransferBlock", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCITransferBlock(NULL, 0, map, 0, 8, 0, &e_));
    R("SCITransferBlock", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCITransferBlock(lmap, 0, fmap, 0, 8, 0, &e_));
    R("SCITransferBlock", RANGE, SCI_ERR_OUT_OF_RANGE, SCITransferBlock(lmap, 0, map, SEG - 4, 8, 0, &e_));
    R("SCITransferBlock", RANGE, SCI_ERR_OUT_OF_RANGE, SCITransferBlock(lmap, SEG, map, 0, 8, 0, &e_));
    R("SCITransferBlock", FLAG, SCI_ERR_ILLEGAL_FLAG, SCITransferBlock(lmap, 0, map, 0, 8, BADFLAG, &e_));
    R("SCITransferBlockAsync", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCITransferBlockAsync(lmap, 0, map, 0, 8, NULL, NULL, NULL, 0, &e_));
    R("SCITransferBlockAsync", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCITransferBlockAsync(lmap, 0, fmap, 0, 8, &b, NULL, NULL, 0, &e_));
    R("SCITransferBlockAsync", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCITransferBlockAsync(lmap, 0, map, SEG, 8, &b, NULL, NULL, 0, &e_));
    R("SCITransferBlockAsync", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCITransferBlockAsync(lmap, 0, map, 0, 8, &b, NULL, NULL, BADFLAG, &e_));
    /* A finished transfer: abort is refused; the wait reports the outcome and frees it. */
    {
        sci_error_t e;
        SCITransferBlockAsync(lmap, 0, map, 0, 8, &fb, NULL, NULL, 0, &e);
        MUST(e == SCI_ERR_OK);
        SCIWaitForBlockTransfer(fb, SCI_INFINITE_TIMEOUT, 0, &e);
        MUST(e == SCI_ERR_OK);
        SCITransferBlockAsync(lmap, 0, map, 0, 8, &b, NULL, NULL, 0, &e);
        MUST(e == SCI_ERR_OK);
    }
    R("SCIWaitForBlockTransfer", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForBlockTransfer(NULL, 10, 0, &e_));
    R("SCIWaitForBlockTransfer", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForBlockTransfer(fb, 10, 0, &e_));
    R("SCIWaitForBlockTransfer", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIWaitForBlockTransfer(b, 10, BADFLAG, &e_));
    R("SCIAbortBlockTransfer", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIAbortBlockTransfer(NULL, 0, &e_));
    R("SCIAbortBlockTransfer", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIAbortBlockTransfer(fb, 0, &e_));
    R("SCIAbortBlockTransfer", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIAbortBlockTransfer(b, BADFLAG, &e_));
    {
        sci_error_t e;
        SCIWaitForBlockTransfer(b, SCI_INFINITE_TIMEOUT, 0, &e); /* it has ended now */
        MUST(e == SCI_ERR_OK);
    }
}

int main(void)
{
    sci_error_t e;
    int rc;

    misuse_begin("SISCI");
    /* Before SCIInitialize. */
    R("SCIOpen", STATE, SCI_ERR_NOT_INITIALIZED, SCIOpen(&dev, 0, &e_));
    SCIInitialize(0, &e);
    MUST(e == SCI_ERR_OK);
    SCIOpen(&dev, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIOpen(&fdev, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIClose(fdev, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIGetLocalNodeId(0, &node, 0, &e);
    MUST(e == SCI_ERR_OK);

    SCICreateSegment(dev, &seg, ID, SEG, NULL, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIPrepareSegment(seg, 0, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCISetSegmentAvailable(seg, 0, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateSegment(dev, &fseg, ID2, SEG, NULL, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveSegment(fseg, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateSegment(dev, &unprep, ID2 + 1, SEG, NULL, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateSegment(dev, &priv, 0, SEG, NULL, NULL, SCI_FLAG_PRIVATE, &e);
    MUST(e == SCI_ERR_OK);
    SCIConnectSegment(dev, &rseg, node, ID, 0, NULL, NULL, SCI_INFINITE_TIMEOUT, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIConnectSegment(dev, &frseg, node, ID, 0, NULL, NULL, SCI_INFINITE_TIMEOUT, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIDisconnectSegment(frseg, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIMapRemoteSegment(rseg, &map, 0, SEG, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIMapRemoteSegment(rseg, &fmap, 0, SEG, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIUnmapSegment(fmap, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIMapLocalSegment(seg, &lmap, 0, SEG, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateMapSequence(map, &seq, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateMapSequence(map, &fseq, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveSequence(fseq, 0, &e);
    MUST(e == SCI_ERR_OK);

    library_calls();
    local_segment_calls();
    remote_segment_calls();
    map_calls();
    block_calls();

    SCIRemoveSequence(seq, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIUnmapSegment(map, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIUnmapSegment(lmap, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIDisconnectSegment(rseg, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveSegment(priv, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveSegment(unprep, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveSegment(seg, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIClose(dev, 0, &e);
    MUST(e == SCI_ERR_OK);
    rc = misuse_end();
    SCITerminate();
    return rc;
}
