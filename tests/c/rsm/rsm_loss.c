/* What an importer sees when the exporting process dies: connects (waiting for the
 * export), says so, then reads until an access fails; the failure must be
 * RSMERR_CONN_ABORTED, and a barrier's close must report it too.
 * Usage: rsm_loss <node> <segid-hex> */
#include "rsm_test.h"
#include <stdint.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		printf("usage: rsm_loss <node> <segid-hex>\n");
		return 2;
	}
	rsm_node_id_t node = (rsm_node_id_t)atoi(argv[1]);
	rsm_memseg_id_t id = (rsm_memseg_id_t)strtoul(argv[2], NULL, 16);
	rsmapi_controller_handle_t c;
	rsm_memseg_import_handle_t im;
	rsmapi_barrier_t bar;
	CK(rsm_get_controller("remora0", &c), RSM_SUCCESS);
	int r = RSMERR_SEG_NOT_PUBLISHED;
	for (int i = 0; i < 3000 && r == RSMERR_SEG_NOT_PUBLISHED; i++) {
		r = rsm_memseg_import_connect(c, node, id, RSM_PERM_READ, &im);
		if (r == RSMERR_SEG_NOT_PUBLISHED)
			usleep(10000);
	}
	CK(r, RSM_SUCCESS);
	CK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_SEGMENT, &bar), RSM_SUCCESS);
	printf("connected\n");
	fflush(stdout);
	uint8_t b;
	r = RSM_SUCCESS;
	for (int i = 0; i < 10000 && r == RSM_SUCCESS; i++) {
		r = rsm_memseg_import_get8(im, 0, &b, 1);
		if (r == RSM_SUCCESS)
			usleep(1000);
	}
	CK(r, RSMERR_CONN_ABORTED);
	CK(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
	CK(rsm_memseg_import_close_barrier(&bar), RSMERR_CONN_ABORTED);
	CK(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CK(rsm_release_controller(c), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}
