/*
 * Notifications armed before anything completes (the review's notify.c and cq.c):
 * VipSendNotify armed 200 ms before the send is posted calls its handler with the
 * send; VipRecvNotify armed on an idle VI that is connected 300 ms later calls its
 * handler with the receive. (The library's notify threads once ended after their first
 * 50 ms slice when only the handle table and the thread held the VI.) Notifications on
 * a VI or a completion queue destroyed before anything completes end without a call,
 * and after VipCloseNic no thread of the library is left.
 * Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"
#include <dirent.h>

static vt_flag sent, recvd, cqf;
static VIP_DESCRIPTOR *sent_d, *recvd_d;
static VIP_VI_HANDLE sent_vi, recvd_vi;

static void on_send(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d)
{
	(void)ctx;
	(void)nic;
	sent_vi = vi;
	sent_d = d;
	vt_flag_set(&sent);
}

static void on_recv(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d)
{
	(void)ctx;
	(void)nic;
	recvd_vi = vi;
	recvd_d = d;
	vt_flag_set(&recvd);
}

static void on_cq(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_BOOLEAN recv)
{
	(void)ctx;
	(void)nic;
	(void)vi;
	(void)recv;
	vt_flag_set(&cqf);
}

/* How many threads of this process have a name starting with prefix. */
static int threads(const char *prefix)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	int k = 0;
	char p[300], name[64];
	CHECK(dir != NULL);
	while ((e = readdir(dir)) != NULL) {
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof name, f) && strncmp(name, prefix, strlen(prefix)) == 0)
			k++;
		fclose(f);
	}
	closedir(dir);
	return k;
}

/* Waits up to ms for no thread named prefix...; returns how many are left. */
static int threads_gone(const char *prefix, unsigned ms)
{
	unsigned long long end = vt_now_ms() + ms;
	int k;
	while ((k = threads(prefix)) > 0 && vt_now_ms() < end)
		vt_sleep_ms(20);
	return k;
}

int main(void)
{
	vt_nic n;
	vt_mem m;
	vt_descs ds;
	VIP_VI_HANDLE S, C, S3, C3;
	VIP_CQ_HANDLE cq;
	VIP_DESCRIPTOR *d = NULL;

	VT_PHASE("setup");
	vt_flag_init(&sent);
	vt_flag_init(&recvd);
	vt_flag_init(&cqf);
	vt_open(&n, VT_DEVICE);
	vt_reg(&n, &m, 65536, VIP_FALSE, VIP_FALSE);
	vt_descs_new(&n, &ds, 32);
	VIP_VI_ATTRIBUTES va = vt_vi_attr(&n, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &S), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &C), VIP_SUCCESS);
	CHECK_RET(VipPostRecv(S, vt_fill(&ds.d[0], 0, m.mh, m.p, 4096, NULL, 0), ds.mh), VIP_SUCCESS);
	vt_connect_local(&n, S, C, "srv", "cli", VIP_SERVICE_RELIABLE_DELIVERY);

	VT_PHASE("VipSendNotify armed 200 ms before the send");
	CHECK_RET(VipSendNotify(C, NULL, on_send), VIP_SUCCESS);
	vt_sleep_ms(200);
	CHECK_RET(VipPostSend(C, vt_fill(&ds.d[4], 0, m.mh, m.p + 8192, 64, NULL, 0), ds.mh), VIP_SUCCESS);
	CHECK_EQ(vt_flag_wait(&sent, VT_WAIT), 1);
	CHECK_PTR(sent_vi, C);
	CHECK_PTR(sent_d, &ds.d[4]);
	CHECK_DONE_OK(sent_d, VIP_STATUS_OP_SEND);
	/* The handler took the completion off the queue. */
	CHECK_RET(VipSendDone(C, &d), VIP_NOT_DONE);
	CHECK_RET(VipRecvWait(S, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &ds.d[0]);

	VT_PHASE("VipRecvNotify armed on an idle VI, connected 300 ms later");
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &S3), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &C3), VIP_SUCCESS);
	CHECK_RET(VipPostRecv(S3, vt_fill(&ds.d[8], 0, m.mh, m.p + 16384, 1024, NULL, 0), ds.mh), VIP_SUCCESS);
	CHECK_RET(VipRecvNotify(S3, NULL, on_recv), VIP_SUCCESS);
	vt_sleep_ms(300);
	vt_connect_local(&n, S3, C3, "s3", "c3", VIP_SERVICE_RELIABLE_DELIVERY);
	CHECK_RET(VipPostSend(C3, vt_fill(&ds.d[12], 0, m.mh, m.p + 24576, 10, NULL, 0), ds.mh), VIP_SUCCESS);
	CHECK_EQ(vt_flag_wait(&recvd, VT_WAIT), 1);
	CHECK_PTR(recvd_vi, S3);
	CHECK_PTR(recvd_d, &ds.d[8]);
	CHECK_DONE_OK(recvd_d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(recvd_d->CS.Length, 10);
	CHECK_RET(VipRecvDone(S3, &d), VIP_NOT_DONE);
	CHECK_RET(VipSendWait(C3, VT_WAIT, &d), VIP_SUCCESS);

	VT_PHASE("a notification on a VI destroyed before anything completes ends");
	CHECK_RET(VipDisconnect(C3), VIP_SUCCESS);
	vt_passive_teardown(S3);
	CHECK_RET(VipRecvNotify(S3, NULL, on_recv), VIP_SUCCESS);
	CHECK_RET(VipSendNotify(C3, NULL, on_send), VIP_SUCCESS);
	vt_sleep_ms(100);
	CHECK_EQ(threads("vipl-notify"), 2);
	CHECK_RET(VipDestroyVi(S3), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(C3), VIP_SUCCESS);
	CHECK_EQ(threads_gone("vipl-notify", 3000), 0);
	CHECK_EQ(vt_flag_wait(&recvd, 0), 1);
	CHECK_EQ(vt_flag_wait(&sent, 0), 1);

	VT_PHASE("a VipCQNotify that never fires ends with its queue");
	CHECK_RET(VipCreateCQ(n.nic, 16, &cq), VIP_SUCCESS);
	CHECK_RET(VipCQNotify(cq, NULL, on_cq), VIP_SUCCESS);
	vt_sleep_ms(100);
	CHECK_EQ(threads("vipl-notify"), 1);
	CHECK_RET(VipDestroyCQ(cq), VIP_SUCCESS);
	CHECK_EQ(threads_gone("vipl-notify", 3000), 0);
	CHECK_EQ(vt_flag_wait(&cqf, 0), 0);

	VT_PHASE("teardown");
	CHECK_RET(VipDisconnect(C), VIP_SUCCESS);
	vt_passive_teardown(S);
	CHECK_RET(VipDestroyVi(S), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(C), VIP_SUCCESS);
	vt_descs_free(&n, &ds);
	vt_unreg(&n, &m);
	vt_close(&n);
	/* Nothing of the library keeps the NIC: its threads end with it. */
	CHECK_EQ(threads_gone("vipl-watch", 3000), 0);
	CHECK_EQ(threads("vipl-notify"), 0);
	printf("vipl_notify: VIPL OK\n");
	return 0;
}
