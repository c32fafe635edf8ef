/*
 * cancel_threads: threads cancelled with pthread_cancel while blocked in a library call end
 * alone and leave the library usable: asynchronously cancelled threads, and deferred-cancel
 * threads (a blocking wait is a cancellation point, as a blocking system call is), blocked
 * in SCIWaitForInterrupt. Prints "cancel_threads: passed".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "sisci_api.h"

static sci_local_interrupt_t intr;

static void *waiter(void *arg)
{
    sci_error_t err;
    if (arg != NULL)
        pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
    for (;;)
        SCIWaitForInterrupt(intr, SCI_INFINITE_TIMEOUT, 0, &err);
    return NULL;
}

int main(void)
{
    sci_desc_t dev;
    sci_error_t err;
    sci_local_segment_t seg;
    unsigned int no = 0;
    SCIInitialize(0, &err);
    SCIOpen(&dev, 0, &err);
    SCICreateInterrupt(dev, &intr, 0, &no, NULL, NULL, 0, &err);
    if (err != SCI_ERR_OK) {
        printf("create interrupt: 0x%x\n", err);
        return 1;
    }
    for (int i = 0; i < 15; i++) {
        pthread_t t;
        void *arg = i % 2 ? (void *)1 : NULL; /* asynchronous, else deferred */
        pthread_create(&t, NULL, waiter, arg);
        usleep(20000);
        pthread_cancel(t);
        void *ret = NULL;
        pthread_join(t, &ret);
        if (ret != PTHREAD_CANCELED) {
            printf("thread %d did not end by cancellation\n", i);
            return 1;
        }
    }
    /* The library is intact: new objects, and the interrupt still works. */
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
    SCIRemoveInterrupt(intr, 0, &err);
    SCIClose(dev, 0, &err);
    SCITerminate();
    printf("cancel_threads: passed\n");
    return 0;
}
