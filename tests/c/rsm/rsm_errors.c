/*
 * rsm_errors: the exact RSMERR_* codes of RSMAPI misuse, in one process that exports and
 * imports on its own node (the loopback case). The expected codes and their order are the
 * contract in notes/rsm_errors.md (illumos librsm behaviour).
 *
 * Environment: REMORA_NODE (default 4) is this node's id. The program points
 * REMORA_RSM_SEGMENTID_FILE at a temporary file of its own before any RSMAPI call.
 */
#define _GNU_SOURCE
#include "rsm_check.h"
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PG 4096
#define SZ (4 * PG)

static char segid_file[] = "/tmp/rsm_errors_segid_XXXXXX";

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	VERIFY(f != NULL, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0) {
	}
}

/* Handles that are NULL are refused before anything else. */
static void null_handles(rsmapi_controller_handle_t c)
{
	rsmapi_controller_attr_t attr;
	rsm_memseg_export_handle_t ex;
	rsm_memseg_import_handle_t im;
	rsm_memseg_id_t id = 0x400000;
	rsmapi_barrier_t bar;
	rsm_barrier_mode_t mode;
	struct pollfd pfd;
	uint8_t byte = 0;
	void *addr = NULL;
	void *buf = rsm_pages(PG);

	CHECK(rsm_get_controller("remora0", NULL), RSMERR_BAD_CTLR_HNDL);
	CHECK(rsm_get_controller_attr(NULL, &attr), RSMERR_BAD_CTLR_HNDL);
	CHECK(rsm_get_controller_attr(c, NULL), RSMERR_BAD_ADDR);
	CHECK(rsm_memseg_export_create(NULL, &ex, buf, PG, 0), RSMERR_BAD_CTLR_HNDL);
	CHECK(rsm_memseg_export_create(c, NULL, buf, PG, 0), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_export_destroy(NULL), RSMERR_BAD_SEG_HNDL);
	/* publish checks the id pointer before the handle */
	CHECK(rsm_memseg_export_publish(NULL, NULL, NULL, 0), RSMERR_BAD_SEGID);
	CHECK(rsm_memseg_export_publish(NULL, &id, NULL, 0), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_export_unpublish(NULL), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_export_republish(NULL, NULL, 0), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_export_rebind(NULL, buf, 0, PG), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_connect(NULL, 1, id, RSM_PERM_RDWR, &im), RSMERR_BAD_CTLR_HNDL);
	CHECK(rsm_memseg_import_disconnect(NULL), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_get8(NULL, 0, &byte, 1), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_put8(NULL, 0, &byte, 1), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_get(NULL, 0, buf, 1), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_put(NULL, 0, buf, 1), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_getv(NULL), RSMERR_BAD_SGIO);
	CHECK(rsm_memseg_import_putv(NULL), RSMERR_BAD_SGIO);
	CHECK(rsm_memseg_import_map(NULL, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, PG), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_unmap(NULL), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_init_barrier(NULL, RSM_BARRIER_NODE, &bar), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_open_barrier(NULL), RSMERR_BAD_BARRIER_PTR);
	CHECK(rsm_memseg_import_close_barrier(NULL), RSMERR_BAD_BARRIER_PTR);
	CHECK(rsm_memseg_import_order_barrier(NULL), RSMERR_BAD_BARRIER_PTR);
	CHECK(rsm_memseg_import_destroy_barrier(NULL), RSMERR_BAD_BARRIER_PTR);
	CHECK(rsm_memseg_import_set_mode(NULL, RSM_BARRIER_MODE_EXPLICIT), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_import_get_mode(NULL, &mode), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_intr_signal_post(NULL, 0), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_intr_signal_wait(NULL, 10), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_get_pollfd(NULL, &pfd), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_memseg_release_pollfd(NULL), RSMERR_BAD_SEG_HNDL);
	CHECK(rsm_get_interconnect_topology(NULL), RSMERR_BAD_TOPOLOGY_PTR);
	CHECK(rsm_free_localmemory_handle(NULL, NULL), RSMERR_BAD_CTLR_HNDL);
	CHECK(rsm_free_localmemory_handle(c, NULL), RSMERR_BAD_LOCALMEM_HNDL);
	free(buf);
}

