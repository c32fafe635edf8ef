/*
 * Shared helpers of Remora's VIPL C tests: opening a NIC, building network
 * addresses, registered memory, descriptors, byte patterns, waiting for VI
 * states, a flag with a timed wait, and an in-process loopback connection
 * made with a server thread.
 *
 * Conventions followed by every helper:
 *   - descriptors are 64-byte aligned and live in registered memory; the
 *     memory handle passed to VipPostSend/VipPostRecv is the descriptor
 *     array's;
 *   - a VIP_NET_ADDRESS is allocated as sizeof(VIP_NET_ADDRESS) +
 *     NicAddressLen + discriminator length, its host part filled by
 *     VipNSGetHostByName and the discriminator copied right after the
 *     HostAddressLen bytes of HostAddress;
 *   - every wait has a finite timeout (VT_WAIT ms).
 */
#ifndef REMORA_VIPL_TEST_H
#define REMORA_VIPL_TEST_H

#include "vipl_check.h"
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <errno.h>

/* Timeout of every wait that is expected to succeed, in ms. */
#define VT_WAIT 10000

/* The device name used by the multi-process programs. */
#define VT_DEVICE "/dev/via0"

/* ------------------------------------------------------------------------
 * Time
 * ---------------------------------------------------------------------- */

static inline void vt_sleep_ms(unsigned ms)
{
	struct timespec ts;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static inline unsigned long long vt_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000ull + (unsigned long long)ts.tv_nsec / 1000000ull;
}

/* The host name of this node: the decimal node id in REMORA_NODE. */
static inline const char *vt_node(void)
{
	const char *n = getenv("REMORA_NODE");
	return (n != NULL && n[0] != '\0') ? n : "localhost";
}

/* ------------------------------------------------------------------------
 * NIC
 * ---------------------------------------------------------------------- */

typedef struct {
	VIP_NIC_HANDLE nic;
	VIP_NIC_ATTRIBUTES attr;
	VIP_PROTECTION_HANDLE ptag;
} vt_nic;

/* VipOpenNic, VipNSInit, VipQueryNic and VipCreatePtag, in the usual order. */
static inline void vt_open(vt_nic *n, const char *device)
{
	memset(n, 0, sizeof *n);
	CHECK_RET(VipOpenNic(device, &n->nic), VIP_SUCCESS);
	CHECK(n->nic != NULL);
	CHECK_RET(VipNSInit(n->nic, NULL), VIP_SUCCESS);
	CHECK_RET(VipQueryNic(n->nic, &n->attr), VIP_SUCCESS);
	CHECK(n->attr.NicAddressLen > 0);
	CHECK_RET(VipCreatePtag(n->nic, &n->ptag), VIP_SUCCESS);
}

/* VipDestroyPtag, VipNSShutdown and VipCloseNic. */
static inline void vt_close(vt_nic *n)
{
	CHECK_RET(VipDestroyPtag(n->nic, n->ptag), VIP_SUCCESS);
	CHECK_RET(VipNSShutdown(n->nic), VIP_SUCCESS);
	CHECK_RET(VipCloseNic(n->nic), VIP_SUCCESS);
}

/* ------------------------------------------------------------------------
 * Network addresses
 * ---------------------------------------------------------------------- */

/* An empty address with room for a host address and the longest discriminator. */
static inline VIP_NET_ADDRESS *vt_addr_space(const vt_nic *n)
{
	size_t size = sizeof(VIP_NET_ADDRESS) + n->attr.NicAddressLen + n->attr.MaxDiscriminatorLen + 64;
	VIP_NET_ADDRESS *a = (VIP_NET_ADDRESS *)calloc(1, size);
	CHECK(a != NULL);
	a->HostAddressLen = n->attr.NicAddressLen;
	a->DiscriminatorLen = 0;
	return a;
}

/* The discriminator bytes of an address. */
static inline VIP_UINT8 *vt_disc(VIP_NET_ADDRESS *a)
{
	return a->HostAddress + a->HostAddressLen;
}

