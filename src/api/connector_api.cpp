// NDK_CONNECTOR_DISPATCH (CM-01 … CM-30): validates each call and dispatches it to the connector's
// cm::ConnectionSide, the one connection state machine for both transports (issue 18 §1). What the connector
// holds (its QP, endpoint, listener and shared-endpoint references) is kept here.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

#include "api/cm_objects.h"
#include "cm/connect_plan.h"

namespace softndk::api {
namespace {

using engine::ProviderFunction;

// The connector's disconnect callback, on its adapter's provider thread (CM-26/CM-30); the side makes it once.
void PostDisconnectEvent(ConnectorObject* connector) {
    if (connector->disconnect_event == nullptr && connector->disconnect_event_ex == nullptr) return;
    // The connector may be closing on another thread with its last reference gone: then it hears nothing more.
    if (!connector->lifetime.TryAddRef()) return;
    connector->adapter->executor->Post([connector] {
        if (connector->disconnect_event_ex != nullptr)
            connector->disconnect_event_ex(connector->disconnect_context, 0);  // CM-30: no reason supplied
        else
            connector->disconnect_event(connector->disconnect_context);
        connector->lifetime.Release();
    });
}

// Stores the consumer's disconnect callback; the side calls the result when the connection ends (CM-26).
std::function<void()> DisconnectEventOf(ConnectorObject* connector, void* callback, PVOID context, bool extended) {
    if (extended)
        connector->disconnect_event_ex = reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK_EX>(callback);
    else
        connector->disconnect_event = reinterpret_cast<NDK_FN_DISCONNECT_EVENT_CALLBACK>(callback);
    connector->disconnect_context = context;
    return [connector] { PostDisconnectEvent(connector); };
}

// What a closing connector holds that a post may still reach: released once the QP is idle.
void ReleaseConnectorHolds(ConnectorObject* connector) {
    if (connector->qp != nullptr) connector->qp->lifetime.Release();
    if (connector->holds_endpoint) cm::Fabric::Instance().Release(connector->endpoint);
    if (connector->listener != nullptr) connector->listener->lifetime.Release();
    if (connector->shared != nullptr) connector->shared->lifetime.Release();
}

// LIFE-09/CM-18 … CM-23: a close refuses an offered connection, aborts an established one and releases the
// QP, endpoint, listener and shared-endpoint references. It pends while the channel or a post still uses the QP.
bool ConnectorTeardown(void* object) {
    auto* connector = static_cast<ConnectorObject*>(object);
    std::shared_ptr<cm::ConnectionSide> side = std::move(connector->side);
    if (!side) {
        ReleaseConnectorHolds(connector);
        return true;
    }
    struct Join {
        std::mutex mutex;
        bool returned = false;
        bool done = false;
    };
    auto join = std::make_shared<Join>();
    side->Close(connector->qp != nullptr ? &connector->qp->qp : nullptr, [connector, join] {
        {
            std::lock_guard lock(join->mutex);
            join->done = true;
            if (!join->returned) return;  // inline: the teardown finishes below
        }
        connector->adapter->executor->Post([connector] {
            ReleaseConnectorHolds(connector);
            connector->lifetime.TeardownDone();
        });
    });
    std::lock_guard lock(join->mutex);
    join->returned = true;
    if (!join->done) return false;
    ReleaseConnectorHolds(connector);
    return true;
}
// LIFE-09: a close cancels the connector's own pending NdkConnect, NdkAccept and NdkDisconnect.
void ConnectorCancel(void* object) {
    auto* connector = static_cast<ConnectorObject*>(object);
    if (connector->side) connector->side->CancelPending();
}
constexpr Lifetime::Ops kConnectorOps{&ConnectorTeardown, &DestroyObject<ConnectorObject>, &ConnectorCancel};

NTSTATUS CheckPrivateData(const PVOID data, ULONG length, ULONG limit, const char* what) {
    if ((data == nullptr && length > 0) || length > limit) {
        SetLastErrorText("%s: private data NULL with a length, or longer than the adapter allows (CM-10)", what);
        return STATUS_INVALID_PARAMETER;
    }
    return STATUS_SUCCESS;
}

std::vector<uint8_t> Bytes(const PVOID data, ULONG length) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    return length == 0 ? std::vector<uint8_t>() : std::vector<uint8_t>(bytes, bytes + length);
}

// Gives back what one failed connect attempt took (the channel, the 4-tuple, the QP, the endpoint and
// shared-endpoint references), so the consumer may try again on the same connector and its close releases
// nothing twice. The side stays for NdkGetConnectionData of a reject's private data (CM-12).
void UndoConnect(ConnectorObject* connector) {
    if (connector->side) connector->side->AbandonAttempt();
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

// Shared body of NdkConnect and NdkConnectWithSharedEndpoint once the QP and the local endpoint are held.
NTSTATUS StartConnect(ConnectorObject* connector, const cm::Endpoint& local, const cm::Endpoint& remote, bool pick_port,
                      ULONG inbound, ULONG outbound, const PVOID data, ULONG length,
                      NDK_FN_REQUEST_COMPLETION completion, PVOID context, ProviderFunction function) {
    AdapterObject& adapter = *connector->adapter;
    std::shared_ptr<cm::ConnectionSide> side =
        cm::ConnectionSide::MakeActive(SideSettingsOf(adapter), {inbound, outbound});
    connector->side = side;
    connector->attempt_failed = false;
    cm::ConnectPlan plan;
    plan.transport = adapter.transport;
    plan.shared_endpoint = connector->shared != nullptr;
    plan.in_process = InProcessEndOf(adapter);
    plan.wire.progress = adapter.progress.get();
    plan.wire.options = WireOptions(adapter);
    plan.wire.read_rtr = adapter.mpa_read_rtr;
    plan.wire.local = local;
    plan.wire.remote = remote;
    plan.wire.pick_port = pick_port;
    plan.wire.bound = &connector->endpoint;
    plan.wire.private_data = Bytes(data, length);
    NTSTATUS status = cm::PrepareConnect(*side, &plan);
    if (!NT_SUCCESS(status)) {
        UndoConnect(connector);
        return status;
    }
    return RunRequest(
        adapter, function, connector->lifetime, completion, context,
        [connector, side, plan](const Finish& finish) mutable -> NTSTATUS {
            if (connector->lifetime.closing()) return STATUS_CANCELLED;  // LIFE-09: closed before this pended work ran
            engine::QueuePair* qp = &connector->qp->qp;
            return side->Connect(qp, cm::OpenChannel(side, qp, std::move(plan)), finish);
        },
        [connector] { UndoConnect(connector); });
}

NTSTATUS CommonConnectChecks(ConnectorObject* connector, QpObject* qp, const PVOID data, ULONG length,
                             NDK_FN_REQUEST_COMPLETION completion) {
    if (connector == nullptr || qp == nullptr || completion == nullptr)
        return InvalidParameter("NdkConnect: NULL or foreign connector, QP or RequestCompletion");
    if (qp->pd->adapter != connector->adapter)
        return ForeignAdapters("NdkConnect", "QP", *qp->pd->adapter, "connector", *connector->adapter);
    NTSTATUS status = CheckPrivateData(data, length, connector->adapter->info.MaxCallerData, "NdkConnect");
    if (!NT_SUCCESS(status)) return status;
    // A connector whose last attempt failed may try again; one that connected (or is connecting) may not.
    if ((connector->side && !connector->attempt_failed) || qp->associated.exchange(true)) {
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
        SetLastErrorText("NdkConnect: the source address is not one of this adapter's (CM-04); it owns %s",
                         DescribeOwnedAddresses(*connector->adapter).c_str());
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
    connector->holds_endpoint = true;  // CM-20: released when the connector closes
    return StartConnect(connector, local, remote, pick_port, inbound, outbound, data, length, completion, context,
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
    return StartConnect(connector, shared->endpoint, remote, false, inbound, outbound, data, length, completion,
                        context, ProviderFunction::NdkConnectWithSharedEndpoint);
}

NTSTATUS CompleteConnectCommon(NDK_CONNECTOR* handle, void* callback, PVOID callback_context,
                               NDK_FN_REQUEST_COMPLETION completion, PVOID context, ProviderFunction function,
                               bool extended) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    if (connector == nullptr || completion == nullptr)
        return InvalidParameter("NdkCompleteConnect: NULL connector or RequestCompletion");
    return RunRequest(
        *connector->adapter, function, connector->lifetime, completion, context,
        [connector, callback, callback_context, extended](const Finish&) -> NTSTATUS {
            std::shared_ptr<cm::ConnectionSide> side = connector->side;
            if (!side) return STATUS_CONNECTION_INVALID;  // CM-07: not connecting
            return side->CompleteConnect(DisconnectEventOf(connector, callback, callback_context, extended));
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

NTSTATUS AcceptCommon(NDK_CONNECTOR* handle, NDK_QP* qp_handle, ULONG inbound, ULONG outbound, const PVOID data,
                      ULONG length, void* event, PVOID event_context, bool extended,
                      NDK_FN_REQUEST_COMPLETION completion, PVOID context, ProviderFunction function) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    QpObject* qp = FromHandle<QpObject>(qp_handle);
    if (connector == nullptr || qp == nullptr || completion == nullptr)
        return InvalidParameter("NdkAccept: NULL or foreign connector, QP or RequestCompletion");
    if (qp->pd->adapter != connector->adapter)
        return ForeignAdapters("NdkAccept", "QP", *qp->pd->adapter, "connector", *connector->adapter);
    NTSTATUS status = CheckPrivateData(data, length, connector->adapter->info.MaxCalleeData, "NdkAccept");
    if (!NT_SUCCESS(status)) return status;
    std::shared_ptr<cm::ConnectionSide> side = connector->side;
    if (!side || side->active()) return InvalidParameter("NdkAccept: not a connector from a connect event");
    if (qp->associated.exchange(true)) {
        SetLastErrorText("NdkAccept: the QP has been used already (CM-28)");
        return STATUS_INVALID_DEVICE_STATE;
    }
    connector->qp = qp;
    qp->lifetime.AddRef();
    const AdapterObject& adapter = *connector->adapter;
    const cm::ReadLimits limits{std::min<uint32_t>(inbound, adapter.info.MaxInboundReadLimit),  // CM-03
                                std::min<uint32_t>(outbound, adapter.info.MaxOutboundReadLimit)};
    // A failure before the QP reached the peer gives it back (the consumer may accept with it again, CM-08); a
    // QP that was joined to the connection is spent (CM-28) and released by the connector's close.
    auto undo = [connector, side] {
        if (connector->qp == nullptr || !side->GiveQpBackIfUnused()) return;
        connector->qp->qp.SetState(engine::QueuePair::State::kIdle);
        connector->qp->associated = false;
        connector->qp->lifetime.Release();
        connector->qp = nullptr;
    };
    return RunRequest(
        *connector->adapter, function, connector->lifetime, completion, context,
        [connector, side, qp, limits, bytes = Bytes(data, length), event, event_context,
         extended](const Finish& finish) -> NTSTATUS {
            if (connector->lifetime.closing()) return STATUS_CANCELLED;  // LIFE-09
            return side->Accept(&qp->qp, limits, bytes, DisconnectEventOf(connector, event, event_context, extended),
                                finish);
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
    std::shared_ptr<cm::ConnectionSide> side = connector->side;
    if (!side) return STATUS_CONNECTION_INVALID;
    return side->Reject(Bytes(data, length));
}

// CM-11: the exact size rules.
NTSTATUS GetConnectionData(NDK_CONNECTOR* handle, ULONG* inbound, ULONG* outbound, PVOID data, ULONG* length) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    if (connector == nullptr || length == nullptr)
        return InvalidParameter("NdkGetConnectionData: NULL connector or length");
    if (data == nullptr && *length > 0)
        return InvalidParameter("NdkGetConnectionData: NULL buffer with a length (CM-11b)");
    std::shared_ptr<cm::ConnectionSide> side = connector->side;
    if (!side) return STATUS_CONNECTION_INVALID;
    bool late = false;
    const NTSTATUS status = side->GetConnectionData(inbound, outbound, data, length, &late);
    if (late)
        VerifierConsumerRule("NDK_CM_12_CONNECTION_DATA_AFTER_ESTABLISHING", "NdkGetConnectionData",
                             "NdkGetConnectionData after NdkAccept or NdkCompleteConnect on this connector (CM-12); "
                             "the data established is returned, as hardware keeps it");
    return status;
}

NTSTATUS AddressOf(NDK_CONNECTOR* handle, PSOCKADDR address, ULONG* length, bool peer) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    if (connector == nullptr || length == nullptr)
        return InvalidParameter("NdkGetLocalAddress/NdkGetPeerAddress: NULL argument");
    std::shared_ptr<cm::ConnectionSide> side = connector->side;
    if (!side) return STATUS_CONNECTION_INVALID;
    cm::Endpoint endpoint;
    NTSTATUS status = side->Address(peer, &endpoint);
    if (!NT_SUCCESS(status)) return status;
    return cm::EndpointToSockaddr(endpoint, address, length);  // CM-13
}
NTSTATUS GetLocalAddress(NDK_CONNECTOR* handle, PSOCKADDR address, ULONG* length) {
    return AddressOf(handle, address, length, false);
}
NTSTATUS GetPeerAddress(NDK_CONNECTOR* handle, PSOCKADDR address, ULONG* length) {
    return AddressOf(handle, address, length, true);
}

// CM-24/25: completes once the peer's disconnect arrived (or DisconnectTimeoutMs passed), then flushes the QP.
NTSTATUS Disconnect(NDK_CONNECTOR* handle, NDK_FN_REQUEST_COMPLETION completion, PVOID context) {
    ConnectorObject* connector = FromHandle<ConnectorObject>(handle);
    if (connector == nullptr || completion == nullptr)
        return InvalidParameter("NdkDisconnect: NULL connector or RequestCompletion");
    return RunRequest(*connector->adapter, ProviderFunction::NdkDisconnect, connector->lifetime, completion, context,
                      [connector](const Finish& finish) -> NTSTATUS {
                          std::shared_ptr<cm::ConnectionSide> side = connector->side;
                          if (!side) return STATUS_CONNECTION_INVALID;
                          if (connector->lifetime.closing()) return STATUS_CANCELLED;  // LIFE-09
                          return side->Disconnect(finish);
                      });
}

}  // namespace

cm::SideSettings SideSettingsOf(const AdapterObject& adapter) {
    cm::SideSettings settings;
    settings.executor = adapter.executor.get();
    settings.accept_timeout_ms = adapter.accept_timeout_ms;
    settings.disconnect_timeout_ms = adapter.disconnect_timeout_ms;
    settings.max_inbound = adapter.info.MaxInboundReadLimit;
    settings.max_outbound = adapter.info.MaxOutboundReadLimit;
    return settings;
}

cm::InProcessEnd InProcessEndOf(const AdapterObject& adapter) {
    return cm::InProcessEnd{adapter.executor.get(), adapter.progress.get(), adapter.deferred_links};
}

transport::TcpOptions WireOptions(const AdapterObject& adapter) {
    transport::TcpOptions options;
    options.request_crc = adapter.mpa_crc;
    options.rtr_kicks = adapter.rtr_kicks;
    options.mpa_request_timeout = std::chrono::milliseconds(adapter.mpa_request_timeout_ms);
    options.max_half_open = adapter.max_half_open;
    options.accept_retry = std::chrono::milliseconds(adapter.accept_retry_ms);
    options.peer_stall_timeout = std::chrono::milliseconds(adapter.peer_stall_timeout_ms);
    options.defer_backstop = std::chrono::milliseconds(adapter.defer_backstop_ms);
    options.faults = adapter.wire_faults;
    options.trace = adapter.trace;
    engine::CompletionExecutor* executor = adapter.executor.get();
    options.after = [executor](std::chrono::milliseconds delay, std::function<void()> job) {
        executor->PostAfter(delay, std::move(job));
    };
    return options;
}

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

ConnectorObject* MakePassiveConnector(ListenerObject* listener, std::shared_ptr<cm::ConnectionSide> side) {
    auto* connector = new (std::nothrow) ConnectorObject(listener->adapter, kConnectorOps);
    if (connector == nullptr) return nullptr;
    connector->side = std::move(side);
    connector->listener = listener;
    listener->lifetime.AddRef();
    connector->endpoint = listener->endpoint;
    connector->holds_endpoint = true;
    cm::Fabric::Instance().AddReference(listener->endpoint);
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
