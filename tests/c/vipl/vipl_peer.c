/*
 * The peer-to-peer connection model.  Both sides run this program:
 *   vipl_peer <other node id> <my discriminator> <other's discriminator> [wait]
 * Each posts its receives, then first asks for a peer nobody is (its own
 * discriminator and the other's with "-t" and "nobody-" before them) with a
 * 300 ms timeout: the outcome is VIP_TIMEOUT and the VI is IDLE again.  On
 * the same VI it then calls VipConnectPeerRequest(vi, local, remote,
 * VIP_INFINITE) and polls VipConnectPeerDone (VIP_NOT_DONE meanwhile) for up
 * to 30 s, or with "wait" blocks in VipConnectPeerWait (both outcomes).  Then
 * each sends one message (pattern seeded by its own discriminator) and checks
 * the other's; a short "fin" message from each side tells the other that its
 * data send has completed, and both disconnect.  (REMORA_NODE set.)
 */
#include "vipl_test.h"

#define DATA_LEN 3000

/* The pattern seed of a side's message. */
static unsigned seed_of(const char *disc)
{
	unsigned h = 5381;
	while (*disc != '\0')
		h = h * 33u + (unsigned char)*disc++;
	return h & 0xffffu;
}

/* The outcome of the peer request on `vi`: VipConnectPeerWait with `wait`,
 * else VipConnectPeerDone polled every 10 ms (VIP_NOT_DONE meanwhile) for up
 * to 30 s. */
static VIP_RETURN peer_outcome(VIP_VI_HANDLE vi, int wait, VIP_VI_ATTRIBUTES *ra, int *polls)
{
	unsigned long long end = vt_now_ms() + 30000;
	VIP_RETURN rc;

	memset(ra, 0, sizeof *ra);
	if (wait)
		return VipConnectPeerWait(vi, ra);
	for (;;) {
		rc = VipConnectPeerDone(vi, ra);
		(*polls)++;
		if (rc != VIP_NOT_DONE)
			return rc;
		CHECK_MSG(vt_now_ms() < end, "no peer connection outcome after 30 s (%d polls)", *polls);
		vt_sleep_ms(10);
	}
}

int main(int argc, char **argv)
{
	vt_nic n;
	vt_descs D;   /* 0 data receive, 1 fin receive, 2 data send, 3 fin send */
	vt_mem M;     /* 0: data in, 4096: fin in, 8192: data out, 12288: fin out */
	VIP_VI_HANDLE vi = NULL;
	VIP_VI_ATTRIBUTES va, ra;
	VIP_NET_ADDRESS *local, *remote;
	VIP_DESCRIPTOR *d = NULL;
	VIP_NET_ADDRESS *alone, *nobody;
	char disc[80];
	VIP_RETURN rc;
	int polls = 0, wait;

	if (argc != 4 && !(argc == 5 && strcmp(argv[4], "wait") == 0)) {
		printf("usage: vipl_peer <other node id> <my discriminator> <other's discriminator> [wait]\n");
		return 2;
	}
	wait = argc == 5;
	setvbuf(stdout, NULL, _IOLBF, 0);
	VT_PHASE("setup");
	vt_open(&n, VT_DEVICE);
	vt_descs_new(&n, &D, 4);
	vt_reg(&n, &M, 16384, VIP_FALSE, VIP_FALSE);
	va = vt_vi_attr(&n, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
	local = vt_addr(&n, vt_node(), argv[2]);
	remote = vt_addr(&n, argv[1], argv[3]);
	vt_fill(&D.d[0], VIP_CONTROL_OP_SENDRECV, M.mh, M.p, 4096, NULL, 0);
	CHECK_RET(VipPostRecv(vi, &D.d[0], D.mh), VIP_SUCCESS);
	vt_fill(&D.d[1], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + 4096, 64, NULL, 0);
	CHECK_RET(VipPostRecv(vi, &D.d[1], D.mh), VIP_SUCCESS);

	VT_PHASE(wait ? "a peer nobody is: VipConnectPeerWait times out" : "a peer nobody is: VipConnectPeerDone times out");
	snprintf(disc, sizeof disc, "%s-t", argv[2]);
	alone = vt_addr(&n, vt_node(), disc);
	snprintf(disc, sizeof disc, "nobody-%s", argv[3]);
	nobody = vt_addr(&n, argv[1], disc);
	CHECK_RET(VipConnectPeerRequest(vi, alone, nobody, 300), VIP_SUCCESS);
	CHECK_RET(peer_outcome(vi, wait, &ra, &polls), VIP_TIMEOUT);
	CHECK_EQ(vt_state(vi), VIP_STATE_IDLE);
	/* The outcome was taken: a second look finds no request. */
	CHECK_RET(VipConnectPeerDone(vi, &ra), VIP_INVALID_STATE);

	VT_PHASE(wait ? "VipConnectPeerRequest / VipConnectPeerWait" : "VipConnectPeerRequest / VipConnectPeerDone");
	polls = 0;
	CHECK_RET(VipConnectPeerRequest(vi, local, remote, VIP_INFINITE), VIP_SUCCESS);
	CHECK_RET(peer_outcome(vi, wait, &ra, &polls), VIP_SUCCESS);
	printf("vipl_peer: %s connected to node %s %s (%s, %d poll(s))\n", argv[2], argv[1], argv[3],
	    wait ? "VipConnectPeerWait" : "VipConnectPeerDone", polls);
	CHECK_EQ(ra.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
	CHECK_EQ(vt_state(vi), VIP_STATE_CONNECTED);

	VT_PHASE("data");
	vt_pat_fill(M.p + 8192, DATA_LEN, seed_of(argv[2]));
	vt_fill(&D.d[2], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + 8192, DATA_LEN, NULL, 0);
	CHECK_RET(VipPostSend(vi, &D.d[2], D.mh), VIP_SUCCESS);
	CHECK_RET(VipSendWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[2]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_SEND);
	CHECK_RET(VipRecvWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[0]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, DATA_LEN);
	CHECK_PAT(M.p, DATA_LEN, seed_of(argv[3]), 0, 0);

	VT_PHASE("fin");
	memcpy(M.p + 12288, "fin", 4);
	vt_fill(&D.d[3], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + 12288, 4, NULL, 0);
	CHECK_RET(VipPostSend(vi, &D.d[3], D.mh), VIP_SUCCESS);
	CHECK_RET(VipRecvWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[1]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, 4);
	CHECK(memcmp(M.p + 4096, "fin", 4) == 0);
	/* The other side may disconnect as soon as it has our fin: accept a flush here. */
	CHECK_RET(VipSendWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[3]);
	CHECK_MSG((d->CS.Status & VIP_STATUS_DONE) != 0 || (d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR) != 0,
	    "fin send status 0x%lx", (unsigned long)d->CS.Status);

	VT_PHASE("disconnect");
	/* from CONNECTED, or from ERROR if the other side disconnected first */
	rc = VipDisconnect(vi);
	if (rc == VIP_INVALID_STATE)
		CHECK_EQ(vt_state(vi), VIP_STATE_IDLE);
	else
		CHECK_RET(rc, VIP_SUCCESS);
	CHECK_EQ(vt_state(vi), VIP_STATE_IDLE);
	CHECK_EQ(vt_drain_flushed(vi), 0);

	VT_PHASE("teardown");
	CHECK_RET(VipDestroyVi(vi), VIP_SUCCESS);
	vt_unreg(&n, &M);
	vt_descs_free(&n, &D);
	free(local);
	free(remote);
	free(alone);
	free(nobody);
	vt_close(&n);
	printf("vipl_peer: VIPL OK\n");
	return 0;
}
