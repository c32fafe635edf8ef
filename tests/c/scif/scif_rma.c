/*
 * scif_rma: SCIF registered memory, RMA, fences, scif_mmap, fork, window
 * lifetime, across two nodes.
 *
 *   scif_rma server PORT          (run with REMORA_NODE=4)
 *   scif_rma client NODE PORT     (run with REMORA_NODE=8; NODE = server's node)
 *
 * Both sides register the same layout of windows on their connection:
 *   0x080000  A   64 KiB, posix_memalign, SCIF_MAP_FIXED (tutorial offset)
 *   0x100000  C1  one page  \  two separate allocations, adjacent in the
 *   0x101000  C2  one page  /  registered address space
 *   0x200000  R   one page, SCIF_PROT_READ only
 *   0x300000  S   one page, target of scif_fence_signal values
 *   0x400000  U   one page, unregistered on the peer's request
 *   0x500000  F   one page, source of the RMA done by a fork()ed child
 *   (hint 0)  B   64 KiB carved out of malloc() memory, placed by the library
 * and the two exchange B's offset.  Then the client drives a round of RMA
 * checks while the server serves requests ("fill this range with pattern
 * s", "verify this range", "wait for this signal value", "unregister U"),
 * then the roles swap, then the server runs the fork check and finally the
 * client checks that a scif_mmap() of the server's window outlives the
 * connection.
 *
 * Prints one "ok" line per check and "PASS" at the end; on failure prints
 * where and why and exits non-zero.  alarm(60) guards against hangs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
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

#define SCIF_TEST_PROG "scif_rma"
#include "scif_check.h"

#include "scif_rma_layout.h"

/* ---------------------------------------------------- the active side */

static void round_writeto(void)
{
    static const int flags[] = {0,
                                SCIF_RMA_USECPU,
                                SCIF_RMA_SYNC,
                                SCIF_RMA_ORDERED,
                                SCIF_RMA_USECPU | SCIF_RMA_SYNC,
                                SCIF_RMA_USECPU | SCIF_RMA_ORDERED,
                                SCIF_RMA_SYNC | SCIF_RMA_ORDERED};
    char what[160];
    unsigned i, seed;

    PHASE("writeto");
    for (i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        seed = 100 + i;
        fill_off(OFF_A, WIN_LEN, seed);
        snprintf(what, sizeof what, "scif_writeto 64 KiB A -> peer B, flags %s%s",
                 flagname(flags[i]), flags[i] & SCIF_RMA_SYNC ? "" : " + fence");
        CHECK_EQ(scif_writeto(M, OFF_A, WIN_LEN, peer_b, flags[i]), 0, what);
        if (!(flags[i] & SCIF_RMA_SYNC))
            fence_self();
        rpc(CMD_VERIFY, peer_b, WIN_LEN, seed, 0);
    }

    rpc(CMD_FILL, peer_b, WIN_LEN, SEED_GUARD, 0);
    fill_off(OFF_A + 13, 1000, 120);
    CHECK_EQ(scif_writeto(M, OFF_A + 13, 1000, peer_b + 77, 0), 0,
             "scif_writeto 1000 bytes from offset 13 to peer offset 77");
    fence_self();
    rpc(CMD_VERIFY_GUARD, peer_b + 77, 1000, 120, 0);

    fill_off(OFF_A + 4095, 1, 121);
    CHECK_EQ(scif_writeto(M, OFF_A + 4095, 1, peer_b + 4095, SCIF_RMA_USECPU), 0,
             "scif_writeto of a single byte at the end of a page");
    fence_self();
    rpc(CMD_VERIFY_GUARD, peer_b + 4095, 1, 121, 0);

    rpc(CMD_FILL, peer_b, WIN_LEN, SEED_GUARD, 0);
    fill_off(OFF_A + 4000, 9000, 122);
    CHECK_EQ(scif_writeto(M, OFF_A + 4000, 9000, peer_b + 777, SCIF_RMA_SYNC), 0,
             "scif_writeto 9000 bytes across pages, different misalignments");
    rpc(CMD_VERIFY_GUARD, peer_b + 777, 9000, 122, 0);
}

