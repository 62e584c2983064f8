// The iWARP wire format, parse and serialise only: MPA Request/Reply/Reject (RFC 5044 §7.1, RFC 6581), FPDU
// framing and CRC32c (RFC 5044 §4-6), DDP segment headers (RFC 5041 §4) and RDMAP headers including the
// Terminate message (RFC 5040 §4). No sockets, no NDK objects, no engine types; no exceptions and no allocation
// on the data path. Every length and offset is range-checked before it is used.
//
// This is the one header for the whole wire format. Bump kWireFormatVersion when a layout or a parse rule
// changes, so logs and captures can say which rules produced them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace softndk::wire {

inline constexpr uint32_t kWireFormatVersion = 1;

// ---- Status ----------------------------------------------------------------------------------------------

enum class WireStatus : uint8_t {
    kOk = 0,
    kNeedMoreBytes,              // truncated input; ParseResult::size says how many bytes are needed in total
    kBufferTooSmall,             // serialiser output span too short
    kInvalidArgument,            // serialiser input out of range (IRD > 0x3FFF, private data too long, …)
    kBadMpaKey,                  // RFC 5044 §7.1: neither "MPA ID Req Frame" nor "MPA ID Rep Frame" (or the wrong one)
    kUnsupportedMpaRevision,     // Rev other than 1 or 2
    kMarkersRequested,           // M set: we never use markers (siw refuses them too)
    kEnhancedHeaderMissing,      // H set but PD_Length < 4 (RFC 6581 §5)
    kPrivateDataTooLong,         // PD_Length > 512 (RFC 5044 §7.1)
    kUlpduShorterThanHeader,     // the FPDU's ULPDU is shorter than the DDP/RDMAP header its opcode needs
    kCrcMismatch,                // RFC 5044 §6.1
    kBadDdpVersion,              // DV != 1 (RFC 5041 §4.2)
    kBadRdmapVersion,            // RV != 1 (RFC 5040 §4.2)
    kUnknownOpcode,              // RDMAP opcode 8..15
    kOpcodeBufferModelMismatch,  // tagged opcode in an untagged segment or the other way round (RFC 5040 §4.3)
    kInvalidQueueNumber,         // QN does not match the opcode (RFC 5040 §5: 0 Send, 1 Read Request, 2 Terminate)
    kBadTerminate,               // Terminate message shorter than its header, or its header copies (RFC 5040 §4.8)
};

const char* WireStatusName(WireStatus status);

// Result of a parser: on kOk `size` is how many input bytes the frame/header consumed; on kNeedMoreBytes it is
// the smallest total input size that can make progress; on other errors it is 0 unless documented otherwise.
struct ParseResult {
    WireStatus status = WireStatus::kOk;
    size_t size = 0;
    bool ok() const { return status == WireStatus::kOk; }
};

// ---- MPA Request / Reply / Reject (RFC 5044 §7.1, RFC 6581 §5) --------------------------------------------

inline constexpr size_t kMpaKeySize = 16;
inline constexpr std::array<uint8_t, kMpaKeySize> kMpaRequestKey = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                                                    'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'};
inline constexpr std::array<uint8_t, kMpaKeySize> kMpaReplyKey = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                                                  'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e'};
inline constexpr size_t kMpaHeaderSize = 20;           // key, flags, rev, PD_Length
inline constexpr size_t kMpaEnhancedWordsSize = 4;     // RFC 6581 §5: IRD and ORD words, counted in PD_Length
inline constexpr size_t kMpaMaxPrivateData = 512;      // RFC 5044 §7.1, including the RFC 6581 words
inline constexpr uint16_t kMpaMaxIrdOrd = 0x3FFF;      // 14 bits
inline constexpr uint8_t kMpaFlagMarkers = 0x80;       // M
inline constexpr uint8_t kMpaFlagCrc = 0x40;           // C
inline constexpr uint8_t kMpaFlagReject = 0x20;        // R
inline constexpr uint8_t kMpaFlagEnhanced = 0x10;      // H (RFC 6581)
inline constexpr uint8_t kMpaFlagReservedMask = 0x0F;  // 0x08 is siw's private "G"; RFC: send 0, ignore
// The reserved flags of a frame of this revision: in revision 1, H is reserved too (RFC 6581 §5).
inline constexpr uint8_t ReservedFlagsMask(uint8_t revision) {
    return revision < 2 ? kMpaFlagReservedMask | kMpaFlagEnhanced : kMpaFlagReservedMask;
}

