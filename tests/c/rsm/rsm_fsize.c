/*
 * rsm_fsize: RSMAPI exports under a file size limit (ulimit -f, RLIMIT_FSIZE) of 8 MiB,
 * set before the first RSMAPI call (the node daemon the library starts gets it too).
 * SIGXFSZ is left at its default action, which ends the program: memory sized past the
 * limit would end the test, where it must be refused. Exporting 16 MiB of the program's
 * memory is RSMERR_INSUFFICIENT_MEM and leaves its bytes as they were; 1 MiB exports,
 * before and after. Prints RSM OK.
 *
 *   REMORA_NODE=4 ./rsm_fsize
 */
#include "rsm_check.h"
#include <stdint.h>
#include <sys/resource.h>

#define MIB (1UL << 20)

/* Export and destroy `len` bytes at `buf`: it works. */
static void exports(rsmapi_controller_handle_t ctrl, unsigned char *buf, size_t len)
{
	rsm_memseg_export_handle_t seg;
	CHECK(rsm_memseg_export_create(ctrl, &seg, buf, len, 0), RSM_SUCCESS);
	buf[0] = 0x11;
	VERIFY(buf[0] == 0x11, "the exported memory keeps what is stored");
	CHECK(rsm_memseg_export_destroy(seg), RSM_SUCCESS);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct rlimit lim = { 8 * MIB, 8 * MIB };
	VERIFY(setrlimit(RLIMIT_FSIZE, &lim) == 0, "RLIMIT_FSIZE 8 MiB");

	rsmapi_controller_handle_t ctrl;
	CHECK(rsm_get_controller("remora0", &ctrl), RSM_SUCCESS);
	exports(ctrl, rsm_pages(MIB), MIB);

	unsigned char *big = rsm_pages(16 * MIB);
	for (size_t i = 0; i < 16 * MIB; i += 4096)
		big[i] = RSM_PATTERN(i / 4096);
	rsm_memseg_export_handle_t seg;
	CHECK(rsm_memseg_export_create(ctrl, &seg, big, 16 * MIB, 0), RSMERR_INSUFFICIENT_MEM);
	for (size_t i = 0; i < 16 * MIB; i += 4096)
		VERIFY(big[i] == RSM_PATTERN(i / 4096), "byte %zu changed", i);

	exports(ctrl, rsm_pages(MIB), MIB);
	CHECK(rsm_release_controller(ctrl), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}
