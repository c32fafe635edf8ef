/*
 * flag_interrupts: conditional (flag) interrupts fired by another process's stores through
 * its ordinary map, their trigger counter, SCICreateNamedInterrupt with a connect by the
 * name's number, SCI_FLAG_SHARED_INT on data interrupts (one payload reaches every
 * creator, in two processes), and the documented codes for bad handles and flags.
 * The peer is a child process of the same node, driven through pipes.
 * Prints "flag_interrupts: N checks passed" and exits 0, or names the first failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sisci_api.h"

#define SEG_ID    77u
#define SEG_SIZE  8192u
#define FLAG_OFF  4100u
#define DATA_NO   910u
#define NAME      "flag-interrupts-doorbell"
#define PAYLOAD   "to every creator"

static int checks;

#define EXPECT(call_err, want)                                                             \
    do {                                                                                   \
        checks++;                                                                          \
        if ((call_err) != (want)) {                                                        \
            fprintf(stderr, "flag_interrupts: line %d: got 0x%x (%s), want 0x%x (%s)\n",  \
                    __LINE__, (unsigned)(call_err), SCIGetErrorString(call_err),           \
                    (unsigned)(want), SCIGetErrorString(want));                            \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "flag_interrupts: line %d: %s\n", __LINE__, #cond);            \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

struct cmd {
    char op;          /* c: connect+map, s: store, n: trigger the named interrupt,
                         d: create the shared data interrupt, w: wait for its payload,
                         q: quit */
    unsigned int off; /* s */
    unsigned int val; /* s */
};

static int to_peer, from_peer;

/* Send a command to the peer and return its answer (0 is success). */
static int ask(char op, unsigned int off, unsigned int val)
{
    struct cmd c = { op, off, val };
    int answer = -1;
    if (write(to_peer, &c, sizeof c) != (ssize_t)sizeof c || read(from_peer, &answer, sizeof answer) != (ssize_t)sizeof answer) {
        fprintf(stderr, "flag_interrupts: the peer is gone (op %c)\n", op);
        exit(1);
    }
    return answer;
}

/* The peer: another process of the node, storing through its own map of the segment. */
static void peer(int in, int out)
{
    sci_error_t err;
    sci_desc_t sd;
    sci_remote_segment_t rseg = NULL;
    sci_map_t map = NULL;
    volatile unsigned int *words = NULL;
    sci_local_data_interrupt_t dint = NULL;
    unsigned int node = 0;
    struct cmd c;
    SCIInitialize(0, &err);
    if (err != SCI_ERR_OK)
        _exit(2);
    SCIOpen(&sd, 0, &err);
    if (err != SCI_ERR_OK)
        _exit(2);
    SCIGetLocalNodeId(0, &node, 0, &err);
    while (read(in, &c, sizeof c) == (ssize_t)sizeof c) {
        int answer = 0;
        switch (c.op) {
        case 'c':
            SCIConnectSegment(sd, &rseg, node, SEG_ID, 0, NULL, NULL, 10000, 0, &err);
            if (err == SCI_ERR_OK)
                words = (volatile unsigned int *)SCIMapRemoteSegment(rseg, &map, 0, SEG_SIZE, NULL, 0, &err);
            answer = (int)err;
            break;
        case 's':
            words[c.off / 4] = c.val; /* an ordinary store: no call */
            break;
        case 'n': {
            sci_remote_interrupt_t r;
            SCIConnectInterrupt(sd, &r, node, 0, RemoraNamedInterruptNo(NAME), 10000, 0, &err);
            if (err == SCI_ERR_OK)
                SCITriggerInterrupt(r, 0, &err);
            if (err == SCI_ERR_OK)
                SCIDisconnectInterrupt(r, 0, &err);
            answer = (int)err;
            break;
        }
        case 'd': {
            unsigned int no = DATA_NO;
            SCICreateDataInterrupt(sd, &dint, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO | SCI_FLAG_SHARED_INT, &err);
            answer = (int)err;
            break;
        }
        case 'w': {
            char buf[SCI_MAX_DATA_INTERRUPT_LENGTH];
            unsigned int len = sizeof buf;
            SCIWaitForDataInterrupt(dint, buf, &len, 10000, 0, &err);
            answer = (int)err;
            if (err == SCI_ERR_OK && (len != sizeof PAYLOAD || memcmp(buf, PAYLOAD, len) != 0))
                answer = -2;
            if (answer == 0)
                SCIRemoveDataInterrupt(dint, 0, &err), answer = (int)err;
            break;
        }
        case 'q':
            if (map)
                SCIUnmapSegment(map, 0, &err);
            if (rseg)
                SCIDisconnectSegment(rseg, 0, &err);
            SCIClose(sd, 0, &err);
            SCITerminate();
            if (write(out, &answer, sizeof answer) != (ssize_t)sizeof answer)
                _exit(3);
            _exit(0);
        default:
            answer = -1;
        }
        if (write(out, &answer, sizeof answer) != (ssize_t)sizeof answer)
            _exit(3);
    }
    _exit(0);
}

