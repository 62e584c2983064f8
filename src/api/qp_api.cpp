// NDK_QP_DISPATCH, NDK_SRQ_DISPATCH and NDK_MW_DISPATCH (QP-xx, SRQ-xx, MW-xx, FR-08 … FR-22).
#include <new>

#include "api/async_request.h"

namespace softndk::api {
namespace {

using engine::ProviderFunction;

// ---- lifetimes ----
void QpDestroy(void* object) {
    auto* qp = static_cast<QpObject*>(object);
    CqObject* rcq = qp->receive_cq;
    CqObject* icq = qp->initiator_cq;
    SrqObject* srq = qp->srq;
    qp->magic = 0;
    FreeObject(qp);
    rcq->lifetime.Release();  // LIFE-12: the CQs and SRQ are the QP's antecedents
    icq->lifetime.Release();
    if (srq != nullptr) srq->lifetime.Release();
}
bool QpTeardown(void* object) {
    static_cast<QpObject*>(object)->qp.Flush();  // LIFE-09: outstanding receives complete as cancelled
    return true;
}
constexpr Lifetime::Ops kQpOps{&QpTeardown, &QpDestroy};

constexpr Lifetime::Ops kSrqOps{nullptr, &DestroyObject<SrqObject>};

// CB-12: a window still reached by accesses in flight closes once they drained; the close pends meanwhile.
bool MwTeardown(void* object) {
    auto* mw = static_cast<MwObject*>(object);
    // The drain may end on a peer's posting thread: the close completes on the provider thread instead.
    return mw->window.Shutdown([mw](NTSTATUS) {
        mw->pd->adapter->executor->Post([mw] { mw->lifetime.TeardownDone(); });
    }) != STATUS_PENDING;
}
constexpr Lifetime::Ops kMwOps{&MwTeardown, &DestroyObject<MwObject>};

// A local request (invalidate, fast-register, bind) whose completion waits for a drain (CB-12). Only when it
// pends (under the memory object's lock) does the QP take the completion's place in its order, and the QP and
// MR stay open until it is done; the releases run on the provider thread, since a drain may end on a peer's
// posting thread.
template <class Defer>
class DeferredLocal {
public:
    DeferredLocal(QpObject* qp, MrObject* mr, Defer& defer) : qp_(qp), mr_(mr), defer_(defer) {}
    mem::PendHook will_pend() { return {&WillPend, this}; }

private:
    static mem::MemoryRegion::DrainDone WillPend(void* self) {
        auto* deferred = static_cast<DeferredLocal*>(self);
        QpObject* qp = deferred->qp_;
        MrObject* mr = deferred->mr_;
        const uint64_t ticket = deferred->defer_();
        qp->lifetime.AddRef();
        if (mr != nullptr) mr->lifetime.AddRef();
        return [qp, mr, ticket](NTSTATUS status) {
            qp->qp.FinishDeferred(ticket, status);
            qp->pd->adapter->executor->Post([qp, mr] {
                if (mr != nullptr) mr->lifetime.Release();
                qp->lifetime.Release();
            });
        };
    }

