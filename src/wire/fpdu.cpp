// FPDU framing (RFC 5044 §4-6, no markers), DDP segment headers (RFC 5041 §4) and RDMAP headers (RFC 5040 §4).
#include <cstring>

#include "wire/iwarp_wire.h"
#include "wire/wire_bytes.h"

namespace softndk::wire {
namespace {

using detail::LoadBe16;
using detail::LoadBe32;
using detail::LoadBe64;
using detail::StoreBe16;
using detail::StoreBe32;
using detail::StoreBe64;

// RFC 5041 §4.2 DDP control byte, RFC 5040 §4.2 RDMAP control byte.
constexpr uint8_t kDdpTaggedFlag = 0x80;
constexpr uint8_t kDdpLastFlag = 0x40;
constexpr uint8_t kDdpVersionMask = 0x03;
constexpr uint8_t kRdmapVersionShift = 6;
constexpr uint8_t kRdmapOpcodeMask = 0x0F;
constexpr uint8_t kMaxOpcode = static_cast<uint8_t>(RdmapOpcode::kTerminate);
constexpr uint8_t kZeroPad[3] = {0, 0, 0};

uint32_t ExpectedQueue(RdmapOpcode op) {
    if (op == RdmapOpcode::kReadRequest) return kQueueReadRequest;
    if (op == RdmapOpcode::kTerminate) return kQueueTerminate;
    return kQueueSend;
}

}  // namespace

const char* WireStatusName(WireStatus status) {
    switch (status) {
        case WireStatus::kOk:
            return "ok";
        case WireStatus::kNeedMoreBytes:
            return "need more bytes";
        case WireStatus::kBufferTooSmall:
            return "output buffer too small";
        case WireStatus::kInvalidArgument:
            return "invalid argument";
        case WireStatus::kBadMpaKey:
            return "bad MPA key";
        case WireStatus::kUnsupportedMpaRevision:
            return "unsupported MPA revision";
        case WireStatus::kMarkersRequested:
            return "MPA markers requested";
        case WireStatus::kEnhancedHeaderMissing:
            return "MPA H set without IRD/ORD words";
        case WireStatus::kPrivateDataTooLong:
            return "MPA private data longer than 512";
        case WireStatus::kUlpduShorterThanHeader:
            return "ULPDU shorter than its DDP/RDMAP header";
        case WireStatus::kCrcMismatch:
            return "FPDU CRC mismatch";
        case WireStatus::kBadDdpVersion:
            return "DDP version not 1";
        case WireStatus::kBadRdmapVersion:
            return "RDMAP version not 1";
        case WireStatus::kUnknownOpcode:
            return "unknown RDMAP opcode";
        case WireStatus::kOpcodeBufferModelMismatch:
            return "opcode does not match the tagged flag";
        case WireStatus::kInvalidQueueNumber:
            return "queue number does not match the opcode";
        case WireStatus::kBadTerminate:
            return "malformed Terminate";
    }
    return "unknown status";
}

const char* RdmapOpcodeName(RdmapOpcode opcode) {
    switch (opcode) {
        case RdmapOpcode::kWrite:
            return "RDMA Write";
        case RdmapOpcode::kReadRequest:
            return "RDMA Read Request";
        case RdmapOpcode::kReadResponse:
            return "RDMA Read Response";
        case RdmapOpcode::kSend:
            return "Send";
        case RdmapOpcode::kSendInvalidate:
            return "Send with Invalidate";
        case RdmapOpcode::kSendSolicited:
            return "Send with Solicited Event";
        case RdmapOpcode::kSendSolicitedInvalidate:
            return "Send with Solicited Event and Invalidate";
        case RdmapOpcode::kTerminate:
            return "Terminate";
    }
    return "reserved opcode";
}

// ---- FPDU framing ----

size_t MaxUlpduForMss(size_t mss) {
    // RFC 5044 §5.1 (markers off): MULPDU = EMSS - 6 - (EMSS mod 4); the smallest FPDU is 8 bytes.
    constexpr size_t kOverhead = kFpduLengthSize + kFpduCrcSize;
    if (mss < kOverhead + 2) return 0;
    const size_t mulpdu = mss - kOverhead - (mss % 4);
    return mulpdu > kFpduMaxUlpdu ? kFpduMaxUlpdu : mulpdu;
}

void StoreCrcTrailer(uint32_t crc, uint8_t out[4]) {
    out[0] = static_cast<uint8_t>(crc);
    out[1] = static_cast<uint8_t>(crc >> 8);
    out[2] = static_cast<uint8_t>(crc >> 16);
    out[3] = static_cast<uint8_t>(crc >> 24);
}

uint32_t LoadCrcTrailer(const uint8_t in[4]) {
    return static_cast<uint32_t>(in[0]) | (static_cast<uint32_t>(in[1]) << 8) | (static_cast<uint32_t>(in[2]) << 16) |
           (static_cast<uint32_t>(in[3]) << 24);
}

ParseResult PeekFpduLength(std::span<const uint8_t> in, uint16_t* ulpdu_length) {
    if (in.size() < kFpduLengthSize) return {WireStatus::kNeedMoreBytes, kFpduLengthSize};
    *ulpdu_length = LoadBe16(in.data());
    return {WireStatus::kOk, FpduSize(*ulpdu_length)};
}

ParseResult ParseFpdu(std::span<const uint8_t> in, bool crc_enabled, FpduView* out) {
    uint16_t ulpdu_length = 0;
    const ParseResult peek = PeekFpduLength(in, &ulpdu_length);
    if (!peek.ok()) return peek;
    const size_t total = peek.size;
    if (in.size() < total) return {WireStatus::kNeedMoreBytes, total};
    const size_t crc_at = total - kFpduCrcSize;
    out->ulpdu = in.subspan(kFpduLengthSize, ulpdu_length);
    out->received_crc = LoadCrcTrailer(&in[crc_at]);
    // RFC 5044 §6.1: the CRC covers the length field, the ULPDU and the pad.
    if (crc_enabled && Crc32c(in.data(), crc_at) != out->received_crc) return {WireStatus::kCrcMismatch, total};
    return {WireStatus::kOk, total};
}

WireStatus FrameFpduGather(std::span<const uint8_t> header, std::span<const std::span<const uint8_t>> payload,
                           bool crc_enabled, FpduFraming* out) {
    size_t ulpdu_length = header.size();
    for (std::span<const uint8_t> piece : payload) ulpdu_length += piece.size();
    if (ulpdu_length > kFpduMaxUlpdu) return WireStatus::kInvalidArgument;
    StoreBe16(out->length.data(), static_cast<uint16_t>(ulpdu_length));
    const size_t pad = FpduPadSize(ulpdu_length);
    std::memset(out->trailer.data(), 0, out->trailer.size());
    uint32_t crc = 0;
    if (crc_enabled) {
        uint32_t state = Crc32cUpdate(kCrc32cInit, out->length.data(), kFpduLengthSize);
        state = Crc32cUpdate(state, header.data(), header.size());
        for (std::span<const uint8_t> piece : payload) state = Crc32cUpdate(state, piece.data(), piece.size());
        state = Crc32cUpdate(state, kZeroPad, pad);
        crc = Crc32cFinalize(state);
    }
    StoreCrcTrailer(crc, &out->trailer[pad]);  // zeros when CRC is off (RFC 5044 §6.1 / siw-on-the-wire §3.5)
    out->trailer_size = static_cast<uint8_t>(pad + kFpduCrcSize);
    return WireStatus::kOk;
}

WireStatus FrameFpdu(std::span<const uint8_t> header, std::span<const uint8_t> payload, bool crc_enabled,
                     FpduFraming* out) {
    const std::span<const uint8_t> pieces[1] = {payload};
    return FrameFpduGather(header, pieces, crc_enabled, out);
}

bool FpduCrcMatches(std::span<const uint8_t> length_and_header, std::span<const uint8_t> payload,
                    std::span<const uint8_t> trailer) {
    if (trailer.size() < kFpduCrcSize) return false;
    const size_t pad = trailer.size() - kFpduCrcSize;
    uint32_t state = Crc32cUpdate(kCrc32cInit, length_and_header.data(), length_and_header.size());
    state = Crc32cUpdate(state, payload.data(), payload.size());
    state = Crc32cUpdate(state, trailer.data(), pad);
    return Crc32cFinalize(state) == LoadCrcTrailer(trailer.data() + pad);
}

WireStatus SerializeFpdu(std::span<const uint8_t> header, std::span<const uint8_t> payload, bool crc_enabled,
                         std::span<uint8_t> out, size_t* written) {
    *written = 0;
    FpduFraming framing;
    const WireStatus status = FrameFpdu(header, payload, crc_enabled, &framing);
    if (status != WireStatus::kOk) return status;
    const size_t total = FpduSize(header.size() + payload.size());
    if (out.size() < total) return WireStatus::kBufferTooSmall;
    uint8_t* p = out.data();
    std::memcpy(p, framing.length.data(), kFpduLengthSize);
    p += kFpduLengthSize;
    if (!header.empty()) std::memcpy(p, header.data(), header.size());
    p += header.size();
    if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());
    p += payload.size();
    std::memcpy(p, framing.trailer.data(), framing.trailer_size);
    *written = total;
    return WireStatus::kOk;
}

