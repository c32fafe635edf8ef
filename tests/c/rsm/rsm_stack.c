/*
 * rsm_stack: export memory that is not from the heap, and rebind a segment.
 *
 * 1. Two pages of a page-aligned stack buffer are exported and imported on this node: a
 *    put through the import lands in the stack buffer, and a store to the stack buffer is
 *    seen by a get.
 * 2. A MAP_PRIVATE|MAP_ANONYMOUS buffer is exported with RSM_ALLOW_REBIND, imported and
 *    mapped; after a rebind to a second buffer the existing map shows the second buffer,
 *    stores through the map land in it, and the first buffer is private again.
 */
#define _GNU_SOURCE
#include "rsm_check.h"
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define PG 4096

static rsm_node_id_t local_node(void)
{
	rsm_topology_t *t = NULL;
	CHECK(rsm_get_interconnect_topology(&t), RSM_SUCCESS);
	rsm_node_id_t me = t->topology_hdr.local_nodeid;
	rsm_free_interconnect_topology(t);
	return me;
}

static void stack_export(rsmapi_controller_handle_t c, rsm_node_id_t me)
{
	char buf[3 * PG] __attribute__((aligned(4096)));
	memset(buf, 0x61, sizeof buf);

	rsm_memseg_export_handle_t ex;
	rsm_memseg_import_handle_t im;
	rsm_memseg_id_t id = 0;
	CHECK(rsm_memseg_export_create(c, &ex, buf, 2 * PG, 0), RSM_SUCCESS);
	CHECK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSM_SUCCESS);
	VERIFY(id >= RSM_USER_APP_ID_BASE, "system-chosen id %#x", (unsigned)id);
	CHECK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &im), RSM_SUCCESS);
	rsmapi_barrier_t bar;
	CHECK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_SEGMENT, &bar), RSM_SUCCESS);

	/* import -> stack (implicit barrier mode) */
	uint32_t w[4] = { 0x01020304u, 0xA0B0C0D0u, 0xDEADBEEFu, 0x0BADF00Du };
	CHECK(rsm_memseg_import_put32(im, PG + 16, w, 4), RSM_SUCCESS);
	VERIFY(memcmp((const void *)(buf + PG + 16), w, sizeof w) == 0, "put32 did not land in the stack buffer");
	VERIFY(((volatile char *)buf)[PG + 15] == 0x61 && ((volatile char *)buf)[PG + 32] == 0x61,
	    "put32 wrote outside its range");
	/* stack -> import */
	memset(buf + 100, 0x7E, 10);
	uint8_t got[10];
	CHECK(rsm_memseg_import_get8(im, 100, got, 10), RSM_SUCCESS);
	for (int i = 0; i < 10; i++)
		VERIFY(got[i] == 0x7E, "get8 saw %#x at %d, not the stack store", got[i], 100 + i);
	/* the third page is not part of the segment */
	CHECK(rsm_memseg_import_get8(im, 2 * PG, got, 1), RSMERR_BAD_LENGTH);

	CHECK(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
	CHECK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CHECK(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
	/* the stack is ordinary memory again */
	buf[0] = 0x01;
	buf[2 * PG + 1] = 0x02;
	VERIFY(buf[0] == 0x01 && buf[2 * PG + 1] == 0x02, "stack memory unusable after destroy");
}

static void rebind(rsmapi_controller_handle_t c, rsm_node_id_t me)
{
	const size_t sz = 2 * PG;
	char *a = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	VERIFY(a != MAP_FAILED && b != MAP_FAILED, "mmap of the two buffers");
	memset(a, 0x11, sz);
	memset(b, 0x22, sz);

	rsm_memseg_export_handle_t ex;
	rsm_memseg_import_handle_t im;
	rsm_memseg_id_t id = 0;
	CHECK(rsm_memseg_export_create(c, &ex, a, sz, RSM_ALLOW_REBIND), RSM_SUCCESS);
	CHECK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSM_SUCCESS);
	CHECK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &im), RSM_SUCCESS);
	rsmapi_barrier_t bar;
	CHECK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, &bar), RSM_SUCCESS);
	void *addr = NULL;
	CHECK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, sz), RSM_SUCCESS);
	volatile char *map = addr;
	VERIFY(map[10] == 0x11 && map[PG + 10] == 0x11, "map shows %#x before the rebind", map[10]);
	map[20] = 0x33;
	VERIFY(a[20] == 0x33, "store through the map missed the first buffer");

	CHECK(rsm_memseg_export_rebind(ex, b, 0, sz), RSM_SUCCESS);
	VERIFY(map[10] == 0x22 && map[PG + 10] == 0x22, "the existing map shows %#x after the rebind", map[10]);
	VERIFY(map[20] == 0x22, "the old store still shows through the map");
	map[PG + 30] = 0x44;
	VERIFY(b[PG + 30] == 0x44, "store through the map did not reach the second buffer");
	VERIFY(a[PG + 30] == 0x11, "store through the map reached the first buffer");
	uint8_t got = 0;
	CHECK(rsm_memseg_import_get8(im, PG + 30, &got, 1), RSM_SUCCESS);
	VERIFY(got == 0x44, "get after the rebind read %#x", got);
	/* the first buffer is private to this process again */
	a[40] = 0x55;
	a[PG + 40] = 0x56;
	VERIFY(map[40] == 0x22 && map[PG + 40] == 0x22, "a write to the first buffer shows in the import");
	CHECK(rsm_memseg_import_get8(im, 40, &got, 1), RSM_SUCCESS);
	VERIFY(got == 0x22, "get sees %#x from the released buffer", got);
	b[50] = 0x66;
	VERIFY(map[50] == 0x66, "a write to the second buffer does not show in the map");

	CHECK(rsm_memseg_import_unmap(im), RSM_SUCCESS);
	CHECK(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
	CHECK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CHECK(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
	VERIFY(b[PG + 30] == 0x44 && a[40] == 0x55, "buffers lost their contents at destroy");
	munmap(a, sz);
	munmap(b, sz);
}

int main(void)
{
	rsmapi_controller_handle_t c;
	CHECK(rsm_get_controller("remora0", &c), RSM_SUCCESS);
	rsm_node_id_t me = local_node();
	stack_export(c, me);
	rebind(c, me);
	CHECK(rsm_release_controller(c), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}
