// The adapter's progress engine (issue 7 §1): a small number of threads (default 1), each built on epoll. A
// thread runs the jobs of its lanes in order, busy-polls for a short window when it runs dry (a cross-vCPU
// wake-up costs ~20 µs here), then blocks in epoll_wait, so an idle adapter uses no CPU. Wire transports will
// add their sockets to the same epoll sets; the deferred in-process link posts its deliveries here.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace softndk::engine {

class ProgressEngine {
public:
    struct Options {
        uint32_t threads = 1;
        uint32_t busy_poll_us = 50;
    };
    // STATUS-free: a thread or an epoll set that cannot be made leaves `ok()` false.
    explicit ProgressEngine(const Options& options);
    ~ProgressEngine();  // runs what is queued, then stops
    ProgressEngine(const ProgressEngine&) = delete;
    ProgressEngine& operator=(const ProgressEngine&) = delete;

    bool ok() const { return ok_; }
    // Runs `job` on the thread of `lane` (lane % threads); the jobs of one lane run in posting order.
    void Post(uint64_t lane, std::function<void()> job);

    // Sockets (issue 7 §3). `handler(events)` runs on the lane's thread whenever epoll reports `fd` ready
    // (level-triggered). Watch returns the handle Modify and Unwatch take (null if epoll refuses the fd); they may
    // be called from any thread, but never after Unwatch. After Unwatch returns on the lane's own thread the
    // handler is never called again.
    struct Watched;
    using FdHandler = std::function<void(uint32_t events)>;
    Watched* Watch(uint64_t lane, int fd, uint32_t events, FdHandler handler);
    void Modify(Watched* watched, uint32_t events);
    void Unwatch(Watched* watched);
    uint32_t threads() const { return static_cast<uint32_t>(workers_.size()); }

private:
    struct Worker {
        std::mutex mutex;
        std::list<std::unique_ptr<Watched>> watched;  // under mutex; entries are freed only on the worker thread,
        std::list<std::unique_ptr<Watched>> retired;  // after the epoll batch that may still name them
        std::atomic<uint32_t> watch_count{0};
        std::deque<std::function<void()>> queue;
        std::atomic<uint32_t> queued{0};
        std::atomic<bool> sleeping{false};
        bool stopping = false;
        int epoll_fd = -1;
        int wake_fd = -1;  // an eventfd in the epoll set
        std::thread thread;
    };
    void Run(Worker& worker);
    bool RunQueued(Worker& worker);  // false when stopping and nothing is left
    // Waits up to `timeout_ms` for sockets and the wake-up fd, runs the ready handlers; true if one ran.
    bool PollOnce(Worker& worker, int timeout_ms);

    const uint32_t busy_poll_us_;
    std::vector<std::unique_ptr<Worker>> workers_;

public:
    struct Watched {
        int fd;
        FdHandler handler;
        Worker* worker;
        std::list<std::unique_ptr<Watched>>::iterator position;
        bool live = true;
    };

private:
    bool ok_ = true;
};

}  // namespace softndk::engine
