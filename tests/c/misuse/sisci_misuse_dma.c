/*
 * sisci_misuse_dma: the misuse matrix of SISCI's DMA queue, DMA channel, interrupt, data
 * interrupt, flag interrupt and hardware-only calls (issue 18 item 3); the segment, map and
 * copy calls are in sisci_misuse_seg.c. Each row is one call made wrongly on purpose and
 * the code libsisci documents for it (capi/sisci). One ROW line per row (misuse.h).
 */
#include "misuse.h"
#include "sisci_api.h"

#define SEG 65536u
#define ID 7201u
#define NO_NODE 250u
#define BADFLAG 0x40000000u
#define INTNO 7301u
#define DINTNO 7302u

#define R(call, misuse, want, ...)                                                                     \
    do {                                                                                               \
        sci_error_t e_ = (sci_error_t)0x7eadbeef;                                                      \
        __VA_ARGS__;                                                                                   \
        ROW(call, misuse, want, e_);                                                                   \
    } while (0)

static sci_desc_t dev, fdev;
static sci_local_segment_t src, target, unprep;
static sci_remote_segment_t rseg, frseg;
static sci_dma_queue_t dq, fdq;
static unsigned int node;

static void dma_queue_calls(void)
{
    sci_dma_queue_t q;
    dis_dma_vec_t vec[2];
    char buf[64];

    R("SCICreateDMAQueue", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCICreateDMAQueue(NULL, &q, 0, 2, 0, &e_));
    R("SCICreateDMAQueue", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCICreateDMAQueue(fdev, &q, 0, 2, 0, &e_));
    R("SCICreateDMAQueue", KIND, SCI_ERR_ILLEGAL_PARAMETER, SCICreateDMAQueue((sci_desc_t)src, &q, 0, 2, 0, &e_));
    R("SCICreateDMAQueue", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCICreateDMAQueue(dev, NULL, 0, 2, 0, &e_));
    R("SCICreateDMAQueue", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO, SCICreateDMAQueue(dev, &q, 9, 2, 0, &e_));
    R("SCICreateDMAQueue", RANGE, SCI_ERR_ILLEGAL_PARAMETER, SCICreateDMAQueue(dev, &q, 0, 1u << 20, 0, &e_));
    R("SCICreateDMAQueue", FLAG, SCI_ERR_ILLEGAL_FLAG, SCICreateDMAQueue(dev, &q, 0, 2, BADFLAG, &e_));
    R("SCICreateDMAQueue", HW, SCI_ERR_NOT_SUPPORTED, SCICreateDMAQueue(dev, &q, 0, 2, SCI_FLAG_DMA_PHDMA, &e_));

    R("SCIRemoveDMAQueue", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveDMAQueue(NULL, 0, &e_));
    R("SCIRemoveDMAQueue", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveDMAQueue(fdq, 0, &e_));
    R("SCIRemoveDMAQueue", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIRemoveDMAQueue(dq, BADFLAG, &e_));
    R("SCIAbortDMAQueue", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIAbortDMAQueue(NULL, 0, &e_));
    R("SCIAbortDMAQueue", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIAbortDMAQueue(fdq, 0, &e_));
    R("SCIAbortDMAQueue", STATE, SCI_ERR_ILLEGAL_OPERATION, SCIAbortDMAQueue(dq, 0, &e_)); /* IDLE */
    R("SCIAbortDMAQueue", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIAbortDMAQueue(dq, BADFLAG, &e_));
    ROW("SCIDMAQueueState", NULLH, SCI_DMAQUEUE_ERROR, SCIDMAQueueState(NULL));
    ROW("SCIDMAQueueState", FREED, SCI_DMAQUEUE_ERROR, SCIDMAQueueState(fdq));
    ROW("SCIDMAQueueState", KIND, SCI_DMAQUEUE_ERROR, SCIDMAQueueState((sci_dma_queue_t)rseg));
    R("SCIWaitForDMAQueue", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForDMAQueue(NULL, 10, 0, &e_));
    R("SCIWaitForDMAQueue", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForDMAQueue(fdq, 10, 0, &e_));
    R("SCIWaitForDMAQueue", STATE, SCI_ERR_ILLEGAL_OPERATION, SCIWaitForDMAQueue(dq, 10, 0, &e_));
    R("SCIWaitForDMAQueue", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIWaitForDMAQueue(dq, 10, BADFLAG, &e_));

    R("SCIStartDmaTransfer", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransfer(NULL, src, rseg, 0, 16, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransfer", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransfer(fdq, src, rseg, 0, 16, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransfer", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransfer(dq, src, frseg, 0, 16, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransfer", KIND, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransfer(dq, (sci_local_segment_t)rseg, rseg, 0, 16, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransfer", STATE, SCI_ERR_SEGMENT_NOT_PREPARED,
      SCIStartDmaTransfer(dq, unprep, rseg, 0, 16, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransfer", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCIStartDmaTransfer(dq, src, rseg, 1, SEG, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransfer", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCIStartDmaTransfer(dq, src, rseg, 0, 16, ~(size_t)0 - 8, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransfer", RANGE, SCI_ERR_OUT_OF_RANGE, SCIStartDmaTransfer(dq, src, rseg, 0, 0, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransfer", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIStartDmaTransfer(dq, src, rseg, 0, 16, 0, NULL, NULL, BADFLAG, &e_));
    R("DISStartDmaTransfer", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      DISStartDmaTransfer(fdq, src, rseg, 0, 16, 0, NULL, NULL, 0, &e_));
    R("DISStartDmaTransfer", RANGE, SCI_ERR_OUT_OF_RANGE,
      DISStartDmaTransfer(dq, src, rseg, 0, 16, SEG, NULL, NULL, 0, &e_));

    memset(vec, 0, sizeof vec);
    vec[0].size = 16;
    vec[1].size = 16;
    vec[1].remote_offset = SEG - 8;
    R("SCIStartDmaTransferVec", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransferVec(dq, src, rseg, 2, NULL, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferVec", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransferVec(fdq, src, rseg, 1, vec, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferVec", RANGE, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransferVec(dq, src, rseg, 0, vec, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferVec", RANGE, SCI_ERR_MAX_ENTRIES,
      SCIStartDmaTransferVec(dq, src, rseg, (size_t)-1, vec, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferVec", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCIStartDmaTransferVec(dq, src, rseg, 2, vec, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferVec", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIStartDmaTransferVec(dq, src, rseg, 1, vec, NULL, NULL, BADFLAG, &e_));
    R("DISStartDmaTransferVec", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      DISStartDmaTransferVec(fdq, src, rseg, 1, vec, NULL, NULL, 0, &e_));

    R("SCIStartDmaTransferMem", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransferMem(dq, NULL, rseg, 16, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferMem", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransferMem(fdq, buf, rseg, 16, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferMem", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIStartDmaTransferMem(dq, buf, frseg, 16, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferMem", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCIStartDmaTransferMem(dq, buf, rseg, 16, SEG - 8, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferMem", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCIStartDmaTransferMem(dq, (void *)(~(size_t)0 - 4), rseg, 16, 0, NULL, NULL, 0, &e_));
    R("SCIStartDmaTransferMem", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIStartDmaTransferMem(dq, buf, rseg, 16, 0, NULL, NULL, BADFLAG, &e_));

    R("SCIEnqueueDMATransfer", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIEnqueueDMATransfer(NULL, src, rseg, 0, 0, 16, 0, &e_));
    R("SCIEnqueueDMATransfer", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIEnqueueDMATransfer(fdq, src, rseg, 0, 0, 16, 0, &e_));
    R("SCIEnqueueDMATransfer", RANGE, SCI_ERR_OUT_OF_RANGE, SCIEnqueueDMATransfer(dq, src, rseg, 0, SEG, 16, 0, &e_));
    R("SCIEnqueueDMATransfer", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIEnqueueDMATransfer(dq, src, rseg, 0, 0, 16, BADFLAG, &e_));
    R("SCIPostDMAQueue", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIPostDMAQueue(NULL, NULL, NULL, 0, &e_));
    R("SCIPostDMAQueue", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIPostDMAQueue(fdq, NULL, NULL, 0, &e_));
    R("SCIPostDMAQueue", STATE, SCI_ERR_ILLEGAL_OPERATION, SCIPostDMAQueue(dq, NULL, NULL, 0, &e_)); /* empty */
    R("SCIResetDMAQueue", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIResetDMAQueue(NULL, 0, &e_));
    R("SCIResetDMAQueue", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIResetDMAQueue(fdq, 0, &e_));
    R("SCIResetDMAQueue", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIResetDMAQueue(dq, BADFLAG, &e_));
    R("SCIphDmaEnqueue", HW, SCI_ERR_NOT_SUPPORTED, SCIphDmaEnqueue(dq, 16, 0, node, 0, 0, 0, &e_));
    R("SCIphDmaStart", HW, SCI_ERR_NOT_SUPPORTED, SCIphDmaStart(dq, NULL, NULL, 0, &e_));
    ROW("SCIDMAQueueState", STATE, SCI_DMAQUEUE_IDLE, SCIDMAQueueState(dq)); /* no failure posted */
}

static void dma_channel_calls(void)
{
    sci_dma_channel_t ch, fch;
    sci_error_t e;

    SCIRequestDMAChannel(dev, &fch, 0, SCI_DMA_TYPE_DONTCARE, SCI_DMA_CHANNEL_ID_DONTCARE, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIReturnDMAChannel(fch, &e);
    MUST(e == SCI_ERR_OK);
    R("SCIRequestDMAChannel", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCIRequestDMAChannel(NULL, &ch, 0, SCI_DMA_TYPE_DONTCARE, SCI_DMA_CHANNEL_ID_DONTCARE, 0, &e_));
    R("SCIRequestDMAChannel", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIRequestDMAChannel(fdev, &ch, 0, SCI_DMA_TYPE_DONTCARE, SCI_DMA_CHANNEL_ID_DONTCARE, 0, &e_));
    R("SCIRequestDMAChannel", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIRequestDMAChannel(dev, NULL, 0, SCI_DMA_TYPE_DONTCARE, SCI_DMA_CHANNEL_ID_DONTCARE, 0, &e_));
    R("SCIRequestDMAChannel", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO,
      SCIRequestDMAChannel(dev, &ch, 9, SCI_DMA_TYPE_DONTCARE, SCI_DMA_CHANNEL_ID_DONTCARE, 0, &e_));
    R("SCIRequestDMAChannel", RANGE, SCI_ERR_ILLEGAL_PARAMETER,
      SCIRequestDMAChannel(dev, &ch, 0, 77, SCI_DMA_CHANNEL_ID_DONTCARE, 0, &e_));
    R("SCIRequestDMAChannel", RANGE, SCI_ERR_ILLEGAL_PARAMETER,
      SCIRequestDMAChannel(dev, &ch, 0, SCI_DMA_TYPE_DONTCARE, 100000, 0, &e_));
    R("SCIRequestDMAChannel", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIRequestDMAChannel(dev, &ch, 0, SCI_DMA_TYPE_DONTCARE, SCI_DMA_CHANNEL_ID_DONTCARE, BADFLAG, &e_));
    SCIRequestDMAChannel(dev, &ch, 0, SCI_DMA_TYPE_DONTCARE, 0, 0, &e);
    MUST(e == SCI_ERR_OK);
    {
        sci_dma_channel_t other;
        R("SCIRequestDMAChannel", STATE, SCI_ERR_BUSY,
          SCIRequestDMAChannel(dev, &other, 0, SCI_DMA_TYPE_DONTCARE, 0, 0, &e_));
    }
    R("SCIAssignDMAChannel", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIAssignDMAChannel(NULL, dq, 0, &e_));
    R("SCIAssignDMAChannel", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIAssignDMAChannel(fch, dq, 0, &e_));
    R("SCIAssignDMAChannel", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIAssignDMAChannel(ch, fdq, 0, &e_));
    R("SCIAssignDMAChannel", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIAssignDMAChannel(ch, dq, BADFLAG, &e_));
    R("SCIReturnDMAChannel", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIReturnDMAChannel(NULL, &e_));
    R("SCIReturnDMAChannel", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIReturnDMAChannel(fch, &e_));
    SCIReturnDMAChannel(ch, &e);
    MUST(e == SCI_ERR_OK);
}

static void interrupt_calls(void)
{
    sci_local_interrupt_t intr, fintr, i;
    sci_remote_interrupt_t rintr, frintr, r;
    unsigned int no = INTNO, n;
    sci_error_t e;

    SCICreateInterrupt(dev, &intr, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e);
    MUST(e == SCI_ERR_OK);
    n = 0;
    SCICreateInterrupt(dev, &fintr, 0, &n, NULL, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIConnectInterrupt(dev, &frintr, node, 0, n, 1000, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIDisconnectInterrupt(frintr, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveInterrupt(fintr, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIConnectInterrupt(dev, &rintr, node, 0, INTNO, 1000, 0, &e);
    MUST(e == SCI_ERR_OK);

    n = INTNO + 10;
    R("SCICreateInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateInterrupt(NULL, &i, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));
    R("SCICreateInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateInterrupt(fdev, &i, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));
    R("SCICreateInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateInterrupt(dev, NULL, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));
    R("SCICreateInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCICreateInterrupt(dev, &i, 0, NULL, NULL, NULL, 0, &e_));
    R("SCICreateInterrupt", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO,
      SCICreateInterrupt(dev, &i, 9, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));
    R("SCICreateInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCICreateInterrupt(dev, &i, 0, &n, NULL, NULL, BADFLAG, &e_));
    n = INTNO;
    R("SCICreateInterrupt", STATE, SCI_ERR_INTNO_USED,
      SCICreateInterrupt(dev, &i, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));
    R("SCICreateNamedInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateNamedInterrupt(NULL, &i, 0, "misuse", &n, NULL, NULL, 0, &e_));
    R("SCICreateNamedInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateNamedInterrupt(fdev, &i, 0, "misuse", &n, NULL, NULL, 0, &e_));
    R("SCICreateNamedInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateNamedInterrupt(dev, &i, 0, NULL, &n, NULL, NULL, 0, &e_));
    R("SCICreateNamedInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateNamedInterrupt(dev, NULL, 0, "misuse", &n, NULL, NULL, 0, &e_));
    R("SCICreateNamedInterrupt", RANGE, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateNamedInterrupt(dev, &i, 0, "", &n, NULL, NULL, 0, &e_));
    R("SCICreateNamedInterrupt", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO,
      SCICreateNamedInterrupt(dev, &i, 9, "misuse", &n, NULL, NULL, 0, &e_));
    R("SCICreateNamedInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCICreateNamedInterrupt(dev, &i, 0, "misuse", &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));

    R("SCIRemoveInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveInterrupt(NULL, 0, &e_));
    R("SCIRemoveInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveInterrupt(fintr, 0, &e_));
    R("SCIRemoveInterrupt", KIND, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveInterrupt((sci_local_interrupt_t)rintr, 0, &e_));
    R("SCIRemoveInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIRemoveInterrupt(intr, BADFLAG, &e_));
    R("SCIWaitForInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForInterrupt(NULL, 10, 0, &e_));
    R("SCIWaitForInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForInterrupt(fintr, 10, 0, &e_));
    R("SCIWaitForInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIWaitForInterrupt(intr, 10, BADFLAG, &e_));
    R("SCIWaitForInterrupt", STATE, SCI_ERR_TIMEOUT, SCIWaitForInterrupt(intr, 10, 0, &e_)); /* nothing came */

    R("SCIConnectInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIConnectInterrupt(NULL, &r, node, 0, INTNO, 50, 0, &e_));
    R("SCIConnectInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIConnectInterrupt(fdev, &r, node, 0, INTNO, 50, 0, &e_));
    R("SCIConnectInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIConnectInterrupt(dev, NULL, node, 0, INTNO, 50, 0, &e_));
    R("SCIConnectInterrupt", UNKNOWN, SCI_ERR_NO_SUCH_NODEID,
      SCIConnectInterrupt(dev, &r, NO_NODE, 0, INTNO, 50, 0, &e_));
    R("SCIConnectInterrupt", UNKNOWN, SCI_ERR_NO_SUCH_INTNO, SCIConnectInterrupt(dev, &r, node, 0, n + 99, 50, 0, &e_));
    R("SCIConnectInterrupt", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO, SCIConnectInterrupt(dev, &r, node, 9, INTNO, 50, 0, &e_));
    R("SCIConnectInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIConnectInterrupt(dev, &r, node, 0, INTNO, 50, BADFLAG, &e_));
    R("SCIDisconnectInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectInterrupt(NULL, 0, &e_));
    R("SCIDisconnectInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectInterrupt(frintr, 0, &e_));
    R("SCIDisconnectInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIDisconnectInterrupt(rintr, BADFLAG, &e_));
    R("SCITriggerInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCITriggerInterrupt(NULL, 0, &e_));
    R("SCITriggerInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCITriggerInterrupt(frintr, 0, &e_));
    R("SCITriggerInterrupt", KIND, SCI_ERR_ILLEGAL_PARAMETER, SCITriggerInterrupt((sci_remote_interrupt_t)intr, 0, &e_));
    R("SCITriggerInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCITriggerInterrupt(rintr, BADFLAG, &e_));

    /* Conditional-interrupt calls on an interrupt that is no flag interrupt. */
    R("SCIEnableConditionalInterrupt", STATE, SCI_ERR_ILLEGAL_OPERATION, SCIEnableConditionalInterrupt(intr, 0, &e_));
    R("SCIDisableConditionalInterrupt", STATE, SCI_ERR_ILLEGAL_OPERATION,
      SCIDisableConditionalInterrupt(intr, 0, &e_));
    R("SCIGetConditionalInterruptTrigCounter", STATE, SCI_ERR_ILLEGAL_OPERATION,
      SCIGetConditionalInterruptTrigCounter(intr, &n, 0, &e_));
    R("SCIEnableConditionalInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIEnableConditionalInterrupt(fintr, 0, &e_));
    R("SCIDisableConditionalInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIDisableConditionalInterrupt(fintr, 0, &e_));
    R("SCIGetConditionalInterruptTrigCounter", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIGetConditionalInterruptTrigCounter(fintr, &n, 0, &e_));

    SCIDisconnectInterrupt(rintr, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveInterrupt(intr, 0, &e);
    MUST(e == SCI_ERR_OK);
}

static void flag_interrupt_calls(void)
{
    sci_local_interrupt_t fl, i;
    unsigned int n;
    sci_error_t e;

    R("SCIRegisterInterruptFlag", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCIRegisterInterruptFlag(0, &i, NULL, 0, NULL, NULL, 0, &e_));
    R("SCIRegisterInterruptFlag", KIND, SCI_ERR_ILLEGAL_PARAMETER,
      SCIRegisterInterruptFlag(0, &i, (sci_local_segment_t)rseg, 0, NULL, NULL, 0, &e_));
    R("SCIRegisterInterruptFlag", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIRegisterInterruptFlag(0, NULL, target, 0, NULL, NULL, 0, &e_));
    R("SCIRegisterInterruptFlag", RANGE, SCI_ERR_OFFSET_ALIGNMENT,
      SCIRegisterInterruptFlag(0, &i, target, 2, NULL, NULL, 0, &e_));
    R("SCIRegisterInterruptFlag", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCIRegisterInterruptFlag(0, &i, target, SEG, NULL, NULL, 0, &e_));
    R("SCIRegisterInterruptFlag", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO,
      SCIRegisterInterruptFlag(9, &i, target, 0, NULL, NULL, 0, &e_));
    R("SCIRegisterInterruptFlag", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIRegisterInterruptFlag(0, &i, target, 0, NULL, NULL, BADFLAG, &e_));
    SCIRegisterInterruptFlag(0, &fl, target, 0, NULL, NULL, SCI_FLAG_CONDITIONAL_INTERRUPT, &e);
    MUST(e == SCI_ERR_OK);
    R("SCIEnableConditionalInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIEnableConditionalInterrupt(NULL, 0, &e_));
    R("SCIEnableConditionalInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIEnableConditionalInterrupt(fl, BADFLAG, &e_));
    R("SCIDisableConditionalInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIDisableConditionalInterrupt(NULL, 0, &e_));
    R("SCIDisableConditionalInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIDisableConditionalInterrupt(fl, BADFLAG, &e_));
    R("SCIGetConditionalInterruptTrigCounter", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIGetConditionalInterruptTrigCounter(fl, NULL, 0, &e_));
    R("SCIGetConditionalInterruptTrigCounter", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIGetConditionalInterruptTrigCounter(fl, &n, BADFLAG, &e_));
    SCIRemoveInterrupt(fl, 0, &e);
    MUST(e == SCI_ERR_OK);
}

static void data_interrupt_calls(void)
{
    sci_local_data_interrupt_t di, fdi, i;
    sci_remote_data_interrupt_t rdi, frdi, r;
    unsigned int no = DINTNO, n, len;
    char buf[SCI_MAX_DATA_INTERRUPT_LENGTH + 8];
    sci_error_t e;

    SCICreateDataInterrupt(dev, &di, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e);
    MUST(e == SCI_ERR_OK);
    n = 0;
    SCICreateDataInterrupt(dev, &fdi, 0, &n, NULL, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIConnectDataInterrupt(dev, &frdi, node, 0, n, 1000, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIDisconnectDataInterrupt(frdi, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveDataInterrupt(fdi, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIConnectDataInterrupt(dev, &rdi, node, 0, DINTNO, 1000, 0, &e);
    MUST(e == SCI_ERR_OK);

    n = DINTNO + 10;
    R("SCICreateDataInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateDataInterrupt(NULL, &i, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));
    R("SCICreateDataInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateDataInterrupt(fdev, &i, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));
    R("SCICreateDataInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateDataInterrupt(dev, NULL, 0, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));
    R("SCICreateDataInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCICreateDataInterrupt(dev, &i, 0, NULL, NULL, NULL, 0, &e_));
    R("SCICreateDataInterrupt", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO,
      SCICreateDataInterrupt(dev, &i, 9, &n, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));
    R("SCICreateDataInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCICreateDataInterrupt(dev, &i, 0, &n, NULL, NULL, BADFLAG, &e_));
    R("SCICreateDataInterrupt", FLAG, SCI_ERR_FLAG_NOT_IMPLEMENTED,
      SCICreateDataInterrupt(dev, &i, 0, &n, NULL, NULL, SCI_FLAG_BROADCAST, &e_));
    no = DINTNO;
    R("SCICreateDataInterrupt", STATE, SCI_ERR_INTNO_USED,
      SCICreateDataInterrupt(dev, &i, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &e_));

    R("SCIRemoveDataInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveDataInterrupt(NULL, 0, &e_));
    R("SCIRemoveDataInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveDataInterrupt(fdi, 0, &e_));
    R("SCIRemoveDataInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIRemoveDataInterrupt(di, BADFLAG, &e_));
    len = sizeof buf;
    R("SCIWaitForDataInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForDataInterrupt(NULL, buf, &len, 10, 0, &e_));
    R("SCIWaitForDataInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForDataInterrupt(fdi, buf, &len, 10, 0, &e_));
    R("SCIWaitForDataInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForDataInterrupt(di, buf, NULL, 10, 0, &e_));
    R("SCIWaitForDataInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForDataInterrupt(di, NULL, &len, 10, 0, &e_));
    R("SCIWaitForDataInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIWaitForDataInterrupt(di, buf, &len, 10, BADFLAG, &e_));
    R("SCIWaitForDataInterrupt", STATE, SCI_ERR_TIMEOUT, SCIWaitForDataInterrupt(di, buf, &len, 10, 0, &e_));

    R("SCIConnectDataInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER,
      SCIConnectDataInterrupt(NULL, &r, node, 0, DINTNO, 50, 0, &e_));
    R("SCIConnectDataInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER,
      SCIConnectDataInterrupt(fdev, &r, node, 0, DINTNO, 50, 0, &e_));
    R("SCIConnectDataInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER,
      SCIConnectDataInterrupt(dev, NULL, node, 0, DINTNO, 50, 0, &e_));
    R("SCIConnectDataInterrupt", UNKNOWN, SCI_ERR_NO_SUCH_NODEID,
      SCIConnectDataInterrupt(dev, &r, NO_NODE, 0, DINTNO, 50, 0, &e_));
    R("SCIConnectDataInterrupt", UNKNOWN, SCI_ERR_NO_SUCH_INTNO,
      SCIConnectDataInterrupt(dev, &r, node, 0, DINTNO + 99, 50, 0, &e_));
    R("SCIConnectDataInterrupt", RANGE, SCI_ERR_NO_SUCH_ADAPTERNO,
      SCIConnectDataInterrupt(dev, &r, node, 9, DINTNO, 50, 0, &e_));
    R("SCIConnectDataInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG,
      SCIConnectDataInterrupt(dev, &r, node, 0, DINTNO, 50, BADFLAG, &e_));
    R("SCIDisconnectDataInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectDataInterrupt(NULL, 0, &e_));
    R("SCIDisconnectDataInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectDataInterrupt(frdi, 0, &e_));
    R("SCIDisconnectDataInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCIDisconnectDataInterrupt(rdi, BADFLAG, &e_));
    R("SCITriggerDataInterrupt", NULLH, SCI_ERR_ILLEGAL_PARAMETER, SCITriggerDataInterrupt(NULL, buf, 4, 0, &e_));
    R("SCITriggerDataInterrupt", FREED, SCI_ERR_ILLEGAL_PARAMETER, SCITriggerDataInterrupt(frdi, buf, 4, 0, &e_));
    R("SCITriggerDataInterrupt", NULLP, SCI_ERR_ILLEGAL_PARAMETER, SCITriggerDataInterrupt(rdi, NULL, 4, 0, &e_));
    R("SCITriggerDataInterrupt", RANGE, SCI_ERR_OUT_OF_RANGE,
      SCITriggerDataInterrupt(rdi, buf, SCI_MAX_DATA_INTERRUPT_LENGTH + 1, 0, &e_));
    R("SCITriggerDataInterrupt", FLAG, SCI_ERR_ILLEGAL_FLAG, SCITriggerDataInterrupt(rdi, buf, 4, BADFLAG, &e_));

    SCIDisconnectDataInterrupt(rdi, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveDataInterrupt(di, 0, &e);
    MUST(e == SCI_ERR_OK);
}

static void hardware_calls(void)
{
    sci_smartio_device_t devc = NULL;
    sci_remote_segment_t r;
    sci_ioaddr_t io;
    unsigned int fdids[4];

    R("SCIGetCSRRegister", HW, SCI_ERR_NOT_SUPPORTED, SCIGetCSRRegister(dev, 0, node, 0, 0, &e_));
    R("SCISetCSRRegister", HW, SCI_ERR_NOT_SUPPORTED, SCISetCSRRegister(dev, 0, node, 0, 0, 0, &e_));
    R("SCIGetLocalCSR", HW, SCI_ERR_NOT_SUPPORTED, SCIGetLocalCSR(dev, 0, 0, 0, &e_));
    R("SCISetLocalCSR", HW, SCI_ERR_NOT_SUPPORTED, SCISetLocalCSR(dev, 0, 0, 0, 0, &e_));
    R("SCIAttachPhysicalMemory", HW, SCI_ERR_NOT_SUPPORTED, SCIAttachPhysicalMemory(0, NULL, 0, SEG, src, 0, &e_));
    R("SCIRegisterPCIeRequester", HW, SCI_ERR_NOT_SUPPORTED, SCIRegisterPCIeRequester(dev, 0, 0, 0, 0, &e_));
    R("SCIUnregisterPCIeRequester", HW, SCI_ERR_NOT_SUPPORTED, SCIUnregisterPCIeRequester(dev, 0, 0, 0, 0, &e_));
    R("SCIBorrowDevice", HW, SCI_ERR_NOT_SUPPORTED, SCIBorrowDevice(dev, &devc, 0, 0, &e_));
    R("SCIReturnDevice", HW, SCI_ERR_NOT_SUPPORTED, SCIReturnDevice(devc, 0, &e_));
    R("SCIReleaseExclusiveBorrow", HW, SCI_ERR_NOT_SUPPORTED, SCIReleaseExclusiveBorrow(devc, 0, &e_));
    R("SCIGetDeviceList", HW, SCI_ERR_NOT_SUPPORTED, ROW("SCIGetDeviceList (return)", HW, 0, SCIGetDeviceList(dev, fdids, 4, NULL, 0, &e_)));
    ROW("SCIGetFabricDeviceId", HW, 0, SCIGetFabricDeviceId(devc));
    R("SCIConnectDeviceSegment", HW, SCI_ERR_NOT_SUPPORTED, SCIConnectDeviceSegment(devc, &r, 0, 0, NULL, NULL, 0, &e_));
    R("SCIConnectDeviceSegmentPath", HW, SCI_ERR_NOT_SUPPORTED,
      SCIConnectDeviceSegmentPath(devc, &r, 0, 0, 0, NULL, NULL, 0, &e_));
    R("SCIConnectDeviceMemory", HW, SCI_ERR_NOT_SUPPORTED, SCIConnectDeviceMemory(dev, &r, 0, devc, 0, 0, 0, &e_));
    R("SCICreateDeviceSegment", HW, SCI_ERR_NOT_SUPPORTED, SCICreateDeviceSegment(devc, 0, SEG, 0, 0, 0, &e_));
    R("SCIMapRemoteSegmentForDevice", HW, SCI_ERR_NOT_SUPPORTED,
      SCIMapRemoteSegmentForDevice(rseg, devc, &io, 0, SEG, 0, &e_));
    R("SCIUnmapRemoteSegmentForDevice", HW, SCI_ERR_NOT_SUPPORTED, SCIUnmapRemoteSegmentForDevice(rseg, devc, 0, &e_));
    R("SCIMapLocalSegmentForDevice", HW, SCI_ERR_NOT_SUPPORTED,
      SCIMapLocalSegmentForDevice(src, 0, devc, &io, 0, SEG, 0, &e_));
    R("SCIUnmapLocalSegmentForDevice", HW, SCI_ERR_NOT_SUPPORTED, SCIUnmapLocalSegmentForDevice(src, 0, devc, 0, &e_));
}

int main(void)
{
    sci_error_t e;
    int rc;

    misuse_begin("SISCI");
    SCIInitialize(0, &e);
    MUST(e == SCI_ERR_OK);
    SCIOpen(&dev, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIOpen(&fdev, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIClose(fdev, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIGetLocalNodeId(0, &node, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateSegment(dev, &target, ID, SEG, NULL, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIPrepareSegment(target, 0, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCISetSegmentAvailable(target, 0, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateSegment(dev, &src, ID + 1, SEG, NULL, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIPrepareSegment(src, 0, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateSegment(dev, &unprep, ID + 2, SEG, NULL, NULL, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIConnectSegment(dev, &rseg, node, ID, 0, NULL, NULL, 5000, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIConnectSegment(dev, &frseg, node, ID, 0, NULL, NULL, 5000, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIDisconnectSegment(frseg, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateDMAQueue(dev, &dq, 0, 2, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCICreateDMAQueue(dev, &fdq, 0, 2, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveDMAQueue(fdq, 0, &e);
    MUST(e == SCI_ERR_OK);

    dma_queue_calls();
    dma_channel_calls();
    interrupt_calls();
    flag_interrupt_calls();
    data_interrupt_calls();
    hardware_calls();

    SCIRemoveDMAQueue(dq, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIDisconnectSegment(rseg, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveSegment(unprep, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveSegment(src, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIRemoveSegment(target, 0, &e);
    MUST(e == SCI_ERR_OK);
    SCIClose(dev, 0, &e);
    MUST(e == SCI_ERR_OK);
    rc = misuse_end();
    SCITerminate();
    return rc;
}
