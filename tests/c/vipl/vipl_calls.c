/*
 * Every VIPL call family in one process, with exact return codes: NICs,
 * ptags, memory registration, CQs, VIs in the idle state, the name service,
 * then a loopback connection (server thread A, requester B on the main
 * thread) carrying sends of 1 B .. 1 MiB, immediate data, RDMA write (with
 * and without immediate), RDMA read, a receive queue filled (one receive more
 * is VIP_ERROR_RESOURCE), a receive CQ, VipRecvNotify and the flush of posted
 * receives on disconnect.
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"

#define BIG (1u << 20)

/* Layout of A's region. */
#define A_RECV 0                       /* two receive segments, up to BIG */
#define A_INFO (BIG + 8192)            /* outgoing small messages */
#define A_W (A_INFO + 4096)            /* RDMA write target, 128 KiB */
#define A_R (A_W + 131072)             /* RDMA read source, 64 KiB */
#define A_SIZE (A_R + 65536)
/* Layout of B's region. */
#define B_SEND 0                       /* outgoing data, up to BIG + 128 */
#define B_INFO (BIG + 8192)            /* incoming small messages */
#define B_RD (B_INFO + 4096)           /* RDMA read destination, 64 KiB */
#define B_SIZE (B_RD + 65536)

#define SENTINEL 0xEE
#define IMM_SEND 0xdeadbeefu
#define IMM_RDMA 0x1234abcdu

static vt_nic N;

static void open_names(void)
{
	static const char *const names[5] = { "remora0", "/dev/via0", "/dev/via_lo", "/dev/clanvi0", "nic0" };
	VIP_NIC_HANDLE h[5], bad = NULL;
	int i;
	VT_PHASE("VipOpenNic");
	for (i = 0; i < 5; i++) {
		h[i] = NULL;
		CHECK_RET(VipOpenNic(names[i], &h[i]), VIP_SUCCESS);
		CHECK(h[i] != NULL);
	}
	for (i = 0; i < 5; i++)
		CHECK_RET(VipCloseNic(h[i]), VIP_SUCCESS);
	CHECK_RET(VipOpenNic("/dev/nonesuch", &bad), VIP_INVALID_PARAMETER);
	CHECK_RET(VipOpenNic("remora0", NULL), VIP_INVALID_PARAMETER);
}

static void query_nic(void)
{
	VIP_NIC_ATTRIBUTES na;
	VT_PHASE("VipQueryNic");
	memset(&na, 0, sizeof na);
	CHECK_RET(VipQueryNic(N.nic, &na), VIP_SUCCESS);
	CHECK_MSG(na.MaxDiscriminatorLen >= 12, "MaxDiscriminatorLen %u", (unsigned)na.MaxDiscriminatorLen);
	CHECK_BITS(na.ReliabilityLevelSupport, VIP_SERVICE_RELIABLE_DELIVERY);
	CHECK_BITS(na.RDMAReadSupport, VIP_SERVICE_RELIABLE_DELIVERY);
	CHECK(na.NicAddressLen > 0);
	CHECK(na.LocalNicAddress != NULL);
	CHECK(memchr(na.Name, 0, sizeof na.Name) != NULL);
	CHECK_MSG(na.MaxTransferSize >= BIG, "MaxTransferSize %lu", na.MaxTransferSize);
	CHECK(na.MaxSegmentsPerDesc >= 2);
}

