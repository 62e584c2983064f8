// NDK_CONNECTOR_DISPATCH (CM-01 … CM-30) over the in-process fabric. Rule: the link is never shut down while
// a connection's mutex is held: its idle action may run at once and take that mutex (as a terminate from a
// poster's thread does).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <new>

#include "api/cm_objects.h"

namespace softndk::api {

void PostDisconnectEvent(ConnectorObject* connector) {
    if (connector->disconnect_event == nullptr && connector->disconnect_event_ex == nullptr) return;
    // The connector may be closing on another thread with its last reference gone (its teardown waits for the
    // caller's lock): then it hears nothing more.
    if (!connector->lifetime.TryAddRef()) return;
    connector->adapter->executor->Post([connector] {
        if (connector->disconnect_event_ex != nullptr)
            connector->disconnect_event_ex(connector->disconnect_context, 0);  // CM-30: no reason supplied
        else
            connector->disconnect_event(connector->disconnect_context);
        connector->lifetime.Release();
    });
}

NTSTATUS CopyConnectionData(const std::vector<uint8_t>& peer_data, PVOID data, ULONG* length) {
    const auto required = static_cast<ULONG>(peer_data.size());
    const ULONG copied = std::min(*length, required);
    if (data != nullptr && copied != 0) std::memcpy(data, peer_data.data(), copied);  // none sent: no source at all
    const bool query = data == nullptr && *length == 0;                               // CM-11 (a)
    const bool fits = *length >= required;
    *length = required;
    return query || fits ? STATUS_SUCCESS : STATUS_BUFFER_TOO_SMALL;
}

namespace {

using engine::ProviderFunction;

// Calls the connector's disconnect callback once (CM-26), on its adapter's provider thread.
void IndicateDisconnectLocked(Connection& connection, int side) {
    ConnectorObject* connector = connection.side[side];
    if (connector == nullptr || connection.disconnect_indicated[side] || connection.disconnect_called[side]) return;
    connection.disconnect_indicated[side] = true;
    PostDisconnectEvent(connector);
}

// Stops the link's posts, outside the connection mutex (a terminate takes it). True when no post is running;
// otherwise `on_idle` runs on the provider thread once the last one has left (CB-12: nothing here waits).
bool ShutDownLink(const std::shared_ptr<Connection>& connection, AdapterObject& adapter,
                  std::function<void()> on_idle) {
    if (!connection->link) return true;
    // The action keeps the connection (and its link) alive until the posts are out.
    return connection->link->Shutdown([connection, &adapter, on_idle = std::move(on_idle)] {
        if (on_idle) adapter.executor->Post(on_idle);
    });
}

}  // namespace

// What a closing connector holds that a post may still reach: released once the link is idle.
void ReleaseConnectorHolds(ConnectorObject* connector) {
    if (connector->qp != nullptr) connector->qp->lifetime.Release();
    if (connector->holds_endpoint) cm::Fabric::Instance().Release(connector->endpoint);
    if (connector->listener != nullptr) connector->listener->lifetime.Release();
    if (connector->shared != nullptr) connector->shared->lifetime.Release();
}

namespace {

// LIFE-09/CM-18 … CM-23: a close cancels what is pending, aborts an established connection and releases the
// QP, endpoint, listener and shared-endpoint references. It pends while a post is still inside the link.
bool ConnectorTeardown(void* object) {
    auto* connector = static_cast<ConnectorObject*>(object);
    if (connector->wire) return WireTeardown(connector);
    std::shared_ptr<Connection> connection = std::move(connector->connection);
    Finish finishes[2];
    NTSTATUS statuses[2] = {STATUS_SUCCESS, STATUS_SUCCESS};
    Finish peer_disconnect;
    QpObject* peer_qp = nullptr;
    bool tuple_held = false;
    if (connection) {
        const int me = connector->side;
        const int peer = 1 - me;
        std::lock_guard lock(connection->mutex);
        const ConnectorState state = connection->state[me];
        if (state == ConnectorState::kIncoming && connection->connect_finish) {
            finishes[0] = std::move(connection->connect_finish);  // closing an offered connector refuses it
            statuses[0] = STATUS_CONNECTION_REFUSED;
        }
        if (state == ConnectorState::kConnectReady && connection->accept_finish) {
            finishes[1] = std::move(connection->accept_finish);  // the active side abandoned (CM-08)
            statuses[1] = STATUS_CONNECTION_ABORTED;
        }
        if (connection->state[peer] == ConnectorState::kConnected) IndicateDisconnectLocked(*connection, peer);
        if (connection->disconnect_finish[peer]) {
            // Our close ends the peer's wait. Its NdkDisconnect completes once the link is idle, with its QP
            // flushed, as on the NdkDisconnect path (CM-24 b, CM-25); the QP is pinned until then.
            peer_disconnect = std::move(connection->disconnect_finish[peer]);
            if (connection->side[peer] != nullptr) {
                peer_qp = connection->side[peer]->qp;
                peer_qp->lifetime.AddRef();
            }
            if (connection->link) connection->link->PeerDisconnected(me);
        }
        connection->state[me] = ConnectorState::kDone;
        if (connection->state[peer] == ConnectorState::kConnected ||
            connection->state[peer] == ConnectorState::kDisconnecting)
            connection->state[peer] = ConnectorState::kDone;  // CM-28: the connection is over for both
        connection->side[me] = nullptr;
        tuple_held = connection->tuple_held;
        connection->tuple_held = false;
    }
    auto end_peer_disconnect = [peer_qp, peer_disconnect] {
        if (peer_qp != nullptr) {
            peer_qp->qp.Flush();
            peer_qp->lifetime.Release();
        }
        if (peer_disconnect) peer_disconnect(STATUS_SUCCESS);
    };
    bool idle = true;
    if (connection) {
        idle = ShutDownLink(connection, *connector->adapter, [connector, end_peer_disconnect] {
            ReleaseConnectorHolds(connector);
            end_peer_disconnect();
            connector->lifetime.TeardownDone();
        });
        if (tuple_held) cm::Fabric::Instance().RemoveConnection(connection->local[0], connection->local[1]);
    }
    for (int i = 0; i < 2; ++i)
        if (finishes[i]) finishes[i](statuses[i]);
    if (!idle) return false;
    end_peer_disconnect();
    ReleaseConnectorHolds(connector);
    return true;
}
// LIFE-09: a close cancels the connector's own pending NdkConnect, NdkAccept and NdkDisconnect (they would
// otherwise hold it open). The peer sees the connection abandoned. Completions go to the provider thread.
void ConnectorCancel(void* object) {
    auto* connector = static_cast<ConnectorObject*>(object);
    if (connector->wire) return WireCancel(connector);
    std::shared_ptr<Connection> connection = connector->connection;
    if (!connection) return;
    std::vector<Finish> cancelled;
    {
        std::lock_guard lock(connection->mutex);
        const int me = connector->side;
        if (me == 0 && connection->state[0] == ConnectorState::kConnecting && connection->connect_finish) {
            cancelled.push_back(std::move(connection->connect_finish));
            connection->state[0] = ConnectorState::kDone;  // a later NdkAccept of the offer is aborted (CM-08)
        }
        if (me == 1 && connection->state[1] == ConnectorState::kAccepting && connection->accept_finish) {
            cancelled.push_back(std::move(connection->accept_finish));
            connection->state[1] = ConnectorState::kDone;  // the peer's NdkCompleteConnect is aborted (CM-07)
        }
        if (connection->disconnect_finish[me]) cancelled.push_back(std::move(connection->disconnect_finish[me]));
    }
    if (cancelled.empty()) return;
    connector->adapter->executor->Post([cancelled = std::move(cancelled)] {
        for (const Finish& finish : cancelled) finish(STATUS_CANCELLED);
    });
}
constexpr Lifetime::Ops kConnectorOps{&ConnectorTeardown, &DestroyObject<ConnectorObject>, &ConnectorCancel};

NTSTATUS CheckPrivateData(const PVOID data, ULONG length, ULONG limit, const char* what) {
    if ((data == nullptr && length > 0) || length > limit) {
        SetLastErrorText("%s: private data NULL with a length, or longer than the adapter allows (CM-10)", what);
        return STATUS_INVALID_PARAMETER;
    }
    return STATUS_SUCCESS;
}

uint32_t Cap(uint32_t value, uint32_t limit) {
    return value < limit ? value : limit;
}

// Gives back what one failed connect attempt took (the 4-tuple, the QP, the endpoint and shared-endpoint
// references), so the consumer may try again on the same connector and its close releases nothing twice. The
// connection record stays for NdkGetConnectionData of a reject's private data (CM-12).
}  // namespace

void UndoConnect(ConnectorObject* connector) {
    if (connector->wire) {  // the wire's attempt
        if (connector->wire->tcp) connector->wire->tcp->Close(nullptr);
        ReleaseWireTuple(*connector->wire);
    }
    if (std::shared_ptr<Connection> connection = connector->connection) {
        bool tuple_held;
        {
            std::lock_guard lock(connection->mutex);
            tuple_held = connection->tuple_held;
            connection->tuple_held = false;
        }
        if (tuple_held) cm::Fabric::Instance().RemoveConnection(connection->local[0], connection->local[1]);
    }
    if (connector->qp != nullptr) {
        connector->qp->associated = false;  // a refused QP may connect again
        connector->qp->lifetime.Release();
        connector->qp = nullptr;
    }
    if (connector->holds_endpoint) cm::Fabric::Instance().Release(connector->endpoint);
    connector->holds_endpoint = false;
    if (connector->shared != nullptr) connector->shared->lifetime.Release();
    connector->shared = nullptr;
    connector->attempt_failed = true;
}

namespace {

// Shared body of NdkConnect and NdkConnectWithSharedEndpoint once the QP and the local endpoint are held.
NTSTATUS StartConnect(ConnectorObject* connector, const cm::Endpoint& local, const cm::Endpoint& destination,
                      ULONG inbound, ULONG outbound, const PVOID data, ULONG length,
                      NDK_FN_REQUEST_COMPLETION completion, PVOID context, ProviderFunction function) {
    AdapterObject& adapter = *connector->adapter;
    auto connection = std::make_shared<Connection>();
    connection->side[0] = connector;
    connection->local[0] = local;
    connection->local[1] = destination;
    connection->private_data[0].assign(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + length);
    connection->requested_inbound[0] = Cap(inbound, adapter.info.MaxInboundReadLimit);  // CM-03
    connection->requested_outbound[0] = Cap(outbound, adapter.info.MaxOutboundReadLimit);
    connector->connection = connection;
    connector->attempt_failed = false;
    if (!cm::Fabric::Instance().AddConnection(local, destination)) {
        SetLastErrorText("NdkConnect: this 4-tuple is connected already (CM-04, CM-06)");
        UndoConnect(connector);
        return STATUS_ADDRESS_ALREADY_EXISTS;
    }
    connection->tuple_held = true;
    return RunRequest(
        adapter, function, connector->lifetime, completion, context,
        [connector, connection, destination](const Finish& finish) -> NTSTATUS {
            {
                std::lock_guard lock(connection->mutex);
                if (connector->lifetime.closing()) {  // LIFE-09: closed before this pended work ran
                    connection->state[0] = ConnectorState::kDone;
                    return STATUS_CANCELLED;
                }
                connection->connect_finish = finish;
            }
            std::shared_ptr<Connection> offered = connection;
            NTSTATUS status = cm::Fabric::Instance().Connect(destination, &offered);
            if (NT_SUCCESS(status)) return STATUS_PENDING;  // completes on accept or reject
            std::lock_guard lock(connection->mutex);
            connection->connect_finish = nullptr;
            connection->state[0] = ConnectorState::kDone;
            SetLastErrorText("NdkConnect: no listener accepts connections there (CM-04)");
            return status;
        },
        [connector] { UndoConnect(connector); });
}

NTSTATUS CommonConnectChecks(ConnectorObject* connector, QpObject* qp, const PVOID data, ULONG length,
                             NDK_FN_REQUEST_COMPLETION completion) {
    if (connector == nullptr || qp == nullptr || completion == nullptr)
        return InvalidParameter("NdkConnect: NULL or foreign connector, QP or RequestCompletion");
    if (qp->pd->adapter != connector->adapter) return InvalidParameter("NdkConnect: the QP belongs to another adapter");
    NTSTATUS status = CheckPrivateData(data, length, connector->adapter->info.MaxCallerData, "NdkConnect");
    if (!NT_SUCCESS(status)) return status;
    // A connector whose last attempt failed may try again; one that connected (or is connecting) may not.
    if (((connector->connection || connector->wire) && !connector->attempt_failed) || qp->associated.exchange(true)) {
        SetLastErrorText("NdkConnect: the connector or QP has been used already (CM-28)");
        return STATUS_INVALID_DEVICE_STATE;
    }
    connector->qp = qp;  // held while associated (LIFE-12)
    qp->lifetime.AddRef();
    return STATUS_SUCCESS;
}

NTSTATUS Connect(NDK_CONNECTOR* handle, NDK_QP* qp_handle, const PSOCKADDR source, ULONG source_length,
                 const PSOCKADDR destination, ULONG destination_length, ULONG inbound, ULONG outbound, const PVOID data,
                 ULONG length, NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    QpObject* qp = FromHandle<QpObject>(qp_handle);
    cm::Endpoint local;
    cm::Endpoint remote;
    if (!NT_SUCCESS(cm::EndpointFromSockaddr(source, source_length, &local)) ||
        !NT_SUCCESS(cm::EndpointFromSockaddr(destination, destination_length, &remote)) ||
        local.family != remote.family)
        return InvalidParameter(
            "NdkConnect: source and destination must be AF_INET or AF_INET6 SOCKADDRs of one family");
    if (connector != nullptr && !AdapterOwnsAddress(*connector->adapter, local, false)) {
        SetLastErrorText("NdkConnect: the source address is not an address of this adapter (CM-04)");
        return STATUS_INVALID_ADDRESS;
    }
    NTSTATUS status = CommonConnectChecks(connector, qp, data, length, completion);
    if (!NT_SUCCESS(status)) return status;
    const bool pick_port = local.port == 0;
    status = cm::Fabric::Instance().Bind(&local);  // CM-05: port 0 takes an ephemeral port
    if (!NT_SUCCESS(status)) {
        UndoConnect(connector);
        return status;
    }
    connector->endpoint = local;
    connector->holds_endpoint = true;             // CM-20: released when the connector closes
    if (UsesWire(*connector->adapter, remote)) {  // issue 7 §4: the listener is in another process or host
        connector->connection.reset();
        return WireConnect(connector, local, remote, inbound, outbound, data, length, pick_port, completion, context,
                           ProviderFunction::NdkConnect);
    }
    connector->wire.reset();
    return StartConnect(connector, local, remote, inbound, outbound, data, length, completion, context,
                        ProviderFunction::NdkConnect);
}

NTSTATUS ConnectWithSharedEndpoint(NDK_CONNECTOR* handle, NDK_QP* qp_handle, NDK_SHARED_ENDPOINT* shared_handle,
                                   const PSOCKADDR destination, ULONG destination_length, ULONG inbound, ULONG outbound,
                                   const PVOID data, ULONG length, NDK_FN_REQUEST_COMPLETION completion,
                                   PVOID context) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    QpObject* qp = FromHandle<QpObject>(qp_handle);
    SharedEndpointObject* shared = FromHandle<SharedEndpointObject>(shared_handle);
    cm::Endpoint remote;
    if (shared == nullptr || !NT_SUCCESS(cm::EndpointFromSockaddr(destination, destination_length, &remote)) ||
        remote.family != shared->endpoint.family)
        return InvalidParameter("NdkConnectWithSharedEndpoint: NULL shared endpoint or a bad destination");
    NTSTATUS status = CommonConnectChecks(connector, qp, data, length, completion);
    if (!NT_SUCCESS(status)) return status;
    cm::Fabric::Instance().AddReference(shared->endpoint);  // CM-21
    connector->endpoint = shared->endpoint;
    connector->holds_endpoint = true;
    connector->shared = shared;
    shared->lifetime.AddRef();
    if (UsesWire(*connector->adapter, remote)) {  // the socket shares the port (SO_REUSEADDR)
        connector->connection.reset();
        return WireConnect(connector, shared->endpoint, remote, inbound, outbound, data, length, false, completion,
                           context, ProviderFunction::NdkConnectWithSharedEndpoint);
    }
    connector->wire.reset();
    return StartConnect(connector, shared->endpoint, remote, inbound, outbound, data, length, completion, context,
                        ProviderFunction::NdkConnectWithSharedEndpoint);
}

template <class Callback>
NTSTATUS CompleteConnectCommon(NDK_CONNECTOR* handle, Callback callback, PVOID callback_context,
                               NDK_FN_REQUEST_COMPLETION completion, PVOID context, ProviderFunction function,
                               bool extended) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    if (connector == nullptr || completion == nullptr)
        return InvalidParameter("NdkCompleteConnect: NULL connector or RequestCompletion");
    if (connector->wire)
        return WireCompleteConnect(connector, reinterpret_cast<void*>(callback), callback_context, extended, completion,
                                   context, function);
    return RunRequest(
        *connector->adapter, function, connector->lifetime, completion, context,
        [connector, callback, callback_context, extended](const Finish&) -> NTSTATUS {
            std::shared_ptr<Connection> connection = connector->connection;
            if (!connection) return STATUS_CONNECTION_INVALID;
            Finish accept;
            {
                std::lock_guard lock(connection->mutex);
                if (connector->side != 0 || connection->state[0] != ConnectorState::kConnectReady)
                    return STATUS_CONNECTION_INVALID;  // CM-07: not connecting
                if (connection->state[1] != ConnectorState::kAccepting) {
                    connection->state[0] = ConnectorState::kDone;
                    return STATUS_CONNECTION_ABORTED;  // CM-07: the accepting peer abandoned
                }
                if (extended)
                    connector->disconnect_event_ex = reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK_EX>(callback);
                else
                    connector->disconnect_event = reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK>(callback);
                connector->disconnect_context = callback_context;
                connection->link->Establish();
                connection->state[0] = ConnectorState::kConnected;
                connection->state[1] = ConnectorState::kConnected;
                accept = std::move(connection->accept_finish);
            }
            if (accept) accept(STATUS_SUCCESS);
            return STATUS_SUCCESS;
        });
}

