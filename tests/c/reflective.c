/*
 * reflective: reflective memory the way Dolphin's reflective.c demo uses it. Every member
 * node creates a segment with SCI_FLAG_BROADCAST and the group as its id, prepares it
 * with SCI_FLAG_BROADCAST, maps it locally for reads, connects to
 * DIS_BROADCAST_NODEID_GROUP_ALL with SCI_FLAG_BROADCAST, maps that multicast segment
 * with SCI_FLAG_BROADCAST for writes, and flushes after each store.
 *
 *   reflective MEMBER COUNT   member number MEMBER of COUNT (run each on its own node):
 *       stores its word, waits until every member's word is in its local map, then
 *       waits for the late member's word, then tears everything down;
 *   reflective late COUNT     joins after COUNT members stored: checks that their words
 *       are already in its local map, then stores its own word and tears down.
 *
 * Also: the adapter answers SCI_Q_ADAPTER_MCAST_MAX_GROUPS with 6, and after teardown the
 * group id is free again on the node. Prints "reflective: N checks passed" and exits 0,
 * or names the first failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "sisci_api.h"

#ifndef SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY
#define SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY 0
#endif

#define GROUP 1u
#define SEG_SIZE 4096u
#define WORD(i) (0x5eed0000u + (unsigned)(i))
#define LATE_SLOT 63 /* the late member's word */

static int checks;

#define EXPECT(got, want)                                                                  \
    do {                                                                                   \
        sci_error_t got_ = (got);                                                          \
        checks++;                                                                          \
        if (got_ != (want)) {                                                              \
            fprintf(stderr, "reflective: line %d: got 0x%x (%s), want 0x%x (%s)\n",        \
                    __LINE__, (unsigned)got_, SCIGetErrorString(got_), (unsigned)(want),   \
                    SCIGetErrorString(want));                                              \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "reflective: line %d: %s\n", __LINE__, #cond);                \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Wait up to 30 s for word `slot` of the local map to hold `want`. */
static int wait_word(volatile unsigned int *local, int slot, unsigned int want)
{
    double end = now() + 30;
    while (local[slot] != want) {
        if (now() > end)
            return 0;
        usleep(200);
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: reflective MEMBER|late COUNT\n");
        return 2;
    }
    int late = strcmp(argv[1], "late") == 0;
    int me = late ? LATE_SLOT : atoi(argv[1]);
    int count = atoi(argv[2]);
    sci_error_t err;
    sci_desc_t sd;
    sci_local_segment_t local_seg;
    sci_remote_segment_t cast_seg;
    sci_map_t local_map, cast_map;
    sci_sequence_t seq;

    SCIInitialize(0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIOpen(&sd, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* The adapter offers multicast. */
    unsigned int groups = 0;
    sci_query_adapter_t q = { 0, 0, SCI_Q_ADAPTER_MCAST_MAX_GROUPS, &groups };
    SCIQuery(SCI_Q_ADAPTER, &q, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(groups == 6);

    /* A group id beyond 0..5, and ALLOW_UNICAST alone, are refused. */
    SCICreateSegment(sd, &local_seg, 6, SEG_SIZE, NULL, NULL, SCI_FLAG_BROADCAST, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateSegment(sd, &local_seg, GROUP, SEG_SIZE, NULL, NULL, SCI_FLAG_ALLOW_UNICAST, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);

    /* This node's member of the group. */
    SCICreateSegment(sd, &local_seg, GROUP, SEG_SIZE, NULL, NULL, SCI_FLAG_BROADCAST, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIPrepareSegment(local_seg, 0, SCI_FLAG_BROADCAST, &err);
    EXPECT(err, SCI_ERR_OK);
    SCISetSegmentAvailable(local_seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    volatile unsigned int *local =
        SCIMapLocalSegment(local_seg, &local_map, 0, SEG_SIZE, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* The late member sees what the group holds before it stores anything. */
    if (late) {
        for (int i = 0; i < count; i++)
            CHECK(local[i] == WORD(i));
    }

    /* The group's multicast segment, connected the way Dolphin's programs do: in a loop. */
    for (;;) {
        SCIConnectSegment(sd, &cast_seg, DIS_BROADCAST_NODEID_GROUP_ALL, GROUP, 0, NULL, NULL,
                          SCI_INFINITE_TIMEOUT, SCI_FLAG_BROADCAST, &err);
        if (err != SCI_ERR_NO_SUCH_SEGMENT)
            break;
        usleep(1000);
    }
    EXPECT(err, SCI_ERR_OK);
    CHECK(SCIGetRemoteSegmentNodeId(cast_seg) == DIS_BROADCAST_NODEID_GROUP_ALL);
    CHECK(SCIGetRemoteSegmentSize(cast_seg) == SEG_SIZE);
    volatile unsigned int *cast =
        SCIMapRemoteSegment(cast_seg, &cast_map, 0, SEG_SIZE, NULL, SCI_FLAG_BROADCAST, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateMapSequence(cast_map, &seq, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* One store, flushed; every member sees it in its local map. */
    cast[me] = WORD(me);
    SCIFlush(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
    CHECK(local[me] == WORD(me));
    if (!late) {
        for (int i = 0; i < count; i++) {
            if (!wait_word(local, i, WORD(i))) {
                fprintf(stderr, "reflective: member %d never saw member %d's store\n", me, i);
                return 1;
            }
        }
        printf("reflective: member %d saw all %d members\n", me, count);
        fflush(stdout);
        /* Stay until the late member has joined, seen our words and stored its own. */
        CHECK(wait_word(local, LATE_SLOT, WORD(LATE_SLOT)));
    }

    /* Tear down in the order Dolphin's demo does; each step succeeds. */
    SCIRemoveSequence(seq, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIUnmapSegment(cast_map, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIDisconnectSegment(cast_seg, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIUnmapSegment(local_map, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCISetSegmentUnavailable(local_seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(local_seg, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    /* The group's id is free again on this node. */
    SCICreateSegment(sd, &local_seg, GROUP, SEG_SIZE, NULL, NULL, SCI_FLAG_BROADCAST, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(local_seg, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    SCIClose(sd, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCITerminate();
    printf("reflective: %d checks passed\n", checks);
    return 0;
}
