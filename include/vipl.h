/*
 * vipl.h - VI Provider Library (Virtual Interface Architecture 1.0),
 * Remora implementation for Linux.
 *
 * Remora provides libvipl.so, a user-mode VIPL that runs on plain Linux
 * without VIA hardware or kernel agent.  This header is written for Remora;
 * it keeps the VIPL 1.0 type names, structure layouts, constant values and
 * function signatures, with the Linux spellings of the base types (the
 * original headers used MSVC's __int64 family).  Link with -lvipl.
 *
 * Conventions:
 *   - Every Vip* call returns a VIP_RETURN code; none of them sets errno.
 *   - Descriptors must be VIP_DESCRIPTOR_ALIGNMENT (64) byte aligned and lie
 *     inside memory registered with VipRegisterMem; the memory handle given
 *     to VipPostSend/VipPostRecv is the one of the descriptor's memory.
 *   - Timeouts are in milliseconds.  Any timeout >= 0xFFFFFFFF ms (for
 *     example VIP_INFINITE) is treated as infinite.
 *   - A VIP_NET_ADDRESS is variable length: HostAddressLen bytes of host
 *     address followed by DiscriminatorLen bytes of discriminator, stored
 *     from HostAddress[0] on.  Allocate sizeof(VIP_NET_ADDRESS) +
 *     NicAddressLen + the discriminator length.
 *
 * C89/C99/C11 and C++ compatible.
 */
#ifndef _VIPL_H
#define _VIPL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Lets a program detect that it is built against Remora's VIPL. */
#define VIPL_REMORA 1

/* Parameter direction annotations (documentation only). */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef IN_OUT
#define IN_OUT
#endif

/* ------------------------------------------------------------------------
 * Base types
 * ---------------------------------------------------------------------- */

typedef uint64_t VIP_UINT64;
typedef uint32_t VIP_UINT32;
typedef uint16_t VIP_UINT16;
typedef uint8_t VIP_UINT8;

typedef void *VIP_PVOID;
typedef int VIP_BOOLEAN;
typedef char VIP_CHAR;
typedef unsigned char VIP_UCHAR;
typedef unsigned short VIP_USHORT;
typedef unsigned long VIP_ULONG;

typedef VIP_PVOID VIP_QOS;

#define VIP_TRUE 1
#define VIP_FALSE 0

/*
 * Timeout meaning "wait forever".  The library treats any timeout
 * >= 0xFFFFFFFF ms as infinite, whatever the width of VIP_ULONG.
 */
#ifndef VIP_INFINITE
#define VIP_INFINITE ((VIP_ULONG)0xFFFFFFFFUL)
#endif

/* ------------------------------------------------------------------------
 * Handles
 * ---------------------------------------------------------------------- */

typedef VIP_PVOID VIP_NIC_HANDLE;
typedef VIP_PVOID VIP_VI_HANDLE;
typedef VIP_PVOID VIP_PROTECTION_HANDLE;
typedef VIP_PVOID VIP_CONN_HANDLE;
typedef VIP_PVOID VIP_CQ_HANDLE;

/* Handle of a registered memory region (a 32-bit value, not a pointer). */
typedef VIP_UINT32 VIP_MEM_HANDLE;

/* ------------------------------------------------------------------------
 * Network address (variable length; see the conventions above)
 * ---------------------------------------------------------------------- */

typedef struct {
	VIP_UINT16 HostAddressLen;   /* bytes of host address in HostAddress */
	VIP_UINT16 DiscriminatorLen; /* bytes of discriminator that follow it */
	VIP_UINT8 HostAddress[1];    /* host address, then discriminator */
	char padding[8 - 2 * 2 - 1]; /* keeps sizeof(VIP_NET_ADDRESS) == 8 */
} VIP_NET_ADDRESS;

/* ------------------------------------------------------------------------
 * Reliability levels (bit values, also used as capability masks)
 * ---------------------------------------------------------------------- */

typedef VIP_USHORT VIP_RELIABILITY_LEVEL;

