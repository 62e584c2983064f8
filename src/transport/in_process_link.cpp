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

bool InProcessLink::Shutdown(std::function<void()> on_idle) {
    {
        std::lock_guard lock(mutex_);
        if (idle_) return true;
        if (shut_down_) {  // the first call's arrivals run this action too
            if (on_idle) waiters_.push_back(std::move(on_idle));
            return false;
        }
        shut_down_ = true;
        arrivals_pending_ = 3;
        first_action_ = std::move(on_idle);
    }
    for (engine::QueuePair* qp : qp_)
        if (qp->Close([this] { Arrive(false); })) Arrive(false);
    return Arrive(true);
}

bool InProcessLink::Arrive(bool by_first_caller) {
    std::function<void()> first;
    std::vector<std::function<void()>> waiters;
    {
        std::lock_guard lock(mutex_);
        if (--arrivals_pending_ != 0) return false;
        idle_ = true;
        first = std::move(first_action_);
        waiters.swap(waiters_);
    }
    // The first caller learns of it from the return value; everybody else through their action. The actions may
    // release the last reference to this link: nothing of it is touched from here.
    if (!by_first_caller && first) first();
    for (const std::function<void()>& waiter : waiters) waiter();
    return true;
}

void InProcessLink::Terminate(uint32_t provider_error) {
    if (terminated_.exchange(true)) return;
    // RFC 5040 §5.4: both ends of a terminated stream go to error; their receives are flushed.
    qp_[0]->EnterError();
    qp_[1]->EnterError();
    if (on_terminate_) on_terminate_(provider_error);
}

}  // namespace softndk::transport
