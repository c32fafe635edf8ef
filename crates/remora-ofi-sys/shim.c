/* Remora's shim over libfabric: plain functions for the calls that the headers only offer as
 * static inline wrappers, and the set-up of one RDM endpoint (fabric, domain, address
 * vector, completion queue, endpoint) in one call. Every operation's context is a small
 * allocation of this file that carries the caller's 64-bit id; completions give the id
 * back and free it.
 *
 * libfabric is loaded with dlopen at the first call, not linked: Debian's build pulls in
 * libpsm_infinipath, whose constructor installs handlers for SIGINT, SIGTERM and others that
 * reset them and re-raise, killing a daemon before its own clean shutdown. Loading it only
 * when the ofi transport is used, and putting every signal's disposition back as it was
 * right after, keeps the processes that never use it free of it and those that do in charge
 * of their signals. Only five functions are exported calls (the rest go through the
 * objects' operation tables). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define ROFI_VERSION FI_VERSION(1, 9)

static struct {
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *, struct fi_info **);
	void (*freeinfo)(struct fi_info *);
	struct fi_info *(*dupinfo)(const struct fi_info *);
	int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	const char *(*strerror)(int);
} lf;
static pthread_once_t lf_once = PTHREAD_ONCE_INIT;
static int lf_ok;
static char lf_err[256];

static void lf_load(void)
{
	static struct sigaction saved[NSIG];
	void *h;
	int i;
	for (i = 1; i < NSIG; i++)
		sigaction(i, NULL, &saved[i]);
	h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			sigaction(i, &saved[i], NULL);
	if (!h) {
		snprintf(lf_err, sizeof(lf_err), "%s", dlerror());
		return;
	}
	*(void **)&lf.getinfo = dlsym(h, "fi_getinfo");
	*(void **)&lf.freeinfo = dlsym(h, "fi_freeinfo");
	*(void **)&lf.dupinfo = dlsym(h, "fi_dupinfo");
	*(void **)&lf.fabric = dlsym(h, "fi_fabric");
	*(void **)&lf.strerror = dlsym(h, "fi_strerror");
	if (!lf.getinfo || !lf.freeinfo || !lf.dupinfo || !lf.fabric || !lf.strerror) {
		snprintf(lf_err, sizeof(lf_err), "libfabric.so.1 lacks fi_getinfo, fi_dupinfo, fi_fabric or fi_strerror");
		return;
	}
	lf_ok = 1;
}

/* Load libfabric (once); 0, or -1 with why in `err`. */
int rofi_load(char *err, size_t errlen)
{
	pthread_once(&lf_once, lf_load);
	if (lf_ok)
		return 0;
	if (err && errlen)
		snprintf(err, errlen, "%s", lf_err);
	return -1;
}

static const char *lf_strerror(int rc)
{
	return rofi_load(NULL, 0) ? "libfabric is not loaded" : lf.strerror(rc);
}

struct rofi {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	int wait_fd; /* -1: the provider has no fd to wait on (use rofi_cq_sread) */
};

struct rofi_ctx {
	struct fi_context2 fc; /* first: the provider's part (FI_CONTEXT2 mode) */
	uint64_t id;
	void *buf;             /* a send's copy of the message, freed at completion */
	struct fid_mr *mr;     /* its registration, where the provider needs one */
};

/* One completion as Rust reads it. */
struct rofi_comp {
	uint64_t id;
	uint64_t flags;
	uint64_t len;
	int32_t err; /* 0, or a positive FI_E* / errno value */
	int32_t prov_err;
};

static void say(char *err, size_t errlen, const char *what, int rc)
{
	if (err && errlen)
		snprintf(err, errlen, "%s: %s (%d)", what, lf_strerror(rc < 0 ? -rc : rc), rc);
}

