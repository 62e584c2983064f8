#include "support/remote_side.h"

#include "support/ndk_test_support.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace softndk::test {
namespace {

using remote::Callback;
using remote::Fn;
using remote::Header;
using remote::Kind;
using remote::Reader;
using remote::Writer;

constexpr uint64_t kForeign = 1;     // ndk_remote_side's name for an object that is not its own
constexpr ULONG kSgeCopyLimit = 32;  // at most this many SGEs are read from a consumer's list (the adapter's limit)

std::mutex g_current_mutex;
RemoteSide* g_current = nullptr;
SharedArena* g_arena = nullptr;

// A reply: its status word, then what the call returns.
class Answer {
public:
    explicit Answer(std::vector<uint8_t> body) : body_(std::move(body)), in_(body_.data(), body_.size()) {
        status_ = static_cast<NTSTATUS>(static_cast<uint32_t>(in_.U64()));
        if (!in_.ok()) status_ = STATUS_INTERNAL_ERROR;
    }
    NTSTATUS status() const { return status_; }
    Reader& in() { return in_; }

private:
    std::vector<uint8_t> body_;
    Reader in_;
    NTSTATUS status_;
};

// Copies what came back into the consumer's buffer of `room` bytes.
void CopyOut(void* to, const std::vector<uint8_t>& bytes, size_t room) {
    const size_t length = std::min(bytes.size(), room);
    if (length != 0) std::memcpy(to, bytes.data(), length);
}

RemoteSide* Side(const void* handle) {
    return RemoteSide::Of(handle);
}

template <class T>
void Put(T** out, NDK_OBJECT_HEADER* header) {
    if (out != nullptr && header != nullptr) *out = reinterpret_cast<T*>(header);
}

void WriteSges(Writer& w, const NDK_SGE* sgl, ULONG count) {
    w.Bytes(sgl, sgl == nullptr ? 0 : sizeof(NDK_SGE) * std::min(count, kSgeCopyLimit)).U64(count);
}

// An MDL chain as (address, bytes, flags) per MDL; false when one is outside the shared arena.
bool WriteMdlChain(Writer& w, MDL* mdl) {
    std::vector<MDL*> chain;
    for (MDL* m = mdl; m != nullptr; m = m->Next) chain.push_back(m);
    w.U64(chain.size());
    for (MDL* m : chain) {
        void* address = MmGetMdlVirtualAddress(m);
        const ULONG bytes = MmGetMdlByteCount(m);
        if (g_arena == nullptr || !g_arena->Contains(address, bytes)) {
            std::fprintf(stderr, "remote side: an MDL at %p is outside the shared arena (not supported)\n", address);
            return false;
        }
        w.U64(reinterpret_cast<uint64_t>(address)).U64(bytes).U64(m->MdlFlags);
    }
    return true;
}

uint64_t Cb(RemoteSide* side, Callback kind, void* function, void* context,
            NDK_OBJECT_TYPE created = static_cast<NDK_OBJECT_TYPE>(0)) {
    return side->Register({kind, function, context, created, {}, 0});
}

NTSTATUS NotSupportedExtension(NDK_OBJECT_HEADER*, GUID*, NDK_VERSION, NDK_EXTENSION_INTERFACE*) {
    return STATUS_NOT_SUPPORTED;
}

// A create call: the request, then the proxy for an object made inline.
template <class T>
NTSTATUS Create(RemoteSide* side, Fn fn, Writer& w, uint64_t created_id, NDK_OBJECT_TYPE type, T** out) {
    w.U64(out != nullptr);
    Answer answer(side->Call(fn, w));
    const uint64_t handle = answer.in().U64();
    side->Settle(answer.status(), {created_id});
    if (handle != 0) Put(out, side->ProxyFor(handle, type));
    return answer.status();
}

NTSTATUS Request(RemoteSide* side, Fn fn, const Writer& w, std::initializer_list<uint64_t> one_shot = {}) {
    Answer answer(side->Call(fn, w));
    side->Settle(answer.status(), one_shot);
    return answer.status();
}

// ---- objects: close ----
NTSTATUS Close(NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    RemoteSide* side = Side(object);
    RemoteSide::CallbackEntry entry{
        Callback::kClose, reinterpret_cast<void*>(completion), context, static_cast<NDK_OBJECT_TYPE>(0), {}, object};
    const uint64_t id = completion != nullptr ? side->Register(entry) : 0;
    Writer w;
    w.U64(side->RemoteHandle(object)).U64(id);
    const NTSTATUS status = Request(side, Fn::kClose, w, {id});
    if (status == STATUS_SUCCESS) side->Forget(entry.forget);
    return status;
}

// ---- adapter ----
NTSTATUS QueryAdapterInfo(NDK_ADAPTER* adapter, NDK_ADAPTER_INFO* info, ULONG* size) {
    RemoteSide* side = Side(adapter);
    if (size == nullptr) return STATUS_INVALID_PARAMETER;  // the provider's answer to a NULL size (AI-03)
    Writer w;
    w.U64(side->RemoteHandle(adapter)).U64(info != nullptr ? *size : 0);
    Answer answer(side->Call(Fn::kQueryAdapterInfo, w));
    *size = static_cast<ULONG>(answer.in().U64());
    std::vector<uint8_t> bytes = answer.in().Bytes();
    if (info != nullptr) CopyOut(info, bytes, sizeof(*info));
    return answer.status();
}
NTSTATUS CreateCq(NDK_ADAPTER* adapter, ULONG depth, NDK_FN_CQ_NOTIFICATION_CALLBACK notify, PVOID notify_context,
                  GROUP_AFFINITY*, NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_CQ** out) {
    RemoteSide* side = Side(adapter);
    const uint64_t created = Cb(side, Callback::kCreate, reinterpret_cast<void*>(done), context, NdkObjectTypeCq);
    Writer w;
    w.U64(side->RemoteHandle(adapter))
        .U64(depth)
        .U64(Cb(side, Callback::kCqNotify, reinterpret_cast<void*>(notify), notify_context))
        .U64(created);
    return Create(side, Fn::kCreateCq, w, created, NdkObjectTypeCq, out);
}
NTSTATUS CreatePd(NDK_ADAPTER* adapter, NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_PD** out) {
    RemoteSide* side = Side(adapter);
    const uint64_t created = Cb(side, Callback::kCreate, reinterpret_cast<void*>(done), context, NdkObjectTypePd);
    Writer w;
    w.U64(side->RemoteHandle(adapter)).U64(created);
    return Create(side, Fn::kCreatePd, w, created, NdkObjectTypePd, out);
}
NTSTATUS CreateSharedEndpoint(NDK_ADAPTER* adapter, const PSOCKADDR address, ULONG length,
                              NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_SHARED_ENDPOINT** out) {
    RemoteSide* side = Side(adapter);
    const uint64_t created =
        Cb(side, Callback::kCreate, reinterpret_cast<void*>(done), context, NdkObjectTypeSharedEndpoint);
    Writer w;
    w.U64(side->RemoteHandle(adapter)).Bytes(address, address != nullptr ? std::min<ULONG>(length, 128) : 0);
    w.U64(length).U64(created);
    return Create(side, Fn::kCreateSharedEndpoint, w, created, NdkObjectTypeSharedEndpoint, out);
}
NTSTATUS CreateConnector(NDK_ADAPTER* adapter, NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_CONNECTOR** out) {
    RemoteSide* side = Side(adapter);
    const uint64_t created =
        Cb(side, Callback::kCreate, reinterpret_cast<void*>(done), context, NdkObjectTypeConnector);
    Writer w;
    w.U64(side->RemoteHandle(adapter)).U64(created);
    return Create(side, Fn::kCreateConnector, w, created, NdkObjectTypeConnector, out);
}
NTSTATUS CreateListener(NDK_ADAPTER* adapter, NDK_FN_CONNECT_EVENT_CALLBACK event, PVOID event_context,
                        NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_LISTENER** out) {
    RemoteSide* side = Side(adapter);
    const uint64_t created = Cb(side, Callback::kCreate, reinterpret_cast<void*>(done), context, NdkObjectTypeListener);
    Writer w;
    w.U64(side->RemoteHandle(adapter))
        .U64(Cb(side, Callback::kConnect, reinterpret_cast<void*>(event), event_context, NdkObjectTypeConnector))
        .U64(created);
    return Create(side, Fn::kCreateListener, w, created, NdkObjectTypeListener, out);
}
NTSTATUS BuildLam(NDK_ADAPTER* adapter, MDL* mdl, SIZE_T length, NDK_FN_REQUEST_COMPLETION done, PVOID context,
                  NDK_LOGICAL_ADDRESS_MAPPING* lam, ULONG* lam_size, ULONG* fbo) {
    RemoteSide* side = Side(adapter);
    if (lam_size == nullptr || fbo == nullptr) return STATUS_INVALID_PARAMETER;  // LAM-03: both are required
    // The LAM, its size and the FBO come back with the reply, or with the completion when it pends.
    auto copy_back = [lam, lam_size, fbo](Reader& in) {
        std::vector<uint8_t> bytes = in.Bytes();
        const ULONG size = static_cast<ULONG>(in.U64());
        const ULONG offset = static_cast<ULONG>(in.U64());
        if (lam != nullptr) CopyOut(lam, bytes, *lam_size);
        *lam_size = size;
        *fbo = offset;
    };
    Writer w;
    w.U64(side->RemoteHandle(adapter));
    if (!WriteMdlChain(w, mdl)) return STATUS_NOT_SUPPORTED;
    RemoteSide::CallbackEntry entry{Callback::kRequest,
                                    reinterpret_cast<void*>(done),
                                    context,
                                    static_cast<NDK_OBJECT_TYPE>(0),
                                    copy_back,
                                    nullptr};
    const uint64_t id = done != nullptr ? side->Register(entry) : 0;
    w.U64(length).U64(id).U64(reinterpret_cast<uint64_t>(lam)).U64(*lam_size);
    Answer answer(side->Call(Fn::kBuildLam, w));
    if (answer.status() != STATUS_PENDING) copy_back(answer.in());
    side->Settle(answer.status(), {id});
    return answer.status();
}
VOID ReleaseLam(NDK_ADAPTER* adapter, NDK_LOGICAL_ADDRESS_MAPPING* lam) {
    RemoteSide* side = Side(adapter);
    Writer w;
    w.U64(side->RemoteHandle(adapter)).U64(reinterpret_cast<uint64_t>(lam));
    side->Call(Fn::kReleaseLam, w);
}

// ---- CQ ----
NTSTATUS ResizeCq(NDK_CQ* cq, ULONG depth, NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    RemoteSide* side = Side(cq);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(cq)).U64(depth).U64(id);
    return Request(side, Fn::kResizeCq, w, {id});
}
VOID ArmCq(NDK_CQ* cq, ULONG type) {
    RemoteSide* side = Side(cq);
    Writer w;
    w.U64(side->RemoteHandle(cq)).U64(type);
    side->Call(Fn::kArmCq, w);
}
ULONG GetCqResultsEx(NDK_CQ* cq, NDK_RESULT_EX results[], ULONG count) {
    RemoteSide* side = Side(cq);
    if (results == nullptr) return 0;
    Writer w;
    w.U64(side->RemoteHandle(cq)).U64(std::min<ULONG>(count, 4096));
    Answer answer(side->Call(Fn::kGetCqResultsEx, w));
    const auto got = static_cast<ULONG>(answer.in().U64());
    std::vector<uint8_t> bytes = answer.in().Bytes();
    const size_t whole = std::min<size_t>(bytes.size() / sizeof(NDK_RESULT_EX), count);
    CopyOut(results, bytes, whole * sizeof(NDK_RESULT_EX));
    return std::min<ULONG>(got, static_cast<ULONG>(whole));
}
ULONG GetCqResults(NDK_CQ* cq, NDK_RESULT results[], ULONG count) {
    if (results == nullptr) return 0;
    std::vector<NDK_RESULT_EX> ex(std::min<ULONG>(count, 4096));
    const ULONG got = GetCqResultsEx(cq, ex.data(), static_cast<ULONG>(ex.size()));
    for (ULONG i = 0; i < got; ++i)
        results[i] = NDK_RESULT{ex[i].Status, ex[i].BytesTransferred, ex[i].QPContext, ex[i].RequestContext};
    return got;
}
NTSTATUS ControlCqInterruptModeration(NDK_CQ*, ULONG, ULONG) {
    return STATUS_NOT_SUPPORTED;  // CQ-17: softndk does not advertise it either
}

