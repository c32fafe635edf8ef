/*
 * sisci_api.h - SISCI API functions and constants (Remora implementation).
 *
 * Remora implements the SISCI remote-memory interconnect API in software
 * on Linux.  This header declares the API 2.0 entry points (sizes and
 * offsets are size_t) together with the flag, query and miscellaneous
 * constants they take.
 *
 * Conventions:
 *   - Almost every call reports its status through a trailing
 *     "sci_error_t *error" argument; SCI_ERR_OK means success.
 *   - Flags are plain unsigned integer macros.  Each function has its own
 *     flag namespace, so different flags may share a numeric value as long
 *     as no single function accepts both.
 *   - Functions that need real PCIe / NTB / SCI hardware are declared so
 *     that programs build, but Remora answers them with
 *     SCI_ERR_NOT_SUPPORTED.
 *   - Function names are plain C symbols (no symbol-renaming macros).
 *
 * Written for Remora; C89/C99 and C++ compatible.
 */
#ifndef REMORA_SISCI_API_H
#define REMORA_SISCI_API_H

#include <stddef.h>

#include "sisci_types.h"
#include "sisci_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================
 * Version information
 * ====================================================================== */

/* Marks these headers as Remora's (clients may test for it). */
#define REMORA_SISCI_IMPLEMENTATION 1

/* Implemented API level: 2.0.0. */
#define SISCI_API_VER_MAJOR      0x02
#define SISCI_API_VER_MINOR      0x000
#define SISCI_API_VER_MICRO      0x000
/* Packed version: major in bits 31..24, minor in 23..12, micro in 11..0. */
#define SISCI_API_VERSION        ((SISCI_API_VER_MAJOR << 24) | \
                                  (SISCI_API_VER_MINOR << 12) | \
                                  SISCI_API_VER_MICRO)
/* Bits of SISCI_API_VERSION that must match between library and driver. */
#define SISCI_SIGN_VERSION_MASK  0xfffff000U
/* Human-readable version. */
#define SISCI_API_VERSION_STRING "2.0.0"

/* ========================================================================
 * Miscellaneous constants
 * ====================================================================== */

/* Timeout value meaning "wait forever". */
#define SCI_INFINITE_TIMEOUT            0xffffffffU
/* Node id addressing every node of a multicast/broadcast group. */
#define DIS_BROADCAST_NODEID_GROUP_ALL  252U
/* Placeholder node id meaning "this host". */
#define SCI_LOCAL_HOST                  0U
/* Largest payload, in bytes, that one data interrupt carries
 * (SCITriggerDataInterrupt); a buffer this big always suffices for
 * SCIWaitForDataInterrupt. */
#define SCI_MAX_DATA_INTERRUPT_LENGTH   1024U

/* ========================================================================
 * Flags
 * ====================================================================== */

/* ---- General / local segments (SCICreateSegment, SCIPrepareSegment,
 *      SCIRemoveSegment, SCIRegisterSegmentMemory, ...) ---------------- */
#define SCI_FLAG_USE_CALLBACK            0x1U        /* deliver events by callback */
#define SCI_FLAG_EMPTY                   0x2U        /* create segment without memory */
#define SCI_FLAG_PRIVATE                 0x4U        /* segment can never be connected */
#define SCI_FLAG_DMA_SOURCE_ONLY         0x8U        /* prepare: segment is only a DMA source */
#define SCI_FLAG_FORCE_REMOVE            0x20U       /* remove segment even if in use */
#define SCI_FLAG_ALLOW_UNICAST           0x80U       /* broadcast segment also takes unicast */
#define SCI_FLAG_LOCK_USER_MEM           0x400U      /* pin memory given to RegisterSegmentMemory */
#define SCI_FLAG_PHYSICAL                0x1000U     /* segment backed by physical memory */
#define SCI_FLAG_CUDA_BUFFER             0x2000U     /* attach a CUDA device buffer */
#define SCI_FLAG_SCIF_BUFFER             0x4000U     /* attach a SCIF buffer */
#define SCI_FLAG_AUTO_ID                 0x20000000U /* library chooses the segment id */

/* ---- Descriptors (SCIOpen) ------------------------------------------ */
#define SCI_FLAG_THREAD_SAFE             0x1U        /* serialise use of the descriptor */

/* ---- Connecting (SCIConnectSegment) ---------------------------------- */
#define SCI_FLAG_ASYNCHRONOUS_CONNECT    0x100U      /* return before the connect completes */

/* ---- Multicast / broadcast (create, connect, map, DMA) ---------------- */
#define SCI_FLAG_BROADCAST               0x40000U    /* operate on a multicast group */
#define SCI_FLAG_MULTICAST               SCI_FLAG_BROADCAST /* same flag, newer name */

/* ---- Segment availability (SCISetSegmentUnavailable) ----------------- */
#define SCI_FLAG_NOTIFY                  0x8U        /* tell connected nodes */
#define SCI_FLAG_FORCE_DISCONNECT        0x10U       /* drop existing connections */

/* ---- Mapping (SCIMapRemoteSegment, SCIMapLocalSegment) ---------------- */
#define SCI_FLAG_FIXED_MAP_ADDR                0x1U  /* map at the suggested address */
#define SCI_FLAG_READONLY_MAP                  0x2U  /* map read-only */
#define SCI_FLAG_LOCK_OPERATION                0x4U  /* map for atomic fetch-and-add */
#define SCI_FLAG_CONDITIONAL_INTERRUPT_MAP     0x8U  /* stores trigger conditional interrupts */
#define SCI_FLAG_UNCONDITIONAL_DATA_INTERRUPT_MAP 0x10U /* stores also raise an interrupt */
#define SCI_FLAG_READ_PREFETCH_AGGR_HOLD_MAP   0x20U /* aggressive prefetch, hold data */
#define SCI_FLAG_READ_PREFETCH_NO_HOLD_MAP     0x40U /* prefetch without holding data */
#define SCI_FLAG_IO_MAP_IOSPACE                0x80U /* uncached I/O mapping, no prefetch */
#define SCI_FLAG_DMOVE_MAP                     0x100U /* map for DMOVE transfers */
#define SCI_FLAG_WRITES_DISABLE_GATHER_MAP     0x200U /* no write gathering */
#define SCI_FLAG_DISABLE_128_BYTES_PACKETS     0x400U /* limit packet size */
#define SCI_FLAG_NO_MEMORY_LOOPBACK            0x800U /* loop local targets through the adapter */
#define SCI_FLAG_NO_MEMORY_LOOPBACK_MAP        SCI_FLAG_NO_MEMORY_LOOPBACK /* 1.x name */
#define SCI_FLAG_SHARED_MAP                    0x2000U /* share the mapping */
#define SCI_FLAG_WRITE_BACK_CACHE_MAP          0x08000000U /* cached map; user must flush */

