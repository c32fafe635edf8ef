/* Access control across users: the exporter (run by one user) publishes with an access
 * list that gives its own user read/write and everyone else read only (0604) on the
 * importer's node; the importer (run by another user) may read but never write.
 * Usage: rsm_acl export <segid-hex> <importer-node>
 *        rsm_acl import <node> <segid-hex> */
#include "rsm_test.h"
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static int export_side(rsm_memseg_id_t id, rsm_node_id_t importer)
{
	rsmapi_controller_handle_t c;
	rsm_memseg_export_handle_t ex;
	CK(rsm_get_controller("remora0", &c), RSM_SUCCESS);
	char *buf = pages(1);
	strcpy(buf, "owned by the exporter");
	CK(rsm_memseg_export_create(c, &ex, buf, 4096, 0), RSM_SUCCESS);
	rsmapi_access_entry_t acl[1] = {{importer, 0604}};
	CK(rsm_memseg_export_publish(ex, &id, acl, 1), RSM_SUCCESS);
	printf("published\n");
	fflush(stdout);
	CK(rsm_intr_signal_wait(ex, 30000), RSM_SUCCESS);
	EXPECT(strcmp(buf, "owned by the exporter") == 0, "the other user changed the segment: %s", buf);
	CK(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
	CK(rsm_release_controller(c), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}

static int import_side(rsm_node_id_t node, rsm_memseg_id_t id)
{
	rsmapi_controller_handle_t c;
	rsm_memseg_import_handle_t im;
	CK(rsm_get_controller("remora0", &c), RSM_SUCCESS);
	int r = RSMERR_SEG_NOT_PUBLISHED;
	for (int i = 0; i < 3000 && r == RSMERR_SEG_NOT_PUBLISHED; i++) {
		r = rsm_memseg_import_connect(c, node, id, RSM_PERM_RDWR, &im);
		if (r == RSMERR_SEG_NOT_PUBLISHED)
			usleep(10000);
	}
	CK(r, RSMERR_PERM_DENIED);
	CK(rsm_memseg_import_connect(c, node, id, RSM_PERM_WRITE, &im), RSMERR_PERM_DENIED);
	CK(rsm_memseg_import_connect(c, node, id, RSM_PERM_READ, &im), RSM_SUCCESS);
	rsmapi_barrier_t bar;
	CK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_SEGMENT, &bar), RSM_SUCCESS);
	char text[32] = {0};
	CK(rsm_memseg_import_get(im, 0, text, 21), RSM_SUCCESS);
	EXPECT(strcmp(text, "owned by the exporter") == 0, "read %s", text);
	CK(rsm_memseg_import_put(im, 0, "mine now", 9), RSMERR_PERM_DENIED);
	void *addr = NULL;
	CK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, 4096), RSMERR_BAD_PERMS);
	CK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_READ, 0, 4096), RSM_SUCCESS);
	EXPECT(strcmp((const char *)addr, "owned by the exporter") == 0, "map shows %s", (const char *)addr);
	CK(rsm_memseg_import_unmap(im), RSM_SUCCESS);
	CK(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
	CK(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CK(rsm_release_controller(c), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "export") == 0)
		return export_side((rsm_memseg_id_t)strtoul(argv[2], NULL, 16), (rsm_node_id_t)atoi(argv[3]));
	if (argc == 4 && strcmp(argv[1], "import") == 0)
		return import_side((rsm_node_id_t)atoi(argv[2]), (rsm_memseg_id_t)strtoul(argv[3], NULL, 16));
	printf("usage: rsm_acl export <segid-hex> <importer-node> | import <node> <segid-hex>\n");
	return 2;
}
