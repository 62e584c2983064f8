// Test-only pcap / pcapng reader and TCP reassembly; see pcap_reader.h.
#include "support/pcap_reader.h"

#include <fstream>
#include <iterator>
#include <map>
#include <optional>

namespace softndk::testing {
namespace {

struct Reader {
    const std::vector<uint8_t>& data;
    bool swap = false;
    bool Has(size_t at, size_t n) const { return at <= data.size() && n <= data.size() - at; }
    uint16_t U16(size_t at) const {
        uint16_t v = static_cast<uint16_t>(data[at] | (data[at + 1] << 8));
        return swap ? static_cast<uint16_t>((v >> 8) | (v << 8)) : v;
    }
    uint32_t U32(size_t at) const {
        uint32_t v = static_cast<uint32_t>(data[at]) | (static_cast<uint32_t>(data[at + 1]) << 8) |
                     (static_cast<uint32_t>(data[at + 2]) << 16) | (static_cast<uint32_t>(data[at + 3]) << 24);
        return swap ? __builtin_bswap32(v) : v;
    }
};

uint16_t Be16(const uint8_t* p) {
    return static_cast<uint16_t>((p[0] << 8) | p[1]);
}
uint32_t Be32(const uint8_t* p) {
    return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
           (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

// Parses an IP packet; appends a segment if it is TCP.
void ParseIp(const uint8_t* p, size_t n, std::vector<TcpSegment>* out) {
    if (n < 1) return;
    const uint8_t version = p[0] >> 4;
    TcpSegment segment;
    const uint8_t* tcp = nullptr;
    size_t tcp_len = 0;
    if (version == 4) {
        if (n < 20) return;
        const size_t ihl = (p[0] & 0x0F) * 4u;
        const size_t total = Be16(p + 2);
        if (p[9] != 6 || ihl < 20 || total < ihl || total > n) return;
        segment.source.address.assign(p + 12, p + 16);
        segment.destination.address.assign(p + 16, p + 20);
        tcp = p + ihl;
        tcp_len = total - ihl;
    } else if (version == 6) {
        if (n < 40) return;
        const size_t payload = Be16(p + 4);
        if (p[6] != 6 || 40 + payload > n) return;  // no extension headers in our captures
        segment.source.address.assign(p + 8, p + 24);
        segment.destination.address.assign(p + 24, p + 40);
        tcp = p + 40;
        tcp_len = payload;
    } else {
        return;
    }
    if (tcp_len < 20) return;
    const size_t data_offset = (tcp[12] >> 4) * 4u;
    if (data_offset < 20 || data_offset > tcp_len) return;
    segment.source.port = Be16(tcp);
    segment.destination.port = Be16(tcp + 2);
    segment.sequence = Be32(tcp + 4);
    segment.flags = tcp[13];
    segment.payload.assign(tcp + data_offset, tcp + tcp_len);
    out->push_back(std::move(segment));
}

void ParseLinkFrame(uint32_t link_type, const uint8_t* p, size_t n, std::vector<TcpSegment>* out) {
    switch (link_type) {
        case 1: {  // Ethernet
            size_t at = 12;
            while (n >= at + 2 && (Be16(p + at) == 0x8100 || Be16(p + at) == 0x88A8)) at += 4;
            if (n < at + 2) return;
            const uint16_t ethertype = Be16(p + at);
            if (ethertype == 0x0800 || ethertype == 0x86DD) ParseIp(p + at + 2, n - at - 2, out);
            return;
        }
        case 0:  // BSD loopback: 4-byte family
            if (n > 4) ParseIp(p + 4, n - 4, out);
            return;
        case 101:
        case 228:
        case 229:
            ParseIp(p, n, out);
            return;
        case 113:  // Linux cooked v1: 16-byte header
            if (n > 16) ParseIp(p + 16, n - 16, out);
            return;
        case 276:  // Linux cooked v2: 20-byte header
            if (n > 20) ParseIp(p + 20, n - 20, out);
            return;
        default:
            return;
    }
}

bool ReadPcap(const std::vector<uint8_t>& data, std::vector<TcpSegment>* out, std::string* error) {
    Reader r{data};
    const uint32_t magic = r.U32(0);
    if (magic == 0xD4C3B2A1u || magic == 0x4D3CB2A1u) r.swap = true;
    if (!r.Has(0, 24)) return (*error = "short pcap header", false);
    const uint32_t link_type = r.U32(20) & 0x0FFFFFFF;
    size_t at = 24;
    while (r.Has(at, 16)) {
        const uint32_t captured = r.U32(at + 8);
        if (!r.Has(at + 16, captured)) return (*error = "truncated pcap record", false);
        ParseLinkFrame(link_type, &data[at + 16], captured, out);
        at += 16 + captured;
    }
    return true;
}

bool ReadPcapng(const std::vector<uint8_t>& data, std::vector<TcpSegment>* out, std::string* error) {
    Reader r{data};
    std::vector<uint32_t> interfaces;
    size_t at = 0;
    while (r.Has(at, 12)) {
        uint32_t type = r.U32(at);
        if (type == 0x0A0D0D0A) {  // Section Header Block: byte-order magic decides the section's endianness
            r.swap = false;
            const uint32_t bom = r.U32(at + 8);
            if (bom == 0x4D3C2B1Au)
                r.swap = true;
            else if (bom != 0x1A2B3C4Du)
                return (*error = "bad pcapng byte-order magic", false);
            interfaces.clear();
        }
        const uint32_t length = r.U32(at + 4);
        if (length < 12 || length % 4 != 0 || !r.Has(at, length)) return (*error = "bad pcapng block length", false);
        if (type == 1 && length >= 20) {  // Interface Description Block
            interfaces.push_back(r.U16(at + 8));
        } else if (type == 6 && length >= 32) {  // Enhanced Packet Block
            const uint32_t iface = r.U32(at + 8);
            const uint32_t captured = r.U32(at + 20);
            if (iface >= interfaces.size() || captured > length - 32) return (*error = "bad pcapng EPB", false);
            ParseLinkFrame(interfaces[iface], &data[at + 28], captured, out);
        } else if (type == 3 && length >= 16 && !interfaces.empty()) {  // Simple Packet Block
            const uint32_t original = r.U32(at + 8);
            const size_t captured = std::min<size_t>(original, length - 16);
            ParseLinkFrame(interfaces[0], &data[at + 12], captured, out);
        }
        at += length;
    }
    return true;
}

}  // namespace

bool ReadTcpSegments(const std::string& path, std::vector<TcpSegment>* segments, std::string* error) {
    std::ifstream file(path, std::ios::binary);
    if (!file) return (*error = "cannot open " + path, false);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (data.size() < 4) return (*error = "file too short", false);
    const uint32_t magic = Reader{data}.U32(0);
    if (magic == 0x0A0D0D0A) return ReadPcapng(data, segments, error);
    if (magic == 0xA1B2C3D4u || magic == 0xD4C3B2A1u || magic == 0xA1B23C4Du || magic == 0x4D3CB2A1u) {
        return ReadPcap(data, segments, error);
    }
    *error = "not a pcap or pcapng file";
    return false;
}

std::vector<TcpStream> ReassembleTcpStreams(const std::vector<TcpSegment>& segments) {
    struct Building {
        TcpStream stream;
        std::optional<uint32_t> base;                     // sequence number of stream byte 0
        std::map<uint32_t, std::vector<uint8_t>> pieces;  // by stream offset
    };
    std::vector<Building> building;
    auto find_open = [&](const TcpEndpoint& src, const TcpEndpoint& dst) -> Building* {
        for (size_t i = building.size(); i-- > 0;) {
            if (building[i].stream.source == src && building[i].stream.destination == dst) return &building[i];
        }
        return nullptr;
    };
    size_t connections = 0;
    for (const TcpSegment& seg : segments) {
        const bool syn = (seg.flags & 0x02) != 0;
        const bool ack = (seg.flags & 0x10) != 0;
        Building* b = find_open(seg.source, seg.destination);
        if (syn || b == nullptr) {
            // A SYN (or the first segment seen) opens a new stream; a SYN-ACK joins the initiator's connection.
            Building fresh;
            fresh.stream.source = seg.source;
            fresh.stream.destination = seg.destination;
            Building* reverse = find_open(seg.destination, seg.source);
            fresh.stream.connection = (syn && ack && reverse != nullptr) || (!syn && reverse != nullptr)
                                          ? reverse->stream.connection
                                          : connections++;
            if (syn) fresh.base = seg.sequence + 1;
            building.push_back(std::move(fresh));
            b = &building.back();
        }
        if (seg.payload.empty()) continue;
        if (!b->base) b->base = seg.sequence;
        const uint32_t offset = seg.sequence - *b->base;
        auto& piece = b->pieces[offset];
        if (piece.size() < seg.payload.size()) piece = seg.payload;  // keep the longest retransmission
    }
    std::vector<TcpStream> streams;
    for (Building& b : building) {
        for (const auto& [offset, bytes] : b.pieces) {
            const size_t have = b.stream.bytes.size();
            if (offset > have) break;  // a hole: stop at the last contiguous byte
            if (offset + bytes.size() > have)
                b.stream.bytes.insert(b.stream.bytes.end(), bytes.begin() + (have - offset), bytes.end());
        }
        streams.push_back(std::move(b.stream));
    }
    return streams;
}

}  // namespace softndk::testing
