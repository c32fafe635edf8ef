/*
 * Every SCIQuery command and sub-command the reference lists (sisci-api.md section 5)
 * answers a value, or SCI_ERR_NOT_SUPPORTED where only Dolphin's card could answer;
 * none answers SCI_ERR_ILLEGAL_QUERY. Wrong sub-commands still do.
 *
 *   REMORA_NODE=4 ./queries
 *
 * Prints one line per query and "passed" at the end; exits non-zero on a failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sisci_api.h"

static int failures;

#define EXPECT(what, got, want)                                                              \
    do {                                                                                     \
        unsigned long g_ = (unsigned long)(got), w_ = (unsigned long)(want);                 \
        if (g_ != w_) {                                                                      \
            fprintf(stderr, "line %d: %s: got 0x%lx, want 0x%lx\n", __LINE__, what, g_, w_); \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

#define OK(call)                                                                             \
    do {                                                                                     \
        call;                                                                                \
        if (err != SCI_ERR_OK) {                                                             \
            fprintf(stderr, "line %d: %s failed: 0x%x\n", __LINE__, #call, (unsigned)err);   \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* What an adapter sub-command must answer: a value (checked by `check`) or an error. */
struct adapter_case {
    const char *name;
    unsigned int sub;
    sci_error_t want;
};

#define A(sub, want) {#sub, sub, want}

static sci_error_t query_adapter(unsigned int sub, unsigned int port, unsigned int *value)
{
    sci_query_adapter_t q;
    sci_error_t err;
    q.localAdapterNo = 0;
    q.portNo = port;
    q.subcommand = sub;
    q.data = value;
    SCIQuery(SCI_Q_ADAPTER, &q, 0, &err);
    return err;
}

static sci_error_t query_system(unsigned int sub, unsigned int *value)
{
    sci_query_system_t q;
    sci_error_t err;
    q.subcommand = sub;
    q.data = value;
    SCIQuery(SCI_Q_SYSTEM, &q, 0, &err);
    return err;
}

