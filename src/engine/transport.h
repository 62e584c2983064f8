// The transport under the engine (docs/architecture.md, "Data path"; issue 7 §1). The initiating QP hands it structured
// operations; it never parses bytes. Two ways to finish a request:
//  - inline (the in-process link): Send/Write/Read run the peer's inbound side and return its verdict;
//  - handed over (a wire, or the deferred in-process link): Submit() takes the request and the transport reports
//    its end with QueuePair::OnSubmittedDone, from any thread. A Send or Write may end inside Submit() (a wire
//    that handed all of it to the kernel at once); a Read never does (the QP holds its start lock there). The
//    QP keeps posting order, READ_FENCE and the outbound read limit (ORD) itself.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <softndk/ndkpi.h>

#include "engine/data_mover.h"

namespace softndk::engine {

class QueuePair;

// ProviderErrorCode for a terminate: the RFC 5040 layer/type/code, with bit 16 set so it is never 0 (CQ-14).
constexpr uint32_t TerminateProviderError(uint8_t layer, uint8_t type, uint8_t code) {
    return 0x10000u | (static_cast<uint32_t>(layer) << 12) | (static_cast<uint32_t>(type) << 8) | code;
}

// The cause a refused tagged access reports, one choice for every transport (RFC 5041 §7.2, RFC 5040 §7.2): a
// Write's target STag, base/bounds and stream association are DDP tagged-buffer errors; rights, and every
// check on a Read Request's source, are RDMAP remote protection errors. `code` is mem::TerminateCode's.
constexpr uint32_t TaggedRefusalCause(uint8_t rdmap_code, bool write_target) {
    if (!write_target || rdmap_code == 0x02) return TerminateProviderError(0, 1, rdmap_code);
    return TerminateProviderError(1, 1, rdmap_code == 0x03 ? 0x02 : rdmap_code);  // DDP renumbers "not associated"
}
// The initiator's status for a request the peer refused with `provider_error` (the in-process statuses of
// mem::RemoteAccessStatus and the receive checks); anything else aborts the connection.
NTSTATUS RemoteRefusalStatus(uint32_t provider_error);

// The peer's verdict on an inbound operation, as the initiator's completion status.
struct InboundResult {
    NTSTATUS status = STATUS_SUCCESS;
    uint32_t provider_error = 0;  // RFC 5040 terminate layer/type/code when the peer terminated
};

// A request handed over to a transport that completes later. It owns the references to its local buffers.
struct TransportRequest {
    enum class Kind : uint8_t { kSend, kWrite, kRead };
    QueuePair* owner = nullptr;
    uint64_t ticket = 0;  // the QP's place in its completion order
    Kind kind = Kind::kSend;
    bool fenced = false;  // READ_FENCE (QP-11): starts only once earlier reads have completed
    bool solicited = false;
    bool invalidate = false;
    bool deferred = false;  // NDK_OP_FLAG_DEFER: may wait for the burst's last post (CB-15)
    uint32_t token = 0;
    uint64_t address = 0;
    PieceList local;
    std::vector<uint8_t> inline_copy;  // INLINE data: the consumer's buffer is free once the post returns (QP-13)
};

class Transport {
public:
    virtual ~Transport() = default;
    // True when every operation is finished when its call returns; false when requests go through Submit().
    virtual bool completes_inline() const { return true; }
    // For transports that complete inline (the QP calls these instead of Submit when completes_inline()):
    // RDMAP Send / Send with Invalidate: untagged placement into the peer's next receive.
    virtual InboundResult Send(const PieceList&, bool /*solicited*/, bool /*invalidate*/, uint32_t /*token*/) {
        return {STATUS_NOT_SUPPORTED, 0};
    }
    // RDMAP Write: tagged placement at (token, address).
    virtual InboundResult Write(uint32_t /*token*/, uint64_t /*address*/, const PieceList&) {
        return {STATUS_NOT_SUPPORTED, 0};
    }
    // RDMAP Read Request / Response: the peer's (token, address) range into the local sink.
    virtual InboundResult Read(uint32_t /*token*/, uint64_t /*address*/, const PieceList&) {
        return {STATUS_NOT_SUPPORTED, 0};
    }
    // For transports that do not complete inline.
    virtual void Submit(std::unique_ptr<TransportRequest> request) = 0;
    // CB-15/CB-18: the doorbell. Requests submitted `deferred` may wait for it; it sends what they left queued
    // (a later post without the flag rings it inside Submit; the QP rings it when a post fails inline).
    virtual void Doorbell() {}
    // RDMAP Terminate from this side (local error): the connection is dead for both sides.
    virtual void Terminate(uint32_t provider_error) = 0;
};

}  // namespace softndk::engine
