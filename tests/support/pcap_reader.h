// Test-only reader for pcap and pcapng captures: extracts IPv4/IPv6 TCP segments and reassembles each TCP
// direction's payload into one byte stream (ordered by sequence number, retransmissions dropped).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace softndk::testing {

struct TcpEndpoint {
    std::vector<uint8_t> address;  // 4 or 16 bytes
    uint16_t port = 0;
    bool operator==(const TcpEndpoint&) const = default;
};

struct TcpSegment {
    TcpEndpoint source;
    TcpEndpoint destination;
    uint32_t sequence = 0;
    uint8_t flags = 0;  // TCP flags byte (SYN 0x02, FIN 0x01, RST 0x04)
    std::vector<uint8_t> payload;
};

// Reads every TCP segment of a pcap (micro- or nanosecond, either byte order) or pcapng file. Link types:
// Ethernet (1, with 802.1Q), BSD loopback (0), raw IP (101, 228, 229), Linux cooked (113, 276).
bool ReadTcpSegments(const std::string& path, std::vector<TcpSegment>* segments, std::string* error);

// One direction of one TCP connection. A SYN starts a new stream, so connections reusing a 4-tuple stay apart.
struct TcpStream {
    TcpEndpoint source;
    TcpEndpoint destination;
    size_t connection = 0;  // index shared by the two directions of one connection
    std::vector<uint8_t> bytes;
};

std::vector<TcpStream> ReassembleTcpStreams(const std::vector<TcpSegment>& segments);

}  // namespace softndk::testing
