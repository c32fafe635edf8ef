/*
 * rsm_misuse: the misuse matrix of librsm (issue 18 item 3). Every call is made with NULL,
 * freed (released, destroyed, disconnected) and wrong-kind handles, NULL pointers, bad
 * modes, flags and permissions, out-of-range and misaligned offsets and lengths, and in
 * states that forbid it; each must answer the RSMERR_* code capi/rsm documents (NULL, stale
 * or wrong-kind handles: RSMERR_BAD_SEG_HNDL, or the controller's, local memory's or
 * barrier's code; the order of Solaris's checks as tests/c/rsm/rsm_errors.c pins it).
 * One ROW line per row (misuse.h). Exports and imports are on this node (loopback).
 */
#include "misuse.h"
#include <poll.h>
#include <stdint.h>
#include <rsmapi.h>

#define PG 4096
#define SZ (4 * PG)

static rsmapi_controller_handle_t c, fc;
static rsm_memseg_export_handle_t ex, fex;
static rsm_memseg_import_handle_t im, fim;
static rsm_localmemory_handle_t fl;
static rsm_node_id_t me;
static rsm_memseg_id_t id, fid;

static void *pages(size_t n)
{
    void *p = NULL;
    MUST(posix_memalign(&p, PG, n * PG) == 0);
    memset(p, 0, n * PG);
    return p;
}

static void controller_calls(void)
{
    rsmapi_controller_attr_t attr;
    rsmapi_controller_handle_t x;
    rsm_memseg_id_t base;
    uint32_t len;
    char *mem = pages(1);
    rsm_localmemory_handle_t lh;

    ROW("rsm_get_controller", NULLP, RSMERR_BAD_CTLR_HNDL, rsm_get_controller("remora0", NULL));
    ROW("rsm_get_controller", UNKNOWN, RSMERR_CTLR_NOT_PRESENT, rsm_get_controller("nosuch0", &x));
    ROW("rsm_get_controller_attr", NULLH, RSMERR_BAD_CTLR_HNDL, rsm_get_controller_attr(NULL, &attr));
    ROW("rsm_get_controller_attr", FREED, RSMERR_BAD_CTLR_HNDL, rsm_get_controller_attr(fc, &attr));
    ROW("rsm_get_controller_attr", KIND, RSMERR_BAD_CTLR_HNDL, rsm_get_controller_attr((void *)ex, &attr));
    ROW("rsm_get_controller_attr", NULLP, RSMERR_BAD_ADDR, rsm_get_controller_attr(c, NULL));
    ROW("rsm_release_controller", NULLH, RSMERR_BAD_CTLR_HNDL, rsm_release_controller(NULL));
    ROW("rsm_release_controller", FREED, RSMERR_BAD_CTLR_HNDL, rsm_release_controller(fc));
    ROW("rsm_release_controller", KIND, RSMERR_BAD_CTLR_HNDL, rsm_release_controller((void *)im));
    ROW("rsm_get_interconnect_topology", NULLP, RSMERR_BAD_TOPOLOGY_PTR, rsm_get_interconnect_topology(NULL));
    RETURNS("rsm_free_interconnect_topology", NULLP, rsm_free_interconnect_topology(NULL));
    ROW("rsm_get_segmentid_range", NULLP, RSMERR_BAD_ADDR, rsm_get_segmentid_range(NULL, &base, &len));
    ROW("rsm_get_segmentid_range", NULLP, RSMERR_BAD_ADDR, rsm_get_segmentid_range("SUNWfoo", NULL, &len));
    ROW("rsm_get_segmentid_range", NULLP, RSMERR_BAD_ADDR, rsm_get_segmentid_range("SUNWfoo", &base, NULL));
    ROW("rsm_get_segmentid_range", UNKNOWN, RSMERR_BAD_APPID, rsm_get_segmentid_range("nope", &base, &len));

    ROW("rsm_create_localmemory_handle", NULLH, RSMERR_BAD_CTLR_HNDL,
        rsm_create_localmemory_handle(NULL, &lh, (caddr_t)mem, PG));
    ROW("rsm_create_localmemory_handle", FREED, RSMERR_BAD_CTLR_HNDL,
        rsm_create_localmemory_handle(fc, &lh, (caddr_t)mem, PG));
    ROW("rsm_create_localmemory_handle", NULLP, RSMERR_BAD_LOCALMEM_HNDL,
        rsm_create_localmemory_handle(c, NULL, (caddr_t)mem, PG));
    ROW("rsm_create_localmemory_handle", NULLP, RSMERR_BAD_ADDR, rsm_create_localmemory_handle(c, &lh, NULL, PG));
    ROW("rsm_create_localmemory_handle", RANGE, RSMERR_BAD_ADDR,
        rsm_create_localmemory_handle(c, &lh, (caddr_t)(mem + 8), PG));
    ROW("rsm_create_localmemory_handle", RANGE, RSMERR_BAD_LENGTH,
        rsm_create_localmemory_handle(c, &lh, (caddr_t)mem, 0));
    ROW("rsm_free_localmemory_handle", NULLH, RSMERR_BAD_LOCALMEM_HNDL, rsm_free_localmemory_handle(c, NULL));
    ROW("rsm_free_localmemory_handle", FREED, RSMERR_BAD_LOCALMEM_HNDL, rsm_free_localmemory_handle(c, fl));
    ROW("rsm_free_localmemory_handle", KIND, RSMERR_BAD_LOCALMEM_HNDL, rsm_free_localmemory_handle(c, (void *)ex));
    ROW("rsm_free_localmemory_handle", FREED, RSMERR_BAD_CTLR_HNDL, rsm_free_localmemory_handle(fc, fl));
    free(mem);
}

