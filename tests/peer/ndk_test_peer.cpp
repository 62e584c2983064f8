// ndk_test_peer: the remote side of the conformance tests run with the peer in another process (issue 7 §5).
// It listens on 127.0.0.1, accepts one connection with its own softndk adapter (iWARP/TCP: the test's process is
// elsewhere), and does what the test asks over the control socket (tests/peer/peer_protocol.h): register
// memory, post receives, poll its CQ, show its memory, disconnect. It is an NDK consumer of the public API only.
// Usage: ndk_test_peer --control-fd N [--mode 0|1|2] [fault options, peer_protocol.h]
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <softndk/softndk.h>

#include "ndk_waiter.hpp"
#include "peer/peer_protocol.h"

namespace {

using softndk::peer::Op;
using softndk::peer::Reply;
using softndk::peer::Request;

using ndktools::Check;
using ndktools::CloseObject;
using ndktools::Created;
using ndktools::Waiter;

struct Region {
    uint8_t* memory = nullptr;
    size_t bytes = 0;
    MDL* mdl = nullptr;
    NDK_MR* mr = nullptr;
    bool registered = false;
    std::vector<uint8_t> lam;  // a fast-register MR's logical address mapping (NdkBuildLAM)
};

// The peer's own touches of registered memory. The adapter's threads place and read it for the test's process,
// ordered by messages that cross processes (the wire, then the control socket), which ThreadSanitizer cannot
// see: these accesses are left out of its analysis instead of being reported as races. Byte by byte through a
// volatile pointer, so that no intercepted memset/memcpy is called.
__attribute__((no_sanitize("thread"))) void FillRegistered(uint8_t* memory, uint8_t byte, size_t size) {
    volatile uint8_t* out = memory;
    for (size_t i = 0; i < size; ++i) out[i] = byte;
}
__attribute__((no_sanitize("thread"))) void CopyRegistered(uint8_t* out, const uint8_t* memory, size_t size) {
    const volatile uint8_t* in = memory;
    for (size_t i = 0; i < size; ++i) out[i] = in[i];
}

std::atomic<NDK_CONNECTOR*> g_incoming{nullptr};
std::atomic<uint32_t> g_disconnects{0};
VOID OnConnect(PVOID, NDK_CONNECTOR* connector) {
    g_incoming = connector;
}
VOID OnDisconnect(PVOID) {
    g_disconnects.fetch_add(1);
}
VOID IgnoreCq(PVOID, NTSTATUS) {}

// How the peer answers the incoming connection (--accept, --reject).
struct Answering {
    ULONG inbound = 16, outbound = 16;
    std::string private_data;
    bool reject = false;
};

class Peer {
public:
    Peer(int control, const SOFTNDK_ADAPTER_CONFIG& config, Answering answering)
        : control_(control), answering_(std::move(answering)) {
        Check(SoftNdkOpenAdapter(&config, &adapter_), "SoftNdkOpenAdapter");
        Waiter pd;
        pd_ = Created(pd, adapter_->Dispatch->NdkCreatePd(adapter_, &Waiter::OnCreate, &pd, &pd_), &pd_, "NdkCreatePd");
        Waiter pd2;
        second_pd_ = Created(pd2, adapter_->Dispatch->NdkCreatePd(adapter_, &Waiter::OnCreate, &pd2, &second_pd_),
                             &second_pd_, "NdkCreatePd");
        Waiter cq;
        cq_ = Created(
            cq,
            adapter_->Dispatch->NdkCreateCq(adapter_, 256, &IgnoreCq, nullptr, nullptr, &Waiter::OnCreate, &cq, &cq_),
            &cq_, "NdkCreateCq");
        Waiter qp;
        qp_ = Created(
            qp, pd_->Dispatch->NdkCreateQp(pd_, cq_, cq_, nullptr, 64, 64, 4, 4, 64, &Waiter::OnCreate, &qp, &qp_),
            &qp_, "NdkCreateQp");
        SOCKADDR_INET address{};
        address.Ipv4.sin_family = AF_INET;
        address.Ipv4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        listener_ = ndktools::Listen(adapter_, &OnConnect, nullptr, &address);
        port_ = ntohs(address.Ipv4.sin_port);
    }

