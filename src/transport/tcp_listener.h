// A listening TCP socket for NdkListen (issue 7 §4): accepts connections on the progress engine, reads each
// one's MPA Request and hands the valid ones over. A connection whose Request is malformed never reaches the
// consumer (MpaLink refuses it, siw-on-the-wire §3.3).
// Issue 18 §2: a peer costs only its own connection. A socket whose Request is not complete in time is reset;
// at most max_half_open sockets wait for their Request (the oldest is reset to take a new one); an accept that
// fails for want of descriptors or memory pauses the listener instead of spinning on it.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>

#include <softndk/ndkpi.h>

#include "engine/progress_engine.h"
#include "transport/mpa_link.h"

namespace softndk::transport {

class TcpListener : public std::enable_shared_from_this<TcpListener> {
public:
    // On the connection's lane, once its MPA Request is in. The callee owns the connection from then on.
    using OnRequest = std::function<void(std::shared_ptr<MpaLink>)>;

    // Binds and listens on `*address` (port 0: the kernel picks; written back). STATUS_SHARING_VIOLATION for an
    // address in use, STATUS_INVALID_ADDRESS for one the host does not have.
    static NTSTATUS Listen(engine::ProgressEngine* progress, sockaddr_storage* address, const TcpOptions& options,
                           OnRequest on_request, std::shared_ptr<TcpListener>* out);
    ~TcpListener();
    // Stops accepting and resets the sockets whose MPA Request is not in yet. A Request that arrives later is
    // refused (its connection closed).
    void Close();

    // For tests and tools: sockets accepted whose MPA Request is not in yet, and accepts paused so far.
    size_t half_open() const;
    uint64_t accept_pauses() const { return accept_pauses_.load(); }

private:
    TcpListener(engine::ProgressEngine* progress, int fd, const TcpOptions& options, OnRequest on_request);
    void OnReady();
    void PauseAcceptingLocked(int error);
    void ResumeAccepting();
    void ForgetLocked(const MpaLink* connection);
    void MakeRoomLocked();  // resets the oldest half-open sockets until one more fits

    engine::ProgressEngine* const progress_;
    const uint64_t lane_;
    int fd_;
    engine::ProgressEngine::Watched* watched_ = nullptr;
    TcpOptions options_;
    mutable std::mutex
        mutex_;  // fd_, watched_, on_request_ and closed_: Close() never overlaps an accept or a delivery
    OnRequest on_request_;
    bool closed_ = false;
    bool paused_ = false;  // accept failed for want of resources: retried after options_.accept_retry
    std::atomic<uint64_t> accept_pauses_{0};
    // Accepted, MPA Request not in yet, oldest first (under mutex_). The listener owns these links until their
    // Request is in (then the consumer does) or they end.
    struct HalfOpen {
        const MpaLink* key;
        std::shared_ptr<MpaLink> connection;
    };
    std::list<HalfOpen> half_open_;
};

}  // namespace softndk::transport
