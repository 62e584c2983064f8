// Connection-management objects (CM-01 … CM-32): connector, listener and shared endpoint. A connector's
// connection is a cm::ConnectionSide; the API layer validates and dispatches to it.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "api/async_request.h"
#include "cm/connection_side.h"
#include "cm/in_process_channel.h"
#include "transport/tcp_connection.h"
#include "transport/tcp_listener.h"

namespace softndk::api {

struct ConnectorObject;
struct ListenerObject;
struct SharedEndpointObject;

struct ConnectorObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeConnector;
    static constexpr uint32_t kMagic = 0x434E4F42;  // "CNOB"
    NDK_CONNECTOR ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    AdapterObject* adapter;
    // The connection's state machine (cm/connection_side.h): the current attempt's, or the last one's.
    std::shared_ptr<cm::ConnectionSide> side;
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

// The side settings and in-process end of an adapter (cm/connection_side.h, cm/in_process_channel.h).
cm::SideSettings SideSettingsOf(const AdapterObject& adapter);
cm::InProcessEnd InProcessEndOf(const AdapterObject& adapter);
transport::TcpOptions WireOptions(const AdapterObject& adapter);
// The passive connector handed to a listener's connect event (CM-15, CM-19); null when out of memory.
ConnectorObject* MakePassiveConnector(ListenerObject* listener, std::shared_ptr<cm::ConnectionSide> side);

}  // namespace softndk::api