static void round_readfrom(void)
{
    static const int flags[] = {0, SCIF_RMA_USECPU, SCIF_RMA_SYNC, SCIF_RMA_ORDERED,
                                SCIF_RMA_USECPU | SCIF_RMA_SYNC};
    char what[160];
    unsigned i, seed;

    PHASE("readfrom");
    for (i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        seed = 130 + i;
        rpc(CMD_FILL, peer_b, WIN_LEN, seed, 0);
        fill_off(OFF_A, WIN_LEN, SEED_GUARD);
        snprintf(what, sizeof what, "scif_readfrom 64 KiB peer B -> A, flags %s%s",
                 flagname(flags[i]), flags[i] & SCIF_RMA_SYNC ? "" : " + fence");
        CHECK_EQ(scif_readfrom(M, OFF_A, WIN_LEN, peer_b, flags[i]), 0, what);
        if (!(flags[i] & SCIF_RMA_SYNC))
            fence_self();
        verify_off(OFF_A, WIN_LEN, seed, 0, what);
        ok("data read from the peer is intact");
    }

    rpc(CMD_FILL, peer_b + 13, 1000, 140, 0);
    fill_off(OFF_A, WIN_LEN, SEED_GUARD);
    CHECK_EQ(scif_readfrom(M, OFF_A + 1, 1000, peer_b + 13, 0), 0,
             "scif_readfrom 1000 bytes from peer offset 13 to local offset 1");
    fence_self();
    verify_off(OFF_A + 1, 1000, 140, 1, "unaligned readfrom");
    ok("unaligned readfrom data intact, neighbours untouched");
}

static void round_vrma(void)
{
    static const int wflags[] = {0, SCIF_RMA_USECACHE, SCIF_RMA_USECPU | SCIF_RMA_SYNC,
                                 SCIF_RMA_USECACHE | SCIF_RMA_ORDERED, SCIF_RMA_USECACHE};
    static const int rflags[] = {0, SCIF_RMA_USECACHE, SCIF_RMA_SYNC, SCIF_RMA_USECACHE,
                                 SCIF_RMA_USECPU};
    char what[160];
    uint8_t *h, sb[100];
    unsigned i, seed;

    PHASE("vwriteto/vreadfrom");
    h = (uint8_t *)malloc(70000);
    CHECK_Q(h != NULL, "malloc");
    for (i = 0; i < sizeof wflags / sizeof wflags[0]; i++) {
        seed = 150 + i;
        fill_mem(h + 5, 65000, seed);
        snprintf(what, sizeof what,
                 "scif_vwriteto 65000 bytes of malloc memory -> peer A+3, flags %s",
                 flagname(wflags[i]));
        CHECK_EQ(scif_vwriteto(M, h + 5, 65000, OFF_A + 3, wflags[i]), 0, what);
        if (!(wflags[i] & SCIF_RMA_SYNC))
            fence_self();
        rpc(CMD_VERIFY, OFF_A + 3, 65000, seed, 0);
    }

    rpc(CMD_FILL, peer_b, WIN_LEN, SEED_GUARD, 0);
    fill_mem(sb, sizeof sb, 160);
    CHECK_EQ(scif_vwriteto(M, sb, sizeof sb, peer_b + 1, SCIF_RMA_SYNC), 0,
             "scif_vwriteto of 100 bytes from the stack");
    rpc(CMD_VERIFY_GUARD, peer_b + 1, sizeof sb, 160, 0);

    for (i = 0; i < sizeof rflags / sizeof rflags[0]; i++) {
        seed = 170 + i;
        rpc(CMD_FILL, peer_b, WIN_LEN, seed, 0);
        memset(h, GUARD_BYTE, 70000);
        snprintf(what, sizeof what, "scif_vreadfrom 64 KiB peer B -> malloc memory, flags %s",
                 flagname(rflags[i]));
        CHECK_EQ(scif_vreadfrom(M, h + 7, WIN_LEN, peer_b, rflags[i]), 0, what);
        if (!(rflags[i] & SCIF_RMA_SYNC))
            fence_self();
        verify_mem(h + 7, WIN_LEN, seed, what);
        CHECK(h[6] == GUARD_BYTE && h[7 + WIN_LEN] == GUARD_BYTE,
              "vreadfrom data intact, neighbours untouched");
    }

    rpc(CMD_FILL, peer_b + 13, 1000, 180, 0);
    memset(h, GUARD_BYTE, 70000);
    CHECK_EQ(scif_vreadfrom(M, h + 1, 1000, peer_b + 13, 0), 0,
             "scif_vreadfrom 1000 bytes from peer offset 13");
    fence_self();
    verify_mem(h + 1, 1000, 180, "unaligned vreadfrom");
    ok("unaligned vreadfrom data intact");
    free(h);
}

