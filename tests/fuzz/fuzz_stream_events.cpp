// libFuzzer target (issue 34 §3): events in random order against one stream's state machine. Per input a raw TCP
// peer connects to softndk's listener and completes the handshake (MPA v2, P2P, Write RTR); softndk accepts on a
// fresh QP and CQ. Then each input step (two bytes: an event and its argument) is one of
//  - the consumer: post a Send, Write, Read or receive (with or without NDK_OP_FLAG_DEFER), ring (a post without
//    DEFER), NdkDisconnect, close the connector;
//  - the peer: a Send, a Write (to a valid or a bad token), a Read Request, a Terminate, garbage, reading what
//    softndk sent, FIN, reset;
//  - time: a wait of up to 63 ms, past the backstop (5 ms) and the stall timeout (40 ms) when long.
// At the end the connector, QP and CQ are closed. Invariants, checked after every step where they can be:
//  - every request completes exactly once (a completion for one not outstanding aborts; at the end none is left);
//  - no completion after close (none once the QP's close completed; no CQ callback after the CQ's close);
//  - the stream's descriptor is closed at the end (the process's descriptor count returns);
//  - no callback runs with a lock held: each callback calls back into softndk (NdkArmCq from the CQ's, the
//    connector's NdkGetPeerAddress from the disconnect's), which would deadlock (libFuzzer's -timeout) if it did.
// Placeholders are not used: the steps name the MR's token themselves.
#include <dirent.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "fuzz_world.h"

using namespace fuzzworld;
using ndktools::Waiter;
namespace wire = softndk::wire;

namespace {

constexpr uint32_t kStallMs = 40;

void Customize(SOFTNDK_ADAPTER_CONFIG& config) {
    config.PeerStallTimeoutMs = kStallMs;
    config.DeferBackstopMs = 5;
    config.DisconnectTimeoutMs = 100;
}

size_t OpenDescriptors() {
    size_t count = 0;
    if (DIR* dir = opendir("/proc/self/fd")) {
        while (readdir(dir) != nullptr) ++count;
        closedir(dir);
    }
    return count;
}

// The outstanding requests of this input, by context; one input's contexts never repeat another's.
struct Ledger {
    std::mutex mutex;
    std::set<uintptr_t> outstanding;
    uintptr_t next = 1;
    uintptr_t Take() {
        std::lock_guard lock(mutex);
        return next++;
    }
    void Posted(uintptr_t context) {
        std::lock_guard lock(mutex);
        outstanding.insert(context);
    }
    void Completed(uintptr_t context) {
        std::lock_guard lock(mutex);
        Require(outstanding.erase(context) == 1, "a completion for a request not outstanding (twice, or never posted)");
    }
    size_t Left() {
        std::lock_guard lock(mutex);
        return outstanding.size();
    }
};

struct Run {
    World* world = nullptr;
    NDK_CQ* cq = nullptr;
    NDK_QP* qp = nullptr;
    NDK_CONNECTOR* connector = nullptr;
    std::atomic<NDK_CONNECTOR*> connector_for_callbacks{nullptr};  // cleared before the connector's close
    int fd = -1;
    Ledger ledger;
    std::atomic<bool> cq_closed{false};
    std::atomic<int> cq_calls_after_close{0};
    std::atomic<int> disconnect_events{0};
    std::atomic<int> disconnect_events_after_close{0};
    std::atomic<bool> connector_closed{false};  // its close completed
    std::atomic<int> disconnects_posted{0};
    std::atomic<int> disconnects_completed{0};
    std::atomic<int> disconnect_completions_after_close{0};
    uint32_t peer_send_msn = 0;
    uint32_t peer_read_msn = 0;

