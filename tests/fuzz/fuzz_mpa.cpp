// libFuzzer target: the MPA Request/Reply parser (RFC 5044 §7.1, RFC 6581). A frame that parses must serialise
// back to exactly the bytes it consumed; a refusable one must yield a Reject that parses as a Reply.
#include <cstdint>
#include <cstring>
#include <vector>

#include "wire/iwarp_wire.h"

using namespace softndk::wire;

namespace {

void Check(bool condition) {
    if (!condition) __builtin_trap();
}

void FuzzOne(std::span<const uint8_t> in, MpaFrameKind kind) {
    MpaFrame frame;
    const ParseResult r = ParseMpaFrame(in, kind, &frame);
    Check(r.size <= (r.status == WireStatus::kNeedMoreBytes ? kMpaHeaderSize + kMpaMaxPrivateData : in.size()));
    if (r.status == WireStatus::kNeedMoreBytes) {
        Check(r.size > in.size());
        return;
    }
    if (r.status == WireStatus::kOk && frame.enhanced && r.size < kMpaHeaderSize + kMpaEnhancedWordsSize) {
        Check(frame.reject && kind == MpaFrameKind::kReply);  // siw's Reject with H and no words
        return;
    }
    if (r.status == WireStatus::kOk) {
        Check(r.size == MpaFrameSize(frame));
        std::vector<uint8_t> out(MpaFrameSize(frame));
        size_t written = 0;
        Check(SerializeMpaFrame(frame, out, &written) == WireStatus::kOk);
        Check(written == r.size && std::memcmp(out.data(), in.data(), written) == 0);
    }
    if (r.status == WireStatus::kMarkersRequested || r.status == WireStatus::kEnhancedHeaderMissing) {
        const MpaFrame reject = MakeMpaReject(frame, {});
        std::vector<uint8_t> out(MpaFrameSize(reject));
        size_t written = 0;
        Check(SerializeMpaFrame(reject, out, &written) == WireStatus::kOk);
        MpaFrame parsed;
        Check(ParseMpaFrame(out, MpaFrameKind::kReply, &parsed).ok() && parsed.reject);
    }
    (void)TerminateCauseFor(r.status, false);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> in(data, size);
    FuzzOne(in, MpaFrameKind::kRequest);
    FuzzOne(in, MpaFrameKind::kReply);
    return 0;
}