static void topology(rsm_node_id_t *me)
{
	const char *env = getenv("REMORA_NODE");
	rsm_node_id_t want = env ? (rsm_node_id_t)strtoul(env, NULL, 0) : 4;
	rsm_topology_t *t = NULL;
	CHECK(rsm_get_interconnect_topology(&t), RSM_SUCCESS);
	VERIFY(t != NULL, "no topology returned");
	VERIFY(t->topology_hdr.local_nodeid == want, "local node %u, expected %u",
	    (unsigned)t->topology_hdr.local_nodeid, (unsigned)want);
	VERIFY(t->topology_hdr.local_cntlr_count >= 1, "%u controllers",
	    (unsigned)t->topology_hdr.local_cntlr_count);
	VERIFY(t->connections[0] != NULL, "no first controller");
	VERIFY(strcmp(t->connections[0]->hdr.cntlr_name, "remora0") == 0, "controller named \"%s\"",
	    t->connections[0]->hdr.cntlr_name);
	*me = t->topology_hdr.local_nodeid;
	rsm_free_interconnect_topology(t);
}

static void segmentid_range(void)
{
	rsm_memseg_id_t base = 0;
	uint32_t len = 0;
	write_file(segid_file, "# keyword appid baseid length\n"
	                       "reserve SUNWbar 0x700000 5\n"
	                       "reserve SUNWfoo 0x600000 100\n");
	CHECK(rsm_get_segmentid_range("SUNWfoo", &base, &len), RSM_SUCCESS);
	VERIFY(base == 0x600000 && len == 100, "SUNWfoo: base %#x length %u", (unsigned)base, (unsigned)len);
	CHECK(rsm_get_segmentid_range("sunwbar", &base, &len), RSM_SUCCESS);
	VERIFY(base == 0x700000 && len == 5, "sunwbar: base %#x length %u", (unsigned)base, (unsigned)len);
	CHECK(rsm_get_segmentid_range("nope", &base, &len), RSMERR_BAD_APPID);
	CHECK(rsm_get_segmentid_range(NULL, &base, &len), RSMERR_BAD_ADDR);
	CHECK(rsm_get_segmentid_range("SUNWfoo", NULL, &len), RSMERR_BAD_ADDR);
	CHECK(rsm_get_segmentid_range("SUNWfoo", &base, NULL), RSMERR_BAD_ADDR);
	/* a matching line whose keyword is not "reserve", and a line with missing fields */
	write_file(segid_file, "keep SUNWfoo 0x600000 100\n");
	CHECK(rsm_get_segmentid_range("SUNWfoo", &base, &len), RSMERR_BAD_CONF);
	write_file(segid_file, "reserve SUNWfoo\n");
	CHECK(rsm_get_segmentid_range("SUNWfoo", &base, &len), RSMERR_BAD_CONF);
	/* no file at all */
	unlink(segid_file);
	CHECK(rsm_get_segmentid_range("SUNWfoo", &base, &len), RSMERR_BAD_CONF);
}

