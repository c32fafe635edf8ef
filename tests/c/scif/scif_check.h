/*
 * scif_check.h - the checking helpers the SCIF test programs share: CHECK macros that
 * name the failed check with file, line, phase and errno; a watchdog; message helpers;
 * a connect that retries while the server is not up yet; a connection of the node to
 * itself (loop_pair).
 *
 * A program defines SCIF_TEST_PROG (its name) and includes this once, after scif.h.
 */
#ifndef SCIF_CHECK_H
#define SCIF_CHECK_H

#include <pthread.h>
#include <string.h>

#ifndef SCIF_TEST_PROG
#error "define SCIF_TEST_PROG before including scif_check.h"
#endif

/* ---------------------------------------------------------------- checks */

static const char *prog = SCIF_TEST_PROG;
static const char *role = "?";
static const char *volatile phase_name = "start";
static int nchecks;

/* Helpers shared by the SCIF test programs; not every program uses all. */
#define MAYBE_UNUSED __attribute__((unused))

static const char *errname(int e)
{
    switch (e) {
    case 0: return "0";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EINTR: return "EINTR";
    case ENXIO: return "ENXIO";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case ENODEV: return "ENODEV";
    case EINVAL: return "EINVAL";
    case ENOTTY: return "ENOTTY";
    case ENOSPC: return "ENOSPC";
    case EPIPE: return "EPIPE";
    case ENOSYS: return "ENOSYS";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EADDRINUSE: return "EADDRINUSE";
    case ECONNRESET: return "ECONNRESET";
    case EISCONN: return "EISCONN";
    case ENOTCONN: return "ENOTCONN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EINPROGRESS: return "EINPROGRESS";
    default: return "E?";
    }
}

