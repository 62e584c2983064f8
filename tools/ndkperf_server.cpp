// `ndkperf --server [-a ADDR] [-p PORT]`: serves ndkperf clients (ndkperf_remote.cpp) until one of them sends a
// Quit. It keeps serving (issue 18 §4): a client that misbehaves (does not read its pongs, so our posts are
// refused; sends on a connection that carries no tests; fails its accept; leaves without a Quit) loses only its
// own connection, which is closed and forgotten, and the server goes on with the others.
//  - A connection that carries tests (the client's first, Join::role kTests) gets kServerReceives receives of its
//    own and a ring of control messages as deep as its send queue; up to kMaxTestConnections at once.
//  - Extra connections (--connections) only exist: one receive each; up to kMaxConnections in all.
//  - Every other connect request is refused with NdkReject, and the reason is printed.
#include "ndkperf_protocol.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

namespace ndkperf {
namespace {

using namespace remote;

constexpr size_t kMaxTestConnections = 32;
constexpr size_t kMaxConnections = 4096;
constexpr ULONG kQueueDepth = kServerReceives + 16;
constexpr size_t kRingEntries = kQueueDepth;  // ≥ the send queue: an entry is reused only after its send completed

struct Connection {
    uint64_t id = 0;
    std::string peer;  // the client's address, for the reports
    Role role = Role::kExtra;
    size_t set = 0;  // kTests: the receive slot set and control ring it owns
    NDK_CONNECTOR* connector = nullptr;
    NDK_QP* qp = nullptr;
    Waiter accepted;
    bool accept_called = false;
    bool established = false;
    uint32_t owed = 0;  // receives reposted, not yet credited
    bool pong = false;
    bool dropped = false;  // misbehaved: ends with our NdkDisconnect, its completions are ignored
    uint64_t ring_next = 0;
    std::atomic<bool> disconnected{false};
    bool disconnect_seen = false;  // Reap saw `disconnected` and read the CQ after it: the disconnect may be answered
    bool answered = false;         // our NdkDisconnect after the peer's (CM-24: its disconnect completes at our FIN)
    bool leaving = false;          // the client said kLeave: its disconnect is expected
    Waiter disconnect_done;
    NTSTATUS disconnect_returned = STATUS_PENDING;
};

VOID OnServerDisconnect(PVOID context) {
    static_cast<Connection*>(context)->disconnected = true;
}

std::string PeerOf(NDK_CONNECTOR* connector) {
    SOCKADDR_INET address{};
    ULONG length = sizeof(address);
    if (!NT_SUCCESS(connector->Dispatch->NdkGetPeerAddress(connector, reinterpret_cast<PSOCKADDR>(&address), &length)))
        return "an unknown peer";
    char text[INET6_ADDRSTRLEN] = "?";
    const bool v6 = address.si_family == AF_INET6;
    inet_ntop(address.si_family, v6 ? static_cast<const void*>(&address.Ipv6.sin6_addr) : &address.Ipv4.sin_addr, text,
              sizeof(text));
    return std::string(text) + ":" + std::to_string(ntohs(v6 ? address.Ipv6.sin6_port : address.Ipv4.sin_port));
}

class Server {
public:
    Server(const Options& options) : options_(options), sets_used_(kMaxTestConnections, false) {
        const SOFTNDK_ADAPTER_CONFIG config = ConfigFor(options);
        data_bytes_ = ROUND_TO_PAGES(options.largest);
        // Data (RDMA target and receive spill), the pong source, the control rings, the receive slots.
        control_offset_ = data_bytes_ + kMessageArea;
        slots_offset_ = control_offset_ + kMaxTestConnections * kRingEntries * sizeof(Control);
        const size_t bytes = slots_offset_ + (kMaxTestConnections * kServerReceives + 1) * kSlot;
        // The whole buffer is for local access only; clients reach the data area alone, through its own MR, so
        // that no client can write another's receive slots or control messages.
        ndktools::OpenSide(&side_, config, ROUND_TO_PAGES(bytes), kQueueDepth,
                           static_cast<ULONG>(kMaxTestConnections * kQueueDepth * 2 + kMaxConnections * 2),
                           NDK_MR_FLAG_ALLOW_LOCAL_WRITE);
        CloseObject(side_.qp);  // each connection makes its own
        side_.qp = nullptr;
        data_mdl_ = IoAllocateMdl(side_.buffer, static_cast<ULONG>(data_bytes_), FALSE, FALSE, nullptr);
        Check(data_mdl_ != nullptr ? SoftNdkProbeAndLockPages(data_mdl_, KernelMode, IoWriteAccess)
                                   : STATUS_INSUFFICIENT_RESOURCES,
              "SoftNdkProbeAndLockPages");
        Waiter created;
        data_mr_ = ndktools::Created(
            created, side_.pd->Dispatch->NdkCreateMr(side_.pd, FALSE, &Waiter::OnCreate, &created, &data_mr_),
            &data_mr_, "NdkCreateMr");
        Waiter registered;
        Check(registered.Wait(data_mr_->Dispatch->NdkRegisterMr(
                  data_mr_, data_mdl_, data_bytes_, NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
                  &Waiter::OnRequest, &registered)),
              "NdkRegisterMr");
        data_token_ = data_mr_->Dispatch->NdkGetRemoteTokenFromMr(data_mr_);
    }
    ~Server() {
        while (!connections_.empty()) Forget(*connections_.begin()->second);
        CloseObject(listener_);
        CloseObject(data_mr_);
        MmUnlockPages(data_mdl_);
        IoFreeMdl(data_mdl_);
        ndktools::CloseSide(&side_);
    }

