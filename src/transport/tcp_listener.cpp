#include "transport/tcp_listener.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace softndk::transport {
namespace {
std::atomic<uint64_t> next_listener_lane{0x100000000ull};
}

TcpListener::TcpListener(engine::ProgressEngine* progress, int fd, const TcpOptions& options, OnRequest on_request)
    : progress_(progress),
      lane_(next_listener_lane.fetch_add(1)),
      fd_(fd),
      options_(options),
      on_request_(std::move(on_request)) {}

TcpListener::~TcpListener() {
    if (fd_ >= 0) ::close(fd_);
}

NTSTATUS TcpListener::Listen(engine::ProgressEngine* progress, sockaddr_storage* address, const TcpOptions& options,
                             OnRequest on_request, std::shared_ptr<TcpListener>* out) {
    const int fd = ::socket(address->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return StatusFromErrno(errno);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (address->ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    const socklen_t length = address->ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(address), length) != 0 || ::listen(fd, 1024) != 0) {
        const int error = errno;
        ::close(fd);
        return StatusFromErrno(error);
    }
    socklen_t bound = sizeof(*address);
    getsockname(fd, reinterpret_cast<sockaddr*>(address), &bound);
    std::shared_ptr<TcpListener> listener(new TcpListener(progress, fd, options, std::move(on_request)));
    std::weak_ptr<TcpListener> weak = listener;
    std::lock_guard lock(listener->mutex_);
    listener->watched_ = progress->Watch(listener->lane_, fd, EPOLLIN, [weak](uint32_t) {
        if (std::shared_ptr<TcpListener> self = weak.lock()) self->OnReady();
    });
    if (listener->watched_ == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
    *out = listener;
    return STATUS_SUCCESS;
}

void TcpListener::OnReady() {
    std::weak_ptr<TcpListener> weak_listener = weak_from_this();
    std::lock_guard lock(mutex_);  // Close() cannot close fd_ under accept4
    while (!closed_ && !paused_) {
        const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            // Out of descriptors or memory: the connection stays in the backlog and the listener stays readable,
            // so accepting again at once would spin a core (issue 18 §2). Pause, and try again later.
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) PauseAcceptingLocked(errno);
            return;  // EAGAIN, or a connection that went away before we took it
        }
        MakeRoomLocked();
        // Held by its stream (whose epoll registration holds it) until the Request is in; then it is the consumer's,
        // or closed.
        std::shared_ptr<MpaLink> connection =
            MpaLink::Adopt(progress_, fd, options_, [weak_listener](std::weak_ptr<MpaLink> weak) {
                return [weak_listener, weak](MpaLink::Event event, NTSTATUS) {
                    if (event != MpaLink::Event::kMpaReceived && event != MpaLink::Event::kFailed) return;
                    std::shared_ptr<MpaLink> connection = weak.lock();
                    std::shared_ptr<TcpListener> listener = weak_listener.lock();
                    if (listener) {
                        // Delivered under the lock, so Close() returns only once no delivery runs.
                        std::lock_guard lock(listener->mutex_);
                        if (connection) listener->ForgetLocked(connection.get());
                        if (event != MpaLink::Event::kMpaReceived || !connection) return;
                        if (listener->on_request_) return listener->on_request_(connection);
                    }
                    if (event == MpaLink::Event::kMpaReceived && connection)
                        connection->Reject({});  // CM-23: the listener is gone
                };
            });
        half_open_.push_back({connection.get(), connection});
        if (options_.mpa_request_timeout.count() > 0 && options_.after) {
            std::weak_ptr<MpaLink> weak = connection;
            options_.after(options_.mpa_request_timeout, [weak] {
                if (std::shared_ptr<MpaLink> late = weak.lock()) late->ExpireIfAwaitingRequest();
            });
        }
    }
}

void TcpListener::MakeRoomLocked() {
    if (options_.max_half_open == 0) return;
    while (half_open_.size() >= options_.max_half_open) {
        // The oldest has had the longest to send its Request: a prompt client is seldom the one reset.
        std::shared_ptr<MpaLink> oldest = std::move(half_open_.front().connection);
        half_open_.pop_front();
        if (oldest) oldest->Close(nullptr);  // a reset; no event follows
    }
}

void TcpListener::ForgetLocked(const MpaLink* connection) {
    std::erase_if(half_open_, [connection](const HalfOpen& entry) { return entry.key == connection; });
}

size_t TcpListener::half_open() const {
    std::lock_guard lock(mutex_);
    return half_open_.size();
}

void TcpListener::PauseAcceptingLocked(int error) {
    if (!options_.after || watched_ == nullptr) return;  // no timer to resume with: level-triggered retries
    paused_ = true;
    accept_pauses_.fetch_add(1);
    progress_->Modify(watched_, 0);
    static const bool debug = std::getenv("SOFTNDK_WIRE_DEBUG") != nullptr;
    if (debug)
        std::fprintf(stderr, "softndk: listener: accept failed (%s); paused for %lld ms\n", std::strerror(error),
                     static_cast<long long>(options_.accept_retry.count()));
    std::weak_ptr<TcpListener> weak = weak_from_this();
    options_.after(options_.accept_retry, [weak] {
        if (std::shared_ptr<TcpListener> self = weak.lock()) self->ResumeAccepting();
    });
}

void TcpListener::ResumeAccepting() {
    std::lock_guard lock(mutex_);
    if (closed_ || !paused_ || watched_ == nullptr) return;
    paused_ = false;
    progress_->Modify(watched_, EPOLLIN);  // level-triggered: a waiting connection wakes the lane again
}

// The half-open links go with the listener: it is their only owner (their MPA timers hold them weakly), so a link
// let go of here would leave a silent peer's socket watched, with no timer and no event to end it, until the
// adapter closes (issue 34 §1.1). Each is reset, as MakeRoomLocked resets the oldest.
void TcpListener::Close() {
    std::list<HalfOpen> half_open;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        on_request_ = nullptr;
        if (watched_ != nullptr) progress_->Unwatch(watched_);
        watched_ = nullptr;
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        half_open.swap(half_open_);
    }
    for (HalfOpen& entry : half_open)
        if (entry.connection) entry.connection->Close(nullptr);  // a reset; no event follows
}

}  // namespace softndk::transport
