// Terminate (RFC 5040 §4.8): RFC-layout building, lenient decoding of RFC and siw layouts, cause names.
#include <gtest/gtest.h>

#include <vector>

#include "support/wire_test_support.h"
#include "wire/iwarp_wire.h"

namespace softndk::wire {
namespace {

std::vector<uint8_t> Body(TerminateCause cause, const TerminateOffender& offender) {
    std::vector<uint8_t> body(TerminateBodySize(cause, offender));
    size_t written = 0;
    EXPECT_EQ(BuildTerminateBody(cause, offender, body, &written), WireStatus::kOk);
    EXPECT_EQ(written, body.size());
    return body;
}

TEST(WireTerminateTest, DdpErrorIsBuiltInRfcLayoutWithTheSegmentHeaderCopied) {
    const std::vector<uint8_t> send = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 6, 0, true, 0));
    std::vector<uint8_t> ulpdu = send;
    ulpdu.resize(send.size() + 16, 0x77);  // payload after the header is not copied
    const TerminateOffender offender{.ulpdu_prefix = ulpdu, .segment_length_valid = true, .segment_length = 34};
    const std::vector<uint8_t> body = Body(term::kDdpUntaggedMsnRange, offender);
    ASSERT_EQ(body.size(), 4u + 2u + 18u);
    EXPECT_EQ(body[0], 0x12) << "Layer DDP (1) in the high nibble, EType untagged (2) low";
    EXPECT_EQ(body[1], 0x03);
    EXPECT_EQ(body[2], kTerminateFlagM | kTerminateFlagD);
    EXPECT_EQ(body[3], 0x00);
    EXPECT_EQ(body[4], 0x00);
    EXPECT_EQ(body[5], 34);
    EXPECT_TRUE(std::equal(send.begin(), send.end(), body.begin() + 6));

    TerminateMessage message;
    const ParseResult r = DecodeTerminateBody(body, &message);
    ASSERT_EQ(r.status, WireStatus::kOk);
    EXPECT_EQ(r.size, body.size());
    EXPECT_EQ(message.layout, TerminateLayout::kRfc5040);
    EXPECT_FALSE(message.layout_guessed);
    EXPECT_EQ(message.cause, term::kDdpUntaggedMsnRange);
    EXPECT_TRUE(message.segment_length_valid && message.has_ddp_header && !message.has_rdmap_header);
    EXPECT_EQ(message.segment_length, 34);
    SegmentHeader copied;
    ASSERT_EQ(ParseSegmentHeader(message.ddp_header, &copied).status, WireStatus::kOk);
    EXPECT_EQ(copied.msn, 6u);
}

TEST(WireTerminateTest, ReadRequestErrorCopiesTheRdmapHeaderToo) {
    const ReadRequestFields read{.sink_stag = 1, .sink_offset = 2, .size = 3, .source_stag = 4, .source_offset = 5};
    const std::vector<uint8_t> request = HeaderBytes(MakeReadRequestHeader(1, read));
    const TerminateOffender offender{.ulpdu_prefix = request, .segment_length_valid = true, .segment_length = 46};
    const std::vector<uint8_t> body = Body(term::kRdmapInvalidStag, offender);
    ASSERT_EQ(body.size(), 4u + 2u + 18u + 28u);
    EXPECT_EQ(body.size(), kTerminateMaxBodySize);
    EXPECT_EQ(body[2], kTerminateFlagM | kTerminateFlagD | kTerminateFlagR);
    TerminateMessage message;
    ASSERT_EQ(DecodeTerminateBody(body, &message).status, WireStatus::kOk);
    EXPECT_TRUE(message.has_rdmap_header);
    ASSERT_EQ(message.rdmap_header.size(), kRdmaReadRequestSize);
    std::vector<uint8_t> rebuilt(message.ddp_header.begin(), message.ddp_header.end());
    rebuilt.insert(rebuilt.end(), message.rdmap_header.begin(), message.rdmap_header.end());
    SegmentHeader copied;
    ASSERT_EQ(ParseSegmentHeader(rebuilt, &copied).status, WireStatus::kOk);
    EXPECT_EQ(copied.read.source_stag, 4u);
}

