/*
 * intr_receiver: the receiving half of the SISCI "Hello, World!" over an
 * interrupt.
 *
 * Creates interrupt RECEIVER_INTERRUPT_NO with SCI_FLAG_FIXED_INTNO, so the
 * sender knows the number without being told, and waits for it to be
 * triggered.  A trigger that comes before the wait is not lost.
 *
 *   REMORA_NODE=4 ./intr_receiver       # node 4 owns the interrupt
 */
#include <stdio.h>
#include <stdlib.h>
#include "sisci_api.h"

#define RECEIVER_INTERRUPT_NO 12345
#define ADAPTER_NO            0
#define NO_CALLBACK           NULL
#define NO_ARG                NULL
#define NO_FLAGS              0
#define WAIT_MS               60000

static int fail(const char *what, sci_error_t err)
{
    fprintf(stderr, "intr_receiver: %s failed: %s (0x%x)\n", what, SCIGetErrorString(err), (unsigned)err);
    return 1;
}

int main(void)
{
    sci_desc_t dev;
    sci_local_interrupt_t interrupt;
    sci_error_t err;
    unsigned int interrupt_no = RECEIVER_INTERRUPT_NO;
    unsigned int node = 0;

    SCIInitialize(NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIInitialize", err);
    SCIOpen(&dev, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIOpen", err);
    SCIGetLocalNodeId(ADAPTER_NO, &node, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIGetLocalNodeId", err);

    SCICreateInterrupt(dev, &interrupt, ADAPTER_NO, &interrupt_no, NO_CALLBACK, NO_ARG,
                       SCI_FLAG_FIXED_INTNO, &err);
    if (err != SCI_ERR_OK) return fail("SCICreateInterrupt", err);
    printf("node %u: interrupt %u created, waiting for the sender\n", node, interrupt_no);
    fflush(stdout);

    /* The guide waits forever; a bound keeps a lost sender from hanging us. */
    SCIWaitForInterrupt(interrupt, WAIT_MS, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIWaitForInterrupt", err);
    printf("Hello, World!\n");
    fflush(stdout);

    SCIRemoveInterrupt(interrupt, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIRemoveInterrupt", err);
    SCIClose(dev, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIClose", err);
    SCITerminate();
    return 0;
}
