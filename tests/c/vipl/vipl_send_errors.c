/*
 * Send-side errors on in-process loopback connections (server thread A,
 * requester B on the main thread; B sends), one case at a time:
 *   - from memory registered under another protection tag, and from memory
 *     deregistered before the post: DONE|OP_SEND|PROTECTION_ERROR;
 *   - a reserved control bit, opcode 0x3 (reserved), more segments than a
 *     descriptor may hold (253): DONE|OP_SEND|FORMAT_ERROR.
 *   1. reliable delivery: the whole status word, B in VIP_STATE_ERROR and
 *      exactly one error callback for B, VIP_ERROR_POST_DESC on
 *      VIP_RESOURCE_DESCRIPTOR naming the descriptor; A's receive gets no
 *      data (nothing written into it as a success);
 *   2. unreliable: every case in turn on one connection completes with the
 *      same status word, B stays CONNECTED, no error callback for B; a good
 *      send after them arrives intact.
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"

#define CASES 5
#define MANY_SEGS 253

static vt_nic N;
static const char *names[CASES] = {"other ptag", "deregistered", "reserved control bit", "opcode 0x3",
    "253 segments"};

static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
static int err_ctx;
static VIP_ERROR_DESCRIPTOR errs[8];
static int nerr;

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
	CHECK_PTR(ctx, &err_ctx);
	pthread_mutex_lock(&err_mu);
	if (nerr < 8)
		errs[nerr] = *e;
	nerr++;
	pthread_mutex_unlock(&err_mu);
}

/* The calls for VI vi so far; the last in *last. With some expected, waits first (up to
 * VT_WAIT: the callbacks run on the library's error thread, which a loaded machine may run
 * late) for a first call; then 100 ms for any late one. */
static int calls_for(VIP_VI_HANDLE vi, VIP_ERROR_DESCRIPTOR *last, int expected)
{
	int i, n = 0, waited = 0, seen = !expected;
	while (!seen && waited < VT_WAIT) {
		pthread_mutex_lock(&err_mu);
		seen = nerr > 0;
		pthread_mutex_unlock(&err_mu);
		if (!seen) {
			vt_sleep_ms(5);
			waited += 5;
		}
	}
	vt_sleep_ms(100);
	pthread_mutex_lock(&err_mu);
	for (i = 0; i < nerr && i < 8; i++)
		if (errs[i].ViHandle == vi) {
			n++;
			*last = errs[i];
		}
	CHECK_MSG(nerr <= 8, "%d error callbacks", nerr);
	pthread_mutex_unlock(&err_mu);
	return n;
}

/* The calls so far, for any VI, naming descriptor d. */
static int calls_naming(VIP_DESCRIPTOR *d)
{
	int i, n = 0;
	pthread_mutex_lock(&err_mu);
	for (i = 0; i < nerr && i < 8; i++)
		n += errs[i].DescriptorPtr == d;
	pthread_mutex_unlock(&err_mu);
	return n;
}

static void err_clear(void)
{
	pthread_mutex_lock(&err_mu);
	nerr = 0;
	pthread_mutex_unlock(&err_mu);
}

/* Memory for the cases: `good` under the VI's ptag; `other` under a second ptag; `big` a
 * registered region holding a descriptor with MANY_SEGS segments. */
static vt_mem good, other, big;
static vt_descs ds;
static VIP_PROTECTION_HANDLE ptag2;

