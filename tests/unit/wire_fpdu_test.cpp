// FPDU framing (RFC 5044 §4-6), DDP headers (RFC 5041 §4) and RDMAP headers (RFC 5040 §4): round trips, the
// control words siw sends, every parser error path.
#include <gtest/gtest.h>

#include <vector>

#include "support/wire_test_support.h"
#include "wire/iwarp_wire.h"

namespace softndk::wire {
namespace {

std::vector<uint8_t> Fpdu(std::span<const uint8_t> header, std::span<const uint8_t> payload, bool crc) {
    std::vector<uint8_t> bytes(FpduSize(header.size() + payload.size()));
    size_t written = 0;
    EXPECT_EQ(SerializeFpdu(header, payload, crc, bytes, &written), WireStatus::kOk);
    EXPECT_EQ(written, bytes.size());
    return bytes;
}

// ---- framing ----

TEST(WireFpduTest, PadMakesLengthUlpduAndPadAMultipleOfFour) {
    EXPECT_EQ(FpduPadSize(14), 0u);
    EXPECT_EQ(FpduPadSize(15), 3u);
    EXPECT_EQ(FpduPadSize(17), 1u);
    EXPECT_EQ(FpduPadSize(34), 0u);  // siw's 16-byte Send: ULPDU 34, FPDU 40
    EXPECT_EQ(FpduSize(34), 40u);
    EXPECT_EQ(FpduSize(17), 24u);  // the synthetic 3-byte Write
    for (size_t n = 0; n < 64; ++n) EXPECT_EQ((kFpduLengthSize + n + FpduPadSize(n)) % 4, 0u) << n;
}

TEST(WireFpduTest, MaxUlpduForMssFollowsRfc5044AndFitsTheSegment) {
    EXPECT_EQ(MaxUlpduForMss(1460), 1454u);
    EXPECT_EQ(MaxUlpduForMss(1456), 1450u) << "siw's MSS & ~7 FPDUs carry ULPDU 1450 (siw-on-the-wire §3.6)";
    EXPECT_EQ(MaxUlpduForMss(0), 0u);
    EXPECT_EQ(MaxUlpduForMss(7), 0u);
    EXPECT_EQ(MaxUlpduForMss(8), 2u);
    EXPECT_EQ(MaxUlpduForMss(1u << 20), kFpduMaxUlpdu);
    EXPECT_EQ(MaxSegmentPayloadForMss(1456, kDdpTaggedHeaderSize), 1436u) << "siw's Write payload per FPDU";
    EXPECT_EQ(MaxSegmentPayloadForMss(1456, kDdpUntaggedHeaderSize), 1432u);
    EXPECT_EQ(MaxSegmentPayloadForMss(16, kDdpUntaggedHeaderSize), 0u);
    for (size_t mss = 8; mss < 3000; ++mss) {
        const size_t n = MaxUlpduForMss(mss);
        ASSERT_LE(FpduSize(n), mss) << mss;
        ASSERT_GT(FpduSize(n + 1), mss) << mss;
    }
}

TEST(WireFpduTest, RoundTripsEveryPadWithAndWithoutCrc) {
    const std::vector<uint8_t> header = HeaderBytes(MakeWriteHeader(0x11223344, 0x1000, true));
    for (bool crc : {false, true}) {
        for (size_t len = 0; len < 8; ++len) {
            std::vector<uint8_t> payload;
            for (size_t i = 0; i < len; ++i) payload.push_back(static_cast<uint8_t>('a' + i));
            const std::vector<uint8_t> bytes = Fpdu(header, payload, crc);
            FpduView view;
            const ParseResult r = ParseFpdu(bytes, crc, &view);
            ASSERT_EQ(r.status, WireStatus::kOk);
            EXPECT_EQ(r.size, bytes.size());
            ASSERT_EQ(view.ulpdu.size(), header.size() + len);
            EXPECT_TRUE(std::equal(payload.begin(), payload.end(), view.ulpdu.begin() + header.size()));
            const size_t pad = FpduPadSize(view.ulpdu.size());
            for (size_t i = 0; i < pad; ++i) EXPECT_EQ(bytes[2 + view.ulpdu.size() + i], 0) << "pad is zero";
            if (crc) {
                EXPECT_EQ(view.received_crc, Crc32c(bytes.data(), bytes.size() - 4));
            } else {
                EXPECT_EQ(view.received_crc, 0u) << "CRC off sends zeros";
            }
        }
    }
}

TEST(WireFpduTest, FramingAroundAnUncopiedPayloadEqualsTheContiguousFpdu) {
    const std::vector<uint8_t> header = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    const std::vector<uint8_t> payload = {1, 2, 3, 4, 5};
    FpduFraming framing;
    ASSERT_EQ(FrameFpdu(header, payload, true, &framing), WireStatus::kOk);
    std::vector<uint8_t> gathered(framing.length.begin(), framing.length.end());
    gathered.insert(gathered.end(), header.begin(), header.end());
    gathered.insert(gathered.end(), payload.begin(), payload.end());
    gathered.insert(gathered.end(), framing.trailer.begin(), framing.trailer.begin() + framing.trailer_size);
    EXPECT_EQ(gathered, Fpdu(header, payload, true));
}

TEST(WireFpduTest, EveryCorruptedByteIsACrcMismatchAndCrcOffIgnoresTheTrailer) {
    const std::vector<uint8_t> header = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    const std::vector<uint8_t> payload(16, 0x42);
    const std::vector<uint8_t> good = Fpdu(header, payload, true);
    for (size_t i = 2; i < good.size(); ++i) {  // bytes 0-1 would change the length instead
        std::vector<uint8_t> bad = good;
        bad[i] ^= 0x01;
        FpduView view;
        const ParseResult r = ParseFpdu(bad, true, &view);
        ASSERT_EQ(r.status, WireStatus::kCrcMismatch) << "byte " << i;
        EXPECT_EQ(r.size, good.size()) << "the caller may skip the FPDU";
        EXPECT_EQ(ParseFpdu(bad, false, &view).status, WireStatus::kOk) << "siw: CRC off is never checked";
    }
}

TEST(WireFpduTest, NonZeroPadIsIgnoredButCoveredByTheCrc) {
    // Found by fuzz_fpdu: RFC 5044 §4.1 says the receiver ignores the pad's value, except for the CRC check.
    std::vector<uint8_t> bytes = {0x00, 0x00, 0x04, 0x41, 0, 0, 0, 0};  // ULPDU length 0, pad 04 41
    StoreCrcTrailer(Crc32c(bytes.data(), 4), &bytes[4]);
    FpduView view;
    ASSERT_EQ(ParseFpdu(bytes, true, &view).status, WireStatus::kOk);
    EXPECT_TRUE(view.ulpdu.empty());
    bytes[3] = 0x00;
    EXPECT_EQ(ParseFpdu(bytes, true, &view).status, WireStatus::kCrcMismatch);
}

TEST(WireFpduTest, TruncatedAtEveryOffsetNeedsTheWholeFpdu) {
    const std::vector<uint8_t> header = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    const std::vector<uint8_t> bytes = Fpdu(header, std::vector<uint8_t>(16), false);
    for (size_t n = 0; n < bytes.size(); ++n) {
        FpduView view;
        const ParseResult r = ParseFpdu(std::span(bytes.data(), n), false, &view);
        ASSERT_EQ(r.status, WireStatus::kNeedMoreBytes) << n;
        EXPECT_EQ(r.size, n < 2 ? 2u : bytes.size()) << n;
    }
    uint16_t length = 0;
    EXPECT_EQ(PeekFpduLength(bytes, &length).size, 40u);
    EXPECT_EQ(length, 34u);
}

TEST(WireFpduTest, SerializerRejectsOversizedUlpdusAndShortBuffers) {
    std::vector<uint8_t> big(kFpduMaxUlpdu + 1);
    FpduFraming framing;
    EXPECT_EQ(FrameFpdu({}, big, false, &framing), WireStatus::kInvalidArgument);
    EXPECT_EQ(FrameFpdu({}, std::span(big.data(), kFpduMaxUlpdu), false, &framing), WireStatus::kOk);
    std::vector<uint8_t> out(10);
    size_t written = 1;
    EXPECT_EQ(SerializeFpdu({}, std::span(big.data(), 8), false, out, &written), WireStatus::kBufferTooSmall);
    EXPECT_EQ(written, 0u);
}

// ---- DDP / RDMAP headers ----

TEST(WireDdpTest, ControlWordsMatchWhatSiwSends) {
    struct Case {
        SegmentHeader header;
        uint8_t ddp, rdmap;
    };
    const Case cases[] = {
        {MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0), 0x41, 0x43},
        {MakeSendHeader(RdmapOpcode::kSendInvalidate, 1, 0, true, 7), 0x41, 0x44},
        {MakeSendHeader(RdmapOpcode::kSendSolicited, 1, 0, true, 0), 0x41, 0x45},
        {MakeSendHeader(RdmapOpcode::kSendSolicitedInvalidate, 1, 0, true, 7), 0x41, 0x46},
        {MakeReadRequestHeader(1, {}), 0x41, 0x41},
        {MakeTerminateHeader(), 0x41, 0x47},
        {MakeWriteHeader(1, 0, true), 0xC1, 0x40},
        {MakeWriteHeader(1, 0, false), 0x81, 0x40},
        {MakeReadResponseHeader(1, 0, true), 0xC1, 0x42},
        {MakeReadResponseHeader(1, 0, false), 0x81, 0x42},
        {MakeSendHeader(RdmapOpcode::kSend, 1, 0, false, 0), 0x01, 0x43},
    };
    for (const Case& c : cases) {
        const std::vector<uint8_t> bytes = HeaderBytes(c.header);
        EXPECT_EQ(bytes[0], c.ddp) << RdmapOpcodeName(c.header.opcode);
        EXPECT_EQ(bytes[1], c.rdmap) << RdmapOpcodeName(c.header.opcode);
    }
}

TEST(WireDdpTest, TaggedHeaderRoundTrips) {
    const std::vector<uint8_t> bytes = HeaderBytes(MakeWriteHeader(0xA88D6A00, 0x000055FE70654F30ull, true));
    ASSERT_EQ(bytes.size(), kDdpTaggedHeaderSize);
    SegmentHeader h;
    const ParseResult r = ParseSegmentHeader(bytes, &h);
    ASSERT_EQ(r.status, WireStatus::kOk);
    EXPECT_EQ(r.size, kDdpTaggedHeaderSize);
    EXPECT_EQ(h.opcode, RdmapOpcode::kWrite);
    EXPECT_TRUE(h.tagged);
    EXPECT_TRUE(h.last);
    EXPECT_EQ(h.stag, 0xA88D6A00u);
    EXPECT_EQ(h.tagged_offset, 0x000055FE70654F30ull);
}

TEST(WireDdpTest, UntaggedSendWithInvalidateCarriesTheStagInRsvdUlp) {
    const std::vector<uint8_t> bytes =
        HeaderBytes(MakeSendHeader(RdmapOpcode::kSendSolicitedInvalidate, 9, 1436, false, 0x00ABCD01));
    // siw-on-the-wire §5: the Invalidate STag is at ULPDU offset 2 (FPDU offset 4).
    EXPECT_EQ(bytes[2], 0x00);
    EXPECT_EQ(bytes[3], 0xAB);
    EXPECT_EQ(bytes[4], 0xCD);
    EXPECT_EQ(bytes[5], 0x01);
    SegmentHeader h;
    ASSERT_EQ(ParseSegmentHeader(bytes, &h).status, WireStatus::kOk);
    EXPECT_EQ(h.opcode, RdmapOpcode::kSendSolicitedInvalidate);
    EXPECT_FALSE(h.tagged);
    EXPECT_FALSE(h.last);
    EXPECT_EQ(h.invalidate_stag(), 0x00ABCD01u);
    EXPECT_EQ(h.queue_number, kQueueSend);
    EXPECT_EQ(h.msn, 9u);
    EXPECT_EQ(h.message_offset, 1436u);
    // The plain Send never carries it.
    EXPECT_EQ(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0x1234).rsvd_ulp, 0u);
}

