/*
 * scif_rma_bad: RMA given memory it may not use, over a loopback connection to the own
 * node, in a single process.
 *
 *   scif_rma_bad                  (run with REMORA_NODE=4; uses port 2094)
 *
 * scif_vwriteto from an unmapped address, from PROT_NONE memory and from a buffer that
 * runs into an unmapped page or has one in its middle, and scif_vreadfrom into read-only
 * memory, into the program's text and into a buffer that runs into a read-only page: each
 * fails EFAULT (the driver's copy from or to user memory), the process lives and the
 * connection keeps working. scif_fence_signal into a window registered read-only (ours or
 * the peer's) fails EPERM and leaves its bytes; 8 bytes at a window's last DWORD, which
 * would run into the next window, fail ENXIO and touch neither.
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
#include <time.h>
#include <unistd.h>

#include <scif.h>

#define SCIF_TEST_PROG "scif_rma_bad"
#include "scif_check.h"

#define PAGE 4096
#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)
#define PORT_LOOP 2094
#define RO_OFF 0x100000
#define W1_OFF 0x200000

static void *map(size_t len, int prot)
{
    void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_Q(p != MAP_FAILED, "mmap");
    return p;
}

int main(void)
{
    scif_epd_t lp, c, s;
    uint8_t *win, *ro, *w1, *w2, *own_ro, *none, *half, *half_ro, *holed, *back;
    uint64_t v;
    int i;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    role = "single";

    PHASE("connect");
    loop_pair(PORT_LOOP, &lp, &c, &s);

    /* The accepting end's windows: one writable page at 0, a read-only page, two
     * adjacent writable pages. Ours: a read-only page. */
    win = map(PAGE, PROT_READ | PROT_WRITE);
    ro = map(PAGE, PROT_READ | PROT_WRITE);
    memset(ro, 0x11, PAGE);
    w1 = map(PAGE, PROT_READ | PROT_WRITE);
    w2 = map(PAGE, PROT_READ | PROT_WRITE);
    own_ro = map(PAGE, PROT_READ | PROT_WRITE);
    CHECK_EQ_Q(scif_register(s, win, PAGE, 0, RW, SCIF_MAP_FIXED), 0, "register the window at 0");
    CHECK_EQ_Q(scif_register(s, ro, PAGE, RO_OFF, SCIF_PROT_READ, SCIF_MAP_FIXED), RO_OFF,
               "register a read-only window");
    CHECK_EQ_Q(scif_register(s, w1, PAGE, W1_OFF, RW, SCIF_MAP_FIXED), W1_OFF, "register w1");
    CHECK_EQ_Q(scif_register(s, w2, PAGE, W1_OFF + PAGE, RW, SCIF_MAP_FIXED), W1_OFF + PAGE,
               "register w2 right after w1");
    CHECK_EQ_Q(scif_register(c, own_ro, PAGE, RO_OFF, SCIF_PROT_READ, SCIF_MAP_FIXED), RO_OFF,
               "register our own read-only window");

    PHASE("vwriteto from bad memory");
    none = map(PAGE, PROT_NONE);
    half = map(2 * PAGE, PROT_READ | PROT_WRITE);
    CHECK_EQ_Q(munmap(half + PAGE, PAGE), 0, "unmap the second page");
    CHECK_ERR(scif_vwriteto(c, (void *)0x1000, 64, 0, 0), EFAULT,
              "scif_vwriteto from unmapped 0x1000 fails EFAULT");
    CHECK_ERR(scif_vwriteto(c, none, 64, 0, 0), EFAULT,
              "scif_vwriteto from PROT_NONE memory fails EFAULT");
    CHECK_ERR(scif_vwriteto(c, half + PAGE - 16, 64, 0, 0), EFAULT,
              "scif_vwriteto from a buffer that runs into an unmapped page fails EFAULT");
    CHECK_ERR(scif_vwriteto(c, (void *)~(uintptr_t)0xfff, 8192, 0, 0), EFAULT,
              "scif_vwriteto from a range that wraps the address space fails EFAULT");
    holed = map(3 * PAGE, PROT_READ | PROT_WRITE);
    CHECK_EQ_Q(munmap(holed + PAGE, PAGE), 0, "unmap the middle page of three");
    CHECK_ERR(scif_vwriteto(c, holed + PAGE - 16, PAGE + 32, W1_OFF, 0), EFAULT,
              "scif_vwriteto from a buffer with an unmapped page in its middle fails EFAULT");

    PHASE("vreadfrom into bad memory");
    half_ro = map(2 * PAGE, PROT_READ | PROT_WRITE);
    CHECK_EQ_Q(mprotect(half_ro + PAGE, PAGE, PROT_READ), 0, "make the second page read-only");
    CHECK_ERR(scif_vreadfrom(c, none, 64, 0, 0), EFAULT,
              "scif_vreadfrom into PROT_NONE memory fails EFAULT");
    CHECK_ERR(scif_vreadfrom(c, half_ro + PAGE, 64, 0, 0), EFAULT,
              "scif_vreadfrom into read-only memory fails EFAULT");
    CHECK_ERR(scif_vreadfrom(c, (void *)(uintptr_t)&main, 64, 0, 0), EFAULT,
              "scif_vreadfrom into the program's text fails EFAULT");
    CHECK_ERR(scif_vreadfrom(c, half_ro + PAGE - 16, 64, 0, 0), EFAULT,
              "scif_vreadfrom into a buffer that runs into a read-only page fails EFAULT");
    CHECK_ERR(scif_vreadfrom(c, (void *)0x1000, 64, 0, 0), EFAULT,
              "scif_vreadfrom into unmapped 0x1000 fails EFAULT");

    PHASE("the connection still works");
    for (i = 0; i < 64; i++)
        half[PAGE - 64 + i] = (uint8_t)(i * 3 + 1);
    CHECK_EQ(scif_vwriteto(c, half + PAGE - 64, 64, 100, 0), 0, "a good scif_vwriteto");
    CHECK(memcmp(win + 100, half + PAGE - 64, 64) == 0, "its bytes arrived");
    back = map(PAGE, PROT_READ | PROT_WRITE);
    CHECK_EQ(scif_vreadfrom(c, back + PAGE - 64, 64, 100, 0), 0, "a good scif_vreadfrom");
    CHECK(memcmp(back + PAGE - 64, half + PAGE - 64, 64) == 0, "its bytes came back");

    PHASE("fence_signal targets");
    CHECK_ERR(scif_fence_signal(c, 0, 0, RO_OFF + 8, 0xdeadbeef, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_REMOTE),
              EPERM, "scif_fence_signal into the peer's read-only window fails EPERM");
    memcpy(&v, ro + 8, 8);
    CHECK_EQ(v, 0x1111111111111111ULL, "the read-only window kept its bytes");
    CHECK_ERR(scif_fence_signal(c, RO_OFF, 5, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL), EPERM,
              "scif_fence_signal into our own read-only window fails EPERM");
    CHECK_ERR(scif_fence_signal(c, 0, 0, W1_OFF + PAGE - 4, ~0ULL,
                                SCIF_FENCE_INIT_PEER | SCIF_SIGNAL_REMOTE),
              ENXIO, "scif_fence_signal of 8 bytes across the end of a window fails ENXIO");
    memcpy(&v, w1 + PAGE - 8, 8);
    CHECK_EQ(v, 0, "the first window was not touched");
    memcpy(&v, w2, 8);
    CHECK_EQ(v, 0, "the next window was not touched");
    CHECK_EQ(scif_fence_signal(c, 0, 0, W1_OFF + PAGE - 8, 77, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_REMOTE), 0,
             "scif_fence_signal at a window's last 8 bytes");
    memcpy(&v, w1 + PAGE - 8, 8);
    CHECK_EQ(v, 77, "the signal value landed");

    CHECK_EQ(scif_close(c), 0, "close");
    CHECK_EQ(scif_close(s), 0, "close the accepted endpoint");
    CHECK_EQ(scif_close(lp), 0, "close the listener");
    printf("%s %s: %d checks\nPASS\n", prog, role, nchecks);
    return 0;
}
