// MPA Request / Reply / Reject (RFC 5044 §7.1, RFC 6581 §5): round trips, siw's bytes, every parser error.
#include <gtest/gtest.h>

#include <vector>

#include "wire/iwarp_wire.h"

namespace softndk::wire {
namespace {

std::vector<uint8_t> Serialize(const MpaFrame& frame) {
    std::vector<uint8_t> bytes(MpaFrameSize(frame));
    size_t written = 0;
    EXPECT_EQ(SerializeMpaFrame(frame, bytes, &written), WireStatus::kOk);
    EXPECT_EQ(written, bytes.size());
    return bytes;
}

std::vector<uint8_t> Header(const std::array<uint8_t, kMpaKeySize>& key, uint8_t flags, uint8_t rev,
                            std::vector<uint8_t> pd) {
    std::vector<uint8_t> bytes(key.begin(), key.end());
    bytes.push_back(flags);
    bytes.push_back(rev);
    bytes.push_back(static_cast<uint8_t>(pd.size() >> 8));
    bytes.push_back(static_cast<uint8_t>(pd.size()));
    bytes.insert(bytes.end(), pd.begin(), pd.end());
    return bytes;
}

std::vector<uint8_t> Tail(const std::vector<uint8_t>& frame) {
    return {frame.begin() + kMpaKeySize, frame.end()};
}

TEST(WireMpaTest, RequestV1WithoutPrivateDataRoundTrips) {
    const std::vector<uint8_t> bytes = Serialize(MakeMpaRequest(false, nullptr, {}));
    EXPECT_EQ(Tail(bytes), (std::vector<uint8_t>{0x00, 0x01, 0x00, 0x00}));
    MpaFrame frame;
    const ParseResult r = ParseMpaFrame(bytes, MpaFrameKind::kRequest, &frame);
    ASSERT_EQ(r.status, WireStatus::kOk);
    EXPECT_EQ(r.size, kMpaHeaderSize);
    EXPECT_EQ(frame.revision, 1);
    EXPECT_FALSE(frame.enhanced);
    EXPECT_FALSE(frame.crc);
    EXPECT_TRUE(frame.private_data.empty());
}

TEST(WireMpaTest, EnhancedRequestRoundTripsEveryFlagAndPrivateData) {
    MpaEnhancedWords words{
        .ird = 0x3FFF, .ord = 0x0123, .peer_to_peer = true, .send_rtr = true, .write_rtr = true, .read_rtr = true};
    const std::vector<uint8_t> pd = {1, 2, 3, 4, 5};
    const std::vector<uint8_t> bytes = Serialize(MakeMpaRequest(true, &words, pd));
    EXPECT_EQ(bytes.size(), kMpaHeaderSize + 4 + pd.size());
    EXPECT_EQ(bytes[16], kMpaFlagCrc | kMpaFlagEnhanced);
    EXPECT_EQ(bytes[17], 2);
    EXPECT_EQ(bytes[20], 0xFF);  // A|B|0x3F
    EXPECT_EQ(bytes[22], 0xC1);  // C|D|0x01
    MpaFrame frame;
    ASSERT_EQ(ParseMpaFrame(bytes, MpaFrameKind::kRequest, &frame).status, WireStatus::kOk);
    EXPECT_TRUE(frame.crc && frame.enhanced && !frame.markers && !frame.reject);
    EXPECT_EQ(frame.words.ird, 0x3FFF);
    EXPECT_EQ(frame.words.ord, 0x0123);
    EXPECT_TRUE(frame.words.peer_to_peer && frame.words.send_rtr && frame.words.write_rtr && frame.words.read_rtr);
    EXPECT_EQ(std::vector<uint8_t>(frame.private_data.begin(), frame.private_data.end()), pd);
    // Parse → serialise gives the same bytes.
    EXPECT_EQ(Serialize(frame), bytes);
}

TEST(WireMpaTest, ReplyMatchesTheBytesSiwSends) {
    // README: rev 2, H, IRD=16 ORD=16 → `10 02 0004 00100010`; with P2P + write RTR → `80108010`.
    MpaEnhancedWords words{.ird = 16, .ord = 16};
    EXPECT_EQ(Tail(Serialize(MakeMpaReply(false, &words, {}))),
              (std::vector<uint8_t>{0x10, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10}));
    words.peer_to_peer = true;
    words.write_rtr = true;
    const std::vector<uint8_t> p2p = Serialize(MakeMpaReply(false, &words, {}));
    EXPECT_EQ(Tail(p2p), (std::vector<uint8_t>{0x10, 0x02, 0x00, 0x04, 0x80, 0x10, 0x80, 0x10}));
    EXPECT_TRUE(std::equal(kMpaReplyKey.begin(), kMpaReplyKey.end(), p2p.begin()));
}

TEST(WireMpaTest, RejectEchoesCrcClearsMarkersAndMatchesSiw) {
    // README: rev 2, H, M=1 → siw rejects with `30 02 0004 00000000`; rev 1, M=1, C=1 → `60 01 0000`.
    MpaFrame request;
    MpaEnhancedWords words{.ird = 4, .ord = 4};
    std::vector<uint8_t> bytes = Serialize(MakeMpaRequest(false, &words, {}));
    bytes[16] |= kMpaFlagMarkers;
    ASSERT_EQ(ParseMpaFrame(bytes, MpaFrameKind::kRequest, &request).status, WireStatus::kMarkersRequested);
    EXPECT_EQ(Tail(Serialize(MakeMpaReject(request, {}))),
              (std::vector<uint8_t>{0x30, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00}));

    bytes = Header(kMpaRequestKey, kMpaFlagMarkers | kMpaFlagCrc, 1, {});
    ASSERT_EQ(ParseMpaFrame(bytes, MpaFrameKind::kRequest, &request).status, WireStatus::kMarkersRequested);
    const std::vector<uint8_t> reject = Serialize(MakeMpaReject(request, {}));
    EXPECT_EQ(Tail(reject), (std::vector<uint8_t>{0x60, 0x01, 0x00, 0x00}));
    MpaFrame parsed;
    ASSERT_EQ(ParseMpaFrame(reject, MpaFrameKind::kReply, &parsed).status, WireStatus::kOk);
    EXPECT_TRUE(parsed.reject);
}

TEST(WireMpaTest, ConsumesOnlyTheFrameAndLeavesQueuedBytesToTheCaller) {
    std::vector<uint8_t> bytes = Header(kMpaReplyKey, kMpaFlagEnhanced, 2, {0, 1, 0, 1, 0xAA});
    const size_t frame_size = bytes.size();
    const std::vector<uint8_t> fpdu = {0x00, 0x22, 0x41, 0x43};  // siw-on-the-wire §3.4: bytes queued behind the Reply
    bytes.insert(bytes.end(), fpdu.begin(), fpdu.end());
    MpaFrame frame;
    const ParseResult r = ParseMpaFrame(bytes, MpaFrameKind::kReply, &frame);
    ASSERT_EQ(r.status, WireStatus::kOk);
    EXPECT_EQ(r.size, frame_size);
    ASSERT_EQ(frame.private_data.size(), 1u);
    EXPECT_EQ(frame.private_data[0], 0xAA);
}

TEST(WireMpaTest, TruncatedAtEveryOffsetNeedsMoreBytes) {
    MpaEnhancedWords words{.ird = 1, .ord = 1};
    const std::vector<uint8_t> pd(7, 0x5A);
    const std::vector<uint8_t> bytes = Serialize(MakeMpaRequest(false, &words, pd));
    for (size_t n = 0; n < bytes.size(); ++n) {
        MpaFrame frame;
        const ParseResult r = ParseMpaFrame(std::span(bytes.data(), n), MpaFrameKind::kRequest, &frame);
        ASSERT_EQ(r.status, WireStatus::kNeedMoreBytes) << "length " << n;
        EXPECT_EQ(r.size, n < kMpaHeaderSize ? kMpaHeaderSize : bytes.size()) << "length " << n;
    }
}

TEST(WireMpaTest, WrongKeyIsABadKeyEvenBeforeTheHeaderIsComplete) {
    const std::vector<uint8_t> reply = Header(kMpaReplyKey, 0, 1, {});
    MpaFrame frame;
    EXPECT_EQ(ParseMpaFrame(reply, MpaFrameKind::kRequest, &frame).status, WireStatus::kBadMpaKey);
    EXPECT_EQ(ParseMpaFrame(std::span(reply.data(), 10), MpaFrameKind::kRequest, &frame).status, WireStatus::kBadMpaKey)
        << "'Rep' differs from 'Req' at byte 9";
    EXPECT_EQ(ParseMpaFrame(std::span(reply.data(), 9), MpaFrameKind::kRequest, &frame).status,
              WireStatus::kNeedMoreBytes);
    const std::vector<uint8_t> http = {'G', 'E', 'T', ' ', '/'};
    EXPECT_EQ(ParseMpaFrame(http, MpaFrameKind::kReply, &frame).status, WireStatus::kBadMpaKey);
}

TEST(WireMpaTest, RevisionsOtherThanOneAndTwoAreUnsupported) {
    for (uint8_t rev : {0, 3, 255}) {
        MpaFrame frame;
        const ParseResult r = ParseMpaFrame(Header(kMpaRequestKey, 0, rev, {}), MpaFrameKind::kRequest, &frame);
        EXPECT_EQ(r.status, WireStatus::kUnsupportedMpaRevision) << int(rev);
        EXPECT_EQ(frame.revision, rev);
        EXPECT_EQ(r.size, 0u);
    }
}

TEST(WireMpaTest, MarkersAreRefusedButTheFrameIsStillParsed) {
    MpaFrame frame;
    const std::vector<uint8_t> bytes = Header(kMpaReplyKey, kMpaFlagMarkers | kMpaFlagCrc, 1, {9});
    const ParseResult r = ParseMpaFrame(bytes, MpaFrameKind::kReply, &frame);
    EXPECT_EQ(r.status, WireStatus::kMarkersRequested);
    EXPECT_EQ(r.size, bytes.size());
    EXPECT_TRUE(frame.markers);
    EXPECT_TRUE(frame.crc);
}

TEST(WireMpaTest, EnhancedFlagWithoutTheIrdOrdWordsIsRefused) {
    for (size_t pd = 0; pd < kMpaEnhancedWordsSize; ++pd) {
        MpaFrame frame;
        const std::vector<uint8_t> bytes = Header(kMpaRequestKey, kMpaFlagEnhanced, 2, std::vector<uint8_t>(pd));
        const ParseResult r = ParseMpaFrame(bytes, MpaFrameKind::kRequest, &frame);
        EXPECT_EQ(r.status, WireStatus::kEnhancedHeaderMissing) << pd;
        EXPECT_EQ(r.size, bytes.size());
    }
}

TEST(WireMpaTest, SiwRejectWithEnhancedFlagButNoWordsIsStillAReject) {
    // README: siw answers "rev 2, H, pd_len 0" with `30 02 0000`, then closes.
    MpaFrame frame;
    const std::vector<uint8_t> bytes = Header(kMpaReplyKey, kMpaFlagReject | kMpaFlagEnhanced, 2, {});
    const ParseResult r = ParseMpaFrame(bytes, MpaFrameKind::kReply, &frame);
    ASSERT_EQ(r.status, WireStatus::kOk);
    EXPECT_EQ(r.size, bytes.size());
    EXPECT_TRUE(frame.reject);
    EXPECT_EQ(frame.words.ird, 0);
    // The same frame as a request, or without R, is malformed.
    EXPECT_EQ(ParseMpaFrame(Header(kMpaReplyKey, kMpaFlagEnhanced, 2, {}), MpaFrameKind::kReply, &frame).status,
              WireStatus::kEnhancedHeaderMissing);
}

// Issue 18 §3.7 (RFC 6581 §5): H exists from revision 2. In a revision-1 frame the bit is reserved and ignored,
// and the private data is all the ULP's, so the peer is answered in revision 1.
TEST(WireMpaTest, EnhancedBitOfARevisionOneFrameIsIgnored) {
    MpaFrame frame;
    ASSERT_EQ(ParseMpaFrame(Header(kMpaRequestKey, kMpaFlagEnhanced, 1, {0x00, 0x05, 0x00, 0x06}),
                            MpaFrameKind::kRequest, &frame)
                  .status,
              WireStatus::kOk);
    EXPECT_FALSE(frame.enhanced);
    EXPECT_EQ(frame.words.ird, 0);
    EXPECT_EQ(frame.private_data.size(), 4u) << "the four bytes are the ULP's";
    // As a reserved bit, H is kept and serialised back as received (the fuzzer's round trip).
    const std::vector<uint8_t> in = Header(kMpaRequestKey, kMpaFlagEnhanced, 1, {0x00, 0x05, 0x00, 0x06});
    ASSERT_TRUE(ParseMpaFrame(in, MpaFrameKind::kRequest, &frame).ok());
    std::vector<uint8_t> out(MpaFrameSize(frame));
    size_t written = 0;
    ASSERT_EQ(SerializeMpaFrame(frame, out, &written), WireStatus::kOk);
    EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + written), in);
    // Nor is a revision-1 frame with H and fewer than 4 bytes malformed.
    EXPECT_EQ(ParseMpaFrame(Header(kMpaRequestKey, kMpaFlagEnhanced, 1, {}), MpaFrameKind::kRequest, &frame).status,
              WireStatus::kOk);
}

