/*
 * scif_errors: argument and state errors of the SCIF user API, plus a
 * loopback connection to the own node, in a single process.
 *
 *   scif_errors                   (run with REMORA_NODE=4)
 *
 * Uses ports 2090..2099 of its own node (2099 is never bound) and, when not
 * run as root, port 1024.  Expected errno values follow the SCIF
 * documentation (Linux kernel scif.h kernel-doc and the MPSS 4 man pages);
 * where the two allow more than one value, both are accepted.
 *
 * Prints one "ok" line per check and "PASS" at the end; on failure prints
 * where and why and exits non-zero.  alarm(60) guards against hangs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <scif.h>

#define SCIF_TEST_PROG "scif_errors"
#include "scif_check.h"



#define PAGE 4096
#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)
#define PORT_LISTEN 2090
#define PORT_LOOP 2092
#define PORT_NOBODY 2099

/* Any of the two "not an endpoint" answers MPSS documents. */
#define CHECK_BADEPD(expr, what) CHECK_ERR2(expr, EBADF, EINVAL, what)

struct acceptor {
    scif_epd_t lep;
    scif_epd_t nepd;
    struct scif_portID peer;
    int rc;
    int err;
};

static void *acceptor_main(void *arg)
{
    struct acceptor *a = (struct acceptor *)arg;
    errno = 0;
    a->rc = scif_accept(a->lep, &a->peer, &a->nepd, SCIF_ACCEPT_SYNC);
    a->err = errno;
    return NULL;
}

static scif_epd_t open_ep(void)
{
    scif_epd_t e = scif_open();
    CHECK(e != SCIF_OPEN_FAILED && e >= 0, "scif_open");
    return e;
}

static void bad_descriptor(scif_epd_t bad, const char *name)
{
    char what[160];
    struct scif_portID dst, peer;
    scif_epd_t nepd;
    uint64_t v = 0;
    int mark;
    static uint8_t page[PAGE] __attribute__((aligned(PAGE)));

    dst.node = 0;
    dst.port = PORT_NOBODY;
#define BAD(expr, call)                                                          \
    do {                                                                         \
        snprintf(what, sizeof what, "%s on %s fails EBADF or EINVAL", call, name); \
        CHECK_BADEPD(expr, what);                                                \
    } while (0)
    BAD(scif_bind(bad, 0), "scif_bind");
    BAD(scif_listen(bad, 4), "scif_listen");
    BAD(scif_connect(bad, &dst), "scif_connect");
    BAD(scif_accept(bad, &peer, &nepd, 0), "scif_accept");
    BAD(scif_send(bad, &v, (int)sizeof v, 0), "scif_send");
    BAD(scif_recv(bad, &v, (int)sizeof v, 0), "scif_recv");
    BAD(scif_register(bad, page, PAGE, 0, RW, 0), "scif_register");
    BAD(scif_unregister(bad, 0, PAGE), "scif_unregister");
    BAD(scif_writeto(bad, 0, 8, 0, 0), "scif_writeto");
    BAD(scif_vreadfrom(bad, &v, sizeof v, 0, 0), "scif_vreadfrom");
    BAD(scif_fence_mark(bad, SCIF_FENCE_INIT_SELF, &mark), "scif_fence_mark");
    BAD(scif_close(bad), "scif_close");
#undef BAD
    snprintf(what, sizeof what, "scif_mmap on %s fails EBADF or EINVAL", name);
    {
        void *r;
        int e;
        errno = 0;
        r = scif_mmap(NULL, PAGE, RW, 0, bad, 0);
        e = errno;
        if (r != SCIF_MMAP_FAILED || (e != EBADF && e != EINVAL))
            FAIL("%s: got %p, errno %d %s", what, r, e, errname(e));
        ok(what);
    }
}

