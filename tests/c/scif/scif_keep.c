/*
 * scif_keep: memory of a window gone keeps its bytes wherever it is still mapped, and a
 * long-lived endpoint that registers fresh buffers over and over holds little memory.
 *
 *   server PORT     as node 4
 *   client 4 PORT   as node 8
 *
 * The server registers a buffer, the client scif_mmaps the window; the server unregisters
 * it, unmaps its buffer and registers, unregisters and unmaps fresh 1 MiB buffers: the
 * client's map (valid until unmapped, as MPSS keeps it) still reads the bytes. A buffer
 * registered and unregistered, then inherited by a child of fork that the parent unmaps it
 * under, keeps its bytes in the child. Then 300 fresh 1 MiB buffers are registered,
 * unregistered, checked and unmapped one after the other: the memory of registered windows
 * this process holds (blocks of its window memfds) stays under 8 MiB. Prints PASS.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <scif.h>
#define SCIF_TEST_PROG "scif_keep"
#include "scif_check.h"

#define PAGE 4096
#define MIB (1UL << 20)
#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)
#define AT 0x100000

static uint8_t *fresh(size_t len, int fill)
{
    uint8_t *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_Q(b != MAP_FAILED, "mmap");
    memset(b, fill, len);
    return b;
}

/* Register, unregister and unmap fresh 1 MiB buffers: what the endpoint let go is dealt
 * with at each. */
static void churn(scif_epd_t e, int n)
{
    for (int i = 0; i < n; i++) {
        uint8_t *b = fresh(MIB, 'c');
        off_t w = scif_register(e, b, MIB, 0, RW, 0);
        CHECK_Q(w >= 0, "register a fresh buffer");
        CHECK_EQ_Q(scif_unregister(e, w, MIB), 0, "unregister it");
        CHECK_EQ_Q(munmap(b, MIB), 0, "munmap");
    }
}

/* Bytes of memory the window memfds this process has descriptors of hold. */
static long long window_bytes(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *ent;
    long long n = 0;
    char path[300], target[256];
    while (d && (ent = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", ent->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        struct stat st;
        if (len > 0) {
            target[len] = 0;
            if (strstr(target, "scif-window") && stat(path, &st) == 0)
                n += (long long)st.st_blocks * 512;
        }
    }
    if (d)
        closedir(d);
    return n;
}

static int server(int port)
{
    role = "server";
    scif_epd_t l = scif_open(), e;
    struct scif_portID peer;
    CHECK_EQ(scif_bind(l, port), port, "bind");
    CHECK_EQ(scif_listen(l, 1), 0, "listen");
    CHECK_EQ(scif_accept(l, &peer, &e, SCIF_ACCEPT_SYNC), 0, "accept");

    PHASE("a peer's map of a window unregistered and unmapped");
    uint8_t *b = fresh(4 * PAGE, 'W');
    CHECK_EQ(scif_register(e, b, 4 * PAGE, AT, RW, SCIF_MAP_FIXED), AT, "register at 0x100000");
    send_u32(e, 1);
    CHECK_EQ(recv_u32(e), 2, "the client mapped the window");
    CHECK_EQ(scif_unregister(e, AT, 4 * PAGE), 0, "unregister");
    CHECK_EQ(munmap(b, 4 * PAGE), 0, "munmap the buffer");
    churn(e, 4);
    send_u32(e, 3);
    CHECK_EQ(recv_u32(e), 4, "the client's map still reads the bytes");

    PHASE("a child's inherited buffer");
    b = fresh(4 * PAGE, 'B');
    off_t w = scif_register(e, b, 4 * PAGE, 0, RW, 0);
    CHECK(w >= 0, "register");
    CHECK_EQ(scif_unregister(e, w, 4 * PAGE), 0, "unregister");
    int pp[2];
    CHECK_EQ(pipe(pp), 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        char x;
        if (read(pp[0], &x, 1) != 1)
            _exit(2);
        for (int i = 0; i < 4 * PAGE; i++)
            if (b[i] != 'B') {
                printf("scif_keep child: FAIL: byte %d of its buffer is %d, not 'B'\n", i, b[i]);
                _exit(1);
            }
        _exit(0);
    }
    CHECK(pid > 0, "fork");
    CHECK_EQ(munmap(b, 4 * PAGE), 0, "the parent unmaps the buffer");
    churn(e, 4);
    CHECK_EQ(write(pp[1], "g", 1), 1, "tell the child");
    int st = 0;
    CHECK_EQ(waitpid(pid, &st, 0), pid, "waitpid");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's buffer kept its bytes");

    PHASE("fresh buffers over and over");
    long long most = 0;
    for (int r = 0; r < 300; r++) {
        uint8_t *f = fresh(MIB, 0);
        for (size_t i = 0; i < MIB; i += 512)
            f[i] = (uint8_t)(r + i / 512) | 1;
        w = scif_register(e, f, MIB, 0, RW, 0);
        CHECK_Q(w >= 0, "register a fresh buffer");
        CHECK_EQ_Q(scif_unregister(e, w, MIB), 0, "unregister it");
        for (size_t i = 0; i < MIB; i += 512)
            CHECK_EQ_Q(f[i], (uint8_t)(r + i / 512) | 1, "the buffer keeps its bytes");
        CHECK_EQ_Q(munmap(f, MIB), 0, "munmap");
        long long now = window_bytes();
        if (now > most)
            most = now;
    }
    printf("scif_keep server: note: at most %lld KiB of window memory held\n", most >> 10);
    CHECK(most <= (long long)(8 * MIB), "300 fresh 1 MiB windows: at most 8 MiB held");
    send_u32(e, 5);
    CHECK_EQ(recv_u32(e), 6, "the client is done");
    scif_close(e);
    scif_close(l);
    printf("PASS\n");
    return 0;
}

static int client(int node, int port)
{
    role = "client";
    PHASE("a map of a window unregistered and unmapped");
    int lport;
    scif_epd_t e = connect_retry((uint16_t)node, (uint16_t)port, &lport);
    CHECK_EQ(recv_u32(e), 1, "the server registered");
    uint8_t *m = scif_mmap(NULL, 4 * PAGE, RW, 0, e, AT);
    CHECK(m != SCIF_MMAP_FAILED, "scif_mmap of the server's window");
    CHECK_EQ(m[0], 'W', "the map sees the window");
    send_u32(e, 2);
    CHECK_EQ(recv_u32(e), 3, "the server unregistered, unmapped and went on");
    for (int i = 0; i < 4 * PAGE; i++)
        CHECK_EQ_Q(m[i], 'W', "the map of the window gone keeps its bytes");
    ok("the map of the window gone keeps its bytes");
    send_u32(e, 4);
    CHECK_EQ(recv_u32(e), 5, "the server is done");
    CHECK_EQ(scif_munmap(m, 4 * PAGE), 0, "scif_munmap");
    send_u32(e, 6);
    scif_close(e);
    printf("PASS\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm(60);
    if (argc == 3 && !strcmp(argv[1], "server"))
        return server(parse_u16(argv[2], "port"));
    if (argc == 4 && !strcmp(argv[1], "client"))
        return client(parse_u16(argv[2], "node"), parse_u16(argv[3], "port"));
    fprintf(stderr, "usage: scif_keep server PORT | scif_keep client NODE PORT\n");
    return 2;
}
