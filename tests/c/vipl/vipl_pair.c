/*
 * Every data family between two processes: one node, two nodes of one host or
 * two hosts.  The harness orders them: the server posts four receives, prints
 * "ready" and waits for a line on stdin; the client posts three receives and
 * its first VipConnectRequest must give VIP_NO_MATCH (nobody waits yet); it
 * prints "no match" and retries; the harness lets the server go on.  Then:
 * the first request is rejected (VIP_REJECT, VI IDLE, receives still posted),
 * the next accepted; the server's first three sends land in the client's
 * early receives (one of two segments); the client sends with immediate
 * data, RDMA-writes 64 KiB, 4 KiB with immediate data, RDMA-reads 64 KiB (the server's
 * receive CQ reports the two receives consumed); VipSendNotify, VipCQNotify
 * (server) and VipRecvNotify (client) fire on the peer's traffic; the client
 * disconnects with three receives posted (each completes DONE|OP_RECEIVE|
 * DESC_FLUSHED_ERROR); the server's VI goes to ERROR, its last receive alike.
 * Status words and return codes compared whole; data bytes checked.
 * Usage: vipl_pair server DISC LEVEL | vipl_pair client SERVER_NODE DISC LEVEL
 *        (LEVEL "delivery" or "reception", the reliability level; REMORA_NODE set)
 */
#include "vipl_test.h"
#include <unistd.h>

#define IMM_SEND 0x5EC0DE01u
#define IMM_RDMA 0x5EC0DE02u
#define SENTINEL 0xA5
#define W_LEN 131072            /* RDMA write target at the server */
#define R_LEN 65536             /* RDMA read source at the server */
#define SLOT 4096               /* one receive or send buffer */
#define RECV_ST (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE)
#define FLUSHED_ST (RECV_ST | VIP_STATUS_DESC_FLUSHED_ERROR)

static vt_nic N;
static VIP_RELIABILITY_LEVEL LEVEL;
static VIP_VI_HANDLE V;
static vt_descs D;      /* 0..7 receives, 8..15 sends */
static vt_mem M;        /* 8 receive slots, 8 send slots, then W_LEN, then R_LEN */

static unsigned char *slot(int k)
{
	return M.p + (size_t)k * SLOT;
}
#define AREA_W (M.p + 16 * SLOT)
#define AREA_R (AREA_W + W_LEN)

/* Receive k (into slot k), SLOT bytes of room. */
static void post_recv(int k)
{
	memset(slot(k), SENTINEL, SLOT);
	vt_fill(&D.d[k], VIP_CONTROL_OP_SENDRECV, M.mh, slot(k), SLOT, NULL, 0);
	CHECK_RET(VipPostRecv(V, &D.d[k], D.mh), VIP_SUCCESS);
}

/* Posts send descriptor k (already filled) and checks its whole status word. */
static void send_check(int k, VIP_UINT32 want)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipPostSend(V, &D.d[k], D.mh), VIP_SUCCESS);
	CHECK_RET(VipSendWait(V, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[k]);
	CHECK_EQ(d->CS.Status, want);
}

/* Sends len bytes of pattern seed from send slot k (8..15). */
static void send_pat(int k, size_t len, unsigned seed)
{
	vt_pat_fill(slot(k), len, seed);
	vt_fill(&D.d[k], VIP_CONTROL_OP_SENDRECV, M.mh, slot(k), len, NULL, 0);
	send_check(k, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
}

/* Checks completed receive d is receive k with status st, len bytes of pattern seed, then the sentinel. */
static void recv_is(VIP_DESCRIPTOR *d, int k, VIP_UINT32 st, size_t len, unsigned seed)
{
	CHECK_PTR(d, &D.d[k]);
	CHECK_EQ(d->CS.Status, st);
	CHECK_EQ(d->CS.Length, len);
	CHECK_PAT(slot(k), len, seed, 0, 0);
	CHECK_FILL(slot(k) + len, SLOT - len, SENTINEL);
}

static VIP_DESCRIPTOR *recv_wait(void)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipRecvWait(V, VT_WAIT, &d), VIP_SUCCESS);
	return d;
}