enum class MpaFrameKind : uint8_t { kRequest, kReply };

// RFC 6581 §5 enhanced words. IRD word: A (peer-to-peer) 0x8000, B (Send RTR) 0x4000; ORD word: C (Write RTR)
// 0x8000, D (Read RTR) 0x4000; the low 14 bits carry IRD / ORD.
struct MpaEnhancedWords {
    uint16_t ird = 0;
    uint16_t ord = 0;
    bool peer_to_peer = false;  // A
    bool send_rtr = false;      // B: zero-length Send RTR
    bool write_rtr = false;     // C: zero-length RDMA Write RTR
    bool read_rtr = false;      // D: zero-length RDMA Read RTR
};

struct MpaFrame {
    MpaFrameKind kind = MpaFrameKind::kRequest;
    uint8_t revision = 1;
    bool markers = false;
    bool crc = false;
    bool reject = false;
    bool enhanced = false;       // H: `words` is valid
    uint8_t reserved_flags = 0;  // the reserved flag bits as received (serialised as given): ReservedFlagsMask
    MpaEnhancedWords words;
    std::span<const uint8_t> private_data;  // ULP private data after the enhanced words; points into the input
};

// Parses one MPA frame of the expected kind from the start of `in`. On kOk, `size` is the frame length; bytes
// after it belong to the caller (siw-on-the-wire §3.4: never treat them as part of the frame).
// On kMarkersRequested and kEnhancedHeaderMissing the frame is still fully parsed (`out` and `size` valid), so
// a responder can answer with a Reject that echoes it. A Reject (Reply with R) with H but without the words is
// kOk with zero words (siw sends such Rejects). On kPrivateDataTooLong and kUnsupportedMpaRevision the fixed
// header fields of `out` are valid but nothing is consumed (size 0).
ParseResult ParseMpaFrame(std::span<const uint8_t> in, MpaFrameKind expected, MpaFrame* out);

// Frames ready to serialise. Revision is 2 when `words` is given, else 1. Reject sets R (RFC 5044 §7.1.1).
MpaFrame MakeMpaRequest(bool crc, const MpaEnhancedWords* words, std::span<const uint8_t> private_data);
MpaFrame MakeMpaReply(bool crc, const MpaEnhancedWords* words, std::span<const uint8_t> private_data);
MpaFrame MakeMpaReject(const MpaFrame& request, std::span<const uint8_t> private_data);

// Bytes SerializeMpaFrame writes: header + (4 if enhanced) + private data.
size_t MpaFrameSize(const MpaFrame& frame);
// kInvalidArgument for revision not 1/2, IRD/ORD > 0x3FFF or total private data > 512.
WireStatus SerializeMpaFrame(const MpaFrame& frame, std::span<uint8_t> out, size_t* written);

// ---- CRC32c (RFC 3720 §B.4 polynomial, as RFC 5044 §6.1 requires) -----------------------------------------

inline constexpr uint32_t kCrc32cInit = 0xFFFFFFFFu;
// Incremental: state = Crc32cUpdate(kCrc32cInit, a, n); state = Crc32cUpdate(state, b, m); crc = ~state.
uint32_t Crc32cUpdate(uint32_t state, const void* data, size_t size);
inline constexpr uint32_t Crc32cFinalize(uint32_t state) {
    return ~state;
}
inline uint32_t Crc32c(const void* data, size_t size) {
    return Crc32cFinalize(Crc32cUpdate(kCrc32cInit, data, size));
}
// The two implementations behind Crc32cUpdate, for tests and benchmarks.
uint32_t Crc32cUpdatePortable(uint32_t state, const void* data, size_t size);  // slicing-by-8
uint32_t Crc32cUpdateHardware(uint32_t state, const void* data, size_t size);  // SSE4.2; portable if absent
bool Crc32cHardwareAvailable();

