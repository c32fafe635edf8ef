/*
 * scif.h - Intel SCIF user-mode API (Remora implementation).
 *
 * Remora provides libscif.so, a user-mode SCIF library that runs on plain
 * Linux without a Xeon Phi, /dev/scif or the MPSS kernel modules.  This header
 * is written for Remora; it is source compatible with programs built against
 * the MPSS 4 user-mode <scif.h> (same type names, constant values and
 * function signatures).  Link with -lscif (and -lpthread for threaded
 * programs).
 *
 * Conventions:
 *   - Every call reports failure the user-mode way: it returns -1 (or one of
 *     the SCIF_*_FAILED sentinels) and sets errno.  The errno values listed
 *     for each function below are the ones the SCIF documentation assigns
 *     to it.  An argument that is not an endpoint at all gives EBADF or
 *     EINVAL (MPSS documents both).
 *   - An endpoint descriptor (scif_epd_t) is an int, as in MPSS on Linux;
 *     scif_get_fd() returns it unchanged, and it can be handed to poll() and
 *     select().  Endpoints survive fork(): parent and child then share the
 *     endpoint and its registered address space.
 *   - Node ids: on Remora a SCIF node is a Remora node (REMORA_NODE, a
 *     16-bit id; MPSS numbered the host 0 and the cards 1..n).  Several
 *     nodes may live on one host, and a connection to one's own node
 *     (loopback) is ordinary and fully supported.
 *   - Registered offsets and lengths are multiples of the 4 KiB page.
 *
 * C89/C99 and C++ compatible.
 */
#ifndef __SCIF_H__
#define __SCIF_H__

#include <stdint.h>
#include <sys/types.h>
#include <poll.h>
/* MPSS's header also pulled these in; some programs rely on it for errno. */
#include <errno.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Lets a program detect that it is built against Remora. */
#define REMORA_SCIF_IMPLEMENTATION 1

/* ------------------------------------------------------------------------
 * Flags
 * ---------------------------------------------------------------------- */

/* scif_accept(): wait for a connection request instead of failing EAGAIN. */
#define SCIF_ACCEPT_SYNC 1
/* scif_send(): return only once every byte has been queued. */
#define SCIF_SEND_BLOCK 1
/* scif_recv(): return only once the whole buffer has been filled. */
#define SCIF_RECV_BLOCK 1

/* Old spellings kept for source compatibility; prefer the SCIF_ names. */
#define ACCEPT_SYNC SCIF_ACCEPT_SYNC
#define SEND_BLOCK  SCIF_SEND_BLOCK
#define RECV_BLOCK  SCIF_RECV_BLOCK

/* Window protection (scif_register) and mapping protection (scif_mmap). */
enum {
    SCIF_PROT_READ  = (1 << 0),
    SCIF_PROT_WRITE = (1 << 1)
};

/* map_flags of scif_register() and scif_mmap(). */
enum {
    SCIF_MAP_FIXED  = 0x10,   /* place the window / mapping exactly there */
    SCIF_MAP_KERNEL = 0x20    /* kernel-mode only; rejected in user mode */
};

/* Which RMAs a fence covers: those issued through this endpoint or through
 * its peer.  scif_fence_mark() and scif_fence_signal() take exactly one. */
enum {
    SCIF_FENCE_INIT_SELF = (1 << 0),
    SCIF_FENCE_INIT_PEER = (1 << 1)
};

/* MPSS 3/4 only (absent from the upstream kernel header). */
enum {
    SCIF_FENCE_RAS_SELF = (1 << 2),
    SCIF_FENCE_RAS_PEER = (1 << 3)
};

/* scif_fence_signal(): where the completion value(s) get written. */
enum {
    SCIF_SIGNAL_LOCAL  = (1 << 4),
    SCIF_SIGNAL_REMOTE = (1 << 5)
};

/* rma_flags of scif_readfrom/writeto/vreadfrom/vwriteto. */
#define SCIF_RMA_USECPU   1         /* copy with the CPU rather than "DMA" */
#define SCIF_RMA_USECACHE (1 << 1)  /* keep the temporary registration (v*) */
#define SCIF_RMA_SYNC     (1 << 2)  /* return only when the copy is complete */
#define SCIF_RMA_ORDERED  (1 << 3)  /* last cache line lands after the rest */