#define VIP_SERVICE_UNRELIABLE        0x01
#define VIP_SERVICE_RELIABLE_DELIVERY 0x02
#define VIP_SERVICE_RELIABLE_RECEPTION 0x04

/* ------------------------------------------------------------------------
 * NIC attributes (VipQueryNic)
 * ---------------------------------------------------------------------- */

typedef struct {
	VIP_CHAR Name[64];                          /* NIC name */
	VIP_ULONG HardwareVersion;                  /* hardware version */
	VIP_ULONG ProviderVersion;                  /* VIPL provider version */
	VIP_UINT16 NicAddressLen;                   /* bytes of a host address */
	const VIP_UINT8 *LocalNicAddress;           /* this NIC's host address */
	VIP_BOOLEAN ThreadSafe;                     /* calls may be made from any thread */
	VIP_UINT16 MaxDiscriminatorLen;             /* longest discriminator */
	VIP_ULONG MaxRegisterBytes;                 /* total registrable bytes */
	VIP_ULONG MaxRegisterRegions;               /* number of registrable regions */
	VIP_ULONG MaxRegisterBlockBytes;            /* largest single region */
	VIP_ULONG MaxVI;                            /* number of VIs */
	VIP_ULONG MaxDescriptorsPerQueue;           /* work queue depth */
	VIP_ULONG MaxSegmentsPerDesc;               /* data segments per descriptor */
	VIP_ULONG MaxCQ;                            /* number of completion queues */
	VIP_ULONG MaxCQEntries;                     /* entries per completion queue */
	VIP_ULONG MaxTransferSize;                  /* largest transfer */
	VIP_ULONG NativeMTU;                        /* native transfer unit */
	VIP_ULONG MaxPtags;                         /* number of protection tags */
	VIP_RELIABILITY_LEVEL ReliabilityLevelSupport; /* mask of VIP_SERVICE_* */
	VIP_RELIABILITY_LEVEL RDMAReadSupport;      /* levels allowing RDMA read */
} VIP_NIC_ATTRIBUTES;

/* ------------------------------------------------------------------------
 * Descriptors
 * ---------------------------------------------------------------------- */

/* Required alignment of every descriptor, in bytes. */
#define VIP_DESCRIPTOR_ALIGNMENT 64

/* A 64-bit address field, whatever the pointer width. */
typedef union {
	VIP_UINT64 AddressBits;
	VIP_PVOID Address;
} VIP_PVOID64;

/* Control segment: the first 32 bytes of every descriptor. */
typedef struct {
	VIP_PVOID64 Next;         /* link to the next descriptor (provider use) */
	VIP_MEM_HANDLE NextHandle; /* memory handle of Next (provider use) */
	VIP_UINT16 SegCount;      /* number of segments following */
	VIP_UINT16 Control;       /* VIP_CONTROL_* bits */
	VIP_UINT32 Reserved;
	VIP_UINT32 ImmediateData; /* sent/received with VIP_CONTROL_IMMEDIATE */
	VIP_UINT32 Length;        /* total bytes; set to bytes received on completion */
	VIP_UINT32 Status;        /* VIP_STATUS_* bits, written on completion */
} VIP_CONTROL_SEGMENT;

/* Address segment: the remote buffer of an RDMA operation. */
typedef struct {
	VIP_PVOID64 Data;         /* remote virtual address */
	VIP_MEM_HANDLE Handle;    /* remote memory handle */
	VIP_UINT32 Reserved;
} VIP_ADDRESS_SEGMENT;

/* Data segment: one local buffer. */
typedef struct {
	VIP_PVOID64 Data;         /* local virtual address */
	VIP_MEM_HANDLE Handle;    /* memory handle of that buffer */
	VIP_UINT32 Length;        /* bytes */
} VIP_DATA_SEGMENT;

typedef union {
	VIP_ADDRESS_SEGMENT Remote;
	VIP_DATA_SEGMENT Local;
} VIP_DESCRIPTOR_SEGMENT;

/*
 * A descriptor with room for two segments (64 bytes).  Longer descriptors
 * are laid out by the program as a control segment followed by SegCount
 * segments.
 */
