/*
 * Sequence statuses in each state of a connection, read as the guide's error-checking
 * loops read them, and the flush flags.
 *
 *   REMORA_NODE=4 ./sequence_states local
 *       SCIFlush and SCICheckSequence with SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY (also with a
 *       NULL sequence); OK on a live connection; after the exporter forces a disconnect,
 *       SCICheckSequence answers SCI_SEQ_NOT_RETRIABLE and SCIStartSequence answers
 *       SCI_SEQ_NOT_RETRIABLE with SCI_ERR_NOT_CONNECTED, so the guide's start loop ends.
 *
 *   REMORA_NODE=8 ./sequence_states link <node> <segment id> <pid of node's daemon>
 *       Over a link to another node (TCP): a stopped daemon is a silent peer. PENDING
 *       while the route is down, RETRIABLE once after it is back, the guide's start loop
 *       rides out an outage, and a killed daemon makes start fail with
 *       SCI_ERR_NODE_NOT_RESPONDING.
 *
 * Prints "passed" and exits 0 when every check holds.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include "sisci_api.h"

static int failures;

#define EXPECT(what, got, want)                                                              \
    do {                                                                                     \
        unsigned long g_ = (unsigned long)(got), w_ = (unsigned long)(want);                 \
        if (g_ != w_) {                                                                      \
            fprintf(stderr, "line %d: %s: got 0x%lx, want 0x%lx\n", __LINE__, what, g_, w_); \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

#define OK(call)                                                                             \
    do {                                                                                     \
        call;                                                                                \
        if (err != SCI_ERR_OK) {                                                             \
            fprintf(stderr, "line %d: %s failed: 0x%x\n", __LINE__, #call, (unsigned)err);   \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The guide's loop around SCIStartSequence, with its error path:
 *   do { status = SCIStartSequence(seq, 0, &err); if (err != SCI_ERR_OK) manage; }
 *   while (status != SCI_SEQ_OK);
 * Returns the error that ended it (SCI_ERR_OK when the start succeeded); counts PENDING. */
static sci_error_t guide_start_loop(sci_sequence_t seq, int *pending, double limit_ms)
{
    sci_sequence_status_t status;
    sci_error_t err;
    double t0 = now_ms();
    *pending = 0;
    do {
        status = SCIStartSequence(seq, 0, &err);
        if (err != SCI_ERR_OK) {
            if (status != SCI_SEQ_NOT_RETRIABLE) {
                fprintf(stderr, "start failed with 0x%x but answered %d\n", (unsigned)err, status);
                failures++;
            }
            return err;
        }
        if (status == SCI_SEQ_PENDING)
            (*pending)++;
        else if (status != SCI_SEQ_OK) {
            fprintf(stderr, "start answered %d without an error\n", status);
            failures++;
            return SCI_ERR_SYSTEM;
        }
        if (now_ms() - t0 > limit_ms) {
            fprintf(stderr, "the guide's start loop still runs after %.0f ms\n", limit_ms);
            exit(1);
        }
    } while (status != SCI_SEQ_OK);
    return SCI_ERR_OK;
}

/* The next event of a remote segment that is not CONNECT, which must be `want` (a dying
 * peer is silent first: NOT_OPERATIONAL may come before LOST). */
static void expect_event(sci_remote_segment_t rseg, sci_segment_cb_reason_t want)
{
    sci_error_t err, status;
    sci_segment_cb_reason_t got;
    do {
        got = SCIWaitForRemoteSegmentEvent(rseg, &status, 10000, 0, &err);
        if (err != SCI_ERR_OK) {
            fprintf(stderr, "waiting for event %d: 0x%x\n", want, (unsigned)err);
            exit(1);
        }
    } while (got == SCI_CB_CONNECT || (want == SCI_CB_LOST && got == SCI_CB_NOT_OPERATIONAL));
    EXPECT("segment event", got, want);
}

