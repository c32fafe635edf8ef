/*
 * scif_msg: SCIF connections and the messaging layer, across two nodes.
 *
 *   scif_msg server PORT          (run with REMORA_NODE=4)
 *   scif_msg client NODE PORT     (run with REMORA_NODE=8; NODE = server's node)
 *
 * Both are started at about the same time; the client retries scif_connect()
 * while it gets ECONNREFUSED (or ENODEV: the server's node is not up yet).
 * The two sides walk through numbered phases;
 * at the start of each one the client sends the phase tag over the main
 * connection and the server echoes it, so both know where the other is.
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
#include <time.h>
#include <unistd.h>

#include <scif.h>

#define SCIF_TEST_PROG "scif_msg"
#include "scif_check.h"


static int is_server;

/* Agree on the next phase: the client announces it, the server echoes. */
static void sync_phase(scif_epd_t m, uint32_t tag, const char *name)
{
    PHASE(name);
    if (is_server) {
        CHECK_EQ_Q(recv_u32(m), tag, "peer announced the expected phase");
        send_u32(m, tag);
    } else {
        send_u32(m, tag);
        CHECK_EQ_Q(recv_u32(m), tag, "peer echoed the phase");
    }
}

static uint8_t pat(unsigned seed, size_t i)
{
    return (uint8_t)((i * 131u) ^ (i >> 9) ^ (seed * 77u + 5u));
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
    size_t i;
    for (i = 0; i < len; i++)
        p[i] = pat(seed, i);
}

static void verify(const uint8_t *p, size_t len, unsigned seed, const char *what)
{
    size_t i;
    for (i = 0; i < len; i++)
        if (p[i] != pat(seed, i))
            FAIL("%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, len,
                 p[i], pat(seed, i));
    ok(what);
}

#define BIG (1024 * 1024)

enum {
    T_ECHO = 0x51000001,
    T_POLLIN,
    T_BIG,
    T_MULTI,
    T_MULTI_DONE,
    T_CLOSE,
    T_WAKE,
    T_WAKE_DONE,
    T_BYE,
    HELLO = 0x4c4c4548,
    MULTI_HDR = 0x49544c55,
    MULTI_REPLY = 0x594c5052
};

struct hello {
    uint32_t magic;
    uint16_t node;
    uint16_t port;
};

/* The data each of the 3 extra connections carries after its header: both fit
 * the peer's queue (MPSS's 4 KiB holds 4095 bytes), since the other side takes
 * the connections in another order than they were written. */
#define MULTI_DATA 2048

struct multi_hdr {
    uint32_t magic;
    uint32_t index;
    uint32_t port;
};

static uint64_t echo_value(int i)
{
    return 0x0123456789abcdefULL ^ ((uint64_t)i * 0x9e3779b97f4a7c15ULL);
}

/* ------------------------------------------------- blocked-thread helpers */

struct blocker {
    scif_epd_t epd;
    int kind;             /* 0 scif_recv, 1 poll(), 2 scif_poll, 3 scif_accept */
    volatile int done;
    int rc;
    int err;
    short revents;
};

static void *blocker_main(void *arg)
{
    struct blocker *b = (struct blocker *)arg;
    uint64_t v;
    struct pollfd pfd;
    struct scif_pollepd sp;
    struct scif_portID peer;
    scif_epd_t nepd;

    errno = 0;
    switch (b->kind) {
    case 0:
        b->rc = scif_recv(b->epd, &v, (int)sizeof v, SCIF_RECV_BLOCK);
        break;
    case 1:
        pfd.fd = scif_get_fd(b->epd);
        pfd.events = POLLIN;
        pfd.revents = 0;
        b->rc = poll(&pfd, 1, 20000);
        b->revents = pfd.revents;
        break;
    case 2:
        sp.epd = b->epd;
        sp.events = SCIF_POLLIN;
        sp.revents = 0;
        b->rc = scif_poll(&sp, 1, 20000);
        b->revents = sp.revents;
        break;
    default:
        b->rc = scif_accept(b->epd, &peer, &nepd, SCIF_ACCEPT_SYNC);
        break;
    }
    b->err = errno;
    __sync_synchronize();
    b->done = 1;
    return NULL;
}

