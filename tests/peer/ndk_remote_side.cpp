// ndk_remote_side: side B of a connected pair in its own process (issue 7 §5, third configuration). It opens
// its own adapter with the test's configuration and runs every NDK call the test forwards (support/remote_side.h)
// on it, one at a time, answering each; the callbacks its provider makes go back as events. Memory is the test's
// shared arena, mapped here at the same address. A plain consumer of the public API.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <softndk/softndk.h>

#include "support/remote_side_protocol.h"

namespace {

using softndk::test::remote::Callback;
using softndk::test::remote::Fn;
using softndk::test::remote::Header;
using softndk::test::remote::Kind;
using softndk::test::remote::Reader;
using softndk::test::remote::Writer;

constexpr uint64_t kForeign = 1;  // the test passed one of its own objects: a handle this provider never made

struct ForeignObject {
    NDK_OBJECT_HEADER Header{};
    const void* Dispatch = nullptr;
};
ForeignObject g_foreign;

class Server;

// The context of one callback the provider may make: which test-side callback it stands for.
struct Stub {
    Server* server;
    uint64_t id;
    // BuildLAM's outputs, sent with its completion event.
    std::vector<uint8_t>* lam = nullptr;
    ULONG* lam_size = nullptr;
    ULONG* fbo = nullptr;
};

class Server {
public:
    explicit Server(int control) : control_(control) {}

    void Send(Kind kind, Fn fn, uint64_t call, const Writer& body) {
        std::vector<uint8_t> message(sizeof(Header));
        Header header{kind, fn, call};
        std::memcpy(message.data(), &header, sizeof(header));
        message.insert(message.end(), body.bytes().begin(), body.bytes().end());
        std::lock_guard lock(send_mutex_);
        if (::send(control_, message.data(), message.size(), MSG_NOSIGNAL) < 0) std::perror("ndk_remote_side: send");
    }
    void Event(const Stub* stub, NTSTATUS status, uint64_t handle) {
        Writer body;
        body.U64(stub->id).U64(static_cast<uint32_t>(status)).U64(handle);
        if (stub->lam != nullptr) {
            body.Bytes(stub->lam->data(), std::min<size_t>(*stub->lam_size, stub->lam->size()));
            body.U64(*stub->lam_size).U64(*stub->fbo);
        }
        Send(Kind::kEvent, Fn::kClose, 0, body);
    }
    Stub* NewStub(uint64_t id) {
        if (id == 0) return nullptr;
        std::lock_guard lock(stubs_mutex_);
        stubs_.push_back(std::make_unique<Stub>(Stub{this, id}));
        return stubs_.back().get();
    }

    int Run();

private:
    void Dispatch(Fn fn, uint64_t call, Reader& in);
    MDL* BuildMdlChain(Reader& in, NTSTATUS* status);

