// TcpConnection: the socket's life, entering RDMA mode and the end of the stream. The MPA exchange before it is
// MpaLink's (mpa_link.cpp); sending is in tcp_send.cpp, receiving FPDUs in tcp_receive.cpp.
#include <bit>
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transport/tcp_connection_internal.h"

namespace softndk::transport {
namespace {

std::atomic<uint64_t> next_lane{1};

socklen_t SockaddrLength(const sockaddr_storage& address) {
    return address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

}  // namespace

NTSTATUS StatusFromErrno(int error) {
    switch (error) {
        case ECONNREFUSED:
            return STATUS_CONNECTION_REFUSED;
        case ETIMEDOUT:
            return STATUS_IO_TIMEOUT;
        case ENETUNREACH:
            return STATUS_NETWORK_UNREACHABLE;
        case EHOSTUNREACH:
            return STATUS_HOST_UNREACHABLE;
        case EADDRINUSE:
            return STATUS_SHARING_VIOLATION;
        case EADDRNOTAVAIL:
            return STATUS_INVALID_ADDRESS;
        case ECONNRESET:
        case EPIPE:
            return STATUS_CONNECTION_RESET;
        case ENOMEM:
        case ENOBUFS:
        case EMFILE:
        case ENFILE:
            return STATUS_INSUFFICIENT_RESOURCES;
        default:
            return STATUS_CONNECTION_ABORTED;
    }
}

std::string FormatSockaddr(const sockaddr_storage& address) {
    char text[INET6_ADDRSTRLEN] = "?";
    char out[INET6_ADDRSTRLEN + 16];
    if (address.ss_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
        inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
        std::snprintf(out, sizeof(out), "%s:%u", text, static_cast<unsigned>(ntohs(v4.sin_port)));
    } else {
        const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
        inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
        std::snprintf(out, sizeof(out), "[%s]:%u", text, static_cast<unsigned>(ntohs(v6.sin6_port)));
    }
    return out;
}

TcpConnection::TcpConnection(engine::ProgressEngine* progress, int fd, bool active, const TcpOptions& options,
                             std::weak_ptr<StreamPrelude> prelude, EventHandler handler)
    : progress_(progress),
      lane_(next_lane.fetch_add(1)),
      fd_(fd),
      active_(active),
      options_(options),
      handler_(std::move(handler)),
      connecting_(active),
      prelude_(std::move(prelude)),
      rx_(std::make_unique<Rx>()) {}

TcpConnection::~TcpConnection() {
    if (fd_ >= 0) ::close(fd_);  // only when never started: a started one closes on its lane
}

NTSTATUS TcpConnection::Connect(engine::ProgressEngine* progress, sockaddr_storage* local,
                                const sockaddr_storage& remote, const TcpOptions& options,
                                std::weak_ptr<StreamPrelude> prelude, EventHandler handler,
                                std::shared_ptr<TcpConnection>* out) {
    const int fd = ::socket(remote.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return StatusFromErrno(errno);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // shared endpoints: one port, many peers
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::bind(fd, reinterpret_cast<const sockaddr*>(local), SockaddrLength(*local)) != 0) {
        const int error = errno;
        ::close(fd);
        return StatusFromErrno(error);
    }
    socklen_t length = sizeof(*local);
    getsockname(fd, reinterpret_cast<sockaddr*>(local), &length);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&remote), SockaddrLength(remote)) != 0 &&
        errno != EINPROGRESS) {
        const int error = errno;
        ::close(fd);
        return StatusFromErrno(error);
    }
    std::shared_ptr<TcpConnection> connection(
        new TcpConnection(progress, fd, true, options, std::move(prelude), std::move(handler)));
    connection->local_ = *local;
    connection->remote_ = remote;
    if (options.trace) connection->trace_ = options.trace->Attach(*local, remote, true);
    *out = connection;  // before Start: the prelude may be called on the lane at once
    connection->Start(EPOLLOUT | EPOLLRDHUP);
    return STATUS_SUCCESS;
}

std::shared_ptr<TcpConnection> TcpConnection::Adopt(engine::ProgressEngine* progress, int fd, const TcpOptions& options,
                                                    std::weak_ptr<StreamPrelude> prelude, EventHandler handler) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::shared_ptr<TcpConnection> connection(
        new TcpConnection(progress, fd, false, options, std::move(prelude), std::move(handler)));
    socklen_t length = sizeof(connection->local_);
    getsockname(fd, reinterpret_cast<sockaddr*>(&connection->local_), &length);
    length = sizeof(connection->remote_);
    getpeername(fd, reinterpret_cast<sockaddr*>(&connection->remote_), &length);
    if (options.trace) {
        connection->trace_ = options.trace->Attach(connection->local_, connection->remote_, false);
        connection->trace_->Established();
    }
    return connection;  // the prelude starts it (StartReading) once it holds it
}

