// MpaLink: the MPA exchange's phases on one socket (RFC 5044 §7.1, RFC 6581), then the hand-over to the stream.
#include "transport/mpa_link.h"

#include <sys/epoll.h>

#include <cerrno>

#include "transport/tcp_connection_internal.h"

namespace softndk::transport {

NTSTATUS MpaLink::Connect(engine::ProgressEngine* progress, sockaddr_storage* local, const sockaddr_storage& remote,
                          MpaOffer offer, const TcpOptions& options,
                          const std::function<EventHandler(std::weak_ptr<MpaLink>)>& make,
                          std::shared_ptr<MpaLink>* out) {
    std::shared_ptr<MpaLink> link(new MpaLink(true, options.request_crc));
    link->phase_ = Phase::kConnecting;
    link->handler_ = make(link);
    link->request_ = link->handshake_.Request(std::move(offer));
    const NTSTATUS status =
        TcpConnection::Connect(progress, local, remote, options, link, link->Forwarder(), &link->stream_);
    if (!NT_SUCCESS(status)) return status;
    *out = std::move(link);
    return STATUS_SUCCESS;
}

std::shared_ptr<MpaLink> MpaLink::Adopt(engine::ProgressEngine* progress, int fd, const TcpOptions& options,
                                        const std::function<EventHandler(std::weak_ptr<MpaLink>)>& make) {
    std::shared_ptr<MpaLink> link(new MpaLink(false, options.request_crc));
    link->phase_ = Phase::kAwaitMpa;
    link->handler_ = make(link);
    link->stream_ = TcpConnection::Adopt(progress, fd, options, link, link->Forwarder());
    link->stream_->StartReading();
    return link;
}

void MpaLink::SetHandler(EventHandler handler) {
    std::lock_guard lock(handler_mutex_);
    handler_ = std::move(handler);
}

void MpaLink::Emit(Event event, NTSTATUS status) {
    EventHandler handler;
    {
        std::lock_guard lock(handler_mutex_);
        handler = handler_;
    }
    if (handler) handler(event, status);
}

TcpConnection::EventHandler MpaLink::Forwarder() {
    return [weak = weak_from_this()](Event event, NTSTATUS status) {
        std::shared_ptr<MpaLink> self = weak.lock();
        if (!self) return;
        // A responder that closes or resets before any byte of its Reply refused us: its listener went away with
        // our connection still in its accept queue (CM-23), or it would not answer.
        if (event == Event::kFailed && self->active_ &&
            (self->phase_ == Phase::kConnecting || self->phase_ == Phase::kAwaitMpa) &&
            self->handshake_.nothing_read() &&
            (status == STATUS_CONNECTION_RESET || status == STATUS_CONNECTION_ABORTED))
            status = STATUS_CONNECTION_REFUSED;
        self->Emit(event, status);
    };
}

void MpaLink::PostToLane(std::function<void(MpaLink&)> job) {
    std::shared_ptr<MpaLink> self = shared_from_this();
    stream_->progress()->Post(stream_->lane(), [self, job = std::move(job)] { job(*self); });
}

void MpaLink::OnPreludeReady(uint32_t events) {
    switch (phase_) {
        case Phase::kConnecting:
            if (const int error = stream_->ConnectResult(events); error != 0)
                Fail(StatusFromErrno(error), 0);
            else if (events & EPOLLOUT)
                OnConnected();
            return;
        case Phase::kAwaitMpa:
            ReadMpa();
            return;
        case Phase::kReplied:
            if (establishing_.load()) return;  // the peer answered our RTR before EnterRdma ran: next round
            [[fallthrough]];
        case Phase::kOffered: {
            // Nothing may arrive now (siw-on-the-wire §3.4): data is a protocol error, EOF an abandoned attempt.
            const int peeked = stream_->PeekPrelude();
            if (peeked == 0 || (peeked < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                Fail(STATUS_CONNECTION_ABORTED, ProviderErrorOf(wire::term::kLlpConnectionLost));
            else if (peeked > 0)
                Fail(STATUS_CONNECTION_ABORTED, ProviderErrorOf(wire::term::kLlpInvalidRequestReply));
            return;
        }
        case Phase::kRdma:
            return;
    }
}

void MpaLink::OnConnected() {
    stream_->Connected();
    if (request_.empty()) {  // the Request could not be built
        Fail(STATUS_INVALID_PARAMETER, 0);
        return;
    }
    phase_ = Phase::kAwaitMpa;
    stream_->SendRaw(request_.data(), request_.size());
    request_.clear();
    request_.shrink_to_fit();
}

// The peer's MPA frame, read exactly (MpaHandshake says how many bytes more); bytes behind it are left in the
// socket and refused (siw-on-the-wire §3.4).
void MpaLink::ReadMpa() {
    MpaHandshake::Verdict verdict = MpaHandshake::Verdict::kNeedMore;
    while (verdict == MpaHandshake::Verdict::kNeedMore) {
        const ssize_t got = stream_->ReadPrelude(handshake_.Room());
        if (got <= 0) {
            handshake_.Received(0);
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            Fail(got == 0 ? STATUS_CONNECTION_ABORTED : StatusFromErrno(errno),
                 ProviderErrorOf(wire::term::kLlpConnectionLost));
            return;
        }
        verdict = handshake_.Received(static_cast<size_t>(got));
    }
    switch (verdict) {
        case MpaHandshake::Verdict::kRefusedAnswered:
            if (!handshake_.RefusalBytes().empty())
                stream_->SendRaw(handshake_.RefusalBytes().data(), handshake_.RefusalBytes().size());
            Fail(STATUS_CONNECTION_REFUSED, ProviderErrorOf(wire::term::kLlpInvalidRequestReply));
            return;
        case MpaHandshake::Verdict::kRefused:
            Fail(STATUS_CONNECTION_ABORTED, ProviderErrorOf(wire::term::kLlpInvalidRequestReply));
            return;
        default:
            break;
    }
    if (stream_->PeekPrelude() > 0) {  // data behind the frame (siw: -EPROTO)
        Fail(STATUS_CONNECTION_ABORTED, ProviderErrorOf(wire::term::kLlpInvalidRequestReply));
        return;
    }
    if (!active_) {
        phase_ = Phase::kOffered;
        stream_->MeasurePath();  // before the consumer can accept and post
        Emit(Event::kMpaReceived);
        return;
    }
    stream_->Agree(handshake_.crc(), false);
    phase_ = Phase::kReplied;
    if (verdict == MpaHandshake::Verdict::kOrdAboveOurIrd) {  // RFC 6581 §5, issue 18 §3.2
        stream_->TerminateNow(wire::term::kLlpInsufficientIrd, STATUS_CONNECTION_REFUSED);
        return;
    }
    if (verdict == MpaHandshake::Verdict::kNoMatchingRtr) {  // RFC 6581 §3, issue 34 §1.2
        stream_->TerminateNow(wire::term::kLlpNoMatchingRtr, STATUS_CONNECTION_REFUSED);
        return;
    }
    Emit(Event::kMpaReceived);
    if (handshake_.peer().reject && !stream_->ended())
        stream_->End(STATUS_CONNECTION_REFUSED, 0, false);  // the CM has reported the refusal
}

void MpaLink::Accept(MpaOffer reply, engine::QueuePair* qp, uint32_t ird, uint32_t ord) {
    PostToLane([reply = std::move(reply), qp, ird, ord](MpaLink& self) mutable {
        if (self.phase_ != Phase::kOffered || self.stream_->ended()) {
            self.Emit(Event::kFailed, STATUS_CONNECTION_ABORTED);
            return;
        }
        const bool p2p = self.handshake_.peer_to_peer();
        const std::vector<uint8_t> bytes = self.handshake_.Reply(std::move(reply));
        if (bytes.empty()) {
            self.Fail(STATUS_INVALID_PARAMETER, 0);
            return;
        }
        TcpConnection& stream = *self.stream_;
        stream.Agree(self.handshake_.crc(), self.handshake_.offer().read_rtr);
        self.phase_ = Phase::kRdma;
        // RFC 5044 §7.1.2: what the consumer posts waits for the initiator's first FPDU, the RTR with P2P.
        stream.EnterRdma(qp, ird, ord, p2p ? TcpConnection::Await::kRtr : TcpConnection::Await::kFirstFpdu);
        stream.SendRaw(bytes.data(), bytes.size());
        if (!p2p && !stream.ended()) stream.Emit(Event::kEstablished);
    });
}

void MpaLink::Reject(std::vector<uint8_t> private_data) {
    PostToLane([private_data = std::move(private_data)](MpaLink& self) {
        if (self.phase_ != Phase::kOffered || self.stream_->ended()) return;
        const std::vector<uint8_t> bytes = self.handshake_.Reject(private_data);
        if (!bytes.empty()) self.stream_->SendRaw(bytes.data(), bytes.size());
        self.stream_->End(STATUS_CONNECTION_REFUSED, 0, false);
    });
}

void MpaLink::ExpireIfAwaitingRequest() {
    PostToLane([](MpaLink& self) {
        if (self.active_ || self.phase_ != Phase::kAwaitMpa || self.stream_->ended()) return;
        self.stream_->ResetOnClose();  // a reset: the silent peer's socket and ours are gone at once, no TIME_WAIT
        self.Fail(STATUS_IO_TIMEOUT, 0);
    });
}

void MpaLink::Establish(engine::QueuePair* qp, uint32_t ird, uint32_t ord) {
    establishing_.store(true);
    PostToLane([qp, ird, ord](MpaLink& self) {
        if (self.phase_ != Phase::kReplied || self.stream_->ended()) {
            self.Emit(Event::kFailed, STATUS_CONNECTION_ABORTED);
            return;
        }
        self.phase_ = Phase::kRdma;
        self.stream_->EnterRdma(qp, ird, ord, TcpConnection::Await::kNothing);
    });
    // Settled by the lane before kMpaReceived: the type the Reply picked among those we offered.
    stream_->QueueRtr(handshake_.peer_to_peer() && handshake_.read_rtr());
}

}  // namespace softndk::transport
