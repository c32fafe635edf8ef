/*
 * sisci_types.h - SISCI handle, enum, callback and query types (Remora).
 *
 * Remora is a software implementation of the SISCI remote-memory API.
 * This header holds every type the API uses: opaque handles, the
 * enumerations returned by the calls, plain data types, callback
 * signatures and the structures passed to SCIQuery().  It also carries
 * the dis_* helper types that clients get through dis_types.h.
 *
 * Written for Remora; C89/C99 and C++ compatible.
 */
#ifndef REMORA_SISCI_TYPES_H
#define REMORA_SISCI_TYPES_H

#include "sisci_error.h"

/* The parameter annotations of Dolphin's headers, which programs written against them use
 * in their own declarations too.  They expand to nothing. */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef IN_OUT
#define IN_OUT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * "unsigned long long" is not part of C89 or C++98, but every compiler
 * Remora targets accepts it.  Silence the pedantic -Wlong-long diagnostic
 * for the declarations in this header only.
 */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 5)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wlong-long"
#endif

/* ------------------------------------------------------------------------
 * Opaque handles.  Each is a pointer to a structure that only the library
 * knows; applications just pass them around.
 * ---------------------------------------------------------------------- */

/* Virtual device descriptor returned by SCIOpen(). */
typedef struct sci_desc                  *sci_desc_t;
/* Segment of local memory created with SCICreateSegment(). */
typedef struct sci_local_segment         *sci_local_segment_t;
/* Connection to a segment on another (or the same) node. */
typedef struct sci_remote_segment        *sci_remote_segment_t;
/* A mapping of a local or remote segment into the address space. */
typedef struct sci_map                   *sci_map_t;
/* Error-checking sequence bound to a remote map. */
typedef struct sci_sequence              *sci_sequence_t;
/* DMA queue created with SCICreateDMAQueue(). */
typedef struct sci_dma_queue             *sci_dma_queue_t;
/* Connection to an interrupt owned by another node. */
typedef struct sci_remote_interrupt      *sci_remote_interrupt_t;
/* Interrupt owned by this process. */
typedef struct sci_local_interrupt       *sci_local_interrupt_t;
/* Asynchronous block transfer (API 1.x). */
typedef struct sci_block_transfer        *sci_block_transfer_t;
/* Data-carrying interrupt owned by this process (API 2.0). */
typedef struct sci_local_data_interrupt  *sci_local_data_interrupt_t;
/* Connection to a data interrupt on another node (API 2.0). */
typedef struct sci_remote_data_interrupt *sci_remote_data_interrupt_t;
/* Borrowed SmartIO PCIe device (API 2.0). */
typedef struct sci_smartio_device        *sci_smartio_device_t;
/* Reserved channel of the node's DMA engine (SCIRequestDMAChannel()). */
typedef struct sci_dma_channel           *sci_dma_channel_t;

/* ------------------------------------------------------------------------
 * Enumerations.
 * ---------------------------------------------------------------------- */

/* Why a segment callback fired or a segment wait returned. */
typedef enum {
    SCI_CB_CONNECT         = 1, /* a connection was made */
    SCI_CB_DISCONNECT      = 2, /* a connection was closed */
    SCI_CB_NOT_OPERATIONAL = 3, /* the path is temporarily down */
    SCI_CB_OPERATIONAL     = 4, /* the path is working again */
    SCI_CB_LOST            = 5  /* the connection is gone for good */
} sci_segment_cb_reason_t;

/* State of a DMA queue. */
typedef enum {
    SCI_DMAQUEUE_IDLE    = 0, /* created or reset, nothing queued */
    SCI_DMAQUEUE_GATHER  = 1, /* transfers are being queued */
    SCI_DMAQUEUE_POSTED  = 2, /* handed to the DMA engine, in progress */
    SCI_DMAQUEUE_DONE    = 3, /* all transfers completed */
    SCI_DMAQUEUE_ABORTED = 4, /* stopped by SCIAbortDMAQueue() */
    SCI_DMAQUEUE_ERROR   = 5  /* a transfer failed */
} sci_dma_queue_state_t;

/* Alternative spelling of sci_dma_queue_state_t used in the user guide. */
typedef sci_dma_queue_state_t sci_dmaqueue_state_t;