static void round_fence(void)
{
    int mark;
    const uint64_t lval = 0x1a2b3c4d5e6f7081ULL, rval = 0x8172635445362718ULL;

    PHASE("fence");
    CHECK_ERR(scif_fence_mark(M, 0, &mark), EINVAL, "scif_fence_mark with no INIT flag fails EINVAL");
    CHECK_ERR(scif_fence_mark(M, SCIF_FENCE_INIT_SELF | SCIF_FENCE_INIT_PEER, &mark), EINVAL,
              "scif_fence_mark with both INIT flags fails EINVAL");

    /* Completion flag in local memory (tutorial scif_connect_rma_fence). */
    fill_off(OFF_S, PAGE, SEED_ZERO);
    fill_off(OFF_A, WIN_LEN, 200);
    CHECK_EQ(scif_writeto(M, OFF_A, WIN_LEN, peer_b, 0), 0, "scif_writeto before a local signal");
    CHECK_EQ(scif_fence_signal(M, OFF_S, lval, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL), 0,
             "scif_fence_signal(INIT_SELF | SIGNAL_LOCAL)");
    CHECK(wait_u64(OFF_S, lval, 10000), "lval appears in my own registered memory");
    rpc(CMD_VERIFY, peer_b, WIN_LEN, 200, 0);

    /* Doorbell: the peer spins on its memory until rval arrives. */
    rpc(CMD_FILL, OFF_S, PAGE, SEED_ZERO, 0);
    fill_off(OFF_A, WIN_LEN, 201);
    send_cmd(M, CMD_WAIT_SIGNAL, OFF_S + 8, 0, 0, rval);
    msleep(20);
    CHECK_EQ(scif_writeto(M, OFF_A, WIN_LEN, peer_b, 0), 0, "scif_writeto before a remote signal");
    CHECK_EQ(scif_fence_signal(M, 0, 0, OFF_S + 8, rval, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_REMOTE),
             0, "scif_fence_signal(INIT_SELF | SIGNAL_REMOTE)");
    expect_cmd(M, CMD_ACK);
    ok("the peer saw rval (doorbell)");
    rpc(CMD_VERIFY, peer_b, WIN_LEN, 201, 0);

    /* Both at once, at offsets that are 4- but not 8-byte aligned. */
    rpc(CMD_FILL, OFF_S, PAGE, SEED_ZERO, 0);
    fill_off(OFF_S, PAGE, SEED_ZERO);
    fill_off(OFF_A, WIN_LEN, 202);
    send_cmd(M, CMD_WAIT_SIGNAL, OFF_S + 44, 0, 0, rval + 1);
    CHECK_EQ(scif_vwriteto(M, at(OFF_A), WIN_LEN, peer_b, 0), 0, "scif_vwriteto before a double signal");
    CHECK_EQ(scif_fence_signal(M, OFF_S + 36, lval + 1, OFF_S + 44, rval + 1,
                               SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL | SCIF_SIGNAL_REMOTE),
             0, "scif_fence_signal(LOCAL | REMOTE) at DWORD- (not QWORD-) aligned offsets");
    CHECK(wait_u64(OFF_S + 36, lval + 1, 10000), "lval appears at local offset S+36");
    expect_cmd(M, CMD_ACK);
    ok("the peer saw rval at its offset S+44");
    rpc(CMD_VERIFY, peer_b, WIN_LEN, 202, 0);

    /* Marking the peer's RMAs (none outstanding) still writes the value. */
    CHECK_EQ(scif_fence_signal(M, OFF_S + 64, lval + 2, 0, 0,
                               SCIF_FENCE_INIT_PEER | SCIF_SIGNAL_LOCAL),
             0, "scif_fence_signal(INIT_PEER | SIGNAL_LOCAL)");
    CHECK(wait_u64(OFF_S + 64, lval + 2, 10000), "INIT_PEER local signal value appears");

    CHECK_ERR(scif_fence_signal(M, OFF_S + 2, 1, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL),
              EINVAL, "local signal offset not 4-byte aligned fails EINVAL");
    CHECK_ERR(scif_fence_signal(M, 0, 0, OFF_S + 6, 1, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_REMOTE),
              EINVAL, "remote signal offset not 4-byte aligned fails EINVAL");
    CHECK_ERR(scif_fence_signal(M, hole, 1, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL),
              ENXIO, "local signal offset in no window fails ENXIO");
    CHECK_ERR(scif_fence_signal(M, 0, 0, hole, 1, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_REMOTE),
              ENXIO, "remote signal offset in no window fails ENXIO");
    CHECK_ERR(scif_fence_signal(M, OFF_S, 1, 0, 0, SCIF_FENCE_INIT_SELF), EINVAL,
              "scif_fence_signal without SIGNAL_LOCAL/REMOTE fails EINVAL");
    CHECK_ERR(scif_fence_signal(M, OFF_S, 1, 0, 0,
                                SCIF_FENCE_INIT_SELF | SCIF_FENCE_INIT_PEER | SCIF_SIGNAL_LOCAL),
              EINVAL, "scif_fence_signal with both INIT flags fails EINVAL");
}