    int Run() {
        SOCKADDR_INET address;
        ParseAddress(options_.address.empty() ? "0.0.0.0" : options_.address, options_.port, &address);
        listener_ = ndktools::Listen(side_.adapter, &ndktools::IncomingConnectors::OnConnect, &incoming_, &address);
        std::printf("ndkperf server listening on port %u\n",
                    ntohs(address.Ipv4.sin_port));  // same offset in both layouts
        std::fflush(stdout);
        while (!quit_) {
            AcceptIncoming();
            // Read before reaping: whatever a client sent before its FIN is in the CQ by the time the event fires.
            NDK_RESULT_EX results[16];
            const ULONG count = side_.cq->Dispatch->NdkGetCqResultsEx(side_.cq, results, 16);
            for (ULONG i = 0; i < count && !quit_; ++i) Handle(results[i]);
            if (count == 0 || ++loops_ % 64 == 0) Reap();          // also while busy clients keep the CQ full
            if (count == 0 && connections_.empty()) usleep(1000);  // nobody to serve: do not spin
        }
        // A Quit: end every connection (each NdkDisconnect completes at the peer's FIN or DisconnectTimeoutMs).
        for (auto& [id, connection] : connections_) {
            if (connection->established && !connection->answered) Disconnect(*connection);
        }
        return 0;
    }

private:
    void AcceptIncoming() {
        NDK_CONNECTOR* incoming = incoming_.TryTake();
        if (incoming == nullptr) return;
        Join join{};
        ULONG inbound = 0, outbound = 0, size = sizeof(join);
        const NTSTATUS got = incoming->Dispatch->NdkGetConnectionData(incoming, &inbound, &outbound, &join, &size);
        const std::string peer = PeerOf(incoming);
        const char* refusal = nullptr;
        if (!NT_SUCCESS(got)) {
            refusal = "its connect data cannot be read (it left already?)";
        } else if (size != sizeof(join) || join.magic != kMagic ||
                   (join.role != Role::kTests && join.role != Role::kExtra)) {
            refusal = "it is not an ndkperf client (no Join in its connect private data)";
        } else if (connections_.size() >= kMaxConnections) {
            refusal = "the server already holds its most connections (4096)";
        } else if (join.role == Role::kTests && !FreeSetAfterReaping()) {
            refusal = "the server already runs tests for its most clients at once (32)";
        }
        if (refusal != nullptr) {
            if (refused_++ < 10 || refused_ % 1000 == 0)  // a flood does not flood the log
                std::fprintf(stderr, "ndkperf server: refused %s: %s (%llu refused so far)\n", peer.c_str(), refusal,
                             static_cast<unsigned long long>(refused_));
            incoming->Dispatch->NdkReject(incoming, nullptr, 0);
            CloseObject(incoming);
            return;
        }
        const uint64_t id = next_id_++;
        Connection& connection = *connections_.emplace(id, std::make_unique<Connection>()).first->second;
        connection.id = id;
        connection.peer = peer;
        connection.role = join.role;
        connection.connector = incoming;
        if (connection.role == Role::kTests) {
            connection.set =
                static_cast<size_t>(std::find(sets_used_.begin(), sets_used_.end(), false) - sets_used_.begin());
            sets_used_[connection.set] = true;
        }
        Waiter created;
        const NTSTATUS create = created.Wait(side_.pd->Dispatch->NdkCreateQp(
            side_.pd, side_.cq, side_.cq, reinterpret_cast<PVOID>(connection.id), kQueueDepth, kQueueDepth, 2, 2, 0,
            &Waiter::OnCreate, &created, &connection.qp));
        if (connection.qp == nullptr) connection.qp = reinterpret_cast<NDK_QP*>(created.object.load());
        if (!NT_SUCCESS(create)) {
            connection.qp = nullptr;
            connection.connector->Dispatch->NdkReject(connection.connector, nullptr, 0);
            return Drop(connection, "NdkCreateQp failed", create);
        }
        const ULONG receives = connection.role == Role::kTests ? kServerReceives : 1;
        for (ULONG i = 0; i < receives; ++i) {
            const NTSTATUS posted = PostReceive(connection, i);
            if (!NT_SUCCESS(posted)) return Drop(connection, "NdkReceive failed", posted);
        }
        Hello hello{kMagic, data_token_, reinterpret_cast<uint64_t>(side_.buffer), data_bytes_, receives, 0};
        connection.accept_called = true;
        const NTSTATUS accepted =
            incoming->Dispatch->NdkAccept(incoming, connection.qp, kReadLimit, kReadLimit, &hello, sizeof(hello),
                                          &OnServerDisconnect, &connection, &Waiter::OnRequest, &connection.accepted);
        if (accepted != STATUS_PENDING) Waiter::OnRequest(&connection.accepted, accepted);
    }

