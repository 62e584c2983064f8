// Wire tracing (issue 7 §6): a pcap writer fed with the stream bytes of each traced connection.
#include "transport/wire_trace.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/random.h"
#include "transport/tcp_connection.h"

namespace softndk::transport {
namespace {

constexpr uint32_t kPcapMagicMicroseconds = 0xA1B2C3D4;
constexpr uint32_t kLinkTypeRaw = 101;  // LINKTYPE_RAW: the packet starts with its IPv4 or IPv6 header
constexpr uint32_t kSnapLength = 262144;
constexpr size_t kMaxSegmentPayload = 65000;  // fits the 16-bit IPv4 total length with both headers

constexpr uint8_t kTcpFin = 0x01;
constexpr uint8_t kTcpSyn = 0x02;
constexpr uint8_t kTcpRst = 0x04;
constexpr uint8_t kTcpPsh = 0x08;
constexpr uint8_t kTcpAck = 0x10;

// An endpoint as it goes into the IP header: a v4-mapped IPv6 address is written as IPv4.
struct Address {
    bool v6 = false;
    uint8_t bytes[16] = {};
    uint16_t port = 0;  // host order
};

Address AddressOf(const sockaddr_storage& storage) {
    Address address;
    if (storage.ss_family == AF_INET6) {
        const auto& v6 = reinterpret_cast<const sockaddr_in6&>(storage);
        address.port = ntohs(v6.sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
            std::memcpy(address.bytes, &v6.sin6_addr.s6_addr[12], 4);
        } else {
            address.v6 = true;
            std::memcpy(address.bytes, &v6.sin6_addr, 16);
        }
    } else {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(storage);
        address.port = ntohs(v4.sin_port);
        std::memcpy(address.bytes, &v4.sin_addr, 4);
    }
    return address;
}

void Put16(uint8_t* at, uint16_t value) {
    at[0] = static_cast<uint8_t>(value >> 8);
    at[1] = static_cast<uint8_t>(value);
}

void Put32(uint8_t* at, uint32_t value) {
    Put16(at, static_cast<uint16_t>(value >> 16));
    Put16(at + 2, static_cast<uint16_t>(value));
}

// RFC 1071 one's-complement sum, carried across calls (odd lengths only at the end of the data).
struct Checksum {
    uint64_t sum = 0;
    bool odd = false;
    void Add(const uint8_t* data, size_t size) {
        for (size_t i = 0; i < size; ++i) {
            sum += odd ? data[i] : static_cast<uint64_t>(data[i]) << 8;
            odd = !odd;
        }
    }
    uint16_t Finish() const {
        uint64_t folded = sum;
        while (folded >> 16) folded = (folded & 0xFFFF) + (folded >> 16);
        return static_cast<uint16_t>(~folded);
    }
};

std::mutex& RegistryMutex() {
    static auto* mutex = new std::mutex;
    return *mutex;
}

std::map<std::string, std::weak_ptr<WireTrace>>& Registry() {
    static auto* registry = new std::map<std::string, std::weak_ptr<WireTrace>>;
    return *registry;
}

}  // namespace

// One TCP connection in the capture, shared by its ends when both are traced here.
struct WireTrace::End::Flow {
    Address active;  // the end that sent the SYN
    Address passive;
    uint32_t next_seq[2] = {};  // [0]: from the active end, [1]: from the passive end
    uint32_t ends = 0;          // ends that attached (never decremented: an end gone keeps its half)
    bool handshake = false;
    bool fin[2] = {};
    bool reset = false;
    uint16_t ip_id = 0;
};

WireTrace::End::End(std::shared_ptr<WireTrace> writer, std::shared_ptr<Flow> flow, bool active)
    : writer_(std::move(writer)), flow_(std::move(flow)), active_(active) {}

WireTrace::End::~End() = default;

// Under the writer's lock: an inbound byte is written here only when the peer's end is not traced by this writer.
bool WireTrace::End::Records(bool outbound) const {
    return outbound || flow_->ends == 1;
}

void WireTrace::End::Established() {
    std::lock_guard lock(writer_->mutex_);
    if (flow_->handshake) return;
    flow_->handshake = true;
    writer_->WriteLocked(*flow_, true, kTcpSyn, nullptr, 0, 0);
    writer_->WriteLocked(*flow_, false, kTcpSyn | kTcpAck, nullptr, 0, 0);
    writer_->WriteLocked(*flow_, true, kTcpAck, nullptr, 0, 0);
}

void WireTrace::End::Data(bool outbound, const iovec* iov, size_t count, size_t bytes) {
    if (bytes == 0) return;
    std::lock_guard lock(writer_->mutex_);
    if (!Records(outbound)) return;
    writer_->WriteLocked(*flow_, outbound == active_, kTcpAck | kTcpPsh, iov, count, bytes);
}

void WireTrace::End::Data(bool outbound, const uint8_t* data, size_t size) {
    iovec one{const_cast<uint8_t*>(data), size};
    Data(outbound, &one, 1, size);
}

void WireTrace::End::Fin(bool outbound) {
    std::lock_guard lock(writer_->mutex_);
    if (!Records(outbound)) return;
    const bool from_active = outbound == active_;
    if (flow_->fin[from_active ? 0 : 1] || flow_->reset) return;
    flow_->fin[from_active ? 0 : 1] = true;
    writer_->WriteLocked(*flow_, from_active, kTcpFin | kTcpAck, nullptr, 0, 0);
}

void WireTrace::End::Reset(bool outbound) {
    std::lock_guard lock(writer_->mutex_);
    if (!Records(outbound)) return;
    if (flow_->reset) return;
    flow_->reset = true;
    writer_->WriteLocked(*flow_, outbound == active_, kTcpRst | kTcpAck, nullptr, 0, 0);
}

void WireTrace::End::Received(ssize_t got, const iovec* iov, size_t count) {
    const int error = errno;  // the file calls below may change it
    if (got > 0) Data(false, iov, count, static_cast<size_t>(got));
    if (got == 0) Fin(false);
    if (got < 0 && error == ECONNRESET) Reset(false);
    errno = error;
}

NTSTATUS WireTrace::Open(const std::string& path, std::shared_ptr<WireTrace>* out) {
    std::lock_guard lock(RegistryMutex());
    if (std::shared_ptr<WireTrace> open = Registry()[path].lock()) {
        *out = open;
        return STATUS_SUCCESS;
    }
    std::FILE* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr) {
        switch (errno) {
            case ENOENT:
            case ENOTDIR:
                return STATUS_OBJECT_PATH_NOT_FOUND;
            case EACCES:
            case EPERM:
            case EROFS:
                return STATUS_ACCESS_DENIED;
            default:
                return STATUS_INSUFFICIENT_RESOURCES;
        }
    }
    // The pcap global header, in host byte order (readers detect it by the magic).
    const uint32_t magic = kPcapMagicMicroseconds;
    const uint16_t version[2] = {2, 4};
    const int32_t zone = 0;
    const uint32_t rest[3] = {0, kSnapLength, kLinkTypeRaw};
    std::fwrite(&magic, sizeof(magic), 1, file);
    std::fwrite(version, sizeof(version), 1, file);
    std::fwrite(&zone, sizeof(zone), 1, file);
    std::fwrite(rest, sizeof(rest), 1, file);
    std::fflush(file);
    std::shared_ptr<WireTrace> trace(new WireTrace(path, file));
    Registry()[path] = trace;
    *out = trace;
    return STATUS_SUCCESS;
}