static void round_span(void)
{
    uint8_t h[2 * PAGE];

    PHASE("span");
    fill_off(OFF_A, 2 * PAGE, 210);
    CHECK_EQ(scif_writeto(M, OFF_A, 2 * PAGE, OFF_C1, 0), 0,
             "scif_writeto 8 KiB across the peer's adjacent windows C1+C2");
    fence_self();
    rpc(CMD_VERIFY, OFF_C1, 2 * PAGE, 210, 0);

    fill_off(OFF_A, WIN_LEN, SEED_GUARD);
    CHECK_EQ(scif_readfrom(M, OFF_A, 2 * PAGE, OFF_C1, SCIF_RMA_SYNC), 0,
             "scif_readfrom 8 KiB across the peer's C1+C2");
    verify_off(OFF_A, 2 * PAGE, 210, 1, "readfrom across windows");
    memset(h, 0, sizeof h);
    CHECK_EQ(scif_vreadfrom(M, h, sizeof h, OFF_C1, 0), 0,
             "scif_vreadfrom 8 KiB across the peer's C1+C2");
    fence_self();
    verify_mem(h, sizeof h, 210, "vreadfrom across windows");
    ok("data read across two windows is intact");

    fill_off(OFF_C1, 2 * PAGE, 211);
    CHECK_EQ(scif_writeto(M, OFF_C1, 2 * PAGE, peer_b, SCIF_RMA_SYNC), 0,
             "scif_writeto from my own adjacent windows C1+C2");
    rpc(CMD_VERIFY, peer_b, 2 * PAGE, 211, 0);

    rpc(CMD_FILL, OFF_C1, 2 * PAGE, SEED_GUARD, 0);
    fill_off(OFF_A + 100, 5000, 212);
    CHECK_EQ(scif_writeto(M, OFF_A + 100, 5000, OFF_C1 + 2000, 0), 0,
             "unaligned scif_writeto crossing the C1/C2 boundary");
    fence_self();
    rpc(CMD_VERIFY_GUARD, OFF_C1 + 2000, 5000, 212, 0);

    CHECK_ERR(scif_writeto(M, OFF_A, PAGE, gap_end - PAGE / 2, 0), ENXIO,
              "scif_writeto running past the end of the peer's windows fails ENXIO");
    CHECK_ERR(scif_readfrom(M, OFF_A, PAGE, gap_end - PAGE / 2, 0), ENXIO,
              "scif_readfrom running past the end of the peer's windows fails ENXIO");
}

