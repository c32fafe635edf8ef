/*
 * The reliability levels' consequences, between two processes: the server
 * (receiver, RDMA target) accepts one connection per case on discriminator
 * DISC-<case>, the client (sender, RDMA initiator) requests it.  Each case
 * checks the exact status word of the descriptors, the VI states, and what
 * the error callback was called with (recorded in the callback, asserted
 * after: exactly one call per broken VI, its VI handle, resource and error
 * codes, and the descriptor where one is named):
 *
 *   rd-norecv   reliable delivery, no receive posted: the send completes
 *               DONE|OP_SEND|TRANSPORT_ERROR and its VI is in ERROR when
 *               VipPostSend returns (callback VIP_RESOURCE_VI,
 *               VIP_ERROR_CONN_LOST); the receiver's VI goes to ERROR with
 *               VIP_ERROR_RECVQ_EMPTY (VIP_RESOURCE_VI);
 *   rr-norecv   the same at reliable reception;
 *   rd-length   reliable delivery, 32 bytes into a 64-byte receive (a plain
 *               success on both sides), then 256 bytes into one: the
 *               send completes DONE|OP_SEND (it was on its way), the
 *               receive DONE|OP_RECEIVE|LENGTH_ERROR; both VIs to ERROR with
 *               VIP_ERROR_POST_DESC (the sender's VIP_RESOURCE_VI, the
 *               receiver's VIP_RESOURCE_DESCRIPTOR naming the receive);
 *   rr-length   the same at reliable reception, where the send completes
 *               DONE|OP_SEND|REMOTE_DESC_ERROR and its callback names it
 *               (VIP_RESOURCE_DESCRIPTOR);
 *   rdma-read   reliable delivery, an RDMA read of memory registered
 *               without EnableRdmaRead (the VIs allow it): the read
 *               completes DONE|OP_RDMA_READ|RDMA_PROT_ERROR, the local
 *               buffer untouched; both VIs to ERROR with VIP_ERROR_RDMAR_PROT
 *               (the reader's callback names the descriptor);
 *   rdma-write  reliable delivery, an RDMA write to a VI created without
 *               EnableRdmaWrite (the memory allows it): the write completes
 *               DONE|OP_RDMA_WRITE|RDMA_PROT_ERROR, the target's bytes
 *               untouched; both VIs to ERROR with VIP_ERROR_RDMAW_PROT;
 *   unrel       unreliable, no receive posted: the send completes DONE|OP_SEND
 *               (dropped), the VI stays CONNECTED, no callback.
 *
 * Usage: vipl_reliability server DISC
 *        vipl_reliability client SERVER_NODE DISC      (REMORA_NODE set)
 */
#include "vipl_test.h"

enum { RD_NORECV, RR_NORECV, RD_LENGTH, RR_LENGTH, RDMA_READ, RDMA_WRITE, UNREL, NCASES };
static const char *const case_name[NCASES] = { "rd-norecv", "rr-norecv", "rd-length", "rr-length",
	"rdma-read", "rdma-write", "unrel" };

static vt_nic N;
static vt_descs D; /* 0: receive, 1: send, 2: the length cases' first receive */
static vt_mem M;   /* 0..2047 receive buffer, 2048..4095 the first receive's, 4096.. send buffer */
static vt_mem T;   /* the RDMA target (server) or local RDMA buffer (client) */

/* ------------------------------------------------------------------------
 * The error callback's record
 * ---------------------------------------------------------------------- */

typedef struct {
	VIP_PVOID ctx;
	VIP_NIC_HANDLE nic;
	VIP_VI_HANDLE vi;
	VIP_CQ_HANDLE cq;
	VIP_DESCRIPTOR *desc;
	int resource, code;
} rec_t;

static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static rec_t recs[8];
static int nrec;
static int ctx_word;

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
	pthread_mutex_lock(&rec_mu);
	if (nrec < 8) {
		rec_t *r = &recs[nrec];
		r->ctx = ctx;
		r->nic = e->NicHandle;
		r->vi = e->ViHandle;
		r->cq = e->CQHandle;
		r->desc = e->DescriptorPtr;
		r->resource = (int)e->ResourceCode;
		r->code = (int)e->ErrorCode;
	}
	nrec++;
	pthread_mutex_unlock(&rec_mu);
}

static int records(void)
{
	int n;
	pthread_mutex_lock(&rec_mu);
	n = nrec;
	pthread_mutex_unlock(&rec_mu);
	return n;
}

static void records_clear(void)
{
	pthread_mutex_lock(&rec_mu);
	nrec = 0;
	memset(recs, 0, sizeof recs);
	pthread_mutex_unlock(&rec_mu);
}