TEST(WireMpaTest, PrivateDataUpTo512IncludingTheWordsIsAcceptedAndLongerIsRefused) {
    MpaFrame frame;
    std::vector<uint8_t> bytes = Header(kMpaRequestKey, kMpaFlagEnhanced, 2, std::vector<uint8_t>(512));
    ASSERT_EQ(ParseMpaFrame(bytes, MpaFrameKind::kRequest, &frame).status, WireStatus::kOk);
    EXPECT_EQ(frame.private_data.size(), 508u);
    bytes = Header(kMpaRequestKey, 0, 1, std::vector<uint8_t>(513));
    EXPECT_EQ(ParseMpaFrame(bytes, MpaFrameKind::kRequest, &frame).status, WireStatus::kPrivateDataTooLong);
    // Reported from the header alone: no need to wait for 513 bytes.
    EXPECT_EQ(ParseMpaFrame(std::span(bytes.data(), kMpaHeaderSize), MpaFrameKind::kRequest, &frame).status,
              WireStatus::kPrivateDataTooLong);
}

TEST(WireMpaTest, ReservedFlagBitsAreReportedAndRoundTrip) {
    MpaFrame frame;
    const std::vector<uint8_t> bytes = Header(kMpaRequestKey, kMpaFlagEnhanced | 0x08, 2, {0, 1, 0, 1});
    ASSERT_EQ(ParseMpaFrame(bytes, MpaFrameKind::kRequest, &frame).status, WireStatus::kOk);
    EXPECT_EQ(frame.reserved_flags, 0x08) << "siw's private G bit";
    EXPECT_EQ(Serialize(frame), bytes);
}