TEST(WireDdpTest, ReadRequestRoundTripsAllFiveFields) {
    const ReadRequestFields read{.sink_stag = 0xA88D6A00,
                                 .sink_offset = 0x55FE70654F30ull,
                                 .size = 64,
                                 .source_stag = 0x1001,
                                 .source_offset = 0x7F1000000000ull};
    const std::vector<uint8_t> bytes = HeaderBytes(MakeReadRequestHeader(2, read));
    ASSERT_EQ(bytes.size(), kReadRequestHeaderSize);
    SegmentHeader h;
    const ParseResult r = ParseSegmentHeader(bytes, &h);
    ASSERT_EQ(r.status, WireStatus::kOk);
    EXPECT_EQ(r.size, 46u);
    EXPECT_EQ(h.queue_number, kQueueReadRequest);
    EXPECT_EQ(h.msn, 2u);
    EXPECT_EQ(h.read.sink_stag, read.sink_stag);
    EXPECT_EQ(h.read.sink_offset, read.sink_offset);
    EXPECT_EQ(h.read.size, read.size);
    EXPECT_EQ(h.read.source_stag, read.source_stag);
    EXPECT_EQ(h.read.source_offset, read.source_offset);
    EXPECT_EQ(FpduSize(bytes.size()), 52u) << "siw-on-the-wire §5: Read Request FPDU is 52 bytes";
}

