#include "transport/in_process_link.h"

#include <memory>

namespace softndk::transport {

InProcessLink::InProcessLink(engine::QueuePair* active, engine::QueuePair* passive, TerminateHook on_terminate)
    : qp_{active, passive}, ends_{End(this, 0), End(this, 1)}, on_terminate_(std::move(on_terminate)) {}

void InProcessLink::Start(const uint32_t inbound_limit[2], const uint32_t outbound_limit[2]) {
    for (int side = 0; side < 2; ++side) {
        qp_[side]->Associate(&ends_[side], inbound_limit[side], outbound_limit[side]);
        qp_[side]->SetState(engine::QueuePair::State::kConnecting);
    }
}

void InProcessLink::Establish() {
    for (engine::QueuePair* qp : qp_) qp->SetState(engine::QueuePair::State::kConnected);
}

void InProcessLink::PeerDisconnected(int side) {
    qp_[1 - side]->EnterError(false);
}

bool InProcessLink::Shutdown(std::function<void()> on_idle) {
    // Three arrivals: each QP's gate going idle, and this call's own. Whoever arrives last finishes: this call
    // by returning true, a late post by running `on_idle`.
    struct Join {
        std::atomic<int> remaining{3};
        std::function<void()> on_idle;
    };
    auto join = std::make_shared<Join>();
    join->on_idle = std::move(on_idle);
    auto arrive = [join] {
        if (join->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1 && join->on_idle) join->on_idle();
    };
    for (engine::QueuePair* qp : qp_)
        if (qp->Close(arrive)) join->remaining.fetch_sub(1, std::memory_order_acq_rel);
    return join->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

void InProcessLink::Terminate(uint32_t provider_error) {
    if (terminated_.exchange(true)) return;
    // RFC 5040 §5.4: both ends of a terminated stream go to error; their receives are flushed.
    qp_[0]->EnterError();
    qp_[1]->EnterError();
    if (on_terminate_) on_terminate_(provider_error);
}

}  // namespace softndk::transport