typedef struct _VIP_DESCRIPTOR {
	VIP_CONTROL_SEGMENT CS;
	VIP_DESCRIPTOR_SEGMENT DS[2];
} VIP_DESCRIPTOR;

#if defined(__cplusplus) && __cplusplus >= 201103L
static_assert(sizeof(VIP_NET_ADDRESS) == 8, "VIP_NET_ADDRESS is 8 bytes");
static_assert(sizeof(VIP_CONTROL_SEGMENT) == 32, "VIP_CONTROL_SEGMENT is 32 bytes");
static_assert(sizeof(VIP_DATA_SEGMENT) == 16, "VIP_DATA_SEGMENT is 16 bytes");
static_assert(sizeof(VIP_DESCRIPTOR) == 64, "VIP_DESCRIPTOR is 64 bytes");
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(VIP_NET_ADDRESS) == 8, "VIP_NET_ADDRESS is 8 bytes");
_Static_assert(sizeof(VIP_CONTROL_SEGMENT) == 32, "VIP_CONTROL_SEGMENT is 32 bytes");
_Static_assert(sizeof(VIP_DATA_SEGMENT) == 16, "VIP_DATA_SEGMENT is 16 bytes");
_Static_assert(sizeof(VIP_DESCRIPTOR) == 64, "VIP_DESCRIPTOR is 64 bytes");
#endif

/* Control segment, Control field */
#define VIP_CONTROL_OP_SENDRECV  0x0
#define VIP_CONTROL_OP_RDMAWRITE 0x1
#define VIP_CONTROL_OP_RDMAREAD  0x2
#define VIP_CONTROL_OP_RESERVED  0x3
#define VIP_CONTROL_OP_MASK      0x3
#define VIP_CONTROL_IMMEDIATE    0x4
#define VIP_CONTROL_QFENCE       0x8
#define VIP_CONTROL_RESERVED     0xFFF0

/* Control segment, Status field */
#define VIP_STATUS_DONE               0x1
#define VIP_STATUS_FORMAT_ERROR       0x2
#define VIP_STATUS_PROTECTION_ERROR   0x4
#define VIP_STATUS_LENGTH_ERROR       0x8
#define VIP_STATUS_PARTIAL_ERROR      0x10
#define VIP_STATUS_DESC_FLUSHED_ERROR 0x20
#define VIP_STATUS_TRANSPORT_ERROR    0x40
#define VIP_STATUS_RDMA_PROT_ERROR    0x80
#define VIP_STATUS_REMOTE_DESC_ERROR  0x100
#define VIP_STATUS_ERROR_MASK         0x1FE

#define VIP_STATUS_OP_SEND             0x0
#define VIP_STATUS_OP_RECEIVE          0x10000
#define VIP_STATUS_OP_RDMA_WRITE       0x20000
#define VIP_STATUS_OP_REMOTE_RDMA_WRITE 0x30000
#define VIP_STATUS_OP_RDMA_READ        0x40000
#define VIP_STATUS_OP_MASK             0x70000
#define VIP_STATUS_IMMEDIATE           0x80000
#define VIP_STATUS_RESERVED            0xFFF0FE00

/* ------------------------------------------------------------------------
 * VI and memory attributes
 * ---------------------------------------------------------------------- */

typedef enum {
	VIP_STATE_IDLE,
	VIP_STATE_CONNECTED,
	VIP_STATE_CONNECT_PENDING,
	VIP_STATE_ERROR
} VIP_VI_STATE;

typedef struct {
	VIP_RELIABILITY_LEVEL ReliabilityLevel; /* one VIP_SERVICE_* value */
	VIP_ULONG MaxTransferSize;              /* largest transfer on this VI */
	VIP_QOS QoS;                            /* quality of service (unused) */
	VIP_PROTECTION_HANDLE Ptag;             /* protection tag of the VI */
	VIP_BOOLEAN EnableRdmaWrite;            /* accept remote RDMA writes */
	VIP_BOOLEAN EnableRdmaRead;             /* accept remote RDMA reads */
} VIP_VI_ATTRIBUTES;

