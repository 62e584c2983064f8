#include "transport/in_process_link.h"

namespace softndk::transport {

InProcessLink::InProcessLink(engine::QueuePair* active, engine::QueuePair* passive, TerminateHook on_terminate,
                             engine::ProgressEngine* active_progress, engine::ProgressEngine* passive_progress)
    : qp_{active, passive},
      ends_{End(this, 0), End(this, 1)},
      progress_{active_progress, passive_progress},
      deferred_(active_progress != nullptr && passive_progress != nullptr),
      on_terminate_(std::move(on_terminate)) {}

// The request holds its QP's post gate until it ends, so the link outlives it. A read takes two hops, like a
// Read Request and its Response on a wire: requests posted after it run in between, so READ_FENCE (QP-11) and
// the responder's inbound read limit (IRD, QP-19) matter here as they do on a wire.
void InProcessLink::End::Submit(std::unique_ptr<engine::TransportRequest> request) {
    link_->Deliver(side_, request.release(), false);
}

void InProcessLink::Deliver(int side, engine::TransportRequest* raw, bool response) {
    // On the initiator's adapter's progress engine, one lane per QP: a QP's requests run in order, and the
    // peer's inbound side is entered only from there (QP-05/06), as in the inline case.
    progress_[side]->Post(reinterpret_cast<uintptr_t>(qp_[side]), [this, side, raw, response] {
        std::unique_ptr<engine::TransportRequest> owned(raw);
        const int responder = 1 - side;
        engine::QueuePair* peer = qp_[responder];
        engine::InboundResult result;
        switch (owned->kind) {
            case engine::TransportRequest::Kind::kSend:
                result = peer->OnSend(owned->local, owned->solicited, owned->invalidate, owned->token);
                break;
            case engine::TransportRequest::Kind::kWrite:
                result = peer->OnWrite(owned->token, owned->address, owned->local);
                break;
            case engine::TransportRequest::Kind::kRead:
                if (!response) {  // the Read Request arrives: a responder beyond its IRD terminates (RFC 5040)
                    if (reads_in_flight_[responder].fetch_add(1) + 1 > peer->inbound_read_limit()) {
                        reads_in_flight_[responder].fetch_sub(1);
                        // RDMAP remote operation, catastrophic for the stream (siw: "IRQ exceeded"), as on the wire.
                        constexpr uint32_t kRemoteOperationError = engine::TerminateProviderError(0, 2, 0x07);
                        Terminate(kRemoteOperationError);
                        result = {STATUS_CONNECTION_ABORTED, kRemoteOperationError};
                        break;
                    }
                    Deliver(side, owned.release(), true);  // the Response travels back after what is queued now
                    return;
                }
                result = peer->OnRead(owned->token, owned->address, owned->local);
                reads_in_flight_[responder].fetch_sub(1);
                break;
        }
        engine::QueuePair* owner = owned->owner;
        owner->OnSubmittedDone(std::move(owned), result);
    });
}

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
    qp_[0]->EnterError(true, provider_error);
    qp_[1]->EnterError(true, provider_error);
    if (on_terminate_) on_terminate_(provider_error);
}

}  // namespace softndk::transport