static void export_calls(void)
{
    rsm_memseg_export_handle_t x;
    rsm_memseg_id_t i;
    rsmapi_access_entry_t acl = { 1, RSM_PERM_RDWR };
    char *mem = pages(2);

    ROW("rsm_memseg_export_create", NULLH, RSMERR_BAD_CTLR_HNDL, rsm_memseg_export_create(NULL, &x, mem, PG, 0));
    ROW("rsm_memseg_export_create", FREED, RSMERR_BAD_CTLR_HNDL, rsm_memseg_export_create(fc, &x, mem, PG, 0));
    ROW("rsm_memseg_export_create", KIND, RSMERR_BAD_CTLR_HNDL, rsm_memseg_export_create((void *)im, &x, mem, PG, 0));
    ROW("rsm_memseg_export_create", NULLP, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_create(c, NULL, mem, PG, 0));
    ROW("rsm_memseg_export_create", NULLP, RSMERR_BAD_ADDR, rsm_memseg_export_create(c, &x, NULL, PG, 0));
    ROW("rsm_memseg_export_create", RANGE, RSMERR_BAD_LENGTH, rsm_memseg_export_create(c, &x, mem, 0, 0));
    ROW("rsm_memseg_export_create", RANGE, RSMERR_BAD_MEM_ALIGNMENT, rsm_memseg_export_create(c, &x, mem + 8, PG, 0));
    ROW("rsm_memseg_export_create", RANGE, RSMERR_BAD_MEM_ALIGNMENT, rsm_memseg_export_create(c, &x, mem, PG + 100, 0));
    ROW("rsm_memseg_export_create", FLAG, RSMERR_BAD_MODE, rsm_memseg_export_create(c, &x, mem, PG, 0x40000000));

    ROW("rsm_memseg_export_destroy", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_destroy(NULL));
    ROW("rsm_memseg_export_destroy", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_destroy(fex));
    ROW("rsm_memseg_export_destroy", KIND, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_destroy((void *)im));
    ROW("rsm_memseg_export_rebind", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_rebind(NULL, mem, 0, PG));
    ROW("rsm_memseg_export_rebind", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_rebind(fex, mem, 0, PG));
    ROW("rsm_memseg_export_rebind", STATE, RSMERR_REBIND_NOT_ALLOWED, rsm_memseg_export_rebind(ex, mem, 0, PG));
    i = id + 7;
    ROW("rsm_memseg_export_publish", NULLP, RSMERR_BAD_SEGID, rsm_memseg_export_publish(ex, NULL, NULL, 0));
    ROW("rsm_memseg_export_publish", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_publish(NULL, &i, NULL, 0));
    ROW("rsm_memseg_export_publish", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_publish(fex, &i, NULL, 0));
    ROW("rsm_memseg_export_publish", NULLP, RSMERR_BAD_ACL, rsm_memseg_export_publish(ex, &i, NULL, 1));
    i = 0x100;
    MUST(rsm_memseg_export_create(c, &x, mem, PG, 0) == RSM_SUCCESS);
    ROW("rsm_memseg_export_publish", RANGE, RSMERR_RESERVED_SEGID, rsm_memseg_export_publish(x, &i, NULL, 0));
    ROW("rsm_memseg_export_unpublish", STATE, RSMERR_SEG_NOT_PUBLISHED, rsm_memseg_export_unpublish(x));
    ROW("rsm_memseg_export_republish", STATE, RSMERR_SEG_NOT_PUBLISHED, rsm_memseg_export_republish(x, NULL, 0));
    MUST(rsm_memseg_export_destroy(x) == RSM_SUCCESS);
    i = id;
    ROW("rsm_memseg_export_publish", STATE, RSMERR_SEG_ALREADY_PUBLISHED, rsm_memseg_export_publish(ex, &i, &acl, 0));
    ROW("rsm_memseg_export_unpublish", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_unpublish(NULL));
    ROW("rsm_memseg_export_unpublish", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_unpublish(fex));
    ROW("rsm_memseg_export_republish", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_republish(NULL, NULL, 0));
    ROW("rsm_memseg_export_republish", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_export_republish(fex, NULL, 0));
    ROW("rsm_memseg_export_republish", NULLP, RSMERR_BAD_ACL, rsm_memseg_export_republish(ex, NULL, 1));
    free(mem);
}

