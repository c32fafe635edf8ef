/* The importing half of a pair: connects to the server's export (waiting for it to be
 * published), reads the server's pattern with every get size, writes with put, put64, a
 * map store and putv inside an explicit barrier, signals the server, waits for its
 * answer, reads the answer with getv and through the map, and signals that it is done.
 * Usage: rsm_client <node> <segid-hex> */
#include "rsm_test.h"
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define SIZE (64 * 1024)

int main(int argc, char **argv)
{
	if (argc != 3) {
		printf("usage: rsm_client <node> <segid-hex>\n");
		return 2;
	}
	rsm_node_id_t node = (rsm_node_id_t)atoi(argv[1]);
	rsm_memseg_id_t id = (rsm_memseg_id_t)strtoul(argv[2], NULL, 16);
	rsmapi_controller_handle_t c;
	rsm_memseg_import_handle_t im;
	/* A hard-coded Solaris controller name works as well as remora0. */
	CK(rsm_get_controller("sci0", &c), RSM_SUCCESS);
	int r = RSMERR_SEG_NOT_PUBLISHED;
	for (int i = 0; i < 3000 && (r == RSMERR_SEG_NOT_PUBLISHED || r == RSMERR_REMOTE_NODE_UNREACHABLE); i++) {
		r = rsm_memseg_import_connect(c, node, id, RSM_PERM_RDWR, &im);
		if (r != RSM_SUCCESS)
			usleep(10000);
	}
	CK(r, RSM_SUCCESS);
	rsmapi_barrier_t bar;
	CK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, &bar), RSM_SUCCESS);

	uint8_t v8[256];
	uint16_t v16[64];
	uint32_t v32[64];
	uint64_t v64[64];
	CK(rsm_memseg_import_get8(im, 0, v8, 256), RSM_SUCCESS);
	for (int i = 0; i < 256; i++)
		EXPECT(v8[i] == (uint8_t)(i * 7), "get8 byte %d is %#x", i, v8[i]);
	CK(rsm_memseg_import_get16(im, 1024, v16, 64), RSM_SUCCESS);
	CK(rsm_memseg_import_get32(im, 2048, v32, 64), RSM_SUCCESS);
	CK(rsm_memseg_import_get64(im, 4096, v64, 64), RSM_SUCCESS);
	for (int i = 0; i < 64; i++) {
		uint8_t *b16 = (uint8_t *)&v16[i], *b32 = (uint8_t *)&v32[i], *b64 = (uint8_t *)&v64[i];
		EXPECT(b16[1] == (uint8_t)((1024 + 2 * i + 1) * 7), "get16 %d", i);
		EXPECT(b32[3] == (uint8_t)((2048 + 4 * i + 3) * 7), "get32 %d", i);
		EXPECT(b64[7] == (uint8_t)((4096 + 8 * i + 7) * 7), "get64 %d", i);
	}

	CK(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
	void *addr = NULL;
	CK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, SIZE), RSM_SUCCESS);
	CK(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
	unsigned char ones[4096];
	memset(ones, 0xA5, sizeof ones);
	CK(rsm_memseg_import_put(im, 0, ones, sizeof ones), RSM_SUCCESS);
	for (int i = 0; i < 8; i++)
		v64[i] = 0x1122334455667788ull + (uint64_t)i;
	CK(rsm_memseg_import_put64(im, 8192, v64, 8), RSM_SUCCESS);
	((volatile uint32_t *)addr)[4096] = 0xCAFEF00D;
	char *local = pages(1);
	memcpy(local, "vector one", 10);
	memcpy(local + 2048, "vector two", 10);
	rsm_localmemory_handle_t lh;
	CK(rsm_create_localmemory_handle(c, &lh, local, 4096), RSM_SUCCESS);
	rsm_iovec_t iov[2] = {
	    {RSM_VA_TYPE, {.vaddr = local}, 0, 32768, 10},
	    {RSM_HANDLE_TYPE, {.handle = lh}, 2048, 36864, 10},
	};
	rsm_scat_gath_t sg = {0, 2, 0, 0, im, iov};
	CK(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
	CK(rsm_memseg_import_close_barrier(&bar), RSM_SUCCESS);
	CK(rsm_intr_signal_post(im, 0), RSM_SUCCESS);

	CK(rsm_intr_signal_wait(im, 30000), RSM_SUCCESS);
	CK(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
	memset(local, 0, 200);
	iov[0].remote_offset = 20000;
	iov[0].transfer_length = 100;
	sg.io_request_count = 1;
	CK(rsm_memseg_import_getv(&sg), RSM_SUCCESS);
	volatile unsigned char *m = addr;
	int seen = 1;
	for (int i = 0; i < 100; i++)
		seen &= m[20000 + i] == 0x5A;
	CK(rsm_memseg_import_close_barrier(&bar), RSM_SUCCESS);
	EXPECT(sg.io_residual_count == 0, "residual %lu", sg.io_residual_count);
	for (int i = 0; i < 100; i++)
		EXPECT((unsigned char)local[i] == 0x5A, "getv byte %d is %#x", i, (unsigned char)local[i]);
	EXPECT(seen, "the map does not show the server's answer");

	CK(rsm_memseg_import_unmap(im), RSM_SUCCESS);
	CK(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
	CK(rsm_free_localmemory_handle(c, lh), RSM_SUCCESS);
	CK(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CK(rsm_release_controller(c), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}
