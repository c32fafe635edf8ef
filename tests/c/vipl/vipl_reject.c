/*
 * A rejected connection request: a server thread rejects the first request
 * (VipConnectReject) and accepts the second; the requester (main thread)
 * sees VIP_REJECT, its VI stays IDLE, then VIP_SUCCESS on the same VI.  One
 * message checks the connection; then the requester disconnects.
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"

int main(void)
{
	vt_nic n;
	vt_server s;
	vt_descs da, db;
	vt_mem am, bm;
	VIP_VI_HANDLE a = NULL, b = NULL;
	VIP_VI_ATTRIBUTES va, ra;
	VIP_NET_ADDRESS *saddr, *caddr;
	VIP_VI_STATE st;
	VIP_BOOLEAN se, re;

	setvbuf(stdout, NULL, _IOLBF, 0);
	vt_open(&n, "remora0");
	vt_descs_new(&n, &da, 4);
	vt_descs_new(&n, &db, 4);
	vt_reg(&n, &am, 8192, VIP_FALSE, VIP_FALSE);
	vt_reg(&n, &bm, 8192, VIP_FALSE, VIP_FALSE);
	va = vt_vi_attr(&n, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &a), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &b), VIP_SUCCESS);
	saddr = vt_addr(&n, vt_node(), "rej-srv");
	caddr = vt_addr(&n, vt_node(), "rej-cli");

	VT_PHASE("server thread");
	vt_fill(&da.d[0], VIP_CONTROL_OP_SENDRECV, am.mh, am.p, 4096, NULL, 0);
	CHECK_RET(VipPostRecv(a, &da.d[0], da.mh), VIP_SUCCESS);
	memset(&s, 0, sizeof s);
	s.n = &n;
	s.local = saddr;
	s.remote = vt_addr_space(&n);
	s.vi = a;
	s.expect_disc = "rej-cli";
	s.level = VIP_SERVICE_RELIABLE_DELIVERY;
	s.reject_first = 1;
	vt_server_start(&s);

	VT_PHASE("first request is rejected");
	CHECK_RET(vt_request(b, caddr, saddr, &ra, VT_WAIT), VIP_REJECT);
	CHECK_RET(VipQueryVi(b, &st, &ra, &se, &re), VIP_SUCCESS);
	CHECK_EQ(st, VIP_STATE_IDLE);
	CHECK_EQ(vt_state(a), VIP_STATE_IDLE);

	VT_PHASE("second request is accepted");
	memset(&ra, 0, sizeof ra);
	CHECK_RET(vt_request(b, caddr, saddr, &ra, VT_WAIT), VIP_SUCCESS);
	CHECK_EQ(ra.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
	vt_server_join(&s);
	CHECK_EQ(s.rejected, 1);
	CHECK_EQ(vt_state(a), VIP_STATE_CONNECTED);
	CHECK_EQ(vt_state(b), VIP_STATE_CONNECTED);

	VT_PHASE("one message over the accepted connection");
	vt_pat_fill(bm.p, 1000, 9);
	vt_fill(&db.d[0], VIP_CONTROL_OP_SENDRECV, bm.mh, bm.p, 1000, NULL, 0);
	vt_send_arrives(b, &db.d[0], db.mh, a, &da.d[0], 1000);
	CHECK_PAT(am.p, 1000, 9, 0, 0);

	VT_PHASE("disconnect");
	CHECK_RET(VipDisconnect(b), VIP_SUCCESS);
	CHECK_EQ(vt_state(b), VIP_STATE_IDLE);
	vt_passive_teardown(a);

	VT_PHASE("teardown");
	CHECK_RET(VipDestroyVi(a), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(b), VIP_SUCCESS);
	vt_unreg(&n, &am);
	vt_unreg(&n, &bm);
	vt_descs_free(&n, &da);
	vt_descs_free(&n, &db);
	free(saddr);
	free(caddr);
	free(s.remote);
	vt_close(&n);
	printf("vipl_reject: VIPL OK\n");
	return 0;
}
