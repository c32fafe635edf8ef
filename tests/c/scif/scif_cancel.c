/*
 * scif_cancel: threads cancelled with pthread_cancel while blocked in a SCIF call end
 * alone and leave the library usable. A thread blocks in scif_recv (SCIF_RECV_BLOCK, no
 * bytes coming), scif_send (SCIF_SEND_BLOCK, the peer's queue full), scif_accept
 * (SCIF_ACCEPT_SYNC, nobody connecting), scif_poll (no timeout, nothing to read) or
 * scif_connect (to a listener that never accepts), and
 * is cancelled, asynchronously and deferred (a blocking wait is a cancellation point, as
 * a blocking system call is). Each must end within 5 s with PTHREAD_CANCELED; then the
 * same endpoints carry messages both ways and the listener accepts again.
 *
 *   REMORA_NODE=4 ./scif_cancel        prints PASS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <scif.h>
#include "../cancel_join.h"

static scif_epd_t lst, cli, srv;

enum what { RECV, SEND, ACCEPT, POLL, CONNECT };
static const char *const names[] = {"scif_recv", "scif_send", "scif_accept", "scif_poll", "scif_connect"};

/* A listener nobody accepts from: a connect to it waits. */
static struct scif_portID deaf;

struct job {
    enum what what;
    int async;
};

static char big[65536];

static void *blocked(void *arg)
{
    struct job *j = arg;
    if (j->async)
        pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
    for (;;) {
        switch (j->what) {
        case RECV: {
            char b[8];
            scif_recv(srv, b, sizeof b, SCIF_RECV_BLOCK);
            break;
        }
        case SEND:
            scif_send(cli, big, sizeof big, SCIF_SEND_BLOCK);
            break;
        case ACCEPT: {
            struct scif_portID peer;
            scif_epd_t n;
            scif_accept(lst, &peer, &n, SCIF_ACCEPT_SYNC);
            break;
        }
        case POLL: {
            struct scif_pollepd p = {.epd = srv, .events = SCIF_POLLIN, .revents = 0};
            scif_poll(&p, 1, -1);
            break;
        }
        case CONNECT: {
            /* A fresh endpoint each time: a cancelled connect leaves its endpoint bound. */
            scif_epd_t e = scif_open();
            scif_connect(e, &deaf);
            scif_close(e);
            break;
        }
        }
    }
    return NULL;
}

/* scif_connect returns once the listener accepted: a thread of its own connects. */
static void *connecting(void *arg)
{
    return scif_connect(cli, arg) < 0 ? (void *)1 : NULL;
}

static int fail(const char *what)
{
    printf("FAIL: %s (errno %d)\n", what, errno);
    return 1;
}

/* Take every byte queued for srv (the send threads filled its queue). */
static void drain(void)
{
    while (scif_recv(srv, big, sizeof big, 0) > 0)
        ;
}

int main(void)
{
    struct scif_portID me, peer;
    uint16_t self;
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(120);
    if (scif_get_nodeIDs(NULL, 0, &self) < 1)
        return fail("scif_get_nodeIDs");
    lst = scif_open();
    cli = scif_open();
    if (lst < 0 || cli < 0)
        return fail("scif_open");
    int port = scif_bind(lst, 0);
    if (port <= 0 || scif_listen(lst, 4) != 0)
        return fail("scif_bind / scif_listen");
    me.node = self;
    me.port = (uint16_t)port;
    pthread_t ct;
    if (pthread_create(&ct, NULL, connecting, &me) != 0)
        return fail("pthread_create");
    if (scif_accept(lst, &peer, &srv, SCIF_ACCEPT_SYNC) != 0)
        return fail("scif_accept");
    void *crc = NULL;
    pthread_join(ct, &crc);
    if (crc != NULL)
        return fail("scif_connect");
    scif_epd_t deaf_ep = scif_open();
    int deaf_port = scif_bind(deaf_ep, 0);
    if (deaf_port <= 0 || scif_listen(deaf_ep, 16) != 0)
        return fail("the listener nobody accepts from");
    deaf.node = self;
    deaf.port = (uint16_t)deaf_port;
    for (int w = RECV; w <= CONNECT; w++) {
        for (int async = 0; async < 2; async++) {
            struct job j = {.what = (enum what)w, .async = async};
            pthread_t t;
            if (pthread_create(&t, NULL, blocked, &j) != 0)
                return fail("pthread_create");
            usleep(50000);
            int r = cancel_and_join(t, 5);
            if (r != 0) {
                printf("FAIL: a thread blocked in %s (%s cancel) %s\n", names[w], async ? "asynchronous" : "deferred",
                       r == 1 ? "did not end within 5 s" : "did not end by cancellation");
                return 1;
            }
            if (w == SEND)
                drain();
            printf("ok: %s, %s cancel\n", names[w], async ? "asynchronous" : "deferred");
        }
    }
    /* The library is intact: the same pair carries a message both ways. */
    drain();
    uint64_t v = 0x1122334455667788ull, got = 0;
    if (scif_send(cli, &v, 8, SCIF_SEND_BLOCK) != 8)
        return fail("scif_send after the cancellations");
    if (scif_recv(srv, &got, 8, SCIF_RECV_BLOCK) != 8 || got != v)
        return fail("scif_recv after the cancellations");
    got = 0;
    if (scif_send(srv, &v, 8, SCIF_SEND_BLOCK) != 8 || scif_recv(cli, &got, 8, SCIF_RECV_BLOCK) != 8 ||
        got != v)
        return fail("a message the other way after the cancellations");
    /* And the listener accepts a new connection. */
    scif_epd_t old = cli, s2 = -1;
    cli = scif_open();
    if (cli < 0 || pthread_create(&ct, NULL, connecting, &me) != 0)
        return fail("scif_open / pthread_create");
    if (scif_accept(lst, &peer, &s2, SCIF_ACCEPT_SYNC) != 0)
        return fail("scif_accept of a new connection after the cancellations");
    pthread_join(ct, &crc);
    if (crc != NULL)
        return fail("scif_connect of a new connection after the cancellations");
    scif_close(cli);
    cli = old;
    scif_close(s2);
    scif_close(cli);
    scif_close(srv);
    /* The cancelled connects were withdrawn: nothing waits at the deaf listener. */
    scif_epd_t stale = -1;
    errno = 0;
    if (scif_accept(deaf_ep, &peer, &stale, 0) != -1 || errno != EAGAIN) {
        printf("FAIL: a cancelled connect still waits at the listener (accept gave %d, errno %d)\n", stale, errno);
        return 1;
    }
    scif_close(lst);
    scif_close(deaf_ep);
    printf("PASS\n");
    return 0;
}
