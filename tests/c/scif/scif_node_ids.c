/*
 * scif_node_ids: scif_get_nodeIDs gives whole node ids, also the largest one Remora
 * allows (65535), never ids cut to 16 bits.
 *
 *   REMORA_NODE=<self> scif_node_ids <self> [other node that runs]
 *
 * Checks that *self is <self>, that the count is what the list holds (sorted, no
 * duplicates), and that both nodes are listed. Prints "PASS" and exits 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <scif.h>

static int fails;

#define CHECK(cond, what)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "scif_node_ids: line %d: %s\n", __LINE__, what);                 \
            fails++;                                                                         \
        }                                                                                    \
    } while (0)

int main(int argc, char *argv[])
{
    uint16_t nodes[64], self = 0;
    unsigned long want_self, other = 0;
    int n, i, seen_self = 0, seen_other = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s <self> [other]\n", argv[0]);
        return 2;
    }
    want_self = strtoul(argv[1], NULL, 0);
    if (argc > 2)
        other = strtoul(argv[2], NULL, 0);
    n = scif_get_nodeIDs(nodes, 64, &self);
    CHECK(n >= 1 && n <= 64, "a count between 1 and 64");
    CHECK(self == want_self, "*self is this process's node, whole");
    for (i = 0; i < n && i < 64; i++) {
        printf("node %u\n", (unsigned)nodes[i]);
        CHECK(nodes[i] != 0, "no node 0 (a cut id would read as one)");
        if (i > 0)
            CHECK(nodes[i - 1] < nodes[i], "ascending, without duplicates");
        seen_self |= nodes[i] == want_self;
        seen_other |= other != 0 && nodes[i] == other;
    }
    CHECK(seen_self, "the own node is listed");
    CHECK(other == 0 || seen_other, "the other node is listed");
    if (fails)
        return 1;
    printf("self %u, %d nodes: PASS\n", (unsigned)self, n);
    return 0;
}
