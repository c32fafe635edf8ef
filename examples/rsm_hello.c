/*
 * RSM hello world (Sun's RSMAPI on Remora): the exporter publishes a page of its own
 * memory; the importer connects, writes a greeting with put inside a barrier and signals;
 * the exporter reads the greeting straight from its own buffer and answers through the
 * same memory, which the importer reads through a map.
 *
 *   rsm_hello export            (node 4)
 *   rsm_hello import <node>     (node 8)
 */
#include <rsmapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEGID 0x400042 /* applications choose ids from 0x400000..0x7fffffff */

static int fail(const char *call, int code)
{
	fprintf(stderr, "%s failed: RSMERR %d\n", call, code);
	return 1;
}

#define TRY(call)                                                                           \
	do {                                                                                    \
		int e_ = (call);                                                                    \
		if (e_ != RSM_SUCCESS)                                                              \
			return fail(#call, e_);                                                         \
	} while (0)

static int exporter(rsmapi_controller_handle_t ctl)
{
	rsm_memseg_export_handle_t seg;
	rsm_memseg_id_t id = SEGID;
	char *page;
	if (posix_memalign((void **)&page, 4096, 4096) != 0)
		return 1;
	memset(page, 0, 4096);
	TRY(rsm_memseg_export_create(ctl, &seg, page, 4096, 0));
	TRY(rsm_memseg_export_publish(seg, &id, NULL, 0));
	printf("exported a page as segment %#x; waiting for a signal\n", id);
	fflush(stdout);
	TRY(rsm_intr_signal_wait(seg, 30000));
	printf("the importer wrote into my own buffer: %s\n", page);
	strcpy(page + 1024, "Hello back, through the same memory!");
	TRY(rsm_intr_signal_post(seg, 0));
	TRY(rsm_intr_signal_wait(seg, 30000)); /* the importer is done */
	TRY(rsm_memseg_export_unpublish(seg));
	TRY(rsm_memseg_export_destroy(seg));
	return 0;
}

static int importer(rsmapi_controller_handle_t ctl, rsm_node_id_t node)
{
	rsm_memseg_import_handle_t seg;
	rsmapi_barrier_t bar;
	const char hello[] = "Hello, World! (an RSM put)";
	void *map = NULL;
	int e = RSMERR_SEG_NOT_PUBLISHED;
	for (int i = 0; i < 2000 && e == RSMERR_SEG_NOT_PUBLISHED; i++) {
		e = rsm_memseg_import_connect(ctl, node, SEGID, RSM_PERM_RDWR, &seg);
		if (e == RSMERR_SEG_NOT_PUBLISHED)
			usleep(10000); /* the exporter may not have published yet */
	}
	if (e != RSM_SUCCESS)
		return fail("rsm_memseg_import_connect", e);
	TRY(rsm_memseg_import_init_barrier(seg, RSM_BARRIER_NODE, &bar));
	TRY(rsm_memseg_import_set_mode(seg, RSM_BARRIER_MODE_EXPLICIT));
	TRY(rsm_memseg_import_open_barrier(&bar));
	TRY(rsm_memseg_import_put(seg, 0, (void *)hello, sizeof hello));
	TRY(rsm_memseg_import_close_barrier(&bar)); /* success: the put is in the export */
	TRY(rsm_intr_signal_post(seg, 0));
	TRY(rsm_intr_signal_wait(seg, 30000));
	TRY(rsm_memseg_import_map(seg, &map, RSM_MAP_NONE, RSM_PERM_READ, 0, 4096));
	printf("the exporter answered: %s\n", (char *)map + 1024);
	TRY(rsm_memseg_import_unmap(seg));
	TRY(rsm_intr_signal_post(seg, 0));
	TRY(rsm_memseg_import_destroy_barrier(&bar));
	TRY(rsm_memseg_import_disconnect(seg));
	return 0;
}

int main(int argc, char **argv)
{
	rsmapi_controller_handle_t ctl;
	int r;
	if (argc < 2 || (strcmp(argv[1], "export") != 0 && (strcmp(argv[1], "import") != 0 || argc < 3))) {
		fprintf(stderr, "usage: %s export | import <node>\n", argv[0]);
		return 2;
	}
	TRY(rsm_get_controller("sci0", &ctl)); /* the name Solaris programs hard-code */
	r = strcmp(argv[1], "export") == 0 ? exporter(ctl) : importer(ctl, (rsm_node_id_t)atoi(argv[2]));
	rsm_release_controller(ctl);
	return r;
}