/* Start a thread blocked on b->epd, check it really blocks, close the
 * endpoint from this thread and check the blocked call returns within 2 s. */
static void close_wakes(struct blocker *b, const char *what)
{
    pthread_t th;
    double t0;
    char line[200];

    b->done = 0;
    CHECK_EQ_Q(pthread_create(&th, NULL, blocker_main, b), 0, "pthread_create");
    msleep(300);
    __sync_synchronize();
    CHECK_Q(!b->done, "the call blocks before the endpoint is closed");
    t0 = now_ms();
    CHECK_EQ(scif_close(b->epd), 0, "scif_close from another thread returns 0");
    while (!b->done && now_ms() - t0 < 2000.0)
        msleep(5);
    __sync_synchronize();
    if (!b->done)
        FAIL("%s: still blocked 2 s after scif_close", what);
    pthread_join(th, NULL);
    snprintf(line, sizeof line,
             "%s: woke after %.0f ms with rc %d, errno %s, revents 0x%x", what,
             now_ms() - t0, b->rc, errname(b->err), (unsigned)b->revents);
    ok(line);
}

/* ---------------------------------------------------------------- server */

static int run_server(uint16_t port)
{
    uint16_t self, client_node;
    scif_epd_t lep, m = -1, c, d, eps[3];
    struct scif_portID peer, peers[3];
    struct pollfd pfd;
    struct scif_pollepd sp;
    struct hello h;
    struct multi_hdr mh;
    uint64_t v;
    uint8_t *big, page[MULTI_DATA];
    int n, rc, i, k, seen[3] = {0, 0, 0}, idx_of[3];
    double t0;
    struct blocker b;

    PHASE("setup");
    self = my_node();
    lep = scif_open();
    CHECK(lep != SCIF_OPEN_FAILED, "scif_open");
    CHECK_EQ(scif_get_fd(lep), lep, "scif_get_fd returns the endpoint itself");
    CHECK_EQ(scif_bind(lep, port), port, "scif_bind(PORT) returns PORT");
    CHECK_EQ(scif_listen(lep, 16), 0, "scif_listen(16)");

    PHASE("accept");
    pfd.fd = scif_get_fd(lep);
    pfd.events = POLLIN;
    pfd.revents = 0;
    n = poll(&pfd, 1, 0);
    CHECK(n >= 0, "poll() with timeout 0 on the listener");
    if (n == 0) {
        errno = 0;
        rc = scif_accept(lep, &peer, &m, 0);
        if (rc == 0) {
            note("a client arrived between poll() and scif_accept(); EAGAIN check skipped");
        } else {
            CHECK(rc == -1 && errno == EAGAIN,
                  "non-blocking scif_accept with nothing pending fails EAGAIN");
            m = -1;
        }
    } else {
        note("the client was already waiting; EAGAIN check skipped");
    }
    if (m < 0) {
        pfd.revents = 0;
        n = poll(&pfd, 1, 15000);
        CHECK_EQ(n, 1, "poll() on the listener reports the connection request");
        CHECK(pfd.revents & POLLIN, "the listener polls POLLIN");
        CHECK_EQ(scif_accept(lep, &peer, &m, 0), 0,
                 "non-blocking scif_accept succeeds once POLLIN is seen");
    }
    CHECK(m >= 0 && m != lep, "scif_accept returns a new endpoint");

    recv_all(m, &h, (int)sizeof h);
    CHECK_EQ(h.magic, HELLO, "hello message from the client");
    CHECK_EQ(peer.node, h.node, "accept's peer.node is the client's node");
    client_node = h.node;
    CHECK_EQ(peer.port, h.port, "accept's peer.port is the client's local port");
    CHECK(node_listed(h.node), "scif_get_nodeIDs lists the client's node");
    CHECK(node_listed(self), "scif_get_nodeIDs lists the own node");

    /* The client now waits for our hello, so nothing is queued for us. */
    errno = 0;
    CHECK_EQ(scif_recv(m, &v, (int)sizeof v, 0), 0,
             "non-blocking scif_recv with nothing queued returns 0");
    sp.epd = m;
    sp.events = SCIF_POLLIN;
    sp.revents = 0;
    CHECK_EQ(scif_poll(&sp, 1, 0), 0, "scif_poll(POLLIN, 0 ms) on an idle connection times out");
    sp.events = SCIF_POLLOUT;
    sp.revents = 0;
    CHECK_EQ(scif_poll(&sp, 1, 0), 1, "scif_poll(POLLOUT) on an idle connection is ready");
    CHECK(sp.revents & SCIF_POLLOUT, "idle connected endpoint polls SCIF_POLLOUT");
    CHECK(!(sp.revents & (SCIF_POLLHUP | SCIF_POLLERR)), "no POLLHUP/POLLERR on a live connection");
    h.magic = HELLO;
    h.node = self;
    h.port = port;
    send_all(m, &h, (int)sizeof h);

    sync_phase(m, T_ECHO, "echo");
    for (i = 0; i < 100; i++) {
        recv_all(m, &v, (int)sizeof v);
        CHECK_EQ_Q(v, echo_value(i), "echo request arrives in order");
        v = ~v;
        send_all(m, &v, (int)sizeof v);
    }
    ok("100 blocking 8-byte round trips, in order");

    sync_phase(m, T_POLLIN, "pollin");
    sp.epd = m;
    sp.events = SCIF_POLLIN;
    sp.revents = 0;
    CHECK_EQ(scif_poll(&sp, 1, 10000), 1, "scif_poll waits for the peer's message");
    CHECK(sp.revents & SCIF_POLLIN, "scif_poll reports SCIF_POLLIN after the peer sent");
    pfd.fd = scif_get_fd(m);
    pfd.events = POLLIN;
    pfd.revents = 0;
    CHECK_EQ(poll(&pfd, 1, 0), 1, "plain poll() on the connected fd agrees");
    CHECK(pfd.revents & POLLIN, "plain poll() reports POLLIN");
    v = 0;
    rc = scif_recv(m, &v, (int)sizeof v, 0);
    CHECK(rc > 0 && rc <= 8, "non-blocking scif_recv takes queued bytes");
    if (rc < 8)
        recv_all(m, (uint8_t *)&v + rc, 8 - rc);
    CHECK_EQ(v, 0x706f6c6c696e2121ULL, "the polled message is intact");

    sync_phase(m, T_BIG, "big");
    big = (uint8_t *)malloc(BIG);
    CHECK_Q(big != NULL, "malloc");
    memset(big, 0, BIG);
    CHECK_EQ(scif_recv(m, big, BIG, SCIF_RECV_BLOCK), BIG,
             "one blocking scif_recv of 1 MiB returns 1 MiB");
    verify(big, BIG, 1, "1 MiB client->server message intact");
    fill(big, BIG, 2);
    CHECK_EQ(scif_send(m, big, BIG, SCIF_SEND_BLOCK), BIG,
             "one blocking scif_send of 1 MiB returns 1 MiB");
    memset(big, 0, BIG);
    CHECK_EQ(scif_recv(m, big, BIG, SCIF_RECV_BLOCK), BIG,
             "1 MiB sent partly non-blocking arrives in one blocking scif_recv");
    verify(big, BIG, 3, "non-blocking + blocking 1 MiB message intact");
    free(big);

    sync_phase(m, T_MULTI, "multi");
    for (k = 0; k < 3; k++) {
        CHECK_EQ(scif_accept(lep, &peers[k], &eps[k], SCIF_ACCEPT_SYNC), 0,
                 "scif_accept(SCIF_ACCEPT_SYNC) of one of 3 connections");
        CHECK_EQ(peers[k].node, client_node, "accepted connection comes from the client's node");
    }
    for (k = 2; k >= 0; k--) {
        recv_all(eps[k], &mh, (int)sizeof mh);
        CHECK_EQ(mh.magic, MULTI_HDR, "per-connection header");
        CHECK(mh.index < 3 && !seen[mh.index], "each connection carries a distinct index");
        seen[mh.index] = 1;
        idx_of[k] = (int)mh.index;
        CHECK_EQ(mh.port, peers[k].port,
                 "header arrives on the endpoint accepted from that client port");
        recv_all(eps[k], page, (int)sizeof page);
        verify(page, sizeof page, 10 + mh.index, "per-connection data (no cross-talk)");
    }
    for (k = 0; k < 3; k++) {
        mh.magic = MULTI_REPLY;
        mh.index = (uint32_t)idx_of[k];
        mh.port = peers[k].port;
        send_all(eps[k], &mh, (int)sizeof mh);
        fill(page, sizeof page, 20 + (unsigned)idx_of[k]);
        send_all(eps[k], page, (int)sizeof page);
    }
    CHECK_EQ(recv_u32(m), T_MULTI_DONE, "client got all 3 replies");
    for (k = 0; k < 3; k++)
        CHECK_EQ(scif_close(eps[k]), 0, "scif_close of an accepted endpoint");

    sync_phase(m, T_CLOSE, "close");
    CHECK_EQ(scif_accept(lep, &peer, &c, SCIF_ACCEPT_SYNC), 0, "accept the closing client");
    /* Wait until the peer's close is visible: POLLHUP (data may be queued). */
    t0 = now_ms();
    for (;;) {
        sp.epd = c;
        sp.events = SCIF_POLLIN;
        sp.revents = 0;
        rc = scif_poll(&sp, 1, 100);
        CHECK_Q(rc >= 0, "scif_poll on the closing connection");
        if ((sp.revents & SCIF_POLLHUP) || now_ms() - t0 > 10000.0)
            break;
        msleep(10);
    }
    CHECK(sp.revents & SCIF_POLLHUP, "scif_poll reports SCIF_POLLHUP after the peer closed");
    pfd.fd = scif_get_fd(c);
    pfd.events = POLLIN;
    pfd.revents = 0;
    CHECK(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP),
          "plain poll() reports POLLHUP after the peer closed");
    for (i = 0; i < 3; i++) {
        recv_all(c, &v, (int)sizeof v);
        CHECK_EQ(v, 0xc105e00000000000ULL + (uint64_t)i,
                 "message queued before the peer closed is still received");
    }
    CHECK_ERR(scif_recv(c, &v, (int)sizeof v, SCIF_RECV_BLOCK), ECONNRESET,
              "blocking scif_recv after the drained queue fails ECONNRESET");
    CHECK_ERR(scif_recv(c, &v, (int)sizeof v, 0), ECONNRESET,
              "non-blocking scif_recv on the reset connection fails ECONNRESET");
    CHECK_ERR(scif_send(c, &v, (int)sizeof v, SCIF_SEND_BLOCK), ECONNRESET,
              "scif_send to a closed peer fails ECONNRESET");
    CHECK_ERR(scif_send(c, &v, (int)sizeof v, 0), ECONNRESET,
              "non-blocking scif_send to a closed peer fails ECONNRESET");
    CHECK_EQ(scif_close(c), 0, "scif_close of a reset endpoint returns 0");

    sync_phase(m, T_WAKE, "wake");
    CHECK_EQ(scif_accept(lep, &peer, &d, SCIF_ACCEPT_SYNC), 0, "accept the silent client");
    memset(&b, 0, sizeof b);
    b.epd = d;
    b.kind = 0;
    close_wakes(&b, "scif_recv(SCIF_RECV_BLOCK) blocked on a silent connection");
    CHECK(b.rc == -1 && (b.err == ECONNRESET || b.err == EBADF || b.err == EINVAL),
          "the woken scif_recv fails with ECONNRESET, EBADF or EINVAL");

    memset(&b, 0, sizeof b);
    b.epd = scif_open();
    CHECK_Q(b.epd != SCIF_OPEN_FAILED, "scif_open");
    CHECK(scif_bind(b.epd, 0) >= SCIF_PORT_RSVD, "scif_bind(0) for a second listener");
    CHECK_EQ(scif_listen(b.epd, 4), 0, "scif_listen on the second listener");
    b.kind = 1;
    close_wakes(&b, "poll() blocked on a listening endpoint");
    CHECK(b.rc != 0, "the woken poll() did not time out");

    memset(&b, 0, sizeof b);
    b.epd = scif_open();
    CHECK_Q(b.epd != SCIF_OPEN_FAILED, "scif_open");
    CHECK(scif_bind(b.epd, 0) >= SCIF_PORT_RSVD, "scif_bind(0) for a third listener");
    CHECK_EQ(scif_listen(b.epd, 4), 0, "scif_listen on the third listener");
    b.kind = 2;
    close_wakes(&b, "scif_poll blocked on a listening endpoint");
    CHECK(b.rc != 0, "the woken scif_poll did not time out");

    memset(&b, 0, sizeof b);
    b.epd = scif_open();
    CHECK_Q(b.epd != SCIF_OPEN_FAILED, "scif_open");
    CHECK(scif_bind(b.epd, 0) >= SCIF_PORT_RSVD, "scif_bind(0) for a fourth listener");
    CHECK_EQ(scif_listen(b.epd, 4), 0, "scif_listen on the fourth listener");
    b.kind = 3;
    close_wakes(&b, "scif_accept(SCIF_ACCEPT_SYNC) blocked on a listener");
    CHECK_EQ(b.rc, -1, "the woken scif_accept fails");
    send_u32(m, T_WAKE_DONE);

    sync_phase(m, T_BYE, "bye");
    CHECK_EQ(scif_close(m), 0, "scif_close of the main connection");
    CHECK_EQ(scif_close(lep), 0, "scif_close of the listener");
    printf("%s %s: %d checks\nPASS\n", prog, role, nchecks);
    return 0;
}

