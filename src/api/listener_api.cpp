// NDK_LISTENER_DISPATCH and NDK_SHARED_ENDPOINT_DISPATCH (CM-05, CM-13 … CM-23).
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "api/adapter_config.h"
#include "api/cm_objects.h"
#include "cm/wire_channel.h"

namespace softndk::api {

bool AdapterOwnsAddress(const AdapterObject& adapter, const cm::Endpoint& endpoint, bool allow_wildcard) {
    if (endpoint.wildcard()) return allow_wildcard;
    for (const SOCKADDR_INET& address : adapter.local_addresses) {
        cm::Endpoint local;
        const ULONG length = address.si_family == AF_INET ? sizeof(SOCKADDR_IN) : sizeof(SOCKADDR_IN6);
        if (NT_SUCCESS(cm::EndpointFromSockaddr(reinterpret_cast<const SOCKADDR*>(&address), length, &local)) &&
            local.family == endpoint.family && local.address == endpoint.address)
            return true;
    }
    return adapter.host_addresses && HostHasAddress(endpoint.family, endpoint.address.data());
}

std::string DescribeOwnedAddresses(const AdapterObject& adapter) {
    std::string text;
    for (const SOCKADDR_INET& address : adapter.local_addresses) {
        char name[INET6_ADDRSTRLEN] = "?";
        inet_ntop(address.si_family,
                  address.si_family == AF_INET ? static_cast<const void*>(&address.Ipv4.sin_addr)
                                               : static_cast<const void*>(&address.Ipv6.sin6_addr),
                  name, sizeof(name));
        text += (text.empty() ? "" : ", ") + std::string(name);
    }
    if (adapter.host_addresses) return text + " and every address of this host";
    if (!adapter.interface_name.empty())
        return text + " (bound to interface " + adapter.interface_name +
               " by InterfaceName/SOFTNDK_INTERFACE: unset it, or use an address of that interface)";
    return text + " (HostAddresses is 0: only LocalAddresses)";
}

// Under the fabric lock (no blocking): refuses while paused or closing (CM-16, CM-23), else creates the passive
// connector and calls the connect event on the provider thread (CM-15).
bool ListenerObject::Target::Offer(void* request) {
    ListenerObject* listener = owner_;
    if (listener->paused.load() || listener->lifetime.closing()) return false;
    const auto& in_process = *static_cast<const cm::InProcessRequest*>(request);
    std::unique_ptr<cm::PeerChannel> channel = cm::TakeInProcessRequest(in_process, InProcessEndOf(*listener->adapter));
    ConnectorObject* connector = MakePassiveConnector(
        listener,
        cm::ConnectionSide::MakePassive(SideSettingsOf(*listener->adapter), in_process.request, std::move(channel)));
    if (connector == nullptr) return false;
    listener->lifetime.AddRef();
    listener->adapter->executor->Post([listener, connector] {
        // CM-23: a close that started after the offer refuses it (closing the unseen connector refuses the peer).
        bool closed;
        {
            std::lock_guard lock(listener->mutex);
            closed = listener->closed;
        }
        if (closed)
            connector->lifetime.Close(nullptr, nullptr);
        else
            listener->connect_event(listener->connect_context, &connector->ndk);
        listener->lifetime.Release();
    });
    return true;
}

namespace {

using engine::ProviderFunction;

// A listener's real port took a connection whose MPA Request is in (on its lane): the connect event, as for a
// peer in this process (CM-15), unless the listener is paused or closing (CM-16, CM-23).
void OfferWireConnection(ListenerObject* listener, std::shared_ptr<transport::MpaLink> tcp) {
    if (listener->paused.load() || listener->lifetime.closing() || !listener->lifetime.TryAddRef()) {
        tcp->Reject({});
        return;
    }
    cm::PeerAnswer request;
    std::unique_ptr<cm::PeerChannel> channel = cm::TakeWireRequest(tcp, listener->adapter->mpa_crc, &request);
    ConnectorObject* connector = MakePassiveConnector(
        listener,
        cm::ConnectionSide::MakePassive(SideSettingsOf(*listener->adapter), std::move(request), std::move(channel)));
    if (connector == nullptr) {
        tcp->Reject({});
        listener->lifetime.Release();
        return;
    }
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

// The endpoint in this process's fabric and, unless the adapter is in-process only, a real TCP port on the same
// address for peers in other processes (issue 7 §4). Port 0: the kernel picks the real port, the fabric takes the
// same number.
NTSTATUS BindListenerPort(ListenerObject& listener, cm::Endpoint* endpoint,
                          std::shared_ptr<transport::TcpListener>* tcp) {
    AdapterObject& adapter = *listener.adapter;
    const bool real = adapter.transport == SOFTNDK_TRANSPORT_AUTO || adapter.transport == SOFTNDK_TRANSPORT_TCP;
    if (!real) return cm::Fabric::Instance().Bind(endpoint);
    const bool pick = endpoint->port == 0;  // CM-05: from the fabric's ephemeral range, not the kernel's
    for (int attempt = 0; attempt < 32; ++attempt) {
        cm::Endpoint chosen = *endpoint;
        NTSTATUS status = cm::Fabric::Instance().Bind(&chosen);
        if (!NT_SUCCESS(status)) return status;
        sockaddr_storage address{};
        ULONG length = sizeof(address);
        cm::EndpointToSockaddr(chosen, reinterpret_cast<SOCKADDR*>(&address), &length);
        status = transport::TcpListener::Listen(
            adapter.progress.get(), &address, WireOptions(adapter),
            [raw = &listener](std::shared_ptr<transport::MpaLink> connection) {
                OfferWireConnection(raw, std::move(connection));
            },
            tcp);
        if (NT_SUCCESS(status)) {
            *endpoint = chosen;
            return STATUS_SUCCESS;
        }
        cm::Fabric::Instance().Release(chosen);
        if (!pick || status != STATUS_SHARING_VIOLATION) {
            SetLastErrorText("NdkListen: the TCP port could not be bound (0x%08X)", static_cast<unsigned>(status));
            return status;
        }
        // Another process has that port: take the next one.
    }
    return STATUS_TOO_MANY_ADDRESSES;
}

constexpr Lifetime::Ops kListenerOps{nullptr, &DestroyObject<ListenerObject>};

NTSTATUS CloseListener(NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    ListenerObject* listener = FromHandle<ListenerObject>(object);
    if (listener == nullptr) return InvalidParameter("NdkCloseListener: not a listener");
    {
        std::lock_guard lock(listener->mutex);
        listener->closed = true;
        if (listener->tcp) listener->tcp->Close();  // no Request is delivered any more
        listener->tcp.reset();
        if (listener->listening) {
            cm::Fabric::Instance().Unlisten(listener->endpoint);  // CM-23: refuse from now on
            cm::Fabric::Instance().Release(listener->endpoint);   // CM-19: -1 for the listener
            listener->listening = false;
        }
    }
    return RunClose(*listener->adapter, listener->lifetime, completion, context);  // CM-22: waits for its connectors
}

NTSTATUS Listen(NDK_LISTENER* handle, const PSOCKADDR address, ULONG length, NDK_FN_REQUEST_COMPLETION completion,
                PVOID context) {
    ListenerObject* listener = FromHandle<ListenerObject>(handle);
    cm::Endpoint endpoint;
    if (listener == nullptr || completion == nullptr ||
        !NT_SUCCESS(cm::EndpointFromSockaddr(address, length, &endpoint)))
        return InvalidParameter("NdkListen: NULL listener or RequestCompletion, or not an AF_INET/AF_INET6 SOCKADDR");
    if (!AdapterOwnsAddress(*listener->adapter, endpoint, true)) {
        SetLastErrorText("NdkListen: not an address of this adapter (CM-14); it owns %s",
                         DescribeOwnedAddresses(*listener->adapter).c_str());
        return STATUS_INVALID_ADDRESS;
    }
    return RunRequest(*listener->adapter, ProviderFunction::NdkListen, listener->lifetime, completion, context,
                      [listener, endpoint](const Finish&) mutable -> NTSTATUS {
                          std::lock_guard lock(listener->mutex);
                          if (listener->listening || listener->closed) return STATUS_INVALID_DEVICE_STATE;
                          std::shared_ptr<transport::TcpListener> tcp;
                          NTSTATUS status = BindListenerPort(*listener, &endpoint, &tcp);  // CM-05, CM-14, CM-22
                          if (!NT_SUCCESS(status)) return status;
                          listener->tcp = std::move(tcp);
                          listener->endpoint = endpoint;
                          listener->listening = true;
                          cm::Fabric::Instance().Listen(endpoint, &listener->target);
                          return STATUS_SUCCESS;
                      });
}

NTSTATUS GetListenerLocalAddress(NDK_LISTENER* handle, PSOCKADDR address, ULONG* length) {
    ListenerObject* listener = FromHandle<ListenerObject>(handle);
    if (listener == nullptr || length == nullptr)
        return InvalidParameter("NdkGetLocalAddress: NULL listener or length");
    std::lock_guard lock(listener->mutex);
    if (listener->endpoint.family == AF_UNSPEC) return STATUS_INVALID_DEVICE_STATE;
    return cm::EndpointToSockaddr(listener->endpoint, address, length);
}

VOID ControlConnectEvents(NDK_LISTENER* handle, BOOLEAN pause) {
    ListenerObject* listener = FromHandle<ListenerObject>(handle);
    if (listener != nullptr) listener->paused = pause != FALSE;  // CM-16
}

bool SharedEndpointTeardown(void* object) {
    cm::Fabric::Instance().Release(static_cast<SharedEndpointObject*>(object)->endpoint);  // CM-21
    return true;
}
constexpr Lifetime::Ops kSharedEndpointOps{&SharedEndpointTeardown, &DestroyObject<SharedEndpointObject>};

NTSTATUS CloseSharedEndpoint(NDK_OBJECT_HEADER* object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    SharedEndpointObject* shared = FromHandle<SharedEndpointObject>(object);
    if (shared == nullptr) return InvalidParameter("NdkCloseSharedEndpoint: not a shared endpoint");
    return RunClose(*shared->adapter, shared->lifetime, completion, context);
}

NTSTATUS GetSharedEndpointLocalAddress(NDK_SHARED_ENDPOINT* handle, PSOCKADDR address, ULONG* length) {
    SharedEndpointObject* shared = FromHandle<SharedEndpointObject>(handle);
    if (shared == nullptr || length == nullptr)
        return InvalidParameter("NdkGetSharedEndpointLocalAddress: NULL argument");
    return cm::EndpointToSockaddr(shared->endpoint, address, length);
}

}  // namespace

NTSTATUS CreateListener(NDK_ADAPTER* handle, NDK_FN_CONNECT_EVENT_CALLBACK connect_event, PVOID connect_context,
                        NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_LISTENER** out) {
    AdapterObject* adapter = FromHandle<AdapterObject>(handle);
    if (adapter == nullptr || connect_event == nullptr || completion == nullptr || out == nullptr)
        return InvalidParameter("NdkCreateListener: NULL adapter, ConnectEvent, CreateCompletion or ppNdkListener");
    return RunCreate(
        *adapter, ProviderFunction::NdkCreateListener, adapter->lifetime, completion, context, out,
        [=](NDK_OBJECT_HEADER** header) -> NTSTATUS {
            auto* listener = new (std::nothrow) ListenerObject(adapter, connect_event, connect_context, kListenerOps);
            if (listener == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
            InitializeHandle(listener->ndk, NdkObjectTypeListener, adapter->info.Version, &kListenerDispatch);
            *header = &listener->ndk.Header;
            return STATUS_SUCCESS;
        });
}

// True when this host has `endpoint`'s TCP port free for sockets that share it (SO_REUSEADDR, as the shared
// endpoint's connections bind it): another process may hold the port the fabric picked.
static bool HostPortFree(const cm::Endpoint& endpoint) {
    sockaddr_storage address{};
    ULONG length = sizeof(address);
    cm::EndpointToSockaddr(endpoint, reinterpret_cast<SOCKADDR*>(&address), &length);
    const int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return true;  // cannot tell: the connect reports it
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 || errno != EADDRINUSE;
    ::close(fd);
    return free;
}

// CM-05/CM-17: the shared endpoint's port. Port 0 takes an ephemeral one that is also free on the host when the
// adapter can use TCP, since its connections bind that port for real (a port bound elsewhere made the connect
// fail with STATUS_SHARING_VIOLATION, about 1 run in 1000 of the suites over TCP).
static NTSTATUS BindSharedPort(const AdapterObject& adapter, cm::Endpoint* endpoint) {
    const bool real = adapter.transport == SOFTNDK_TRANSPORT_AUTO || adapter.transport == SOFTNDK_TRANSPORT_TCP;
    if (!real) return cm::Fabric::Instance().Bind(endpoint);
    if (endpoint->port != 0) {
        const NTSTATUS status = cm::Fabric::Instance().Bind(endpoint);
        if (!NT_SUCCESS(status) || HostPortFree(*endpoint)) return status;
        // CM-17: a port another process listens on is as bound as one of ours (found by the pair suites with
        // the peer in another process).
        cm::Fabric::Instance().Release(*endpoint);
        SetLastErrorText("NdkCreateSharedEndpoint: the port is bound on this host by another process (CM-17)");
        return STATUS_SHARING_VIOLATION;
    }
    for (int attempt = 0; attempt < 32; ++attempt) {
        cm::Endpoint chosen = *endpoint;
        const NTSTATUS status = cm::Fabric::Instance().Bind(&chosen);
        if (!NT_SUCCESS(status)) return status;
        if (HostPortFree(chosen)) {
            *endpoint = chosen;
            return STATUS_SUCCESS;
        }
        cm::Fabric::Instance().Release(chosen);
    }
    return STATUS_TOO_MANY_ADDRESSES;
}

NTSTATUS CreateSharedEndpoint(NDK_ADAPTER* handle, const PSOCKADDR address, ULONG length,
                              NDK_FN_CREATE_COMPLETION completion, PVOID context, NDK_SHARED_ENDPOINT** out) {
    AdapterObject* adapter = FromHandle<AdapterObject>(handle);
    cm::Endpoint endpoint;
    if (adapter == nullptr || completion == nullptr || out == nullptr ||
        !NT_SUCCESS(cm::EndpointFromSockaddr(address, length, &endpoint)))
        return InvalidParameter("NdkCreateSharedEndpoint: NULL argument or not an AF_INET/AF_INET6 SOCKADDR");
    if (!AdapterOwnsAddress(*adapter, endpoint, false)) {
        SetLastErrorText("NdkCreateSharedEndpoint: not an address of this adapter (CM-17); it owns %s",
                         DescribeOwnedAddresses(*adapter).c_str());
        return STATUS_INVALID_ADDRESS;
    }
    return RunCreate(*adapter, ProviderFunction::NdkCreateSharedEndpoint, adapter->lifetime, completion, context, out,
                     [adapter, endpoint](NDK_OBJECT_HEADER** header) mutable -> NTSTATUS {
                         NTSTATUS status = BindSharedPort(*adapter, &endpoint);
                         if (!NT_SUCCESS(status)) return status;
                         auto* shared = new (std::nothrow) SharedEndpointObject(adapter, kSharedEndpointOps);
                         if (shared == nullptr) {
                             cm::Fabric::Instance().Release(endpoint);
                             return STATUS_INSUFFICIENT_RESOURCES;
                         }
                         shared->endpoint = endpoint;
                         InitializeHandle(shared->ndk, NdkObjectTypeSharedEndpoint, adapter->info.Version,
                                          &kSharedEndpointDispatch);
                         *header = &shared->ndk.Header;
                         return STATUS_SUCCESS;
                     });
}

const NDK_LISTENER_DISPATCH kListenerDispatch = {&CloseListener, &QueryExtensionInterface, &Listen,
                                                 &GetListenerLocalAddress, &ControlConnectEvents};
const NDK_SHARED_ENDPOINT_DISPATCH kSharedEndpointDispatch = {&CloseSharedEndpoint, &QueryExtensionInterface,
                                                              &GetSharedEndpointLocalAddress};

}  // namespace softndk::api
