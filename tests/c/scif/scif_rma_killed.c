/*
 * scif_rma_killed: RMAs and fences go on after a forked child sharing the endpoint is
 * killed in the middle of an RMA, over a loopback connection to the own node.
 *
 *   scif_rma_killed               (run with REMORA_NODE=4; uses port 2097)
 *
 * The child copies 64 MiB windows with scif_writeto, over and over; the parent kills it
 * with SIGKILL while one copy runs, so that RMA never ends. Then scif_fence_wait of the
 * connecting end's own RMAs (INIT_SELF) and of the accepting end's peer (INIT_PEER) must
 * return 0, and more than 4096 further RMAs (a completion ring's worth) must complete, a
 * fence after them too: the library ends the ticket of an RMA whose process is gone.
 *
 * Prints one "ok" line per check and "PASS" at the end; on failure prints where and why
 * and exits non-zero (3 if its 60 s alarm fired, or killed by the signal of a crash).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <scif.h>

#define SCIF_TEST_PROG "scif_rma_killed"
#include "scif_check.h"

#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)
#define PORT_LOOP 2097
#define BIG (64u << 20)
#define ROUNDS 5000

static void *map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_Q(p != MAP_FAILED, "mmap");
    return p;
}

int main(void)
{
    scif_epd_t lp, c, s;
    uint8_t *src, *dstw, *small;
    int fds[2], status, mark, i;
    pid_t child;
    char b;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    role = "single";

    PHASE("connect");
    loop_pair(PORT_LOOP, &lp, &c, &s);

    src = map(BIG);
    dstw = map(BIG);
    memset(src, 0x5a, BIG);
    CHECK_EQ_Q(scif_register(c, src, BIG, 0, RW, SCIF_MAP_FIXED), 0, "register the source window");
    CHECK_EQ_Q(scif_register(s, dstw, BIG, 0, RW, SCIF_MAP_FIXED), 0, "register the target window");

    /* An RMA of the parent first: the library knows the parent's pid before the fork, and
     * the child's tickets must still name the child (else nothing would end them). */
    CHECK_EQ_Q(scif_writeto(c, 0, 4096, 0, SCIF_RMA_SYNC), 0, "an RMA before the fork");

    PHASE("kill a child mid-RMA");
    CHECK_EQ_Q(pipe(fds), 0, "pipe");
    fflush(NULL);
    child = fork();
    CHECK_Q(child >= 0, "fork");
    if (child == 0) {
        role = "child";
        close(fds[0]);
        for (i = 0;; i++) {
            if (scif_writeto(c, 0, BIG, 0, SCIF_RMA_SYNC) != 0)
                _exit(10);
            if (i == 0 && write(fds[1], "x", 1) != 1)
                _exit(11);
        }
    }
    close(fds[1]);
    CHECK_EQ_Q(read(fds[0], &b, 1), 1, "the child completed a first 64 MiB writeto");
    /* Its next copy runs now (it starts again within microseconds and takes milliseconds). */
    msleep(3);
    CHECK_EQ_Q(kill(child, SIGKILL), 0, "kill the child");
    CHECK_EQ_Q(waitpid(child, &status, 0), child, "reap the child");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child died of SIGKILL mid-RMA");

    PHASE("fences after the killed RMA");
    CHECK_EQ(scif_fence_mark(c, SCIF_FENCE_INIT_SELF, &mark), 0, "scif_fence_mark(INIT_SELF)");
    CHECK_EQ(scif_fence_wait(c, mark), 0, "scif_fence_wait(INIT_SELF) returns");
    CHECK_EQ(scif_fence_mark(s, SCIF_FENCE_INIT_PEER, &mark), 0, "scif_fence_mark(INIT_PEER)");
    CHECK_EQ(scif_fence_wait(s, mark), 0, "scif_fence_wait(INIT_PEER) returns");

    PHASE("a ring's worth of RMAs after it");
    small = map(64);
    for (i = 0; i < ROUNDS; i++) {
        memset(small, i & 0xff, 64);
        if (scif_vwriteto(c, small, 64, 0, 0) != 0)
            FAIL("scif_vwriteto %d of %d: %s", i, ROUNDS, errname(errno));
    }
    CHECK(dstw[0] == ((ROUNDS - 1) & 0xff), "5000 more RMAs completed, the last one's bytes arrived");
    CHECK_EQ(scif_fence_mark(c, SCIF_FENCE_INIT_SELF, &mark), 0, "scif_fence_mark after them");
    CHECK_EQ(scif_fence_wait(c, mark), 0, "scif_fence_wait after them returns");
    CHECK_EQ(scif_fence_signal(c, 64, 7, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL), 0,
             "scif_fence_signal(INIT_SELF) returns");

    CHECK_EQ_Q(scif_close(c), 0, "close");
    CHECK_EQ_Q(scif_close(s), 0, "close");
    CHECK_EQ_Q(scif_close(lp), 0, "close");
    printf("%s: PASS (%d checks)\n", prog, nchecks);
    return 0;
}
