/* Every RSMAPI family in one process (the loopback case: this node exports and imports),
 * with the exact codes of the error cases. */
#define _GNU_SOURCE
#include "rsm_test.h"
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void stack_export(rsmapi_controller_handle_t c, rsm_node_id_t me)
{
	/* Page-aligned memory on the stack is exported in place too. */
	char buf[3 * 4096] __attribute__((aligned(4096)));
	memset(buf, 0x33, sizeof buf);
	rsm_memseg_export_handle_t ex;
	rsm_memseg_import_handle_t im;
	rsm_memseg_id_t id = 0x400100;
	CK(rsm_memseg_export_create(c, &ex, buf, 2 * 4096, 0), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSM_SUCCESS);
	CK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &im), RSM_SUCCESS);
	CK(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
	uint32_t v = 0xABCD1234;
	CK(rsm_memseg_import_put32(im, 4100, &v, 1), RSM_SUCCESS);
	EXPECT(*(volatile uint32_t *)(buf + 4100) == v, "a put did not land in the stack buffer");
	CK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
	buf[0] = 1; /* the stack is the program's own again */
}

static void rebind(rsmapi_controller_handle_t c, rsm_node_id_t me)
{
	char *a = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(a != MAP_FAILED && b != MAP_FAILED, "mmap");
	memset(a, 0x11, 2 * 4096);
	memset(b, 0x22, 2 * 4096);
	rsm_memseg_export_handle_t ex, fixed;
	rsm_memseg_import_handle_t im;
	rsm_memseg_id_t id = 0x400200;
	CK(rsm_memseg_export_create(c, &ex, a, 2 * 4096, RSM_ALLOW_REBIND), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSM_SUCCESS);
	CK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &im), RSM_SUCCESS);
	volatile char *map = NULL;
	CK(rsm_memseg_import_map(im, (void **)&map, RSM_MAP_NONE, RSM_PERM_RDWR, 0, 2 * 4096), RSM_SUCCESS);
	EXPECT(map[5000] == 0x11, "map sees %x before the rebind", map[5000]);
	CK(rsm_memseg_export_rebind(ex, b, 0, 2 * 4096), RSM_SUCCESS);
	EXPECT(map[5000] == 0x22, "the existing map sees %x after the rebind, not the new memory", map[5000]);
	map[6000] = 0x44;
	EXPECT(b[6000] == 0x44, "a store through the map did not reach the new memory");
	a[6001] = 0x55; /* the old memory is private again */
	EXPECT(map[6001] != 0x55, "the old memory still backs the segment");
	char *c1 = pages(1);
	CK(rsm_memseg_export_create(c, &fixed, c1, 4096, 0), RSM_SUCCESS);
	CK(rsm_memseg_export_rebind(fixed, b, 0, 4096), RSMERR_REBIND_NOT_ALLOWED);
	CK(rsm_memseg_export_destroy(fixed), RSM_SUCCESS);
	CK(rsm_memseg_import_unmap(im), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
}