    // A receive slot set for a new client, after forgetting the connections that are over (failed accepts).
    bool FreeSetAfterReaping() {
        if (std::find(sets_used_.begin(), sets_used_.end(), false) != sets_used_.end()) return true;
        Reap();
        return std::find(sets_used_.begin(), sets_used_.end(), false) != sets_used_.end();
    }

    // Accepts that completed, disconnects to answer, answered disconnects to forget.
    void Reap() {
        // A disconnect fires once the peer's FIN is in, so whatever it sent before (a Leave) is already in the CQ;
        // while other clients keep the CQ busy, Reap can come before it is read. So a disconnect is answered only
        // after a look at `disconnected` (it is set from another thread) followed by reading the whole CQ.
        bool newly_seen = false;
        for (auto& [id, connection] : connections_) {
            if (connection->disconnect_seen || connection->answered || !connection->disconnected) continue;
            connection->disconnect_seen = true;
            newly_seen = true;
        }
        if (newly_seen && !DrainCq()) return;  // a Quit came
        std::vector<Connection*> done;
        for (auto& [id, owned] : connections_) {
            Connection& connection = *owned;
            if (!connection.established) {
                if (!connection.accepted.done) continue;
                if (!NT_SUCCESS(connection.accepted.status)) {
                    done.push_back(&connection);  // its accept failed: the socket is closed, not leaked
                    continue;
                }
                connection.established = true;
            }
            if (connection.disconnect_seen && !connection.answered) Disconnect(connection);
            if (connection.answered && connection.disconnect_done.done) done.push_back(&connection);
        }
        for (Connection* connection : done) {
            if (!connection->established) {
                Drop(*connection, "NdkAccept failed", connection->accepted.status);
            } else {
                if (connection->role == Role::kTests && !connection->dropped && !connection->leaving)
                    std::fprintf(stderr, "ndkperf server: client %s left without a Quit; still serving\n",
                                 connection->peer.c_str());
                Forget(*connection);
            }
        }
    }

