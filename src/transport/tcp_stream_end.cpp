// TcpConnection, the end of the stream (issue 34 §2): the one function every cause comes to (End), the state it
// leaves the stream in, the Terminate's drain, and the owner's Close. Every cause: a local close or abort, a
// Terminate either way, the peer's FIN or reset, a send error, the stall check, a timeout, the adapter's close.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "transport/tcp_connection_internal.h"

namespace softndk::transport {
namespace {

bool WireDebug() {
    static const bool debug = std::getenv("SOFTNDK_WIRE_DEBUG") != nullptr;
    return debug;
}

}  // namespace

bool TcpConnection::MoveToLocked(StreamState to) {
    const StreamState from = state_.load(std::memory_order_relaxed);
    if (!StreamTransitionAllowed(from, to)) return false;  // a race lost to an end (EnterRdma after a drop)
    state_.store(to, std::memory_order_release);
    return true;
}

// From a posting thread (or the lane) holding the send lock: the socket failed, or a wire fault ends it here. A
// live stream stops sending and the lane ends it; an ended one only turns its close into a reset.
void TcpConnection::DropLocked(NTSTATUS status) {
    ResetOnCloseLocked();  // a reset, not a FIN: the peer sees the stream lost
    if (!MoveToLocked(StreamState::kEnding)) return;
    drop_status_ = status;
    std::shared_ptr<TcpConnection> self = shared_from_this();
    progress_->Post(lane_, [self] { self->EndDropped(); });
}

// kEnding, on the lane: the posted job, or the socket's next event if it comes first.
void TcpConnection::EndDropped() {
    NTSTATUS status;
    {
        std::lock_guard lock(send_mutex_);
        if (state() != StreamState::kEnding) return;
        status = drop_status_;
    }
    End(Ending{Ending::How::kReset, status, ProviderErrorOf(wire::term::kLlpConnectionLost), true});
}

void TcpConnection::Lost(NTSTATUS status) {
    End(Ending{Ending::How::kClose, status, ProviderErrorOf(wire::term::kLlpConnectionLost), true});
}

bool TcpConnection::Fail(wire::TerminateCause cause, NTSTATUS status, const uint8_t* offender, size_t offender_size) {
    Ending ending{Ending::How::kTerminate, status, ProviderErrorOf(cause), true};
    ending.cause = cause;
    ending.offender = offender;
    ending.offender_size = offender_size;
    End(ending);
    return false;
}

// The end, on the lane. In order: the Terminate is queued (nothing queued after it goes, RFC 5040 §5.4) and sent
// if the socket takes it; what the stream does not keep is flushed with the cause (QP-21, CQ-14) and the QP goes
// to error; then the socket: a Terminate that waits for room keeps the stream draining (ContinueDrain sends it,
// then a FIN); one that went is followed by a FIN with the descriptor kept until Close, so that no reset
// overtakes it at the peer; anything else closes the descriptor (a reset when asked, or dropped). Completions
// run last, outside the send lock, and then the owner hears kFailed if it is to.
void TcpConnection::End(const Ending& ending) {
    const StreamState from = state();
    if (StreamEnded(from)) return;
    if (WireDebug())
        std::fprintf(stderr, "softndk: %s connection %s -> %s ends in state '%s': status 0x%08X, cause %s\n",
                     active_ ? "active" : "passive", FormatSockaddr(local_).c_str(), FormatSockaddr(remote_).c_str(),
                     StreamStateName(from), static_cast<unsigned>(ending.status),
                     ending.provider_error != 0
                         ? wire::FormatTerminateCause(CauseOfProviderError(ending.provider_error)).c_str()
                         : "none");
    end_cause_.store(ending.provider_error);  // what a request that comes too late is flushed with (CQ-14)
    std::vector<Finished> finished;
    StreamState to = StreamState::kClosed;
    {
        std::lock_guard lock(send_mutex_);
        // A dropped stream (kEnding) is reset whatever the cause: its socket already failed.
        const bool terminate = ending.how == Ending::How::kTerminate && from != StreamState::kEnding && fd_ >= 0;
        if (ending.how == Ending::How::kReset) ResetOnCloseLocked();
        if (terminate) {
            QueueTerminateLocked(ending.cause, ending.offender, ending.offender_size);
            MoveToLocked(StreamState::kDraining);  // from here nothing but the Terminate is prepared
        }
        // What the socket takes goes now: the Terminate, or the Reject an MPA exchange just queued.
        const bool socket_ok = from == StreamState::kEnding || PumpLocked(&finished);
        if (terminate && socket_ok)
            to = QueuedTerminateLocked() != nullptr ? StreamState::kDraining : StreamState::kHalfClosed;
        FlushLocked(to == StreamState::kDraining, ending.provider_error, &finished);
        MoveToLocked(to);
        if (to == StreamState::kDraining) {
            want_write_ = true;  // the lane sends the rest when the socket has room (ContinueDrain)
            RearmLocked();
        }
    }
    FlushReadsAndQp(ending.provider_error, &finished);
    if (to == StreamState::kHalfClosed) HalfCloseSocket();
    if (to == StreamState::kClosed) CloseSocket();
    RunFinished(&finished);
    qp_ = nullptr;
    prelude_.reset();
    if (ending.report) Emit(Event::kFailed, ending.status);
}

void TcpConnection::FlushLocked(bool keep_terminate, uint32_t provider_error, std::vector<Finished>* finished) {
    const OutMessage* terminate = keep_terminate ? QueuedTerminateLocked() : nullptr;
    const OutMessage* in_flight = terminate != nullptr && !fpdus_.empty() && fpdus_.front().message != terminate
                                      ? fpdus_.front().message
                                      : nullptr;
    if (terminate != nullptr)  // FPDUs name their messages: trimmed before any message is freed
        while (!fpdus_.empty() && fpdus_.back().message != in_flight && fpdus_.back().message != terminate)
            fpdus_.pop_back();
    else
        fpdus_.clear();
    std::deque<std::unique_ptr<OutMessage>> kept;
    for (std::unique_ptr<OutMessage>& message : out_) {
        if (terminate != nullptr && (message.get() == in_flight || message.get() == terminate)) {
            kept.push_back(std::move(message));
            continue;
        }
        if (message->request) finished->push_back({std::move(message->request), {STATUS_CANCELLED, provider_error}});
    }
    out_ = std::move(kept);
    prepared_messages_ = terminate != nullptr ? std::min(prepared_messages_, out_.size()) : 0;
    raw_out_.clear();
}

void TcpConnection::FlushReadsAndQp(uint32_t provider_error, std::vector<Finished>* finished) {
    {
        std::lock_guard lock(reads_mutex_);
        for (OutstandingRead& read : reads_)
            if (read.request) finished->push_back({std::move(read.request), {STATUS_CANCELLED, provider_error}});
        reads_.clear();
    }
    inbound_reads_.store(0);
    if (qp_ != nullptr) {
        if (rx_->send_open) qp_->EndReceive(rx_->receive_context, 0, false, false, 0, STATUS_CANCELLED, 0);
        rx_->send_open = false;
        qp_->EnterError(true, provider_error);  // flushes the receives and the requests not yet handed over
    }
    rx_->receive.Clear();
    rx_->grant.Clear();
}

const TcpConnection::OutMessage* TcpConnection::QueuedTerminateLocked() const {
    for (const std::unique_ptr<OutMessage>& message : out_)
        if (message->opcode == wire::RdmapOpcode::kTerminate) return message.get();
    return nullptr;
}

void TcpConnection::WhenDrained(std::function<void()> done) {
    std::shared_ptr<TcpConnection> self = shared_from_this();
    progress_->Post(lane_, [self, done = std::move(done)]() mutable {
        {
            std::lock_guard lock(self->send_mutex_);
            if (self->state() == StreamState::kDraining) return self->when_drained_.push_back(std::move(done));
        }
        done();
    });
}

void TcpConnection::ContinueDrain(uint32_t events) {
    std::vector<Finished> finished;
    std::vector<std::function<void()>> drained;
    bool done = false;
    {
        std::lock_guard lock(send_mutex_);
        if (state() != StreamState::kDraining) return;
        want_write_ = false;
        const bool failed = (events & (EPOLLERR | EPOLLHUP)) != 0 || !PumpLocked(&finished);
        done = failed || QueuedTerminateLocked() == nullptr;
        if (done) {
            EndDrainLocked(&finished);
            drained.swap(when_drained_);
            MoveToLocked(StreamState::kHalfClosed);
        } else if (!want_write_) {  // sent all the socket took without EAGAIN: wait for room again
            want_write_ = true;
            RearmLocked();
        }
    }
    RunFinished(&finished);
    if (done) HalfCloseSocket();
    for (auto& run : drained) run();
}

// The drain is over (sent, failed, or given up by Close): what it kept is flushed with the end's cause.
void TcpConnection::EndDrainLocked(std::vector<Finished>* finished) {
    for (std::unique_ptr<OutMessage>& message : out_)
        if (message->request) finished->push_back({std::move(message->request), {STATUS_CANCELLED, end_cause_.load()}});
    out_.clear();
    fpdus_.clear();
    prepared_messages_ = 0;
    want_write_ = false;
}

// Stops at once, on the lane. Unless the stream ended gracefully (the peer's FIN, or our NdkDisconnect's) or the
// owner asks for a graceful close, the end is an abort: a reset, so the peer learns of it at once (CM-26, CM-08).
void TcpConnection::Close(std::function<void()> on_done, bool abortive) {
    std::shared_ptr<TcpConnection> self = shared_from_this();
    progress_->Post(lane_, [self, on_done = std::move(on_done), abortive] {
        bool graceful;
        {
            std::lock_guard lock(self->send_mutex_);
            graceful = self->peer_fin_.load() || self->fin_ != Fin::kNone;
        }
        self->End(
            Ending{abortive || !graceful ? Ending::How::kReset : Ending::How::kClose, STATUS_CANCELLED, 0, false});
        self->Release();
        if (on_done) on_done();
    });
}

void TcpConnection::Release() {
    std::vector<Finished> finished;
    std::vector<std::function<void()>> drained;
    {
        std::lock_guard lock(send_mutex_);
        if (state() == StreamState::kDraining) EndDrainLocked(&finished);  // a Terminate still waiting is given up
        drained.swap(when_drained_);
    }
    RunFinished(&finished);
    for (auto& run : drained) run();
    CloseSocket();  // half-closed after a Terminate until now
}

bool TcpConnection::StreamLost() {
    std::lock_guard lock(send_mutex_);
    if (fd_ < 0) return true;
    pollfd probe{fd_, POLLRDHUP, 0};
    return ::poll(&probe, 1, 0) > 0 && (probe.revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0;
}

// After a Terminate: FIN, stop reading, keep the descriptor until Close(). Closing it now, with the peer's
// next FPDUs unread, would make the kernel send a reset that can overtake the Terminate at the peer.
void TcpConnection::HalfCloseSocket() {
    std::lock_guard lock(send_mutex_);
    if (fd_ < 0) return;
    if (watched_ != nullptr) progress_->Unwatch(watched_);
    watched_ = nullptr;
    ::shutdown(fd_, SHUT_WR);
    if (trace_) trace_->Fin(true);
}

void TcpConnection::CloseSocket() {
    std::lock_guard lock(send_mutex_);  // a poster may be inside sendmsg
    MoveToLocked(StreamState::kClosed);
    if (fd_ < 0) return;
    if (watched_ != nullptr) progress_->Unwatch(watched_);
    watched_ = nullptr;
    ::close(fd_);
    fd_ = -1;
    if (trace_) reset_on_close_ ? trace_->Reset(true) : trace_->Fin(true);
}

}  // namespace softndk::transport
