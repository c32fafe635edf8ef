/*
 * vipl_pingpong N: N round trips of 8-byte messages between two VIs of this
 * node, in one thread, through the C entry points a latency-bound program
 * calls on every message: one side VipPostSend, VipSendWait, VipRecvWait,
 * VipPostRecv; the other VipPostSend, VipSendDone, VipRecvDone, VipPostRecv.
 * Every call finds its completion at once (the sends complete inside
 * VipPostSend, the receives landed): the work of the calls, no waiting.
 * Prints "VIPL OK" and the nanoseconds per round trip.
 *
 * Instructions per round trip (this VM has no hardware counters): callgrind,
 * collecting only inside rounds(), at two N, the difference divided by theirs:
 *   valgrind --tool=callgrind --toggle-collect=rounds ./vipl_pingpong 2000
 * with a libvipl.so built for valgrind (see crates/remora-vipl/examples/pingpong8.rs).
 */
#include <vipl.h>
#include <stdio.h>
#include <stdlib.h>
#include "vipl_test.h"

#define WINDOW 16

typedef struct {
	VIP_VI_HANDLE vi;
	vt_descs recv;   /* WINDOW receives */
	vt_descs send;   /* one send */
	vt_mem buf;      /* WINDOW receive buffers, then the send's */
} side;

static void side_new(vt_nic *n, side *s)
{
	VIP_VI_ATTRIBUTES va = vt_vi_attr(n, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(n->nic, &va, NULL, NULL, &s->vi), VIP_SUCCESS);
	vt_descs_new(n, &s->recv, WINDOW);
	vt_descs_new(n, &s->send, 1);
	vt_reg(n, &s->buf, 64 * (WINDOW + 1), VIP_FALSE, VIP_FALSE);
	for (int i = 0; i < WINDOW; i++) {
		vt_fill(&s->recv.d[i], 0, s->buf.mh, s->buf.p + 64 * i, 64, NULL, 0);
		CHECK_RET(VipPostRecv(s->vi, &s->recv.d[i], s->recv.mh), VIP_SUCCESS);
	}
	vt_fill(&s->send.d[0], 0, s->buf.mh, s->buf.p + 64 * WINDOW, 8, NULL, 0);
}

/* One message from s, taken by r: s sends (waiting, or polling its send queue when
 * !wait), r takes the receive and posts it again. */
static void leg(side *s, side *r, int wait)
{
	VIP_DESCRIPTOR *d = NULL;
	vt_fill(&s->send.d[0], 0, s->buf.mh, s->buf.p + 64 * WINDOW, 8, NULL, 0);
	CHECK_RET(VipPostSend(s->vi, &s->send.d[0], s->send.mh), VIP_SUCCESS);
	if (wait)
		CHECK_RET(VipSendWait(s->vi, VT_WAIT, &d), VIP_SUCCESS);
	else
		while (VipSendDone(s->vi, &d) == VIP_NOT_DONE)
			;
	if (wait)
		CHECK_RET(VipRecvWait(r->vi, VT_WAIT, &d), VIP_SUCCESS);
	else
		while (VipRecvDone(r->vi, &d) == VIP_NOT_DONE)
			;
	CHECK_RET(VipPostRecv(r->vi, d, r->recv.mh), VIP_SUCCESS);
}

/* The measured loop (callgrind collects inside it only). */
__attribute__((noinline)) static void rounds(side *a, side *b, long n)
{
	for (long i = 0; i < n; i++) {
		leg(a, b, 0);
		leg(b, a, 1);
	}
}

int main(int argc, char **argv)
{
	vt_nic n;
	side a, b;
	long count = argc > 1 ? atol(argv[1]) : 1000;
	struct timespec t0, t1;
	CHECK(count > 0);
	vt_open(&n, VT_DEVICE);
	side_new(&n, &a);
	side_new(&n, &b);
	vt_connect_local(&n, a.vi, b.vi, "pp-a", "pp-b", VIP_SERVICE_RELIABLE_DELIVERY);
	/* Warm: the caches and biased locks settle before the measured rounds. */
	rounds(&a, &b, 300);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rounds(&a, &b, count);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("VIPL OK %.0f ns per round trip\n",
	    ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)count);
	return 0;
}
