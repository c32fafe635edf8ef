/*
 * What the SISCI examples share: the constants they name, starting the library, and
 * saying why a call failed.  Each example defines PROGRAM (its name) before including
 * this file.
 */
#ifndef REMORA_EXAMPLE_H
#define REMORA_EXAMPLE_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "sisci_api.h"

#define ADAPTER_NO    0
#define NO_CALLBACK   NULL
#define NO_ARG        NULL
#define NO_FLAGS      0
#define PRINT_COMMAND 1

/* Print why `what` failed and return the program's exit status (1). */
static inline int fail(const char *what, sci_error_t err)
{
    fprintf(stderr, "%s: %s failed: %s (0x%x)\n", PROGRAM, what, SCIGetErrorString(err), (unsigned)err);
    return 1;
}

/* SCIInitialize and SCIOpen; 0 on success, else the exit status (the failure printed). */
static inline int open_sisci(sci_desc_t *dev)
{
    sci_error_t err;
    SCIInitialize(NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIInitialize", err);
    SCIOpen(dev, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIOpen", err);
    return 0;
}

/* The node named by argv[1], else 4. */
static inline unsigned int node_arg(int argc, char *argv[])
{
    return argc > 1 ? (unsigned int)strtoul(argv[1], NULL, 0) : 4;
}

/* SCIConnectSegment, asking again for up to 30 s while the node is unknown (its daemon
 * may not have started yet). */
static inline sci_error_t connect_segment(sci_desc_t dev, sci_remote_segment_t *segment, unsigned int node,
                                   unsigned int id)
{
    struct timespec pause = {0, 20 * 1000 * 1000};
    time_t give_up = time(NULL) + 30;
    sci_error_t err;
    for (;;) {
        SCIConnectSegment(dev, segment, node, id, ADAPTER_NO, NO_CALLBACK, NO_ARG, 30000, NO_FLAGS, &err);
        if (err != SCI_ERR_NO_SUCH_NODEID || time(NULL) > give_up)
            return err;
        nanosleep(&pause, NULL);
    }
}

#endif
