/*
 * scif_rma_layout.h - the fixed layout of windows scif_rma registers on both sides, the
 * patterns it fills them with, and the request protocol by which one side asks the other
 * to fill, verify, wait or unregister. Included once by scif_rma.c, after scif_check.h;
 * kept apart so that each file reads as one part of the test.
 */
#ifndef SCIF_RMA_LAYOUT_H
#define SCIF_RMA_LAYOUT_H

/* SCIF_TEST_FAR=1: the peer is on another host. Messages, RMA and maps work as on one
 * host; a map of the peer's window is Remora's software DSM there, which cannot be placed
 * with SCIF_MAP_FIXED and ends with the connection, so those checks are left out. */
static int far;



static void msleep_us(long us)
{
    struct timespec ts;
    ts.tv_sec = us / 1000000L;
    ts.tv_nsec = (us % 1000000L) * 1000L;
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------ the windows */

#define PAGE 4096
#define WIN_LEN (64 * 1024)
#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)

#define OFF_A ((off_t)0x80000)
#define OFF_C1 ((off_t)0x100000)
#define OFF_C2 ((off_t)0x101000)
#define OFF_R ((off_t)0x200000)
#define OFF_S ((off_t)0x300000)
#define OFF_U ((off_t)0x400000)
#define OFF_F ((off_t)0x500000)

#define SEED_GUARD 0xffffffffu /* fill with GUARD_BYTE */
#define SEED_ZERO 0xfffffffeu  /* fill with zeros */
#define GUARD_BYTE 0xee
#define RSEED 77u /* what R holds, on both sides */
#define FSEED 91u /* what F holds, on both sides */
#define LSEED 93u /* what the server's B holds for the lifetime check */

struct win {
    off_t off;
    size_t len;
    uint8_t *addr;
    int prot;
};

enum { W_A, W_C1, W_C2, W_R, W_S, W_U, W_F, W_B, NWIN };
static struct win win[NWIN];

static scif_epd_t M = -1;  /* the main connection */
static off_t peer_b = -1;  /* offset of the peer's B window */
static off_t hole = -1;    /* an offset in no window on either side */
static off_t gap_end = -1; /* end of a peer RW window that no window follows */

static uint8_t pat(unsigned seed, size_t i)
{
    return (uint8_t)((i * 131u) ^ (i >> 9) ^ (seed * 77u + 5u));
}

static uint8_t want_byte(unsigned seed, size_t i)
{
    if (seed == SEED_GUARD)
        return GUARD_BYTE;
    if (seed == SEED_ZERO)
        return 0;
    return pat(seed, i);
}

static int local_has(off_t off)
{
    int i;
    for (i = 0; i < NWIN; i++)
        if (win[i].addr && off >= win[i].off && off < win[i].off + (off_t)win[i].len)
            return 1;
    return 0;
}

/* The peer registers the same fixed layout, plus its B at peer_b. */
static int peer_has(off_t off)
{
    int i;
    for (i = 0; i < NWIN; i++) {
        off_t start = i == W_B ? peer_b : win[i].off;
        if (win[i].addr && off >= start && off < start + (off_t)win[i].len)
            return 1;
    }
    return 0;
}

/* Local address of registered offset off (ranges may cross C1/C2). */
static uint8_t *at(off_t off)
{
    int i;
    for (i = 0; i < NWIN; i++)
        if (win[i].addr && off >= win[i].off && off < win[i].off + (off_t)win[i].len)
            return win[i].addr + (off - win[i].off);
    FAIL("test bug: offset 0x%llx lies in no local window", (long long)off);
}

static void fill_mem(uint8_t *p, size_t len, unsigned seed)
{
    size_t k;
    for (k = 0; k < len; k++)
        p[k] = want_byte(seed, k);
}

static void fill_off(off_t off, size_t len, unsigned seed)
{
    size_t k;
    for (k = 0; k < len; k++)
        *at(off + (off_t)k) = want_byte(seed, k);
}

static void verify_mem(const uint8_t *p, size_t len, unsigned seed, const char *what)
{
    size_t k;
    for (k = 0; k < len; k++)
        if (p[k] != want_byte(seed, k))
            FAIL("%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, k, len,
                 p[k], want_byte(seed, k));
}

/* Check [off, off+len) holds pattern seed; with guard, also that the bytes
 * just outside it still hold the guard byte. */
static void verify_off(off_t off, size_t len, unsigned seed, int guard, const char *what)
{
    size_t k;
    for (k = 0; k < len; k++) {
        uint8_t got = *at(off + (off_t)k);
        if (got != want_byte(seed, k))
            FAIL("%s: byte %zu of %zu (offset 0x%llx) is 0x%02x, expected 0x%02x",
                 what, k, len, (long long)(off + (off_t)k), got, want_byte(seed, k));
    }
    if (guard && local_has(off - 1) && *at(off - 1) != GUARD_BYTE)
        FAIL("%s: byte before the range was overwritten (0x%02x)", what, *at(off - 1));
    if (guard && local_has(off + (off_t)len) && *at(off + (off_t)len) != GUARD_BYTE)
        FAIL("%s: byte after the range was overwritten (0x%02x)", what,
             *at(off + (off_t)len));
}

/* Wait until the 64-bit word at registered offset off equals val. */
static int wait_u64(off_t off, uint64_t val, int ms)
{
    double t0 = now_ms();
    uint64_t v;
    for (;;) {
        __sync_synchronize();
        memcpy(&v, at(off), sizeof v);
        if (v == val)
            return 1;
        if (now_ms() - t0 > ms)
            return 0;
        msleep_us(50);
    }
}

static const char *flagname(int f)
{
    static char buf[8][64];
    static int next;
    char *b = buf[next++ % 8];
    b[0] = '\0';
    if (f == 0)
        strcpy(b, "0");
    if (f & SCIF_RMA_USECPU)
        strcat(b, "|USECPU");
    if (f & SCIF_RMA_USECACHE)
        strcat(b, "|USECACHE");
    if (f & SCIF_RMA_SYNC)
        strcat(b, "|SYNC");
    if (f & SCIF_RMA_ORDERED)
        strcat(b, "|ORDERED");
    return b[0] == '|' ? b + 1 : b;
}

static void fence_self(void)
{
    int mark = -1;
    CHECK_EQ_Q(scif_fence_mark(M, SCIF_FENCE_INIT_SELF, &mark), 0,
               "scif_fence_mark(SCIF_FENCE_INIT_SELF)");
    CHECK_EQ_Q(scif_fence_wait(M, mark), 0, "scif_fence_wait on a SELF mark");
}

static void fence_peer(void)
{
    int mark = -1;
    CHECK_EQ_Q(scif_fence_mark(M, SCIF_FENCE_INIT_PEER, &mark), 0,
               "scif_fence_mark(SCIF_FENCE_INIT_PEER)");
    CHECK_EQ_Q(scif_fence_wait(M, mark), 0, "scif_fence_wait on a PEER mark");
}

/* ---------------------------------------------------------- the protocol */

struct cmd {
    uint32_t tag;
    uint32_t seed;
    int64_t off;
    uint64_t len;
    uint64_t val;
};

enum {
    CMD_FILL = 0x434d0001, /* fill [off, off+len) with pattern seed */
    CMD_VERIFY,            /* fence INIT_PEER, then check the pattern */
    CMD_VERIFY_GUARD,      /* same, and check the guard bytes around it */
    CMD_WAIT_SIGNAL,       /* spin until the u64 at off equals val */
    CMD_UNREG,             /* scif_unregister(off, len) */
    CMD_REREG,             /* register U again at off (SCIF_MAP_FIXED) */
    CMD_STAGE,             /* write at off a CMD_FILL of [val, val+len) with seed */
    CMD_END,               /* end of this round */
    CMD_ACK,
    MSG_HELLO,
    MSG_LIFE_READY,
    MSG_CLOSE_M,
    MSG_CLOSED,
    MSG_EXIT
};

static void send_cmd(scif_epd_t epd, uint32_t tag, off_t off, uint64_t len,
                     unsigned seed, uint64_t val)
{
    struct cmd c;
    memset(&c, 0, sizeof c);
    c.tag = tag;
    c.seed = seed;
    c.off = (int64_t)off;
    c.len = len;
    c.val = val;
    send_all(epd, &c, (int)sizeof c);
}

static struct cmd recv_cmd(scif_epd_t epd)
{
    struct cmd c;
    memset(&c, 0, sizeof c);
    /* An ECONNRESET here usually means the peer failed a check: see its output. */
    recv_all(epd, &c, (int)sizeof c);
    return c;
}

static struct cmd expect_cmd(scif_epd_t epd, uint32_t tag)
{
    struct cmd c = recv_cmd(epd);
    CHECK_EQ_Q(c.tag, tag, "the peer sent the expected message");
    return c;
}

/* Ask the peer to do something and wait until it has. */
static void rpc(uint32_t tag, off_t off, uint64_t len, unsigned seed, uint64_t val)
{
    send_cmd(M, tag, off, len, seed, val);
    expect_cmd(M, CMD_ACK);
}

/* The passive side of a round: carry out the peer's requests. */
static void serve(void)
{
    char what[160];
    for (;;) {
        struct cmd c = recv_cmd(M);
        switch (c.tag) {
        case CMD_FILL:
            fill_off((off_t)c.off, c.len, c.seed);
            break;
        case CMD_VERIFY:
        case CMD_VERIFY_GUARD:
            fence_peer();
            snprintf(what, sizeof what, "peer's RMA/store landed in my window at 0x%llx, %llu bytes%s",
                     (long long)c.off, (unsigned long long)c.len,
                     c.tag == CMD_VERIFY_GUARD ? " (and not beyond)" : "");
            verify_off((off_t)c.off, c.len, c.seed, c.tag == CMD_VERIFY_GUARD, what);
            ok(what);
            break;
        case CMD_WAIT_SIGNAL:
            snprintf(what, sizeof what,
                     "SIGNAL_REMOTE value 0x%llx appeared at my offset 0x%llx",
                     (unsigned long long)c.val, (long long)c.off);
            CHECK(wait_u64((off_t)c.off, c.val, 10000), what);
            break;
        case CMD_UNREG:
            CHECK_EQ(scif_unregister(M, (off_t)c.off, c.len), 0,
                     "scif_unregister of my window U (peer's request)");
            break;
        case CMD_REREG:
            CHECK_EQ(scif_register(M, win[W_U].addr, PAGE, (off_t)c.off, RW, SCIF_MAP_FIXED),
                     (off_t)c.off, "re-register U at its old offset after unregister");
            break;
        case CMD_STAGE: {
            struct cmd staged;
            size_t k;
            memset(&staged, 0, sizeof staged);
            staged.tag = CMD_FILL;
            staged.seed = c.seed;
            staged.off = (int64_t)c.val;
            staged.len = c.len;
            for (k = 0; k < sizeof staged; k++)
                *at((off_t)c.off + (off_t)k) = ((const uint8_t *)&staged)[k];
            break;
        }
        case CMD_END:
            send_cmd(M, CMD_ACK, 0, 0, 0, 0);
            return;
        default:
            FAIL("unexpected request 0x%x from the peer", (unsigned)c.tag);
        }
        send_cmd(M, CMD_ACK, 0, 0, 0, 0);
    }
}

/* ------------------------------------------------------------ set-up */

static uint8_t *page_alloc(size_t len)
{
    void *p = NULL;
    CHECK_EQ_Q(posix_memalign(&p, PAGE, len), 0, "posix_memalign");
    memset(p, 0, len);
    return (uint8_t *)p;
}

static int overlaps_window(off_t off, size_t len, int skip)
{
    int i;
    for (i = 0; i < NWIN; i++)
        if (i != skip && win[i].addr && off < win[i].off + (off_t)win[i].len &&
            win[i].off < off + (off_t)len)
            return 1;
    return 0;
}

static void add_fixed(int w, off_t off, size_t len, int prot, const char *what)
{
    win[w].off = off;
    win[w].len = len;
    win[w].prot = prot;
    if (!win[w].addr)
        win[w].addr = page_alloc(len);
    if (w == W_R)
        fill_mem(win[w].addr, len, RSEED);
    if (w == W_F)
        fill_mem(win[w].addr, len, FSEED);
    CHECK_EQ(scif_register(M, win[w].addr, len, off, prot, SCIF_MAP_FIXED), off, what);
}

static void setup_windows(void)
{
    uint8_t *raw, *b, *spare;
    off_t x, local_hole = -1, c;

    PHASE("register");
    add_fixed(W_A, OFF_A, WIN_LEN, RW, "register A at 0x80000 with SCIF_MAP_FIXED");
    add_fixed(W_C1, OFF_C1, PAGE, RW, "register C1 at 0x100000 (one page)");
    add_fixed(W_C2, OFF_C2, PAGE, RW, "register C2 at 0x101000, adjacent to C1");
    add_fixed(W_R, OFF_R, PAGE, SCIF_PROT_READ, "register R read-only at 0x200000");
    add_fixed(W_S, OFF_S, PAGE, RW, "register S (signal page) at 0x300000");
    add_fixed(W_U, OFF_U, PAGE, RW, "register U at 0x400000");
    add_fixed(W_F, OFF_F, PAGE, RW, "register F at 0x500000");

    /* Plain malloc() memory, rounded up to a page boundary. */
    raw = (uint8_t *)malloc(WIN_LEN + PAGE);
    CHECK_Q(raw != NULL, "malloc");
    b = (uint8_t *)(((uintptr_t)raw + PAGE - 1) & ~(uintptr_t)(PAGE - 1));
    memset(b, 0, WIN_LEN);
    x = scif_register(M, b, WIN_LEN, 0, RW, 0);
    CHECK(x != SCIF_REGISTER_FAILED, "register malloc'd memory (B) with offset hint 0");
    CHECK(x >= 0 && x % PAGE == 0, "library-chosen offset of B is page aligned");
    CHECK(!overlaps_window(x, WIN_LEN, W_B), "library-chosen B overlaps no other window");
    win[W_B].off = x;
    win[W_B].len = WIN_LEN;
    win[W_B].addr = b;
    win[W_B].prot = RW;

    /* One page may be represented by several windows. */
    x = scif_register(M, win[W_A].addr, PAGE, 0x600000, RW, 0);
    CHECK(x != SCIF_REGISTER_FAILED && x >= 0 && x % PAGE == 0,
          "second window onto A's first page (hint 0x600000, no MAP_FIXED)");
    CHECK(!overlaps_window(x, PAGE, -1), "the hinted window overlaps no existing window");
    CHECK_EQ(scif_unregister(M, x, PAGE), 0, "scif_unregister of the hinted window");

    for (c = 0x7000000; c <= 0x7c00000; c += 0x400000)
        if (!overlaps_window(c, PAGE, -1)) {
            local_hole = c;
            break;
        }
    CHECK_Q(local_hole >= 0, "found an unregistered offset");

    spare = page_alloc(2 * PAGE);
    CHECK_ERR(scif_register(M, spare, PAGE, OFF_A + PAGE, RW, SCIF_MAP_FIXED), EADDRINUSE,
              "MAP_FIXED window inside an existing window fails EADDRINUSE");
    CHECK_ERR(scif_register(M, spare, 2 * PAGE, OFF_A - PAGE, RW, SCIF_MAP_FIXED), EADDRINUSE,
              "MAP_FIXED window straddling the start of a window fails EADDRINUSE");
    CHECK_ERR(scif_register(M, spare, PAGE, OFF_C2, RW, SCIF_MAP_FIXED), EADDRINUSE,
              "MAP_FIXED window at an existing window's offset fails EADDRINUSE");
    CHECK_ERR(scif_register(M, spare + 1, PAGE, 0, RW, 0), EINVAL,
              "scif_register of an unaligned address fails EINVAL");
    CHECK_ERR(scif_register(M, spare, PAGE - 1, 0, RW, 0), EINVAL,
              "scif_register of a length that is not a page multiple fails EINVAL");
    CHECK_ERR(scif_register(M, spare, 0, 0, RW, 0), EINVAL,
              "scif_register of length 0 fails EINVAL");
    CHECK_ERR(scif_register(M, spare, PAGE, local_hole + 1, RW, SCIF_MAP_FIXED), EINVAL,
              "MAP_FIXED with an unaligned offset fails EINVAL");
    CHECK_ERR(scif_register(M, spare, PAGE, (off_t)-PAGE, RW, SCIF_MAP_FIXED), EINVAL,
              "MAP_FIXED with a negative offset fails EINVAL");
    CHECK_ERR(scif_register(M, spare, PAGE, 0, 0x4, 0), EINVAL,
              "scif_register with unknown prot_flags fails EINVAL");
    CHECK_ERR(scif_register(M, spare, PAGE, 0, RW, 0x1), EINVAL,
              "scif_register with unknown map_flags fails EINVAL");

    CHECK_ERR(scif_unregister(M, OFF_A + PAGE, PAGE), EINVAL,
              "scif_unregister of a range inside a window fails EINVAL");
    CHECK_ERR(scif_unregister(M, OFF_A, WIN_LEN - PAGE), EINVAL,
              "scif_unregister of the leading part of a window fails EINVAL");
    CHECK_ERR(scif_unregister(M, local_hole, PAGE), ENXIO,
              "scif_unregister of a range with no window fails ENXIO");
    CHECK_ERR(scif_unregister(M, (off_t)-PAGE, PAGE), EINVAL,
              "scif_unregister of a negative offset fails EINVAL");
    CHECK_EQ(scif_unregister(M, OFF_C1, 2 * PAGE), 0,
             "one scif_unregister closes the two adjacent windows C1, C2");
    CHECK_ERR(scif_unregister(M, OFF_C1, PAGE), ENXIO,
              "C1 is gone after the unregister");
    add_fixed(W_C1, OFF_C1, PAGE, RW, "C1's offset can be registered again");
    add_fixed(W_C2, OFF_C2, PAGE, RW, "C2's offset can be registered again");

    fence_self();
    fence_peer();
    ok("scif_fence_mark/wait (SELF and PEER) with no RMA outstanding");
}

/* After the peers have told each other where B is. */
static void pick_offsets(void)
{
    off_t c;
    static const off_t ends[3] = {OFF_C2 + PAGE, OFF_S + PAGE, OFF_F + PAGE};
    int i;

    for (c = 0x7000000; c <= 0x7c00000; c += 0x400000)
        if (!overlaps_window(c, PAGE, -1) && !peer_has(c) && !peer_has(c + PAGE - 1)) {
            hole = c;
            break;
        }
    CHECK_Q(hole >= 0, "found an offset in no window on either side");
    for (i = 0; i < 3; i++)
        if (!peer_has(ends[i])) {
            gap_end = ends[i];
            break;
        }
    CHECK_Q(gap_end >= 0, "found a peer window with no window after it");
}

#endif /* SCIF_RMA_LAYOUT_H */