NTSTATUS CompleteConnect(NDK_CONNECTOR* handle, NDK_FN_DISCONNECT_EVENT_CALLBACK event, PVOID event_context,
                         NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    return CompleteConnectCommon(handle, reinterpret_cast<void*>(event), event_context, completion, context,
                                 ProviderFunction::NdkCompleteConnect, false);
}

NTSTATUS CompleteConnectEx(NDK_CONNECTOR* handle, NDK_FN_DISCONNECT_EVENT_CALLBACK_EX event, PVOID event_context,
                           NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    return CompleteConnectCommon(handle, reinterpret_cast<void*>(event), event_context, completion, context,
                                 ProviderFunction::NdkCompleteConnectEx, true);
}

// CM-08: an NdkAccept whose peer never calls NdkCompleteConnect ends with STATUS_IO_TIMEOUT; the connection is
// over (the peer's NdkCompleteConnect is then aborted, CM-07).
void ArmAcceptTimeout(AdapterObject& adapter, const std::shared_ptr<Connection>& connection, uint32_t timeout_ms) {
    std::weak_ptr<Connection> weak = connection;
    adapter.executor->PostAfter(std::chrono::milliseconds(timeout_ms), [weak, &adapter] {
        std::shared_ptr<Connection> connection = weak.lock();
        if (!connection) return;
        Finish timed_out;
        {
            std::lock_guard lock(connection->mutex);
            if (connection->state[1] != ConnectorState::kAccepting || !connection->accept_finish) return;
            timed_out = std::move(connection->accept_finish);
            connection->state[1] = ConnectorState::kDone;
        }
        ShutDownLink(connection, adapter, nullptr);
        SetLastErrorText("NdkAccept: the peer did not call NdkCompleteConnect in time (CM-08)");
        timed_out(STATUS_IO_TIMEOUT);
    });
}