typedef struct {
	VIP_PROTECTION_HANDLE Ptag;             /* protection tag of the region */
	VIP_BOOLEAN EnableRdmaWrite;            /* region may be RDMA written */
	VIP_BOOLEAN EnableRdmaRead;             /* region may be RDMA read */
} VIP_MEM_ATTRIBUTES;

/* ------------------------------------------------------------------------
 * Asynchronous errors (VipErrorCallback)
 * ---------------------------------------------------------------------- */

typedef enum {
	VIP_ERROR_POST_DESC,
	VIP_ERROR_CONN_LOST,
	VIP_ERROR_RECVQ_EMPTY,
	VIP_ERROR_VI_OVERRUN,
	VIP_ERROR_RDMAW_PROT,
	VIP_ERROR_RDMAW_DATA,
	VIP_ERROR_RDMAW_ABORT,
	VIP_ERROR_RDMAR_PROT,
	VIP_ERROR_COMP_PROT,
	VIP_ERROR_RDMA_TRANSPORT,
	VIP_ERROR_CATASTROPHIC
} VIP_ERROR_CODE;

typedef enum {
	VIP_RESOURCE_NIC,
	VIP_RESOURCE_VI,
	VIP_RESOURCE_CQ,
	VIP_RESOURCE_DESCRIPTOR
} VIP_RESOURCE_CODE;

typedef struct {
	VIP_NIC_HANDLE NicHandle;        /* NIC the error happened on */
	VIP_VI_HANDLE ViHandle;          /* VI concerned, or NULL */
	VIP_CQ_HANDLE CQHandle;          /* CQ concerned, or NULL */
	VIP_DESCRIPTOR *DescriptorPtr;   /* descriptor concerned, or NULL */
	VIP_ULONG OpCode;                /* operation concerned */
	VIP_RESOURCE_CODE ResourceCode;  /* kind of resource concerned */
	VIP_ERROR_CODE ErrorCode;        /* what went wrong */
} VIP_ERROR_DESCRIPTOR;

/* ------------------------------------------------------------------------
 * Return codes
 * ---------------------------------------------------------------------- */

typedef enum {
	VIP_SUCCESS,
	VIP_NOT_DONE,
	VIP_INVALID_PARAMETER,
	VIP_ERROR_RESOURCE,
	VIP_TIMEOUT,
	VIP_REJECT,
	VIP_INVALID_RELIABILITY_LEVEL,
	VIP_INVALID_MTU,
	VIP_INVALID_QOS,
	VIP_INVALID_PTAG,
	VIP_INVALID_RDMAREAD,
	VIP_DESCRIPTOR_ERROR,
	VIP_INVALID_STATE,
	VIP_ERROR_NAMESERVICE,
	VIP_NO_MATCH
} VIP_RETURN;

/* ------------------------------------------------------------------------
 * System management information (VipQuerySystemManagementInfo)
 * ---------------------------------------------------------------------- */

#define VIP_SMI_AUTODISCOVERY ((VIP_ULONG)1)

typedef struct {
	VIP_ULONG NumberOfHops;          /* hops to search */
	VIP_NET_ADDRESS **ADAddrArray;   /* array of address buffers to fill */
	VIP_ULONG NumAdAddrs;            /* entries of ADAddrArray */
} VIP_AUTODISCOVERY_LIST;

/* ------------------------------------------------------------------------
 * Notification handlers
 * ---------------------------------------------------------------------- */

/* Called with a completed descriptor (VipSendNotify, VipRecvNotify). */
typedef void (*VIP_VI_NOTIFY_HANDLER)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle,
    VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr);
/* Called with the VI and queue of a completion (VipCQNotify). */
typedef void (*VIP_CQ_NOTIFY_HANDLER)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle,
    VIP_VI_HANDLE ViHandle, VIP_BOOLEAN RecvQueue);
/* Called for an asynchronous error (VipErrorCallback). */
typedef void (*VIP_ERROR_HANDLER)(VIP_PVOID Context, VIP_ERROR_DESCRIPTOR *ErrorDesc);