/* Waits (VT_WAIT) for the callback, then checks it was called once, with exactly this. */
static void check_callback(VIP_VI_HANDLE vi, int resource, int code, VIP_DESCRIPTOR *desc)
{
	unsigned long long end = vt_now_ms() + VT_WAIT;
	rec_t r;
	while (records() == 0 && vt_now_ms() < end)
		vt_sleep_ms(2);
	vt_sleep_ms(50); /* a second call, if any, would come now */
	CHECK_MSG(records() == 1, "the error callback was called %d times", records());
	pthread_mutex_lock(&rec_mu);
	r = recs[0];
	pthread_mutex_unlock(&rec_mu);
	CHECK_PTR(r.ctx, &ctx_word);
	CHECK_PTR(r.nic, N.nic);
	CHECK_PTR(r.vi, vi);
	CHECK_PTR(r.cq, NULL);
	CHECK_EQ(r.resource, resource);
	CHECK_EQ(r.code, code);
	CHECK_PTR(r.desc, desc);
}

/* ------------------------------------------------------------------------
 * Per case
 * ---------------------------------------------------------------------- */

static VIP_RELIABILITY_LEVEL level_of(int k)
{
	switch (k) {
	case RR_NORECV:
	case RR_LENGTH:
		return VIP_SERVICE_RELIABLE_RECEPTION;
	case UNREL:
		return VIP_SERVICE_UNRELIABLE;
	default:
		return VIP_SERVICE_RELIABLE_DELIVERY;
	}
}

static VIP_VI_HANDLE make_vi(int k, int server)
{
	VIP_VI_HANDLE vi = NULL;
	VIP_RELIABILITY_LEVEL l = level_of(k);
	VIP_BOOLEAN rd = l == VIP_SERVICE_UNRELIABLE ? VIP_FALSE : VIP_TRUE;
	/* Only the rdma-write target refuses RDMA writes, by its VI's attribute. */
	VIP_VI_ATTRIBUTES va = vt_vi_attr(&N, l, 65536, (server && k == RDMA_WRITE) ? VIP_FALSE : VIP_TRUE, rd);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
	return vi;
}

static void post_recv(VIP_VI_HANDLE vi, size_t len)
{
	vt_fill(&D.d[0], VIP_CONTROL_OP_SENDRECV, M.mh, M.p, len, NULL, 0);
	CHECK_RET(VipPostRecv(vi, &D.d[0], D.mh), VIP_SUCCESS);
}

static VIP_DESCRIPTOR *recv_wait_for(VIP_VI_HANDLE vi, VIP_DESCRIPTOR *want)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipRecvWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, want);
	return d;
}

static VIP_DESCRIPTOR *recv_wait(VIP_VI_HANDLE vi)
{
	return recv_wait_for(vi, &D.d[0]);
}

/* The send of n bytes (seed) posted at the client, its completion taken. */
static VIP_DESCRIPTOR *send_bytes(VIP_VI_HANDLE vi, size_t n, unsigned seed);

static VIP_DESCRIPTOR *send_wait(VIP_VI_HANDLE vi)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipSendWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[1]);
	return d;
}

static VIP_DESCRIPTOR *send_bytes(VIP_VI_HANDLE vi, size_t n, unsigned seed)
{
	vt_pat_fill(M.p + 4096, n, seed);
	vt_fill(&D.d[1], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + 4096, n, NULL, 0);
	CHECK_RET(VipPostSend(vi, &D.d[1], D.mh), VIP_SUCCESS);
	return send_wait(vi);
}

/* A broken VI: disconnected from ERROR (to IDLE), its flushed receives taken, destroyed. */
static void end_vi(VIP_VI_HANDLE vi)
{
	VIP_VI_STATE st = vt_state(vi);
	CHECK_MSG(st == VIP_STATE_ERROR || st == VIP_STATE_CONNECTED, "state %d at the end", (int)st);
	CHECK_RET(VipDisconnect(vi), VIP_SUCCESS);
	CHECK_EQ(vt_state(vi), VIP_STATE_IDLE);
	vt_drain_flushed(vi);
	CHECK_RET(VipDestroyVi(vi), VIP_SUCCESS);
}

