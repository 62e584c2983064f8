// The MPA handshake of one side (RFC 5044 §7.1, RFC 6581; issue 18 §1): which frame we send, how the peer's
// frame is read and judged, and what the two agree on (CRC, revision, RTR, the IRD/ORD words). It owns no
// socket: TcpConnection reads bytes into it and sends what it builds, so the rules are tested byte for byte.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "wire/iwarp_wire.h"

namespace softndk::transport {

// What one side puts in its MPA Request or Reply.
struct MpaOffer {
    bool crc = false;
    bool enhanced = true;  // rev 2 with the RFC 6581 IRD/ORD words
    uint16_t ird = 0;
    uint16_t ord = 0;
    bool peer_to_peer = false;
    bool write_rtr = false;
    bool read_rtr = false;
    std::vector<uint8_t> private_data;  // the ULP's, after the words
};

// What the peer's MPA frame said.
struct MpaPeer {
    uint8_t revision = 0;
    bool crc = false;
    bool enhanced = false;
    bool reject = false;
    wire::MpaEnhancedWords words;
    std::vector<uint8_t> private_data;
};

class MpaHandshake {
public:
    // `active`: we send the Request and read a Reply; passive: we read a Request. `grant_crc`: a Reply grants
    // CRC even when the Request did not ask for it (RFC 5044 §7.1: CRC if either side asks).
    MpaHandshake(bool active, bool grant_crc) : active_(active), grant_crc_(grant_crc) {}

    // ---- our frame ----
    // Active: the Request for `offer`; empty if it cannot be built (private data too long).
    std::vector<uint8_t> Request(MpaOffer offer);
    // Passive, after kComplete: the Reply that accepts, with the RTR this side asks for (siw-on-the-wire §3.3); empty
    // if it cannot be built. A rev 1 Request gets a rev 1 Reply (no words).
    std::vector<uint8_t> Reply(MpaOffer reply);
    // Passive, after kComplete: a Reject in the Request's revision, with the consumer's private data.
    std::vector<uint8_t> Reject(std::span<const uint8_t> private_data) const;

    // ---- the peer's frame ----
    enum class Verdict : uint8_t {
        kNeedMore,         // read Room() bytes more (exactly: the frame, not a byte beyond it)
        kComplete,         // peer() holds the frame
        kRefusedAnswered,  // markers asked, or rev 2 without its words: send RefusalBytes(), then close (siw)
        kRefused,          // a wrong key, revision or length: close without an answer (siw)
        kOrdAboveOurIrd,   // active: the Reply's ORD exceeds the IRD we offered: Terminate LLP 0x06 (RFC 6581 §5)
        kNoMatchingRtr,    // active: a P2P Reply picks no RTR type we offered: Terminate LLP 0x07 (RFC 6581 §3)
    };
    // Where the next bytes of the peer's frame go, and how many are needed at most.
    std::span<uint8_t> Room();
    // `count` bytes were read into Room(); judges the frame once it is whole.
    Verdict Received(size_t count);
    // kRefusedAnswered, passive: the Reject that echoes the Request (markers cleared).
    const std::vector<uint8_t>& RefusalBytes() const { return refusal_; }

    // ---- what was agreed (after kComplete) ----
    const MpaPeer& peer() const { return peer_; }
    const MpaOffer& offer() const { return offer_; }  // ours, with the RTR chosen for a passive side
    bool crc() const { return crc_; }
    bool peer_to_peer() const { return peer_.enhanced && peer_.words.peer_to_peer; }
    // Active, after kComplete: the RTR we send is a zero-length Read (the Reply picked the Read RTR we offered).
    bool read_rtr() const { return read_rtr_; }
    bool nothing_read() const { return have_ == 0; }

private:
    const bool active_;
    const bool grant_crc_;
    MpaOffer offer_;
    MpaPeer peer_;
    std::vector<uint8_t> in_;  // the peer's frame so far
    size_t have_ = 0;
    size_t want_ = wire::kMpaHeaderSize;
    std::vector<uint8_t> refusal_;
    bool crc_ = false;
    bool read_rtr_ = false;
};

}  // namespace softndk::transport
