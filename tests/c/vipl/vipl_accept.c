/*
 * A VipConnectAccept that fails leaves the request to the server (the review's acc.c):
 * accepting onto a VI of another reliability level gives
 * VIP_INVALID_RELIABILITY_LEVEL, accepting onto a VI that is not idle gives
 * VIP_INVALID_STATE, and the same connection handle then rejects the request (the
 * requester sees VIP_REJECT) or accepts it onto a fitting VI (the requester connects).
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"
#include <pthread.h>

static vt_nic n;
static VIP_VI_HANDLE unrel, busy, good;

static void *server(void *arg)
{
	VIP_CONN_HANDLE conn;
	VIP_VI_ATTRIBUTES ra;
	VIP_NET_ADDRESS *me = vt_addr(&n, vt_node(), "srv"), *rem = vt_addr_space(&n);
	(void)arg;

	VT_PHASE("server: the first request is rejected after a failed accept");
	CHECK_RET(VipConnectWait(n.nic, me, VT_WAIT, rem, &ra, &conn), VIP_SUCCESS);
	CHECK_RET(VipConnectAccept(conn, unrel), VIP_INVALID_RELIABILITY_LEVEL);
	CHECK_EQ(vt_state(unrel), VIP_STATE_IDLE);
	CHECK_RET(VipConnectReject(conn), VIP_SUCCESS);
	CHECK_RET(VipConnectReject(conn), VIP_INVALID_PARAMETER);

	VT_PHASE("server: the second request is accepted after two failed accepts");
	CHECK_RET(VipConnectWait(n.nic, me, VT_WAIT, rem, &ra, &conn), VIP_SUCCESS);
	CHECK_RET(VipConnectAccept(conn, unrel), VIP_INVALID_RELIABILITY_LEVEL);
	CHECK_RET(VipConnectAccept(conn, busy), VIP_INVALID_STATE);
	CHECK_RET(VipConnectAccept(conn, good), VIP_SUCCESS);
	CHECK_RET(VipConnectAccept(conn, good), VIP_INVALID_PARAMETER);
	free(me);
	free(rem);
	return NULL;
}

int main(void)
{
	VIP_VI_HANDLE c, b2;
	VIP_VI_ATTRIBUTES ra;
	pthread_t t;

	VT_PHASE("setup");
	vt_open(&n, VT_DEVICE);
	VIP_VI_ATTRIBUTES va = vt_vi_attr(&n, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);
	VIP_VI_ATTRIBUTES vu = vt_vi_attr(&n, VIP_SERVICE_UNRELIABLE, 65536, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(n.nic, &vu, NULL, NULL, &unrel), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &good), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &c), VIP_SUCCESS);
	/* A VI that is connected already (not idle). */
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &busy), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &b2), VIP_SUCCESS);
	vt_connect_local(&n, busy, b2, "bsrv", "bcli", VIP_SERVICE_RELIABLE_DELIVERY);

	VIP_NET_ADDRESS *me = vt_addr(&n, vt_node(), "cli"), *s = vt_addr(&n, vt_node(), "srv");
	CHECK(pthread_create(&t, NULL, server, NULL) == 0);
	VT_PHASE("client: rejected");
	CHECK_RET(vt_request(c, me, s, &ra, VT_WAIT), VIP_REJECT);
	CHECK_EQ(vt_state(c), VIP_STATE_IDLE);
	VT_PHASE("client: accepted");
	CHECK_RET(vt_request(c, me, s, &ra, VT_WAIT), VIP_SUCCESS);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(vt_state(good), VIP_STATE_CONNECTED);
	CHECK_EQ(vt_state(unrel), VIP_STATE_IDLE);

	VT_PHASE("teardown");
	CHECK_RET(VipDisconnect(c), VIP_SUCCESS);
	vt_passive_teardown(good);
	CHECK_RET(VipDisconnect(b2), VIP_SUCCESS);
	vt_passive_teardown(busy);
	CHECK_RET(VipDestroyVi(c), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(good), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(unrel), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(busy), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(b2), VIP_SUCCESS);
	free(me);
	free(s);
	vt_close(&n);
	printf("vipl_accept: VIPL OK\n");
	return 0;
}