// ---- FPDU framing (RFC 5044 §4-6; markers are never used) -------------------------------------------------

inline constexpr size_t kFpduLengthSize = 2;
inline constexpr size_t kFpduCrcSize = 4;
inline constexpr size_t kFpduMaxUlpdu = 0xFFFF;

// Pad so that length field + ULPDU + pad is a multiple of 4 (RFC 5044 §4.1).
inline constexpr size_t FpduPadSize(size_t ulpdu_length) {
    return (4 - ((kFpduLengthSize + ulpdu_length) & 3)) & 3;
}
inline constexpr size_t FpduSize(size_t ulpdu_length) {
    return kFpduLengthSize + ulpdu_length + FpduPadSize(ulpdu_length) + kFpduCrcSize;
}
// Largest ULPDU whose FPDU fits in one TCP segment of `mss` bytes: RFC 5044 §5.1 MULPDU without markers,
// EMSS - 6 - (EMSS mod 4), clipped to 65535; 0 if the MSS cannot carry an FPDU.
size_t MaxUlpduForMss(size_t mss);
// Payload bytes one FPDU of `mss` can carry behind the header of `header_size` bytes (0 if none).
inline size_t MaxSegmentPayloadForMss(size_t mss, size_t header_size) {
    const size_t ulpdu = MaxUlpduForMss(mss);
    return ulpdu > header_size ? ulpdu - header_size : 0;
}

// The CRC trailer is the little-endian image of the CRC32c value (siw-on-the-wire §3.5/§5; tshark: "Good CRC32").
void StoreCrcTrailer(uint32_t crc, uint8_t out[4]);
uint32_t LoadCrcTrailer(const uint8_t in[4]);

struct FpduView {
    std::span<const uint8_t> ulpdu;  // DDP header + payload
    uint32_t received_crc = 0;       // the trailer as an integer (meaningless with CRC off)
};

// Reads the ULPDU length field only (for a transport that receives the payload straight into target pages).
// On kOk, size = FpduSize(ulpdu_length).
ParseResult PeekFpduLength(std::span<const uint8_t> in, uint16_t* ulpdu_length);
// Parses one whole FPDU. With `crc_enabled` the trailer is checked (kCrcMismatch, size = FPDU length so the
// caller can skip it); without, it is ignored (siw sends zeros and never checks, siw-on-the-wire §3.5).
ParseResult ParseFpdu(std::span<const uint8_t> in, bool crc_enabled, FpduView* out);

// Framing bytes around an ULPDU given as header + payload, so the payload is never copied: send `length`,
// header, payload, then `trailer[0..trailer_size)` (pad + CRC or zeros).
struct FpduFraming {
    std::array<uint8_t, kFpduLengthSize> length{};
    std::array<uint8_t, 3 + kFpduCrcSize> trailer{};
    uint8_t trailer_size = 0;
};
WireStatus FrameFpdu(std::span<const uint8_t> header, std::span<const uint8_t> payload, bool crc_enabled,
                     FpduFraming* out);
// The same for a payload gathered from pieces (registered pages): the CRC runs over each piece in turn.
WireStatus FrameFpduGather(std::span<const uint8_t> header, std::span<const std::span<const uint8_t>> payload,
                           bool crc_enabled, FpduFraming* out);
// Receive side with CRC on: true when `trailer` (pad + CRC, FpduPadSize + 4 bytes) holds the CRC32c of the length
// field and header (`length_and_header`), the payload and the pad (RFC 5044 §6.1).
bool FpduCrcMatches(std::span<const uint8_t> length_and_header, std::span<const uint8_t> payload,
                    std::span<const uint8_t> trailer);