TEST(WireTerminateTest, TaggedSegmentCopiesFourteenBytes) {
    const std::vector<uint8_t> write = HeaderBytes(MakeWriteHeader(0xDEAD, 0x10, true));
    const std::vector<uint8_t> body = Body(term::kDdpTaggedInvalidStag, {.ulpdu_prefix = write});
    ASSERT_EQ(body.size(), 4u + 2u + 14u);
    EXPECT_EQ(body[2], kTerminateFlagD) << "no M: the segment length was not given";
    TerminateMessage message;
    ASSERT_EQ(DecodeTerminateBody(body, &message).status, WireStatus::kOk);
    EXPECT_EQ(message.ddp_header.size(), kDdpTaggedHeaderSize);
    EXPECT_FALSE(message.segment_length_valid);
}

TEST(WireTerminateTest, LlpErrorsCarryNoHeaderCopies) {
    const std::vector<uint8_t> send = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    const std::vector<uint8_t> body =
        Body(term::kLlpCrcError, {.ulpdu_prefix = send, .segment_length_valid = true, .segment_length = 34});
    ASSERT_EQ(body.size(), 6u);
    EXPECT_EQ(body[0], 0x20);
    EXPECT_EQ(body[1], 0x02);
    EXPECT_EQ(body[2], kTerminateFlagM);
    const std::vector<uint8_t> bare = Body(term::kLlpCrcError, {});
    EXPECT_EQ(bare, (std::vector<uint8_t>{0x20, 0x02, 0x00, 0x00}));
}

TEST(WireTerminateTest, WholeTerminateUlpduParsesAsATerminateSegment) {
    std::vector<uint8_t> ulpdu(kDdpUntaggedHeaderSize + kTerminateMaxBodySize);
    size_t written = 0;
    ASSERT_EQ(BuildTerminateUlpdu(term::kRdmapUnexpectedOpcode, {}, ulpdu, &written), WireStatus::kOk);
    ASSERT_EQ(written, 22u);
    SegmentHeader h;
    const ParseResult r = ParseUlpduHeader(std::span(ulpdu.data(), written), &h);
    ASSERT_EQ(r.status, WireStatus::kOk);
    EXPECT_EQ(h.opcode, RdmapOpcode::kTerminate);
    TerminateMessage message;
    ASSERT_EQ(DecodeTerminateBody(std::span(ulpdu.data() + r.size, written - r.size), &message).status,
              WireStatus::kOk);
    EXPECT_EQ(message.cause, term::kRdmapUnexpectedOpcode);
    EXPECT_EQ(BuildTerminateUlpdu(term::kRdmapUnexpectedOpcode, {}, std::span(ulpdu.data(), 21), &written),
              WireStatus::kBufferTooSmall);
}

TEST(WireTerminateTest, SiwBitfieldLayoutIsDecodedFromTheLowFlagBits) {
    // captures/siw-terminate-bad-msn.pcapng, Terminate body (siw-on-the-wire §3.9): `21 03 03 00`, length 0x0010 (the
    // payload length), then the 18-byte untagged header of the Send with MSN 6.
    const std::vector<uint8_t> body = {0x21, 0x03, 0x03, 0x00, 0x00, 0x10, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00,
                                       0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00};
    TerminateMessage message;
    const ParseResult r = DecodeTerminateBody(body, &message);
    ASSERT_EQ(r.status, WireStatus::kOk);
    EXPECT_EQ(r.size, body.size());
    EXPECT_EQ(message.layout, TerminateLayout::kSiwBitfield);
    EXPECT_FALSE(message.layout_guessed);
    EXPECT_EQ(message.cause, term::kDdpUntaggedMsnRange);
    EXPECT_TRUE(message.segment_length_valid);
    EXPECT_TRUE(message.has_ddp_header);
    EXPECT_FALSE(message.has_rdmap_header);
    EXPECT_EQ(message.segment_length, 0x10);
    SegmentHeader copied;
    ASSERT_EQ(ParseSegmentHeader(message.ddp_header, &copied).status, WireStatus::kOk);
    EXPECT_EQ(copied.opcode, RdmapOpcode::kSend);
    EXPECT_EQ(copied.msn, 6u);
}