    // Handles the CQ's results until it is empty, at most a full CQ's worth per connection (others keep posting).
    // False when a Quit came meanwhile.
    bool DrainCq() {
        NDK_RESULT_EX results[16];
        for (size_t handled = 0; handled < kMaxTestConnections * kQueueDepth * 2 && !quit_;) {
            const ULONG count = side_.cq->Dispatch->NdkGetCqResultsEx(side_.cq, results, 16);
            for (ULONG i = 0; i < count && !quit_; ++i) Handle(results[i]);
            handled += count;
            if (count < 16) break;
        }
        return !quit_;
    }

    void Disconnect(Connection& connection) {
        connection.answered = true;
        connection.disconnect_returned = connection.connector->Dispatch->NdkDisconnect(
            connection.connector, &Waiter::OnRequest, &connection.disconnect_done);
        if (connection.disconnect_returned != STATUS_PENDING)
            Waiter::OnRequest(&connection.disconnect_done, connection.disconnect_returned);
    }

    // A client that misbehaved loses its connection (closed abortively), and only that.
    // `status` is what a call returned, or STATUS_SUCCESS where no call failed. An established connection ends
    // with NdkDisconnect, so that what is queued (a Terminate behind Read Responses) still goes out to a peer that
    // reads; one that does not is reset at DisconnectTimeoutMs. Its completions are ignored meanwhile.
    void Drop(Connection& connection, const char* what, NTSTATUS status) {
        if (NT_SUCCESS(status))
            std::fprintf(stderr, "ndkperf server: dropped client %s: %s; still serving\n", connection.peer.c_str(),
                         what);
        else {
            char described[256];
            std::fprintf(stderr, "ndkperf server: dropped client %s: %s: %s %s; still serving\n",
                         connection.peer.c_str(), what, ndk_status_describe(status, described, sizeof(described)),
                         SoftNdkGetLastErrorText());
        }
        connection.dropped = true;
        if (!connection.established) return Forget(connection);
        if (!connection.answered) Disconnect(connection);
    }

    // Closes the connector (a connection still up ends in a reset; an answered one after its disconnect) and the QP
    // (its requests flush; their completions name an id no longer served and are ignored), and frees the slot set.
    void Forget(Connection& connection) {
        if (connection.answered) connection.disconnect_done.Wait(STATUS_PENDING);  // bounded by DisconnectTimeoutMs
        CloseObject(connection.connector);  // completes an accept still pending (CM: close cancels)
        if (connection.accept_called) connection.accepted.Wait(STATUS_PENDING);
        CloseObject(connection.qp);
        if (connection.role == Role::kTests) sets_used_[connection.set] = false;
        connections_.erase(connection.id);
    }

    NTSTATUS PostReceive(Connection& connection, size_t slot) {
        const size_t global = connection.role == Role::kTests ? connection.set * kServerReceives + slot
                                                              : kMaxTestConnections * kServerReceives;
        NDK_SGE sge[2] = {Sge(side_, slots_offset_ + global * kSlot, kSlot), Sge(side_, 0, data_bytes_)};
        return connection.qp->Dispatch->NdkReceive(connection.qp, ReceiveContext(slot), sge, 2);
    }

    NTSTATUS SendControl(Connection& connection, Kind kind, uint64_t value = 0) {
        const size_t entry = connection.set * kRingEntries + connection.ring_next++ % kRingEntries;
        auto* control = reinterpret_cast<Control*>(side_.buffer + control_offset_ + entry * sizeof(Control));
        *control = Control{kMagic, kind, connection.owed, Test::kWrite, 0, value};
        connection.owed = 0;
        NDK_SGE sge = Sge(side_, control_offset_ + entry * sizeof(Control), sizeof(Control));
        return connection.qp->Dispatch->NdkSend(connection.qp, kSendContext, &sge, 1, 0);
    }

