// NDK_CQ_DISPATCH (CQ-01 … CQ-23).
#include <sched.h>

#include <new>

#include "api/async_request.h"

namespace softndk::api {

CqObject::CqObject(AdapterObject* owner, uint32_t depth, NDK_FN_CQ_NOTIFICATION_CALLBACK callback, PVOID context,
                   const Lifetime::Ops& ops)
    : lifetime(ops, this, &owner->lifetime),
      adapter(owner),
      notify(callback),
      notify_context(context),
      queue(depth, [this](NTSTATUS status) {
          // CQ-09/CQ-16: on the provider thread (serialised), holding the CQ so a close waits for the callback.
          lifetime.AddRef();
          adapter->executor->Post([this, status] {
              if (!lifetime.closing()) notify(notify_context, status);
              lifetime.Release();
          });
      }) {}

namespace {

using engine::ProviderFunction;

constexpr Lifetime::Ops kCqOps{nullptr, &DestroyObject<CqObject>};

NTSTATUS CloseCq(NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    CqObject* cq = FromHandle<CqObject>(object);
    if (cq == nullptr) return InvalidParameter("NdkCloseCq: not a CQ");
    return RunClose(*cq->adapter, cq->lifetime, completion, context);
}

NTSTATUS ResizeCq(NDK_CQ* handle, ULONG depth, NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    CqObject* cq = FromHandle<CqObject>(handle);
    if (cq == nullptr || completion == nullptr) return InvalidParameter("NdkResizeCq: NULL CQ or RequestCompletion");
    if (depth == 0 || depth > cq->adapter->info.MaxCqDepth)
        return InvalidParameter("NdkResizeCq: CqDepth 0 or above MaxCqDepth");
    return RunRequest(*cq->adapter, ProviderFunction::NdkResizeCq, cq->lifetime, completion, context,
                      [cq, depth](const Finish&) { return cq->queue.Resize(depth); });
}

VOID ArmCq(NDK_CQ* handle, ULONG type) {
    CqObject* cq = FromHandle<CqObject>(handle);
    if (cq == nullptr) return;
    if (cq->adapter->progress) cq->adapter->progress->EndInline();  // the consumer waits now: lanes, take over
    cq->queue.Arm(type);
}

// Polls with `take`; an empty CQ fed by sockets first runs the idle lanes' ready handlers here (ProgressEngine::
// PollInline), then, still empty, yields every 8th time: a consumer spinning here would keep the progress threads
// off the CPU until the scheduler tick (4 ms) when the cores are all busy.
template <class Take>
ULONG PollWithProgress(CqObject* cq, Take take) {
    ULONG taken = take();
    if (taken != 0 || !cq->adapter->progress) return taken;
    engine::ProgressEngine& progress = *cq->adapter->progress;
    if (progress.PollInline()) taken = take();
    thread_local uint32_t empty_polls = 0;
    if (taken == 0 && (++empty_polls & 7) == 0 && progress.watching()) sched_yield();
    return taken;
}

ULONG GetCqResults(NDK_CQ* handle, NDK_RESULT results[], ULONG count) {
    CqObject* cq = FromHandle<CqObject>(handle);
    if (cq == nullptr || results == nullptr) return 0;
    return PollWithProgress(cq, [&] { return cq->queue.Poll(results, count); });
}

ULONG GetCqResultsEx(NDK_CQ* handle, NDK_RESULT_EX results[], ULONG count) {
    CqObject* cq = FromHandle<CqObject>(handle);
    if (cq == nullptr || results == nullptr) return 0;
    return PollWithProgress(cq, [&] { return cq->queue.PollEx(results, count); });
}

// CQ-17: the adapter does not advertise CQ_INTERRUPT_MODERATION_SUPPORTED (completions are polled or
// notified from a provider thread; there is no interrupt to moderate).
NTSTATUS ControlCqInterruptModeration(NDK_CQ* handle, ULONG, ULONG) {
    if (FromHandle<CqObject>(handle) == nullptr) return InvalidParameter("NdkControlCqInterruptModeration: not a CQ");
    return STATUS_NOT_SUPPORTED;
}

}  // namespace

NTSTATUS CreateCq(NDK_ADAPTER* handle, ULONG depth, NDK_FN_CQ_NOTIFICATION_CALLBACK notification, PVOID context,
                  GROUP_AFFINITY* affinity, NDK_FN_CREATE_COMPLETION completion, PVOID request_context, NDK_CQ** out) {
    (void)affinity;  // CQ-03: a hint; the single provider thread serves every CQ
    AdapterObject* adapter = FromHandle<AdapterObject>(handle);
    if (adapter == nullptr || notification == nullptr || completion == nullptr || out == nullptr)
        return InvalidParameter("NdkCreateCq: NULL adapter, CqNotification, CreateCompletion or ppNdkCq");
    if (depth == 0 || depth > adapter->info.MaxCqDepth)
        return InvalidParameter("NdkCreateCq: CqDepth 0 or above MaxCqDepth (CQ-01)");
    return RunCreate(*adapter, ProviderFunction::NdkCreateCq, adapter->lifetime, completion, request_context, out,
                     [adapter, depth, notification, context](NDK_OBJECT_HEADER** header) -> NTSTATUS {
                         auto* cq = new (std::nothrow) CqObject(adapter, depth, notification, context, kCqOps);
                         if (cq == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
                         InitializeHandle(cq->ndk, NdkObjectTypeCq, adapter->info.Version, &kCqDispatch);
                         *header = &cq->ndk.Header;
                         return STATUS_SUCCESS;
                     });
}

const NDK_CQ_DISPATCH kCqDispatch = {
    &CloseCq,      &QueryExtensionInterface,      &ResizeCq,       &ArmCq,
    &GetCqResults, &ControlCqInterruptModeration, &GetCqResultsEx,
};

}  // namespace softndk::api
