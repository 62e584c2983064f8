/* Compiled as C11 with -Wall -Wextra -Werror: the public headers are plain C, and the layouts match
 * the x64 layouts of Microsoft's ndkpi.h and wdm.h. Runs a tiny registration through the C ABI. */
#include <softndk/softndk.h>

#include <stdio.h>
#include <stdlib.h>

_Static_assert(sizeof(NDK_OBJECT_HEADER) == 40, "NDK_OBJECT_HEADER");
_Static_assert(offsetof(NDK_OBJECT_HEADER, NdkReserved) == 8, "NdkReserved");
_Static_assert(sizeof(NDK_MR) == 48 && offsetof(NDK_MR, Dispatch) == 40, "object struct");
_Static_assert(sizeof(NDK_SGE) == 16 && offsetof(NDK_SGE, Length) == 8 && offsetof(NDK_SGE, MemoryRegionToken) == 12,
               "NDK_SGE");
_Static_assert(sizeof(NDK_RESULT) == 24 && offsetof(NDK_RESULT, RequestContext) == 16, "NDK_RESULT");
_Static_assert(sizeof(NDK_RESULT_EX) == 40 && offsetof(NDK_RESULT_EX, Type) == 24 &&
                   offsetof(NDK_RESULT_EX, ProviderErrorCode) == 28 &&
                   offsetof(NDK_RESULT_EX, TypeSpecificCompletionOutput) == 32,
               "NDK_RESULT_EX");
_Static_assert(offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray) == 16, "LAM");
_Static_assert(sizeof(NDK_ADAPTER_INFO) == 104 && offsetof(NDK_ADAPTER_INFO, MaxRegistrationSize) == 16 &&
                   offsetof(NDK_ADAPTER_INFO, FRMRPageCount) == 32 && offsetof(NDK_ADAPTER_INFO, AdapterFlags) == 92 &&
                   offsetof(NDK_ADAPTER_INFO, RdmaTechnology) == 96,
               "NDK_ADAPTER_INFO");
_Static_assert(sizeof(MDL) == 48 && offsetof(MDL, StartVa) == 32 && offsetof(MDL, ByteOffset) == 44, "MDL");
_Static_assert(NdkOperationTypeReceiveAndInvalidate == 0x8001 && NdkOperationTypeWrite == 0x40, "AMB-04");
_Static_assert(NDK_MR_FLAG_ALLOW_REMOTE_WRITE == 5 && NDK_OP_FLAG_ALLOW_REMOTE_WRITE == 0x30, "AMB-01");
_Static_assert(NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE == 0x100 && NDK_OP_FLAG_DEFER == 0x200, "AMB-02");
_Static_assert(sizeof(NDK_QP_DISPATCH) == 11 * sizeof(void*), "QP dispatch members");
_Static_assert(sizeof(NDK_CONNECTOR_DISPATCH) == 13 * sizeof(void*), "connector dispatch members");
_Static_assert(offsetof(NDK_MR_DISPATCH, NdkGetLocalTokenFromMr) == 6 * sizeof(void*), "MR dispatch order");
_Static_assert(STATUS_IMPLEMENTATION_LIMIT == (NTSTATUS)0xC000042B, "status values");

static void on_request(PVOID context, NTSTATUS status) {
    *(NTSTATUS*)context = status;
}
static void on_create(PVOID context, NTSTATUS status, NDK_OBJECT_HEADER* object) {
    (void)status;
    *(NDK_OBJECT_HEADER**)context = object;
}

int main(void) {
    NDK_ADAPTER* adapter = NULL;
    if (SoftNdkOpenAdapter(NULL, &adapter) != STATUS_SUCCESS) return 1;
    NDK_PD* pd = NULL;
    NDK_OBJECT_HEADER* created = NULL;
    if (adapter->Dispatch->NdkCreatePd(adapter, on_create, &created, &pd) != STATUS_SUCCESS) return 2;
    NDK_MR* mr = NULL;
    if (pd->Dispatch->NdkCreateMr(pd, FALSE, on_create, &created, &mr) != STATUS_SUCCESS) return 3;
    void* buffer = ExAllocatePool2(POOL_FLAG_NON_PAGED, 2 * PAGE_SIZE, 0);
    PMDL mdl = IoAllocateMdl(buffer, 2 * PAGE_SIZE, FALSE, FALSE, NULL);
    MmBuildMdlForNonPagedPool(mdl);
    NTSTATUS done = STATUS_PENDING;
    if (mr->Dispatch->NdkRegisterMr(mr, mdl, 2 * PAGE_SIZE, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, on_request, &done) !=
        STATUS_SUCCESS)
        return 4;
    printf("c consumer: local token 0x%08x remote token 0x%08x\n", mr->Dispatch->NdkGetLocalTokenFromMr(mr),
           mr->Dispatch->NdkGetRemoteTokenFromMr(mr));
    if (mr->Dispatch->NdkCloseMr(&mr->Header, NULL, NULL) != STATUS_SUCCESS) return 5;
    if (pd->Dispatch->NdkClosePd(&pd->Header, NULL, NULL) != STATUS_SUCCESS) return 6;
    IoFreeMdl(mdl);
    ExFreePool(buffer);
    return SoftNdkCloseAdapter(adapter) == STATUS_SUCCESS ? 0 : 7;
}
