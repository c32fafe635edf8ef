/*
 * scif_overlap: one page backing two windows (the SCIF user guide's overlapping windows),
 * over a loopback connection to the own node, in a single process.
 *
 *   scif_overlap                  (run with REMORA_NODE=4; uses port 2120)
 *
 * The accepting end registers W1 = buf[0, 2 pages) and W2 = buf[1 page, 3 pages). The
 * connecting end (the peer) writes through W1 at page 1: the bytes are at buf + page and
 * a read through W2 sees them. The program's own store at buf + page is seen through W1
 * and W2. The peer's scif_mmap of W2 (its two pages: one shared with W1, one its own)
 * sees the same bytes, and a store through the map lands in buf and is seen through W1.
 * After W1 is unregistered, W2 still reaches buf + page.
 *
 * Prints one "ok" line per check and "PASS" at the end; on failure prints where and why
 * and exits non-zero (3 if its 60 s alarm fired).
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
#include <time.h>
#include <unistd.h>

#include <scif.h>

#define SCIF_TEST_PROG "scif_overlap"
#include "scif_check.h"

#define PAGE 4096
#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)
#define PORT_LOOP 2120
#define W1_OFF 0x300000
#define W2_OFF 0x400000

/* Read len bytes at the peer's registered offset off through endpoint c. */
static void peer_read(scif_epd_t c, off_t off, char *out, size_t len)
{
    CHECK_EQ_Q(scif_vreadfrom(c, out, len, off, 0), 0, "scif_vreadfrom");
}

int main(void)
{
    scif_epd_t lp, c, s;
    uint8_t *buf, *m;
    char got[32];

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    role = "single";

    PHASE("connect");
    loop_pair(PORT_LOOP, &lp, &c, &s);

    PHASE("register");
    buf = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_Q(buf != MAP_FAILED, "mmap");
    memset(buf, 0, 3 * PAGE);
    CHECK_EQ(scif_register(s, buf, 2 * PAGE, W1_OFF, RW, SCIF_MAP_FIXED), W1_OFF,
             "W1 = buf[0, 2 pages)");
    CHECK_EQ(scif_register(s, buf + PAGE, 2 * PAGE, W2_OFF, RW, SCIF_MAP_FIXED), W2_OFF,
             "W2 = buf[1 page, 3 pages)");

    PHASE("rma into W1");
    CHECK_EQ(scif_vwriteto(c, "through W1", 10, W1_OFF + PAGE + 8, 0), 0,
             "the peer writes through W1 at page 1");
    CHECK(memcmp(buf + PAGE + 8, "through W1", 10) == 0, "the bytes are in the program's memory");
    peer_read(c, W2_OFF + 8, got, 10);
    CHECK(memcmp(got, "through W1", 10) == 0, "a read through W2 sees them");

    PHASE("program's store");
    memcpy(buf + PAGE + 100, "program's store", 15);
    peer_read(c, W1_OFF + PAGE + 100, got, 15);
    CHECK(memcmp(got, "program's store", 15) == 0, "the store is seen through W1");
    peer_read(c, W2_OFF + 100, got, 15);
    CHECK(memcmp(got, "program's store", 15) == 0, "the store is seen through W2");

    PHASE("mmap of W2");
    m = scif_mmap(NULL, 2 * PAGE, RW, 0, c, W2_OFF);
    CHECK(m != SCIF_MMAP_FAILED, "the peer maps W2's two pages");
    CHECK(memcmp(m + 8, "through W1", 10) == 0, "the map sees the RMA through W1");
    memcpy(m + PAGE - 4, "12345678", 8);
    CHECK(memcmp(buf + 2 * PAGE - 4, "12345678", 8) == 0, "a store through the map lands in buf");
    peer_read(c, W1_OFF + 2 * PAGE - 4, got, 4);
    CHECK(memcmp(got, "1234", 4) == 0, "and is seen through W1");
    CHECK_EQ(scif_munmap(m, 2 * PAGE), 0, "scif_munmap");

    PHASE("unregister W1");
    CHECK_EQ(scif_unregister(s, W1_OFF, 2 * PAGE), 0, "unregister W1");
    CHECK_EQ(scif_vwriteto(c, "after W1", 8, W2_OFF + 300, 0), 0, "write through W2");
    CHECK(memcmp(buf + PAGE + 300, "after W1", 8) == 0, "W2 still reaches buf + page");

    CHECK_EQ(scif_close(c), 0, "close");
    CHECK_EQ(scif_close(s), 0, "close the accepted endpoint");
    CHECK_EQ(scif_close(lp), 0, "close the listener");
    printf("%s %s: %d checks\nPASS\n", prog, role, nchecks);
    return 0;
}