// Contiguous FPDU; writes FpduSize(header.size() + payload.size()) bytes.
WireStatus SerializeFpdu(std::span<const uint8_t> header, std::span<const uint8_t> payload, bool crc_enabled,
                         std::span<uint8_t> out, size_t* written);

// ---- DDP (RFC 5041 §4) and RDMAP (RFC 5040 §4) headers ----------------------------------------------------

inline constexpr size_t kDdpTaggedHeaderSize = 14;    // control, STag, TO
inline constexpr size_t kDdpUntaggedHeaderSize = 18;  // control, RsvdULP, QN, MSN, MO
inline constexpr size_t kRdmaReadRequestSize = 28;    // RFC 5040 §4.4
inline constexpr size_t kReadRequestHeaderSize = kDdpUntaggedHeaderSize + kRdmaReadRequestSize;  // 46
inline constexpr size_t kMaxSegmentHeaderSize = kReadRequestHeaderSize;
inline constexpr uint8_t kDdpVersion = 1;
inline constexpr uint8_t kRdmapVersion = 1;

enum class RdmapOpcode : uint8_t {
    kWrite = 0,
    kReadRequest = 1,
    kReadResponse = 2,
    kSend = 3,
    kSendInvalidate = 4,
    kSendSolicited = 5,
    kSendSolicitedInvalidate = 6,
    kTerminate = 7,
};
const char* RdmapOpcodeName(RdmapOpcode opcode);
// Write and Read Response use the tagged model; the others untagged (RFC 5040 §4.3 table).
inline constexpr bool IsTaggedOpcode(RdmapOpcode op) {
    return op == RdmapOpcode::kWrite || op == RdmapOpcode::kReadResponse;
}
inline constexpr bool IsSendOpcode(RdmapOpcode op) {
    return op == RdmapOpcode::kSend || op == RdmapOpcode::kSendInvalidate || op == RdmapOpcode::kSendSolicited ||
           op == RdmapOpcode::kSendSolicitedInvalidate;
}
inline constexpr bool IsSolicitedOpcode(RdmapOpcode op) {
    return op == RdmapOpcode::kSendSolicited || op == RdmapOpcode::kSendSolicitedInvalidate;
}
inline constexpr bool CarriesInvalidateStag(RdmapOpcode op) {
    return op == RdmapOpcode::kSendInvalidate || op == RdmapOpcode::kSendSolicitedInvalidate;
}

// Untagged queue numbers (RFC 5040 §5.1).
inline constexpr uint32_t kQueueSend = 0;
inline constexpr uint32_t kQueueReadRequest = 1;
inline constexpr uint32_t kQueueTerminate = 2;

struct ReadRequestFields {  // RFC 5040 §4.4
    uint32_t sink_stag = 0;
    uint64_t sink_offset = 0;
    uint32_t size = 0;
    uint32_t source_stag = 0;
    uint64_t source_offset = 0;
};

struct SegmentHeader {
    RdmapOpcode opcode = RdmapOpcode::kSend;
    bool tagged = false;  // T
    bool last = true;     // L
    // Tagged (RFC 5041 §4.3)
    uint32_t stag = 0;
    uint64_t tagged_offset = 0;
    // Untagged (RFC 5041 §4.4). RsvdULP carries the Invalidate STag for opcodes 4 and 6 (RFC 5040 §4.2).
    uint32_t rsvd_ulp = 0;
    uint32_t queue_number = 0;
    uint32_t msn = 0;
    uint32_t message_offset = 0;
    // Read Request only
    ReadRequestFields read;
    uint32_t invalidate_stag() const { return rsvd_ulp; }
};

// Header length of a segment with this opcode (14, 18 or 46).
inline constexpr size_t SegmentHeaderSize(RdmapOpcode op) {
    return IsTaggedOpcode(op) ? kDdpTaggedHeaderSize
                              : (op == RdmapOpcode::kReadRequest ? kReadRequestHeaderSize : kDdpUntaggedHeaderSize);
}