// ---- PD ----
NTSTATUS CreateMr(NDK_PD* pd, BOOLEAN fast, NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_MR** out) {
    RemoteSide* side = Side(pd);
    const uint64_t created = Cb(side, Callback::kCreate, reinterpret_cast<void*>(done), context, NdkObjectTypeMr);
    Writer w;
    w.U64(side->RemoteHandle(pd)).U64(fast).U64(created);
    return Create(side, Fn::kCreateMr, w, created, NdkObjectTypeMr, out);
}
NTSTATUS CreateMw(NDK_PD* pd, NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_MW** out) {
    RemoteSide* side = Side(pd);
    const uint64_t created = Cb(side, Callback::kCreate, reinterpret_cast<void*>(done), context, NdkObjectTypeMw);
    Writer w;
    w.U64(side->RemoteHandle(pd)).U64(created);
    return Create(side, Fn::kCreateMw, w, created, NdkObjectTypeMw, out);
}
NTSTATUS CreateSrq(NDK_PD* pd, ULONG depth, ULONG sge, ULONG threshold, NDK_FN_SRQ_NOTIFICATION_CALLBACK notify,
                   PVOID notify_context, GROUP_AFFINITY*, NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_SRQ** out) {
    RemoteSide* side = Side(pd);
    const uint64_t created = Cb(side, Callback::kCreate, reinterpret_cast<void*>(done), context, NdkObjectTypeSrq);
    Writer w;
    w.U64(side->RemoteHandle(pd)).U64(depth).U64(sge).U64(threshold);
    w.U64(Cb(side, Callback::kSrqNotify, reinterpret_cast<void*>(notify), notify_context)).U64(created);
    return Create(side, Fn::kCreateSrq, w, created, NdkObjectTypeSrq, out);
}
NTSTATUS CreateQpCommon(Fn fn, NDK_PD* pd, NDK_CQ* receive_cq, NDK_CQ* initiator_cq, NDK_SRQ* srq, PVOID qp_context,
                        ULONG receive_depth, ULONG initiator_depth, ULONG receive_sge, ULONG initiator_sge,
                        ULONG inline_size, NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_QP** out) {
    RemoteSide* side = Side(pd);
    const uint64_t created = Cb(side, Callback::kCreate, reinterpret_cast<void*>(done), context, NdkObjectTypeQp);
    Writer w;
    w.U64(side->RemoteHandle(pd)).U64(side->RemoteHandle(receive_cq)).U64(side->RemoteHandle(initiator_cq));
    w.U64(side->RemoteHandle(srq)).U64(reinterpret_cast<uint64_t>(qp_context));
    w.U64(receive_depth).U64(initiator_depth).U64(receive_sge).U64(initiator_sge).U64(inline_size).U64(created);
    return Create(side, fn, w, created, NdkObjectTypeQp, out);
}
NTSTATUS CreateQp(NDK_PD* pd, NDK_CQ* receive_cq, NDK_CQ* initiator_cq, PVOID qp_context, ULONG receive_depth,
                  ULONG initiator_depth, ULONG receive_sge, ULONG initiator_sge, ULONG inline_size,
                  NDK_FN_CREATE_COMPLETION done, PVOID context, NDK_QP** out) {
    return CreateQpCommon(Fn::kCreateQp, pd, receive_cq, initiator_cq, nullptr, qp_context, receive_depth,
                          initiator_depth, receive_sge, initiator_sge, inline_size, done, context, out);
}
NTSTATUS CreateQpWithSrq(NDK_PD* pd, NDK_CQ* receive_cq, NDK_CQ* initiator_cq, NDK_SRQ* srq, PVOID qp_context,
                         ULONG initiator_depth, ULONG initiator_sge, ULONG inline_size, NDK_FN_CREATE_COMPLETION done,
                         PVOID context, NDK_QP** out) {
    return CreateQpCommon(Fn::kCreateQpWithSrq, pd, receive_cq, initiator_cq, srq, qp_context, 0, initiator_depth, 0,
                          initiator_sge, inline_size, done, context, out);
}
VOID GetPrivilegedToken(NDK_PD* pd, UINT32* token) {
    RemoteSide* side = Side(pd);
    Writer w;
    w.U64(side->RemoteHandle(pd));
    Answer answer(side->Call(Fn::kGetPrivilegedToken, w));
    const auto value = static_cast<UINT32>(answer.in().U64());
    if (token != nullptr) *token = value;
}