int main(void)
{
	int fd = mkstemp(segid_file);
	VERIFY(fd >= 0, "mkstemp");
	close(fd);
	setenv("REMORA_RSM_SEGMENTID_FILE", segid_file, 1);

	/* Ids of our own, varied by pid so that runs sharing a node do not collide. */
	rsm_memseg_id_t base_id = 0x400000u + (((rsm_memseg_id_t)getpid() & 0x3fffu) << 4);
	rsm_memseg_id_t id1 = base_id, id_unused = base_id + 1, id_acl_other = base_id + 2;
	rsm_memseg_id_t id_acl_read = base_id + 3, id_main = base_id + 4, id_cut = base_id + 5;

	rsmapi_controller_handle_t c;
	CHECK(rsm_get_controller("nosuch0", &c), RSMERR_CTLR_NOT_PRESENT);
	CHECK(rsm_get_controller("remora0", &c), RSM_SUCCESS);
	rsm_node_id_t me;
	topology(&me);
	null_handles(c);
	segmentid_range();

	/* export_create argument checks, in illumos order */
	char *mem = rsm_pages(8 * PG);
	rsm_memseg_export_handle_t ex;
	CHECK(rsm_memseg_export_create(c, &ex, NULL, PG, 0), RSMERR_BAD_ADDR);
	CHECK(rsm_memseg_export_create(c, &ex, mem, 0, 0), RSMERR_BAD_LENGTH);
	CHECK(rsm_memseg_export_create(c, &ex, mem + 8, PG, 0), RSMERR_BAD_MEM_ALIGNMENT);
	CHECK(rsm_memseg_export_create(c, &ex, mem, PG + 100, 0), RSMERR_BAD_MEM_ALIGNMENT);

	/* publish: reserved ids, twice, an id in use, id 0 */
	char *bufa = rsm_pages(SZ), *bufb = rsm_pages(SZ);
	rsm_memseg_export_handle_t sa, sb;
	CHECK(rsm_memseg_export_create(c, &sa, bufa, SZ, 0), RSM_SUCCESS);
	CHECK(rsm_memseg_export_create(c, &sb, bufb, SZ, RSM_ALLOW_REBIND), RSM_SUCCESS);
	rsm_memseg_id_t id = 0x100;
	CHECK(rsm_memseg_export_publish(sa, &id, NULL, 0), RSMERR_RESERVED_SEGID);
	id = 0x80000001u;
	CHECK(rsm_memseg_export_publish(sa, &id, NULL, 0), RSMERR_RESERVED_SEGID);
	id = RSM_RSMLIB_ID_BASE;
	CHECK(rsm_memseg_export_publish(sa, &id, NULL, 0), RSMERR_RESERVED_SEGID);
	CHECK(rsm_memseg_export_publish(sa, &id, NULL, 1), RSMERR_BAD_ACL);
	CHECK(rsm_memseg_export_unpublish(sa), RSMERR_SEG_NOT_PUBLISHED);
	id = id1;
	CHECK(rsm_memseg_export_publish(sa, &id, NULL, 0), RSM_SUCCESS);
	VERIFY(id == id1, "explicit id came back as %#x", (unsigned)id);
	CHECK(rsm_memseg_export_publish(sa, &id, NULL, 0), RSMERR_SEG_ALREADY_PUBLISHED);
	id = id1;
	CHECK(rsm_memseg_export_publish(sb, &id, NULL, 0), RSMERR_SEGID_IN_USE);
	id = 0;
	CHECK(rsm_memseg_export_publish(sb, &id, NULL, 0), RSM_SUCCESS);
	VERIFY(id >= RSM_USER_APP_ID_BASE, "system-chosen id %#x is below 0x80000000", (unsigned)id);
	CHECK(rsm_memseg_export_unpublish(sb), RSM_SUCCESS);
	CHECK(rsm_memseg_export_unpublish(sb), RSMERR_SEG_NOT_PUBLISHED);
	CHECK(rsm_memseg_export_republish(sb, NULL, 0), RSMERR_SEG_NOT_PUBLISHED);
	CHECK(rsm_memseg_export_rebind(sa, bufb, 0, SZ), RSMERR_REBIND_NOT_ALLOWED);
	CHECK(rsm_memseg_export_rebind(sb, NULL, 0, SZ), RSMERR_BAD_ADDR);

	/* connect: nobody published, access list of another node, read-only list */
	rsm_memseg_import_handle_t im;
	CHECK(rsm_memseg_import_connect(c, me, id_unused, RSM_PERM_RDWR, &im), RSMERR_SEG_NOT_PUBLISHED);
	char *bufc = rsm_pages(SZ), *bufd = rsm_pages(SZ);
	rsm_memseg_export_handle_t sc, sd;
	rsmapi_access_entry_t other = { me == 1 ? 2 : 1, RSM_PERM_RDWR };
	rsmapi_access_entry_t ro = { me, RSM_PERM_READ };
	CHECK(rsm_memseg_export_create(c, &sc, bufc, SZ, 0), RSM_SUCCESS);
	CHECK(rsm_memseg_export_create(c, &sd, bufd, SZ, 0), RSM_SUCCESS);
	id = id_acl_other;
	CHECK(rsm_memseg_export_publish(sc, &id, &other, 1), RSM_SUCCESS);
	id = id_acl_read;
	CHECK(rsm_memseg_export_publish(sd, &id, &ro, 1), RSM_SUCCESS);
	CHECK(rsm_memseg_import_connect(c, me, id_acl_other, RSM_PERM_READ, &im), RSMERR_SEG_NOT_PUBLISHED_TO_NODE);
	CHECK(rsm_memseg_import_connect(c, me, id_acl_read, RSM_PERM_WRITE, &im), RSMERR_PERM_DENIED);
	rsm_memseg_import_handle_t imro;
	CHECK(rsm_memseg_import_connect(c, me, id_acl_read, RSM_PERM_READ, &imro), RSM_SUCCESS);
	uint8_t b8[16];
	memset(b8, 0x77, sizeof b8);
	/* the permission check comes before the barrier check */
	CHECK(rsm_memseg_import_put8(imro, 0, b8, 4), RSMERR_PERM_DENIED);
	rsmapi_barrier_t barro;
	CHECK(rsm_memseg_import_init_barrier(imro, RSM_BARRIER_SEGMENT, &barro), RSM_SUCCESS);
	CHECK(rsm_memseg_import_put(imro, 0, b8, 4), RSMERR_PERM_DENIED);
	bufd[5] = 0x42;
	CHECK(rsm_memseg_import_get8(imro, 5, b8, 1), RSM_SUCCESS);
	VERIFY(b8[0] == 0x42, "read-only import read %#x", b8[0]);
	CHECK(rsm_memseg_import_destroy_barrier(&barro), RSM_SUCCESS);
	CHECK(rsm_memseg_import_disconnect(imro), RSM_SUCCESS);

	/* the main segment: permissions, alignment, ranges, maps, barriers */
	char *bufm = rsm_pages(SZ);
	memset(bufm, 0, SZ);
	rsm_memseg_export_handle_t sm;
	CHECK(rsm_memseg_export_create(c, &sm, bufm, SZ, 0), RSM_SUCCESS);
	id = id_main;
	CHECK(rsm_memseg_export_publish(sm, &id, NULL, 0), RSM_SUCCESS);
	CHECK(rsm_memseg_import_connect(c, me, id_main, 0700, &im), RSMERR_PERM_DENIED);
	CHECK(rsm_memseg_import_connect(c, me, id_main, RSM_PERM_RDWR, &im), RSM_SUCCESS);

	uint16_t h16[4];
	uint32_t w32[4];
	uint64_t q64[4] = { 1, 2, 3, 4 };
	uint8_t big[64];
	/* implicit mode without a barrier */
	CHECK(rsm_memseg_import_get8(im, 0, b8, 1), RSMERR_BARRIER_UNINITIALIZED);
	CHECK(rsm_memseg_import_put64(im, 0, q64, 1), RSMERR_BARRIER_UNINITIALIZED);
	rsmapi_barrier_t bar;
	memset(&bar, 0, sizeof bar);
	CHECK(rsm_memseg_import_open_barrier(&bar), RSMERR_BARRIER_UNINITIALIZED);
	CHECK(rsm_memseg_import_close_barrier(&bar), RSMERR_BARRIER_UNINITIALIZED);
	CHECK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, NULL), RSMERR_BAD_BARRIER_PTR);
	CHECK(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, &bar), RSM_SUCCESS);
	CHECK(rsm_memseg_import_close_barrier(&bar), RSMERR_BARRIER_NOT_OPENED);
	CHECK(rsm_memseg_import_order_barrier(&bar), RSMERR_BARRIER_NOT_OPENED);
	CHECK(rsm_memseg_import_set_mode(im, (rsm_barrier_mode_t)7), RSMERR_BAD_MODE);

	/* alignment: data pointer and offset, both BAD_MEM_ALIGNMENT */
	CHECK(rsm_memseg_import_get8(im, 0, NULL, 1), RSMERR_BAD_ADDR);
	CHECK(rsm_memseg_import_get16(im, 1, h16, 1), RSMERR_BAD_MEM_ALIGNMENT);
	CHECK(rsm_memseg_import_get32(im, 2, w32, 1), RSMERR_BAD_MEM_ALIGNMENT);
	CHECK(rsm_memseg_import_put64(im, 4, q64, 1), RSMERR_BAD_MEM_ALIGNMENT);
	CHECK(rsm_memseg_import_get32(im, 0, (uint32_t *)(void *)(big + 1), 1), RSMERR_BAD_MEM_ALIGNMENT);
	CHECK(rsm_memseg_import_put64(im, 8, q64, 1), RSM_SUCCESS);
	VERIFY(memcmp(bufm + 8, &q64[0], 8) == 0, "put64 at 8 did not land");
	/* ranges while not mapped: BAD_LENGTH */
	CHECK(rsm_memseg_import_get(im, SZ - 8, big, 16), RSMERR_BAD_LENGTH);
	CHECK(rsm_memseg_import_get64(im, SZ - 16, q64, 4), RSMERR_BAD_LENGTH);
	CHECK(rsm_memseg_import_put8(im, SZ, b8, 1), RSMERR_BAD_LENGTH);
	CHECK(rsm_memseg_import_get(im, SZ - 16, big, 16), RSM_SUCCESS);
	CHECK(rsm_memseg_import_get8(im, 0, b8, 0), RSM_SUCCESS);

	/* map checks, in illumos order */
	void *addr = NULL;
	CHECK(rsm_memseg_import_map(im, NULL, RSM_MAP_NONE, RSM_PERM_RDWR, 0, SZ), RSMERR_BAD_ADDR);
	CHECK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, 0700, 0, SZ), RSMERR_BAD_PERMS);
	CHECK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, 0), RSMERR_BAD_LENGTH);
	CHECK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, PG, SZ), RSMERR_BAD_LENGTH);
	CHECK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 100, PG), RSMERR_BAD_MEM_ALIGNMENT);
	addr = (void *)(bufm + 12);
	CHECK(rsm_memseg_import_map(im, &addr, RSM_MAP_FIXED, RSM_PERM_RDWR, 0, PG), RSMERR_BAD_MEM_ALIGNMENT);
	CHECK(rsm_memseg_import_unmap(im), RSMERR_SEG_NOT_MAPPED);
	addr = NULL;
	CHECK(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, PG, PG), RSM_SUCCESS);
	void *addr2 = NULL;
	CHECK(rsm_memseg_import_map(im, &addr2, RSM_MAP_NONE, RSM_PERM_RDWR, 0, SZ), RSMERR_SEG_ALREADY_MAPPED);
	/* while mapped, accesses must stay inside the map: BAD_OFFSET */
	CHECK(rsm_memseg_import_get8(im, 0, b8, 1), RSMERR_BAD_OFFSET);
	CHECK(rsm_memseg_import_get8(im, 2 * PG - 1, b8, 2), RSMERR_BAD_OFFSET);
	bufm[PG + 3] = 0x3D;
	CHECK(rsm_memseg_import_get8(im, PG + 3, b8, 1), RSM_SUCCESS);
	VERIFY(b8[0] == 0x3D && ((volatile char *)addr)[3] == 0x3D, "the partial map or get missed 0x3D");
	CHECK(rsm_memseg_import_disconnect(im), RSMERR_SEG_STILL_MAPPED);
	CHECK(rsm_memseg_import_unmap(im), RSM_SUCCESS);
	CHECK(rsm_memseg_import_unmap(im), RSMERR_SEG_NOT_MAPPED);

	/* scatter/gather and local-memory handles */
	rsm_iovec_t iov[RSM_MAX_SGIOREQS + 1];
	memset(iov, 0, sizeof iov);
	for (int i = 0; i <= RSM_MAX_SGIOREQS; i++) {
		iov[i].io_type = RSM_VA_TYPE;
		iov[i].local.vaddr = (caddr_t)big;
		iov[i].remote_offset = 0;
		iov[i].transfer_length = 4;
	}
	rsm_scat_gath_t sg;
	memset(&sg, 0, sizeof sg);
	sg.remote_handle = im;
	sg.iovec = iov;
	sg.io_request_count = 0;
	CHECK(rsm_memseg_import_getv(&sg), RSMERR_BAD_SGIO);
	sg.io_request_count = RSM_MAX_SGIOREQS + 1;
	CHECK(rsm_memseg_import_putv(&sg), RSMERR_BAD_SGIO);
	sg.io_request_count = RSM_MAX_SGIOREQS;
	CHECK(rsm_memseg_import_getv(&sg), RSM_SUCCESS);
	VERIFY(sg.io_residual_count == 0, "residual %lu", (unsigned long)sg.io_residual_count);
	sg.remote_handle = NULL;
	CHECK(rsm_memseg_import_getv(&sg), RSMERR_BAD_SEG_HNDL);
	rsm_localmemory_handle_t lh;
	CHECK(rsm_create_localmemory_handle(c, &lh, (caddr_t)(mem + 8), PG), RSMERR_BAD_ADDR);
	CHECK(rsm_create_localmemory_handle(NULL, &lh, (caddr_t)mem, PG), RSMERR_BAD_CTLR_HNDL);
	CHECK(rsm_create_localmemory_handle(c, NULL, (caddr_t)mem, PG), RSMERR_BAD_LOCALMEM_HNDL);
	CHECK(rsm_create_localmemory_handle(c, &lh, (caddr_t)mem, 0), RSMERR_BAD_LENGTH);

	/* signals: timeout, poll descriptor, poll woken by an importer's post */
	CHECK(rsm_intr_signal_wait(sm, 50), RSMERR_TIMEOUT);
	CHECK(rsm_intr_signal_wait(im, 50), RSMERR_TIMEOUT);
	struct pollfd pfd;
	CHECK(rsm_memseg_get_pollfd(sm, &pfd), RSM_SUCCESS);
	VERIFY(pfd.fd >= 0, "pollfd %d", pfd.fd);
	CHECK(rsm_memseg_export_destroy(sm), RSMERR_POLLFD_IN_USE);
	pfd.revents = 0;
	int n = poll(&pfd, 1, 0);
	VERIFY(n == 0, "poll reports %d before any post (revents %#x)", n, pfd.revents);
	CHECK(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
	pfd.revents = 0;
	do {
		n = poll(&pfd, 1, 5000);
	} while (n < 0);
	/* Remora's descriptor is an eventfd: plain poll() reports POLLIN (the pollfd asks for
	 * POLLIN | POLLRDNORM; rsm_intr_signal_wait_pollfd reports POLLRDNORM). */
	VERIFY(n == 1 && (pfd.revents & (POLLRDNORM | POLLIN)), "poll after the post: %d, revents %#x", n, pfd.revents);
	CHECK(rsm_intr_signal_wait(sm, 1000), RSM_SUCCESS);
	CHECK(rsm_intr_signal_wait(sm, 50), RSMERR_TIMEOUT);

	/* an unpublish cuts existing connections */
	char *bufx = rsm_pages(SZ);
	memset(bufx, 0x19, SZ);
	rsm_memseg_export_handle_t sx;
	CHECK(rsm_memseg_export_create(c, &sx, bufx, SZ, 0), RSM_SUCCESS);
	id = id_cut;
	CHECK(rsm_memseg_export_publish(sx, &id, NULL, 0), RSM_SUCCESS);
	rsm_memseg_import_handle_t imp, ime;
	rsmapi_barrier_t bimp, bime;
	CHECK(rsm_memseg_import_connect(c, me, id_cut, RSM_PERM_RDWR, &imp), RSM_SUCCESS);
	CHECK(rsm_memseg_import_connect(c, me, id_cut, RSM_PERM_RDWR, &ime), RSM_SUCCESS);
	CHECK(rsm_memseg_import_init_barrier(imp, RSM_BARRIER_NODE, &bimp), RSM_SUCCESS);
	CHECK(rsm_memseg_import_init_barrier(ime, RSM_BARRIER_NODE, &bime), RSM_SUCCESS);
	CHECK(rsm_memseg_import_set_mode(ime, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
	CHECK(rsm_memseg_import_get8(imp, 7, b8, 1), RSM_SUCCESS);
	VERIFY(b8[0] == 0x19, "read %#x before the unpublish", b8[0]);
	CHECK(rsm_memseg_import_open_barrier(&bime), RSM_SUCCESS);
	CHECK(rsm_memseg_export_unpublish(sx), RSM_SUCCESS);
	int rc = RSM_SUCCESS;
	for (int i = 0; i < 300 && rc == RSM_SUCCESS; i++) {
		rc = rsm_memseg_import_get8(imp, 7, b8, 1);
		if (rc == RSM_SUCCESS)
			nap_ms(10);
	}
	CHECK(rc, RSMERR_CONN_ABORTED);
	CHECK(rsm_memseg_import_put8(imp, 7, b8, 1), RSMERR_CONN_ABORTED);
	CHECK(rsm_memseg_import_close_barrier(&bime), RSMERR_CONN_ABORTED);
	/* a cut connection can still be torn down */
	CHECK(rsm_memseg_import_destroy_barrier(&bimp), RSM_SUCCESS);
	CHECK(rsm_memseg_import_destroy_barrier(&bime), RSM_SUCCESS);
	CHECK(rsm_memseg_import_disconnect(imp), RSM_SUCCESS);
	CHECK(rsm_memseg_import_disconnect(ime), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(sx), RSM_SUCCESS);

	/* tear everything down */
	CHECK(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
	CHECK(rsm_memseg_import_open_barrier(&bar), RSMERR_BARRIER_UNINITIALIZED);
	CHECK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CHECK(rsm_memseg_release_pollfd(sm), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(sm), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(sd), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(sc), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(sb), RSM_SUCCESS);
	CHECK(rsm_memseg_export_destroy(sa), RSM_SUCCESS);
	CHECK(rsm_release_controller(c), RSM_SUCCESS);
	free(bufx);
	free(bufm);
	free(bufc);
	free(bufd);
	free(bufa);
	free(bufb);
	free(mem);
	printf("RSM OK\n");
	return 0;
}
