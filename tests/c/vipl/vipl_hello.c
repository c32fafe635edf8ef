/*
 * vipl_hello: the smallest VIPL program, built the way an M-VIA or cLAN
 * program is (`cc prog.c -lvipl` once Remora is installed under /usr/local;
 * the tests also build it with -I/-L of a private prefix and with pkg-config).
 * It includes nothing of the tests: <vipl.h> and libc only. VipOpenNic (which
 * starts the node's daemon), VipQueryNic, VipCloseNic.
 * Run with REMORA_NODE set; no arguments. Prints VIPL OK.
 */
#include <stdio.h>
#include <stdlib.h>
#include <vipl.h>

int main(void)
{
	VIP_NIC_HANDLE nic = NULL;
	VIP_NIC_ATTRIBUTES attr;
	const char *node = getenv("REMORA_NODE");
	unsigned long want = node != NULL ? strtoul(node, NULL, 10) : 4;
	unsigned long got;
	VIP_RETURN rc;

	rc = VipOpenNic("/dev/via0", &nic);
	if (rc != VIP_SUCCESS || nic == NULL) {
		printf("vipl_hello: VipOpenNic returned %d\n", (int)rc);
		return 1;
	}
	rc = VipQueryNic(nic, &attr);
	if (rc != VIP_SUCCESS || attr.NicAddressLen != 4 || attr.LocalNicAddress == NULL) {
		printf("vipl_hello: VipQueryNic returned %d (address of %u bytes)\n", (int)rc,
		    (unsigned)attr.NicAddressLen);
		return 1;
	}
	got = ((unsigned long)attr.LocalNicAddress[0] << 24) | ((unsigned long)attr.LocalNicAddress[1] << 16) |
	    ((unsigned long)attr.LocalNicAddress[2] << 8) | (unsigned long)attr.LocalNicAddress[3];
	if (got != want) {
		printf("vipl_hello: the NIC's address is node %lu, not %lu\n", got, want);
		return 1;
	}
	rc = VipCloseNic(nic);
	if (rc != VIP_SUCCESS) {
		printf("vipl_hello: VipCloseNic returned %d\n", (int)rc);
		return 1;
	}
	printf("vipl_hello: node %lu, NIC %s: VIPL OK\n", got, attr.Name);
	return 0;
}