/* Event bits of scif_poll(): the same values as poll(2). */
#define SCIF_POLLIN   POLLIN
#define SCIF_POLLOUT  POLLOUT
#define SCIF_POLLERR  POLLERR
#define SCIF_POLLHUP  POLLHUP
#define SCIF_POLLNVAL POLLNVAL

/* ------------------------------------------------------------------------
 * Reserved port numbers (MPSS assignments, kept for compatibility)
 * ---------------------------------------------------------------------- */

/* Coprocessor Offload Infrastructure */
#define SCIF_COI_PORT_0 40
#define SCIF_COI_PORT_1 41
#define SCIF_COI_PORT_2 42
#define SCIF_COI_PORT_3 43
#define SCIF_COI_PORT_4 44
#define SCIF_COI_PORT_5 45
#define SCIF_COI_PORT_6 46
#define SCIF_COI_PORT_7 47
#define SCIF_COI_PORT_8 48
#define SCIF_COI_PORT_9 49

/* OFED */
#define SCIF_OFED_PORT_0 60
#define SCIF_OFED_PORT_1 61
#define SCIF_OFED_PORT_2 62
#define SCIF_OFED_PORT_3 63
#define SCIF_OFED_PORT_4 64
#define SCIF_OFED_PORT_5 65
#define SCIF_OFED_PORT_6 66
#define SCIF_OFED_PORT_7 67
#define SCIF_OFED_PORT_8 68
#define SCIF_OFED_PORT_9 69

/* Virtual network device */
#define SCIF_NETDEV_PORT_0 80
#define SCIF_NETDEV_PORT_1 81
#define SCIF_NETDEV_PORT_2 82
#define SCIF_NETDEV_PORT_3 83
#define SCIF_NETDEV_PORT_4 84
#define SCIF_NETDEV_PORT_5 85
#define SCIF_NETDEV_PORT_6 86
#define SCIF_NETDEV_PORT_7 87
#define SCIF_NETDEV_PORT_8 88
#define SCIF_NETDEV_PORT_9 89

/* Reliability / availability / serviceability */
#define SCIF_RAS_PORT_0 100
#define SCIF_RAS_PORT_1 101
#define SCIF_RAS_PORT_2 102
#define SCIF_RAS_PORT_3 103
#define SCIF_RAS_PORT_4 104
#define SCIF_RAS_PORT_5 105
#define SCIF_RAS_PORT_6 106
#define SCIF_RAS_PORT_7 107
#define SCIF_RAS_PORT_8 108
#define SCIF_RAS_PORT_9 109

/* Power management */
#define SCIF_PM_PORT_0 120
#define SCIF_PM_PORT_1 121
#define SCIF_PM_PORT_2 122
#define SCIF_PM_PORT_3 123
#define SCIF_PM_PORT_4 124
#define SCIF_PM_PORT_5 125
#define SCIF_PM_PORT_6 126
#define SCIF_PM_PORT_7 127
#define SCIF_PM_PORT_8 128
#define SCIF_PM_PORT_9 129

/* Board tools */
#define SCIF_BT_PORT_0 130
#define SCIF_BT_PORT_1 131
#define SCIF_BT_PORT_2 132
#define SCIF_BT_PORT_3 133
#define SCIF_BT_PORT_4 134
#define SCIF_BT_PORT_5 135
#define SCIF_BT_PORT_6 136
#define SCIF_BT_PORT_7 137
#define SCIF_BT_PORT_8 138
#define SCIF_BT_PORT_9 139

/* Card boot / configuration daemon */
#define MPSSD_MONRECV 160
#define MIC_NOTIFY    161
#define MPSSD_CRED    162
#define MPSSD_MONSEND 163
#define MPSSD_MICCTRL 164
#define MPSSD_RESV5   165
#define MPSSD_RESV6   166
#define MPSSD_RESV7   167
#define MPSSD_RESV8   168
#define MPSSD_RESV9   169

/* COSM server */
#define SCIF_COSM_LISTEN_PORT 201

/* Ports below this one need root (or CAP_SYS_ADMIN) to bind. */
#define SCIF_ADMIN_PORT_END 1024

