/*
 * scif_prune_race: threads, each with its own loopback pair, register fresh buffers,
 * unregister them and check that the program's bytes survive. Every unregister gives
 * back what the program let go; one that read /proc/self/maps before another thread
 * moved, registered and unregistered a fresh buffer took that buffer's pages for memory
 * let go, and the program's buffer read zeros. Prints PASS.
 *
 *   REMORA_NODE=4 ./scif_prune_race
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <scif.h>
#define SCIF_TEST_PROG "scif_prune_race"
#include "scif_check.h"

#define PAGE 4096
#define NPG 4
#define NT 4
#define ROUNDS 1500
static volatile int failed;

static uint8_t pattern(long t, int r, int i)
{
    return (uint8_t)(t * 17 + r * 3 + i % 251 + 1) | 1;
}

static void *worker(void *arg)
{
    long t = (long)arg;
    scif_epd_t lp, c, s;
    loop_pair(3100 + t, &lp, &c, &s);
    uint8_t *prev = NULL;
    int prevr = -1;
    for (int r = 0; r < ROUNDS && !failed; r++) {
        uint8_t *buf = mmap(NULL, NPG * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED) {
            perror("mmap");
            exit(2);
        }
        for (int i = 0; i < NPG * PAGE; i++)
            buf[i] = pattern(t, r, i);
        off_t off = scif_register(s, buf, NPG * PAGE, 0, SCIF_PROT_READ | SCIF_PROT_WRITE, 0);
        if (off < 0) {
            printf("FAIL: thread %ld round %d: scif_register: %s\n", t, r, strerror(errno));
            failed = 1;
            break;
        }
        if (scif_unregister(s, off, NPG * PAGE) != 0) {
            printf("FAIL: thread %ld: scif_unregister: %s\n", t, strerror(errno));
            failed = 1;
            break;
        }
        if (prev) {
            for (int i = 0; i < NPG * PAGE; i++)
                if (prev[i] != pattern(t, prevr, i)) {
                    printf("FAIL: thread %ld round %d: byte %d is %d, not %d (given back while mapped)\n",
                           t, prevr, i, prev[i], pattern(t, prevr, i));
                    failed = 1;
                    break;
                }
            munmap(prev, NPG * PAGE);
        }
        prev = buf;
        prevr = r;
    }
    scif_close(c);
    scif_close(s);
    scif_close(lp);
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    role = "single";
    signal(SIGALRM, on_alarm);
    alarm(60);
    pthread_t th[NT];
    for (long t = 0; t < NT; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    if (failed) {
        printf("FAILED\n");
        return 1;
    }
    printf("PASS\n");
    return 0;
}