void TcpConnection::StartReading() {
    Start(EPOLLIN | EPOLLRDHUP);
}

void TcpConnection::Start(uint32_t events) {
    std::shared_ptr<TcpConnection> self = shared_from_this();
    // The handler holds the connection until CloseSocket unwatches it.
    std::lock_guard lock(send_mutex_);
    watched_ = progress_->Watch(lane_, fd_, events, [self](uint32_t ready) { self->OnReady(ready); });
    if (watched_ == nullptr) progress_->Post(lane_, [self] { self->End(STATUS_INSUFFICIENT_RESOURCES, 0, true); });
}

void TcpConnection::Emit(Event event, NTSTATUS status) {
    EventHandler handler;
    {
        std::lock_guard lock(handler_mutex_);
        handler = handler_;
    }
    if (handler) handler(event, status);
}

void TcpConnection::OnReady(uint32_t events) {
    const StreamState state = this->state();
    if (state == StreamState::kDraining) return ContinueDrain(events);
    if (state == StreamState::kEnding) return EndDropped();      // nothing is read from a dropped stream
    if (StreamEnded(state)) return;                              // unwatched already: an event that was on its way
    if (peer_fin_.load() && (events & (EPOLLHUP | EPOLLERR))) {  // both FINs are through, or a reset after the FIN
        End(STATUS_SUCCESS, 0, false);
        return;
    }
    if (state == StreamState::kPrelude && connecting_) {
        ToPrelude(events);
        return;
    }
    if (events & EPOLLOUT) {
        std::vector<Finished> finished;
        {
            std::lock_guard lock(send_mutex_);
            want_write_ = false;
            PumpLocked(&finished);
            if (!want_write_) RearmLocked();
        }
        RunFinished(&finished);
        if (ended()) return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        if (this->state() == StreamState::kPrelude)
            ToPrelude(events);
        else
            ReadFpdus();
    }
}

void TcpConnection::ToPrelude(uint32_t events) {
    if (const std::shared_ptr<StreamPrelude> prelude = prelude_.lock())
        prelude->OnPreludeReady(events);
    else  // its owner let go of the exchange (a listener or a connector closed): nobody waits for an event
        End(STATUS_CONNECTION_ABORTED, 0, false);
}

void TcpConnection::MeasurePath() {
    max_payload_ = PathMaxUlpdu();
}

int TcpConnection::ConnectResult(uint32_t events) const {
    int error = 0;
    socklen_t length = sizeof(error);
    getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error == 0 && (events & (EPOLLERR | EPOLLHUP))) error = ECONNREFUSED;
    return error;
}

ssize_t TcpConnection::ReadPrelude(std::span<uint8_t> room) {
    const ssize_t got = ::recv(fd_, room.data(), room.size(), MSG_DONTWAIT);
    if (trace_) {
        const iovec in{room.data(), room.size()};
        trace_->Received(got, &in, 1);
    }
    return got;
}

int TcpConnection::PeekPrelude() const {
    uint8_t byte;
    const ssize_t got = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return got > 0 ? 1 : static_cast<int>(got);
}

void TcpConnection::ResetOnClose() {
    std::lock_guard lock(send_mutex_);
    ResetOnCloseLocked();
}

// RFC 5044 §5.1: the ULPDU bytes one FPDU may carry on this path (536 when the MSS is not known yet).
size_t TcpConnection::PathMaxUlpdu() const {
    int mss = 0;
    socklen_t length = sizeof(mss);
    getsockopt(fd_, IPPROTO_TCP, TCP_MAXSEG, &mss, &length);
    return wire::MaxUlpduForMss(mss > 0 ? static_cast<size_t>(mss) : 536);
}

void TcpConnection::Connected() {
    if (trace_) trace_->Established();
    connecting_ = false;
    max_payload_ = PathMaxUlpdu();
    std::lock_guard lock(send_mutex_);
    RearmLocked();
}

void TcpConnection::SendRaw(const uint8_t* data, size_t size) {
    std::vector<Finished> finished;
    {
        std::lock_guard lock(send_mutex_);
        raw_out_.insert(raw_out_.end(), data, data + size);
        PumpLocked(&finished);
    }
    RunFinished(&finished);
}