/* MYO */
#define SCIF_MYO_PORT_0 1025
#define SCIF_MYO_PORT_1 1026
#define SCIF_MYO_PORT_2 1027
#define SCIF_MYO_PORT_3 1028
#define SCIF_MYO_PORT_4 1029
#define SCIF_MYO_PORT_5 1030
#define SCIF_MYO_PORT_6 1031
#define SCIF_MYO_PORT_7 1032
#define SCIF_MYO_PORT_8 1033
#define SCIF_MYO_PORT_9 1034

/* Software and services group tools */
#define SCIF_ST_PORT_0 1044
#define SCIF_ST_PORT_1 1045
#define SCIF_ST_PORT_2 1046
#define SCIF_ST_PORT_3 1047
#define SCIF_ST_PORT_4 1048
#define SCIF_ST_PORT_5 1049
#define SCIF_ST_PORT_6 1050
#define SCIF_ST_PORT_7 1051
#define SCIF_ST_PORT_8 1052
#define SCIF_ST_PORT_9 1053

/* Everything below this is reserved; scif_bind(epd, 0) picks ports >= it. */
#define SCIF_PORT_RSVD 1088

/* ------------------------------------------------------------------------
 * Types
 * ---------------------------------------------------------------------- */

/* An endpoint descriptor (a file descriptor on Linux). */
typedef int scif_epd_t;

/* A port anywhere in the SCIF network: node id plus local port number. */
struct scif_portID {
    uint16_t node;
    uint16_t port;
};

/* Old name of struct scif_portID, kept for source compatibility. */
#define portID scif_portID
typedef struct portID portID_t;

/* One entry of a scif_poll() set; same layout as struct pollfd. */
struct scif_pollepd {
    scif_epd_t epd;   /* endpoint to watch */
    short events;     /* SCIF_POLL* bits wanted */
    short revents;    /* SCIF_POLL* bits that happened (output) */
};

#define SCIF_OPEN_FAILED     ((scif_epd_t)-1)
#define SCIF_REGISTER_FAILED ((off_t)-1)
#define SCIF_MMAP_FAILED     ((void *)-1)

/* ------------------------------------------------------------------------
 * Endpoints and connections
 * ---------------------------------------------------------------------- */

/* Creates an unbound endpoint.  Returns its descriptor, or SCIF_OPEN_FAILED
 * with errno ENOMEM. */
scif_epd_t scif_open(void);

/* Closes epd.  A listener stops accepting and its pending requests are
 * refused; a connected endpoint takes its peer down with it (the peer may
 * still drain queued messages, then sees ECONNRESET).  Windows of both ends
 * are unregistered; existing scif_mmap() mappings stay valid until unmapped.
 * Threads blocked on epd are woken.  Returns 0; errors: EBADF/EINVAL. */
int scif_close(scif_epd_t epd);

/* Binds epd to local port pn, or to a free port >= SCIF_PORT_RSVD if pn is
 * 0.  Returns the port.  Errors: EINVAL (epd already bound, or the port is
 * taken), EISCONN (epd connected or listening), ENOSPC (no free port),
 * EACCES (pn < SCIF_ADMIN_PORT_END and the caller is not privileged). */
int scif_bind(scif_epd_t epd, uint16_t pn);

/* Makes a bound endpoint a listener for up to backlog pending requests.
 * Returns 0.  Errors: EINVAL (not bound, or backlog <= 0), EISCONN
 * (already connected or listening). */
int scif_listen(scif_epd_t epd, int backlog);

/* Connects epd (bound to a free port first if needed) to the listener at
 * *dst, which may be on the caller's own node.  Blocks until accepted unless
 * O_NONBLOCK is set on the descriptor.  Returns the local port of epd.
 * Errors: ECONNREFUSED (nobody listens there, or the backlog is full),
 * EINVAL (dst NULL or dst->port invalid), EISCONN (already connected),
 * ENODEV (no such node), ENOMEM, ENOSPC, EOPNOTSUPP (epd is listening). */
int scif_connect(scif_epd_t epd, struct scif_portID *dst);

