/*
 * Completion queues' sizes and notifications, on in-process loopback
 * connections (server thread A, requester B; server C, requester D); A's
 * receives report to RCQ, B's sends to SCQ, C's sends and receives to RCQ:
 *
 *   1. VipCreateCQ / VipResizeCQ of 0 entries: VIP_INVALID_PARAMETER; of more
 *      than MaxCQEntries: VIP_ERROR_RESOURCE;
 *   2. RCQ of 4 entries holding 2 completions: VipResizeCQ to 1 is
 *      VIP_ERROR_RESOURCE and the size stays 4 (a third completion is queued,
 *      with no callback); drained and two completions queued again, to 2
 *      succeeds;
 *   3. a third completion finds RCQ (2 entries) full: it is not queued
 *      (VipCQDone gives the first two, then VIP_NOT_DONE), its descriptor is
 *      still on A's receive queue (VipRecvDone gives all three, in order),
 *      and the error callback is called once with VIP_RESOURCE_CQ,
 *      VIP_ERROR_CATASTROPHIC, RCQ's handle, A's and the dropped descriptor;
 *   3b. while RCQ (2 entries) is full, C's send queue, A's receive queue
 *      (twice) and C's receive queue lose completions: the callback is
 *      called once for each, naming the VI and the dropped descriptor;
 *      VipSendDone / VipRecvDone on the named VIs give every descriptor;
 *   4. three completions landed while RCQ (2 entries) waits: VipResizeCQ to
 *      4 takes them in with no callback; RCQ then holds 4 completions, with
 *      no callback;
 *   5. VipCQNotify fires on the next completion with its context, the NIC,
 *      the VI and the queue: A and VIP_TRUE on RCQ, B and VIP_FALSE on SCQ.
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"

static vt_nic N;
static VIP_VI_HANDLE A, B, C, D;
static VIP_CQ_HANDLE RCQ, SCQ;
static vt_descs DA, DB, DC, DD;
static vt_mem MA, MB, MC, MD;

/* Error callback records, in the order the calls came (on the NIC's error thread). */
#define MAX_ERR 8
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int nerr;
static VIP_ERROR_DESCRIPTOR errs[MAX_ERR];
static int err_ctx;

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
	pthread_mutex_lock(&mu);
	if (nerr < MAX_ERR && ctx == &err_ctx)
		errs[nerr] = *e;
	nerr++;
	pthread_mutex_unlock(&mu);
}

static int errors(void);

/* Waits until n callbacks came (VT_WAIT at most), then a moment more for any extra. */
static void wait_errors(int n)
{
	unsigned long long end = vt_now_ms() + VT_WAIT;
	while (errors() < n && vt_now_ms() < end)
		vt_sleep_ms(2);
	vt_sleep_ms(50);
}

/* Among callbacks first..nerr-1, one overflow of RCQ that names vi and descriptor d. */
static void check_overflow(int first, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d)
{
	int i, found = 0;
	pthread_mutex_lock(&mu);
	for (i = first; i < nerr && i < MAX_ERR; i++) {
		if (errs[i].ViHandle != vi || errs[i].DescriptorPtr != d)
			continue;
		found++;
		CHECK_PTR(errs[i].NicHandle, N.nic);
		CHECK_PTR(errs[i].CQHandle, RCQ);
		CHECK_EQ(errs[i].ResourceCode, VIP_RESOURCE_CQ);
		CHECK_EQ(errs[i].ErrorCode, VIP_ERROR_CATASTROPHIC);
	}
	pthread_mutex_unlock(&mu);
	CHECK_MSG(found == 1, "%d callbacks name VI %p and descriptor %p", found, (void *)vi, (void *)d);
}

static int errors(void)
{
	int n;
	pthread_mutex_lock(&mu);
	n = nerr;
	pthread_mutex_unlock(&mu);
	return n;
}

/* CQ notification records, one per queue. */
typedef struct {
	vt_flag fired;
	VIP_PVOID ctx;
	VIP_NIC_HANDLE nic;
	VIP_VI_HANDLE vi;
	VIP_BOOLEAN recvq;
} note_t;
static note_t rnote, snote;

static void on_cq(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_BOOLEAN recvq)
{
	note_t *n = (note_t *)ctx;
	n->ctx = ctx;
	n->nic = nic;
	n->vi = vi;
	n->recvq = recvq;
	vt_flag_set(&n->fired);
}

/* Receive k posted at A (100 bytes of room each). */
static void post_recv(int k)
{
	vt_fill(&DA.d[k], VIP_CONTROL_OP_SENDRECV, MA.mh, MA.p + (size_t)k * 128, 128, NULL, 0);
	CHECK_RET(VipPostRecv(A, &DA.d[k], DA.mh), VIP_SUCCESS);
}

