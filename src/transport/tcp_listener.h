// A listening TCP socket for NdkListen (issue 7 §4): accepts connections on the progress engine, reads each
// one's MPA Request and hands the valid ones over. A connection whose Request is malformed never reaches the
// consumer (TcpConnection refuses it, siw-facts §3.3).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include <softndk/ndkpi.h>

#include "engine/progress_engine.h"
#include "transport/tcp_connection.h"

namespace softndk::transport {

class TcpListener : public std::enable_shared_from_this<TcpListener> {
public:
    // On the connection's lane, once its MPA Request is in. The callee owns the connection from then on.
    using OnRequest = std::function<void(std::shared_ptr<TcpConnection>)>;

    // Binds and listens on `*address` (port 0: the kernel picks; written back). STATUS_SHARING_VIOLATION for an
    // address in use, STATUS_INVALID_ADDRESS for one the host does not have.
    static NTSTATUS Listen(engine::ProgressEngine* progress, sockaddr_storage* address, const TcpOptions& options,
                           OnRequest on_request, std::shared_ptr<TcpListener>* out);
    ~TcpListener();
    // Stops accepting. A Request that arrives later is refused (its connection closed).
    void Close();

private:
    TcpListener(engine::ProgressEngine* progress, int fd, const TcpOptions& options, OnRequest on_request);
    void OnReady();

    engine::ProgressEngine* const progress_;
    const uint64_t lane_;
    int fd_;
    engine::ProgressEngine::Watched* watched_ = nullptr;
    TcpOptions options_;
    std::mutex mutex_;  // fd_, watched_, on_request_ and closed_: Close() never overlaps an accept or a delivery
    OnRequest on_request_;
    bool closed_ = false;
};

}  // namespace softndk::transport