// ---- MR, MW ----
NTSTATUS RegisterMr(NDK_MR* mr, MDL* mdl, SIZE_T length, ULONG flags, NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    RemoteSide* side = Side(mr);
    Writer w;
    w.U64(side->RemoteHandle(mr));
    if (!WriteMdlChain(w, mdl)) return STATUS_NOT_SUPPORTED;
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    w.U64(length).U64(flags).U64(id);
    return Request(side, Fn::kRegisterMr, w, {id});
}
NTSTATUS DeregisterMr(NDK_MR* mr, NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    RemoteSide* side = Side(mr);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(mr)).U64(id);
    return Request(side, Fn::kDeregisterMr, w, {id});
}
NTSTATUS InitializeFastRegisterMr(NDK_MR* mr, ULONG pages, BOOLEAN remote_access, NDK_FN_REQUEST_COMPLETION done,
                                  PVOID context) {
    RemoteSide* side = Side(mr);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(mr)).U64(pages).U64(remote_access).U64(id);
    const NTSTATUS status = Request(side, Fn::kInitializeFastRegisterMr, w, {id});
    if ((status == STATUS_SUCCESS || status == STATUS_PENDING) && side->Owns(mr))
        reinterpret_cast<RemoteSide::Proxy*>(mr)->fast_pages = pages;
    return status;
}
UINT32 TokenOf(Fn fn, const void* object) {
    RemoteSide* side = Side(object);
    Writer w;
    w.U64(side->RemoteHandle(object));
    Answer answer(side->Call(fn, w));
    return static_cast<UINT32>(answer.in().U64());
}
UINT32 RemoteTokenFromMr(NDK_MR* mr) {
    return TokenOf(Fn::kGetRemoteTokenFromMr, mr);
}
UINT32 LocalTokenFromMr(NDK_MR* mr) {
    return TokenOf(Fn::kGetLocalTokenFromMr, mr);
}
UINT32 RemoteTokenFromMw(NDK_MW* mw) {
    return TokenOf(Fn::kGetRemoteTokenFromMw, mw);
}

// ---- SRQ ----
NTSTATUS ModifySrq(NDK_SRQ* srq, ULONG depth, ULONG threshold, NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    RemoteSide* side = Side(srq);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(srq)).U64(depth).U64(threshold).U64(id);
    return Request(side, Fn::kModifySrq, w, {id});
}
NTSTATUS SrqReceive(NDK_SRQ* srq, PVOID context, const NDK_SGE* sgl, ULONG count) {
    RemoteSide* side = Side(srq);
    Writer w;
    w.U64(side->RemoteHandle(srq)).U64(reinterpret_cast<uint64_t>(context));
    WriteSges(w, sgl, count);
    return Request(side, Fn::kSrqReceive, w);
}