/* Result of SCIStartSequence() / SCICheckSequence(). */
typedef enum {
    SCI_SEQ_OK            = 0, /* no errors since the sequence started */
    SCI_SEQ_RETRIABLE     = 1, /* a transient error; redo the transfer */
    SCI_SEQ_NOT_RETRIABLE = 2, /* a fatal error; the connection is broken */
    SCI_SEQ_PENDING       = 3  /* error state not yet known; check again */
} sci_sequence_status_t;

/* What a callback asks the library to do afterwards. */
typedef enum {
    SCI_CALLBACK_CANCEL   = 1, /* stop delivering callbacks */
    SCI_CALLBACK_CONTINUE = 2  /* keep the callback registered */
} sci_callback_action_t;

/* ------------------------------------------------------------------------
 * Plain data types.
 * ---------------------------------------------------------------------- */

/* A global interconnect address: node id plus a 48-bit offset. */
typedef struct sci_address {
    unsigned short nodeId; /* node that owns the address */
    unsigned short offsHi; /* bits 47..32 of the offset */
    unsigned int   offsLo; /* bits 31..0 of the offset */
} sci_address_t;

/* Bus (I/O) address as seen by a device; 64 bits wide in API 2.0. */
typedef unsigned long long sci_ioaddr_t;

/* Maximum number of entries accepted by one vectored DMA request. */
#define DIS_DMA_MAX_VECLEN 256

/* One element of a vectored DMA transfer. */
typedef struct dis_dma_vec {
    unsigned int size;          /* bytes to move */
    unsigned int local_offset;  /* offset into the local segment */
    unsigned int remote_offset; /* offset into the remote segment */
    unsigned int flags;         /* per-element flags, normally 0 */
} dis_dma_vec_t;

/* DMA engine capabilities, returned by SCIQuery(SCI_Q_DMA, ...). */
typedef struct sci_dma_capabilities {
    unsigned int num_channels;          /* independent DMA channels */
    unsigned int max_transfer_size;     /* largest single transfer */
    unsigned int max_vector_length;     /* largest dis_dma_vec_t array */
    unsigned int support_mem2io;        /* local memory -> remote: 0/1 */
    unsigned int support_io2mem;        /* remote -> local memory: 0/1 */
    unsigned int support_io2io;         /* remote -> remote: 0/1 */
    unsigned int min_align_bytes;       /* required alignment */
    unsigned int suggested_align_bytes; /* alignment for best speed */
} sci_dma_capabilities_t;

/* Entries of the per-adapter lists of SCIGetNodeInfoByAdapterName(). */
#define DIS_MAX_NSCIS 4

/* Node ids that share one adapter (host) name; a 0 entry ends the list, so
 * it holds at most DIS_MAX_NSCIS ids. */
typedef unsigned int dis_nodeId_list_t[5];

/* Kind of (virtual) adapter reported by SCIGetNodeIdByAdapterName(): the
 * SCI_Q_ADAPTER_CARD_TYPE value, which SCIGetAdapterTypeString() names. */
typedef unsigned int dis_virt_adapter_t;

/* Adapter kinds, one per entry of the lists SCIGetNodeInfoByAdapterName()
 * fills. */
typedef unsigned int dis_adapter_type_t[DIS_MAX_NSCIS];

/* Kind of DMA engine a channel is requested of (SCI_DMA_TYPE_*). */
typedef unsigned int sci_dma_type_t;

/* ------------------------------------------------------------------------
 * Callback signatures.  Callbacks are used only when the call that
 * registers them is given SCI_FLAG_USE_CALLBACK.
 * ---------------------------------------------------------------------- */

/* Event on a local segment (a node connected, disconnected, ...). */
typedef sci_callback_action_t (*sci_cb_local_segment_t)(
    void                    *arg,
    sci_local_segment_t      segment,
    sci_segment_cb_reason_t  reason,
    unsigned int             nodeId,
    unsigned int             localAdapterNo,
    sci_error_t              error);

/* Event on a remote segment connection. */
typedef sci_callback_action_t (*sci_cb_remote_segment_t)(
    void                    *arg,
    sci_remote_segment_t     segment,
    sci_segment_cb_reason_t  reason,
    sci_error_t              status);

/* Completion of a DMA queue. */
typedef sci_callback_action_t (*sci_cb_dma_t)(
    void            *arg,
    sci_dma_queue_t  queue,
    sci_error_t      status);

/* Completion of an asynchronous block transfer (API 1.x). */
typedef int (*sci_cb_block_transfer_t)(
    void                 *arg,
    sci_block_transfer_t  block,
    sci_error_t           status);