    static VOID OnCq(PVOID context, NTSTATUS) {
        auto* run = static_cast<Run*>(context);
        if (run->cq_closed.load())
            ++run->cq_calls_after_close;
        else
            run->cq->Dispatch->NdkArmCq(run->cq, NDK_CQ_NOTIFY_ANY);  // deadlocks if the CQ's lock were held
    }
    static VOID OnDisconnectEvent(PVOID context) {
        auto* run = static_cast<Run*>(context);
        ++run->disconnect_events;
        if (run->connector_closed.load()) ++run->disconnect_events_after_close;
        SOCKADDR_IN peer{};
        ULONG length = sizeof(peer);  // takes the connection's lock: deadlocks if it were held
        if (NDK_CONNECTOR* connector = run->connector_for_callbacks.load())
            connector->Dispatch->NdkGetPeerAddress(connector, reinterpret_cast<PSOCKADDR>(&peer), &length);
    }
    void CloseConnector() {
        if (connector == nullptr) return;
        connector_for_callbacks = nullptr;
        Close(&connector->Header);
        connector_closed = true;
        connector = nullptr;
    }
    static VOID OnDisconnected(PVOID context, NTSTATUS) {
        auto* run = static_cast<Run*>(context);
        if (run->connector_closed.load()) ++run->disconnect_completions_after_close;
        ++run->disconnects_completed;
    }