static void ptags(void)
{
	VIP_PROTECTION_HANDLE p = NULL;
	VIP_MEM_ATTRIBUTES ma;
	VIP_MEM_HANDLE mh;
	VIP_VI_ATTRIBUTES va;
	VIP_VI_HANDLE vi = NULL;
	unsigned char *buf = vt_alloc(4096);

	VT_PHASE("ptag create/destroy");
	CHECK_RET(VipCreatePtag(N.nic, &p), VIP_SUCCESS);
	CHECK_RET(VipDestroyPtag(N.nic, p), VIP_SUCCESS);
	CHECK_RET(VipDestroyPtag(N.nic, p), VIP_INVALID_PTAG);

	VT_PHASE("ptag used by memory");
	CHECK_RET(VipCreatePtag(N.nic, &p), VIP_SUCCESS);
	ma.Ptag = p;
	ma.EnableRdmaWrite = VIP_FALSE;
	ma.EnableRdmaRead = VIP_FALSE;
	CHECK_RET(VipRegisterMem(N.nic, buf, 4096, &ma, &mh), VIP_SUCCESS);
	CHECK_RET(VipDestroyPtag(N.nic, p), VIP_ERROR_RESOURCE);
	CHECK_RET(VipDeregisterMem(N.nic, buf, mh), VIP_SUCCESS);
	CHECK_RET(VipDestroyPtag(N.nic, p), VIP_SUCCESS);

	VT_PHASE("ptag used by a VI");
	CHECK_RET(VipCreatePtag(N.nic, &p), VIP_SUCCESS);
	va = vt_vi_attr(&N, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);
	va.Ptag = p;
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
	CHECK_RET(VipDestroyPtag(N.nic, p), VIP_ERROR_RESOURCE);
	CHECK_RET(VipDestroyVi(vi), VIP_SUCCESS);
	CHECK_RET(VipDestroyPtag(N.nic, p), VIP_SUCCESS);
	CHECK_RET(VipDestroyPtag(N.nic, p), VIP_INVALID_PTAG);
	free(buf);
}

static void memory(void)
{
	unsigned char *raw = (unsigned char *)malloc(10000);
	unsigned char *buf = raw + 3; /* malloc'ed and not page aligned */
	unsigned char *page = vt_alloc(4096);
	VIP_MEM_ATTRIBUTES ma, bad, q;
	VIP_MEM_HANDLE mh = 0, mh2 = 0, h1 = 0, h2 = 0;

	VT_PHASE("VipRegisterMem");
	CHECK(raw != NULL);
	ma.Ptag = N.ptag;
	ma.EnableRdmaWrite = VIP_FALSE;
	ma.EnableRdmaRead = VIP_TRUE;
	CHECK_RET(VipRegisterMem(N.nic, buf, 5000, &ma, &mh), VIP_SUCCESS);
	bad = ma;
	bad.Ptag = (VIP_PROTECTION_HANDLE)(uintptr_t)0x1234;
	CHECK_RET(VipRegisterMem(N.nic, buf, 100, &bad, &mh2), VIP_INVALID_PTAG);
	CHECK_RET(VipRegisterMem(N.nic, buf, 0, &ma, &mh2), VIP_INVALID_PARAMETER);

	VT_PHASE("VipQueryMem / VipSetMemAttributes");
	memset(&q, 0x5a, sizeof q);
	CHECK_RET(VipQueryMem(N.nic, buf, mh, &q), VIP_SUCCESS);
	CHECK_PTR(q.Ptag, N.ptag);
	CHECK(!q.EnableRdmaWrite);
	CHECK(q.EnableRdmaRead);
	ma.EnableRdmaWrite = VIP_TRUE;
	CHECK_RET(VipSetMemAttributes(N.nic, buf, mh, &ma), VIP_SUCCESS);
	memset(&q, 0, sizeof q);
	CHECK_RET(VipQueryMem(N.nic, buf, mh, &q), VIP_SUCCESS);
	CHECK_PTR(q.Ptag, N.ptag);
	CHECK(q.EnableRdmaWrite);
	CHECK(q.EnableRdmaRead);

	VT_PHASE("VipDeregisterMem");
	CHECK_RET(VipDeregisterMem(N.nic, buf, mh), VIP_SUCCESS);
	CHECK_RET(VipDeregisterMem(N.nic, buf, mh), VIP_INVALID_PARAMETER);

	VT_PHASE("two regions on one page");
	ma.EnableRdmaWrite = VIP_FALSE;
	CHECK_RET(VipRegisterMem(N.nic, page, 100, &ma, &h1), VIP_SUCCESS);
	CHECK_RET(VipRegisterMem(N.nic, page + 200, 100, &ma, &h2), VIP_SUCCESS);
	CHECK(h1 != h2);
	CHECK_RET(VipDeregisterMem(N.nic, page, h1), VIP_SUCCESS);
	CHECK_RET(VipDeregisterMem(N.nic, page + 200, h2), VIP_SUCCESS);
	free(raw);
	free(page);
}