static void import_calls(void)
{
    rsm_memseg_import_handle_t x;
    uint8_t b8[16];
    uint16_t h16[4];
    uint32_t w32[4];
    uint64_t q64[4];
    char big[64];
    void *addr = NULL;
    rsm_barrier_mode_t mode;

    ROW("rsm_memseg_import_connect", NULLH, RSMERR_BAD_CTLR_HNDL,
        rsm_memseg_import_connect(NULL, me, id, RSM_PERM_RDWR, &x));
    ROW("rsm_memseg_import_connect", FREED, RSMERR_BAD_CTLR_HNDL, rsm_memseg_import_connect(fc, me, id, RSM_PERM_RDWR, &x));
    ROW("rsm_memseg_import_connect", NULLP, RSMERR_BAD_ADDR, rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, NULL));
    ROW("rsm_memseg_import_connect", UNKNOWN, RSMERR_SEG_NOT_PUBLISHED,
        rsm_memseg_import_connect(c, me, fid, RSM_PERM_RDWR, &x));
    ROW("rsm_memseg_import_connect", FLAG, RSMERR_PERM_DENIED, rsm_memseg_import_connect(c, me, id, 0700, &x));
    ROW("rsm_memseg_import_disconnect", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_disconnect(NULL));
    ROW("rsm_memseg_import_disconnect", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_disconnect(fim));
    ROW("rsm_memseg_import_disconnect", KIND, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_disconnect((void *)ex));

    ROW("rsm_memseg_import_get8", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_get8(fim, 0, b8, 1));
    ROW("rsm_memseg_import_get8", NULLP, RSMERR_BAD_ADDR, rsm_memseg_import_get8(im, 0, NULL, 1));
    ROW("rsm_memseg_import_get8", RANGE, RSMERR_BAD_LENGTH, rsm_memseg_import_get8(im, SZ, b8, 1));
    ROW("rsm_memseg_import_get16", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_get16(fim, 0, h16, 1));
    ROW("rsm_memseg_import_get16", RANGE, RSMERR_BAD_MEM_ALIGNMENT, rsm_memseg_import_get16(im, 1, h16, 1));
    ROW("rsm_memseg_import_get32", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_get32(fim, 0, w32, 1));
    ROW("rsm_memseg_import_get32", RANGE, RSMERR_BAD_MEM_ALIGNMENT, rsm_memseg_import_get32(im, 2, w32, 1));
    ROW("rsm_memseg_import_get64", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_get64(fim, 0, q64, 1));
    ROW("rsm_memseg_import_get64", RANGE, RSMERR_BAD_LENGTH, rsm_memseg_import_get64(im, SZ - 16, q64, 4));
    ROW("rsm_memseg_import_get", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_get(NULL, 0, big, 8));
    ROW("rsm_memseg_import_get", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_get(fim, 0, big, 8));
    ROW("rsm_memseg_import_get", KIND, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_get((void *)ex, 0, big, 8));
    ROW("rsm_memseg_import_get", RANGE, RSMERR_BAD_LENGTH, rsm_memseg_import_get(im, SZ - 8, big, 16));
    ROW("rsm_memseg_import_get", RANGE, RSMERR_BAD_OFFSET, rsm_memseg_import_get(im, -8, big, 8));
    ROW("rsm_memseg_import_put8", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_put8(fim, 0, b8, 1));
    ROW("rsm_memseg_import_put8", RANGE, RSMERR_BAD_LENGTH, rsm_memseg_import_put8(im, SZ, b8, 1));
    ROW("rsm_memseg_import_put16", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_put16(fim, 0, h16, 1));
    ROW("rsm_memseg_import_put16", NULLP, RSMERR_BAD_ADDR, rsm_memseg_import_put16(im, 0, NULL, 1));
    ROW("rsm_memseg_import_put32", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_put32(fim, 0, w32, 1));
    ROW("rsm_memseg_import_put32", RANGE, RSMERR_BAD_MEM_ALIGNMENT,
        rsm_memseg_import_put32(im, 0, (uint32_t *)(void *)(big + 1), 1));
    ROW("rsm_memseg_import_put64", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_put64(fim, 0, q64, 1));
    ROW("rsm_memseg_import_put64", RANGE, RSMERR_BAD_MEM_ALIGNMENT, rsm_memseg_import_put64(im, 4, q64, 1));
    ROW("rsm_memseg_import_put", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_put(NULL, 0, big, 8));
    ROW("rsm_memseg_import_put", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_put(fim, 0, big, 8));
    ROW("rsm_memseg_import_put", NULLP, RSMERR_BAD_ADDR, rsm_memseg_import_put(im, 0, NULL, 8));
    ROW("rsm_memseg_import_put", RANGE, RSMERR_BAD_LENGTH, rsm_memseg_import_put(im, SZ - 4, big, 8));

    ROW("rsm_memseg_import_map", NULLH, RSMERR_BAD_SEG_HNDL,
        rsm_memseg_import_map(NULL, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, SZ));
    ROW("rsm_memseg_import_map", FREED, RSMERR_BAD_SEG_HNDL,
        rsm_memseg_import_map(fim, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, SZ));
    ROW("rsm_memseg_import_map", NULLP, RSMERR_BAD_ADDR, rsm_memseg_import_map(im, NULL, RSM_MAP_NONE, RSM_PERM_RDWR, 0, SZ));
    ROW("rsm_memseg_import_map", FLAG, RSMERR_BAD_PERMS, rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, 0700, 0, SZ));
    ROW("rsm_memseg_import_map", RANGE, RSMERR_BAD_LENGTH,
        rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, 0));
    ROW("rsm_memseg_import_map", RANGE, RSMERR_BAD_LENGTH,
        rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, PG, SZ));
    ROW("rsm_memseg_import_map", RANGE, RSMERR_BAD_MEM_ALIGNMENT,
        rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 100, PG));
    ROW("rsm_memseg_import_unmap", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_unmap(NULL));
    ROW("rsm_memseg_import_unmap", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_unmap(fim));
    ROW("rsm_memseg_import_unmap", STATE, RSMERR_SEG_NOT_MAPPED, rsm_memseg_import_unmap(im));

    ROW("rsm_memseg_import_set_mode", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_set_mode(NULL, RSM_BARRIER_MODE_EXPLICIT));
    ROW("rsm_memseg_import_set_mode", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_set_mode(fim, RSM_BARRIER_MODE_EXPLICIT));
    ROW("rsm_memseg_import_set_mode", FLAG, RSMERR_BAD_MODE, rsm_memseg_import_set_mode(im, (rsm_barrier_mode_t)7));
    ROW("rsm_memseg_import_get_mode", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_get_mode(NULL, &mode));
    ROW("rsm_memseg_import_get_mode", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_get_mode(fim, &mode));
}