/* ------------------------------------------------------------------------
 * NIC
 * ---------------------------------------------------------------------- */

/* Opens the NIC named DeviceName and returns its handle. */
VIP_RETURN VipOpenNic(IN const VIP_CHAR *DeviceName, OUT VIP_NIC_HANDLE *NicHandle);

/* Closes a NIC handle. */
VIP_RETURN VipCloseNic(IN VIP_NIC_HANDLE NicHandle);

/* Returns the attributes of a NIC. */
VIP_RETURN VipQueryNic(IN VIP_NIC_HANDLE NicHandle, OUT VIP_NIC_ATTRIBUTES *NicAttribs);

/* Returns system management information of type InfoType into SysManInfo. */
VIP_RETURN VipQuerySystemManagementInfo(IN VIP_NIC_HANDLE NicHandle, IN VIP_ULONG InfoType,
    OUT VIP_PVOID SysManInfo);

/* Installs the handler called for asynchronous errors on the NIC. */
VIP_RETURN VipErrorCallback(IN VIP_NIC_HANDLE NicHandle, IN VIP_PVOID Context,
    IN void (*Handler)(VIP_PVOID Context, VIP_ERROR_DESCRIPTOR *ErrorDesc));

/* ------------------------------------------------------------------------
 * Virtual interfaces
 * ---------------------------------------------------------------------- */

/* Creates a VI with the given attributes and optional send/receive CQs. */
VIP_RETURN VipCreateVi(IN VIP_NIC_HANDLE NicHandle, IN VIP_VI_ATTRIBUTES *ViAttribs,
    IN VIP_CQ_HANDLE SendCQHandle, IN VIP_CQ_HANDLE RecvCQHandle, OUT VIP_VI_HANDLE *ViHandle);

/* Destroys an idle VI. */
VIP_RETURN VipDestroyVi(IN VIP_VI_HANDLE ViHandle);

/* Changes the attributes of a VI. */
VIP_RETURN VipSetViAttributes(IN VIP_VI_HANDLE ViHandle, IN VIP_VI_ATTRIBUTES *ViAttribs);

/* Returns the state and attributes of a VI and whether its queues are empty. */
VIP_RETURN VipQueryVi(IN VIP_VI_HANDLE ViHandle, OUT VIP_VI_STATE *State,
    OUT VIP_VI_ATTRIBUTES *ViAttribs, OUT VIP_BOOLEAN *ViSendQEmpty,
    OUT VIP_BOOLEAN *ViRecvQEmpty);

/* ------------------------------------------------------------------------
 * Client/server connections
 * ---------------------------------------------------------------------- */

/* Waits for a connection request to LocalAddr; returns the requester and a connection handle. */
VIP_RETURN VipConnectWait(IN VIP_NIC_HANDLE NicHandle, IN VIP_NET_ADDRESS *LocalAddr,
    IN VIP_ULONG Timeout, OUT VIP_NET_ADDRESS *RemoteAddr,
    OUT VIP_VI_ATTRIBUTES *RemoteViAttribs, OUT VIP_CONN_HANDLE *ConnHandle);

/* Accepts a pending connection request, connecting it to ViHandle. */
VIP_RETURN VipConnectAccept(IN VIP_CONN_HANDLE ConnHandle, IN VIP_VI_HANDLE ViHandle);

/* Rejects a pending connection request. */
VIP_RETURN VipConnectReject(IN VIP_CONN_HANDLE ConnHandle);

/* Requests a connection of ViHandle to RemoteAddr and waits for the answer. */
VIP_RETURN VipConnectRequest(IN VIP_VI_HANDLE ViHandle, IN VIP_NET_ADDRESS *LocalAddr,
    IN VIP_NET_ADDRESS *RemoteAddr, IN VIP_ULONG Timeout, OUT VIP_VI_ATTRIBUTES *RemoteViAttribs);

/* Disconnects a VI, flushing its posted descriptors, and returns it to the idle state. */
VIP_RETURN VipDisconnect(IN VIP_VI_HANDLE ViHandle);