NTSTATUS AcceptCommon(NDK_CONNECTOR* handle, NDK_QP* qp_handle, ULONG inbound, ULONG outbound, const PVOID data,
                      ULONG length, void* event, PVOID event_context, bool extended,
                      NDK_FN_REQUEST_COMPLETION completion, PVOID context, ProviderFunction function) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    QpObject* qp = FromHandle<QpObject>(qp_handle);
    if (connector == nullptr || qp == nullptr || completion == nullptr)
        return InvalidParameter("NdkAccept: NULL or foreign connector, QP or RequestCompletion");
    if (qp->pd->adapter != connector->adapter) return InvalidParameter("NdkAccept: the QP belongs to another adapter");
    NTSTATUS status = CheckPrivateData(data, length, connector->adapter->info.MaxCalleeData, "NdkAccept");
    if (!NT_SUCCESS(status)) return status;
    const bool wire = connector->wire && !connector->wire->active;
    std::shared_ptr<Connection> connection = connector->connection;
    if (!wire && (!connection || connector->side != 1))
        return InvalidParameter("NdkAccept: not a connector from a connect event");
    if (qp->associated.exchange(true)) {
        SetLastErrorText("NdkAccept: the QP has been used already (CM-28)");
        return STATUS_INVALID_DEVICE_STATE;
    }
    connector->qp = qp;
    qp->lifetime.AddRef();
    const AdapterObject& adapter = *connector->adapter;
    const uint32_t my_inbound = Cap(inbound, adapter.info.MaxInboundReadLimit);
    const uint32_t my_outbound = Cap(outbound, adapter.info.MaxOutboundReadLimit);
    if (wire)
        return WireAccept(connector, qp, my_inbound, my_outbound, data, length, event, event_context, extended,
                          completion, context, function);
    // A failure before the link joined the QPs gives the QP back (the consumer may accept with it again); after,
    // the QP is spent (CM-28) and the connector's close releases it once the link is idle.
    auto undo = [connector, connection] {
        bool linked;
        {
            std::lock_guard lock(connection->mutex);
            linked = connection->link != nullptr;
        }
        if (linked || connector->qp == nullptr) return;
        connector->qp->associated = false;
        connector->qp->lifetime.Release();
        connector->qp = nullptr;
    };
    return RunRequest(
        *connector->adapter, function, connector->lifetime, completion, context,
        [=](const Finish& finish) -> NTSTATUS {
            Finish connect;
            {
                std::lock_guard lock(connection->mutex);
                if (connector->lifetime.closing()) return STATUS_CANCELLED;  // LIFE-09
                if (connection->state[1] != ConnectorState::kIncoming || connection->side[0] == nullptr ||
                    connection->state[0] != ConnectorState::kConnecting)
                    return STATUS_CONNECTION_ABORTED;  // CM-08: the connecting peer abandoned
                connection->private_data[1].assign(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + length);
                // CM-03: each side's inbound limit is lowered to the other's outbound, and vice versa.
                connection->effective_inbound[1] = std::min(my_inbound, connection->requested_outbound[0]);
                connection->effective_outbound[1] = std::min(my_outbound, connection->requested_inbound[0]);
                connection->effective_inbound[0] = connection->effective_outbound[1];
                connection->effective_outbound[0] = connection->effective_inbound[1];
                if (extended)
                    connector->disconnect_event_ex = reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK_EX>(event);
                else
                    connector->disconnect_event = reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK>(event);
                connector->disconnect_context = event_context;
                std::weak_ptr<Connection> weak = connection;
                // Deferred when either adapter asks for it (SOFTNDK_TRANSPORT=deferred).
                const bool deferred =
                    connector->adapter->deferred_links || connection->side[0]->adapter->deferred_links;
                connection->link = std::make_unique<transport::InProcessLink>(
                    &connection->side[0]->qp->qp, &qp->qp,
                    [weak](uint32_t) {
                        // RFC 5040 terminate: both consumers hear of it once (CM-26).
                        if (std::shared_ptr<Connection> dead = weak.lock()) {
                            std::lock_guard lock(dead->mutex);
                            for (int side = 0; side < 2; ++side) IndicateDisconnectLocked(*dead, side);
                        }
                    },
                    deferred ? connection->side[0]->adapter->progress.get() : nullptr,
                    deferred ? connector->adapter->progress.get() : nullptr);
                connection->link->Start(connection->effective_inbound, connection->effective_outbound);
                connection->state[0] = ConnectorState::kConnectReady;
                connection->state[1] = ConnectorState::kAccepting;
                connection->accept_finish = finish;
                connect = std::move(connection->connect_finish);
            }
            if (const uint32_t timeout = connector->adapter->accept_timeout_ms; timeout != 0)
                ArmAcceptTimeout(*connector->adapter, connection, timeout);
            if (connect) connect(STATUS_SUCCESS);
            return STATUS_PENDING;  // completes at the peer's NdkCompleteConnect (CM-08)
        },
        undo);
}

