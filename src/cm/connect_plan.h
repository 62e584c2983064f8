// How NdkConnect reaches its peer (issue 7 §4, issue 18 §1): the transport choice and the channel it opens. The
// API layer fills the plan from the adapter; nothing above cm/ branches on the transport.
#pragma once

#include <memory>

#include <softndk/softndk.h>

#include "cm/in_process_channel.h"
#include "cm/wire_channel.h"

namespace softndk::cm {

struct ConnectPlan {
    uint32_t transport = SOFTNDK_TRANSPORT_AUTO;  // the adapter's SOFTNDK_TRANSPORT_*
    bool shared_endpoint = false;                 // NdkConnectWithSharedEndpoint (CM-06)
    InProcessEnd in_process;
    WireConnectPlan wire;    // also carries the endpoints and the private data for either transport
    bool over_wire = false;  // decided once, by PrepareConnect
};

// True when the connection goes over iWARP/TCP: forced, or no listener of this process takes `destination`.
bool UsesWire(uint32_t transport, const Endpoint& destination);
// CM-04/CM-06: one connection per 4-tuple (in-process always; on the wire the kernel keeps it, except over a
// shared endpoint, whose sockets share the port). STATUS_ADDRESS_ALREADY_EXISTS when it is taken.
NTSTATUS PrepareConnect(ConnectionSide& side, ConnectPlan* plan);
ChannelOpening OpenChannel(const std::shared_ptr<ConnectionSide>& side, engine::QueuePair* qp, ConnectPlan plan);

}  // namespace softndk::cm