int main(void)
{
    uint16_t self = 0xffff, self2 = 0xffff, nodes[16], one[4];
    const char *env = getenv("REMORA_NODE");
    long want_node = env && *env ? strtol(env, NULL, 0) : 4;
    int n, n2, i, found, rc, lport, mark, port_e3;
    scif_epd_t e1, e2, e3, e4, e5, e6, ec, lp, c;
    struct scif_portID dst, peer;
    struct scif_pollepd sp[2];
    scif_epd_t nepd;
    uint64_t v;
    uint8_t *page, *page2, *mp;
    double t0;
    pthread_t th;
    struct acceptor acc;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    role = "single";
    CHECK_EQ_Q(posix_memalign((void **)&page, PAGE, PAGE), 0, "posix_memalign");
    CHECK_EQ_Q(posix_memalign((void **)&page2, PAGE, PAGE), 0, "posix_memalign");
    memset(page, 0, PAGE);
    memset(page2, 0, PAGE);

    PHASE("node ids");
    n = scif_get_nodeIDs(NULL, 0, &self);
    CHECK(n >= 1, "scif_get_nodeIDs(NULL, 0, &self) returns at least 1");
    CHECK_EQ(self, want_node, "own node id is REMORA_NODE (default 4)");
    for (i = 0; i < 16; i++)
        nodes[i] = 0xffff;
    n2 = scif_get_nodeIDs(nodes, 16, &self2);
    CHECK(n2 >= 1, "scif_get_nodeIDs with a 16-entry list returns at least 1");
    CHECK_EQ(self2, self, "the list call reports the same own node");
    for (i = 0, found = 0; i < n2 && i < 16; i++)
        found |= nodes[i] == self;
    CHECK(found, "the node list contains the own node");
    for (i = 0; i < 4; i++)
        one[i] = 0xffff;
    rc = scif_get_nodeIDs(one, 1, &self2);
    CHECK(rc >= 1, "scif_get_nodeIDs with len 1 still returns the total count");
    CHECK(one[0] != 0xffff, "scif_get_nodeIDs with len 1 fills one entry");
    CHECK(one[1] == 0xffff, "scif_get_nodeIDs with len 1 writes no more than one entry");

    PHASE("bind");
    e1 = open_ep();
    e2 = open_ep();
    CHECK(e1 != e2, "two endpoints have distinct descriptors");
    CHECK_EQ(scif_get_fd(e1), e1, "scif_get_fd(epd) == epd");
    CHECK_EQ(scif_bind(e1, PORT_LISTEN), PORT_LISTEN, "scif_bind(2090) returns 2090");
    CHECK_ERR(scif_bind(e1, PORT_LISTEN + 1), EINVAL, "binding a bound endpoint again fails EINVAL");
    CHECK_ERR(scif_bind(e1, 0), EINVAL, "scif_bind(0) on a bound endpoint fails EINVAL");
    /* The kernel-doc and the MPSS man page give EINVAL ("the port is already
     * bound") for a port held by another endpoint, not EADDRINUSE. */
    CHECK_ERR(scif_bind(e2, PORT_LISTEN), EINVAL,
              "binding a port another endpoint holds fails EINVAL");
    e3 = open_ep();
    port_e3 = scif_bind(e3, 0);
    CHECK(port_e3 >= SCIF_PORT_RSVD && port_e3 <= 65535,
          "scif_bind(0) assigns a port >= SCIF_PORT_RSVD");
    rc = scif_bind(e2, 0);
    CHECK(rc >= SCIF_PORT_RSVD && rc <= 65535 && rc != port_e3,
          "scif_bind(0) on another endpoint assigns a different port");
    e4 = open_ep();
    if (geteuid() != 0) {
        CHECK_ERR(scif_bind(e4, 1000), EACCES, "non-root scif_bind(1000) fails EACCES");
        CHECK_ERR(scif_bind(e4, SCIF_ADMIN_PORT_END - 1), EACCES,
                  "non-root scif_bind(SCIF_ADMIN_PORT_END - 1) fails EACCES");
        CHECK_EQ(scif_bind(e4, SCIF_ADMIN_PORT_END), SCIF_ADMIN_PORT_END,
                 "non-root scif_bind(SCIF_ADMIN_PORT_END) is allowed");
    } else {
        note("running as root: the EACCES checks for ports below 1024 are skipped");
    }

    PHASE("listen");
    e5 = open_ep();
    CHECK_ERR(scif_listen(e5, 4), EINVAL, "scif_listen on an unbound endpoint fails EINVAL");
    /* MPSS 4 scif.h: backlog must be greater than zero. */
    CHECK_ERR(scif_listen(e1, 0), EINVAL, "scif_listen with backlog 0 fails EINVAL");
    CHECK_EQ(scif_listen(e1, 4), 0, "scif_listen on a bound endpoint");
    CHECK_ERR(scif_listen(e1, 4), EISCONN, "scif_listen on a listening endpoint fails EISCONN");
    CHECK_ERR2(scif_bind(e1, 0), EISCONN, EINVAL,
               "scif_bind on a listening endpoint fails EISCONN (or EINVAL)");

    PHASE("poll");
    sp[0].epd = e1;
    sp[0].events = SCIF_POLLIN;
    sp[0].revents = 0;
    CHECK_EQ(scif_poll(sp, 1, 0), 0, "scif_poll(timeout 0) on an idle listener returns 0");
    CHECK_EQ(sp[0].revents, 0, "no revents on an idle listener");
    sp[0].events = SCIF_POLLIN | SCIF_POLLOUT;
    CHECK_EQ(scif_poll(sp, 1, 0), 0, "SCIF_POLLOUT means nothing on a listener");
    sp[0].events = SCIF_POLLIN;
    t0 = now_ms();
    CHECK_EQ(scif_poll(sp, 1, 150), 0, "scif_poll(timeout 150 ms) on an idle listener returns 0");
    CHECK(now_ms() - t0 >= 120.0, "scif_poll waited for its timeout");
    sp[0].epd = 12345;
    sp[0].events = SCIF_POLLIN;
    sp[0].revents = 0;
    CHECK_EQ(scif_poll(sp, 1, 0), 1, "scif_poll on a descriptor that is no endpoint returns 1");
    CHECK(sp[0].revents & SCIF_POLLNVAL, "... with SCIF_POLLNVAL");

    PHASE("connect");
    dst.node = self;
    dst.port = PORT_NOBODY;
    e6 = open_ep();
    CHECK_ERR(scif_connect(e6, NULL), EINVAL, "scif_connect with a NULL destination fails EINVAL");
    CHECK_ERR(scif_connect(e6, &dst), ECONNREFUSED,
              "scif_connect to an own-node port nobody listens on fails ECONNREFUSED");
    dst.port = (uint16_t)port_e3;
    CHECK_ERR(scif_connect(e6, &dst), ECONNREFUSED,
              "scif_connect to a bound but not listening port fails ECONNREFUSED");
    dst.node = 999;
    dst.port = PORT_LISTEN;
    CHECK_ERR(scif_connect(e6, &dst), ENODEV, "scif_connect to node 999 fails ENODEV");
    dst.node = self;
    dst.port = PORT_LISTEN;
    CHECK_ERR(scif_connect(e1, &dst), EOPNOTSUPP,
              "scif_connect on a listening endpoint fails EOPNOTSUPP");

    PHASE("accept");
    CHECK_ERR(scif_accept(e1, &peer, &nepd, 0), EAGAIN,
              "non-blocking scif_accept with nothing pending fails EAGAIN");
    CHECK_ERR(scif_accept(e3, &peer, &nepd, 0), EINVAL,
              "scif_accept on a bound, not listening endpoint fails EINVAL");
    CHECK_ERR(scif_accept(e5, &peer, &nepd, SCIF_ACCEPT_SYNC), EINVAL,
              "scif_accept(SYNC) on an unbound endpoint fails EINVAL");
    CHECK_ERR(scif_accept(e1, NULL, &nepd, 0), EINVAL, "scif_accept with peer NULL fails EINVAL");
    CHECK_ERR(scif_accept(e1, &peer, NULL, 0), EINVAL, "scif_accept with newepd NULL fails EINVAL");
    CHECK_ERR(scif_accept(e1, &peer, &nepd, 0x2), EINVAL, "scif_accept with unknown flags fails EINVAL");

    PHASE("not connected");
    v = 0;
    CHECK_ERR(scif_send(e5, &v, (int)sizeof v, 0), ENOTCONN, "scif_send on an unbound endpoint fails ENOTCONN");
    CHECK_ERR(scif_recv(e5, &v, (int)sizeof v, 0), ENOTCONN, "scif_recv on an unbound endpoint fails ENOTCONN");
    CHECK_ERR(scif_send(e3, &v, (int)sizeof v, SCIF_SEND_BLOCK), ENOTCONN,
              "blocking scif_send on a bound endpoint fails ENOTCONN");
    CHECK_ERR(scif_recv(e3, &v, (int)sizeof v, SCIF_RECV_BLOCK), ENOTCONN,
              "blocking scif_recv on a bound endpoint fails ENOTCONN");
    CHECK_ERR(scif_send(e1, &v, (int)sizeof v, 0), ENOTCONN, "scif_send on a listener fails ENOTCONN");
    CHECK_ERR(scif_recv(e1, &v, (int)sizeof v, 0), ENOTCONN, "scif_recv on a listener fails ENOTCONN");
    CHECK_ERR(scif_register(e5, page, PAGE, 0, RW, 0), ENOTCONN,
              "scif_register on an unconnected endpoint fails ENOTCONN");
    CHECK_ERR(scif_register(e1, page, PAGE, 0x10000, RW, SCIF_MAP_FIXED), ENOTCONN,
              "scif_register on a listener fails ENOTCONN");
    CHECK_ERR(scif_unregister(e5, 0x10000, PAGE), ENOTCONN,
              "scif_unregister on an unconnected endpoint fails ENOTCONN");
    CHECK_ERR(scif_writeto(e5, 0, 8, 0, 0), ENOTCONN, "scif_writeto on an unconnected endpoint fails ENOTCONN");
    CHECK_ERR(scif_readfrom(e5, 0, 8, 0, 0), ENOTCONN, "scif_readfrom on an unconnected endpoint fails ENOTCONN");
    CHECK_ERR(scif_vwriteto(e5, &v, 8, 0, 0), ENOTCONN, "scif_vwriteto on an unconnected endpoint fails ENOTCONN");
    CHECK_ERR(scif_vreadfrom(e5, &v, 8, 0, 0), ENOTCONN, "scif_vreadfrom on an unconnected endpoint fails ENOTCONN");
    CHECK_ERR(scif_fence_mark(e5, SCIF_FENCE_INIT_SELF, &mark), ENOTCONN,
              "scif_fence_mark on an unconnected endpoint fails ENOTCONN");
    CHECK_ERR(scif_fence_signal(e5, 0, 1, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL), ENOTCONN,
              "scif_fence_signal on an unconnected endpoint fails ENOTCONN");
    CHECK_ERR_PTR(scif_mmap(NULL, PAGE, RW, 0, e5, 0), ENOTCONN,
                  "scif_mmap on an unconnected endpoint fails ENOTCONN");

    PHASE("bad descriptors");
    bad_descriptor(12345, "descriptor 12345 (never opened)");
    bad_descriptor(-1, "descriptor -1");
    ec = open_ep();
    CHECK_EQ(scif_close(ec), 0, "scif_close of a fresh endpoint");
    bad_descriptor(ec, "a closed endpoint");

    PHASE("loopback");
    lp = open_ep();
    CHECK_EQ(scif_bind(lp, PORT_LOOP), PORT_LOOP, "scif_bind(2092) for the loopback listener");
    CHECK_EQ(scif_listen(lp, 2), 0, "scif_listen for the loopback listener");
    memset(&acc, 0, sizeof acc);
    acc.lep = lp;
    acc.nepd = -1;
    CHECK_EQ(pthread_create(&th, NULL, acceptor_main, &acc), 0, "start the accepting thread");
    c = open_ep();
    dst.node = self;
    dst.port = PORT_NOBODY;
    CHECK_ERR(scif_connect(c, &dst), ECONNREFUSED, "a refused connect first (endpoint is reused below)");
    dst.port = PORT_LOOP;
    lport = scif_connect(c, &dst);
    CHECK(lport > 0, "scif_connect to the own node after a refusal succeeds, returns the local port");
    CHECK_EQ(pthread_join(th, NULL), 0, "join the accepting thread");
    CHECK_EQ(acc.rc, 0, "scif_accept(SCIF_ACCEPT_SYNC) in the other thread succeeded");
    CHECK(acc.nepd >= 0 && acc.nepd != lp && acc.nepd != c, "accept returned a new endpoint");
    CHECK_EQ(acc.peer.node, self, "accept's peer.node is the own node");
    CHECK_EQ(acc.peer.port, lport, "accept's peer.port is the port scif_connect returned");
    CHECK_ERR(scif_connect(c, &dst), EISCONN, "scif_connect on a connected endpoint fails EISCONN");

    v = 0x6c6f6f706261636bULL;
    CHECK_EQ(scif_send(c, &v, (int)sizeof v, SCIF_SEND_BLOCK), 8, "loopback scif_send");
    v = 0;
    CHECK_EQ(scif_recv(acc.nepd, &v, (int)sizeof v, SCIF_RECV_BLOCK), 8, "loopback scif_recv");
    CHECK_EQ(v, 0x6c6f6f706261636bULL, "loopback message intact");
    v = ~v;
    CHECK_EQ(scif_send(acc.nepd, &v, (int)sizeof v, SCIF_SEND_BLOCK), 8, "loopback reply");
    v = 0;
    CHECK_EQ(scif_recv(c, &v, (int)sizeof v, SCIF_RECV_BLOCK), 8, "loopback reply received");
    CHECK_EQ(v, ~0x6c6f6f706261636bULL, "loopback reply intact");
    CHECK_EQ(scif_send(c, &v, 0, 0), 0, "scif_send of 0 bytes returns 0");
    CHECK_EQ(scif_recv(c, &v, 0, SCIF_RECV_BLOCK), 0, "scif_recv of 0 bytes returns 0");
    CHECK_ERR(scif_send(c, &v, -1, 0), EINVAL, "scif_send with negative len fails EINVAL");
    CHECK_ERR(scif_recv(c, &v, -1, 0), EINVAL, "scif_recv with negative len fails EINVAL");
    CHECK_ERR(scif_send(c, &v, 8, 0x2), EINVAL, "scif_send with unknown flags fails EINVAL");
    CHECK_ERR(scif_recv(c, &v, 8, 0x2), EINVAL, "scif_recv with unknown flags fails EINVAL");

    /* Each end has its own registered address space: same offset, two windows. */
    CHECK_EQ(scif_register(c, page, PAGE, 0x10000, RW, SCIF_MAP_FIXED), 0x10000,
             "loopback: register a window on the connecting end");
    CHECK_EQ(scif_register(acc.nepd, page2, PAGE, 0x10000, RW, SCIF_MAP_FIXED), 0x10000,
             "loopback: register a window at the same offset on the accepting end");
    for (i = 0; i < PAGE; i++)
        page[i] = (uint8_t)(i * 7 + 1);
    CHECK_EQ(scif_writeto(c, 0x10000, PAGE, 0x10000, SCIF_RMA_SYNC), 0, "loopback scif_writeto");
    CHECK(memcmp(page, page2, PAGE) == 0, "loopback writeto data arrived");
    mp = (uint8_t *)scif_mmap(NULL, PAGE, RW, 0, acc.nepd, 0x10000);
    CHECK(mp != SCIF_MMAP_FAILED, "loopback scif_mmap of the other end's window");
    mp[100] = 0x5a;
    CHECK_EQ(page[100], 0x5a, "a store through the loopback mapping reaches the window's memory");
    CHECK_EQ(scif_munmap(mp, PAGE), 0, "loopback scif_munmap");
    CHECK_EQ(scif_unregister(c, 0x10000, PAGE), 0, "loopback scif_unregister");

    CHECK_EQ(scif_close(c), 0, "scif_close of the connecting end");
    CHECK_ERR(scif_recv(acc.nepd, &v, (int)sizeof v, 0), ECONNRESET,
              "the accepted end sees ECONNRESET after its peer closed");
    CHECK_EQ(scif_close(acc.nepd), 0, "scif_close of the accepted end");
    CHECK_EQ(scif_close(lp), 0, "scif_close of the loopback listener");

    PHASE("cleanup");
    CHECK_EQ(scif_close(e1), 0, "scif_close of the listener on 2090");
    e1 = open_ep();
    CHECK_EQ(scif_bind(e1, PORT_LISTEN), PORT_LISTEN, "port 2090 is free again after scif_close");
    CHECK_EQ(scif_close(e1), 0, "scif_close");
    CHECK_EQ(scif_close(e2), 0, "scif_close");
    CHECK_EQ(scif_close(e3), 0, "scif_close");
    CHECK_EQ(scif_close(e4), 0, "scif_close");
    CHECK_EQ(scif_close(e5), 0, "scif_close");
    CHECK_EQ(scif_close(e6), 0, "scif_close");
    free(page);
    free(page2);
    printf("%s %s: %d checks\nPASS\n", prog, role, nchecks);
    return 0;
}