NTSTATUS Accept(NDK_CONNECTOR* handle, NDK_QP* qp, ULONG inbound, ULONG outbound, const PVOID data, ULONG length,
                NDK_FN_DISCONNECT_EVENT_CALLBACK event, PVOID event_context, NDK_FN_REQUEST_COMPLETION completion,
                PVOID context) {
    return AcceptCommon(handle, qp, inbound, outbound, data, length, reinterpret_cast<void*>(event), event_context,
                        false, completion, context, ProviderFunction::NdkAccept);
}

NTSTATUS AcceptEx(NDK_CONNECTOR* handle, NDK_QP* qp, ULONG inbound, ULONG outbound, const PVOID data, ULONG length,
                  NDK_FN_DISCONNECT_EVENT_CALLBACK_EX event, PVOID event_context, NDK_FN_REQUEST_COMPLETION completion,
                  PVOID context) {
    return AcceptCommon(handle, qp, inbound, outbound, data, length, reinterpret_cast<void*>(event), event_context,
                        true, completion, context, ProviderFunction::NdkAcceptEx);
}

// CM-09: synchronous.
NTSTATUS Reject(NDK_CONNECTOR* handle, const PVOID data, ULONG length) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    if (connector == nullptr) return InvalidParameter("NdkReject: not a connector");
    NTSTATUS status = CheckPrivateData(data, length, connector->adapter->info.MaxCalleeData, "NdkReject");
    if (!NT_SUCCESS(status)) return status;
    if (connector->wire) return WireReject(connector, data, length);
    std::shared_ptr<Connection> connection = connector->connection;
    if (!connection) return STATUS_CONNECTION_INVALID;
    Finish finish;
    NTSTATUS finish_status;
    {
        std::lock_guard lock(connection->mutex);
        const int me = connector->side;
        if (me == 1 && connection->state[1] == ConnectorState::kIncoming) {
            if (connection->state[0] != ConnectorState::kConnecting) return STATUS_CONNECTION_ABORTED;
            connection->private_data[1].assign(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + length);
            finish = std::move(connection->connect_finish);
            finish_status = STATUS_CONNECTION_REFUSED;  // CM-04: the peer rejected
            connection->state[1] = ConnectorState::kDone;
            connection->state[0] = ConnectorState::kConnectReady;  // may read the reject data (CM-12)
        } else if (me == 0 && connection->state[0] == ConnectorState::kConnectReady &&
                   connection->state[1] == ConnectorState::kAccepting) {
            finish = std::move(connection->accept_finish);  // AMB-33: the passive NdkAccept is aborted
            finish_status = STATUS_CONNECTION_ABORTED;
            connection->state[0] = ConnectorState::kDone;
            connection->state[1] = ConnectorState::kDone;
        } else {
            SetLastErrorText("NdkReject: nothing to reject on this connector");
            return STATUS_INVALID_DEVICE_STATE;
        }
    }
    ShutDownLink(connection, *connector->adapter, nullptr);  // the connectors' closes wait for idle
    if (finish) finish(finish_status);
    return STATUS_SUCCESS;
}