static VIP_CQ_HANDLE make_cq(void)
{
	VIP_CQ_HANDLE cq = NULL;
	VIP_VI_HANDLE vi = NULL;
	VIP_BOOLEAN rq = VIP_FALSE;
	VT_PHASE("CQ");
	CHECK_RET(VipCreateCQ(N.nic, 16, &cq), VIP_SUCCESS);
	CHECK(cq != NULL);
	CHECK_RET(VipCQDone(cq, &vi, &rq), VIP_NOT_DONE);
	CHECK_RET(VipCQWait(cq, 10, &vi, &rq), VIP_TIMEOUT);
	CHECK_RET(VipResizeCQ(cq, 32), VIP_SUCCESS);
	return cq;
}

/* The idle VI B: creation errors, query, attributes, calls not allowed in IDLE. */
static void idle_vi(VIP_VI_HANDLE vi, vt_descs *db, vt_mem *bm)
{
	VIP_VI_ATTRIBUTES va, bad, q;
	VIP_VI_HANDLE other = NULL;
	VIP_VI_STATE st;
	VIP_BOOLEAN se = VIP_FALSE, re = VIP_FALSE;
	VIP_DESCRIPTOR *d = NULL;

	VT_PHASE("VipCreateVi errors");
	va = vt_vi_attr(&N, VIP_SERVICE_RELIABLE_DELIVERY, BIG, VIP_TRUE, VIP_TRUE);
	bad = va;
	bad.ReliabilityLevel = 0x40;
	CHECK_RET(VipCreateVi(N.nic, &bad, NULL, NULL, &other), VIP_INVALID_RELIABILITY_LEVEL);
	bad = va;
	bad.Ptag = (VIP_PROTECTION_HANDLE)(uintptr_t)0x1234;
	CHECK_RET(VipCreateVi(N.nic, &bad, NULL, NULL, &other), VIP_INVALID_PTAG);

	VT_PHASE("VipQueryVi idle");
	memset(&q, 0, sizeof q);
	CHECK_RET(VipQueryVi(vi, &st, &q, &se, &re), VIP_SUCCESS);
	CHECK_EQ(st, VIP_STATE_IDLE);
	CHECK(se);
	CHECK(re);
	CHECK_EQ(q.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
	CHECK_PTR(q.Ptag, N.ptag);
	CHECK(q.EnableRdmaWrite);

	VT_PHASE("VipSetViAttributes idle");
	va.EnableRdmaWrite = VIP_FALSE;
	CHECK_RET(VipSetViAttributes(vi, &va), VIP_SUCCESS);
	CHECK_RET(VipQueryVi(vi, &st, &q, &se, &re), VIP_SUCCESS);
	CHECK(!q.EnableRdmaWrite);
	va.EnableRdmaWrite = VIP_TRUE;
	CHECK_RET(VipSetViAttributes(vi, &va), VIP_SUCCESS);
	CHECK_RET(VipQueryVi(vi, &st, &q, &se, &re), VIP_SUCCESS);
	CHECK(q.EnableRdmaWrite);

	VT_PHASE("calls on an idle VI");
	CHECK_RET(VipRecvDone(vi, &d), VIP_NOT_DONE);
	vt_fill(&db->d[15], VIP_CONTROL_OP_SENDRECV, bm->mh, bm->p + B_SEND, 16, NULL, 0);
	CHECK_RET(VipPostSend(vi, &db->d[15], db->mh), VIP_INVALID_STATE);
	CHECK_RET(VipDisconnect(vi), VIP_INVALID_STATE);
	/* 8 bytes into the registered descriptor array: not 64-byte aligned */
	CHECK_RET(VipPostRecv(vi, (VIP_DESCRIPTOR *)(void *)((char *)db->d + 8), db->mh), VIP_INVALID_PARAMETER);
	CHECK_RET(VipQueryVi(vi, &st, &q, &se, &re), VIP_SUCCESS);
	CHECK_EQ(st, VIP_STATE_IDLE);
	CHECK(se);
	CHECK(re);
}

static void name_service(void)
{
	VIP_NET_ADDRESS *a1 = vt_addr_space(&N), *a2 = vt_addr_space(&N), *a3 = vt_addr_space(&N);
	char node[64], name[256];
	VIP_ULONG len = sizeof name;

	VT_PHASE("name service");
	snprintf(node, sizeof node, "%s", vt_node());
	CHECK_RET(VipNSGetHostByName(N.nic, "localhost", a1, 0), VIP_SUCCESS);
	CHECK_RET(VipNSGetHostByName(N.nic, node, a2, 0), VIP_SUCCESS);
	CHECK_EQ(a1->HostAddressLen, N.attr.NicAddressLen);
	CHECK_EQ(a2->HostAddressLen, a1->HostAddressLen);
	CHECK(memcmp(a1->HostAddress, a2->HostAddress, a1->HostAddressLen) == 0);
	CHECK(memcmp(a1->HostAddress, N.attr.LocalNicAddress, a1->HostAddressLen) == 0);
	CHECK_RET(VipNSGetHostByName(N.nic, "no-such-host-xyz", a3, 0), VIP_ERROR_NAMESERVICE);
	memset(name, 0, sizeof name);
	CHECK_RET(VipNSGetHostByAddr(N.nic, a2, name, &len), VIP_SUCCESS);
	CHECK_MSG(len > 0 && len <= sizeof name, "NameLen %lu", len);
	CHECK(name[0] != '\0');
	CHECK(memchr(name, 0, sizeof name) != NULL);
	free(a1);
	free(a2);
	free(a3);
}

/* RecvNotify record. */
static vt_flag notified;
static struct {
	VIP_PVOID ctx;
	VIP_NIC_HANDLE nic;
	VIP_VI_HANDLE vi;
	VIP_DESCRIPTOR *d;
} note;

static void on_recv(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d)
{
	note.ctx = ctx;
	note.nic = nic;
	note.vi = vi;
	note.d = d;
	vt_flag_set(&notified);
}

/* The next receive of A through its receive CQ. */
static VIP_DESCRIPTOR *a_recv(VIP_CQ_HANDLE cq, VIP_VI_HANDLE viA)
{
	VIP_VI_HANDLE vi = NULL;
	VIP_BOOLEAN rq = VIP_FALSE;
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipCQWait(cq, VT_WAIT, &vi, &rq), VIP_SUCCESS);
	CHECK_PTR(vi, viA);
	CHECK(rq);
	CHECK_RET(VipRecvDone(viA, &d), VIP_SUCCESS);
	return d;
}