// Decodes the DDP/RDMAP header from the first bytes of an ULPDU; the payload is not needed (the transport reads
// the header, checks access, then receives the payload into the target). On kOk, size is the header length.
// kNeedMoreBytes if the prefix is too short (size = the header length needed). Checks DV, RV, opcode, T
// against the opcode and the QN of untagged opcodes; reserved bits are ignored (RFC 5041 §4.2).
ParseResult ParseSegmentHeader(std::span<const uint8_t> ulpdu_prefix, SegmentHeader* out);
// Same, for a complete ULPDU: kUlpduShorterThanHeader instead of kNeedMoreBytes (siw: LLP/MPA/0x03).
ParseResult ParseUlpduHeader(std::span<const uint8_t> ulpdu, SegmentHeader* out);
// Writes SegmentHeaderSize(header.opcode) bytes; T is derived from the opcode.
WireStatus SerializeSegmentHeader(const SegmentHeader& header, std::span<uint8_t> out, size_t* written);

SegmentHeader MakeWriteHeader(uint32_t stag, uint64_t tagged_offset, bool last);
SegmentHeader MakeReadResponseHeader(uint32_t sink_stag, uint64_t sink_offset, bool last);
// opcode: one of the four Sends; invalidate_stag is used only by the invalidate variants.
SegmentHeader MakeSendHeader(RdmapOpcode opcode, uint32_t msn, uint32_t message_offset, bool last,
                             uint32_t invalidate_stag);
SegmentHeader MakeReadRequestHeader(uint32_t msn, const ReadRequestFields& read);
// RFC 5040 §4.8: QN 2, MSN 1 (one Terminate per stream), MO 0, L set.
SegmentHeader MakeTerminateHeader();

// ---- Terminate (RFC 5040 §4.8, §7; IANA "RDDP" registry) --------------------------------------------------

enum class ErrorLayer : uint8_t { kRdmap = 0, kDdp = 1, kLlp = 2 };

struct TerminateCause {
    ErrorLayer layer = ErrorLayer::kRdmap;
    uint8_t etype = 0;
    uint8_t code = 0;
    // Packed as 0x00LLTTCC for logs and maps.
    constexpr uint32_t Packed() const {
        return (static_cast<uint32_t>(layer) << 16) | (static_cast<uint32_t>(etype) << 8) | code;
    }
    static constexpr TerminateCause Unpack(uint32_t packed) {
        return {static_cast<ErrorLayer>((packed >> 16) & 0xFF), static_cast<uint8_t>(packed >> 8),
                static_cast<uint8_t>(packed)};
    }
    constexpr bool operator==(const TerminateCause&) const = default;
};