static void die(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static void die(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s %s: FAIL at %s:%d (phase %s): ", prog, role, file, line,
            phase_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

#define FAIL(...) die(__FILE__, __LINE__, __VA_ARGS__)

MAYBE_UNUSED static void ok(const char *what)
{
    printf("%s %s: ok %d: %s\n", prog, role, ++nchecks, what);
}

MAYBE_UNUSED static void note(const char *what)
{
    printf("%s %s: note: %s\n", prog, role, what);
}

/* cond must hold (errno is reported as it was before cond was tested). */
#define CHECK_(cond, what, say)                                                  \
    do {                                                                         \
        int e_ = errno;                                                          \
        if (!(cond))                                                             \
            FAIL("%s: expected %s; errno %d %s (%s)", what, #cond, e_,           \
                 errname(e_), strerror(e_));                                     \
        if (say)                                                                 \
            ok(what);                                                            \
    } while (0)
#define CHECK(cond, what) CHECK_(cond, what, 1)
#define CHECK_Q(cond, what) CHECK_(cond, what, 0)

/* got must equal want (compared as integers). */
#define CHECK_EQ_(got, want, what, say)                                          \
    do {                                                                         \
        long long g_ = (long long)(got);                                         \
        int e_ = errno;                                                          \
        long long w_ = (long long)(want);                                        \
        if (g_ != w_)                                                            \
            FAIL("%s: expected %s == %lld, got %lld; errno %d %s (%s)", what,    \
                 #got, w_, g_, e_, errname(e_), strerror(e_));                   \
        if (say)                                                                 \
            ok(what);                                                            \
    } while (0)
#define CHECK_EQ(got, want, what) CHECK_EQ_(got, want, what, 1)
#define CHECK_EQ_Q(got, want, what) CHECK_EQ_(got, want, what, 0)

/* expr must fail: return -1 with errno w1 (or w2). */
#define CHECK_ERR2(expr, w1, w2, what)                                           \
    do {                                                                         \
        long long r_;                                                            \
        int e_;                                                                  \
        errno = 0;                                                               \
        r_ = (long long)(expr);                                                  \
        e_ = errno;                                                              \
        if (r_ != -1 || (e_ != (w1) && e_ != (w2)))                              \
            FAIL("%s: expected -1 with %s%s%s, got %lld with errno %d %s (%s)",  \
                 what, errname(w1), (w1) == (w2) ? "" : " or ",                  \
                 (w1) == (w2) ? "" : errname(w2), r_, e_, errname(e_),           \
                 strerror(e_));                                                  \
        ok(what);                                                                \
    } while (0)
#define CHECK_ERR(expr, want, what) CHECK_ERR2(expr, want, want, what)

/* pointer-returning expr must fail: return SCIF_MMAP_FAILED with errno want. */
#define CHECK_ERR_PTR(expr, want, what)                                          \
    do {                                                                         \
        void *r_;                                                                \
        int e_;                                                                  \
        errno = 0;                                                               \
        r_ = (expr);                                                             \
        e_ = errno;                                                              \
        if (r_ != SCIF_MMAP_FAILED || e_ != (want))                              \
            FAIL("%s: expected SCIF_MMAP_FAILED with %s, got %p with errno %d "  \
                 "%s (%s)", what, errname(want), r_, e_, errname(e_),            \
                 strerror(e_));                                                  \
        ok(what);                                                                \
    } while (0)

#define PHASE(name)                                                              \
    do {                                                                         \
        phase_name = (name);                                                     \
        printf("%s %s: == phase %s\n", prog, role, (name));                      \
    } while (0)

static void on_alarm(int sig)
{
    const char *p = (const char *)phase_name;
    (void)sig;
    if (write(2, "TIMEOUT (alarm 60 s) in phase ", 30) < 0 ||
        write(2, p, strlen(p)) < 0 || write(2, "\n", 1) < 0) {
        /* nothing more we can do */
    }
    _exit(3);
}

/* --------------------------------------------------------------- helpers */

MAYBE_UNUSED static void msleep(int ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

MAYBE_UNUSED static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

MAYBE_UNUSED static uint16_t my_node(void)
{
    uint16_t self = 0xffff;
    int n = scif_get_nodeIDs(NULL, 0, &self);
    CHECK(n >= 1, "scif_get_nodeIDs(NULL, 0, &self) counts at least this node");
    CHECK(self != 0xffff, "scif_get_nodeIDs stores the own node id");
    return self;
}

MAYBE_UNUSED static int node_listed(uint16_t node)
{
    uint16_t nodes[64], self;
    int n = scif_get_nodeIDs(nodes, 64, &self), i;
    CHECK_Q(n >= 1, "scif_get_nodeIDs with a list");
    for (i = 0; i < n && i < 64; i++)
        if (nodes[i] == node)
            return 1;
    return 0;
}

/* Open an endpoint and connect it, retrying while the listener is not up
 * yet (the tutorial idiom: ECONNREFUSED).  On Remora a node only exists once
 * its node daemon runs, so while the server is still starting the answer
 * may be ENODEV; that is retried too.  Returns the endpoint; *lport gets the
 * local port scif_connect() reports. */
MAYBE_UNUSED static scif_epd_t connect_retry(uint16_t node, uint16_t port, int *lport)
{
    struct scif_portID dst;
    double t0 = now_ms();
    scif_epd_t epd = scif_open();
    int rc;

    CHECK_Q(epd != SCIF_OPEN_FAILED, "scif_open for a client endpoint");
    dst.node = node;
    dst.port = port;
    for (;;) {
        errno = 0;
        rc = scif_connect(epd, &dst);
        if (rc >= 0 || (errno != ECONNREFUSED && errno != ENODEV) ||
            now_ms() - t0 > 10000.0)
            break;
        msleep(20);
    }
    CHECK_Q(rc > 0, "scif_connect (retried for 10 s on ECONNREFUSED/ENODEV) returns the local port");
    *lport = rc;
    return epd;
}

MAYBE_UNUSED static void send_all(scif_epd_t epd, void *buf, int len)
{
    CHECK_EQ_Q(scif_send(epd, buf, len, SCIF_SEND_BLOCK), len,
               "blocking scif_send moves every byte");
}

MAYBE_UNUSED static void recv_all(scif_epd_t epd, void *buf, int len)
{
    CHECK_EQ_Q(scif_recv(epd, buf, len, SCIF_RECV_BLOCK), len,
               "blocking scif_recv fills the whole buffer");
}

MAYBE_UNUSED static void send_u32(scif_epd_t epd, uint32_t v)
{
    send_all(epd, &v, (int)sizeof v);
}

MAYBE_UNUSED static uint32_t recv_u32(scif_epd_t epd)
{
    uint32_t v = 0;
    recv_all(epd, &v, (int)sizeof v);
    return v;
}

MAYBE_UNUSED static int parse_u16(const char *s, const char *what)
{
    char *end;
    long v = strtol(s, &end, 0);
    if (*s == '\0' || *end != '\0' || v < 0 || v > 65535) {
        fprintf(stderr, "%s: bad %s '%s'\n", prog, what, s);
        exit(2);
    }
    return (int)v;
}

/* ---------------------------------------------------------------- a pair on this node */

struct loop_accept {
    scif_epd_t lep;
    scif_epd_t nepd;
    struct scif_portID peer;
    int rc;
};

MAYBE_UNUSED static void *loop_accept_main(void *arg)
{
    struct loop_accept *a = (struct loop_accept *)arg;
    a->rc = scif_accept(a->lep, &a->peer, &a->nepd, SCIF_ACCEPT_SYNC);
    return NULL;
}

/* A connection of this node to itself: a listener bound to `port` (*lp), an endpoint
 * that dialed it (*c) and the endpoint it accepted (*s), accepted on a thread of its own
 * (scif_connect returns once the listener accepted). Any failure stops the program. */
MAYBE_UNUSED static void loop_pair(uint16_t port, scif_epd_t *lp, scif_epd_t *c, scif_epd_t *s)
{
    uint16_t self = 0;
    struct scif_portID dst;
    struct loop_accept acc;
    pthread_t th;
    CHECK_Q(scif_get_nodeIDs(NULL, 0, &self) >= 1, "scif_get_nodeIDs");
    *lp = scif_open();
    CHECK_Q(*lp >= 0, "scif_open of the listener");
    CHECK_EQ_Q(scif_bind(*lp, port), port, "scif_bind");
    CHECK_EQ_Q(scif_listen(*lp, 1), 0, "scif_listen");
    memset(&acc, 0, sizeof acc);
    acc.lep = *lp;
    acc.nepd = -1;
    CHECK_EQ_Q(pthread_create(&th, NULL, loop_accept_main, &acc), 0, "start the accepting thread");
    *c = scif_open();
    CHECK_Q(*c >= 0, "scif_open");
    dst.node = self;
    dst.port = port;
    CHECK_Q(scif_connect(*c, &dst) > 0, "scif_connect to the own node");
    CHECK_EQ_Q(pthread_join(th, NULL), 0, "join the accepting thread");
    CHECK_EQ_Q(acc.rc, 0, "scif_accept");
    *s = acc.nepd;
}

#endif /* SCIF_CHECK_H */