/* Arrival of a plain interrupt. */
typedef sci_callback_action_t (*sci_cb_interrupt_t)(
    void                  *arg,
    sci_local_interrupt_t  interrupt,
    sci_error_t            status);

/* Arrival of a data interrupt; data/length describe the payload. */
typedef sci_callback_action_t (*sci_cb_data_interrupt_t)(
    void                       *arg,
    sci_local_data_interrupt_t  interrupt,
    void                       *data,
    unsigned int                length,
    sci_error_t                 status);

/* ------------------------------------------------------------------------
 * SCIQuery() argument structures.  The caller fills in the input fields
 * (sub-command, handle, adapter number, output buffer) and the library
 * writes the answer into the output field or buffer.
 * ---------------------------------------------------------------------- */

/* SCI_Q_VENDORID, SCI_Q_API, SCI_Q_SISCI_DRIVER_VERSION: text answers. */
typedef struct sci_query_string {
    char         *str;    /* caller's buffer */
    unsigned int  length; /* size of the buffer in bytes */
} sci_query_string_t;

/* SCI_Q_ADAPTER: per-adapter (and per-link) information. */
typedef struct sci_query_adapter {
    unsigned int  localAdapterNo; /* adapter to ask about */
    unsigned int  portNo;         /* link/port number for per-link subs */
    unsigned int  subcommand;     /* one of SCI_Q_ADAPTER_* */
    void         *data;           /* where the answer is written */
} sci_query_adapter_t;

/* SCI_Q_SYSTEM: host-wide information. */
typedef struct sci_query_system {
    unsigned int  subcommand; /* one of SCI_Q_SYSTEM_* */
    void         *data;       /* where the answer is written */
} sci_query_system_t;

/* SCI_Q_LOCAL_SEGMENT: information about a local segment. */
typedef struct sci_query_local_segment {
    sci_local_segment_t segment;    /* segment to ask about */
    unsigned int        subcommand; /* one of SCI_Q_LOCAL_SEGMENT_* */
    union {
        sci_ioaddr_t ioaddr;        /* the answer */
    } data;
} sci_query_local_segment_t;

/* SCI_Q_REMOTE_SEGMENT: information about a connected remote segment. */
typedef struct sci_query_remote_segment {
    sci_remote_segment_t segment;    /* segment to ask about */
    unsigned int         subcommand; /* one of SCI_Q_REMOTE_SEGMENT_* */
    union {
        sci_ioaddr_t ioaddr;         /* the answer */
    } data;
} sci_query_remote_segment_t;

/* SCI_Q_MAP: information about a mapping. */
typedef struct sci_query_map {
    sci_map_t    map;        /* mapping to ask about */
    unsigned int subcommand; /* one of SCI_Q_MAP_* */
    unsigned long long data; /* the answer */
} sci_query_map_t;

/* SCI_Q_DMA: DMA availability and capabilities of an adapter.  The kind
 * of DMA engine is selected through the flags argument of SCIQuery(). */
typedef struct sci_query_dma {
    unsigned int  localAdapterNo; /* adapter to ask about */
    unsigned int  subcommand;     /* one of SCI_Q_DMA_* */
    void         *data;           /* unsigned int or sci_dma_capabilities_t */
} sci_query_dma_t;

/* Description of a SmartIO PCIe device (also used as a search filter). */
typedef struct sci_smartio_device_info {
    unsigned long long fdid; /* fabric device id */
    unsigned short pci_device_id;
    unsigned short pci_vendor_id;
    unsigned int   pci_class;
    unsigned short pci_subsystem_device_id;
    unsigned short pci_subsystem_vendor_id;
    unsigned long long pci_serial_number;
    unsigned short remote_bdf;     /* bus/device/function on its host */
    unsigned short local_bdf;      /* bus/device/function seen locally */
    unsigned int   adapter;        /* local adapter that reaches it */
    unsigned int   nodeid;         /* node that hosts the device */
    int            physical_slot;
    char           user_name[64];  /* administrator-assigned name */
    char           uuid[37];       /* textual UUID plus terminator */
} sci_smartio_device_info_t;

/* SCI_Q_DEVICE: information about a SmartIO device. */
typedef struct sci_smartio_query_device {
    unsigned long long fdid; /* device to ask about */
    unsigned int  subcommand;                 /* one of SCI_Q_DEVICE_* */
    void         *data;                       /* where the answer goes */
} sci_smartio_query_device_t;

#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 5)
#pragma GCC diagnostic pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* REMORA_SISCI_TYPES_H */