/* ---- Sequences and barriers ------------------------------------------ */
#define SCI_FLAG_FAST_BARRIER            0x1U  /* SCICreateMapSequence: cheap barrier */
#define SCI_FLAG_NO_FLUSH                0x1U  /* SCICheckSequence: skip the flush */
#define SCI_FLAG_NO_STORE_BARRIER        0x2U  /* SCICheckSequence: skip the barrier */
/* SCIFlush, SCICheckSequence: only the CPU's write-combining buffers. Dolphin's value is
 * not public; Remora's 0x4 differs from every flag SCIFlush, SCICheckSequence and
 * SCIStartSequence accept (NO_FLUSH 0x1, NO_STORE_BARRIER 0x2). */
#define SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY  0x4U
#define FLUSH_CPU_BUFFERS_ONLY           SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY /* old alias */

/* ---- Programmed I/O copies (SCIMemCpy, SCIMemCopy, block transfers) --- */
#define SCI_FLAG_BLOCK_READ              0x40U /* copy remote -> local */
#define SCI_FLAG_ERROR_CHECK             0x80U /* check the transfer for errors */

/* ---- DMA ------------------------------------------------------------- */
#define SCI_FLAG_DMA_CHANNEL_SHARED      0x1U    /* channel API: share the channel */
#define SCI_FLAG_DMA_WAIT                0x4U    /* block until the transfer is done */
#define SCI_FLAG_DMA_READ                0x10U   /* pull remote -> local */
#define SCI_FLAG_DMA_PHDMA               0x20U   /* physical DMA (privileged) */
#define SCI_FLAG_DMA_GLOBAL              0x40U   /* use the global DMA engine */
#define SCI_FLAG_DMA_SYSDMA              0x100U  /* use the system DMA engine */
#define SCI_FLAG_DMA_USER_MEM            0x200U  /* source is plain user memory */
#define SCI_FLAG_DMA_ADAPTER             0x800U  /* use the adapter DMA engine */
#define SCI_FLAG_DMA_POST                0x1000U /* post the queue immediately */
#define SCI_FLAG_DMA_RESET               0x2000U /* reset the queue after completion */

/* DMA engine kinds and channel ids for the DMA channel calls. */
#define SCI_DMA_TYPE_DONTCARE            1U
#define SCI_DMA_TYPE_ADAPTER             2U
#define SCI_DMA_TYPE_GLOBAL              3U
#define SCI_DMA_TYPE_SYSTEM              4U
#define SCI_DMA_TYPE_TRANSPARENT         5U
#define SCI_DMA_CHANNEL_ID_DONTCARE      0xFFFFFFFFU

/* ---- Interrupts ------------------------------------------------------ */
#define SCI_FLAG_FIXED_INTNO             0x2U  /* caller chooses the interrupt number */
#define SCI_FLAG_SHARED_INT              0x4U  /* several owners share the number */
#define SCI_FLAG_CONDITIONAL_INTERRUPT   0x8U  /* SCIRegisterInterruptFlag: conditional */
#define SCI_FLAG_COUNTING_INT            0x20U /* count triggers instead of merging */
#define SCI_FLAG_SHARE_EXTERNAL          0x40U /* allow sharing with other processes */

/* ---- Cache maintenance (SCICacheSync) -------------------------------- */
#define SCI_FLAG_CACHE_FLUSH             0x100000U /* write back dirty lines */
#define SCI_FLAG_CACHE_INVALIDATE        0x200000U /* discard cached lines */

/* ---- PCIe requesters and SmartIO ------------------------------------ */
#define SCI_FLAG_PCIE_REQUESTER_GLOBAL   0x1U        /* requester valid on all adapters */
#define SCI_FLAG_BAR                     0x1U        /* SCIConnectDeviceMemory: a BAR */
#define SCI_FLAG_EXCLUSIVE               0x01000000U /* borrow the device exclusively */
#define SCI_FLAG_DEVICE_SIDE_ONLY        0x02001000U /* place memory near the device */
#define SCI_FLAG_LOCAL_ONLY              0x02002000U /* place memory on this host */
#define SCI_FLAG_DEVICE_PREFER_BANDWIDTH 0x04000001U /* optimise for device bandwidth */
#define SCI_FLAG_HOST_PREFER_BANDWIDTH   0x04000002U /* optimise for host bandwidth */
#define SCI_FLAG_SPECIFY_PATH            0x10000000U /* caller selects the adapter path */
#define SCI_FLAG_SPECIFY_SLOT            0x20000000U /* caller selects the slot */

/* SmartIO device segment memory types. */
#define SCI_MEMTYPE_BAR                  1U /* a device BAR */
#define SCI_MEMTYPE_PRIVATE              2U /* memory private to the borrower */
#define SCI_MEMTYPE_SHARED               4U /* memory shared between borrowers */

/* SmartIO access hints for SCICreateDeviceSegment(). */
#define SCI_MEMACCESS_DEVICE_READ        1U
#define SCI_MEMACCESS_DEVICE_WRITE       2U
#define SCI_MEMACCESS_HOST_READ          4U
#define SCI_MEMACCESS_HOST_WRITE         8U
#define SCI_MEMACCESS_MULTIHOST_READ     (0x10U | SCI_MEMACCESS_HOST_READ)
#define SCI_MEMACCESS_MULTIHOST_WRITE    (0x10U | SCI_MEMACCESS_HOST_WRITE)
#define SCI_MEMACCESS_P2P_READ           (0x20U | SCI_MEMACCESS_DEVICE_READ)
#define SCI_MEMACCESS_P2P_WRITE          (0x20U | SCI_MEMACCESS_DEVICE_WRITE)

/* ========================================================================
 * SCIQuery() commands and sub-commands
 * ====================================================================== */

/* ---- Major commands (first argument of SCIQuery) --------------------- */
#define SCI_Q_VENDORID               1U  /* sci_query_string_t: vendor name */
#define SCI_Q_API                    2U  /* sci_query_string_t: API version */
#define SCI_Q_ADAPTER                3U  /* sci_query_adapter_t */
#define SCI_Q_SYSTEM                 4U  /* sci_query_system_t */
#define SCI_Q_LOCAL_SEGMENT          5U  /* sci_query_local_segment_t */
#define SCI_Q_REMOTE_SEGMENT         6U  /* sci_query_remote_segment_t */
#define SCI_Q_MAP                    7U  /* sci_query_map_t */
#define SCI_Q_DMA                    8U  /* sci_query_dma_t */
#define SCI_Q_DEVICE                 9U  /* sci_smartio_query_device_t */
#define SCI_Q_SISCI_DRIVER_VERSION   10U /* sci_query_string_t: driver version */

/* ---- SCI_Q_ADAPTER sub-commands (answer is an unsigned int unless
 *      noted).  The per-link ones take the link number in portNo. ------- */
