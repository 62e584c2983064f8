// The iWARP stream's one state (issue 34 §2): where a TcpConnection is between its socket's accept or connect and
// its close. Changed only through TcpConnection::MoveToLocked, which follows StreamTransitionAllowed; drawn in
// docs/architecture.md ("The stream").
//
//   kPrelude ──EnterRdma──────────→ kAwaitRtr ──the initiator's first FPDU──→ kRdma
//      │  └──EnterRdma (initiator), TerminateNow──────────────────────────────↗ │
//      └───────────────┬──────────────────┴────────────────────────────────────┘
//     a send error off the lane: kEnding ──End──→ kClosed
//     End with a Terminate: kDraining ──it is out──→ kHalfClosed ──Close──→ kClosed
//     End with a Terminate that went at once: kHalfClosed;   any other End: kClosed
#pragma once

#include <cstdint>

namespace softndk::transport {

enum class StreamState : uint8_t {
    kPrelude,     // the MPA exchange owns the socket's reads; we send only its frames (and an initiator's RTR)
    kAwaitRtr,    // responder in RDMA mode: our FPDUs wait for the initiator's first FPDU (RFC 5044 §7.1.2)
    kRdma,        // FPDUs both ways (a graceful NdkDisconnect's FIN is data of this state: TcpConnection::fin_)
    kEnding,      // a send failed off the lane: nothing more is sent; End runs on the lane next, with a reset
    kDraining,    // ended behind a Terminate the socket had no room for: it goes (after the FPDU on its way), then FIN
    kHalfClosed,  // ended after a Terminate: our FIN is out and nothing is read; the descriptor waits for Close
    kClosed,      // ended and the descriptor closed
};

// Live states take posts and read FPDUs; from kDraining on the stream has ended: every request is flushed.
constexpr bool StreamEnded(StreamState state) {
    return state >= StreamState::kDraining;
}

constexpr bool StreamTransitionAllowed(StreamState from, StreamState to) {
    using S = StreamState;
    switch (from) {
        case S::kPrelude:
            return to != S::kPrelude;
        case S::kAwaitRtr:
            return to != S::kPrelude && to != S::kAwaitRtr;
        case S::kRdma:
            return to >= S::kEnding;
        case S::kEnding:
            return to == S::kClosed;  // a dropped stream is reset: no Terminate, no drain
        case S::kDraining:
            return to == S::kHalfClosed || to == S::kClosed;
        case S::kHalfClosed:
            return to == S::kClosed;
        case S::kClosed:
            return false;
    }
    return false;
}

constexpr const char* StreamStateName(StreamState state) {
    switch (state) {
        case StreamState::kPrelude:
            return "prelude";
        case StreamState::kAwaitRtr:
            return "awaiting the RTR";
        case StreamState::kRdma:
            return "RDMA";
        case StreamState::kEnding:
            return "ending (reset)";
        case StreamState::kDraining:
            return "draining behind a Terminate";
        case StreamState::kHalfClosed:
            return "half-closed";
        case StreamState::kClosed:
            return "closed";
    }
    return "?";
}

}  // namespace softndk::transport
