/*
 * rsm_export <segid-hex>: the exporting half of a two-process RSMAPI exchange.
 *
 * Exports a 64 KiB buffer filled with RSM_PATTERN under the given id, waits for the
 * importer's first signal, checks the importer's writes directly in the buffer (the
 * segment is this memory, shared in place), answers with 0x5A in bytes [20000, 20100)
 * and a signal to all importers, waits for the importer's "done" signal and tears down.
 */
#include "rsm_check.h"
#include <stdint.h>
#include <string.h>

#define SEG_SIZE 65536

int main(int argc, char **argv)
{
	if (argc != 2) {
		printf("usage: %s <segid-hex>\n", argv[0]);
		return 2;
	}
	rsm_memseg_id_t id = (rsm_memseg_id_t)strtoul(argv[1], NULL, 16);

	rsmapi_controller_handle_t ctrl;
	CHECK(rsm_get_controller("remora0", &ctrl), RSM_SUCCESS);

	unsigned char *buf = rsm_pages(SEG_SIZE);
	for (size_t i = 0; i < SEG_SIZE; i++)
		buf[i] = RSM_PATTERN(i);

	rsm_memseg_export_handle_t seg;
	CHECK(rsm_memseg_export_create(ctrl, &seg, buf, SEG_SIZE, RSM_ALLOW_REBIND), RSM_SUCCESS);
	rsm_memseg_id_t asked = id;
	CHECK(rsm_memseg_export_publish(seg, &asked, NULL, 0), RSM_SUCCESS);
	VERIFY(asked == id, "publish changed an explicit id to %#x", (unsigned)asked);
	printf("published %#x\n", (unsigned)id);
	fflush(stdout);

	/* First signal: the importer has written and flushed. */
	CHECK(rsm_intr_signal_wait(seg, 30000), RSM_SUCCESS);

	volatile unsigned char *v = buf;
	for (size_t i = 0; i < 4096; i++)
		VERIFY(v[i] == 0xA5, "byte %zu is %#x after the importer's put", i, v[i]);
	for (unsigned i = 0; i < 8; i++) {
		uint64_t want = 0x1122334455667788ULL + i, got;
		memcpy(&got, (const void *)(buf + 8192 + 8 * i), sizeof got);
		VERIFY(got == want, "put64 item %u is %#llx", i, (unsigned long long)got);
	}
	uint32_t word;
	memcpy(&word, (const void *)(buf + 16384), sizeof word);
	VERIFY(word == 0xCAFEF00Du, "the store through the importer's map left %#x", (unsigned)word);
	/* Bytes nobody wrote keep the pattern. */
	VERIFY(v[4096] == RSM_PATTERN(4096), "byte 4096 changed");
	VERIFY(v[8192 + 64] == RSM_PATTERN(8192 + 64), "byte after the put64 range changed");
	VERIFY(v[16388] == RSM_PATTERN(16388), "byte after the mapped store changed");

	/* The answer, then a signal to every importer. */
	memset(buf + 20000, 0x5A, 100);
	CHECK(rsm_intr_signal_post(seg, 0), RSM_SUCCESS);

	/* Second signal: the importer is done. */
	CHECK(rsm_intr_signal_wait(seg, 30000), RSM_SUCCESS);

	CHECK(rsm_memseg_export_unpublish(seg), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(seg), RSM_SUCCESS);
	CHECK(rsm_release_controller(ctrl), RSM_SUCCESS);
	free(buf);
	printf("RSM OK\n");
	return 0;
}
