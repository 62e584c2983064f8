// The MPA handshake's rules (RFC 5044 §7.1, RFC 6581), without a socket: see mpa_handshake.h.
#include "transport/mpa_handshake.h"

namespace softndk::transport {
namespace {

std::vector<uint8_t> Serialize(const wire::MpaFrame& frame) {
    std::vector<uint8_t> bytes(wire::MpaFrameSize(frame));
    size_t written = 0;
    if (wire::SerializeMpaFrame(frame, bytes, &written) != wire::WireStatus::kOk) return {};
    bytes.resize(written);
    return bytes;
}

}  // namespace

std::vector<uint8_t> MpaHandshake::Request(MpaOffer offer) {
    offer_ = std::move(offer);
    wire::MpaEnhancedWords words;
    words.ird = offer_.ird;
    words.ord = offer_.ord;
    words.peer_to_peer = offer_.peer_to_peer;
    words.write_rtr = offer_.write_rtr;
    words.read_rtr = offer_.read_rtr;
    return Serialize(wire::MakeMpaRequest(offer_.crc, offer_.enhanced ? &words : nullptr, offer_.private_data));
}

std::vector<uint8_t> MpaHandshake::Reply(MpaOffer reply) {
    const bool p2p = peer_to_peer();
    wire::MpaEnhancedWords words;
    words.ird = reply.ird;
    words.ord = reply.ord;
    if (p2p) {  // siw-on-the-wire §3.3: Write RTR if offered, else Read RTR if offered, else Write RTR
        words.peer_to_peer = true;
        words.read_rtr = !peer_.words.write_rtr && peer_.words.read_rtr;
        words.write_rtr = !words.read_rtr;
    }
    crc_ = peer_.crc || grant_crc_;  // RFC 5044 §7.1: CRC if either side asks for it
    std::vector<uint8_t> bytes =
        Serialize(wire::MakeMpaReply(crc_, peer_.enhanced ? &words : nullptr, reply.private_data));
    offer_ = std::move(reply);
    offer_.peer_to_peer = words.peer_to_peer;
    offer_.write_rtr = words.write_rtr;
    offer_.read_rtr = words.read_rtr;
    return bytes;
}

std::vector<uint8_t> MpaHandshake::Reject(std::span<const uint8_t> private_data) const {
    wire::MpaFrame request;
    request.revision = peer_.revision;
    request.enhanced = peer_.enhanced;
    request.crc = peer_.crc;
    return Serialize(wire::MakeMpaReject(request, private_data));
}

std::span<uint8_t> MpaHandshake::Room() {
    in_.resize(want_);
    return {in_.data() + have_, want_ - have_};
}

// Reads exactly one frame: its header, then PD_Length bytes (the caller refuses bytes behind it).
MpaHandshake::Verdict MpaHandshake::Received(size_t count) {
    have_ += count;
    in_.resize(have_);
    if (have_ < want_) return Verdict::kNeedMore;
    wire::MpaFrame frame;
    const wire::ParseResult parsed =
        wire::ParseMpaFrame(in_, active_ ? wire::MpaFrameKind::kReply : wire::MpaFrameKind::kRequest, &frame);
    if (parsed.status == wire::WireStatus::kNeedMoreBytes) {
        want_ = parsed.size;
        return Verdict::kNeedMore;
    }
    if (parsed.status == wire::WireStatus::kMarkersRequested ||
        parsed.status == wire::WireStatus::kEnhancedHeaderMissing) {
        if (!active_) {  // refused the way siw refuses it: a Reject that echoes the Request, then close
            wire::MpaFrame reject = wire::MakeMpaReject(frame, {});
            reject.markers = false;
            refusal_ = Serialize(reject);
        }
        return Verdict::kRefusedAnswered;
    }
    if (!parsed.ok()) return Verdict::kRefused;  // a wrong key, revision or length: no answer (siw closes too)
    peer_.revision = frame.revision;
    peer_.crc = frame.crc;
    peer_.enhanced = frame.enhanced;
    peer_.reject = frame.reject;
    peer_.words = frame.words;
    peer_.private_data.assign(frame.private_data.begin(), frame.private_data.end());
    in_.clear();
    in_.shrink_to_fit();
    if (!active_) return Verdict::kComplete;
    crc_ = offer_.crc || frame.crc;  // RFC 5044 §7.1: CRC if either side asks for it
    // RFC 6581 §5: the responder's ORD may not exceed the IRD we offered. Not lowered in silence: its Read Requests
    // would exceed what we hold. Refused as siw does, with a Terminate (issue 18 §3.2).
    if (frame.enhanced && !frame.reject && frame.words.ord > offer_.ird) return Verdict::kOrdAboveOurIrd;
    // RFC 6581 §3: a responder that takes P2P picks one of the RTR types we offered. One we never offered is
    // refused as a responder refuses the mirror case, with Terminate LLP/MPA 0x07 (issue 34 §1.2). Both offered
    // and both picked: the Write RTR, which needs no IRD slot.
    const bool offered_any = offer_.write_rtr || offer_.read_rtr;
    if (frame.enhanced && !frame.reject && offer_.peer_to_peer && offered_any && frame.words.peer_to_peer) {
        const bool write = offer_.write_rtr && frame.words.write_rtr;
        const bool read = offer_.read_rtr && frame.words.read_rtr;
        if (!write && !read) return Verdict::kNoMatchingRtr;
        read_rtr_ = read && !write;
    }
    return Verdict::kComplete;
}

}  // namespace softndk::transport
