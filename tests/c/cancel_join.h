/*
 * cancel_join.h - the check the cancellation tests share: cancel a thread that is blocked
 * in a library call and wait (at most `secs` seconds) for it to end by that cancellation.
 */
#ifndef CANCEL_JOIN_H
#define CANCEL_JOIN_H
#include <pthread.h>
#include <time.h>

/* 0: the thread ended by cancellation; 1: it did not end within `secs`; 2: it ended
 * otherwise. */
static int cancel_and_join(pthread_t t, int secs)
{
    pthread_cancel(t);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += secs;
    void *ret = NULL;
    if (pthread_timedjoin_np(t, &ret, &until) != 0)
        return 1;
    return ret == PTHREAD_CANCELED ? 0 : 2;
}
#endif
