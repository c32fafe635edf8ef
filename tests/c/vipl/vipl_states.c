/*
 * What a VI refuses in each state, the RDMA read attribute, and the queue
 * fence, on in-process loopback connections (server thread A, requester B):
 *
 *   1. VIP_INVALID_RDMAREAD: VipCreateVi of an unreliable VI with
 *      EnableRdmaRead, and VipSetViAttributes asking it of an idle
 *      unreliable VI (its attributes unchanged);
 *   2. CONNECTED: VipDestroyVi, VipConnectRequest and VipSetViAttributes are
 *      VIP_INVALID_STATE and change nothing (a message still goes, the
 *      attributes are the old ones);
 *   3. ERROR (the peer disconnected): the same three calls are
 *      VIP_INVALID_STATE; VipDisconnect returns the VI to IDLE, where
 *      VipPostSend is VIP_INVALID_STATE and VipDestroyVi succeeds;
 *   4. VIP_CONTROL_QFENCE: an RDMA read, then a fenced send of the buffer
 *      the read fills: the send carries the bytes read (it did not start
 *      before the read completed), and VipSendDone returns the read first.
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"

static vt_nic N;

static void pair(VIP_RELIABILITY_LEVEL level, VIP_VI_HANDLE *a, VIP_VI_HANDLE *b)
{
	VIP_VI_ATTRIBUTES va = vt_vi_attr(&N, level, 65536, VIP_TRUE, level != VIP_SERVICE_UNRELIABLE);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, a), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, b), VIP_SUCCESS);
}

static VIP_VI_ATTRIBUTES attrs_of(VIP_VI_HANDLE vi)
{
	VIP_VI_STATE st;
	VIP_VI_ATTRIBUTES va;
	VIP_BOOLEAN se, re;
	memset(&va, 0, sizeof va);
	CHECK_RET(VipQueryVi(vi, &st, &va, &se, &re), VIP_SUCCESS);
	return va;
}

static VIP_DESCRIPTOR *wait_send(VIP_VI_HANDLE vi, VIP_DESCRIPTOR *want)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipSendWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, want);
	return d;
}

static VIP_DESCRIPTOR *wait_recv(VIP_VI_HANDLE vi, VIP_DESCRIPTOR *want)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipRecvWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, want);
	return d;
}

/* One message of n bytes (seed) from b into a's receive da->d[k]. */
static void message(VIP_VI_HANDLE a, VIP_VI_HANDLE b, vt_descs *da, vt_descs *db, vt_mem *am, vt_mem *bm, int k,
    unsigned seed)
{
	VIP_DESCRIPTOR *d;
	vt_fill(&da->d[k], VIP_CONTROL_OP_SENDRECV, am->mh, am->p, 4096, NULL, 0);
	CHECK_RET(VipPostRecv(a, &da->d[k], da->mh), VIP_SUCCESS);
	vt_pat_fill(bm->p, 100, seed);
	vt_fill(&db->d[k], VIP_CONTROL_OP_SENDRECV, bm->mh, bm->p, 100, NULL, 0);
	CHECK_RET(VipPostSend(b, &db->d[k], db->mh), VIP_SUCCESS);
	CHECK_EQ(wait_send(b, &db->d[k])->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
	d = wait_recv(a, &da->d[k]);
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, 100);
	CHECK_PAT(am->p, 100, seed, 0, 0);
}

/* 1 */
static void rdma_read_attribute(void)
{
	VIP_VI_ATTRIBUTES va = vt_vi_attr(&N, VIP_SERVICE_UNRELIABLE, 4096, VIP_TRUE, VIP_TRUE);
	VIP_VI_HANDLE vi = NULL;

	VT_PHASE("VIP_INVALID_RDMAREAD");
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &vi), VIP_INVALID_RDMAREAD);
	va.EnableRdmaRead = VIP_FALSE;
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
	va.EnableRdmaRead = VIP_TRUE;
	CHECK_RET(VipSetViAttributes(vi, &va), VIP_INVALID_RDMAREAD);
	va = attrs_of(vi);
	CHECK_EQ(va.EnableRdmaRead, VIP_FALSE);
	CHECK_EQ(va.ReliabilityLevel, VIP_SERVICE_UNRELIABLE);
	/* reliable delivery allows it */
	va.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
	va.EnableRdmaRead = VIP_TRUE;
	CHECK_RET(VipSetViAttributes(vi, &va), VIP_SUCCESS);
	CHECK_EQ(attrs_of(vi).EnableRdmaRead, VIP_TRUE);
	CHECK_RET(VipDestroyVi(vi), VIP_SUCCESS);
}

/* The three calls a VI refuses unless idle, each changing nothing. */
static void refused_unless_idle(VIP_VI_HANDLE vi, VIP_VI_STATE st)
{
	VIP_NET_ADDRESS *local = vt_addr(&N, vt_node(), "st-again");
	VIP_NET_ADDRESS *remote = vt_addr(&N, vt_node(), "st-nobody");
	VIP_VI_ATTRIBUTES old = attrs_of(vi), va = old, ra;

	CHECK_RET(VipDestroyVi(vi), VIP_INVALID_STATE);
	CHECK_EQ(vt_state(vi), st);
	CHECK_RET(VipConnectRequest(vi, local, remote, 100, &ra), VIP_INVALID_STATE);
	CHECK_EQ(vt_state(vi), st);
	va.MaxTransferSize = old.MaxTransferSize / 2;
	va.EnableRdmaWrite = !old.EnableRdmaWrite;
	CHECK_RET(VipSetViAttributes(vi, &va), VIP_INVALID_STATE);
	va = attrs_of(vi);
	CHECK_EQ(va.MaxTransferSize, old.MaxTransferSize);
	CHECK_EQ(va.EnableRdmaWrite, old.EnableRdmaWrite);
	CHECK_EQ(vt_state(vi), st);
	free(local);
	free(remote);
}