    void Handle(const NDK_RESULT_EX& result) {
        const auto found = connections_.find(reinterpret_cast<uint64_t>(result.QPContext));
        if (found == connections_.end()) return;  // a connection already forgotten: its flushed requests
        Connection& connection = *found->second;
        if (connection.dropped) return;
        if (result.Status != STATUS_SUCCESS) {
            // Flushed by the client's own disconnect. After its Leave the flush is expected too: the flushed
            // receives can be read before the disconnect event has set `disconnected` (with -q 4, about 1 run in
            // 10 reported 2 of 4 clean leaves as failures).
            if (connection.disconnected || connection.leaving) return;
            char described[256], cause[160];
            SoftNdkFormatProviderError(result.ProviderErrorCode, cause, sizeof(cause));
            std::fprintf(stderr, "ndkperf server: client %s: a request failed: %s, cause %s\n", connection.peer.c_str(),
                         ndk_status_describe(result.Status, described, sizeof(described)), cause);
            return Drop(connection, "its connection is in error", STATUS_SUCCESS);
        }
        if (!IsReceive(result.RequestContext)) return;  // a send of ours
        if (connection.role != Role::kTests)
            return Drop(connection, "it sent on a connection that carries no tests", STATUS_SUCCESS);
        const size_t slot = SlotOf(result.RequestContext);
        if (slot >= kServerReceives) return;
        Control control{};
        const bool is_control = result.BytesTransferred == sizeof(Control);
        if (is_control)
            std::memcpy(&control, side_.buffer + slots_offset_ + (connection.set * kServerReceives + slot) * kSlot,
                        sizeof(control));
        NTSTATUS status = PostReceive(connection, slot);
        if (!NT_SUCCESS(status)) return Drop(connection, "NdkReceive failed", status);
        ++connection.owed;
        if (is_control && control.magic == kMagic) {
            switch (control.kind) {
                case Kind::kStart:
                    connection.pong = control.test == Test::kPingPong;
                    if (control.test == Test::kConnections)
                        status = SendControl(connection, Kind::kDone, ResidentKiB());
                    break;
                case Kind::kDone:
                    connection.pong = false;
                    status = SendControl(connection, Kind::kDone, ResidentKiB());
                    break;
                case Kind::kLeave:
                    connection.leaving = true;
                    break;
                case Kind::kQuit:
                    std::fprintf(stderr, "ndkperf server: client %s sent Quit; the server ends\n",
                                 connection.peer.c_str());
                    quit_ = true;
                    break;
                default:
                    break;
            }
        } else if (connection.pong) {  // the pong returns the ping's receive (the Start's is returned by the Done)
            --connection.owed;
            NDK_SGE sge = Sge(side_, data_bytes_, std::min<size_t>(result.BytesTransferred, kMessageArea));
            status = connection.qp->Dispatch->NdkSend(connection.qp, kSendContext, &sge, 1, 0);
        } else if (connection.owed >= kCreditBatch) {
            status = SendControl(connection, Kind::kCredit);
        }
        // A refused post (STATUS_INSUFFICIENT_RESOURCES: the client does not take what we send) drops the client.
        if (!NT_SUCCESS(status)) Drop(connection, "NdkSend failed", status);
    }

    const Options& options_;
    ndktools::Side side_;
    size_t data_bytes_ = 0;
    MDL* data_mdl_ = nullptr;
    NDK_MR* data_mr_ = nullptr;
    UINT32 data_token_ = 0;
    size_t control_offset_ = 0;
    size_t slots_offset_ = 0;
    std::vector<bool> sets_used_;
    ndktools::IncomingConnectors incoming_;  // before listener_: its callback runs until the listener closes
    NDK_LISTENER* listener_ = nullptr;
    std::map<uint64_t, std::unique_ptr<Connection>> connections_;
    uint64_t next_id_ = 1;
    uint64_t refused_ = 0;
    uint64_t loops_ = 0;
    bool quit_ = false;
};

}  // namespace

int RunServer(const Options& options) {
    Server server(options);
    return server.Run();
}

}  // namespace ndkperf