/* ------------------------------------------------------------------------
 * Peer-to-peer connections
 * ---------------------------------------------------------------------- */

/* Starts a peer-to-peer connection of ViHandle between LocalAddr and RemoteAddr. */
VIP_RETURN VipConnectPeerRequest(IN VIP_VI_HANDLE ViHandle, IN VIP_NET_ADDRESS *LocalAddr,
    IN VIP_NET_ADDRESS *RemoteAddr, IN VIP_ULONG Timeout);

/* Polls a peer-to-peer connection request; VIP_NOT_DONE while still pending. */
VIP_RETURN VipConnectPeerDone(IN VIP_VI_HANDLE ViHandle, OUT VIP_VI_ATTRIBUTES *RemoteViAttribs);

/* Waits for a peer-to-peer connection request to complete. */
VIP_RETURN VipConnectPeerWait(IN VIP_VI_HANDLE ViHandle, OUT VIP_VI_ATTRIBUTES *RemoteViAttribs);

/* ------------------------------------------------------------------------
 * Protection tags and memory registration
 * ---------------------------------------------------------------------- */

/* Creates a protection tag. */
VIP_RETURN VipCreatePtag(IN VIP_NIC_HANDLE NicHandle, OUT VIP_PROTECTION_HANDLE *Ptag);

/* Destroys a protection tag no VI or memory region uses any more. */
VIP_RETURN VipDestroyPtag(IN VIP_NIC_HANDLE NicHandle, IN VIP_PROTECTION_HANDLE Ptag);

/* Registers Length bytes at VirtualAddress and returns their memory handle. */
VIP_RETURN VipRegisterMem(IN VIP_NIC_HANDLE NicHandle, IN VIP_PVOID VirtualAddress,
    IN VIP_ULONG Length, IN VIP_MEM_ATTRIBUTES *MemAttribs, OUT VIP_MEM_HANDLE *MemoryHandle);

/* Deregisters the region starting at VirtualAddress with handle MemoryHandle. */
VIP_RETURN VipDeregisterMem(IN VIP_NIC_HANDLE NicHandle, IN VIP_PVOID VirtualAddress,
    IN VIP_MEM_HANDLE MemoryHandle);

/* Changes the attributes of a registered region. */
VIP_RETURN VipSetMemAttributes(IN VIP_NIC_HANDLE NicHandle, IN VIP_PVOID Address,
    IN VIP_MEM_HANDLE MemHandle, IN VIP_MEM_ATTRIBUTES *MemAttribs);

/* Returns the attributes of a registered region. */
VIP_RETURN VipQueryMem(IN VIP_NIC_HANDLE NicHandle, IN VIP_PVOID Address,
    IN VIP_MEM_HANDLE MemHandle, OUT VIP_MEM_ATTRIBUTES *MemAttribs);

/* ------------------------------------------------------------------------
 * Data transfer
 * ---------------------------------------------------------------------- */

/* Posts a send, RDMA write or RDMA read descriptor on the send queue. */
VIP_RETURN VipPostSend(IN VIP_VI_HANDLE ViHandle, IN VIP_DESCRIPTOR *DescriptorPtr,
    IN VIP_MEM_HANDLE MemoryHandle);

/* Removes the oldest completed send descriptor; VIP_NOT_DONE if there is none. */
VIP_RETURN VipSendDone(IN VIP_VI_HANDLE ViHandle, OUT VIP_DESCRIPTOR **DescriptorPtr);

/* Waits up to Timeout ms for a send descriptor to complete and removes it. */
VIP_RETURN VipSendWait(IN VIP_VI_HANDLE ViHandle, IN VIP_ULONG Timeout,
    OUT VIP_DESCRIPTOR **DescriptorPtr);

/* Posts a receive descriptor on the receive queue. */
VIP_RETURN VipPostRecv(IN VIP_VI_HANDLE ViHandle, IN VIP_DESCRIPTOR *DescriptorPtr,
    IN VIP_MEM_HANDLE MemoryHandle);

