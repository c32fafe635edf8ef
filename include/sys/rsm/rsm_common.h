/*
 * Remora: <sys/rsm/rsm_common.h> — the types, return codes, segment-id ranges and
 * permission bits shared by every RSM interface (Sun's RSMAPI), with Linux spellings.
 * Written for Remora from the published interface; values are the ABI programs rely on.
 */
#ifndef _SYS_RSM_RSM_COMMON_H
#define _SYS_RSM_RSM_COMMON_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Solaris base types that Linux does not have. */
#ifndef _REMORA_RSM_SOLARIS_TYPES
#define _REMORA_RSM_SOLARIS_TYPES
typedef unsigned int uint_t;
typedef unsigned long ulong_t;
typedef long long offset_t;
#ifndef __daddr_t_defined	/* glibc's <sys/types.h> defines caddr_t with daddr_t */
typedef char *caddr_t;
#endif
#endif

/* Return codes: functions return these directly (0 on success). */
#define RSM_SUCCESS                        0
#define RSMERR_BAD_LIBRARY_VERSION         1
#define RSMERR_BAD_TOPOLOGY_PTR            2
#define RSMERR_BAD_CTLR_HNDL               3
#define RSMERR_CTLR_NOT_PRESENT            4
#define RSMERR_BAD_SEG_HNDL                5
#define RSMERR_SEG_ALREADY_PUBLISHED       6
#define RSMERR_SEG_NOT_PUBLISHED           7
#define RSMERR_SEG_NOT_PUBLISHED_TO_NODE   8
#define RSMERR_SEG_ALREADY_MAPPED          9
#define RSMERR_SEG_STILL_MAPPED            10
#define RSMERR_SEG_NOT_MAPPED              11
#define RSMERR_NOT_CREATOR                 12
#define RSMERR_BAD_BARRIER_PTR             13
#define RSMERR_BAD_SGIO                    14
#define RSMERR_BAD_LOCALMEM_HNDL           15
#define RSMERR_BAD_ADDR                    16
#define RSMERR_BAD_MEM_ALIGNMENT           17
#define RSMERR_BAD_OFFSET                  18
#define RSMERR_MISALIGNED_OFFSET           19
#define RSMERR_BAD_LENGTH                  20
#define RSMERR_BAD_ACL                     21
#define RSMERR_BAD_SEGID                   22
#define RSMERR_RESERVED_SEGID              23
#define RSMERR_SEGID_IN_USE                24
#define RSMERR_BAD_MODE                    25
#define RSMERR_BAD_PERMS                   26
#define RSMERR_PERM_DENIED                 27
#define RSMERR_LOCKS_NOT_SUPPORTED         28
#define RSMERR_LOCKS_NOT_ENABLED           29
#define RSMERR_REBIND_NOT_ALLOWED          30
#define RSMERR_INSUFFICIENT_RESOURCES      31
#define RSMERR_INSUFFICIENT_MEM            32
#define RSMERR_MAP_FAILED                  33
#define RSMERR_POLLFD_IN_USE               34
#define RSMERR_BARRIER_UNINITIALIZED       35
#define RSMERR_BARRIER_OPEN_FAILED         36
#define RSMERR_BARRIER_NOT_OPENED          37
#define RSMERR_BARRIER_FAILURE             38
#define RSMERR_REMOTE_NODE_UNREACHABLE     39
#define RSMERR_CONN_ABORTED                40
#define RSMERR_INTERRUPTED                 41
#define RSMERR_TIMEOUT                     42
#define RSMERR_BAD_APPID                   43
#define RSMERR_BAD_CONF                    44
#define RSMERR_SEG_NOT_CONNECTED           45
#define RSMERR_INTERNAL_ERROR              100

/* Basic types. */
typedef uint64_t rsm_addr_t;
typedef uint32_t rsm_node_id_t;
typedef uint32_t rsm_memseg_id_t;
typedef uint32_t rsm_permission_t;

/* Segment-id ranges. Ids up to RSM_DLPI_ID_END and from RSM_USER_APP_ID_BASE on are the
 * system's: a publish with id 0 takes the next free id from RSM_USER_APP_ID_BASE on, and an
 * application that picks its own id uses RSM_HPC_ID_BASE..0x7FFFFFFF. */
#define RSM_DRIVER_PRIVATE_ID_BASE      0x0
#define RSM_DRIVER_PRIVATE_ID_END       0x0FFFFF
#define RSM_CLUSTER_TRANSPORT_ID_BASE   0x100000
#define RSM_CLUSTER_TRANSPORT_ID_END    0x1FFFFF
#define RSM_RSMLIB_ID_BASE              0x200000
#define RSM_RSMLIB_ID_END               0x2FFFFF
#define RSM_DLPI_ID_BASE                0x300000
#define RSM_DLPI_ID_END                 0x3FFFFF
#define RSM_HPC_ID_BASE                 0x400000
#define RSM_HPC_ID_END                  0x4FFFFF
#define RSM_OPS_ID_BASE                 0x500000
#define RSM_OPS_ID_END                  0x5FFFFF
#define RSM_USER_APP_ID_BASE            0x80000000u
#define RSM_USER_APP_ID_END             0xFFFFFFFFu

/* Permissions, in the owner position of the Unix octal form; access lists use all three
 * digits (owner, group, other). */
#define RSM_PERM_NONE   0
#define RSM_PERM_READ   0400
#define RSM_PERM_WRITE  0200
#define RSM_PERM_RDWR   (RSM_PERM_READ | RSM_PERM_WRITE)

/* Sizes of direct accesses. */
typedef enum {
	RSM_DAS8 = 1,
	RSM_DAS16 = 2,
	RSM_DAS32 = 4,
	RSM_DAS64 = 8
} rsm_access_size_t;

/* What a barrier covers. */
typedef enum {
	RSM_BARRIER_SEGMENT = 0x01,
	RSM_BARRIER_NODE = 0x02,
	RSM_BARRIER_SEGMENT_THREAD = 0x11,
	RSM_BARRIER_NODE_THREAD = 0x12
} rsm_barrier_type_t;

/* Barrier scoping of put and get. */
typedef enum {
	RSM_BARRIER_MODE_EXPLICIT,
	RSM_BARRIER_MODE_IMPLICIT
} rsm_barrier_mode_t;

#ifdef __cplusplus
}
#endif

#endif /* _SYS_RSM_RSM_COMMON_H */
