// The one connection state machine (issue 18 §1); the states and events are drawn in docs/architecture.md.
#include "cm/connection_side.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/last_error.h"

namespace softndk::cm {
namespace {

// CM-11: NdkGetConnectionData's size rules for the peer's private data.
NTSTATUS CopyConnectionData(const std::vector<uint8_t>& peer_data, PVOID data, ULONG* length) {
    const auto required = static_cast<ULONG>(peer_data.size());
    const ULONG copied = std::min(*length, required);
    if (data != nullptr && copied != 0) std::memcpy(data, peer_data.data(), copied);  // none sent: no source at all
    const bool query = data == nullptr && *length == 0;                               // CM-11 (a)
    const bool fits = *length >= required;
    *length = required;
    return query || fits ? STATUS_SUCCESS : STATUS_BUFFER_TOO_SMALL;
}

}  // namespace

std::shared_ptr<ConnectionSide> ConnectionSide::MakeActive(const SideSettings& settings, ReadLimits requested) {
    std::shared_ptr<ConnectionSide> side(new ConnectionSide(settings, true));
    side->requested_.inbound = std::min(requested.inbound, settings.max_inbound);  // CM-03
    side->requested_.outbound = std::min(requested.outbound, settings.max_outbound);
    return side;
}

std::shared_ptr<ConnectionSide> ConnectionSide::MakePassive(const SideSettings& settings, PeerAnswer request,
                                                            std::unique_ptr<PeerChannel> channel) {
    std::shared_ptr<ConnectionSide> side(new ConnectionSide(settings, false));
    side->state_ = SideState::kIncoming;
    side->peer_ = std::move(request);
    side->channel_ = std::move(channel);
    side->channel_->Bind(side);
    return side;
}

ReadLimits ConnectionSide::requested() const {
    return requested_;
}

SideState ConnectionSide::state() {
    std::lock_guard lock(mutex_);
    return state_;
}

std::shared_ptr<PeerChannel> ConnectionSide::Channel() {
    std::lock_guard lock(mutex_);
    return channel_;
}

engine::QueuePair* ConnectionSide::qp() {
    std::lock_guard lock(mutex_);
    return qp_;
}

void ConnectionSide::Complete(Finish finish, NTSTATUS status) {
    if (finish) settings_.executor->Post([finish = std::move(finish), status] { finish(status); });
}

NTSTATUS ConnectionSide::Connect(engine::QueuePair* qp, ChannelOpening opening, const Finish& finish) {
    {
        std::lock_guard lock(mutex_);
        if (closed_) return STATUS_CANCELLED;  // LIFE-09: closed before this pended work ran
        state_ = SideState::kConnecting;
        qp_ = qp;
        connect_finish_ = finish;
        channel_ = std::move(opening.channel);  // in place before the peer can answer
    }
    const NTSTATUS status = opening.send();
    if (!NT_SUCCESS(status)) {
        std::lock_guard lock(mutex_);
        state_ = SideState::kDone;
        connect_finish_ = nullptr;
        return status;
    }
    ArmStepTimeout(SideState::kConnecting);
    return STATUS_PENDING;  // completes with the peer's answer, a failure or the timeout (CM-04, CM-08)
}

bool ConnectionSide::OnPeerAnswer(PeerAnswer answer) {
    Finish finish;
    {
        std::lock_guard lock(mutex_);
        if (state_ != SideState::kConnecting || !connect_finish_) return false;
        peer_ = std::move(answer);
        // CM-03: each side's inbound limit is lowered to the other's outbound, and vice versa.
        effective_.inbound = std::min(requested_.inbound, peer_.limits.outbound);
        effective_.outbound = std::min(requested_.outbound, peer_.limits.inbound);
        state_ = SideState::kConnectReady;  // a Reject's private data is readable too (CM-12)
        finish = std::move(connect_finish_);
        connect_finish_ = nullptr;
    }
    if (peer_.reject) SetLastErrorText("NdkConnect: the peer rejected the connection (CM-04)");
    Complete(std::move(finish), peer_.reject ? STATUS_CONNECTION_REFUSED : STATUS_SUCCESS);
    return true;
}

NTSTATUS ConnectionSide::CompleteConnect(std::function<void()> on_disconnect) {
    std::shared_ptr<PeerChannel> channel = Channel();
    const bool lost = channel && channel->Lost();  // asked first: a loss after it is reported as any later one
    engine::QueuePair* qp;
    ReadLimits limits;
    {
        std::lock_guard lock(mutex_);
        // CM-07: not connecting (or an NdkConnect, racing this call, has replaced the channel asked)
        if (!active_ || state_ != SideState::kConnectReady || peer_.reject || channel != channel_)
            return STATUS_CONNECTION_INVALID;
        if (failed_ || lost) {
            state_ = SideState::kDone;
            return STATUS_CONNECTION_ABORTED;  // CM-07: the accepting peer abandoned
        }
        on_disconnect_ = std::move(on_disconnect);
        state_ = SideState::kConnected;
        qp = qp_;
        limits = effective_;
    }
    channel->Establish(qp, limits);  // the RTR; the QP takes posts once this returns (issue 18 §3.4)
    return STATUS_SUCCESS;
}

NTSTATUS ConnectionSide::Accept(engine::QueuePair* qp, ReadLimits limits, std::vector<uint8_t> private_data,
                                std::function<void()> on_disconnect, const Finish& finish) {
    std::shared_ptr<PeerChannel> channel;
    ReadLimits effective;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return STATUS_CANCELLED;                                             // LIFE-09
        if (state_ != SideState::kIncoming || failed_) return STATUS_CONNECTION_ABORTED;  // CM-08
        effective_.inbound = std::min(limits.inbound, peer_.limits.outbound);             // CM-03
        effective_.outbound = std::min(limits.outbound, peer_.limits.inbound);
        effective = effective_;
        on_disconnect_ = std::move(on_disconnect);
        qp_ = qp;
        qp_joined_ = true;
        state_ = SideState::kAccepting;
        accept_finish_ = finish;
        channel = channel_;
    }
    const NTSTATUS status = channel->Accept(qp, effective, std::move(private_data));
    if (!NT_SUCCESS(status)) {
        std::lock_guard lock(mutex_);
        qp_joined_ = false;
        if (!accept_finish_) return STATUS_PENDING;  // an event took the finish and completes it
        accept_finish_ = nullptr;
        state_ = SideState::kDone;
        return status;
    }
    ArmStepTimeout(SideState::kAccepting);
    return STATUS_PENDING;  // completes at the initiator's NdkCompleteConnect (CM-08)
}

