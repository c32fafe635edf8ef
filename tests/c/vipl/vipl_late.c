/*
 * A VipConnectRequest that times out while the server holds the request: the
 * server thread takes the request in VipConnectWait and answers nothing within
 * the requester's 300 ms; the requester gets exactly VIP_TIMEOUT and its VI is
 * IDLE.  The server's late VipConnectAccept is VIP_TIMEOUT (the requester gave
 * up), its VI stays IDLE and the handle is used up (a VipConnectReject on it
 * is VIP_INVALID_PARAMETER).  A second held request is rejected late:
 * VIP_TIMEOUT again.  Both VIs then connect to each other with a new request.
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"
#include <pthread.h>

static vt_nic n;
static VIP_VI_HANDLE srv_vi;
static vt_flag took[2], gave_up[2];

static void *server(void *arg)
{
	VIP_CONN_HANDLE conn = NULL;
	VIP_VI_ATTRIBUTES ra;
	VIP_NET_ADDRESS *me = vt_addr(&n, vt_node(), "late-srv"), *rem = vt_addr_space(&n);
	int round;
	(void)arg;

	for (round = 0; round < 2; round++) {
		VT_PHASE("server: takes the request and holds it");
		rem->DiscriminatorLen = 0;
		CHECK_RET(VipConnectWait(n.nic, me, VT_WAIT, rem, &ra, &conn), VIP_SUCCESS);
		CHECK(conn != NULL);
		CHECK(vt_disc_is(rem, "late-cli"));
		vt_flag_set(&took[round]);
		CHECK(vt_flag_wait(&gave_up[round], VT_WAIT) > 0);
		if (round == 0) {
			VT_PHASE("server: the late accept");
			CHECK_RET(VipConnectAccept(conn, srv_vi), VIP_TIMEOUT);
			CHECK_EQ(vt_state(srv_vi), VIP_STATE_IDLE);
			CHECK_RET(VipConnectReject(conn), VIP_INVALID_PARAMETER);
		} else {
			VT_PHASE("server: the late reject");
			CHECK_RET(VipConnectReject(conn), VIP_TIMEOUT);
			CHECK_RET(VipConnectAccept(conn, srv_vi), VIP_INVALID_PARAMETER);
		}
		CHECK_EQ(vt_state(srv_vi), VIP_STATE_IDLE);
	}
	free(me);
	free(rem);
	return NULL;
}

/* A 300 ms request (retried while VIP_NO_MATCH: the server does not wait yet) that
 * the server takes and holds: VIP_TIMEOUT, the VI IDLE. */
static void held(VIP_VI_HANDLE vi, VIP_NET_ADDRESS *me, VIP_NET_ADDRESS *s, int round)
{
	VIP_VI_ATTRIBUTES ra;
	VIP_VI_STATE st;
	VIP_BOOLEAN se, re;
	VIP_RETURN rc;
	unsigned long long end = vt_now_ms() + VT_WAIT;

	do {
		rc = VipConnectRequest(vi, me, s, 300, &ra);
		if (rc == VIP_NO_MATCH)
			vt_sleep_ms(20);
	} while (rc == VIP_NO_MATCH && vt_now_ms() < end);
	CHECK_RET(rc, VIP_TIMEOUT);
	/* The server had the request: not a timeout of nobody waiting. */
	CHECK(vt_flag_wait(&took[round], VT_WAIT) > 0);
	CHECK_RET(VipQueryVi(vi, &st, &ra, &se, &re), VIP_SUCCESS);
	CHECK_EQ(st, VIP_STATE_IDLE);
	vt_flag_set(&gave_up[round]);
}

int main(void)
{
	VIP_VI_HANDLE cli_vi;
	pthread_t t;
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	VT_PHASE("setup");
	vt_open_two_vis(&n, &srv_vi, &cli_vi);
	VIP_NET_ADDRESS *me = vt_addr(&n, vt_node(), "late-cli"), *s = vt_addr(&n, vt_node(), "late-srv");
	for (i = 0; i < 2; i++) {
		vt_flag_init(&took[i]);
		vt_flag_init(&gave_up[i]);
	}
	CHECK(pthread_create(&t, NULL, server, NULL) == 0);

	VT_PHASE("client: a 300 ms request the server holds, then accepts, times out");
	held(cli_vi, me, s, 0);
	VT_PHASE("client: a 300 ms request the server holds, then rejects, times out");
	held(cli_vi, me, s, 1);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(vt_state(cli_vi), VIP_STATE_IDLE);
	CHECK_EQ(vt_state(srv_vi), VIP_STATE_IDLE);

	VT_PHASE("both VIs connect after");
	vt_connect_local(&n, srv_vi, cli_vi, "late-srv2", "late-cli2", VIP_SERVICE_RELIABLE_DELIVERY);

	VT_PHASE("teardown");
	vt_end_pair(cli_vi, srv_vi);
	free(me);
	free(s);
	vt_close(&n);
	printf("vipl_late: VIPL OK\n");
	return 0;
}