#define SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT              1U
#define SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT            2U
#define SCI_Q_ADAPTER_DMA_MTU                         3U
#define SCI_Q_ADAPTER_SUGGESTED_MIN_DMA_SIZE          4U
#define SCI_Q_ADAPTER_SUGGESTED_MIN_BLOCK_SIZE        5U
#define SCI_Q_ADAPTER_NODEID                          6U
#define SCI_Q_ADAPTER_NODE_ID                         SCI_Q_ADAPTER_NODEID /* user-guide spelling */
#define SCI_Q_ADAPTER_SERIAL_NUMBER                   7U
#define SCI_Q_ADAPTER_CARD_TYPE                       8U
#define SCI_Q_ADAPTER_NUMBER_OF_STREAMS               9U
#define SCI_Q_ADAPTER_STREAM_BUFFER_SIZE              10U
#define SCI_Q_ADAPTER_CONFIGURED                      11U
#define SCI_Q_ADAPTER_LINK_OPERATIONAL                12U
#define SCI_Q_ADAPTER_HW_LINK_STATUS_IS_OK            13U
#define SCI_Q_ADAPTER_NUMBER                          14U
#define SCI_Q_ADAPTER_INSTANCE_NUMBER                 15U
#define SCI_Q_ADAPTER_FIRMWARE_OK                     16U
#define SCI_Q_ADAPTER_CONNECTED_TO_SWITCH             17U
#define SCI_Q_ADAPTER_LOCAL_SWITCH_TYPE               18U
#define SCI_Q_ADAPTER_LOCAL_SWITCH_PORT_NUMBER        19U
#define SCI_Q_ADAPTER_CONNECTED_TO_EXPECTED_SWITCH_PORT 20U
#define SCI_Q_ADAPTER_ATT_PAGE_SIZE                   21U
#define SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES           22U
#define SCI_Q_ADAPTER_ATT_AVAILABLE_ENTRIES           23U
#define SCI_Q_ADAPTER_PHYS_MEM_NODEID                 24U
#define SCI_Q_ADAPTER_PHYS_MBX_NODEID                 25U
#define SCI_Q_ADAPTER_PHYS_LINK_PORT_NODEID           26U
#define SCI_Q_ADAPTER_SCI_LINK_FREQUENCY              27U
#define SCI_Q_ADAPTER_B_LINK_FREQUENCY                28U
#define SCI_Q_ADAPTER_IO_BUS_FREQUENCY                29U
#define SCI_Q_ADAPTER_MCAST_MAX_GROUPS                30U
#define SCI_Q_ADAPTER_BDF                             31U /* bus<<8 | dev<<3 | fn */
#define SCI_Q_ADAPTER_NUMBER_OF_LINKS                 32U
#define SCI_Q_ADAPTER_LINK_WIDTH                      33U
#define SCI_Q_ADAPTER_LINK_SPEED                      34U /* PCIe generation */
#define SCI_Q_ADAPTER_LINK_UPTIME                     35U
#define SCI_Q_ADAPTER_LINK_DOWNTIME                   36U
#define SCI_Q_ADAPTER_LINK_CABLE_INSERTED             37U
#define SCI_Q_ADAPTER_LINK_ENABLED                    38U
#define SCI_Q_ADAPTER_LINK_PARTNER_PORT_NO            39U

/* ---- SCI_Q_SYSTEM sub-commands --------------------------------------- */
#define SCI_Q_SYSTEM_HOSTBRIDGE                  1U
#define SCI_Q_SYSTEM_WRITE_POSTING_ENABLED       2U
#define SCI_Q_SYSTEM_WRITE_COMBINING_ENABLED     3U
#define SCI_Q_SYSTEM_CPU_CACHE_LINE_SIZE         4U

/* ---- Segment and map sub-commands.  Numbered without overlap across
 *      SCI_Q_LOCAL_SEGMENT, SCI_Q_REMOTE_SEGMENT and SCI_Q_MAP so that a
 *      sub-command passed with the wrong major command can be recognised. */
#define SCI_Q_LOCAL_SEGMENT_IOADDR               1U
#define SCI_Q_LOCAL_SEGMENT_VIRTUAL_KERNEL_ADDR  2U
#define SCI_Q_LOCAL_SEGMENT_PHYS_ADDR            3U
#define SCI_Q_REMOTE_SEGMENT_IOADDR              4U
#define SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET         5U
#define SCI_Q_MAP_QUERY_REMOTE_MAPPED_TO_LOCAL_TARGET 6U
#define SCI_Q_MAP_IOADDR                         7U
#define SCI_Q_MAP_PHYS_ADDR                      8U

/* ---- SCI_Q_DMA sub-commands (DMA kind goes in SCIQuery's flags) ------ */
#define SCI_Q_DMA_AVAILABLE                      1U /* data: unsigned int */
#define SCI_Q_DMA_CAPABILITIES                   2U /* data: sci_dma_capabilities_t */

/* ---- SCI_Q_DEVICE sub-commands --------------------------------------- */
#define SCI_Q_DEVICE_INFO                        1U /* data: sci_smartio_device_info_t */

/* ========================================================================
 * Library initialisation and descriptors
 * ====================================================================== */

/* Initialise the library; must be called before any other SISCI call. */
void SCIInitialize(unsigned int flags, sci_error_t *error);

/* Release library-wide state; call after the last SCIClose(). */
void SCITerminate(void);

/* Open a virtual device descriptor that owns the resources created with it. */
void SCIOpen(sci_desc_t *sd, unsigned int flags, sci_error_t *error);

/* Close a descriptor; fails with SCI_ERR_BUSY while it still owns resources. */
void SCIClose(sci_desc_t sd, unsigned int flags, sci_error_t *error);

/* Return a static, human-readable description of an error code. */
const char *SCIGetErrorString(sci_error_t error);

/* Report the node id of the given local adapter. */
void SCIGetLocalNodeId(unsigned int adapterNo, unsigned int *nodeId,
                       unsigned int flags, sci_error_t *error);

/* Check whether a node is reachable; returns non-zero if it is. */
int SCIProbeNode(sci_desc_t sd, unsigned int localAdapterNo,
                 unsigned int nodeId, unsigned int flags, sci_error_t *error);

/* Answer an SCI_Q_* query; data points to the structure the command names. */
void SCIQuery(unsigned int command, void *data, unsigned int flags,
              sci_error_t *error);

/* The node ids of host `name`, resolved through the cluster file; this
 * host's name (or "localhost") gives this host's nodes.  The list is sorted
 * and ended by a 0 (at most DIS_MAX_NSCIS ids); *type is the adapter kind
 * (SCI_Q_ADAPTER_CARD_TYPE).  No node of that name: SCI_ERR_NO_SUCH_NODEID. */
void SCIGetNodeIdByAdapterName(char *name, dis_nodeId_list_t *nodeIdList,
                               dis_virt_adapter_t *type, unsigned int flags,
                               sci_error_t *error);

/* As SCIGetNodeIdByAdapterName(), one entry per node: adapterList[i] (an
 * array of DIS_MAX_NSCIS) is the adapter number through which node
 * (*nodeIdList)[i] is reached and (*typeList)[i] its kind; unused entries
 * are 0.  adapterList and typeList may be NULL. */
void SCIGetNodeInfoByAdapterName(char *name, unsigned int *adapterList,
                                 dis_nodeId_list_t *nodeIdList,
                                 dis_adapter_type_t *typeList,
                                 unsigned int flags, sci_error_t *error);