static struct fi_info *hints_for(const char *prov)
{
	struct fi_info *h = lf.dupinfo(NULL);
	if (!h)
		return NULL;
	h->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->tx_attr->msg_order = FI_ORDER_SAW | FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAW | FI_ORDER_SAS;
	if (prov && *prov)
		h->fabric_attr->prov_name = strdup(prov);
	return h;
}

int rofi_providers(char *out, size_t outlen)
{
	struct fi_info *h, *info = NULL, *i;
	size_t at = 0;
	int rc;
	if (rofi_load(NULL, 0))
		return -FI_ENOSYS;
	h = hints_for(NULL);
	if (!h)
		return -FI_ENOMEM;
	rc = lf.getinfo(ROFI_VERSION, NULL, NULL, 0, h, &info);
	lf.freeinfo(h);
	if (rc)
		return rc;
	if (outlen)
		out[0] = 0;
	for (i = info; i; i = i->next) {
		const char *p = i->fabric_attr->prov_name;
		size_t n = strlen(p);
		/* one line per provider name, each once */
		int seen = 0;
		const char *s = out;
		while (s && *s) {
			const char *e = strchr(s, '\n');
			size_t m = e ? (size_t)(e - s) : strlen(s);
			if (m == n && !strncmp(s, p, n))
				seen = 1;
			s = e ? e + 1 : NULL;
		}
		if (seen || at + n + 2 > outlen)
			continue;
		memcpy(out + at, p, n);
		at += n;
		out[at++] = '\n';
		out[at] = 0;
	}
	lf.freeinfo(info);
	return (int)at;
}

static int getinfo(const char *prov, const char *node, struct fi_info **info)
{
	struct fi_info *h = hints_for(prov);
	int rc;
	if (!h)
		return -FI_ENOMEM;
	rc = -FI_ENODATA;
	if (node && *node)
		rc = lf.getinfo(ROFI_VERSION, node, NULL, FI_SOURCE, h, info);
	if (rc)
		rc = lf.getinfo(ROFI_VERSION, NULL, NULL, 0, h, info);
	lf.freeinfo(h);
	return rc;
}

/* Close the endpoint object alone (the operations still outstanding on it are discarded:
 * the provider touches their buffers and registrations no more); rofi_close closes the rest
 * once every registration of the domain is closed too. 0, or fi_close's failure: then the
 * endpoint is still open (the provider may still use what its operations name) and stays
 * in `r`. */
int rofi_close_ep(struct rofi *r)
{
	int rc;
	if (!r || !r->ep)
		return 0;
	rc = fi_close(&r->ep->fid);
	if (rc)
		return rc;
	r->ep = NULL;
	return 0;
}

/* Close the objects of `r` (each once, in order) and free it: 0; or the first close that
 * failed (-FI_EBUSY: something of the domain is still open), and then that object and
 * those after it stay open and `r` is not freed (the provider may still use them). */
int rofi_close(struct rofi *r)
{
	int rc;
	if (!r)
		return 0;
#define ROFI_CLOSE(obj)                          \
	do {                                     \
		if (obj) {                       \
			rc = fi_close(&(obj)->fid); \
			if (rc)                  \
				return rc;       \
			(obj) = NULL;            \
		}                                \
	} while (0)
	ROFI_CLOSE(r->ep);
	ROFI_CLOSE(r->cq);
	ROFI_CLOSE(r->av);
	ROFI_CLOSE(r->domain);
	ROFI_CLOSE(r->fabric);
#undef ROFI_CLOSE
	if (r->info)
		lf.freeinfo(r->info);
	free(r);
	return 0;
}