TEST(WireDdpTest, TerminateHeaderIsQueueTwoMsnOneLast) {
    SegmentHeader h;
    ASSERT_EQ(ParseSegmentHeader(HeaderBytes(MakeTerminateHeader()), &h).status, WireStatus::kOk);
    EXPECT_EQ(h.opcode, RdmapOpcode::kTerminate);
    EXPECT_EQ(h.queue_number, kQueueTerminate);
    EXPECT_EQ(h.msn, 1u);
    EXPECT_EQ(h.message_offset, 0u);
    EXPECT_TRUE(h.last);
}

TEST(WireDdpTest, TruncatedHeaderAtEveryOffsetNeedsTheOpcodesHeaderLength) {
    for (const SegmentHeader& header : {MakeWriteHeader(1, 2, true), MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0),
                                        MakeReadRequestHeader(1, {})}) {
        const std::vector<uint8_t> bytes = HeaderBytes(header);
        for (size_t n = 0; n < bytes.size(); ++n) {
            SegmentHeader h;
            const ParseResult r = ParseSegmentHeader(std::span(bytes.data(), n), &h);
            ASSERT_EQ(r.status, WireStatus::kNeedMoreBytes) << n;
            EXPECT_EQ(r.size, n < 2 ? 2u : bytes.size()) << n;
            EXPECT_EQ(ParseUlpduHeader(std::span(bytes.data(), n), &h).status, WireStatus::kUlpduShorterThanHeader)
                << "an FPDU shorter than its DDP header (siw: LLP/MPA/0x03)";
        }
    }
}