static unsigned int counter(sci_local_interrupt_t intr)
{
    sci_error_t err;
    unsigned int n = 12345;
    SCIGetConditionalInterruptTrigCounter(intr, &n, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    return n;
}

static void conditional(sci_desc_t sd)
{
    sci_error_t err;
    sci_local_segment_t seg, other;
    sci_local_interrupt_t fi, plain, junk;
    unsigned int no = 0, v;

    SCICreateSegment(sd, &seg, SEG_ID, SEG_SIZE, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIPrepareSegment(seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCISetSegmentAvailable(seg, 0, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRegisterInterruptFlag(0, &fi, seg, FLAG_OFF, NULL, NULL, SCI_FLAG_CONDITIONAL_INTERRUPT, &err);
    EXPECT(err, SCI_ERR_OK);
    EXPECT(ask('c', 0, 0), SCI_ERR_OK);

    /* Disabled: the peer's store does not fire; the next enable reports the race. */
    EXPECT(ask('s', FLAG_OFF, 1), 0);
    SCIWaitForInterrupt(fi, 200, 0, &err);
    EXPECT(err, SCI_ERR_TIMEOUT);
    CHECK(counter(fi) == 0);
    SCIEnableConditionalInterrupt(fi, 0, &err);
    EXPECT(err, SCI_ERR_COND_INT_RACE_PROBLEM);
    SCIEnableConditionalInterrupt(fi, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* Enabled: every store fires, and counts. */
    for (v = 2; v <= 4; v++) {
        EXPECT(ask('s', FLAG_OFF, v), 0);
        SCIWaitForInterrupt(fi, 10000, 0, &err);
        EXPECT(err, SCI_ERR_OK);
        CHECK(counter(fi) == v - 1);
    }
    /* A store to another word is no trigger. */
    EXPECT(ask('s', FLAG_OFF + 4, 99), 0);
    SCIWaitForInterrupt(fi, 200, 0, &err);
    EXPECT(err, SCI_ERR_TIMEOUT);
    CHECK(counter(fi) == 3);
    /* Enable and disable reset the counter; disabled, stores do not fire. */
    SCIEnableConditionalInterrupt(fi, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(counter(fi) == 0);
    SCIDisableConditionalInterrupt(fi, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(counter(fi) == 0);
    EXPECT(ask('s', FLAG_OFF, 5), 0);
    SCIWaitForInterrupt(fi, 200, 0, &err);
    EXPECT(err, SCI_ERR_TIMEOUT);
    CHECK(counter(fi) == 0);
    SCIEnableConditionalInterrupt(fi, 0, &err);
    EXPECT(err, SCI_ERR_COND_INT_RACE_PROBLEM);
    SCIEnableConditionalInterrupt(fi, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    EXPECT(ask('s', FLAG_OFF, 6), 0);
    SCIWaitForInterrupt(fi, 10000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(counter(fi) == 1);

    /* Bad handles, flags and arguments. */
    SCIEnableConditionalInterrupt(NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIDisableConditionalInterrupt(NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIGetConditionalInterruptTrigCounter(NULL, &v, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIGetConditionalInterruptTrigCounter(fi, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIEnableConditionalInterrupt(fi, 0x1, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIDisableConditionalInterrupt(fi, 0x8, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIGetConditionalInterruptTrigCounter(fi, &v, 0x2, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIEnableConditionalInterrupt((sci_local_interrupt_t)seg, 0, &err); /* wrong kind */
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIRegisterInterruptFlag(0, &junk, seg, 2, NULL, NULL, SCI_FLAG_CONDITIONAL_INTERRUPT, &err);
    EXPECT(err, SCI_ERR_OFFSET_ALIGNMENT);
    SCIRegisterInterruptFlag(0, &junk, seg, SEG_SIZE, NULL, NULL, SCI_FLAG_CONDITIONAL_INTERRUPT, &err);
    EXPECT(err, SCI_ERR_OUT_OF_RANGE);
    SCIRegisterInterruptFlag(0, &junk, seg, 0, NULL, NULL, 0x100, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    SCIRegisterInterruptFlag(0, &junk, NULL, 0, NULL, NULL, SCI_FLAG_CONDITIONAL_INTERRUPT, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIRegisterInterruptFlag(0, NULL, seg, 0, NULL, NULL, SCI_FLAG_CONDITIONAL_INTERRUPT, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIRegisterInterruptFlag(3, &junk, seg, 0, NULL, NULL, SCI_FLAG_CONDITIONAL_INTERRUPT, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_ADAPTERNO);
    /* A plain interrupt is no flag interrupt; an unconditional flag one is not enabled. */
    SCICreateInterrupt(sd, &plain, 0, &no, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIEnableConditionalInterrupt(plain, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    SCIGetConditionalInterruptTrigCounter(plain, &v, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    SCIRemoveInterrupt(plain, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateSegment(sd, &other, SEG_ID + 1, 4096, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRegisterInterruptFlag(0, &junk, other, 0, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIDisableConditionalInterrupt(junk, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_OPERATION);
    CHECK(counter(junk) == 0);
    SCIRemoveSegment(other, 0, &err);
    EXPECT(err, SCI_ERR_BUSY);
    SCIRemoveInterrupt(junk, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIRemoveSegment(other, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    /* Removed: the handle is stale. */
    SCIRemoveInterrupt(fi, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIEnableConditionalInterrupt(fi, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCIGetConditionalInterruptTrigCounter(fi, &v, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
}

static void named(sci_desc_t sd, sci_desc_t sd2)
{
    sci_error_t err;
    sci_local_interrupt_t ni, junk;
    unsigned int no = 0;

    SCICreateNamedInterrupt(sd, &ni, 0, NAME, &no, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    CHECK(no == RemoraNamedInterruptNo(NAME));
    EXPECT(ask('n', 0, 0), SCI_ERR_OK);
    SCIWaitForInterrupt(ni, 10000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCICreateNamedInterrupt(sd2, &junk, 0, NAME, NULL, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_INTNO_USED);
    SCICreateNamedInterrupt(sd, &junk, 0, NULL, &no, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateNamedInterrupt(sd, &junk, 0, "", &no, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateNamedInterrupt(sd, NULL, 0, "x", &no, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateNamedInterrupt(NULL, &junk, 0, "x", &no, NULL, NULL, 0, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_PARAMETER);
    SCICreateNamedInterrupt(sd, &junk, 0, "x", &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_ILLEGAL_FLAG);
    /* SCI_FLAG_SHARE_EXTERNAL is accepted: the taken name is what fails. */
    SCICreateNamedInterrupt(sd2, &junk, 0, NAME, NULL, NULL, NULL, SCI_FLAG_SHARE_EXTERNAL, &err);
    EXPECT(err, SCI_ERR_INTNO_USED);
    SCIRemoveInterrupt(ni, 0, &err);
    EXPECT(err, SCI_ERR_OK);
}

static void shared_data(sci_desc_t sd, sci_desc_t sd2)
{
    sci_error_t err;
    sci_local_data_interrupt_t d1, d2, junk;
    sci_remote_data_interrupt_t r;
    unsigned int no, node = 0, len;
    char buf[SCI_MAX_DATA_INTERRUPT_LENGTH];
    sci_local_data_interrupt_t *mine[2] = { &d1, &d2 };
    sci_desc_t descs[2] = { sd, sd2 };
    int i;

    for (i = 0; i < 2; i++) {
        no = DATA_NO;
        SCICreateDataInterrupt(descs[i], mine[i], 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO | SCI_FLAG_SHARED_INT, &err);
        EXPECT(err, SCI_ERR_OK);
    }
    EXPECT(ask('d', 0, 0), SCI_ERR_OK);
    /* Without the flag the number is taken. */
    no = DATA_NO;
    SCICreateDataInterrupt(sd, &junk, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err);
    EXPECT(err, SCI_ERR_INTNO_USED);
    SCICreateDataInterrupt(sd, &junk, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO | SCI_FLAG_SHARE_EXTERNAL, &err);
    EXPECT(err, SCI_ERR_INTNO_USED); /* the flag is accepted; the number is taken */

    SCIGetLocalNodeId(0, &node, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIConnectDataInterrupt(sd, &r, node, 0, DATA_NO, 10000, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCITriggerDataInterrupt(r, PAYLOAD, sizeof PAYLOAD, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    for (i = 0; i < 2; i++) {
        len = sizeof buf;
        SCIWaitForDataInterrupt(*mine[i], buf, &len, 10000, 0, &err);
        EXPECT(err, SCI_ERR_OK);
        CHECK(len == sizeof PAYLOAD && memcmp(buf, PAYLOAD, len) == 0);
    }
    EXPECT(ask('w', 0, 0), SCI_ERR_OK); /* the creator in the other process got it too */
    for (i = 0; i < 2; i++) {
        SCIRemoveDataInterrupt(*mine[i], 0, &err);
        EXPECT(err, SCI_ERR_OK);
    }
    SCITriggerDataInterrupt(r, PAYLOAD, sizeof PAYLOAD, 0, &err);
    EXPECT(err, SCI_ERR_NO_SUCH_INTNO);
    SCIDisconnectDataInterrupt(r, 0, &err);
    EXPECT(err, SCI_ERR_OK);
}

int main(void)
{
    sci_error_t err;
    sci_desc_t sd, sd2;
    int down[2], up[2], status = 0;
    pid_t pid;

    if (pipe(down) != 0 || pipe(up) != 0) {
        perror("pipe");
        return 1;
    }
    pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        peer(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    to_peer = down[1];
    from_peer = up[0];

    SCIInitialize(0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIOpen(&sd, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIOpen(&sd2, 0, &err);
    EXPECT(err, SCI_ERR_OK);

    conditional(sd);
    named(sd, sd2);
    shared_data(sd, sd2);

    EXPECT(ask('q', 0, 0), 0);
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    SCIClose(sd2, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCIClose(sd, 0, &err);
    EXPECT(err, SCI_ERR_OK);
    SCITerminate();
    printf("flag_interrupts: %d checks passed\n", checks);
    return 0;
}