/* 2 and 3 */
static void states(vt_descs *da, vt_descs *db, vt_mem *am, vt_mem *bm)
{
	VIP_VI_HANDLE a = NULL, b = NULL;
	VIP_DESCRIPTOR *d = NULL;

	VT_PHASE("CONNECTED: connect");
	pair(VIP_SERVICE_RELIABLE_DELIVERY, &a, &b);
	vt_connect_local(&N, a, b, "st-srv", "st-cli", VIP_SERVICE_RELIABLE_DELIVERY);
	VT_PHASE("CONNECTED: refused");
	refused_unless_idle(a, VIP_STATE_CONNECTED);
	refused_unless_idle(b, VIP_STATE_CONNECTED);
	VT_PHASE("CONNECTED: a message still goes");
	message(a, b, da, db, am, bm, 0, 61);

	VT_PHASE("ERROR: the peer disconnects");
	CHECK_RET(VipDisconnect(b), VIP_SUCCESS);
	CHECK_EQ(vt_state(b), VIP_STATE_IDLE);
	CHECK_STATE_WITHIN(a, VIP_STATE_ERROR, VT_WAIT);
	VT_PHASE("ERROR: refused");
	refused_unless_idle(a, VIP_STATE_ERROR);
	CHECK_RET(VipDisconnect(a), VIP_SUCCESS);
	CHECK_EQ(vt_state(a), VIP_STATE_IDLE);

	VT_PHASE("IDLE: VipPostSend refused");
	vt_fill(&db->d[1], VIP_CONTROL_OP_SENDRECV, bm->mh, bm->p, 16, NULL, 0);
	CHECK_RET(VipPostSend(b, &db->d[1], db->mh), VIP_INVALID_STATE);
	CHECK_RET(VipSendDone(b, &d), VIP_NOT_DONE);
	CHECK_RET(VipDestroyVi(a), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(b), VIP_SUCCESS);
}

/* 4 */
static void queue_fence(vt_descs *da, vt_descs *db, vt_mem *am, vt_mem *bm)
{
	VIP_VI_HANDLE a = NULL, b = NULL;
	VIP_DESCRIPTOR *d;
	vt_mem src;

	VT_PHASE("QFENCE: connect");
	vt_reg(&N, &src, 8192, VIP_FALSE, VIP_TRUE);
	vt_pat_fill(src.p, 8192, 77);
	pair(VIP_SERVICE_RELIABLE_DELIVERY, &a, &b);
	vt_fill(&da->d[2], VIP_CONTROL_OP_SENDRECV, am->mh, am->p, 8192, NULL, 0);
	CHECK_RET(VipPostRecv(a, &da->d[2], da->mh), VIP_SUCCESS);
	vt_connect_local(&N, a, b, "qf-srv", "qf-cli", VIP_SERVICE_RELIABLE_DELIVERY);

	VT_PHASE("QFENCE: read, then a fenced send of what it reads");
	memset(bm->p, 0, 8192);
	vt_fill_rdma(&db->d[2], VIP_CONTROL_OP_RDMAREAD, vt_bits(src.p), src.mh, bm->p, bm->mh, 8192);
	CHECK_RET(VipPostSend(b, &db->d[2], db->mh), VIP_SUCCESS);
	vt_fill(&db->d[3], VIP_CONTROL_OP_SENDRECV | VIP_CONTROL_QFENCE, bm->mh, bm->p, 8192, NULL, 0);
	CHECK_RET(VipPostSend(b, &db->d[3], db->mh), VIP_SUCCESS);
	d = wait_send(b, &db->d[2]);
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ);
	d = wait_send(b, &db->d[3]);
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
	d = wait_recv(a, &da->d[2]);
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, 8192);
	CHECK_PAT(am->p, 8192, 77, 0, 0);

	VT_PHASE("QFENCE: disconnect");
	CHECK_RET(VipDisconnect(b), VIP_SUCCESS);
	vt_passive_teardown(a);
	CHECK_RET(VipDestroyVi(a), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(b), VIP_SUCCESS);
	vt_unreg(&N, &src);
}

int main(void)
{
	vt_descs da, db;
	vt_mem am, bm;

	setvbuf(stdout, NULL, _IOLBF, 0);
	vt_open(&N, "remora0");
	vt_descs_new(&N, &da, 4);
	vt_descs_new(&N, &db, 4);
	vt_reg(&N, &am, 8192, VIP_FALSE, VIP_FALSE);
	vt_reg(&N, &bm, 8192, VIP_FALSE, VIP_FALSE);

	rdma_read_attribute();
	states(&da, &db, &am, &bm);
	queue_fence(&da, &db, &am, &bm);

	VT_PHASE("teardown");
	vt_unreg(&N, &am);
	vt_unreg(&N, &bm);
	vt_descs_free(&N, &da);
	vt_descs_free(&N, &db);
	vt_close(&N);
	printf("vipl_states: VIPL OK\n");
	return 0;
}