TEST(WireDdpTest, DdpVersionOtherThanOneIsRejected) {
    std::vector<uint8_t> bytes = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    for (uint8_t dv : {0, 2, 3}) {
        bytes[0] = static_cast<uint8_t>((bytes[0] & ~0x03) | dv);
        SegmentHeader h;
        EXPECT_EQ(ParseSegmentHeader(bytes, &h).status, WireStatus::kBadDdpVersion) << int(dv);
        EXPECT_EQ(ParseSegmentHeader(std::span(bytes.data(), 2), &h).status, WireStatus::kBadDdpVersion)
            << "decided from the control bytes alone";
    }
}

TEST(WireDdpTest, RdmapVersionOtherThanOneIsRejected) {
    std::vector<uint8_t> bytes = HeaderBytes(MakeWriteHeader(1, 0, true));
    for (uint8_t rv : {0, 2, 3}) {
        bytes[1] = static_cast<uint8_t>((bytes[1] & 0x3F) | (rv << 6));
        SegmentHeader h;
        EXPECT_EQ(ParseSegmentHeader(bytes, &h).status, WireStatus::kBadRdmapVersion) << int(rv);
    }
}

TEST(WireDdpTest, ReservedOpcodesAreUnknown) {
    std::vector<uint8_t> bytes = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    for (uint8_t op = 8; op < 16; ++op) {
        bytes[1] = static_cast<uint8_t>(0x40 | op);
        SegmentHeader h;
        EXPECT_EQ(ParseSegmentHeader(bytes, &h).status, WireStatus::kUnknownOpcode) << int(op);
    }
    size_t written = 0;
    SegmentHeader bad;
    bad.opcode = static_cast<RdmapOpcode>(9);
    std::vector<uint8_t> out(64);
    EXPECT_EQ(SerializeSegmentHeader(bad, out, &written), WireStatus::kInvalidArgument);
}

