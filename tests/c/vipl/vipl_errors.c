/*
 * Error completions on in-process loopback connections (server thread A,
 * requester B on the main thread):
 *   1. reliable delivery: a send longer than the receive posted at A: the
 *      receive completes DONE|OP_RECEIVE|LENGTH_ERROR, the send (on its way)
 *      DONE|OP_SEND; both VIs go to VIP_STATE_ERROR, the error callback is
 *      called once for each (A: VIP_RESOURCE_DESCRIPTOR naming the receive,
 *      B: VIP_RESOURCE_VI, both VIP_ERROR_POST_DESC), and VipDisconnect in
 *      ERROR succeeds and returns the VIs to IDLE;
 *   2. unreliable: a send with no receive posted completes at the sender
 *      DONE|OP_SEND, the connection stays up, no callback; B's disconnect
 *      then moves A to ERROR with VIP_ERROR_CONN_LOST;
 *   3. reliable delivery: an RDMA write into memory registered without
 *      EnableRdmaWrite completes DONE|OP_RDMA_WRITE|RDMA_PROT_ERROR, the
 *      target's bytes untouched, both VIs to VIP_STATE_ERROR with
 *      VIP_ERROR_RDMAW_PROT (B's callback names the descriptor).
 * Every status word is compared whole; every error callback is recorded and
 * asserted after (exactly the calls expected).
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"

static vt_nic N;

/* Error callback records: every call, asserted after. */
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
static int err_ctx;
static struct {
	VIP_PVOID ctx;
	VIP_ERROR_DESCRIPTOR e;
} errs[8];
static int nerr;

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
	pthread_mutex_lock(&err_mu);
	if (nerr < 8) {
		errs[nerr].ctx = ctx;
		errs[nerr].e = *e;
	}
	nerr++;
	pthread_mutex_unlock(&err_mu);
}

static int err_count(void)
{
	int n;
	pthread_mutex_lock(&err_mu);
	n = nerr;
	pthread_mutex_unlock(&err_mu);
	return n;
}

/* Waits (VT_WAIT) for n calls, then checks there were exactly n, and forgets them. */
static void err_expect(int n)
{
	unsigned long long end = vt_now_ms() + VT_WAIT;
	while (err_count() < n && vt_now_ms() < end)
		vt_sleep_ms(2);
	vt_sleep_ms(50);
	CHECK_EQ(err_count(), n);
}

/* Checks the one call for VI vi: exact resource, error code and descriptor. */
static void err_check(VIP_VI_HANDLE vi, int resource, int code, VIP_DESCRIPTOR *desc)
{
	int i, found = -1;
	pthread_mutex_lock(&err_mu);
	for (i = 0; i < nerr && i < 8; i++)
		if (errs[i].e.ViHandle == vi) {
			CHECK_MSG(found < 0, "two error callbacks for VI %p", vi);
			found = i;
		}
	CHECK_MSG(found >= 0, "no error callback for VI %p", vi);
	CHECK_PTR(errs[found].ctx, &err_ctx);
	CHECK_PTR(errs[found].e.NicHandle, N.nic);
	CHECK_PTR(errs[found].e.CQHandle, NULL);
	CHECK_EQ(errs[found].e.ResourceCode, resource);
	CHECK_EQ(errs[found].e.ErrorCode, code);
	CHECK_PTR(errs[found].e.DescriptorPtr, desc);
	pthread_mutex_unlock(&err_mu);
}

static void err_clear(void)
{
	pthread_mutex_lock(&err_mu);
	nerr = 0;
	pthread_mutex_unlock(&err_mu);
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
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_LENGTH_ERROR);
	CHECK_STATE_WITHIN(a, VIP_STATE_ERROR, VT_WAIT);
	/* the send was on its way: it completes as a success, and its VI breaks */
	d = wait_send(b, &db->d[0]);
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
	CHECK_EQ(vt_state(b), VIP_STATE_ERROR);

	VT_PHASE("length error: error callback");
	err_expect(2);
	err_check(a, VIP_RESOURCE_DESCRIPTOR, VIP_ERROR_POST_DESC, &da->d[0]);
	err_check(b, VIP_RESOURCE_VI, VIP_ERROR_POST_DESC, NULL);
	err_clear();

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
	CHECK_EQ(err_count(), 0);

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
	CHECK_EQ(err_count(), 0);
	CHECK_RET(VipDisconnect(b), VIP_SUCCESS);
	CHECK_EQ(vt_state(b), VIP_STATE_IDLE);
	/* the peer's disconnect moves A to ERROR, told as a lost connection */
	CHECK_STATE_WITHIN(a, VIP_STATE_ERROR, VT_WAIT);
	err_expect(1);
	err_check(a, VIP_RESOURCE_VI, VIP_ERROR_CONN_LOST, NULL);
	err_clear();
	CHECK_RET(VipDisconnect(a), VIP_SUCCESS);
	CHECK_EQ(vt_drain_flushed(a), 0);
	CHECK_EQ(vt_state(a), VIP_STATE_IDLE);
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
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE | VIP_STATUS_RDMA_PROT_ERROR);
	CHECK_EQ(vt_state(b), VIP_STATE_ERROR);
	CHECK_STATE_WITHIN(a, VIP_STATE_ERROR, VT_WAIT);
	CHECK_FILL(nw.p, 4096, 0xEE);
	err_expect(2);
	err_check(b, VIP_RESOURCE_DESCRIPTOR, VIP_ERROR_RDMAW_PROT, &db->d[4]);
	err_check(a, VIP_RESOURCE_VI, VIP_ERROR_RDMAW_PROT, NULL);
	err_clear();

	VT_PHASE("RDMA protection: disconnect");
	CHECK_RET(VipDisconnect(b), VIP_SUCCESS);
	CHECK_EQ(vt_state(b), VIP_STATE_IDLE);
	CHECK_RET(VipDisconnect(a), VIP_SUCCESS);
	CHECK_EQ(vt_state(a), VIP_STATE_IDLE);
	vt_drain_flushed(a);
	destroy_pair(a, b);
	vt_unreg(&N, &nw);
}

int main(void)
{
	vt_descs da, db;
	vt_mem am, bm;

	setvbuf(stdout, NULL, _IOLBF, 0);
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
