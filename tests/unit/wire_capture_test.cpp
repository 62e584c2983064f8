// Decoding real captures (tests/data/captures; docs/siw-on-the-wire.md says what siw does on the wire): each TCP
// direction is reassembled, then fed through the MPA parser and the FPDU / DDP / RDMAP parsers exactly as the
// transport will.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "support/pcap_reader.h"
#include "wire/iwarp_wire.h"

namespace softndk::wire {
namespace {

using softndk::testing::TcpStream;

struct DecodedFpdu {
    SegmentHeader header;
    std::vector<uint8_t> payload;
    uint32_t received_crc = 0;
};

struct DecodedDirection {
    uint16_t source_port = 0;
    MpaFrame mpa;
    std::vector<uint8_t> mpa_private_data;
    std::vector<DecodedFpdu> fpdus;
    size_t leftover = 0;  // bytes after the last whole FPDU (a capture cut short)
};

struct DecodedConnection {
    DecodedDirection initiator;
    DecodedDirection responder;
    bool has_reply = false;
    bool crc = false;
};

std::string CapturePath(const char* name) {
    return std::string(SOFTNDK_CAPTURE_DIR) + "/" + name;
}

// Parses MPA, then FPDUs until the stream ends; every step must succeed.
void DecodeDirection(const TcpStream& stream, MpaFrameKind kind, bool crc, DecodedDirection* out) {
    out->source_port = stream.source.port;
    std::span<const uint8_t> bytes = stream.bytes;
    const ParseResult mpa = ParseMpaFrame(bytes, kind, &out->mpa);
    ASSERT_EQ(mpa.status, WireStatus::kOk) << WireStatusName(mpa.status);
    out->mpa_private_data.assign(out->mpa.private_data.begin(), out->mpa.private_data.end());
    bytes = bytes.subspan(mpa.size);
    while (!bytes.empty()) {
        FpduView view;
        const ParseResult fpdu = ParseFpdu(bytes, crc, &view);
        if (fpdu.status == WireStatus::kNeedMoreBytes) break;
        ASSERT_EQ(fpdu.status, WireStatus::kOk) << WireStatusName(fpdu.status) << " at FPDU " << out->fpdus.size();
        DecodedFpdu decoded;
        const ParseResult header = ParseUlpduHeader(view.ulpdu, &decoded.header);
        ASSERT_EQ(header.status, WireStatus::kOk) << WireStatusName(header.status);
        decoded.payload.assign(view.ulpdu.begin() + header.size, view.ulpdu.end());
        decoded.received_crc = view.received_crc;
        out->fpdus.push_back(std::move(decoded));
        bytes = bytes.subspan(fpdu.size);
    }
    out->leftover = bytes.size();
}

bool StartsWith(const std::vector<uint8_t>& bytes, const std::array<uint8_t, kMpaKeySize>& key) {
    return bytes.size() >= key.size() && std::equal(key.begin(), key.end(), bytes.begin());
}

// Loads a capture and decodes every connection that began with an MPA Request.
std::vector<DecodedConnection> DecodeCapture(const char* name) {
    std::vector<softndk::testing::TcpSegment> segments;
    std::string error;
    EXPECT_TRUE(softndk::testing::ReadTcpSegments(CapturePath(name), &segments, &error)) << error;
    const std::vector<TcpStream> streams = softndk::testing::ReassembleTcpStreams(segments);
    std::map<size_t, std::pair<const TcpStream*, const TcpStream*>> by_connection;
    for (const TcpStream& s : streams) {
        if (StartsWith(s.bytes, kMpaRequestKey)) by_connection[s.connection].first = &s;
        if (StartsWith(s.bytes, kMpaReplyKey)) by_connection[s.connection].second = &s;
    }
    std::vector<DecodedConnection> connections;
    for (const auto& [index, pair] : by_connection) {
        if (pair.first == nullptr) continue;
        DecodedConnection c;
        MpaFrame request, reply;
        EXPECT_EQ(ParseMpaFrame(pair.first->bytes, MpaFrameKind::kRequest, &request).status, WireStatus::kOk);
        c.has_reply = pair.second != nullptr;
        if (c.has_reply) {
            EXPECT_EQ(ParseMpaFrame(pair.second->bytes, MpaFrameKind::kReply, &reply).status, WireStatus::kOk);
            c.crc = request.crc || reply.crc;  // RFC 5044 §7.1: CRC is used if either side asks for it
            DecodeDirection(*pair.second, MpaFrameKind::kReply, c.crc, &c.responder);
        }
        DecodeDirection(*pair.first, MpaFrameKind::kRequest, c.crc, &c.initiator);
        connections.push_back(std::move(c));
    }
    return connections;
}

// The captures are part of the repository (tests/data/captures): a missing folder is a broken checkout.
#define REQUIRE_CAPTURES()                                                                                    \
    do {                                                                                                      \
        if (!std::filesystem::is_directory(SOFTNDK_CAPTURE_DIR)) {                                            \
            FAIL() << "capture folder " << SOFTNDK_CAPTURE_DIR << " is missing: restore tests/data/captures"; \
        }                                                                                                     \
    } while (0)

uint32_t Be32At(const std::vector<uint8_t>& b, size_t at) {
    return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | b[at + 3];
}
uint64_t Be64At(const std::vector<uint8_t>& b, size_t at) {
    return (uint64_t{Be32At(b, at)} << 32) | Be32At(b, at + 4);
}

std::vector<RdmapOpcode> Opcodes(const DecodedDirection& d) {
    std::vector<RdmapOpcode> ops;
    for (const DecodedFpdu& f : d.fpdus) ops.push_back(f.header.opcode);
    return ops;
}

TEST(WireCaptureTest, RpingAgainstSiwDecodesEveryFpduOfBothPings) {
    REQUIRE_CAPTURES();
    const std::vector<DecodedConnection> connections = DecodeCapture("rping-test-initiator-vs-siw-rping-server.pcapng");
    ASSERT_FALSE(connections.empty());
    const DecodedConnection* full = nullptr;
    size_t rev1 = 0;
    for (const DecodedConnection& c : connections) {
        const MpaFrame& request = c.initiator.mpa;
        const MpaFrame& reply = c.responder.mpa;
        if (c.has_reply) {
            // siw-on-the-wire §3.3: siw echoes revision and H, rping's accept mirrors IRD/ORD (§1.2), CRC stays off.
            EXPECT_EQ(reply.revision, request.revision);
            EXPECT_EQ(reply.enhanced, request.enhanced);
            EXPECT_FALSE(c.crc);
            if (request.enhanced) {
                EXPECT_EQ(reply.words.ird, request.words.ord);
                EXPECT_EQ(reply.words.ord, request.words.ird);
            }
        }
        if (request.revision == 1) {
            ++rev1;
            EXPECT_FALSE(request.enhanced);
        } else {
            EXPECT_TRUE(request.enhanced);
            EXPECT_FALSE(request.words.peer_to_peer);
        }
        if (full == nullptr && c.initiator.fpdus.size() > 4) full = &c;
    }
    EXPECT_EQ(rev1, 1u) << "the MPA rev 1 experiment of siw-on-the-wire §1.2";
    ASSERT_NE(full, nullptr) << "one connection carries two whole pings";
    const DecodedDirection& client = full->initiator;
    const DecodedDirection& server = full->responder;
    EXPECT_EQ(client.leftover, 0u);
    EXPECT_EQ(server.leftover, 0u);

    // Client: Send(start buf), Read Response, Send(rdma buf) per ping; Sends MSN 1, 2, 3, 4 on QN 0.
    EXPECT_EQ(Opcodes(client),
              (std::vector<RdmapOpcode>{RdmapOpcode::kSend, RdmapOpcode::kReadResponse, RdmapOpcode::kSend,
                                        RdmapOpcode::kSend, RdmapOpcode::kReadResponse, RdmapOpcode::kSend}));
    // Server: Read Request, Send(go-ahead), Write, Send(go-ahead) per ping (siw-on-the-wire §1.3).
    EXPECT_EQ(Opcodes(server),
              (std::vector<RdmapOpcode>{RdmapOpcode::kReadRequest, RdmapOpcode::kSend, RdmapOpcode::kWrite,
                                        RdmapOpcode::kSend, RdmapOpcode::kReadRequest, RdmapOpcode::kSend,
                                        RdmapOpcode::kWrite, RdmapOpcode::kSend}));
    uint32_t client_msn = 1, server_send_msn = 1, read_msn = 1;
    std::vector<const DecodedFpdu*> client_sends, read_requests;
    for (const DecodedFpdu& f : client.fpdus) {
        if (f.header.opcode != RdmapOpcode::kSend) continue;
        EXPECT_EQ(f.header.msn, client_msn++);
        EXPECT_EQ(f.header.queue_number, kQueueSend);
        EXPECT_EQ(f.header.message_offset, 0u);
        EXPECT_TRUE(f.header.last);
        ASSERT_EQ(f.payload.size(), 16u) << "struct rping_rdma_info";
        EXPECT_EQ(Be32At(f.payload, 12), 64u) << "-S size";
        client_sends.push_back(&f);
    }
    for (const DecodedFpdu& f : server.fpdus) {
        if (f.header.opcode == RdmapOpcode::kSend) {
            EXPECT_EQ(f.header.msn, server_send_msn++);
            EXPECT_EQ(f.payload, std::vector<uint8_t>(16, 0)) << "rping's go-ahead is 16 zero bytes";
        } else if (f.header.opcode == RdmapOpcode::kReadRequest) {
            EXPECT_EQ(f.header.queue_number, kQueueReadRequest);
            EXPECT_EQ(f.header.msn, read_msn++);
            EXPECT_TRUE(f.payload.empty());
            read_requests.push_back(&f);
        }
    }
    ASSERT_EQ(client_sends.size(), 4u);
    ASSERT_EQ(read_requests.size(), 2u);
    for (int ping = 0; ping < 2; ++ping) {
        const DecodedFpdu& start = *client_sends[2 * ping];
        const DecodedFpdu& rdma = *client_sends[2 * ping + 1];
        const DecodedFpdu& request = *read_requests[ping];
        // The Read Request's source is the client's start_buf (rkey, VA) from its Send.
        EXPECT_EQ(request.header.read.source_stag, Be32At(start.payload, 8));
        EXPECT_EQ(request.header.read.source_offset, Be64At(start.payload, 0));
        EXPECT_EQ(request.header.read.size, 64u);
        // The client's Read Response echoes the sink STag / TO.
        const DecodedFpdu& response = client.fpdus[1 + 3 * ping];
        EXPECT_EQ(response.header.stag, request.header.read.sink_stag);
        EXPECT_EQ(response.header.tagged_offset, request.header.read.sink_offset);
        EXPECT_EQ(response.payload.size(), 64u);
        EXPECT_EQ(std::string(response.payload.begin(), response.payload.begin() + 12),
                  "rdma-ping-" + std::to_string(ping) + ":");
        // The server's Write goes to the client's rdma_buf.
        const DecodedFpdu& write = server.fpdus[2 + 4 * ping];
        EXPECT_EQ(write.header.stag, Be32At(rdma.payload, 8));
        EXPECT_EQ(write.header.tagged_offset, Be64At(rdma.payload, 0));
        EXPECT_EQ(write.payload, response.payload) << "the server writes back what it read";
    }
    for (const DecodedFpdu& f : client.fpdus) EXPECT_EQ(f.received_crc, 0u) << "CRC off: zeros";
}

TEST(WireCaptureTest, IbWriteBwHasTheControlSendsAndFourKilobyteWrites) {
    REQUIRE_CAPTURES();
    const std::vector<DecodedConnection> connections = DecodeCapture("ib_write_bw-R-siw-to-siw-via-host.pcapng");
    ASSERT_EQ(connections.size(), 2u) << "comm and data connections (siw-on-the-wire §2.1)";
    const DecodedConnection& comm = connections[0];
    const DecodedConnection& data = connections[1];
    for (const DecodedConnection* c : {&comm, &data}) {
        EXPECT_TRUE(c->initiator.mpa.enhanced);
        EXPECT_EQ(c->initiator.mpa.words.ird, 0);
        EXPECT_EQ(c->initiator.mpa.words.ord, 0);
        EXPECT_TRUE(c->has_reply);
    }
    // siw-on-the-wire §2.3 table: MSN 1..16 on the comm QP, both directions, with these payload sizes.
    const size_t sizes[] = {16, 4, 4, 2, 56, 56, 56, 56, 56, 56, 8, 8, 8, 8, 8, 56};
    for (const DecodedDirection* d : {&comm.initiator, &comm.responder}) {
        ASSERT_EQ(d->fpdus.size(), 16u);
        for (size_t i = 0; i < 16; ++i) {
            EXPECT_EQ(d->fpdus[i].header.opcode, RdmapOpcode::kSend);
            EXPECT_EQ(d->fpdus[i].header.msn, i + 1);
            EXPECT_EQ(d->fpdus[i].payload.size(), sizes[i]) << "MSN " << i + 1;
        }
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(d->fpdus[0].payload.data())), "6.06");
    }
    // The server's real dest (MSN 7) names the rkey / vaddr the client writes to.
    const std::vector<uint8_t>& dest = comm.responder.fpdus[6].payload;
    const uint32_t rkey = Be32At(dest, 16);
    const uint64_t vaddr = Be64At(dest, 24);
    EXPECT_TRUE(data.responder.fpdus.empty()) << "nothing is sent on the data QP's server side";
    const DecodedDirection& writes = data.initiator;
    ASSERT_EQ(writes.fpdus.size(), 15u) << "-n 5 × 4096 B in 1436 + 1436 + 1224";
    size_t placed = 0;
    for (size_t i = 0; i < writes.fpdus.size(); ++i) {
        const DecodedFpdu& f = writes.fpdus[i];
        EXPECT_EQ(f.header.opcode, RdmapOpcode::kWrite);
        EXPECT_EQ(f.header.stag, rkey);
        EXPECT_EQ(f.header.tagged_offset, vaddr + (placed % 4096)) << "size ≤ cycle/2 would cycle; 4096 stays";
        const size_t expected = (i % 3 == 2) ? 1224 : 1436;
        EXPECT_EQ(f.payload.size(), expected);
        EXPECT_EQ(f.header.last, i % 3 == 2);
        placed += f.payload.size();
    }
    EXPECT_EQ(placed, 5u * 4096u);
}

