/*
 * scif_queue: the size of an endpoint's receive queue, as MPSS has it (a
 * circular buffer of SCIF_ENDPT_QP_SIZE = 4 KiB, which holds 4095 bytes of
 * payload), and its blocking semantics, over a loopback connection to the
 * own node, in a single process.
 *
 *   scif_queue [BYTES]            (run with REMORA_NODE=4; BYTES default 4096,
 *                                  the queue REMORA_SCIF_QUEUE_BYTES should give)
 *
 * With the receiver idle, non-blocking one-byte scif_send()s are taken until
 * exactly BYTES - 1 bytes wait (message headers cost nothing); the next returns 0
 * (the guide: a non-blocking send "only sends as much data as there is room in
 * the send queue", and returns the count); a blocking send of one more byte
 * waits until the receiver reads, then completes; every byte arrives intact
 * and in order; a big non-blocking send queues exactly BYTES - 1.  Both
 * directions.
 * Uses port 2110 of its node.
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

#define SCIF_TEST_PROG "scif_queue"
#include "scif_check.h"

#define PORT 2110

struct acceptor {
    scif_epd_t lep, nepd;
    int rc;
};

static void *acceptor_main(void *p)
{
    struct acceptor *a = p;
    struct scif_portID peer;
    a->rc = scif_accept(a->lep, &peer, &a->nepd, SCIF_ACCEPT_SYNC);
    return NULL;
}

struct blocked {
    scif_epd_t epd;
    volatile int done;
    int rc;
};

static void *blocked_send(void *p)
{
    struct blocked *b = p;
    uint8_t one = 0xee;
    b->rc = scif_send(b->epd, &one, 1, SCIF_SEND_BLOCK);
    b->done = 1;
    return NULL;
}

static void queue_holds(scif_epd_t tx, scif_epd_t rx, int size, const char *dir)
{
    int queue = size - 1;
    uint8_t *sent = malloc((size_t)queue * 3 + 1), *got = malloc((size_t)queue * 3 + 1);
    struct blocked b;
    struct pollfd pfd;
    pthread_t th;
    int n = 0, r, i;
    char what[160];

    CHECK_Q(sent && got, "malloc");
    PHASE(dir);
    for (;;) {
        uint8_t one = (uint8_t)(n % 251);
        r = scif_send(tx, &one, 1, 0);
        if (r == 0)
            break;
        CHECK_EQ_Q(r, 1, "a non-blocking one-byte scif_send queues it or nothing");
        sent[n++] = one;
        if (n > queue)
            FAIL("more than %d bytes queued", queue);
    }
    snprintf(what, sizeof what, "an idle receiver's %d-byte queue takes exactly %d one-byte messages",
             size, queue);
    CHECK_EQ(n, queue, what);
    CHECK_EQ(scif_send(tx, sent, 2, 0), 0, "a non-blocking scif_send into the full queue returns 0");
    pfd.fd = scif_get_fd(tx);
    pfd.events = POLLOUT;
    pfd.revents = 0;
    CHECK_EQ(poll(&pfd, 1, 0), 0, "the full queue's sender is not POLLOUT");

    b.epd = tx;
    b.done = 0;
    b.rc = -2;
    CHECK_EQ_Q(pthread_create(&th, NULL, blocked_send, &b), 0, "start the blocked sender");
    msleep(200);
    CHECK(!b.done, "a blocking scif_send of one more byte waits for the receiver");
    CHECK_EQ(scif_recv(rx, got, 1, SCIF_RECV_BLOCK), 1, "the receiver takes one byte");
    CHECK_EQ_Q(pthread_join(th, NULL), 0, "join the blocked sender");
    CHECK_EQ(b.rc, 1, "then the blocking scif_send completes");
    sent[n++] = 0xee;
    CHECK_EQ(scif_recv(rx, got + 1, queue, SCIF_RECV_BLOCK), queue, "the receiver takes the rest");
    CHECK(memcmp(got, sent, (size_t)n) == 0, "every byte intact and in order");

    for (i = 0; i < queue * 3; i++)
        sent[i] = (uint8_t)(i % 253);
    snprintf(what, sizeof what, "a non-blocking scif_send of %d bytes queues %d", queue * 3, queue);
    CHECK_EQ(scif_send(tx, sent, queue * 3, 0), queue, what);
    CHECK_EQ(scif_recv(rx, got, queue, SCIF_RECV_BLOCK), queue, "which the receiver takes");
    CHECK(memcmp(got, sent, (size_t)queue) == 0, "intact");
    CHECK_EQ(scif_recv(rx, got, 1, 0), 0, "and nothing more is queued");
    free(sent);
    free(got);
}

int main(int argc, char **argv)
{
    int queue = 4096;
    struct scif_portID dst;
    struct acceptor acc;
    pthread_t th;
    scif_epd_t c;

    if (argc > 1) {
        char *end;
        long v = strtol(argv[1], &end, 10);
        if (*argv[1] == '\0' || *end != '\0' || v < 1 || v > (16 << 20)) {
            fprintf(stderr, "%s: bad queue size '%s'\n", prog, argv[1]);
            return 2;
        }
        queue = (int)v;
    }
    role = "loopback";
    signal(SIGALRM, on_alarm);
    alarm(60);
    PHASE("connect");
    acc.lep = scif_open();
    CHECK_Q(acc.lep != SCIF_OPEN_FAILED, "scif_open");
    CHECK_EQ_Q(scif_bind(acc.lep, PORT), PORT, "scif_bind");
    CHECK_EQ_Q(scif_listen(acc.lep, 2), 0, "scif_listen");
    acc.rc = -2;
    CHECK_EQ_Q(pthread_create(&th, NULL, acceptor_main, &acc), 0, "start the acceptor");
    c = scif_open();
    CHECK_Q(c != SCIF_OPEN_FAILED, "scif_open");
    dst.node = my_node();
    dst.port = PORT;
    CHECK(scif_connect(c, &dst) > 0, "scif_connect to the own node");
    CHECK_EQ_Q(pthread_join(th, NULL), 0, "join the acceptor");
    CHECK_EQ(acc.rc, 0, "scif_accept");

    queue_holds(c, acc.nepd, queue, "connector to acceptor");
    queue_holds(acc.nepd, c, queue, "acceptor to connector");

    CHECK_EQ_Q(scif_close(c), 0, "scif_close");
    CHECK_EQ_Q(scif_close(acc.nepd), 0, "scif_close");
    CHECK_EQ_Q(scif_close(acc.lep), 0, "scif_close");
    printf("%s: PASS\n", prog);
    return 0;
}