void ConnectionSide::OnEstablished() {
    Finish finish;
    std::shared_ptr<PeerChannel> channel;
    engine::QueuePair* qp;
    {
        std::lock_guard lock(mutex_);
        if (state_ != SideState::kAccepting || !accept_finish_) return;
        state_ = SideState::kConnected;  // from here the accept timeout and a second RTR change nothing
        finish = std::move(accept_finish_);
        accept_finish_ = nullptr;
        channel = channel_;
        qp = qp_;
    }
    // Still within the channel's event (on the wire: the lane's job that read the RTR), so before its next
    // FPDU; a close meanwhile is queued behind this job. The consumer hears of it after.
    channel->MarkEstablished(qp);
    Complete(std::move(finish), STATUS_SUCCESS);
}

NTSTATUS ConnectionSide::Reject(std::vector<uint8_t> private_data) {
    std::shared_ptr<PeerChannel> channel = Channel();
    const bool lost = !active_ && channel && channel->Lost();  // asked first, as in CompleteConnect
    {
        std::lock_guard lock(mutex_);
        // (An NdkConnect racing this call may have replaced the channel asked: nothing to reject then.)
        const bool same = channel != nullptr && channel == channel_;
        if (same && !active_ && state_ == SideState::kIncoming) {
            if (failed_ || lost) return STATUS_CONNECTION_ABORTED;  // the connecting peer abandoned
            state_ = SideState::kDone;
        } else if (same && active_ && state_ == SideState::kConnectReady && !peer_.reject) {
            state_ = SideState::kDone;  // AMB-33: the peer's NdkAccept is aborted
            private_data.clear();
        } else {
            SetLastErrorText("NdkReject: nothing to reject on this connector (CM-09)");
            return STATUS_INVALID_DEVICE_STATE;
        }
    }
    if (active_)
        channel->Close(nullptr, true);
    else
        channel->Reject(std::move(private_data));
    return STATUS_SUCCESS;
}