int main(void)
{
    static const struct adapter_case adapter[] = {
        A(SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_DMA_MTU, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_SUGGESTED_MIN_DMA_SIZE, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_SUGGESTED_MIN_BLOCK_SIZE, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_NODEID, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_SERIAL_NUMBER, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_CARD_TYPE, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_NUMBER_OF_STREAMS, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_STREAM_BUFFER_SIZE, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_CONFIGURED, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_LINK_OPERATIONAL, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_HW_LINK_STATUS_IS_OK, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_NUMBER, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_INSTANCE_NUMBER, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_FIRMWARE_OK, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_CONNECTED_TO_SWITCH, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_LOCAL_SWITCH_TYPE, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_LOCAL_SWITCH_PORT_NUMBER, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_CONNECTED_TO_EXPECTED_SWITCH_PORT, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_ATT_PAGE_SIZE, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_ATT_AVAILABLE_ENTRIES, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_PHYS_MEM_NODEID, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_PHYS_MBX_NODEID, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_PHYS_LINK_PORT_NODEID, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_SCI_LINK_FREQUENCY, SCI_ERR_NOT_SUPPORTED),
        A(SCI_Q_ADAPTER_B_LINK_FREQUENCY, SCI_ERR_NOT_SUPPORTED),
        A(SCI_Q_ADAPTER_IO_BUS_FREQUENCY, SCI_ERR_NOT_SUPPORTED),
        A(SCI_Q_ADAPTER_BDF, SCI_ERR_NOT_SUPPORTED),
        A(SCI_Q_ADAPTER_NUMBER_OF_LINKS, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_LINK_WIDTH, SCI_ERR_NOT_SUPPORTED),
        A(SCI_Q_ADAPTER_LINK_SPEED, SCI_ERR_NOT_SUPPORTED),
        A(SCI_Q_ADAPTER_LINK_UPTIME, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_LINK_DOWNTIME, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_LINK_CABLE_INSERTED, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_LINK_ENABLED, SCI_ERR_OK),
        A(SCI_Q_ADAPTER_LINK_PARTNER_PORT_NO, SCI_ERR_OK),
    };
    sci_desc_t sd;
    sci_local_segment_t seg;
    sci_remote_segment_t rseg;
    sci_map_t map;
    sci_error_t err;
    unsigned int node, value, i, page = (unsigned)sysconf(_SC_PAGESIZE);
    char text[128];
    sci_query_string_t qs = {text, sizeof text};
    sci_query_dma_t qd;
    sci_dma_capabilities_t caps;
    sci_query_local_segment_t ql;
    sci_query_remote_segment_t qr;
    sci_query_map_t qm;

    OK(SCIInitialize(0, &err));
    OK(SCIOpen(&sd, 0, &err));
    OK(SCIGetLocalNodeId(0, &node, 0, &err));

    /* Strings. */
    OK(SCIQuery(SCI_Q_VENDORID, &qs, 0, &err));
    printf("SCI_Q_VENDORID: %s\n", text);
    OK(SCIQuery(SCI_Q_API, &qs, 0, &err));
    printf("SCI_Q_API: %s\n", text);
    OK(SCIQuery(SCI_Q_SISCI_DRIVER_VERSION, &qs, 0, &err));
    printf("SCI_Q_SISCI_DRIVER_VERSION: %s\n", text);

    /* Every adapter sub-command (the broadcast one belongs to multicast's tests). */
    for (i = 0; i < sizeof adapter / sizeof adapter[0]; i++) {
        value = 0xdeadbeef;
        err = query_adapter(adapter[i].sub, 0, &value);
        printf("%s: 0x%x (%u)\n", adapter[i].name, (unsigned)err, err == SCI_ERR_OK ? value : 0);
        EXPECT(adapter[i].name, err, adapter[i].want);
        if (err == SCI_ERR_OK && value == 0xdeadbeef) {
            fprintf(stderr, "%s answered OK without a value\n", adapter[i].name);
            failures++;
        }
    }
    /* Values with a meaning. */
    query_adapter(SCI_Q_ADAPTER_NODEID, 0, &value);
    EXPECT("NODEID", value, node);
    query_adapter(SCI_Q_ADAPTER_PHYS_MEM_NODEID, 0, &value);
    EXPECT("PHYS_MEM_NODEID", value, node);
    query_adapter(SCI_Q_ADAPTER_ATT_PAGE_SIZE, 0, &value);
    EXPECT("ATT_PAGE_SIZE", value, page);
    {
        unsigned int total, avail;
        query_adapter(SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES, 0, &total);
        query_adapter(SCI_Q_ADAPTER_ATT_AVAILABLE_ENTRIES, 0, &avail);
        EXPECT("ATT entries: some", total > 0 && avail > 0, 1);
        EXPECT("ATT entries: available within the total", avail <= total, 1);
    }
    query_adapter(SCI_Q_ADAPTER_NUMBER_OF_STREAMS, 0, &value);
    EXPECT("NUMBER_OF_STREAMS", value, 1);
    query_adapter(SCI_Q_ADAPTER_LINK_DOWNTIME, 0, &value);
    EXPECT("LINK_DOWNTIME", value, 0);
    query_adapter(SCI_Q_ADAPTER_CONNECTED_TO_EXPECTED_SWITCH_PORT, 0, &value);
    EXPECT("CONNECTED_TO_EXPECTED_SWITCH_PORT", value, 1);
    /* Per-link sub-commands check the link number. */
    EXPECT("LINK_UPTIME of link 5", query_adapter(SCI_Q_ADAPTER_LINK_UPTIME, 5, &value),
           SCI_ERR_ILLEGAL_PARAMETER);
    EXPECT("LINK_SPEED of link 5", query_adapter(SCI_Q_ADAPTER_LINK_SPEED, 5, &value),
           SCI_ERR_ILLEGAL_PARAMETER);
    EXPECT("an unknown adapter sub-command", query_adapter(999, 0, &value), SCI_ERR_ILLEGAL_QUERY);

    /* System. */
    EXPECT("CPU_CACHE_LINE_SIZE", query_system(SCI_Q_SYSTEM_CPU_CACHE_LINE_SIZE, &value), SCI_ERR_OK);
    EXPECT("WRITE_POSTING_ENABLED", query_system(SCI_Q_SYSTEM_WRITE_POSTING_ENABLED, &value), SCI_ERR_OK);
    EXPECT("its value", value, 1);
    EXPECT("WRITE_COMBINING_ENABLED", query_system(SCI_Q_SYSTEM_WRITE_COMBINING_ENABLED, &value),
           SCI_ERR_OK);
    EXPECT("its value", value, 1);
    EXPECT("HOSTBRIDGE", query_system(SCI_Q_SYSTEM_HOSTBRIDGE, &value), SCI_ERR_NOT_SUPPORTED);
    EXPECT("an unknown system sub-command", query_system(999, &value), SCI_ERR_ILLEGAL_QUERY);

    /* DMA (the kind in the flags) and device. */
    qd.localAdapterNo = 0;
    qd.subcommand = SCI_Q_DMA_AVAILABLE;
    qd.data = &value;
    OK(SCIQuery(SCI_Q_DMA, &qd, SCI_FLAG_DMA_GLOBAL, &err));
    EXPECT("DMA_AVAILABLE", value, 1);
    qd.subcommand = SCI_Q_DMA_CAPABILITIES;
    qd.data = &caps;
    OK(SCIQuery(SCI_Q_DMA, &qd, SCI_FLAG_DMA_SYSDMA, &err));
    EXPECT("DMA channels", caps.num_channels > 0, 1);
    SCIQuery(SCI_Q_DEVICE, &qd, 0, &err);
    EXPECT("SCI_Q_DEVICE", err, SCI_ERR_NOT_SUPPORTED);

    /* Segments and maps. */
    OK(SCICreateSegment(sd, &seg, 0x9e1, 4096, NULL, NULL, 0, &err));
    OK(SCIPrepareSegment(seg, 0, 0, &err));
    OK(SCISetSegmentAvailable(seg, 0, 0, &err));
    OK(SCIConnectSegment(sd, &rseg, node, 0x9e1, 0, NULL, NULL, SCI_INFINITE_TIMEOUT, 0, &err));
    SCIMapRemoteSegment(rseg, &map, 0, 4096, NULL, 0, &err);
    OK((void)0);
    ql.segment = seg;
    ql.subcommand = SCI_Q_LOCAL_SEGMENT_IOADDR;
    OK(SCIQuery(SCI_Q_LOCAL_SEGMENT, &ql, 0, &err));
    EXPECT("LOCAL_SEGMENT_IOADDR", ql.data.ioaddr, ((unsigned long long)node << 32) | 0x9e1);
    ql.subcommand = SCI_Q_LOCAL_SEGMENT_VIRTUAL_KERNEL_ADDR;
    SCIQuery(SCI_Q_LOCAL_SEGMENT, &ql, 0, &err);
    EXPECT("LOCAL_SEGMENT_VIRTUAL_KERNEL_ADDR", err, SCI_ERR_NOT_SUPPORTED);
    ql.subcommand = SCI_Q_LOCAL_SEGMENT_PHYS_ADDR;
    SCIQuery(SCI_Q_LOCAL_SEGMENT, &ql, 0, &err);
    EXPECT("LOCAL_SEGMENT_PHYS_ADDR", err, SCI_ERR_NOT_SUPPORTED);
    qr.segment = rseg;
    qr.subcommand = SCI_Q_REMOTE_SEGMENT_IOADDR;
    OK(SCIQuery(SCI_Q_REMOTE_SEGMENT, &qr, 0, &err));
    EXPECT("REMOTE_SEGMENT_IOADDR", qr.data.ioaddr, ql.data.ioaddr);
    qm.map = map;
    qm.subcommand = SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET;
    OK(SCIQuery(SCI_Q_MAP, &qm, 0, &err));
    EXPECT("MAP_MAPPED_TO_LOCAL_TARGET", qm.data, 1);
    qm.subcommand = SCI_Q_MAP_QUERY_REMOTE_MAPPED_TO_LOCAL_TARGET;
    OK(SCIQuery(SCI_Q_MAP, &qm, 0, &err));
    EXPECT("MAP_QUERY_REMOTE_MAPPED_TO_LOCAL_TARGET", qm.data, 1);
    qm.subcommand = SCI_Q_MAP_IOADDR;
    SCIQuery(SCI_Q_MAP, &qm, 0, &err);
    EXPECT("MAP_IOADDR", err, SCI_ERR_NOT_SUPPORTED);
    qm.subcommand = SCI_Q_MAP_PHYS_ADDR;
    SCIQuery(SCI_Q_MAP, &qm, 0, &err);
    EXPECT("MAP_PHYS_ADDR", err, SCI_ERR_NOT_SUPPORTED);

    OK(SCIUnmapSegment(map, 0, &err));
    OK(SCIDisconnectSegment(rseg, 0, &err));
    OK(SCIRemoveSegment(seg, 0, &err));
    OK(SCIClose(sd, 0, &err));
    SCITerminate();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("queries: passed\n");
    return 0;
}