/* Message seed from B; its send completion taken off SCQ and B's send queue. */
static void send_one(unsigned seed)
{
	VIP_DESCRIPTOR *d = NULL;
	VIP_VI_HANDLE vi = NULL;
	VIP_BOOLEAN rq = VIP_TRUE;
	vt_pat_fill(MB.p, 100, seed);
	vt_fill(&DB.d[0], VIP_CONTROL_OP_SENDRECV, MB.mh, MB.p, 100, NULL, 0);
	CHECK_RET(VipPostSend(B, &DB.d[0], DB.mh), VIP_SUCCESS);
	CHECK_RET(VipCQWait(SCQ, VT_WAIT, &vi, &rq), VIP_SUCCESS);
	CHECK_PTR(vi, B);
	CHECK_EQ(rq, VIP_FALSE);
	CHECK_RET(VipSendDone(B, &d), VIP_SUCCESS);
	CHECK_PTR(d, &DB.d[0]);
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
}

/* VipCQDone on RCQ: A's receive queue. */
static void cq_done_a(void)
{
	VIP_VI_HANDLE vi = NULL;
	VIP_BOOLEAN rq = VIP_FALSE;
	CHECK_RET(VipCQDone(RCQ, &vi, &rq), VIP_SUCCESS);
	CHECK_PTR(vi, A);
	CHECK_EQ(rq, VIP_TRUE);
}

/* VipRecvDone on A: receive k with message seed. */
static void recv_done(int k, unsigned seed)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipRecvDone(A, &d), VIP_SUCCESS);
	CHECK_PTR(d, &DA.d[k]);
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, 100);
	CHECK_PAT(MA.p + (size_t)k * 128, 100, seed, 0, 0);
}

/* Receive k of 128 bytes posted on vi (descriptors ds, buffers m). */
static void post_recv_on(VIP_VI_HANDLE vi, vt_descs *ds, vt_mem *m, int k)
{
	vt_fill(&ds->d[k], VIP_CONTROL_OP_SENDRECV, m->mh, m->p + (size_t)k * 128, 128, NULL, 0);
	CHECK_RET(VipPostRecv(vi, &ds->d[k], ds->mh), VIP_SUCCESS);
}

/* Send k of 100 bytes (seed) posted on vi; it completes inside VipPostSend. */
static void post_send_on(VIP_VI_HANDLE vi, vt_descs *ds, vt_mem *m, int k, unsigned seed)
{
	vt_pat_fill(m->p + (size_t)k * 128, 100, seed);
	vt_fill(&ds->d[k], VIP_CONTROL_OP_SENDRECV, m->mh, m->p + (size_t)k * 128, 100, NULL, 0);
	CHECK_RET(VipPostSend(vi, &ds->d[k], ds->mh), VIP_SUCCESS);
}