static void vector_calls(void)
{
    rsm_iovec_t iov[RSM_MAX_SGIOREQS + 1];
    rsm_scat_gath_t sg;
    char big[64];
    int i;

    memset(iov, 0, sizeof iov);
    for (i = 0; i <= RSM_MAX_SGIOREQS; i++) {
        iov[i].io_type = RSM_VA_TYPE;
        iov[i].local.vaddr = (caddr_t)big;
        iov[i].transfer_length = 4;
    }
    memset(&sg, 0, sizeof sg);
    ROW("rsm_memseg_import_getv", NULLP, RSMERR_BAD_SGIO, rsm_memseg_import_getv(NULL));
    ROW("rsm_memseg_import_putv", NULLP, RSMERR_BAD_SGIO, rsm_memseg_import_putv(NULL));
    sg.iovec = iov;
    sg.io_request_count = 1;
    sg.remote_handle = NULL;
    ROW("rsm_memseg_import_getv", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_getv(&sg));
    sg.remote_handle = fim;
    ROW("rsm_memseg_import_getv", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_getv(&sg));
    ROW("rsm_memseg_import_putv", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_import_putv(&sg));
    sg.remote_handle = im;
    sg.io_request_count = 0;
    ROW("rsm_memseg_import_getv", RANGE, RSMERR_BAD_SGIO, rsm_memseg_import_getv(&sg));
    sg.io_request_count = RSM_MAX_SGIOREQS + 1;
    ROW("rsm_memseg_import_putv", RANGE, RSMERR_BAD_SGIO, rsm_memseg_import_putv(&sg));
    sg.io_request_count = 1;
    sg.iovec = NULL;
    ROW("rsm_memseg_import_putv", NULLP, RSMERR_BAD_SGIO, rsm_memseg_import_putv(&sg));
    sg.iovec = iov;
    iov[0].io_type = RSM_HANDLE_TYPE;
    iov[0].local.handle = fl;
    ROW("rsm_memseg_import_putv", FREED, RSMERR_BAD_LOCALMEM_HNDL, rsm_memseg_import_putv(&sg));
    iov[0].io_type = RSM_VA_TYPE;
    iov[0].local.vaddr = (caddr_t)big;
    iov[0].remote_offset = SZ;
    ROW("rsm_memseg_import_putv", RANGE, RSMERR_BAD_LENGTH, rsm_memseg_import_putv(&sg));
}