void TcpConnection::TerminateNow(wire::TerminateCause cause, NTSTATUS status) {
    {
        std::lock_guard lock(send_mutex_);
        MoveToLocked(StreamState::kRdma);  // the Terminate is an FPDU
    }
    Fail(cause, status, nullptr, 0);
}

void TcpConnection::QueueRtr(bool read_rtr) {
    // A Write RTR is a zero-length Write to STag 1, TO 0; a Read RTR a zero-length Read Request of STag 1.
    auto rtr = std::make_unique<OutMessage>();
    if (read_rtr) {
        rtr->opcode = wire::RdmapOpcode::kReadRequest;
        rtr->read.source_stag = 1;
        OutstandingRead pending;
        std::lock_guard lock(reads_mutex_);
        pending.sink_stag = rtr->read.sink_stag = next_sink_stag_++;
        reads_.push_back(std::move(pending));
    } else {
        rtr->opcode = wire::RdmapOpcode::kWrite;
        rtr->stag = 1;
    }
    std::vector<Finished> finished;
    Enqueue(std::move(rtr), &finished, /*pump=*/false);
    RunFinished(&finished);
    ScheduleKicks(0);
}

void TcpConnection::SendQueued() {
    std::vector<Finished> finished;
    {
        std::lock_guard lock(send_mutex_);
        PumpLocked(&finished);
    }
    RunFinished(&finished);
}

void TcpConnection::ScheduleKicks(int round) {
    // the kicks at 10, 40, 160, 640, 1280, 2560, 5120 and 10240 ms after Establish, while the peer is silent
    static constexpr int kDelaysMs[] = {10, 30, 120, 480, 640, 1280, 2560, 5120};
    if (!options_.rtr_kicks || !options_.after || round >= static_cast<int>(std::size(kDelaysMs))) return;
    std::weak_ptr<TcpConnection> weak = weak_from_this();
    options_.after(std::chrono::milliseconds(kDelaysMs[round]), [weak, round] {
        std::shared_ptr<TcpConnection> self = weak.lock();
        if (!self || self->ended() || self->heard_.load() || self->kicks_over_.load()) return;
        self->progress_->Post(self->lane_, [self] { self->KickIfSilent(); });
        self->ScheduleKicks(round + 1);  // from the executor's own job: the executor is alive
    });
}

void TcpConnection::KickIfSilent() {
    if (heard_.load()) return;
    std::vector<Finished> finished;
    {
        std::lock_guard lock(send_mutex_);
        // Only into an empty queue (issue 34 §1.3): a kick must not send what deferred posts hold for their
        // doorbell (CB-15), and behind bytes on their way the peer has something to read anyway.
        if (state() != StreamState::kRdma || fin_ != Fin::kNone || !out_.empty()) return;
        // After the consumer's data, one kick and no more (docs/spec-decisions.md, siw-on-the-wire §3.4): it wakes a
        // siw responder whose accept window swallowed that data too (rping's first Send); a later FPDU of the
        // consumer's wakes it by itself, and more kicks only add FPDUs that a slow, strict peer (an NVMe-oF
        // target taking its time over a capsule) must take. The queue is empty, so every FPDU is out.
        if (tx_fpdus_ > 1 + kicks_sent_) kicks_over_.store(true);
        ++kicks_sent_;
        auto kick = std::make_unique<OutMessage>();
        kick->opcode = wire::RdmapOpcode::kWrite;
        kick->stag = 1;
        out_.push_back(std::move(kick));
        PumpLocked(&finished);
    }
    RunFinished(&finished);
}

void TcpConnection::EnterRdma(engine::QueuePair* qp, uint32_t ird, uint32_t ord, Await await) {
    qp_ = qp;
    // siw-on-the-wire §3.7: siw's read queues hold roundup_pow_of_two(limit) and a siw initiator fills its ORQ, so a
    // peer that negotiated ORD 5 may send 8 Read Requests. The inbound queue takes as many (docs/spec-decisions.md).
    inbound_read_capacity_ = ird == 0 ? 0 : std::bit_ceil(ird);
    ord_ = ord;
    if (crc_)
        rx_->staging.resize(wire::kFpduMaxUlpdu);  // cut by the peer's MSS: any 16-bit ULPDU (siw-on-the-wire §3.7)
    prelude_.reset();                              // the socket's events are the stream's from here
    {
        std::lock_guard lock(send_mutex_);
        first_fpdu_is_rtr_ = await == Await::kRtr;
        MoveToLocked(await == Await::kNothing ? StreamState::kRdma : StreamState::kAwaitRtr);  // not after a drop
        RearmLocked();
        WatchLivenessLocked();
    }
    ScheduleStallCheck();
}

