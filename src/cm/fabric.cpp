#include "cm/fabric.h"

#include "common/random.h"

#include <arpa/inet.h>

#include <cstring>

namespace softndk::cm {

bool Endpoint::wildcard() const {
    for (uint8_t byte : address)
        if (byte != 0) return false;
    return true;
}

NTSTATUS EndpointFromSockaddr(const SOCKADDR* address, ULONG length, Endpoint* out) {
    if (address == nullptr || length < sizeof(sa_family_t)) return STATUS_INVALID_PARAMETER;
    Endpoint endpoint;
    if (address->sa_family == AF_INET && length >= sizeof(SOCKADDR_IN)) {
        const auto* v4 = reinterpret_cast<const SOCKADDR_IN*>(address);
        endpoint.family = AF_INET;
        std::memcpy(endpoint.address.data(), &v4->sin_addr, 4);
        endpoint.port = ntohs(v4->sin_port);
    } else if (address->sa_family == AF_INET6 && length >= sizeof(SOCKADDR_IN6)) {
        const auto* v6 = reinterpret_cast<const SOCKADDR_IN6*>(address);
        endpoint.family = AF_INET6;
        std::memcpy(endpoint.address.data(), &v6->sin6_addr, 16);
        endpoint.port = ntohs(v6->sin6_port);
    } else {
        return STATUS_INVALID_PARAMETER;
    }
    *out = endpoint;
    return STATUS_SUCCESS;
}

NTSTATUS EndpointToSockaddr(const Endpoint& endpoint, SOCKADDR* address, ULONG* length) {
    if (length == nullptr) return STATUS_INVALID_PARAMETER;
    const ULONG needed = endpoint.family == AF_INET ? sizeof(SOCKADDR_IN) : sizeof(SOCKADDR_IN6);
    if (*length < needed || address == nullptr) {
        *length = needed;
        return STATUS_BUFFER_TOO_SMALL;
    }
    if (endpoint.family == AF_INET) {
        SOCKADDR_IN v4{};
        v4.sin_family = AF_INET;
        std::memcpy(&v4.sin_addr, endpoint.address.data(), 4);
        v4.sin_port = htons(endpoint.port);
        std::memcpy(address, &v4, sizeof(v4));
    } else {
        SOCKADDR_IN6 v6{};
        v6.sin6_family = AF_INET6;
        std::memcpy(&v6.sin6_addr, endpoint.address.data(), 16);
        v6.sin6_port = htons(endpoint.port);
        std::memcpy(address, &v6, sizeof(v6));
    }
    *length = needed;
    return STATUS_SUCCESS;
}

Fabric::Fabric()
    : next_ephemeral_(static_cast<uint16_t>(kEphemeralFirst +
                                            SeedOrEntropy(0) % (uint32_t{kEphemeralLast} - kEphemeralFirst + 1))) {}

Fabric& Fabric::Instance() {
    static auto* fabric = new Fabric();
    return *fabric;
}

NTSTATUS Fabric::Bind(Endpoint* endpoint) {
    std::lock_guard lock(mutex_);
    if (endpoint->port != 0) {
        if (bound_.count(*endpoint) != 0) return STATUS_SHARING_VIOLATION;
        bound_[*endpoint] = 1;
        return STATUS_SUCCESS;
    }
    constexpr uint32_t kRange = kEphemeralLast - kEphemeralFirst + 1;
    for (uint32_t tried = 0; tried < kRange; ++tried) {
        Endpoint candidate = *endpoint;
        candidate.port = next_ephemeral_;
        next_ephemeral_ = next_ephemeral_ == kEphemeralLast ? kEphemeralFirst : next_ephemeral_ + 1;
        if (bound_.count(candidate) == 0) {
            bound_[candidate] = 1;
            *endpoint = candidate;
            return STATUS_SUCCESS;
        }
    }
    return STATUS_TOO_MANY_ADDRESSES;
}

void Fabric::AddReference(const Endpoint& endpoint) {
    std::lock_guard lock(mutex_);
    ++bound_[endpoint];
}

void Fabric::Release(const Endpoint& endpoint) {
    std::lock_guard lock(mutex_);
    auto it = bound_.find(endpoint);
    if (it != bound_.end() && --it->second == 0) bound_.erase(it);  // CM-18: reusable at zero
}

uint32_t Fabric::References(const Endpoint& endpoint) const {
    std::lock_guard lock(mutex_);
    auto it = bound_.find(endpoint);
    return it == bound_.end() ? 0 : it->second;
}

void Fabric::Listen(const Endpoint& endpoint, ConnectTarget* target) {
    std::lock_guard lock(mutex_);
    listeners_[endpoint] = target;
}

void Fabric::Unlisten(const Endpoint& endpoint) {
    std::lock_guard lock(mutex_);
    listeners_.erase(endpoint);
}

bool Fabric::HasListener(const Endpoint& destination) const {
    std::lock_guard lock(mutex_);
    Endpoint any;
    any.family = destination.family;
    any.port = destination.port;
    return listeners_.count(destination) != 0 || listeners_.count(any) != 0;
}

NTSTATUS Fabric::Connect(const Endpoint& destination, void* request) {
    std::lock_guard lock(mutex_);
    auto it = listeners_.find(destination);
    if (it == listeners_.end()) {
        Endpoint any;
        any.family = destination.family;
        any.port = destination.port;
        it = listeners_.find(any);
    }
    if (it == listeners_.end() || !it->second->Offer(request)) return STATUS_CONNECTION_REFUSED;
    return STATUS_SUCCESS;
}

bool Fabric::AddConnection(const Endpoint& local, const Endpoint& remote) {
    std::lock_guard lock(mutex_);
    return connections_.emplace(local, remote).second;
}

void Fabric::RemoveConnection(const Endpoint& local, const Endpoint& remote) {
    std::lock_guard lock(mutex_);
    connections_.erase({local, remote});
}

}  // namespace softndk::cm