static VIP_DESCRIPTOR *send_wait(VIP_VI_HANDLE vi, VIP_DESCRIPTOR *want)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipSendWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, want);
	return d;
}

/* B sends n bytes (seed) to A: one or two send segments, two receive segments. */
static void transfer(VIP_VI_HANDLE viA, VIP_VI_HANDLE viB, VIP_CQ_HANDLE cq, vt_descs *da, vt_descs *db,
    vt_mem *am, vt_mem *bm, size_t n, int send_segs, unsigned seed)
{
	size_t l0 = (n + 1) / 2, l1 = n - l0 > 0 ? n - l0 : 1;
	unsigned char *r0 = am->p + A_RECV, *r1 = am->p + A_RECV + l0 + 4096;
	size_t s0 = send_segs == 2 ? n / 2 : n;
	unsigned char *p0 = bm->p + B_SEND, *p1 = bm->p + B_SEND + s0 + 128;
	VIP_DESCRIPTOR *d;

	memset(am->p + A_RECV, SENTINEL, A_INFO - A_RECV);
	vt_fill(&da->d[1], VIP_CONTROL_OP_SENDRECV, am->mh, r0, l0, r1, l1);
	CHECK_RET(VipPostRecv(viA, &da->d[1], da->mh), VIP_SUCCESS);

	vt_pat_fill(p0, s0, seed);
	if (send_segs == 2) {
		size_t i;
		for (i = 0; i < n - s0; i++)
			p1[i] = vt_pat(seed, s0 + i);
		vt_fill(&db->d[1], VIP_CONTROL_OP_SENDRECV, bm->mh, p0, s0, p1, n - s0);
	} else {
		vt_fill(&db->d[1], VIP_CONTROL_OP_SENDRECV, bm->mh, p0, n, NULL, 0);
	}
	CHECK_EQ(db->d[1].CS.Length, n);
	CHECK_RET(VipPostSend(viB, &db->d[1], db->mh), VIP_SUCCESS);
	d = send_wait(viB, &db->d[1]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_SEND);

	d = a_recv(cq, viA);
	CHECK_PTR(d, &da->d[1]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, n);
	CHECK_EQ(d->CS.Status & VIP_STATUS_IMMEDIATE, 0);
	CHECK_PAT(r0, l0, seed, 0, 0);
	if (n > l0)
		CHECK_PAT(r1, n - l0, seed, l0, 0);
	else
		CHECK_EQ(r1[0], SENTINEL);
	CHECK_EQ(r0[l0], SENTINEL); /* the gap between the two segments */
}

