// libFuzzer target: FPDU framing, DDP/RDMAP header and Terminate decoding over a byte stream, as the transport
// will run them after MPA. Byte 0 selects CRC on/off. Checks: parsed headers serialise back to the same bytes
// (reserved bits aside), every header prefix gives a consistent answer, both CRC32c implementations agree.
#include <cstdint>
#include <cstring>
#include <vector>

#include "wire/iwarp_wire.h"

using namespace softndk::wire;

namespace {

void Check(bool condition) {
    if (!condition) __builtin_trap();
}

void FuzzHeader(std::span<const uint8_t> ulpdu) {
    SegmentHeader h;
    const ParseResult r = ParseUlpduHeader(ulpdu, &h);
    // Every prefix shorter than the header needs more bytes, or fails the same way from the control bytes.
    for (size_t n = 0; n < std::min(ulpdu.size(), kMaxSegmentHeaderSize); ++n) {
        SegmentHeader p;
        const ParseResult pr = ParseSegmentHeader(ulpdu.first(n), &p);
        if (pr.status == WireStatus::kNeedMoreBytes) {
            Check(pr.size > n && pr.size <= kMaxSegmentHeaderSize);
        } else if (pr.ok()) {
            Check(r.ok() && pr.size == r.size);
        }
    }
    if (!r.ok()) {
        (void)FormatTerminateCause(TerminateCauseFor(r.status, h.tagged));
        return;
    }
    Check(r.size == SegmentHeaderSize(h.opcode) && r.size <= ulpdu.size());
    uint8_t out[kMaxSegmentHeaderSize];
    size_t written = 0;
    Check(SerializeSegmentHeader(h, out, &written) == WireStatus::kOk && written == r.size);
    // RFC 5041 §4.2 / RFC 5040 §4.2 reserved bits are ignored on receive and sent as zero.
    Check(out[0] == (ulpdu[0] & ~0x3C) && out[1] == (ulpdu[1] & ~0x30));
    Check(std::memcmp(out + 2, ulpdu.data() + 2, written - 2) == 0);

    if (h.opcode == RdmapOpcode::kTerminate) {
        const std::span<const uint8_t> body = ulpdu.subspan(r.size);
        TerminateMessage message;
        const ParseResult t = DecodeTerminateBody(body, &message);
        if (!t.ok()) return;
        Check(t.size <= body.size());
        Check(message.ddp_header.empty() || message.ddp_header.data() >= body.data());
        Check(message.rdmap_header.empty() ||
              message.rdmap_header.data() + message.rdmap_header.size() <= body.data() + body.size());
        (void)FormatTerminateCause(message.cause);
        // Rebuilding from the decoded message gives an RFC-layout body that decodes to the same cause.
        const TerminateOffender offender{.ulpdu_prefix = message.ddp_header,
                                         .segment_length_valid = message.segment_length_valid,
                                         .segment_length = message.segment_length};
        if (static_cast<uint8_t>(message.cause.layer) > 0x0F) return;
        uint8_t rebuilt[kTerminateMaxBodySize];
        size_t size = 0;
        Check(BuildTerminateBody(message.cause, offender, rebuilt, &size) == WireStatus::kOk);
        TerminateMessage again;
        Check(DecodeTerminateBody(std::span(rebuilt, size), &again).ok());
        if (rebuilt[2] != 0) Check(again.cause == message.cause && again.layout == TerminateLayout::kRfc5040);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const bool crc = (data[0] & 1) != 0;
    std::span<const uint8_t> stream(data + 1, size - 1);
    Check(Crc32cUpdatePortable(kCrc32cInit, stream.data(), stream.size()) ==
          Crc32cUpdateHardware(kCrc32cInit, stream.data(), stream.size()));
    while (!stream.empty()) {
        FpduView view;
        const ParseResult r = ParseFpdu(stream, crc, &view);
        if (r.status == WireStatus::kNeedMoreBytes) {
            Check(r.size > stream.size());
            break;
        }
        Check(r.size <= stream.size() && r.size == FpduSize(view.ulpdu.size()));
        if (r.ok()) {
            FuzzHeader(view.ulpdu);
            // Re-framing the ULPDU gives the same length field and, with CRC on and a zero pad, the same
            // trailer. RFC 5044 §4.1: a receiver ignores the pad's value (the CRC still covers it).
            FpduFraming framing;
            Check(FrameFpdu(view.ulpdu, {}, crc, &framing) == WireStatus::kOk);
            Check(std::memcmp(framing.length.data(), stream.data(), kFpduLengthSize) == 0);
            const uint8_t* trailer = stream.data() + kFpduLengthSize + view.ulpdu.size();
            bool zero_pad = true;
            for (size_t i = 0; i < FpduPadSize(view.ulpdu.size()); ++i) zero_pad = zero_pad && trailer[i] == 0;
            if (crc && zero_pad) Check(std::memcmp(framing.trailer.data(), trailer, framing.trailer_size) == 0);
        }
        stream = stream.subspan(r.size);
    }
    return 0;
}