// ---- QP ----
VOID Flush(NDK_QP* qp) {
    RemoteSide* side = Side(qp);
    Writer w;
    w.U64(side->RemoteHandle(qp));
    side->Call(Fn::kFlush, w);
}
NTSTATUS Receive(NDK_QP* qp, PVOID context, const NDK_SGE* sgl, ULONG count) {
    RemoteSide* side = Side(qp);
    Writer w;
    w.U64(side->RemoteHandle(qp)).U64(reinterpret_cast<uint64_t>(context));
    WriteSges(w, sgl, count);
    return Request(side, Fn::kReceive, w);
}
NTSTATUS Initiate(Fn fn, NDK_QP* qp, PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags, UINT64 address,
                  UINT32 token) {
    RemoteSide* side = Side(qp);
    if ((flags & NDK_OP_FLAG_INLINE) != 0 && sgl != nullptr) {
        // QP-13: inline data is read from the consumer's buffers, which the remote process sees only in the arena.
        if (count > kSgeCopyLimit) {
            std::fprintf(stderr, "remote side: more than %u inline SGEs (not supported)\n", kSgeCopyLimit);
            return STATUS_NOT_SUPPORTED;
        }
        for (ULONG i = 0; i < count; ++i)
            if (sgl[i].Length != 0 &&
                (g_arena == nullptr || !g_arena->Contains(sgl[i].VirtualAddress, sgl[i].Length))) {
                std::fprintf(stderr, "remote side: inline data outside the shared arena (not supported)\n");
                return STATUS_NOT_SUPPORTED;
            }
    }
    Writer w;
    w.U64(side->RemoteHandle(qp)).U64(reinterpret_cast<uint64_t>(context));
    WriteSges(w, sgl, count);
    w.U64(flags).U64(address).U64(token);
    return Request(side, fn, w);
}
NTSTATUS Send(NDK_QP* qp, PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags) {
    return Initiate(Fn::kSend, qp, context, sgl, count, flags, 0, 0);
}
NTSTATUS SendAndInvalidate(NDK_QP* qp, PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags, UINT32 token) {
    return Initiate(Fn::kSendAndInvalidate, qp, context, sgl, count, flags, 0, token);
}
NTSTATUS Read(NDK_QP* qp, PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token, ULONG flags) {
    return Initiate(Fn::kRead, qp, context, sgl, count, flags, address, token);
}
NTSTATUS Write(NDK_QP* qp, PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token, ULONG flags) {
    return Initiate(Fn::kWrite, qp, context, sgl, count, flags, address, token);
}
NTSTATUS Bind(NDK_QP* qp, PVOID context, NDK_MR* mr, NDK_MW* mw, PVOID address, SIZE_T length, ULONG flags) {
    RemoteSide* side = Side(qp);
    Writer w;
    w.U64(side->RemoteHandle(qp)).U64(reinterpret_cast<uint64_t>(context)).U64(side->RemoteHandle(mr));
    w.U64(side->RemoteHandle(mw)).U64(reinterpret_cast<uint64_t>(address)).U64(length).U64(flags);
    return Request(side, Fn::kBind, w);
}
NTSTATUS FastRegister(NDK_QP* qp, PVOID context, NDK_MR* mr, ULONG pages, const NDK_LOGICAL_ADDRESS* array, ULONG fbo,
                      SIZE_T length, PVOID base, ULONG flags) {
    RemoteSide* side = Side(qp);
    Writer w;
    w.U64(side->RemoteHandle(qp)).U64(reinterpret_cast<uint64_t>(context)).U64(side->RemoteHandle(mr)).U64(pages);
    // The page array as the consumer gave it. A count beyond the MR's is refused before the array is read
    // (FR-09), so only as many entries as the MR takes are read here; the remote side pads the rest.
    const ULONG readable = side->Owns(mr) ? reinterpret_cast<RemoteSide::Proxy*>(mr)->fast_pages : 0;
    w.Bytes(array, array == nullptr ? 0 : sizeof(NDK_LOGICAL_ADDRESS) * std::min(pages, readable));
    w.U64(fbo).U64(length).U64(reinterpret_cast<uint64_t>(base)).U64(flags);
    return Request(side, Fn::kFastRegister, w);
}
NTSTATUS Invalidate(NDK_QP* qp, PVOID context, NDK_OBJECT_HEADER* object, ULONG flags) {
    RemoteSide* side = Side(qp);
    Writer w;
    w.U64(side->RemoteHandle(qp)).U64(reinterpret_cast<uint64_t>(context)).U64(side->RemoteHandle(object));
    w.U64(flags);
    return Request(side, Fn::kInvalidate, w);
}