/* The address of host (a name for VipNSGetHostByName) with discriminator disc. */
static inline VIP_NET_ADDRESS *vt_addr(const vt_nic *n, const char *host, const char *disc)
{
	char name[256];
	size_t dlen = strlen(disc);
	VIP_NET_ADDRESS *a = (VIP_NET_ADDRESS *)calloc(1, sizeof(VIP_NET_ADDRESS) + n->attr.NicAddressLen + dlen);
	CHECK(a != NULL);
	CHECK_MSG(dlen <= n->attr.MaxDiscriminatorLen, "discriminator \"%s\" is longer than %u", disc,
	    (unsigned)n->attr.MaxDiscriminatorLen);
	snprintf(name, sizeof name, "%s", host);
	a->HostAddressLen = n->attr.NicAddressLen;
	a->DiscriminatorLen = 0;
	CHECK_RET(VipNSGetHostByName(n->nic, name, a, 0), VIP_SUCCESS);
	CHECK_MSG(a->HostAddressLen == n->attr.NicAddressLen, "host address of \"%s\" has %u bytes, NIC says %u",
	    host, (unsigned)a->HostAddressLen, (unsigned)n->attr.NicAddressLen);
	a->DiscriminatorLen = (VIP_UINT16)dlen;
	memcpy(vt_disc(a), disc, dlen);
	return a;
}

/* Whether address a has the discriminator disc. */
static inline int vt_disc_is(VIP_NET_ADDRESS *a, const char *disc)
{
	size_t dlen = strlen(disc);
	return a->DiscriminatorLen == dlen && memcmp(vt_disc(a), disc, dlen) == 0;
}

/* ------------------------------------------------------------------------
 * Registered memory and descriptors
 * ---------------------------------------------------------------------- */

/* len bytes of zeroed, page-aligned heap memory. */
static inline unsigned char *vt_alloc(size_t len)
{
	void *p = NULL;
	CHECK_MSG(posix_memalign(&p, 4096, len) == 0 && p != NULL, "posix_memalign(%lu)", (unsigned long)len);
	memset(p, 0, len);
	return (unsigned char *)p;
}

typedef struct {
	unsigned char *p;
	size_t len;
	VIP_MEM_HANDLE mh;
} vt_mem;

/* Allocates and registers len bytes under the NIC's ptag. */
static inline void vt_reg(vt_nic *n, vt_mem *m, size_t len, VIP_BOOLEAN rdma_write, VIP_BOOLEAN rdma_read)
{
	VIP_MEM_ATTRIBUTES ma;
	m->p = vt_alloc(len);
	m->len = len;
	ma.Ptag = n->ptag;
	ma.EnableRdmaWrite = rdma_write;
	ma.EnableRdmaRead = rdma_read;
	CHECK_RET(VipRegisterMem(n->nic, m->p, (VIP_ULONG)len, &ma, &m->mh), VIP_SUCCESS);
}

static inline void vt_unreg(vt_nic *n, vt_mem *m)
{
	CHECK_RET(VipDeregisterMem(n->nic, m->p, m->mh), VIP_SUCCESS);
	free(m->p);
	m->p = NULL;
}

typedef struct {
	VIP_DESCRIPTOR *d;
	int count;
	VIP_MEM_HANDLE mh;
} vt_descs;

/* count 64-byte aligned descriptors in one registered region. */
static inline void vt_descs_new(vt_nic *n, vt_descs *ds, int count)
{
	VIP_MEM_ATTRIBUTES ma;
	void *p = NULL;
	size_t len = (size_t)count * sizeof(VIP_DESCRIPTOR);
	CHECK(posix_memalign(&p, VIP_DESCRIPTOR_ALIGNMENT, len) == 0 && p != NULL);
	memset(p, 0, len);
	ds->d = (VIP_DESCRIPTOR *)p;
	ds->count = count;
	ma.Ptag = n->ptag;
	ma.EnableRdmaWrite = VIP_FALSE;
	ma.EnableRdmaRead = VIP_FALSE;
	CHECK_RET(VipRegisterMem(n->nic, p, (VIP_ULONG)len, &ma, &ds->mh), VIP_SUCCESS);
}

static inline void vt_descs_free(vt_nic *n, vt_descs *ds)
{
	CHECK_RET(VipDeregisterMem(n->nic, ds->d, ds->mh), VIP_SUCCESS);
	free(ds->d);
	ds->d = NULL;
}

