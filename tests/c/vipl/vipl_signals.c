/*
 * The library inside someone else's program:
 *   1. A SIGALRM every 200 us to each thread that calls, from a handler installed
 *      without SA_RESTART, while a loopback connection is made (VipConnectWait in a
 *      thread, VipConnectRequest here) and 2000 messages go back and forth through
 *      VipPostSend / VipSendWait / VipPostRecv / VipRecvWait: every call must succeed
 *      and every message arrive intact, in order.
 *   2. A thread blocked in VipRecvWait(VIP_INFINITE) is cancelled: it must end
 *      (pthread_join within 5 s), and the VI must go on working: a message sent
 *      afterwards is received by the main thread.
 *   3. A thread blocked in VipConnectRequest(VIP_INFINITE), whose request the server
 *      took with VipConnectWait but never answers, is cancelled: it must end within
 *      5 s, its VI must be idle again, the server's late accept must fail, and the
 *      same VI must then connect normally.
 *   4. A thread blocked in VipConnectPeerWait (a peer request with VIP_INFINITE
 *      that nobody answers yet) sleeps: fewer than 50 voluntary context switches
 *      in 500 ms (a poll every millisecond made about 500); under a SIGALRM every
 *      200 us it stays blocked; cancelled, it ends within 5 s; then the peer comes
 *      and the same VI's VipConnectPeerWait gives the connection.
 *   5. A thread in VipRecvWait(VIP_INFINITE) on a VI whose receive queue feeds a
 *      CQ, one in VipRecvWait on a VI without a CQ, and one in VipCQWait each
 *      sleep (fewer than 50 voluntary switches in 500 ms; a 200 us sleep loop
 *      made about 2500), then return the completion when the peer sends.
 * No arguments; REMORA_NODE set.
 */
#define _GNU_SOURCE
#include "vipl_test.h"
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define MESSAGES 2000
#define LEN 256

static vt_nic N;
static VIP_VI_HANDLE a, b;
static vt_descs D; /* 0, 1: receives of b; 2: send of a; 3, 4: receives of a; 5: send of b */
static vt_mem M;   /* one 4 KiB slot per descriptor */
static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* SIGALRM every 200 us to thread tid; returns the timer. */
static timer_t storm_at(pid_t tid)
{
	struct itimerspec every = {{0, 200 * 1000}, {0, 200 * 1000}};
	struct sigevent sev;
	timer_t t;
	memset(&sev, 0, sizeof sev);
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGALRM;
	sev.sigev_notify_thread_id = tid;
	CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t) == 0);
	CHECK(timer_settime(t, 0, &every, NULL) == 0);
	return t;
}

/* SIGALRM every 200 us to the calling thread; returns the timer. */
static timer_t storm(void)
{
	return storm_at((pid_t)syscall(SYS_gettid));
}

static unsigned char *slot(int k)
{
	return M.p + (size_t)k * 4096;
}

static void post_recv(VIP_VI_HANDLE vi, int k)
{
	vt_fill(&D.d[k], VIP_CONTROL_OP_SENDRECV, M.mh, slot(k), LEN, NULL, 0);
	CHECK_RET(VipPostRecv(vi, &D.d[k], D.mh), VIP_SUCCESS);
}

static void send_one(VIP_VI_HANDLE vi, int k, unsigned seed)
{
	VIP_DESCRIPTOR *d = NULL;
	vt_pat_fill(slot(k), LEN, seed);
	vt_fill(&D.d[k], VIP_CONTROL_OP_SENDRECV, M.mh, slot(k), LEN, NULL, 0);
	CHECK_RET(VipPostSend(vi, &D.d[k], D.mh), VIP_SUCCESS);
	CHECK_RET(VipSendWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[k]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_SEND);
}

static void recv_one(VIP_VI_HANDLE vi, unsigned seed)
{
	VIP_DESCRIPTOR *d = NULL;
	int k;
	CHECK_RET(VipRecvWait(vi, VT_WAIT, &d), VIP_SUCCESS);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_EQ(d->CS.Length, LEN);
	k = (int)(d - D.d);
	CHECK_PAT(slot(k), LEN, seed, 0, 0);
	post_recv(vi, k);
}

typedef struct {
	vt_server s;
} stormy_server;

static void *server_main(void *arg)
{
	stormy_server *ss = (stormy_server *)arg;
	timer_t t = storm();
	vt_server_main(&ss->s);
	timer_delete(t);
	return NULL;
}

