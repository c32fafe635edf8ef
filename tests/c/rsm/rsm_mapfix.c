/*
 * rsm_mapfix: RSM_MAP_FIXED and RSM_MAP_RESERVED place a map at the program's address,
 * replacing what it had mapped there, as Solaris's MAP_FIXED does.
 *
 * 1. Over a PROT_NONE reservation, RSM_MAP_RESERVED maps at the address: loads see the
 *    export, stores through the map reach it; unmap puts the reservation back (an
 *    inaccessible private mapping of the same range).
 * 2. RSM_MAP_FIXED over that reservation maps at the address too; its unmap frees the range.
 * 3. RSM_MAP_FIXED over memory the program was using replaces it.
 * 4. The checks stay: a NULL address is RSMERR_BAD_ADDR, an unaligned one
 *    RSMERR_BAD_MEM_ALIGNMENT, a writable map of a read-only import RSMERR_BAD_PERMS.
 */
#define _GNU_SOURCE
#include "rsm_check.h"
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define PG 4096

/* The permissions /proc/self/maps gives the mapping holding `addr` ("" when none). */
static const char *perms_at(void *addr, char out[8])
{
	out[0] = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	VERIFY(f != NULL, "cannot read /proc/self/maps");
	char line[512];
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char p[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, p) == 3 && lo <= (unsigned long)addr &&
		    (unsigned long)addr < hi) {
			strcpy(out, p);
			break;
		}
	}
	fclose(f);
	return out;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	rsmapi_controller_handle_t c;
	CHECK(rsm_get_controller("remora0", &c), RSM_SUCCESS);
	rsm_topology_t *t = NULL;
	CHECK(rsm_get_interconnect_topology(&t), RSM_SUCCESS);
	rsm_node_id_t me = t->topology_hdr.local_nodeid;
	rsm_free_interconnect_topology(t);

	char *mem = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	VERIFY(mem != MAP_FAILED, "mmap");
	strcpy(mem, "hello");
	strcpy(mem + PG, "second page");
	rsm_memseg_export_handle_t ex;
	rsm_memseg_id_t id = 0;
	CHECK(rsm_memseg_export_create(c, &ex, mem, 2 * PG, 0), RSM_SUCCESS);
	CHECK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSM_SUCCESS);
	rsm_memseg_import_handle_t im;
	CHECK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &im), RSM_SUCCESS);
	char perms[8];

	/* 1. RSM_MAP_RESERVED over a reservation, and the reservation back after unmap. */
	char *res = mmap(NULL, 2 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	VERIFY(res != MAP_FAILED, "reserve");
	void *at = res;
	CHECK(rsm_memseg_import_map(im, &at, RSM_MAP_RESERVED, RSM_PERM_RDWR, 0, 2 * PG), RSM_SUCCESS);
	VERIFY(at == res, "mapped at %p, not at the reservation %p", at, (void *)res);
	VERIFY(strcmp(res, "hello") == 0 && strcmp(res + PG, "second page") == 0, "the map shows %s", res);
	strcpy(res + 8, "through the map");
	VERIFY(strcmp(mem + 8, "through the map") == 0, "a store through the map did not reach the export");
	VERIFY(strcmp(perms_at(res, perms), "rw-s") == 0, "the map is %s", perms);
	CHECK(rsm_memseg_import_unmap(im), RSM_SUCCESS);
	VERIFY(strcmp(perms_at(res, perms), "---p") == 0 && strcmp(perms_at(res + PG, perms), "---p") == 0,
	    "after unmap the reserved range is \"%s\", not reserved again", perms);

	/* 2. RSM_MAP_FIXED over the reservation; its unmap frees the range. */
	at = res + PG;
	CHECK(rsm_memseg_import_map(im, &at, RSM_MAP_FIXED, RSM_PERM_READ, PG, PG), RSM_SUCCESS);
	VERIFY(at == res + PG, "mapped at %p, not at %p", at, (void *)(res + PG));
	VERIFY(strcmp(res + PG, "second page") == 0, "the map shows %s", res + PG);
	VERIFY(strcmp(perms_at(res + PG, perms), "r--s") == 0, "a read map is %s", perms);
	VERIFY(strcmp(perms_at(res, perms), "---p") == 0, "the page before the map is %s", perms);
	CHECK(rsm_memseg_import_unmap(im), RSM_SUCCESS);
	VERIFY(perms_at(res + PG, perms)[0] == 0, "after unmap of a fixed map the range is %s", perms);

	/* 3. RSM_MAP_FIXED over memory the program was using. */
	char *used = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	VERIFY(used != MAP_FAILED, "mmap");
	strcpy(used, "old contents");
	at = used;
	CHECK(rsm_memseg_import_map(im, &at, RSM_MAP_FIXED, RSM_PERM_RDWR, 0, PG), RSM_SUCCESS);
	VERIFY(at == used && strcmp(used, "hello") == 0, "the fixed map did not replace the program's memory");
	CHECK(rsm_memseg_import_unmap(im), RSM_SUCCESS);

	/* 4. The checks before any map. */
	at = NULL;
	CHECK(rsm_memseg_import_map(im, &at, RSM_MAP_FIXED, RSM_PERM_RDWR, 0, PG), RSMERR_BAD_ADDR);
	at = res + 8;
	CHECK(rsm_memseg_import_map(im, &at, RSM_MAP_RESERVED, RSM_PERM_RDWR, 0, PG), RSMERR_BAD_MEM_ALIGNMENT);
	rsm_memseg_import_handle_t ro;
	CHECK(rsm_memseg_import_connect(c, me, id, RSM_PERM_READ, &ro), RSM_SUCCESS);
	at = res;
	CHECK(rsm_memseg_import_map(ro, &at, RSM_MAP_RESERVED, RSM_PERM_RDWR, 0, PG), RSMERR_BAD_PERMS);
	VERIFY(strcmp(perms_at(res, perms), "---p") == 0, "a refused map changed the reservation to %s", perms);
	CHECK(rsm_memseg_import_map(ro, &at, RSM_MAP_RESERVED, RSM_PERM_READ, 0, PG), RSM_SUCCESS);
	VERIFY(strcmp(res, "hello") == 0, "the read-only map shows %s", res);
	CHECK(rsm_memseg_import_disconnect(ro), RSMERR_SEG_STILL_MAPPED);
	CHECK(rsm_memseg_import_unmap(ro), RSM_SUCCESS);
	CHECK(rsm_memseg_import_disconnect(ro), RSM_SUCCESS);

	CHECK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CHECK(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}