/* A 64-bit address field from a pointer. */
static inline VIP_UINT64 vt_bits(const void *p)
{
	return (VIP_UINT64)(uintptr_t)p;
}

/*
 * Fills d as a send or receive: control bits, then one or two local data
 * segments of the region mh (p1 NULL for one).  CS.Length is the total.
 */
static inline VIP_DESCRIPTOR *vt_fill(VIP_DESCRIPTOR *d, VIP_UINT16 control, VIP_MEM_HANDLE mh,
    void *p0, size_t l0, void *p1, size_t l1)
{
	memset(d, 0, sizeof *d);
	d->CS.Control = control;
	d->CS.SegCount = p1 != NULL ? 2 : 1;
	d->CS.Length = (VIP_UINT32)(l0 + (p1 != NULL ? l1 : 0));
	d->CS.Status = 0;
	d->DS[0].Local.Data.AddressBits = vt_bits(p0);
	d->DS[0].Local.Handle = mh;
	d->DS[0].Local.Length = (VIP_UINT32)l0;
	if (p1 != NULL) {
		d->DS[1].Local.Data.AddressBits = vt_bits(p1);
		d->DS[1].Local.Handle = mh;
		d->DS[1].Local.Length = (VIP_UINT32)l1;
	}
	return d;
}

/*
 * Fills d as an RDMA write or read (control holds the op and maybe
 * VIP_CONTROL_IMMEDIATE): DS[0] the remote address segment, DS[1] the local
 * buffer of len bytes in region mh.
 */
static inline VIP_DESCRIPTOR *vt_fill_rdma(VIP_DESCRIPTOR *d, VIP_UINT16 control, VIP_UINT64 raddr,
    VIP_MEM_HANDLE rmh, void *p, VIP_MEM_HANDLE mh, size_t len)
{
	memset(d, 0, sizeof *d);
	d->CS.Control = control;
	d->CS.SegCount = 2;
	d->CS.Length = (VIP_UINT32)len;
	d->CS.Status = 0;
	d->DS[0].Remote.Data.AddressBits = raddr;
	d->DS[0].Remote.Handle = rmh;
	d->DS[0].Remote.Reserved = 0;
	d->DS[1].Local.Data.AddressBits = vt_bits(p);
	d->DS[1].Local.Handle = mh;
	d->DS[1].Local.Length = (VIP_UINT32)len;
	return d;
}

/* Checks that a completed descriptor (evaluated once) is done, without error bits, with operation op. */
#define CHECK_DONE_OK(d, op)                                                            \
	do {                                                                                \
		const VIP_DESCRIPTOR *dd_ = (d);                                                \
		CHECK_BITS(dd_->CS.Status, VIP_STATUS_DONE);                                    \
		CHECK_EQ(dd_->CS.Status & VIP_STATUS_ERROR_MASK, 0);                            \
		CHECK_EQ(dd_->CS.Status & VIP_STATUS_OP_MASK, (op));                            \
	} while (0)

/* ------------------------------------------------------------------------
 * Byte patterns
 * ---------------------------------------------------------------------- */

/* Byte i of the message with the given seed. */
static inline unsigned char vt_pat(unsigned seed, size_t i)
{
	return (unsigned char)((i * 131u + (i >> 9) + seed * 29u + 7u) & 0xffu);
}

static inline void vt_pat_fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;
	for (i = 0; i < n; i++)
		p[i] = vt_pat(seed, i);
}

/* The first i where p[i] != vt_pat(seed, start + i) + add, or -1. */
static inline long vt_pat_diff(const unsigned char *p, size_t n, unsigned seed, size_t start, unsigned add)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (p[i] != (unsigned char)(vt_pat(seed, start + i) + add))
			return (long)i;
	return -1;
}

/* Checks that n bytes at p are pattern seed from byte start on, each plus add. */
#define CHECK_PAT(p, n, seed, start, add)                                                      \
	do {                                                                                       \
		const unsigned char *pp_ = (const unsigned char *)(p);                                 \
		long at_ = vt_pat_diff(pp_, (n), (seed), (start), (add));                              \
		if (at_ >= 0) {                                                                        \
			printf("FAIL %s:%d: CHECK_PAT(%s, %s, seed %s): byte %ld is 0x%02x, expected "     \
			       "0x%02x [phase %s]\n",                                                      \
			    __FILE__, __LINE__, #p, #n, #seed, at_, pp_[at_],                              \
			    (unsigned char)(vt_pat((seed), (size_t)(start) + (size_t)at_) + (add)),        \
			    vt_phase_);                                                                    \
			vt_fail_end_();                                                                    \
		}                                                                                      \
	} while (0)

