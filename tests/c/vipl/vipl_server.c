/*
 * The accepting half of a client/server pair (see vipl_client.c).
 * Opens /dev/via0, waits (30 s) for a connection request on discriminator
 * argv[1] and accepts it, then:
 *   - echoes VT_ECHO_COUNT messages of 1, 64, 4096, 65536 bytes (cycling):
 *     each is checked against pattern k and sent back with every byte + 1;
 *   - receives the client's region (address, memory handle) and RDMA-writes
 *     VT_RDMA_LEN bytes of pattern VT_RDMA_SEED into it;
 *   - sends "bye", waits (10 s) for the client's disconnect, disconnects.
 * Usage: vipl_server <discriminator>   (REMORA_NODE set)
 */
#include "vipl_test.h"

#define NRECV 2

static vt_nic N;
static VIP_VI_HANDLE vi;
static vt_descs D;   /* 0..NRECV-1 receives, NRECV.. sends */
static vt_mem M;     /* NRECV receive buffers, then the send buffer */

static unsigned char *recv_buf(VIP_DESCRIPTOR *d)
{
	return M.p + (size_t)(d - D.d) * VT_ECHO_MAX;
}

static void post_recv(VIP_DESCRIPTOR *d)
{
	vt_fill(d, VIP_CONTROL_OP_SENDRECV, M.mh, recv_buf(d), VT_ECHO_MAX, NULL, 0);
	CHECK_RET(VipPostRecv(vi, d, D.mh), VIP_SUCCESS);
}

static VIP_DESCRIPTOR *recv_wait(void)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipRecvWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_MSG(d >= D.d && d < D.d + NRECV, "descriptor %p is not a posted receive", (void *)d);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	return d;
}

static void send_wait(VIP_DESCRIPTOR *want, VIP_UINT32 op)
{
	VIP_DESCRIPTOR *d = NULL;
	CHECK_RET(VipSendWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, want);
	CHECK_DONE_OK(d, op);
}

int main(int argc, char **argv)
{
	VIP_NET_ADDRESS *local, *remote;
	VIP_VI_ATTRIBUTES va, ra;
	VIP_CONN_HANDLE conn = NULL;
	VIP_DESCRIPTOR *d, *sd = NULL;
	unsigned char *sbuf;
	vt_region_msg info;
	unsigned long long end;
	int k, flushed = 0;
	VIP_VI_STATE st;

	if (argc != 2) {
		printf("usage: vipl_server <discriminator>\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	VT_PHASE("setup");
	vt_open(&N, VT_DEVICE);
	vt_descs_new(&N, &D, NRECV + 4);
	vt_reg(&N, &M, (NRECV + 1) * (size_t)VT_ECHO_MAX, VIP_FALSE, VIP_FALSE);
	sbuf = M.p + (size_t)NRECV * VT_ECHO_MAX;
	va = vt_vi_attr(&N, VIP_SERVICE_RELIABLE_DELIVERY, VT_ECHO_MAX, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
	local = vt_addr(&N, vt_node(), argv[1]);
	remote = vt_addr_space(&N);
	for (k = 0; k < NRECV; k++)
		post_recv(&D.d[k]);

	VT_PHASE("VipConnectWait / VipConnectAccept");
	printf("vipl_server: waiting on node %s discriminator %s\n", vt_node(), argv[1]);
	CHECK_RET(VipConnectWait(N.nic, local, 30000, remote, &ra, &conn), VIP_SUCCESS);
	CHECK_EQ(ra.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
	CHECK_EQ(remote->HostAddressLen, N.attr.NicAddressLen);
	CHECK_RET(VipConnectAccept(conn, vi), VIP_SUCCESS);
	CHECK_EQ(vt_state(vi), VIP_STATE_CONNECTED);

	VT_PHASE("echo");
	for (k = 0; k < VT_ECHO_COUNT; k++) {
		size_t n = vt_echo_size(k), i;
		unsigned char *r;
		d = recv_wait();
		r = recv_buf(d);
		CHECK_MSG(d->CS.Length == n, "message %d has %lu bytes, not %lu", k, (unsigned long)d->CS.Length,
		    (unsigned long)n);
		CHECK_PAT(r, n, (unsigned)k, 0, 0);
		for (i = 0; i < n; i++)
			sbuf[i] = (unsigned char)(r[i] + 1);
		/* the client sends message k + 1 only after this echo: repost first */
		post_recv(d);
		sd = &D.d[NRECV];
		vt_fill(sd, VIP_CONTROL_OP_SENDRECV, M.mh, sbuf, n, NULL, 0);
		CHECK_RET(VipPostSend(vi, sd, D.mh), VIP_SUCCESS);
		send_wait(sd, VIP_STATUS_OP_SEND);
	}

	VT_PHASE("RDMA write into the client's region");
	d = recv_wait();
	CHECK_EQ(d->CS.Length, sizeof info);
	memcpy(&info, recv_buf(d), sizeof info);
	CHECK_MSG(info.len >= VT_RDMA_LEN, "client region of %lu bytes", (unsigned long)info.len);
	post_recv(d);
	vt_pat_fill(sbuf, VT_RDMA_LEN, VT_RDMA_SEED);
	sd = &D.d[NRECV + 1];
	vt_fill_rdma(sd, VIP_CONTROL_OP_RDMAWRITE, info.addr, info.handle, sbuf, M.mh, VT_RDMA_LEN);
	CHECK_RET(VipPostSend(vi, sd, D.mh), VIP_SUCCESS);
	send_wait(sd, VIP_STATUS_OP_RDMA_WRITE);

	VT_PHASE("bye");
	memcpy(sbuf + VT_RDMA_LEN, "bye", 4);
	sd = &D.d[NRECV + 2];
	vt_fill(sd, VIP_CONTROL_OP_SENDRECV, M.mh, sbuf + VT_RDMA_LEN, 4, NULL, 0);
	CHECK_RET(VipPostSend(vi, sd, D.mh), VIP_SUCCESS);
	send_wait(sd, VIP_STATUS_OP_SEND);

	VT_PHASE("waiting for the client's disconnect");
	end = vt_now_ms() + VT_WAIT;
	for (;;) {
		VIP_RETURN rc;
		st = vt_state(vi);
		if (st != VIP_STATE_CONNECTED)
			break;
		d = NULL;
		rc = VipRecvDone(vi, &d);
		if (rc == VIP_SUCCESS) {
			CHECK_MSG(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR,
			    "unexpected receive after bye, status 0x%lx", (unsigned long)d->CS.Status);
			flushed++;
			break;
		}
		CHECK_RET(rc, VIP_NOT_DONE);
		CHECK_MSG(vt_now_ms() < end, "still connected %d ms after bye", VT_WAIT);
		vt_sleep_ms(10);
	}
	st = vt_state(vi);
	printf("vipl_server: peer gone, state %d, %d receive(s) flushed so far\n", (int)st, flushed);
	if (st != VIP_STATE_IDLE)
		CHECK_RET(VipDisconnect(vi), VIP_SUCCESS);
	flushed += vt_drain_flushed(vi);
	CHECK_EQ(flushed, NRECV);
	CHECK_EQ(vt_state(vi), VIP_STATE_IDLE);

	VT_PHASE("teardown");
	CHECK_RET(VipDestroyVi(vi), VIP_SUCCESS);
	vt_unreg(&N, &M);
	vt_descs_free(&N, &D);
	free(local);
	free(remote);
	vt_close(&N);
	printf("vipl_server: VIPL OK\n");
	return 0;
}
