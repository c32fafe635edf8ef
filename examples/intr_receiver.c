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
#define PROGRAM "intr_receiver"
#include "example.h"

#define RECEIVER_INTERRUPT_NO 12345
#define WAIT_MS               60000

int main(void)
{
    sci_desc_t dev;
    sci_local_interrupt_t interrupt;
    sci_error_t err;
    unsigned int interrupt_no = RECEIVER_INTERRUPT_NO;
    unsigned int node = 0;

    if (open_sisci(&dev) != 0) return 1;
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