static int open_at(const char *prov, const char *node, struct rofi **out, char *err, size_t errlen)
{
	struct rofi *r = calloc(1, sizeof(*r));
	struct fi_cq_attr cq_attr;
	struct fi_av_attr av_attr;
	int rc;
	if (!r)
		return -FI_ENOMEM;
	r->wait_fd = -1;
	rc = getinfo(prov, node, &r->info);
	if (rc) {
		say(err, errlen, "fi_getinfo", rc);
		goto fail;
	}
	rc = lf.fabric(r->info->fabric_attr, &r->fabric, NULL);
	if (rc) {
		say(err, errlen, "fi_fabric", rc);
		goto fail;
	}
	rc = fi_domain(r->fabric, r->info, &r->domain, NULL);
	if (rc) {
		say(err, errlen, "fi_domain", rc);
		goto fail;
	}
	memset(&av_attr, 0, sizeof(av_attr));
	av_attr.type = FI_AV_MAP;
	rc = fi_av_open(r->domain, &av_attr, &r->av, NULL);
	if (rc) {
		av_attr.type = FI_AV_TABLE;
		rc = fi_av_open(r->domain, &av_attr, &r->av, NULL);
	}
	if (rc) {
		say(err, errlen, "fi_av_open", rc);
		goto fail;
	}
	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.format = FI_CQ_FORMAT_MSG;
	cq_attr.size = 4096;
	cq_attr.wait_obj = FI_WAIT_FD;
	rc = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL);
	if (rc) {
		cq_attr.wait_obj = FI_WAIT_UNSPEC;
		rc = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL);
	} else {
		int fd = -1;
		if (fi_control(&r->cq->fid, FI_GETWAIT, &fd) == 0)
			r->wait_fd = fd;
	}
	if (rc) {
		say(err, errlen, "fi_cq_open", rc);
		goto fail;
	}
	rc = fi_endpoint(r->domain, r->info, &r->ep, NULL);
	if (rc) {
		say(err, errlen, "fi_endpoint", rc);
		goto fail;
	}
	rc = fi_ep_bind(r->ep, &r->av->fid, 0);
	if (!rc)
		rc = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV);
	if (rc) {
		say(err, errlen, "fi_ep_bind", rc);
		goto fail;
	}
	rc = fi_enable(r->ep);
	if (rc) {
		say(err, errlen, "fi_enable", rc);
		goto fail;
	}
	*out = r;
	return 0;
fail:
	(void)rofi_close(r); /* a failure leaves the rest open: nothing was registered yet */
	return rc ? rc : -FI_EOTHER;
}

/* Whether /dev/shm holds a region of the shm provider named after `node` ("<node>:…") that
 * is too short to be one: its maker died between creating and sizing it. The provider reads
 * the header of a region whose name it finds taken, to see whether its owner lives, and a
 * process that does so with such a region dies of SIGBUS. A real region is far larger than
 * a page; one being made at this instant only sends this open to another name. */
static int short_region_named(const char *node)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	size_t n = strlen(node);
	int found = 0;
	if (!d)
		return 0;
	while (!found && (e = readdir(d)) != NULL) {
		struct stat st;
		if (strncmp(e->d_name, node, n) != 0 || e->d_name[n] != ':')
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    st.st_size < 4096)
			found = 1;
	}
	closedir(d);
	return found;
}

int rofi_open(const char *prov, const char *node, struct rofi **out, char *err, size_t errlen)
{
	int rc;
	if (rofi_load(err, errlen))
		return -FI_ENOSYS;
	/* A short region under the host's name: the provider's own choice of a source at once,
	 * as after EBUSY below (rather than a process killed by the provider). */
	if (node && *node && prov && strcmp(prov, "shm") == 0 && short_region_named(node))
		node = NULL;
	rc = open_at(prov, node, out, err, errlen);
	/* A source named after the host is not unique on it for every provider: shm names its
	 * region after it, so a second endpoint of the host on that provider (another node's
	 * daemon, another cluster's) found the name taken (fi_enable: EBUSY). The provider's
	 * own choice of a source then: peers learn the endpoint's name at the bootstrap. Only
	 * for that refusal: a source that cannot be opened for another reason (a wrong host in
	 * the cluster file) must not quietly become the provider's default interface. Where
	 * the second try fails too, the first one's reason is the one reported. */
	if (rc == -FI_EBUSY && node && *node) {
		char first[256];
		snprintf(first, sizeof(first), "%s", err ? err : "");
		rc = open_at(prov, NULL, out, err, errlen);
		if (rc && err && errlen)
			snprintf(err, errlen, "%s", first);
	}
	return rc;
}