TEST(WireCaptureTest, SiwTerminateForABadMsnDecodesInSiwLayout) {
    REQUIRE_CAPTURES();
    const std::vector<DecodedConnection> connections = DecodeCapture("siw-terminate-bad-msn.pcapng");
    ASSERT_EQ(connections.size(), 1u);
    const DecodedConnection& c = connections[0];
    ASSERT_EQ(c.initiator.fpdus.size(), 1u);
    EXPECT_EQ(c.initiator.fpdus[0].header.opcode, RdmapOpcode::kSend);
    EXPECT_EQ(c.initiator.fpdus[0].header.msn, 6u) << "the wrong MSN that provoked it";
    ASSERT_EQ(c.responder.fpdus.size(), 1u);
    const DecodedFpdu& t = c.responder.fpdus[0];
    EXPECT_EQ(t.header.opcode, RdmapOpcode::kTerminate);
    EXPECT_EQ(t.header.queue_number, kQueueTerminate);
    EXPECT_EQ(t.header.msn, 1u);
    EXPECT_EQ(t.header.message_offset, 0u);
    TerminateMessage message;
    ASSERT_EQ(DecodeTerminateBody(t.payload, &message).status, WireStatus::kOk);
    EXPECT_EQ(message.layout, TerminateLayout::kSiwBitfield);
    EXPECT_EQ(message.cause, term::kDdpUntaggedMsnRange) << FormatTerminateCause(message.cause);
    EXPECT_TRUE(message.segment_length_valid);
    EXPECT_TRUE(message.has_ddp_header);
    EXPECT_EQ(message.segment_length, 16u) << "siw puts the payload length here";
    SegmentHeader copied;
    ASSERT_EQ(ParseSegmentHeader(message.ddp_header, &copied).status, WireStatus::kOk);
    EXPECT_EQ(copied.msn, 6u);
}

