/*
 * The requesting half of a client/server pair (see vipl_server.c).
 * Resolves the server with VipNSGetHostByName(argv[1]), posts its first
 * receive, then requests a connection to discriminator argv[2], retrying on
 * VIP_NO_MATCH for up to 30 s (the server may start later).  Sends
 * VT_ECHO_COUNT messages and checks every echo (each byte + 1), sends the
 * address and memory handle of a region registered with EnableRdmaWrite,
 * receives "bye", checks the bytes the server RDMA-wrote, disconnects.
 * Usage: vipl_client <server node id> <discriminator>   (REMORA_NODE set)
 */
#include "vipl_test.h"
#include <unistd.h>

static vt_nic N;
static VIP_VI_HANDLE vi;
static vt_descs D;   /* 0 receive, 1 send */
static vt_mem M;     /* receive buffer, send buffer */
static vt_mem R;     /* the RDMA write target */

static void post_recv(void)
{
	vt_fill(&D.d[0], VIP_CONTROL_OP_SENDRECV, M.mh, M.p, VT_ECHO_MAX, NULL, 0);
	CHECK_RET(VipPostRecv(vi, &D.d[0], D.mh), VIP_SUCCESS);
}

static VIP_DESCRIPTOR *recv_wait(void)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipRecvWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[0]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	return d;
}

static void send_msg(size_t n)
{
	VIP_DESCRIPTOR *d = NULL;
	vt_fill(&D.d[1], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + VT_ECHO_MAX, n, NULL, 0);
	CHECK_RET(VipPostSend(vi, &D.d[1], D.mh), VIP_SUCCESS);
	CHECK_RET(VipSendWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[1]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_SEND);
}

int main(int argc, char **argv)
{
	VIP_NET_ADDRESS *local, *remote;
	VIP_VI_ATTRIBUTES va, ra;
	VIP_DESCRIPTOR *d;
	vt_region_msg info;
	char disc[16];
	unsigned long long end;
	VIP_RETURN rc;
	int k, tries = 0;

	if (argc != 3) {
		printf("usage: vipl_client <server node id> <discriminator>\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	VT_PHASE("setup");
	vt_open(&N, VT_DEVICE);
	vt_descs_new(&N, &D, 2);
	vt_reg(&N, &M, 2 * (size_t)VT_ECHO_MAX, VIP_FALSE, VIP_FALSE);
	vt_reg(&N, &R, VT_RDMA_LEN + 4096, VIP_TRUE, VIP_FALSE);
	memset(R.p, 0xEE, R.len);
	va = vt_vi_attr(&N, VIP_SERVICE_RELIABLE_DELIVERY, VT_ECHO_MAX, VIP_TRUE, VIP_FALSE);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
	snprintf(disc, sizeof disc, "c%ld", (long)getpid() % 100000);
	local = vt_addr(&N, vt_node(), disc);
	remote = vt_addr(&N, argv[1], argv[2]);
	post_recv();

	VT_PHASE("VipConnectRequest");
	end = vt_now_ms() + 30000;
	for (;;) {
		tries++;
		rc = VipConnectRequest(vi, local, remote, VT_WAIT, &ra);
		if (rc != VIP_NO_MATCH || vt_now_ms() >= end)
			break;
		CHECK_EQ(vt_state(vi), VIP_STATE_IDLE);
		vt_sleep_ms(20);
	}
	CHECK_RET(rc, VIP_SUCCESS);
	printf("vipl_client: connected to node %s discriminator %s after %d request(s)\n", argv[1], argv[2], tries);
	CHECK_EQ(ra.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
	CHECK_EQ(vt_state(vi), VIP_STATE_CONNECTED);

	VT_PHASE("echo");
	for (k = 0; k < VT_ECHO_COUNT; k++) {
		size_t n = vt_echo_size(k);
		vt_pat_fill(M.p + VT_ECHO_MAX, n, (unsigned)k);
		send_msg(n);
		d = recv_wait();
		CHECK_MSG(d->CS.Length == n, "echo %d has %lu bytes, not %lu", k, (unsigned long)d->CS.Length,
		    (unsigned long)n);
		CHECK_PAT(M.p, n, (unsigned)k, 0, 1);
		post_recv();
	}

	VT_PHASE("region message");
	memset(&info, 0, sizeof info);
	info.addr = vt_bits(R.p);
	info.handle = R.mh;
	info.len = VT_RDMA_LEN;
	memcpy(M.p + VT_ECHO_MAX, &info, sizeof info);
	send_msg(sizeof info);

	VT_PHASE("bye");
	d = recv_wait();
	CHECK_EQ(d->CS.Length, 4);
	CHECK_MSG(memcmp(M.p, "bye", 4) == 0, "got \"%.4s\"", (const char *)M.p);

	VT_PHASE("bytes written by the server's RDMA write");
	CHECK_PAT(R.p, VT_RDMA_LEN, VT_RDMA_SEED, 0, 0);
	CHECK_FILL(R.p + VT_RDMA_LEN, 4096, 0xEE);

	VT_PHASE("disconnect");
	CHECK_RET(VipDisconnect(vi), VIP_SUCCESS);
	CHECK_EQ(vt_state(vi), VIP_STATE_IDLE);
	CHECK_EQ(vt_drain_flushed(vi), 0);

	VT_PHASE("teardown");
	CHECK_RET(VipDestroyVi(vi), VIP_SUCCESS);
	vt_unreg(&N, &M);
	vt_unreg(&N, &R);
	vt_descs_free(&N, &D);
	free(local);
	free(remote);
	vt_close(&N);
	printf("vipl_client: VIPL OK\n");
	return 0;
}