NTSTATUS ConnectionSide::GetConnectionData(ULONG* inbound, ULONG* outbound, PVOID data, ULONG* length, bool* late) {
    std::lock_guard lock(mutex_);
    // AMB-15/CM-12: after NdkAccept or NdkCompleteConnect the consumer breaks CM-12, but the negotiated values
    // and the peer's private data are what hardware still holds: given, and reported by the Verifier.
    *late = state_ == SideState::kAccepting || state_ == SideState::kConnected || state_ == SideState::kDisconnecting;
    if (state_ != SideState::kIncoming && state_ != SideState::kConnectReady && !*late) {
        SetLastErrorText(
            "NdkGetConnectionData: no connection data yet or any more: call it after the connect event or a "
            "completed NdkConnect (CM-12)");
        return STATUS_INVALID_DEVICE_STATE;
    }
    // The passive side before NdkAccept: what the peer offers within our limits; after it, what was established.
    const bool established = active_ || *late;
    if (inbound != nullptr)
        *inbound = established ? effective_.inbound : std::min(settings_.max_inbound, peer_.limits.outbound);
    if (outbound != nullptr)
        *outbound = established ? effective_.outbound : std::min(settings_.max_outbound, peer_.limits.inbound);
    return CopyConnectionData(peer_.private_data, data, length);
}

NTSTATUS ConnectionSide::Address(bool peer, Endpoint* out) {
    std::shared_ptr<PeerChannel> channel = Channel();
    if (!channel) return STATUS_CONNECTION_INVALID;
    return channel->Address(peer, out);
}

void ConnectionSide::IndicateDisconnectLocked() {
    if (!on_disconnect_ || disconnect_indicated_ || disconnect_called_) return;  // CM-26: once
    disconnect_indicated_ = true;
    on_disconnect_();  // posts the consumer's callback to the provider thread
}

void ConnectionSide::FinishDisconnectLocked(NTSTATUS status, AfterUnlockJobs& after) {
    Finish finish = std::move(disconnect_finish_);
    disconnect_finish_ = nullptr;
    state_ = SideState::kDone;
    if (!finish) return;
    std::shared_ptr<PeerChannel> channel = channel_;
    engine::QueuePair* qp = qp_;
    engine::CompletionExecutor* executor = settings_.executor;
    after.push_back([channel, qp, executor, finish, status] {
        channel->Close(
            [qp, executor, finish, status] {
                auto complete = [qp, executor, finish, status] {
                    executor->Post([qp, finish, status] {
                        if (qp != nullptr) qp->Flush();  // CM-25: implicit flush
                        finish(status);
                    });
                };
                if (qp == nullptr || qp->Close(complete)) complete();  // CM-24 b, CM-28
            },
            status != STATUS_SUCCESS);
    });
}

NTSTATUS ConnectionSide::Disconnect(const Finish& finish) {
    std::shared_ptr<PeerChannel> channel;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return STATUS_CANCELLED;  // LIFE-09
        // A peer's disconnect or a loss leaves the side connected until this call.
        if (state_ != SideState::kConnected) return STATUS_CONNECTION_INVALID;
        disconnect_called_ = true;
        state_ = SideState::kDisconnecting;
        disconnect_finish_ = finish;
        channel = channel_;
    }
    channel->Disconnect();  // the FIN, once everything queued is out
    AfterUnlockJobs after;
    bool drain = false;
    {
        std::lock_guard lock(mutex_);
        if (state_ != SideState::kDisconnecting || !disconnect_finish_) {
            // finished already (the peer's disconnect arrived meanwhile)
        } else if (peer_disconnected_) {
            FinishDisconnectLocked(STATUS_SUCCESS, after);
        } else {
            drain = failed_;
        }
    }
    RunJobs(after);
    if (drain) {
        // After our Terminate: complete once it is out (a Terminate waiting for room in the socket would be
        // thrown away by the close that follows), within the timeout.
        channel->WhenDrained([weak = weak_from_this()] {
            if (std::shared_ptr<ConnectionSide> side = weak.lock()) side->FinishDisconnectIfPending(STATUS_SUCCESS);
        });
    }
    ArmDisconnectTimeout();  // CM-25: nothing waits for ever on the peer's disconnect
    return STATUS_PENDING;   // at the peer's disconnect (CM-24), flushed (CM-25)
}