static void round_mmap(void)
{
    uint8_t *p, *q, *q2, *ro, *fx;
    void *res;

    PHASE("mmap");
    p = (uint8_t *)scif_mmap(NULL, WIN_LEN, RW, 0, M, peer_b);
    CHECK(p != SCIF_MMAP_FAILED, "scif_mmap of the peer's B window");
    CHECK((uintptr_t)p % PAGE == 0, "scif_mmap returns a page-aligned address");
    rpc(CMD_FILL, peer_b, WIN_LEN, 220, 0);
    verify_mem(p, WIN_LEN, 220, "peer's stores seen through scif_mmap");
    ok("the peer's stores are visible through the mapping");
    fill_mem(p, WIN_LEN, 221);
    rpc(CMD_VERIFY, peer_b, WIN_LEN, 221, 0);
    ok("stores through the mapping are visible to the peer");

    q = (uint8_t *)scif_mmap(NULL, 2 * PAGE, RW, 0, M, OFF_C1);
    CHECK(q != SCIF_MMAP_FAILED, "scif_mmap of 8 KiB across the peer's C1+C2");
    fill_mem(q, 2 * PAGE, 222);
    rpc(CMD_VERIFY, OFF_C1, 2 * PAGE, 222, 0);

    ro = (uint8_t *)scif_mmap(NULL, PAGE, SCIF_PROT_READ, 0, M, OFF_R);
    CHECK(ro != SCIF_MMAP_FAILED, "read-only scif_mmap of the peer's read-only window");
    verify_mem(ro, PAGE, RSEED, "read-only window contents");
    ok("read-only mapping shows the window's contents");
    CHECK_ERR_PTR(scif_mmap(NULL, PAGE, RW, 0, M, OFF_R), EACCES,
                  "writable scif_mmap of a read-only window fails EACCES");
    CHECK_ERR_PTR(scif_mmap(NULL, PAGE, RW, 0, M, hole), ENXIO,
                  "scif_mmap of a range with no window fails ENXIO (SCIF_MMAP_FAILED)");
    CHECK_ERR_PTR(scif_mmap(NULL, 2 * PAGE, RW, 0, M, gap_end - PAGE), ENXIO,
                  "scif_mmap running past the end of the windows fails ENXIO");
    CHECK_ERR_PTR(scif_mmap(NULL, PAGE, RW, 0, M, peer_b + 1), EINVAL,
                  "scif_mmap of an unaligned offset fails EINVAL");
    CHECK_ERR_PTR(scif_mmap(NULL, 100, RW, 0, M, peer_b), EINVAL,
                  "scif_mmap of a length that is not a page multiple fails EINVAL");

    if (!far) {
        res = mmap(NULL, 2 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK_Q(res != MAP_FAILED, "mmap reserve");
        fx = (uint8_t *)res + PAGE;
        CHECK(scif_mmap(fx, PAGE, RW, SCIF_MAP_FIXED, M, peer_b) == (void *)fx,
              "scif_mmap with SCIF_MAP_FIXED maps exactly at addr");
        verify_mem(fx, PAGE, 221, "SCIF_MAP_FIXED mapping contents");
        ok("SCIF_MAP_FIXED mapping shows the peer's window");
        CHECK_EQ(scif_munmap(fx, PAGE), 0, "scif_munmap of the fixed mapping");
        CHECK_EQ(munmap(res, PAGE), 0, "munmap of the reserve");
    }

    /* RMA whose local memory is a fresh mapping of the peer's windows (across hosts its
     * pages are not fetched yet: the library must not hand them to the kernel's socket
     * copy, which cannot fault them in). */
    rpc(CMD_FILL, OFF_C1, 2 * PAGE, 223, 0);
    fx = (uint8_t *)scif_mmap(NULL, 2 * PAGE, RW, 0, M, OFF_C1);
    CHECK(fx != SCIF_MMAP_FAILED, "a second scif_mmap of C1+C2");
    CHECK_EQ(scif_vwriteto(M, fx, 2 * PAGE, peer_b, SCIF_RMA_SYNC), 0,
             "scif_vwriteto from a scif_mmap of the peer's windows");
    rpc(CMD_VERIFY, peer_b, 2 * PAGE, 223, 0);
    CHECK_EQ(scif_munmap(fx, 2 * PAGE), 0, "scif_munmap of the second C1+C2 mapping");
    rpc(CMD_FILL, peer_b, 2 * PAGE, 224, 0);
    fx = (uint8_t *)scif_mmap(NULL, 2 * PAGE, RW, 0, M, OFF_C1);
    CHECK(fx != SCIF_MMAP_FAILED, "a third scif_mmap of C1+C2");
    CHECK_EQ(scif_vreadfrom(M, fx, 2 * PAGE, peer_b, 0), 0,
             "scif_vreadfrom into a scif_mmap of the peer's windows");
    verify_mem(fx, 2 * PAGE, 224, "scif_vreadfrom into a mapping of the peer's windows");
    CHECK_EQ(scif_munmap(fx, 2 * PAGE), 0, "scif_munmap of the third C1+C2 mapping");
    ok("scif_vwriteto from and scif_vreadfrom into a mapping of the peer's windows");

    /* Messages from and into fresh mappings of the peer's windows: the peer stages a
     * request in its C1, which we send from a mapping of it; its answer lands in a
     * mapping of B's second page. */
    rpc(CMD_STAGE, OFF_C1, PAGE, 225, (uint64_t)peer_b);
    fx = (uint8_t *)scif_mmap(NULL, 2 * PAGE, RW, 0, M, OFF_C1);
    CHECK(fx != SCIF_MMAP_FAILED, "a fourth scif_mmap of C1+C2");
    q2 = (uint8_t *)scif_mmap(NULL, PAGE, RW, 0, M, peer_b + PAGE);
    CHECK(q2 != SCIF_MMAP_FAILED, "a scif_mmap of B's second page");
    send_all(M, fx, (int)sizeof(struct cmd));
    recv_all(M, q2, (int)sizeof(struct cmd));
    CHECK(((const struct cmd *)q2)->tag == CMD_ACK,
          "the peer's answer arrived in a mapping of its window");
    CHECK_EQ(scif_munmap(q2, PAGE), 0, "scif_munmap of B's second page");
    CHECK_EQ(scif_munmap(fx, 2 * PAGE), 0, "scif_munmap of the fourth C1+C2 mapping");
    rpc(CMD_VERIFY, peer_b, PAGE, 225, 0);
    ok("scif_send from and scif_recv into mappings of the peer's windows");

    CHECK_EQ(scif_munmap(p, WIN_LEN), 0, "scif_munmap of the B mapping");
    CHECK_EQ(scif_munmap(q, 2 * PAGE), 0, "scif_munmap of the C1+C2 mapping");
    CHECK_EQ(scif_munmap(ro, PAGE), 0, "scif_munmap of the read-only mapping");
    CHECK_ERR(scif_munmap((void *)(uintptr_t)1, PAGE), EINVAL,
              "scif_munmap of an unaligned address fails EINVAL");
}

static void round_errors(void)
{
    uint8_t h[PAGE];

    PHASE("rma errors");
    CHECK_ERR(scif_writeto(M, OFF_A, 100, hole, 0), ENXIO,
              "scif_writeto to a remote offset in no window fails ENXIO");
    CHECK_ERR(scif_readfrom(M, OFF_A, 100, hole, 0), ENXIO,
              "scif_readfrom from a remote offset in no window fails ENXIO");
    CHECK_ERR(scif_writeto(M, hole, 100, peer_b, 0), ENXIO,
              "scif_writeto from a local offset in no window fails ENXIO");
    CHECK_ERR(scif_readfrom(M, hole, 100, peer_b, 0), ENXIO,
              "scif_readfrom to a local offset in no window fails ENXIO");
    CHECK_ERR(scif_vwriteto(M, h, 100, hole, 0), ENXIO,
              "scif_vwriteto to a remote offset in no window fails ENXIO");
    CHECK_ERR(scif_vreadfrom(M, h, 100, hole, 0), ENXIO,
              "scif_vreadfrom from a remote offset in no window fails ENXIO");
    CHECK_ERR(scif_writeto(M, OFF_A, 100, (off_t)-PAGE, 0), ENXIO,
              "scif_writeto to a negative remote offset fails ENXIO");
    CHECK_ERR(scif_readfrom(M, (off_t)-PAGE, 100, peer_b, 0), ENXIO,
              "scif_readfrom to a negative local offset fails ENXIO");
    CHECK_ERR(scif_writeto(M, OFF_A, 100, peer_b, 0x100), EINVAL,
              "scif_writeto with unknown rma_flags fails EINVAL");
    CHECK_ERR(scif_vreadfrom(M, h, 100, peer_b, 0x100), EINVAL,
              "scif_vreadfrom with unknown rma_flags fails EINVAL");

    /* The man pages spell it EACCESS; the errno constant is EACCES. */
    CHECK_ERR(scif_writeto(M, OFF_A, 100, OFF_R, 0), EACCES,
              "scif_writeto into the peer's read-only window fails EACCES");
    CHECK_ERR(scif_vwriteto(M, h, 100, OFF_R, 0), EACCES,
              "scif_vwriteto into the peer's read-only window fails EACCES");
    CHECK_ERR(scif_readfrom(M, OFF_R, 100, peer_b, 0), EACCES,
              "scif_readfrom into my own read-only window fails EACCES");
    fill_off(OFF_A, WIN_LEN, SEED_GUARD);
    CHECK_EQ(scif_readfrom(M, OFF_A, PAGE, OFF_R, SCIF_RMA_SYNC), 0,
             "scif_readfrom from the peer's read-only window is allowed");
    verify_off(OFF_A, PAGE, RSEED, 0, "readfrom of a read-only window");
    CHECK_EQ(scif_writeto(M, OFF_R, PAGE, peer_b, SCIF_RMA_SYNC), 0,
             "scif_writeto from my own read-only window is allowed");
    rpc(CMD_VERIFY, peer_b, PAGE, RSEED, 0);

    fill_off(OFF_A, PAGE, 230);
    CHECK_EQ(scif_writeto(M, OFF_A, PAGE, OFF_U, SCIF_RMA_SYNC), 0,
             "scif_writeto into the peer's U before it is unregistered");
    rpc(CMD_VERIFY, OFF_U, PAGE, 230, 0);
    rpc(CMD_UNREG, OFF_U, PAGE, 0, 0);
    CHECK_ERR(scif_writeto(M, OFF_A, PAGE, OFF_U, SCIF_RMA_SYNC), ENXIO,
              "scif_writeto into an unregistered window fails ENXIO");
    CHECK_ERR(scif_readfrom(M, OFF_A, PAGE, OFF_U, SCIF_RMA_SYNC), ENXIO,
              "scif_readfrom from an unregistered window fails ENXIO");
    CHECK_ERR(scif_vwriteto(M, h, 100, OFF_U, 0), ENXIO,
              "scif_vwriteto into an unregistered window fails ENXIO");
    CHECK_ERR_PTR(scif_mmap(NULL, PAGE, RW, 0, M, OFF_U), ENXIO,
                  "scif_mmap of an unregistered window fails ENXIO");
    rpc(CMD_REREG, OFF_U, PAGE, 0, 0);
    fill_off(OFF_A, PAGE, 231);
    CHECK_EQ(scif_writeto(M, OFF_A, PAGE, OFF_U, SCIF_RMA_SYNC), 0,
             "scif_writeto into the re-registered window works");
    rpc(CMD_VERIFY, OFF_U, PAGE, 231, 0);
}

static void initiate(void)
{
    round_writeto();
    round_readfrom();
    round_vrma();
    round_fence();
    round_span();
    round_mmap();
    round_errors();
    rpc(CMD_END, 0, 0, 0, 0);
}

/* ------------------------------------------------------- common start */

static void hello(uint16_t expect_node)
{
    struct cmd c;
    uint16_t self = my_node();

    send_cmd(M, MSG_HELLO, win[W_B].off, 0, self, 0);
    c = expect_cmd(M, MSG_HELLO);
    CHECK_EQ(c.seed, expect_node, "the peer reports the expected node id");
    peer_b = (off_t)c.off;
    CHECK(peer_b >= 0 && peer_b % PAGE == 0, "received the peer's B offset");
    pick_offsets();
}

/* ---------------------------------------------------------------- server */

static int run_server(uint16_t port)
{
    scif_epd_t lep, m2;
    struct scif_portID peer;
    struct cmd c;
    pid_t pid;
    int st = 0;

    PHASE("connect");
    lep = scif_open();
    CHECK(lep != SCIF_OPEN_FAILED, "scif_open");
    CHECK_EQ(scif_bind(lep, port), port, "scif_bind(PORT)");
    CHECK_EQ(scif_listen(lep, 4), 0, "scif_listen");
    CHECK_EQ(scif_accept(lep, &peer, &M, SCIF_ACCEPT_SYNC), 0, "scif_accept(SCIF_ACCEPT_SYNC)");
    setup_windows();
    hello(peer.node);

    PHASE("round 1 (client drives)");
    serve();
    PHASE("round 2 (server drives)");
    initiate();

    PHASE("fork");
    fill_off(OFF_F, PAGE, FSEED);
    rpc(CMD_FILL, peer_b, 2 * PAGE, SEED_GUARD, 0);
    fflush(NULL);
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        int mark = -1;
        alarm(20);
        role = "server-child";
        errno = 0;
        if (scif_writeto(M, OFF_F, PAGE, peer_b, SCIF_RMA_SYNC) != 0) {
            fprintf(stderr, "%s child: FAIL: scif_writeto on the inherited endpoint: %s (%s)\n",
                    prog, errname(errno), strerror(errno));
            _exit(10);
        }
        if (scif_writeto(M, OFF_F, 100, peer_b + PAGE, 0) != 0 ||
            scif_fence_mark(M, SCIF_FENCE_INIT_SELF, &mark) != 0 || scif_fence_wait(M, mark) != 0) {
            fprintf(stderr, "%s child: FAIL: writeto + fence on the inherited endpoint: %s (%s)\n",
                    prog, errname(errno), strerror(errno));
            _exit(11);
        }
        _exit(0);
    }
    CHECK_EQ(waitpid(pid, &st, 0), pid, "waitpid for the child");
    CHECK(WIFEXITED(st), "the child exited normally");
    CHECK_EQ(WEXITSTATUS(st), 0, "the child's RMAs through the inherited endpoint succeeded");
    rpc(CMD_VERIFY, peer_b, PAGE, FSEED, 0);
    rpc(CMD_VERIFY, peer_b + PAGE, 100, FSEED, 0);
    ok("the child's writes reached the peer; the parent still uses the endpoint");
    rpc(CMD_END, 0, 0, 0, 0);

    PHASE("lifetime");
    fill_off(win[W_B].off, WIN_LEN, LSEED);
    send_cmd(M, MSG_LIFE_READY, 0, 0, 0, 0);
    CHECK_EQ(scif_accept(lep, &peer, &m2, SCIF_ACCEPT_SYNC), 0, "accept a second connection");
    c = expect_cmd(M, MSG_CLOSE_M);
    (void)c;
    CHECK_EQ(scif_close(M), 0, "scif_close of the connection whose window the client mapped");
    send_cmd(m2, MSG_CLOSED, 0, 0, 0, 0);
    expect_cmd(m2, MSG_EXIT);
    CHECK_EQ(scif_close(m2), 0, "scif_close of the second connection");
    CHECK_EQ(scif_close(lep), 0, "scif_close of the listener");
    printf("%s %s: %d checks\nPASS\n", prog, role, nchecks);
    return 0;
}

