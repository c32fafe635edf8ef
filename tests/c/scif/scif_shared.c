/*
 * scif_shared: scif_register of the program's own MAP_SHARED memory, over a loopback
 * connection to the own node, in a single process.
 *
 *   scif_shared                   (run with REMORA_NODE=4; uses port 2127)
 *
 * A memfd sealed against shrinking and growing, mapped twice: a window over pages 1-2 of
 * the first map is that memory (not a copy): the peer's scif_vwriteto lands in both maps
 * and in the file, the program's store through the second map is read back through the
 * window, and the peer's scif_mmap of the window sees and stores into the same pages. A
 * window over a private page followed by the sealed memfd's pages works (two pieces). An
 * unsealed memfd and a shm_open file stay EFAULT (the daemon and the peers map a window: a
 * file its owner may truncate would fault them).
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
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <scif.h>

#define SCIF_TEST_PROG "scif_shared"
#include "scif_check.h"

#define PAGE 4096
#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)
#define PORT_LOOP 2127
#define W_OFF 0x300000
#define MIX_OFF 0x500000

static int memfd(int seal)
{
    int fd = memfd_create("program", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK_Q(fd >= 0, "memfd_create");
    CHECK_EQ_Q(ftruncate(fd, 4 * PAGE), 0, "ftruncate");
    if (seal)
        CHECK_EQ_Q(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0, "F_ADD_SEALS");
    return fd;
}

int main(void)
{
    scif_epd_t lp, c, s;
    uint8_t *m1, *m2, *mix, *pm, *other;
    char got[32], name[64];
    int fd, loose, shm;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    role = "single";

    PHASE("connect");
    loop_pair(PORT_LOOP, &lp, &c, &s);

    PHASE("a sealed memfd");
    fd = memfd(1);
    m1 = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    m2 = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK_Q(m1 != MAP_FAILED && m2 != MAP_FAILED, "mmap");
    memcpy(m1 + PAGE, "before", 6);
    CHECK_EQ(scif_register(s, m1 + PAGE, 2 * PAGE, W_OFF, RW, SCIF_MAP_FIXED), W_OFF,
             "a window over pages 1-2 of the first map");
    CHECK(memcmp(m1 + PAGE, "before", 6) == 0, "the program's bytes stay");
    CHECK_EQ(scif_vwriteto(c, "through the window", 18, W_OFF + PAGE + 8, 0), 0, "the peer writes");
    CHECK(memcmp(m1 + 2 * PAGE + 8, "through the window", 18) == 0, "the first map sees it");
    CHECK(memcmp(m2 + 2 * PAGE + 8, "through the window", 18) == 0, "the second map sees it");
    CHECK_EQ(pread(fd, got, 18, 2 * PAGE + 8), 18, "pread");
    CHECK(memcmp(got, "through the window", 18) == 0, "the file holds it");
    memcpy(m2 + PAGE + 100, "second map", 10);
    CHECK_EQ(scif_vreadfrom(c, got, 10, W_OFF + 100, 0), 0, "the peer reads");
    CHECK(memcmp(got, "second map", 10) == 0, "a store through the second map is seen");
    pm = scif_mmap(NULL, 2 * PAGE, RW, 0, c, W_OFF);
    CHECK(pm != SCIF_MMAP_FAILED, "the peer maps the window");
    CHECK(memcmp(pm, "before", 6) == 0, "the map sees the program's bytes");
    memcpy(pm + PAGE + 200, "peer map", 8);
    CHECK(memcmp(m2 + 2 * PAGE + 200, "peer map", 8) == 0, "its store lands in the file");
    CHECK_EQ(scif_munmap(pm, 2 * PAGE), 0, "scif_munmap");
    CHECK_EQ(scif_unregister(s, W_OFF, 2 * PAGE), 0, "unregister");
    CHECK(memcmp(m1 + 2 * PAGE + 8, "through the window", 18) == 0, "the map keeps its bytes");

    PHASE("a private page, then the sealed memfd");
    mix = mmap(NULL, 5 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_Q(mix != MAP_FAILED, "mmap");
    memcpy(mix, "private", 7);
    CHECK_Q(mmap(mix + PAGE, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == mix + PAGE,
            "the memfd over pages 1-4");
    CHECK_EQ(scif_register(s, mix, 5 * PAGE, MIX_OFF, RW, SCIF_MAP_FIXED), MIX_OFF,
             "a window over both");
    CHECK_EQ(scif_vreadfrom(c, got, 7, MIX_OFF, 0), 0, "read the private page");
    CHECK(memcmp(got, "private", 7) == 0, "its bytes");
    CHECK_EQ(scif_vwriteto(c, "across", 6, MIX_OFF + PAGE - 3, 0), 0, "write across the two");
    CHECK(memcmp(mix + PAGE - 3, "across", 6) == 0, "in the program's memory");
    CHECK(memcmp(m1 + 0, "oss", 3) == 0, "and in the file");
    CHECK_EQ(scif_unregister(s, MIX_OFF, 5 * PAGE), 0, "unregister");

    PHASE("files that can shrink");
    loose = memfd(0);
    other = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, loose, 0);
    CHECK_Q(other != MAP_FAILED, "mmap");
    CHECK_ERR(scif_register(s, other, PAGE, 0, RW, 0), EFAULT, "an unsealed memfd");
    snprintf(name, sizeof name, "/scif_shared.%d", (int)getpid());
    shm = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK_Q(shm >= 0, "shm_open");
    shm_unlink(name);
    CHECK_EQ_Q(ftruncate(shm, PAGE), 0, "ftruncate");
    other = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
    CHECK_Q(other != MAP_FAILED, "mmap");
    CHECK_ERR(scif_register(s, other, PAGE, 0, RW, 0), EFAULT, "a shm_open file");

    CHECK_EQ(scif_close(c), 0, "close");
    CHECK_EQ(scif_close(s), 0, "close the accepted endpoint");
    CHECK_EQ(scif_close(lp), 0, "close the listener");
    printf("%s %s: %d checks\nPASS\n", prog, role, nchecks);
    return 0;
}
