// Issue 18 §3: wire conformance cases, each played by the raw peer of wire/crafted_peer.h and each failing before
// its fix: the Read RTR and IRD, a Reply's ORD above our IRD, a Terminate's MSN and MO, a ULPDU shorter than its
// header, and the revision of an MPA Request with the enhanced bit.
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "wire/crafted_peer.h"

namespace softndk::test {
namespace {

class CraftedConformanceTest : public CraftedPacketTest {
protected:
    // Objects a case made itself, closed in order even when the case stopped at a failed assertion (an object
    // left open would keep the adapter's close waiting).
    void TearDown() override {
        for (NDK_OBJECT_HEADER* object : to_close_) Close(object);
        CraftedPacketTest::TearDown();
    }
    template <typename Object>
    Object* Owned(Object* object) {
        if (object != nullptr) to_close_.push_back(&object->Header);
        return object;
    }
    std::vector<NDK_OBJECT_HEADER*> to_close_;

    // The next whole FPDU softndk sends (CRC off), or nullopt when it closes first or 5 s pass.
    std::optional<std::vector<uint8_t>> NextFpdu() {
        std::vector<uint8_t> bytes(2);
        if (::recv(fd_, bytes.data(), 2, MSG_WAITALL) != 2) return std::nullopt;
        uint16_t ulpdu = 0;
        if (!wire::PeekFpduLength(bytes, &ulpdu).ok()) return std::nullopt;
        bytes.resize(wire::FpduSize(ulpdu));
        const auto rest = static_cast<ssize_t>(bytes.size() - 2);
        if (::recv(fd_, bytes.data() + 2, bytes.size() - 2, MSG_WAITALL) != rest) return std::nullopt;
        return bytes;
    }
    // A raw responder: softndk's connector `connector` with `qp` connects to it; its Request is read into
    // `offered`, and the socket is fd_. NdkConnect's completion is `connected` (returned: `*returned`).
    void ConnectToRawResponder(NDK_CONNECTOR* connector, NDK_QP* qp, Completion& connected, NTSTATUS* returned,
                               wire::MpaFrame* offered, std::vector<uint8_t>* request) {
        const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
        ASSERT_GE(listener, 0);
        SOCKADDR_IN address = Loopback(0);
        ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
        ASSERT_EQ(::listen(listener, 1), 0);
        socklen_t length = sizeof(address);
        ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
        *returned = StartConnect(connector, qp, ntohs(address.sin_port), connected, 2);
        fd_ = ::accept(listener, nullptr, nullptr);
        ::close(listener);
        ASSERT_GE(fd_, 0);
        timeval timeout{5, 0};
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
        request->resize(wire::kMpaHeaderSize + wire::kMpaEnhancedWordsSize);
        ASSERT_EQ(::recv(fd_, request->data(), request->size(), MSG_WAITALL), static_cast<ssize_t>(request->size()));
        ASSERT_TRUE(wire::ParseMpaFrame(*request, wire::MpaFrameKind::kRequest, offered).ok());
    }
    // softndk connects to a raw responder whose Reply carries the words `shape` makes from our Request's: the
    // connect must fail with STATUS_CONNECTION_REFUSED and the responder read a Terminate with `cause` before the
    // stream ends.
    void ExpectReplyRefused(const std::function<void(const wire::MpaFrame&, wire::MpaEnhancedWords*)>& shape,
                            wire::TerminateCause cause) {
        NDK_CONNECTOR* connector = Owned(CreateConnector());
        NDK_QP* qp = Owned(CreateQp(cq_a_, cq_a_, nullptr));
        Completion connected;
        NTSTATUS returned = STATUS_PENDING;
        wire::MpaFrame offered;
        std::vector<uint8_t> request;
        ASSERT_NO_FATAL_FAILURE(ConnectToRawResponder(connector, qp, connected, &returned, &offered, &request));
        wire::MpaEnhancedWords words;
        ASSERT_NO_FATAL_FAILURE(shape(offered, &words));
        SendBytes(MpaBytes(wire::MakeMpaReply(false, &words, {})));
        EXPECT_EQ(connected.Wait(returned), STATUS_CONNECTION_REFUSED);
        const std::optional<wire::TerminateMessage> terminate = TerminateIn(ReadUntilClosed());
        ASSERT_TRUE(terminate.has_value()) << "no Terminate before the close";
        EXPECT_EQ(terminate->cause, cause) << wire::FormatTerminateCause(terminate->cause);
    }
    static SegmentHeader HeaderOf(const std::vector<uint8_t>& fpdu) {
        uint16_t ulpdu = 0;
        EXPECT_TRUE(wire::PeekFpduLength(fpdu, &ulpdu).ok());
        SegmentHeader header;
        EXPECT_TRUE(wire::ParseUlpduHeader(std::span(fpdu).subspan(wire::kFpduLengthSize, ulpdu), &header).ok());
        return header;
    }
};

// Issue 18 §3.1 (RFC 6581 §6, CM-03): the zero-length Read RTR takes no IRD slot, since the initiator does not
// count it against its ORD. A raw initiator with IRD = ORD = 1 sends the RTR and its first Read Request in one
// segment: softndk, at IRD 1, answers both (before the fix it terminated with RDMAP 0x07, IRD exceeded).
TEST_F(CraftedConformanceTest, WIRE_CM_03_ReadRtrTakesNoIrdSlot) {
    connect_events_.incoming = nullptr;
    ASSERT_NO_FATAL_FAILURE(Dial());
    wire::MpaEnhancedWords words;
    words.ird = 1;
    words.ord = 1;
    words.peer_to_peer = true;
    words.read_rtr = true;
    SendBytes(MpaBytes(wire::MakeMpaRequest(false, &words, {})));
    ASSERT_TRUE(AwaitConnectEvent());
    raw_connector_ = connect_events_.incoming.load();
    cq_c_ = CreateCq(kDepth, &cq_events_c_);
    qp_c_ = CreateQp(cq_c_, cq_c_, reinterpret_cast<PVOID>(0xC));
    Completion accepted;
    const NTSTATUS returned =
        raw_connector_->Dispatch->NdkAccept(raw_connector_, qp_c_, 1, 1, nullptr, 0, &DisconnectEvents::OnDisconnect,
                                            &disconnects_c_, &Completion::OnRequest, &accepted);
    std::vector<uint8_t> reply(wire::kMpaHeaderSize + wire::kMpaEnhancedWordsSize);
    ASSERT_EQ(::recv(fd_, reply.data(), reply.size(), MSG_WAITALL), static_cast<ssize_t>(reply.size()));
    wire::MpaFrame frame;
    ASSERT_TRUE(wire::ParseMpaFrame(reply, wire::MpaFrameKind::kReply, &frame).ok());
    ASSERT_TRUE(frame.words.read_rtr) << "the Reply takes the Read RTR offered";
    EXPECT_EQ(frame.words.ird, 1);

    std::memset(buffer_b_->data(), 0x5C, 64);
    std::vector<uint8_t> bytes = ReadRequestFpdu(1, 1, 0, 0);  // the RTR: zero-length, STag 1
    const std::vector<uint8_t> read = ReadRequestFpdu(2, Token(), Base(), 64);
    bytes.insert(bytes.end(), read.begin(), read.end());
    SendBytes(bytes);
    EXPECT_EQ(accepted.Wait(returned), STATUS_SUCCESS);
    for (uint32_t expected : {0u, 64u}) {
        const std::optional<std::vector<uint8_t>> fpdu = NextFpdu();
        ASSERT_TRUE(fpdu.has_value()) << "softndk closed before its Read Response of " << expected << " bytes";
        const SegmentHeader header = HeaderOf(*fpdu);
        ASSERT_EQ(header.opcode, RdmapOpcode::kReadResponse) << "a Terminate instead (IRD exceeded)";
        EXPECT_EQ(fpdu->size(), wire::FpduSize(wire::kDdpTaggedHeaderSize + expected));
    }
    EXPECT_EQ(disconnects_c_.count, 0);
}

// Issue 18 §3.2 (RFC 6581 §5): a Reply whose ORD exceeds the IRD our Request offered is refused, not lowered in
// silence: NdkConnect fails with STATUS_CONNECTION_REFUSED and the responder reads a Terminate LLP/MPA 0x06
// (insufficient IRD) before the stream ends.
TEST_F(CraftedConformanceTest, WIRE_CM_03_ReplyWithAnOrdAboveOurIrdIsRefused) {
    ExpectReplyRefused(
        [](const wire::MpaFrame& offered, wire::MpaEnhancedWords* words) {
            ASSERT_EQ(offered.words.ird, 2);
            words->ird = offered.words.ord;
            words->ord = static_cast<uint16_t>(offered.words.ird + 1);  // one more Read than softndk can hold
        },
        term::kLlpInsufficientIrd);
}

// RFC 6581 §3, CM-04: the responder must pick an RTR type the initiator offered. softndk offers the Write RTR
// only; a Reply that picks the Read RTR (with IRD 0, so the zero-length Read would not even fit) is refused as the
// responder refuses the mirror case: NdkConnect fails with STATUS_CONNECTION_REFUSED and the responder reads a
// Terminate LLP/MPA 0x07 (no matching RTR). Before, the initiator sent a zero-length Read Request and carried on.
TEST_F(CraftedConformanceTest, WIRE_CM_04_AReplyThatPicksAnRtrWeDidNotOfferIsRefused) {
    ExpectReplyRefused(
        [](const wire::MpaFrame& offered, wire::MpaEnhancedWords* words) {
            ASSERT_TRUE(offered.words.peer_to_peer);
            ASSERT_TRUE(offered.words.write_rtr && !offered.words.read_rtr) << "softndk offers the Write RTR only";
            words->peer_to_peer = true;
            words->read_rtr = true;  // never offered
        },
        term::kLlpNoMatchingRtr);
}

// Issue 18 §3.4 (RFC 6581 §6, CM-08): the RTR is the initiator's first FPDU even when another thread posts the
// moment the QP is connected. A thread spins on NdkSend while NdkCompleteConnect runs; the raw responder must read
// the zero-length Write RTR first, then the Send. Before the fix the QP took posts before the RTR was queued.
TEST_F(CraftedConformanceTest, WIRE_CM_08_RtrGoesFirstWhenAnotherThreadPostsAtOnce) {
    for (int round = 0; round < 30; ++round) {
        SCOPED_TRACE(round);
        NDK_CONNECTOR* connector = Owned(CreateConnector());
        NDK_QP* qp = Owned(CreateQp(cq_a_, cq_a_, nullptr));
        Completion connected;
        NTSTATUS returned = STATUS_PENDING;
        wire::MpaFrame offered;
        std::vector<uint8_t> request;
        ASSERT_NO_FATAL_FAILURE(ConnectToRawResponder(connector, qp, connected, &returned, &offered, &request));
        ASSERT_TRUE(offered.words.peer_to_peer);
        wire::MpaEnhancedWords words;
        words.ird = 1;
        words.ord = 1;
        words.peer_to_peer = true;
        words.write_rtr = true;
        SendBytes(MpaBytes(wire::MakeMpaReply(false, &words, {})));
        ASSERT_EQ(connected.Wait(returned), STATUS_SUCCESS);
        std::atomic<bool> start{false};
        std::thread poster([&] {
            NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
            while (!start.load()) {
            }
            const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (qp->Dispatch->NdkSend(qp, nullptr, &sge, 1, 0) != STATUS_SUCCESS &&
                   std::chrono::steady_clock::now() < give_up) {
            }
        });
        start = true;
        Completion completed;
        EXPECT_EQ(completed.Wait(connector->Dispatch->NdkCompleteConnect(connector, nullptr, nullptr,
                                                                         &Completion::OnRequest, &completed)),
                  STATUS_SUCCESS);
        poster.join();
        const std::optional<std::vector<uint8_t>> first = NextFpdu();
        ASSERT_TRUE(first.has_value());
        const SegmentHeader header = HeaderOf(*first);
        EXPECT_EQ(header.opcode, RdmapOpcode::kWrite) << "the Send went before the RTR";
        EXPECT_EQ(first->size(), wire::FpduSize(wire::kDdpTaggedHeaderSize)) << "a zero-length Write";
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
        ::close(fd_);
        fd_ = -1;
        for (NDK_OBJECT_HEADER* object : to_close_) Close(object);
        to_close_.clear();
    }
}

// Issue 33 §4.3 (siw-on-the-wire §3.4, docs/spec-decisions.md "The initiator's kicks"): a silent raw responder, and
// the consumer posts a Send right after connecting. Over the next 150 ms the responder gets the RTR, the Send and
// one kick after it (a siw responder whose accept window swallowed the Send wakes at it), and no more: before,
// the kicks at 10 and 40 ms both followed the consumer's data.
TEST_F(CraftedConformanceTest, WIRE_OneKickAndNoMoreFollowsTheConsumersData) {
    NDK_CONNECTOR* connector = Owned(CreateConnector());
    NDK_QP* qp = Owned(CreateQp(cq_a_, cq_a_, nullptr));
    Completion connected;
    NTSTATUS returned = STATUS_PENDING;
    wire::MpaFrame offered;
    std::vector<uint8_t> request;
    ASSERT_NO_FATAL_FAILURE(ConnectToRawResponder(connector, qp, connected, &returned, &offered, &request));
    wire::MpaEnhancedWords words;
    words.ird = 1;
    words.ord = 1;
    words.peer_to_peer = true;
    words.write_rtr = true;
    SendBytes(MpaBytes(wire::MakeMpaReply(false, &words, {})));
    ASSERT_EQ(connected.Wait(returned), STATUS_SUCCESS);
    Completion completed;
    ASSERT_EQ(completed.Wait(connector->Dispatch->NdkCompleteConnect(connector, nullptr, nullptr,
                                                                     &Completion::OnRequest, &completed)),
              STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp->Dispatch->NdkSend(qp, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
    timeval timeout{0, 20 * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    std::vector<std::vector<uint8_t>> received;
    while (std::chrono::steady_clock::now() < until)
        if (std::optional<std::vector<uint8_t>> fpdu = NextFpdu()) received.push_back(std::move(*fpdu));
    const size_t zero_length_write = wire::FpduSize(wire::kDdpTaggedHeaderSize);
    ASSERT_EQ(received.size(), 3u) << "the RTR, the Send and one kick";
    EXPECT_EQ(HeaderOf(received[0]).opcode, RdmapOpcode::kWrite) << "the RTR first";
    EXPECT_EQ(received[0].size(), zero_length_write);
    EXPECT_EQ(HeaderOf(received[1]).opcode, RdmapOpcode::kSend) << "then the consumer's Send";
    EXPECT_EQ(HeaderOf(received[2]).opcode, RdmapOpcode::kWrite) << "then the one kick";
    EXPECT_EQ(received[2].size(), zero_length_write);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
}

// Issue 18 §3.3 (RFC 5040 §4.8): a Terminate is the one message of queue 2, with MSN 1 and MO 0. One with another
// MSN or MO is not honoured as a Terminate: it is a malformed untagged segment and gets softndk's own Terminate.
TEST_F(CraftedConformanceTest, WIRE_TerminateWithAnotherMsnIsRefusedAsAnInvalidMsn) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    SegmentHeader header = wire::MakeTerminateHeader();
    header.msn = 2;
    std::vector<uint8_t> body(wire::TerminateBodySize(term::kDdpUntaggedNoBuffer, {}));
    size_t written = 0;
    ASSERT_EQ(wire::BuildTerminateBody(term::kDdpUntaggedNoBuffer, {}, body, &written), wire::WireStatus::kOk);
    body.resize(written);
    ExpectTerminate(Fpdu(Header(header), body), term::kDdpUntaggedMsnRange);
}

TEST_F(CraftedConformanceTest, WIRE_TerminateWithAMessageOffsetIsRefusedAsAnInvalidMo) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    SegmentHeader header = wire::MakeTerminateHeader();
    header.message_offset = 28;
    std::vector<uint8_t> body(wire::TerminateBodySize(term::kDdpUntaggedNoBuffer, {}));
    size_t written = 0;
    ASSERT_EQ(wire::BuildTerminateBody(term::kDdpUntaggedNoBuffer, {}, body, &written), wire::WireStatus::kOk);
    body.resize(written);
    ExpectTerminate(Fpdu(Header(header), body), term::kDdpUntaggedInvalidMo);
}

// Issue 18 §3.5: an FPDU whose ULPDU length is 0, or shorter than the header its opcode needs, holds no DDP header
// to copy: the Terminate is LLP/MPA 0x03 with no header copy (before, the copy was taken from the next FPDU's
// bytes). The FPDU comes whole, with the next one behind it, as a peer's segment would.
TEST_F(CraftedConformanceTest, WIRE_UlpduOfLengthZeroTerminatesWithLlpErrorAndNoHeaderCopy) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    std::vector<uint8_t> bytes = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};  // length 0, pad 2, CRC 4
    const std::vector<uint8_t> next = SendFpdu(1, 16);
    bytes.insert(bytes.end(), next.begin(), next.end());
    ExpectTerminate(bytes, term::kLlpMarkerError, /*header_copied=*/false);
    ASSERT_TRUE(TerminateIn(terminate_bytes_).has_value());
    EXPECT_FALSE(TerminateIn(terminate_bytes_)->has_ddp_header) << "no copy of bytes outside the ULPDU";
}

// The same for a ULPDU long enough for a tagged header but not for its untagged one. This sub-case already held
// before the fix (an LLP cause never carries a copy); the test keeps it so.
TEST_F(CraftedConformanceTest, WIRE_UntaggedUlpduShorterThanItsHeaderTerminatesWithNoHeaderCopy) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    std::vector<uint8_t> bytes = SendFpdu(1, 0);  // an 18-byte untagged header; its length field says 16
    bytes[1] = 16;
    const std::vector<uint8_t> next = SendFpdu(2, 16);
    bytes.insert(bytes.end(), next.begin(), next.end());
    ExpectTerminate(bytes, term::kLlpMarkerError, /*header_copied=*/false);
    EXPECT_FALSE(TerminateIn(terminate_bytes_)->has_ddp_header);
}

