/*
 * A SIGALRM every 100 us, from a handler installed without SA_RESTART (as benchmarks
 * do), during 100,000 SISCI calls that each talk to the node daemon: every call must
 * succeed, and the session must stay in step (a reply read for the wrong request would
 * show as a failure of a later call).
 *
 *   REMORA_NODE=4 ./signal_storm [calls]
 */
#include "alarm_storm.h" /* first: it defines _GNU_SOURCE */
#include <stdio.h>
#include <stdlib.h>
#include "sisci_api.h"

#define CHECK(call)                                                                          \
    do {                                                                                     \
        call;                                                                                \
        if (err != SCI_ERR_OK) {                                                             \
            fprintf(stderr, "call %ld (%s) failed: 0x%x after %d alarms\n", done, #call,     \
                    (unsigned)err, (int)alarms);                                             \
            return 1;                                                                        \
        }                                                                                    \
        done++;                                                                              \
    } while (0)

int main(int argc, char *argv[])
{
    long calls = argc > 1 ? strtol(argv[1], NULL, 0) : 100000;
    long done = 0;
    sci_desc_t dev;
    sci_local_segment_t seg;
    sci_error_t err;
    unsigned int node;
    timer_t timer;

    if (alarm_storm_start(100 * 1000, &timer) != 0) return 2;
    CHECK(SCIInitialize(0, &err));
    CHECK(SCIOpen(&dev, 0, &err));
    CHECK(SCIGetLocalNodeId(0, &node, 0, &err));
    while (done < calls) {
        CHECK(SCICreateSegment(dev, &seg, 77, 4096, NULL, NULL, 0, &err));
        CHECK(SCIPrepareSegment(seg, 0, 0, &err));
        CHECK(SCISetSegmentAvailable(seg, 0, 0, &err));
        CHECK(SCISetSegmentUnavailable(seg, 0, 0, &err));
        CHECK(SCIRemoveSegment(seg, 0, &err));
        if (SCIProbeNode(dev, 0, node, 0, &err) == 0 || err != SCI_ERR_OK) {
            fprintf(stderr, "probe %ld failed: 0x%x\n", done, (unsigned)err);
            return 1;
        }
        done++;
    }
    alarm_storm_stop(timer);
    CHECK(SCIClose(dev, 0, &err));
    SCITerminate();
    printf("%ld calls, %d alarms: all passed\n", done, (int)alarms);
    return alarms > 0 ? 0 : 3;
}
