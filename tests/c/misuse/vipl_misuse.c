/*
 * vipl_misuse: the misuse matrix of libvipl (issue 18 item 3). Every call is made with NULL,
 * freed (closed, destroyed, deregistered) and wrong-kind handles, NULL pointers, bad
 * attributes, out-of-range lengths and in states that forbid it; each must answer the code
 * capi/vipl documents (NULL, stale or wrong-kind handles: VIP_INVALID_PARAMETER) and
 * tests/c/vipl/vipl_calls.c pins for the states. One ROW line per row (misuse.h).
 */
#include "misuse.h"
#include <stdint.h>
#include <vipl.h>

#define REGION (64 * 1024)

static VIP_NIC_HANDLE nic, fnic;
static VIP_PROTECTION_HANDLE ptag, fptag;
static VIP_CQ_HANDLE cq, fcq;
static VIP_VI_HANDLE vi, fvi;
static VIP_MEM_HANDLE mh, fmh;
static char *region, *fregion;
static VIP_DESCRIPTOR *desc;

static VIP_VI_ATTRIBUTES attrs(VIP_PROTECTION_HANDLE p)
{
    VIP_VI_ATTRIBUTES a;
    memset(&a, 0, sizeof a);
    a.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
    a.MaxTransferSize = 4096;
    a.Ptag = p;
    return a;
}

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
    (void)ctx;
    (void)e;
}

static void on_vi(VIP_PVOID c, VIP_NIC_HANDLE n, VIP_VI_HANDLE v, VIP_DESCRIPTOR *d)
{
    (void)c, (void)n, (void)v, (void)d;
}

static void on_cq(VIP_PVOID c, VIP_NIC_HANDLE n, VIP_VI_HANDLE v, VIP_BOOLEAN r)
{
    (void)c, (void)n, (void)v, (void)r;
}