    ~Peer() {
        if (accept_waiter_ != nullptr) accept_waiter_->Wait(accept_returned_);
        CloseObject(connector_);
        CloseObject(listener_);
        for (NDK_MW*& window : windows_) CloseObject(window);
        CloseObject(qp_);  // null after kCloseConnection
        for (Region& region : regions_) {
            if (!region.lam.empty())
                adapter_->Dispatch->NdkReleaseLAM(adapter_,
                                                  reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(region.lam.data()));
            CloseObject(region.mr);  // deregisters (LIFE-09)
            MmUnlockPages(region.mdl);
            IoFreeMdl(region.mdl);
            munmap(region.memory, region.bytes);
        }
        CloseObject(cq_);
        CloseObject(second_pd_);
        CloseObject(pd_);
        SoftNdkCloseAdapter(adapter_);
    }

    int Run() {
        Reply hello{STATUS_SUCCESS, port_, 0, 0, 0, 0, 0};
        if (::send(control_, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) return 4;
        while (true) {
            AcceptIfAsked();
            pollfd ready{control_, POLLIN, 0};
            if (::poll(&ready, 1, 1) <= 0) continue;
            Request request{};
            const ssize_t got = ::recv(control_, &request, sizeof(request), 0);
            if (got <= 0) return 0;  // the test is gone
            if (got != sizeof(request)) return 5;
            if (request.op == Op::kExit) {
                Reply done{STATUS_SUCCESS, 0, 0, 0, 0, 0, 0};
                ::send(control_, &done, sizeof(done), MSG_NOSIGNAL);
                return 0;
            }
            Answer(request);
        }
    }

private:
    void AcceptIfAsked() {
        NDK_CONNECTOR* incoming = g_incoming.exchange(nullptr);
        if (incoming == nullptr) return;
        connector_ = incoming;
        // CM-11/12: the initiator's private data and limits, read before the accept or reject.
        incoming_data_.assign(512, 0);
        ULONG length = static_cast<ULONG>(incoming_data_.size());
        incoming_status_ = connector_->Dispatch->NdkGetConnectionData(
            connector_, &incoming_inbound_, &incoming_outbound_, incoming_data_.data(), &length);
        incoming_data_.resize(NT_SUCCESS(incoming_status_) ? length : 0);
        const ULONG data_length = static_cast<ULONG>(answering_.private_data.size());
        void* data = data_length != 0 ? answering_.private_data.data() : nullptr;
        if (answering_.reject) {
            rejected_ = connector_->Dispatch->NdkReject(connector_, data, data_length);
            return;
        }
        accept_waiter_ = std::make_unique<Waiter>();
        accept_returned_ =
            connector_->Dispatch->NdkAccept(connector_, qp_, answering_.inbound, answering_.outbound, data, data_length,
                                            &OnDisconnect, nullptr, &Waiter::OnRequest, accept_waiter_.get());
    }

    static Region NewMemory(uint64_t pages) {
        Region fresh;
        fresh.bytes = pages * PAGE_SIZE;
        fresh.memory = static_cast<uint8_t*>(
            mmap(nullptr, fresh.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        fresh.mdl = IoAllocateMdl(fresh.memory, static_cast<ULONG>(fresh.bytes), FALSE, FALSE, nullptr);
        Check(SoftNdkProbeAndLockPages(fresh.mdl, KernelMode, IoWriteAccess), "SoftNdkProbeAndLockPages");
        return fresh;
    }

    // The completion of the peer's own request `context` (a fast-register or an invalidate): its status.
    NTSTATUS AwaitOwn(PVOID context) {
        for (int waited = 0; waited < 50000; ++waited) {
            NDK_RESULT_EX result{};
            if (cq_->Dispatch->NdkGetCqResultsEx(cq_, &result, 1) == 1) {
                if (result.RequestContext == context) return result.Status;
                std::fprintf(stderr, "ndk_test_peer: an unexpected completion while waiting for its own\n");
                return STATUS_INTERNAL_ERROR;
            }
            usleep(100);
        }
        return STATUS_IO_TIMEOUT;
    }

    Region* RegionOf(uint32_t index) { return index < regions_.size() ? &regions_[index] : nullptr; }

    void Answer(const Request& request) {
        Reply reply{STATUS_SUCCESS, 0, 0, 0, 0, 0, 0};
        std::vector<uint8_t> payload;
        Region* region = RegionOf(request.mr);
        const bool initiates = request.op == Op::kFastRegister || request.op == Op::kInvalidate ||
                               request.op == Op::kBind || request.op == Op::kInvalidateWindow;
        if (initiates && accept_waiter_ != nullptr)
            accept_waiter_->Wait(accept_returned_);  // initiator requests need the connection (QP-09)
        const bool closed = (initiates || request.op == Op::kReceive) && qp_ == nullptr;  // after kCloseConnection
        switch (closed ? Op{} : request.op) {
            case Op::kRegister: {
                Region fresh = NewMemory(request.a);
                NDK_PD* pd = request.c == softndk::peer::kInSecondPd ? second_pd_ : pd_;
                Waiter created;
                fresh.mr =
                    Created(created, pd->Dispatch->NdkCreateMr(pd, FALSE, &Waiter::OnCreate, &created, &fresh.mr),
                            &fresh.mr, "NdkCreateMr");
                Waiter registered;
                reply.status = registered.Wait(fresh.mr->Dispatch->NdkRegisterMr(
                    fresh.mr, fresh.mdl, fresh.bytes, static_cast<ULONG>(request.b), &Waiter::OnRequest, &registered));
                fresh.registered = NT_SUCCESS(reply.status);
                reply.value = static_cast<uint32_t>(regions_.size());
                reply.a = fresh.registered ? fresh.mr->Dispatch->NdkGetRemoteTokenFromMr(fresh.mr) : 0;
                reply.b = reinterpret_cast<uint64_t>(fresh.memory);
                reply.c = fresh.registered ? fresh.mr->Dispatch->NdkGetLocalTokenFromMr(fresh.mr) : 0;
                regions_.push_back(std::move(fresh));
                break;
            }
            case Op::kFastRegister: {
                Region fresh = NewMemory(request.a);
                Waiter created;
                fresh.mr =
                    Created(created, pd_->Dispatch->NdkCreateMr(pd_, TRUE, &Waiter::OnCreate, &created, &fresh.mr),
                            &fresh.mr, "NdkCreateMr");
                const ULONG pages = static_cast<ULONG>(request.a);
                Waiter initialized;
                Check(initialized.Wait(fresh.mr->Dispatch->NdkInitializeFastRegisterMr(
                          fresh.mr, pages, TRUE, &Waiter::OnRequest, &initialized)),
                      "NdkInitializeFastRegisterMr");
                fresh.lam.resize(NDK_LAM_SIZE(pages));
                auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(fresh.lam.data());
                ULONG size = static_cast<ULONG>(fresh.lam.size()), fbo = 0;
                Waiter built;
                Check(built.Wait(adapter_->Dispatch->NdkBuildLAM(adapter_, fresh.mdl, fresh.bytes, &Waiter::OnRequest,
                                                                 &built, lam, &size, &fbo)),
                      "NdkBuildLAM");
                reply.status = qp_->Dispatch->NdkFastRegister(qp_, reinterpret_cast<PVOID>(0xFA57), fresh.mr, pages,
                                                              lam->AdapterPageArray, 0, fresh.bytes, fresh.memory,
                                                              static_cast<ULONG>(request.b));
                if (NT_SUCCESS(reply.status)) reply.status = AwaitOwn(reinterpret_cast<PVOID>(0xFA57));
                fresh.registered = NT_SUCCESS(reply.status);
                reply.value = static_cast<uint32_t>(regions_.size());
                reply.a = fresh.mr->Dispatch->NdkGetRemoteTokenFromMr(fresh.mr);
                reply.b = reinterpret_cast<uint64_t>(fresh.memory);
                regions_.push_back(std::move(fresh));
                break;
            }
            case Op::kInvalidate:
                if (region == nullptr) {
                    reply.status = STATUS_INVALID_PARAMETER;
                    break;
                }
                reply.status =
                    qp_->Dispatch->NdkInvalidate(qp_, reinterpret_cast<PVOID>(0x1A7A), &region->mr->Header, 0);
                if (NT_SUCCESS(reply.status)) reply.status = AwaitOwn(reinterpret_cast<PVOID>(0x1A7A));
                break;
            case Op::kReregister: {
                if (region == nullptr || region->lam.size() != 0) {
                    reply.status = STATUS_INVALID_PARAMETER;
                    break;
                }
                if (region->registered) {
                    Waiter deregistered;
                    Check(deregistered.Wait(
                              region->mr->Dispatch->NdkDeregisterMr(region->mr, &Waiter::OnRequest, &deregistered)),
                          "NdkDeregisterMr");
                }
                Waiter registered;
                reply.status = registered.Wait(region->mr->Dispatch->NdkRegisterMr(
                    region->mr, region->mdl, region->bytes, static_cast<ULONG>(request.a), &Waiter::OnRequest,
                    &registered));
                region->registered = NT_SUCCESS(reply.status);
                reply.a = region->registered ? region->mr->Dispatch->NdkGetRemoteTokenFromMr(region->mr) : 0;
                break;
            }
            case Op::kBind: {
                if (region == nullptr) {
                    reply.status = STATUS_INVALID_PARAMETER;
                    break;
                }
                NDK_MW* window = nullptr;
                Waiter created;
                window = Created(created, pd_->Dispatch->NdkCreateMw(pd_, &Waiter::OnCreate, &created, &window),
                                 &window, "NdkCreateMw");
                reply.status =
                    qp_->Dispatch->NdkBind(qp_, reinterpret_cast<PVOID>(0xB1D), region->mr, window,
                                           region->memory + request.a, request.b, static_cast<ULONG>(request.c));
                if (NT_SUCCESS(reply.status)) reply.status = AwaitOwn(reinterpret_cast<PVOID>(0xB1D));
                reply.value = static_cast<uint32_t>(windows_.size());
                reply.a = window->Dispatch->NdkGetRemoteTokenFromMw(window);
                reply.b = reinterpret_cast<uint64_t>(region->memory + request.a);
                windows_.push_back(window);
                break;
            }
            case Op::kInvalidateWindow:
                if (request.mr >= windows_.size()) {
                    reply.status = STATUS_INVALID_PARAMETER;
                    break;
                }
                reply.status = qp_->Dispatch->NdkInvalidate(qp_, reinterpret_cast<PVOID>(0x1A7B),
                                                            &windows_[request.mr]->Header, 0);
                if (NT_SUCCESS(reply.status)) reply.status = AwaitOwn(reinterpret_cast<PVOID>(0x1A7B));
                break;
            case Op::kCloseConnection:
                if (accept_waiter_ != nullptr) accept_waiter_->Wait(accept_returned_);
                accept_waiter_.reset();
                CloseObject(connector_);
                connector_ = nullptr;
                for (NDK_MW*& window : windows_) CloseObject(std::exchange(window, nullptr));
                CloseObject(qp_);
                qp_ = nullptr;
                break;
            case Op::kDeregister: {
                if (region == nullptr) {
                    reply.status = STATUS_INVALID_PARAMETER;
                    break;
                }
                Waiter deregistered;
                reply.status = deregistered.Wait(
                    region->mr->Dispatch->NdkDeregisterMr(region->mr, &Waiter::OnRequest, &deregistered));
                if (NT_SUCCESS(reply.status)) region->registered = false;
                break;
            }
            case Op::kFill:
                if (region == nullptr)
                    reply.status = STATUS_INVALID_PARAMETER;
                else
                    FillRegistered(region->memory, static_cast<uint8_t>(request.a), region->bytes);
                break;
            case Op::kReadMemory:
                if (region == nullptr || request.b > softndk::peer::kMaxPayload || request.a > region->bytes ||
                    request.b > region->bytes - request.a) {
                    reply.status = STATUS_INVALID_PARAMETER;
                    break;
                }
                payload.resize(request.b);
                CopyRegistered(payload.data(), region->memory + request.a, request.b);
                break;
            case Op::kReceive: {
                if (region == nullptr || request.a > region->bytes || request.b > region->bytes - request.a) {
                    reply.status = STATUS_INVALID_PARAMETER;
                    break;
                }
                NDK_SGE sge{};
                sge.VirtualAddress = region->memory + request.a;
                sge.Length = static_cast<ULONG>(request.b);
                sge.MemoryRegionToken = region->mr->Dispatch->NdkGetLocalTokenFromMr(region->mr);
                reply.status = qp_->Dispatch->NdkReceive(qp_, reinterpret_cast<PVOID>(request.c), &sge, 1);
                break;
            }
            case Op::kPoll: {
                NDK_RESULT_EX result{};
                reply.status = STATUS_IO_TIMEOUT;
                for (uint64_t waited = 0; waited <= request.a * 10; ++waited) {
                    if (cq_->Dispatch->NdkGetCqResultsEx(cq_, &result, 1) == 1) {
                        reply.status = STATUS_SUCCESS;
                        reply.value = static_cast<uint32_t>(result.Type);
                        reply.a = static_cast<uint32_t>(result.Status);
                        reply.b = result.BytesTransferred;
                        reply.c = reinterpret_cast<uint64_t>(result.RequestContext);
                        reply.d = result.ProviderErrorCode;
                        reply.e = result.TypeSpecificCompletionOutput;
                        break;
                    }
                    usleep(100);
                }
                break;
            }
            case Op::kDisconnects:
                reply.value = g_disconnects.load();
                break;
            case Op::kConnectionData:
                reply.status = connector_ == nullptr ? STATUS_CONNECTION_INVALID : incoming_status_;
                reply.value = static_cast<uint32_t>(incoming_data_.size());
                reply.a = incoming_inbound_;
                reply.b = incoming_outbound_;
                payload = incoming_data_;
                break;
            case Op::kAcceptResult:
                if (accept_waiter_ == nullptr) {
                    reply.status = answering_.reject ? rejected_ : STATUS_CONNECTION_INVALID;
                    break;
                }
                reply.status = STATUS_IO_TIMEOUT;
                for (uint64_t waited = 0; waited <= request.a * 10; ++waited) {
                    if (accept_returned_ != STATUS_PENDING || accept_waiter_->done) {
                        reply.status = accept_waiter_->Wait(accept_returned_);
                        break;
                    }
                    usleep(100);
                }
                break;
            case Op::kCloseListener:
                CloseObject(listener_);
                listener_ = nullptr;
                break;
            case Op::kDisconnect: {
                if (connector_ == nullptr) {
                    reply.status = STATUS_CONNECTION_INVALID;
                    break;
                }
                Waiter disconnected;
                reply.status = disconnected.Wait(
                    connector_->Dispatch->NdkDisconnect(connector_, &Waiter::OnRequest, &disconnected));
                break;
            }
            default:
                reply.status = closed ? STATUS_CONNECTION_INVALID : STATUS_NOT_SUPPORTED;
                break;
        }
        std::vector<uint8_t> message(sizeof(reply) + payload.size());
        std::memcpy(message.data(), &reply, sizeof(reply));
        if (!payload.empty()) std::memcpy(message.data() + sizeof(reply), payload.data(), payload.size());
        ::send(control_, message.data(), message.size(), MSG_NOSIGNAL);
    }

    const int control_;
    NDK_ADAPTER* adapter_ = nullptr;
    NDK_PD* pd_ = nullptr;
    NDK_PD* second_pd_ = nullptr;
    NDK_CQ* cq_ = nullptr;
    NDK_QP* qp_ = nullptr;
    NDK_LISTENER* listener_ = nullptr;
    NDK_CONNECTOR* connector_ = nullptr;
    std::unique_ptr<Waiter> accept_waiter_;
    NTSTATUS accept_returned_ = STATUS_SUCCESS;
    uint32_t port_ = 0;
    std::vector<Region> regions_;
    std::vector<NDK_MW*> windows_;
    Answering answering_;
    std::vector<uint8_t> incoming_data_;
    ULONG incoming_inbound_ = 0, incoming_outbound_ = 0;
    NTSTATUS incoming_status_ = STATUS_CONNECTION_INVALID;
    NTSTATUS rejected_ = STATUS_CONNECTION_INVALID;
};

// --fault FUNCTION:NTH:async|inline (peer_protocol.h).
bool ParseFault(const std::string& text, SOFTNDK_FAULT_RULE* rule, std::string* function) {
    const size_t first = text.find(':'), second = text.rfind(':');
    if (first == std::string::npos || second == first) return false;
    *function = text.substr(0, first);
    const std::string how = text.substr(second + 1);
    if (how != "async" && how != "inline") return false;
    *rule = SOFTNDK_FAULT_RULE{nullptr,
                               static_cast<ULONG>(std::strtoul(text.c_str() + first + 1, nullptr, 10)),
                               0.0,
                               0,
                               static_cast<BOOLEAN>(how == "async"),
                               STATUS_INSUFFICIENT_RESOURCES};
    return rule->NthCall > 0;
}

}  // namespace

int main(int argc, char** argv) {
    int control = -1;
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    config.RandomSeed = 4242;
    std::string fault_function;  // outlives the adapter: the rule points at it
    Answering answering;
    bool usage = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--mpa-crc") {
            config.MpaCrc = 1;
        } else if (!has_value) {
            usage = true;
        } else if (arg == "--control-fd") {
            control = std::atoi(argv[++i]);
        } else if (arg == "--mode") {
            config.CompletionMode = static_cast<ULONG>(std::atoi(argv[++i]));
        } else if (arg == "--fault") {
            usage |= !ParseFault(argv[++i], &config.FaultRules[0], &fault_function);
            config.FaultRules[0].FunctionName = fault_function.c_str();
            config.FaultRuleCount = 1;
        } else if (arg == "--drop-after-fpdus") {
            config.WireFaults.DropAfterFpdus = std::strtoull(argv[++i], nullptr, 10);
        } else if (arg == "--corrupt-byte") {
            config.WireFaults.CorruptByte = std::strtoull(argv[++i], nullptr, 10);
        } else if (arg == "--accept") {  // IRD,ORD[,TEXT]
            char* end = nullptr;
            answering.inbound = static_cast<ULONG>(std::strtoul(argv[++i], &end, 10));
            usage |= *end != ',';
            answering.outbound = static_cast<ULONG>(std::strtoul(end + 1, &end, 10));
            if (*end == ',') answering.private_data = end + 1;
        } else if (arg == "--reject") {
            answering.reject = true;
            answering.private_data = argv[++i];
        } else {
            usage = true;
        }
    }
    if (control < 0 || usage) {
        std::fprintf(stderr,
                     "usage: ndk_test_peer --control-fd N [--mode 0|1|2] [--fault F:N:async|inline] "
                     "[--drop-after-fpdus N] [--corrupt-byte N] [--mpa-crc] "
                     "[--accept IRD,ORD[,TEXT]] [--reject TEXT]\n");
        return 2;
    }
    int status;
    {
        Peer peer(control, config, answering);
        status = peer.Run();
    }
    return status;
}
