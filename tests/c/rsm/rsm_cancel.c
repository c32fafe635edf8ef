/* Threads cancelled with pthread_cancel while blocked in RSMAPI's waits end alone and
 * leave the library usable: rsm_intr_signal_wait and rsm_intr_signal_wait_pollfd with no
 * time limit, each cancelled asynchronously and deferred (a blocking wait is a
 * cancellation point, as poll is). A thread that does not end within 5 s fails the run.
 * Then a signal posted to the segment still reaches a waiter. Prints "RSM OK". */
#define _GNU_SOURCE
#include "rsm_test.h"
#include "../cancel_join.h"
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static rsm_memseg_export_handle_t ex;
static struct pollfd pfd;

struct job {
	int pollfd;
	int async;
};

static void *waiter(void *arg)
{
	struct job *j = arg;
	if (j->async)
		pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
	for (;;) {
		if (j->pollfd) {
			struct pollfd p = pfd;
			int n = 0;
			rsm_intr_signal_wait_pollfd(&p, 1, -1, &n);
		} else {
			rsm_intr_signal_wait(ex, -1);
		}
	}
	return NULL;
}

int main(void)
{
	rsmapi_controller_handle_t c;
	setvbuf(stdout, NULL, _IOLBF, 0);
	CK(rsm_get_controller("sci0", &c), RSM_SUCCESS);
	rsm_node_id_t me = local_node();
	void *buf = pages(1);
	memset(buf, 0, 4096);
	rsm_memseg_id_t id = 0x400200;
	rsm_memseg_import_handle_t im;
	CK(rsm_memseg_export_create(c, &ex, buf, 4096, 0), RSM_SUCCESS);
	CK(rsm_memseg_export_publish(ex, &id, NULL, 0), RSM_SUCCESS);
	CK(rsm_memseg_import_connect(c, me, id, RSM_PERM_RDWR, &im), RSM_SUCCESS);
	CK(rsm_memseg_get_pollfd(ex, &pfd), RSM_SUCCESS);
	for (int pollfd = 0; pollfd < 2; pollfd++) {
		for (int i = 0; i < 4; i++) {
			struct job j = {.pollfd = pollfd, .async = i % 2};
			pthread_t th;
			EXPECT(pthread_create(&th, NULL, waiter, &j) == 0, "pthread_create");
			usleep(20000);
			int r = cancel_and_join(th, 5);
			EXPECT(r == 0, "a thread blocked in %s (%s cancel) %s",
			    pollfd ? "rsm_intr_signal_wait_pollfd" : "rsm_intr_signal_wait",
			    j.async ? "asynchronous" : "deferred",
			    r == 1 ? "did not end within 5 s" : "did not end by cancellation");
		}
	}
	/* The library is intact: a signal posted by the importer reaches a waiter. */
	CK(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
	CK(rsm_intr_signal_wait(ex, 5000), RSM_SUCCESS);
	CK(rsm_memseg_release_pollfd(ex), RSM_SUCCESS);
	CK(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
	CK(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
	CK(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
	CK(rsm_release_controller(c), RSM_SUCCESS);
	printf("RSM OK\n");
	return 0;
}
