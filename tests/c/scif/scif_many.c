/*
 * scif_many: 2000 one-page windows of one endpoint under a 1024-descriptor limit, and
 * windows over many windows, over a loopback connection to the own node, in a single
 * process.
 *
 *   scif_many                     (run with REMORA_NODE=4; uses port 2125)
 *
 * The program lowers RLIMIT_NOFILE to 1024 before its first SCIF call, so the node
 * daemon its library starts has that limit too. The accepting end registers 2000
 * one-page windows on every other page of a buffer; the peer writes all of them in one
 * scif_vwriteto and every byte is in the program's memory; it reads them back, maps 100
 * of them; a window over the pages of the first 1000 windows (and the pages between)
 * sees what they see and its RMA lands in the program's memory; after every window is
 * unregistered, one window over the whole buffer keeps the bytes. Once the endpoints are
 * closed, the program holds no more descriptors than before it connected (give or take
 * the library's own two).
 *
 * Prints one "ok" line per check and "PASS" at the end; on failure prints where and why
 * and exits non-zero (3 if its 60 s alarm fired).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <scif.h>

#define SCIF_TEST_PROG "scif_many"
#include "scif_check.h"

#define PAGE 4096
#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)
#define PORT_LOOP 2125
#define NWIN 2000
#define SMALL_OFF 0x10000000L
#define BIG_OFF 0x40000000L

static uint8_t pattern(size_t i, int round)
{
    return (uint8_t)((i * 31 + (size_t)round * 7) % 251);
}

/* One connection's worth: NWIN windows of s, checked through c. */
static void round_of(int round)
{
    scif_epd_t lp, c, s;
    uint8_t *buf, *data, *got, *m;
    size_t pages = 2 * NWIN - 1;
    int i, bad;

    PHASE("connect");
    loop_pair(PORT_LOOP + round, &lp, &c, &s);

    PHASE("register the windows");
    buf = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_Q(buf != MAP_FAILED, "mmap");
    for (i = 0, bad = -1; i < NWIN && bad < 0; i++)
        if (scif_register(s, buf + 2 * (size_t)i * PAGE, PAGE, SMALL_OFF + (off_t)i * PAGE, RW,
                          SCIF_MAP_FIXED) != SMALL_OFF + (off_t)i * PAGE)
            bad = i;
    if (bad >= 0)
        printf("window %d: %s\n", bad, strerror(errno));
    CHECK_EQ(bad, -1, "2000 one-page windows registered");

    PHASE("rma through every window");
    data = malloc(NWIN * PAGE);
    got = malloc(NWIN * PAGE);
    CHECK_Q(data && got, "malloc");
    for (i = 0; i < NWIN * PAGE; i++)
        data[i] = pattern((size_t)i, round);
    CHECK_EQ(scif_vwriteto(c, data, NWIN * PAGE, SMALL_OFF, 0), 0, "one write through all of them");
    for (i = 0, bad = -1; i < NWIN && bad < 0; i++)
        if (memcmp(buf + 2 * (size_t)i * PAGE, data + (size_t)i * PAGE, PAGE) != 0)
            bad = i;
    CHECK_EQ(bad, -1, "every window's bytes are in the program's memory");
    memset(got, 0, NWIN * PAGE);
    CHECK_EQ(scif_vreadfrom(c, got, NWIN * PAGE, SMALL_OFF, 0), 0, "one read through all of them");
    CHECK(memcmp(got, data, NWIN * PAGE) == 0, "the read sees them");
    m = scif_mmap(NULL, 100 * PAGE, RW, 0, c, SMALL_OFF + 1500 * PAGE);
    CHECK(m != SCIF_MMAP_FAILED, "the peer maps 100 windows");
    CHECK(memcmp(m, data + 1500 * PAGE, 100 * PAGE) == 0, "the map sees them");
    memcpy(m + 50 * PAGE + 12, "mapped", 6);
    CHECK(memcmp(buf + 2 * 1550 * (size_t)PAGE + 12, "mapped", 6) == 0,
          "a store through the map lands in the program's memory");
    CHECK_EQ(scif_munmap(m, 100 * PAGE), 0, "scif_munmap");

    PHASE("a window over 1000 windows");
    CHECK_EQ(scif_register(s, buf, 1999 * PAGE, BIG_OFF, RW, SCIF_MAP_FIXED), BIG_OFF,
             "one window over the first 1000 windows and the pages between");
    CHECK_EQ(scif_vreadfrom(c, got, PAGE, BIG_OFF + 2 * 999 * PAGE, 0), 0, "read its last page");
    CHECK(memcmp(got, data + 999 * PAGE, PAGE) == 0, "it sees window 999's page");
    CHECK_EQ(scif_vwriteto(c, "big window", 10, BIG_OFF + 2 * 700 * PAGE + 30, 0), 0,
             "write through it");
    CHECK(memcmp(buf + 2 * 700 * (size_t)PAGE + 30, "big window", 10) == 0,
          "the bytes are in the program's memory");
    CHECK_EQ(scif_vreadfrom(c, got, 10, SMALL_OFF + 700 * PAGE + 30, 0), 0, "read window 700");
    CHECK(memcmp(got, "big window", 10) == 0, "window 700 sees them");
    memcpy(buf + 2 * 333 * (size_t)PAGE + 5, "program", 7);
    CHECK_EQ(scif_vreadfrom(c, got, 7, BIG_OFF + 2 * 333 * PAGE + 5, 0), 0, "read the big window");
    CHECK(memcmp(got, "program", 7) == 0, "the program's store is seen through it");

    PHASE("all gone, one window over everything");
    CHECK_EQ(scif_unregister(s, BIG_OFF, 1999 * PAGE), 0, "unregister the big window");
    CHECK_EQ(scif_unregister(s, SMALL_OFF, NWIN * PAGE), 0, "unregister the 2000 windows at once");
    CHECK_EQ(scif_register(s, buf, pages * PAGE, BIG_OFF, RW, SCIF_MAP_FIXED), BIG_OFF,
             "one window over the whole buffer");
    CHECK_EQ(scif_vreadfrom(c, got, PAGE, BIG_OFF + 2 * 1999 * PAGE, 0), 0, "read its last page");
    CHECK(memcmp(got, data + 1999 * PAGE, PAGE) == 0, "the bytes are kept");
    CHECK_EQ(scif_vwriteto(c, "whole", 5, BIG_OFF + 2 * 1234 * PAGE + 1, 0), 0, "write through it");
    CHECK(memcmp(buf + 2 * 1234 * (size_t)PAGE + 1, "whole", 5) == 0, "in the program's memory");

    CHECK_EQ(scif_close(c), 0, "close");
    CHECK_EQ(scif_close(s), 0, "close the accepted endpoint");
    CHECK_EQ(scif_close(lp), 0, "close the listener");
    munmap(buf, pages * PAGE);
    free(data);
    free(got);
}

/* How many descriptors the program has open. */
static int open_fds(void)
{
    int n = 0, fd;
    for (fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) != -1)
            n++;
    return n;
}

int main(void)
{
    struct rlimit lim;
    int fds_before;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    role = "single";

    PHASE("limit");
    CHECK_EQ_Q(getrlimit(RLIMIT_NOFILE, &lim), 0, "getrlimit");
    lim.rlim_cur = lim.rlim_max < 1024 ? lim.rlim_max : 1024;
    CHECK_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0, "RLIMIT_NOFILE 1024 for the program and its daemon");

    fds_before = open_fds();
    round_of(0);
    /* The endpoints are closed: their windows' descriptors went with them. */
    printf("descriptors: %d before, %d after\n", fds_before, open_fds());
    CHECK(open_fds() <= fds_before + 2, "no descriptor left behind by the closed endpoints");
    printf("%s %s: %d checks\nPASS\n", prog, role, nchecks);
    return 0;
}