// ---- connector ----
void WriteAddress(Writer& w, const PSOCKADDR address, ULONG length) {
    w.Bytes(address, address != nullptr ? std::min<ULONG>(length, 128) : 0).U64(length);
}
void WriteData(Writer& w, const PVOID data, ULONG length) {
    w.Bytes(data, data != nullptr ? std::min<ULONG>(length, 4096) : 0).U64(length);
}
NTSTATUS Connect(NDK_CONNECTOR* connector, NDK_QP* qp, const PSOCKADDR source, ULONG source_length,
                 const PSOCKADDR destination, ULONG destination_length, ULONG inbound, ULONG outbound, const PVOID data,
                 ULONG data_length, NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    RemoteSide* side = Side(connector);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(connector)).U64(side->RemoteHandle(qp)).U64(0);
    WriteAddress(w, source, source_length);
    WriteAddress(w, destination, destination_length);
    w.U64(inbound).U64(outbound);
    WriteData(w, data, data_length);
    w.U64(id);
    return Request(side, Fn::kConnect, w, {id});
}
NTSTATUS ConnectWithSharedEndpoint(NDK_CONNECTOR* connector, NDK_QP* qp, NDK_SHARED_ENDPOINT* shared,
                                   const PSOCKADDR destination, ULONG destination_length, ULONG inbound, ULONG outbound,
                                   const PVOID data, ULONG data_length, NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    RemoteSide* side = Side(connector);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(connector)).U64(side->RemoteHandle(qp)).U64(side->RemoteHandle(shared));
    WriteAddress(w, nullptr, 0);
    WriteAddress(w, destination, destination_length);
    w.U64(inbound).U64(outbound);
    WriteData(w, data, data_length);
    w.U64(id);
    return Request(side, Fn::kConnectWithSharedEndpoint, w, {id});
}
// NdkCompleteConnect(Ex) and NdkAccept(Ex): the same call, with a plain or an Ex disconnect event.
NTSTATUS CompleteConnectAs(Fn fn, Callback kind, NDK_CONNECTOR* connector, void* disconnect, PVOID disconnect_context,
                           NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    RemoteSide* side = Side(connector);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(connector)).U64(Cb(side, kind, disconnect, disconnect_context)).U64(id);
    return Request(side, fn, w, {id});
}
NTSTATUS AcceptAs(Fn fn, Callback kind, NDK_CONNECTOR* connector, NDK_QP* qp, ULONG inbound, ULONG outbound,
                  const PVOID data, ULONG data_length, void* disconnect, PVOID disconnect_context,
                  NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    RemoteSide* side = Side(connector);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(connector)).U64(side->RemoteHandle(qp)).U64(inbound).U64(outbound);
    WriteData(w, data, data_length);
    w.U64(Cb(side, kind, disconnect, disconnect_context)).U64(id);
    return Request(side, fn, w, {id});
}
NTSTATUS CompleteConnect(NDK_CONNECTOR* connector, NDK_FN_DISCONNECT_EVENT_CALLBACK disconnect,
                         PVOID disconnect_context, NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    return CompleteConnectAs(Fn::kCompleteConnect, Callback::kDisconnect, connector,
                             reinterpret_cast<void*>(disconnect), disconnect_context, done, context);
}
NTSTATUS CompleteConnectEx(NDK_CONNECTOR* connector, NDK_FN_DISCONNECT_EVENT_CALLBACK_EX disconnect,
                           PVOID disconnect_context, NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    return CompleteConnectAs(Fn::kCompleteConnectEx, Callback::kDisconnectEx, connector,
                             reinterpret_cast<void*>(disconnect), disconnect_context, done, context);
}
NTSTATUS Accept(NDK_CONNECTOR* connector, NDK_QP* qp, ULONG inbound, ULONG outbound, const PVOID data,
                ULONG data_length, NDK_FN_DISCONNECT_EVENT_CALLBACK disconnect, PVOID disconnect_context,
                NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    return AcceptAs(Fn::kAccept, Callback::kDisconnect, connector, qp, inbound, outbound, data, data_length,
                    reinterpret_cast<void*>(disconnect), disconnect_context, done, context);
}
NTSTATUS AcceptEx(NDK_CONNECTOR* connector, NDK_QP* qp, ULONG inbound, ULONG outbound, const PVOID data,
                  ULONG data_length, NDK_FN_DISCONNECT_EVENT_CALLBACK_EX disconnect, PVOID disconnect_context,
                  NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    return AcceptAs(Fn::kAcceptEx, Callback::kDisconnectEx, connector, qp, inbound, outbound, data, data_length,
                    reinterpret_cast<void*>(disconnect), disconnect_context, done, context);
}
NTSTATUS Reject(NDK_CONNECTOR* connector, const PVOID data, ULONG data_length) {
    RemoteSide* side = Side(connector);
    Writer w;
    w.U64(side->RemoteHandle(connector));
    WriteData(w, data, data_length);
    return Request(side, Fn::kReject, w);
}
NTSTATUS GetConnectionData(NDK_CONNECTOR* connector, ULONG* inbound, ULONG* outbound, PVOID data, ULONG* length) {
    RemoteSide* side = Side(connector);
    Writer w;
    w.U64(side->RemoteHandle(connector)).U64(inbound != nullptr).U64(outbound != nullptr).U64(length != nullptr);
    w.U64(length != nullptr ? std::min<ULONG>(*length, 4096) : 0).U64(data != nullptr);  // private data is smaller
    Answer answer(side->Call(Fn::kGetConnectionData, w));
    const auto in_limit = static_cast<ULONG>(answer.in().U64());
    const auto out_limit = static_cast<ULONG>(answer.in().U64());
    const auto got = static_cast<ULONG>(answer.in().U64());
    std::vector<uint8_t> bytes = answer.in().Bytes();
    if (inbound != nullptr) *inbound = in_limit;
    if (outbound != nullptr) *outbound = out_limit;
    if (data != nullptr && length != nullptr) CopyOut(data, bytes, *length);
    if (length != nullptr) *length = got;
    return answer.status();
}
NTSTATUS AddressOf(Fn fn, const void* object, PSOCKADDR address, ULONG* length) {
    RemoteSide* side = Side(object);
    Writer w;
    w.U64(side->RemoteHandle(object)).U64(address != nullptr).U64(length != nullptr);
    w.U64(length != nullptr ? std::min<ULONG>(*length, 128) : 0);
    Answer answer(side->Call(fn, w));
    const auto got = static_cast<ULONG>(answer.in().U64());
    std::vector<uint8_t> bytes = answer.in().Bytes();
    if (address != nullptr && length != nullptr) CopyOut(address, bytes, *length);
    if (length != nullptr) *length = got;
    return answer.status();
}
NTSTATUS ConnectorLocalAddress(NDK_CONNECTOR* connector, PSOCKADDR address, ULONG* length) {
    return AddressOf(Fn::kConnectorLocalAddress, connector, address, length);
}
NTSTATUS ConnectorPeerAddress(NDK_CONNECTOR* connector, PSOCKADDR address, ULONG* length) {
    return AddressOf(Fn::kConnectorPeerAddress, connector, address, length);
}
NTSTATUS Disconnect(NDK_CONNECTOR* connector, NDK_FN_REQUEST_COMPLETION done, PVOID context) {
    RemoteSide* side = Side(connector);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(connector)).U64(id);
    return Request(side, Fn::kDisconnect, w, {id});
}
// ---- listener, shared endpoint ----
NTSTATUS Listen(NDK_LISTENER* listener, const PSOCKADDR address, ULONG length, NDK_FN_REQUEST_COMPLETION done,
                PVOID context) {
    RemoteSide* side = Side(listener);
    const uint64_t id = Cb(side, Callback::kRequest, reinterpret_cast<void*>(done), context);
    Writer w;
    w.U64(side->RemoteHandle(listener));
    WriteAddress(w, address, length);
    w.U64(id);
    return Request(side, Fn::kListen, w, {id});
}
NTSTATUS ListenerLocalAddress(NDK_LISTENER* listener, PSOCKADDR address, ULONG* length) {
    return AddressOf(Fn::kListenerLocalAddress, listener, address, length);
}
VOID ControlConnectEvents(NDK_LISTENER* listener, BOOLEAN pause) {
    RemoteSide* side = Side(listener);
    Writer w;
    w.U64(side->RemoteHandle(listener)).U64(pause);
    side->Call(Fn::kControlConnectEvents, w);
}
NTSTATUS SharedEndpointLocalAddress(NDK_SHARED_ENDPOINT* shared, PSOCKADDR address, ULONG* length) {
    return AddressOf(Fn::kSharedEndpointLocalAddress, shared, address, length);
}