/* Printable name of an adapter type (SCI_Q_ADAPTER_CARD_TYPE answer). */
const char *SCIGetAdapterTypeString(unsigned int cardType);

/* Printable name of an adapter family. */
const char *SCIGetAdapterFamilyString(unsigned int family);

/* ========================================================================
 * Local segments
 * ====================================================================== */

/* Create a local segment of `size` bytes with the given id.  With
 * SCI_FLAG_USE_CALLBACK and a callback, connect/disconnect events go to the
 * callback instead of SCIWaitForLocalSegmentEvent(). */
void SCICreateSegment(sci_desc_t sd, sci_local_segment_t *segment,
                      unsigned int segmentId, size_t size,
                      sci_cb_local_segment_t callback, void *callbackArg,
                      unsigned int flags, sci_error_t *error);

/* Make a local segment usable through a local adapter. */
void SCIPrepareSegment(sci_local_segment_t segment,
                       unsigned int localAdapterNo, unsigned int flags,
                       sci_error_t *error);

/* Allow remote nodes to connect to a prepared segment. */
void SCISetSegmentAvailable(sci_local_segment_t segment,
                            unsigned int localAdapterNo, unsigned int flags,
                            sci_error_t *error);

/* Refuse new connections to a segment (optionally dropping existing ones). */
void SCISetSegmentUnavailable(sci_local_segment_t segment,
                              unsigned int localAdapterNo,
                              unsigned int flags, sci_error_t *error);

/* Destroy a local segment; fails with SCI_ERR_BUSY while it is in use. */
void SCIRemoveSegment(sci_local_segment_t segment, unsigned int flags,
                      sci_error_t *error);

/* Wait for a connect/disconnect event on a local segment; returns its
 * reason and stores the node and adapter concerned (either pointer may be
 * NULL). */
sci_segment_cb_reason_t SCIWaitForLocalSegmentEvent(
    sci_local_segment_t segment, unsigned int *sourcenodeId,
    unsigned int *localAdapterNo, unsigned int timeout, unsigned int flags,
    sci_error_t *error);

/* Return the id of a local segment. */
unsigned int SCIGetLocalSegmentId(sci_local_segment_t segment);

/* Return the size in bytes of a local segment. */
size_t SCIGetLocalSegmentSize(sci_local_segment_t segment);

/* Back an SCI_FLAG_EMPTY segment with existing user memory. */
void SCIRegisterSegmentMemory(void *address, size_t size,
                              sci_local_segment_t segment,
                              unsigned int flags, sci_error_t *error);

/* Back an empty segment with physical/device memory.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIAttachPhysicalMemory(sci_ioaddr_t ioaddress, void *address,
                             unsigned int busNo, size_t size,
                             sci_local_segment_t segment, unsigned int flags,
                             sci_error_t *error);

/* Let other processes on this host attach to the segment. */
void SCIShareSegment(sci_local_segment_t segment, unsigned int flags,
                     sci_error_t *error);

/* Attach to a segment shared by another process on this host. */
void SCIAttachLocalSegment(sci_desc_t sd, sci_local_segment_t *segment,
                           unsigned int segmentId, size_t *size,
                           sci_cb_local_segment_t callback, void *callbackArg,
                           unsigned int flags, sci_error_t *error);

/* ========================================================================
 * Remote segments
 * ====================================================================== */

/* Connect to segment `segmentId` on node `nodeId`, waiting up to `timeout`
 * ms for it to become available.  With SCI_FLAG_ASYNCHRONOUS_CONNECT the
 * call returns at once and the result arrives as an SCI_CB_CONNECT or
 * SCI_CB_DISCONNECT event (callback or SCIWaitForRemoteSegmentEvent()). */
void SCIConnectSegment(sci_desc_t sd, sci_remote_segment_t *segment,
                       unsigned int nodeId, unsigned int segmentId,
                       unsigned int localAdapterNo,
                       sci_cb_remote_segment_t callback, void *callbackArg,
                       unsigned int timeout, unsigned int flags,
                       sci_error_t *error);

/* Drop a connection; fails with SCI_ERR_BUSY while it is still mapped. */
void SCIDisconnectSegment(sci_remote_segment_t segment, unsigned int flags,
                          sci_error_t *error);

/* Return the size in bytes of a connected remote segment. */
size_t SCIGetRemoteSegmentSize(sci_remote_segment_t segment);

/* Return the segment id of a connected remote segment. */
unsigned int SCIGetRemoteSegmentId(sci_remote_segment_t segment);

/* Return the node id that owns a connected remote segment. */
unsigned int SCIGetRemoteSegmentNodeId(sci_remote_segment_t segment);

/* Wait for an event (connected, disconnected, lost, ...) on a remote
 * segment; returns its reason and stores its status (may be NULL). */
sci_segment_cb_reason_t SCIWaitForRemoteSegmentEvent(
    sci_remote_segment_t segment, sci_error_t *status, unsigned int timeout,
    unsigned int flags, sci_error_t *error);

/* Connect to a raw interconnect address range.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIConnectSCISpace(sci_desc_t sd, unsigned int localAdapterNo,
                        sci_remote_segment_t *segment, sci_address_t address,
                        size_t size, unsigned int flags, sci_error_t *error);

/* ========================================================================
 * Mapping
 * ====================================================================== */

/* Map part of a remote segment into this process; returns the address. */
volatile void *SCIMapRemoteSegment(sci_remote_segment_t segment,
                                   sci_map_t *map, size_t offset, size_t size,
                                   void *addr, unsigned int flags,
                                   sci_error_t *error);

/* Map part of a local segment into this process; returns the address. */
void *SCIMapLocalSegment(sci_local_segment_t segment, sci_map_t *map,
                         size_t offset, size_t size, void *addr,
                         unsigned int flags, sci_error_t *error);

/* Remove a mapping; fails with SCI_ERR_BUSY while sequences use it. */
void SCIUnmapSegment(sci_map_t map, unsigned int flags, sci_error_t *error);

/* Return the virtual address of a mapping. */
volatile void *SCIGetMapPointer(sci_map_t map);

/* Return the physical bus address behind a mapping.  Hardware only and
 * without an error argument: Remora always returns 0 (not supported). */
sci_ioaddr_t SCIGetMapPhysAddr(sci_map_t map);

/* ========================================================================
 * Sequences, barriers and programmed-I/O helpers
 * ====================================================================== */

/* Create an error-checking sequence for a remote mapping. */
void SCICreateMapSequence(sci_map_t map, sci_sequence_t *sequence,
                          unsigned int flags, sci_error_t *error);

/* Destroy a sequence. */
void SCIRemoveSequence(sci_sequence_t sequence, unsigned int flags,
                       sci_error_t *error);

/* Begin a checked transfer; SCI_SEQ_OK or SCI_SEQ_PENDING mean go ahead. */
sci_sequence_status_t SCIStartSequence(sci_sequence_t sequence,
                                       unsigned int flags,
                                       sci_error_t *error);

