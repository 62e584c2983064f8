// The wire channel (issue 7 §4, issue 18 §1): the peer is on the other end of an iWARP/TCP stream.
//  - NdkConnect opens TCP and sends an MPA v2 Request: IRD/ORD = the requested read limits, P2P with one RTR
//    offered, the NDK private data after the words. The Reply answers it; a Reject (R set) refuses it (CM-04).
//  - NdkCompleteConnect sends the RTR; the responder's NdkAccept completes when it arrives (CM-08), which also
//    keeps the first FPDU from racing the responder's set-up (siw-on-the-wire §3.4).
//  - NdkDisconnect is a FIN; a lost stream or a Terminate either way is the peer's failure (CM-26).
// MpaLink's and its stream's events arrive on the connection's lane and go straight to the ConnectionSide.
#pragma once

#include <functional>
#include <memory>

#include "cm/connection_side.h"
#include "engine/progress_engine.h"
#include "transport/mpa_link.h"

namespace softndk::cm {

struct WireConnectPlan {
    engine::ProgressEngine* progress = nullptr;
    transport::TcpOptions options;
    bool read_rtr = false;  // offer a zero-length Read as the RTR (else a Write), when an outbound read exists
    Endpoint local, remote;
    // CM-05: the consumer asked for port 0, so a port another process holds is replaced; `bound` is the
    // connector's endpoint reference, moved to the new port.
    bool pick_port = false;
    Endpoint* bound = nullptr;
    std::vector<uint8_t> private_data;
    // Tests only: runs after the socket started, before the connecting thread tells the channel its link.
    std::function<void()> before_link_stored;
};

ChannelOpening OpenWireChannel(const std::shared_ptr<ConnectionSide>& side, WireConnectPlan plan);

// Passive: a listener's socket whose MPA Request is in. `request` receives the peer's private data and IRD/ORD.
std::unique_ptr<PeerChannel> TakeWireRequest(std::shared_ptr<transport::MpaLink> link, bool crc, PeerAnswer* request);

}  // namespace softndk::cm