static void *blocked_receiver(void *arg)
{
	VIP_DESCRIPTOR *d = NULL;
	(void)arg;
	printf("vipl_signals: receiver thread waits forever\n");
	VipRecvWait(a, VIP_INFINITE, &d);
	printf("vipl_signals: VipRecvWait returned in the thread that was to be cancelled\n");
	return (void *)1;
}

static VIP_VI_HANDLE c, e;
static VIP_NET_ADDRESS *c_addr, *e_addr;

static void *blocked_requester(void *arg)
{
	VIP_VI_ATTRIBUTES ra;
	VIP_RETURN rc;
	(void)arg;
	/* NO_MATCH until the main thread waits on the server's address: ask again. */
	while ((rc = VipConnectRequest(c, c_addr, e_addr, VIP_INFINITE, &ra)) == VIP_NO_MATCH)
		vt_sleep_ms(5);
	printf("vipl_signals: VipConnectRequest returned %d in the thread that was to be cancelled\n", (int)rc);
	return (void *)1;
}

/* Phase 3: see the head of the file. */
static void cancel_a_request(VIP_VI_ATTRIBUTES *va)
{
	VIP_NET_ADDRESS *from = vt_addr_space(&N);
	VIP_VI_ATTRIBUTES rattr, ra;
	VIP_CONN_HANDLE conn = NULL;
	unsigned long long end;
	void *res = NULL;
	pthread_t th;
	vt_server srv;
	VIP_RETURN rc;

	CHECK_RET(VipCreateVi(N.nic, va, NULL, NULL, &c), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, va, NULL, NULL, &e), VIP_SUCCESS);
	c_addr = vt_addr(&N, vt_node(), "cancel-cli");
	e_addr = vt_addr(&N, vt_node(), "cancel-srv");
	CHECK(pthread_create(&th, NULL, blocked_requester, NULL) == 0);
	/* The request reaches this waiter once the thread has sent it (NO_MATCH before). */
	end = vt_now_ms() + 10000;
	for (;;) {
		from->HostAddressLen = N.attr.NicAddressLen;
		rc = VipConnectWait(N.nic, e_addr, 200, from, &rattr, &conn);
		if (rc == VIP_SUCCESS)
			break;
		CHECK_EQ(rc, VIP_TIMEOUT);
		CHECK_MSG(vt_now_ms() < end, "the blocked thread's request never came");
	}
	CHECK(vt_disc_is(from, "cancel-cli"));
	CHECK_EQ(vt_state(c), VIP_STATE_CONNECT_PENDING);
	CHECK(pthread_cancel(th) == 0);
	end = vt_now_ms() + 5000;
	for (;;) {
		if (pthread_tryjoin_np(th, &res) == 0)
			break;
		CHECK_MSG(vt_now_ms() < end, "the thread cancelled in VipConnectRequest still runs after 5 s");
		vt_sleep_ms(10);
	}
	CHECK_PTR(res, PTHREAD_CANCELED);
	CHECK_EQ(vt_state(c), VIP_STATE_IDLE);
	/* The requester is gone: once its node has seen the hang-up, the accept fails. */
	vt_sleep_ms(300);
	rc = VipConnectAccept(conn, e);
	CHECK_MSG(rc != VIP_SUCCESS, "an accept of a request whose requester was cancelled succeeded");
	CHECK_EQ(vt_state(e), VIP_STATE_IDLE);

	VT_PHASE("the VI whose request was cancelled connects again");
	memset(&srv, 0, sizeof srv);
	srv.n = &N;
	srv.local = e_addr;
	srv.remote = vt_addr_space(&N);
	srv.vi = e;
	srv.expect_disc = "cancel-cli";
	srv.level = va->ReliabilityLevel;
	vt_server_start(&srv);
	CHECK_RET(vt_request(c, c_addr, e_addr, &ra, VT_WAIT), VIP_SUCCESS);
	vt_server_join(&srv);
	CHECK_EQ(vt_state(c), VIP_STATE_CONNECTED);
	CHECK_EQ(vt_state(e), VIP_STATE_CONNECTED);
	CHECK_RET(VipDisconnect(c), VIP_SUCCESS);
	vt_passive_teardown(e);
	CHECK_RET(VipDestroyVi(c), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(e), VIP_SUCCESS);
	free(srv.remote);
	free(from);
	free(c_addr);
	free(e_addr);
}

