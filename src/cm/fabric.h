// The in-process fabric (CM-02 … CM-23): which (address, port) endpoints are bound and how often
// (CM-18 … CM-22), the ephemeral port range 49152-65535 (CM-05), listeners by address, and the 4-tuples of
// live connections (STATUS_ADDRESS_ALREADY_EXISTS). Process-wide: peers are found by SOCKADDR.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include <softndk/ndkpi.h>

namespace softndk::cm {

struct Endpoint {
    sa_family_t family = AF_UNSPEC;
    std::array<uint8_t, 16> address{};
    uint16_t port = 0;  // host byte order

    auto operator<=>(const Endpoint&) const = default;
    bool wildcard() const;
    Endpoint WithoutPort() const {
        Endpoint copy = *this;
        copy.port = 0;
        return copy;
    }
};

// STATUS_INVALID_PARAMETER for NULL, a short length or a family other than AF_INET / AF_INET6.
NTSTATUS EndpointFromSockaddr(const SOCKADDR* address, ULONG length, Endpoint* out);
// Writes the SOCKADDR form; STATUS_BUFFER_TOO_SMALL (storing the size) when it does not fit (CM-13).
NTSTATUS EndpointToSockaddr(const Endpoint& endpoint, SOCKADDR* address, ULONG* length);

// Receives connection requests for a listening endpoint.
class ConnectTarget {
public:
    virtual ~ConnectTarget() = default;
    // Called under the fabric lock: must not block; true if the request was taken.
    virtual bool Offer(void* request) = 0;
};

class Fabric {
public:
    static constexpr uint16_t kEphemeralFirst = 49152;
    static constexpr uint16_t kEphemeralLast = 65535;

    static Fabric& Instance();

    // Binds `*endpoint` (port 0 = an ephemeral port, written back). STATUS_SHARING_VIOLATION if bound already,
    // STATUS_TOO_MANY_ADDRESSES if no ephemeral port is free.
    NTSTATUS Bind(Endpoint* endpoint);
    void AddReference(const Endpoint& endpoint);
    void Release(const Endpoint& endpoint);
    uint32_t References(const Endpoint& endpoint) const;

    void Listen(const Endpoint& endpoint, ConnectTarget* target);
    void Unlisten(const Endpoint& endpoint);
    // Offers a request to the listener of `destination` (exact address, else the wildcard address).
    // STATUS_CONNECTION_REFUSED when none takes it.
    NTSTATUS Connect(const Endpoint& destination, void* request);

    // True when a listener of this process takes connections to `destination` (issue 7 §4: the transport
    // choice; a paused one counts, it answers for itself).
    bool HasListener(const Endpoint& destination) const;

    // 4-tuples: false if (local, remote) is connected already.
    bool AddConnection(const Endpoint& local, const Endpoint& remote);
    void RemoveConnection(const Endpoint& local, const Endpoint& remote);

private:
    // Recursive: a listener's Offer runs under it and takes endpoint references.
    mutable std::recursive_mutex mutex_;
    std::map<Endpoint, uint32_t> bound_;
    std::map<Endpoint, ConnectTarget*> listeners_;
    std::set<std::pair<Endpoint, Endpoint>> connections_;
    // CM-05: each process starts at a random point of the range, so that processes run one after another do not
    // reuse the 4-tuples their predecessors left in TIME_WAIT (as the kernel's per-boot port offset does).
    uint16_t next_ephemeral_;
    Fabric();
};

}  // namespace softndk::cm