    QpObject* qp_;
    MrObject* mr_;
    Defer& defer_;
};

// ---- QP ----
NTSTATUS CloseQp(NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    QpObject* qp = FromHandle<QpObject>(object);
    if (qp == nullptr) return InvalidParameter("NdkCloseQp: not a QP");
    return RunClose(*qp->pd->adapter, qp->lifetime, completion, context);
}

VOID Flush(NDK_QP* handle) {
    QpObject* qp = FromHandle<QpObject>(handle);
    if (qp != nullptr) qp->qp.Flush();
}

NTSTATUS PostSend(QpObject* qp, PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags) {
    if (qp == nullptr) return InvalidParameter("NdkSend: not a QP");
    PostScope post(qp, "NdkSend");  // QP-05
    if (!post.ok()) return STATUS_INVALID_DEVICE_STATE;
    return qp->qp.Send(context, sgl, count, flags, false, 0);
}

NTSTATUS PostSendAndInvalidate(QpObject* qp, PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags,
                               UINT32 token) {
    if (qp == nullptr) return InvalidParameter("NdkSendAndInvalidate: not a QP");
    PostScope post(qp, "NdkSendAndInvalidate");  // QP-05
    if (!post.ok()) return STATUS_INVALID_DEVICE_STATE;
    return qp->qp.Send(context, sgl, count, flags, true, token);
}

NTSTATUS Receive(NDK_QP* handle, PVOID context, const NDK_SGE* sgl, ULONG count) {
    QpObject* qp = FromHandle<QpObject>(handle);
    if (qp == nullptr) return InvalidParameter("NdkReceive: not a QP");
    PostScope post(&qp->receive_cq, "NdkReceive");  // QP-05 (the receive queue is keyed by this member)
    if (!post.ok()) return STATUS_INVALID_DEVICE_STATE;
    if (qp->srq != nullptr) {
        SetLastErrorText("NdkReceive on a QP created with an SRQ: post to the SRQ (QP-02)");
        return STATUS_INVALID_DEVICE_STATE;
    }
    return qp->qp.Receive(context, sgl, count);
}

NTSTATUS PostRead(QpObject* qp, PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token,
                  ULONG flags) {
    if (qp == nullptr) return InvalidParameter("NdkRead: not a QP");
    PostScope post(qp, "NdkRead");  // QP-05
    if (!post.ok()) return STATUS_INVALID_DEVICE_STATE;
    return qp->qp.Read(context, sgl, count, address, token, flags);
}

NTSTATUS PostWrite(QpObject* qp, PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token,
                   ULONG flags) {
    if (qp == nullptr) return InvalidParameter("NdkWrite: not a QP");
    PostScope post(qp, "NdkWrite");  // QP-05
    if (!post.ok()) return STATUS_INVALID_DEVICE_STATE;
    return qp->qp.Write(context, sgl, count, address, token, flags);
}

NTSTATUS PostBind(QpObject* qp, PVOID context, NDK_MR* mr_handle, NDK_MW* mw_handle, PVOID address, SIZE_T length,
                  ULONG flags) {
    MrObject* mr = FromHandle<MrObject>(mr_handle);
    MwObject* mw = FromHandle<MwObject>(mw_handle);
    if (qp == nullptr || mr == nullptr || mw == nullptr)
        return InvalidParameter("NdkBind: NULL or foreign QP, MR or MW");
    PostScope post(qp, "NdkBind");  // QP-05
    if (!post.ok()) return STATUS_INVALID_DEVICE_STATE;
    if (mr->pd != qp->pd || mw->pd != qp->pd) return InvalidParameter("NdkBind: the MR or MW belongs to another PD");
    const uint64_t max_window = qp->pd->adapter->info.MaxWindowSize;
    return qp->qp.RunLocalRequest(context, NdkOperationTypeBind, flags, [&](auto defer) -> NTSTATUS {
        mr->lifetime.AddRef();  // MW-12: a bound window keeps its MR open
        DeferredLocal deferred(qp, nullptr, defer);
        NTSTATUS status = mw->window.Bind(
            mr->region, reinterpret_cast<uint64_t>(address), length, flags, max_window,
            [mr] { mr->lifetime.Release(); }, deferred.will_pend());
        if (!NT_SUCCESS(status)) mr->lifetime.Release();
        return status;
    });
}

NTSTATUS PostFastRegister(QpObject* qp, PVOID context, NDK_MR* mr_handle, ULONG page_count,
                          const NDK_LOGICAL_ADDRESS* pages, ULONG fbo, SIZE_T length, PVOID base_address, ULONG flags) {
    MrObject* mr = FromHandle<MrObject>(mr_handle);
    if (qp == nullptr || mr == nullptr) return InvalidParameter("NdkFastRegister: NULL or foreign QP or MR");
    PostScope post(qp, "NdkFastRegister");  // QP-05
    if (!post.ok()) return STATUS_INVALID_DEVICE_STATE;
    if (mr->pd != qp->pd) return InvalidParameter("NdkFastRegister: the MR belongs to another PD");
    AdapterObject& adapter = *qp->pd->adapter;
    return qp->qp.RunLocalRequest(context, NdkOperationTypeFastRegister, flags, [&](auto defer) {
        // Behind an invalidate still draining, it completes when that drain ends (FR-24 posting order).
        DeferredLocal deferred(qp, mr, defer);
        return mr->region.FastRegister(adapter.logical, pages, page_count, fbo, length,
                                       reinterpret_cast<uint64_t>(base_address), flags, adapter.limits,
                                       deferred.will_pend());
    });
}

NTSTATUS PostInvalidate(QpObject* qp, PVOID context, NDK_OBJECT_HEADER* object, ULONG flags) {
    constexpr ULONG kAccepted = NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER;  // FR-22
    if (qp == nullptr || object == nullptr || (flags & ~kAccepted) != 0)
        return InvalidParameter("NdkInvalidate: NULL QP or object, or flags outside SILENT_SUCCESS|READ_FENCE|DEFER");
    PostScope post(qp, "NdkInvalidate");  // QP-05
    if (!post.ok()) return STATUS_INVALID_DEVICE_STATE;
    MrObject* mr = FromHandle<MrObject>(object);
    MwObject* mw = FromHandle<MwObject>(object);
    if ((mr == nullptr && mw == nullptr) || (mr != nullptr && mr->pd != qp->pd) || (mw != nullptr && mw->pd != qp->pd))
        return InvalidParameter("NdkInvalidate: not an MR or MW of this QP's PD");
    return qp->qp.RunLocalRequest(context, NdkOperationTypeInvalidate, flags, [&](auto defer) -> NTSTATUS {
        // FR-22 / CB-12: the completion waits for accesses in flight; the call does not.
        DeferredLocal deferred(qp, mr, defer);
        return mr != nullptr ? mr->region.Invalidate(deferred.will_pend())
                             : mw->window.Invalidate(deferred.will_pend());
    });
}

// CB-18: "when returning a failure status from a call to an initiator request, the provider must guarantee that
// all requests that were previously submitted with the NDK_OP_FLAG_DEFER flag are indicated to the hardware": a
// post that fails inline, for whatever reason, rings the QP's doorbell before it returns.
NTSTATUS RingOnFailure(QpObject* qp, NTSTATUS status) {
    if (!NT_SUCCESS(status) && qp != nullptr) qp->qp.RingDoorbell();
    return status;
}

NTSTATUS Send(NDK_QP* handle, PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags) {
    QpObject* qp = FromHandle<QpObject>(handle);
    return RingOnFailure(qp, PostSend(qp, context, sgl, count, flags));
}

NTSTATUS SendAndInvalidate(NDK_QP* handle, PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags, UINT32 token) {
    QpObject* qp = FromHandle<QpObject>(handle);
    return RingOnFailure(qp, PostSendAndInvalidate(qp, context, sgl, count, flags, token));
}

NTSTATUS Read(NDK_QP* handle, PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token,
              ULONG flags) {
    QpObject* qp = FromHandle<QpObject>(handle);
    return RingOnFailure(qp, PostRead(qp, context, sgl, count, address, token, flags));
}

NTSTATUS Write(NDK_QP* handle, PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token,
               ULONG flags) {
    QpObject* qp = FromHandle<QpObject>(handle);
    return RingOnFailure(qp, PostWrite(qp, context, sgl, count, address, token, flags));
}

NTSTATUS Bind(NDK_QP* handle, PVOID context, NDK_MR* mr_handle, NDK_MW* mw_handle, PVOID address, SIZE_T length,
              ULONG flags) {
    QpObject* qp = FromHandle<QpObject>(handle);
    return RingOnFailure(qp, PostBind(qp, context, mr_handle, mw_handle, address, length, flags));
}

NTSTATUS FastRegister(NDK_QP* handle, PVOID context, NDK_MR* mr_handle, ULONG page_count,
                      const NDK_LOGICAL_ADDRESS* pages, ULONG fbo, SIZE_T length, PVOID base_address, ULONG flags) {
    QpObject* qp = FromHandle<QpObject>(handle);
    return RingOnFailure(qp,
                         PostFastRegister(qp, context, mr_handle, page_count, pages, fbo, length, base_address, flags));
}

NTSTATUS Invalidate(NDK_QP* handle, PVOID context, NDK_OBJECT_HEADER* object, ULONG flags) {
    QpObject* qp = FromHandle<QpObject>(handle);
    return RingOnFailure(qp, PostInvalidate(qp, context, object, flags));
}

// ---- SRQ ----
NTSTATUS CloseSrq(NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    SrqObject* srq = FromHandle<SrqObject>(object);
    if (srq == nullptr) return InvalidParameter("NdkCloseSrq: not an SRQ");
    return RunClose(*srq->pd->adapter, srq->lifetime, completion, context);
}

NTSTATUS ModifySrq(NDK_SRQ* handle, ULONG depth, ULONG threshold, NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    SrqObject* srq = FromHandle<SrqObject>(handle);
    if (srq == nullptr || completion == nullptr) return InvalidParameter("NdkModifySrq: NULL SRQ or RequestCompletion");
    if (depth > srq->pd->adapter->info.MaxSrqDepth)
        return InvalidParameter("NdkModifySrq: SrqDepth above MaxSrqDepth (SRQ-05)");
    return RunRequest(*srq->pd->adapter, ProviderFunction::NdkModifySrq, srq->lifetime, completion, context,
                      [srq, depth, threshold](const Finish&) { return srq->queue.Modify(depth, threshold); });
}

NTSTATUS SrqReceive(NDK_SRQ* handle, PVOID context, const NDK_SGE* sgl, ULONG count) {
    SrqObject* srq = FromHandle<SrqObject>(handle);
    if (srq == nullptr) return InvalidParameter("NdkSrqReceive: not an SRQ");
    PostScope post(srq, "NdkSrqReceive");  // QP-05
    if (!post.ok()) return STATUS_INVALID_DEVICE_STATE;
    return srq->queue.Post(context, sgl, count);
}

// ---- MW ----
NTSTATUS CloseMw(NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    MwObject* mw = FromHandle<MwObject>(object);
    if (mw == nullptr) return InvalidParameter("NdkCloseMw: not an MW");
    return RunClose(*mw->pd->adapter, mw->lifetime, completion, context);
}

UINT32 GetRemoteTokenFromMw(NDK_MW* handle) {
    MwObject* mw = FromHandle<MwObject>(handle);
    return mw == nullptr ? 0 : mw->window.RemoteToken();  // TOK-04
}

NTSTATUS MakeQp(PdObject* pd, CqObject* rcq, CqObject* icq, SrqObject* srq, PVOID qp_context, ULONG receive_depth,
                ULONG max_receive_sge, ULONG initiator_depth, ULONG max_initiator_sge, ULONG inline_size,
                NDK_OBJECT_HEADER** header) {
    std::unique_ptr<engine::ReceiveQueue> own;
    if (srq == nullptr) {
        own.reset(new (std::nothrow)
                      engine::ReceiveQueue(receive_depth, max_receive_sge, pd->adapter->info.MaxTransferLength));
        if (!own) return STATUS_INSUFFICIENT_RESOURCES;
    }
    AdapterObject& adapter = *pd->adapter;
    engine::QueuePair::Params params{pd,
                                     &adapter.tokens,
                                     &adapter.info,
                                     &rcq->queue,
                                     &icq->queue,
                                     srq != nullptr ? &srq->queue : own.get(),
                                     srq != nullptr,
                                     qp_context,
                                     max_initiator_sge,
                                     inline_size,
                                     initiator_depth};
    auto* qp = new (std::nothrow) QpObject(pd, rcq, icq, srq, std::move(own), params, kQpOps);
    if (qp == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
    rcq->lifetime.AddRef();
    icq->lifetime.AddRef();
    if (srq != nullptr) srq->lifetime.AddRef();
    InitializeHandle(qp->ndk, NdkObjectTypeQp, adapter.info.Version, &kQpDispatch);
    *header = &qp->ndk.Header;
    return STATUS_SUCCESS;
}

}  // namespace

NTSTATUS CreateQp(NDK_PD* handle, NDK_CQ* receive_cq, NDK_CQ* initiator_cq, PVOID qp_context, ULONG receive_depth,
                  ULONG initiator_depth, ULONG max_receive_sge, ULONG max_initiator_sge, ULONG inline_size,
                  NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_QP** out) {
    PdObject* pd = FromHandle<PdObject>(handle);
    CqObject* rcq = FromHandle<CqObject>(receive_cq);
    CqObject* icq = FromHandle<CqObject>(initiator_cq);
    if (pd == nullptr || rcq == nullptr || icq == nullptr || completion == nullptr || out == nullptr)
        return InvalidParameter("NdkCreateQp: NULL PD, CQ, CreateCompletion or ppNdkQp");
    const NDK_ADAPTER_INFO& info = pd->adapter->info;
    if (rcq->adapter != pd->adapter || icq->adapter != pd->adapter)
        return ForeignAdapters("NdkCreateQp", "CQ", rcq->adapter != pd->adapter ? *rcq->adapter : *icq->adapter, "PD",
                               *pd->adapter);
    if (receive_depth == 0 || receive_depth > info.MaxReceiveQueueDepth || initiator_depth == 0 ||
        initiator_depth > info.MaxInitiatorQueueDepth || max_receive_sge > info.MaxReceiveRequestSge ||
        max_initiator_sge > info.MaxInitiatorRequestSge || inline_size > info.MaxInlineDataSize)
        return InvalidParameter(
            "NdkCreateQp: a depth, SGE count or InlineDataSize is 0 or above the adapter's limit (QP-01)");
    return RunCreate(*pd->adapter, ProviderFunction::NdkCreateQp, pd->lifetime, completion, context, out,
                     [=](NDK_OBJECT_HEADER** header) {
                         return MakeQp(pd, rcq, icq, nullptr, qp_context, receive_depth, max_receive_sge,
                                       initiator_depth, max_initiator_sge, inline_size, header);
                     });
}

NTSTATUS CreateQpWithSrq(NDK_PD* handle, NDK_CQ* receive_cq, NDK_CQ* initiator_cq, NDK_SRQ* srq_handle,
                         PVOID qp_context, ULONG initiator_depth, ULONG max_initiator_sge, ULONG inline_size,
                         NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_QP** out) {
    PdObject* pd = FromHandle<PdObject>(handle);
    CqObject* rcq = FromHandle<CqObject>(receive_cq);
    CqObject* icq = FromHandle<CqObject>(initiator_cq);
    SrqObject* srq = FromHandle<SrqObject>(srq_handle);
    if (pd == nullptr || rcq == nullptr || icq == nullptr || srq == nullptr || completion == nullptr || out == nullptr)
        return InvalidParameter("NdkCreateQpWithSrq: NULL PD, CQ, SRQ, CreateCompletion or ppNdkQp");
    const NDK_ADAPTER_INFO& info = pd->adapter->info;
    if (srq->pd != pd) return InvalidParameter("NdkCreateQpWithSrq: the SRQ belongs to another PD");
    if (initiator_depth == 0 || initiator_depth > info.MaxInitiatorQueueDepth ||
        max_initiator_sge > info.MaxInitiatorRequestSge || inline_size > info.MaxInlineDataSize)
        return InvalidParameter("NdkCreateQpWithSrq: a limit is 0 or above the adapter's (QP-02)");
    return RunCreate(*pd->adapter, ProviderFunction::NdkCreateQpWithSrq, pd->lifetime, completion, context, out,
                     [=](NDK_OBJECT_HEADER** header) {
                         return MakeQp(pd, rcq, icq, srq, qp_context, 0, 0, initiator_depth, max_initiator_sge,
                                       inline_size, header);
                     });
}

NTSTATUS CreateSrq(NDK_PD* handle, ULONG depth, ULONG max_sge, ULONG threshold, NDK_FN_SRQ_NOTIFICATION_CALLBACK notify,
                   PVOID notify_context, GROUP_AFFINITY* affinity, NDK_FN_CREATE_COMPLETION completion, PVOID context,
                   NDK_SRQ** out) {
    (void)affinity;  // SRQ-04: a hint
    PdObject* pd = FromHandle<PdObject>(handle);
    if (pd == nullptr || completion == nullptr || out == nullptr)
        return InvalidParameter("NdkCreateSrq: NULL PD, CreateCompletion or ppNdkSrq");
    const NDK_ADAPTER_INFO& info = pd->adapter->info;
    if (info.MaxSrqDepth == 0) {
        SetLastErrorText("NdkCreateSrq: the adapter advertises no SRQ support (SRQ-02)");
        return STATUS_NOT_SUPPORTED;
    }
    if (depth == 0 || depth > info.MaxSrqDepth || max_sge > info.MaxReceiveRequestSge)
        return InvalidParameter("NdkCreateSrq: SrqDepth or MaxReceiveRequestSge out of range (SRQ-01)");
    return RunCreate(*pd->adapter, ProviderFunction::NdkCreateSrq, pd->lifetime, completion, context, out,
                     [=](NDK_OBJECT_HEADER** header) -> NTSTATUS {
                         auto* srq = new (std::nothrow) SrqObject(pd, depth, max_sge, kSrqOps);
                         if (srq == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
                         srq->notify = notify;
                         srq->notify_context = notify_context;
                         if (notify != nullptr) {
                             srq->queue.SetThresholdNotifier(threshold, [srq] {
                                 srq->lifetime.AddRef();
                                 srq->pd->adapter->executor->Post([srq] {
                                     if (!srq->lifetime.closing()) srq->notify(srq->notify_context, STATUS_SUCCESS);
                                     srq->lifetime.Release();
                                 });
                             });
                         }
                         InitializeHandle(srq->ndk, NdkObjectTypeSrq, pd->adapter->info.Version, &kSrqDispatch);
                         *header = &srq->ndk.Header;
                         return STATUS_SUCCESS;
                     });
}

NTSTATUS CreateMw(NDK_PD* handle, NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_MW** out) {
    PdObject* pd = FromHandle<PdObject>(handle);
    if (pd == nullptr || completion == nullptr || out == nullptr)
        return InvalidParameter("NdkCreateMw: NULL PD, CreateCompletion or ppNdkMw");
    return RunCreate(*pd->adapter, ProviderFunction::NdkCreateMw, pd->lifetime, completion, context, out,
                     [pd](NDK_OBJECT_HEADER** header) -> NTSTATUS {
                         auto* mw = new (std::nothrow) MwObject(pd, kMwOps);
                         if (mw == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
                         InitializeHandle(mw->ndk, NdkObjectTypeMw, pd->adapter->info.Version, &kMwDispatch);
                         *header = &mw->ndk.Header;
                         return STATUS_SUCCESS;
                     });
}

const NDK_QP_DISPATCH kQpDispatch = {
    &CloseQp, &QueryExtensionInterface, &Flush, &Send, &Receive, &Bind, &FastRegister, &Invalidate, &Read,
    &Write,   &SendAndInvalidate,
};
const NDK_SRQ_DISPATCH kSrqDispatch = {&CloseSrq, &QueryExtensionInterface, &ModifySrq, &SrqReceive};
const NDK_MW_DISPATCH kMwDispatch = {&CloseMw, &QueryExtensionInterface, &GetRemoteTokenFromMw};

}  // namespace softndk::api