const char *rofi_provider(const struct rofi *r)
{
	return r->info->fabric_attr->prov_name;
}

int rofi_wait_fd(const struct rofi *r)
{
	return r->wait_fd;
}

/* Bit 0: local buffers need a registration (FI_MR_LOCAL); bit 1: remote addresses are
 * virtual addresses (FI_MR_VIRT_ADDR), else offsets in the region; bit 2: the provider
 * chooses keys (FI_MR_PROV_KEY). */
int rofi_mr_mode(const struct rofi *r)
{
	int m = r->info->domain_attr->mr_mode, o = 0;
	if (m & FI_MR_LOCAL)
		o |= 1;
	if (m & FI_MR_VIRT_ADDR)
		o |= 2;
	if (m & FI_MR_PROV_KEY)
		o |= 4;
	return o;
}

int rofi_name(const struct rofi *r, void *buf, size_t *len)
{
	return fi_getname(&r->ep->fid, buf, len);
}

int rofi_av_insert(struct rofi *r, const void *addr, uint64_t *fi_addr)
{
	fi_addr_t a = FI_ADDR_UNSPEC;
	int n = fi_av_insert(r->av, addr, 1, &a, 0, NULL);
	if (n != 1)
		return n < 0 ? n : -FI_EINVAL;
	*fi_addr = a;
	return 0;
}

int rofi_av_remove(struct rofi *r, uint64_t fi_addr)
{
	fi_addr_t a = fi_addr;
	return fi_av_remove(r->av, &a, 1, 0);
}

static struct rofi_ctx *ctx_new(uint64_t id)
{
	struct rofi_ctx *c = calloc(1, sizeof(*c));
	if (c)
		c->id = id;
	return c;
}

static void ctx_free(struct rofi_ctx *c)
{
	if (c->mr)
		fi_close(&c->mr->fid);
	free(c->buf);
	free(c);
}

int rofi_recv(struct rofi *r, void *buf, size_t len, void *desc, uint64_t id)
{
	struct rofi_ctx *c = ctx_new(id);
	int rc;
	if (!c)
		return -FI_ENOMEM;
	rc = fi_recv(r->ep, buf, len, desc, FI_ADDR_UNSPEC, &c->fc);
	if (rc)
		free(c);
	return rc;
}

/* Send a copy of `len` bytes of `msg` (the copy is freed when the send completes). */
int rofi_send(struct rofi *r, const void *msg, size_t len, uint64_t dest, uint64_t id)
{
	struct rofi_ctx *c = ctx_new(id);
	void *desc = NULL;
	int rc;
	if (!c)
		return -FI_ENOMEM;
	c->buf = malloc(len ? len : 1);
	if (!c->buf) {
		free(c);
		return -FI_ENOMEM;
	}
	memcpy(c->buf, msg, len);
	if (r->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		rc = fi_mr_reg(r->domain, c->buf, len ? len : 1, FI_SEND, 0, 0, 0, &c->mr, NULL);
		if (rc) {
			ctx_free(c);
			return rc;
		}
		desc = fi_mr_desc(c->mr);
	}
	rc = fi_send(r->ep, c->buf, len, desc, dest, &c->fc);
	if (rc)
		ctx_free(c);
	return rc;
}

/* Register `len` bytes at `buf` under key `want` where the provider lets us choose (a random
 * key: a peer cannot guess another region's); `kind` 0 for local use (sources of writes, destinations
 * of reads), 1 for remote reads by peers, 2 for remote writes, 3 for both. */
