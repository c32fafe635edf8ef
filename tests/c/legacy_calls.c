/*
 * legacy_calls: the calls older and benchmark programs make that Remora gained late.
 *   - API 1.x block transfers: SCITransferBlock in both directions (pattern bytes checked
 *     through a third map), SCITransferBlockAsync whose callback runs on another thread
 *     before SCIWaitForBlockTransfer returns, SCIAbortBlockTransfer of a finished, a
 *     running and an unknown transfer, and SCI_Q_ADAPTER_SUGGESTED_MIN_BLOCK_SIZE;
 *   - GetSciMemCopyFunction/SetSciMemCopyFunction with plain ints (every routine copies
 *     the same bytes) and SCIMemCpy_dual;
 *   - SCIGetNodeIdByAdapterName/SCIGetNodeInfoByAdapterName with this host's name;
 *   - DMA channels: request (exclusive, shared, DONTCARE), a second request of a held
 *     channel, assign, DISStartDmaTransfer/Vec through the assigned queue, return.
 * Prints "legacy_calls: N checks passed" and exits 0, or names the first failure.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sisci_api.h"

#define SEG_SIZE (3u << 20) /* more than one 1 MiB piece of a block transfer */
#define BIG_SIZE (64u << 20)
#define ID_A 7101u
#define ID_B 7102u
#define ID_BIG 7103u

static int checks;

#define EXPECT(got, want)                                                                  \
    do {                                                                                   \
        sci_error_t got_ = (got);                                                          \
        checks++;                                                                          \
        if (got_ != (want)) {                                                              \
            fprintf(stderr, "legacy_calls: line %d: got 0x%x (%s), want 0x%x (%s)\n",      \
                    __LINE__, (unsigned)got_, SCIGetErrorString(got_), (unsigned)(want),   \
                    SCIGetErrorString(want));                                              \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "legacy_calls: line %d: %s\n", __LINE__, #cond);              \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* What the block-transfer callback saw. */
struct seen {
    volatile int calls;
    sci_error_t status;
    sci_block_transfer_t block;
    pthread_t thread;
};

static int block_done(void *arg, sci_block_transfer_t block, sci_error_t status)
{
    struct seen *s = arg;
    s->status = status;
    s->block = block;
    s->thread = pthread_self();
    __sync_synchronize();
    s->calls++;
    return SCI_CALLBACK_CONTINUE;
}

static void fill(volatile unsigned char *p, size_t n, unsigned seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31u + seed);
}

static int same(const volatile unsigned char *p, size_t n, unsigned seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 31u + seed))
            return 0;
    return 1;
}

