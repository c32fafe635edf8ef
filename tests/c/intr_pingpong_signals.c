/*
 * A ping-pong of interrupts between two hosts, both waiters blocked (no spin), under a
 * SIGALRM every 200 us from a handler installed without SA_RESTART. Each side creates
 * its interrupt with a fixed number and connects to the other side's: side A triggers
 * then waits, side B waits then triggers. While the other host is connected the owner's
 * wait reads the triggering process's flow itself: an interrupted poll or read there must
 * lose no trigger and never hang (every wait has a bound).
 *
 *   REMORA_NODE=4 ./intr_pingpong_signals a <node of B> [rounds]
 *   REMORA_NODE=8 ./intr_pingpong_signals b <node of A> [rounds]
 */
#include "alarm_storm.h" /* first: it defines _GNU_SOURCE */
#include <stdio.h>
#include <stdlib.h>
#include "sisci_api.h"

#define INTNO_A 3101
#define INTNO_B 3102
#define WAIT_MS 20000

static int fail(const char *what, sci_error_t err, long round)
{
    fprintf(stderr, "%s failed: 0x%x at round %ld after %d alarms\n", what, (unsigned)err, round,
            (int)alarms);
    return 1;
}

int main(int argc, char *argv[])
{
    if (argc < 3 || (argv[1][0] != 'a' && argv[1][0] != 'b')) {
        fprintf(stderr, "usage: %s a|b <other node> [rounds]\n", argv[0]);
        return 2;
    }
    int first = argv[1][0] == 'a';
    unsigned int other = (unsigned int)strtoul(argv[2], NULL, 0);
    long rounds = argc > 3 ? strtol(argv[3], NULL, 0) : 3000;
    unsigned int mine_no = first ? INTNO_A : INTNO_B;
    unsigned int theirs_no = first ? INTNO_B : INTNO_A;
    sci_desc_t dev;
    sci_local_interrupt_t mine;
    sci_remote_interrupt_t theirs;
    sci_error_t err;
    timer_t timer;

    SCIInitialize(0, &err);
    if (err != SCI_ERR_OK) return fail("SCIInitialize", err, 0);
    SCIOpen(&dev, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIOpen", err, 0);
    SCICreateInterrupt(dev, &mine, 0, &mine_no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    if (err != SCI_ERR_OK) return fail("SCICreateInterrupt", err, 0);
    /* The other side may start later: its interrupt is waited for. */
    SCIConnectInterrupt(dev, &theirs, other, 0, theirs_no, WAIT_MS, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIConnectInterrupt", err, 0);

    if (alarm_storm_start(200 * 1000, &timer) != 0) return 2;
    for (long r = 0; r < rounds; r++) {
        if (first) {
            SCITriggerInterrupt(theirs, 0, &err);
            if (err != SCI_ERR_OK) return fail("SCITriggerInterrupt", err, r);
        }
        SCIWaitForInterrupt(mine, WAIT_MS, 0, &err);
        if (err != SCI_ERR_OK) return fail("SCIWaitForInterrupt", err, r);
        if (!first) {
            SCITriggerInterrupt(theirs, 0, &err);
            if (err != SCI_ERR_OK) return fail("SCITriggerInterrupt", err, r);
        }
    }
    alarm_storm_stop(timer);
    /* Nothing more comes: exactly one trigger per round was counted. */
    SCIWaitForInterrupt(mine, 100, 0, &err);
    if (err != SCI_ERR_TIMEOUT) return fail("the wait after the last round", err, rounds);
    SCIDisconnectInterrupt(theirs, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIDisconnectInterrupt", err, rounds);
    SCIRemoveInterrupt(mine, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIRemoveInterrupt", err, rounds);
    SCIClose(dev, 0, &err);
    SCITerminate();
    printf("side %c: %ld rounds, %d alarms: all passed\n", first ? 'a' : 'b', rounds, (int)alarms);
    return alarms > 0 ? 0 : 3;
}
