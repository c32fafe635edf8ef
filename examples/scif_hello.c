/*
 * SCIF hello world on Remora: a server and a client on two nodes (or the same node).
 *
 *   REMORA_NODE=4 ./scif_hello server 2050 &
 *   REMORA_NODE=8 ./scif_hello client 4 2050
 *
 * The client connects, sends a greeting as a message, registers a buffer, and writes a
 * second greeting straight into the server's registered window with scif_writeto; a
 * fence signal tells the server the data is there. Built like an MPSS tutorial program:
 *   cc -I$PREFIX/include scif_hello.c -L$PREFIX/lib64 -lscif
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <scif.h>

#define PAGE 4096
#define WINDOW 0x80000 /* the server's window, at a fixed offset both sides know */
#define FLAG 0x100     /* where the fence signal lands in that window */

static void die(const char *what)
{
    fprintf(stderr, "scif_hello: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int server(uint16_t port)
{
    struct scif_portID peer;
    scif_epd_t l, epd;
    char msg[64] = {0};
    volatile uint64_t *flag;
    void *win;

    if ((l = scif_open()) == SCIF_OPEN_FAILED) die("scif_open");
    if (scif_bind(l, port) != port) die("scif_bind");
    if (scif_listen(l, 1) < 0) die("scif_listen");
    if (scif_accept(l, &peer, &epd, SCIF_ACCEPT_SYNC) < 0) die("scif_accept");
    if (posix_memalign(&win, PAGE, PAGE)) die("posix_memalign");
    memset(win, 0, PAGE);
    if (scif_register(epd, win, PAGE, WINDOW, SCIF_PROT_READ | SCIF_PROT_WRITE, SCIF_MAP_FIXED) != WINDOW)
        die("scif_register");
    if (scif_send(epd, "ready", 6, SCIF_SEND_BLOCK) != 6) die("scif_send");
    if (scif_recv(epd, msg, 32, SCIF_RECV_BLOCK) != 32) die("scif_recv");
    printf("message from node %u port %u: %s\n", peer.node, peer.port, msg);
    flag = (volatile uint64_t *)((char *)win + FLAG);
    while (*flag != 1) /* the client's fence signal */
        ;
    printf("written into my window: %s\n", (char *)win);
    scif_close(epd);
    scif_close(l);
    return 0;
}

static int client(uint16_t node, uint16_t port)
{
    struct scif_portID dst = {node, port};
    scif_epd_t epd;
    char msg[32] = "Hello, World! (a message)";
    char ready[6];
    void *buf;
    int tries;

    if ((epd = scif_open()) == SCIF_OPEN_FAILED) die("scif_open");
    for (tries = 0; scif_connect(epd, &dst) < 0; tries++) {
        if ((errno != ECONNREFUSED && errno != ENODEV) || tries > 500) die("scif_connect");
        usleep(20000);
    }
    if (scif_recv(epd, ready, 6, SCIF_RECV_BLOCK) != 6) die("scif_recv");
    if (scif_send(epd, msg, 32, SCIF_SEND_BLOCK) != 32) die("scif_send");
    if (posix_memalign(&buf, PAGE, PAGE)) die("posix_memalign");
    strcpy(buf, "Hello, World! (an RMA)");
    if (scif_register(epd, buf, PAGE, 0, SCIF_PROT_READ | SCIF_PROT_WRITE, 0) == SCIF_REGISTER_FAILED)
        die("scif_register");
    if (scif_vwriteto(epd, buf, 64, WINDOW, 0) < 0) die("scif_vwriteto");
    if (scif_fence_signal(epd, 0, 0, WINDOW + FLAG, 1, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_REMOTE) < 0)
        die("scif_fence_signal");
    scif_close(epd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "server") == 0)
        return server((uint16_t)atoi(argv[2]));
    if (argc == 4 && strcmp(argv[1], "client") == 0)
        return client((uint16_t)atoi(argv[2]), (uint16_t)atoi(argv[3]));
    fprintf(stderr, "usage: %s server PORT | client NODE PORT\n", argv[0]);
    return 2;
}
