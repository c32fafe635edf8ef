/*
 * scif_misuse: the misuse matrix of libscif (issue 18 item 3). Every call is made with an
 * invalid descriptor (-1), a closed (freed) endpoint, a descriptor that is no endpoint, NULL
 * pointers, flags that do not belong, misaligned or out-of-range offsets and lengths, and in
 * states that forbid it; each must fail with the errno scif.h documents (an argument that is
 * no endpoint: EBADF, as capi/scif documents). One ROW line per row (misuse.h). The
 * connected pair is a loopback connection on this node (ports 2190..2193).
 */
#include "misuse.h"
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <scif.h>

#define PAGE 4096
#define RW (SCIF_PROT_READ | SCIF_PROT_WRITE)
#define WIN 0x100000
#define PORT 2190
#define PORT_NOBODY 2193
#define BADFLAG 0x40000000

/* The errno of a call that must fail (0 when it succeeded). */
#define ERR(call) ({ errno = 0; long r_ = (long)(call); r_ == -1 ? errno : 0; })
#define ERRP(call) ({ errno = 0; void *p_ = (void *)(call); p_ == SCIF_MMAP_FAILED ? errno : 0; })

struct acceptor {
    scif_epd_t lep, nepd;
    struct scif_portID peer;
    int rc;
};

static void *accept_main(void *arg)
{
    struct acceptor *a = arg;
    a->rc = scif_accept(a->lep, &a->peer, &a->nepd, SCIF_ACCEPT_SYNC);
    return NULL;
}

static scif_epd_t freed_endpoint(int devnull)
{
    /* A closed endpoint's number, held by a descriptor that is no endpoint, so that no
     * later endpoint can take the number back. */
    scif_epd_t e = scif_open();
    MUST(e >= 0 && scif_close(e) == 0);
    MUST(dup2(devnull, e) == e);
    return e;
}