/* Checks that n bytes at p all equal the byte b. */
#define CHECK_FILL(p, n, b)                                                                    \
	do {                                                                                       \
		const unsigned char *pp_ = (const unsigned char *)(p);                                 \
		size_t i_;                                                                             \
		for (i_ = 0; i_ < (size_t)(n); i_++)                                                   \
			if (pp_[i_] != (unsigned char)(b)) {                                               \
				printf("FAIL %s:%d: CHECK_FILL(%s, %s, %s): byte %lu is 0x%02x [phase %s]\n",  \
				    __FILE__, __LINE__, #p, #n, #b, (unsigned long)i_, pp_[i_], vt_phase_);    \
				vt_fail_end_();                                                                \
			}                                                                                  \
	} while (0)

/* ------------------------------------------------------------------------
 * VI state
 * ---------------------------------------------------------------------- */

static inline VIP_VI_STATE vt_state(VIP_VI_HANDLE vi)
{
	VIP_VI_STATE st;
	VIP_VI_ATTRIBUTES va;
	VIP_BOOLEAN se, re;
	CHECK_RET(VipQueryVi(vi, &st, &va, &se, &re), VIP_SUCCESS);
	return st;
}

/* Polls the VI until its state differs from st (at most ms); returns the last state seen. */
static inline VIP_VI_STATE vt_wait_state_not(VIP_VI_HANDLE vi, VIP_VI_STATE st, unsigned ms)
{
	unsigned long long end = vt_now_ms() + ms;
	VIP_VI_STATE now = vt_state(vi);
	while (now == st && vt_now_ms() < end) {
		vt_sleep_ms(5);
		now = vt_state(vi);
	}
	return now;
}

/* Polls the VI until it is in state st (at most ms). */
#define CHECK_STATE_WITHIN(vi, st, ms)                                                  \
	do {                                                                                \
		unsigned long long end_ = vt_now_ms() + (ms);                                   \
		VIP_VI_STATE now_ = vt_state(vi);                                               \
		while (now_ != (st) && vt_now_ms() < end_) {                                    \
			vt_sleep_ms(5);                                                             \
			now_ = vt_state(vi);                                                        \
		}                                                                               \
		CHECK_EQ(now_, (st));                                                           \
	} while (0)

/* Removes every completed receive, each of which must be flushed (the whole status word); returns how many. */
static inline int vt_drain_flushed(VIP_VI_HANDLE vi)
{
	VIP_DESCRIPTOR *d = NULL;
	int n = 0;
	VIP_RETURN rc;
	while ((rc = VipRecvDone(vi, &d)) == VIP_SUCCESS) {
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_DESC_FLUSHED_ERROR);
		n++;
	}
	CHECK_RET(rc, VIP_NOT_DONE);
	return n;
}

/*
 * The passive side of a disconnect: the peer disconnected, so within VT_WAIT
 * the VI leaves VIP_STATE_CONNECTED; from VIP_STATE_ERROR it is disconnected
 * (VIP_SUCCESS).  Flushed receives are removed.  Ends in VIP_STATE_IDLE.
 */
static inline void vt_passive_teardown(VIP_VI_HANDLE vi)
{
	VIP_VI_STATE st = vt_wait_state_not(vi, VIP_STATE_CONNECTED, VT_WAIT);
	CHECK_MSG(st == VIP_STATE_ERROR || st == VIP_STATE_IDLE, "state %d after the peer's disconnect", (int)st);
	if (st == VIP_STATE_ERROR)
		CHECK_RET(VipDisconnect(vi), VIP_SUCCESS);
	vt_drain_flushed(vi);
	CHECK_EQ(vt_state(vi), VIP_STATE_IDLE);
}

/*
 * Post the filled send `sd` (its descriptors' memory `dmh`) on `tx` and wait for it, then
 * wait on `rx` for the receive `rd`: both complete without error, in `len` bytes.
 */