// ---- DDP / RDMAP headers ----

ParseResult ParseSegmentHeader(std::span<const uint8_t> ulpdu_prefix, SegmentHeader* out) {
    constexpr size_t kControlSize = 2;
    if (ulpdu_prefix.size() < kControlSize) return {WireStatus::kNeedMoreBytes, kControlSize};
    const uint8_t ddp = ulpdu_prefix[0];
    const uint8_t rdmap = ulpdu_prefix[1];
    *out = SegmentHeader{};
    out->tagged = (ddp & kDdpTaggedFlag) != 0;
    out->last = (ddp & kDdpLastFlag) != 0;
    if ((ddp & kDdpVersionMask) != kDdpVersion) return {WireStatus::kBadDdpVersion, 0};            // RFC 5041 §4.2
    if ((rdmap >> kRdmapVersionShift) != kRdmapVersion) return {WireStatus::kBadRdmapVersion, 0};  // RFC 5040 §4.2
    const uint8_t opcode = rdmap & kRdmapOpcodeMask;
    if (opcode > kMaxOpcode) return {WireStatus::kUnknownOpcode, 0};
    out->opcode = static_cast<RdmapOpcode>(opcode);
    if (IsTaggedOpcode(out->opcode) != out->tagged) return {WireStatus::kOpcodeBufferModelMismatch, 0};

    const size_t header_size = SegmentHeaderSize(out->opcode);
    if (ulpdu_prefix.size() < header_size) return {WireStatus::kNeedMoreBytes, header_size};
    const uint8_t* p = ulpdu_prefix.data();
    if (out->tagged) {  // RFC 5041 §4.3
        out->stag = LoadBe32(p + 2);
        out->tagged_offset = LoadBe64(p + 6);
        return {WireStatus::kOk, header_size};
    }
    // RFC 5041 §4.4
    out->rsvd_ulp = LoadBe32(p + 2);
    out->queue_number = LoadBe32(p + 6);
    out->msn = LoadBe32(p + 10);
    out->message_offset = LoadBe32(p + 14);
    if (out->opcode == RdmapOpcode::kReadRequest) {  // RFC 5040 §4.4
        const uint8_t* r = p + kDdpUntaggedHeaderSize;
        out->read.sink_stag = LoadBe32(r);
        out->read.sink_offset = LoadBe64(r + 4);
        out->read.size = LoadBe32(r + 12);
        out->read.source_stag = LoadBe32(r + 16);
        out->read.source_offset = LoadBe64(r + 20);
    }
    if (out->queue_number != ExpectedQueue(out->opcode)) return {WireStatus::kInvalidQueueNumber, 0};
    return {WireStatus::kOk, header_size};
}

