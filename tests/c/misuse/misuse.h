/*
 * misuse.h: the rows of the C APIs' misuse matrix (issue 18 item 3).
 *
 * Each row is one call made wrongly on purpose: the call, the class of misuse, the code
 * the API documents for it and the code the library answered. Every row prints one line
 *
 *     ROW|api|call|misuse|expected|got|ok       (or |FAIL line N as the last field)
 *
 * which crates/remora-cli/tests/c_misuse.rs parses, checks and turns into the table of
 * docs/src/misuse.md. `expected` is the spelling of the documented code; `got` is that same
 * spelling when the answer matched, else the number answered. The program ends with
 * misuse_end(): with MISUSE_HOLD set in the environment it prints "HOLD" and waits for its
 * standard input to close (the harness looks at the node meanwhile: every object the
 * program made must be gone while its session is still open), then prints a summary and
 * returns the exit status (1 if any row failed). alarm() turns a hang into a failure.
 */
#ifndef MISUSE_H
#define MISUSE_H
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The classes of misuse: the second column of the table. */
#define NULLH "NULL handle"
#define FREED "freed handle"
#define KIND "wrong-kind handle"
#define NULLP "NULL pointer"
#define STATE "wrong state"
#define RANGE "out of range"
#define FLAG "bad flag"
#define HW "hardware-only"
#define UNKNOWN "unknown id"

static const char *misuse_api = "?";
static int misuse_rows, misuse_bad;

static void misuse_row(const char *call, const char *misuse, const char *want_name, long want, long got,
                       int line)
{
    misuse_rows++;
    if (want == got) {
        printf("ROW|%s|%s|%s|%s|%s|ok\n", misuse_api, call, misuse, want_name, want_name);
    } else {
        misuse_bad++;
        printf("ROW|%s|%s|%s|%s|%ld (0x%lx)|FAIL line %d\n", misuse_api, call, misuse, want_name, got,
               (unsigned long)got, line);
    }
    fflush(stdout);
}

/* One row: `want` is the documented code (its spelling goes in the table), `got` the answer. */
#define ROW(call, misuse, want, got) misuse_row(call, misuse, #want, (long)(want), (long)(got), __LINE__)

/* A row whose expected answer is a value, spelled `name` in the table. */
#define ROWAS(call, misuse, name, want, got) misuse_row(call, misuse, name, (long)(want), (long)(got), __LINE__)

/* A row for a call without any answer (void, no error argument): it must return. */
#define RETURNS(call, misuse, ...)                                                                    \
    do {                                                                                              \
        __VA_ARGS__;                                                                                  \
        misuse_row(call, misuse, "returns", 0, 0, __LINE__);                                          \
    } while (0)

/* Set-up that must work, or the matrix cannot go on. */
#define MUST(cond)                                                                                    \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            printf("SETUP FAILED line %d: %s\n", __LINE__, #cond);                                    \
            exit(2);                                                                                  \
        }                                                                                             \
    } while (0)

static void misuse_begin(const char *api)
{
    misuse_api = api;
    alarm(120);
}

/* Wait for the harness to look at the node (see above), then the summary and exit status. */
static int misuse_end(void)
{
    char buf[64];
    if (getenv("MISUSE_HOLD") != NULL) {
        printf("HOLD\n");
        fflush(stdout);
        while (read(0, buf, sizeof buf) > 0)
            ;
    }
    printf("misuse %s: %d rows, %d failed\n", misuse_api, misuse_rows, misuse_bad);
    return misuse_bad == 0 ? 0 : 1;
}
#endif
