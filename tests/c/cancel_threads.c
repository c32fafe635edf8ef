/*
 * cancel_threads: threads cancelled with pthread_cancel while blocked in a library call end
 * alone and leave the library usable: asynchronously cancelled threads, and deferred-cancel
 * threads (a blocking wait is a cancellation point, as a blocking system call is), blocked
 * in SCIWaitForInterrupt, SCIWaitForLocalSegmentEvent, SCIWaitForRemoteSegmentEvent,
 * SCIConnectSegment and SCIConnectInterrupt (each with no time limit; the connects to a
 * segment and an interrupt nobody creates). A thread that does not end within 5 s fails the run. Prints
 * "cancel_threads: passed".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "sisci_api.h"
#include "cancel_join.h"

static sci_local_interrupt_t intr;
static sci_local_segment_t watched;
static sci_remote_segment_t conn;

enum what { INTERRUPT, LOCAL_EVENT, REMOTE_EVENT, CONNECT_SEGMENT, CONNECT_INTERRUPT };
static const char *const names[] = {"SCIWaitForInterrupt", "SCIWaitForLocalSegmentEvent",
                                    "SCIWaitForRemoteSegmentEvent", "SCIConnectSegment",
                                    "SCIConnectInterrupt"};
static sci_desc_t dev;
static unsigned int self;

struct job {
    enum what what;
    int async;
};

static void *waiter(void *arg)
{
    struct job *j = arg;
    sci_error_t err, st;
    unsigned int node, adapter;
    if (j->async)
        pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
    for (;;) {
        switch (j->what) {
        case INTERRUPT:
            SCIWaitForInterrupt(intr, SCI_INFINITE_TIMEOUT, 0, &err);
            break;
        case LOCAL_EVENT:
            SCIWaitForLocalSegmentEvent(watched, &node, &adapter, SCI_INFINITE_TIMEOUT, 0, &err);
            break;
        case REMOTE_EVENT:
            SCIWaitForRemoteSegmentEvent(conn, &st, SCI_INFINITE_TIMEOUT, 0, &err);
            break;
        case CONNECT_SEGMENT: {
            /* A segment nobody creates. */
            sci_remote_segment_t never;
            SCIConnectSegment(dev, &never, self, 4242, 0, NULL, NULL, SCI_INFINITE_TIMEOUT, 0, &err);
            break;
        }
        case CONNECT_INTERRUPT: {
            sci_remote_interrupt_t never;
            SCIConnectInterrupt(dev, &never, self, 0, 4242, SCI_INFINITE_TIMEOUT, 0, &err);
            break;
        }
        }
    }
    return NULL;
}

int main(void)
{
    sci_error_t err;
    sci_local_segment_t seg;
    unsigned int no = 0;
    SCIInitialize(0, &err);
    SCIOpen(&dev, 0, &err);
    SCIGetLocalNodeId(0, &self, 0, &err);
    SCICreateInterrupt(dev, &intr, 0, &no, NULL, NULL, 0, &err);
    if (err != SCI_ERR_OK) {
        printf("create interrupt: 0x%x\n", err);
        return 1;
    }
    /* A segment whose events nobody causes, and a connection to it (the connect's own
     * event is taken first, so the waits below find nothing). */
    SCICreateSegment(dev, &watched, 77, 4096, NULL, NULL, 0, &err);
    SCIPrepareSegment(watched, 0, 0, &err);
    SCISetSegmentAvailable(watched, 0, 0, &err);
    SCIConnectSegment(dev, &conn, self, 77, 0, NULL, NULL, 1000, 0, &err);
    if (err != SCI_ERR_OK) {
        printf("connect to the watched segment: 0x%x\n", err);
        return 1;
    }
    unsigned int n, a;
    SCIWaitForLocalSegmentEvent(watched, &n, &a, 1000, 0, &err);
    if (err != SCI_ERR_OK) {
        printf("the connect's event: 0x%x\n", err);
        return 1;
    }
    for (int w = INTERRUPT; w <= CONNECT_INTERRUPT; w++) {
        for (int i = 0; i < 6; i++) {
            pthread_t t;
            struct job j = {.what = (enum what)w, .async = i % 2}; /* asynchronous, else deferred */
            pthread_create(&t, NULL, waiter, &j);
            usleep(20000);
            int r = cancel_and_join(t, 5);
            if (r != 0) {
                printf("a thread blocked in %s (%s cancel) %s\n", names[w], j.async ? "asynchronous" : "deferred",
                       r == 1 ? "did not end within 5 s" : "did not end by cancellation");
                return 1;
            }
        }
    }
    /* The library is intact: new objects, and the interrupt and the segment still work. */
    SCICreateSegment(dev, &seg, 99, 4096, NULL, NULL, 0, &err);
    if (err != SCI_ERR_OK) {
        printf("create after cancellations: 0x%x\n", err);
        return 1;
    }
    SCIRemoveSegment(seg, 0, &err);
    SCIWaitForInterrupt(intr, 10, 0, &err);
    if (err != SCI_ERR_TIMEOUT) {
        printf("wait after cancellations: 0x%x\n", err);
        return 1;
    }
    SCIDisconnectSegment(conn, 0, &err);
    SCIWaitForLocalSegmentEvent(watched, &n, &a, 1000, 0, &err);
    if (err != SCI_ERR_OK) {
        printf("the disconnect's event after cancellations: 0x%x\n", err);
        return 1;
    }
    SCIRemoveSegment(watched, 0, &err);
    SCIRemoveInterrupt(intr, 0, &err);
    SCIClose(dev, 0, &err);
    SCITerminate();
    printf("cancel_threads: passed\n");
    return 0;
}
