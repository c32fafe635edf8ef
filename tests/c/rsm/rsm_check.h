/*
 * Tiny helpers for Remora's RSMAPI C programs.
 *
 * CHECK(call, expected) runs an RSMAPI call and, when its code differs from the expected
 * one, prints the call text with both codes and ends the program with status 1.
 * VERIFY(cond, fmt, ...) does the same for a plain condition with a message.
 */
#ifndef REMORA_RSM_CHECK_H
#define REMORA_RSM_CHECK_H

#include <rsmapi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call, expected)                                                        \
	do {                                                                             \
		int rc_got_ = (call);                                                        \
		int rc_want_ = (int)(expected);                                              \
		if (rc_got_ != rc_want_) {                                                   \
			printf("FAIL %s:%d: %s -> got %d, expected %d (%s)\n", __FILE__,         \
			    __LINE__, #call, rc_got_, rc_want_, #expected);                      \
			fflush(stdout);                                                          \
			exit(1);                                                                 \
		}                                                                            \
	} while (0)

#define VERIFY(cond, ...)                                                            \
	do {                                                                             \
		if (!(cond)) {                                                               \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                   \
			printf(__VA_ARGS__);                                                     \
			printf("\n");                                                            \
			fflush(stdout);                                                          \
			exit(1);                                                                 \
		}                                                                            \
	} while (0)

/* The byte the exporter puts at offset i before anyone writes. */
#define RSM_PATTERN(i) ((unsigned char)(((size_t)(i) * 7u) & 0xffu))

/* n bytes of page-aligned heap memory, or the program ends. */
static inline void *rsm_pages(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n) != 0 || p == NULL) {
		printf("FAIL: posix_memalign(%zu)\n", n);
		exit(1);
	}
	return p;
}

#endif /* REMORA_RSM_CHECK_H */