const NDK_ADAPTER_DISPATCH kAdapterDispatch = {
    &NotSupportedExtension, &QueryAdapterInfo, &CreateCq, &CreatePd,  &CreateSharedEndpoint,
    &CreateConnector,       &CreateListener,   &BuildLam, &ReleaseLam};
const NDK_CONNECTOR_DISPATCH kConnectorDispatch = {&Close,
                                                   &NotSupportedExtension,
                                                   &Connect,
                                                   &ConnectWithSharedEndpoint,
                                                   &CompleteConnect,
                                                   &Accept,
                                                   &Reject,
                                                   &GetConnectionData,
                                                   &ConnectorLocalAddress,
                                                   &ConnectorPeerAddress,
                                                   &Disconnect,
                                                   &CompleteConnectEx,
                                                   &AcceptEx};
const NDK_CQ_DISPATCH kCqDispatch = {&Close,        &NotSupportedExtension,        &ResizeCq,      &ArmCq,
                                     &GetCqResults, &ControlCqInterruptModeration, &GetCqResultsEx};
const NDK_LISTENER_DISPATCH kListenerDispatch = {&Close, &NotSupportedExtension, &Listen, &ListenerLocalAddress,
                                                 &ControlConnectEvents};
const NDK_MR_DISPATCH kMrDispatch = {&Close,           &NotSupportedExtension,    &RegisterMr,
                                     &DeregisterMr,    &InitializeFastRegisterMr, &RemoteTokenFromMr,
                                     &LocalTokenFromMr};
const NDK_MW_DISPATCH kMwDispatch = {&Close, &NotSupportedExtension, &RemoteTokenFromMw};
const NDK_PD_DISPATCH kPdDispatch = {&Close,    &NotSupportedExtension, &CreateMr,          &CreateMw, &CreateSrq,
                                     &CreateQp, &CreateQpWithSrq,       &GetPrivilegedToken};
const NDK_QP_DISPATCH kQpDispatch = {
    &Close, &NotSupportedExtension, &Flush, &Send, &Receive, &Bind, &FastRegister, &Invalidate, &Read,
    &Write, &SendAndInvalidate};
const NDK_SHARED_ENDPOINT_DISPATCH kSharedEndpointDispatch = {&Close, &NotSupportedExtension,
                                                              &SharedEndpointLocalAddress};
const NDK_SRQ_DISPATCH kSrqDispatch = {&Close, &NotSupportedExtension, &ModifySrq, &SrqReceive};

const void* DispatchFor(NDK_OBJECT_TYPE type) {
    switch (type) {
        case NdkObjectTypeAdapter:
            return &kAdapterDispatch;
        case NdkObjectTypePd:
            return &kPdDispatch;
        case NdkObjectTypeCq:
            return &kCqDispatch;
        case NdkObjectTypeMr:
            return &kMrDispatch;
        case NdkObjectTypeMw:
            return &kMwDispatch;
        case NdkObjectTypeSrq:
            return &kSrqDispatch;
        case NdkObjectTypeConnector:
            return &kConnectorDispatch;
        case NdkObjectTypeListener:
            return &kListenerDispatch;
        case NdkObjectTypeSharedEndpoint:
            return &kSharedEndpointDispatch;
        case NdkObjectTypeQp:
            return &kQpDispatch;
        default:
            return nullptr;
    }
}

bool SendMessage(int fd, Kind kind, Fn fn, uint64_t call, const Writer& body) {
    std::vector<uint8_t> message(sizeof(Header));
    Header header{kind, fn, call};
    std::memcpy(message.data(), &header, sizeof(header));
    message.insert(message.end(), body.bytes().begin(), body.bytes().end());
    return ::send(fd, message.data(), message.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(message.size());
}

}  // namespace

bool RemoteSideRequested() {
    const char* value = std::getenv("SOFTNDK_TEST_REMOTE_SIDE");
    return value != nullptr && value[0] == '1';
}

// ---- SharedArena ----
// ndk_remote_side must map the arena at our address, in an address space laid out by its own ASLR. An address the
// kernel picked here can be one of its libraries or mmaps there (one run of the suite in about three under load).
// So the arena lies where neither process maps anything unasked: above ASan's shadow (which ends below
// 0x100080000000) and below the PIE binaries (0x55...), the heap behind them and mmap's top-down area (0x7f...).
// Under TSan that range is its metadata, and only the kernel's choice is allowed; TSan does not run these suites.
constexpr uintptr_t kArenaRegion = uintptr_t{0x3000} << 32;
constexpr int kArenaSlots = 16;  // an arena of an earlier test may still be mapped

SharedArena::SharedArena() {
    fd_ = memfd_create("softndk-arena", 0);  // no CLOEXEC: ndk_remote_side inherits it
    if (fd_ < 0 || ftruncate(fd_, kBytes) != 0) return;
    void* base = MAP_FAILED;
#if !defined(__SANITIZE_THREAD__)
    for (int slot = 0; slot < kArenaSlots && base == MAP_FAILED; ++slot) {
        void* want = reinterpret_cast<void*>(kArenaRegion + slot * kBytes);
        base = mmap(want, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd_, 0);
        if (base != MAP_FAILED && base != want) {  // a kernel without MAP_FIXED_NOREPLACE took it as a hint
            munmap(base, kBytes);
            base = MAP_FAILED;
        }
    }
#endif
    if (base == MAP_FAILED) base = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (base != MAP_FAILED) base_ = static_cast<uint8_t*>(base);
}
SharedArena::~SharedArena() {
    if (base_ != nullptr) munmap(base_, kBytes);
    if (fd_ >= 0) ::close(fd_);
}
uint8_t* SharedArena::Allocate(size_t bytes) {
    std::lock_guard lock(mutex_);
    const size_t rounded = (bytes + PAGE_SIZE - 1) & ~(size_t{PAGE_SIZE} - 1);
    if (base_ == nullptr || rounded > kBytes - used_) return nullptr;
    uint8_t* out = base_ + used_;
    used_ += rounded;
    return out;
}
bool SharedArena::Contains(const void* address, size_t bytes) const {
    const auto* p = static_cast<const uint8_t*>(address);
    return base_ != nullptr && p >= base_ && bytes <= kBytes && static_cast<size_t>(p - base_) <= kBytes - bytes;
}
SharedArena* SharedArena::Current() {
    std::lock_guard lock(g_current_mutex);
    return g_arena;
}

