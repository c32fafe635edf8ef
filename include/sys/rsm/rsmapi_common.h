/*
 * Remora: <sys/rsm/rsmapi_common.h> — the handles and structures of the RSM user API
 * (Sun's RSMAPI), with Linux spellings. Written for Remora from the published interface;
 * structure layouts are the ABI programs rely on.
 */
#ifndef _SYS_RSM_RSMAPI_COMMON_H
#define _SYS_RSM_RSMAPI_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/rsm/rsm_common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library version programs ask for. */
#define RSM_VERSION 5

/* Opaque handles. */
typedef struct __rsm_memseg_import_handle *rsm_memseg_import_handle_t;
typedef struct __rsm_memseg_export_handle *rsm_memseg_export_handle_t;
typedef struct __rsm_localmemory_handle *rsm_localmemory_handle_t;
typedef struct __rsmapi_controller_handle *rsmapi_controller_handle_t;

/* How rsm_memseg_import_map places a map. */
typedef enum {
	RSM_MAP_NONE = 0,	/* anywhere */
	RSM_MAP_FIXED = 1,	/* at *address */
	RSM_MAP_RESERVED = 2	/* at *address, over a range the program reserved */
} rsm_attribute_t;

/* A barrier: storage the caller provides; the library keeps its state behind it. */
typedef union {
	uint64_t u64;
	int64_t i64;
	uint32_t u32[2];
	int32_t i32[2];
	uint16_t u16[4];
	int16_t i16[4];
	uint8_t u8[8];
	int8_t i8[8];
	void *vp;
} rsm_barrier_component_t;

typedef struct {
	rsm_barrier_component_t comp[4];
} rsm_barrier_t;

typedef struct {
	void *seg;
	uint16_t gnum;
	void *privdata;
} rsmapi_barrier_t;

/* Controller attributes. */
typedef struct {
	uint_t attr_direct_access_sizes;
	uint_t attr_atomic_sizes;
	size_t attr_page_size;
	size_t attr_max_export_segment_size;
	size_t attr_tot_export_segment_size;
	ulong_t attr_max_export_segments;
	size_t attr_max_import_map_size;
	size_t attr_tot_import_map_size;
	ulong_t attr_max_import_segments;
} rsmapi_controller_attr_t;

/* One entry of an access list: a node and its owner/group/other permission digits. */
typedef struct {
	rsm_node_id_t ae_node;
	rsm_permission_t ae_permission;
} rsmapi_access_entry_t;

/* Flags of rsm_memseg_export_create. */
#define RSM_ALLOW_REBIND        0x01
#define RSM_CREATE_SEG_DONTWAIT 0x02

/* Scatter/gather. */
#define RSM_MAX_SGIOREQS 16
#define RSM_HANDLE_TYPE  0x01	/* local side is a local-memory handle */
#define RSM_VA_TYPE      0x02	/* local side is an address */

/* Flags of rsm_scat_gath_t and of rsm_intr_signal_post. */
#define RSM_IMPLICIT_SIGPOST      0x01
#define RSM_SIGPOST_NO_ACCUMULATE 0x02

typedef struct {
	int io_type;
	union {
		rsm_localmemory_handle_t handle;
		caddr_t vaddr;
	} local;
	size_t local_offset;
	size_t remote_offset;
	size_t transfer_length;
} rsm_iovec_t;

typedef struct {
	rsm_node_id_t local_nodeid;
	ulong_t io_request_count;
	ulong_t io_residual_count;
	uint_t flags;
	rsm_memseg_import_handle_t remote_handle;
	rsm_iovec_t *iovec;
} rsm_scat_gath_t;

#ifdef __cplusplus
}
#endif

#endif /* _SYS_RSM_RSMAPI_COMMON_H */
