// NDK_CONNECTOR_DISPATCH over iWARP/TCP (issue 7 §4), one state machine per side (DESIGN §4):
//  - NdkConnect opens TCP and sends an MPA v2 Request: IRD/ORD = the requested inbound/outbound read limits,
//    P2P with a Write RTR offered, the NDK private data after the words. The Reply completes it; a Reject
//    (R set) completes it with STATUS_CONNECTION_REFUSED and its private data (CM-04, CM-12).
//  - NdkCompleteConnect sends the RTR; the responder's NdkAccept completes when it arrives (CM-08), which also
//    keeps the first FPDU from racing the responder's set-up (siw-facts §3.4).
//  - NdkDisconnect is a FIN; it completes at the peer's FIN (CM-24). A lost stream or a Terminate either way
//    puts the QP in error, flushes it and raises the disconnect event once (CM-26).
// Consumer callbacks run on the adapter's provider thread, never on a progress lane.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "api/cm_objects.h"

namespace softndk::api {
namespace {

using engine::ProviderFunction;

// AMB decision (docs/spec-decisions.md): an MPA rev 1 peer sends no IRD/ORD; it is taken as allowing one
// outstanding read each way.
constexpr uint32_t kRev1ReadLimit = 1;

uint32_t Cap(uint32_t value, uint32_t limit) {
    return value < limit ? value : limit;
}

sockaddr_storage ToSockaddr(const cm::Endpoint& endpoint) {
    sockaddr_storage address{};
    ULONG length = sizeof(address);
    cm::EndpointToSockaddr(endpoint, reinterpret_cast<SOCKADDR*>(&address), &length);
    return address;
}

void Post(AdapterObject& adapter, Finish finish, NTSTATUS status) {
    if (finish) adapter.executor->Post([finish = std::move(finish), status] { finish(status); });
}

// CM-26: the disconnect callback once.
void IndicateDisconnectLocked(WireSide& side) {
    if (side.connector == nullptr || side.disconnect_indicated || side.disconnect_called) return;
    side.disconnect_indicated = true;
    PostDisconnectEvent(side.connector);
}

// NdkDisconnect's end: once the lane is done with the QP and no post is inside it (CM-24 b), the QP is closed
// to posts (CM-28), flushed (CM-25), and the request completes with `status`; STATUS_IO_TIMEOUT (the peer's FIN
// did not come in time) resets the stream.
void FinishDisconnectLocked(WireSide& side, NTSTATUS status = STATUS_SUCCESS) {
    Finish finish = std::move(side.disconnect_finish);
    side.disconnect_finish = nullptr;
    side.state = ConnectorState::kDone;
    if (!finish || side.connector == nullptr) return;
    QpObject* qp = side.connector->qp;
    AdapterObject& adapter = *side.connector->adapter;
    side.tcp->Close(
        [&adapter, qp, finish, status] {
            auto complete = [&adapter, qp, finish, status] {
                adapter.executor->Post([qp, finish, status] {
                    if (qp != nullptr) qp->qp.Flush();
                    finish(status);
                });
            };
            if (qp == nullptr || qp->qp.Close(complete)) complete();
        },
        status != STATUS_SUCCESS);
}

// The connection's events (on its lane).
void OnWireEvent(const std::weak_ptr<WireSide>& weak, transport::TcpConnection::Event event, NTSTATUS status) {
    std::shared_ptr<WireSide> side = weak.lock();
    if (!side) return;
    std::lock_guard lock(side->mutex);
    if (side->connector == nullptr) return;
    AdapterObject& adapter = *side->connector->adapter;
    switch (event) {
        case transport::TcpConnection::Event::kMpaReceived: {
            if (side->state != ConnectorState::kConnecting || !side->connect_finish) return;
            const transport::MpaPeer& peer = side->tcp->peer();
            side->peer_data = peer.private_data;
            side->peer_ird = peer.enhanced ? peer.words.ird : kRev1ReadLimit;
            side->peer_ord = peer.enhanced ? peer.words.ord : kRev1ReadLimit;
            // CM-03: each side's inbound limit is lowered to the other's outbound, and vice versa.
            side->inbound = std::min(side->requested_inbound, side->peer_ord);
            side->outbound = std::min(side->requested_outbound, side->peer_ird);
            side->state = ConnectorState::kConnectReady;  // a Reject's private data is readable too (CM-12)
            if (peer.reject) SetLastErrorText("NdkConnect: the peer rejected the connection (MPA Reject)");
            Post(adapter, std::move(side->connect_finish), peer.reject ? STATUS_CONNECTION_REFUSED : STATUS_SUCCESS);
            side->connect_finish = nullptr;
            return;
        }
        case transport::TcpConnection::Event::kEstablished:
            if (side->state != ConnectorState::kAccepting) return;
            side->connector->qp->qp.SetState(engine::QueuePair::State::kConnected);  // before the next FPDU
            side->state = ConnectorState::kConnected;
            Post(adapter, std::move(side->accept_finish), STATUS_SUCCESS);
            side->accept_finish = nullptr;
            return;
        case transport::TcpConnection::Event::kPeerClosed:
            side->peer_closed = true;
            if (side->state == ConnectorState::kDisconnecting) {
                FinishDisconnectLocked(*side);
            } else if (side->state == ConnectorState::kConnected) {
                IndicateDisconnectLocked(*side);
            }
            return;
        case transport::TcpConnection::Event::kFailed:
            if (side->failed) return;
            side->failed = true;
            switch (side->state) {
                case ConnectorState::kConnecting:
                    side->state = ConnectorState::kDone;
                    SetLastErrorText("NdkConnect: the connection failed (0x%08X)", static_cast<unsigned>(status));
                    Post(adapter, std::move(side->connect_finish),
                         status == STATUS_CANCELLED ? STATUS_CONNECTION_ABORTED : status);
                    side->connect_finish = nullptr;
                    break;
                case ConnectorState::kAccepting:
                    side->state = ConnectorState::kDone;  // CM-08: the connecting peer abandoned
                    Post(adapter, std::move(side->accept_finish), STATUS_CONNECTION_ABORTED);
                    side->accept_finish = nullptr;
                    break;
                case ConnectorState::kConnected:
                    IndicateDisconnectLocked(*side);  // the QP is in error and flushed already (RFC 5040 §5.4)
                    break;
                case ConnectorState::kDisconnecting:
                    FinishDisconnectLocked(*side);
                    break;
                default:
                    break;
            }
            return;
    }
}

std::shared_ptr<WireSide> MakeSide(ConnectorObject* connector, bool active) {
    auto side = std::make_shared<WireSide>();
    side->connector = connector;
    side->active = active;
    side->state = active ? ConnectorState::kConnecting : ConnectorState::kIncoming;
    return side;
}

transport::TcpConnection::EventHandler HandlerFor(const std::shared_ptr<WireSide>& side) {
    std::weak_ptr<WireSide> weak = side;
    return [weak](transport::TcpConnection::Event event, NTSTATUS status) { OnWireEvent(weak, event, status); };
}

// CM-08: a step that the peer never answers ends with STATUS_IO_TIMEOUT.
void ArmTimeout(AdapterObject& adapter, const std::shared_ptr<WireSide>& side, ConnectorState waiting,
                uint32_t timeout_ms) {
    if (timeout_ms == 0) return;
    std::weak_ptr<WireSide> weak = side;
    AdapterObject* owner = &adapter;
    adapter.executor->PostAfter(std::chrono::milliseconds(timeout_ms), [weak, waiting, adapter = owner] {
        std::shared_ptr<WireSide> side = weak.lock();
        if (!side) return;
        Finish timed_out;
        {
            std::lock_guard lock(side->mutex);
            if (side->state != waiting) return;
            Finish& pending = waiting == ConnectorState::kConnecting ? side->connect_finish : side->accept_finish;
            if (!pending) return;
            timed_out = std::move(pending);
            pending = nullptr;
            side->state = ConnectorState::kDone;
            side->failed = true;
        }
        // The reset is out before the consumer hears of the timeout, so the peer's next step fails (CM-07).
        side->tcp->Close([adapter, timed_out = std::move(timed_out)]() mutable {
            Post(*adapter, std::move(timed_out), STATUS_IO_TIMEOUT);
        });
    });
}

}  // namespace

bool UsesWire(const AdapterObject& adapter, const cm::Endpoint& destination) {
    if (adapter.transport == SOFTNDK_TRANSPORT_TCP) return true;
    if (adapter.transport != SOFTNDK_TRANSPORT_AUTO) return false;
    return !cm::Fabric::Instance().HasListener(destination);  // a listener elsewhere: another process or host
}

transport::TcpOptions WireOptions(const AdapterObject& adapter) {
    transport::TcpOptions options;
    options.request_crc = adapter.mpa_crc;
    options.rtr_kicks = adapter.rtr_kicks;
    options.mpa_request_timeout = std::chrono::milliseconds(adapter.mpa_request_timeout_ms);
    options.max_half_open = adapter.max_half_open;
    options.accept_retry = std::chrono::milliseconds(adapter.accept_retry_ms);
    options.peer_stall_timeout = std::chrono::milliseconds(adapter.peer_stall_timeout_ms);
    options.faults = adapter.wire_faults;
    options.trace = adapter.trace;
    engine::CompletionExecutor* executor = adapter.executor.get();
    options.after = [executor](std::chrono::milliseconds delay, std::function<void()> job) {
        executor->PostAfter(delay, std::move(job));
    };
    return options;
}

NTSTATUS WireConnect(ConnectorObject* connector, const cm::Endpoint& local, const cm::Endpoint& remote, ULONG inbound,
                     ULONG outbound, const PVOID data, ULONG length, bool pick_port,
                     NDK_FN_REQUEST_COMPLETION completion, PVOID context, ProviderFunction function) {
    AdapterObject& adapter = *connector->adapter;
    std::shared_ptr<WireSide> side = MakeSide(connector, true);
    side->requested_inbound = Cap(inbound, adapter.info.MaxInboundReadLimit);  // CM-03
    side->requested_outbound = Cap(outbound, adapter.info.MaxOutboundReadLimit);
    connector->wire = side;
    connector->attempt_failed = false;
    transport::MpaOffer offer;
    offer.crc = adapter.mpa_crc;
    offer.ird = static_cast<uint16_t>(std::min<uint32_t>(side->requested_inbound, wire::kMpaMaxIrdOrd));
    offer.ord = static_cast<uint16_t>(std::min<uint32_t>(side->requested_outbound, wire::kMpaMaxIrdOrd));
    offer.peer_to_peer = true;  // RFC 6581: the RTR tells the responder that NdkCompleteConnect ran
    // The one RTR offered, so the responder must pick it (issue 8 §3). A Read RTR is a Read Request: without an
    // outbound read it would exceed the responder's IRD (siw refuses it at IRD 0, siw-facts §3.7), so then Write.
    const bool read_rtr = adapter.mpa_read_rtr && side->requested_outbound > 0;
    offer.write_rtr = !read_rtr;
    offer.read_rtr = read_rtr;
    offer.private_data.assign(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + length);
    if (connector->shared != nullptr) {  // CM-06: one connection per 4-tuple on a shared endpoint
        if (!cm::Fabric::Instance().AddConnection(local, remote)) {
            SetLastErrorText("NdkConnectWithSharedEndpoint: this 4-tuple is connected already (CM-06)");
            UndoConnect(connector);
            return STATUS_ADDRESS_ALREADY_EXISTS;
        }
        std::lock_guard lock(side->mutex);
        side->tuple_held = true;
        side->tuple_local = local;
        side->tuple_remote = remote;
    }
    auto undo = [connector] { UndoConnect(connector); };
    return RunRequest(
        adapter, function, connector->lifetime, completion, context,
        [connector, side, local, remote, offer, pick_port](const Finish& finish) -> NTSTATUS {
            std::lock_guard lock(side->mutex);
            if (connector->lifetime.closing()) {  // LIFE-09: closed before this pended work ran
                side->state = ConnectorState::kDone;
                return STATUS_CANCELLED;
            }
            std::shared_ptr<transport::TcpConnection> tcp;
            NTSTATUS status = STATUS_SHARING_VIOLATION;
            for (int attempt = 0; attempt < 32 && status == STATUS_SHARING_VIOLATION; ++attempt) {
                if (attempt > 0) {
                    // CM-05: the fabric's port is taken on this host (another process): the next ephemeral one.
                    cm::Endpoint next = connector->endpoint.WithoutPort();
                    if (!pick_port || !NT_SUCCESS(cm::Fabric::Instance().Bind(&next))) break;
                    cm::Fabric::Instance().Release(connector->endpoint);
                    connector->endpoint = next;
                }
                sockaddr_storage from = ToSockaddr(attempt > 0 ? connector->endpoint : local);
                status =
                    transport::TcpConnection::Connect(connector->adapter->progress.get(), &from, ToSockaddr(remote),
                                                      offer, WireOptions(*connector->adapter), HandlerFor(side), &tcp);
            }
            if (!NT_SUCCESS(status)) {
                side->state = ConnectorState::kDone;
                SetLastErrorText("NdkConnect: the TCP socket could not be bound or connected (0x%08X)",
                                 static_cast<unsigned>(status));
                return status;
            }
            side->tcp = tcp;
            side->connect_finish = finish;
            ArmTimeout(*connector->adapter, side, ConnectorState::kConnecting, connector->adapter->accept_timeout_ms);
            return STATUS_PENDING;  // completes with the Reply, a Reject or a failure
        },
        undo);
}

NTSTATUS WireCompleteConnect(ConnectorObject* connector, void* event, PVOID event_context, bool extended,
                             NDK_FN_REQUEST_COMPLETION completion, PVOID context, ProviderFunction function) {
    std::shared_ptr<WireSide> side = connector->wire;
    return RunRequest(*connector->adapter, function, connector->lifetime, completion, context,
                      [connector, side, event, event_context, extended](const Finish&) -> NTSTATUS {
                          std::lock_guard lock(side->mutex);
                          if (!side->active || side->state != ConnectorState::kConnectReady || side->tcp->peer().reject)
                              return STATUS_CONNECTION_INVALID;  // CM-07: not connecting
                          if (side->failed || side->tcp->StreamLost()) {
                              side->state = ConnectorState::kDone;
                              return STATUS_CONNECTION_ABORTED;  // CM-07: the accepting peer abandoned
                          }
                          if (extended)
                              connector->disconnect_event_ex =
                                  reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK_EX>(event);
                          else
                              connector->disconnect_event = reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK>(event);
                          connector->disconnect_context = event_context;
                          engine::QueuePair& qp = connector->qp->qp;
                          qp.Associate(side->tcp.get(), side->inbound, side->outbound);
                          // The RTR is queued before the QP takes posts, so a post from another thread cannot go
                          // first, and sent once it does, so the peer's answer finds the QP connected (issue 18
                          // §3.4).
                          side->tcp->Establish(&qp, side->inbound, side->outbound);
                          qp.SetState(engine::QueuePair::State::kConnected);
                          side->tcp->SendQueued();
                          side->state = ConnectorState::kConnected;
                          return STATUS_SUCCESS;
                      });
}

NTSTATUS WireAccept(ConnectorObject* connector, QpObject* qp, uint32_t my_inbound, uint32_t my_outbound,
                    const PVOID data, ULONG length, void* event, PVOID event_context, bool extended,
                    NDK_FN_REQUEST_COMPLETION completion, PVOID context, ProviderFunction function) {
    std::shared_ptr<WireSide> side = connector->wire;
    std::vector<uint8_t> reply_data(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + length);
    // A failure before the connection reached the QP gives it back (the consumer may accept with it again, CM-08);
    // a QP that was connected is spent (CM-28). The connection has let go of the QP before a failure is delivered
    // (Shutdown clears its QP before it reports; a timeout reports once the close has run).
    auto undo = [connector, side] {
        std::lock_guard lock(side->mutex);
        if (connector->qp == nullptr) return;
        const engine::QueuePair::State reached = connector->qp->qp.state();
        if (reached == engine::QueuePair::State::kConnected || reached == engine::QueuePair::State::kError) return;
        connector->qp->qp.SetState(engine::QueuePair::State::kIdle);
        connector->qp->associated = false;
        connector->qp->lifetime.Release();
        connector->qp = nullptr;
    };
    return RunRequest(
        *connector->adapter, function, connector->lifetime, completion, context,
        [=](const Finish& finish) -> NTSTATUS {
            std::lock_guard lock(side->mutex);
            if (connector->lifetime.closing()) return STATUS_CANCELLED;                                      // LIFE-09
            if (side->state != ConnectorState::kIncoming || side->failed) return STATUS_CONNECTION_ABORTED;  // CM-08
            side->inbound = std::min(my_inbound, side->peer_ord);                                            // CM-03
            side->outbound = std::min(my_outbound, side->peer_ird);
            if (extended)
                connector->disconnect_event_ex = reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK_EX>(event);
            else
                connector->disconnect_event = reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK>(event);
            connector->disconnect_context = event_context;
            transport::MpaOffer reply;
            reply.crc = connector->adapter->mpa_crc;
            reply.ird = static_cast<uint16_t>(std::min<uint32_t>(side->inbound, wire::kMpaMaxIrdOrd));
            reply.ord = static_cast<uint16_t>(std::min<uint32_t>(side->outbound, wire::kMpaMaxIrdOrd));
            reply.private_data = reply_data;
            qp->qp.Associate(side->tcp.get(), side->inbound, side->outbound);
            qp->qp.SetState(engine::QueuePair::State::kConnecting);
            side->state = ConnectorState::kAccepting;
            side->accept_finish = finish;
            side->tcp->Accept(std::move(reply), &qp->qp, side->inbound, side->outbound);
            ArmTimeout(*connector->adapter, side, ConnectorState::kAccepting, connector->adapter->accept_timeout_ms);
            return STATUS_PENDING;  // completes when the initiator's RTR arrives (CM-08)
        },
        undo);
}

NTSTATUS WireReject(ConnectorObject* connector, const PVOID data, ULONG length) {
    std::shared_ptr<WireSide> side = connector->wire;
    std::lock_guard lock(side->mutex);
    if (!side->active && side->state == ConnectorState::kIncoming) {
        if (side->failed) return STATUS_CONNECTION_ABORTED;
        side->tcp->Reject(std::vector<uint8_t>(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + length));
        side->state = ConnectorState::kDone;
        return STATUS_SUCCESS;
    }
    if (side->active && side->state == ConnectorState::kConnectReady && !side->tcp->peer().reject) {
        side->tcp->Close(nullptr);  // AMB-33: the peer's NdkAccept is aborted when the stream ends
        side->state = ConnectorState::kDone;
        return STATUS_SUCCESS;
    }
    SetLastErrorText("NdkReject: nothing to reject on this connector");
    return STATUS_INVALID_DEVICE_STATE;
}

NTSTATUS WireGetConnectionData(ConnectorObject* connector, ULONG* inbound, ULONG* outbound, PVOID data, ULONG* length) {
    std::shared_ptr<WireSide> side = connector->wire;
    std::lock_guard lock(side->mutex);
    if (side->state != ConnectorState::kIncoming && side->state != ConnectorState::kConnectReady) {
        SetLastErrorText("NdkGetConnectionData: only after the connect event or a completed NdkConnect (CM-12)");
        return STATUS_INVALID_DEVICE_STATE;
    }
    const AdapterObject& adapter = *connector->adapter;
    if (inbound != nullptr)
        *inbound = side->active ? side->inbound : std::min(adapter.info.MaxInboundReadLimit, side->peer_ord);
    if (outbound != nullptr)
        *outbound = side->active ? side->outbound : std::min(adapter.info.MaxOutboundReadLimit, side->peer_ird);
    return CopyConnectionData(side->peer_data, data, length);
}

NTSTATUS WireAddress(ConnectorObject* connector, PSOCKADDR address, ULONG* length, bool peer) {
    std::shared_ptr<WireSide> side = connector->wire;
    std::shared_ptr<transport::TcpConnection> tcp;
    {
        std::lock_guard lock(side->mutex);
        tcp = side->tcp;
    }
    if (!tcp) return STATUS_CONNECTION_INVALID;
    cm::Endpoint endpoint;
    const sockaddr_storage& raw = peer ? tcp->remote_address() : tcp->local_address();
    const ULONG raw_length = raw.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (!NT_SUCCESS(cm::EndpointFromSockaddr(reinterpret_cast<const SOCKADDR*>(&raw), raw_length, &endpoint)))
        return STATUS_CONNECTION_INVALID;
    return cm::EndpointToSockaddr(endpoint, address, length);  // CM-13
}

NTSTATUS WireDisconnect(ConnectorObject* connector, NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    return RunRequest(*connector->adapter, ProviderFunction::NdkDisconnect, connector->lifetime, completion, context,
                      [connector](const Finish& finish) -> NTSTATUS {
                          std::shared_ptr<WireSide> side = connector->wire;
                          std::lock_guard lock(side->mutex);
                          if (connector->lifetime.closing()) return STATUS_CANCELLED;  // LIFE-09
                          // A peer's FIN or a lost stream leaves the side connected until this call.
                          if (side->state != ConnectorState::kConnected) return STATUS_CONNECTION_INVALID;
                          side->disconnect_called = true;
                          side->tcp->Disconnect();  // a FIN once everything queued is out
                          side->state = ConnectorState::kDisconnecting;
                          side->disconnect_finish = finish;
                          if (side->failed && !side->peer_closed) {
                              // After our Terminate: complete once it is out (a Terminate waiting for room in
                              // the socket would be thrown away by the close that follows), within the timeout.
                              side->tcp->WhenDrained([weak = std::weak_ptr(side)] {
                                  std::shared_ptr<WireSide> late = weak.lock();
                                  if (!late) return;
                                  std::lock_guard lock(late->mutex);
                                  if (late->state == ConnectorState::kDisconnecting && late->disconnect_finish)
                                      FinishDisconnectLocked(*late);
                              });
                          }
                          if (side->peer_closed) {
                              FinishDisconnectLocked(*side);
                          } else {  // CM-25: nothing waits for ever on the peer's FIN (nor on a Terminate's room)
                              const auto timeout = std::chrono::milliseconds(connector->adapter->disconnect_timeout_ms);
                              connector->adapter->executor->PostAfter(timeout, [weak = std::weak_ptr(side), timeout] {
                                  std::shared_ptr<WireSide> late = weak.lock();
                                  if (!late) return;
                                  std::lock_guard lock(late->mutex);
                                  if (late->state != ConnectorState::kDisconnecting || !late->disconnect_finish) return;
                                  SetLastErrorText(
                                      "NdkDisconnect: no FIN from the peer within %lld ms (DisconnectTimeoutMs, "
                                      "SOFTNDK_DISCONNECT_TIMEOUT_MS): STATUS_IO_TIMEOUT (0xC00000B5), the connection "
                                      "was reset and the QP flushed",
                                      static_cast<long long>(timeout.count()));
                                  FinishDisconnectLocked(*late, STATUS_IO_TIMEOUT);
                              });
                          }
                          return STATUS_PENDING;  // at the peer's FIN (CM-24), flushed (CM-25)
                      });
}

// LIFE-09: closing cancels the connector's own pending requests (completed on the provider thread).
void WireCancel(ConnectorObject* connector) {
    std::shared_ptr<WireSide> side = connector->wire;
    std::vector<Finish> cancelled;
    {
        std::lock_guard lock(side->mutex);
        for (Finish* pending : {&side->connect_finish, &side->accept_finish, &side->disconnect_finish}) {
            if (*pending) cancelled.push_back(std::move(*pending));
            *pending = nullptr;
        }
        if (!cancelled.empty()) side->state = ConnectorState::kDone;
    }
    if (cancelled.empty()) return;
    connector->adapter->executor->Post([cancelled = std::move(cancelled)] {
        for (const Finish& finish : cancelled) finish(STATUS_CANCELLED);
    });
}

// The connector's close: an offered connection is refused, an established one aborted (the peer sees the
// stream end). It pends until the lane is done with the QP and no post is inside it (CB-12: never waits).
void ReleaseWireTuple(WireSide& side) {
    bool held;
    {
        std::lock_guard lock(side.mutex);
        held = side.tuple_held;
        side.tuple_held = false;
    }
    if (held) cm::Fabric::Instance().RemoveConnection(side.tuple_local, side.tuple_remote);
}

bool WireTeardown(ConnectorObject* connector) {
    std::shared_ptr<WireSide> side = std::move(connector->wire);
    ReleaseWireTuple(*side);
    std::shared_ptr<transport::TcpConnection> tcp;
    {
        std::lock_guard lock(side->mutex);
        if (side->state == ConnectorState::kIncoming && side->tcp) side->tcp->Reject({});  // CM-15: refused
        side->state = ConnectorState::kDone;
        side->connector = nullptr;
        tcp = side->tcp;
    }
    struct Join {
        std::atomic<int> pending{2};
        ConnectorObject* connector;
        // The QP calls into the connection until its last post left: it lives until both arrived.
        std::shared_ptr<transport::TcpConnection> tcp;
    };
    auto join = std::make_shared<Join>();
    join->connector = connector;
    join->tcp = tcp;
    auto arrive = [join] {
        if (join->pending.fetch_sub(1) != 1) return;
        ConnectorObject* closing = join->connector;
        join->tcp.reset();
        closing->adapter->executor->Post([closing] {
            ReleaseConnectorHolds(closing);
            closing->lifetime.TeardownDone();
        });
    };
    if (connector->qp != nullptr) {
        if (connector->qp->qp.Close(arrive)) arrive();
    } else {
        arrive();
    }
    if (tcp)
        tcp->Close(arrive);
    else
        arrive();
    return false;
}

void OfferWireConnection(ListenerObject* listener, std::shared_ptr<transport::TcpConnection> tcp) {
    if (listener->paused.load() || listener->lifetime.closing() || !listener->lifetime.TryAddRef()) {
        tcp->Reject({});  // CM-16, CM-23
        return;
    }
    ConnectorObject* connector = MakePassiveConnector(listener, nullptr);
    if (connector == nullptr) {
        tcp->Reject({});
        listener->lifetime.Release();
        return;
    }
    std::shared_ptr<WireSide> side = MakeSide(connector, false);
    const transport::MpaPeer& peer = tcp->peer();
    side->peer_data = peer.private_data;
    side->peer_ird = peer.enhanced ? peer.words.ird : kRev1ReadLimit;
    side->peer_ord = peer.enhanced ? peer.words.ord : kRev1ReadLimit;
    side->tcp = tcp;
    connector->wire = side;
    tcp->SetHandler(HandlerFor(side));
    listener->adapter->executor->Post([listener, connector] {
        bool closed;
        {
            std::lock_guard lock(listener->mutex);
            closed = listener->closed;
        }
        if (closed)
            connector->lifetime.Close(nullptr, nullptr);  // CM-23: refused (its teardown rejects)
        else
            listener->connect_event(listener->connect_context, &connector->ndk);
        listener->lifetime.Release();
    });
}

}  // namespace softndk::api
