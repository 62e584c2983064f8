// Crafted-packet tests (issue 7 §5): the raw peer of wire/crafted_peer.h against softndk's receive side.
#include "wire/crafted_peer.h"

#include <thread>

namespace softndk::test {
namespace {

// ---- MPA (RFC 5044 §7.1, RFC 6581) ----
TEST_F(CraftedPacketTest, WIRE_MpaBadKeyIsClosedWithoutAnswer) {
    std::vector<uint8_t> request = GoodRequest(false);
    request[3] = 'X';
    ExpectRefusedRequest(request, false);
}

TEST_F(CraftedPacketTest, WIRE_MpaRevision3IsClosedWithoutAnswer) {
    std::vector<uint8_t> request = GoodRequest(false);
    request[17] = 3;  // Rev
    ExpectRefusedRequest(request, false);
}

TEST_F(CraftedPacketTest, WIRE_MpaMarkersRequestedGetAReject) {
    std::vector<uint8_t> request = GoodRequest(false);
    request[16] |= wire::kMpaFlagMarkers;
    ExpectRefusedRequest(request, true);
}

TEST_F(CraftedPacketTest, WIRE_MpaEnhancedFlagWithoutIrdOrdGetsAReject) {
    wire::MpaFrame frame = wire::MakeMpaRequest(false, nullptr, {});
    std::vector<uint8_t> request = MpaBytes(frame);
    request[16] |= wire::kMpaFlagEnhanced;  // H, but PD_Length 0
    request[17] = 2;
    ExpectRefusedRequest(request, true);
}

TEST_F(CraftedPacketTest, WIRE_MpaPrivateDataOver512IsClosedWithoutAnswer) {
    std::vector<uint8_t> request = GoodRequest(false);
    request[18] = 0x02;  // PD_Length 513
    request[19] = 0x01;
    request.resize(request.size() - 4 + 513, 0);
    ExpectRefusedRequest(request, false);
}

TEST_F(CraftedPacketTest, WIRE_MpaTruncatedRequestThenCloseIsDropped) {
    std::vector<uint8_t> request = GoodRequest(false);
    request.resize(request.size() - 2);
    connect_events_.incoming = nullptr;
    ASSERT_NO_FATAL_FAILURE(Dial());
    SendBytes(request);
    ::shutdown(fd_, SHUT_WR);
    EXPECT_TRUE(ReadUntilClosed().empty());
    EXPECT_FALSE(AwaitConnectEvent(100));
}

TEST_F(CraftedPacketTest, WIRE_MpaBytesQueuedBehindTheRequestCloseTheConnection) {
    std::vector<uint8_t> request = GoodRequest(false);
    for (uint8_t byte : SendFpdu(1, 8)) request.push_back(byte);  // an FPDU before the Reply (siw-on-the-wire §3.4)
    ExpectRefusedRequest(request, false);
}

// CM-03 with an MPA rev 1 peer (no IRD/ORD words): accepted, read limits of 1 each way (spec-decisions).
TEST_F(CraftedPacketTest, WIRE_CM_03_Rev1PeerIsAcceptedWithReadLimitsOfOne) {
    connect_events_.incoming = nullptr;
    ASSERT_NO_FATAL_FAILURE(Dial());
    SendBytes(MpaBytes(wire::MakeMpaRequest(false, nullptr, {})));
    ASSERT_TRUE(AwaitConnectEvent());
    NDK_CONNECTOR* passive = connect_events_.incoming.load();
    ULONG inbound = 0, outbound = 0, length = 0;
    EXPECT_EQ(passive->Dispatch->NdkGetConnectionData(passive, &inbound, &outbound, nullptr, &length), STATUS_SUCCESS);
    EXPECT_EQ(inbound, 1u);
    EXPECT_EQ(outbound, 1u);
    EXPECT_EQ(length, 0u);
    ASSERT_NO_FATAL_FAILURE(Accept());
    std::vector<uint8_t> reply(wire::kMpaHeaderSize);
    ASSERT_EQ(::recv(fd_, reply.data(), reply.size(), MSG_WAITALL), static_cast<ssize_t>(reply.size()));
    wire::MpaFrame frame;
    ASSERT_TRUE(wire::ParseMpaFrame(reply, wire::MpaFrameKind::kReply, &frame).ok());
    EXPECT_EQ(frame.revision, 1) << "answered in the peer's revision";
    EXPECT_FALSE(frame.enhanced);
}

// ---- FPDU framing and versions ----
TEST_F(CraftedPacketTest, WIRE_FpduShorterThanItsHeaderTerminatesWithLlpError) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    std::vector<uint8_t> bytes(2 + 10, 0x41);
    bytes[0] = 0x00;  // ULPDU length 10: no DDP header fits
    bytes[1] = 0x0A;
    ExpectTerminate(bytes, term::kLlpMarkerError, false);
}

TEST_F(CraftedPacketTest, WIRE_FpduLongerThanItsFrameWithCrcChangesNothing) {
    ASSERT_NO_FATAL_FAILURE(Handshake(true));
    const std::vector<uint8_t> before = Snapshot();
    std::vector<uint8_t> bytes = WriteFpdu(Token(), Base(), 256);
    bytes[0] = 0x08;  // the length field claims 2 KiB more than the frame holds; the stream then ends
    bytes.resize(bytes.size() - 4);
    SendBytes(bytes);
    ::shutdown(fd_, SHUT_WR);
    ReadUntilClosed();
    EXPECT_TRUE(WaitFor([&] { return disconnects_c_.count == 1; }));
    ExpectUnchanged(before);
}

TEST_F(CraftedPacketTest, WIRE_BadCrcTerminatesAndChangesNothing) {
    ASSERT_NO_FATAL_FAILURE(Handshake(true));
    std::vector<uint8_t> bytes = WriteFpdu(Token(), Base(), 64);
    bytes.back() ^= 0x01;
    ExpectTerminate(bytes, term::kLlpCrcError, false);  // an FPDU that failed its CRC is not copied back
}

// With CRC on, the CRC decides before the header's own checks (RFC 5044 §6.1): a header refused over a bad CRC
// is a CRC error, since its bits cannot be trusted; over a good CRC it is the header's refusal.
TEST_F(CraftedPacketTest, WIRE_UnknownStagUnderABadCrcIsACrcError) {
    ASSERT_NO_FATAL_FAILURE(Handshake(true));
    std::vector<uint8_t> bytes = WriteFpdu(0x00FFFF42, Base(), 64);
    bytes.back() ^= 0x01;
    ExpectTerminate(bytes, term::kLlpCrcError, false);
}

TEST_F(CraftedPacketTest, WIRE_UnknownStagUnderAGoodCrcIsRefusedAsUnknown) {
    ASSERT_NO_FATAL_FAILURE(Handshake(true));
    ExpectTerminate(WriteFpdu(0x00FFFF42, Base(), 64), term::kDdpTaggedInvalidStag);
}

TEST_F(CraftedPacketTest, WIRE_SendWithAWrongMsnUnderABadCrcIsACrcError) {
    ASSERT_NO_FATAL_FAILURE(Handshake(true));
    std::vector<uint8_t> bytes = SendFpdu(7, 8);
    bytes.back() ^= 0x80;
    ExpectTerminate(bytes, term::kLlpCrcError, false);
}

TEST_F(CraftedPacketTest, WIRE_SendLargerThanTheReceiveUnderAGoodCrcIsTooLong) {
    ASSERT_NO_FATAL_FAILURE(Handshake(true));
    const std::vector<uint8_t> before = Snapshot();
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data() + 2 * PAGE_SIZE, 16);
    ASSERT_EQ(qp_c_->Dispatch->NdkReceive(qp_c_, reinterpret_cast<PVOID>(0x98), &receive, 1), STATUS_SUCCESS);
    SendBytes(SendFpdu(1, 64));
    const std::optional<wire::TerminateMessage> terminate = TerminateIn(ReadUntilClosed());
    ASSERT_TRUE(terminate.has_value());
    EXPECT_EQ(terminate->cause, term::kDdpUntaggedMessageTooLong) << wire::FormatTerminateCause(terminate->cause);
    const NDK_RESULT_EX overflow = PollC();
    EXPECT_EQ(overflow.Status, STATUS_BUFFER_OVERFLOW);
    EXPECT_EQ(overflow.RequestContext, reinterpret_cast<PVOID>(0x98));
    ExpectUnchanged(before);
}