static void nic_calls(void)
{
    VIP_NIC_HANDLE n;
    VIP_NIC_ATTRIBUTES na;
    VIP_PROTECTION_HANDLE p;
    VIP_NET_ADDRESS *addr = calloc(1, 256);
    char name[64];
    VIP_ULONG len = sizeof name;

    ROW("VipOpenNic", NULLP, VIP_INVALID_PARAMETER, VipOpenNic("remora0", NULL));
    ROW("VipOpenNic", NULLP, VIP_INVALID_PARAMETER, VipOpenNic(NULL, &n));
    ROW("VipOpenNic", UNKNOWN, VIP_INVALID_PARAMETER, VipOpenNic("/dev/nonesuch", &n));
    ROW("VipCloseNic", NULLH, VIP_INVALID_PARAMETER, VipCloseNic(NULL));
    ROW("VipCloseNic", FREED, VIP_INVALID_PARAMETER, VipCloseNic(fnic));
    ROW("VipCloseNic", KIND, VIP_INVALID_PARAMETER, VipCloseNic(cq));
    ROW("VipQueryNic", NULLH, VIP_INVALID_PARAMETER, VipQueryNic(NULL, &na));
    ROW("VipQueryNic", FREED, VIP_INVALID_PARAMETER, VipQueryNic(fnic, &na));
    ROW("VipQueryNic", NULLP, VIP_INVALID_PARAMETER, VipQueryNic(nic, NULL));
    ROW("VipQuerySystemManagementInfo", FREED, VIP_INVALID_PARAMETER,
        VipQuerySystemManagementInfo(fnic, VIP_SMI_AUTODISCOVERY, NULL));
    ROW("VipQuerySystemManagementInfo", UNKNOWN, VIP_INVALID_PARAMETER, VipQuerySystemManagementInfo(nic, 77, NULL));
    ROW("VipErrorCallback", NULLH, VIP_INVALID_PARAMETER, VipErrorCallback(NULL, NULL, on_error));
    ROW("VipErrorCallback", FREED, VIP_INVALID_PARAMETER, VipErrorCallback(fnic, NULL, on_error));

    ROW("VipCreatePtag", NULLH, VIP_INVALID_PARAMETER, VipCreatePtag(NULL, &p));
    ROW("VipCreatePtag", FREED, VIP_INVALID_PARAMETER, VipCreatePtag(fnic, &p));
    ROW("VipCreatePtag", NULLP, VIP_INVALID_PARAMETER, VipCreatePtag(nic, NULL));
    ROW("VipDestroyPtag", FREED, VIP_INVALID_PARAMETER, VipDestroyPtag(fnic, ptag));
    ROW("VipDestroyPtag", FREED, VIP_INVALID_PTAG, VipDestroyPtag(nic, fptag));
    ROW("VipDestroyPtag", NULLH, VIP_INVALID_PTAG, VipDestroyPtag(nic, NULL));
    ROW("VipDestroyPtag", STATE, VIP_ERROR_RESOURCE, VipDestroyPtag(nic, ptag)); /* in use */

    ROW("VipNSInit", NULLH, VIP_INVALID_PARAMETER, VipNSInit(NULL, NULL));
    ROW("VipNSInit", FREED, VIP_INVALID_PARAMETER, VipNSInit(fnic, NULL));
    ROW("VipNSGetHostByName", FREED, VIP_INVALID_PARAMETER, VipNSGetHostByName(fnic, "localhost", addr, 0));
    ROW("VipNSGetHostByName", NULLP, VIP_INVALID_PARAMETER, VipNSGetHostByName(nic, NULL, addr, 0));
    ROW("VipNSGetHostByName", NULLP, VIP_INVALID_PARAMETER, VipNSGetHostByName(nic, "localhost", NULL, 0));
    ROW("VipNSGetHostByName", UNKNOWN, VIP_ERROR_NAMESERVICE, VipNSGetHostByName(nic, "no-such-host-xyz", addr, 0));
    ROW("VipNSGetHostByAddr", FREED, VIP_INVALID_PARAMETER, VipNSGetHostByAddr(fnic, addr, name, &len));
    ROW("VipNSGetHostByAddr", NULLP, VIP_INVALID_PARAMETER, VipNSGetHostByAddr(nic, NULL, name, &len));
    ROW("VipNSGetHostByAddr", NULLP, VIP_INVALID_PARAMETER, VipNSGetHostByAddr(nic, addr, name, NULL));
    ROW("VipNSShutdown", NULLH, VIP_INVALID_PARAMETER, VipNSShutdown(NULL));
    ROW("VipNSShutdown", FREED, VIP_INVALID_PARAMETER, VipNSShutdown(fnic));
    free(addr);
}

static void memory_calls(void)
{
    VIP_MEM_ATTRIBUTES ma, bad;
    VIP_MEM_HANDLE m;

    memset(&ma, 0, sizeof ma);
    ma.Ptag = ptag;
    bad = ma;
    bad.Ptag = fptag;
    ROW("VipRegisterMem", NULLH, VIP_INVALID_PARAMETER, VipRegisterMem(NULL, region, 4096, &ma, &m));
    ROW("VipRegisterMem", FREED, VIP_INVALID_PARAMETER, VipRegisterMem(fnic, region, 4096, &ma, &m));
    ROW("VipRegisterMem", NULLP, VIP_INVALID_PARAMETER, VipRegisterMem(nic, NULL, 4096, &ma, &m));
    ROW("VipRegisterMem", NULLP, VIP_INVALID_PARAMETER, VipRegisterMem(nic, region, 4096, NULL, &m));
    ROW("VipRegisterMem", NULLP, VIP_INVALID_PARAMETER, VipRegisterMem(nic, region, 4096, &ma, NULL));
    ROW("VipRegisterMem", RANGE, VIP_INVALID_PARAMETER, VipRegisterMem(nic, region, 0, &ma, &m));
    ROW("VipRegisterMem", FREED, VIP_INVALID_PTAG, VipRegisterMem(nic, region, 4096, &bad, &m));
    ROW("VipDeregisterMem", NULLH, VIP_INVALID_PARAMETER, VipDeregisterMem(NULL, region, mh));
    ROW("VipDeregisterMem", FREED, VIP_INVALID_PARAMETER, VipDeregisterMem(nic, fregion, fmh));
    ROW("VipDeregisterMem", FREED, VIP_INVALID_PARAMETER, VipDeregisterMem(fnic, region, mh));
    ROW("VipQueryMem", FREED, VIP_INVALID_PARAMETER, VipQueryMem(nic, fregion, fmh, &ma));
    ROW("VipQueryMem", NULLP, VIP_INVALID_PARAMETER, VipQueryMem(nic, region, mh, NULL));
    ROW("VipSetMemAttributes", FREED, VIP_INVALID_PARAMETER, VipSetMemAttributes(nic, fregion, fmh, &ma));
    ROW("VipSetMemAttributes", NULLP, VIP_INVALID_PARAMETER, VipSetMemAttributes(nic, region, mh, NULL));
    ROW("VipSetMemAttributes", FREED, VIP_INVALID_PTAG, VipSetMemAttributes(nic, region, mh, &bad));
}

