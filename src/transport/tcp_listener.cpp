#include "transport/tcp_listener.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>

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
    while (!closed_) {
        const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;  // EAGAIN, or a connection that went away before we took it
        // Held by its epoll registration until the Request is in; then it is the consumer's, or closed.
        TcpConnection::Adopt(progress_, fd, options_, [weak_listener](std::weak_ptr<TcpConnection> weak) {
            return [weak_listener, weak](TcpConnection::Event event, NTSTATUS) {
                if (event != TcpConnection::Event::kMpaReceived) return;
                std::shared_ptr<TcpConnection> connection = weak.lock();
                if (!connection) return;
                // Delivered under the lock, so Close() returns only once no delivery runs.
                if (std::shared_ptr<TcpListener> listener = weak_listener.lock()) {
                    std::lock_guard lock(listener->mutex_);
                    if (listener->on_request_) return listener->on_request_(connection);
                }
                connection->Reject({});  // CM-23: the listener is gone
            };
        });
    }
}

void TcpListener::Close() {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    on_request_ = nullptr;
    if (watched_ != nullptr) progress_->Unwatch(watched_);
    watched_ = nullptr;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

}  // namespace softndk::transport
