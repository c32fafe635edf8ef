/*
 * A SIGALRM every 100 us, from a handler installed without SA_RESTART (as benchmarks
 * do), during 100,000 SISCI calls that each talk to the node daemon: every call must
 * succeed, and the session must stay in step (a reply read for the wrong request would
 * show as a failure of a later call).
 *
 *   REMORA_NODE=4 ./signal_storm [calls]
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "sisci_api.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

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
    struct sigaction sa;
    struct itimerspec every = {{0, 100 * 1000}, {0, 100 * 1000}};
    struct itimerspec off = {{0, 0}, {0, 0}};
    struct sigevent sev;
    timer_t timer;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: interrupted system calls fail with EINTR */
    sigemptyset(&sa.sa_mask);
    /* The alarms go to this thread (the one that makes the calls), not to whichever
     * thread of the process the kernel would pick. */
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGALRM;
    sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
    if (sigaction(SIGALRM, &sa, NULL) != 0 || timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0 ||
        timer_settime(timer, 0, &every, NULL) != 0) {
        perror("signal set-up");
        return 2;
    }
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
    timer_settime(timer, 0, &off, NULL);
    CHECK(SCIClose(dev, 0, &err));
    SCITerminate();
    printf("%ld calls, %d alarms: all passed\n", done, (int)alarms);
    return alarms > 0 ? 0 : 3;
}