/* What a notify handler saw; its context is the record (the right one fires). */
typedef struct {
	vt_flag fired;
	VIP_NIC_HANDLE nic;
	VIP_VI_HANDLE vi;
	VIP_DESCRIPTOR *d;
	VIP_BOOLEAN recvq;
} note_t;
static note_t rnote, snote, cnote;

static void note(note_t *n, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d, VIP_BOOLEAN recvq)
{
	n->nic = nic;
	n->vi = vi;
	n->d = d;
	n->recvq = recvq;
	vt_flag_set(&n->fired);
}

static void on_desc(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d)
{
	note((note_t *)ctx, nic, vi, d, VIP_FALSE);
}

static void on_cq(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_BOOLEAN recvq)
{
	note((note_t *)ctx, nic, vi, NULL, recvq);
}

/* Checks that notification n fired once, with the NIC and VI vi. */
static void fired(note_t *n, VIP_VI_HANDLE vi)
{
	CHECK_EQ(vt_flag_wait(&n->fired, VT_WAIT), 1);
	CHECK_PTR(n->nic, N.nic);
	CHECK_PTR(n->vi, vi);
}

/* Opens the NIC, registers D and M, creates V (with a receive CQ, returned, when rcq). */
static VIP_CQ_HANDLE setup(int rcq)
{
	VIP_VI_ATTRIBUTES va;
	VIP_CQ_HANDLE cq = NULL;
	vt_flag_init(&rnote.fired);
	vt_flag_init(&snote.fired);
	vt_flag_init(&cnote.fired);
	vt_open(&N, VT_DEVICE);
	vt_descs_new(&N, &D, 16);
	vt_reg(&N, &M, 16 * SLOT + W_LEN + R_LEN, VIP_TRUE, VIP_TRUE);
	if (rcq)
		CHECK_RET(VipCreateCQ(N.nic, 8, &cq), VIP_SUCCESS);
	va = vt_vi_attr(&N, LEVEL, 65536, VIP_TRUE, VIP_TRUE);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, cq, &V), VIP_SUCCESS);
	return cq;
}

static void teardown(VIP_CQ_HANDLE cq)
{
	CHECK_RET(VipDestroyVi(V), VIP_SUCCESS);
	if (cq != NULL)
		CHECK_RET(VipDestroyCQ(cq), VIP_SUCCESS);
	vt_unreg(&N, &M);
	vt_descs_free(&N, &D);
	vt_close(&N);
}

/* The server's receive CQ gave one entry for its VI's receive queue. */
static void cq_entry(VIP_CQ_HANDLE cq)
{
	VIP_VI_HANDLE vi = NULL;
	VIP_BOOLEAN rq = VIP_FALSE;
	CHECK_RET(VipCQWait(cq, VT_WAIT, &vi, &rq), VIP_SUCCESS);
	CHECK_PTR(vi, V);
	CHECK_EQ(rq, VIP_TRUE);
}