WireTrace::WireTrace(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

WireTrace::~WireTrace() {
    {
        std::lock_guard lock(RegistryMutex());
        auto it = Registry().find(path_);
        if (it != Registry().end() && it->second.expired()) Registry().erase(it);
    }
    std::fclose(file_);
}

std::unique_ptr<WireTrace::End> WireTrace::Attach(const sockaddr_storage& local, const sockaddr_storage& remote,
                                                  bool active) {
    const std::string near = FormatSockaddr(local);
    const std::string far = FormatSockaddr(remote);
    const std::string key = std::min(near, far) + " " + std::max(near, far);
    std::lock_guard lock(mutex_);
    std::shared_ptr<End::Flow> flow = flows_[key].lock();
    if (flow == nullptr || flow->reset || (flow->fin[0] && flow->fin[1])) {  // a new connection on this 4-tuple
        flow = std::make_shared<End::Flow>();
        flow->active = AddressOf(active ? local : remote);
        flow->passive = AddressOf(active ? remote : local);
        SplitMix64 random(SeedOrEntropy(0));
        flow->next_seq[0] = static_cast<uint32_t>(random.Next());
        flow->next_seq[1] = static_cast<uint32_t>(random.Next());
        flows_[key] = flow;
    }
    ++flow->ends;
    for (auto it = flows_.begin(); it != flows_.end();) it = it->second.expired() ? flows_.erase(it) : std::next(it);
    return std::unique_ptr<End>(new End(shared_from_this(), flow, active));
}

void WireTrace::WriteLocked(End::Flow& flow, bool from_active, uint8_t flags, const iovec* iov, size_t count,
                            size_t bytes) {
    const Address& from = from_active ? flow.active : flow.passive;
    const Address& to = from_active ? flow.passive : flow.active;
    uint32_t& seq = flow.next_seq[from_active ? 0 : 1];
    const uint32_t ack = flow.next_seq[from_active ? 1 : 0];
    size_t slot = 0;         // the iovec being read
    size_t slot_offset = 0;  // bytes of it already written
    do {
        const size_t payload = std::min(bytes, kMaxSegmentPayload);
        const size_t ip_size = from.v6 ? 40 : 20;
        uint8_t header[60] = {};
        uint8_t* tcp = header + ip_size;
        if (from.v6) {
            Put32(header, 0x60000000);
            Put16(header + 4, static_cast<uint16_t>(20 + payload));
            header[6] = IPPROTO_TCP;
            header[7] = 64;
            std::memcpy(header + 8, from.bytes, 16);
            std::memcpy(header + 24, to.bytes, 16);
        } else {
            header[0] = 0x45;
            Put16(header + 2, static_cast<uint16_t>(20 + 20 + payload));
            Put16(header + 4, flow.ip_id++);
            Put16(header + 6, 0x4000);  // DF
            header[8] = 64;
            header[9] = IPPROTO_TCP;
            std::memcpy(header + 12, from.bytes, 4);
            std::memcpy(header + 16, to.bytes, 4);
            Checksum ip;
            ip.Add(header, 20);
            Put16(header + 10, ip.Finish());
        }
        Put16(tcp, from.port);
        Put16(tcp + 2, to.port);
        Put32(tcp + 4, seq);
        Put32(tcp + 8, (flags & kTcpAck) ? ack : 0);
        tcp[12] = 5 << 4;
        tcp[13] = flags;
        Put16(tcp + 14, 0xFFFF);
        // The payload of this segment, as slices of the iovecs.
        std::vector<iovec> slices;
        for (size_t left = payload; left > 0 && slot < count;) {
            const size_t take = std::min(left, iov[slot].iov_len - slot_offset);
            slices.push_back({static_cast<uint8_t*>(iov[slot].iov_base) + slot_offset, take});
            left -= take;
            slot_offset += take;
            if (slot_offset == iov[slot].iov_len) {
                ++slot;
                slot_offset = 0;
            }
        }
        Checksum sum;  // over the pseudo-header, the TCP header and the payload (RFC 793, RFC 8200 §8.1)
        const size_t address_size = from.v6 ? 16 : 4;
        sum.Add(from.bytes, address_size);
        sum.Add(to.bytes, address_size);
        uint8_t pseudo[8] = {};
        if (from.v6) {
            Put32(pseudo, static_cast<uint32_t>(20 + payload));
            pseudo[7] = IPPROTO_TCP;
            sum.Add(pseudo, 8);
        } else {
            pseudo[1] = IPPROTO_TCP;
            Put16(pseudo + 2, static_cast<uint16_t>(20 + payload));
            sum.Add(pseudo, 4);
        }
        sum.Add(tcp, 20);
        for (const iovec& slice : slices) sum.Add(static_cast<const uint8_t*>(slice.iov_base), slice.iov_len);
        Put16(tcp + 16, sum.Finish());

        timeval now{};
        gettimeofday(&now, nullptr);
        const uint32_t record[4] = {static_cast<uint32_t>(now.tv_sec), static_cast<uint32_t>(now.tv_usec),
                                    static_cast<uint32_t>(ip_size + 20 + payload),
                                    static_cast<uint32_t>(ip_size + 20 + payload)};
        std::fwrite(record, sizeof(record), 1, file_);
        std::fwrite(header, ip_size + 20, 1, file_);
        for (const iovec& slice : slices) std::fwrite(slice.iov_base, slice.iov_len, 1, file_);
        seq += static_cast<uint32_t>(payload);
        bytes -= payload;
    } while (bytes > 0);
    if (flags & (kTcpSyn | kTcpFin)) ++seq;  // a SYN or a FIN takes one sequence number
    std::fflush(file_);                      // a capture is for reading after a failure: nothing waits in a buffer
}

}  // namespace softndk::transport