/* Report whether transfers since SCIStartSequence() completed cleanly. */
sci_sequence_status_t SCICheckSequence(sci_sequence_t sequence,
                                       unsigned int flags,
                                       sci_error_t *error);

/* Order earlier stores through the mapping before later ones. */
void SCIStoreBarrier(sci_sequence_t sequence, unsigned int flags);

/* Push buffered stores out; the sequence may be NULL. */
void SCIFlush(sci_sequence_t sequence, unsigned int flags);

/* Discard prefetched read data (API 1.x). */
void SCIFlushReadBuffers(sci_sequence_t sequence);

/* Copy between local memory and a remote mapping (write unless
 * SCI_FLAG_BLOCK_READ); the sequence may be NULL. */
void SCIMemCpy(sci_sequence_t sequence, void *memAddr, sci_map_t remoteMap,
               size_t remoteOffset, size_t size, unsigned int flags,
               sci_error_t *error);

/* API 1.x form of SCIMemCpy() without a sequence argument. */
void SCIMemCopy(void *memAddr, sci_map_t remoteMap, unsigned int remoteOffset,
                unsigned int size, unsigned int flags, sci_error_t *error);

/* Copy local memory to an already mapped remote address. */
void SCIMemWrite(void *memAddr, volatile void *remoteAddr, size_t size,
                 unsigned int flags, sci_error_t *error);

/* Flush and/or invalidate CPU caches for a buffer (map may be NULL). */
void SCICacheSync(sci_map_t map, void *addr, size_t length,
                  unsigned int flags, sci_error_t *error);

/* Store the same `size` bytes of memAddr into two maps at once (a mirror):
 * remoteMap at remoteOffset and remoteMap2 at remoteOffset2.  Both ranges
 * are checked before a byte moves.  Flags: SCI_FLAG_ERROR_CHECK (check the
 * sequence, which may be NULL, afterwards). */
void SCIMemCpy_dual(sci_sequence_t sequence, void *memAddr,
                    sci_map_t remoteMap, size_t remoteOffset,
                    sci_map_t remoteMap2, size_t remoteOffset2, size_t size,
                    unsigned int flags, sci_error_t *error);

/* Ids of the routines the store direction of SCIMemCpy(), SCIMemCopy() and
 * SCIMemCpy_dual() use (SetSciMemCopyFunction); each moves the same bytes:
 *   DEFAULT     the library's choice (today MEMCPY)
 *   MEMCPY      one block copy of the whole range
 *   WORDS64     aligned 8-byte stores in address order (bytes only at an
 *               unaligned head or tail): aligned 8-byte fields never tear
 *   CACHE_LINES 64-byte pieces along cache lines, a full fence after each
 *   FLUSHED     a block copy, then a flush of the map: the call returns
 *               once the bytes are in the segment's memory (at home for
 *               another host's segment) */
#define REMORA_MEMCOPY_DEFAULT      0
#define REMORA_MEMCOPY_MEMCPY       1
#define REMORA_MEMCOPY_WORDS64      2
#define REMORA_MEMCOPY_CACHE_LINES  3
#define REMORA_MEMCOPY_FLUSHED      4

/* The id of the copy routine in use (process-wide). */
int GetSciMemCopyFunction(void);

/* Select copy routine `function` (a REMORA_MEMCOPY_* id; a plain int is
 * fine) for the whole process.  Returns the id in use afterwards: an
 * unknown id changes nothing. */
int SetSciMemCopyFunction(int function);

/* API 1.x block transfers: copy `size` bytes of sourceMap at sourceOffset
 * into destinationMap at destinationOffset (either map may be of a local or
 * a remote segment).  Returns when the bytes are in the destination's
 * memory.  Flags: SCI_FLAG_BLOCK_READ (accepted; the direction is given by
 * the argument order). */
void SCITransferBlock(sci_map_t sourceMap, unsigned int sourceOffset,
                      sci_map_t destinationMap, unsigned int destinationOffset,
                      unsigned int size, unsigned int flags,
                      sci_error_t *error);

/* Start the same copy on a thread of the library and store its handle in
 * *block.  With SCI_FLAG_USE_CALLBACK and a callback, callback(callbackArg,
 * *block, status) runs on that thread when the copy has ended (never inside
 * this call).  Flags: SCI_FLAG_BLOCK_READ, SCI_FLAG_USE_CALLBACK. */
void SCITransferBlockAsync(sci_map_t sourceMap, unsigned int sourceOffset,
                           sci_map_t destinationMap,
                           unsigned int destinationOffset, unsigned int size,
                           sci_block_transfer_t *block,
                           sci_cb_block_transfer_t callback,
                           void *callbackArg, unsigned int flags,
                           sci_error_t *error);

/* Wait (timeout in ms, or SCI_INFINITE_TIMEOUT) until the transfer has
 * ended and its callback has returned; the error is then the transfer's
 * outcome (SCI_ERR_CANCELLED after an abort) and the handle is released.
 * SCI_ERR_TIMEOUT keeps it; SCI_ERR_ILLEGAL_OPERATION from the transfer's
 * own callback. */
void SCIWaitForBlockTransfer(sci_block_transfer_t block, unsigned int timeout,
                             unsigned int flags, sci_error_t *error);

/* Stop a running transfer and return once it has stopped (wait for it
 * afterwards to release the handle).  SCI_ERR_ILLEGAL_OPERATION when it had
 * already ended. */
void SCIAbortBlockTransfer(sci_block_transfer_t block, unsigned int flags,
                           sci_error_t *error);

/* ========================================================================
 * DMA queues
 *
 * A queue moves data between a local segment (or, for the ...Mem call,
 * any memory of the process) and a connected remote segment.  States:
 * IDLE -> POSTED -> DONE | ERROR | ABORTED; a finished queue may be
 * started again.  The API 1.x calls add GATHER (enqueue, then post).  A
 * call the state does not allow fails with SCI_ERR_ILLEGAL_OPERATION.
 *
 * Transfer flags: SCI_FLAG_DMA_READ (remote -> local; the default is
 * local -> remote), SCI_FLAG_DMA_WAIT (return when the transfer has
 * ended), SCI_FLAG_USE_CALLBACK (call `callback` when it ends instead of
 * SCIWaitForDMAQueue), SCI_FLAG_DMA_GLOBAL / SCI_FLAG_DMA_SYSDMA (engine
 * choice; Remora has one engine and accepts them without effect).
 * ====================================================================== */

/* Create a queue for up to maxEntries transfers; it starts IDLE.
 * SCI_FLAG_DMA_PHDMA (physical DMA) is hardware only:
 * SCI_ERR_NOT_SUPPORTED. */
void SCICreateDMAQueue(sci_desc_t sd, sci_dma_queue_t *dq,
                       unsigned int localAdapterNo, unsigned int maxEntries,
                       unsigned int flags, sci_error_t *error);

/* Release a queue that is not POSTED. */
void SCIRemoveDMAQueue(sci_dma_queue_t dq, unsigned int flags,
                       sci_error_t *error);