int main(void)
{
	VIP_VI_ATTRIBUTES va;
	VIP_CQ_HANDLE cq = NULL;
	VIP_VI_HANDLE vi = NULL;
	VIP_BOOLEAN rq;
	int k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	vt_open(&N, "remora0");
	CHECK_RET(VipErrorCallback(N.nic, &err_ctx, on_error), VIP_SUCCESS);
	vt_descs_new(&N, &DA, 4);
	vt_descs_new(&N, &DB, 1);
	vt_descs_new(&N, &DC, 4);
	vt_descs_new(&N, &DD, 4);
	vt_reg(&N, &MA, 4096, VIP_FALSE, VIP_FALSE);
	vt_reg(&N, &MB, 4096, VIP_FALSE, VIP_FALSE);
	vt_reg(&N, &MC, 4096, VIP_FALSE, VIP_FALSE);
	vt_reg(&N, &MD, 4096, VIP_FALSE, VIP_FALSE);

	VT_PHASE("1: counts");
	CHECK_RET(VipCreateCQ(N.nic, 0, &cq), VIP_INVALID_PARAMETER);
	CHECK_RET(VipCreateCQ(N.nic, N.attr.MaxCQEntries + 1, &cq), VIP_ERROR_RESOURCE);
	CHECK_RET(VipCreateCQ(N.nic, 4, &RCQ), VIP_SUCCESS);
	CHECK_RET(VipCreateCQ(N.nic, 4, &SCQ), VIP_SUCCESS);
	CHECK_RET(VipResizeCQ(RCQ, 0), VIP_INVALID_PARAMETER);
	CHECK_RET(VipResizeCQ(RCQ, N.attr.MaxCQEntries + 1), VIP_ERROR_RESOURCE);

	VT_PHASE("connect");
	va = vt_vi_attr(&N, VIP_SERVICE_RELIABLE_DELIVERY, 4096, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, RCQ, &A), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, &va, SCQ, NULL, &B), VIP_SUCCESS);
	for (k = 0; k < 3; k++)
		post_recv(k);
	vt_connect_local(&N, A, B, "cq-srv", "cq-cli", VIP_SERVICE_RELIABLE_DELIVERY);
	/* C: receive 0, sends 1..3; D: receives 0..2, send 3 */
	CHECK_RET(VipCreateVi(N.nic, &va, RCQ, RCQ, &C), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &D), VIP_SUCCESS);
	post_recv_on(C, &DC, &MC, 0);
	for (k = 0; k < 3; k++)
		post_recv_on(D, &DD, &MD, k);
	vt_connect_local(&N, C, D, "cq-srv-c", "cq-cli-d", VIP_SERVICE_RELIABLE_DELIVERY);

	VT_PHASE("2: resize below the completions queued");
	send_one(1);
	send_one(2);
	CHECK_RET(VipResizeCQ(RCQ, 1), VIP_ERROR_RESOURCE);
	/* The size stayed 4: a third completion is queued, with no callback. */
	send_one(3);
	vt_sleep_ms(50);
	CHECK_EQ(errors(), 0);
	for (k = 0; k < 3; k++)
		cq_done_a();
	CHECK_RET(VipCQDone(RCQ, &vi, &rq), VIP_NOT_DONE);
	recv_done(0, 1);
	recv_done(1, 2);
	recv_done(2, 3);
	CHECK_EQ(errors(), 0);
	/* Again two completions queued (receives 0..2 posted anew), then the resize to 2. */
	for (k = 0; k < 3; k++)
		post_recv(k);
	send_one(1);
	send_one(2);
	CHECK_RET(VipResizeCQ(RCQ, 2), VIP_SUCCESS);

	VT_PHASE("3: a completion that finds the queue full");
	send_one(3);
	cq_done_a();
	cq_done_a();
	CHECK_RET(VipCQDone(RCQ, &vi, &rq), VIP_NOT_DONE);
	recv_done(0, 1);
	recv_done(1, 2);
	recv_done(2, 3);
	CHECK_STATE_WITHIN(A, VIP_STATE_CONNECTED, 0);
	wait_errors(1);
	CHECK_EQ(errors(), 1);
	check_overflow(0, A, &DA.d[2]);

	VT_PHASE("3b: three work queues of two VIs overflow before the queue has room");
	/* C's sends 1 and 2 fill RCQ; send 3 finds it full (C's send queue). */
	for (k = 1; k <= 3; k++)
		post_send_on(C, &DC, &MC, k, 20 + (unsigned)k);
	/* Two messages land at A and one at C; the next look takes them in: full. */
	post_recv(0);
	post_recv(1);
	send_one(30);
	send_one(31);
	{
		VIP_DESCRIPTOR *d = NULL;
		post_send_on(D, &DD, &MD, 3, 40);
		CHECK_RET(VipSendWait(D, VT_WAIT, &d), VIP_SUCCESS);
		CHECK_PTR(d, &DD.d[3]);
	}
	CHECK_RET(VipCQDone(RCQ, &vi, &rq), VIP_SUCCESS);
	CHECK_PTR(vi, C);
	CHECK_EQ(rq, VIP_FALSE);
	CHECK_RET(VipCQDone(RCQ, &vi, &rq), VIP_SUCCESS);
	CHECK_PTR(vi, C);
	CHECK_EQ(rq, VIP_FALSE);
	CHECK_RET(VipCQDone(RCQ, &vi, &rq), VIP_NOT_DONE);
	/* One call per completion dropped, each naming its VI and descriptor. */
	wait_errors(5);
	CHECK_EQ(errors(), 5);
	check_overflow(1, C, &DC.d[3]);
	check_overflow(1, A, &DA.d[0]);
	check_overflow(1, A, &DA.d[1]);
	check_overflow(1, C, &DC.d[0]);
	CHECK_EQ(DC.d[3].CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
	CHECK_EQ(DC.d[0].CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
	/* The recovery: every descriptor waits on its VI's work queue. */
	recv_done(0, 30);
	recv_done(1, 31);
	{
		VIP_DESCRIPTOR *d = NULL;
		CHECK_RET(VipRecvDone(C, &d), VIP_SUCCESS);
		CHECK_PTR(d, &DC.d[0]);
		CHECK_EQ(d->CS.Length, 100);
		CHECK_PAT(MC.p, 100, 40, 0, 0);
		CHECK_RET(VipRecvDone(C, &d), VIP_NOT_DONE);
		for (k = 1; k <= 3; k++) {
			CHECK_RET(VipSendDone(C, &d), VIP_SUCCESS);
			CHECK_PTR(d, &DC.d[k]);
		}
		CHECK_RET(VipSendDone(C, &d), VIP_NOT_DONE);
		for (k = 0; k < 3; k++) {
			CHECK_RET(VipRecvDone(D, &d), VIP_SUCCESS);
			CHECK_PTR(d, &DD.d[k]);
			CHECK_PAT(MD.p + (size_t)k * 128, 100, 21 + (unsigned)k, 0, 0);
		}
	}
	CHECK_STATE_WITHIN(A, VIP_STATE_CONNECTED, 0);
	CHECK_STATE_WITHIN(C, VIP_STATE_CONNECTED, 0);

	VT_PHASE("4: grown while full, then four completions queued");
	/* Three messages land; RCQ (2 entries) has not taken them in. */
	for (k = 0; k < 3; k++)
		post_recv(k);
	for (k = 0; k < 3; k++)
		send_one(50 + (unsigned)k);
	CHECK_RET(VipResizeCQ(RCQ, 4), VIP_SUCCESS);
	for (k = 0; k < 3; k++)
		cq_done_a();
	CHECK_RET(VipCQDone(RCQ, &vi, &rq), VIP_NOT_DONE);
	for (k = 0; k < 3; k++)
		recv_done(k, 50 + (unsigned)k);
	vt_sleep_ms(50);
	CHECK_EQ(errors(), 5);
	for (k = 0; k < 4; k++)
		post_recv(k);
	for (k = 0; k < 4; k++)
		send_one(10 + (unsigned)k);
	for (k = 0; k < 4; k++)
		cq_done_a();
	CHECK_RET(VipCQDone(RCQ, &vi, &rq), VIP_NOT_DONE);
	for (k = 0; k < 4; k++)
		recv_done(k, 10 + (unsigned)k);
	vt_sleep_ms(50);
	CHECK_EQ(errors(), 5);

	VT_PHASE("5: VipCQNotify");
	vt_flag_init(&rnote.fired);
	vt_flag_init(&snote.fired);
	CHECK_RET(VipCQNotify(RCQ, &rnote, on_cq), VIP_SUCCESS);
	CHECK_RET(VipCQNotify(SCQ, &snote, on_cq), VIP_SUCCESS);
	vt_sleep_ms(50);
	CHECK_EQ(vt_flag_wait(&rnote.fired, 0), 0);
	CHECK_EQ(vt_flag_wait(&snote.fired, 0), 0);
	post_recv(0);
	vt_pat_fill(MB.p, 100, 20);
	vt_fill(&DB.d[0], VIP_CONTROL_OP_SENDRECV, MB.mh, MB.p, 100, NULL, 0);
	CHECK_RET(VipPostSend(B, &DB.d[0], DB.mh), VIP_SUCCESS);
	CHECK_EQ(vt_flag_wait(&snote.fired, VT_WAIT), 1);
	CHECK_PTR(snote.ctx, &snote);
	CHECK_PTR(snote.nic, N.nic);
	CHECK_PTR(snote.vi, B);
	CHECK_EQ(snote.recvq, VIP_FALSE);
	CHECK_EQ(vt_flag_wait(&rnote.fired, VT_WAIT), 1);
	CHECK_PTR(rnote.ctx, &rnote);
	CHECK_PTR(rnote.nic, N.nic);
	CHECK_PTR(rnote.vi, A);
	CHECK_EQ(rnote.recvq, VIP_TRUE);
	/* the notifications took the queues' entries; the descriptors wait on the VIs */
	CHECK_RET(VipCQDone(RCQ, &vi, &rq), VIP_NOT_DONE);
	CHECK_RET(VipCQDone(SCQ, &vi, &rq), VIP_NOT_DONE);
	recv_done(0, 20);
	{
		VIP_DESCRIPTOR *d = NULL;
		CHECK_RET(VipSendDone(B, &d), VIP_SUCCESS);
		CHECK_PTR(d, &DB.d[0]);
	}

	VT_PHASE("teardown");
	CHECK_RET(VipDisconnect(B), VIP_SUCCESS);
	vt_passive_teardown(A);
	CHECK_RET(VipDisconnect(D), VIP_SUCCESS);
	vt_passive_teardown(C);
	CHECK_RET(VipDestroyVi(A), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(B), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(C), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(D), VIP_SUCCESS);
	CHECK_RET(VipDestroyCQ(RCQ), VIP_SUCCESS);
	CHECK_RET(VipDestroyCQ(SCQ), VIP_SUCCESS);
	vt_unreg(&N, &MA);
	vt_unreg(&N, &MB);
	vt_unreg(&N, &MC);
	vt_unreg(&N, &MD);
	vt_descs_free(&N, &DA);
	vt_descs_free(&N, &DB);
	vt_descs_free(&N, &DC);
	vt_descs_free(&N, &DD);
	vt_close(&N);
	printf("vipl_cq: VIPL OK\n");
	return 0;
}