TEST_F(CraftedPacketTest, WIRE_WrongDdpVersionTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    std::vector<uint8_t> header = Header(wire::MakeWriteHeader(Token(), Base(), true));
    header[0] = (header[0] & ~0x03) | 0x02;  // DV 2
    ExpectTerminate(Fpdu(header, std::vector<uint8_t>(8, 1)), term::kDdpTaggedInvalidVersion);
}

TEST_F(CraftedPacketTest, WIRE_WrongRdmapVersionTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    std::vector<uint8_t> header = Header(wire::MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    header[1] = (header[1] & 0x3F) | 0x80;  // RV 2
    ExpectTerminate(Fpdu(header, std::vector<uint8_t>(8, 1)), term::kRdmapInvalidVersion);
}

TEST_F(CraftedPacketTest, WIRE_UnknownOpcodeTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    std::vector<uint8_t> header = Header(wire::MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    header[1] = (header[1] & 0xF0) | 0x0C;  // opcode 12
    ExpectTerminate(Fpdu(header, std::vector<uint8_t>(8, 1)), term::kRdmapUnexpectedOpcode);
}

// ---- tagged segments: the one access check, as DDP reports it (RFC 5041 §7.2) ----
TEST_F(CraftedPacketTest, WIRE_TaggedUnknownStagTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    ExpectTerminate(WriteFpdu(0x00FFFF42, Base(), 64), term::kDdpTaggedInvalidStag);
}

TEST_F(CraftedPacketTest, WIRE_TaggedWrongKeyTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    ExpectTerminate(WriteFpdu(Token() ^ 0x5A, Base(), 64), term::kDdpTaggedInvalidStag);
}

TEST_F(CraftedPacketTest, WIRE_TaggedStagOfAnotherPdTerminates) {
    NDK_PD* other_pd = CreatePd();
    NDK_MR* other = CreateMr(false, other_pd);
    ASSERT_EQ(Register(other, buffer_b_->mdl(), buffer_b_->bytes(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    ASSERT_NO_FATAL_FAILURE(Handshake());
    ExpectTerminate(WriteFpdu(other->Dispatch->NdkGetRemoteTokenFromMr(other), Base(), 64),
                    term::kDdpTaggedStagNotAssociated);
    Close(&other->Header);
    Close(&other_pd->Header);
}

TEST_F(CraftedPacketTest, WIRE_TaggedOutOfBoundsTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    ExpectTerminate(WriteFpdu(Token(), Base() + buffer_b_->bytes() - 32, 64), term::kDdpTaggedBaseOrBounds);
}

TEST_F(CraftedPacketTest, WIRE_TaggedOffsetThatWrapsTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    ExpectTerminate(WriteFpdu(Token(), ~uint64_t{0} - 16, 64), term::kDdpTaggedToWrap);
}

TEST_F(CraftedPacketTest, WIRE_TaggedWithoutRightsTerminates) {
    NDK_MR* read_only = CreateMr(false);
    ASSERT_EQ(Register(read_only, buffer_b_->mdl(), buffer_b_->bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    ASSERT_NO_FATAL_FAILURE(Handshake());
    ExpectTerminate(WriteFpdu(read_only->Dispatch->NdkGetRemoteTokenFromMr(read_only), Base(), 64),
                    term::kRdmapAccessRights);
    Close(&read_only->Header);
}

// ---- untagged segments (RFC 5041 §5, §7.3) ----
TEST_F(CraftedPacketTest, WIRE_UntaggedWrongQueueNumberTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    SegmentHeader header = wire::MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0);
    std::vector<uint8_t> bytes = Header(header);
    bytes[9] = 3;  // QN 3 (big-endian word at 6..9)
    ExpectTerminate(Fpdu(bytes, std::vector<uint8_t>(8, 1)), term::kDdpUntaggedInvalidQn);
}

TEST_F(CraftedPacketTest, WIRE_UntaggedWrongMsnTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    ExpectTerminate(SendFpdu(7, 8), term::kDdpUntaggedMsnRange);
}

TEST_F(CraftedPacketTest, WIRE_UntaggedWrongMessageOffsetTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    ExpectTerminate(SendFpdu(1, 8, 100), term::kDdpUntaggedInvalidMo);
}

TEST_F(CraftedPacketTest, WIRE_SendLargerThanTheReceiveTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    const std::vector<uint8_t> before = Snapshot();
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 16);
    ASSERT_EQ(qp_c_->Dispatch->NdkReceive(qp_c_, reinterpret_cast<PVOID>(0x98), &receive, 1), STATUS_SUCCESS);
    SendBytes(SendFpdu(1, 17));
    const std::optional<wire::TerminateMessage> terminate = TerminateIn(ReadUntilClosed());
    ASSERT_TRUE(terminate.has_value());
    EXPECT_EQ(terminate->cause, term::kDdpUntaggedMessageTooLong);
    EXPECT_EQ(PollC().Status, STATUS_BUFFER_OVERFLOW) << "the receive that was too small";
    EXPECT_TRUE(WaitFor([&] { return disconnects_c_.count == 1; }));
    ExpectUnchanged(before);
}

TEST_F(CraftedPacketTest, WIRE_SendWithNoReceivePostedTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    SendBytes(SendFpdu(1, 8));
    const std::optional<wire::TerminateMessage> terminate = TerminateIn(ReadUntilClosed());
    ASSERT_TRUE(terminate.has_value());
    EXPECT_EQ(terminate->cause, term::kDdpUntaggedNoBuffer);
    EXPECT_TRUE(WaitFor([&] { return disconnects_c_.count == 1; }));
}

// ---- reads (RFC 5040 §5.2, §6.3) ----
TEST_F(CraftedPacketTest, WIRE_ReadResponseWithoutRequestTerminates) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    ExpectTerminate(Fpdu(Header(wire::MakeReadResponseHeader(0x777, 0, true)), std::vector<uint8_t>(16, 2)),
                    term::kDdpTaggedInvalidStag);
}

// IRD (RFC 5040 §6.5, CM-03): the raw peer offered ORD 1, so softndk's IRD is 1. The peer reads nothing and
// offers a tiny window, so the first 16 MiB Read Response stays queued at softndk; the second Read Request is
// then beyond IRD. The Terminate must still reach the peer: it waits behind the FPDU already on its way (framing)
// and goes out once the peer reads (the socket was full when it was made).
TEST_F(CraftedPacketTest, WIRE_ReadRequestBeyondIrdTerminatesEvenBehindAFullSocket) {
    receive_buffer_ = 4096;
    Handshake();
    constexpr size_t kPages = 4096;  // 16 MiB: more than the kernel's send buffer grows to on loopback
    LockedBuffer source(kPages);
    std::memset(source.data(), 0x6B, source.bytes());
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, source.mdl(), source.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    const UINT32 token = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    const uint64_t base = RemoteAddress(source);
    SendBytes(ReadRequestFpdu(1, token, base, static_cast<uint32_t>(source.bytes())));
    usleep(100000);  // the first Response fills the socket
    const std::vector<uint8_t> beyond = ReadRequestFpdu(2, token, base, 64);
    ExpectTerminate(beyond, term::kRdmapRemoteStreamCatastrophic);
    for (size_t i = 0; i < source.bytes(); i += PAGE_SIZE) ASSERT_EQ(source.data()[i], 0x6B) << "a source is read only";
    Close(&mr->Header);
}

// RFC 5040 §5.4 / CM-24 (found by tests/wire/hostile_peer.py): the consumer's usual answer to the disconnect event
// after our Terminate is NdkDisconnect and then, at its completion, closing the connector. A Terminate that still
// waits for room behind a full socket must not be thrown away by that close: NdkDisconnect completes once the
// Terminate is handed to the kernel (bounded by DisconnectTimeoutMs). Before, it completed at once and the close
// gave the Terminate up: the peer read its Read Response and then a FIN, and never learnt the cause.
TEST_F(CraftedPacketTest, WIRE_CM_24_ADisconnectAfterOurTerminateCompletesOnlyOnceTheTerminateIsOut) {
    receive_buffer_ = 4096;
    Handshake();
    constexpr size_t kPages = 4096;  // 16 MiB: more than the kernel's send buffer grows to on loopback
    LockedBuffer source(kPages);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, source.mdl(), source.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    const UINT32 token = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    SendBytes(ReadRequestFpdu(1, token, RemoteAddress(source), static_cast<uint32_t>(source.bytes())));
    usleep(100000);                                                   // the first Response fills the socket
    SendBytes(ReadRequestFpdu(2, token, RemoteAddress(source), 64));  // beyond IRD: a Terminate, with no room
    ASSERT_TRUE(WaitFor([&] { return disconnects_c_.count == 1; })) << "the disconnect event";
    Completion disconnected;
    const NTSTATUS returned =
        raw_connector_->Dispatch->NdkDisconnect(raw_connector_, &Completion::OnRequest, &disconnected);
    usleep(100000);
    const bool completed_before_the_peer_read = returned != STATUS_PENDING || disconnected.calls() > 0;
    if (completed_before_the_peer_read) {  // the close a consumer does next
        Close(&raw_connector_->Header);
        raw_connector_ = nullptr;
    }
    std::vector<uint8_t> stream;
    std::thread reader([&] { stream = ReadUntilClosed(); });
    if (!completed_before_the_peer_read) {
        EXPECT_EQ(disconnected.Wait(returned), STATUS_SUCCESS);
        Close(&raw_connector_->Header);
        raw_connector_ = nullptr;
    }
    reader.join();
    Close(&mr->Header);  // before any assertion returns: an open MR would hold the adapter's close
    EXPECT_FALSE(completed_before_the_peer_read) << "NdkDisconnect completed while our Terminate waited for room";
    const std::optional<wire::TerminateMessage> terminate = TerminateIn(stream);
    ASSERT_TRUE(terminate.has_value()) << "the peer read " << stream.size() << " bytes and no Terminate";
    EXPECT_EQ(terminate->cause, term::kRdmapRemoteStreamCatastrophic) << wire::FormatTerminateCause(terminate->cause);
}

// AMB (siw-on-the-wire §3.7, issue 8 §3): siw sizes its read queues to a power of two and fills them, so a peer that
// negotiated ORD 5 may have 8 Read Requests outstanding. softndk's inbound read queue rounds up the same way: an
// IRD of 5 holds 8, and the 9th is beyond it.
TEST_F(CraftedPacketTest, WIRE_CM_03_ReadRequestsUpToIrdRoundedToAPowerOfTwoAreServed) {
    receive_buffer_ = 4096;
    raw_read_limit_ = 5;
    Handshake();
    constexpr size_t kPages = 4096;  // 16 MiB: the first Response fills the socket, so every Request stays queued
    LockedBuffer source(kPages);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, source.mdl(), source.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    const UINT32 token = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    const uint64_t base = RemoteAddress(source);
    SendBytes(ReadRequestFpdu(1, token, base, static_cast<uint32_t>(source.bytes())));
    usleep(100000);
    for (uint32_t msn = 2; msn <= 8; ++msn) SendBytes(ReadRequestFpdu(msn, token, base, 64));
    usleep(100000);
    EXPECT_EQ(disconnects_c_.count, 0) << "8 outstanding under IRD 5 are served";
    ExpectTerminate(ReadRequestFpdu(9, token, base, 64), term::kRdmapRemoteStreamCatastrophic);
    Close(&mr->Header);
}

// RFC 5044 §7.1.2 (siw-on-the-wire §3.4): a responder sends no FPDU before the initiator's first. A Send posted right
// after NdkAccept waits until the raw initiator's first FPDU (a zero-length Write) has come, then goes.
TEST_F(CraftedPacketTest, WIRE_CM_08_ResponderHoldsItsFpdusUntilTheInitiatorsFirst) {
    Handshake();
    std::memset(buffer_b_->data(), 0x4D, 32);
    NDK_SGE sge = Sge(mr_b_, buffer_b_->data(), 32);
    ASSERT_EQ(qp_c_->Dispatch->NdkSend(qp_c_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    pollfd ready{fd_, POLLIN, 0};
    EXPECT_EQ(::poll(&ready, 1, 200), 0) << "no FPDU before the initiator's";
    SendBytes(WriteFpdu(1, 0, 0));  // zero-length Write: names no memory (QP-16)
    std::vector<uint8_t> got;
    uint16_t ulpdu = 0;
    while (got.size() < 2 || got.size() < wire::FpduSize(ulpdu)) {
        uint8_t chunk[256];
        const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
        ASSERT_GT(n, 0) << "the held Send never came";
        got.insert(got.end(), chunk, chunk + n);
        if (got.size() >= 2) {
            ASSERT_TRUE(wire::PeekFpduLength(got, &ulpdu).ok());
        }
    }
    SegmentHeader header;
    ASSERT_TRUE(
        wire::ParseUlpduHeader(std::span<const uint8_t>(got).subspan(wire::kFpduLengthSize, ulpdu), &header).ok());
    EXPECT_EQ(header.opcode, RdmapOpcode::kSend);
    EXPECT_EQ(ulpdu, wire::SegmentHeaderSize(RdmapOpcode::kSend) + 32);
    EXPECT_EQ(PollC().Status, STATUS_SUCCESS);
}

TEST_F(CraftedPacketTest, WIRE_InterleavedTaggedMessagesTerminate) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    std::vector<uint8_t> bytes = WriteFpdu(Token(), Base(), 32, false);  // L clear: the message goes on
    const std::vector<uint8_t> other = WriteFpdu(Token(), Base() + PAGE_SIZE, 32, true);
    bytes.insert(bytes.end(), other.begin(), other.end());
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data() + 3 * PAGE_SIZE, 16);
    ASSERT_EQ(qp_c_->Dispatch->NdkReceive(qp_c_, nullptr, &receive, 1), STATUS_SUCCESS);
    SendBytes(bytes);
    const std::optional<wire::TerminateMessage> terminate = TerminateIn(ReadUntilClosed());
    ASSERT_TRUE(terminate.has_value());
    EXPECT_EQ(terminate->cause, term::kRdmapUnexpectedOpcode) << wire::FormatTerminateCause(terminate->cause);
    EXPECT_TRUE(WaitFor([&] { return disconnects_c_.count == 1; }));
    EXPECT_EQ(buffer_b_->data()[PAGE_SIZE], 0) << "the second Write placed nothing";
}

// ---- a Terminate from the peer (RFC 5040 §4.8; siw's x86 layout, siw-on-the-wire §3.9) ----
class CraftedTerminateTest : public CraftedPacketTest {
protected:
    void ExpectReceived(const std::vector<uint8_t>& body, wire::TerminateCause cause) {
        ASSERT_NO_FATAL_FAILURE(Handshake());
        NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 16);
        ASSERT_EQ(qp_c_->Dispatch->NdkReceive(qp_c_, reinterpret_cast<PVOID>(0x97), &receive, 1), STATUS_SUCCESS);
        SendBytes(Fpdu(Header(wire::MakeTerminateHeader()), body));
        EXPECT_FALSE(TerminateIn(ReadUntilClosed()).has_value()) << "a Terminate is never answered";
        EXPECT_TRUE(WaitFor([&] { return disconnects_c_.count == 1; }));
        const NDK_RESULT_EX flushed = PollC();
        EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
        EXPECT_EQ(flushed.ProviderErrorCode,
                  engine::TerminateProviderError(static_cast<uint8_t>(cause.layer), cause.etype, cause.code));
    }
};

TEST_F(CraftedTerminateTest, WIRE_ReceivedTerminateInRfcLayoutFlushesWithItsCause) {
    std::vector<uint8_t> body(wire::TerminateBodySize(term::kDdpUntaggedMsnRange, {}));
    size_t written = 0;
    ASSERT_EQ(wire::BuildTerminateBody(term::kDdpUntaggedMsnRange, {}, body, &written), wire::WireStatus::kOk);
    body.resize(written);
    ExpectReceived(body, term::kDdpUntaggedMsnRange);
}

TEST_F(CraftedTerminateTest, WIRE_ReceivedTerminateInSiwLayoutFlushesWithItsCause) {
    // siw's bitfield layout: EType<<4 | Layer, flags M/D in the low bits, then the Send's 18-byte header.
    const std::vector<uint8_t> body = {0x21, 0x03, 0x03, 0x00, 0x00, 0x10, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00,
                                       0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00};
    ExpectReceived(body, term::kDdpUntaggedMsnRange);
}

// ---- a peer that stalls inside an FPDU: nothing is placed or completed meanwhile, then it goes on ----
TEST_F(CraftedPacketTest, WIRE_PeerStallingInsideAnFpduIsWaitedFor) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
    ASSERT_EQ(qp_c_->Dispatch->NdkReceive(qp_c_, reinterpret_cast<PVOID>(0x96), &receive, 1), STATUS_SUCCESS);
    const std::vector<uint8_t> send = SendFpdu(1, 40);
    SendBytes({send.begin(), send.begin() + 11});  // inside the DDP header
    usleep(50000);
    NDK_RESULT_EX none{};
    EXPECT_EQ(cq_c_->Dispatch->NdkGetCqResultsEx(cq_c_, &none, 1), 0u);
    SendBytes({send.begin() + 11, send.begin() + 40});  // inside the payload
    usleep(50000);
    EXPECT_EQ(cq_c_->Dispatch->NdkGetCqResultsEx(cq_c_, &none, 1), 0u);
    EXPECT_EQ(disconnects_c_.count, 0);
    SendBytes({send.begin() + 40, send.end()});
    const NDK_RESULT_EX received = PollC();
    EXPECT_EQ(received.Status, STATUS_SUCCESS);
    EXPECT_EQ(received.BytesTransferred, 40u);
    EXPECT_EQ(buffer_b_->data()[39], 0xEE);
}

}  // namespace
}  // namespace softndk::test