/* Stop a POSTED queue and wait until it stopped; afterwards the state is
 * ABORTED, or DONE/ERROR if the transfer won the race.  A no-op in a
 * final state. */
void SCIAbortDMAQueue(sci_dma_queue_t dq, unsigned int flags,
                      sci_error_t *error);

/* Return the queue's state without changing it.  A bad handle gives
 * SCI_DMAQUEUE_ERROR (there is no error argument). */
sci_dma_queue_state_t SCIDMAQueueState(sci_dma_queue_t dq);

/* Wait (timeout in ms, or SCI_INFINITE_TIMEOUT) for a POSTED queue to
 * reach a final state and return it; returns at once in a final state.
 * Not allowed when the transfer was started with a callback. */
sci_dma_queue_state_t SCIWaitForDMAQueue(sci_dma_queue_t dq,
                                         unsigned int timeout,
                                         unsigned int flags,
                                         sci_error_t *error);

/* Copy `size` bytes between localSegment (prepared) at localOffset and
 * remoteSegment at remoteOffset.  Note the order: local offset, size,
 * remote offset. */
void SCIStartDmaTransfer(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                         sci_remote_segment_t remoteSegment,
                         size_t localOffset, size_t size, size_t remoteOffset,
                         sci_cb_dma_t callback, void *callbackArg,
                         unsigned int flags, sci_error_t *error);

/* Start vecLength transfers between the same two segments as one job.
 * The per-element flags field is ignored. */
void SCIStartDmaTransferVec(sci_dma_queue_t dq,
                            sci_local_segment_t localSegment,
                            sci_remote_segment_t remoteSegment,
                            size_t vecLength, dis_dma_vec_t *vec,
                            sci_cb_dma_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error);

/* Copy `size` bytes between ordinary memory of this process and
 * remoteSegment at remoteOffset.  The memory must stay valid (and, for a
 * read, untouched) until the transfer has ended. */
void SCIStartDmaTransferMem(sci_dma_queue_t dq, void *localAddress,
                            sci_remote_segment_t remoteSegment, size_t size,
                            size_t remoteOffset, sci_cb_dma_t callback,
                            void *callbackArg, unsigned int flags,
                            sci_error_t *error);

/* API 1.x: add one transfer to the queue (state GATHER).  Note the 1.x
 * order: local offset, remote offset, size.  Returns the queue state. */
sci_dma_queue_state_t SCIEnqueueDMATransfer(sci_dma_queue_t dq,
                                            sci_local_segment_t localSegment,
                                            sci_remote_segment_t remoteSegment,
                                            unsigned int localOffset,
                                            unsigned int remoteOffset,
                                            unsigned int size,
                                            unsigned int flags,
                                            sci_error_t *error);

/* API 1.x: start the transfers gathered with SCIEnqueueDMATransfer(). */
void SCIPostDMAQueue(sci_dma_queue_t dq, sci_cb_dma_t callback,
                     void *callbackArg, unsigned int flags,
                     sci_error_t *error);

/* API 1.x: return a queue that is not POSTED to IDLE, dropping gathered
 * transfers. */
void SCIResetDMAQueue(sci_dma_queue_t dq, unsigned int flags,
                      sci_error_t *error);

/* API 1.x physical DMA between bus addresses.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIphDmaEnqueue(sci_dma_queue_t dq, unsigned int size,
                     sci_ioaddr_t localBusAddr, unsigned int remote_nodeid,
                     unsigned int remote_highaddr, unsigned int remote_lowaddr,
                     unsigned int flags, sci_error_t *error);

/* Start a physical DMA queue.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED (and
 * SCI_DMAQUEUE_IDLE). */
sci_dma_queue_state_t SCIphDmaStart(sci_dma_queue_t dq, sci_cb_dma_t callback,
                                    void *callbackArg, unsigned int flags,
                                    sci_error_t *error);

/* ---- DMA channels ----------------------------------------------------
 * The node's DMA engine has 4 channels per adapter (SCIQuery(SCI_Q_DMA,
 * SCI_Q_DMA_CAPABILITIES) num_channels).  A request reserves one for every
 * process of the node until it is returned or the process exits. */

/* Reserve channel `channelId` (SCI_DMA_CHANNEL_ID_DONTCARE: the lowest free
 * one) of the engine on localAdapterNo; `type` is an SCI_DMA_TYPE_* (one
 * engine serves them all).  Flags: SCI_FLAG_DMA_CHANNEL_SHARED (hold it
 * together with other shared holders).  A channel held by another holder
 * gives SCI_ERR_BUSY (for a shared request: held exclusively); no free
 * channel for DONTCARE gives SCI_ERR_NOSPC. */
void SCIRequestDMAChannel(sci_desc_t sd, sci_dma_channel_t *channel,
                          unsigned int localAdapterNo, sci_dma_type_t type,
                          unsigned int channelId, unsigned int flags,
                          sci_error_t *error);

/* Serve queue `dq` with the channel (assigning it again moves it).
 * SCI_ERR_BUSY while its current queue has a transfer posted. */
void SCIAssignDMAChannel(sci_dma_channel_t channel, sci_dma_queue_t dq,
                         unsigned int flags, sci_error_t *error);

/* End the reservation; the handle becomes invalid.  SCI_ERR_BUSY while its
 * queue has a transfer posted. */
void SCIReturnDMAChannel(sci_dma_channel_t channel, sci_error_t *error);

/* The same transfers as SCIStartDmaTransfer() and SCIStartDmaTransferVec(),
 * with the same arguments. */
void DISStartDmaTransfer(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                         sci_remote_segment_t remoteSegment,
                         size_t localOffset, size_t size, size_t remoteOffset,
                         sci_cb_dma_t callback, void *callbackArg,
                         unsigned int flags, sci_error_t *error);

void DISStartDmaTransferVec(sci_dma_queue_t dq,
                            sci_local_segment_t localSegment,
                            sci_remote_segment_t remoteSegment,
                            size_t vecLength, dis_dma_vec_t *vec,
                            sci_cb_dma_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error);

/* ========================================================================
 * Interrupts
 *
 * A trigger that arrives while nobody waits is kept for the next wait;
 * several such triggers count as one unless the interrupt was created
 * with SCI_FLAG_COUNTING_INT.  With SCI_FLAG_USE_CALLBACK and a callback,
 * each trigger runs the callback instead (SCIWaitForInterrupt is then
 * not allowed); returning SCI_CALLBACK_CANCEL stops further calls.
 * ====================================================================== */

/* Create an interrupt.  With SCI_FLAG_FIXED_INTNO *interruptNo is the
 * number wanted (SCI_ERR_INTNO_USED if taken); otherwise the number chosen
 * is stored there. */
void SCICreateInterrupt(sci_desc_t sd, sci_local_interrupt_t *interrupt,
                        unsigned int localAdapterNo, unsigned int *interruptNo,
                        sci_cb_interrupt_t callback, void *callbackArg,
                        unsigned int flags, sci_error_t *error);

