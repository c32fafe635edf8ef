/*
 * A storm of SIGALRMs aimed at the calling thread, from a handler installed without
 * SA_RESTART (as benchmarks do): every blocking system call of that thread may fail with
 * EINTR, and the library must carry on as if nothing happened. For the C tests.
 */
#ifndef REMORA_TEST_ALARM_STORM_H
#define REMORA_TEST_ALARM_STORM_H

#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* How many alarms came so far. */
static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

/* Start a SIGALRM every `period_ns` to this thread; 0 on success (prints why not). */
static int alarm_storm_start(long period_ns, timer_t *timer)
{
    struct sigaction sa;
    struct sigevent sev;
    struct itimerspec every = {{0, period_ns}, {0, period_ns}};

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: interrupted system calls fail with EINTR */
    sigemptyset(&sa.sa_mask);
    /* The alarms go to this thread (the one that makes the calls), not to whichever
     * thread of the process the kernel would pick. */
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGALRM;
    sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
    if (sigaction(SIGALRM, &sa, NULL) != 0 || timer_create(CLOCK_MONOTONIC, &sev, timer) != 0 ||
        timer_settime(*timer, 0, &every, NULL) != 0) {
        perror("signal set-up");
        return -1;
    }
    return 0;
}

/* Stop the storm. */
static void alarm_storm_stop(timer_t timer)
{
    struct itimerspec off = {{0, 0}, {0, 0}};
    timer_settime(timer, 0, &off, NULL);
}

#endif