// Issue 18 §3.7 (RFC 6581 §5): the enhanced bit exists from revision 2. A revision-1 Request with it set is a
// revision-1 Request: answered in revision 1 without IRD/ORD words, its four private-data bytes the ULP's.
TEST_F(CraftedConformanceTest, WIRE_CM_03_Rev1RequestWithTheEnhancedBitIsAnsweredInRevisionOne) {
    connect_events_.incoming = nullptr;
    ASSERT_NO_FATAL_FAILURE(Dial());
    const std::vector<uint8_t> ulp = {0x00, 0x05, 0x00, 0x06};
    std::vector<uint8_t> request = MpaBytes(wire::MakeMpaRequest(false, nullptr, ulp));
    request[16] |= wire::kMpaFlagEnhanced;
    SendBytes(request);
    ASSERT_TRUE(AwaitConnectEvent());
    NDK_CONNECTOR* passive = connect_events_.incoming.load();
    ULONG inbound = 0, outbound = 0, length = 8;
    uint8_t data[8] = {};
    EXPECT_EQ(passive->Dispatch->NdkGetConnectionData(passive, &inbound, &outbound, data, &length), STATUS_SUCCESS);
    EXPECT_EQ(inbound, 1u) << "a revision-1 peer: read limits of 1";
    EXPECT_EQ(outbound, 1u);
    ASSERT_EQ(length, 4u) << "the ULP's private data, words not taken out";
    EXPECT_EQ(std::memcmp(data, ulp.data(), 4), 0);
    ASSERT_NO_FATAL_FAILURE(Accept());
    std::vector<uint8_t> reply(wire::kMpaHeaderSize);
    ASSERT_EQ(::recv(fd_, reply.data(), reply.size(), MSG_WAITALL), static_cast<ssize_t>(reply.size()));
    EXPECT_EQ(reply[17], 1) << "the Reply's revision";
    EXPECT_EQ(reply[16] & wire::kMpaFlagEnhanced, 0);
    EXPECT_EQ(reply[18] << 8 | reply[19], 0) << "no IRD/ORD words";
}

}  // namespace
}  // namespace softndk::test