static void barrier_calls(void)
{
    rsmapi_barrier_t bar, fbar, zero;

    memset(&zero, 0, sizeof zero);
    MUST(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, &fbar) == RSM_SUCCESS);
    MUST(rsm_memseg_import_destroy_barrier(&fbar) == RSM_SUCCESS);
    ROW("rsm_memseg_import_init_barrier", NULLH, RSMERR_BAD_SEG_HNDL,
        rsm_memseg_import_init_barrier(NULL, RSM_BARRIER_NODE, &bar));
    ROW("rsm_memseg_import_init_barrier", FREED, RSMERR_BAD_SEG_HNDL,
        rsm_memseg_import_init_barrier(fim, RSM_BARRIER_NODE, &bar));
    ROW("rsm_memseg_import_init_barrier", NULLP, RSMERR_BAD_BARRIER_PTR,
        rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, NULL));
    ROW("rsm_memseg_import_init_barrier", FLAG, RSMERR_BAD_MODE,
        rsm_memseg_import_init_barrier(im, (rsm_barrier_type_t)0x77, &bar));
    ROW("rsm_memseg_import_open_barrier", NULLP, RSMERR_BAD_BARRIER_PTR, rsm_memseg_import_open_barrier(NULL));
    ROW("rsm_memseg_import_open_barrier", FREED, RSMERR_BARRIER_UNINITIALIZED, rsm_memseg_import_open_barrier(&fbar));
    ROW("rsm_memseg_import_open_barrier", STATE, RSMERR_BARRIER_UNINITIALIZED, rsm_memseg_import_open_barrier(&zero));
    ROW("rsm_memseg_import_close_barrier", NULLP, RSMERR_BAD_BARRIER_PTR, rsm_memseg_import_close_barrier(NULL));
    ROW("rsm_memseg_import_close_barrier", FREED, RSMERR_BARRIER_UNINITIALIZED, rsm_memseg_import_close_barrier(&fbar));
    ROW("rsm_memseg_import_order_barrier", NULLP, RSMERR_BAD_BARRIER_PTR, rsm_memseg_import_order_barrier(NULL));
    ROW("rsm_memseg_import_order_barrier", FREED, RSMERR_BARRIER_UNINITIALIZED, rsm_memseg_import_order_barrier(&fbar));
    ROW("rsm_memseg_import_destroy_barrier", NULLP, RSMERR_BAD_BARRIER_PTR, rsm_memseg_import_destroy_barrier(NULL));
    ROW("rsm_memseg_import_destroy_barrier", FREED, RSMERR_BARRIER_UNINITIALIZED,
        rsm_memseg_import_destroy_barrier(&fbar));
    MUST(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, &bar) == RSM_SUCCESS);
    ROW("rsm_memseg_import_close_barrier", STATE, RSMERR_BARRIER_NOT_OPENED, rsm_memseg_import_close_barrier(&bar));
    ROW("rsm_memseg_import_order_barrier", STATE, RSMERR_BARRIER_NOT_OPENED, rsm_memseg_import_order_barrier(&bar));
    MUST(rsm_memseg_import_destroy_barrier(&bar) == RSM_SUCCESS);
}