static inline void vt_send_arrives(VIP_VI_HANDLE tx, VIP_DESCRIPTOR *sd, VIP_MEM_HANDLE dmh, VIP_VI_HANDLE rx,
				   VIP_DESCRIPTOR *rd, VIP_ULONG len)
{
	VIP_DESCRIPTOR *d = NULL;

	CHECK_RET(VipPostSend(tx, sd, dmh), VIP_SUCCESS);
	CHECK_RET(VipSendWait(tx, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, sd);
	CHECK_DONE_OK(d, VIP_STATUS_OP_SEND);
	CHECK_RET(VipRecvWait(rx, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, rd);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, len);
}

/*
 * End a connected pair: `active` disconnects, `passive` sees it (vt_passive_teardown),
 * then both VIs are destroyed.
 */
static inline void vt_end_pair(VIP_VI_HANDLE active, VIP_VI_HANDLE passive)
{
	CHECK_RET(VipDisconnect(active), VIP_SUCCESS);
	vt_passive_teardown(passive);
	CHECK_RET(VipDestroyVi(active), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(passive), VIP_SUCCESS);
}

/* VI attributes under the NIC's ptag. */
static inline VIP_VI_ATTRIBUTES vt_vi_attr(const vt_nic *n, VIP_RELIABILITY_LEVEL level, VIP_ULONG mts,
    VIP_BOOLEAN rdma_write, VIP_BOOLEAN rdma_read)
{
	VIP_VI_ATTRIBUTES va;
	memset(&va, 0, sizeof va);
	va.ReliabilityLevel = level;
	va.MaxTransferSize = mts;
	va.QoS = NULL;
	va.Ptag = n->ptag;
	va.EnableRdmaWrite = rdma_write;
	va.EnableRdmaRead = rdma_read;
	return va;
}

/*
 * Open `n` on VT_DEVICE and create two reliable-delivery VIs on it (64 KiB transfers, no
 * RDMA), `srv` and `cli`, as the connection-model tests use them.
 */
static inline void vt_open_two_vis(vt_nic *n, VIP_VI_HANDLE *srv, VIP_VI_HANDLE *cli)
{
	vt_open(n, VT_DEVICE);
	VIP_VI_ATTRIBUTES va = vt_vi_attr(n, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(n->nic, &va, NULL, NULL, srv), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(n->nic, &va, NULL, NULL, cli), VIP_SUCCESS);
}

/* ------------------------------------------------------------------------
 * A flag set by another thread, waited for with a timeout
 * ---------------------------------------------------------------------- */

typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int set;
} vt_flag;

static inline void vt_flag_init(vt_flag *f)
{
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	f->set = 0;
}