// Error types and codes (RFC 5040 §7.2/7.3, RFC 5041 §7, RFC 5044 §8, RFC 6581 §9).
namespace term {
inline constexpr uint8_t kRdmapLocalCatastrophic = 0x0;
inline constexpr uint8_t kRdmapRemoteProtection = 0x1;
inline constexpr uint8_t kRdmapRemoteOperation = 0x2;
inline constexpr uint8_t kDdpLocalCatastrophic = 0x0;
inline constexpr uint8_t kDdpTaggedBuffer = 0x1;
inline constexpr uint8_t kDdpUntaggedBuffer = 0x2;
inline constexpr uint8_t kLlpMpa = 0x0;

inline constexpr TerminateCause kRdmapCatastrophicLocal{ErrorLayer::kRdmap, kRdmapLocalCatastrophic, 0x00};
inline constexpr TerminateCause kRdmapInvalidStag{ErrorLayer::kRdmap, kRdmapRemoteProtection, 0x00};
inline constexpr TerminateCause kRdmapBaseOrBounds{ErrorLayer::kRdmap, kRdmapRemoteProtection, 0x01};
inline constexpr TerminateCause kRdmapAccessRights{ErrorLayer::kRdmap, kRdmapRemoteProtection, 0x02};
inline constexpr TerminateCause kRdmapStagNotAssociated{ErrorLayer::kRdmap, kRdmapRemoteProtection, 0x03};
inline constexpr TerminateCause kRdmapToWrap{ErrorLayer::kRdmap, kRdmapRemoteProtection, 0x04};
inline constexpr TerminateCause kRdmapProtectionCannotInvalidate{ErrorLayer::kRdmap, kRdmapRemoteProtection, 0x09};
inline constexpr TerminateCause kRdmapProtectionUnspecified{ErrorLayer::kRdmap, kRdmapRemoteProtection, 0xFF};
inline constexpr TerminateCause kRdmapInvalidVersion{ErrorLayer::kRdmap, kRdmapRemoteOperation, 0x05};
inline constexpr TerminateCause kRdmapUnexpectedOpcode{ErrorLayer::kRdmap, kRdmapRemoteOperation, 0x06};
inline constexpr TerminateCause kRdmapRemoteStreamCatastrophic{ErrorLayer::kRdmap, kRdmapRemoteOperation, 0x07};
inline constexpr TerminateCause kRdmapRemoteGlobalCatastrophic{ErrorLayer::kRdmap, kRdmapRemoteOperation, 0x08};
inline constexpr TerminateCause kRdmapOperationCannotInvalidate{ErrorLayer::kRdmap, kRdmapRemoteOperation, 0x09};
inline constexpr TerminateCause kRdmapOperationUnspecified{ErrorLayer::kRdmap, kRdmapRemoteOperation, 0xFF};

inline constexpr TerminateCause kDdpCatastrophicLocal{ErrorLayer::kDdp, kDdpLocalCatastrophic, 0x00};
inline constexpr TerminateCause kDdpTaggedInvalidStag{ErrorLayer::kDdp, kDdpTaggedBuffer, 0x00};
inline constexpr TerminateCause kDdpTaggedBaseOrBounds{ErrorLayer::kDdp, kDdpTaggedBuffer, 0x01};
inline constexpr TerminateCause kDdpTaggedStagNotAssociated{ErrorLayer::kDdp, kDdpTaggedBuffer, 0x02};
inline constexpr TerminateCause kDdpTaggedToWrap{ErrorLayer::kDdp, kDdpTaggedBuffer, 0x03};
inline constexpr TerminateCause kDdpTaggedInvalidVersion{ErrorLayer::kDdp, kDdpTaggedBuffer, 0x04};
inline constexpr TerminateCause kDdpUntaggedInvalidQn{ErrorLayer::kDdp, kDdpUntaggedBuffer, 0x01};
inline constexpr TerminateCause kDdpUntaggedNoBuffer{ErrorLayer::kDdp, kDdpUntaggedBuffer, 0x02};
inline constexpr TerminateCause kDdpUntaggedMsnRange{ErrorLayer::kDdp, kDdpUntaggedBuffer, 0x03};
inline constexpr TerminateCause kDdpUntaggedInvalidMo{ErrorLayer::kDdp, kDdpUntaggedBuffer, 0x04};
inline constexpr TerminateCause kDdpUntaggedMessageTooLong{ErrorLayer::kDdp, kDdpUntaggedBuffer, 0x05};
inline constexpr TerminateCause kDdpUntaggedInvalidVersion{ErrorLayer::kDdp, kDdpUntaggedBuffer, 0x06};

inline constexpr TerminateCause kLlpConnectionLost{ErrorLayer::kLlp, kLlpMpa, 0x01};
inline constexpr TerminateCause kLlpCrcError{ErrorLayer::kLlp, kLlpMpa, 0x02};
inline constexpr TerminateCause kLlpMarkerError{ErrorLayer::kLlp, kLlpMpa, 0x03};  // siw: also a bad FPDU start
inline constexpr TerminateCause kLlpInvalidRequestReply{ErrorLayer::kLlp, kLlpMpa, 0x04};
inline constexpr TerminateCause kLlpLocalCatastrophic{ErrorLayer::kLlp, kLlpMpa, 0x05};  // RFC 6581
inline constexpr TerminateCause kLlpInsufficientIrd{ErrorLayer::kLlp, kLlpMpa, 0x06};    // RFC 6581
inline constexpr TerminateCause kLlpNoMatchingRtr{ErrorLayer::kLlp, kLlpMpa, 0x07};      // RFC 6581
}  // namespace term