    void Drain() {
        NDK_RESULT_EX results[32];
        for (ULONG got; (got = cq->Dispatch->NdkGetCqResultsEx(cq, results, 32)) > 0;)
            for (ULONG i = 0; i < got; ++i) ledger.Completed(reinterpret_cast<uintptr_t>(results[i].RequestContext));
    }
    void SendPeer(const std::vector<uint8_t>& bytes) {
        if (fd >= 0) ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    void ReadPeer() {
        uint8_t sink[16384];
        while (fd >= 0 && ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
        }
    }
};

std::vector<uint8_t> Fpdu(const wire::SegmentHeader& header, std::span<const uint8_t> payload) {
    uint8_t head[wire::kMaxSegmentHeaderSize];
    size_t written = 0;
    wire::SerializeSegmentHeader(header, head, &written);
    std::vector<uint8_t> bytes(wire::FpduSize(written + payload.size()));
    size_t framed = 0;
    wire::SerializeFpdu({head, written}, payload, false, bytes, &framed);
    bytes.resize(framed);
    return bytes;
}

std::vector<uint8_t> MpaBytes(const wire::MpaFrame& frame) {
    std::vector<uint8_t> bytes(wire::MpaFrameSize(frame));
    size_t written = 0;
    wire::SerializeMpaFrame(frame, bytes, &written);
    bytes.resize(written);
    return bytes;
}

// The handshake; false when softndk refused or the accept failed (nothing to fuzz then).
bool Connect(Run& run) {
    World& world = *run.world;
    run.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    Require(run.fd >= 0, "socket");
    timeval timeout{2, 0};
    setsockopt(run.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    SOCKADDR_IN address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(world.port);
    Require(::connect(run.fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0, "connect");
    wire::MpaEnhancedWords words;
    words.ird = 4;
    words.ord = 4;
    words.peer_to_peer = true;
    words.write_rtr = true;
    run.SendPeer(MpaBytes(wire::MakeMpaRequest(false, &words, {})));
    // Wall-clock bounded: a loaded machine (CI with a busy loop on each core) must not turn the wait into minutes.
    // 30 s, under libFuzzer's -timeout of 60: in a long run at nice 19 beside a full ASan build one unit waited
    // over 10 s here, and it runs in 50-90 ms alone.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (world.incoming.load() == nullptr && std::chrono::steady_clock::now() < give_up) usleep(100);
    run.connector = world.incoming.exchange(nullptr);
    Require(run.connector != nullptr, "no connect event in 30 s for a valid MPA Request");
    run.connector_for_callbacks = run.connector;
    Waiter accepted;
    const NTSTATUS returned = run.connector->Dispatch->NdkAccept(
        run.connector, run.qp, 4, 4, nullptr, 0, &Run::OnDisconnectEvent, &run, &Waiter::OnRequest, &accepted);
    std::vector<uint8_t> reply(wire::kMpaHeaderSize + wire::kMpaEnhancedWordsSize);
    if (::recv(run.fd, reply.data(), reply.size(), MSG_WAITALL) != static_cast<ssize_t>(reply.size())) return false;
    run.SendPeer(Fpdu(wire::MakeWriteHeader(1, 0, true), {}));  // the Write RTR
    return NT_SUCCESS(accepted.Wait(returned, kRequestTimeoutMs));
}

NDK_SGE Sge(const World& world, size_t offset, size_t length) {
    NDK_SGE sge{};
    offset %= 2 * PAGE_SIZE;
    sge.VirtualAddress = world.memory + PAGE_SIZE + offset;
    sge.Length = static_cast<ULONG>(std::min<size_t>(length, 2 * PAGE_SIZE - offset));
    sge.MemoryRegionToken = world.mr->Dispatch->NdkGetLocalTokenFromMr(world.mr);
    return sge;
}

enum Step : uint8_t {
    kPostSend,
    kPostWrite,
    kPostRead,
    kPostReceive,
    kRing,
    kPeerSend,
    kPeerWrite,
    kPeerReadRequest,
    kPeerTerminate,
    kPeerGarbage,
    kPeerRead,
    kPeerFin,
    kPeerReset,
    kDisconnect,
    kCloseConnector,
    kWait,
    kSteps
};

void Play(Run& run, uint8_t step, uint8_t argument) {
    World& world = *run.world;
    NDK_QP* qp = run.qp;
    const ULONG flags = (argument & 1) != 0 ? NDK_OP_FLAG_DEFER : 0;
    const size_t size = static_cast<size_t>(argument >> 1) * 64;  // 0 … 8128 bytes
    const uintptr_t context = run.ledger.Take();
    auto posted = [&](NTSTATUS status) {
        if (status == STATUS_SUCCESS) run.ledger.Posted(context);  // one that fails inline never completes
    };
    NDK_SGE sge = Sge(world, argument * 32, std::max<size_t>(size, 1));
    switch (static_cast<Step>(step % kSteps)) {
        case kPostSend:
            posted(qp->Dispatch->NdkSend(qp, reinterpret_cast<PVOID>(context), &sge, size ? 1 : 0, flags));
            break;
        case kPostWrite:
            posted(qp->Dispatch->NdkWrite(qp, reinterpret_cast<PVOID>(context), &sge, 1, 0x1000, 0x77, flags));
            break;
        case kPostRead:
            posted(qp->Dispatch->NdkRead(qp, reinterpret_cast<PVOID>(context), &sge, 1, 0x1000, 0x77, flags));
            break;
        case kPostReceive:
            posted(qp->Dispatch->NdkReceive(qp, reinterpret_cast<PVOID>(context), &sge, 1));
            break;
        case kRing:  // CB-15: the next post without DEFER rings for the deferred ones before it
            posted(qp->Dispatch->NdkWrite(qp, reinterpret_cast<PVOID>(context), &sge, 1, 0x2000, 0x77, 0));
            break;
        case kPeerSend: {
            std::vector<uint8_t> payload(std::min<size_t>(size, 4096), static_cast<uint8_t>(argument));
            run.SendPeer(
                Fpdu(wire::MakeSendHeader(wire::RdmapOpcode::kSend, ++run.peer_send_msn, 0, true, 0), payload));
            break;
        }
        case kPeerWrite: {
            std::vector<uint8_t> payload(std::min<size_t>(size, 4096), static_cast<uint8_t>(argument));
            const uint32_t token = (argument & 1) != 0 ? world.token ^ 0xFF : world.token;  // odd: a bad token
            run.SendPeer(Fpdu(wire::MakeWriteHeader(token, world.base + (argument & 0x3F) * 64, true), payload));
            break;
        }
        case kPeerReadRequest: {
            wire::ReadRequestFields read;
            read.sink_stag = 0x55;
            read.sink_offset = 0;
            read.size = static_cast<uint32_t>(std::min<size_t>(size, PAGE_SIZE));
            read.source_stag = world.token;
            read.source_offset = world.base;
            run.SendPeer(Fpdu(wire::MakeReadRequestHeader(++run.peer_read_msn, read), {}));
            break;
        }
        case kPeerTerminate: {
            uint8_t body[wire::kTerminateMaxBodySize];
            size_t written = 0;
            wire::BuildTerminateBody(wire::term::kRdmapOperationUnspecified, {}, body, &written);
            run.SendPeer(Fpdu(wire::MakeTerminateHeader(), {body, written}));
            break;
        }
        case kPeerGarbage: {
            std::vector<uint8_t> garbage(1 + argument % 40, argument);
            run.SendPeer(garbage);
            break;
        }
        case kPeerRead:
            run.ReadPeer();
            break;
        case kPeerFin:
            if (run.fd >= 0) ::shutdown(run.fd, SHUT_WR);
            break;
        case kPeerReset:
            if (run.fd >= 0) {
                const linger reset{1, 0};
                setsockopt(run.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
                ::close(run.fd);
                run.fd = -1;
            }
            break;
        case kDisconnect:
            if (run.connector != nullptr) {
                // Only a pending call completes through the callback.
                if (run.connector->Dispatch->NdkDisconnect(run.connector, &Run::OnDisconnected, &run) == STATUS_PENDING)
                    ++run.disconnects_posted;
            }
            break;
        case kCloseConnector:
            run.CloseConnector();
            break;
        case kWait:
            std::this_thread::sleep_for(std::chrono::milliseconds(argument % 64));
            break;
        case kSteps:
            break;
    }
    run.Drain();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    World& world = Setup(&Customize);
    if (NDK_CONNECTOR* stale = world.incoming.exchange(nullptr)) {  // offered as an earlier input's socket closed
        stale->Dispatch->NdkReject(stale, nullptr, 0);
        Close(&stale->Header);
    }
    const size_t descriptors = OpenDescriptors();
    Run run;
    run.world = &world;
    Waiter cq_created;
    Require(cq_created.Wait(world.adapter->Dispatch->NdkCreateCq(world.adapter, 256, &Run::OnCq, &run, nullptr,
                                                                 &Waiter::OnCreate, &cq_created, &run.cq),
                            kRequestTimeoutMs) == STATUS_SUCCESS,
            "cq");
    run.cq = Created(cq_created, run.cq);
    run.cq->Dispatch->NdkArmCq(run.cq, NDK_CQ_NOTIFY_ANY);
    Waiter qp_created;
    Require(qp_created.Wait(world.pd->Dispatch->NdkCreateQp(world.pd, run.cq, run.cq, nullptr, 64, 64, 4, 4, 64,
                                                            &Waiter::OnCreate, &qp_created, &run.qp),
                            kRequestTimeoutMs) == STATUS_SUCCESS,
            "qp");
    run.qp = Created(qp_created, run.qp);
    if (Connect(run))
        for (size_t i = 0; i + 1 < size && i < 128; i += 2) Play(run, data[i], data[i + 1]);

    run.CloseConnector();
    Close(&run.qp->Header);  // every request is flushed by now (QP-21)
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(kRequestTimeoutMs);
    for (run.Drain(); run.ledger.Left() > 0; run.Drain()) {
        Require(std::chrono::steady_clock::now() < give_up, "a request never completed after the QP's close");
        usleep(100);
    }
    usleep(2000);
    run.Drain();  // a completion now would be one after the close: Completed() aborts on it
    run.cq_closed = true;
    Close(&run.cq->Header);
    if (run.fd >= 0) ::close(run.fd);
    for (int waited = 0; OpenDescriptors() != descriptors; ++waited) {
        Require(waited < kRequestTimeoutMs, "the stream's descriptor is still open after the connector's close");
        usleep(1000);
    }
    Require(run.cq_calls_after_close.load() == 0, "a CQ callback after the CQ's close");
    Require(run.disconnect_events.load() <= 1, "more than one disconnect event");
    Require(run.disconnect_events_after_close.load() == 0, "a disconnect event after the connector's close");
    Require(run.disconnects_completed.load() == run.disconnects_posted.load(), "an NdkDisconnect never completed");
    Require(run.disconnect_completions_after_close.load() == 0, "NdkDisconnect completed after the connector's close");
    RequireCanaries(world);
    return 0;
}
