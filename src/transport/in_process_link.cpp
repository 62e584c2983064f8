#include "transport/in_process_link.h"

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

void InProcessLink::Shutdown() {
    qp_[0]->MarkClosed();
    qp_[1]->MarkClosed();
    qp_[0]->WaitIdle();
    qp_[1]->WaitIdle();
}

void InProcessLink::Terminate(uint32_t provider_error) {
    if (terminated_.exchange(true)) return;
    // RFC 5040 §5.4: both ends of a terminated stream go to error; their receives are flushed.
    qp_[0]->EnterError();
    qp_[1]->EnterError();
    if (on_terminate_) on_terminate_(provider_error);
}

}  // namespace softndk::transport