/* Takes the first pending request off listener epd and returns a new
 * connected endpoint in *newepd and the requester's port id in *peer.
 * Without SCIF_ACCEPT_SYNC it does not wait.  Returns 0.  Errors: EAGAIN
 * (no request pending and not SCIF_ACCEPT_SYNC), EINTR, EINVAL (epd not
 * listening, bad flags, peer or newepd NULL), ENODEV, ENOMEM, ENOENT. */
int scif_accept(scif_epd_t epd, struct scif_portID *peer, scif_epd_t *newepd,
                int flags);

/* ------------------------------------------------------------------------
 * Messages
 * ---------------------------------------------------------------------- */

/* Queues up to len bytes of msg for the peer.  Without SCIF_SEND_BLOCK it
 * sends only what fits now (possibly 0 bytes); with it, it waits for room
 * until all len bytes are queued.  Returns the number of bytes sent.
 * Errors: ECONNRESET (peer gone), EFAULT, EINTR, EINVAL (bad flags or
 * len < 0), ENODEV, ENOMEM, ENOTCONN (epd not connected). */
int scif_send(scif_epd_t epd, void *msg, int len, int flags);

/* Copies up to len received bytes into msg.  Without SCIF_RECV_BLOCK it
 * takes only what is queued and returns 0 when nothing is; with it, it waits
 * for all len bytes.  After the peer closed, queued bytes can still be
 * read; then it fails with ECONNRESET.  Returns the number of bytes
 * received.  Errors: EAGAIN, ECONNRESET, EFAULT, EINTR, EINVAL (bad flags or
 * len < 0), ENODEV, ENOMEM, ENOTCONN. */
int scif_recv(scif_epd_t epd, void *msg, int len, int flags);

/* ------------------------------------------------------------------------
 * Registered memory
 * ---------------------------------------------------------------------- */

/* Opens a window of epd's registered address space onto the pages at
 * [addr, addr + len).  addr and len must be page multiples (len > 0).  With
 * SCIF_MAP_FIXED the window starts exactly at offset (a page multiple);
 * otherwise offset is only a hint (0: anywhere).  prot_flags is a mix of
 * SCIF_PROT_READ/WRITE and limits what the peer may do with the window.
 * Returns the window's offset, or SCIF_REGISTER_FAILED.  Errors: EADDRINUSE
 * (SCIF_MAP_FIXED range overlaps a window), EAGAIN, ECONNRESET, EFAULT,
 * EINVAL (misaligned addr/len/offset, len 0, negative offset, bad flags),
 * ENODEV, ENOMEM, ENOTCONN. */
off_t scif_register(scif_epd_t epd, void *addr, size_t len, off_t offset,
                    int prot_flags, int map_flags);

/* Closes every window lying wholly inside [offset, offset + len).  Returns
 * 0; on error nothing is unregistered.  Errors: ECONNRESET, EINVAL (range
 * cuts a window, or offset negative), ENODEV, ENOTCONN, ENXIO (no window in
 * the range). */
int scif_unregister(scif_epd_t epd, off_t offset, size_t len);

/* Maps len bytes of the peer's registered address space at offset (one
 * window or several contiguous ones) into the caller's memory, at addr
 * exactly with SCIF_MAP_FIXED, else wherever (addr is a hint).  offset and
 * len are page multiples.  The mapping outlives the connection.  Returns the
 * address, or SCIF_MMAP_FAILED.  Errors: EACCES (prot_flags exceed the
 * window's protection; MPSS documents this as "EACCESS"), ECONNRESET,
 * ENOMEM, EINVAL (bad flags, misaligned addr/offset/len), ENODEV, ENOTCONN,
 * ENXIO (range not covered by windows, or offset negative). */
void *scif_mmap(void *addr, size_t len, int prot_flags, int map_flags,
                scif_epd_t epd, off_t offset);

/* Removes a mapping made by scif_mmap() (like munmap(2)).  Returns 0.
 * Errors: EINVAL. */
int scif_munmap(void *addr, size_t len);

