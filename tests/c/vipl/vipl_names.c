/*
 * The name service's round trips.  Each argument triple NAME NODE BACK:
 * VipNSGetHostByName(NAME) gives node NODE's address (4 bytes, big-endian),
 * VipNSGetHostByAddr of it gives the name BACK (NameLen its length with the
 * NUL), and VipNSGetHostByName(BACK) the same address again.  A buffer one
 * byte too short for BACK is VIP_ERROR_RESOURCE.
 * Usage: vipl_names NAME NODE BACK [NAME NODE BACK ...]   (REMORA_NODE set)
 */
#include "vipl_test.h"

static vt_nic N;

static void round_trip(const char *name, unsigned long node, const char *back)
{
	VIP_NET_ADDRESS *a = vt_addr_space(&N), *b = vt_addr_space(&N);
	char got[256];
	VIP_ULONG len = sizeof got;
	unsigned char want[4];

	VT_PHASE(name);
	want[0] = (unsigned char)(node >> 24);
	want[1] = (unsigned char)(node >> 16);
	want[2] = (unsigned char)(node >> 8);
	want[3] = (unsigned char)node;
	CHECK_RET(VipNSGetHostByName(N.nic, (VIP_CHAR *)name, a, 0), VIP_SUCCESS);
	CHECK_EQ(a->HostAddressLen, 4);
	CHECK_MSG(memcmp(a->HostAddress, want, 4) == 0, "\"%s\" is %u.%u.%u.%u, not node %lu", name,
	    a->HostAddress[0], a->HostAddress[1], a->HostAddress[2], a->HostAddress[3], node);
	memset(got, 'x', sizeof got);
	CHECK_RET(VipNSGetHostByAddr(N.nic, a, got, &len), VIP_SUCCESS);
	CHECK_MSG(strcmp(got, back) == 0, "node %lu is named \"%.200s\", not \"%s\"", node, got, back);
	CHECK_EQ(len, strlen(back) + 1);
	CHECK_RET(VipNSGetHostByName(N.nic, got, b, 0), VIP_SUCCESS);
	CHECK_EQ(b->HostAddressLen, 4);
	CHECK(memcmp(b->HostAddress, want, 4) == 0);
	len = strlen(back);
	CHECK_RET(VipNSGetHostByAddr(N.nic, a, got, &len), VIP_ERROR_RESOURCE);
	free(a);
	free(b);
}

int main(int argc, char **argv)
{
	int i;

	if (argc < 4 || (argc - 1) % 3 != 0) {
		printf("usage: vipl_names NAME NODE BACK [NAME NODE BACK ...]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	vt_open(&N, VT_DEVICE);
	for (i = 1; i + 2 < argc; i += 3)
		round_trip(argv[i], strtoul(argv[i + 1], NULL, 10), argv[i + 2]);
	vt_close(&N);
	printf("vipl_names: VIPL OK\n");
	return 0;
}