TEST(WireTerminateTest, WithoutFlagsTheRegisteredReadingWinsAndIsMarkedGuessed) {
    TerminateMessage message;
    // RFC reading RDMAP/remote-op/0x02 is unregistered; siw's reading LLP/0/0x02 (CRC) is: siw.
    ASSERT_EQ(DecodeTerminateBody(std::vector<uint8_t>{0x02, 0x02, 0x00, 0x00}, &message).status, WireStatus::kOk);
    EXPECT_EQ(message.layout, TerminateLayout::kSiwBitfield);
    EXPECT_TRUE(message.layout_guessed);
    EXPECT_EQ(message.cause, term::kLlpCrcError);
    // Both readings registered (LLP/0/0x05 vs RDMAP/2/0x05): the RFC one.
    ASSERT_EQ(DecodeTerminateBody(std::vector<uint8_t>{0x20, 0x05, 0x00, 0x00}, &message).status, WireStatus::kOk);
    EXPECT_EQ(message.layout, TerminateLayout::kRfc5040);
    EXPECT_TRUE(message.layout_guessed);
    EXPECT_EQ(message.cause, term::kLlpLocalCatastrophic);
    // Equal nibbles read the same either way: nothing to guess.
    ASSERT_EQ(DecodeTerminateBody(std::vector<uint8_t>{0x00, 0x00, 0x00, 0x00}, &message).status, WireStatus::kOk);
    EXPECT_FALSE(message.layout_guessed);
    EXPECT_EQ(message.cause, term::kRdmapCatastrophicLocal);
}

TEST(WireTerminateTest, TruncatedOrInconsistentBodiesAreBadTerminates) {
    const std::vector<uint8_t> send = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    const std::vector<uint8_t> read = HeaderBytes(MakeReadRequestHeader(1, {}));
    for (const auto& prefix : {send, read}) {
        const std::vector<uint8_t> body =
            Body(term::kDdpUntaggedInvalidQn, {.ulpdu_prefix = prefix, .segment_length_valid = true});
        for (size_t n = 0; n < body.size(); ++n) {
            TerminateMessage message;
            EXPECT_EQ(DecodeTerminateBody(std::span(body.data(), n), &message).status, WireStatus::kBadTerminate)
                << "length " << n;
        }
    }
    TerminateMessage message;
    // R without D: the RDMAP header has nothing to follow.
    EXPECT_EQ(DecodeTerminateBody(std::vector<uint8_t>(64, 0), &message).status, WireStatus::kOk);
    std::vector<uint8_t> r_only(64, 0);
    r_only[2] = kTerminateFlagR;
    EXPECT_EQ(DecodeTerminateBody(r_only, &message).status, WireStatus::kBadTerminate);
}

TEST(WireTerminateTest, BuilderRejectsNibbleOverflowAndShortBuffers) {
    std::vector<uint8_t> out(64);
    size_t written = 0;
    EXPECT_EQ(BuildTerminateBody({ErrorLayer::kDdp, 0x10, 0}, {}, out, &written), WireStatus::kInvalidArgument);
    EXPECT_EQ(BuildTerminateBody(term::kLlpCrcError, {}, std::span(out.data(), 3), &written),
              WireStatus::kBufferTooSmall);
}

