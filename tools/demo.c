/* softndk-demo: lock a buffer, register it through a two-MDL chain that splits inside a page, build a LAM,
 * initialise a fast-register MR, and print tokens and timings. --pend / --random pick the completion mode. */
#include <sys/mman.h>

#include "ndk_wait.h"

#define BUFFER_PAGES 16
#define TIMING_ROUNDS 20000

static int compare_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int main(int argc, char** argv) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    config.CompletionMode = ndk_parse_mode(argc, argv);
    static const char* modes[] = {"inline", "pend", "random"};
    printf("softndk demo: completion mode %s\n", modes[config.CompletionMode]);

    NDK_ADAPTER* adapter = NULL;
    ndk_check(SoftNdkOpenAdapter(&config, &adapter), "SoftNdkOpenAdapter");
    ndk_wait_t wait = {0};
    NDK_PD* pd = NULL;
    ndk_check(ndk_wait(&wait, adapter->Dispatch->NdkCreatePd(adapter, ndk_wait_on_create, &wait, &pd)), "NdkCreatePd");
    if (pd == NULL) pd = (NDK_PD*)wait.object;

    /* 1. Lock a buffer. */
    const size_t bytes = BUFFER_PAGES * PAGE_SIZE;
    unsigned char* buffer = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    PMDL whole = IoAllocateMdl(buffer, (ULONG)bytes, FALSE, FALSE, NULL);
    double start = ndk_now_ns();
    ndk_check(SoftNdkProbeAndLockPages(whole, KernelMode, IoWriteAccess), "SoftNdkProbeAndLockPages");
    printf("locked %zu pages at %p in %.0f ns\n", (size_t)BUFFER_PAGES, (void*)buffer, ndk_now_ns() - start);

    /* 2. A two-MDL chain that splits inside page 5. */
    const ULONG split = 5 * PAGE_SIZE + 0x600;
    PMDL head = IoAllocateMdl(buffer, split, FALSE, FALSE, NULL);
    PMDL tail = IoAllocateMdl(buffer + split, (ULONG)(bytes - split), FALSE, FALSE, NULL);
    IoBuildPartialMdl(whole, head, buffer, split);
    IoBuildPartialMdl(whole, tail, buffer + split, (ULONG)(bytes - split));
    head->Next = tail;
    printf("MDL chain: [%p +%u] -> [%p +%u]\n", MmGetMdlVirtualAddress(head), MmGetMdlByteCount(head),
           MmGetMdlVirtualAddress(tail), MmGetMdlByteCount(tail));

    /* 3. Register it. */
    memset(&wait, 0, sizeof(wait));
    NDK_MR* mr = NULL;
    ndk_check(ndk_wait(&wait, pd->Dispatch->NdkCreateMr(pd, FALSE, ndk_wait_on_create, &wait, &mr)), "NdkCreateMr");
    if (mr == NULL) mr = (NDK_MR*)wait.object;
    memset(&wait, 0, sizeof(wait));
    start = ndk_now_ns();
    ndk_check(ndk_wait(&wait, mr->Dispatch->NdkRegisterMr(
                                  mr, head, bytes, NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
                                  ndk_wait_on_request, &wait)),
              "NdkRegisterMr");
    printf("NdkRegisterMr over the chain: %.0f ns; local token 0x%08x, remote token 0x%08x\n", ndk_now_ns() - start,
           mr->Dispatch->NdkGetLocalTokenFromMr(mr), mr->Dispatch->NdkGetRemoteTokenFromMr(mr));

    /* 4. A LAM over the same chain. */
    ULONG lam_size = 0, fbo = 0;
    memset(&wait, 0, sizeof(wait));
    NTSTATUS status =
        adapter->Dispatch->NdkBuildLAM(adapter, head, bytes - 0x10, ndk_wait_on_request, &wait, NULL, &lam_size, &fbo);
    if (status != STATUS_BUFFER_TOO_SMALL) ndk_check(STATUS_UNSUCCESSFUL, "NdkBuildLAM size query");
    NDK_LOGICAL_ADDRESS_MAPPING* lam = malloc(lam_size);
    start = ndk_now_ns();
    ndk_check(ndk_wait(&wait, adapter->Dispatch->NdkBuildLAM(adapter, head, bytes - 0x10, ndk_wait_on_request, &wait,
                                                             lam, &lam_size, &fbo)),
              "NdkBuildLAM");
    printf("NdkBuildLAM: %u adapter pages, FBO %u, %.0f ns; first logical pages 0x%llx 0x%llx …\n",
           lam->AdapterPageCount, fbo, ndk_now_ns() - start, (unsigned long long)lam->AdapterPageArray[0].QuadPart,
           (unsigned long long)lam->AdapterPageArray[1].QuadPart);
    UINT32 privileged = 0;
    pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd, &privileged);
    printf("privileged token 0x%08x (local access to LAM pages only)\n", privileged);

    /* 5. A fast-register MR. */
    NDK_ADAPTER_INFO info;
    ULONG info_size = sizeof(info);
    ndk_check(adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &info_size), "NdkQueryAdapterInfo");
    memset(&wait, 0, sizeof(wait));
    NDK_MR* fast = NULL;
    ndk_check(ndk_wait(&wait, pd->Dispatch->NdkCreateMr(pd, TRUE, ndk_wait_on_create, &wait, &fast)), "NdkCreateMr");
    if (fast == NULL) fast = (NDK_MR*)wait.object;
    memset(&wait, 0, sizeof(wait));
    start = ndk_now_ns();
    ndk_check(ndk_wait(&wait, fast->Dispatch->NdkInitializeFastRegisterMr(fast, info.FRMRPageCount, TRUE,
                                                                          ndk_wait_on_request, &wait)),
              "NdkInitializeFastRegisterMr");
    printf("NdkInitializeFastRegisterMr(%u pages, remote): %.0f ns; local token 0x%08x, remote token 0x%08x\n",
           info.FRMRPageCount, ndk_now_ns() - start, fast->Dispatch->NdkGetLocalTokenFromMr(fast),
           fast->Dispatch->NdkGetRemoteTokenFromMr(fast));

    /* 6. Timing: 1-page register + deregister pairs. */
    memset(&wait, 0, sizeof(wait));
    ndk_check(ndk_wait(&wait, mr->Dispatch->NdkDeregisterMr(mr, ndk_wait_on_request, &wait)), "NdkDeregisterMr");
    PMDL one = IoAllocateMdl(buffer, PAGE_SIZE, FALSE, FALSE, NULL);
    IoBuildPartialMdl(whole, one, buffer, PAGE_SIZE);
    double* samples = malloc(sizeof(double) * TIMING_ROUNDS);
    for (int i = 0; i < TIMING_ROUNDS; ++i) {
        start = ndk_now_ns();
        memset(&wait, 0, sizeof(wait));
        ndk_check(ndk_wait(&wait, mr->Dispatch->NdkRegisterMr(mr, one, PAGE_SIZE, 0, ndk_wait_on_request, &wait)),
                  "NdkRegisterMr");
        memset(&wait, 0, sizeof(wait));
        ndk_check(ndk_wait(&wait, mr->Dispatch->NdkDeregisterMr(mr, ndk_wait_on_request, &wait)), "NdkDeregisterMr");
        samples[i] = ndk_now_ns() - start;
    }
    qsort(samples, TIMING_ROUNDS, sizeof(double), compare_double);
    printf("1-page NdkRegisterMr + NdkDeregisterMr: median %.0f ns, p99 %.0f ns over %d pairs\n",
           samples[TIMING_ROUNDS / 2], samples[TIMING_ROUNDS * 99 / 100], TIMING_ROUNDS);

    /* Clean up, closing children before parents. */
    free(samples);
    adapter->Dispatch->NdkReleaseLAM(adapter, lam);
    free(lam);
    NDK_OBJECT_HEADER* objects[] = {&mr->Header, &fast->Header};
    for (int i = 0; i < 2; ++i) {
        memset(&wait, 0, sizeof(wait));
        ndk_check(ndk_wait(&wait, mr->Dispatch->NdkCloseMr(objects[i], ndk_wait_on_close, &wait)), "NdkCloseMr");
    }
    memset(&wait, 0, sizeof(wait));
    ndk_check(ndk_wait(&wait, pd->Dispatch->NdkClosePd(&pd->Header, ndk_wait_on_close, &wait)), "NdkClosePd");
    IoFreeMdl(one);
    IoFreeMdl(head);
    IoFreeMdl(tail);
    MmUnlockPages(whole);
    IoFreeMdl(whole);
    munmap(buffer, bytes);
    ndk_check(SoftNdkCloseAdapter(adapter), "SoftNdkCloseAdapter");
    printf("done: every object closed\n");
    return 0;
}
