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

struct epoll_event;

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
    uint32_t busy_poll_us() const { return busy_poll_us_; }
    // From a consumer's thread that found its CQ empty: runs the ready socket handlers of each idle lane right
    // here, as that lane (its run lock held), instead of waiting for the lane's thread. True if one ran. While a
    // consumer polls like this the lane's thread stays off the sockets (see Run).
    bool PollInline();
    void EndInline();  // a consumer stops polling (it arms a CQ): the lanes' threads watch the sockets again
    // True while some socket is watched: a consumer spinning on an empty CQ then yields to the lanes.
    bool watching() const {
        for (const auto& worker : workers_)
            if (worker->watch_count.load(std::memory_order_relaxed) != 0) return true;
        return false;
    }

private:
    struct Worker {
        std::mutex run_mutex;  // held by whoever runs this lane's jobs and handlers: its thread or an inline poller
        std::mutex mutex;
        std::list<std::unique_ptr<Watched>> watched;  // under mutex; entries are freed only on the worker thread,
        std::list<std::unique_ptr<Watched>> retired;  // after the epoll batch that may still name them
        std::atomic<uint32_t> watch_count{0};
        std::deque<std::function<void()>> queue;
        std::atomic<uint32_t> queued{0};
        std::atomic<bool> sleeping{false};
        std::atomic<int64_t> inline_until{0};  // steady-clock ns: a consumer polls this lane inline until then
        bool stopping = false;
        int epoll_fd = -1;
        int wake_fd = -1;  // an eventfd in the epoll set
        std::thread thread;
    };
    void Run(Worker& worker);
    bool RunQueued(Worker& worker);  // false when stopping and nothing is left
    // Waits up to `timeout_ms` for sockets and the wake-up fd, runs the ready handlers; true if one ran.
    bool PollOnce(Worker& worker, int timeout_ms);
    bool HandleReady(Worker& worker, const ::epoll_event* events, int ready);  // under the run lock

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