// CM-11: the exact size rules.
NTSTATUS GetConnectionData(NDK_CONNECTOR* handle, ULONG* inbound, ULONG* outbound, PVOID data, ULONG* length) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    if (connector == nullptr || length == nullptr)
        return InvalidParameter("NdkGetConnectionData: NULL connector or length");
    if (data == nullptr && *length > 0)
        return InvalidParameter("NdkGetConnectionData: NULL buffer with a length (CM-11b)");
    if (connector->wire) return WireGetConnectionData(connector, inbound, outbound, data, length);
    std::shared_ptr<Connection> connection = connector->connection;
    if (!connection) return STATUS_CONNECTION_INVALID;
    std::lock_guard lock(connection->mutex);
    const int me = connector->side;
    const ConnectorState state = connection->state[me];
    if (state != ConnectorState::kIncoming && state != ConnectorState::kConnectReady) {
        SetLastErrorText("NdkGetConnectionData: only after the connect event or a completed NdkConnect (CM-12)");
        return STATUS_INVALID_DEVICE_STATE;
    }
    const AdapterObject& adapter = *connector->adapter;
    if (inbound != nullptr)
        *inbound = me == 1 ? std::min(adapter.info.MaxInboundReadLimit, connection->requested_outbound[0])
                           : connection->effective_inbound[0];
    if (outbound != nullptr)
        *outbound = me == 1 ? std::min(adapter.info.MaxOutboundReadLimit, connection->requested_inbound[0])
                            : connection->effective_outbound[0];
    return CopyConnectionData(connection->private_data[1 - me], data, length);
}

