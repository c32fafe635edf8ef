/*
 * fork_inherited_map: a map of a segment on another host, inherited by a child made by
 * fork. The child's stores into it reach no home (the map is plain memory in the child),
 * and its sequence check must say so instead of SCI_SEQ_OK; the parent's map goes on
 * working after the child, its stores reach the home.
 *
 *   fork_inherited_map home          create segment 9, print "ready", wait for the user's
 *                                    "done" word, check what arrived
 *   fork_inherited_map user <node>   map node's segment 9, fork, store from both sides
 *
 * Words of the segment: [0] done (3), [1] the parent's stores, [2] the child's store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "sisci_api.h"

#define SEG_ID 9
#define SIZE 4096

static int fail(const char *what, sci_error_t err)
{
    fprintf(stderr, "%s: 0x%x\n", what, (unsigned int)err);
    return 1;
}

static int home(void)
{
    sci_desc_t dev;
    sci_local_segment_t seg;
    sci_map_t map;
    sci_error_t err;
    volatile unsigned int *w;
    int i;

    SCIOpen(&dev, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIOpen", err);
    SCICreateSegment(dev, &seg, SEG_ID, SIZE, NULL, NULL, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCICreateSegment", err);
    SCIPrepareSegment(seg, 0, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIPrepareSegment", err);
    w = (volatile unsigned int *)SCIMapLocalSegment(seg, &map, 0, SIZE, NULL, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIMapLocalSegment", err);
    memset((void *)w, 0, SIZE);
    SCISetSegmentAvailable(seg, 0, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCISetSegmentAvailable", err);
    printf("ready\n");
    fflush(stdout);
    for (i = 0; i < 3000 && w[0] != 3; i++)
        usleep(10000);
    if (w[0] != 3) {
        fprintf(stderr, "the user never said done\n");
        return 1;
    }
    if (w[1] != 0xabc) {
        fprintf(stderr, "the parent's store after the fork: 0x%x\n", w[1]);
        return 1;
    }
    if (w[2] != 0) {
        fprintf(stderr, "the child's store reached the home: 0x%x\n", w[2]);
        return 1;
    }
    printf("home: the parent's stores arrived, the child's did not\n");
    return 0;
}

static int user(unsigned int node)
{
    sci_desc_t dev;
    sci_remote_segment_t seg;
    sci_map_t map;
    sci_sequence_t seq;
    sci_error_t err;
    sci_sequence_status_t st;
    volatile unsigned int *w;
    pid_t pid;
    int status;

    SCIOpen(&dev, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIOpen", err);
    SCIConnectSegment(dev, &seg, node, SEG_ID, 0, NULL, NULL, 30000, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIConnectSegment", err);
    w = (volatile unsigned int *)SCIMapRemoteSegment(seg, &map, 0, SIZE, NULL, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCIMapRemoteSegment", err);
    SCICreateMapSequence(map, &seq, 0, &err);
    if (err != SCI_ERR_OK) return fail("SCICreateMapSequence", err);
    w[1] = 1;
    st = SCICheckSequence(seq, 0, &err);
    if (st != SCI_SEQ_OK) return fail("SCICheckSequence before the fork", err);

    /* Nothing of the parent's left on its way (the pager's ticks settle its pages): the
     * child's check cannot lean on the parent's pending stores to fail. */
    usleep(50 * 1000);
    pid = fork();
    if (pid < 0) return fail("fork", 0);
    if (pid == 0) {
        /* The child: its store stays in its own copy of the memory. */
        w[2] = 0x77;
        st = SCICheckSequence(seq, 0, &err);
        fprintf(stderr, "child: sequence check %d (error 0x%x)\n", (int)st, (unsigned int)err);
        _exit(st == SCI_SEQ_OK ? 10 : 0);
    }
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return fail("waitpid", 0);
    if (WEXITSTATUS(status) == 10) {
        fprintf(stderr, "the child's sequence check said SCI_SEQ_OK for a store that reached no home\n");
        return 1;
    }
    if (WEXITSTATUS(status) != 0) return fail("the child", (sci_error_t)WEXITSTATUS(status));
    w[1] = 0xabc;
    st = SCICheckSequence(seq, 0, &err);
    if (st != SCI_SEQ_OK) return fail("SCICheckSequence after the fork", err);
    w[0] = 3;
    st = SCICheckSequence(seq, 0, &err);
    if (st != SCI_SEQ_OK) return fail("SCICheckSequence of done", err);
    printf("user: passed\n");
    return 0;
}

int main(int argc, char *argv[])
{
    sci_error_t err;
    int rc;

    SCIInitialize(0, &err);
    if (err != SCI_ERR_OK) return fail("SCIInitialize", err);
    if (argc == 2 && strcmp(argv[1], "home") == 0)
        rc = home();
    else if (argc == 3 && strcmp(argv[1], "user") == 0)
        rc = user((unsigned int)strtoul(argv[2], NULL, 0));
    else {
        fprintf(stderr, "usage: %s home | user <node>\n", argv[0]);
        rc = 2;
    }
    SCITerminate();
    return rc;
}