// Static text for a cause ("DDP untagged: invalid MSN, range not valid"), or "unknown" for unregistered ones.
const char* TerminateCauseName(TerminateCause cause);
// For logs: "DDP/untagged/0x03 (invalid MSN, range not valid)". Not for the data path (allocates).
std::string FormatTerminateCause(TerminateCause cause);
inline std::string FormatTerminateCause(uint32_t packed) {
    return FormatTerminateCause(TerminateCause::Unpack(packed));
}
// The Terminate a receiver should send for a parse error (`tagged`: the T bit of the offending segment).
TerminateCause TerminateCauseFor(WireStatus status, bool tagged);

inline constexpr size_t kTerminateControlSize = 4;
inline constexpr size_t kTerminateSegmentLengthSize = 2;
inline constexpr size_t kTerminateMaxBodySize =
    kTerminateControlSize + kTerminateSegmentLengthSize + kDdpUntaggedHeaderSize + kRdmaReadRequestSize;  // 52
inline constexpr uint8_t kTerminateFlagM = 0x80;  // DDP Segment Length valid (RFC layout)
inline constexpr uint8_t kTerminateFlagD = 0x40;  // DDP header included
inline constexpr uint8_t kTerminateFlagR = 0x20;  // RDMAP (Read Request) header included

enum class TerminateLayout : uint8_t {
    kRfc5040,      // byte 0 = Layer<<4 | EType, flags M/D/R = 0x80/0x40/0x20
    kSiwBitfield,  // siw on x86 (siw-on-the-wire §3.9): byte 0 = EType<<4 | Layer, flags M/D/R = 0x01/0x02/0x04
};

struct TerminateMessage {
    TerminateCause cause;
    bool segment_length_valid = false;  // M
    bool has_ddp_header = false;        // D
    bool has_rdmap_header = false;      // R
    // RFC: the offending segment's MPA ULPDU length. siw puts the payload length here (siw-on-the-wire §3.9).
    uint16_t segment_length = 0;
    std::span<const uint8_t> ddp_header;    // 14 or 18 bytes copied from the offending segment
    std::span<const uint8_t> rdmap_header;  // 28 bytes (Read Request) when R
    TerminateLayout layout = TerminateLayout::kRfc5040;
    bool layout_guessed = false;  // the flags byte could not tell the layouts apart (no header copies)
};

// What the offending segment looked like, for the header copy (RFC 5040 §4.8). `ulpdu_prefix` may be empty
// (no D), or start with a DDP header (D; R too when it is a complete Read Request and the error is RDMAP's).
struct TerminateOffender {
    std::span<const uint8_t> ulpdu_prefix;
    bool segment_length_valid = false;
    uint16_t segment_length = 0;  // the offending FPDU's ULPDU length
};

size_t TerminateBodySize(TerminateCause cause, const TerminateOffender& offender);
// Builds the Terminate message body (after the untagged DDP header) in RFC 5040 layout.
WireStatus BuildTerminateBody(TerminateCause cause, const TerminateOffender& offender, std::span<uint8_t> out,
                              size_t* written);
// Builds the whole Terminate ULPDU: MakeTerminateHeader() + body.
WireStatus BuildTerminateUlpdu(TerminateCause cause, const TerminateOffender& offender, std::span<uint8_t> out,
                               size_t* written);
// Decodes a received Terminate body leniently (RFC layout or siw's, reported in `layout`). On kOk, size is the
// bytes used; trailing bytes are ignored. The spans point into `body`.
ParseResult DecodeTerminateBody(std::span<const uint8_t> body, TerminateMessage* out);

}  // namespace softndk::wire
