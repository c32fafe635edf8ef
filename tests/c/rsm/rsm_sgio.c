/*
 * rsm_sgio: putv/getv check each entry's segment range before touching its local memory.
 *
 * 1. An entry whose transfer_length leaves the segment (0x10000000, or 0x100000000000 —
 *    far more than the 64-byte local buffer or the machine's memory) is RSMERR_BAD_LENGTH
 *    with io_residual_count 1 for getv and putv: no allocation of that size, no read of
 *    the caller's memory beyond its buffer. The entry before it is done.
 * 2. Entries larger than the library's copy chunk move intact both ways.
 * Prints RSM OK.
 */
#include "rsm_test.h"
#include <stdint.h>
#include <string.h>

#define SEG (64 * 4096)
#define BIG 150001

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	rsmapi_controller_handle_t c;
	CK(rsm_get_controller("remora0", &c), RSM_SUCCESS);
	rsm_node_id_t me = local_node();

	unsigned char *mem = pages(SEG / 4096);
	memset(mem, 0, SEG);
	rsm_memseg_export_handle_t ex;
	rsm_memseg_import_handle_t im;
	rsm_memseg_id_t id = 0;
	CK(rsm_memseg_export_create(c, &ex, (caddr_t)mem, SEG, 0), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSM_SUCCESS);
	CK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &im), RSM_SUCCESS);

	char local[64];
	memcpy(local, "sgio", 4);
	size_t huge[2] = {0x10000000, (size_t)0x100000000000ull};
	for (int k = 0; k < 2; k++) {
		rsm_iovec_t iov[2] = {
		    {RSM_VA_TYPE, {.vaddr = local}, 0, 8, 4},
		    {RSM_VA_TYPE, {.vaddr = local}, 0, 0, huge[k]},
		};
		rsm_scat_gath_t sg = {me, 2, 0, 0, im, iov};
		CK(rsm_memseg_import_putv(&sg), RSMERR_BAD_LENGTH);
		EXPECT(sg.io_residual_count == 1, "putv of %#zx: residual %lu", huge[k], sg.io_residual_count);
		EXPECT(memcmp(mem + 8, "sgio", 4) == 0, "the first entry of putv was not done");
		memset(local, 0, 4);
		sg.io_residual_count = 0;
		CK(rsm_memseg_import_getv(&sg), RSMERR_BAD_LENGTH);
		EXPECT(sg.io_residual_count == 1, "getv of %#zx: residual %lu", huge[k], sg.io_residual_count);
		EXPECT(memcmp(local, "sgio", 4) == 0, "the first entry of getv was not done");
		/* The same entry alone, at an offset inside the segment. */
		iov[1].remote_offset = 4096;
		sg.iovec = &iov[1];
		sg.io_request_count = 1;
		CK(rsm_memseg_import_getv(&sg), RSMERR_BAD_LENGTH);
		CK(rsm_memseg_import_putv(&sg), RSMERR_BAD_LENGTH);
		EXPECT(sg.io_residual_count == 1, "residual %lu", sg.io_residual_count);
	}

	/* Large entries, at odd offsets, both ways. */
	unsigned char *src = pages(BIG / 4096 + 2), *dst = pages(BIG / 4096 + 2);
	for (size_t i = 0; i < BIG + 3; i++)
		src[i] = (unsigned char)(i * 13 + 5);
	rsm_localmemory_handle_t lh;
	CK(rsm_create_localmemory_handle(c, &lh, (caddr_t)dst, (BIG / 4096 + 2) * 4096), RSM_SUCCESS);
	rsm_iovec_t big[2] = {
	    {RSM_VA_TYPE, {.vaddr = (caddr_t)src}, 3, 1001, BIG},
	    {RSM_VA_TYPE, {.vaddr = (caddr_t)src}, 0, SEG - 7, 7},
	};
	rsm_scat_gath_t sg = {me, 2, 0, 0, im, big};
	CK(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
	EXPECT(memcmp(mem + 1001, src + 3, BIG) == 0, "putv of %d bytes did not land intact", BIG);
	EXPECT(memcmp(mem + SEG - 7, src, 7) == 0, "the last 7 bytes did not land");
	big[0].io_type = RSM_HANDLE_TYPE;
	big[0].local.handle = lh;
	big[0].local_offset = 1;
	big[1].io_type = RSM_HANDLE_TYPE;
	big[1].local.handle = lh;
	big[1].local_offset = BIG + 1;
	CK(rsm_memseg_import_getv(&sg), RSM_SUCCESS);
	EXPECT(memcmp(dst + 1, src + 3, BIG) == 0, "getv of %d bytes did not come intact", BIG);
	EXPECT(memcmp(dst + BIG + 1, src, 7) == 0, "the last 7 bytes did not come");
	CK(rsm_free_localmemory_handle(c, lh), RSM_SUCCESS);

	CK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}