int main(void)
{
	rsmapi_controller_handle_t c;
	rsmapi_controller_attr_t attr;
	CK(rsm_get_controller("nosuch0", &c), RSMERR_CTLR_NOT_PRESENT);
	CK(rsm_get_controller("remora1", &c), RSMERR_CTLR_NOT_PRESENT);
	CK(rsm_get_controller("loopback", &c), RSM_SUCCESS);
	CK(rsm_release_controller(c), RSM_SUCCESS);
	CK(rsm_release_controller(c), RSMERR_BAD_CTLR_HNDL);
	CK(rsm_get_controller("sci0", &c), RSM_SUCCESS);
	CK(rsm_get_controller_attr(c, &attr), RSM_SUCCESS);
	EXPECT(attr.attr_page_size == 4096, "page size %zu", attr.attr_page_size);
	CK(rsm_get_controller_attr(NULL, &attr), RSMERR_BAD_CTLR_HNDL);

	rsm_topology_t *t;
	CK(rsm_get_interconnect_topology(NULL), RSMERR_BAD_TOPOLOGY_PTR);
	CK(rsm_get_interconnect_topology(&t), RSM_SUCCESS);
	rsm_node_id_t me = t->topology_hdr.local_nodeid;
	const char *want = getenv("REMORA_NODE");
	EXPECT(me == (rsm_node_id_t)(want ? atoi(want) : 4), "local node %u", me);
	EXPECT(t->topology_hdr.local_cntlr_count == 1, "controllers %u", t->topology_hdr.local_cntlr_count);
	EXPECT(strcmp(t->connections[0]->hdr.cntlr_name, "remora0") == 0, "name %s", t->connections[0]->hdr.cntlr_name);
	rsm_free_interconnect_topology(t);

	/* Export: create, publish with the id rules. */
	size_t len = 4 * 4096;
	char *buf = pages(4);
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(i * 7);
	rsm_memseg_export_handle_t ex, ex2;
	CK(rsm_memseg_export_create(c, &ex, buf + 8, len, 0), RSMERR_BAD_MEM_ALIGNMENT);
	CK(rsm_memseg_export_create(c, &ex, buf, 0, 0), RSMERR_BAD_LENGTH);
	CK(rsm_memseg_export_create(c, &ex, buf, 100, 0), RSMERR_BAD_MEM_ALIGNMENT);
	CK(rsm_memseg_export_create(c, &ex, NULL, len, 0), RSMERR_BAD_ADDR);
	CK(rsm_memseg_export_create(c, NULL, buf, len, 0), RSMERR_BAD_SEG_HNDL);
	CK(rsm_memseg_export_create(NULL, &ex, buf, len, 0), RSMERR_BAD_CTLR_HNDL);
	CK(rsm_memseg_export_create(c, &ex, buf, len, 0), RSM_SUCCESS);
	rsm_memseg_id_t id = 0x100;
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSMERR_RESERVED_SEGID);
	id = 0x200001; /* the RSM library's range: reserved too */
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSMERR_RESERVED_SEGID);
	CK(rsm_memseg_export_publish(ex, NULL, NULL, 0), RSMERR_BAD_SEGID);
	id = 0x80000001u;
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSMERR_RESERVED_SEGID);
	CK(rsm_memseg_export_republish(ex, NULL, 0), RSMERR_SEG_NOT_PUBLISHED);
	CK(rsm_memseg_export_unpublish(ex), RSMERR_SEG_NOT_PUBLISHED);
	id = 0x400001;
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSM_SUCCESS);
	EXPECT(id == 0x400001, "published as %#x", id);
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSMERR_SEG_ALREADY_PUBLISHED);
	rsm_memseg_export_handle_t ex3;
	rsm_memseg_id_t auto_id = 0;
	CK(rsm_memseg_export_create(c, &ex3, pages(1), 4096, 0), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(ex3, &auto_id, NULL, 0), RSM_SUCCESS);
	EXPECT(auto_id >= RSM_USER_APP_ID_BASE, "picked id %#x", auto_id);
	CK(rsm_memseg_export_destroy(ex3), RSM_SUCCESS);
	char *buf2 = pages(1);
	CK(rsm_memseg_export_create(c, &ex2, buf2, 4096, 0), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(ex2, &id, NULL, 0), RSMERR_SEGID_IN_USE);
	rsmapi_access_entry_t bad_acl[1] = {{me, 01000}};
	rsm_memseg_id_t id2 = 0x400010;
	CK(rsm_memseg_export_publish(ex2, &id2, bad_acl, 1), RSMERR_BAD_ACL);
	rsmapi_access_entry_t other_only[1] = {{me + 1000, RSM_PERM_RDWR}};
	CK(rsm_memseg_export_publish(ex2, &id2, other_only, 1), RSM_SUCCESS);

	/* Import: connect rules. */
	rsm_memseg_import_handle_t im, ro;
	CK(rsm_memseg_import_connect(c, me, 0x7ffffff0, RSM_PERM_RDWR, &im), RSMERR_SEG_NOT_PUBLISHED);
	CK(rsm_memseg_import_connect(c, me, id2, RSM_PERM_READ, &im), RSMERR_SEG_NOT_PUBLISHED_TO_NODE);
	CK(rsm_memseg_import_connect(c, me, id, 01, &im), RSMERR_PERM_DENIED);
	rsmapi_access_entry_t read_only[1] = {{me, 0444}};
	CK(rsm_memseg_export_republish(ex2, read_only, 1), RSM_SUCCESS);
	CK(rsm_memseg_import_connect(c, me, id2, RSM_PERM_RDWR, &ro), RSMERR_PERM_DENIED);
	CK(rsm_memseg_import_connect(c, me, id2, RSM_PERM_READ, &ro), RSM_SUCCESS);
	uint8_t byte = 1;
	CK(rsm_memseg_import_put8(ro, 0, &byte, 1), RSMERR_PERM_DENIED);
	void *roaddr = NULL;
	CK(rsm_memseg_import_map(ro, &roaddr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, 4096), RSMERR_BAD_PERMS);
	/* In the default (implicit) barrier mode, put and get need a barrier first. */
	CK(rsm_memseg_import_get8(ro, 0, &byte, 1), RSMERR_BARRIER_UNINITIALIZED);
	rsmapi_barrier_t robar;
	CK(rsm_memseg_import_init_barrier(ro, RSM_BARRIER_SEGMENT, &robar), RSM_SUCCESS);
	CK(rsm_memseg_import_get8(ro, 0, &byte, 1), RSM_SUCCESS);
	CK(rsm_memseg_import_destroy_barrier(&robar), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(ro), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(ro), RSMERR_BAD_SEG_HNDL);

	CK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &im), RSM_SUCCESS);
	rsmapi_barrier_t bar;
	CK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, NULL), RSMERR_BAD_BARRIER_PTR);
	CK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, &bar), RSM_SUCCESS);

	/* Access functions: repeat counts and alignment. */
	uint8_t v8[16];
	uint16_t v16[8];
	uint32_t v32[4];
	uint64_t v64[2];
	CK(rsm_memseg_import_get8(im, 3, v8, 16), RSM_SUCCESS);
	for (int i = 0; i < 16; i++)
		EXPECT(v8[i] == (uint8_t)((3 + i) * 7), "get8[%d] = %u", i, v8[i]);
	CK(rsm_memseg_import_get16(im, 1, v16, 8), RSMERR_BAD_MEM_ALIGNMENT);
	CK(rsm_memseg_import_get16(im, 2, (uint16_t *)((char *)v16 + 1), 2), RSMERR_BAD_MEM_ALIGNMENT);
	CK(rsm_memseg_import_get16(im, 2, v16, 8), RSM_SUCCESS);
	CK(rsm_memseg_import_get32(im, 8, v32, 4), RSM_SUCCESS);
	CK(rsm_memseg_import_put64(im, 4, v64, 1), RSMERR_BAD_MEM_ALIGNMENT);
	v64[0] = 0x1122334455667788ull;
	v64[1] = 0x99aabbccddeeff00ull;
	CK(rsm_memseg_import_put64(im, 8192, v64, 2), RSM_SUCCESS);
	EXPECT(memcmp(buf + 8192, v64, 16) == 0, "put64 did not land in the exporter's memory");
	CK(rsm_memseg_import_get(im, len - 4, v8, 8), RSMERR_BAD_LENGTH);
	CK(rsm_memseg_import_get(im, 0, NULL, 8), RSMERR_BAD_ADDR);
	CK(rsm_memseg_import_put(im, 100, "remora", 6), RSM_SUCCESS);
	EXPECT(memcmp(buf + 100, "remora", 6) == 0, "put did not land");
	CK(rsm_memseg_import_get8(NULL, 0, v8, 1), RSMERR_BAD_SEG_HNDL);

	/* Maps. */
	void *addr = NULL;
	CK(rsm_memseg_import_unmap(im), RSMERR_SEG_NOT_MAPPED);
	CK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 100, 4096), RSMERR_BAD_MEM_ALIGNMENT);
	CK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, 01000, 0, 4096), RSMERR_BAD_PERMS);
	CK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, 0), RSMERR_BAD_LENGTH);
	CK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, len + 4096), RSMERR_BAD_LENGTH);
	CK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, len), RSM_SUCCESS);
	((volatile uint32_t *)addr)[3072] = 0xCAFEF00D;
	EXPECT(*(volatile uint32_t *)(buf + 12288) == 0xCAFEF00D, "a map store did not land");
	CK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, len), RSMERR_SEG_ALREADY_MAPPED);
	{
		/* While mapped, accesses stay inside the map: a map of part of the segment. */
		rsm_memseg_import_handle_t part;
		void *pa = NULL;
		rsmapi_barrier_t pb;
		CK(rsm_memseg_import_connect(c, me, id, RSM_PERM_READ, &part), RSM_SUCCESS);
		CK(rsm_memseg_import_init_barrier(part, RSM_BARRIER_SEGMENT, &pb), RSM_SUCCESS);
		CK(rsm_memseg_import_map(part, &pa, RSM_MAP_NONE, RSM_PERM_READ, 4096, 4096), RSM_SUCCESS);
		CK(rsm_memseg_import_get8(part, 100, v8, 1), RSMERR_BAD_OFFSET);
		CK(rsm_memseg_import_get8(part, 4196, v8, 1), RSM_SUCCESS);
		EXPECT(v8[0] == (uint8_t)(4196 * 7), "get8 through a partial map read %u", v8[0]);
		CK(rsm_memseg_import_unmap(part), RSM_SUCCESS);
		CK(rsm_memseg_import_destroy_barrier(&pb), RSM_SUCCESS);
		CK(rsm_memseg_import_disconnect(part), RSM_SUCCESS);
	}
	CK(rsm_memseg_import_disconnect(im), RSMERR_SEG_STILL_MAPPED);

	/* Scatter/gather with an address and a local-memory handle. */
	char *local = pages(1);
	memcpy(local, "abcd", 4);
	memcpy(local + 100, "wxyz", 4);
	rsm_localmemory_handle_t lh;
	CK(rsm_create_localmemory_handle(c, &lh, local, 4096), RSM_SUCCESS);
	rsm_iovec_t iov[2] = {
	    {RSM_VA_TYPE, {.vaddr = local}, 0, 200, 4},
	    {RSM_HANDLE_TYPE, {.handle = lh}, 100, 5000, 4},
	};
	rsm_scat_gath_t sg = {me, 2, 99, RSM_IMPLICIT_SIGPOST, im, iov};
	CK(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
	EXPECT(sg.io_residual_count == 0, "residual %lu", sg.io_residual_count);
	EXPECT(memcmp(buf + 200, "abcd", 4) == 0 && memcmp(buf + 5000, "wxyz", 4) == 0, "putv did not land");
	CK(rsm_intr_signal_wait(ex, 2000), RSM_SUCCESS); /* RSM_IMPLICIT_SIGPOST */
	memset(local, 0, 8);
	iov[1].io_type = RSM_VA_TYPE;
	iov[1].local.vaddr = local;
	iov[1].local_offset = 4;
	sg.flags = 0;
	CK(rsm_memseg_import_getv(&sg), RSM_SUCCESS);
	EXPECT(memcmp(local, "abcdwxyz", 8) == 0, "getv read %.8s", local);
	sg.io_request_count = 0;
	CK(rsm_memseg_import_getv(&sg), RSMERR_BAD_SGIO);
	sg.io_request_count = RSM_MAX_SGIOREQS + 1;
	CK(rsm_memseg_import_getv(&sg), RSMERR_BAD_SGIO);
	CK(rsm_memseg_import_getv(NULL), RSMERR_BAD_SGIO);
	CK(rsm_free_localmemory_handle(c, lh), RSM_SUCCESS);
	CK(rsm_free_localmemory_handle(c, lh), RSMERR_BAD_LOCALMEM_HNDL);

	/* Barriers and modes. */
	rsm_barrier_mode_t mode;
	CK(rsm_memseg_import_get_mode(im, &mode), RSM_SUCCESS);
	EXPECT(mode == RSM_BARRIER_MODE_IMPLICIT, "default mode %d", mode);
	CK(rsm_memseg_import_set_mode(im, (rsm_barrier_mode_t)7), RSMERR_BAD_MODE);
	CK(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
	CK(rsm_memseg_import_close_barrier(&bar), RSMERR_BARRIER_NOT_OPENED);
	CK(rsm_memseg_import_order_barrier(&bar), RSMERR_BARRIER_NOT_OPENED);
	CK(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
	CK(rsm_memseg_import_put(im, 300, "xy", 2), RSM_SUCCESS);
	CK(rsm_memseg_import_order_barrier(&bar), RSM_SUCCESS);
	CK(rsm_memseg_import_close_barrier(&bar), RSM_SUCCESS);
	CK(rsm_memseg_import_close_barrier(NULL), RSMERR_BAD_BARRIER_PTR);

	/* Signals and poll descriptors. */
	CK(rsm_intr_signal_wait(ex, 30), RSMERR_TIMEOUT);
	CK(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
	CK(rsm_intr_signal_wait(ex, 2000), RSM_SUCCESS);
	CK(rsm_intr_signal_post(im, RSM_SIGPOST_NO_ACCUMULATE), RSM_SUCCESS);
	CK(rsm_intr_signal_post(im, RSM_SIGPOST_NO_ACCUMULATE), RSM_SUCCESS);
	CK(rsm_intr_signal_wait(ex, 2000), RSM_SUCCESS);
	CK(rsm_intr_signal_wait(ex, 30), RSMERR_TIMEOUT);
	CK(rsm_intr_signal_post(NULL, 0), RSMERR_BAD_SEG_HNDL);
	struct pollfd pfd;
	CK(rsm_memseg_get_pollfd(ex, &pfd), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(ex), RSMERR_POLLFD_IN_USE);
	CK(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
	EXPECT(poll(&pfd, 1, 2000) == 1, "poll did not wake on a signal");
	int n = 0;
	CK(rsm_intr_signal_wait_pollfd(&pfd, 1, 2000, &n), RSM_SUCCESS);
	EXPECT(n == 1, "ready %d", n);
	CK(rsm_intr_signal_wait_pollfd(&pfd, 1, 30, &n), RSMERR_TIMEOUT);
	CK(rsm_memseg_release_pollfd(ex), RSM_SUCCESS);
	CK(rsm_memseg_release_pollfd(ex), RSMERR_BAD_SEG_HNDL);

	/* Unpublish cuts the importer off: within moments its accesses and barriers fail. */
	CK(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
	int r = RSM_SUCCESS;
	for (int i = 0; i < 2000 && r == RSM_SUCCESS; i++) {
		CK(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
		rsm_memseg_import_put(im, 0, "z", 1);
		r = rsm_memseg_import_close_barrier(&bar);
		if (r == RSM_SUCCESS)
			usleep(1000);
	}
	EXPECT(r == RSMERR_CONN_ABORTED, "close_barrier after unpublish returned %d", r);
	CK(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_IMPLICIT), RSM_SUCCESS);
	CK(rsm_memseg_import_get8(im, 0, v8, 1), RSMERR_CONN_ABORTED);
	CK(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
	CK(rsm_memseg_import_open_barrier(&bar), RSMERR_BARRIER_UNINITIALIZED);
	CK(rsm_memseg_import_unmap(im), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(ex), RSMERR_BAD_SEG_HNDL);
	CK(rsm_memseg_export_destroy(ex2), RSM_SUCCESS);
	buf[0] = 1; /* the memory is the program's own again */

	stack_export(c, me);
	rebind(c, me);

	/* Segment-id reservations. */
	rsm_memseg_id_t base;
	uint32_t count;
	const char *file = getenv("REMORA_RSM_SEGMENTID_FILE");
	if (file) {
		CK(rsm_get_segmentid_range("SUNWfoo", &base, &count), RSM_SUCCESS);
		EXPECT(base == 0x600000 && count == 100, "range %#x %u", base, count);
		CK(rsm_get_segmentid_range("nope", &base, &count), RSMERR_BAD_APPID);
	}
	CK(rsm_get_segmentid_range(NULL, &base, &count), RSMERR_BAD_ADDR);

	CK(rsm_release_controller(c), RSM_SUCCESS);
	puts("RSM OK");
	return 0;
}