static int local_states(void)
{
    sci_desc_t sd;
    sci_local_segment_t seg;
    sci_remote_segment_t rseg;
    sci_map_t map;
    sci_sequence_t seq;
    sci_error_t err;
    unsigned int node;
    volatile unsigned int *p;
    int pending;

    EXPECT("FLUSH_CPU_BUFFERS_ONLY differs from NO_FLUSH",
           SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY == SCI_FLAG_NO_FLUSH, 0);
    EXPECT("FLUSH_CPU_BUFFERS_ONLY differs from NO_STORE_BARRIER",
           SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY & (SCI_FLAG_NO_FLUSH | SCI_FLAG_NO_STORE_BARRIER), 0);
    EXPECT("old alias", FLUSH_CPU_BUFFERS_ONLY, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
    OK(SCIInitialize(0, &err));
    OK(SCIOpen(&sd, 0, &err));
    OK(SCIGetLocalNodeId(0, &node, 0, &err));
    OK(SCICreateSegment(sd, &seg, 0x5e01, 4096, NULL, NULL, 0, &err));
    OK(SCIPrepareSegment(seg, 0, 0, &err));
    OK(SCISetSegmentAvailable(seg, 0, 0, &err));
    OK(SCIConnectSegment(sd, &rseg, node, 0x5e01, 0, NULL, NULL, SCI_INFINITE_TIMEOUT, 0, &err));
    p = SCIMapRemoteSegment(rseg, &map, 0, 4096, NULL, 0, &err);
    OK((void)0);
    OK(SCICreateMapSequence(map, &seq, 0, &err));

    /* The flushes Dolphin's examples and the guide use. */
    p[0] = 1;
    SCIFlush(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
    SCIFlush(NULL, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY);
    SCIFlush(NULL, 0);
    EXPECT("check(NULL, FLUSH_CPU_BUFFERS_ONLY)",
           SCICheckSequence(NULL, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY, &err), SCI_SEQ_OK);
    EXPECT("its error", err, SCI_ERR_OK);
    SCICheckSequence(NULL, 0, &err);
    EXPECT("check(NULL, 0)", err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICheckSequence(seq, 0x8, &err);
    EXPECT("an unknown check flag", err, SCI_ERR_ILLEGAL_FLAG);
    SCIStartSequence(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY, &err);
    EXPECT("start takes no flag", err, SCI_ERR_ILLEGAL_FLAG);

    /* A live connection: OK with every flag. */
    EXPECT("guide start loop", guide_start_loop(seq, &pending, 5000), SCI_ERR_OK);
    EXPECT("no PENDING on a live map", pending, 0);
    p[1] = 2;
    EXPECT("check", SCICheckSequence(seq, 0, &err), SCI_SEQ_OK);
    EXPECT("check NO_FLUSH", SCICheckSequence(seq, SCI_FLAG_NO_FLUSH, &err), SCI_SEQ_OK);
    EXPECT("check NO_STORE_BARRIER", SCICheckSequence(seq, SCI_FLAG_NO_STORE_BARRIER, &err), SCI_SEQ_OK);
    EXPECT("check FLUSH_CPU_BUFFERS_ONLY", SCICheckSequence(seq, SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY, &err),
           SCI_SEQ_OK);

    /* The exporter forces a disconnect: gone for good. */
    OK(SCISetSegmentUnavailable(seg, 0, SCI_FLAG_FORCE_DISCONNECT, &err));
    expect_event(rseg, SCI_CB_DISCONNECT);
    EXPECT("check after a forced disconnect", SCICheckSequence(seq, 0, &err), SCI_SEQ_NOT_RETRIABLE);
    EXPECT("its error", err, SCI_ERR_OK);
    EXPECT("start", SCIStartSequence(seq, 0, &err), SCI_SEQ_NOT_RETRIABLE);
    EXPECT("start's error", err, SCI_ERR_NOT_CONNECTED);
    EXPECT("the guide's loop ends by its error path", guide_start_loop(seq, &pending, 2000),
           SCI_ERR_NOT_CONNECTED);

    OK(SCIRemoveSequence(seq, 0, &err));
    OK(SCIUnmapSegment(map, 0, &err));
    OK(SCIDisconnectSegment(rseg, 0, &err));
    OK(SCIRemoveSegment(seg, 0, &err));
    OK(SCIClose(sd, 0, &err));
    SCITerminate();
    return 0;
}

static int link_states(unsigned int node, unsigned int id, pid_t daemon)
{
    sci_desc_t sd;
    sci_remote_segment_t rseg;
    sci_map_t map;
    sci_sequence_t seq;
    sci_error_t err;
    volatile unsigned int *p;
    int pending;
    double t0;

    OK(SCIInitialize(0, &err));
    OK(SCIOpen(&sd, 0, &err));
    do {
        SCIConnectSegment(sd, &rseg, node, id, 0, NULL, NULL, 1000, 0, &err);
    } while (err == SCI_ERR_NO_SUCH_SEGMENT || err == SCI_ERR_TIMEOUT);
    OK((void)0);
    p = SCIMapRemoteSegment(rseg, &map, 0, 8192, NULL, 0, &err);
    OK((void)0);
    OK(SCICreateMapSequence(map, &seq, 0, &err));
    EXPECT("start", guide_start_loop(seq, &pending, 5000), SCI_ERR_OK);
    p[0] = 7;
    EXPECT("check while up", SCICheckSequence(seq, 0, &err), SCI_SEQ_OK);

    /* Down: the transfer's fate is unknown. Nothing touches the map meanwhile. */
    kill(daemon, SIGSTOP);
    expect_event(rseg, SCI_CB_NOT_OPERATIONAL);
    EXPECT("check while down", SCICheckSequence(seq, 0, &err), SCI_SEQ_PENDING);
    EXPECT("its error", err, SCI_ERR_OK);
    t0 = now_ms();
    EXPECT("start while down", SCIStartSequence(seq, 0, &err), SCI_SEQ_PENDING);
    EXPECT("its error", err, SCI_ERR_OK);
    if (now_ms() - t0 < 9) {
        fprintf(stderr, "start answered PENDING after %.1f ms, without waiting\n", now_ms() - t0);
        failures++;
    }
    kill(daemon, SIGCONT);
    expect_event(rseg, SCI_CB_OPERATIONAL);
    EXPECT("first check after the outage", SCICheckSequence(seq, 0, &err), SCI_SEQ_RETRIABLE);
    EXPECT("the retry's check", SCICheckSequence(seq, 0, &err), SCI_SEQ_OK);

    /* The guide's start loop through an outage: PENDING until the peer is back. */
    kill(daemon, SIGSTOP);
    expect_event(rseg, SCI_CB_NOT_OPERATIONAL);
    if (fork() == 0) {
        usleep(300 * 1000);
        kill(daemon, SIGCONT);
        _exit(0);
    }
    EXPECT("guide loop through an outage", guide_start_loop(seq, &pending, 20000), SCI_ERR_OK);
    if (pending == 0) {
        fprintf(stderr, "start never answered PENDING during the outage\n");
        failures++;
    }
    expect_event(rseg, SCI_CB_OPERATIONAL);
    p[1] = 8;
    EXPECT("check after start", SCICheckSequence(seq, 0, &err), SCI_SEQ_OK);

    /* The segment's node dies: gone for good, and the guide's loop ends. */
    kill(daemon, SIGKILL);
    expect_event(rseg, SCI_CB_LOST);
    EXPECT("check after the loss", SCICheckSequence(seq, 0, &err), SCI_SEQ_NOT_RETRIABLE);
    EXPECT("the guide's loop ends by its error path", guide_start_loop(seq, &pending, 2000),
           SCI_ERR_NODE_NOT_RESPONDING);
    OK(SCIRemoveSequence(seq, 0, &err));
    OK(SCIClose(sd, 0, &err));
    SCITerminate();
    return 0;
}

int main(int argc, char *argv[])
{
    if (argc == 2 && strcmp(argv[1], "local") == 0)
        local_states();
    else if (argc == 5 && strcmp(argv[1], "link") == 0)
        link_states((unsigned)strtoul(argv[2], NULL, 0), (unsigned)strtoul(argv[3], NULL, 0),
                    (pid_t)strtol(argv[4], NULL, 0));
    else {
        fprintf(stderr, "usage: %s local | link <node> <segment id> <daemon pid>\n", argv[0]);
        return 2;
    }
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("sequence_states %s: passed\n", argv[1]);
    return 0;
}
