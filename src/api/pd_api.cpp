// NDK_PD_DISPATCH.
#include <new>

#include "api/async_request.h"

namespace softndk::api {
namespace {

using engine::ProviderFunction;

// ---- MR lifetime: a registered MR deregisters when closed, and the close waits for the drain ----
bool MrTeardown(void* object) {
    auto* mr = static_cast<MrObject*>(object);
    // The drain may end on a peer's posting thread: the close completes on the provider thread instead.
    NTSTATUS status =
        mr->region.Shutdown([mr](NTSTATUS) { mr->pd->adapter->executor->Post([mr] { mr->lifetime.TeardownDone(); }); });
    return status != STATUS_PENDING;
}
constexpr Lifetime::Ops kMrOps{&MrTeardown, &DestroyObject<MrObject>};

NTSTATUS ClosePd(NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    PdObject* pd = FromHandle<PdObject>(object);
    if (pd == nullptr) return InvalidParameter("NdkClosePd: not a PD");
    return RunClose(*pd->adapter, pd->lifetime, completion, context);
}

NTSTATUS CreateMr(NDK_PD* handle, BOOLEAN fast_register, NDK_FN_CREATE_COMPLETION completion, PVOID context,
                  NDK_MR** out) {
    PdObject* pd = FromHandle<PdObject>(handle);
    if (pd == nullptr || completion == nullptr || out == nullptr)
        return InvalidParameter("NdkCreateMr: NULL PD, CreateCompletion or ppNdkMr");
    if (fast_register != TRUE && fast_register != FALSE)
        return InvalidParameter("NdkCreateMr: FastRegister is not a BOOLEAN");
    return RunCreate(*pd->adapter, ProviderFunction::NdkCreateMr, pd->lifetime, completion, context, out,
                     [pd, fast_register](NDK_OBJECT_HEADER** header) -> NTSTATUS {
                         auto* mr = new (std::nothrow) MrObject(pd, fast_register == TRUE, kMrOps);
                         if (mr == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
                         InitializeHandle(mr->ndk, NdkObjectTypeMr, pd->adapter->info.Version, &kMrDispatch);
                         *header = &mr->ndk.Header;
                         return STATUS_SUCCESS;
                     });
}

// LAM-14: VOID, cannot fail; a bad PD or NULL output is ignored with a last-error text.
VOID GetPrivilegedMemoryRegionToken(NDK_PD* handle, UINT32* token) {
    PdObject* pd = FromHandle<PdObject>(handle);
    if (pd == nullptr || token == nullptr) {
        SetLastErrorText("NdkGetPrivilegedMemoryRegionToken: NULL PD or output");
        return;
    }
    *token = pd->privileged_tokens.local;
}

}  // namespace

const NDK_PD_DISPATCH kPdDispatch = {
    &ClosePd,         &QueryExtensionInterface,        &CreateMr, &CreateMw, &CreateSrq, &CreateQp,
    &CreateQpWithSrq, &GetPrivilegedMemoryRegionToken,
};

}  // namespace softndk::api
