/*
 * vipl_fsize: VIPL memory registration under a file size limit (ulimit -f,
 * RLIMIT_FSIZE) of 8 MiB, set before the first VIPL call (the node daemon the
 * library starts gets it too). SIGXFSZ is left at its default action, which
 * ends the program: memory sized past the limit would end the test, where it
 * must be refused. Registering 16 MiB is VIP_ERROR_RESOURCE and leaves its
 * bytes as they were; 1 MiB registers, before and after.
 * Run with REMORA_NODE set; no arguments. Prints VIPL OK.
 */
#include "vipl_test.h"
#include <sys/resource.h>

#define MIB (1UL << 20)

int main(void)
{
	vt_nic n;
	vt_mem small;
	VIP_MEM_ATTRIBUTES ma;
	VIP_MEM_HANDLE mh;
	struct rlimit lim = { 8 * MIB, 8 * MIB };
	size_t i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	VT_PHASE("RLIMIT_FSIZE 8 MiB");
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	vt_open(&n, VT_DEVICE);

	VT_PHASE("1 MiB registers");
	vt_reg(&n, &small, MIB, VIP_TRUE, VIP_TRUE);
	vt_unreg(&n, &small);

	VT_PHASE("16 MiB past the limit");
	unsigned char *big = vt_alloc(16 * MIB);
	for (i = 0; i < 16 * MIB; i += 4096)
		big[i] = (unsigned char)(i / 4096 + 1);
	ma.Ptag = n.ptag;
	ma.EnableRdmaWrite = VIP_TRUE;
	ma.EnableRdmaRead = VIP_TRUE;
	CHECK_RET(VipRegisterMem(n.nic, big, (VIP_ULONG)(16 * MIB), &ma, &mh), VIP_ERROR_RESOURCE);
	for (i = 0; i < 16 * MIB; i += 4096)
		CHECK_MSG(big[i] == (unsigned char)(i / 4096 + 1), "byte %lu changed", (unsigned long)i);
	free(big);

	VT_PHASE("1 MiB registers after the refusal");
	vt_reg(&n, &small, MIB, VIP_TRUE, VIP_TRUE);
	vt_unreg(&n, &small);
	vt_close(&n);
	printf("VIPL OK\n");
	return 0;
}