static void cq_calls(void)
{
    VIP_CQ_HANDLE q;
    VIP_VI_HANDLE v;
    VIP_BOOLEAN rq;

    ROW("VipCreateCQ", NULLH, VIP_INVALID_PARAMETER, VipCreateCQ(NULL, 16, &q));
    ROW("VipCreateCQ", FREED, VIP_INVALID_PARAMETER, VipCreateCQ(fnic, 16, &q));
    ROW("VipCreateCQ", NULLP, VIP_INVALID_PARAMETER, VipCreateCQ(nic, 16, NULL));
    ROW("VipCreateCQ", RANGE, VIP_INVALID_PARAMETER, VipCreateCQ(nic, 0, &q));
    ROW("VipDestroyCQ", NULLH, VIP_INVALID_PARAMETER, VipDestroyCQ(NULL));
    ROW("VipDestroyCQ", FREED, VIP_INVALID_PARAMETER, VipDestroyCQ(fcq));
    ROW("VipDestroyCQ", KIND, VIP_INVALID_PARAMETER, VipDestroyCQ(vi));
    ROW("VipDestroyCQ", STATE, VIP_ERROR_RESOURCE, VipDestroyCQ(cq)); /* a VI uses it */
    ROW("VipResizeCQ", FREED, VIP_INVALID_PARAMETER, VipResizeCQ(fcq, 32));
    ROW("VipResizeCQ", RANGE, VIP_INVALID_PARAMETER, VipResizeCQ(cq, 0));
    ROW("VipCQDone", FREED, VIP_INVALID_PARAMETER, VipCQDone(fcq, &v, &rq));
    ROW("VipCQDone", NULLP, VIP_INVALID_PARAMETER, VipCQDone(cq, NULL, &rq));
    ROW("VipCQDone", STATE, VIP_NOT_DONE, VipCQDone(cq, &v, &rq));
    ROW("VipCQWait", FREED, VIP_INVALID_PARAMETER, VipCQWait(fcq, 10, &v, &rq));
    ROW("VipCQWait", NULLP, VIP_INVALID_PARAMETER, VipCQWait(cq, 10, &v, NULL));
    ROW("VipCQWait", STATE, VIP_TIMEOUT, VipCQWait(cq, 10, &v, &rq));
    ROW("VipCQNotify", FREED, VIP_INVALID_PARAMETER, VipCQNotify(fcq, NULL, on_cq));
    ROW("VipCQNotify", NULLP, VIP_INVALID_PARAMETER, VipCQNotify(cq, NULL, NULL));
}

