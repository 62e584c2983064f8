// MpaHandshake (issue 18 §1): the MPA rules of one side, byte for byte and without a socket (RFC 5044 §7.1,
// RFC 6581, siw-on-the-wire §3.3/§3.4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "transport/mpa_handshake.h"

namespace softndk::transport {
namespace {

using Verdict = MpaHandshake::Verdict;

std::vector<uint8_t> Bytes(const wire::MpaFrame& frame) {
    std::vector<uint8_t> bytes(wire::MpaFrameSize(frame));
    size_t written = 0;
    EXPECT_EQ(wire::SerializeMpaFrame(frame, bytes, &written), wire::WireStatus::kOk);
    bytes.resize(written);
    return bytes;
}

wire::MpaFrame Parse(const std::vector<uint8_t>& bytes, wire::MpaFrameKind kind) {
    wire::MpaFrame frame;
    EXPECT_TRUE(wire::ParseMpaFrame(bytes, kind, &frame).ok());
    return frame;
}

// Feeds `bytes` as the socket would give them, at most Room() at a time; the handshake never asks for a byte
// beyond its frame.
Verdict Feed(MpaHandshake& handshake, const std::vector<uint8_t>& bytes, size_t chunk, size_t* taken = nullptr) {
    size_t at = 0;
    Verdict verdict = Verdict::kNeedMore;
    while (verdict == Verdict::kNeedMore && at < bytes.size()) {
        const std::span<uint8_t> room = handshake.Room();
        const size_t count = std::min({room.size(), chunk, bytes.size() - at});
        std::memcpy(room.data(), bytes.data() + at, count);
        at += count;
        verdict = handshake.Received(count);
    }
    if (taken != nullptr) *taken = at;
    return verdict;
}

std::vector<uint8_t> P2pRequest(bool write_rtr, bool read_rtr, bool crc = false) {
    wire::MpaEnhancedWords words;
    words.ird = 4;
    words.ord = 4;
    words.peer_to_peer = true;
    words.write_rtr = write_rtr;
    words.read_rtr = read_rtr;
    const uint8_t data[] = {1, 2, 3};
    return Bytes(wire::MakeMpaRequest(crc, &words, data));
}

TEST(MpaHandshakeTest, WIRE_CM_03_ARequestReadByteByByteTakesExactlyItsFrame) {
    MpaHandshake passive(false, false);
    EXPECT_TRUE(passive.nothing_read());
    std::vector<uint8_t> bytes = P2pRequest(true, false);
    const size_t frame = bytes.size();
    bytes.push_back(0xEE);  // a byte behind the frame is not the handshake's to take
    size_t taken = 0;
    EXPECT_EQ(Feed(passive, bytes, 1, &taken), Verdict::kComplete);
    EXPECT_EQ(taken, frame);
    EXPECT_FALSE(passive.nothing_read());
    EXPECT_EQ(passive.peer().revision, 2);
    EXPECT_EQ(passive.peer().words.ird, 4);
    EXPECT_EQ(passive.peer().private_data, (std::vector<uint8_t>{1, 2, 3}));
    EXPECT_TRUE(passive.peer_to_peer());
}

TEST(MpaHandshakeTest, WIRE_CM_08_TheReplyAsksForWriteRtrWhenOfferedElseReadRtr) {
    for (const auto& [write, read, expect_read] : {std::tuple{true, true, false}, std::tuple{false, true, true},
                                                   std::tuple{false, false, false}, std::tuple{true, false, false}}) {
        MpaHandshake passive(false, false);
        ASSERT_EQ(Feed(passive, P2pRequest(write, read), 64), Verdict::kComplete);
        MpaOffer reply;
        reply.ird = 2;
        reply.ord = 2;
        const wire::MpaFrame frame = Parse(passive.Reply(reply), wire::MpaFrameKind::kReply);
        EXPECT_TRUE(frame.words.peer_to_peer);
        EXPECT_EQ(frame.words.read_rtr, expect_read) << write << read;
        EXPECT_EQ(frame.words.write_rtr, !expect_read) << write << read;
        EXPECT_EQ(passive.offer().read_rtr, expect_read);
        EXPECT_EQ(frame.words.ird, 2);
    }
}

TEST(MpaHandshakeTest, WIRE_CrcIsUsedWhenEitherSideAsksForIt) {
    MpaHandshake asked(false, false);
    ASSERT_EQ(Feed(asked, P2pRequest(true, false, true), 64), Verdict::kComplete);
    EXPECT_TRUE(Parse(asked.Reply({}), wire::MpaFrameKind::kReply).crc);
    EXPECT_TRUE(asked.crc());
    MpaHandshake granted(false, true);
    ASSERT_EQ(Feed(granted, P2pRequest(true, false, false), 64), Verdict::kComplete);
    EXPECT_TRUE(Parse(granted.Reply({}), wire::MpaFrameKind::kReply).crc);
    EXPECT_TRUE(granted.crc());
    MpaHandshake neither(false, false);
    ASSERT_EQ(Feed(neither, P2pRequest(true, false, false), 64), Verdict::kComplete);
    EXPECT_FALSE(Parse(neither.Reply({}), wire::MpaFrameKind::kReply).crc);
    EXPECT_FALSE(neither.crc());
}

TEST(MpaHandshakeTest, WIRE_CM_03_ARevisionOneRequestGetsARevisionOneReplyAndReject) {
    const uint8_t data[] = {9};
    MpaHandshake passive(false, false);
    ASSERT_EQ(Feed(passive, Bytes(wire::MakeMpaRequest(false, nullptr, data)), 64), Verdict::kComplete);
    EXPECT_FALSE(passive.peer_to_peer());
    const wire::MpaFrame reply = Parse(passive.Reply({}), wire::MpaFrameKind::kReply);
    EXPECT_EQ(reply.revision, 1);
    EXPECT_FALSE(reply.enhanced);
    const wire::MpaFrame reject = Parse(passive.Reject({}), wire::MpaFrameKind::kReply);
    EXPECT_EQ(reject.revision, 1);
    EXPECT_TRUE(reject.reject);
}

TEST(MpaHandshakeTest, WIRE_MarkersAskedForGetARejectThatEchoesTheRequest) {
    wire::MpaFrame request = wire::MakeMpaRequest(false, nullptr, {});
    request.markers = true;
    MpaHandshake passive(false, false);
    EXPECT_EQ(Feed(passive, Bytes(request), 64), Verdict::kRefusedAnswered);
    const wire::MpaFrame reject = Parse(passive.RefusalBytes(), wire::MpaFrameKind::kReply);
    EXPECT_TRUE(reject.reject);
    EXPECT_FALSE(reject.markers);
}

TEST(MpaHandshakeTest, WIRE_AWrongKeyIsRefusedWithoutAnswer) {
    std::vector<uint8_t> bytes = Bytes(wire::MakeMpaRequest(false, nullptr, {}));
    bytes[3] = 'X';
    MpaHandshake passive(false, false);
    EXPECT_EQ(Feed(passive, bytes, 64), Verdict::kRefused);
    EXPECT_TRUE(passive.RefusalBytes().empty());
}

TEST(MpaHandshakeTest, WIRE_CM_03_AReplyWhoseOrdExceedsOurIrdIsRefused) {
    MpaOffer offer;
    offer.ird = 2;
    offer.ord = 2;
    for (const uint16_t ord : {uint16_t{2}, uint16_t{3}}) {
        MpaHandshake active(true, false);
        const wire::MpaFrame request = Parse(active.Request(offer), wire::MpaFrameKind::kRequest);
        EXPECT_EQ(request.words.ird, 2);
        wire::MpaEnhancedWords words;
        words.ird = 2;
        words.ord = ord;
        const Verdict verdict = Feed(active, Bytes(wire::MakeMpaReply(false, &words, {})), 7);
        EXPECT_EQ(verdict, ord > 2 ? Verdict::kOrdAboveOurIrd : Verdict::kComplete) << ord;
    }
}

// Issue 34 §1.2 (RFC 6581 §3): a P2P Reply must pick an RTR type we offered; which one we send follows it.
TEST(MpaHandshakeTest, WIRE_CM_04_AP2pReplyMustPickAnOfferedRtrType) {
    struct Case {
        bool offer_write, offer_read, pick_write, pick_read;
        Verdict verdict;
        bool read_rtr;
    };
    const Case cases[] = {
        {true, false, true, false, Verdict::kComplete, false},
        {true, false, false, true, Verdict::kNoMatchingRtr, false},  // the ndkperf --client case
        {false, true, true, false, Verdict::kNoMatchingRtr, false},
        {false, true, false, true, Verdict::kComplete, true},
        {true, true, false, true, Verdict::kComplete, true},
        {true, true, true, true, Verdict::kComplete, false},  // both picked: the Write RTR
        {true, false, true, true, Verdict::kComplete, false},
        {true, false, false, false, Verdict::kNoMatchingRtr, false},  // P2P, no type
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(testing::Message() << "offered W" << c.offer_write << " R" << c.offer_read << ", picked W"
                                        << c.pick_write << " R" << c.pick_read);
        MpaOffer offer;
        offer.ird = 2;
        offer.ord = 2;
        offer.peer_to_peer = true;
        offer.write_rtr = c.offer_write;
        offer.read_rtr = c.offer_read;
        MpaHandshake active(true, false);
        active.Request(offer);
        wire::MpaEnhancedWords words;
        words.peer_to_peer = true;
        words.write_rtr = c.pick_write;
        words.read_rtr = c.pick_read;
        EXPECT_EQ(Feed(active, Bytes(wire::MakeMpaReply(false, &words, {})), 64), c.verdict);
        if (c.verdict == Verdict::kComplete) {
            EXPECT_EQ(active.read_rtr(), c.read_rtr);
        }
    }
}

TEST(MpaHandshakeTest, WIRE_APrivateDataTooLongForAFrameBuildsNoRequest) {
    MpaOffer offer;
    offer.private_data.assign(wire::kMpaMaxPrivateData + 1, 0);
    MpaHandshake active(true, false);
    EXPECT_TRUE(active.Request(offer).empty());
}

}  // namespace
}  // namespace softndk::transport
