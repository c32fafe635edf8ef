/*
 * Discriminator matching against a waiter on another discriminator: while a
 * server thread waits in VipConnectWait on "srv", requests for "sr" (a
 * prefix of it) and for "srv2" (one it is a prefix of) are exactly
 * VIP_NO_MATCH and leave the requesting VI IDLE, and the waiter does not get
 * them; then a request for "srv" connects, and the address VipConnectWait
 * gives the server carries the requester's host address and discriminator
 * (bytes and length).
 * Run with REMORA_NODE set; no arguments.
 *
 * The program cannot see when the node has the waiter: the wrong requests are
 * made after the server thread said it is about to wait and a pause, and
 * again after each "srv" request that still found nobody, so the last round of
 * them comes right before the request that found the waiter.
 */
#include "vipl_test.h"
#include <pthread.h>

static vt_nic n;
static VIP_VI_HANDLE srv_vi;
static VIP_NET_ADDRESS *rem;
static VIP_VI_ATTRIBUTES remattr;
static vt_flag waiting;

static void *server(void *arg)
{
	VIP_CONN_HANDLE conn = NULL;
	VIP_NET_ADDRESS *me = vt_addr(&n, vt_node(), "srv");
	(void)arg;

	VT_PHASE("server: waits on \"srv\"");
	vt_flag_set(&waiting);
	CHECK_RET(VipConnectWait(n.nic, me, VT_WAIT, rem, &remattr, &conn), VIP_SUCCESS);
	CHECK(conn != NULL);
	/* Only the request for "srv" (from "cli-srv") reaches this waiter. */
	CHECK_MSG(vt_disc_is(rem, "cli-srv"), "the waiter got a request from a discriminator of %u bytes",
	    (unsigned)rem->DiscriminatorLen);
	CHECK_RET(VipConnectAccept(conn, srv_vi), VIP_SUCCESS);
	free(me);
	return NULL;
}

/* One VipConnectRequest from local discriminator ldisc to rdisc of this node. */
static VIP_RETURN ask(VIP_VI_HANDLE vi, const char *ldisc, const char *rdisc)
{
	VIP_NET_ADDRESS *l = vt_addr(&n, vt_node(), ldisc), *r = vt_addr(&n, vt_node(), rdisc);
	VIP_VI_ATTRIBUTES ra;
	VIP_RETURN rc = VipConnectRequest(vi, l, r, VT_WAIT, &ra);
	free(l);
	free(r);
	return rc;
}

static void wrong_ones(VIP_VI_HANDLE vi)
{
	VIP_VI_STATE st;
	VIP_VI_ATTRIBUTES ra;
	VIP_BOOLEAN se, re;

	CHECK_RET(ask(vi, "cli-sr", "sr"), VIP_NO_MATCH);
	CHECK_RET(VipQueryVi(vi, &st, &ra, &se, &re), VIP_SUCCESS);
	CHECK_EQ(st, VIP_STATE_IDLE);
	CHECK_RET(ask(vi, "cli-srv2", "srv2"), VIP_NO_MATCH);
	CHECK_RET(VipQueryVi(vi, &st, &ra, &se, &re), VIP_SUCCESS);
	CHECK_EQ(st, VIP_STATE_IDLE);
}

int main(void)
{
	VIP_VI_HANDLE cli_vi;
	VIP_NET_ADDRESS *mine = NULL;
	pthread_t t;
	VIP_RETURN rc;
	int rounds = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	VT_PHASE("setup");
	vt_open_two_vis(&n, &srv_vi, &cli_vi);
	rem = vt_addr_space(&n);
	mine = vt_addr(&n, vt_node(), "cli-srv");
	vt_flag_init(&waiting);
	CHECK(pthread_create(&t, NULL, server, NULL) == 0);
	CHECK(vt_flag_wait(&waiting, VT_WAIT) > 0);
	vt_sleep_ms(200);

	VT_PHASE("\"sr\" and \"srv2\" find no match while \"srv\" is waited on");
	for (;;) {
		wrong_ones(cli_vi);
		rc = ask(cli_vi, "cli-srv", "srv");
		if (rc != VIP_NO_MATCH || ++rounds > 200)
			break;
		vt_sleep_ms(50);
	}
	CHECK_RET(rc, VIP_SUCCESS);

	VT_PHASE("the waiter got the requester's address");
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(rem->HostAddressLen, mine->HostAddressLen);
	CHECK(memcmp(rem->HostAddress, mine->HostAddress, mine->HostAddressLen) == 0);
	CHECK_EQ(rem->DiscriminatorLen, 7);
	CHECK(memcmp(vt_disc(rem), "cli-srv", 7) == 0);
	CHECK_EQ(remattr.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
	CHECK_EQ(vt_state(srv_vi), VIP_STATE_CONNECTED);
	CHECK_EQ(vt_state(cli_vi), VIP_STATE_CONNECTED);

	VT_PHASE("teardown");
	vt_end_pair(cli_vi, srv_vi);
	free(mine);
	free(rem);
	vt_close(&n);
	printf("vipl_match: VIPL OK\n");
	return 0;
}