/* Removes the oldest completed receive descriptor; VIP_NOT_DONE if there is none. */
VIP_RETURN VipRecvDone(IN VIP_VI_HANDLE ViHandle, OUT VIP_DESCRIPTOR **DescriptorPtr);

/* Waits up to Timeout ms for a receive descriptor to complete and removes it. */
VIP_RETURN VipRecvWait(IN VIP_VI_HANDLE ViHandle, IN VIP_ULONG Timeout,
    OUT VIP_DESCRIPTOR **DescriptorPtr);

/* Calls Handler (from another thread) with the next completed send descriptor. */
VIP_RETURN VipSendNotify(IN VIP_VI_HANDLE ViHandle, IN VIP_PVOID Context,
    IN void (*Handler)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle, VIP_VI_HANDLE ViHandle,
        VIP_DESCRIPTOR *DescriptorPtr));

/* Calls Handler (from another thread) with the next completed receive descriptor. */
VIP_RETURN VipRecvNotify(IN VIP_VI_HANDLE ViHandle, IN VIP_PVOID Context,
    IN void (*Handler)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle, VIP_VI_HANDLE ViHandle,
        VIP_DESCRIPTOR *DescriptorPtr));

/* ------------------------------------------------------------------------
 * Completion queues
 * ---------------------------------------------------------------------- */

/* Creates a completion queue of EntryCount entries. */
VIP_RETURN VipCreateCQ(IN VIP_NIC_HANDLE NicHandle, IN VIP_ULONG EntryCount,
    OUT VIP_CQ_HANDLE *CQHandle);

/* Destroys a completion queue no work queue is attached to. */
VIP_RETURN VipDestroyCQ(IN VIP_CQ_HANDLE CQHandle);

/* Changes the number of entries of a completion queue. */
VIP_RETURN VipResizeCQ(IN VIP_CQ_HANDLE CQHandle, IN VIP_ULONG EntryCount);

/* Removes the oldest completion entry: its VI and whether it is a receive; VIP_NOT_DONE if none. */
VIP_RETURN VipCQDone(IN VIP_CQ_HANDLE CQHandle, OUT VIP_VI_HANDLE *ViHandle,
    OUT VIP_BOOLEAN *RecvQueue);

/* Waits up to Timeout ms for a completion entry and removes it. */
VIP_RETURN VipCQWait(IN VIP_CQ_HANDLE CQHandle, IN VIP_ULONG Timeout,
    OUT VIP_VI_HANDLE *ViHandle, OUT VIP_BOOLEAN *RecvQueue);

/* Calls Handler (from another thread) with the next completion entry. */
VIP_RETURN VipCQNotify(IN VIP_CQ_HANDLE CQHandle, IN VIP_PVOID Context,
    IN void (*Handler)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle, VIP_VI_HANDLE ViHandle,
        VIP_BOOLEAN RecvQueue));

/* ------------------------------------------------------------------------
 * Name service
 * ---------------------------------------------------------------------- */

/* Initializes the name service of a NIC (NSInitInfo may be NULL). */
VIP_RETURN VipNSInit(IN VIP_NIC_HANDLE NicHandle, IN VIP_PVOID NSInitInfo);

/* Writes the host address of Name (NameIndex-th address) into Address. */
VIP_RETURN VipNSGetHostByName(IN VIP_NIC_HANDLE NicHandle, IN VIP_CHAR *Name,
    OUT VIP_NET_ADDRESS *Address, IN VIP_ULONG NameIndex);

/* Writes the host name of Address into Name; *NameLen is the buffer size in, the length out. */
VIP_RETURN VipNSGetHostByAddr(IN VIP_NIC_HANDLE NicHandle, IN VIP_NET_ADDRESS *Address,
    OUT VIP_CHAR *Name, IN_OUT VIP_ULONG *NameLen);

/* Shuts the name service of a NIC down. */
VIP_RETURN VipNSShutdown(IN VIP_NIC_HANDLE NicHandle);

#ifdef __cplusplus
}
#endif

#endif /* _VIPL_H */