// ---- RemoteSide ----
RemoteSide* RemoteSide::Of(const void*) {
    std::lock_guard lock(g_current_mutex);
    return g_current;  // one remote side at a time
}

std::unique_ptr<RemoteSide> RemoteSide::Start(const char* binary, const SOFTNDK_ADAPTER_CONFIG& config,
                                              std::string* error) {
    std::unique_ptr<RemoteSide> side(new RemoteSide());
    side->arena_ = std::make_unique<SharedArena>();
    if (!side->arena_->ok()) {
        *error = "no shared arena (memfd_create/mmap failed)";
        return nullptr;
    }
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) != 0) {
        *error = "socketpair failed";
        return nullptr;
    }
    const int buffer = static_cast<int>(2 * remote::kMaxMessage);
    for (int fd : pair) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
    }
    char address[32];
    std::snprintf(address, sizeof(address), "%llx",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(side->arena_->base())));
    std::vector<std::string> arguments{"ndk_remote_side",
                                       "--control-fd",
                                       std::to_string(pair[1]),
                                       "--arena-fd",
                                       std::to_string(side->arena_->fd()),
                                       "--arena-address",
                                       address,
                                       "--arena-bytes",
                                       std::to_string(SharedArena::kBytes)};
    std::vector<char*> argv;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    side->pid_ = fork();
    if (side->pid_ < 0) {
        *error = "fork failed";
        return nullptr;
    }
    if (side->pid_ == 0) {
        ::close(pair[0]);
        execv(binary, argv.data());
        _exit(127);
    }
    ::close(pair[1]);
    side->control_ = pair[0];
    // The hello: 0 when the arena is mapped at our address there.
    pollfd ready{side->control_, POLLIN, 0};
    std::vector<uint8_t> hello(remote::kMaxMessage);
    if (::poll(&ready, 1, 20000) != 1 || ::recv(side->control_, hello.data(), hello.size(), 0) <
                                             static_cast<ssize_t>(sizeof(Header) + sizeof(uint64_t))) {
        *error = "ndk_remote_side did not start";
        return nullptr;
    }
    uint64_t mapped = 1;
    std::memcpy(&mapped, hello.data() + sizeof(Header), sizeof(mapped));
    if (mapped != 0) {
        *error = "ndk_remote_side could not map the shared arena at this process's address";
        return nullptr;
    }
    RemoteSide* raw = side.get();
    side->reader_ = std::thread([raw] { raw->ReadLoop(); });
    side->dispatcher_ = std::thread([raw] { raw->EventLoop(); });
    {
        std::lock_guard lock(side->mutex_);
        side->dispatcher_id_ = side->dispatcher_.get_id();
    }
    {
        std::lock_guard lock(g_current_mutex);
        g_current = raw;
        g_arena = raw->arena_.get();
    }
    g_shared_allocator = [](size_t bytes) -> uint8_t* {
        SharedArena* arena = SharedArena::Current();
        return arena != nullptr ? arena->Allocate(bytes) : nullptr;
    };
    Writer w;
    w.Bytes(&config, sizeof(config));
    // A fault rule names its function by a pointer into this process: the names travel as text.
    const ULONG rules = std::min<ULONG>(config.FaultRuleCount, SOFTNDK_MAX_FAULT_RULES);
    w.U64(rules);
    for (ULONG i = 0; i < rules; ++i) {
        const char* name = config.FaultRules[i].FunctionName;
        w.Bytes(name, name != nullptr ? std::strlen(name) : 0);
    }
    Answer answer(side->Call(Fn::kOpenAdapter, w));
    side->remote_adapter_ = answer.in().U64();
    if (answer.status() != STATUS_SUCCESS || side->remote_adapter_ == 0) {
        *error = "the remote adapter did not open";
        return nullptr;
    }
    side->adapter_ = reinterpret_cast<NDK_ADAPTER*>(side->ProxyFor(side->remote_adapter_, NdkObjectTypeAdapter));
    return side;
}

