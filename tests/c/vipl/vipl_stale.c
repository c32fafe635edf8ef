/*
 * A VI (and a CQ) destroyed while another thread keeps calling the data-path
 * entry points on its handle: every call answers a code (never a crash), and
 * every call begun after VipDestroyVi returned is VIP_INVALID_PARAMETER. The
 * stale handle stays so after the library has made many VIs and CQs since
 * (their handles reuse the table's slots): it never names a newer object.
 * Each round makes three objects (a spare CQ too), so over the table's eight
 * shards a slot a VI had is taken by a CQ later, and the other way round.
 */
#include "vipl_test.h"
#include <stdatomic.h>

#define ROUNDS 40
#define AFTER 200 /* calls of each kind after the destroy */
#define MADE 40   /* VIs and CQs made after the destroys */

typedef struct {
	VIP_VI_HANDLE vi;
	VIP_CQ_HANDLE cq;
	VIP_DESCRIPTOR *send;
	VIP_MEM_HANDLE mh;
	atomic_int gone;  /* set once VipDestroyVi and VipDestroyCQ returned */
	atomic_int going; /* the racer called at least once */
} race;

/* Whether rc is a code the call may answer on a live idle VI (or CQ), or INVALID_PARAMETER. */
static int allowed(VIP_RETURN rc)
{
	return rc == VIP_NOT_DONE || rc == VIP_TIMEOUT || rc == VIP_INVALID_STATE || rc == VIP_INVALID_PARAMETER;
}

/* Every data-path call on the handles once; each must answer INVALID_PARAMETER when stale. */
static void calls(race *r, int stale)
{
	VIP_DESCRIPTOR *d = NULL;
	VIP_VI_HANDLE v = NULL;
	VIP_BOOLEAN recv = VIP_FALSE;
	VIP_RETURN rc[7];
	rc[0] = VipSendDone(r->vi, &d);
	rc[1] = VipRecvDone(r->vi, &d);
	rc[2] = VipSendWait(r->vi, 0, &d);
	rc[3] = VipRecvWait(r->vi, 0, &d);
	rc[4] = VipPostSend(r->vi, r->send, r->mh);
	rc[5] = VipCQDone(r->cq, &v, &recv);
	rc[6] = VipCQWait(r->cq, 0, &v, &recv);
	for (int i = 0; i < 7; i++) {
		CHECK_MSG(allowed(rc[i]), "call %d answered %s", i, vt_ret_name(rc[i]));
		if (stale)
			CHECK_MSG(rc[i] == VIP_INVALID_PARAMETER, "call %d on a stale handle answered %s", i,
			    vt_ret_name(rc[i]));
	}
}

/* Whether handles a and b name the same slot of the library's table (its shard and index:
 * the handle without its kind, the low 3 bits, and its generation, the bits above 30). */
static int same_slot(void *a, void *b)
{
	uintptr_t mask = ((uintptr_t)1 << 30) - 8;
	return ((uintptr_t)a & mask) == ((uintptr_t)b & mask);
}

static void *racer(void *arg)
{
	race *r = (race *)arg;
	int after = 0;
	while (after < AFTER) {
		int stale = atomic_load(&r->gone);
		calls(r, stale);
		atomic_store(&r->going, 1);
		after += stale;
	}
	return NULL;
}

int main(void)
{
	vt_nic n;
	vt_descs ds;
	vt_mem buf;
	VIP_VI_HANDLE stale_vi[ROUNDS];
	VIP_CQ_HANDLE stale_cq[ROUNDS];
	VIP_VI_ATTRIBUTES va;
	vt_open(&n, "remora0");
	vt_descs_new(&n, &ds, 1);
	vt_reg(&n, &buf, 64, VIP_FALSE, VIP_FALSE);
	va = vt_vi_attr(&n, VIP_SERVICE_RELIABLE_DELIVERY, 65536, VIP_FALSE, VIP_FALSE);

	VT_PHASE("destroy under calls");
	for (int k = 0; k < ROUNDS; k++) {
		race r;
		pthread_t t;
		memset(&r, 0, sizeof r);
		r.send = vt_fill(&ds.d[0], 0, buf.mh, buf.p, 8, NULL, 0);
		r.mh = ds.mh;
		VIP_CQ_HANDLE spare;
		CHECK_RET(VipCreateCQ(n.nic, 4, &r.cq), VIP_SUCCESS);
		CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &r.vi), VIP_SUCCESS);
		CHECK_RET(VipCreateCQ(n.nic, 4, &spare), VIP_SUCCESS);
		CHECK(pthread_create(&t, NULL, racer, &r) == 0);
		while (!atomic_load(&r.going))
			;
		vt_sleep_ms(k % 3);
		CHECK_RET(VipDestroyVi(r.vi), VIP_SUCCESS);
		CHECK_RET(VipDestroyCQ(r.cq), VIP_SUCCESS);
		atomic_store(&r.gone, 1);
		CHECK(pthread_join(t, NULL) == 0);
		CHECK_RET(VipDestroyCQ(spare), VIP_SUCCESS);
		stale_vi[k] = r.vi;
		stale_cq[k] = r.cq;
	}

	VT_PHASE("stale handles after newer objects");
	{
		VIP_VI_HANDLE vis[MADE];
		VIP_CQ_HANDLE cqs[MADE], spares[MADE];
		int crossed = 0; /* newer objects in a slot a stale handle of the other kind had */
		for (int i = 0; i < MADE; i++) {
			CHECK_RET(VipCreateCQ(n.nic, 4, &cqs[i]), VIP_SUCCESS);
			CHECK_RET(VipCreateVi(n.nic, &va, NULL, NULL, &vis[i]), VIP_SUCCESS);
			CHECK_RET(VipCreateCQ(n.nic, 4, &spares[i]), VIP_SUCCESS);
			for (int k = 0; k < ROUNDS; k++) {
				CHECK(vis[i] != stale_vi[k] && cqs[i] != stale_cq[k] && spares[i] != stale_cq[k]);
				CHECK(vis[i] != stale_cq[k] && cqs[i] != stale_vi[k] && spares[i] != stale_vi[k]);
				crossed += same_slot(vis[i], stale_cq[k]) || same_slot(cqs[i], stale_vi[k]) ||
				    same_slot(spares[i], stale_vi[k]);
			}
		}
		CHECK_MSG(crossed > 0, "no newer object took a slot a stale handle of the other kind had");
		for (int k = 0; k < ROUNDS; k++) {
			race r;
			memset(&r, 0, sizeof r);
			r.vi = stale_vi[k];
			r.cq = stale_cq[k];
			r.send = &ds.d[0];
			r.mh = ds.mh;
			calls(&r, 1);
			CHECK_RET(VipDestroyVi(stale_vi[k]), VIP_INVALID_PARAMETER);
			CHECK_RET(VipDestroyCQ(stale_cq[k]), VIP_INVALID_PARAMETER);
		}
		for (int i = 0; i < MADE; i++) {
			CHECK_RET(VipDestroyVi(vis[i]), VIP_SUCCESS);
			CHECK_RET(VipDestroyCQ(cqs[i]), VIP_SUCCESS);
			CHECK_RET(VipDestroyCQ(spares[i]), VIP_SUCCESS);
		}
	}

	vt_unreg(&n, &buf);
	vt_descs_free(&n, &ds);
	vt_close(&n);
	printf("VIPL OK stale handles\n");
	return 0;
}
