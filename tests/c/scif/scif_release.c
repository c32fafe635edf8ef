/*
 * scif_release: memory registered in SCIF windows goes back once the program is done with
 * it. Four 16 MiB buffers are registered, written through by the peer endpoint, then
 * unregistered, unmapped and the endpoint closed: afterwards this process holds no
 * descriptor of a window's memory (each one would keep its 16 MiB allocated until exit).
 * Then the same is done with the unmap after the close. Prints PASS.
 *
 *   REMORA_NODE=4 ./scif_release
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <scif.h>

#define SZ (16UL << 20)
#define N 4

static int fail(const char *what)
{
    printf("FAIL: %s (errno %d)\n", what, errno);
    return 1;
}

/* Descriptors of this process that name a window's memory. */
static int window_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    char path[300], target[256];
    while (d && (e = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len > 0) {
            target[len] = 0;
            n += strstr(target, "scif-window") != NULL;
        }
    }
    if (d)
        closedir(d);
    return n;
}

static struct scif_portID me;

static void *connecting(void *arg)
{
    return scif_connect(*(scif_epd_t *)arg, &me) < 0 ? (void *)1 : NULL;
}

/* A connected pair on this node: *c dialed, *s accepted. */
static int pair(scif_epd_t lst, scif_epd_t *c, scif_epd_t *s)
{
    struct scif_portID peer;
    pthread_t t;
    void *rc = NULL;
    *c = scif_open();
    if (*c < 0 || pthread_create(&t, NULL, connecting, c) != 0)
        return -1;
    if (scif_accept(lst, &peer, s, SCIF_ACCEPT_SYNC) != 0)
        return -1;
    pthread_join(t, &rc);
    return rc == NULL ? 0 : -1;
}

static int round_trip(scif_epd_t lst, int unmap_first)
{
    scif_epd_t c, s;
    char *b[N];
    if (pair(lst, &c, &s) != 0)
        return fail("a connected pair");
    for (int i = 0; i < N; i++) {
        b[i] = mmap(NULL, SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b[i] == MAP_FAILED)
            return fail("mmap");
        memset(b[i], i + 1, SZ);
        off_t at = (off_t)(0x10000000UL * (i + 1));
        if (scif_register(s, b[i], SZ, at, SCIF_PROT_READ | SCIF_PROT_WRITE, SCIF_MAP_FIXED) != at)
            return fail("scif_register");
        char v = (char)(0x40 + i);
        if (scif_vwriteto(c, &v, 1, at + 4096, 0) != 0 || b[i][4096] != v)
            return fail("a write through the window reaches the buffer");
    }
    if (window_fds() == 0)
        return fail("the registered buffers have descriptors while registered");
    for (int i = 0; i < N; i++)
        if (scif_unregister(s, (off_t)(0x10000000UL * (i + 1)), SZ) != 0)
            return fail("scif_unregister");
    if (unmap_first)
        for (int i = 0; i < N; i++)
            munmap(b[i], SZ);
    scif_close(c);
    scif_close(s);
    if (!unmap_first) {
        for (int i = 0; i < N; i++)
            munmap(b[i], SZ);
        /* The next registration (any endpoint) lets go of what was unmapped meanwhile. */
        scif_epd_t c2, s2;
        char *one = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (pair(lst, &c2, &s2) != 0 || scif_register(s2, one, 4096, 0, SCIF_PROT_READ, 0) < 0)
            return fail("a later registration");
        scif_close(c2);
        scif_close(s2);
        munmap(one, 4096);
        scif_epd_t c3, s3;
        if (pair(lst, &c3, &s3) != 0)
            return fail("a third pair");
        scif_close(c3);
        scif_close(s3);
    }
    int left = window_fds();
    if (left != 0) {
        printf("FAIL: %d window descriptor(s) still open after unregister, unmap and close (%s)\n", left,
               unmap_first ? "unmapped before the close" : "unmapped after the close");
        return 1;
    }
    return 0;
}

int main(void)
{
    uint16_t self;
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(120);
    if (scif_get_nodeIDs(NULL, 0, &self) < 1)
        return fail("scif_get_nodeIDs");
    scif_epd_t lst = scif_open();
    int port = scif_bind(lst, 0);
    if (port <= 0 || scif_listen(lst, 4) != 0)
        return fail("scif_bind / scif_listen");
    me.node = self;
    me.port = (uint16_t)port;
    if (round_trip(lst, 1) != 0 || round_trip(lst, 0) != 0)
        return 1;
    scif_close(lst);
    printf("PASS\n");
    return 0;
}
