// Connection-management objects (CM-01 … CM-32): connector, listener, shared endpoint, and the connection
// record the two connectors of one connection share.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "api/async_request.h"
#include "transport/in_process_link.h"
#include "transport/tcp_connection.h"
#include "transport/tcp_listener.h"

namespace softndk::api {

struct ConnectorObject;
struct ListenerObject;
struct SharedEndpointObject;

enum class ConnectorState : uint8_t {
    kIdle,           // created, never used
    kConnecting,     // NdkConnect pending
    kConnectReady,   // NdkConnect completed: GetConnectionData / CompleteConnect / Reject (active side)
    kIncoming,       // handed to the connect event: GetConnectionData / Accept / Reject (passive side)
    kAccepting,      // NdkAccept pending until the peer's NdkCompleteConnect
    kConnected,      // established
    kDisconnecting,  // NdkDisconnect pending until the peer's disconnect
    kDone,           // refused, rejected, aborted or disconnected: never reused (CM-28)
};

// Shared by the active (index 0) and passive (index 1) connectors.
struct Connection {
    std::mutex mutex;
    ConnectorObject* side[2] = {nullptr, nullptr};
    ConnectorState state[2] = {ConnectorState::kConnecting, ConnectorState::kIncoming};
    cm::Endpoint local[2];
    std::vector<uint8_t> private_data[2];  // [0] with connect, [1] with accept or reject
    uint32_t requested_inbound[2] = {0, 0};
    uint32_t requested_outbound[2] = {0, 0};
    uint32_t effective_inbound[2] = {0, 0};
    uint32_t effective_outbound[2] = {0, 0};
    bool disconnect_called[2] = {false, false};
    bool disconnect_indicated[2] = {false, false};
    Finish connect_finish;
    Finish accept_finish;
    Finish disconnect_finish[2];
    std::unique_ptr<transport::InProcessLink> link;
    bool tuple_held = false;  // the active side's 4-tuple is registered with the fabric
};

// One side of a connection over iWARP/TCP (DESIGN §4: one state machine per side). Its peer is on the
// other end of the socket; everything it learns comes from the TcpConnection's events, on that connection's
// lane; consumer callbacks go to the adapter's provider thread.
struct WireSide {
    std::mutex mutex;
    ConnectorObject* connector = nullptr;  // null once the connector closed
    bool active = true;
    ConnectorState state = ConnectorState::kConnecting;
    std::shared_ptr<transport::TcpConnection> tcp;
    std::vector<uint8_t> peer_data;  // the peer's MPA private data after the v2 words
    uint32_t peer_ird = 0;           // the peer's IRD / ORD words (or the rev 1 defaults, AMB decision)
    uint32_t peer_ord = 0;
    uint32_t requested_inbound = 0;  // active: what NdkConnect asked for
    uint32_t requested_outbound = 0;
    uint32_t inbound = 0;  // effective, after CM-03
    uint32_t outbound = 0;
    Finish connect_finish;
    Finish accept_finish;
    Finish disconnect_finish;
    bool disconnect_called = false;
    bool disconnect_indicated = false;
    bool peer_closed = false;  // the peer's FIN
    bool failed = false;       // lost, terminated, refused
    // CM-06: a connect over a shared endpoint holds its 4-tuple with the fabric until the connector lets go.
    bool tuple_held = false;
    cm::Endpoint tuple_local, tuple_remote;
};

struct ConnectorObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeConnector;
    static constexpr uint32_t kMagic = 0x434E4F42;  // "CNOB"
    NDK_CONNECTOR ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    AdapterObject* adapter;
    std::shared_ptr<Connection> connection;
    std::shared_ptr<WireSide> wire;  // set instead of `connection` for a connection over iWARP/TCP
    int side = 0;
    bool attempt_failed = false;  // the last NdkConnect failed: the connector may try again
    QpObject* qp = nullptr;       // held while associated (LIFE-12)
    cm::Endpoint endpoint;        // the endpoint reference this connector holds (CM-18 … CM-21)
    bool holds_endpoint = false;
    ListenerObject* listener = nullptr;      // passive side: held (CM-22)
    SharedEndpointObject* shared = nullptr;  // held (CM-21/22)
    NDK_FN_DISCONNECT_EVENT_CALLBACK disconnect_event = nullptr;
    NDK_FN_DISCONNECT_EVENT_CALLBACK_EX disconnect_event_ex = nullptr;
    PVOID disconnect_context = nullptr;

    ConnectorObject(AdapterObject* owner, const Lifetime::Ops& ops)
        : lifetime(ops, this, &owner->lifetime), adapter(owner) {}
};

