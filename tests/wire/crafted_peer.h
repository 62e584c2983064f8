// The crafted-packet fixture (issue 7 §5, eRPC's protocol-test style): a raw TCP socket plays the peer byte by
// byte against softndk's receive side. Cases assert the exact Terminate softndk sends (RFC 5040 layout, cause from
// the IANA RDDP registry), what the consumer sees (flushed receive with the cause, one disconnect event) and that
// no byte of registered memory changed. Used by crafted_packet_test.cpp and crafted_conformance_test.cpp.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "engine/transport.h"
#include "support/connected_pair.h"
#include "wire/iwarp_wire.h"

namespace softndk::test {

namespace term = wire::term;
using wire::RdmapOpcode;
using wire::SegmentHeader;

constexpr uint16_t kRawReadLimit = 1;  // the raw peer's IRD and ORD words

class CraftedPacketTest : public ConnectedPairTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Transport = SOFTNDK_TRANSPORT_TCP;
        config.AcceptTimeoutMs = 2000;
    }
    SOFTNDK_COMPLETION_MODE Mode() override { return SOFTNDK_COMPLETION_INLINE; }

    void TearDown() override {
        if (fd_ >= 0) ::close(fd_);
        for (NDK_OBJECT_HEADER* object : {raw_connector_ ? &raw_connector_->Header : nullptr,
                                          qp_c_ ? &qp_c_->Header : nullptr, cq_c_ ? &cq_c_->Header : nullptr})
            if (object != nullptr) Close(object);
        ConnectedPairTest::TearDown();
    }

    // ---- the raw peer's socket ----
    void Dial() {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        ASSERT_GE(fd_, 0);
        timeval timeout{5, 0};
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
        const int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (receive_buffer_ != 0)  // before connect: the window the peer offers
            setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_, sizeof(receive_buffer_));
        SOCKADDR_IN address = Loopback(ListenerPort());
        ASSERT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    }
    void SendBytes(const std::vector<uint8_t>& bytes) {
        ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    }
    // Everything softndk sends until it closes (or 5 s pass).
    std::vector<uint8_t> ReadUntilClosed() {
        std::vector<uint8_t> all;
        uint8_t chunk[4096];
        for (;;) {
            const ssize_t got = ::recv(fd_, chunk, sizeof(chunk), 0);
            if (got <= 0) break;
            all.insert(all.end(), chunk, chunk + got);
        }
        return all;
    }
    static std::vector<uint8_t> MpaBytes(const wire::MpaFrame& frame) {
        std::vector<uint8_t> bytes(wire::MpaFrameSize(frame));
        size_t written = 0;
        EXPECT_EQ(wire::SerializeMpaFrame(frame, bytes, &written), wire::WireStatus::kOk);
        bytes.resize(written);
        return bytes;
    }
    std::vector<uint8_t> GoodRequest(bool crc) const {
        wire::MpaEnhancedWords words;
        words.ird = raw_read_limit_;
        words.ord = raw_read_limit_;
        return MpaBytes(wire::MakeMpaRequest(crc, &words, {}));  // no P2P: NdkAccept completes with the Reply
    }

    // ---- softndk's side: a fresh QP accepts the raw peer ----
    bool AwaitConnectEvent(int milliseconds = 2000) {
        return WaitFor([&] { return connect_events_.incoming.load() != nullptr; }, milliseconds);
    }
    void Accept() {
        ASSERT_TRUE(AwaitConnectEvent());
        raw_connector_ = connect_events_.incoming.load();
        cq_c_ = CreateCq(kDepth, &cq_events_c_);
        qp_c_ = CreateQp(cq_c_, cq_c_, reinterpret_cast<PVOID>(0xC));
        Completion accepted;
        NTSTATUS returned = raw_connector_->Dispatch->NdkAccept(
            raw_connector_, qp_c_, 4 + raw_read_limit_, 4 + raw_read_limit_, nullptr, 0,
            &DisconnectEvents::OnDisconnect, &disconnects_c_, &Completion::OnRequest, &accepted);
        ASSERT_EQ(accepted.Wait(returned), STATUS_SUCCESS);
    }
    // MPA Request, then the Reply is read and checked. With `crc` both sides use CRC32c.
    void Handshake(bool crc = false) {
        crc_ = crc;
        connect_events_.incoming = nullptr;
        ASSERT_NO_FATAL_FAILURE(Dial());
        ASSERT_NO_FATAL_FAILURE(SendBytes(GoodRequest(crc)));
        ASSERT_NO_FATAL_FAILURE(Accept());
        std::vector<uint8_t> reply;
        wire::MpaFrame frame;
        for (;;) {
            uint8_t byte;
            ASSERT_EQ(::recv(fd_, &byte, 1, 0), 1) << "the Reply";
            reply.push_back(byte);
            const wire::ParseResult parsed = wire::ParseMpaFrame(reply, wire::MpaFrameKind::kReply, &frame);
            if (parsed.ok()) break;
            ASSERT_EQ(parsed.status, wire::WireStatus::kNeedMoreBytes);
        }
        EXPECT_FALSE(frame.reject);
        EXPECT_EQ(frame.crc, crc);
    }

    // ---- FPDUs ----
    std::vector<uint8_t> Fpdu(const std::vector<uint8_t>& header, const std::vector<uint8_t>& payload = {}) {
        std::vector<uint8_t> bytes(wire::FpduSize(header.size() + payload.size()));
        size_t written = 0;
        EXPECT_EQ(wire::SerializeFpdu(header, payload, crc_, bytes, &written), wire::WireStatus::kOk);
        return bytes;
    }
    static std::vector<uint8_t> Header(const SegmentHeader& header) {
        std::vector<uint8_t> bytes(wire::SegmentHeaderSize(header.opcode));
        size_t written = 0;
        EXPECT_EQ(wire::SerializeSegmentHeader(header, bytes, &written), wire::WireStatus::kOk);
        return bytes;
    }
    std::vector<uint8_t> WriteFpdu(uint32_t stag, uint64_t offset, size_t length, bool last = true) {
        return Fpdu(Header(wire::MakeWriteHeader(stag, offset, last)), std::vector<uint8_t>(length, 0xEE));
    }
    std::vector<uint8_t> SendFpdu(uint32_t msn, size_t length, uint32_t mo = 0) {
        return Fpdu(Header(wire::MakeSendHeader(RdmapOpcode::kSend, msn, mo, true, 0)),
                    std::vector<uint8_t>(length, 0xEE));
    }
    std::vector<uint8_t> ReadRequestFpdu(uint32_t msn, uint32_t source_stag, uint64_t source, uint32_t size) {
        wire::ReadRequestFields read;
        read.sink_stag = 0x1234;
        read.size = size;
        read.source_stag = source_stag;
        read.source_offset = source;
        return Fpdu(Header(wire::MakeReadRequestHeader(msn, read)));
    }

    // The Terminate among what softndk sent before closing, if any.
    std::optional<wire::TerminateMessage> TerminateIn(const std::vector<uint8_t>& bytes) {
        terminate_bytes_ = bytes;
        size_t at = 0;
        while (at < terminate_bytes_.size()) {
            wire::FpduView view;
            const wire::ParseResult fpdu = wire::ParseFpdu(std::span(terminate_bytes_).subspan(at), crc_, &view);
            if (!fpdu.ok()) break;
            at += fpdu.size;
            SegmentHeader header;
            const wire::ParseResult parsed = wire::ParseUlpduHeader(view.ulpdu, &header);
            if (!parsed.ok() || header.opcode != RdmapOpcode::kTerminate) continue;
            wire::TerminateMessage message;
            if (!wire::DecodeTerminateBody(view.ulpdu.subspan(parsed.size), &message).ok()) return std::nullopt;
            EXPECT_EQ(message.layout, wire::TerminateLayout::kRfc5040);
            return message;
        }
        return std::nullopt;
    }
    // The whole assertion of one case: `sent` went out, softndk answers with a Terminate of `cause` (whose header
    // copy starts with the offending FPDU's DDP header), closes, flushes C's receive with the cause and tells
    // the consumer once; no byte of B's buffer changed.
    void ExpectTerminate(const std::vector<uint8_t>& sent, wire::TerminateCause cause, bool header_copied = true) {
        const std::vector<uint8_t> before = Snapshot();
        NDK_SGE receive = Sge(mr_b_, buffer_b_->data() + 3 * PAGE_SIZE, 16);
        ASSERT_EQ(qp_c_->Dispatch->NdkReceive(qp_c_, reinterpret_cast<PVOID>(0x99), &receive, 1), STATUS_SUCCESS);
        SendBytes(sent);
        const std::optional<wire::TerminateMessage> terminate = TerminateIn(ReadUntilClosed());
        ASSERT_TRUE(terminate.has_value()) << "no Terminate before the close";
        EXPECT_EQ(terminate->cause, cause)
            << wire::FormatTerminateCause(terminate->cause) << " instead of " << wire::FormatTerminateCause(cause);
        if (header_copied) {
            ASSERT_TRUE(terminate->has_ddp_header);
            EXPECT_EQ(std::memcmp(terminate->ddp_header.data(), sent.data() + wire::kFpduLengthSize,
                                  terminate->ddp_header.size()),
                      0)
                << "the header copy is the offending FPDU's";
        }
        EXPECT_TRUE(WaitFor([&] { return disconnects_c_.count == 1; })) << "the disconnect event, once";
        const NDK_RESULT_EX flushed = PollC();
        EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
        EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(0x99));
        EXPECT_EQ(flushed.ProviderErrorCode,
                  engine::TerminateProviderError(static_cast<uint8_t>(cause.layer), cause.etype, cause.code));
        ExpectUnchanged(before);
        usleep(10000);
        EXPECT_EQ(disconnects_c_.count, 1);
    }
    NDK_RESULT_EX PollC() { return Poll(cq_c_); }
    std::vector<uint8_t> Snapshot() { return {buffer_b_->data(), buffer_b_->data() + buffer_b_->bytes()}; }
    void ExpectUnchanged(const std::vector<uint8_t>& before) {
        EXPECT_EQ(std::memcmp(before.data(), buffer_b_->data(), before.size()), 0) << "registered memory changed";
    }
    uint32_t Token() { return mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_); }
    uint64_t Base() { return RemoteAddress(*buffer_b_); }
    // The MPA phase: softndk closes without a connect event; `reject` when it answers with a Reject first.
    void ExpectRefusedRequest(const std::vector<uint8_t>& request, bool reject) {
        connect_events_.incoming = nullptr;
        ASSERT_NO_FATAL_FAILURE(Dial());
        SendBytes(request);
        const std::vector<uint8_t> answer = ReadUntilClosed();
        if (reject) {
            wire::MpaFrame frame;
            ASSERT_TRUE(wire::ParseMpaFrame(answer, wire::MpaFrameKind::kReply, &frame).ok()) << answer.size();
            EXPECT_TRUE(frame.reject);
        } else {
            EXPECT_TRUE(answer.empty()) << answer.size() << " bytes: closed without an answer";
        }
        EXPECT_FALSE(AwaitConnectEvent(100)) << "the consumer never hears of it";
    }

    int fd_ = -1;
    int receive_buffer_ = 0;                   // SO_RCVBUF of the raw peer (0: the default)
    uint16_t raw_read_limit_ = kRawReadLimit;  // the raw peer's IRD and ORD words; softndk accepts more
    bool crc_ = false;
    std::vector<uint8_t> terminate_bytes_;
    NDK_CONNECTOR* raw_connector_ = nullptr;
    NDK_CQ* cq_c_ = nullptr;
    NDK_QP* qp_c_ = nullptr;
    CqEvents cq_events_c_;
    DisconnectEvents disconnects_c_;
};

}  // namespace softndk::test