int main(void)
{
    int devnull = open("/dev/null", O_RDWR);
    scif_epd_t fe, un, bound, lis, c, n, x;
    struct scif_portID dst, peer;
    struct acceptor acc;
    pthread_t th;
    uint16_t self, nodes[8];
    char *page, *page2, buf[64];
    int mark;
    struct scif_pollepd pe;

    misuse_begin("SCIF");
    MUST(devnull >= 0);
    MUST(posix_memalign((void **)&page, PAGE, 2 * PAGE) == 0);
    MUST(posix_memalign((void **)&page2, PAGE, PAGE) == 0);
    MUST(scif_get_nodeIDs(nodes, 8, &self) >= 1);
    fe = freed_endpoint(devnull);
    un = scif_open();
    bound = scif_open();
    lis = scif_open();
    c = scif_open();
    MUST(un >= 0 && bound >= 0 && lis >= 0 && c >= 0);
    MUST(scif_bind(bound, PORT + 1) == PORT + 1);
    MUST(scif_bind(lis, PORT) == PORT);
    MUST(scif_listen(lis, 2) == 0);
    acc.lep = lis;
    MUST(pthread_create(&th, NULL, accept_main, &acc) == 0);
    dst.node = self;
    dst.port = PORT;
    MUST(scif_connect(c, &dst) > 0);
    MUST(pthread_join(th, NULL) == 0 && acc.rc == 0);
    n = acc.nepd;
    MUST(scif_register(c, page, 2 * PAGE, WIN, RW, SCIF_MAP_FIXED) == WIN);
    MUST(scif_register(n, page2, PAGE, WIN, SCIF_PROT_READ, SCIF_MAP_FIXED) == WIN);

    ROW("scif_close", NULLH, EBADF, ERR(scif_close(-1)));
    ROW("scif_close", FREED, EBADF, ERR(scif_close(fe)));
    ROW("scif_close", KIND, EBADF, ERR(scif_close(devnull)));
    ROW("scif_bind", NULLH, EBADF, ERR(scif_bind(-1, 0)));
    ROW("scif_bind", FREED, EBADF, ERR(scif_bind(fe, 0)));
    ROW("scif_bind", KIND, EBADF, ERR(scif_bind(devnull, 0)));
    ROW("scif_bind", STATE, EINVAL, ERR(scif_bind(bound, 0)));
    ROW("scif_bind", STATE, EINVAL, ERR(scif_bind(un, PORT)));
    ROW("scif_listen", NULLH, EBADF, ERR(scif_listen(-1, 1)));
    ROW("scif_listen", FREED, EBADF, ERR(scif_listen(fe, 1)));
    ROW("scif_listen", STATE, EINVAL, ERR(scif_listen(un, 1)));
    ROW("scif_listen", RANGE, EINVAL, ERR(scif_listen(bound, 0)));
    ROW("scif_listen", STATE, EISCONN, ERR(scif_listen(lis, 1)));
    ROW("scif_connect", NULLH, EBADF, ERR(scif_connect(-1, &dst)));
    ROW("scif_connect", FREED, EBADF, ERR(scif_connect(fe, &dst)));
    ROW("scif_connect", NULLP, EINVAL, ERR(scif_connect(bound, NULL)));
    dst.node = 999;
    ROW("scif_connect", UNKNOWN, ENODEV, ERR(scif_connect(bound, &dst)));
    dst.node = self;
    dst.port = PORT_NOBODY;
    ROW("scif_connect", UNKNOWN, ECONNREFUSED, ERR(scif_connect(bound, &dst)));
    dst.port = PORT;
    ROW("scif_connect", STATE, EOPNOTSUPP, ERR(scif_connect(lis, &dst)));
    ROW("scif_connect", STATE, EISCONN, ERR(scif_connect(c, &dst)));
    ROW("scif_accept", NULLH, EBADF, ERR(scif_accept(-1, &peer, &x, 0)));
    ROW("scif_accept", FREED, EBADF, ERR(scif_accept(fe, &peer, &x, 0)));
    ROW("scif_accept", NULLP, EINVAL, ERR(scif_accept(lis, NULL, &x, 0)));
    ROW("scif_accept", NULLP, EINVAL, ERR(scif_accept(lis, &peer, NULL, 0)));
    ROW("scif_accept", FLAG, EINVAL, ERR(scif_accept(lis, &peer, &x, BADFLAG)));
    ROW("scif_accept", STATE, EINVAL, ERR(scif_accept(bound, &peer, &x, SCIF_ACCEPT_SYNC)));
    ROW("scif_accept", STATE, EAGAIN, ERR(scif_accept(lis, &peer, &x, 0)));

    ROW("scif_send", NULLH, EBADF, ERR(scif_send(-1, buf, 8, 0)));
    ROW("scif_send", FREED, EBADF, ERR(scif_send(fe, buf, 8, 0)));
    ROW("scif_send", STATE, ENOTCONN, ERR(scif_send(un, buf, 8, 0)));
    ROW("scif_send", STATE, ENOTCONN, ERR(scif_send(lis, buf, 8, 0)));
    ROW("scif_send", RANGE, EINVAL, ERR(scif_send(c, buf, -1, 0)));
    ROW("scif_send", FLAG, EINVAL, ERR(scif_send(c, buf, 8, BADFLAG)));
    ROW("scif_send", NULLP, EFAULT, ERR(scif_send(c, NULL, 8, 0)));
    ROW("scif_recv", NULLH, EBADF, ERR(scif_recv(-1, buf, 8, 0)));
    ROW("scif_recv", FREED, EBADF, ERR(scif_recv(fe, buf, 8, 0)));
    ROW("scif_recv", STATE, ENOTCONN, ERR(scif_recv(un, buf, 8, 0)));
    ROW("scif_recv", RANGE, EINVAL, ERR(scif_recv(c, buf, -1, 0)));
    ROW("scif_recv", FLAG, EINVAL, ERR(scif_recv(c, buf, 8, BADFLAG)));
    ROW("scif_recv", NULLP, EFAULT, ERR(scif_recv(c, NULL, 8, 0)));

    ROW("scif_register", NULLH, EBADF, ERR(scif_register(-1, page, PAGE, 0, RW, 0)));
    ROW("scif_register", FREED, EBADF, ERR(scif_register(fe, page, PAGE, 0, RW, 0)));
    ROW("scif_register", STATE, ENOTCONN, ERR(scif_register(un, page, PAGE, 0, RW, 0)));
    ROW("scif_register", RANGE, EINVAL, ERR(scif_register(c, page + 1, PAGE, 0, RW, 0)));
    ROW("scif_register", RANGE, EINVAL, ERR(scif_register(c, page, 0, 0, RW, 0)));
    ROW("scif_register", RANGE, EINVAL, ERR(scif_register(c, page, PAGE, -PAGE, RW, SCIF_MAP_FIXED)));
    ROW("scif_register", RANGE, EINVAL, ERR(scif_register(c, page, PAGE, WIN + 1, RW, SCIF_MAP_FIXED)));
    ROW("scif_register", FLAG, EINVAL, ERR(scif_register(c, page, PAGE, 0, RW, BADFLAG)));
    ROW("scif_register", FLAG, EINVAL, ERR(scif_register(c, page, PAGE, 0, BADFLAG, 0)));
    ROW("scif_register", STATE, EADDRINUSE, ERR(scif_register(c, page, PAGE, WIN, RW, SCIF_MAP_FIXED)));
    ROW("scif_unregister", NULLH, EBADF, ERR(scif_unregister(-1, WIN, PAGE)));
    ROW("scif_unregister", FREED, EBADF, ERR(scif_unregister(fe, WIN, PAGE)));
    ROW("scif_unregister", STATE, ENOTCONN, ERR(scif_unregister(un, WIN, PAGE)));
    ROW("scif_unregister", RANGE, ENXIO, ERR(scif_unregister(c, 8 * WIN, PAGE)));
    ROW("scif_unregister", RANGE, EINVAL, ERR(scif_unregister(c, -PAGE, PAGE)));
    ROW("scif_unregister", RANGE, EINVAL, ERR(scif_unregister(c, WIN, PAGE))); /* cuts the window */

    ROW("scif_mmap", NULLH, EBADF, ERRP(scif_mmap(NULL, PAGE, RW, 0, -1, WIN)));
    ROW("scif_mmap", FREED, EBADF, ERRP(scif_mmap(NULL, PAGE, RW, 0, fe, WIN)));
    ROW("scif_mmap", STATE, ENOTCONN, ERRP(scif_mmap(NULL, PAGE, RW, 0, un, WIN)));
    ROW("scif_mmap", RANGE, ENXIO, ERRP(scif_mmap(NULL, PAGE, RW, 0, c, 8 * WIN)));
    ROW("scif_mmap", RANGE, ENXIO, ERRP(scif_mmap(NULL, 4 * PAGE, SCIF_PROT_READ, 0, c, WIN)));
    ROW("scif_mmap", RANGE, ENXIO, ERRP(scif_mmap(NULL, PAGE, RW, 0, c, -PAGE)));
    ROW("scif_mmap", RANGE, EINVAL, ERRP(scif_mmap(NULL, PAGE, RW, 0, c, WIN + 1)));
    ROW("scif_mmap", RANGE, EINVAL, ERRP(scif_mmap(NULL, 0, RW, 0, c, WIN)));
    ROW("scif_mmap", FLAG, EINVAL, ERRP(scif_mmap(NULL, PAGE, RW, BADFLAG, c, WIN)));
    ROW("scif_mmap", STATE, EACCES, ERRP(scif_mmap(NULL, PAGE, RW, 0, c, WIN))); /* the window is read-only */
    ROW("scif_munmap", RANGE, EINVAL, ERR(scif_munmap(page + 1, PAGE)));
    ROW("scif_munmap", RANGE, EINVAL, ERR(scif_munmap(page, 0)));

    ROW("scif_readfrom", NULLH, EBADF, ERR(scif_readfrom(-1, WIN, 8, WIN, 0)));
    ROW("scif_readfrom", FREED, EBADF, ERR(scif_readfrom(fe, WIN, 8, WIN, 0)));
    ROW("scif_readfrom", STATE, ENOTCONN, ERR(scif_readfrom(un, WIN, 8, WIN, 0)));
    ROW("scif_readfrom", RANGE, ENXIO, ERR(scif_readfrom(c, WIN, 8, WIN + PAGE, 0)));
    ROW("scif_readfrom", RANGE, ENXIO, ERR(scif_readfrom(c, WIN, 8, -8, 0)));
    ROW("scif_readfrom", FLAG, EINVAL, ERR(scif_readfrom(c, WIN, 8, WIN, BADFLAG)));
    ROW("scif_writeto", NULLH, EBADF, ERR(scif_writeto(-1, WIN, 8, WIN, 0)));
    ROW("scif_writeto", FREED, EBADF, ERR(scif_writeto(fe, WIN, 8, WIN, 0)));
    ROW("scif_writeto", STATE, ENOTCONN, ERR(scif_writeto(un, WIN, 8, WIN, 0)));
    ROW("scif_writeto", RANGE, ENXIO, ERR(scif_writeto(c, 8 * WIN, 8, WIN, 0)));
    ROW("scif_writeto", FLAG, EINVAL, ERR(scif_writeto(c, WIN, 8, WIN, BADFLAG)));
    ROW("scif_writeto", STATE, EACCES, ERR(scif_writeto(c, WIN, 8, WIN, 0))); /* read-only window */
    ROW("scif_vreadfrom", NULLH, EBADF, ERR(scif_vreadfrom(-1, buf, 8, WIN, 0)));
    ROW("scif_vreadfrom", FREED, EBADF, ERR(scif_vreadfrom(fe, buf, 8, WIN, 0)));
    ROW("scif_vreadfrom", STATE, ENOTCONN, ERR(scif_vreadfrom(un, buf, 8, WIN, 0)));
    ROW("scif_vreadfrom", NULLP, EFAULT, ERR(scif_vreadfrom(c, NULL, 8, WIN, 0)));
    ROW("scif_vreadfrom", RANGE, ENXIO, ERR(scif_vreadfrom(c, buf, 8, WIN + PAGE - 4, 0)));
    ROW("scif_vreadfrom", FLAG, EINVAL, ERR(scif_vreadfrom(c, buf, 8, WIN, BADFLAG)));
    ROW("scif_vwriteto", NULLH, EBADF, ERR(scif_vwriteto(-1, buf, 8, WIN, 0)));
    ROW("scif_vwriteto", FREED, EBADF, ERR(scif_vwriteto(fe, buf, 8, WIN, 0)));
    ROW("scif_vwriteto", NULLP, EFAULT, ERR(scif_vwriteto(c, NULL, 8, WIN, 0)));
    ROW("scif_vwriteto", RANGE, ENXIO, ERR(scif_vwriteto(c, buf, 8, 8 * WIN, 0)));
    ROW("scif_vwriteto", FLAG, EINVAL, ERR(scif_vwriteto(c, buf, 8, WIN, BADFLAG)));

    ROW("scif_fence_mark", NULLH, EBADF, ERR(scif_fence_mark(-1, SCIF_FENCE_INIT_SELF, &mark)));
    ROW("scif_fence_mark", FREED, EBADF, ERR(scif_fence_mark(fe, SCIF_FENCE_INIT_SELF, &mark)));
    ROW("scif_fence_mark", STATE, ENOTCONN, ERR(scif_fence_mark(un, SCIF_FENCE_INIT_SELF, &mark)));
    ROW("scif_fence_mark", NULLP, EINVAL, ERR(scif_fence_mark(c, SCIF_FENCE_INIT_SELF, NULL)));
    ROW("scif_fence_mark", FLAG, EINVAL, ERR(scif_fence_mark(c, SCIF_FENCE_INIT_SELF | SCIF_FENCE_INIT_PEER, &mark)));
    ROW("scif_fence_mark", FLAG, EINVAL, ERR(scif_fence_mark(c, BADFLAG, &mark)));
    ROW("scif_fence_wait", NULLH, EBADF, ERR(scif_fence_wait(-1, 0)));
    ROW("scif_fence_wait", FREED, EBADF, ERR(scif_fence_wait(fe, 0)));
    ROW("scif_fence_wait", STATE, ENOTCONN, ERR(scif_fence_wait(un, 0)));
    ROW("scif_fence_wait", RANGE, EINVAL, ERR(scif_fence_wait(c, -5)));
    ROW("scif_fence_signal", NULLH, EBADF, ERR(scif_fence_signal(-1, WIN, 1, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL)));
    ROW("scif_fence_signal", FREED, EBADF, ERR(scif_fence_signal(fe, WIN, 1, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL)));
    ROW("scif_fence_signal", STATE, ENOTCONN,
        ERR(scif_fence_signal(un, WIN, 1, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL)));
    ROW("scif_fence_signal", RANGE, EINVAL,
        ERR(scif_fence_signal(c, WIN + 2, 1, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL)));
    ROW("scif_fence_signal", RANGE, ENXIO,
        ERR(scif_fence_signal(c, 8 * WIN, 1, 0, 0, SCIF_FENCE_INIT_SELF | SCIF_SIGNAL_LOCAL)));
    ROW("scif_fence_signal", FLAG, EINVAL, ERR(scif_fence_signal(c, WIN, 1, 0, 0, SCIF_SIGNAL_LOCAL)));
    ROW("scif_fence_signal", FLAG, EINVAL, ERR(scif_fence_signal(c, WIN, 1, 0, 0, BADFLAG)));

    ROW("scif_get_nodeIDs", NULLP, EFAULT, ERR(scif_get_nodeIDs(NULL, 4, &self)));
    ROW("scif_get_fd", NULLH, EINVAL, ERR(scif_get_fd(-1)));
    ROW("scif_get_fd", FREED, EINVAL, ERR(scif_get_fd(fe)));
    ROW("scif_poll", NULLP, EFAULT, ERR(scif_poll(NULL, 1, 0)));
    ROW("scif_poll", RANGE, EINVAL, ERR(scif_poll(&pe, 0x7fffffffu, 0)));
    pe.epd = scif_open(); /* a closed endpoint whose number nothing took back yet */
    MUST(pe.epd >= 0 && scif_close(pe.epd) == 0);
    pe.events = SCIF_POLLIN;
    pe.revents = 0;
    ROWAS("scif_poll", FREED, "1 with SCIF_POLLNVAL", 1,
          scif_poll(&pe, 1, 0) == 1 && (pe.revents & SCIF_POLLNVAL) != 0 ? 1 : 0);

    MUST(scif_unregister(c, WIN, 2 * PAGE) == 0);
    MUST(scif_close(c) == 0 && scif_close(n) == 0 && scif_close(lis) == 0);
    MUST(scif_close(bound) == 0 && scif_close(un) == 0);
    close(fe);
    close(devnull);
    free(page);
    free(page2);
    return misuse_end();
}