NTSTATUS AddressOf(NDK_CONNECTOR* handle, PSOCKADDR address, ULONG* length, bool peer) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    if (connector == nullptr || length == nullptr)
        return InvalidParameter("NdkGetLocalAddress/NdkGetPeerAddress: NULL argument");
    if (connector->wire) return WireAddress(connector, address, length, peer);
    std::shared_ptr<Connection> connection = connector->connection;
    if (!connection) return STATUS_CONNECTION_INVALID;
    const int side = peer ? 1 - connector->side : connector->side;
    return cm::EndpointToSockaddr(connection->local[side], address, length);  // CM-13
}
NTSTATUS GetLocalAddress(NDK_CONNECTOR* handle, PSOCKADDR address, ULONG* length) {
    return AddressOf(handle, address, length, false);
}
NTSTATUS GetPeerAddress(NDK_CONNECTOR* handle, PSOCKADDR address, ULONG* length) {
    return AddressOf(handle, address, length, true);
}

// CM-25 in-process (issue 18 §2): a peer consumer that never answers our NdkDisconnect (neither disconnects nor
// closes) is not waited for beyond DisconnectTimeoutMs, as on the wire: our QP is flushed and the request
// completes with STATUS_IO_TIMEOUT. The connection is over for us; the peer's own NdkDisconnect later completes
// at once (our side has disconnected). No disconnect event for our own request (CM-26).
void ExpireDisconnectAfter(const std::shared_ptr<Connection>& connection, int me, AdapterObject& adapter) {
    const auto timeout = std::chrono::milliseconds(adapter.disconnect_timeout_ms);
    adapter.executor->PostAfter(timeout, [weak = std::weak_ptr<Connection>(connection), me, timeout] {
        std::shared_ptr<Connection> late = weak.lock();
        if (!late) return;
        Finish finish;
        QpObject* qp = nullptr;
        {
            std::lock_guard lock(late->mutex);
            if (!late->disconnect_finish[me] || late->side[me] == nullptr) return;  // answered, or closed
            finish = std::move(late->disconnect_finish[me]);
            late->disconnect_finish[me] = nullptr;
            late->state[me] = ConnectorState::kDone;
            qp = late->side[me]->qp;
            if (qp != nullptr) qp->lifetime.AddRef();  // the connector may close once the finish ran
        }
        SetLastErrorText(
            "NdkDisconnect: the peer neither disconnected nor closed within %lld ms (DisconnectTimeoutMs, "
            "SOFTNDK_DISCONNECT_TIMEOUT_MS): STATUS_IO_TIMEOUT (0xC00000B5), the QP was flushed",
            static_cast<long long>(timeout.count()));
        if (qp != nullptr) {
            qp->qp.Flush();  // CM-25: implicit flush
            qp->lifetime.Release();
        }
        finish(STATUS_IO_TIMEOUT);
    });
}

