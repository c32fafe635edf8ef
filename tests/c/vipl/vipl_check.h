/*
 * Check macros of Remora's VIPL C tests.
 *
 * Every failed check prints "FAIL file:line: ..." with the expression, the
 * values involved and the current phase (set with VT_PHASE), then ends the
 * program with status 1.
 *
 *   CHECK(expr)                  a condition
 *   CHECK_MSG(expr, fmt, ...)    a condition, with a printf-style explanation
 *   CHECK_EQ(a, b)               two integers (or pointers cast to integers)
 *   CHECK_PTR(a, b)              two pointers
 *   CHECK_BITS(value, mask)      every bit of mask is set in value
 *   CHECK_RET(call, expected)    a Vip* call returns the expected VIP_RETURN
 */
#ifndef REMORA_VIPL_CHECK_H
#define REMORA_VIPL_CHECK_H

/* posix_memalign, clock_gettime and nanosleep under -std=c99 as well. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <vipl.h>
#include <stdio.h>
#include <stdlib.h>

/* What the program is doing; printed with every failure. */
static const char *vt_phase_ = "start";
#define VT_PHASE(name) (vt_phase_ = (name))

static const char *vt_ret_name(long rc)
{
	static const char *const names[] = {
		"VIP_SUCCESS",
		"VIP_NOT_DONE",
		"VIP_INVALID_PARAMETER",
		"VIP_ERROR_RESOURCE",
		"VIP_TIMEOUT",
		"VIP_REJECT",
		"VIP_INVALID_RELIABILITY_LEVEL",
		"VIP_INVALID_MTU",
		"VIP_INVALID_QOS",
		"VIP_INVALID_PTAG",
		"VIP_INVALID_RDMAREAD",
		"VIP_DESCRIPTOR_ERROR",
		"VIP_INVALID_STATE",
		"VIP_ERROR_NAMESERVICE",
		"VIP_NO_MATCH",
	};
	if (rc >= 0 && rc < (long)(sizeof names / sizeof names[0]))
		return names[rc];
	return "(unknown code)";
}

static void vt_fail_end_(void)
{
	fflush(stdout);
	exit(1);
}

#define CHECK(expr)                                                                    \
	do {                                                                               \
		if (!(expr)) {                                                                 \
			printf("FAIL %s:%d: CHECK(%s) is false [phase %s]\n", __FILE__, __LINE__, \
			    #expr, vt_phase_);                                                     \
			vt_fail_end_();                                                            \
		}                                                                              \
	} while (0)

#define CHECK_MSG(expr, ...)                                                           \
	do {                                                                               \
		if (!(expr)) {                                                                 \
			printf("FAIL %s:%d: CHECK(%s) is false [phase %s]: ", __FILE__, __LINE__, \
			    #expr, vt_phase_);                                                     \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
			vt_fail_end_();                                                            \
		}                                                                              \
	} while (0)

#define CHECK_EQ(a, b)                                                                 \
	do {                                                                               \
		unsigned long long a_ = (unsigned long long)(a);                              \
		unsigned long long b_ = (unsigned long long)(b);                              \
		if (a_ != b_) {                                                                \
			printf("FAIL %s:%d: CHECK_EQ(%s, %s): %llu (0x%llx) != %llu (0x%llx) "     \
			       "[phase %s]\n",                                                     \
			    __FILE__, __LINE__, #a, #b, a_, a_, b_, b_, vt_phase_);                \
			vt_fail_end_();                                                            \
		}                                                                              \
	} while (0)

#define CHECK_PTR(a, b)                                                                \
	do {                                                                               \
		const void *a_ = (const void *)(a);                                            \
		const void *b_ = (const void *)(b);                                            \
		if (a_ != b_) {                                                                \
			printf("FAIL %s:%d: CHECK_PTR(%s, %s): %p != %p [phase %s]\n", __FILE__,  \
			    __LINE__, #a, #b, a_, b_, vt_phase_);                                  \
			vt_fail_end_();                                                            \
		}                                                                              \
	} while (0)

#define CHECK_BITS(value, mask)                                                        \
	do {                                                                               \
		unsigned long v_ = (unsigned long)(value);                                     \
		unsigned long m_ = (unsigned long)(mask);                                      \
		if ((v_ & m_) != m_) {                                                         \
			printf("FAIL %s:%d: CHECK_BITS(%s, %s): 0x%lx lacks 0x%lx [phase %s]\n",  \
			    __FILE__, __LINE__, #value, #mask, v_, m_ & ~v_, vt_phase_);           \
			vt_fail_end_();                                                            \
		}                                                                              \
	} while (0)

#define CHECK_RET(call, expected)                                                      \
	do {                                                                               \
		long got_ = (long)(call);                                                      \
		long want_ = (long)(expected);                                                 \
		if (got_ != want_) {                                                           \
			printf("FAIL %s:%d: %s returned %ld (%s), expected %ld (%s) [phase %s]\n", \
			    __FILE__, __LINE__, #call, got_, vt_ret_name(got_), want_,             \
			    vt_ret_name(want_), vt_phase_);                                        \
			vt_fail_end_();                                                            \
		}                                                                              \
	} while (0)

#endif /* REMORA_VIPL_CHECK_H */
