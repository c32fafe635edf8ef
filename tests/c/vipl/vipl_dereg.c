/*
 * Memory deregistered while a receive into it is posted (the review's dereg.c): a
 * 4096-byte message then arrives for that receive. The receive must not complete as a
 * success, and the peer must not write into the memory after VipDeregisterMem returned
 * (its pages are private again, with the bytes they held); the same for memory on the
 * stack. Run with REMORA_NODE set; no arguments.
 */
#include "vipl_test.h"

/*
 * The same with memory on the main thread's stack: a first message lands in it, then it
 * is deregistered and the sender, which holds the receive's pieces, writes again. The
 * stack must not see those bytes (its pages are private again).
 */
static void stack_memory(vt_nic *n, vt_mem *s, vt_descs *ds)
{
	unsigned char buf[2 * 4096] __attribute__((aligned(4096)));
	VIP_MEM_ATTRIBUTES ma = { .Ptag = n->ptag, .EnableRdmaWrite = VIP_FALSE, .EnableRdmaRead = VIP_FALSE };
	VIP_MEM_HANDLE mh;
	VIP_VI_HANDLE S, C;
	VIP_DESCRIPTOR *d = NULL;
	VIP_RETURN rc;

	VT_PHASE("stack memory: registered, a message lands in it");
	memset(buf, 0, sizeof buf);
	CHECK_RET(VipRegisterMem(n->nic, buf, sizeof buf, &ma, &mh), VIP_SUCCESS);
	VIP_VI_ATTRIBUTES va = vt_vi_attr(n, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(n->nic, &va, NULL, NULL, &S), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(n->nic, &va, NULL, NULL, &C), VIP_SUCCESS);
	CHECK_RET(VipPostRecv(S, vt_fill(&ds->d[8], 0, mh, buf, 4096, NULL, 0), ds->mh), VIP_SUCCESS);
	CHECK_RET(VipPostRecv(S, vt_fill(&ds->d[9], 0, mh, buf + 4096, 4096, NULL, 0), ds->mh), VIP_SUCCESS);
	vt_connect_local(n, S, C, "srv-stack", "cli-stack", VIP_SERVICE_RELIABLE_DELIVERY);
	memset(s->p, 'B', 4096);
	CHECK_RET(VipPostSend(C, vt_fill(&ds->d[10], 0, s->mh, s->p, 4096, NULL, 0), ds->mh), VIP_SUCCESS);
	CHECK_RET(VipRecvWait(S, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &ds->d[8]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_FILL(buf, 4096, 'B');
	CHECK_RET(VipSendWait(C, VT_WAIT, &d), VIP_SUCCESS);

	VT_PHASE("stack memory deregistered, then a message comes");
	CHECK_RET(VipDeregisterMem(n->nic, buf, mh), VIP_SUCCESS);
	memset(s->p, 'Y', 4096);
	CHECK_RET(VipPostSend(C, vt_fill(&ds->d[11], 0, s->mh, s->p, 4096, NULL, 0), ds->mh), VIP_SUCCESS);
	rc = VipRecvWait(S, 2000, &d);
	if (rc == VIP_SUCCESS) {
		CHECK_PTR(d, &ds->d[9]);
		CHECK_MSG((d->CS.Status & VIP_STATUS_DONE) && (d->CS.Status & VIP_STATUS_PROTECTION_ERROR),
		    "the receive into deregistered stack memory completed with status 0x%x", (unsigned)d->CS.Status);
	} else {
		CHECK_EQ(rc, VIP_TIMEOUT);
	}
	CHECK_FILL(buf + 4096, 4096, 0);
	CHECK_FILL(buf, 4096, 'B');
	VipDisconnect(C);
	VipDisconnect(S);
	VipDestroyVi(S);
	VipDestroyVi(C);
}

int main(void)
{
	vt_nic n;
	vt_mem r, s;
	vt_descs ds;
	VIP_VI_HANDLE S, C;
	VIP_DESCRIPTOR *d = NULL;
	VIP_RETURN rc;

	VT_PHASE("setup");
	vt_open(&n, VT_DEVICE);
	vt_reg(&n, &r, 65536, VIP_FALSE, VIP_FALSE);
	vt_reg(&n, &s, 65536, VIP_FALSE, VIP_FALSE);
	vt_descs_new(&n, &ds, 16);
	VIP_VI_ATTRIBUTES va = vt_vi_attr(&n, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &S), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &C), VIP_SUCCESS);
	CHECK_RET(VipPostRecv(S, vt_fill(&ds.d[0], 0, r.mh, r.p, 4096, NULL, 0), ds.mh), VIP_SUCCESS);
	CHECK_RET(VipPostRecv(S, vt_fill(&ds.d[1], 0, r.mh, r.p + 8192, 4096, NULL, 0), ds.mh), VIP_SUCCESS);
	vt_connect_local(&n, S, C, "srv", "cli", VIP_SERVICE_RELIABLE_DELIVERY);

	VT_PHASE("a first message: the sender learns the receiver's memory");
	memset(s.p, 'A', 4096);
	CHECK_RET(VipPostSend(C, vt_fill(&ds.d[4], 0, s.mh, s.p, 4096, NULL, 0), ds.mh), VIP_SUCCESS);
	CHECK_RET(VipRecvWait(S, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &ds.d[0]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, 4096);
	CHECK_FILL(r.p, 4096, 'A');
	CHECK_RET(VipSendWait(C, VT_WAIT, &d), VIP_SUCCESS);

	VT_PHASE("the second receive's memory is deregistered, then a message comes");
	memset(r.p + 8192, 0, 4096);
	CHECK_RET(VipDeregisterMem(n.nic, r.p, r.mh), VIP_SUCCESS);
	memset(s.p, 'X', 4096);
	CHECK_RET(VipPostSend(C, vt_fill(&ds.d[5], 0, s.mh, s.p, 4096, NULL, 0), ds.mh), VIP_SUCCESS);
	rc = VipRecvWait(S, 2000, &d);
	if (rc == VIP_SUCCESS) {
		CHECK_PTR(d, &ds.d[1]);
		CHECK_MSG((d->CS.Status & VIP_STATUS_DONE) && (d->CS.Status & VIP_STATUS_PROTECTION_ERROR),
		    "the receive into deregistered memory completed with status 0x%x", (unsigned)d->CS.Status);
	} else {
		CHECK_EQ(rc, VIP_TIMEOUT);
	}
	CHECK_FILL(r.p + 8192, 4096, 0);
	CHECK_FILL(r.p, 4096, 'A');

	stack_memory(&n, &s, &ds);

	VT_PHASE("teardown");
	VipDisconnect(C);
	VipDisconnect(S);
	VipDestroyVi(S);
	VipDestroyVi(C);
	free(r.p);
	vt_unreg(&n, &s);
	vt_descs_free(&n, &ds);
	vt_close(&n);
	printf("vipl_dereg: VIPL OK\n");
	return 0;
}