static void server_case(int k, const char *disc)
{
	VIP_VI_HANDLE vi = make_vi(k, 1);
	VIP_NET_ADDRESS *local, *remote = vt_addr_space(&N);
	VIP_VI_ATTRIBUTES ra;
	VIP_CONN_HANDLE conn = NULL;
	VIP_DESCRIPTOR *d;
	vt_region_msg info;
	char name[80];

	snprintf(name, sizeof name, "%s-%d", disc, k);
	local = vt_addr(&N, vt_node(), name);
	records_clear();
	if (k == RD_LENGTH || k == RR_LENGTH) {
		/* one that fits comes first, then one too long for the second */
		memset(M.p + 2048, 0, 64);
		vt_fill(&D.d[2], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + 2048, 64, NULL, 0);
		CHECK_RET(VipPostRecv(vi, &D.d[2], D.mh), VIP_SUCCESS);
		post_recv(vi, 64);
	}
	VT_PHASE("server: VipConnectWait");
	CHECK_RET(VipConnectWait(N.nic, local, 30000, remote, &ra, &conn), VIP_SUCCESS);
	CHECK_EQ(ra.ReliabilityLevel, level_of(k));
	CHECK_RET(VipConnectAccept(conn, vi), VIP_SUCCESS);
	VT_PHASE(case_name[k]);
	if (k == RDMA_READ || k == RDMA_WRITE) {
		/* RDMA write allowed by the memory, read not: what the case refuses is the VI's
		 * write attribute (rdma-write) or the memory's read attribute (rdma-read). */
		memset(T.p, 0xEE, T.len);
		memset(&info, 0, sizeof info);
		info.addr = vt_bits(T.p);
		info.handle = T.mh;
		info.len = (VIP_UINT32)T.len;
		memcpy(M.p + 4096, &info, sizeof info);
		vt_fill(&D.d[1], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + 4096, sizeof info, NULL, 0);
		CHECK_RET(VipPostSend(vi, &D.d[1], D.mh), VIP_SUCCESS);
		d = send_wait(vi);
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
	}
	switch (k) {
	case RD_NORECV:
	case RR_NORECV:
		CHECK_STATE_WITHIN(vi, VIP_STATE_ERROR, VT_WAIT);
		check_callback(vi, VIP_RESOURCE_VI, VIP_ERROR_RECVQ_EMPTY, NULL);
		break;
	case RD_LENGTH:
	case RR_LENGTH:
		d = recv_wait_for(vi, &D.d[2]);
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
		CHECK_EQ(d->CS.Length, 32);
		CHECK_PAT(M.p + 2048, 32, 30 + (unsigned)k, 0, 0);
		d = recv_wait(vi);
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_LENGTH_ERROR);
		CHECK_STATE_WITHIN(vi, VIP_STATE_ERROR, VT_WAIT);
		check_callback(vi, VIP_RESOURCE_DESCRIPTOR, VIP_ERROR_POST_DESC, &D.d[0]);
		break;
	case RDMA_READ:
	case RDMA_WRITE:
		CHECK_STATE_WITHIN(vi, VIP_STATE_ERROR, VT_WAIT);
		check_callback(vi, VIP_RESOURCE_VI, k == RDMA_READ ? VIP_ERROR_RDMAR_PROT : VIP_ERROR_RDMAW_PROT,
		    NULL);
		CHECK_FILL(T.p, T.len, 0xEE);
		break;
	case UNREL:
		/* The client disconnects once its send was dropped; nothing was received. */
		vt_passive_teardown(vi);
		CHECK_RET(VipRecvDone(vi, &d), VIP_NOT_DONE);
		CHECK_RET(VipDestroyVi(vi), VIP_SUCCESS);
		vi = NULL;
		break;
	}
	if (vi != NULL)
		end_vi(vi);
	free(local);
	free(remote);
	printf("server: %s ok\n", case_name[k]);
}