/* Builds the descriptor of case k; returns it and its memory handle in *mh. */
static VIP_DESCRIPTOR *build(int k, VIP_MEM_HANDLE *mh)
{
	VIP_DESCRIPTOR *d = &ds.d[0];
	VIP_MEM_ATTRIBUTES ma;
	unsigned char *gone;
	VIP_MEM_HANDLE gone_mh;

	*mh = ds.mh;
	switch (k) {
	case 0:
		return vt_fill(d, VIP_CONTROL_OP_SENDRECV, other.mh, other.p, 64, NULL, 0);
	case 1:
		gone = good.p + 8192;
		ma.Ptag = N.ptag;
		ma.EnableRdmaWrite = VIP_FALSE;
		ma.EnableRdmaRead = VIP_FALSE;
		/* a second registration of part of `good`, gone before the post */
		CHECK_RET(VipRegisterMem(N.nic, gone, 4096, &ma, &gone_mh), VIP_SUCCESS);
		vt_fill(d, VIP_CONTROL_OP_SENDRECV, gone_mh, gone, 64, NULL, 0);
		CHECK_RET(VipDeregisterMem(N.nic, gone, gone_mh), VIP_SUCCESS);
		return d;
	case 2:
		return vt_fill(d, VIP_CONTROL_OP_SENDRECV | 0x10, good.mh, good.p, 64, NULL, 0);
	case 3:
		return vt_fill(d, VIP_CONTROL_OP_RESERVED, good.mh, good.p, 64, NULL, 0);
	default:
		d = (VIP_DESCRIPTOR *)big.p;
		vt_fill(d, VIP_CONTROL_OP_SENDRECV, good.mh, good.p, 64, NULL, 0);
		d->CS.SegCount = MANY_SEGS;
		*mh = big.mh;
		return d;
	}
}

static VIP_UINT32 expected(int k)
{
	return VIP_STATUS_DONE | VIP_STATUS_OP_SEND | (k < 2 ? VIP_STATUS_PROTECTION_ERROR : VIP_STATUS_FORMAT_ERROR);
}

/* Posts case k from b; returns the completed descriptor after checking its status word. */
static VIP_DESCRIPTOR *send_case(VIP_VI_HANDLE b, int k)
{
	VIP_MEM_HANDLE mh;
	VIP_DESCRIPTOR *d = build(k, &mh), *got = NULL;
	printf("vipl_send_errors: case %s\n", names[k]);
	CHECK_RET(VipPostSend(b, d, mh), VIP_SUCCESS);
	CHECK_RET(VipSendWait(b, VT_WAIT, &got), VIP_SUCCESS);
	CHECK_PTR(got, d);
	CHECK_MSG(got->CS.Status == expected(k), "case %s: status %#x, not %#x", names[k], (unsigned)got->CS.Status,
	    (unsigned)expected(k));
	return got;
}

static void pair(VIP_RELIABILITY_LEVEL level, VIP_VI_HANDLE *a, VIP_VI_HANDLE *b, VIP_DESCRIPTOR *recv, int k)
{
	VIP_VI_ATTRIBUTES va = vt_vi_attr(&N, level, 65536, VIP_FALSE, VIP_FALSE);
	char sd[32], cd[32];
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, a), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, b), VIP_SUCCESS);
	vt_fill(recv, VIP_CONTROL_OP_SENDRECV, good.mh, good.p + 4096, 4096, NULL, 0);
	CHECK_RET(VipPostRecv(*a, recv, ds.mh), VIP_SUCCESS);
	snprintf(sd, sizeof sd, "se-srv-%d-%d", (int)level, k);
	snprintf(cd, sizeof cd, "se-cli-%d-%d", (int)level, k);
	vt_connect_local(&N, *a, *b, sd, cd, level);
}