static VIP_VI_HANDLE p, q;
static VIP_NET_ADDRESS *p_addr, *q_addr;
static volatile pid_t waiter_tid;

static void *blocked_peer_waiter(void *arg)
{
	VIP_VI_ATTRIBUTES ra;
	VIP_RETURN rc;
	(void)arg;
	waiter_tid = (pid_t)syscall(SYS_gettid);
	rc = VipConnectPeerWait(p, &ra);
	printf("vipl_signals: VipConnectPeerWait returned %d in the thread that was to be cancelled\n", (int)rc);
	return (void *)1;
}

/* The voluntary context switches of thread tid of this process so far. */
static unsigned long voluntary_switches(pid_t tid)
{
	char path[64], line[256];
	unsigned long n = 0;
	int found = 0;
	FILE *f;
	snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	CHECK_MSG(f != NULL, "cannot open %s", path);
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "voluntary_ctxt_switches: %lu", &n) == 1) {
			found = 1;
			break;
		}
	fclose(f);
	CHECK_MSG(found, "no voluntary_ctxt_switches in %s", path);
	return n;
}

/* Start thread *th running fn (which sets waiter_tid), wait until it runs, and check it
 * then sleeps in `what`: fewer than 50 voluntary switches in 500 ms. */
static void start_sleeper(pthread_t *th, void *(*fn)(void *), const char *what)
{
	unsigned long before, after;
	unsigned long long end = vt_now_ms() + 5000;

	waiter_tid = 0;
	CHECK(pthread_create(th, NULL, fn, NULL) == 0);
	while (waiter_tid == 0) {
		CHECK_MSG(vt_now_ms() < end, "the waiting thread never started");
		vt_sleep_ms(1);
	}
	vt_sleep_ms(200);
	before = voluntary_switches(waiter_tid);
	vt_sleep_ms(500);
	after = voluntary_switches(waiter_tid);
	printf("vipl_signals: the thread in %s switched %lu times in 500 ms\n", what, after - before);
	CHECK_MSG(after - before < 50, "%s woke %lu times in 500 ms: it polls", what, after - before);
}

/* Phase 4: see the head of the file. */
static void cancel_a_peer_wait(VIP_VI_ATTRIBUTES *va)
{
	VIP_VI_ATTRIBUTES ra;
	unsigned long long end;
	void *res = NULL;
	pthread_t th;
	timer_t t;

	CHECK_RET(VipCreateVi(N.nic, va, NULL, NULL, &p), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, va, NULL, NULL, &q), VIP_SUCCESS);
	/* p's address is the smaller: p waits for q's request through the node. */
	p_addr = vt_addr(&N, vt_node(), "peer-wait-a");
	q_addr = vt_addr(&N, vt_node(), "peer-wait-z");
	CHECK_RET(VipConnectPeerRequest(p, p_addr, q_addr, VIP_INFINITE), VIP_SUCCESS);
	start_sleeper(&th, blocked_peer_waiter, "VipConnectPeerWait");
	t = storm_at(waiter_tid);
	vt_sleep_ms(300);
	CHECK_MSG(pthread_tryjoin_np(th, &res) != 0, "VipConnectPeerWait returned under the signals");
	timer_delete(t);
	CHECK(pthread_cancel(th) == 0);
	end = vt_now_ms() + 5000;
	for (;;) {
		if (pthread_tryjoin_np(th, &res) == 0)
			break;
		CHECK_MSG(vt_now_ms() < end, "the thread cancelled in VipConnectPeerWait still runs after 5 s");
		vt_sleep_ms(10);
	}
	CHECK_PTR(res, PTHREAD_CANCELED);
	CHECK_EQ(vt_state(p), VIP_STATE_CONNECT_PENDING);

	VT_PHASE("the VI whose peer wait was cancelled connects when its peer comes");
	CHECK_RET(VipConnectPeerRequest(q, q_addr, p_addr, VIP_INFINITE), VIP_SUCCESS);
	CHECK_RET(VipConnectPeerWait(q, &ra), VIP_SUCCESS);
	CHECK_RET(VipConnectPeerWait(p, &ra), VIP_SUCCESS);
	CHECK_EQ(vt_state(p), VIP_STATE_CONNECTED);
	CHECK_EQ(vt_state(q), VIP_STATE_CONNECTED);
	vt_end_pair(p, q);
	free(p_addr);
	free(q_addr);
}