static inline void vt_flag_set(vt_flag *f)
{
	pthread_mutex_lock(&f->mu);
	f->set++;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

/* Waits up to ms for the flag; returns how often it was set (0 on timeout). */
static inline int vt_flag_wait(vt_flag *f, unsigned ms)
{
	struct timespec until;
	int n;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->mu);
	while (f->set == 0)
		if (pthread_cond_timedwait(&f->cv, &f->mu, &until) == ETIMEDOUT)
			break;
	n = f->set;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* ------------------------------------------------------------------------
 * In-process loopback connection: a server thread waits and accepts while
 * the calling thread requests.
 * ---------------------------------------------------------------------- */

typedef struct {
	vt_nic *n;
	VIP_NET_ADDRESS *local;        /* address the server waits on */
	VIP_NET_ADDRESS *remote;       /* filled with the requester's address */
	VIP_VI_HANDLE vi;              /* VI the request is accepted onto */
	const char *expect_disc;       /* the requester's discriminator */
	VIP_RELIABILITY_LEVEL level;   /* the requester's reliability level */
	int reject_first;              /* requests rejected before one is accepted */
	int rejected;                  /* requests rejected so far */
	VIP_VI_ATTRIBUTES remattr;     /* the requester's VI attributes */
	pthread_t thread;
} vt_server;

static inline void *vt_server_main(void *arg)
{
	vt_server *s = (vt_server *)arg;
	for (;;) {
		VIP_CONN_HANDLE conn = NULL;
		memset(s->remote, 0, sizeof(VIP_NET_ADDRESS));
		s->remote->HostAddressLen = s->n->attr.NicAddressLen;
		CHECK_RET(VipConnectWait(s->n->nic, s->local, VT_WAIT, s->remote, &s->remattr, &conn), VIP_SUCCESS);
		CHECK(conn != NULL);
		CHECK_EQ(s->remote->HostAddressLen, s->n->attr.NicAddressLen);
		CHECK_MSG(vt_disc_is(s->remote, s->expect_disc), "the requester's discriminator has %u bytes, not \"%s\"",
		    (unsigned)s->remote->DiscriminatorLen, s->expect_disc);
		CHECK_EQ(s->remattr.ReliabilityLevel, s->level);
		if (s->rejected < s->reject_first) {
			CHECK_RET(VipConnectReject(conn), VIP_SUCCESS);
			s->rejected++;
			continue;
		}
		CHECK_RET(VipConnectAccept(conn, s->vi), VIP_SUCCESS);
		return NULL;
	}
}

static inline void vt_server_start(vt_server *s)
{
	CHECK(pthread_create(&s->thread, NULL, vt_server_main, s) == 0);
}

static inline void vt_server_join(vt_server *s)
{
	CHECK(pthread_join(s->thread, NULL) == 0);
}

/* VipConnectRequest, repeated while VIP_NO_MATCH (at most ms); returns the last code. */
static inline VIP_RETURN vt_request(VIP_VI_HANDLE vi, VIP_NET_ADDRESS *local, VIP_NET_ADDRESS *remote,
    VIP_VI_ATTRIBUTES *remattr, unsigned ms)
{
	unsigned long long end = vt_now_ms() + ms;
	VIP_RETURN rc;
	for (;;) {
		rc = VipConnectRequest(vi, local, remote, VT_WAIT, remattr);
		if (rc != VIP_NO_MATCH || vt_now_ms() >= end)
			return rc;
		vt_sleep_ms(20);
	}
}

/*
 * Connects cli_vi (requester, address disc cdisc) to srv_vi (accepting in a
 * thread on disc sdisc), both VIs on this node's NIC n with reliability
 * level.  Both end up VIP_STATE_CONNECTED.
 */
static inline void vt_connect_local(vt_nic *n, VIP_VI_HANDLE srv_vi, VIP_VI_HANDLE cli_vi, const char *sdisc,
    const char *cdisc, VIP_RELIABILITY_LEVEL level)
{
	vt_server s;
	VIP_VI_ATTRIBUTES ra;
	VIP_NET_ADDRESS *saddr = vt_addr(n, vt_node(), sdisc);
	VIP_NET_ADDRESS *caddr = vt_addr(n, vt_node(), cdisc);
	memset(&s, 0, sizeof s);
	s.n = n;
	s.local = saddr;
	s.remote = vt_addr_space(n);
	s.vi = srv_vi;
	s.expect_disc = cdisc;
	s.level = level;
	vt_server_start(&s);
	CHECK_RET(vt_request(cli_vi, caddr, saddr, &ra, VT_WAIT), VIP_SUCCESS);
	CHECK_EQ(ra.ReliabilityLevel, level);
	vt_server_join(&s);
	CHECK_EQ(vt_state(srv_vi), VIP_STATE_CONNECTED);
	CHECK_EQ(vt_state(cli_vi), VIP_STATE_CONNECTED);
	free(saddr);
	free(caddr);
	free(s.remote);
}

/* ------------------------------------------------------------------------
 * The vipl_server / vipl_client protocol
 * ---------------------------------------------------------------------- */

#define VT_ECHO_COUNT 100
#define VT_ECHO_MAX 65536
/* Size of echo message k. */
static inline size_t vt_echo_size(int k)
{
	static const size_t sizes[4] = { 1, 64, 4096, 65536 };
	return sizes[k % 4];
}
/* Bytes the server RDMA-writes into the client's region, and their seed. */
#define VT_RDMA_LEN 8192
#define VT_RDMA_SEED 200u

/* The message announcing an RDMA target (or source). */
typedef struct {
	VIP_UINT64 addr;
	VIP_UINT32 handle;
	VIP_UINT32 len;
	VIP_UINT64 addr2;
	VIP_UINT32 handle2;
	VIP_UINT32 len2;
} vt_region_msg;

#endif /* REMORA_VIPL_TEST_H */
