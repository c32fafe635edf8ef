/*
 * intr_sender: the sending half of the SISCI "Hello, World!" over an
 * interrupt.
 *
 * Connects to interrupt RECEIVER_INTERRUPT_NO of the receiver's node and
 * triggers it.  SCIConnectInterrupt waits up to its timeout for the
 * interrupt to be created; like most SISCI clients, the sender also
 * retries for a while in case the receiver starts late.
 *
 *   REMORA_NODE=8 ./intr_sender 4       # the receiver runs as node 4
 */
#define _POSIX_C_SOURCE 200809L
#define PROGRAM "intr_sender"
#include "example.h"

#define RECEIVER_INTERRUPT_NO 12345
#define CONNECT_TIMEOUT_MS    10000
#define GIVE_UP_AFTER_S       30

int main(int argc, char *argv[])
{
    sci_desc_t dev;
    sci_remote_interrupt_t interrupt;
    sci_error_t err;
    time_t give_up;
    struct timespec pause = { 0, 100 * 1000 * 1000 };
    unsigned int receiver = node_arg(argc, argv);

    if (open_sisci(&dev) != 0) return 1;

    /* Retry while the receiver (or its node) is not there yet. Each attempt
     * waits up to CONNECT_TIMEOUT_MS for the interrupt; an unknown node
     * fails at once, so pause a little before asking again. */
    give_up = time(NULL) + GIVE_UP_AFTER_S;
    for (;;) {
        SCIConnectInterrupt(dev, &interrupt, receiver, ADAPTER_NO, RECEIVER_INTERRUPT_NO,
                            CONNECT_TIMEOUT_MS, NO_FLAGS, &err);
        if (err == SCI_ERR_OK)
            break;
        if (err != SCI_ERR_NO_SUCH_INTNO && err != SCI_ERR_NO_SUCH_NODEID && err != SCI_ERR_TIMEOUT)
            return fail("SCIConnectInterrupt", err);
        if (time(NULL) > give_up)
            return fail("SCIConnectInterrupt (gave up)", err);
        if (err == SCI_ERR_NO_SUCH_NODEID)
            nanosleep(&pause, NULL);
    }

    /* Send the print command: trigger the interrupt. */
    SCITriggerInterrupt(interrupt, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCITriggerInterrupt", err);
    printf("triggered interrupt %d of node %u\n", RECEIVER_INTERRUPT_NO, receiver);

    SCIDisconnectInterrupt(interrupt, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIDisconnectInterrupt", err);
    SCIClose(dev, NO_FLAGS, &err);
    if (err != SCI_ERR_OK) return fail("SCIClose", err);
    SCITerminate();
    return 0;
}