ParseResult ParseUlpduHeader(std::span<const uint8_t> ulpdu, SegmentHeader* out) {
    const ParseResult result = ParseSegmentHeader(ulpdu, out);
    if (result.status == WireStatus::kNeedMoreBytes) return {WireStatus::kUlpduShorterThanHeader, 0};
    return result;
}

WireStatus SerializeSegmentHeader(const SegmentHeader& header, std::span<uint8_t> out, size_t* written) {
    *written = 0;
    if (static_cast<uint8_t>(header.opcode) > kMaxOpcode) return WireStatus::kInvalidArgument;
    const bool tagged = IsTaggedOpcode(header.opcode);
    const size_t size = SegmentHeaderSize(header.opcode);
    if (out.size() < size) return WireStatus::kBufferTooSmall;
    uint8_t* p = out.data();
    p[0] = static_cast<uint8_t>((tagged ? kDdpTaggedFlag : 0) | (header.last ? kDdpLastFlag : 0) | kDdpVersion);
    p[1] = static_cast<uint8_t>((kRdmapVersion << kRdmapVersionShift) | static_cast<uint8_t>(header.opcode));
    if (tagged) {
        StoreBe32(p + 2, header.stag);
        StoreBe64(p + 6, header.tagged_offset);
    } else {
        StoreBe32(p + 2, header.rsvd_ulp);
        StoreBe32(p + 6, header.queue_number);
        StoreBe32(p + 10, header.msn);
        StoreBe32(p + 14, header.message_offset);
        if (header.opcode == RdmapOpcode::kReadRequest) {
            uint8_t* r = p + kDdpUntaggedHeaderSize;
            StoreBe32(r, header.read.sink_stag);
            StoreBe64(r + 4, header.read.sink_offset);
            StoreBe32(r + 12, header.read.size);
            StoreBe32(r + 16, header.read.source_stag);
            StoreBe64(r + 20, header.read.source_offset);
        }
    }
    *written = size;
    return WireStatus::kOk;
}