/* Remove an interrupt; blocked waiters get SCI_ERR_CANCELLED. */
void SCIRemoveInterrupt(sci_local_interrupt_t interrupt, unsigned int flags,
                        sci_error_t *error);

/* Wait (timeout in ms, or SCI_INFINITE_TIMEOUT) for a trigger. */
void SCIWaitForInterrupt(sci_local_interrupt_t interrupt, unsigned int timeout,
                         unsigned int flags, sci_error_t *error);

/* Connect to interrupt `interruptNo` of node `nodeId`, waiting up to
 * `timeout` ms for it to be created. */
void SCIConnectInterrupt(sci_desc_t sd, sci_remote_interrupt_t *interrupt,
                         unsigned int nodeId, unsigned int localAdapterNo,
                         unsigned int interruptNo, unsigned int timeout,
                         unsigned int flags, sci_error_t *error);

/* Drop a connection to an interrupt. */
void SCIDisconnectInterrupt(sci_remote_interrupt_t interrupt,
                            unsigned int flags, sci_error_t *error);

/* Trigger a connected interrupt; SCI_ERR_NO_SUCH_INTNO once it is gone. */
void SCITriggerInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags,
                         sci_error_t *error);

/* ========================================================================
 * Data interrupts (API 2.0): each trigger carries up to
 * SCI_MAX_DATA_INTERRUPT_LENGTH bytes, delivered in order.
 * ====================================================================== */

/* Create a data interrupt (interrupt numbers as for SCICreateInterrupt).
 * A callback gets a pointer to the payload, valid during the call.  With
 * SCI_FLAG_SHARED_INT several processes of the node create one number and
 * every payload reaches each of them (one with 64 payloads unconsumed
 * misses it). */
void SCICreateDataInterrupt(sci_desc_t sd,
                            sci_local_data_interrupt_t *interrupt,
                            unsigned int localAdapterNo,
                            unsigned int *interruptNo,
                            sci_cb_data_interrupt_t callback,
                            void *callbackArg, unsigned int flags,
                            sci_error_t *error);

/* Remove a data interrupt; blocked waiters get SCI_ERR_CANCELLED. */
void SCIRemoveDataInterrupt(sci_local_data_interrupt_t interrupt,
                            unsigned int flags, sci_error_t *error);

/* Wait for the next payload and copy it to `data`.  *length is the
 * buffer's size on entry and the payload's length on return; a payload
 * longer than the buffer gives SCI_ERR_OUT_OF_RANGE, leaves *length
 * unchanged and stays queued. */
void SCIWaitForDataInterrupt(sci_local_data_interrupt_t interrupt, void *data,
                             unsigned int *length, unsigned int timeout,
                             unsigned int flags, sci_error_t *error);

/* Connect to data interrupt `interruptNo` of node `nodeId`, waiting up to
 * `timeout` ms for it to be created. */
void SCIConnectDataInterrupt(sci_desc_t sd,
                             sci_remote_data_interrupt_t *interrupt,
                             unsigned int nodeId, unsigned int localAdapterNo,
                             unsigned int interruptNo, unsigned int timeout,
                             unsigned int flags, sci_error_t *error);

/* Drop a connection to a data interrupt. */
void SCIDisconnectDataInterrupt(sci_remote_data_interrupt_t interrupt,
                                unsigned int flags, sci_error_t *error);

/* Send `length` bytes (at most SCI_MAX_DATA_INTERRUPT_LENGTH, else
 * SCI_ERR_OUT_OF_RANGE) to the interrupt's owner. */
void SCITriggerDataInterrupt(sci_remote_data_interrupt_t interrupt, void *data,
                             unsigned int length, unsigned int flags,
                             sci_error_t *error);

/* ========================================================================
 * Named interrupts
 *
 * Remora's choice, signature not public: Dolphin publishes only the name
 * SCICreateNamedInterrupt.  The name fixes the interrupt number, the same
 * on every node: 0x20000000 | (32-bit FNV-1a hash of the name's bytes &
 * 0x1fffffff), which RemoraNamedInterruptNo below computes.  Others connect
 * with SCIConnectInterrupt and that number.  Flags: SCI_FLAG_SHARED_INT
 * (several processes of the node create the same name), SCI_FLAG_COUNTING_INT,
 * SCI_FLAG_USE_CALLBACK; SCI_FLAG_FIXED_INTNO is illegal.  *interruptNo
 * (may be NULL) receives the number.  SCI_ERR_INTNO_USED when the number is
 * taken (by the same name without SCI_FLAG_SHARED_INT, or by another name
 * or a fixed number with the same number); SCI_ERR_ILLEGAL_PARAMETER for a
 * NULL or empty name.
 * ====================================================================== */
void SCICreateNamedInterrupt(sci_desc_t sd, sci_local_interrupt_t *interrupt,
                             unsigned int localAdapterNo, const char *name,
                             unsigned int *interruptNo,
                             sci_cb_interrupt_t callback, void *callbackArg,
                             unsigned int flags, sci_error_t *error);

/* The interrupt number SCICreateNamedInterrupt gives `name` (Remora only). */
static inline unsigned int RemoraNamedInterruptNo(const char *name)
{
    unsigned int h = 0x811c9dc5U;
    while (*name != '\0') {
        h ^= (unsigned char)*name++;
        h *= 0x01000193U;
    }
    return 0x20000000U | (h & 0x1fffffffU);
}

/* ========================================================================
 * Flag and conditional interrupts
 *
 * SCIRegisterInterruptFlag makes an interrupt (a sci_local_interrupt_t:
 * wait, callback and remove as for SCICreateInterrupt; its number is
 * chosen by the node) that a store to the 32-bit word at `offset` (a
 * multiple of 4) of the local segment triggers: peers store through their
 * ordinary maps of the segment.  Without adapter hardware no store is
 * trapped: a watcher thread of the library sees the word change.  It spins
 * for REMORA_SPIN_US after each trigger, then sleeps on the word (a futex
 * wait woken by FUTEX_WAKE on the word, else after at most 1 ms), and does
 * not look at all while a conditional interrupt is disabled.  So a store
 * is seen when it changes the word's value; stores between two looks
 * count as one trigger; a store of the value the word holds is not seen.
 * A store from another host triggers once the DSM brings it to this host
 * (within REMORA_DSM_FLUSH_US; at once after the writer's SCIFlush).  The
 * segment cannot be removed (SCI_ERR_BUSY) before the interrupt is.
 *
 * With SCI_FLAG_CONDITIONAL_INTERRUPT the interrupt starts disabled and
 * stores trigger only between SCIEnableConditionalInterrupt and
 * SCIDisableConditionalInterrupt; without it every store triggers and the
 * enable/disable calls give SCI_ERR_ILLEGAL_OPERATION.  Enable and disable
 * set the trigger counter to 0.  Enable fails with
 * SCI_ERR_COND_INT_RACE_PROBLEM, leaving the interrupt disabled, when the
 * word changed while it was disabled (a store no trigger reported): look at
 * the word, then enable again (the change now counts as seen).  Disable
 * still counts a store that landed before it.
 * SCIGetConditionalInterruptTrigCounter gives SCI_ERR_OVERFLOW past
 * 0xffffffff, SCI_ERR_ILLEGAL_OPERATION for an interrupt that is not a flag
 * interrupt.  The map flags SCI_FLAG_CONDITIONAL_INTERRUPT_MAP and
 * SCI_FLAG_UNCONDITIONAL_DATA_INTERRUPT_MAP are not needed (and stay
 * SCI_ERR_NOT_SUPPORTED): an ordinary map's store is enough.
 * ====================================================================== */