static void client_case(int k, const char *server, const char *disc)
{
	VIP_VI_HANDLE vi = make_vi(k, 0);
	VIP_NET_ADDRESS *local, *remote;
	VIP_VI_ATTRIBUTES ra;
	VIP_DESCRIPTOR *d;
	vt_region_msg info;
	char name[80], mine[80];

	snprintf(name, sizeof name, "%s-%d", disc, k);
	snprintf(mine, sizeof mine, "c-%s-%d", disc, k);
	local = vt_addr(&N, vt_node(), mine);
	remote = vt_addr(&N, server, name);
	records_clear();
	if (k == RDMA_READ || k == RDMA_WRITE)
		post_recv(vi, 4096);
	VT_PHASE("client: VipConnectRequest");
	CHECK_RET(vt_request(vi, local, remote, &ra, 30000), VIP_SUCCESS);
	CHECK_EQ(ra.ReliabilityLevel, level_of(k));
	VT_PHASE(case_name[k]);
	memset(&info, 0, sizeof info);
	if (k == RDMA_READ || k == RDMA_WRITE) {
		d = recv_wait(vi);
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
		memcpy(&info, M.p, sizeof info);
		CHECK_EQ(info.len, T.len);
	}
	memset(T.p, 0x5A, T.len);
	if (k == RD_LENGTH || k == RR_LENGTH) {
		/* one that fits: a plain success, at reliable reception as well */
		d = send_bytes(vi, 32, 30 + (unsigned)k);
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
		CHECK_EQ(vt_state(vi), VIP_STATE_CONNECTED);
		CHECK_EQ(records(), 0);
	}
	vt_pat_fill(M.p + 4096, 256, 40 + (unsigned)k);
	switch (k) {
	case RD_NORECV:
	case RR_NORECV:
	case UNREL:
		vt_fill(&D.d[1], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + 4096, 64, NULL, 0);
		break;
	case RD_LENGTH:
	case RR_LENGTH:
		vt_fill(&D.d[1], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + 4096, 256, NULL, 0);
		break;
	case RDMA_READ:
		vt_fill_rdma(&D.d[1], VIP_CONTROL_OP_RDMAREAD, info.addr, info.handle, T.p, T.mh, 256);
		break;
	case RDMA_WRITE:
		vt_fill_rdma(&D.d[1], VIP_CONTROL_OP_RDMAWRITE, info.addr, info.handle, T.p, T.mh, 256);
		break;
	}
	CHECK_RET(VipPostSend(vi, &D.d[1], D.mh), VIP_SUCCESS);
	d = send_wait(vi);
	switch (k) {
	case RD_NORECV:
	case RR_NORECV:
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND | VIP_STATUS_TRANSPORT_ERROR);
		CHECK_EQ(vt_state(vi), VIP_STATE_ERROR);
		check_callback(vi, VIP_RESOURCE_VI, VIP_ERROR_CONN_LOST, NULL);
		break;
	case RD_LENGTH:
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
		CHECK_EQ(vt_state(vi), VIP_STATE_ERROR);
		check_callback(vi, VIP_RESOURCE_VI, VIP_ERROR_POST_DESC, NULL);
		break;
	case RR_LENGTH:
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND | VIP_STATUS_REMOTE_DESC_ERROR);
		CHECK_EQ(vt_state(vi), VIP_STATE_ERROR);
		check_callback(vi, VIP_RESOURCE_DESCRIPTOR, VIP_ERROR_POST_DESC, &D.d[1]);
		break;
	case RDMA_READ:
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ | VIP_STATUS_RDMA_PROT_ERROR);
		CHECK_EQ(vt_state(vi), VIP_STATE_ERROR);
		check_callback(vi, VIP_RESOURCE_DESCRIPTOR, VIP_ERROR_RDMAR_PROT, &D.d[1]);
		CHECK_FILL(T.p, T.len, 0x5A);
		break;
	case RDMA_WRITE:
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE | VIP_STATUS_RDMA_PROT_ERROR);
		CHECK_EQ(vt_state(vi), VIP_STATE_ERROR);
		check_callback(vi, VIP_RESOURCE_DESCRIPTOR, VIP_ERROR_RDMAW_PROT, &D.d[1]);
		break;
	case UNREL:
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
		vt_sleep_ms(100);
		CHECK_EQ(vt_state(vi), VIP_STATE_CONNECTED);
		CHECK_EQ(records(), 0);
		break;
	}
	/* A send posted in ERROR completes flushed. */
	if (k != UNREL) {
		vt_fill(&D.d[1], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + 4096, 16, NULL, 0);
		CHECK_RET(VipPostSend(vi, &D.d[1], D.mh), VIP_SUCCESS);
		d = send_wait(vi);
		CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND | VIP_STATUS_DESC_FLUSHED_ERROR);
	}
	end_vi(vi);
	free(local);
	free(remote);
	printf("client: %s ok\n", case_name[k]);
}

int main(int argc, char **argv)
{
	int server, k;

	server = argc == 3 && strcmp(argv[1], "server") == 0;
	if (!server && !(argc == 4 && strcmp(argv[1], "client") == 0)) {
		printf("usage: vipl_reliability server DISC | client SERVER_NODE DISC\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	VT_PHASE("setup");
	vt_open(&N, VT_DEVICE);
	CHECK_RET(VipErrorCallback(N.nic, &ctx_word, on_error), VIP_SUCCESS);
	vt_descs_new(&N, &D, 3);
	vt_reg(&N, &M, 8192, VIP_FALSE, VIP_FALSE);
	/* The server's target: RDMA write allowed, RDMA read not. The client's local buffer. */
	vt_reg(&N, &T, 4096, VIP_TRUE, VIP_FALSE);
	for (k = 0; k < NCASES; k++) {
		if (server)
			server_case(k, argv[2]);
		else
			client_case(k, argv[2], argv[3]);
	}
	VT_PHASE("teardown");
	vt_unreg(&N, &T);
	vt_unreg(&N, &M);
	vt_descs_free(&N, &D);
	vt_close(&N);
	printf("vipl_reliability %s: VIPL OK\n", server ? "server" : "client");
	return 0;
}