static void signal_calls(void)
{
    struct pollfd pfd;
    int n;

    ROW("rsm_intr_signal_post", NULLH, RSMERR_BAD_SEG_HNDL, rsm_intr_signal_post(NULL, 0));
    ROW("rsm_intr_signal_post", FREED, RSMERR_BAD_SEG_HNDL, rsm_intr_signal_post(fim, 0));
    ROW("rsm_intr_signal_post", FREED, RSMERR_BAD_SEG_HNDL, rsm_intr_signal_post(fex, 0));
    ROW("rsm_intr_signal_post", KIND, RSMERR_BAD_SEG_HNDL, rsm_intr_signal_post(c, 0));
    ROW("rsm_intr_signal_wait", NULLH, RSMERR_BAD_SEG_HNDL, rsm_intr_signal_wait(NULL, 10));
    ROW("rsm_intr_signal_wait", FREED, RSMERR_BAD_SEG_HNDL, rsm_intr_signal_wait(fim, 10));
    ROW("rsm_intr_signal_wait", STATE, RSMERR_TIMEOUT, rsm_intr_signal_wait(ex, 10));
    ROW("rsm_memseg_get_pollfd", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_get_pollfd(NULL, &pfd));
    ROW("rsm_memseg_get_pollfd", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_get_pollfd(fex, &pfd));
    ROW("rsm_memseg_get_pollfd", NULLP, RSMERR_BAD_ADDR, rsm_memseg_get_pollfd(ex, NULL));
    ROW("rsm_memseg_release_pollfd", NULLH, RSMERR_BAD_SEG_HNDL, rsm_memseg_release_pollfd(NULL));
    ROW("rsm_memseg_release_pollfd", FREED, RSMERR_BAD_SEG_HNDL, rsm_memseg_release_pollfd(fex));
    MUST(rsm_memseg_get_pollfd(ex, &pfd) == RSM_SUCCESS);
    ROW("rsm_memseg_export_destroy", STATE, RSMERR_POLLFD_IN_USE, rsm_memseg_export_destroy(ex));
    ROW("rsm_intr_signal_wait_pollfd", NULLP, RSMERR_BAD_ADDR, rsm_intr_signal_wait_pollfd(NULL, 1, 10, &n));
    MUST(rsm_memseg_release_pollfd(ex) == RSM_SUCCESS);
    ROW("rsm_memseg_import_disconnect", STATE, RSMERR_SEG_STILL_MAPPED, ({
            void *a = NULL;
            MUST(rsm_memseg_import_map(im, &a, RSM_MAP_NONE, RSM_PERM_RDWR, 0, SZ) == RSM_SUCCESS);
            int r = rsm_memseg_import_disconnect(im);
            MUST(rsm_memseg_import_unmap(im) == RSM_SUCCESS);
            r;
        }));
}

