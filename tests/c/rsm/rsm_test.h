/* Shared checks of Remora's RSM C tests: CK(call, code) stops the program with the call,
 * the code it returned and the code expected. */
#ifndef RSM_TEST_H
#define RSM_TEST_H
#include <rsmapi.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(call, want)                                                                      \
	do {                                                                                    \
		int got_ = (call);                                                                  \
		if (got_ != (want)) {                                                               \
			printf("%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call, got_, \
			    (int)(want));                                                           \
			exit(1);                                                                        \
		}                                                                                   \
	} while (0)

#define EXPECT(cond, ...)                                                                   \
	do {                                                                                    \
		if (!(cond)) {                                                                      \
			printf("%s:%d: ", __FILE__, __LINE__);                                          \
			printf(__VA_ARGS__);                                                            \
			printf("\n");                                                                   \
			exit(1);                                                                        \
		}                                                                                   \
	} while (0)

static inline void *pages(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n * 4096) != 0) {
		printf("out of memory\n");
		exit(1);
	}
	return p;
}
/* This node's id, from the interconnect topology. */
static inline rsm_node_id_t local_node(void)
{
	rsm_topology_t *t = NULL;
	CK(rsm_get_interconnect_topology(&t), RSM_SUCCESS);
	rsm_node_id_t me = t->topology_hdr.local_nodeid;
	rsm_free_interconnect_topology(t);
	return me;
}
#endif
