/*
 * scif_fsize: SCIF windows under a file size limit (ulimit -f, RLIMIT_FSIZE) of 8 MiB, set
 * before the first SCIF call (the daemon its library starts gets it too). SIGXFSZ is left
 * to kill the program: a file made longer than the limit would end the test. Windows of
 * 1 MiB and 3 MiB register (three 3 MiB windows, more than one 8 MiB file holds, all
 * live), the peer reads all of them back and writes into them; a 16 MiB window is ENOMEM;
 * after unregistering everything, windows still register. Prints PASS.
 *
 *   REMORA_NODE=4 ./scif_fsize
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
#include <sys/resource.h>
#include <unistd.h>
#include <scif.h>
#define SCIF_TEST_PROG "scif_fsize"
#include "scif_check.h"

#define MIB (1UL << 20)
#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)

static uint8_t *fresh(size_t len, int seed)
{
    uint8_t *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_Q(b != MAP_FAILED, "mmap");
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(seed + i / 4096 + i % 251);
    return b;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    role = "single";
    signal(SIGALRM, on_alarm);
    alarm(60);
    struct rlimit lim = { 8 * MIB, 8 * MIB };
    CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0, "RLIMIT_FSIZE 8 MiB");
    scif_epd_t lp, c, s;
    loop_pair(2135, &lp, &c, &s);

    PHASE("windows under the limit");
    size_t len[4] = { MIB, 3 * MIB, 3 * MIB, 3 * MIB };
    uint8_t *buf[4];
    off_t win[4];
    for (int i = 0; i < 4; i++) {
        buf[i] = fresh(len[i], i * 7);
        win[i] = scif_register(s, buf[i], len[i], 0, RW, 0);
        CHECK(win[i] >= 0, "scif_register (10 MiB in all, live)");
    }
    uint8_t *back = fresh(3 * MIB, 0);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(scif_vreadfrom(c, back, len[i], win[i], SCIF_RMA_SYNC), 0, "the peer reads the window");
        CHECK(memcmp(back, buf[i], len[i]) == 0, "it reads the program's bytes");
        memset(back, 0x5a + i, len[i]);
        CHECK_EQ(scif_vwriteto(c, back, len[i], win[i], SCIF_RMA_SYNC), 0, "the peer writes the window");
        CHECK(buf[i][0] == 0x5a + i && buf[i][len[i] - 1] == 0x5a + i, "the program sees the peer's bytes");
    }

    PHASE("a window larger than the limit");
    uint8_t *big = fresh(16 * MIB, 1);
    CHECK_ERR(scif_register(s, big, 16 * MIB, 0, RW, 0), ENOMEM, "a 16 MiB window is ENOMEM");
    CHECK(big[5 * 4096] == (uint8_t)(1 + 5 + (5 * 4096) % 251), "its buffer keeps its bytes");

    PHASE("after unregistering");
    for (int i = 0; i < 4; i++)
        CHECK_EQ(scif_unregister(s, win[i], len[i]), 0, "scif_unregister");
    off_t again = scif_register(s, buf[1], len[1], 0, RW, 0);
    CHECK(again >= 0, "a window registers again");
    CHECK_EQ(scif_vreadfrom(c, back, len[1], again, SCIF_RMA_SYNC), 0, "the peer reads it");
    CHECK(back[0] == 0x5a + 1 && back[len[1] - 1] == 0x5a + 1, "with the bytes");
    scif_close(c);
    scif_close(s);
    scif_close(lp);
    printf("PASS\n");
    return 0;
}