// CM-24/25: completes once the peer's disconnect arrived, then flushes the QP.
NTSTATUS Disconnect(NDK_CONNECTOR* handle, NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    if (connector == nullptr || completion == nullptr)
        return InvalidParameter("NdkDisconnect: NULL connector or RequestCompletion");
    if (connector->wire) return WireDisconnect(connector, completion, context);
    return RunRequest(*connector->adapter, ProviderFunction::NdkDisconnect, connector->lifetime, completion, context,
                      [connector](const Finish& finish) -> NTSTATUS {
                          std::shared_ptr<Connection> connection = connector->connection;
                          if (!connection) return STATUS_CONNECTION_INVALID;
                          const int me = connector->side;
                          const int peer = 1 - me;
                          Finish peer_finish;
                          QpObject* peer_qp = nullptr;  // pinned under the lock: the peer may be closing
                          bool done;
                          {
                              std::lock_guard lock(connection->mutex);
                              if (connector->lifetime.closing()) return STATUS_CANCELLED;  // LIFE-09
                              const ConnectorState state = connection->state[me];
                              if (state != ConnectorState::kConnected && !connection->disconnect_indicated[me])
                                  return STATUS_CONNECTION_INVALID;
                              connection->disconnect_called[me] = true;
                              connection->state[me] = ConnectorState::kDisconnecting;
                              done = connection->disconnect_called[peer] || connection->side[peer] == nullptr ||
                                     connection->link->terminated();
                              if (done) {
                                  peer_finish = std::move(connection->disconnect_finish[peer]);
                                  connection->state[me] = ConnectorState::kDone;
                                  connection->state[peer] = ConnectorState::kDone;
                                  if (peer_finish && connection->side[peer] != nullptr) {
                                      peer_qp = connection->side[peer]->qp;
                                      peer_qp->lifetime.AddRef();
                                  }
                              } else {
                                  connection->link->PeerDisconnected(me);
                                  IndicateDisconnectLocked(*connection, peer);
                                  connection->disconnect_finish[me] = finish;
                              }
                          }
                          if (!done) {
                              ExpireDisconnectAfter(connection, me, *connector->adapter);
                              return STATUS_PENDING;
                          }
                          // CM-24 (b): completes once no DMA of the QP is running, without waiting for it.
                          auto complete = [connector, peer_qp, peer_finish] {
                              connector->qp->qp.Flush();  // CM-25: implicit flush
                              if (peer_qp != nullptr) {
                                  peer_qp->qp.Flush();  // the peer's pending NdkDisconnect completes, flushed too
                                  peer_qp->lifetime.Release();
                              }
                              if (peer_finish) peer_finish(STATUS_SUCCESS);
                          };
                          if (!ShutDownLink(connection, *connector->adapter, [complete, finish] {
                                  complete();
                                  finish(STATUS_SUCCESS);
                              }))
                              return STATUS_PENDING;
                          complete();
                          return STATUS_SUCCESS;
                      });
}

}  // namespace

