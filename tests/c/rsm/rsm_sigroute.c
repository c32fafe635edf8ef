/*
 * rsm_sigroute: a signal reaches only the segment it is meant for.
 *
 * 1. An export posts to importer A, A disconnects, B connects: the export's next post
 *    reaches B (B's interrupt may not take A's old number and be missed).
 * 2. An import of e1 outlives e1's destroy; an unrelated export e2 is created and
 *    published: a post on the stale import is RSMERR_CONN_ABORTED and e2 gets nothing.
 * Prints RSM OK.
 */
#include "rsm_test.h"
#include <string.h>

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	rsmapi_controller_handle_t c;
	CK(rsm_get_controller("remora0", &c), RSM_SUCCESS);
	rsm_node_id_t me = local_node();

	rsm_memseg_export_handle_t e, e1, e2;
	rsm_memseg_import_handle_t a, b;
	rsm_memseg_id_t id = 0;
	CK(rsm_memseg_export_create(c, &e, (caddr_t)pages(1), 4096, 0), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(e, &id, NULL, 0), RSM_SUCCESS);
	CK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &a), RSM_SUCCESS);
	CK(rsm_intr_signal_post(e, 0), RSM_SUCCESS);
	CK(rsm_intr_signal_wait(a, 5000), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(a), RSM_SUCCESS);
	CK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &b), RSM_SUCCESS);
	CK(rsm_intr_signal_post(e, 0), RSM_SUCCESS);
	CK(rsm_intr_signal_wait(b, 5000), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(b), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(e), RSM_SUCCESS);

	rsm_memseg_id_t id1 = 0, id2 = 0;
	CK(rsm_memseg_export_create(c, &e1, (caddr_t)pages(1), 4096, 0), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(e1, &id1, NULL, 0), RSM_SUCCESS);
	CK(rsm_memseg_import_connect(c, me, id1, RSM_PERM_RDWR, &a), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(e1), RSM_SUCCESS);
	CK(rsm_memseg_export_create(c, &e2, (caddr_t)pages(1), 4096, 0), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(e2, &id2, NULL, 0), RSM_SUCCESS);
	CK(rsm_intr_signal_post(a, 0), RSMERR_CONN_ABORTED);
	CK(rsm_intr_signal_wait(e2, 300), RSMERR_TIMEOUT);
	CK(rsm_memseg_import_disconnect(a), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(e2), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}