/* Phase 5: a thread waiting for a completion sleeps, then returns when it comes. */
static VIP_VI_HANDLE wx, wy; /* wx's receive queue feeds wcq; wy has no CQ */
static VIP_CQ_HANDLE wcq;
static int wait_kind;        /* 0: VipRecvWait(wx), 1: VipRecvWait(wy), 2: VipCQWait(wcq) */
static VIP_DESCRIPTOR *wait_desc;
static VIP_VI_HANDLE wait_vi;
static VIP_BOOLEAN wait_recvq;

static void *sleeping_waiter(void *arg)
{
	VIP_RETURN rc;
	(void)arg;
	waiter_tid = (pid_t)syscall(SYS_gettid);
	if (wait_kind == 2)
		rc = VipCQWait(wcq, VIP_INFINITE, &wait_vi, &wait_recvq);
	else
		rc = VipRecvWait(wait_kind == 0 ? wx : wy, VIP_INFINITE, &wait_desc);
	return rc == VIP_SUCCESS ? NULL : (void *)1;
}

/* A thread in wait `kind` switches fewer than 50 times in 500 ms, then the send from
 * `from` (descriptor k) ends its wait. */
static void sleeps_then_returns(int kind, const char *what, VIP_VI_HANDLE from, int k, unsigned seed)
{
	unsigned long long end;
	void *res = (void *)2;
	pthread_t th;

	wait_kind = kind;
	start_sleeper(&th, sleeping_waiter, what);
	CHECK_MSG(pthread_tryjoin_np(th, &res) != 0, "%s returned with nothing sent", what);
	send_one(from, k, seed);
	end = vt_now_ms() + VT_WAIT;
	while (pthread_tryjoin_np(th, &res) != 0) {
		CHECK_MSG(vt_now_ms() < end, "%s did not return within %d ms of the send", what, VT_WAIT);
		vt_sleep_ms(2);
	}
	CHECK_PTR(res, NULL);
}

static void waits_sleep(VIP_VI_ATTRIBUTES *va)
{
	VIP_DESCRIPTOR *d = NULL;
	VIP_VI_HANDLE vi = NULL;
	VIP_BOOLEAN rq = VIP_FALSE;

	CHECK_RET(VipCreateCQ(N.nic, 8, &wcq), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, va, NULL, wcq, &wx), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, va, NULL, NULL, &wy), VIP_SUCCESS);
	/* a and b are gone, D's slots free: 0, 1 receives of wx; 3 of wy; 2, 5 sends */
	post_recv(wx, 0);
	post_recv(wx, 1);
	post_recv(wy, 3);
	vt_connect_local(&N, wx, wy, "sleep-x", "sleep-y", VIP_SERVICE_RELIABLE_DELIVERY);

	VT_PHASE("a thread in VipRecvWait on a VI whose receive queue feeds a CQ sleeps");
	sleeps_then_returns(0, "VipRecvWait (receive queue on a CQ)", wy, 2, 31);
	CHECK_PTR(wait_desc, &D.d[0]);
	CHECK_DONE_OK(wait_desc, VIP_STATUS_OP_RECEIVE);
	CHECK_PAT(slot(0), LEN, 31, 0, 0);
	CHECK_RET(VipCQDone(wcq, &vi, &rq), VIP_SUCCESS);
	CHECK_PTR(vi, wx);
	CHECK_EQ(rq, VIP_TRUE);
	CHECK_RET(VipCQDone(wcq, &vi, &rq), VIP_NOT_DONE);

	VT_PHASE("a thread in VipRecvWait on a VI without a CQ sleeps");
	sleeps_then_returns(1, "VipRecvWait (no CQ)", wx, 5, 32);
	CHECK_PTR(wait_desc, &D.d[3]);
	CHECK_DONE_OK(wait_desc, VIP_STATUS_OP_RECEIVE);
	CHECK_PAT(slot(3), LEN, 32, 0, 0);

	VT_PHASE("a thread in VipCQWait sleeps");
	sleeps_then_returns(2, "VipCQWait", wy, 2, 33);
	CHECK_PTR(wait_vi, wx);
	CHECK_EQ(wait_recvq, VIP_TRUE);
	CHECK_RET(VipRecvDone(wx, &d), VIP_SUCCESS);
	CHECK_PTR(d, &D.d[1]);
	CHECK_DONE_OK(d, VIP_STATUS_OP_RECEIVE);
	CHECK_PAT(slot(1), LEN, 33, 0, 0);

	CHECK_RET(VipDisconnect(wy), VIP_SUCCESS);
	vt_passive_teardown(wx);
	CHECK_RET(VipDestroyVi(wx), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(wy), VIP_SUCCESS);
	CHECK_RET(VipDestroyCQ(wcq), VIP_SUCCESS);
}