static void vi_calls(void)
{
    VIP_VI_ATTRIBUTES a = attrs(ptag), bad;
    VIP_VI_HANDLE v;
    VIP_VI_STATE st;
    VIP_BOOLEAN se, re;
    VIP_DESCRIPTOR *d;
    VIP_NET_ADDRESS *loc = calloc(1, 256), *rem = calloc(1, 256);
    VIP_CONN_HANDLE conn;

    ROW("VipCreateVi", NULLH, VIP_INVALID_PARAMETER, VipCreateVi(NULL, &a, NULL, NULL, &v));
    ROW("VipCreateVi", FREED, VIP_INVALID_PARAMETER, VipCreateVi(fnic, &a, NULL, NULL, &v));
    ROW("VipCreateVi", NULLP, VIP_INVALID_PARAMETER, VipCreateVi(nic, NULL, NULL, NULL, &v));
    ROW("VipCreateVi", NULLP, VIP_INVALID_PARAMETER, VipCreateVi(nic, &a, NULL, NULL, NULL));
    ROW("VipCreateVi", FREED, VIP_INVALID_PARAMETER, VipCreateVi(nic, &a, fcq, NULL, &v));
    bad = a;
    bad.ReliabilityLevel = 0x40;
    ROW("VipCreateVi", FLAG, VIP_INVALID_RELIABILITY_LEVEL, VipCreateVi(nic, &bad, NULL, NULL, &v));
    bad = a;
    bad.Ptag = fptag;
    ROW("VipCreateVi", FREED, VIP_INVALID_PTAG, VipCreateVi(nic, &bad, NULL, NULL, &v));
    bad = a;
    bad.MaxTransferSize = ~(VIP_ULONG)0;
    ROW("VipCreateVi", RANGE, VIP_INVALID_MTU, VipCreateVi(nic, &bad, NULL, NULL, &v));
    ROW("VipDestroyVi", NULLH, VIP_INVALID_PARAMETER, VipDestroyVi(NULL));
    ROW("VipDestroyVi", FREED, VIP_INVALID_PARAMETER, VipDestroyVi(fvi));
    ROW("VipDestroyVi", KIND, VIP_INVALID_PARAMETER, VipDestroyVi(cq));
    ROW("VipQueryVi", FREED, VIP_INVALID_PARAMETER, VipQueryVi(fvi, &st, &a, &se, &re));
    /* Documented: each output of VipQueryVi may be NULL (not filled in). */
    ROW("VipQueryVi", NULLP, VIP_SUCCESS, VipQueryVi(vi, NULL, NULL, NULL, NULL));
    ROW("VipSetViAttributes", FREED, VIP_INVALID_PARAMETER, VipSetViAttributes(fvi, &a));
    ROW("VipSetViAttributes", NULLP, VIP_INVALID_PARAMETER, VipSetViAttributes(vi, NULL));

    ROW("VipPostSend", NULLH, VIP_INVALID_PARAMETER, VipPostSend(NULL, desc, mh));
    ROW("VipPostSend", FREED, VIP_INVALID_PARAMETER, VipPostSend(fvi, desc, mh));
    ROW("VipPostSend", NULLP, VIP_INVALID_PARAMETER, VipPostSend(vi, NULL, mh));
    ROW("VipPostSend", STATE, VIP_INVALID_STATE, VipPostSend(vi, desc, mh)); /* not connected */
    ROW("VipPostRecv", FREED, VIP_INVALID_PARAMETER, VipPostRecv(fvi, desc, mh));
    ROW("VipPostRecv", NULLP, VIP_INVALID_PARAMETER, VipPostRecv(vi, NULL, mh));
    ROW("VipPostRecv", RANGE, VIP_INVALID_PARAMETER, VipPostRecv(vi, (VIP_DESCRIPTOR *)(void *)((char *)desc + 8), mh));
    ROW("VipPostRecv", FREED, VIP_INVALID_PARAMETER, VipPostRecv(vi, desc, fmh));
    ROW("VipSendDone", FREED, VIP_INVALID_PARAMETER, VipSendDone(fvi, &d));
    ROW("VipSendDone", NULLP, VIP_INVALID_PARAMETER, VipSendDone(vi, NULL));
    ROW("VipSendDone", STATE, VIP_NOT_DONE, VipSendDone(vi, &d));
    ROW("VipSendWait", FREED, VIP_INVALID_PARAMETER, VipSendWait(fvi, 10, &d));
    ROW("VipSendWait", NULLP, VIP_INVALID_PARAMETER, VipSendWait(vi, 10, NULL));
    ROW("VipSendWait", STATE, VIP_TIMEOUT, VipSendWait(vi, 10, &d));
    ROW("VipRecvDone", FREED, VIP_INVALID_PARAMETER, VipRecvDone(fvi, &d));
    ROW("VipRecvDone", STATE, VIP_NOT_DONE, VipRecvDone(vi, &d));
    ROW("VipRecvWait", FREED, VIP_INVALID_PARAMETER, VipRecvWait(fvi, 10, &d));
    ROW("VipRecvWait", STATE, VIP_TIMEOUT, VipRecvWait(vi, 10, &d));
    ROW("VipSendNotify", FREED, VIP_INVALID_PARAMETER, VipSendNotify(fvi, NULL, on_vi));
    ROW("VipSendNotify", NULLP, VIP_INVALID_PARAMETER, VipSendNotify(vi, NULL, NULL));
    ROW("VipRecvNotify", FREED, VIP_INVALID_PARAMETER, VipRecvNotify(fvi, NULL, on_vi));
    ROW("VipRecvNotify", NULLP, VIP_INVALID_PARAMETER, VipRecvNotify(vi, NULL, NULL));

    MUST(VipNSGetHostByName(nic, "localhost", loc, 0) == VIP_SUCCESS);
    MUST(VipNSGetHostByName(nic, "localhost", rem, 0) == VIP_SUCCESS);
    loc->DiscriminatorLen = 4;
    memcpy(loc->HostAddress + loc->HostAddressLen, "misl", 4);
    rem->DiscriminatorLen = 4;
    memcpy(rem->HostAddress + rem->HostAddressLen, "none", 4);
    ROW("VipConnectWait", FREED, VIP_INVALID_PARAMETER, VipConnectWait(fnic, loc, 10, rem, &a, &conn));
    ROW("VipConnectWait", NULLP, VIP_INVALID_PARAMETER, VipConnectWait(nic, NULL, 10, rem, &a, &conn));
    ROW("VipConnectWait", NULLP, VIP_INVALID_PARAMETER, VipConnectWait(nic, loc, 10, rem, &a, NULL));
    ROW("VipConnectWait", STATE, VIP_TIMEOUT, VipConnectWait(nic, loc, 10, rem, &a, &conn));
    ROW("VipConnectAccept", NULLH, VIP_INVALID_PARAMETER, VipConnectAccept(NULL, vi));
    ROW("VipConnectAccept", KIND, VIP_INVALID_PARAMETER, VipConnectAccept(vi, vi));
    ROW("VipConnectReject", NULLH, VIP_INVALID_PARAMETER, VipConnectReject(NULL));
    ROW("VipConnectReject", KIND, VIP_INVALID_PARAMETER, VipConnectReject(cq));
    ROW("VipConnectRequest", FREED, VIP_INVALID_PARAMETER, VipConnectRequest(fvi, loc, rem, 10, &a));
    ROW("VipConnectRequest", NULLP, VIP_INVALID_PARAMETER, VipConnectRequest(vi, loc, NULL, 10, &a));
    ROW("VipConnectRequest", UNKNOWN, VIP_NO_MATCH, VipConnectRequest(vi, loc, rem, 50, &a));
    ROW("VipDisconnect", NULLH, VIP_INVALID_PARAMETER, VipDisconnect(NULL));
    ROW("VipDisconnect", FREED, VIP_INVALID_PARAMETER, VipDisconnect(fvi));
    ROW("VipDisconnect", STATE, VIP_INVALID_STATE, VipDisconnect(vi));
    ROW("VipConnectPeerRequest", FREED, VIP_INVALID_PARAMETER, VipConnectPeerRequest(fvi, loc, rem, 10));
    ROW("VipConnectPeerRequest", NULLP, VIP_INVALID_PARAMETER, VipConnectPeerRequest(vi, NULL, rem, 10));
    ROW("VipConnectPeerDone", FREED, VIP_INVALID_PARAMETER, VipConnectPeerDone(fvi, &a));
    ROW("VipConnectPeerDone", STATE, VIP_INVALID_STATE, VipConnectPeerDone(vi, &a)); /* no request */
    ROW("VipConnectPeerWait", FREED, VIP_INVALID_PARAMETER, VipConnectPeerWait(fvi, &a));
    ROW("VipConnectPeerWait", STATE, VIP_INVALID_STATE, VipConnectPeerWait(vi, &a));
    free(loc);
    free(rem);
}

