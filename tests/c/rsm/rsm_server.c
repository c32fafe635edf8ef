/* The exporting half of a pair: exports 64 KiB of its own memory under the id given,
 * waits for the client's signal, checks what the client wrote (in its own buffer: the
 * export is that memory), answers with a signal to every importer, waits for the client
 * to finish, then unpublishes and destroys.
 * Usage: rsm_server <segid-hex> */
#include "rsm_test.h"
#include <stdint.h>
#include <string.h>

#define SIZE (64 * 1024)

int main(int argc, char **argv)
{
	if (argc != 2) {
		printf("usage: rsm_server <segid-hex>\n");
		return 2;
	}
	rsm_memseg_id_t id = (rsm_memseg_id_t)strtoul(argv[1], NULL, 16);
	rsmapi_controller_handle_t c;
	rsm_memseg_export_handle_t ex;
	CK(rsm_get_controller("remora0", &c), RSM_SUCCESS);
	unsigned char *buf = pages(SIZE / 4096);
	for (int i = 0; i < SIZE; i++)
		buf[i] = (unsigned char)(i * 7);
	CK(rsm_memseg_export_create(c, &ex, buf, SIZE, RSM_ALLOW_REBIND), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSM_SUCCESS);
	printf("published %#x\n", id);
	fflush(stdout);

	CK(rsm_intr_signal_wait(ex, 30000), RSM_SUCCESS);
	for (int i = 0; i < 4096; i++)
		EXPECT(buf[i] == 0xA5, "byte %d is %#x, not what the client put", i, buf[i]);
	for (int i = 0; i < 8; i++)
		EXPECT(((volatile uint64_t *)(buf + 8192))[i] == 0x1122334455667788ull + (uint64_t)i, "put64 word %d", i);
	EXPECT(*(volatile uint32_t *)(buf + 16384) == 0xCAFEF00D, "the client's map store is %#x",
	    *(volatile uint32_t *)(buf + 16384));
	EXPECT(memcmp(buf + 32768, "vector one", 10) == 0 && memcmp(buf + 36864, "vector two", 10) == 0,
	    "the client's putv did not land");
	memset(buf + 20000, 0x5A, 100);
	CK(rsm_intr_signal_post(ex, 0), RSM_SUCCESS);
	CK(rsm_intr_signal_wait(ex, 30000), RSM_SUCCESS);
	CK(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
	CK(rsm_release_controller(c), RSM_SUCCESS);
	printf("Hello, World! RSM OK\n");
	return 0;
}
