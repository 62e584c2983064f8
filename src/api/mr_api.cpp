// NDK_MR_DISPATCH (MR-xx, FR-01 … FR-07, TOK-01/02/05).
#include "api/async_request.h"

namespace softndk::api {
namespace {

using engine::ProviderFunction;

NTSTATUS CloseMr(NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    MrObject* mr = FromHandle<MrObject>(object);
    if (mr == nullptr) return InvalidParameter("NdkCloseMr: not an MR");
    return RunClose(*mr->pd->adapter, mr->lifetime, completion, context);
}

NTSTATUS RegisterMr(NDK_MR* handle, MDL* mdl, SIZE_T length, ULONG flags, NDK_FN_REQUEST_COMPLETION completion,
                    PVOID context) {
    MrObject* mr = FromHandle<MrObject>(handle);
    if (mr == nullptr || mdl == nullptr || completion == nullptr)
        return InvalidParameter("NdkRegisterMr: NULL MR, Mdl or RequestCompletion");
    if (length == 0) return InvalidParameter("NdkRegisterMr: Length is 0");
    AdapterObject& adapter = *mr->pd->adapter;
    VerifierRegistrationStarted(mdl, &mr->lifetime);  // MR-10: the chain is the provider's until completion
    return RunRequest(adapter, ProviderFunction::NdkRegisterMr, mr->lifetime, completion, context,
                      [mr, mdl, length, flags, &adapter](const Finish&) {
                          return mr->region.Register(mdl, length, flags, adapter.limits);
                      });
}

NTSTATUS DeregisterMr(NDK_MR* handle, NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    MrObject* mr = FromHandle<MrObject>(handle);
    if (mr == nullptr || completion == nullptr)
        return InvalidParameter("NdkDeregisterMr: NULL MR or RequestCompletion");
    return RunRequest(*mr->pd->adapter, ProviderFunction::NdkDeregisterMr, mr->lifetime, completion, context,
                      [mr](const Finish& finish) { return mr->region.Deregister(finish); });
}

NTSTATUS InitializeFastRegisterMr(NDK_MR* handle, ULONG page_count, BOOLEAN remote_access,
                                  NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    MrObject* mr = FromHandle<MrObject>(handle);
    if (mr == nullptr || completion == nullptr)
        return InvalidParameter("NdkInitializeFastRegisterMr: NULL MR or RequestCompletion");
    if (remote_access != TRUE && remote_access != FALSE)
        return InvalidParameter("NdkInitializeFastRegisterMr: RemoteAccess is not a BOOLEAN");
    AdapterObject& adapter = *mr->pd->adapter;
    return RunRequest(adapter, ProviderFunction::NdkInitializeFastRegisterMr, mr->lifetime, completion, context,
                      [mr, page_count, remote_access, &adapter](const Finish&) {
                          return mr->region.InitializeFastRegister(page_count, remote_access == TRUE, adapter.limits);
                      });
}

// TOK-05: no failure path; 0 (never a valid token) for a bad MR or one with no tokens.
UINT32 GetRemoteTokenFromMr(NDK_MR* handle) {
    MrObject* mr = FromHandle<MrObject>(handle);
    return mr == nullptr ? 0 : mr->region.RemoteToken();
}
UINT32 GetLocalTokenFromMr(NDK_MR* handle) {
    MrObject* mr = FromHandle<MrObject>(handle);
    return mr == nullptr ? 0 : mr->region.LocalToken();
}

}  // namespace

const NDK_MR_DISPATCH kMrDispatch = {
    &CloseMr,
    &QueryExtensionInterface,
    &RegisterMr,
    &DeregisterMr,
    &InitializeFastRegisterMr,
    &GetRemoteTokenFromMr,
    &GetLocalTokenFromMr,
};

}  // namespace softndk::api
