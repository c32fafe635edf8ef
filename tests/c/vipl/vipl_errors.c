/*
 * Error completions on in-process loopback connections (server thread A,
 * requester B on the main thread):
 *   1. reliable delivery: a send longer than the receive posted at A
 *      completes there with VIP_STATUS_LENGTH_ERROR, both VIs go to
 *      VIP_STATE_ERROR, the NIC's error callback runs, and VipDisconnect in
 *      ERROR succeeds and returns the VIs to IDLE;
 *   2. unreliable: a send with no receive posted completes at the sender
 *      with VIP_STATUS_DONE and the connection stays up;
 *   3. reliable delivery: an RDMA write into memory registered without
 *      EnableRdmaWrite completes at the sender with VIP_STATUS_RDMA_PROT_ERROR
 *      and the sender's VI goes to VIP_STATE_ERROR.
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"

static vt_nic N;

/* Error callback record. */
static vt_flag errored;
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
static int err_ctx;
static struct {
	VIP_PVOID ctx;
	VIP_ERROR_DESCRIPTOR first;
	int count;
} err;

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
	pthread_mutex_lock(&err_mu);
	if (err.count == 0) {
		err.ctx = ctx;
		err.first = *e;
	}
	err.count++;
	pthread_mutex_unlock(&err_mu);
	vt_flag_set(&errored);
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

static void make_pair(VIP_RELIABILITY_LEVEL level, VIP_BOOLEAN rdma_read, VIP_VI_HANDLE *a, VIP_VI_HANDLE *b)
{
	VIP_VI_ATTRIBUTES va = vt_vi_attr(&N, level, 65536, VIP_TRUE, rdma_read);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, a), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, b), VIP_SUCCESS);
}

static void destroy_pair(VIP_VI_HANDLE a, VIP_VI_HANDLE b)
{
	CHECK_EQ(vt_state(a), VIP_STATE_IDLE);
	CHECK_EQ(vt_state(b), VIP_STATE_IDLE);
	CHECK_RET(VipDestroyVi(a), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(b), VIP_SUCCESS);
}

/* 1: length error under reliable delivery. */
static void length_error(vt_descs *da, vt_descs *db, vt_mem *am, vt_mem *bm)
{
	VIP_VI_HANDLE a = NULL, b = NULL;
	VIP_DESCRIPTOR *d;
	int calls;

	VT_PHASE("length error: connect");
	make_pair(VIP_SERVICE_RELIABLE_DELIVERY, VIP_TRUE, &a, &b);
	vt_fill(&da->d[0], VIP_CONTROL_OP_SENDRECV, am->mh, am->p, 64, NULL, 0);
	CHECK_RET(VipPostRecv(a, &da->d[0], da->mh), VIP_SUCCESS);
	vt_connect_local(&N, a, b, "e1-srv", "e1-cli", VIP_SERVICE_RELIABLE_DELIVERY);

	VT_PHASE("length error: 256 bytes into a 64-byte receive");
	vt_pat_fill(bm->p, 256, 11);
	vt_fill(&db->d[0], VIP_CONTROL_OP_SENDRECV, bm->mh, bm->p, 256, NULL, 0);
	CHECK_RET(VipPostSend(b, &db->d[0], db->mh), VIP_SUCCESS);
	d = wait_recv(a, &da->d[0]);
	CHECK_BITS(d->CS.Status, VIP_STATUS_LENGTH_ERROR);
	CHECK_EQ(vt_state(a), VIP_STATE_ERROR);
	/* the send descriptor comes back (done or with an error; status not checked) */
	d = wait_send(b, &db->d[0]);
	printf("length error: sender status 0x%lx\n", (unsigned long)d->CS.Status);
	CHECK_STATE_WITHIN(b, VIP_STATE_ERROR, VT_WAIT);

	VT_PHASE("length error: error callback");
	calls = vt_flag_wait(&errored, VT_WAIT);
	CHECK_MSG(calls >= 1, "the error callback was not called within %d ms", VT_WAIT);
	pthread_mutex_lock(&err_mu);
	CHECK_PTR(err.ctx, &err_ctx);
	CHECK_PTR(err.first.NicHandle, N.nic);
	CHECK_MSG(err.first.ViHandle == a || err.first.ViHandle == b, "ViHandle %p is neither %p nor %p",
	    err.first.ViHandle, a, b);
	printf("length error: callback ResourceCode %d ErrorCode %d\n", (int)err.first.ResourceCode,
	    (int)err.first.ErrorCode);
	pthread_mutex_unlock(&err_mu);

	VT_PHASE("length error: VipDisconnect in ERROR");
	CHECK_RET(VipDisconnect(a), VIP_SUCCESS);
	CHECK_EQ(vt_state(a), VIP_STATE_IDLE);
	CHECK_RET(VipDisconnect(b), VIP_SUCCESS);
	CHECK_EQ(vt_state(b), VIP_STATE_IDLE);
	CHECK_RET(VipRecvDone(a, &d), VIP_NOT_DONE);
	destroy_pair(a, b);
}