TEST(WireMpaTest, SerializerRejectsOutOfRangeFieldsAndShortBuffers) {
    std::vector<uint8_t> out(1024);
    size_t written = 99;
    MpaEnhancedWords words{.ird = 0x4000};
    EXPECT_EQ(SerializeMpaFrame(MakeMpaRequest(false, &words, {}), out, &written), WireStatus::kInvalidArgument);
    EXPECT_EQ(written, 0u);
    words = {.ord = 0x4000};
    EXPECT_EQ(SerializeMpaFrame(MakeMpaRequest(false, &words, {}), out, &written), WireStatus::kInvalidArgument);
    words = {};
    const std::vector<uint8_t> pd(509);
    EXPECT_EQ(SerializeMpaFrame(MakeMpaRequest(false, &words, pd), out, &written), WireStatus::kInvalidArgument)
        << "509 + 4 > 512";
    EXPECT_EQ(SerializeMpaFrame(MakeMpaRequest(false, &words, std::span(pd.data(), 508)), out, &written),
              WireStatus::kOk);
    MpaFrame rev3 = MakeMpaRequest(false, nullptr, {});
    rev3.revision = 3;
    EXPECT_EQ(SerializeMpaFrame(rev3, out, &written), WireStatus::kInvalidArgument);
    EXPECT_EQ(SerializeMpaFrame(MakeMpaRequest(false, &words, {}), std::span(out.data(), 23), &written),
              WireStatus::kBufferTooSmall);
}

}  // namespace
}  // namespace softndk::wire
