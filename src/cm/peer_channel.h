// The way from one side of a connection to its peer (docs/architecture.md, "Connections"). In-process it is a direct
// call into the peer's ConnectionSide (cm/in_process_channel.h); on the wire it is MPA frames, the RTR and FINs on a
// TCP stream (cm/wire_channel.h). The ConnectionSide calls it without holding its own lock; the channel reports
// the peer's steps back through the side's On* events.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <softndk/ndkpi.h>

#include "cm/fabric.h"
#include "engine/queue_pair.h"

namespace softndk::cm {

struct ReadLimits {
    uint32_t inbound = 0;   // IRD: reads the peer may have outstanding at us
    uint32_t outbound = 0;  // ORD: reads we may have outstanding at the peer
};

// What the peer said: its request (to the passive side) or its answer (to the active side).
struct PeerAnswer {
    std::vector<uint8_t> private_data;
    ReadLimits limits;  // the peer's IRD / ORD (MPA words; the rev 1 defaults, AMB decision)
    bool reject = false;
};

class ConnectionSide;

class PeerChannel {
public:
    virtual ~PeerChannel() = default;
    // The side this channel reports to (a passive side binds its channel when it is made).
    virtual void Bind(const std::shared_ptr<ConnectionSide>& side) = 0;
    // Passive: answer the peer's request with our limits and private data, joining `qp` to the connection
    // (CM-08). In-process this fails with STATUS_CONNECTION_ABORTED when the connecting peer is gone.
    virtual NTSTATUS Accept(engine::QueuePair* qp, ReadLimits limits, std::vector<uint8_t> private_data) = 0;
    // Passive: refuse the request (CM-09, CM-15); the peer's NdkConnect completes with STATUS_CONNECTION_REFUSED.
    virtual void Reject(std::vector<uint8_t> private_data) = 0;
    // Active: enter RDMA mode with `qp`; the peer's NdkAccept completes (the RTR, CM-07). The QP takes posts
    // once this returns.
    virtual void Establish(engine::QueuePair* qp, ReadLimits limits) = 0;
    // Passive: the initiator's RTR arrived; `qp` is marked connected before its next message is read.
    virtual void MarkEstablished(engine::QueuePair*) {}
    // A graceful disconnect (the FIN): the peer sees it once everything queued is out (CM-24, CM-27).
    virtual void Disconnect() = 0;
    // Stops at once. Unless the connection ended gracefully, the peer sees it aborted (CM-26, CM-08);
    // `abortive` aborts after a Disconnect too (its timeout, CM-25). `done` runs once the channel no longer
    // touches the QP (inline or on another thread). Later calls only add their `done`.
    virtual void Close(std::function<void()> done, bool abortive) = 0;
    // True when the peer is gone, even if that is not reported yet (CM-07).
    virtual bool Lost() = 0;
    // After our Terminate: `done` runs once it has left (at once where nothing queues).
    virtual void WhenDrained(std::function<void()> done) { done(); }
    virtual NTSTATUS Address(bool peer, Endpoint* out) = 0;  // CM-13
    // After a failed accept: true when the channel let go of `qp` before it reached the connected state.
    virtual bool GaveQpBack(engine::QueuePair* qp) = 0;
};

}  // namespace softndk::cm
