/*
 * A peer that dies: the survivor's VI must go to VIP_STATE_ERROR, the error
 * callback must report VIP_ERROR_CONN_LOST, and a VipRecvWait in progress must
 * return with its receive flushed (VIP_STATUS_DESC_FLUSHED_ERROR) rather than
 * wait on.  Two roles:
 *   vipl_loss wait <discriminator>        accept one connection, post two
 *                                         receives, wait in VipRecvWait
 *   vipl_loss die <server node> <disc>    connect, print "connected", then
 *                                         SIGKILL itself (no disconnect)
 * (REMORA_NODE set for each.)
 */
#include "vipl_test.h"
#include <signal.h>
#include <unistd.h>

static vt_nic N;
static VIP_VI_HANDLE vi;
static vt_descs D;
static vt_mem M;

static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
static vt_flag errored;
static VIP_ERROR_DESCRIPTOR first_err;
static int err_count;
static int err_ctx;

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
	pthread_mutex_lock(&err_mu);
	if (err_count++ == 0)
		first_err = *e;
	pthread_mutex_unlock(&err_mu);
	CHECK_PTR(ctx, &err_ctx);
	vt_flag_set(&errored);
}

static void setup(void)
{
	VIP_VI_ATTRIBUTES va;
	int k;

	vt_open(&N, VT_DEVICE);
	CHECK_RET(VipErrorCallback(N.nic, &err_ctx, on_error), VIP_SUCCESS);
	vt_descs_new(&N, &D, 2);
	vt_reg(&N, &M, 2 * 4096, VIP_FALSE, VIP_FALSE);
	va = vt_vi_attr(&N, VIP_SERVICE_RELIABLE_DELIVERY, 4096, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
	for (k = 0; k < 2; k++) {
		vt_fill(&D.d[k], VIP_CONTROL_OP_SENDRECV, M.mh, M.p + (size_t)k * 4096, 4096, NULL, 0);
		CHECK_RET(VipPostRecv(vi, &D.d[k], D.mh), VIP_SUCCESS);
	}
}

static int survive(const char *disc)
{
	VIP_NET_ADDRESS *local = vt_addr(&N, vt_node(), disc), *remote = vt_addr_space(&N);
	VIP_VI_ATTRIBUTES ra;
	VIP_CONN_HANDLE conn = NULL;
	VIP_DESCRIPTOR *d = NULL;
	int flushed;

	VT_PHASE("accept");
	CHECK_RET(VipConnectWait(N.nic, local, 30000, remote, &ra, &conn), VIP_SUCCESS);
	CHECK_RET(VipConnectAccept(conn, vi), VIP_SUCCESS);
	printf("vipl_loss: connected\n");

	VT_PHASE("VipRecvWait while the peer dies");
	CHECK_RET(VipRecvWait(vi, 20000, &d), VIP_SUCCESS);
	CHECK_MSG(d == &D.d[0], "first completed receive %p, not the first posted", (void *)d);
	CHECK_MSG(d->CS.Status & VIP_STATUS_DONE, "status 0x%lx lacks DONE", (unsigned long)d->CS.Status);
	CHECK_MSG(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR, "status 0x%lx is not flushed",
	    (unsigned long)d->CS.Status);
	CHECK_EQ(vt_state(vi), VIP_STATE_ERROR);

	VT_PHASE("the error callback");
	CHECK_MSG(vt_flag_wait(&errored, 10000), "no error callback within 10 s");
	pthread_mutex_lock(&err_mu);
	CHECK_EQ(first_err.ErrorCode, VIP_ERROR_CONN_LOST);
	CHECK_PTR(first_err.ViHandle, vi);
	pthread_mutex_unlock(&err_mu);

	VT_PHASE("the rest is flushed; a new receive completes flushed at once; disconnect");
	flushed = vt_drain_flushed(vi);
	CHECK_EQ(flushed, 1);
	CHECK_RET(VipPostRecv(vi, &D.d[0], D.mh), VIP_SUCCESS);
	CHECK_EQ(vt_drain_flushed(vi), 1);
	CHECK_RET(VipDisconnect(vi), VIP_SUCCESS);
	CHECK_EQ(vt_state(vi), VIP_STATE_IDLE);
	free(local);
	free(remote);
	printf("vipl_loss: peer loss reported as CONN_LOST\n");
	return 0;
}

static int die(const char *node, const char *disc)
{
	VIP_NET_ADDRESS *local = vt_addr(&N, vt_node(), "dying"), *remote = vt_addr(&N, node, disc);
	VIP_VI_ATTRIBUTES ra;
	unsigned long long end = vt_now_ms() + 30000;
	VIP_RETURN rc;

	VT_PHASE("VipConnectRequest");
	for (;;) {
		rc = VipConnectRequest(vi, local, remote, VT_WAIT, &ra);
		if (rc != VIP_NO_MATCH || vt_now_ms() >= end)
			break;
		vt_sleep_ms(20);
	}
	CHECK_RET(rc, VIP_SUCCESS);
	printf("vipl_loss: connected; dying\n");
	vt_sleep_ms(200);
	kill(getpid(), SIGKILL);
	return 1;
}

int main(int argc, char **argv)
{
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	vt_flag_init(&errored);
	if (argc == 3 && strcmp(argv[1], "wait") == 0) {
		setup();
		rc = survive(argv[2]);
	} else if (argc == 4 && strcmp(argv[1], "die") == 0) {
		setup();
		return die(argv[2], argv[3]);
	} else {
		printf("usage: vipl_loss wait <disc> | vipl_loss die <server node> <disc>\n");
		return 2;
	}
	VT_PHASE("teardown");
	CHECK_RET(VipDestroyVi(vi), VIP_SUCCESS);
	vt_unreg(&N, &M);
	vt_descs_free(&N, &D);
	vt_close(&N);
	printf("vipl_loss: VIPL OK\n");
	return rc;
}