TEST(WireDdpTest, TaggedFlagMustMatchTheOpcode) {
    std::vector<uint8_t> send = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    send[0] |= 0x80;
    SegmentHeader h;
    EXPECT_EQ(ParseSegmentHeader(send, &h).status, WireStatus::kOpcodeBufferModelMismatch);
    std::vector<uint8_t> write = HeaderBytes(MakeWriteHeader(1, 0, true));
    write[0] &= 0x7F;
    EXPECT_EQ(ParseSegmentHeader(write, &h).status, WireStatus::kOpcodeBufferModelMismatch);
}

TEST(WireDdpTest, QueueNumberMustMatchTheOpcode) {
    SegmentHeader send = MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0);
    send.queue_number = 1;
    SegmentHeader read = MakeReadRequestHeader(1, {});
    read.queue_number = 0;
    SegmentHeader terminate = MakeTerminateHeader();
    terminate.queue_number = 3;
    for (const SegmentHeader& bad : {send, read, terminate}) {
        SegmentHeader h;
        const ParseResult r = ParseSegmentHeader(HeaderBytes(bad), &h);
        EXPECT_EQ(r.status, WireStatus::kInvalidQueueNumber) << RdmapOpcodeName(bad.opcode);
        EXPECT_EQ(h.queue_number, bad.queue_number) << "the header is still decoded for the Terminate";
    }
}

TEST(WireDdpTest, ReservedBitsAreIgnoredOnReceive) {
    std::vector<uint8_t> bytes = HeaderBytes(MakeSendHeader(RdmapOpcode::kSend, 1, 0, true, 0));
    bytes[0] |= 0x3C;  // DDP rsvd
    bytes[1] |= 0x30;  // RDMAP rsvd
    SegmentHeader h;
    ASSERT_EQ(ParseSegmentHeader(bytes, &h).status, WireStatus::kOk);
    EXPECT_EQ(h.opcode, RdmapOpcode::kSend);
}

TEST(WireDdpTest, SerializerNeedsRoomForTheWholeHeader) {
    std::vector<uint8_t> out(45);
    size_t written = 1;
    EXPECT_EQ(SerializeSegmentHeader(MakeReadRequestHeader(1, {}), out, &written), WireStatus::kBufferTooSmall);
    EXPECT_EQ(written, 0u);
}

TEST(WireDdpTest, NamesCoverEveryOpcodeAndStatus) {
    for (int op = 0; op < 8; ++op) EXPECT_STRNE(RdmapOpcodeName(static_cast<RdmapOpcode>(op)), "reserved opcode");
    for (int s = 0; s <= static_cast<int>(WireStatus::kBadTerminate); ++s) {
        EXPECT_STRNE(WireStatusName(static_cast<WireStatus>(s)), "unknown status") << s;
    }
}

}  // namespace
}  // namespace softndk::wire