static int server(const char *disc)
{
	VIP_CQ_HANDLE cq;
	VIP_NET_ADDRESS *me, *rem;
	VIP_VI_ATTRIBUTES ra;
	VIP_CONN_HANDLE conn = NULL;
	VIP_DESCRIPTOR *d = NULL;
	VIP_VI_HANDLE vi = NULL;
	VIP_BOOLEAN rq;
	vt_region_msg info;
	char line[64];
	int k;

	VT_PHASE("server: setup");
	cq = setup(1);
	me = vt_addr(&N, vt_node(), disc);
	rem = vt_addr_space(&N);
	for (k = 0; k < 4; k++)
		post_recv(k);
	memset(AREA_W, SENTINEL, W_LEN);
	vt_pat_fill(AREA_R, R_LEN, 60);
	printf("vipl_pair server: ready\n");
	CHECK(fgets(line, sizeof line, stdin) != NULL);

	VT_PHASE("server: reject the first request");
	CHECK_RET(VipConnectWait(N.nic, me, 30000, rem, &ra, &conn), VIP_SUCCESS);
	CHECK_EQ(ra.ReliabilityLevel, LEVEL);
	CHECK_RET(VipConnectReject(conn), VIP_SUCCESS);
	CHECK_EQ(vt_state(V), VIP_STATE_IDLE);

	VT_PHASE("server: accept the second");
	CHECK_RET(VipConnectWait(N.nic, me, VT_WAIT, rem, &ra, &conn), VIP_SUCCESS);
	CHECK_RET(VipConnectAccept(conn, V), VIP_SUCCESS);
	CHECK_EQ(vt_state(V), VIP_STATE_CONNECTED);
	CHECK_RET(VipRecvDone(V, &d), VIP_NOT_DONE);
	CHECK_RET(VipCQDone(cq, &vi, &rq), VIP_NOT_DONE);

	VT_PHASE("server: first sends, into the client's early receives");
	send_pat(8, 1000, 1);
	send_pat(14, 6000, 2); /* slots 14 and 15 */
	info = (vt_region_msg){ vt_bits(AREA_W), M.mh, W_LEN, vt_bits(AREA_R), M.mh, R_LEN };
	memcpy(slot(10), &info, sizeof info);
	vt_fill(&D.d[10], VIP_CONTROL_OP_SENDRECV, M.mh, slot(10), sizeof info, NULL, 0);
	send_check(10, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);

	VT_PHASE("server: the client's send with immediate data, through the CQ");
	cq_entry(cq);
	CHECK_RET(VipRecvDone(V, &d), VIP_SUCCESS);
	recv_is(d, 0, RECV_ST | VIP_STATUS_IMMEDIATE, 16, 5);
	CHECK_EQ(d->CS.ImmediateData, IMM_SEND);

	VT_PHASE("server: the client's RDMA write with immediate data, through the CQ");
	cq_entry(cq);
	CHECK_RET(VipRecvDone(V, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[1]);
	CHECK_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE);
	CHECK_EQ(d->CS.ImmediateData, IMM_RDMA);
	CHECK_EQ(d->CS.Length, 4096);
	CHECK_FILL(slot(1), SLOT, SENTINEL);
	CHECK_RET(VipCQDone(cq, &vi, &rq), VIP_NOT_DONE);

	VT_PHASE("server: bytes of both RDMA writes");
	CHECK_PAT(AREA_W, 65536, 50, 0, 0);
	CHECK_FILL(AREA_W + 65536, 100, SENTINEL);
	CHECK_PAT(AREA_W + 65536 + 100, 4096, 51, 0, 0);
	CHECK_FILL(AREA_W + 65536 + 100 + 4096, W_LEN - 65536 - 100 - 4096, SENTINEL);

	VT_PHASE("server: VipSendNotify and VipCQNotify armed");
	CHECK_RET(VipCQNotify(cq, &cnote, on_cq), VIP_SUCCESS);
	CHECK_RET(VipSendNotify(V, &snote, on_desc), VIP_SUCCESS);
	vt_pat_fill(slot(11), 8, 80);
	vt_fill(&D.d[11], VIP_CONTROL_OP_SENDRECV, M.mh, slot(11), 8, NULL, 0);
	CHECK_RET(VipPostSend(V, &D.d[11], D.mh), VIP_SUCCESS);
	fired(&snote, V);
	CHECK_PTR(snote.d, &D.d[11]);
	CHECK_EQ(snote.d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
	CHECK_RET(VipSendDone(V, &d), VIP_NOT_DONE);

	VT_PHASE("server: the client's send fires VipCQNotify");
	fired(&cnote, V);
	CHECK_EQ(cnote.recvq, VIP_TRUE);
	CHECK_RET(VipCQDone(cq, &vi, &rq), VIP_NOT_DONE);
	CHECK_RET(VipRecvDone(V, &d), VIP_SUCCESS);
	recv_is(d, 2, RECV_ST, 32, 70);

	VT_PHASE("server: the answer that fires the client's VipRecvNotify");
	send_pat(12, 48, 71);

	VT_PHASE("server: the client's disconnect flushes the last receive");
	CHECK_EQ(vt_wait_state_not(V, VIP_STATE_CONNECTED, VT_WAIT), VIP_STATE_ERROR);
	CHECK_RET(VipRecvWait(V, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[3]);
	CHECK_EQ(d->CS.Status, FLUSHED_ST);
	CHECK_EQ(d->CS.Length, 0);
	CHECK_FILL(slot(3), SLOT, SENTINEL);
	CHECK_RET(VipRecvDone(V, &d), VIP_NOT_DONE);
	cq_entry(cq);
	CHECK_RET(VipCQDone(cq, &vi, &rq), VIP_NOT_DONE);
	CHECK_RET(VipDisconnect(V), VIP_SUCCESS);
	CHECK_EQ(vt_state(V), VIP_STATE_IDLE);

	VT_PHASE("server: teardown");
	teardown(cq);
	free(me);
	free(rem);
	printf("vipl_pair server: VIPL OK\n");
	return 0;
}

/* VipConnectRequest again while VIP_NO_MATCH (30 s at most); the VI stays IDLE, the receives posted. */
static VIP_RETURN request(VIP_NET_ADDRESS *me, VIP_NET_ADDRESS *srv, int *tries)
{
	unsigned long long end = vt_now_ms() + 30000;
	VIP_VI_ATTRIBUTES ra;
	VIP_DESCRIPTOR *d = NULL;
	VIP_RETURN rc;
	for (;;) {
		++*tries;
		memset(&ra, 0, sizeof ra);
		rc = VipConnectRequest(V, me, srv, VT_WAIT, &ra);
		if (rc == VIP_SUCCESS)
			CHECK_EQ(ra.ReliabilityLevel, LEVEL);
		if (rc != VIP_NO_MATCH || vt_now_ms() >= end)
			return rc;
		CHECK_EQ(vt_state(V), VIP_STATE_IDLE);
		CHECK_RET(VipRecvDone(V, &d), VIP_NOT_DONE);
		vt_sleep_ms(20);
	}
}

static int client(const char *node, const char *disc)
{
	VIP_NET_ADDRESS *me, *srv;
	VIP_VI_ATTRIBUTES ra;
	VIP_DESCRIPTOR *d = NULL;
	vt_region_msg info;
	char mine[16];
	int k, tries = 0;

	VT_PHASE("client: setup");
	setup(0);
	snprintf(mine, sizeof mine, "p%ld", (long)getpid() % 100000);
	me = vt_addr(&N, vt_node(), mine);
	srv = vt_addr(&N, node, disc);
	post_recv(0);
	/* receive 1 over two segments: slots 1 and 5 */
	memset(slot(1), SENTINEL, SLOT);
	memset(slot(5), SENTINEL, SLOT);
	vt_fill(&D.d[1], VIP_CONTROL_OP_SENDRECV, M.mh, slot(1), SLOT, slot(5), SLOT);
	CHECK_RET(VipPostRecv(V, &D.d[1], D.mh), VIP_SUCCESS);
	post_recv(2);
	memset(AREA_R, SENTINEL, R_LEN);

	VT_PHASE("client: VIP_NO_MATCH while the server does not wait");
	CHECK_RET(VipConnectRequest(V, me, srv, VT_WAIT, &ra), VIP_NO_MATCH);
	CHECK_EQ(vt_state(V), VIP_STATE_IDLE);
	CHECK_RET(VipRecvDone(V, &d), VIP_NOT_DONE);
	printf("vipl_pair client: no match\n");

	VT_PHASE("client: rejected, then accepted");
	CHECK_RET(request(me, srv, &tries), VIP_REJECT);
	CHECK_EQ(vt_state(V), VIP_STATE_IDLE);
	CHECK_RET(VipRecvDone(V, &d), VIP_NOT_DONE);
	CHECK_RET(request(me, srv, &tries), VIP_SUCCESS);
	CHECK_EQ(vt_state(V), VIP_STATE_CONNECTED);
	printf("vipl_pair client: connected after %d more request(s)\n", tries);

	VT_PHASE("client: the server's first sends in the early receives");
	recv_is(recv_wait(), 0, RECV_ST, 1000, 1);
	d = recv_wait();
	CHECK_PTR(d, &D.d[1]);
	CHECK_EQ(d->CS.Status, RECV_ST);
	CHECK_EQ(d->CS.Length, 6000);
	CHECK_PAT(slot(1), SLOT, 2, 0, 0);
	CHECK_PAT(slot(5), 6000 - SLOT, 2, SLOT, 0);
	CHECK_FILL(slot(5) + 6000 - SLOT, 2 * SLOT - 6000, SENTINEL);
	d = recv_wait();
	CHECK_PTR(d, &D.d[2]);
	CHECK_EQ(d->CS.Status, RECV_ST);
	CHECK_EQ(d->CS.Length, sizeof info);
	memcpy(&info, slot(2), sizeof info);
	CHECK_EQ(info.len, W_LEN);
	CHECK_EQ(info.len2, R_LEN);
	post_recv(3);

	VT_PHASE("client: send with immediate data");
	vt_pat_fill(slot(8), 16, 5);
	vt_fill(&D.d[8], VIP_CONTROL_OP_SENDRECV | VIP_CONTROL_IMMEDIATE, M.mh, slot(8), 16, NULL, 0);
	D.d[8].CS.ImmediateData = IMM_SEND;
	send_check(8, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);

	VT_PHASE("client: RDMA write");
	vt_pat_fill(AREA_W, 65536, 50);
	vt_fill_rdma(&D.d[9], VIP_CONTROL_OP_RDMAWRITE, info.addr, info.handle, AREA_W, M.mh, 65536);
	send_check(9, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE);

	VT_PHASE("client: RDMA write with immediate data");
	vt_pat_fill(AREA_W + 65536, 4096, 51);
	vt_fill_rdma(&D.d[10], VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, info.addr + 65536 + 100,
	    info.handle, AREA_W + 65536, M.mh, 4096);
	D.d[10].CS.ImmediateData = IMM_RDMA;
	send_check(10, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE);

	VT_PHASE("client: RDMA read");
	vt_fill_rdma(&D.d[11], VIP_CONTROL_OP_RDMAREAD, info.addr2, info.handle2, AREA_R, M.mh, R_LEN);
	send_check(11, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ);
	CHECK_PAT(AREA_R, R_LEN, 60, 0, 0);

	VT_PHASE("client: the server's notifications armed");
	recv_is(recv_wait(), 3, RECV_ST, 8, 80);
	post_recv(4);
	CHECK_RET(VipRecvNotify(V, &rnote, on_desc), VIP_SUCCESS);
	send_pat(12, 32, 70);

	VT_PHASE("client: the server's answer fires VipRecvNotify");
	fired(&rnote, V);
	recv_is(rnote.d, 4, RECV_ST, 48, 71);
	CHECK_RET(VipRecvDone(V, &d), VIP_NOT_DONE);

	VT_PHASE("client: VipDisconnect flushes posted receives");
	for (k = 5; k < 8; k++)
		post_recv(k);
	CHECK_RET(VipDisconnect(V), VIP_SUCCESS);
	CHECK_EQ(vt_state(V), VIP_STATE_IDLE);
	for (k = 5; k < 8; k++) {
		CHECK_RET(VipRecvDone(V, &d), VIP_SUCCESS);
		CHECK_PTR(d, &D.d[k]);
		CHECK_EQ(d->CS.Status, FLUSHED_ST);
		CHECK_EQ(d->CS.Length, 0);
		CHECK_FILL(slot(k), SLOT, SENTINEL);
	}
	CHECK_RET(VipRecvDone(V, &d), VIP_NOT_DONE);

	VT_PHASE("client: teardown");
	teardown(NULL);
	free(me);
	free(srv);
	printf("vipl_pair client: VIPL OK\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *level = argc > 1 ? argv[argc - 1] : "";
	setvbuf(stdout, NULL, _IOLBF, 0);
	LEVEL = strcmp(level, "reception") == 0 ? VIP_SERVICE_RELIABLE_RECEPTION : VIP_SERVICE_RELIABLE_DELIVERY;
	if (strcmp(level, "delivery") == 0 || strcmp(level, "reception") == 0) {
		if (argc == 4 && strcmp(argv[1], "server") == 0)
			return server(argv[2]);
		if (argc == 5 && strcmp(argv[1], "client") == 0)
			return client(argv[2], argv[3]);
	}
	printf("usage: vipl_pair server DISC LEVEL | vipl_pair client SERVER_NODE DISC LEVEL\n");
	return 2;
}