/* ---------------------------------------------------------------- client */

static int run_client(uint16_t node, uint16_t port)
{
    scif_epd_t m2;
    int lport, rc;
    uint8_t *p, tmp[64];
    struct scif_pollepd sp;
    double t0;

    PHASE("connect");
    M = connect_retry(node, port, &lport);
    ok("scif_connect to the server (retrying while refused)");
    setup_windows();
    hello(node);

    PHASE("round 1 (client drives)");
    initiate();
    PHASE("round 2 (server drives)");
    serve();
    PHASE("fork (server drives)");
    serve();

    PHASE("lifetime");
    expect_cmd(M, MSG_LIFE_READY);
    p = NULL;
    if (!far) {
        p = (uint8_t *)scif_mmap(NULL, WIN_LEN, RW, 0, M, peer_b);
        CHECK(p != SCIF_MMAP_FAILED, "scif_mmap of the server's B");
        verify_mem(p, WIN_LEN, LSEED, "server's B through the mapping");
        ok("mapping shows the server's data");
    }
    m2 = connect_retry(node, port, &lport);
    ok("second connection to the server");
    send_cmd(M, MSG_CLOSE_M, 0, 0, 0, 0);
    expect_cmd(m2, MSG_CLOSED);
    t0 = now_ms();
    do {
        sp.epd = M;
        sp.events = SCIF_POLLIN;
        sp.revents = 0;
        rc = scif_poll(&sp, 1, 100);
        CHECK_Q(rc >= 0, "scif_poll");
    } while (!(sp.revents & SCIF_POLLHUP) && now_ms() - t0 < 10000.0);
    CHECK(sp.revents & SCIF_POLLHUP, "the connection reports SCIF_POLLHUP after the server closed it");
    if (!far) {
        verify_mem(p, WIN_LEN, LSEED, "mapping after the peer's scif_close");
        ok("the mapping is still readable, data intact, after the peer closed");
    }
    CHECK_ERR(scif_writeto(M, OFF_A, 100, peer_b, 0), ECONNRESET,
              "scif_writeto on the closed connection fails ECONNRESET");
    CHECK_ERR(scif_recv(M, tmp, (int)sizeof tmp, 0), ECONNRESET,
              "scif_recv on the closed connection fails ECONNRESET");
    send_cmd(m2, MSG_EXIT, 0, 0, 0, 0);
    t0 = now_ms();
    do {
        sp.epd = m2;
        sp.events = SCIF_POLLIN;
        sp.revents = 0;
        rc = scif_poll(&sp, 1, 100);
        CHECK_Q(rc >= 0, "scif_poll");
    } while (!(sp.revents & SCIF_POLLHUP) && now_ms() - t0 < 10000.0);
    CHECK(sp.revents & SCIF_POLLHUP, "the server closed its last connection");
    if (!far) {
        verify_mem(p, WIN_LEN, LSEED, "mapping after the server finished");
        ok("the mapping is still intact after the server let go of everything");
        CHECK_EQ(scif_munmap(p, WIN_LEN), 0, "scif_munmap of the outliving mapping");
    }
    CHECK_EQ(scif_close(M), 0, "scif_close of the reset connection");
    CHECK_EQ(scif_close(m2), 0, "scif_close of the second connection");
    printf("%s %s: %d checks\nPASS\n", prog, role, nchecks);
    return 0;
}

int main(int argc, char **argv)
{
    far = getenv("SCIF_TEST_FAR") != NULL && strcmp(getenv("SCIF_TEST_FAR"), "1") == 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    if (argc == 3 && strcmp(argv[1], "server") == 0) {
        role = "server";
        return run_server((uint16_t)parse_u16(argv[2], "port"));
    }
    if (argc == 4 && strcmp(argv[1], "client") == 0) {
        role = "client";
        return run_client((uint16_t)parse_u16(argv[2], "node"),
                          (uint16_t)parse_u16(argv[3], "port"));
    }
    fprintf(stderr, "usage: %s server PORT | %s client NODE PORT\n", prog, prog);
    return 2;
}
