/*
 * file_size_limit: SISCI memory under a file size limit (ulimit -f, RLIMIT_FSIZE) of
 * 8 MiB, set before SCIInitialize (the node daemon the library starts gets it too).
 * SIGXFSZ is left at its default action, which ends the program: memory sized past the
 * limit would end the test, where it must be refused. A 16 MiB segment is SCI_ERR_NOSPC
 * (the daemon makes its memory); so is 16 MiB of the program's own memory given to
 * SCIRegisterSegmentMemory (the library moves it), whose bytes stay as they were. 1 MiB
 * of each works, before and after. Prints PASS.
 *
 *   REMORA_NODE=4 ./file_size_limit
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include "sisci_api.h"

#define MIB (1UL << 20)

#define EXPECT(cond, what)                                                          \
    do {                                                                            \
        if (!(cond)) {                                                              \
            printf("FAIL line %d: %s\n", __LINE__, what);                           \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

#define EXPECT_ERR(err, want, what)                                                 \
    do {                                                                            \
        if ((err) != (want)) {                                                      \
            printf("FAIL line %d: %s: error 0x%x, expected 0x%x\n", __LINE__, what, \
                   (unsigned)(err), (unsigned)(want));                              \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static uint8_t *fresh(size_t len, int seed)
{
    uint8_t *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(b != MAP_FAILED, "mmap");
    for (size_t i = 0; i < len; i += 4096)
        b[i] = (uint8_t)(seed + i / 4096);
    return b;
}

/* A segment of `size` bytes works: map it, store, load back, remove it. */
static void segment_works(sci_desc_t sd, unsigned int id, size_t size)
{
    sci_local_segment_t seg;
    sci_map_t map;
    sci_error_t err;
    SCICreateSegment(sd, &seg, id, size, NULL, NULL, 0, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCICreateSegment under the limit");
    volatile uint8_t *p = SCIMapLocalSegment(seg, &map, 0, size, NULL, 0, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCIMapLocalSegment");
    p[0] = 0x11;
    p[size - 1] = 0x22;
    EXPECT(p[0] == 0x11 && p[size - 1] == 0x22, "the segment keeps what is stored");
    SCIUnmapSegment(map, 0, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCIUnmapSegment");
    SCIRemoveSegment(seg, 0, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCIRemoveSegment");
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct rlimit lim = { 8 * MIB, 8 * MIB };
    EXPECT(setrlimit(RLIMIT_FSIZE, &lim) == 0, "RLIMIT_FSIZE 8 MiB");

    sci_desc_t sd;
    sci_error_t err;
    SCIInitialize(0, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCIInitialize");
    SCIOpen(&sd, 0, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCIOpen");

    segment_works(sd, 1, MIB);

    sci_local_segment_t big;
    SCICreateSegment(sd, &big, 2, 16 * MIB, NULL, NULL, 0, &err);
    EXPECT_ERR(err, SCI_ERR_NOSPC, "a 16 MiB segment past the limit");

    sci_local_segment_t empty;
    SCICreateSegment(sd, &empty, 3, 0, NULL, NULL, SCI_FLAG_EMPTY, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCICreateSegment(SCI_FLAG_EMPTY)");
    uint8_t *mem = fresh(16 * MIB, 7);
    SCIRegisterSegmentMemory(mem, 16 * MIB, empty, 0, &err);
    EXPECT_ERR(err, SCI_ERR_NOSPC, "SCIRegisterSegmentMemory of 16 MiB past the limit");
    for (size_t i = 0; i < 16 * MIB; i += 4096)
        EXPECT(mem[i] == (uint8_t)(7 + i / 4096), "the memory keeps its bytes");
    uint8_t *small = fresh(MIB, 3);
    SCIRegisterSegmentMemory(small, MIB, empty, 0, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCIRegisterSegmentMemory of 1 MiB after the refusal");
    EXPECT(small[5 * 4096] == 3 + 5, "registered memory keeps its bytes");
    SCIRemoveSegment(empty, 0, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCIRemoveSegment of the registered segment");

    segment_works(sd, 4, MIB);
    SCIClose(sd, 0, &err);
    EXPECT_ERR(err, SCI_ERR_OK, "SCIClose");
    SCITerminate();
    printf("PASS\n");
    return 0;
}