int main(void)
{
    VIP_MEM_ATTRIBUTES ma;
    VIP_VI_ATTRIBUTES a;
    int rc;

    misuse_begin("VIPL");
    MUST(posix_memalign((void **)&region, 4096, REGION) == 0);
    MUST(posix_memalign((void **)&fregion, 4096, 4096) == 0);
    memset(region, 0, REGION);
    MUST(VipOpenNic("remora0", &nic) == VIP_SUCCESS);
    MUST(VipOpenNic("remora0", &fnic) == VIP_SUCCESS);
    MUST(VipCloseNic(fnic) == VIP_SUCCESS);
    MUST(VipNSInit(nic, NULL) == VIP_SUCCESS);
    MUST(VipCreatePtag(nic, &ptag) == VIP_SUCCESS);
    MUST(VipCreatePtag(nic, &fptag) == VIP_SUCCESS);
    MUST(VipDestroyPtag(nic, fptag) == VIP_SUCCESS);
    memset(&ma, 0, sizeof ma);
    ma.Ptag = ptag;
    MUST(VipRegisterMem(nic, region, REGION, &ma, &mh) == VIP_SUCCESS);
    MUST(VipRegisterMem(nic, fregion, 4096, &ma, &fmh) == VIP_SUCCESS);
    MUST(VipDeregisterMem(nic, fregion, fmh) == VIP_SUCCESS);
    MUST(VipCreateCQ(nic, 16, &cq) == VIP_SUCCESS);
    MUST(VipCreateCQ(nic, 16, &fcq) == VIP_SUCCESS);
    MUST(VipDestroyCQ(fcq) == VIP_SUCCESS);
    a = attrs(ptag);
    MUST(VipCreateVi(nic, &a, NULL, cq, &vi) == VIP_SUCCESS);
    MUST(VipCreateVi(nic, &a, NULL, NULL, &fvi) == VIP_SUCCESS);
    MUST(VipDestroyVi(fvi) == VIP_SUCCESS);
    desc = (VIP_DESCRIPTOR *)(void *)region;
    desc->CS.Control = VIP_CONTROL_OP_SENDRECV;
    desc->CS.SegCount = 1;
    desc->CS.Length = 64;
    desc->DS[0].Local.Data.Address = region + 4096;
    desc->DS[0].Local.Handle = mh;
    desc->DS[0].Local.Length = 64;

    nic_calls();
    memory_calls();
    cq_calls();
    vi_calls();

    MUST(VipDestroyVi(vi) == VIP_SUCCESS);
    MUST(VipDestroyCQ(cq) == VIP_SUCCESS);
    MUST(VipDeregisterMem(nic, region, mh) == VIP_SUCCESS);
    MUST(VipDestroyPtag(nic, ptag) == VIP_SUCCESS);
    MUST(VipNSShutdown(nic) == VIP_SUCCESS);
    MUST(VipCloseNic(nic) == VIP_SUCCESS);
    rc = misuse_end();
    free(region);
    free(fregion);
    return rc;
}
