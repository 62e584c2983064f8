// The transport under the engine (DESIGN §4). The initiating QP hands it structured operations; the
// in-process transport runs the peer's inbound side directly, a wire transport (iWARP over TCP, later)
// serialises them. The engine never parses bytes.
#pragma once

#include <cstdint>

#include <softndk/ndkpi.h>

#include "engine/data_mover.h"

namespace softndk::engine {

// The peer's verdict on an inbound operation, as the initiator's completion status.
struct InboundResult {
    NTSTATUS status = STATUS_SUCCESS;
    uint32_t provider_error = 0;  // RFC 5040 terminate layer/type/code when the peer terminated
};

class Transport {
public:
    virtual ~Transport() = default;
    // RDMAP Send / Send with Invalidate: untagged placement into the peer's next receive.
    virtual InboundResult Send(const PieceList& payload, bool solicited, bool invalidate, uint32_t token) = 0;
    // RDMAP Write: tagged placement at (token, address).
    virtual InboundResult Write(uint32_t token, uint64_t address, const PieceList& payload) = 0;
    // RDMAP Read Request / Response: the peer's (token, address) range into the local sink.
    virtual InboundResult Read(uint32_t token, uint64_t address, const PieceList& sink) = 0;
    // RDMAP Terminate from this side (local error): the connection is dead for both sides.
    virtual void Terminate(uint32_t provider_error) = 0;
};

}  // namespace softndk::engine
