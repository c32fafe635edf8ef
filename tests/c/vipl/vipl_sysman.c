/*
 * vipl_sysman: VipQuerySystemManagementInfo(VIP_SMI_AUTODISCOVERY) as
 * docs/vipl.md describes it. The list names the nodes this NIC knows (this
 * node, then the other nodes of the cluster file in its order): the first
 * NumAdAddrs entries of ADAddrArray are filled, each a 4-byte host address
 * (the node id, big-endian: the NIC's own LocalNicAddress for the first) with
 * no discriminator, and NumAdAddrs becomes the number written; the entries
 * after are untouched. Another InfoType, a NULL SysManInfo, a NULL NIC, a NULL
 * array with NumAdAddrs > 0 or a NULL entry among those it would fill is
 * VIP_INVALID_PARAMETER, with nothing written.
 *   vipl_sysman [NODE...]   the node ids the list must hold, in order
 *                           (default: REMORA_NODE alone)
 * Run with REMORA_NODE set. Prints VIPL OK.
 */
#include "vipl_test.h"

#define SLOTS 6
#define SLOT_BYTES (sizeof(VIP_NET_ADDRESS) + 4 + 64)

static unsigned char space[SLOTS][SLOT_BYTES];

/* Every slot back to 0xEE, the array pointing at them. */
static void reset(VIP_NET_ADDRESS **arr)
{
	int i;
	memset(space, 0xEE, sizeof space);
	for (i = 0; i < SLOTS; i++)
		arr[i] = (VIP_NET_ADDRESS *)space[i];
}

/* Slot `i` still holds 0xEE in every byte. */
static int untouched(int i)
{
	size_t b;
	for (b = 0; b < SLOT_BYTES; b++)
		if (space[i][b] != 0xEE)
			return 0;
	return 1;
}

/* Slot `i` holds node `node`'s address with no discriminator. */
static void check_node(VIP_NET_ADDRESS **arr, int i, unsigned long node)
{
	VIP_NET_ADDRESS *a = arr[i];
	CHECK_EQ(a->HostAddressLen, 4);
	CHECK_EQ(a->DiscriminatorLen, 0);
	CHECK_EQ(a->HostAddress[0], (node >> 24) & 0xff);
	CHECK_EQ(a->HostAddress[1], (node >> 16) & 0xff);
	CHECK_EQ(a->HostAddress[2], (node >> 8) & 0xff);
	CHECK_EQ(a->HostAddress[3], node & 0xff);
}

int main(int argc, char **argv)
{
	vt_nic n;
	VIP_NET_ADDRESS *arr[SLOTS];
	VIP_AUTODISCOVERY_LIST l;
	unsigned long want[SLOTS];
	int nwant, i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc - 1 > SLOTS - 1) {
		printf("usage: vipl_sysman [NODE...] (at most %d)\n", SLOTS - 1);
		return 2;
	}
	nwant = argc > 1 ? argc - 1 : 1;
	for (i = 0; i < nwant; i++)
		want[i] = strtoul(argc > 1 ? argv[i + 1] : vt_node(), NULL, 10);
	vt_open(&n, VT_DEVICE);

	VT_PHASE("VIP_SMI_AUTODISCOVERY with room for more: the known nodes, in order");
	reset(arr);
	l.NumberOfHops = 1;
	l.ADAddrArray = arr;
	l.NumAdAddrs = SLOTS;
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, VIP_SMI_AUTODISCOVERY, &l), VIP_SUCCESS);
	CHECK_EQ(l.NumAdAddrs, (unsigned long)nwant);
	CHECK_PTR(l.ADAddrArray, arr);
	for (i = 0; i < nwant; i++)
		check_node(arr, i, want[i]);
	for (i = nwant; i < SLOTS; i++)
		CHECK_MSG(untouched(i), "slot %d after the list was written", i);
	/* The first is this NIC's own address. */
	CHECK_EQ(n.attr.NicAddressLen, 4);
	CHECK(memcmp(arr[0]->HostAddress, n.attr.LocalNicAddress, 4) == 0);

	VT_PHASE("room for fewer: the first ones");
	reset(arr);
	l.NumAdAddrs = (VIP_ULONG)(nwant > 1 ? nwant - 1 : 1);
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, VIP_SMI_AUTODISCOVERY, &l), VIP_SUCCESS);
	CHECK_EQ(l.NumAdAddrs, (unsigned long)(nwant > 1 ? nwant - 1 : 1));
	for (i = 0; i < (int)l.NumAdAddrs; i++)
		check_node(arr, i, want[i]);
	for (i = (int)l.NumAdAddrs; i < SLOTS; i++)
		CHECK(untouched(i));

	VT_PHASE("room for none: nothing written, a NULL array allowed");
	reset(arr);
	l.NumAdAddrs = 0;
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, VIP_SMI_AUTODISCOVERY, &l), VIP_SUCCESS);
	CHECK_EQ(l.NumAdAddrs, 0);
	l.ADAddrArray = NULL;
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, VIP_SMI_AUTODISCOVERY, &l), VIP_SUCCESS);
	CHECK_EQ(l.NumAdAddrs, 0);
	for (i = 0; i < SLOTS; i++)
		CHECK(untouched(i));

	VT_PHASE("bad arguments: VIP_INVALID_PARAMETER, nothing written");
	reset(arr);
	l.ADAddrArray = arr;
	l.NumAdAddrs = SLOTS;
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, 0, &l), VIP_INVALID_PARAMETER);
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, 2, &l), VIP_INVALID_PARAMETER);
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, VIP_SMI_AUTODISCOVERY, NULL), VIP_INVALID_PARAMETER);
	CHECK_RET(VipQuerySystemManagementInfo(NULL, VIP_SMI_AUTODISCOVERY, &l), VIP_INVALID_PARAMETER);
	CHECK_EQ(l.NumAdAddrs, SLOTS);
	l.ADAddrArray = NULL;
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, VIP_SMI_AUTODISCOVERY, &l), VIP_INVALID_PARAMETER);
	CHECK_EQ(l.NumAdAddrs, SLOTS);
	/* A NULL entry among those it would fill (the last of them). */
	l.ADAddrArray = arr;
	arr[nwant - 1] = NULL;
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, VIP_SMI_AUTODISCOVERY, &l), VIP_INVALID_PARAMETER);
	CHECK_EQ(l.NumAdAddrs, SLOTS);
	for (i = 0; i < SLOTS; i++)
		CHECK_MSG(untouched(i), "slot %d after a refused call", i);
	/* A NULL entry past them is never looked at. */
	reset(arr);
	arr[nwant] = NULL;
	CHECK_RET(VipQuerySystemManagementInfo(n.nic, VIP_SMI_AUTODISCOVERY, &l), VIP_SUCCESS);
	CHECK_EQ(l.NumAdAddrs, (unsigned long)nwant);
	check_node(arr, 0, want[0]);

	vt_close(&n);
	printf("vipl_sysman: VIPL OK (%d node(s) listed)\n", nwant);
	return 0;
}