/* ------------------------------------------------------------------------
 * Remote memory access
 *
 * Ranges may start and end anywhere (no alignment needed) and may cross
 * windows that are contiguous in the registered address space.  Without
 * SCIF_RMA_SYNC a transfer may still be running on return; use the fence
 * calls to wait for it.  All return 0.  Common errors: EACCES (destination
 * window not writable / source not readable; "EACCESS" in the MPSS pages),
 * ECONNRESET, EINVAL (bad rma_flags), ENODEV, ENOTCONN, ENXIO (a range is
 * not covered by windows, or an offset is negative).
 * ---------------------------------------------------------------------- */

/* Copies len bytes from the peer's window range at roffset into the local
 * window range at loffset. */
int scif_readfrom(scif_epd_t epd, off_t loffset, size_t len, off_t roffset,
                  int rma_flags);

/* Copies len bytes from the local window range at loffset into the peer's
 * window range at roffset. */
int scif_writeto(scif_epd_t epd, off_t loffset, size_t len, off_t roffset,
                 int rma_flags);

/* Like scif_readfrom(), but the local side is plain memory at addr (no
 * registration needed).  Also EFAULT for a bad addr range, EPERM. */
int scif_vreadfrom(scif_epd_t epd, void *addr, size_t len, off_t offset,
                   int rma_flags);

/* Like scif_writeto(), but the local side is plain memory at addr.  Also
 * EFAULT for a bad addr range, EPERM. */
int scif_vwriteto(scif_epd_t epd, void *addr, size_t len, off_t offset,
                  int rma_flags);

/* ------------------------------------------------------------------------
 * RMA synchronisation
 * ---------------------------------------------------------------------- */

/* Marks the RMAs not yet complete that were issued through epd
 * (SCIF_FENCE_INIT_SELF) or through its peer (SCIF_FENCE_INIT_PEER; exactly
 * one of the two) and stores a handle for them in *mark.  Returns 0.
 * Errors: ECONNRESET, EINVAL (flags), ENODEV, ENOTCONN, ENOMEM. */
int scif_fence_mark(scif_epd_t epd, int flags, int *mark);

/* Waits until all RMAs covered by mark (from scif_fence_mark) are done.
 * Returns 0.  Errors: ECONNRESET, EINVAL, ENODEV, ENOTCONN, ENOMEM. */
int scif_fence_wait(scif_epd_t epd, int mark);

/* Marks RMAs like scif_fence_mark() (exactly one SCIF_FENCE_INIT_* in flags)
 * and, once they are all complete, stores the 64-bit lval at local window
 * offset loff (SCIF_SIGNAL_LOCAL) and/or rval at the peer's window offset
 * roff (SCIF_SIGNAL_REMOTE).  Offsets need 4-byte (DWORD) alignment only.
 * Returns 0 without waiting.  Errors: ECONNRESET, EINVAL (flags, or an
 * offset not 4-byte aligned), ENODEV, ENOTCONN, ENXIO (offset outside the
 * windows, or its 8 bytes across a window's end), EPERM (the window is not
 * registered SCIF_PROT_WRITE, as the driver's window query answers). */
int scif_fence_signal(scif_epd_t epd, off_t loff, uint64_t lval, off_t roff,
                      uint64_t rval, int flags);

/* ------------------------------------------------------------------------
 * Utilities
 * ---------------------------------------------------------------------- */

/* Stores up to len ids of the online nodes in nodes (NULL is fine with len
 * 0) and the caller's own node id in *self.  Returns the total number of
 * online nodes, the caller's included (may exceed len).  Errors: EFAULT. */
int scif_get_nodeIDs(uint16_t *nodes, int len, uint16_t *self);

/* Returns the file descriptor behind epd for poll()/select(); on Linux this
 * is epd itself.  Errors: EINVAL. */
int scif_get_fd(scif_epd_t epd);

/* poll(2) over endpoints: waits up to timeout ms (negative: forever) for
 * SCIF_POLLIN (message or connection request), SCIF_POLLOUT (room to send);
 * SCIF_POLLERR, SCIF_POLLHUP (peer gone) and SCIF_POLLNVAL are always
 * reported.  Returns the number of entries with revents set, 0 on timeout.
 * Errors: EFAULT, EINTR, EINVAL (nepds too large), ENOMEM. */
int scif_poll(struct scif_pollepd *epds, unsigned int nepds, long timeout);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* __SCIF_H__ */