    int control_;
    std::mutex send_mutex_;
    std::mutex stubs_mutex_;
    std::vector<std::unique_ptr<Stub>> stubs_;  // freed at exit: a late callback may still name one
    std::vector<MDL*> mdls_;                    // unlocked and freed at exit, after the adapter closed
    std::map<uint64_t, std::unique_ptr<std::vector<uint8_t>>> lams_;  // by the test's LAM pointer
    std::map<uint64_t, std::unique_ptr<ULONG[]>> lam_outputs_;        // size and FBO of a pending BuildLAM
    NDK_ADAPTER* adapter_ = nullptr;
    std::vector<std::string> fault_names_;  // the adapter's fault rules point into these
};

VOID OnCreate(PVOID context, NTSTATUS status, NDK_OBJECT_HEADER* object) {
    auto* stub = static_cast<Stub*>(context);
    stub->server->Event(stub, status, reinterpret_cast<uint64_t>(object));
}
VOID OnRequest(PVOID context, NTSTATUS status) {
    auto* stub = static_cast<Stub*>(context);
    stub->server->Event(stub, status, 0);
}
VOID OnClose(PVOID context) {
    auto* stub = static_cast<Stub*>(context);
    stub->server->Event(stub, STATUS_SUCCESS, 0);
}
VOID OnNotify(PVOID context, NTSTATUS status) {
    auto* stub = static_cast<Stub*>(context);
    stub->server->Event(stub, status, 0);
}
VOID OnConnect(PVOID context, NDK_CONNECTOR* connector) {
    auto* stub = static_cast<Stub*>(context);
    stub->server->Event(stub, STATUS_SUCCESS, reinterpret_cast<uint64_t>(connector));
}
VOID OnDisconnect(PVOID context) {
    auto* stub = static_cast<Stub*>(context);
    stub->server->Event(stub, STATUS_SUCCESS, 0);
}
VOID OnDisconnectEx(PVOID context, ULONG reason) {
    auto* stub = static_cast<Stub*>(context);
    stub->server->Event(stub, static_cast<NTSTATUS>(reason), 0);
}

template <class T>
T* Handle(uint64_t value) {
    if (value == 0) return nullptr;
    if (value == kForeign) return reinterpret_cast<T*>(&g_foreign);
    return reinterpret_cast<T*>(value);
}

// An SGE list as the test sent it: at least `count` entries (zeroed past what was sent, at most 4096), or NULL.
const NDK_SGE* ReadSges(Reader& in, std::vector<NDK_SGE>* storage, ULONG* count) {
    bool null = false;
    std::vector<uint8_t> bytes = in.Bytes(&null);
    *count = static_cast<ULONG>(in.U64());
    if (null) return nullptr;
    const size_t sent = bytes.size() / sizeof(NDK_SGE);
    storage->assign(std::max<size_t>(sent, std::min<size_t>(*count, 4096)) + 1, NDK_SGE{});
    if (sent != 0) std::memcpy(storage->data(), bytes.data(), sent * sizeof(NDK_SGE));
    return storage->data();
}

// A callback argument: the function when the test gave one (its id), else NULL.
template <class Fn>
Fn Pick(const Stub* stub, Fn function) {
    return stub != nullptr ? function : nullptr;
}

MDL* Server::BuildMdlChain(Reader& in, NTSTATUS* status) {
    const uint64_t count = in.U64();
    MDL* head = nullptr;
    MDL** tail = &head;
    *status = STATUS_SUCCESS;
    for (uint64_t i = 0; i < count && in.ok(); ++i) {
        const uint64_t address = in.U64();
        const uint64_t bytes = in.U64();
        const uint64_t flags = in.U64();  // the test's MDL flags: locked, and for what
        MDL* mdl = IoAllocateMdl(reinterpret_cast<PVOID>(address), static_cast<ULONG>(bytes), FALSE, FALSE, nullptr);
        if (mdl == nullptr) {
            *status = STATUS_INSUFFICIENT_RESOURCES;
            break;
        }
        if (flags & MDL_PAGES_LOCKED) {
            *status =
                SoftNdkProbeAndLockPages(mdl, KernelMode, (flags & MDL_WRITE_OPERATION) ? IoWriteAccess : IoReadAccess);
            if (!NT_SUCCESS(*status)) {
                IoFreeMdl(mdl);
                break;
            }
        }
        mdls_.push_back(mdl);
        *tail = mdl;
        tail = &mdl->Next;
    }
    return head;
}

// Every call runs here, on the one thread that reads the control socket; none of them waits (CB-12).
void Server::Dispatch(Fn fn, uint64_t call, Reader& in) {
    Writer out;
    auto status_reply = [&](NTSTATUS status) { out.U64(static_cast<uint32_t>(status)); };
    switch (fn) {
        case Fn::kOpenAdapter: {
            std::vector<uint8_t> bytes = in.Bytes();
            SOFTNDK_ADAPTER_CONFIG config;
            SoftNdkInitAdapterConfig(&config);
            if (bytes.size() == sizeof(config)) std::memcpy(&config, bytes.data(), sizeof(config));
            // The fault rules' function names, as text (their pointers were the test's).
            const uint64_t rules = in.U64();
            fault_names_.clear();
            for (uint64_t i = 0; i < rules && i < SOFTNDK_MAX_FAULT_RULES; ++i) {
                bool null = false;
                std::vector<uint8_t> name = in.Bytes(&null);
                fault_names_.push_back(null ? std::string() : std::string(name.begin(), name.end()));
            }
            config.FaultRuleCount = static_cast<ULONG>(fault_names_.size());
            for (size_t i = 0; i < fault_names_.size(); ++i)
                config.FaultRules[i].FunctionName = fault_names_[i].empty() ? nullptr : fault_names_[i].c_str();
            const NTSTATUS status = SoftNdkOpenAdapter(&config, &adapter_);
            status_reply(status);
            out.U64(reinterpret_cast<uint64_t>(adapter_));
            break;
        }
        case Fn::kCloseAdapter: {
            status_reply(adapter_ != nullptr ? SoftNdkCloseAdapter(adapter_) : STATUS_SUCCESS);
            adapter_ = nullptr;
            break;
        }
        case Fn::kQueryAdapterInfo: {
            auto* adapter = Handle<NDK_ADAPTER>(in.U64());
            ULONG size = static_cast<ULONG>(in.U64());
            std::vector<uint8_t> info(size);
            const NTSTATUS status = adapter->Dispatch->NdkQueryAdapterInfo(
                adapter, reinterpret_cast<NDK_ADAPTER_INFO*>(info.data()), &size);
            status_reply(status);
            out.U64(size).Bytes(info.data(), info.size() < size ? info.size() : size);
            break;
        }
        case Fn::kCreateCq: {
            auto* adapter = Handle<NDK_ADAPTER>(in.U64());
            const ULONG depth = static_cast<ULONG>(in.U64());
            Stub* notify = NewStub(in.U64());
            Stub* created = NewStub(in.U64());
            NDK_CQ* cq = nullptr;
            const bool want = in.U64() != 0;  // the consumer's out pointer was not NULL
            status_reply(adapter->Dispatch->NdkCreateCq(adapter, depth, Pick(notify, &OnNotify), notify, nullptr,
                                                        Pick(created, &OnCreate), created, want ? &cq : nullptr));
            out.U64(reinterpret_cast<uint64_t>(cq));
            break;
        }
        case Fn::kCreatePd: {
            auto* adapter = Handle<NDK_ADAPTER>(in.U64());
            Stub* created = NewStub(in.U64());
            NDK_PD* pd = nullptr;
            const bool want = in.U64() != 0;  // the consumer's out pointer was not NULL
            status_reply(
                adapter->Dispatch->NdkCreatePd(adapter, Pick(created, &OnCreate), created, want ? &pd : nullptr));
            out.U64(reinterpret_cast<uint64_t>(pd));
            break;
        }
        case Fn::kCreateSharedEndpoint: {
            auto* adapter = Handle<NDK_ADAPTER>(in.U64());
            std::vector<uint8_t> address = in.Bytes();
            const ULONG length = static_cast<ULONG>(in.U64());
            Stub* created = NewStub(in.U64());
            NDK_SHARED_ENDPOINT* shared = nullptr;
            const bool want = in.U64() != 0;  // the consumer's out pointer was not NULL
            status_reply(adapter->Dispatch->NdkCreateSharedEndpoint(
                adapter, reinterpret_cast<PSOCKADDR>(address.empty() ? nullptr : address.data()), length,
                Pick(created, &OnCreate), created, want ? &shared : nullptr));
            out.U64(reinterpret_cast<uint64_t>(shared));
            break;
        }
        case Fn::kCreateConnector: {
            auto* adapter = Handle<NDK_ADAPTER>(in.U64());
            Stub* created = NewStub(in.U64());
            NDK_CONNECTOR* connector = nullptr;
            const bool want = in.U64() != 0;  // the consumer's out pointer was not NULL
            status_reply(adapter->Dispatch->NdkCreateConnector(adapter, Pick(created, &OnCreate), created,
                                                               want ? &connector : nullptr));
            out.U64(reinterpret_cast<uint64_t>(connector));
            break;
        }
        case Fn::kCreateListener: {
            auto* adapter = Handle<NDK_ADAPTER>(in.U64());
            Stub* event = NewStub(in.U64());
            Stub* created = NewStub(in.U64());
            NDK_LISTENER* listener = nullptr;
            const bool want = in.U64() != 0;  // the consumer's out pointer was not NULL
            status_reply(adapter->Dispatch->NdkCreateListener(adapter, Pick(event, &OnConnect), event,
                                                              Pick(created, &OnCreate), created,
                                                              want ? &listener : nullptr));
            out.U64(reinterpret_cast<uint64_t>(listener));
            break;
        }
        case Fn::kBuildLam: {
            auto* adapter = Handle<NDK_ADAPTER>(in.U64());
            NTSTATUS chain_status = STATUS_SUCCESS;
            MDL* mdl = BuildMdlChain(in, &chain_status);
            const SIZE_T length = in.U64();
            const uint64_t id = in.U64();
            const uint64_t test_lam = in.U64();
            auto outputs = std::make_unique<ULONG[]>(2);
            outputs[0] = static_cast<ULONG>(in.U64());  // the LAM buffer's size
            auto storage = std::make_unique<std::vector<uint8_t>>(outputs[0]);
            Stub* done = NewStub(id);
            if (done != nullptr) {
                done->lam = storage.get();
                done->lam_size = &outputs[0];
                done->fbo = &outputs[1];
            }
            NTSTATUS status = chain_status;
            if (NT_SUCCESS(chain_status))
                status = adapter->Dispatch->NdkBuildLAM(
                    adapter, mdl, length, Pick(done, &OnRequest), done,
                    test_lam != 0 ? reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(storage->data()) : nullptr,
                    &outputs[0], &outputs[1]);
            status_reply(status);
            out.Bytes(storage->data(), std::min<size_t>(outputs[0], storage->size()));
            out.U64(outputs[0]).U64(outputs[1]);
            lams_[test_lam] = std::move(storage);
            lam_outputs_[test_lam] = std::move(outputs);
            break;
        }
        case Fn::kReleaseLam: {
            auto* adapter = Handle<NDK_ADAPTER>(in.U64());
            const uint64_t test_lam = in.U64();
            auto found = lams_.find(test_lam);
            if (found != lams_.end()) {
                adapter->Dispatch->NdkReleaseLAM(adapter,
                                                 reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(found->second->data()));
                lams_.erase(found);
                lam_outputs_.erase(test_lam);
            }
            status_reply(STATUS_SUCCESS);
            break;
        }
        case Fn::kClose: {
            auto* object = Handle<NDK_OBJECT_HEADER>(in.U64());
            Stub* done = NewStub(in.U64());
            auto close = *reinterpret_cast<NDK_FN_CLOSE_OBJECT const*>(reinterpret_cast<NDK_PD*>(object)->Dispatch);
            status_reply(close(object, Pick(done, &OnClose), done));
            break;
        }
        case Fn::kResizeCq: {
            auto* cq = Handle<NDK_CQ>(in.U64());
            const ULONG depth = static_cast<ULONG>(in.U64());
            Stub* done = NewStub(in.U64());
            status_reply(cq->Dispatch->NdkResizeCq(cq, depth, Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kArmCq: {
            auto* cq = Handle<NDK_CQ>(in.U64());
            cq->Dispatch->NdkArmCq(cq, static_cast<ULONG>(in.U64()));
            status_reply(STATUS_SUCCESS);
            break;
        }
        case Fn::kGetCqResultsEx: {
            auto* cq = Handle<NDK_CQ>(in.U64());
            const ULONG count = static_cast<ULONG>(in.U64());
            std::vector<NDK_RESULT_EX> results(count);
            const ULONG got = cq->Dispatch->NdkGetCqResultsEx(cq, count ? results.data() : nullptr, count);
            status_reply(STATUS_SUCCESS);
            out.U64(got).Bytes(results.data(), sizeof(NDK_RESULT_EX) * (got <= count ? got : 0));
            break;
        }
        case Fn::kCreateMr: {
            auto* pd = Handle<NDK_PD>(in.U64());
            const BOOLEAN fast = in.U64() != 0;
            Stub* created = NewStub(in.U64());
            NDK_MR* mr = nullptr;
            const bool want = in.U64() != 0;  // the consumer's out pointer was not NULL
            status_reply(pd->Dispatch->NdkCreateMr(pd, fast, Pick(created, &OnCreate), created, want ? &mr : nullptr));
            out.U64(reinterpret_cast<uint64_t>(mr));
            break;
        }
        case Fn::kCreateMw: {
            auto* pd = Handle<NDK_PD>(in.U64());
            Stub* created = NewStub(in.U64());
            NDK_MW* mw = nullptr;
            const bool want = in.U64() != 0;  // the consumer's out pointer was not NULL
            status_reply(pd->Dispatch->NdkCreateMw(pd, Pick(created, &OnCreate), created, want ? &mw : nullptr));
            out.U64(reinterpret_cast<uint64_t>(mw));
            break;
        }
        case Fn::kCreateSrq: {
            auto* pd = Handle<NDK_PD>(in.U64());
            const ULONG depth = static_cast<ULONG>(in.U64());
            const ULONG sge = static_cast<ULONG>(in.U64());
            const ULONG threshold = static_cast<ULONG>(in.U64());
            Stub* notify = NewStub(in.U64());
            Stub* created = NewStub(in.U64());
            NDK_SRQ* srq = nullptr;
            const bool want = in.U64() != 0;  // the consumer's out pointer was not NULL
            status_reply(pd->Dispatch->NdkCreateSrq(pd, depth, sge, threshold, Pick(notify, &OnNotify), notify, nullptr,
                                                    Pick(created, &OnCreate), created, want ? &srq : nullptr));
            out.U64(reinterpret_cast<uint64_t>(srq));
            break;
        }
        case Fn::kCreateQp:
        case Fn::kCreateQpWithSrq: {
            auto* pd = Handle<NDK_PD>(in.U64());
            auto* receive_cq = Handle<NDK_CQ>(in.U64());
            auto* initiator_cq = Handle<NDK_CQ>(in.U64());
            auto* srq = Handle<NDK_SRQ>(in.U64());
            auto* context = reinterpret_cast<PVOID>(in.U64());
            ULONG value[5];
            for (ULONG& v : value) v = static_cast<ULONG>(in.U64());
            Stub* created = NewStub(in.U64());
            NDK_QP* qp = nullptr;
            const bool want = in.U64() != 0;
            if (fn == Fn::kCreateQp)
                status_reply(pd->Dispatch->NdkCreateQp(pd, receive_cq, initiator_cq, context, value[0], value[1],
                                                       value[2], value[3], value[4], Pick(created, &OnCreate), created,
                                                       want ? &qp : nullptr));
            else
                status_reply(pd->Dispatch->NdkCreateQpWithSrq(pd, receive_cq, initiator_cq, srq, context, value[1],
                                                              value[3], value[4], Pick(created, &OnCreate), created,
                                                              want ? &qp : nullptr));
            out.U64(reinterpret_cast<uint64_t>(qp));
            break;
        }
        case Fn::kGetPrivilegedToken: {
            auto* pd = Handle<NDK_PD>(in.U64());
            UINT32 token = 0;
            pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd, &token);
            status_reply(STATUS_SUCCESS);
            out.U64(token);
            break;
        }
        case Fn::kRegisterMr: {
            auto* mr = Handle<NDK_MR>(in.U64());
            NTSTATUS chain_status = STATUS_SUCCESS;
            MDL* mdl = BuildMdlChain(in, &chain_status);
            const SIZE_T length = in.U64();
            const ULONG flags = static_cast<ULONG>(in.U64());
            Stub* done = NewStub(in.U64());
            status_reply(NT_SUCCESS(chain_status)
                             ? mr->Dispatch->NdkRegisterMr(mr, mdl, length, flags, Pick(done, &OnRequest), done)
                             : chain_status);
            break;
        }
        case Fn::kDeregisterMr: {
            auto* mr = Handle<NDK_MR>(in.U64());
            Stub* done = NewStub(in.U64());
            status_reply(mr->Dispatch->NdkDeregisterMr(mr, Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kInitializeFastRegisterMr: {
            auto* mr = Handle<NDK_MR>(in.U64());
            const ULONG pages = static_cast<ULONG>(in.U64());
            const BOOLEAN remote = in.U64() != 0;
            Stub* done = NewStub(in.U64());
            status_reply(mr->Dispatch->NdkInitializeFastRegisterMr(mr, pages, remote, Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kGetRemoteTokenFromMr:
        case Fn::kGetLocalTokenFromMr: {
            auto* mr = Handle<NDK_MR>(in.U64());
            status_reply(STATUS_SUCCESS);
            out.U64(fn == Fn::kGetRemoteTokenFromMr ? mr->Dispatch->NdkGetRemoteTokenFromMr(mr)
                                                    : mr->Dispatch->NdkGetLocalTokenFromMr(mr));
            break;
        }
        case Fn::kGetRemoteTokenFromMw: {
            auto* mw = Handle<NDK_MW>(in.U64());
            status_reply(STATUS_SUCCESS);
            out.U64(mw->Dispatch->NdkGetRemoteTokenFromMw(mw));
            break;
        }
        case Fn::kModifySrq: {
            auto* srq = Handle<NDK_SRQ>(in.U64());
            const ULONG depth = static_cast<ULONG>(in.U64());
            const ULONG threshold = static_cast<ULONG>(in.U64());
            Stub* done = NewStub(in.U64());
            status_reply(srq->Dispatch->NdkModifySrq(srq, depth, threshold, Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kSrqReceive:
        case Fn::kReceive: {
            const uint64_t handle = in.U64();
            auto* context = reinterpret_cast<PVOID>(in.U64());
            std::vector<NDK_SGE> storage;
            ULONG count = 0;
            const NDK_SGE* sges = ReadSges(in, &storage, &count);
            if (fn == Fn::kReceive) {
                auto* qp = Handle<NDK_QP>(handle);
                status_reply(qp->Dispatch->NdkReceive(qp, context, sges, count));
            } else {
                auto* srq = Handle<NDK_SRQ>(handle);
                status_reply(srq->Dispatch->NdkSrqReceive(srq, context, sges, count));
            }
            break;
        }
        case Fn::kFlush: {
            auto* qp = Handle<NDK_QP>(in.U64());
            qp->Dispatch->NdkFlush(qp);
            status_reply(STATUS_SUCCESS);
            break;
        }
        case Fn::kSend:
        case Fn::kSendAndInvalidate:
        case Fn::kRead:
        case Fn::kWrite: {
            auto* qp = Handle<NDK_QP>(in.U64());
            auto* context = reinterpret_cast<PVOID>(in.U64());
            std::vector<NDK_SGE> storage;
            ULONG count = 0;
            const NDK_SGE* sges = ReadSges(in, &storage, &count);
            const ULONG flags = static_cast<ULONG>(in.U64());
            const uint64_t address = in.U64();
            const UINT32 token = static_cast<UINT32>(in.U64());
            NTSTATUS status = STATUS_INVALID_PARAMETER;
            if (fn == Fn::kSend) status = qp->Dispatch->NdkSend(qp, context, sges, count, flags);
            if (fn == Fn::kSendAndInvalidate)
                status = qp->Dispatch->NdkSendAndInvalidate(qp, context, sges, count, flags, token);
            if (fn == Fn::kRead) status = qp->Dispatch->NdkRead(qp, context, sges, count, address, token, flags);
            if (fn == Fn::kWrite) status = qp->Dispatch->NdkWrite(qp, context, sges, count, address, token, flags);
            status_reply(status);
            break;
        }
        case Fn::kBind: {
            auto* qp = Handle<NDK_QP>(in.U64());
            auto* context = reinterpret_cast<PVOID>(in.U64());
            auto* mr = Handle<NDK_MR>(in.U64());
            auto* mw = Handle<NDK_MW>(in.U64());
            auto* address = reinterpret_cast<PVOID>(in.U64());
            const SIZE_T length = in.U64();
            const ULONG flags = static_cast<ULONG>(in.U64());
            status_reply(qp->Dispatch->NdkBind(qp, context, mr, mw, address, length, flags));
            break;
        }
        case Fn::kFastRegister: {
            auto* qp = Handle<NDK_QP>(in.U64());
            auto* context = reinterpret_cast<PVOID>(in.U64());
            auto* mr = Handle<NDK_MR>(in.U64());
            const ULONG pages = static_cast<ULONG>(in.U64());
            bool null = false;
            std::vector<uint8_t> sent = in.Bytes(&null);
            std::vector<NDK_LOGICAL_ADDRESS> array(
                std::max<size_t>(sent.size() / sizeof(NDK_LOGICAL_ADDRESS), std::min<ULONG>(pages, 4096)) + 1);
            if (!sent.empty())
                std::memcpy(array.data(), sent.data(), sent.size() - sent.size() % sizeof(NDK_LOGICAL_ADDRESS));
            const ULONG fbo = static_cast<ULONG>(in.U64());
            const SIZE_T length = in.U64();
            auto* base = reinterpret_cast<PVOID>(in.U64());
            const ULONG flags = static_cast<ULONG>(in.U64());
            status_reply(qp->Dispatch->NdkFastRegister(qp, context, mr, pages, null ? nullptr : array.data(), fbo,
                                                       length, base, flags));
            break;
        }
        case Fn::kInvalidate: {
            auto* qp = Handle<NDK_QP>(in.U64());
            auto* context = reinterpret_cast<PVOID>(in.U64());
            auto* object = Handle<NDK_OBJECT_HEADER>(in.U64());
            const ULONG flags = static_cast<ULONG>(in.U64());
            status_reply(qp->Dispatch->NdkInvalidate(qp, context, object, flags));
            break;
        }
        case Fn::kConnect:
        case Fn::kConnectWithSharedEndpoint: {
            auto* connector = Handle<NDK_CONNECTOR>(in.U64());
            auto* qp = Handle<NDK_QP>(in.U64());
            auto* shared = Handle<NDK_SHARED_ENDPOINT>(in.U64());
            bool source_null = false, destination_null = false, data_null = false;
            std::vector<uint8_t> source = in.Bytes(&source_null);
            const ULONG source_length = static_cast<ULONG>(in.U64());
            std::vector<uint8_t> destination = in.Bytes(&destination_null);
            const ULONG destination_length = static_cast<ULONG>(in.U64());
            const ULONG inbound = static_cast<ULONG>(in.U64());
            const ULONG outbound = static_cast<ULONG>(in.U64());
            std::vector<uint8_t> data = in.Bytes(&data_null);
            const ULONG data_length = static_cast<ULONG>(in.U64());
            Stub* done = NewStub(in.U64());
            auto* source_address = source_null ? nullptr : reinterpret_cast<PSOCKADDR>(source.data());
            auto* destination_address = destination_null ? nullptr : reinterpret_cast<PSOCKADDR>(destination.data());
            if (fn == Fn::kConnect)
                status_reply(connector->Dispatch->NdkConnect(
                    connector, qp, source_address, source_length, destination_address, destination_length, inbound,
                    outbound, data_null ? nullptr : data.data(), data_length, Pick(done, &OnRequest), done));
            else
                status_reply(connector->Dispatch->NdkConnectWithSharedEndpoint(
                    connector, qp, shared, destination_address, destination_length, inbound, outbound,
                    data_null ? nullptr : data.data(), data_length, Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kCompleteConnect: {
            auto* connector = Handle<NDK_CONNECTOR>(in.U64());
            Stub* disconnect = NewStub(in.U64());
            Stub* done = NewStub(in.U64());
            status_reply(connector->Dispatch->NdkCompleteConnect(connector, Pick(disconnect, &OnDisconnect), disconnect,
                                                                 Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kCompleteConnectEx: {
            auto* connector = Handle<NDK_CONNECTOR>(in.U64());
            Stub* disconnect = NewStub(in.U64());
            Stub* done = NewStub(in.U64());
            status_reply(connector->Dispatch->NdkCompleteConnectEx(connector, Pick(disconnect, &OnDisconnectEx),
                                                                   disconnect, Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kAcceptEx:
        case Fn::kAccept: {
            auto* connector = Handle<NDK_CONNECTOR>(in.U64());
            auto* qp = Handle<NDK_QP>(in.U64());
            const ULONG inbound = static_cast<ULONG>(in.U64());
            const ULONG outbound = static_cast<ULONG>(in.U64());
            bool data_null = false;
            std::vector<uint8_t> data = in.Bytes(&data_null);
            const ULONG data_length = static_cast<ULONG>(in.U64());
            Stub* disconnect = NewStub(in.U64());
            Stub* done = NewStub(in.U64());
            if (fn == Fn::kAccept)
                status_reply(connector->Dispatch->NdkAccept(
                    connector, qp, inbound, outbound, data_null ? nullptr : data.data(), data_length,
                    Pick(disconnect, &OnDisconnect), disconnect, Pick(done, &OnRequest), done));
            else
                status_reply(connector->Dispatch->NdkAcceptEx(
                    connector, qp, inbound, outbound, data_null ? nullptr : data.data(), data_length,
                    Pick(disconnect, &OnDisconnectEx), disconnect, Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kReject: {
            auto* connector = Handle<NDK_CONNECTOR>(in.U64());
            bool data_null = false;
            std::vector<uint8_t> data = in.Bytes(&data_null);
            const ULONG data_length = static_cast<ULONG>(in.U64());
            status_reply(connector->Dispatch->NdkReject(connector, data_null ? nullptr : data.data(), data_length));
            break;
        }
        case Fn::kGetConnectionData: {
            auto* connector = Handle<NDK_CONNECTOR>(in.U64());
            const bool want_inbound = in.U64() != 0, want_outbound = in.U64() != 0;
            const bool want_length = in.U64() != 0;
            ULONG length = static_cast<ULONG>(in.U64());
            const bool want_data = in.U64() != 0;
            std::vector<uint8_t> data(length);
            ULONG inbound = 0, outbound = 0;
            const NTSTATUS status = connector->Dispatch->NdkGetConnectionData(
                connector, want_inbound ? &inbound : nullptr, want_outbound ? &outbound : nullptr,
                want_data ? data.data() : nullptr, want_length ? &length : nullptr);
            status_reply(status);
            out.U64(inbound).U64(outbound).U64(length).Bytes(data.data(), std::min<size_t>(length, data.size()));
            break;
        }
        case Fn::kConnectorLocalAddress:
        case Fn::kConnectorPeerAddress:
        case Fn::kListenerLocalAddress:
        case Fn::kSharedEndpointLocalAddress: {
            const uint64_t handle = in.U64();
            const bool want_address = in.U64() != 0;
            const bool want_length = in.U64() != 0;
            ULONG length = static_cast<ULONG>(in.U64());
            std::vector<uint8_t> address(length);
            auto* where = want_address ? reinterpret_cast<PSOCKADDR>(address.data()) : nullptr;
            ULONG* length_pointer = want_length ? &length : nullptr;
            NTSTATUS status = STATUS_INVALID_PARAMETER;
            if (fn == Fn::kConnectorLocalAddress) {
                auto* connector = Handle<NDK_CONNECTOR>(handle);
                status = connector->Dispatch->NdkGetLocalAddress(connector, where, length_pointer);
            } else if (fn == Fn::kConnectorPeerAddress) {
                auto* connector = Handle<NDK_CONNECTOR>(handle);
                status = connector->Dispatch->NdkGetPeerAddress(connector, where, length_pointer);
            } else if (fn == Fn::kListenerLocalAddress) {
                auto* listener = Handle<NDK_LISTENER>(handle);
                status = listener->Dispatch->NdkGetLocalAddress(listener, where, length_pointer);
            } else {
                auto* shared = Handle<NDK_SHARED_ENDPOINT>(handle);
                status = shared->Dispatch->NdkGetLocalAddress(shared, where, length_pointer);
            }
            status_reply(status);
            out.U64(length).Bytes(address.data(), length <= address.size() ? length : address.size());
            break;
        }
        case Fn::kDisconnect: {
            auto* connector = Handle<NDK_CONNECTOR>(in.U64());
            Stub* done = NewStub(in.U64());
            status_reply(connector->Dispatch->NdkDisconnect(connector, Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kListen: {
            auto* listener = Handle<NDK_LISTENER>(in.U64());
            bool null = false;
            std::vector<uint8_t> address = in.Bytes(&null);
            const ULONG length = static_cast<ULONG>(in.U64());
            Stub* done = NewStub(in.U64());
            status_reply(listener->Dispatch->NdkListen(listener,
                                                       null ? nullptr : reinterpret_cast<PSOCKADDR>(address.data()),
                                                       length, Pick(done, &OnRequest), done));
            break;
        }
        case Fn::kControlConnectEvents: {
            auto* listener = Handle<NDK_LISTENER>(in.U64());
            listener->Dispatch->NdkControlConnectEvents(listener, in.U64() != 0);
            status_reply(STATUS_SUCCESS);
            break;
        }
    }
    if (!in.ok()) {
        Writer refused;
        refused.U64(static_cast<uint32_t>(STATUS_INVALID_PARAMETER));
        Send(Kind::kReply, fn, call, refused);
        return;
    }
    Send(Kind::kReply, fn, call, out);
}

int Server::Run() {
    std::vector<uint8_t> message(softndk::test::remote::kMaxMessage);
    while (true) {
        const ssize_t got = ::recv(control_, message.data(), message.size(), MSG_TRUNC);
        if (got <= 0) break;  // the test has gone: end
        if (static_cast<size_t>(got) < sizeof(Header)) continue;
        Header header;
        std::memcpy(&header, message.data(), sizeof(header));
        if (header.kind != Kind::kCall) continue;
        const bool cut_short = static_cast<size_t>(got) > message.size();
        Reader in(message.data() + sizeof(Header), std::min(static_cast<size_t>(got), message.size()) - sizeof(Header));
        // Every call but the adapter's own names the object it is made on first: NULL or not one of this
        // provider's (a closed proxy) is refused here, as the provider refuses a bad handle, and a message cut
        // short is never run.
        Reader peek = in;
        const uint64_t object = header.fn == Fn::kOpenAdapter || header.fn == Fn::kCloseAdapter ? 2 : peek.U64();
        if (cut_short || object == 0 || object == kForeign) {
            Writer refused;
            refused.U64(static_cast<uint32_t>(STATUS_INVALID_PARAMETER));
            Send(Kind::kReply, header.fn, header.call, refused);
            continue;
        }
        Dispatch(header.fn, header.call, in);
        if (header.fn == Fn::kCloseAdapter) break;
    }
    if (adapter_ != nullptr) SoftNdkCloseAdapter(adapter_);
    for (MDL* mdl : mdls_) {
        if (mdl->MdlFlags & MDL_PAGES_LOCKED) MmUnlockPages(mdl);
        IoFreeMdl(mdl);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    int control = -1, arena_fd = -1;
    uint64_t arena_address = 0, arena_bytes = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--control-fd") control = std::atoi(argv[i + 1]);
        if (flag == "--arena-fd") arena_fd = std::atoi(argv[i + 1]);
        if (flag == "--arena-address") arena_address = std::strtoull(argv[i + 1], nullptr, 16);
        if (flag == "--arena-bytes") arena_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    }
    if (control < 0 || arena_fd < 0 || arena_address == 0 || arena_bytes == 0) {
        std::fprintf(stderr,
                     "usage: ndk_remote_side --control-fd N --arena-fd N --arena-address HEX --arena-bytes N\n");
        return 2;
    }
    // The test's memory at the test's addresses: what it registers here, it reads and writes there.
    void* arena = mmap(reinterpret_cast<void*>(arena_address), arena_bytes, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED_NOREPLACE, arena_fd, 0);
    Writer hello;
    hello.U64(arena == reinterpret_cast<void*>(arena_address) ? 0 : 1);
    Server server(control);
    server.Send(Kind::kReply, Fn::kOpenAdapter, 0, hello);
    if (arena != reinterpret_cast<void*>(arena_address)) {
        std::fprintf(stderr, "ndk_remote_side: cannot map the arena at %#llx here (%s)\n",
                     static_cast<unsigned long long>(arena_address), std::strerror(errno));
        return 3;
    }
    ::close(arena_fd);
    const int status = server.Run();
    munmap(arena, arena_bytes);
    return status;
}
