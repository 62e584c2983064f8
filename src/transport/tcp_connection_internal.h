// The parts of TcpConnection its three source files share: a message on its way out, an FPDU cut from it,
// and the receive state.
#pragma once

#include <sys/uio.h>

#include "transport/tcp_connection.h"

namespace softndk::transport {

// An RDMAP message on its way out, in wire order.
struct TcpConnection::OutMessage {
    wire::RdmapOpcode opcode = wire::RdmapOpcode::kSend;
    std::unique_ptr<engine::TransportRequest> request;   // Send / Write: ends when its last FPDU is out
    engine::PieceList source;                            // a Read Response: the granted source range
    const std::vector<engine::Piece>* pieces = nullptr;  // the payload
    uint64_t total = 0;
    uint32_t stag = 0;    // tagged: the sink STag; a Send with Invalidate: the STag to invalidate
    uint64_t offset = 0;  // tagged: the TO of the first byte
    uint32_t msn = 0;
    wire::ReadRequestFields read;
    std::vector<uint8_t> body;  // a Terminate's body
    uint64_t prepared = 0;      // payload bytes already cut into FPDUs
    bool inbound_read = false;  // a Read Response: frees an IRD slot once out
};

// One FPDU ready to go: length field + DDP/RDMAP header (+ a Terminate body), then payload slices, then the
// pad and CRC trailer.
struct TcpConnection::Fpdu {
    OutMessage* message = nullptr;
    uint8_t head[wire::kFpduLengthSize + wire::kMaxSegmentHeaderSize + wire::kTerminateMaxBodySize];
    uint16_t head_size = 0;
    uint64_t payload_offset = 0;  // in the message
    uint32_t payload_size = 0;
    wire::FpduFraming framing;  // the length field (copied into head) and the pad + CRC trailer
    uint32_t size = 0;
    uint32_t sent = 0;
    bool last = false;
    // CRC on: the payload as it was when its CRC was computed, sent from here, so that a source its owner changes
    // meanwhile still leaves with a CRC that matches its bytes (issue 18 §3.6). Empty: sent from the pages.
    std::vector<uint8_t> copy;
};

struct TcpConnection::OutstandingRead {
    std::unique_ptr<engine::TransportRequest> request;  // null for our own Read RTR
    uint32_t sink_stag = 0;
    uint64_t total = 0;
    uint64_t received = 0;
};

struct TcpConnection::Rx {
    // Every FPDU is at least 20 bytes (length 2 + tagged header 14 + CRC 4), so reading 20 bytes ahead never
    // takes bytes of the FPDU after it, and holds an untagged header whole.
    static constexpr size_t kLookahead = 20;
    enum class Step : uint8_t { kHead, kBody };
    enum class Sink : uint8_t { kPlace, kStaging, kSmall };
    Step step = Step::kHead;
    uint8_t head[wire::kFpduLengthSize + wire::kMaxSegmentHeaderSize];
    size_t head_have = 0;
    size_t head_need = kLookahead;
    uint16_t ulpdu_length = 0;
    size_t header_size = 0;
    wire::SegmentHeader header;
    // The body: payload, then trailer, then the spill.
    Sink sink = Sink::kPlace;
    std::vector<engine::Piece> place;  // where the payload lands, in order
    engine::PieceList grant;           // the tagged target's reference, held until the FPDU is done
    size_t payload_size = 0;
    size_t payload_done = 0;
    uint8_t trailer[3 + wire::kFpduCrcSize];
    size_t trailer_size = 0;
    size_t trailer_have = 0;
    // What a read brought beyond the FPDU it was for: the next FPDUs' first bytes, consumed before the socket is
    // read again. One readv then takes a small FPDU whole with the ones behind it; at most this much of a
    // payload is copied from here instead of landing straight in its pages.
    uint8_t spill[1024];
    const uint8_t* spill_data = spill;  // `spill`, or this thread's large spill for a run of small FPDUs
    size_t spill_at = 0;
    size_t spill_have = 0;
    bool small_run = false;        // the last FPDU's payload was small: read the next ones many at a time (issue 21)
    uint32_t fpdus_this_wake = 0;  // FPDUs finished in this wake (ReadFpdusBatch's fairness cap)
    uint32_t reads_this_wake = 0;  // socket reads in this wake (the other cap)
    std::vector<uint8_t> staging;  // CRC on: one FPDU's payload, verified before placement
    uint8_t small[wire::kTerminateMaxBodySize + 12];  // a Terminate's body
    // The untagged Send being received.
    bool send_open = false;
    PVOID receive_context = nullptr;
    engine::PieceList receive;
    uint64_t send_received = 0;
    uint32_t expected_send_msn = 1;
    uint32_t expected_read_msn = 1;
    // The tagged message being received (no two are interleaved, siw-on-the-wire §3.7).
    bool tagged_open = false;
    wire::RdmapOpcode tagged_opcode = wire::RdmapOpcode::kWrite;
    uint32_t tagged_stag = 0;
    uint64_t tagged_next = 0;
    OutstandingRead* response_for = nullptr;  // a Read Response segment: its request
    // CRC on: a header refused before its FPDU's CRC was checked. The CRC decides (RFC 5044 §6.1): a bad one
    // is the error; a good one lets this refusal go out (TcpConnection::RefuseHead).
    struct Held {
        bool active = false;
        bool receive_too_long = false;  // the open receive completes with STATUS_BUFFER_OVERFLOW first
        wire::TerminateCause cause{};
        NTSTATUS status = STATUS_SUCCESS;
        uint8_t copy[wire::kFpduLengthSize + wire::kMaxSegmentHeaderSize];
        size_t size = 0;
    } held;
};

// The ProviderErrorCode a Terminate cause becomes (CQ-14, engine/transport.h).
inline uint32_t ProviderErrorOf(wire::TerminateCause cause) {
    return engine::TerminateProviderError(static_cast<uint8_t>(cause.layer), cause.etype, cause.code);
}

inline wire::TerminateCause CauseOfProviderError(uint32_t provider_error) {
    return {static_cast<wire::ErrorLayer>((provider_error >> 12) & 0xF),
            static_cast<uint8_t>((provider_error >> 8) & 0xF), static_cast<uint8_t>(provider_error & 0xFF)};
}

// Slices [offset, offset + length) of `pieces` into `out`.
void SlicePieces(const std::vector<engine::Piece>& pieces, uint64_t offset, uint64_t length,
                 std::vector<engine::Piece>* out);
// Appends iovecs for bytes [from, size) of `pieces` (total `size`), at most `room`; returns how many.
size_t AppendIovecs(const std::vector<engine::Piece>& pieces, uint64_t from, uint64_t size, iovec* out, size_t room);
NTSTATUS StatusFromErrno(int error);

}  // namespace softndk::transport
