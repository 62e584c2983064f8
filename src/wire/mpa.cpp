// MPA Request / Reply / Reject frames (RFC 5044 §7.1) with the RFC 6581 §5 enhanced IRD/ORD words.
#include <algorithm>
#include <cstring>

#include "wire/iwarp_wire.h"
#include "wire/wire_bytes.h"

namespace softndk::wire {
namespace {

using detail::LoadBe16;
using detail::StoreBe16;

constexpr size_t kFlagsOffset = 16;
constexpr size_t kRevisionOffset = 17;
constexpr size_t kPdLengthOffset = 18;
// RFC 6581 §5: bit 15 / bit 14 of each word are the A/B (IRD word) and C/D (ORD word) flags.
constexpr uint16_t kWordHighFlag = 0x8000;
constexpr uint16_t kWordLowFlag = 0x4000;

const std::array<uint8_t, kMpaKeySize>& KeyFor(MpaFrameKind kind) {
    return kind == MpaFrameKind::kRequest ? kMpaRequestKey : kMpaReplyKey;
}

bool SupportedRevision(uint8_t revision) {
    return revision == 1 || revision == 2;
}

MpaFrame MakeFrame(MpaFrameKind kind, bool crc, const MpaEnhancedWords* words, std::span<const uint8_t> pd) {
    MpaFrame frame;
    frame.kind = kind;
    frame.crc = crc;
    frame.enhanced = words != nullptr;
    frame.revision = words != nullptr ? 2 : 1;
    if (words != nullptr) frame.words = *words;
    frame.private_data = pd;
    return frame;
}

}  // namespace

ParseResult ParseMpaFrame(std::span<const uint8_t> in, MpaFrameKind expected, MpaFrame* out) {
    const auto& key = KeyFor(expected);
    // A wrong key is reported as soon as the bytes seen so far cannot be the start of it.
    if (!in.empty() && std::memcmp(in.data(), key.data(), std::min(in.size(), kMpaKeySize)) != 0) {
        return {WireStatus::kBadMpaKey, 0};
    }
    if (in.size() < kMpaHeaderSize) return {WireStatus::kNeedMoreBytes, kMpaHeaderSize};

    *out = MpaFrame{};
    out->kind = expected;
    const uint8_t flags = in[kFlagsOffset];
    out->markers = (flags & kMpaFlagMarkers) != 0;
    out->crc = (flags & kMpaFlagCrc) != 0;
    out->reject = (flags & kMpaFlagReject) != 0;
    out->revision = in[kRevisionOffset];
    // RFC 6581 §5: H exists from revision 2; in a revision-1 frame that bit is reserved, ignored on receipt, and
    // the private data is all the ULP's (issue 18 §3.7: the Reply then comes in revision 1).
    out->enhanced = (flags & kMpaFlagEnhanced) != 0 && out->revision >= 2;
    out->reserved_flags = flags & ReservedFlagsMask(out->revision);
    const size_t pd_length = LoadBe16(&in[kPdLengthOffset]);

    if (!SupportedRevision(out->revision)) return {WireStatus::kUnsupportedMpaRevision, 0};
    if (pd_length > kMpaMaxPrivateData) return {WireStatus::kPrivateDataTooLong, 0};
    const size_t frame_size = kMpaHeaderSize + pd_length;
    if (in.size() < frame_size) return {WireStatus::kNeedMoreBytes, frame_size};

    std::span<const uint8_t> pd = in.subspan(kMpaHeaderSize, pd_length);
    out->private_data = pd;
    if (out->markers) return {WireStatus::kMarkersRequested, frame_size};
    if (out->enhanced) {
        // RFC 6581 §5: with H the first 4 private-data bytes are the IRD and ORD words.
        if (pd_length < kMpaEnhancedWordsSize) {
            // siw rejects "H without words" with a Reject that itself has H and no words (`30 02 0000`): a
            // Reject ends the negotiation anyway, so it is reported as one (words zero) rather than as malformed.
            if (expected == MpaFrameKind::kReply && out->reject) return {WireStatus::kOk, frame_size};
            return {WireStatus::kEnhancedHeaderMissing, frame_size};
        }
        const uint16_t ird_word = LoadBe16(&pd[0]);
        const uint16_t ord_word = LoadBe16(&pd[2]);
        out->words.ird = ird_word & kMpaMaxIrdOrd;
        out->words.peer_to_peer = (ird_word & kWordHighFlag) != 0;
        out->words.send_rtr = (ird_word & kWordLowFlag) != 0;
        out->words.ord = ord_word & kMpaMaxIrdOrd;
        out->words.write_rtr = (ord_word & kWordHighFlag) != 0;
        out->words.read_rtr = (ord_word & kWordLowFlag) != 0;
        out->private_data = pd.subspan(kMpaEnhancedWordsSize);
    }
    return {WireStatus::kOk, frame_size};
}

MpaFrame MakeMpaRequest(bool crc, const MpaEnhancedWords* words, std::span<const uint8_t> private_data) {
    return MakeFrame(MpaFrameKind::kRequest, crc, words, private_data);
}

MpaFrame MakeMpaReply(bool crc, const MpaEnhancedWords* words, std::span<const uint8_t> private_data) {
    return MakeFrame(MpaFrameKind::kReply, crc, words, private_data);
}

MpaFrame MakeMpaReject(const MpaFrame& request, std::span<const uint8_t> private_data) {
    // RFC 5044 §7.1.1: a Reply with R set. C is echoed and M cleared (as siw does). A revision-2 peer gets the
    // enhanced words (IRD = ORD = 0) so the Reject is itself a well-formed enhanced frame.
    MpaEnhancedWords zero;
    const bool v2 = request.revision >= 2;
    MpaFrame reject = MakeFrame(MpaFrameKind::kReply, request.crc, v2 ? &zero : nullptr, private_data);
    reject.reject = true;
    return reject;
}

size_t MpaFrameSize(const MpaFrame& frame) {
    return kMpaHeaderSize + (frame.enhanced ? kMpaEnhancedWordsSize : 0) + frame.private_data.size();
}

WireStatus SerializeMpaFrame(const MpaFrame& frame, std::span<uint8_t> out, size_t* written) {
    *written = 0;
    const size_t pd_length = MpaFrameSize(frame) - kMpaHeaderSize;
    if (!SupportedRevision(frame.revision) || pd_length > kMpaMaxPrivateData) return WireStatus::kInvalidArgument;
    if (frame.enhanced && (frame.words.ird > kMpaMaxIrdOrd || frame.words.ord > kMpaMaxIrdOrd)) {
        return WireStatus::kInvalidArgument;
    }
    if (out.size() < kMpaHeaderSize + pd_length) return WireStatus::kBufferTooSmall;

    const auto& key = KeyFor(frame.kind);
    std::memcpy(out.data(), key.data(), kMpaKeySize);
    out[kFlagsOffset] = static_cast<uint8_t>(
        (frame.markers ? kMpaFlagMarkers : 0) | (frame.crc ? kMpaFlagCrc : 0) | (frame.reject ? kMpaFlagReject : 0) |
        (frame.enhanced ? kMpaFlagEnhanced : 0) | (frame.reserved_flags & ReservedFlagsMask(frame.revision)));
    out[kRevisionOffset] = frame.revision;
    StoreBe16(&out[kPdLengthOffset], static_cast<uint16_t>(pd_length));
    size_t at = kMpaHeaderSize;
    if (frame.enhanced) {
        const MpaEnhancedWords& w = frame.words;
        StoreBe16(&out[at], static_cast<uint16_t>(w.ird | (w.peer_to_peer ? kWordHighFlag : 0) |
                                                  (w.send_rtr ? kWordLowFlag : 0)));
        StoreBe16(&out[at + 2],
                  static_cast<uint16_t>(w.ord | (w.write_rtr ? kWordHighFlag : 0) | (w.read_rtr ? kWordLowFlag : 0)));
        at += kMpaEnhancedWordsSize;
    }
    if (!frame.private_data.empty()) std::memcpy(&out[at], frame.private_data.data(), frame.private_data.size());
    *written = at + frame.private_data.size();
    return WireStatus::kOk;
}

}  // namespace softndk::wire