void ConnectionSide::FinishDisconnectIfPending(NTSTATUS status) {
    AfterUnlockJobs after;
    {
        std::lock_guard lock(mutex_);
        if (state_ != SideState::kDisconnecting || !disconnect_finish_) return;
        FinishDisconnectLocked(status, after);
    }
    RunJobs(after);
}

void ConnectionSide::OnPeerDisconnected() {
    AfterUnlockJobs after;
    {
        std::lock_guard lock(mutex_);
        peer_disconnected_ = true;
        if (state_ == SideState::kDisconnecting)
            FinishDisconnectLocked(STATUS_SUCCESS, after);
        else if (state_ == SideState::kConnected)
            IndicateDisconnectLocked();
    }
    RunJobs(after);
}

void ConnectionSide::OnFailed(NTSTATUS status) {
    AfterUnlockJobs after;
    Finish finish;
    NTSTATUS finish_status = status;
    {
        std::lock_guard lock(mutex_);
        if (failed_) return;
        failed_ = true;
        switch (state_) {
            case SideState::kConnecting:
                state_ = SideState::kDone;
                SetLastErrorText("NdkConnect: the connection failed (0x%08X)", static_cast<unsigned>(status));
                finish = std::move(connect_finish_);
                connect_finish_ = nullptr;
                if (status == STATUS_CANCELLED) finish_status = STATUS_CONNECTION_ABORTED;
                break;
            case SideState::kAccepting:
                state_ = SideState::kDone;  // CM-08: the connecting peer abandoned
                finish = std::move(accept_finish_);
                accept_finish_ = nullptr;
                finish_status = STATUS_CONNECTION_ABORTED;
                break;
            case SideState::kConnected:
                IndicateDisconnectLocked();  // the QP is in error and flushed already (RFC 5040 §5.4)
                break;
            case SideState::kDisconnecting:
                FinishDisconnectLocked(STATUS_SUCCESS, after);
                break;
            default:
                break;
        }
    }
    Complete(std::move(finish), finish_status);
    RunJobs(after);
}

void ConnectionSide::CancelPending() {
    std::vector<Finish> cancelled;
    {
        std::lock_guard lock(mutex_);
        for (Finish* pending : {&connect_finish_, &accept_finish_, &disconnect_finish_}) {
            if (*pending) cancelled.push_back(std::move(*pending));
            *pending = nullptr;
        }
        if (!cancelled.empty()) state_ = SideState::kDone;  // a later step of the peer is aborted (CM-07, CM-08)
    }
    for (Finish& finish : cancelled) Complete(std::move(finish), STATUS_CANCELLED);
}

void ConnectionSide::Close(engine::QueuePair* qp, std::function<void()> done) {
    std::shared_ptr<PeerChannel> channel;
    bool refuse;
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
        on_disconnect_ = nullptr;  // the connector hears nothing more
        refuse = state_ == SideState::kIncoming;
        state_ = SideState::kDone;
        channel = channel_;
    }
    ReleaseTuple();
    if (refuse && channel) channel->Reject({});  // CM-15: closing an offered connector refuses it
    struct Join {
        std::atomic<int> pending{2};
        std::function<void()> done;
        std::shared_ptr<PeerChannel> channel;  // the QP calls into the channel until its last post left
    };
    auto join = std::make_shared<Join>();
    join->done = std::move(done);
    join->channel = channel;
    auto arrive = [join] {
        if (join->pending.fetch_sub(1) != 1) return;
        join->channel.reset();
        if (join->done) join->done();
    };
    if (qp == nullptr || qp->Close(arrive)) arrive();
    if (channel)
        channel->Close(arrive, false);
    else
        arrive();
}