int main(void)
{
	struct sigaction sa;
	VIP_VI_ATTRIBUTES va, ra;
	stormy_server ss;
	pthread_t th;
	void *res = NULL;
	timer_t t;
	int i;
	unsigned long long end;

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	t = storm();

	VT_PHASE("set-up under the storm");
	vt_open(&N, VT_DEVICE);
	vt_descs_new(&N, &D, 6);
	vt_reg(&N, &M, 6 * 4096, VIP_FALSE, VIP_FALSE);
	va = vt_vi_attr(&N, VIP_SERVICE_RELIABLE_DELIVERY, 4096, VIP_FALSE, VIP_FALSE);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &a), VIP_SUCCESS);
	CHECK_RET(VipCreateVi(N.nic, &va, NULL, NULL, &b), VIP_SUCCESS);
	post_recv(b, 0);
	post_recv(b, 1);
	post_recv(a, 3);
	post_recv(a, 4);

	VT_PHASE("connect under the storm");
	memset(&ss, 0, sizeof ss);
	ss.s.n = &N;
	ss.s.local = vt_addr(&N, vt_node(), "sig-srv");
	ss.s.remote = vt_addr_space(&N);
	ss.s.vi = b;
	ss.s.expect_disc = "sig-cli";
	ss.s.level = VIP_SERVICE_RELIABLE_DELIVERY;
	CHECK(pthread_create(&th, NULL, server_main, &ss) == 0);
	{
		VIP_NET_ADDRESS *caddr = vt_addr(&N, vt_node(), "sig-cli");
		CHECK_RET(vt_request(a, caddr, ss.s.local, &ra, VT_WAIT), VIP_SUCCESS);
		free(caddr);
	}
	CHECK(pthread_join(th, NULL) == 0);
	CHECK_EQ(vt_state(a), VIP_STATE_CONNECTED);

	VT_PHASE("ping-pong under the storm");
	for (i = 0; i < MESSAGES; i++) {
		send_one(a, 2, (unsigned)i);
		recv_one(b, (unsigned)i);
		send_one(b, 5, (unsigned)i + 7);
		recv_one(a, (unsigned)i + 7);
	}
	timer_delete(t);
	printf("vipl_signals: %d round trips under %d alarms\n", MESSAGES, (int)alarms);
	CHECK(alarms > 0);

	VT_PHASE("cancel a thread blocked in VipRecvWait");
	CHECK(pthread_create(&th, NULL, blocked_receiver, NULL) == 0);
	vt_sleep_ms(300);
	CHECK(pthread_cancel(th) == 0);
	end = vt_now_ms() + 5000;
	for (;;) {
		if (pthread_tryjoin_np(th, &res) == 0)
			break;
		CHECK_MSG(vt_now_ms() < end, "the cancelled thread still runs after 5 s");
		vt_sleep_ms(10);
	}
	CHECK_PTR(res, PTHREAD_CANCELED);

	VT_PHASE("the VI still works after the cancel");
	send_one(b, 5, 99);
	recv_one(a, 99);

	VT_PHASE("cancel a thread blocked in VipConnectRequest");
	cancel_a_request(&va);

	VT_PHASE("a thread in VipConnectPeerWait sleeps, survives signals, and is cancelled");
	cancel_a_peer_wait(&va);

	VT_PHASE("teardown");
	CHECK_RET(VipDisconnect(a), VIP_SUCCESS);
	vt_passive_teardown(b);
	CHECK_RET(VipDestroyVi(a), VIP_SUCCESS);
	CHECK_RET(VipDestroyVi(b), VIP_SUCCESS);

	VT_PHASE("threads waiting for completions sleep");
	waits_sleep(&va);

	VT_PHASE("release");
	vt_unreg(&N, &M);
	vt_descs_free(&N, &D);
	free(ss.s.local);
	free(ss.s.remote);
	vt_close(&N);
	printf("vipl_signals: VIPL OK\n");
	return 0;
}