int rofi_mr_reg(struct rofi *r, void *buf, size_t len, int kind, uint64_t want, struct fid_mr **mr,
		uint64_t *key, void **desc)
{
	uint64_t access = kind == 0 ? (FI_READ | FI_WRITE | FI_SEND | FI_RECV)
				    : ((kind & 1 ? FI_REMOTE_READ : 0) | (kind & 2 ? FI_REMOTE_WRITE : 0));
	int rc;
	size_t ks = r->info->domain_attr->mr_key_size;
	if (ks && ks < 8)
		want &= (1ULL << (8 * ks)) - 1;
	rc = fi_mr_reg(r->domain, buf, len, access, 0, want, 0, mr, NULL);
	if (rc)
		return rc;
	*key = fi_mr_key(*mr);
	*desc = fi_mr_desc(*mr);
	return 0;
}

int rofi_mr_close(struct fid_mr *mr)
{
	return fi_close(&mr->fid);
}

int rofi_write(struct rofi *r, const void *buf, size_t len, void *desc, uint64_t dest, uint64_t addr,
	       uint64_t key, uint64_t id)
{
	struct rofi_ctx *c = ctx_new(id);
	int rc;
	if (!c)
		return -FI_ENOMEM;
	rc = fi_write(r->ep, buf, len, desc, dest, addr, key, &c->fc);
	if (rc)
		free(c);
	return rc;
}

int rofi_read(struct rofi *r, void *buf, size_t len, void *desc, uint64_t dest, uint64_t addr, uint64_t key,
	      uint64_t id)
{
	struct rofi_ctx *c = ctx_new(id);
	int rc;
	if (!c)
		return -FI_ENOMEM;
	rc = fi_read(r->ep, buf, len, desc, dest, addr, key, &c->fc);
	if (rc)
		free(c);
	return rc;
}

static int take(struct rofi *r, struct rofi_comp *out, size_t max, int n, struct fi_cq_msg_entry *e)
{
	int i;
	(void)r;
	(void)max;
	for (i = 0; i < n; i++) {
		struct rofi_ctx *c = e[i].op_context;
		out[i].id = c ? c->id : 0;
		out[i].flags = e[i].flags;
		out[i].len = e[i].len;
		out[i].err = 0;
		out[i].prov_err = 0;
		if (c)
			ctx_free(c);
	}
	return n;
}

/* After fi_cq_read/fi_cq_sread answered `n`: the entries, one error entry, or nothing. */
static int finish(struct rofi *r, struct rofi_comp *out, size_t max, ssize_t n, struct fi_cq_msg_entry *e)
{
	struct fi_cq_err_entry ee;
	if (n > 0)
		return take(r, out, max, (int)n, e);
	if (n == -FI_EAGAIN || n == 0)
		return 0;
	if (n != -FI_EAVAIL)
		return (int)n;
	memset(&ee, 0, sizeof(ee));
	n = fi_cq_readerr(r->cq, &ee, 0);
	if (n < 0)
		return n == -FI_EAGAIN ? 0 : (int)n;
	{
		struct rofi_ctx *c = ee.op_context;
		out[0].id = c ? c->id : 0;
		out[0].flags = ee.flags;
		out[0].len = ee.len;
		out[0].err = ee.err ? ee.err : FI_EOTHER;
		out[0].prov_err = ee.prov_errno;
		if (c)
			ctx_free(c);
	}
	return 1;
}

/* Read up to `max` completions (errors one at a time); 0 when there are none. */
int rofi_cq_read(struct rofi *r, struct rofi_comp *out, size_t max)
{
	struct fi_cq_msg_entry e[32];
	if (max > 32)
		max = 32;
	return finish(r, out, max, fi_cq_read(r->cq, e, max), e);
}

/* Whether the caller may sleep on the wait fd now (0), or must read the queue first. */
int rofi_trywait(struct rofi *r)
{
	struct fid *f = &r->cq->fid;
	return fi_trywait(r->fabric, &f, 1);
}

const char *rofi_strerror(int rc)
{
	return lf_strerror(rc < 0 ? -rc : rc);
}

uint64_t rofi_flag_recv(void)
{
	return FI_RECV;
}
