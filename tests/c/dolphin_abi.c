/*
 * Binaries built against Dolphin's own sisci_api.h call _SISCI_PUBLIC_FUNC_ST_<name> (or
 * _MT_ under _REENTRANT), and some programs dlsym those names from libsisci.so. This
 * program does what such a binary does, through dlopen/dlsym, and checks the answers
 * against the plain names.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include "sisci_api.h"

typedef void (*init_fn)(unsigned int, sci_error_t *);
typedef void (*node_fn)(unsigned int, unsigned int *, unsigned int, sci_error_t *);
typedef void (*term_fn)(void);

/* Written with the parameter annotations of Dolphin's headers, as programs do. */
static void local_node(IN unsigned int adapter, OUT unsigned int *node, IN_OUT sci_error_t *err)
{
    SCIGetLocalNodeId(adapter, node, 0, err);
}

/* Binaries built against Dolphin's headers read constants from data symbols. */
static int constant_matches(void *lib, const char *name, unsigned int value)
{
    char symbol[128];
    const unsigned int *v;
    snprintf(symbol, sizeof symbol, "_SISCI_PUBLIC_CONST_%s", name);
    v = dlsym(lib, symbol);
    if (!v || *v != value) {
        fprintf(stderr, "dolphin_abi: %s is %s\n", symbol, v ? "wrong" : "not exported");
        return 0;
    }
    return 1;
}

static void *need(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "dolphin_abi: %s not exported: %s\n", name, dlerror());
        exit(1);
    }
    return f;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "libsisci.so";
    void *lib = dlopen(path, RTLD_NOW);
    sci_error_t err;
    unsigned int plain = 0, st = 1, mt = 2;
    if (!lib) {
        fprintf(stderr, "dolphin_abi: dlopen %s: %s\n", path, dlerror());
        return 1;
    }
    ((init_fn)need(lib, "_SISCI_PUBLIC_FUNC_ST_SCIInitialize"))(0, &err);
    if (err != SCI_ERR_OK) {
        fprintf(stderr, "dolphin_abi: _ST_SCIInitialize: 0x%x\n", err);
        return 1;
    }
    ((node_fn)need(lib, "SCIGetLocalNodeId"))(0, &plain, 0, &err);
    ((node_fn)need(lib, "_SISCI_PUBLIC_FUNC_ST_SCIGetLocalNodeId"))(0, &st, 0, &err);
    ((node_fn)need(lib, "_SISCI_PUBLIC_FUNC_MT_SCIGetLocalNodeId"))(0, &mt, 0, &err);
    if (err != SCI_ERR_OK || plain != st || plain != mt) {
        fprintf(stderr, "dolphin_abi: node ids differ: %u %u %u (0x%x)\n", plain, st, mt, err);
        return 1;
    }
    local_node(0, &st, &err);
    if (err != SCI_ERR_OK || st != plain) {
        fprintf(stderr, "dolphin_abi: annotated call: %u (0x%x)\n", st, err);
        return 1;
    }
    if (!constant_matches(lib, "SCI_ERR_NO_SUCH_SEGMENT", SCI_ERR_NO_SUCH_SEGMENT) ||
        !constant_matches(lib, "SCI_FLAG_DMA_GLOBAL", SCI_FLAG_DMA_GLOBAL) ||
        !constant_matches(lib, "SCI_Q_ADAPTER_NODEID", SCI_Q_ADAPTER_NODEID) ||
        !constant_matches(lib, "SCI_INFINITE_TIMEOUT", SCI_INFINITE_TIMEOUT))
        return 1;
    ((term_fn)need(lib, "_SISCI_PUBLIC_FUNC_MT_SCITerminate"))();
    printf("dolphin_abi: node %u through every name\n", plain);
    return 0;
}
