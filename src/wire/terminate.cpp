// The RDMAP Terminate message (RFC 5040 §4.8): built in RFC layout, decoded leniently (RFC layout or the layout
// siw's x86 bitfields produce, siw-on-the-wire §3.9). Cause names follow the IANA "RDDP" registry (RFC 6580).
#include <cstdio>
#include <cstring>

#include "wire/iwarp_wire.h"
#include "wire/wire_bytes.h"

namespace softndk::wire {
namespace {

using detail::LoadBe16;
using detail::StoreBe16;

// siw's Hdr Ct bits on x86 (siw-on-the-wire §3.9).
constexpr uint8_t kSiwFlagM = 0x01;
constexpr uint8_t kSiwFlagD = 0x02;
constexpr uint8_t kSiwFlagR = 0x04;
constexpr uint8_t kRfcFlagMask = kTerminateFlagM | kTerminateFlagD | kTerminateFlagR;
constexpr uint8_t kSiwFlagMask = kSiwFlagM | kSiwFlagD | kSiwFlagR;

struct CauseName {
    TerminateCause cause;
    const char* name;
};

constexpr CauseName kCauseNames[] = {
    {term::kRdmapInvalidStag, "RDMAP remote protection: invalid STag"},
    {term::kRdmapBaseOrBounds, "RDMAP remote protection: base or bounds violation"},
    {term::kRdmapAccessRights, "RDMAP remote protection: access rights violation"},
    {term::kRdmapStagNotAssociated, "RDMAP remote protection: STag not associated with RDMAP stream"},
    {term::kRdmapToWrap, "RDMAP remote protection: tagged offset wrap"},
    {term::kRdmapProtectionCannotInvalidate, "RDMAP remote protection: STag cannot be invalidated"},
    {term::kRdmapProtectionUnspecified, "RDMAP remote protection: unspecified error"},
    {term::kRdmapInvalidVersion, "RDMAP remote operation: invalid RDMAP version"},
    {term::kRdmapUnexpectedOpcode, "RDMAP remote operation: unexpected opcode"},
    {term::kRdmapRemoteStreamCatastrophic, "RDMAP remote operation: catastrophic error localized to RDMAP stream"},
    {term::kRdmapRemoteGlobalCatastrophic, "RDMAP remote operation: catastrophic error, global"},
    {term::kRdmapOperationCannotInvalidate, "RDMAP remote operation: STag cannot be invalidated"},
    {term::kRdmapOperationUnspecified, "RDMAP remote operation: unspecified error"},
    {term::kDdpTaggedInvalidStag, "DDP tagged buffer: invalid STag"},
    {term::kDdpTaggedBaseOrBounds, "DDP tagged buffer: base or bounds violation"},
    {term::kDdpTaggedStagNotAssociated, "DDP tagged buffer: STag not associated with DDP stream"},
    {term::kDdpTaggedToWrap, "DDP tagged buffer: tagged offset wrap"},
    {term::kDdpTaggedInvalidVersion, "DDP tagged buffer: invalid DDP version"},
    {term::kDdpUntaggedInvalidQn, "DDP untagged buffer: invalid QN"},
    {term::kDdpUntaggedNoBuffer, "DDP untagged buffer: invalid MSN, no buffer available"},
    {term::kDdpUntaggedMsnRange, "DDP untagged buffer: invalid MSN, range not valid"},
    {term::kDdpUntaggedInvalidMo, "DDP untagged buffer: invalid MO"},
    {term::kDdpUntaggedMessageTooLong, "DDP untagged buffer: message too long for available buffer"},
    {term::kDdpUntaggedInvalidVersion, "DDP untagged buffer: invalid DDP version"},
    {term::kLlpConnectionLost, "LLP/MPA: TCP connection closed, terminated or lost"},
    {term::kLlpCrcError, "LLP/MPA: CRC error"},
    {term::kLlpMarkerError, "LLP/MPA: marker and ULPDU pointer error (bad FPDU start)"},
    {term::kLlpInvalidRequestReply, "LLP/MPA: invalid MPA Request or Reply frame"},
    {term::kLlpLocalCatastrophic, "LLP/MPA: local catastrophic error"},
    {term::kLlpInsufficientIrd, "LLP/MPA: insufficient IRD resources"},
    {term::kLlpNoMatchingRtr, "LLP/MPA: no matching RTR"},
};

const char* FindName(TerminateCause cause) {
    // RFC 5040 §7.1 / RFC 5041 §7: local catastrophic errors carry any code.
    if (cause.etype == 0 && cause.layer == ErrorLayer::kRdmap) return "RDMAP local catastrophic error";
    if (cause.etype == 0 && cause.layer == ErrorLayer::kDdp) return "DDP local catastrophic error";
    for (const CauseName& entry : kCauseNames) {
        if (entry.cause == cause) return entry.name;
    }
    return nullptr;
}

TerminateCause CauseFromNibbles(uint8_t layer_nibble, uint8_t etype_nibble, uint8_t code) {
    return {static_cast<ErrorLayer>(layer_nibble), etype_nibble, code};
}

const char* LayerName(ErrorLayer layer) {
    switch (layer) {
        case ErrorLayer::kRdmap:
            return "RDMAP";
        case ErrorLayer::kDdp:
            return "DDP";
        case ErrorLayer::kLlp:
            return "LLP";
    }
    return "layer?";
}

// Header copies of the offending segment that a Terminate for `cause` carries (RFC 5040 §4.8). LLP errors carry
// none: the segment failed below DDP and its header cannot be trusted.
struct CopyPlan {
    size_t ddp = 0;
    size_t rdmap = 0;
    bool length_field = false;
};

CopyPlan PlanCopies(TerminateCause cause, const TerminateOffender& offender) {
    CopyPlan plan;
    const auto prefix = offender.ulpdu_prefix;
    if (cause.layer != ErrorLayer::kLlp && prefix.size() >= 2) {
        const bool tagged = (prefix[0] & 0x80) != 0;
        const size_t ddp = tagged ? kDdpTaggedHeaderSize : kDdpUntaggedHeaderSize;
        if (prefix.size() >= ddp) {
            plan.ddp = ddp;
            const bool read_request = !tagged && (prefix[1] & 0x0F) == static_cast<uint8_t>(RdmapOpcode::kReadRequest);
            if (read_request && prefix.size() >= kReadRequestHeaderSize) plan.rdmap = kRdmaReadRequestSize;
        }
    }
    plan.length_field = plan.ddp != 0 || offender.segment_length_valid;
    return plan;
}

}  // namespace

const char* TerminateCauseName(TerminateCause cause) {
    const char* name = FindName(cause);
    return name != nullptr ? name : "unknown";
}

std::string FormatTerminateCause(TerminateCause cause) {
    char buffer[192];
    std::snprintf(buffer, sizeof(buffer), "%s/0x%x/0x%02x (%s)", LayerName(cause.layer), cause.etype, cause.code,
                  TerminateCauseName(cause));
    return buffer;
}

TerminateCause TerminateCauseFor(WireStatus status, bool tagged) {
    switch (status) {
        case WireStatus::kCrcMismatch:
            return term::kLlpCrcError;
        case WireStatus::kUlpduShorterThanHeader:
            return term::kLlpMarkerError;  // what siw sends (siw-on-the-wire §3.7)
        case WireStatus::kBadMpaKey:
        case WireStatus::kUnsupportedMpaRevision:
        case WireStatus::kMarkersRequested:
        case WireStatus::kEnhancedHeaderMissing:
        case WireStatus::kPrivateDataTooLong:
            return term::kLlpInvalidRequestReply;
        case WireStatus::kBadDdpVersion:
            return tagged ? term::kDdpTaggedInvalidVersion : term::kDdpUntaggedInvalidVersion;
        case WireStatus::kBadRdmapVersion:
            return term::kRdmapInvalidVersion;
        case WireStatus::kUnknownOpcode:
        case WireStatus::kOpcodeBufferModelMismatch:
            return term::kRdmapUnexpectedOpcode;
        case WireStatus::kInvalidQueueNumber:
            return term::kDdpUntaggedInvalidQn;
        case WireStatus::kBadTerminate:
            return term::kRdmapOperationUnspecified;  // never answer a Terminate
        default:
            return term::kRdmapCatastrophicLocal;
    }
}

size_t TerminateBodySize(TerminateCause cause, const TerminateOffender& offender) {
    const CopyPlan plan = PlanCopies(cause, offender);
    return kTerminateControlSize + (plan.length_field ? kTerminateSegmentLengthSize : 0) + plan.ddp + plan.rdmap;
}

WireStatus BuildTerminateBody(TerminateCause cause, const TerminateOffender& offender, std::span<uint8_t> out,
                              size_t* written) {
    *written = 0;
    if (static_cast<uint8_t>(cause.layer) > 0x0F || cause.etype > 0x0F) return WireStatus::kInvalidArgument;
    const CopyPlan plan = PlanCopies(cause, offender);
    const size_t size = TerminateBodySize(cause, offender);
    if (out.size() < size) return WireStatus::kBufferTooSmall;
    uint8_t* p = out.data();
    // RFC 5040 §4.8 Terminate Control: Layer:4 EType:4 | Error Code:8 | M D R rsvd:5 | rsvd:8.
    p[0] = static_cast<uint8_t>((static_cast<uint8_t>(cause.layer) << 4) | cause.etype);
    p[1] = cause.code;
    p[2] = static_cast<uint8_t>((offender.segment_length_valid ? kTerminateFlagM : 0) |
                                (plan.ddp != 0 ? kTerminateFlagD : 0) | (plan.rdmap != 0 ? kTerminateFlagR : 0));
    p[3] = 0;
    size_t at = kTerminateControlSize;
    if (plan.length_field) {
        StoreBe16(p + at, offender.segment_length_valid ? offender.segment_length : 0);
        at += kTerminateSegmentLengthSize;
    }
    if (plan.ddp + plan.rdmap != 0) {
        std::memcpy(p + at, offender.ulpdu_prefix.data(), plan.ddp + plan.rdmap);
        at += plan.ddp + plan.rdmap;
    }
    *written = at;
    return WireStatus::kOk;
}

WireStatus BuildTerminateUlpdu(TerminateCause cause, const TerminateOffender& offender, std::span<uint8_t> out,
                               size_t* written) {
    *written = 0;
    if (out.size() < kDdpUntaggedHeaderSize) return WireStatus::kBufferTooSmall;
    size_t header_size = 0;
    WireStatus status = SerializeSegmentHeader(MakeTerminateHeader(), out, &header_size);
    if (status != WireStatus::kOk) return status;
    size_t body_size = 0;
    status = BuildTerminateBody(cause, offender, out.subspan(header_size), &body_size);
    if (status != WireStatus::kOk) return status;
    *written = header_size + body_size;
    return WireStatus::kOk;
}

ParseResult DecodeTerminateBody(std::span<const uint8_t> body, TerminateMessage* out) {
    *out = TerminateMessage{};
    if (body.size() < kTerminateControlSize) return {WireStatus::kBadTerminate, 0};
    const uint8_t hi = body[0] >> 4;
    const uint8_t lo = body[0] & 0x0F;
    const uint8_t code = body[1];
    const uint8_t flags = body[2];
    const TerminateCause rfc = CauseFromNibbles(hi, lo, code);
    const TerminateCause siw = CauseFromNibbles(lo, hi, code);
    // The flags byte decides: RFC M/D/R are the top bits, siw's the bottom ones (siw-on-the-wire §3.9). Without any
    // flag set, take the reading that names a registered cause, preferring the RFC one.
    if ((flags & kRfcFlagMask) != 0) {
        out->layout = TerminateLayout::kRfc5040;
    } else if ((flags & kSiwFlagMask) != 0) {
        out->layout = TerminateLayout::kSiwBitfield;
    } else {
        const bool rfc_known = FindName(rfc) != nullptr;
        const bool siw_known = FindName(siw) != nullptr;
        out->layout = (!rfc_known && siw_known) ? TerminateLayout::kSiwBitfield : TerminateLayout::kRfc5040;
        out->layout_guessed = !(rfc == siw);
    }
    if (out->layout == TerminateLayout::kRfc5040) {
        out->cause = rfc;
        out->segment_length_valid = (flags & kTerminateFlagM) != 0;
        out->has_ddp_header = (flags & kTerminateFlagD) != 0;
        out->has_rdmap_header = (flags & kTerminateFlagR) != 0;
    } else {
        out->cause = siw;
        out->segment_length_valid = (flags & kSiwFlagM) != 0;
        out->has_ddp_header = (flags & kSiwFlagD) != 0;
        out->has_rdmap_header = (flags & kSiwFlagR) != 0;
    }

    size_t at = kTerminateControlSize;
    if (out->segment_length_valid || out->has_ddp_header) {
        if (body.size() < at + kTerminateSegmentLengthSize) return {WireStatus::kBadTerminate, 0};
        out->segment_length = LoadBe16(&body[at]);
        at += kTerminateSegmentLengthSize;
    }
    if (out->has_rdmap_header && !out->has_ddp_header) return {WireStatus::kBadTerminate, 0};
    if (out->has_ddp_header) {
        if (body.size() < at + 1) return {WireStatus::kBadTerminate, 0};
        const size_t ddp = (body[at] & 0x80) != 0 ? kDdpTaggedHeaderSize : kDdpUntaggedHeaderSize;
        if (body.size() < at + ddp) return {WireStatus::kBadTerminate, 0};
        out->ddp_header = body.subspan(at, ddp);
        at += ddp;
    }
    if (out->has_rdmap_header) {
        if (body.size() < at + kRdmaReadRequestSize) return {WireStatus::kBadTerminate, 0};
        out->rdmap_header = body.subspan(at, kRdmaReadRequestSize);
        at += kRdmaReadRequestSize;
    }
    return {WireStatus::kOk, at};
}

}  // namespace softndk::wire