RemoteSide::~RemoteSide() {
    if (remote_adapter_ != 0)
        Call(Fn::kCloseAdapter, Writer());
    else if (control_ >= 0)
        ::shutdown(control_, SHUT_RDWR);  // it never opened: the child ends at once
    if (pid_ > 0) {
        bool reaped = false;
        for (int waited = 0; waited < 10000 && !reaped; waited += 5) {
            int status = 0;
            reaped = waitpid(pid_, &status, WNOHANG) == pid_;
            if (!reaped) usleep(5000);
            if (reaped && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
                std::fprintf(stderr, "remote side: ndk_remote_side ended with status %d\n", status);
        }
        if (!reaped) {
            std::fprintf(stderr, "remote side: ndk_remote_side did not exit; killed\n");
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    if (control_ >= 0) ::shutdown(control_, SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    events_ready_.notify_all();
    events_done_changed_.notify_all();
    if (dispatcher_.joinable()) dispatcher_.join();
    if (control_ >= 0) ::close(control_);
    std::lock_guard lock(g_current_mutex);
    if (g_current == this) {
        g_shared_allocator = nullptr;
        g_current = nullptr;
        g_arena = nullptr;
    }
}

bool RemoteSide::Owns(const void* handle) const {
    std::lock_guard lock(mutex_);
    return proxies_.count(handle) != 0;
}

uint64_t RemoteSide::RemoteHandle(const void* handle) const {
    if (handle == nullptr) return 0;
    std::lock_guard lock(mutex_);
    if (proxies_.count(handle) == 0) return kForeign;
    const Proxy* proxy = static_cast<const Proxy*>(handle);
    auto found = by_remote_.find(proxy->remote);
    return found != by_remote_.end() && found->second == proxy ? proxy->remote : kForeign;  // closed: foreign
}

NDK_OBJECT_HEADER* RemoteSide::ProxyFor(uint64_t remote, NDK_OBJECT_TYPE type) {
    std::lock_guard lock(mutex_);
    auto found = by_remote_.find(remote);
    // The remote provider reuses addresses: a handle of another type is a new object at a freed one's address.
    if (found != by_remote_.end() && found->second->Header.ObjectType == type) return &found->second->Header;
    auto proxy = std::make_unique<Proxy>();
    proxy->Header.Version = NDK_VERSION{NDK_VERSION_MAJOR, NDK_VERSION_1_2_MINOR};
    proxy->Header.ObjectType = type;
    proxy->Dispatch = DispatchFor(type);
    proxy->remote = remote;
    proxy->side = this;
    proxy->fast_pages = 0;
    Proxy* raw = proxy.get();
    all_proxies_.push_back(std::move(proxy));
    by_remote_[remote] = raw;
    proxies_.insert(raw);
    return &raw->Header;
}

void RemoteSide::Forget(const void* handle) {
    std::lock_guard lock(mutex_);
    if (proxies_.count(handle) == 0) return;
    const Proxy* proxy = static_cast<const Proxy*>(handle);
    auto found = by_remote_.find(proxy->remote);
    if (found != by_remote_.end() && found->second == proxy) by_remote_.erase(found);  // not a newer object's
}

uint64_t RemoteSide::Register(CallbackEntry entry) {
    if (entry.function == nullptr) return 0;
    std::lock_guard lock(mutex_);
    const uint64_t id = next_callback_++;
    callbacks_[id] = std::move(entry);
    return id;
}

void RemoteSide::Settle(NTSTATUS returned, std::initializer_list<uint64_t> one_shot) {
    if (returned == STATUS_PENDING) return;
    std::lock_guard lock(mutex_);
    for (uint64_t id : one_shot) callbacks_.erase(id);
}

std::vector<uint8_t> RemoteSide::Call(Fn fn, const Writer& body) {
    uint64_t id = 0;
    {
        std::lock_guard lock(mutex_);
        id = next_call_++;
    }
    Writer broken;
    broken.U64(static_cast<uint32_t>(STATUS_INTERNAL_ERROR));
    if (!SendMessage(control_, Kind::kCall, fn, id, body)) return broken.bytes();
    std::unique_lock lock(mutex_);
    const bool answered =
        replied_.wait_for(lock, std::chrono::seconds(30), [&] { return broken_ || replies_.count(id) != 0; });
    auto found = replies_.find(id);
    if (!answered || found == replies_.end()) {
        std::fprintf(stderr, "remote side: no answer to call %u\n", static_cast<unsigned>(fn));
        return broken.bytes();
    }
    std::vector<uint8_t> reply = std::move(found->second.body);
    const uint64_t events_before = found->second.events_before;
    replies_.erase(found);
    // The remote provider called back before it returned: those callbacks run before this call returns, as they
    // would in one process (LIFE-08: no callback after a close returned). Not on the event thread itself.
    if (std::this_thread::get_id() != dispatcher_id_)
        events_done_changed_.wait_for(lock, std::chrono::seconds(30),
                                      [&] { return stopping_ || events_done_ >= events_before; });
    return reply;
}

void RemoteSide::ReadLoop() {
    std::vector<uint8_t> message(remote::kMaxMessage);
    while (true) {
        const ssize_t got = ::recv(control_, message.data(), message.size(), MSG_TRUNC);
        if (got < static_cast<ssize_t>(sizeof(Header))) break;
        if (static_cast<size_t>(got) > message.size()) {  // cut short: the link can no longer be trusted
            std::fprintf(stderr, "remote side: a message of %zd bytes was cut short\n", got);
            break;
        }
        Header header;
        std::memcpy(&header, message.data(), sizeof(header));
        std::vector<uint8_t> body(message.begin() + sizeof(Header), message.begin() + got);
        std::lock_guard lock(mutex_);
        if (header.kind == Kind::kReply) {
            replies_[header.call] = ReplyBody{std::move(body), events_received_};
            replied_.notify_all();
        } else if (header.kind == Kind::kEvent) {
            ++events_received_;
            events_.push_back(std::move(body));
            events_ready_.notify_one();
        }
    }
    std::lock_guard lock(mutex_);
    broken_ = true;
    replied_.notify_all();
}

void RemoteSide::EventLoop() {
    while (true) {
        std::vector<uint8_t> event;
        {
            std::unique_lock lock(mutex_);
            events_ready_.wait(lock, [&] { return stopping_ || !events_.empty(); });
            if (events_.empty()) return;
            event = std::move(events_.front());
            events_.pop_front();
        }
        Reader in(event.data(), event.size());
        const uint64_t id = in.U64();
        const auto status = static_cast<NTSTATUS>(static_cast<uint32_t>(in.U64()));
        const uint64_t handle = in.U64();
        if (in.ok()) Fire(id, status, handle, in);
        std::lock_guard lock(mutex_);
        ++events_done_;
        events_done_changed_.notify_all();
    }
}

void RemoteSide::Fire(uint64_t id, NTSTATUS status, uint64_t handle, Reader& rest) {
    CallbackEntry entry;
    {
        std::lock_guard lock(mutex_);
        auto found = callbacks_.find(id);
        if (found == callbacks_.end()) return;
        entry = found->second;
        if (entry.kind == Callback::kCreate || entry.kind == Callback::kRequest || entry.kind == Callback::kClose)
            callbacks_.erase(found);
    }
    switch (entry.kind) {
        case Callback::kCreate:
            reinterpret_cast<NDK_FN_CREATE_COMPLETION>(entry.function)(
                entry.context, status, handle != 0 ? ProxyFor(handle, entry.created_type) : nullptr);
            break;
        case Callback::kRequest:
            if (entry.outputs) entry.outputs(rest);
            reinterpret_cast<NDK_FN_REQUEST_COMPLETION>(entry.function)(entry.context, status);
            break;
        case Callback::kClose:
            Forget(entry.forget);
            reinterpret_cast<NDK_FN_CLOSE_COMPLETION>(entry.function)(entry.context);
            break;
        case Callback::kCqNotify:
        case Callback::kSrqNotify:
            reinterpret_cast<NDK_FN_CQ_NOTIFICATION_CALLBACK>(entry.function)(entry.context, status);
            break;
        case Callback::kConnect:
            reinterpret_cast<NDK_FN_CONNECT_EVENT_CALLBACK>(entry.function)(
                entry.context, reinterpret_cast<NDK_CONNECTOR*>(ProxyFor(handle, NdkObjectTypeConnector)));
            break;
        case Callback::kDisconnect:
            reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK>(entry.function)(entry.context);
            break;
        case Callback::kDisconnectEx:
            reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK_EX>(entry.function)(entry.context,
                                                                                  static_cast<ULONG>(status));
            break;
    }
}

}  // namespace softndk::test