/* 1: see the head of the file. */
static void reliable_case(int k)
{
	VIP_VI_HANDLE a = NULL, b = NULL;
	VIP_ERROR_DESCRIPTOR e;
	VIP_DESCRIPTOR *d, *r = NULL;

	pair(VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, &ds.d[1], k);
	err_clear();
	d = send_case(b, k);
	CHECK_STATE_WITHIN(b, VIP_STATE_ERROR, VT_WAIT);
	CHECK_EQ(calls_for(b, &e, 1), 1);
	CHECK_PTR(e.NicHandle, N.nic);
	CHECK_PTR(e.CQHandle, NULL);
	CHECK_EQ(e.ResourceCode, VIP_RESOURCE_DESCRIPTOR);
	CHECK_EQ(e.ErrorCode, VIP_ERROR_POST_DESC);
	CHECK_PTR(e.DescriptorPtr, d);
	CHECK_EQ(calls_naming(d), 1);
	/* the receiver got no message: its receive completes only flushed, if at all */
	if (VipRecvDone(a, &r) == VIP_SUCCESS) {
		CHECK_PTR(r, &ds.d[1]);
		CHECK_BITS(r->CS.Status, VIP_STATUS_DESC_FLUSHED_ERROR);
	}
	CHECK_RET(VipDisconnect(b), VIP_SUCCESS);
	CHECK_EQ(vt_state(b), VIP_STATE_IDLE);
	vt_wait_state_not(a, VIP_STATE_CONNECTED, VT_WAIT);
	if (vt_state(a) == VIP_STATE_ERROR)
		CHECK_RET(VipDisconnect(a), VIP_SUCCESS);
	while (VipRecvDone(a, &r) == VIP_SUCCESS)
		CHECK_BITS(r->CS.Status, VIP_STATUS_DESC_FLUSHED_ERROR);
	CHECK_EQ(vt_state(a), VIP_STATE_IDLE);
	CHECK_RET(VipDestroyVi(a), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(b), VIP_SUCCESS);
	err_clear();
}

/* 2: see the head of the file. */
static void unreliable_cases(void)
{
	VIP_VI_HANDLE a = NULL, b = NULL;
	VIP_ERROR_DESCRIPTOR e;
	VIP_DESCRIPTOR *d = NULL;
	int k;

	CHECK_BITS(N.attr.ReliabilityLevelSupport, VIP_SERVICE_UNRELIABLE);
	pair(VIP_SERVICE_UNRELIABLE, &a, &b, &ds.d[1], 9);
	err_clear();
	for (k = 0; k < CASES; k++) {
		send_case(b, k);
		CHECK_EQ(vt_state(b), VIP_STATE_CONNECTED);
	}
	CHECK_EQ(calls_for(b, &e, 0), 0);
	CHECK_EQ(vt_state(b), VIP_STATE_CONNECTED);
	CHECK_EQ(vt_state(a), VIP_STATE_CONNECTED);
	CHECK_RET(VipRecvDone(a, &d), VIP_NOT_DONE);

	VT_PHASE("unreliable: a good send after the errors arrives intact");
	vt_pat_fill(good.p, 300, 41);
	vt_fill(&ds.d[0], VIP_CONTROL_OP_SENDRECV, good.mh, good.p, 300, NULL, 0);
	vt_send_arrives(b, &ds.d[0], ds.mh, a, &ds.d[1], 300);
	CHECK_PAT(good.p + 4096, 300, 41, 0, 0);

	vt_end_pair(b, a);
	err_clear();
}

int main(void)
{
	VIP_MEM_ATTRIBUTES ma;
	int k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	vt_open(&N, "remora0");
	CHECK_RET(VipErrorCallback(N.nic, &err_ctx, on_error), VIP_SUCCESS);
	vt_descs_new(&N, &ds, 4);
	vt_reg(&N, &good, 16384, VIP_FALSE, VIP_FALSE);
	vt_reg(&N, &big, 8192, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreatePtag(N.nic, &ptag2), VIP_SUCCESS);
	other.p = vt_alloc(4096);
	other.len = 4096;
	ma.Ptag = ptag2;
	ma.EnableRdmaWrite = VIP_FALSE;
	ma.EnableRdmaRead = VIP_FALSE;
	CHECK_RET(VipRegisterMem(N.nic, other.p, 4096, &ma, &other.mh), VIP_SUCCESS);

	for (k = 0; k < CASES; k++) {
		VT_PHASE(names[k]);
		reliable_case(k);
	}
	VT_PHASE("unreliable: every case, the VI stays connected");
	unreliable_cases();

	VT_PHASE("teardown");
	vt_unreg(&N, &other);
	CHECK_RET(VipDestroyPtag(N.nic, ptag2), VIP_SUCCESS);
	vt_unreg(&N, &big);
	vt_unreg(&N, &good);
	vt_descs_free(&N, &ds);
	vt_close(&N);
	printf("vipl_send_errors: VIPL OK\n");
	return 0;
}
