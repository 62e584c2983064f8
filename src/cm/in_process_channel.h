// The in-process channel (issue 18 §1): the peer's ConnectionSide is reached through a direct call, and the two
// QPs are joined by a transport::InProcessLink once the passive side accepts. The request travels through the
// fabric to the listener (cm::Fabric::Connect) as an InProcessRequest.
#pragma once

#include <memory>

#include "cm/connection_side.h"
#include "engine/progress_engine.h"

namespace softndk::cm {

struct InProcessPair;

// What Fabric::Connect hands to the listener's ConnectTarget::Offer (as its void*).
struct InProcessRequest {
    std::shared_ptr<InProcessPair> pair;
    PeerAnswer request;  // the initiator's private data and IRD / ORD
};

// Where each side's work runs: its adapter's provider thread, and its progress engine when the link is deferred
// (SOFTNDK_TRANSPORT=deferred on either adapter).
struct InProcessEnd {
    engine::CompletionExecutor* executor = nullptr;
    engine::ProgressEngine* progress = nullptr;
    bool deferred = false;
};

// Active: its send offers the request to the listener of `destination` (CM-04: STATUS_CONNECTION_REFUSED when
// none takes it).
ChannelOpening OpenInProcessChannel(const std::shared_ptr<ConnectionSide>& side, engine::QueuePair* qp,
                                    InProcessEnd end, const Endpoint& local, const Endpoint& destination,
                                    std::vector<uint8_t> private_data);
// Passive (a listener's Offer, under the fabric lock): the channel that answers `request`.
std::unique_ptr<PeerChannel> TakeInProcessRequest(const InProcessRequest& request, InProcessEnd end);

}  // namespace softndk::cm