int main(void)
{
    static char segid_file[] = "/tmp/rsm_misuse_segid_XXXXXX";
    int fd = mkstemp(segid_file);
    char *mem = pages(4), *fmem = pages(1);
    rsm_topology_t *t = NULL;
    int rc;

    misuse_begin("RSM");
    /* The segment-id file rsm_get_segmentid_range reads: one application of ours. */
    MUST(fd >= 0);
    MUST(write(fd, "reserve SUNWfoo 0x600000 100\n", 29) == 29);
    close(fd);
    setenv("REMORA_RSM_SEGMENTID_FILE", segid_file, 1);
    id = 0x400000u + (((rsm_memseg_id_t)getpid() & 0x3fffu) << 4) + 0x40000;
    fid = id + 1;
    MUST(rsm_get_controller("remora0", &c) == RSM_SUCCESS);
    MUST(rsm_get_controller("remora0", &fc) == RSM_SUCCESS);
    MUST(rsm_release_controller(fc) == RSM_SUCCESS);
    MUST(rsm_get_interconnect_topology(&t) == RSM_SUCCESS && t != NULL);
    me = t->topology_hdr.local_nodeid;
    rsm_free_interconnect_topology(t);
    MUST(rsm_memseg_export_create(c, &ex, mem, SZ, 0) == RSM_SUCCESS);
    MUST(rsm_memseg_export_publish(ex, &id, NULL, 0) == RSM_SUCCESS);
    MUST(rsm_memseg_export_create(c, &fex, fmem, PG, 0) == RSM_SUCCESS);
    MUST(rsm_memseg_export_publish(fex, &fid, NULL, 0) == RSM_SUCCESS);
    MUST(rsm_memseg_import_connect(c, me, fid, RSM_PERM_RDWR, &fim) == RSM_SUCCESS);
    MUST(rsm_memseg_import_disconnect(fim) == RSM_SUCCESS);
    MUST(rsm_memseg_export_unpublish(fex) == RSM_SUCCESS);
    MUST(rsm_memseg_export_destroy(fex) == RSM_SUCCESS);
    MUST(rsm_create_localmemory_handle(c, &fl, (caddr_t)fmem, PG) == RSM_SUCCESS);
    MUST(rsm_free_localmemory_handle(c, fl) == RSM_SUCCESS);
    MUST(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &im) == RSM_SUCCESS);
    MUST(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT) == RSM_SUCCESS);

    controller_calls();
    export_calls();
    import_calls();
    vector_calls();
    barrier_calls();
    signal_calls();

    MUST(rsm_memseg_import_disconnect(im) == RSM_SUCCESS);
    MUST(rsm_memseg_export_unpublish(ex) == RSM_SUCCESS);
    MUST(rsm_memseg_export_destroy(ex) == RSM_SUCCESS);
    MUST(rsm_release_controller(c) == RSM_SUCCESS);
    rc = misuse_end();
    unlink(segid_file);
    free(mem);
    free(fmem);
    return rc;
}