// Issue 18 §2: a peer that vanishes (no FIN, no reset) is noticed by the kernel within the stall timeout: data
// unacknowledged that long ends the stream (TCP_USER_TIMEOUT), and an idle stream is probed after a third of it
// (keepalive; the user timeout then decides when unanswered probes end it). The read fails with ETIMEDOUT.
void TcpConnection::WatchLivenessLocked() {
    const auto timeout = options_.peer_stall_timeout;
    if (timeout.count() <= 0 || fd_ < 0) return;
    const int user_timeout = static_cast<int>(std::min<long long>(timeout.count(), INT32_MAX));
    const int one = 1;
    const int idle = static_cast<int>(std::max<long long>(1, timeout.count() / 3000));
    const int interval = static_cast<int>(std::max<long long>(1, timeout.count() / 9000));
    const int probes = 3;
    setsockopt(fd_, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
    setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd_, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd_, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
    setsockopt(fd_, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
}

// Issue 18 §2: looks four times per timeout. The clock restarts at each look that saw bytes move, no open work, or
// work just opened, so a stall is cut off between one and one and a quarter timeouts after it began, never
// earlier. Rescheduled from the executor's own job while the connection lives.
void TcpConnection::ScheduleStallCheck() {
    if (options_.peer_stall_timeout.count() <= 0 || !options_.after) return;
    std::weak_ptr<TcpConnection> weak = weak_from_this();
    const auto period = std::max(options_.peer_stall_timeout / 4, std::chrono::milliseconds(1));
    options_.after(period, [weak] {
        std::shared_ptr<TcpConnection> self = weak.lock();
        if (!self || self->ended()) return;
        self->progress_->Post(self->lane_, [self] { self->CheckStall(); });
        self->ScheduleStallCheck();
    });
}

void TcpConnection::CheckStall() {
    const StreamState state = this->state();
    if (state != StreamState::kRdma && state != StreamState::kAwaitRtr) return;
    const Rx& rx = *rx_;
    // Open work the peer must move: an FPDU or a message half received, a Read whose Request went out and whose
    // Response is not in (a frozen peer's kernel still ACKs the Request), or our bytes the socket would not take.
    // What the consumer has not sent is not the peer's debt (issue 34 §1.3): a deferred post waiting for its
    // doorbell, or a Read Request still queued behind it.
    bool inside = rx.step != Rx::Step::kHead || rx.head_have != 0 || rx.send_open || rx.tagged_open;
    bool sending;
    uint64_t tx_bytes;
    {
        std::lock_guard lock(send_mutex_);  // then reads_mutex_: Submit queues a Read there before it enqueues it
        sending = want_write_;
        tx_bytes = tx_bytes_;
        size_t unsent_read_requests = 0;
        for (const std::unique_ptr<OutMessage>& message : out_)
            if (message->opcode == wire::RdmapOpcode::kReadRequest) ++unsent_read_requests;
        std::lock_guard reads_lock(reads_mutex_);
        inside = inside || reads_.size() > unsent_read_requests;
    }
    const bool moved = rx_bytes_ != stall_rx_seen_ || tx_bytes != stall_tx_seen_;
    stall_rx_seen_ = rx_bytes_;
    stall_tx_seen_ = tx_bytes;
    const auto now = std::chrono::steady_clock::now();
    const bool open = inside || sending;
    const bool just_opened = open && !stall_work_open_;
    stall_work_open_ = open;
    if (moved || !open || just_opened) {
        stall_clock_ = now;  // nothing stalled before this look
        return;
    }
    if (now - stall_clock_ < options_.peer_stall_timeout) return;
    // A reset: the peer that stopped gets no more of our bytes, and nothing waits on its window.
    End(Ending{Ending::How::kReset, STATUS_IO_TIMEOUT, ProviderErrorOf(wire::term::kLlpConnectionLost), true});
}

void TcpConnection::Disconnect() {
    std::vector<Finished> finished;
    {
        std::lock_guard lock(send_mutex_);
        if (ended()) return;
        if (fin_ == Fin::kNone) fin_ = Fin::kAfterQueue;
        PumpLocked(&finished);
    }
    RunFinished(&finished);
}

void TcpConnection::Terminate(uint32_t provider_error) {
    // From the engine (a local protection error on a post): the cause it encoded (engine/transport.h).
    std::shared_ptr<TcpConnection> self = shared_from_this();
    progress_->Post(lane_, [self, provider_error] {
        self->Fail(CauseOfProviderError(provider_error), STATUS_CONNECTION_ABORTED, nullptr, 0);
    });
}

}  // namespace softndk::transport