SegmentHeader MakeWriteHeader(uint32_t stag, uint64_t tagged_offset, bool last) {
    SegmentHeader h;
    h.opcode = RdmapOpcode::kWrite;
    h.tagged = true;
    h.last = last;
    h.stag = stag;
    h.tagged_offset = tagged_offset;
    return h;
}

SegmentHeader MakeReadResponseHeader(uint32_t sink_stag, uint64_t sink_offset, bool last) {
    SegmentHeader h = MakeWriteHeader(sink_stag, sink_offset, last);
    h.opcode = RdmapOpcode::kReadResponse;
    return h;
}

SegmentHeader MakeSendHeader(RdmapOpcode opcode, uint32_t msn, uint32_t message_offset, bool last,
                             uint32_t invalidate_stag) {
    SegmentHeader h;
    h.opcode = opcode;
    h.last = last;
    h.queue_number = kQueueSend;
    h.msn = msn;
    h.message_offset = message_offset;
    h.rsvd_ulp = CarriesInvalidateStag(opcode) ? invalidate_stag : 0;  // RFC 5040 §4.2: else 0
    return h;
}

SegmentHeader MakeReadRequestHeader(uint32_t msn, const ReadRequestFields& read) {
    SegmentHeader h;
    h.opcode = RdmapOpcode::kReadRequest;
    h.queue_number = kQueueReadRequest;
    h.msn = msn;
    h.read = read;
    return h;
}

SegmentHeader MakeTerminateHeader() {
    SegmentHeader h;
    h.opcode = RdmapOpcode::kTerminate;
    h.queue_number = kQueueTerminate;
    h.msn = 1;
    return h;
}

}  // namespace softndk::wire