/* ---------------------------------------------------------------- client */

static int run_client(uint16_t node, uint16_t port)
{
    uint16_t self;
    scif_epd_t m, c, d, eps[3];
    int lport, lports[3], i, k, rc;
    static const int send_order[3] = {2, 0, 1}, recv_order[3] = {1, 2, 0};
    struct scif_pollepd sp;
    struct hello h;
    struct multi_hdr mh;
    uint64_t v;
    uint8_t *big, page[MULTI_DATA];

    PHASE("connect");
    self = my_node();
    m = connect_retry(node, port, &lport);
    ok("scif_connect to the server (retrying while refused)");
    CHECK(lport > 0 && lport <= 65535, "scif_connect returns a valid local port");
    CHECK(node_listed(node), "scif_get_nodeIDs lists the server's node");
    CHECK(node_listed(self), "scif_get_nodeIDs lists the own node");

    /* The server sends nothing before our hello. */
    errno = 0;
    CHECK_EQ(scif_recv(m, &v, (int)sizeof v, 0), 0,
             "non-blocking scif_recv with nothing queued returns 0");
    sp.epd = m;
    sp.events = SCIF_POLLOUT;
    sp.revents = 0;
    CHECK_EQ(scif_poll(&sp, 1, 0), 1, "scif_poll(POLLOUT) on a fresh connection is ready");
    CHECK(sp.revents & SCIF_POLLOUT, "fresh connected endpoint polls SCIF_POLLOUT");
    h.magic = HELLO;
    h.node = self;
    h.port = (uint16_t)lport;
    send_all(m, &h, (int)sizeof h);
    recv_all(m, &h, (int)sizeof h);
    CHECK_EQ(h.magic, HELLO, "hello reply from the server");
    CHECK_EQ(h.node, node, "server reports the node we connected to");
    CHECK_EQ(h.port, port, "server reports the port we connected to");

    sync_phase(m, T_ECHO, "echo");
    for (i = 0; i < 100; i++) {
        v = echo_value(i);
        send_all(m, &v, (int)sizeof v);
        recv_all(m, &v, (int)sizeof v);
        CHECK_EQ_Q(v, ~echo_value(i), "echo reply matches its request");
    }
    ok("100 blocking 8-byte round trips, in order");

    sync_phase(m, T_POLLIN, "pollin");
    msleep(50);
    v = 0x706f6c6c696e2121ULL;
    send_all(m, &v, (int)sizeof v);

    sync_phase(m, T_BIG, "big");
    big = (uint8_t *)malloc(BIG);
    CHECK_Q(big != NULL, "malloc");
    fill(big, BIG, 1);
    CHECK_EQ(scif_send(m, big, BIG, SCIF_SEND_BLOCK), BIG,
             "one blocking scif_send of 1 MiB returns 1 MiB");
    memset(big, 0, BIG);
    CHECK_EQ(scif_recv(m, big, BIG, SCIF_RECV_BLOCK), BIG,
             "one blocking scif_recv of 1 MiB returns 1 MiB");
    verify(big, BIG, 2, "1 MiB server->client message intact");
    fill(big, BIG, 3);
    rc = scif_send(m, big, BIG, 0);
    CHECK(rc > 0 && rc <= BIG, "non-blocking scif_send of 1 MiB sends what fits (> 0 bytes)");
    if (rc < BIG)
        send_all(m, big + rc, BIG - rc);
    free(big);

    sync_phase(m, T_MULTI, "multi");
    for (i = 0; i < 3; i++) {
        eps[i] = connect_retry(node, port, &lports[i]);
        ok("extra connection to the same port");
    }
    CHECK(lports[0] != lports[1] && lports[1] != lports[2] && lports[0] != lports[2],
          "each connection has its own local port");
    for (k = 0; k < 3; k++) {
        i = send_order[k];
        mh.magic = MULTI_HDR;
        mh.index = (uint32_t)i;
        mh.port = (uint32_t)lports[i];
        send_all(eps[i], &mh, (int)sizeof mh);
        fill(page, sizeof page, 10 + (unsigned)i);
        send_all(eps[i], page, (int)sizeof page);
    }
    for (k = 0; k < 3; k++) {
        i = recv_order[k];
        recv_all(eps[i], &mh, (int)sizeof mh);
        CHECK_EQ(mh.magic, MULTI_REPLY, "per-connection reply header");
        CHECK_EQ(mh.index, i, "reply on connection i carries index i");
        CHECK_EQ(mh.port, lports[i], "server saw connection i's port");
        recv_all(eps[i], page, (int)sizeof page);
        verify(page, sizeof page, 20 + (unsigned)i, "per-connection reply data (no cross-talk)");
    }
    send_u32(m, T_MULTI_DONE);
    for (i = 0; i < 3; i++)
        CHECK_EQ(scif_close(eps[i]), 0, "scif_close of an extra connection");

    sync_phase(m, T_CLOSE, "close");
    c = connect_retry(node, port, &lport);
    for (i = 0; i < 3; i++) {
        v = 0xc105e00000000000ULL + (uint64_t)i;
        send_all(c, &v, (int)sizeof v);
    }
    CHECK_EQ(scif_close(c), 0, "scif_close right after sending 3 messages");

    sync_phase(m, T_WAKE, "wake");
    d = connect_retry(node, port, &lport);
    ok("connection that stays silent while the server's recv blocks");
    CHECK_EQ(recv_u32(m), T_WAKE_DONE, "server finished the wake-up checks");
    CHECK_ERR(scif_recv(d, &v, (int)sizeof v, 0), ECONNRESET,
              "scif_recv after the server closed its end fails ECONNRESET");
    sp.epd = d;
    sp.events = SCIF_POLLIN | SCIF_POLLOUT;
    sp.revents = 0;
    CHECK(scif_poll(&sp, 1, 0) == 1 && (sp.revents & SCIF_POLLHUP),
          "scif_poll reports SCIF_POLLHUP on the reset connection");
    CHECK_EQ(scif_close(d), 0, "scif_close of the reset connection");

    sync_phase(m, T_BYE, "bye");
    CHECK_EQ(scif_close(m), 0, "scif_close of the main connection");
    printf("%s %s: %d checks\nPASS\n", prog, role, nchecks);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    if (argc == 3 && strcmp(argv[1], "server") == 0) {
        role = "server";
        is_server = 1;
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