struct ListenerObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeListener;
    static constexpr uint32_t kMagic = 0x4C534F42;  // "LSOB"
    NDK_LISTENER ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    AdapterObject* adapter;
    NDK_FN_CONNECT_EVENT_CALLBACK connect_event;
    PVOID connect_context;
    std::mutex mutex;
    cm::Endpoint endpoint;
    bool listening = false;
    bool closed = false;
    std::atomic<bool> paused{false};
    std::shared_ptr<transport::TcpListener> tcp;  // the real port, for peers in other processes (issue 7 §4)

    class Target : public cm::ConnectTarget {
    public:
        explicit Target(ListenerObject* owner) : owner_(owner) {}
        bool Offer(void* request) override;

    private:
        ListenerObject* owner_;
    } target{this};

    ListenerObject(AdapterObject* owner, NDK_FN_CONNECT_EVENT_CALLBACK callback, PVOID context,
                   const Lifetime::Ops& ops)
        : lifetime(ops, this, &owner->lifetime), adapter(owner), connect_event(callback), connect_context(context) {}
};

struct SharedEndpointObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeSharedEndpoint;
    static constexpr uint32_t kMagic = 0x53454F42;  // "SEOB"
    NDK_SHARED_ENDPOINT ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    AdapterObject* adapter;
    cm::Endpoint endpoint;

    SharedEndpointObject(AdapterObject* owner, const Lifetime::Ops& ops)
        : lifetime(ops, this, &owner->lifetime), adapter(owner) {}
};

// Shared by the in-process and the wire connector code.
void ReleaseConnectorHolds(ConnectorObject* connector);
// Gives back what a failed connect attempt took (QP, endpoint, shared endpoint, 4-tuple or socket): the connector
// may try again (CM-28 does not apply to a failed attempt).
void UndoConnect(ConnectorObject* connector);
// The connector's disconnect callback, on its adapter's provider thread (CM-26/CM-30); the caller makes it once.
void PostDisconnectEvent(ConnectorObject* connector);
// NdkGetConnectionData's size rules (CM-11) for the peer's private data.
NTSTATUS CopyConnectionData(const std::vector<uint8_t>& peer_data, PVOID data, ULONG* length);
ConnectorObject* MakePassiveConnector(ListenerObject* listener, std::shared_ptr<Connection> connection);
// True when NdkConnect to `destination` goes over iWARP/TCP (issue 7 §4: forced, or no listener here).
bool UsesWire(const AdapterObject& adapter, const cm::Endpoint& destination);
transport::TcpOptions WireOptions(const AdapterObject& adapter);

// The wire side of NDK_CONNECTOR_DISPATCH (wire_connector.cpp); the QP and local endpoint are held already.
// `pick_port`: the consumer asked for port 0, so a port the host has taken already is replaced (CM-05).
NTSTATUS WireConnect(ConnectorObject* connector, const cm::Endpoint& local, const cm::Endpoint& remote, ULONG inbound,
                     ULONG outbound, const PVOID data, ULONG length, bool pick_port,
                     NDK_FN_REQUEST_COMPLETION completion, PVOID context, engine::ProviderFunction function);
NTSTATUS WireCompleteConnect(ConnectorObject* connector, void* event, PVOID event_context, bool extended,
                             NDK_FN_REQUEST_COMPLETION completion, PVOID context, engine::ProviderFunction function);
// The QP is associated and held already; `inbound` / `outbound` are capped to the adapter's limits.
NTSTATUS WireAccept(ConnectorObject* connector, QpObject* qp, uint32_t inbound, uint32_t outbound, const PVOID data,
                    ULONG length, void* event, PVOID event_context, bool extended, NDK_FN_REQUEST_COMPLETION completion,
                    PVOID context, engine::ProviderFunction function);
NTSTATUS WireReject(ConnectorObject* connector, const PVOID data, ULONG length);
NTSTATUS WireGetConnectionData(ConnectorObject* connector, ULONG* inbound, ULONG* outbound, PVOID data, ULONG* length);
NTSTATUS WireAddress(ConnectorObject* connector, PSOCKADDR address, ULONG* length, bool peer);
NTSTATUS WireDisconnect(ConnectorObject* connector, NDK_FN_REQUEST_COMPLETION completion, PVOID context);
bool WireTeardown(ConnectorObject* connector);
// Gives back a shared-endpoint connect's 4-tuple (CM-06); idempotent.
void ReleaseWireTuple(WireSide& side);
void WireCancel(ConnectorObject* connector);
// A listener's real port took a connection whose MPA Request is in (on its lane).
void OfferWireConnection(ListenerObject* listener, std::shared_ptr<transport::TcpConnection> tcp);

}  // namespace softndk::api
