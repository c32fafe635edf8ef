/*
 * rsm_import <node> <segid-hex>: the importing half of the exchange with rsm_export.
 *
 * Connects through the Solaris controller name "sci0" (retrying while the segment is not
 * yet published), reads the pattern with get8/16/32/64, writes with put/put64 inside an
 * explicit barrier and with a store through a map, signals the exporter, waits for its
 * answer and checks it with getv (an address entry and a local-memory-handle entry),
 * round-trips a putv/getv, and signals "done" before disconnecting.
 */
#include "rsm_check.h"
#include <stdint.h>
#include <string.h>
#include <time.h>

#define SEG_SIZE 65536

static unsigned char expect[SEG_SIZE];

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0) {
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		printf("usage: %s <node> <segid-hex>\n", argv[0]);
		return 2;
	}
	rsm_node_id_t node = (rsm_node_id_t)strtoul(argv[1], NULL, 0);
	rsm_memseg_id_t id = (rsm_memseg_id_t)strtoul(argv[2], NULL, 16);
	for (size_t i = 0; i < SEG_SIZE; i++)
		expect[i] = RSM_PATTERN(i);

	rsmapi_controller_handle_t ctrl;
	CHECK(rsm_get_controller("sci0", &ctrl), RSM_SUCCESS);

	/* The exporter may start after us: retry for up to 20 s. Its node's daemon may not be
	 * up yet either (it starts with the exporter; on a loaded machine that can take longer
	 * than a connect waits for it): unreachable until then. */
	rsm_memseg_import_handle_t im = NULL;
	int rc = RSMERR_SEG_NOT_PUBLISHED;
	for (int tries = 0; tries < 2000; tries++) {
		rc = rsm_memseg_import_connect(ctrl, node, id, RSM_PERM_RDWR, &im);
		if (rc != RSMERR_SEG_NOT_PUBLISHED && rc != RSMERR_REMOTE_NODE_UNREACHABLE)
			break;
		nap_ms(10);
	}
	CHECK(rc, RSM_SUCCESS);

	/* Implicit mode (the default) needs an initialised barrier before any get or put. */
	rsmapi_barrier_t bar;
	CHECK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, &bar), RSM_SUCCESS);
	rsm_barrier_mode_t mode;
	CHECK(rsm_memseg_import_get_mode(im, &mode), RSM_SUCCESS);
	VERIFY(mode == RSM_BARRIER_MODE_IMPLICIT, "initial barrier mode %d", (int)mode);

	/* Reads of every width, with repeat counts, on aligned offsets. */
	uint8_t b8[256];
	CHECK(rsm_memseg_import_get8(im, 0, b8, 256), RSM_SUCCESS);
	VERIFY(memcmp(b8, expect, 256) == 0, "get8 of bytes 0..255 does not match the pattern");
	uint16_t b16[8];
	CHECK(rsm_memseg_import_get16(im, 514, b16, 8), RSM_SUCCESS);
	VERIFY(memcmp(b16, expect + 514, sizeof b16) == 0, "get16 at 514 does not match");
	uint32_t b32[16];
	CHECK(rsm_memseg_import_get32(im, 1028, b32, 16), RSM_SUCCESS);
	VERIFY(memcmp(b32, expect + 1028, sizeof b32) == 0, "get32 at 1028 does not match");
	uint64_t b64[32];
	CHECK(rsm_memseg_import_get64(im, 2056, b64, 32), RSM_SUCCESS);
	VERIFY(memcmp(b64, expect + 2056, sizeof b64) == 0, "get64 at 2056 does not match");
	unsigned char tail[64];
	CHECK(rsm_memseg_import_get(im, SEG_SIZE - 64, tail, 64), RSM_SUCCESS);
	VERIFY(memcmp(tail, expect + SEG_SIZE - 64, 64) == 0, "get of the last 64 bytes");

	/* Writes inside one explicit barrier. */
	CHECK(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
	CHECK(rsm_memseg_import_get_mode(im, &mode), RSM_SUCCESS);
	VERIFY(mode == RSM_BARRIER_MODE_EXPLICIT, "mode after set_mode is %d", (int)mode);
	unsigned char a5[4096];
	memset(a5, 0xA5, sizeof a5);
	uint64_t words[8];
	for (unsigned i = 0; i < 8; i++)
		words[i] = 0x1122334455667788ULL + i;
	CHECK(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
	CHECK(rsm_memseg_import_put(im, 0, a5, sizeof a5), RSM_SUCCESS);
	CHECK(rsm_memseg_import_put64(im, 8192, words, 8), RSM_SUCCESS);
	CHECK(rsm_memseg_import_close_barrier(&bar), RSM_SUCCESS);

	/* A store through a map, flushed by another barrier. */
	void *addr = NULL;
	CHECK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, SEG_SIZE), RSM_SUCCESS);
	VERIFY(addr != NULL, "map returned a NULL address");
	volatile unsigned char *map = addr;
	VERIFY(map[0] == 0xA5 && map[4096] == RSM_PATTERN(4096), "the map does not show the segment");
	*(volatile uint32_t *)(map + 16384) = 0xCAFEF00Du;
	CHECK(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
	CHECK(rsm_memseg_import_close_barrier(&bar), RSM_SUCCESS);

	/* Tell the exporter, then wait for its answer. */
	CHECK(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
	CHECK(rsm_intr_signal_wait(im, 30000), RSM_SUCCESS);

	/* getv: one address entry and one local-memory-handle entry over [20000, 20100). */
	unsigned char va_buf[100];
	memset(va_buf, 0, sizeof va_buf);
	unsigned char *local = rsm_pages(4096);
	memset(local, 0, 4096);
	rsm_localmemory_handle_t lh;
	CHECK(rsm_create_localmemory_handle(ctrl, &lh, (caddr_t)local, 4096), RSM_SUCCESS);
	rsm_iovec_t iov[2];
	memset(iov, 0, sizeof iov);
	iov[0].io_type = RSM_VA_TYPE;
	iov[0].local.vaddr = (caddr_t)va_buf;
	iov[0].local_offset = 0;
	iov[0].remote_offset = 20000;
	iov[0].transfer_length = 100;
	iov[1].io_type = RSM_HANDLE_TYPE;
	iov[1].local.handle = lh;
	iov[1].local_offset = 128;
	iov[1].remote_offset = 20000;
	iov[1].transfer_length = 100;
	rsm_scat_gath_t sg;
	memset(&sg, 0, sizeof sg);
	sg.io_request_count = 2;
	sg.io_residual_count = 99;
	sg.flags = 0;
	sg.remote_handle = im;
	sg.iovec = iov;
	CHECK(rsm_memseg_import_getv(&sg), RSM_SUCCESS);
	VERIFY(sg.io_residual_count == 0, "getv residual count %lu", (unsigned long)sg.io_residual_count);
	for (int i = 0; i < 100; i++) {
		VERIFY(va_buf[i] == 0x5A, "getv VA entry byte %d is %#x", i, va_buf[i]);
		VERIFY(local[128 + i] == 0x5A, "getv handle entry byte %d is %#x", i, local[128 + i]);
	}
	VERIFY(local[127] == 0 && local[228] == 0, "getv wrote outside its entry in the handle");
	for (int i = 0; i < 100; i++)
		VERIFY(map[20000 + i] == 0x5A, "the map shows %#x at %d", map[20000 + i], 20000 + i);
	VERIFY(map[19999] == RSM_PATTERN(19999) && map[20100] == RSM_PATTERN(20100),
	    "the exporter's answer spilled outside [20000, 20100)");

	/* putv of two entries, then getv back and compare. */
	unsigned char out_va[256];
	for (int i = 0; i < 256; i++) {
		out_va[i] = (unsigned char)(255 - i);
		local[1024 + i] = (unsigned char)(i ^ 0x3C);
	}
	iov[0].io_type = RSM_VA_TYPE;
	iov[0].local.vaddr = (caddr_t)out_va;
	iov[0].local_offset = 0;
	iov[0].remote_offset = 32768;
	iov[0].transfer_length = 256;
	iov[1].io_type = RSM_HANDLE_TYPE;
	iov[1].local.handle = lh;
	iov[1].local_offset = 1024;
	iov[1].remote_offset = 36864;
	iov[1].transfer_length = 256;
	sg.io_residual_count = 99;
	CHECK(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
	VERIFY(sg.io_residual_count == 0, "putv residual count %lu", (unsigned long)sg.io_residual_count);
	CHECK(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
	CHECK(rsm_memseg_import_close_barrier(&bar), RSM_SUCCESS);

	unsigned char back_va[256];
	memset(back_va, 0, sizeof back_va);
	memset(local + 2048, 0, 256);
	iov[0].local.vaddr = (caddr_t)back_va;
	iov[1].local_offset = 2048;
	sg.io_residual_count = 99;
	CHECK(rsm_memseg_import_getv(&sg), RSM_SUCCESS);
	VERIFY(sg.io_residual_count == 0, "getv residual count %lu", (unsigned long)sg.io_residual_count);
	VERIFY(memcmp(back_va, out_va, 256) == 0, "putv/getv at 32768 differ");
	VERIFY(memcmp(local + 2048, local + 1024, 256) == 0, "putv/getv at 36864 differ");
	VERIFY(map[32768] == out_va[0] && map[36864 + 255] == local[1024 + 255], "the map misses the putv data");

	CHECK(rsm_memseg_import_unmap(im), RSM_SUCCESS);
	CHECK(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
	CHECK(rsm_free_localmemory_handle(ctrl, lh), RSM_SUCCESS);
	/* "Done" goes out while still connected. */
	CHECK(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
	CHECK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CHECK(rsm_release_controller(ctrl), RSM_SUCCESS);
	free(local);
	printf("RSM OK\n");
	return 0;
}