void ConnectionSide::AbandonAttempt() {
    std::shared_ptr<PeerChannel> channel;
    {
        std::lock_guard lock(mutex_);
        channel = channel_;  // the state stays: a reject's private data is still readable (CM-12)
        qp_ = nullptr;       // given back to the consumer
        qp_joined_ = false;
    }
    ReleaseTuple();
    if (channel) channel->Close(nullptr, true);
}

bool ConnectionSide::HoldTuple(const Endpoint& local, const Endpoint& remote) {
    if (!Fabric::Instance().AddConnection(local, remote)) return false;
    std::lock_guard lock(mutex_);
    tuple_held_ = true;
    tuple_local_ = local;
    tuple_remote_ = remote;
    return true;
}

void ConnectionSide::ReleaseTuple() {
    bool held;
    {
        std::lock_guard lock(mutex_);
        held = tuple_held_;
        tuple_held_ = false;
    }
    if (held) Fabric::Instance().RemoveConnection(tuple_local_, tuple_remote_);
}

bool ConnectionSide::GiveQpBackIfUnused() {
    std::shared_ptr<PeerChannel> channel;
    engine::QueuePair* qp;
    bool joined;
    {
        std::lock_guard lock(mutex_);
        channel = channel_;
        qp = qp_;
        joined = qp_joined_;
    }
    if (joined && !(channel && channel->GaveQpBack(qp))) return false;
    std::lock_guard lock(mutex_);
    if (qp_ != qp || qp_joined_ != joined) return false;  // changed meanwhile: the connector's close releases it
    qp_ = nullptr;
    qp_joined_ = false;
    return true;
}

void ConnectionSide::ArmStepTimeout(SideState waiting) {
    if (settings_.accept_timeout_ms == 0) return;
    const auto timeout = std::chrono::milliseconds(settings_.accept_timeout_ms);
    settings_.executor->PostAfter(timeout, [weak = weak_from_this(), waiting, timeout] {
        std::shared_ptr<ConnectionSide> side = weak.lock();
        if (!side) return;
        Finish timed_out;
        std::shared_ptr<PeerChannel> channel;
        {
            std::lock_guard lock(side->mutex_);
            if (side->state_ != waiting) return;
            Finish& pending = waiting == SideState::kConnecting ? side->connect_finish_ : side->accept_finish_;
            if (!pending) return;
            timed_out = std::move(pending);
            pending = nullptr;
            side->state_ = SideState::kDone;
            side->failed_ = true;
            channel = side->channel_;
        }
        SetLastErrorText("%s: the peer did not answer within %lld ms (AcceptTimeoutMs): STATUS_IO_TIMEOUT (0xC00000B5)",
                         waiting == SideState::kConnecting ? "NdkConnect" : "NdkAccept",
                         static_cast<long long>(timeout.count()));
        // The abort is out before the consumer hears of the timeout, so the peer's next step fails (CM-07).
        engine::CompletionExecutor* executor = side->settings_.executor;
        channel->Close([executor, timed_out = std::move(
                                      timed_out)] { executor->Post([timed_out] { timed_out(STATUS_IO_TIMEOUT); }); },
                       true);
    });
}

void ConnectionSide::ArmDisconnectTimeout() {
    const auto timeout = std::chrono::milliseconds(settings_.disconnect_timeout_ms);
    settings_.executor->PostAfter(timeout, [weak = weak_from_this(), timeout] {
        std::shared_ptr<ConnectionSide> side = weak.lock();
        if (!side) return;
        {
            std::lock_guard lock(side->mutex_);
            if (side->state_ != SideState::kDisconnecting || !side->disconnect_finish_) return;
        }
        SetLastErrorText(
            "NdkDisconnect: the peer did not disconnect within %lld ms (DisconnectTimeoutMs, "
            "SOFTNDK_DISCONNECT_TIMEOUT_MS): STATUS_IO_TIMEOUT (0xC00000B5), the connection was aborted and the "
            "QP flushed",
            static_cast<long long>(timeout.count()));
        side->FinishDisconnectIfPending(STATUS_IO_TIMEOUT);
    });
}

void ConnectionSide::RunJobs(AfterUnlockJobs& jobs) {
    for (const std::function<void()>& job : jobs) job();
    jobs.clear();
}

}  // namespace softndk::cm