static sci_local_segment_t make_segment(sci_desc_t dev, unsigned id, size_t size)
{
    sci_local_segment_t seg;
    sci_error_t err;
    SCICreateSegment(dev, &seg, id, size, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIPrepareSegment(seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCISetSegmentAvailable(seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    return seg;
}

static void block_transfers(sci_map_t amap, volatile unsigned char *a, sci_map_t bremote,
                            volatile unsigned char *b, sci_map_t bigsrc, sci_map_t bigdst)
{
    sci_error_t err;
    sci_block_transfer_t block, running;
    struct seen seen;
    unsigned int min_block = 0;
    sci_query_adapter_t q;

    /* The benchmark's first question. */
    q.localAdapterNo = 0;
    q.portNo = 0;
    q.subcommand = SCI_Q_ADAPTER_SUGGESTED_MIN_BLOCK_SIZE;
    q.data = &min_block;
    SCIQuery(SCI_Q_ADAPTER, &q, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(min_block == (unsigned int)sysconf(_SC_PAGESIZE));

    /* Local map -> remote map (NetGauge's call), checked through B's local map. */
    fill(a, SEG_SIZE, 1);
    SCITransferBlock(amap, 0, bremote, 0, SEG_SIZE, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(same(b, SEG_SIZE, 1));
    /* Remote map -> local map, at odd offsets. */
    fill(b + 1001, 70000, 2);
    SCITransferBlock(bremote, 1001, amap, 333, 70000, SCI_FLAG_BLOCK_READ, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(same(a + 333, 70000, 2));
    SCITransferBlock(amap, SEG_SIZE - 10, bremote, 0, 11, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCITransferBlock(amap, 0, bremote, 0, 16, SCI_FLAG_USE_CALLBACK, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCITransferBlock(NULL, 0, bremote, 0, 16, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);

    /* Asynchronous, with a callback on the library's thread; Wait returns after it. */
    memset(&seen, 0, sizeof seen);
    fill(a, SEG_SIZE, 3);
    SCITransferBlockAsync(amap, 0, bremote, 0, SEG_SIZE, &block, block_done, &seen,
                          SCI_FLAG_USE_CALLBACK, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIWaitForBlockTransfer(block, SCI_INFINITE_TIMEOUT, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(seen.calls == 1);
    EXPECT(seen.status, SCI_ERR_OK);
    CHECK(seen.block == block);
    CHECK(!pthread_equal(seen.thread, pthread_self()));
    CHECK(same(b, SEG_SIZE, 3));
    /* Wait released the handle. */
    SCIWaitForBlockTransfer(block, 0, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);

    /* Abort of a transfer that has ended: the documented code; Wait still reports it. */
    memset(&seen, 0, sizeof seen);
    fill(b, 4096, 4);
    SCITransferBlockAsync(bremote, 0, amap, 8192, 4096, &block, block_done, &seen,
                          SCI_FLAG_USE_CALLBACK, &err);
    EXPECT(err, SCI_ERR_OK);
    while (!seen.calls)
        usleep(1000);
    SCIAbortBlockTransfer(block, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    SCIWaitForBlockTransfer(block, 5000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(same(a + 8192, 4096, 4));
    /* Abort of an unknown transfer: a stale handle, and NULL. */
    SCIAbortBlockTransfer(block, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIAbortBlockTransfer(NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);

    /* Abort of a running transfer (64 MiB, no callback): it stops, or had just ended. */
    SCITransferBlockAsync(bigsrc, 0, bigdst, 0, BIG_SIZE, &running, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIAbortBlockTransfer(running, 0, &err);
    checks++;
    if (err == SCI_ERR_OK) {
        SCIWaitForBlockTransfer(running, SCI_INFINITE_TIMEOUT, 0, &err);
        CHECK(err == SCI_ERR_CANCELLED || err == SCI_ERR_OK);
    } else {
        EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
        SCIWaitForBlockTransfer(running, SCI_INFINITE_TIMEOUT, 0, &err);
        EXPECT(err, SCI_ERR_OK);
    }
}

static void copy_routines(sci_map_t bremote, sci_map_t amap, volatile unsigned char *a,
                          volatile unsigned char *b)
{
    static unsigned char buf[100000];
    sci_error_t err;
    int id;

    CHECK(GetSciMemCopyFunction() == REMORA_MEMCOPY_DEFAULT);
    /* A plain int, as a benchmark suite passes it. */
    for (id = 1; id <= 4; id++) {
        CHECK(SetSciMemCopyFunction(id) == id);
        CHECK(GetSciMemCopyFunction() == id);
        fill(buf, sizeof buf, 10u + (unsigned)id);
        SCIMemCpy(NULL, buf + 3, bremote, 4093, sizeof buf - 3, 0, &err);
        EXPECT(err, SCI_ERR_OK);
        CHECK(memcmp((const void *)(b + 4093), buf + 3, sizeof buf - 3) == 0);
        SCIMemCopy(buf, bremote, 5, 21, 0, &err);
        EXPECT(err, SCI_ERR_OK);
        CHECK(memcmp((const void *)(b + 5), buf, 21) == 0);
    }
    /* An unknown id changes nothing. */
    CHECK(SetSciMemCopyFunction(99) == 4);
    CHECK(SetSciMemCopyFunction(REMORA_MEMCOPY_DEFAULT) == REMORA_MEMCOPY_DEFAULT);

    /* One buffer, two maps. */
    fill(buf, sizeof buf, 20);
    SCIMemCpy_dual(NULL, buf, bremote, 64, amap, 128, sizeof buf, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(same(b + 64, sizeof buf, 20));
    CHECK(same(a + 128, sizeof buf, 20));
    SCIMemCpy_dual(NULL, buf, bremote, SEG_SIZE - 8, amap, 0, 16, 0, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
}

static void node_names(unsigned int node)
{
    char host[256];
    dis_nodeId_list_t list;
    dis_virt_adapter_t type = 0;
    dis_adapter_type_t types;
    unsigned int adapters[DIS_MAX_NSCIS];
    sci_error_t err;
    int i, found = 0;

    CHECK(gethostname(host, sizeof host) == 0);
    host[sizeof host - 1] = '\0';
    SCIGetNodeIdByAdapterName(host, &list, &type, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    for (i = 0; i < DIS_MAX_NSCIS && list[i]; i++)
        found |= list[i] == node;
    CHECK(found);
    CHECK(list[i] == 0);
    CHECK(SCIGetAdapterTypeString(type) != NULL);
    SCIGetNodeInfoByAdapterName(host, adapters, &list, &types, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(list[0] != 0 && adapters[0] == 0 && types[0] == type);
    SCIGetNodeIdByAdapterName("localhost", &list, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(list[0] != 0);
    SCIGetNodeIdByAdapterName("no-such-host-of-remora", &list, &type, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_NODEID);
    CHECK(list[0] == 0);
    SCIGetNodeIdByAdapterName(NULL, &list, &type, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
}

static void channels(sci_desc_t dev, sci_local_segment_t aseg, sci_remote_segment_t bseg,
                     volatile unsigned char *a, volatile unsigned char *b)
{
    sci_dma_channel_t ch, other, any[4];
    sci_dma_queue_t dq;
    sci_error_t err;
    dis_dma_vec_t vec[2];
    sci_dma_capabilities_t caps;
    sci_query_dma_t q;
    int i;

    q.localAdapterNo = 0;
    q.subcommand = SCI_Q_DMA_CAPABILITIES;
    q.data = &caps;
    SCIQuery(SCI_Q_DMA, &q, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(caps.num_channels == 4);

    SCICreateDMAQueue(dev, &dq, 0, 16, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRequestDMAChannel(dev, &ch, 0, SCI_DMA_TYPE_SYSTEM, 2, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    /* The same channel again, exclusive or shared: busy. */
    SCIRequestDMAChannel(dev, &other, 0, SCI_DMA_TYPE_ADAPTER, 2, 0, &err);
    EXPECT(err, SCI_ERR_BUSY);
    SCIRequestDMAChannel(dev, &other, 0, SCI_DMA_TYPE_ADAPTER, 2, SCI_FLAG_DMA_CHANNEL_SHARED, &err);
    EXPECT(err, SCI_ERR_BUSY);
    SCIRequestDMAChannel(dev, &other, 0, SCI_DMA_TYPE_SYSTEM, 4, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIRequestDMAChannel(dev, &other, 1, SCI_DMA_TYPE_SYSTEM, 0, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_ADAPTERNO);

    SCIAssignDMAChannel(ch, dq, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    fill(a, 200000, 30);
    DISStartDmaTransfer(dq, aseg, bseg, 0, 200000, 4096, NULL, NULL, SCI_FLAG_DMA_WAIT, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(same(b + 4096, 200000, 30));
    fill(b + 300000, 5000, 31);
    fill(b + 400000, 7000, 32);
    vec[0].size = 5000;
    vec[0].local_offset = 10;
    vec[0].remote_offset = 300000;
    vec[0].flags = 0;
    vec[1].size = 7000;
    vec[1].local_offset = 20000;
    vec[1].remote_offset = 400000;
    vec[1].flags = 0;
    DISStartDmaTransferVec(dq, aseg, bseg, 2, vec, NULL, NULL, SCI_FLAG_DMA_READ | SCI_FLAG_DMA_WAIT, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(same(a + 10, 5000, 31));
    CHECK(same(a + 20000, 7000, 32));

    SCIReturnDMAChannel(ch, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIReturnDMAChannel(ch, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIAssignDMAChannel(ch, dq, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    /* Returned: free for the next request. */
    SCIRequestDMAChannel(dev, &other, 0, SCI_DMA_TYPE_GLOBAL, 2, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIReturnDMAChannel(other, &err);
    EXPECT(err, SCI_ERR_OK);

    /* Shared holders share; an exclusive request of a shared channel is busy. */
    SCIRequestDMAChannel(dev, &ch, 0, SCI_DMA_TYPE_DONTCARE, 1, SCI_FLAG_DMA_CHANNEL_SHARED, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRequestDMAChannel(dev, &other, 0, SCI_DMA_TYPE_DONTCARE, 1, SCI_FLAG_DMA_CHANNEL_SHARED, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRequestDMAChannel(dev, &any[0], 0, SCI_DMA_TYPE_DONTCARE, 1, 0, &err);
    EXPECT(err, SCI_ERR_BUSY);
    SCIReturnDMAChannel(ch, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIReturnDMAChannel(other, &err);
    EXPECT(err, SCI_ERR_OK);

    /* DONTCARE takes the free ones, then there is no space. */
    for (i = 0; i < 4; i++) {
        SCIRequestDMAChannel(dev, &any[i], 0, SCI_DMA_TYPE_DONTCARE, SCI_DMA_CHANNEL_ID_DONTCARE, 0, &err);
        EXPECT(err, SCI_ERR_OK);
    }
    SCIRequestDMAChannel(dev, &other, 0, SCI_DMA_TYPE_DONTCARE, SCI_DMA_CHANNEL_ID_DONTCARE, 0, &err);
    EXPECT(err, SCI_ERR_NOSPC);
    for (i = 0; i < 4; i++) {
        SCIReturnDMAChannel(any[i], &err);
        EXPECT(err, SCI_ERR_OK);
    }
    SCIRemoveDMAQueue(dq, 0, &err);
    EXPECT(err, SCI_ERR_OK);
}

int main(void)
{
    sci_desc_t dev;
    sci_local_segment_t aseg, bseg, bigseg;
    sci_remote_segment_t bremote_seg, bigremote_seg;
    sci_map_t amap, blocal, bremote, bigsrc, bigdst;
    volatile unsigned char *a, *b;
    unsigned int node;
    sci_error_t err;

    SCIInitialize(0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIGetLocalNodeId(0, &node, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIOpen(&dev, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    aseg = make_segment(dev, ID_A, SEG_SIZE);
    bseg = make_segment(dev, ID_B, SEG_SIZE);
    bigseg = make_segment(dev, ID_BIG, BIG_SIZE);
    a = SCIMapLocalSegment(aseg, &amap, 0, SEG_SIZE, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    b = SCIMapLocalSegment(bseg, &blocal, 0, SEG_SIZE, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIConnectSegment(dev, &bremote_seg, node, ID_B, 0, NULL, NULL, SCI_INFINITE_TIMEOUT, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIMapRemoteSegment(bremote_seg, &bremote, 0, SEG_SIZE, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIMapLocalSegment(bigseg, &bigsrc, 0, BIG_SIZE, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIConnectSegment(dev, &bigremote_seg, node, ID_BIG, 0, NULL, NULL, SCI_INFINITE_TIMEOUT, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIMapRemoteSegment(bigremote_seg, &bigdst, 0, BIG_SIZE, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    block_transfers(amap, a, bremote, b, bigsrc, bigdst);
    copy_routines(bremote, amap, a, b);
    node_names(node);
    channels(dev, aseg, bremote_seg, a, b);

    /* SCIClose tears down what is left (maps, connections, segments). */
    SCIClose(dev, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCITerminate();
    printf("legacy_calls: %d checks passed\n", checks);
    return 0;
}