NTSTATUS CreateConnector(NDK_ADAPTER* handle, NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_CONNECTOR** out) {
    AdapterObject* adapter = FromHandle<AdapterObject>(handle);
    if (adapter == nullptr || completion == nullptr || out == nullptr)
        return InvalidParameter("NdkCreateConnector: NULL adapter, CreateCompletion or ppNdkConnector");
    return RunCreate(*adapter, ProviderFunction::NdkCreateConnector, adapter->lifetime, completion, context, out,
                     [adapter](NDK_OBJECT_HEADER** header) -> NTSTATUS {
                         auto* connector = new (std::nothrow) ConnectorObject(adapter, kConnectorOps);
                         if (connector == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
                         InitializeHandle(connector->ndk, NdkObjectTypeConnector, adapter->info.Version,
                                          &kConnectorDispatch);
                         *header = &connector->ndk.Header;
                         return STATUS_SUCCESS;
                     });
}

// The passive connector handed to a listener's connect event (CM-15, CM-19).
ConnectorObject* MakePassiveConnector(ListenerObject* listener, std::shared_ptr<Connection> connection) {
    auto* connector = new (std::nothrow) ConnectorObject(listener->adapter, kConnectorOps);
    if (connector == nullptr) return nullptr;
    connector->side = 1;
    connector->connection = connection;
    connector->listener = listener;
    listener->lifetime.AddRef();
    connector->endpoint = listener->endpoint;
    connector->holds_endpoint = true;
    cm::Fabric::Instance().AddReference(listener->endpoint);
    if (connection) {  // in-process; a wire connector gets its WireSide from the caller
        connection->side[1] = connector;
        connection->state[1] = ConnectorState::kIncoming;
    }
    InitializeHandle(connector->ndk, NdkObjectTypeConnector, listener->adapter->info.Version, &kConnectorDispatch);
    return connector;
}

const NDK_CONNECTOR_DISPATCH kConnectorDispatch = {
    [](NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) -> NTSTATUS {
        ConnectorObject* connector = FromHandle<ConnectorObject>(object);
        if (connector == nullptr) return InvalidParameter("NdkCloseConnector: not a connector");
        return RunClose(*connector->adapter, connector->lifetime, completion, context);
    },
    &QueryExtensionInterface,
    &Connect,
    &ConnectWithSharedEndpoint,
    &CompleteConnect,
    &Accept,
    &Reject,
    &GetConnectionData,
    &GetLocalAddress,
    &GetPeerAddress,
    &Disconnect,
    &CompleteConnectEx,
    &AcceptEx,
};

}  // namespace softndk::api