/* A sends message i of full_queue: 1..64 bytes of pattern 100 + i. */
static void full_send(VIP_VI_HANDLE viA, vt_descs *da, vt_mem *am, unsigned long i)
{
	size_t len = 1 + (i * 37) % 64;
	vt_pat_fill(am->p + A_INFO, len, 100 + (unsigned)i);
	vt_fill(&da->d[5], VIP_CONTROL_OP_SENDRECV, am->mh, am->p + A_INFO, len, NULL, 0);
	CHECK_RET(VipPostSend(viA, &da->d[5], da->mh), VIP_SUCCESS);
	CHECK_DONE_OK(send_wait(viA, &da->d[5]), VIP_STATUS_OP_SEND);
}

/* B's next receive is q[i], holding full_queue's message i. */
static void full_take(VIP_VI_HANDLE viB, vt_descs *q, vt_mem *r, unsigned long i)
{
	size_t len = 1 + (i * 37) % 64;
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipRecvWait(viB, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &q->d[i]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, len);
	CHECK_PAT(r->p + 64 * i, len, 100 + (unsigned)i, 0, 0);
}

/*
 * B's receive queue filled to MaxDescriptorsPerQueue: one more receive is
 * VIP_ERROR_RESOURCE and changes nothing (its descriptor untouched, never
 * completed); the receives posted before it take A's messages in order with
 * their bytes intact, and the refused descriptor posts once there is room.
 */
static void full_queue(VIP_VI_HANDLE viA, VIP_VI_HANDLE viB, vt_descs *da, vt_mem *am)
{
	unsigned long n = N.attr.MaxDescriptorsPerQueue, i;
	vt_descs q;
	vt_mem r;
	VIP_DESCRIPTOR *d = NULL;

	VT_PHASE("a receive past a full queue");
	CHECK_MSG(n >= 2 && n <= 4096, "MaxDescriptorsPerQueue %lu", n);
	vt_descs_new(&N, &q, (int)n + 1);
	vt_reg(&N, &r, 64 * (n + 1), VIP_FALSE, VIP_FALSE);
	for (i = 0; i <= n; i++)
		vt_fill(&q.d[i], VIP_CONTROL_OP_SENDRECV, r.mh, r.p + 64 * i, 64, NULL, 0);
	for (i = 0; i < n; i++)
		CHECK_RET(VipPostRecv(viB, &q.d[i], q.mh), VIP_SUCCESS);
	CHECK_RET(VipPostRecv(viB, &q.d[n], q.mh), VIP_ERROR_RESOURCE);
	CHECK_RET(VipPostRecv(viB, &q.d[n], q.mh), VIP_ERROR_RESOURCE);
	for (i = 0; i < n; i++)
		full_send(viA, da, am, i);
	for (i = 0; i < n; i++)
		full_take(viB, &q, &r, i);
	CHECK_RET(VipRecvDone(viB, &d), VIP_NOT_DONE);
	CHECK_EQ(q.d[n].CS.Status, 0);

	VT_PHASE("the refused receive posted once the queue has room");
	CHECK_RET(VipPostRecv(viB, &q.d[n], q.mh), VIP_SUCCESS);
	full_send(viA, da, am, n);
	full_take(viB, &q, &r, n);
	CHECK_RET(VipRecvDone(viB, &d), VIP_NOT_DONE);
	vt_unreg(&N, &r);
	vt_descs_free(&N, &q);
}