TEST(WireTerminateTest, EveryNamedCauseHasTextAndPacksRoundTrip) {
    const TerminateCause all[] = {
        term::kRdmapCatastrophicLocal,
        term::kRdmapInvalidStag,
        term::kRdmapBaseOrBounds,
        term::kRdmapAccessRights,
        term::kRdmapStagNotAssociated,
        term::kRdmapToWrap,
        term::kRdmapProtectionCannotInvalidate,
        term::kRdmapProtectionUnspecified,
        term::kRdmapInvalidVersion,
        term::kRdmapUnexpectedOpcode,
        term::kRdmapRemoteStreamCatastrophic,
        term::kRdmapRemoteGlobalCatastrophic,
        term::kRdmapOperationCannotInvalidate,
        term::kRdmapOperationUnspecified,
        term::kDdpCatastrophicLocal,
        term::kDdpTaggedInvalidStag,
        term::kDdpTaggedBaseOrBounds,
        term::kDdpTaggedStagNotAssociated,
        term::kDdpTaggedToWrap,
        term::kDdpTaggedInvalidVersion,
        term::kDdpUntaggedInvalidQn,
        term::kDdpUntaggedNoBuffer,
        term::kDdpUntaggedMsnRange,
        term::kDdpUntaggedInvalidMo,
        term::kDdpUntaggedMessageTooLong,
        term::kDdpUntaggedInvalidVersion,
        term::kLlpConnectionLost,
        term::kLlpCrcError,
        term::kLlpMarkerError,
        term::kLlpInvalidRequestReply,
        term::kLlpLocalCatastrophic,
        term::kLlpInsufficientIrd,
        term::kLlpNoMatchingRtr,
    };
    for (const TerminateCause& cause : all) {
        EXPECT_STRNE(TerminateCauseName(cause), "unknown") << cause.Packed();
        EXPECT_EQ(TerminateCause::Unpack(cause.Packed()), cause);
    }
    EXPECT_EQ(term::kDdpUntaggedMsnRange.Packed(), 0x010203u);
    EXPECT_EQ(FormatTerminateCause(term::kDdpUntaggedMsnRange),
              "DDP/0x2/0x03 (DDP untagged buffer: invalid MSN, range not valid)");
    EXPECT_EQ(FormatTerminateCause(0x000206u), "RDMAP/0x2/0x06 (RDMAP remote operation: unexpected opcode)");
    EXPECT_STREQ(TerminateCauseName({ErrorLayer::kLlp, 0, 0x42}), "unknown");
    EXPECT_EQ(FormatTerminateCause({static_cast<ErrorLayer>(9), 1, 2}), "layer?/0x1/0x02 (unknown)");
}

TEST(WireTerminateTest, ParseErrorsMapToTheTerminateTheRfcsAndSiwUse) {
    EXPECT_EQ(TerminateCauseFor(WireStatus::kCrcMismatch, false), term::kLlpCrcError);
    EXPECT_EQ(TerminateCauseFor(WireStatus::kUlpduShorterThanHeader, false), term::kLlpMarkerError);
    EXPECT_EQ(TerminateCauseFor(WireStatus::kBadMpaKey, false), term::kLlpInvalidRequestReply);
    EXPECT_EQ(TerminateCauseFor(WireStatus::kBadDdpVersion, true), term::kDdpTaggedInvalidVersion);
    EXPECT_EQ(TerminateCauseFor(WireStatus::kBadDdpVersion, false), term::kDdpUntaggedInvalidVersion);
    EXPECT_EQ(TerminateCauseFor(WireStatus::kBadRdmapVersion, false), term::kRdmapInvalidVersion);
    EXPECT_EQ(TerminateCauseFor(WireStatus::kUnknownOpcode, false), term::kRdmapUnexpectedOpcode);
    EXPECT_EQ(TerminateCauseFor(WireStatus::kOpcodeBufferModelMismatch, true), term::kRdmapUnexpectedOpcode);
    EXPECT_EQ(TerminateCauseFor(WireStatus::kInvalidQueueNumber, false), term::kDdpUntaggedInvalidQn);
}

}  // namespace
}  // namespace softndk::wire