TEST(WireCaptureTest, SyntheticAllOpcodesCaptureHasGoodCrcsEverywhere) {
    REQUIRE_CAPTURES();
    const std::vector<DecodedConnection> connections = DecodeCapture("synthetic-all-opcodes-crc-lsb.pcap");
    ASSERT_EQ(connections.size(), 1u);
    const DecodedConnection& c = connections[0];
    EXPECT_TRUE(c.initiator.mpa.crc);
    EXPECT_TRUE(c.responder.mpa.crc);
    ASSERT_TRUE(c.crc);  // DecodeDirection checked every CRC: a mismatch would have failed there
    std::set<RdmapOpcode> seen;
    for (const DecodedDirection* d : {&c.initiator, &c.responder}) {
        EXPECT_EQ(d->leftover, 0u);
        for (const DecodedFpdu& f : d->fpdus) {
            seen.insert(f.header.opcode);
            EXPECT_NE(f.received_crc, 0u);
        }
    }
    for (RdmapOpcode op :
         {RdmapOpcode::kWrite, RdmapOpcode::kReadRequest, RdmapOpcode::kReadResponse, RdmapOpcode::kSend,
          RdmapOpcode::kSendInvalidate, RdmapOpcode::kSendSolicited, RdmapOpcode::kTerminate}) {
        EXPECT_TRUE(seen.count(op)) << RdmapOpcodeName(op);
    }
    for (const DecodedFpdu& f : c.responder.fpdus) {
        if (f.header.opcode == RdmapOpcode::kSendInvalidate) {
            EXPECT_EQ(f.header.invalidate_stag(), 0x00ABCD01u);
        }
        if (f.header.opcode == RdmapOpcode::kTerminate) {
            TerminateMessage message;
            ASSERT_EQ(DecodeTerminateBody(f.payload, &message).status, WireStatus::kOk);
            EXPECT_EQ(message.layout, TerminateLayout::kRfc5040);
            EXPECT_EQ(message.cause, term::kDdpUntaggedNoBuffer) << FormatTerminateCause(message.cause);
            EXPECT_TRUE(message.has_ddp_header);
        }
    }
}

TEST(WireCaptureTest, SyntheticCaptureWithOneFlippedBitIsACrcMismatch) {
    REQUIRE_CAPTURES();
    std::vector<softndk::testing::TcpSegment> segments;
    std::string error;
    ASSERT_TRUE(
        softndk::testing::ReadTcpSegments(CapturePath("synthetic-all-opcodes-crc-lsb.pcap"), &segments, &error));
    for (const TcpStream& s : softndk::testing::ReassembleTcpStreams(segments)) {
        if (!StartsWith(s.bytes, kMpaRequestKey)) continue;
        std::vector<uint8_t> bytes(s.bytes.begin() + 24, s.bytes.end());
        bytes[20] ^= 0x04;  // payload of the first Send
        FpduView view;
        EXPECT_EQ(ParseFpdu(bytes, true, &view).status, WireStatus::kCrcMismatch);
        bytes[20] ^= 0x04;
        EXPECT_EQ(ParseFpdu(bytes, true, &view).status, WireStatus::kOk);
        return;
    }
    FAIL() << "no initiator stream";
}

}  // namespace
}  // namespace softndk::wire