/* 2: unreliable service drops a message nobody receives. */
static void unreliable(vt_descs *da, vt_descs *db, vt_mem *am, vt_mem *bm)
{
	VIP_VI_HANDLE a = NULL, b = NULL;
	VIP_DESCRIPTOR *d;

	VT_PHASE("unreliable: connect");
	CHECK_BITS(N.attr.ReliabilityLevelSupport, VIP_SERVICE_UNRELIABLE);
	make_pair(VIP_SERVICE_UNRELIABLE, VIP_FALSE, &a, &b);
	vt_connect_local(&N, a, b, "e2-srv", "e2-cli", VIP_SERVICE_UNRELIABLE);

	VT_PHASE("unreliable: send with no receive posted");
	vt_pat_fill(bm->p, 128, 21);
	vt_fill(&db->d[1], VIP_CONTROL_OP_SENDRECV, bm->mh, bm->p, 128, NULL, 0);
	CHECK_RET(VipPostSend(b, &db->d[1], db->mh), VIP_SUCCESS);
	d = wait_send(b, &db->d[1]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_SEND);
	vt_sleep_ms(100);
	CHECK_EQ(vt_state(b), VIP_STATE_CONNECTED);
	CHECK_EQ(vt_state(a), VIP_STATE_CONNECTED);
	CHECK_RET(VipRecvDone(a, &d), VIP_NOT_DONE);

	VT_PHASE("unreliable: the connection still carries messages");
	memset(am->p, 0, 256);
	vt_fill(&da->d[1], VIP_CONTROL_OP_SENDRECV, am->mh, am->p, 256, NULL, 0);
	CHECK_RET(VipPostRecv(a, &da->d[1], da->mh), VIP_SUCCESS);
	vt_pat_fill(bm->p, 128, 22);
	vt_fill(&db->d[2], VIP_CONTROL_OP_SENDRECV, bm->mh, bm->p, 128, NULL, 0);
	CHECK_RET(VipPostSend(b, &db->d[2], db->mh), VIP_SUCCESS);
	CHECK_DONE_OK(wait_send(b, &db->d[2]), VIP_STATUS_OP_SEND);
	d = wait_recv(a, &da->d[1]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, 128);
	CHECK_PAT(am->p, 128, 22, 0, 0);
	CHECK_EQ(vt_state(a), VIP_STATE_CONNECTED);

	VT_PHASE("unreliable: disconnect");
	CHECK_RET(VipDisconnect(b), VIP_SUCCESS);
	CHECK_EQ(vt_state(b), VIP_STATE_IDLE);
	vt_passive_teardown(a);
	destroy_pair(a, b);
}

/* 3: RDMA write into memory that does not allow it. */
static void rdma_protection(vt_descs *da, vt_descs *db, vt_mem *am, vt_mem *bm)
{
	VIP_VI_HANDLE a = NULL, b = NULL;
	VIP_DESCRIPTOR *d;
	vt_mem nw;
	vt_region_msg info;

	VT_PHASE("RDMA protection: connect");
	vt_reg(&N, &nw, 4096, VIP_FALSE, VIP_FALSE);
	memset(nw.p, 0xEE, 4096);
	make_pair(VIP_SERVICE_RELIABLE_DELIVERY, VIP_TRUE, &a, &b);
	vt_fill(&db->d[3], VIP_CONTROL_OP_SENDRECV, bm->mh, bm->p + 8192, 256, NULL, 0);
	CHECK_RET(VipPostRecv(b, &db->d[3], db->mh), VIP_SUCCESS);
	vt_connect_local(&N, a, b, "e3-srv", "e3-cli", VIP_SERVICE_RELIABLE_DELIVERY);

	VT_PHASE("RDMA protection: region message");
	memset(&info, 0, sizeof info);
	info.addr = vt_bits(nw.p);
	info.handle = nw.mh;
	info.len = 4096;
	memcpy(am->p + 8192, &info, sizeof info);
	vt_fill(&da->d[2], VIP_CONTROL_OP_SENDRECV, am->mh, am->p + 8192, sizeof info, NULL, 0);
	CHECK_RET(VipPostSend(a, &da->d[2], da->mh), VIP_SUCCESS);
	CHECK_DONE_OK(wait_send(a, &da->d[2]), VIP_STATUS_OP_SEND);
	d = wait_recv(b, &db->d[3]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	memcpy(&info, bm->p + 8192, sizeof info);

	VT_PHASE("RDMA protection: write");
	vt_pat_fill(bm->p, 256, 31);
	vt_fill_rdma(&db->d[4], VIP_CONTROL_OP_RDMAWRITE, info.addr, info.handle, bm->p, bm->mh, 256);
	CHECK_RET(VipPostSend(b, &db->d[4], db->mh), VIP_SUCCESS);
	d = wait_send(b, &db->d[4]);
	CHECK_BITS(d->CS.Status, VIP_STATUS_RDMA_PROT_ERROR);
	CHECK_STATE_WITHIN(b, VIP_STATE_ERROR, VT_WAIT);
	CHECK_FILL(nw.p, 4096, 0xEE);

	VT_PHASE("RDMA protection: disconnect");
	CHECK_RET(VipDisconnect(b), VIP_SUCCESS);
	CHECK_EQ(vt_state(b), VIP_STATE_IDLE);
	vt_passive_teardown(a);
	destroy_pair(a, b);
	vt_unreg(&N, &nw);
}

int main(void)
{
	vt_descs da, db;
	vt_mem am, bm;

	setvbuf(stdout, NULL, _IOLBF, 0);
	vt_flag_init(&errored);
	vt_open(&N, "remora0");
	VT_PHASE("VipErrorCallback");
	CHECK_RET(VipErrorCallback(N.nic, &err_ctx, on_error), VIP_SUCCESS);
	vt_descs_new(&N, &da, 8);
	vt_descs_new(&N, &db, 8);
	vt_reg(&N, &am, 16384, VIP_TRUE, VIP_TRUE);
	vt_reg(&N, &bm, 16384, VIP_TRUE, VIP_TRUE);

	length_error(&da, &db, &am, &bm);
	unreliable(&da, &db, &am, &bm);
	rdma_protection(&da, &db, &am, &bm);

	VT_PHASE("teardown");
	vt_unreg(&N, &am);
	vt_unreg(&N, &bm);
	vt_descs_free(&N, &da);
	vt_descs_free(&N, &db);
	vt_close(&N);
	printf("vipl_errors: VIPL OK\n");
	return 0;
}