static void connected(VIP_CQ_HANDLE cq, VIP_VI_HANDLE viA, VIP_VI_HANDLE viB, vt_descs *da, vt_descs *db)
{
	vt_mem am, bm;
	VIP_DESCRIPTOR *pre = &db->d[0], *d;
	VIP_NET_ADDRESS *cli = vt_addr(&N, vt_node(), "cli");
	VIP_NET_ADDRESS *nobody = vt_addr(&N, vt_node(), "nobody");
	VIP_VI_ATTRIBUTES ra;
	VIP_VI_STATE st;
	VIP_BOOLEAN se, re;
	VIP_VI_HANDLE cq_vi = NULL;
	vt_region_msg info;
	int i;
	static int note_ctx;

	vt_reg(&N, &am, A_SIZE, VIP_TRUE, VIP_TRUE);
	vt_reg(&N, &bm, B_SIZE, VIP_TRUE, VIP_TRUE);

	VT_PHASE("VIP_NO_MATCH");
	vt_fill(pre, VIP_CONTROL_OP_SENDRECV, bm.mh, bm.p + B_INFO, 256, NULL, 0);
	CHECK_RET(VipPostRecv(viB, pre, db->mh), VIP_SUCCESS);
	CHECK_RET(VipConnectRequest(viB, cli, nobody, 500, &ra), VIP_NO_MATCH);
	CHECK_RET(VipQueryVi(viB, &st, &ra, &se, &re), VIP_SUCCESS);
	CHECK_EQ(st, VIP_STATE_IDLE);
	CHECK(!re);

	VT_PHASE("connect");
	vt_connect_local(&N, viA, viB, "srv", "cli", VIP_SERVICE_RELIABLE_DELIVERY);

	VT_PHASE("region message A -> B (the receive posted before VIP_NO_MATCH)");
	vt_pat_fill(am.p + A_R, 65536, 60);
	memset(am.p + A_W, SENTINEL, 131072);
	info.addr = vt_bits(am.p + A_W);
	info.handle = am.mh;
	info.len = 131072;
	info.addr2 = vt_bits(am.p + A_R);
	info.handle2 = am.mh;
	info.len2 = 65536;
	memcpy(am.p + A_INFO, &info, sizeof info);
	vt_fill(&da->d[2], VIP_CONTROL_OP_SENDRECV, am.mh, am.p + A_INFO, sizeof info, NULL, 0);
	CHECK_RET(VipPostSend(viA, &da->d[2], da->mh), VIP_SUCCESS);
	CHECK_DONE_OK(send_wait(viA, &da->d[2]), VIP_STATUS_OP_SEND);
	CHECK_RET(VipRecvWait(viB, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, pre);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, sizeof info);
	memcpy(&info, bm.p + B_INFO, sizeof info);

	VT_PHASE("send/receive 1 B, 8 B, 4096 B, 1 MiB");
	transfer(viA, viB, cq, da, db, &am, &bm, 1, 1, 1);
	transfer(viA, viB, cq, da, db, &am, &bm, 8, 2, 2);
	transfer(viA, viB, cq, da, db, &am, &bm, 4096, 1, 3);
	transfer(viA, viB, cq, da, db, &am, &bm, BIG, 2, 4);

	VT_PHASE("send with immediate data");
	vt_fill(&da->d[3], VIP_CONTROL_OP_SENDRECV, am.mh, am.p + A_RECV, 64, NULL, 0);
	CHECK_RET(VipPostRecv(viA, &da->d[3], da->mh), VIP_SUCCESS);
	vt_pat_fill(bm.p + B_SEND, 16, 5);
	vt_fill(&db->d[3], VIP_CONTROL_OP_SENDRECV | VIP_CONTROL_IMMEDIATE, bm.mh, bm.p + B_SEND, 16, NULL, 0);
	db->d[3].CS.ImmediateData = IMM_SEND;
	CHECK_RET(VipPostSend(viB, &db->d[3], db->mh), VIP_SUCCESS);
	CHECK_DONE_OK(send_wait(viB, &db->d[3]), VIP_STATUS_OP_SEND);
	d = a_recv(cq, viA);
	CHECK_PTR(d, &da->d[3]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_BITS(d->CS.Status, VIP_STATUS_IMMEDIATE);
	CHECK_EQ(d->CS.ImmediateData, IMM_SEND);
	CHECK_EQ(d->CS.Length, 16);
	CHECK_PAT(am.p + A_RECV, 16, 5, 0, 0);

	VT_PHASE("RDMA write");
	vt_pat_fill(bm.p + B_SEND, 65536, 50);
	vt_fill_rdma(&db->d[4], VIP_CONTROL_OP_RDMAWRITE, info.addr, info.handle, bm.p + B_SEND, bm.mh, 65536);
	CHECK_RET(VipPostSend(viB, &db->d[4], db->mh), VIP_SUCCESS);
	CHECK_DONE_OK(send_wait(viB, &db->d[4]), VIP_STATUS_OP_RDMA_WRITE);

	VT_PHASE("RDMA write with immediate data");
	vt_fill(&da->d[4], VIP_CONTROL_OP_SENDRECV, am.mh, am.p + A_RECV, 64, NULL, 0);
	CHECK_RET(VipPostRecv(viA, &da->d[4], da->mh), VIP_SUCCESS);
	vt_pat_fill(bm.p + B_SEND + 65536, 4096, 51);
	vt_fill_rdma(&db->d[5], VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, info.addr + 65536 + 100,
	    info.handle, bm.p + B_SEND + 65536, bm.mh, 4096);
	db->d[5].CS.ImmediateData = IMM_RDMA;
	CHECK_RET(VipPostSend(viB, &db->d[5], db->mh), VIP_SUCCESS);
	d = send_wait(viB, &db->d[5]);
	CHECK_BITS(d->CS.Status, VIP_STATUS_DONE);
	CHECK_EQ(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
	d = a_recv(cq, viA);
	CHECK_PTR(d, &da->d[4]);
	CHECK_BITS(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_IMMEDIATE);
	CHECK_EQ(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
	CHECK_EQ(d->CS.Status & VIP_STATUS_OP_MASK, VIP_STATUS_OP_REMOTE_RDMA_WRITE);
	CHECK_EQ(d->CS.ImmediateData, IMM_RDMA);
	VT_PHASE("RDMA write bytes at the target");
	CHECK_PAT(am.p + A_W, 65536, 50, 0, 0);
	CHECK_FILL(am.p + A_W + 65536, 100, SENTINEL);
	CHECK_PAT(am.p + A_W + 65536 + 100, 4096, 51, 0, 0);
	CHECK_FILL(am.p + A_W + 65536 + 100 + 4096, 131072 - 65536 - 100 - 4096, SENTINEL);

	VT_PHASE("RDMA read");
	memset(bm.p + B_RD, SENTINEL, 65536);
	vt_fill_rdma(&db->d[6], VIP_CONTROL_OP_RDMAREAD, info.addr2, info.handle2, bm.p + B_RD, bm.mh, 65536);
	CHECK_RET(VipPostSend(viB, &db->d[6], db->mh), VIP_SUCCESS);
	CHECK_DONE_OK(send_wait(viB, &db->d[6]), VIP_STATUS_OP_RDMA_READ);
	CHECK_PAT(bm.p + B_RD, 65536, 60, 0, 0);

	VT_PHASE("VipQueryVi connected");
	CHECK_RET(VipQueryVi(viA, &st, &ra, &se, &re), VIP_SUCCESS);
	CHECK_EQ(st, VIP_STATE_CONNECTED);
	CHECK(se);
	CHECK(re);
	CHECK_RET(VipQueryVi(viB, &st, &ra, &se, &re), VIP_SUCCESS);
	CHECK_EQ(st, VIP_STATE_CONNECTED);
	CHECK(se);
	CHECK(re);

	full_queue(viA, viB, da, &am);

	VT_PHASE("VipRecvNotify");
	vt_flag_init(&notified);
	memset(bm.p + B_INFO, SENTINEL, 64);
	vt_fill(&db->d[7], VIP_CONTROL_OP_SENDRECV, bm.mh, bm.p + B_INFO, 64, NULL, 0);
	CHECK_RET(VipPostRecv(viB, &db->d[7], db->mh), VIP_SUCCESS);
	CHECK_RET(VipRecvNotify(viB, &note_ctx, on_recv), VIP_SUCCESS);
	vt_pat_fill(am.p + A_INFO, 32, 70);
	vt_fill(&da->d[5], VIP_CONTROL_OP_SENDRECV, am.mh, am.p + A_INFO, 32, NULL, 0);
	CHECK_RET(VipPostSend(viA, &da->d[5], da->mh), VIP_SUCCESS);
	CHECK_DONE_OK(send_wait(viA, &da->d[5]), VIP_STATUS_OP_SEND);
	CHECK_EQ(vt_flag_wait(&notified, VT_WAIT), 1);
	CHECK_PTR(note.ctx, &note_ctx);
	CHECK_PTR(note.nic, N.nic);
	CHECK_PTR(note.vi, viB);
	CHECK_PTR(note.d, &db->d[7]);
	CHECK_DONE_OK(note.d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(note.d->CS.Length, 32);
	CHECK_PAT(bm.p + B_INFO, 32, 70, 0, 0);
	CHECK_RET(VipRecvDone(viB, &d), VIP_NOT_DONE);

	VT_PHASE("disconnect flushes posted receives");
	for (i = 8; i < 11; i++) {
		vt_fill(&db->d[i], VIP_CONTROL_OP_SENDRECV, bm.mh, bm.p + B_INFO + 64 * (i - 8), 64, NULL, 0);
		CHECK_RET(VipPostRecv(viB, &db->d[i], db->mh), VIP_SUCCESS);
	}
	CHECK_RET(VipQueryVi(viB, &st, &ra, &se, &re), VIP_SUCCESS);
	CHECK(!re);
	CHECK_RET(VipDisconnect(viB), VIP_SUCCESS);
	for (i = 8; i < 11; i++) {
		d = NULL;
		CHECK_RET(VipRecvDone(viB, &d), VIP_SUCCESS);
		CHECK_PTR(d, &db->d[i]);
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_DESC_FLUSHED_ERROR);
	}
	CHECK_RET(VipRecvDone(viB, &d), VIP_NOT_DONE);
	CHECK_EQ(vt_state(viB), VIP_STATE_IDLE);

	VT_PHASE("the accepting VI after the peer's disconnect");
	vt_passive_teardown(viA);
	CHECK_RET(VipCQDone(cq, &cq_vi, &re), VIP_NOT_DONE);

	vt_unreg(&N, &am);
	vt_unreg(&N, &bm);
	free(cli);
	free(nobody);
}

int main(void)
{
	VIP_CQ_HANDLE cq;
	VIP_VI_HANDLE viA = NULL, viB = NULL;
	VIP_VI_ATTRIBUTES va;
	vt_descs da, db;
	vt_mem bm;

	setvbuf(stdout, NULL, _IOLBF, 0);
	open_names();
	vt_open(&N, "remora0");
	query_nic();
	ptags();
	memory();
	cq = make_cq();

	vt_descs_new(&N, &da, 16);
	vt_descs_new(&N, &db, 16);
	VT_PHASE("VipCreateVi");
	va = vt_vi_attr(&N, VIP_SERVICE_RELIABLE_DELIVERY, BIG, VIP_TRUE, VIP_TRUE);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &viB), VIP_SUCCESS);
	CHECK(viB != NULL);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, cq, &viA), VIP_SUCCESS);
	CHECK(viA != NULL && viA != viB);
	vt_reg(&N, &bm, 4096, VIP_FALSE, VIP_FALSE);
	idle_vi(viB, &db, &bm);
	vt_unreg(&N, &bm);

	name_service();
	connected(cq, viA, viB, &da, &db);

	VT_PHASE("teardown");
	CHECK_RET(VipDestroyVi(viA), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(viB), VIP_SUCCESS);
	CHECK_RET(VipDestroyCQ(cq), VIP_SUCCESS);
	vt_descs_free(&N, &da);
	vt_descs_free(&N, &db);
	vt_close(&N);
	printf("vipl_calls: VIPL OK\n");
	return 0;
}