void SCIRegisterInterruptFlag(unsigned int localAdapterNo,
                              sci_local_interrupt_t *interrupt,
                              sci_local_segment_t segment, unsigned int offset,
                              sci_cb_interrupt_t callback, void *callbackArg,
                              unsigned int flags, sci_error_t *error);

void SCIEnableConditionalInterrupt(sci_local_interrupt_t interrupt,
                                   unsigned int flags, sci_error_t *error);

void SCIDisableConditionalInterrupt(sci_local_interrupt_t interrupt,
                                    unsigned int flags, sci_error_t *error);

void SCIGetConditionalInterruptTrigCounter(sci_local_interrupt_t interrupt,
                                           unsigned int *interruptTrigCounter,
                                           unsigned int flags,
                                           sci_error_t *error);

/* ========================================================================
 * Adapter CSR access (SCI era)
 * ====================================================================== */

/* Read a CSR register of a node.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED (and 0). */
unsigned int SCIGetCSRRegister(sci_desc_t sd, unsigned int localAdapterNo,
                               unsigned int SCINodeId, unsigned int CSROffset,
                               unsigned int flags, sci_error_t *error);

/* Write a CSR register of a node.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCISetCSRRegister(sci_desc_t sd, unsigned int localAdapterNo,
                       unsigned int SCINodeId, unsigned int CSROffset,
                       unsigned int CSRValue, unsigned int flags,
                       sci_error_t *error);

/* Read a CSR register of a local adapter.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED (and 0). */
unsigned int SCIGetLocalCSR(sci_desc_t sd, unsigned int localAdapterNo,
                            unsigned int CSROffset, unsigned int flags,
                            sci_error_t *error);

/* Write a CSR register of a local adapter.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCISetLocalCSR(sci_desc_t sd, unsigned int localAdapterNo,
                    unsigned int CSROffset, unsigned int CSRValue,
                    unsigned int flags, sci_error_t *error);

/* ========================================================================
 * PCIe requesters and SmartIO device lending
 * ====================================================================== */

/* Allow a local PCIe device (bus, devfn) to reach remote memory.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIRegisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo,
                              unsigned int bus, unsigned int devfn,
                              unsigned int flags, sci_error_t *error);

/* Undo SCIRegisterPCIeRequester().
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIUnregisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo,
                                unsigned int bus, unsigned int devfn,
                                unsigned int flags, sci_error_t *error);

/* Take a reference to (borrow) a SmartIO device by fabric device id.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 5)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wlong-long"
#endif
void SCIBorrowDevice(sci_desc_t sd, sci_smartio_device_t *device,
                     unsigned long long fdid, unsigned int flags,
                     sci_error_t *error);
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 5)
#pragma GCC diagnostic pop
#endif

/* Give a borrowed device back.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIReturnDevice(sci_smartio_device_t device, unsigned int flags,
                     sci_error_t *error);

/* Downgrade an exclusive borrow to a shared one.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIReleaseExclusiveBorrow(sci_smartio_device_t device,
                               unsigned int flags, sci_error_t *error);

/* Fill `fdids` with up to `length` fabric device ids matching `filter`
 * (may be NULL); returns the count.
 * Hardware only: Remora returns 0 and SCI_ERR_NOT_SUPPORTED. */
size_t SCIGetDeviceList(sci_desc_t sd, unsigned int *fdids, size_t length,
                        const sci_smartio_device_info_t *filter,
                        unsigned int flags, sci_error_t *error);

/* Return the fabric device id of a borrowed device.
 * Hardware only: Remora returns 0 (there is no error argument). */
unsigned int SCIGetFabricDeviceId(sci_smartio_device_t device);

/* Connect to a device memory segment (BAR or device-side memory).
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIConnectDeviceSegment(sci_smartio_device_t device,
                             sci_remote_segment_t *segment,
                             unsigned int segmentId, unsigned int memoryType,
                             sci_cb_remote_segment_t callback,
                             void *callbackArg, unsigned int flags,
                             sci_error_t *error);

/* SCIConnectDeviceSegment() through a specific local adapter.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIConnectDeviceSegmentPath(sci_smartio_device_t device,
                                 sci_remote_segment_t *segment,
                                 unsigned int localAdapterNo,
                                 unsigned int segmentId,
                                 unsigned int memoryType,
                                 sci_cb_remote_segment_t callback,
                                 void *callbackArg, unsigned int flags,
                                 sci_error_t *error);

/* Older call: connect to device memory (flag SCI_FLAG_BAR for a BAR).
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIConnectDeviceMemory(sci_desc_t sd, sci_remote_segment_t *segment,
                            unsigned int localAdapterNo,
                            sci_smartio_device_t device,
                            unsigned int segmentNo, unsigned int offset,
                            unsigned int flags, sci_error_t *error);

/* Allocate memory for a device (SCI_MEMTYPE_*, SCI_MEMACCESS_* hints).
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCICreateDeviceSegment(sci_smartio_device_t device,
                            unsigned int segmentId, size_t size,
                            unsigned int memoryType, unsigned int accessHints,
                            unsigned int flags, sci_error_t *error);

/* Make a remote segment reachable by a device; returns its bus address.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIMapRemoteSegmentForDevice(sci_remote_segment_t segment,
                                  sci_smartio_device_t device,
                                  sci_ioaddr_t *ioaddr, size_t offset,
                                  size_t size, unsigned int flags,
                                  sci_error_t *error);

/* Undo SCIMapRemoteSegmentForDevice().
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIUnmapRemoteSegmentForDevice(sci_remote_segment_t segment,
                                    sci_smartio_device_t device,
                                    unsigned int flags, sci_error_t *error);

/* Make a local segment reachable by a device; returns its bus address.
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIMapLocalSegmentForDevice(sci_local_segment_t segment,
                                 unsigned int localAdapterNo,
                                 sci_smartio_device_t device,
                                 sci_ioaddr_t *ioaddr, size_t offset,
                                 size_t size, unsigned int flags,
                                 sci_error_t *error);

/* Undo SCIMapLocalSegmentForDevice().
 * Hardware only: Remora returns SCI_ERR_NOT_SUPPORTED. */
void SCIUnmapLocalSegmentForDevice(sci_local_segment_t segment,
                                   unsigned int localAdapterNo,
                                   sci_smartio_device_t device,
                                   unsigned int flags, sci_error_t *error);

#ifdef __cplusplus
}
#endif

#endif /* REMORA_SISCI_API_H */
