#include "engine/progress_engine.h"

#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>

namespace softndk::engine {

ProgressEngine::ProgressEngine(const Options& options) : busy_poll_us_(options.busy_poll_us) {
    const uint32_t count = options.threads == 0 ? 1 : options.threads;
    for (uint32_t i = 0; i < count; ++i) {
        auto worker = std::make_unique<Worker>();
        worker->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        worker->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.ptr = nullptr;  // the wake-up eventfd
        if (worker->epoll_fd < 0 || worker->wake_fd < 0 ||
            epoll_ctl(worker->epoll_fd, EPOLL_CTL_ADD, worker->wake_fd, &event) != 0) {
            if (worker->epoll_fd >= 0) close(worker->epoll_fd);
            if (worker->wake_fd >= 0) close(worker->wake_fd);
            ok_ = false;
            break;
        }
        Worker* raw = worker.get();
        worker->thread = std::thread([this, raw] { Run(*raw); });
        workers_.push_back(std::move(worker));
    }
}

ProgressEngine::~ProgressEngine() {
    for (auto& worker : workers_) {
        {
            std::lock_guard lock(worker->mutex);
            worker->stopping = true;
        }
        const uint64_t one = 1;
        (void)!write(worker->wake_fd, &one, sizeof(one));
    }
    for (auto& worker : workers_) {
        worker->thread.join();
        close(worker->epoll_fd);
        close(worker->wake_fd);
    }
}

void ProgressEngine::Post(uint64_t lane, std::function<void()> job) {
    Worker& worker = *workers_[lane % workers_.size()];
    {
        std::lock_guard lock(worker.mutex);
        worker.queue.push_back(std::move(job));
    }
    worker.queued.fetch_add(1, std::memory_order_release);
    // seq_cst pairs with the worker's store of `sleeping` before its last look at `queued` (no lost wake-up).
    if (worker.sleeping.load(std::memory_order_seq_cst)) {
        const uint64_t one = 1;
        (void)!write(worker.wake_fd, &one, sizeof(one));
    }
}

namespace {
thread_local bool t_in_lane = false;  // this thread holds a run lock: a handler never polls inline
// While a consumer polls a lane inline, the lane's thread sleeps on its wake-up fd alone (in the sockets' epoll
// set every arrival would wake it for nothing) and looks again this often; a job posted still wakes it at once.
constexpr int64_t kInlineHoldNs = 1'000'000;
int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

bool ProgressEngine::RunQueued(Worker& worker) {
    std::lock_guard run(worker.run_mutex);
    t_in_lane = true;
    while (true) {
        std::function<void()> job;
        {
            std::lock_guard lock(worker.mutex);
            if (worker.queue.empty()) {
                t_in_lane = false;
                return !worker.stopping;
            }
            job = std::move(worker.queue.front());
            worker.queue.pop_front();
        }
        worker.queued.fetch_sub(1, std::memory_order_acq_rel);
        job();
    }
}

ProgressEngine::Watched* ProgressEngine::Watch(uint64_t lane, int fd, uint32_t events, FdHandler handler) {
    Worker& worker = *workers_[lane % workers_.size()];
    auto watched = std::make_unique<Watched>();
    watched->fd = fd;
    watched->handler = std::move(handler);
    watched->worker = &worker;
    Watched* raw = watched.get();
    epoll_event event{};
    event.events = events;
    event.data.ptr = raw;
    std::lock_guard lock(worker.mutex);
    if (epoll_ctl(worker.epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) return nullptr;
    worker.watched.push_back(std::move(watched));
    raw->position = std::prev(worker.watched.end());
    worker.watch_count.fetch_add(1, std::memory_order_release);
    if (worker.sleeping.load(std::memory_order_seq_cst)) {  // it may be asleep with a timeout of "forever"
        const uint64_t one = 1;
        (void)!write(worker.wake_fd, &one, sizeof(one));
    }
    return raw;
}

void ProgressEngine::Modify(Watched* watched, uint32_t events) {
    epoll_event event{};
    event.events = events;
    event.data.ptr = watched;
    epoll_ctl(watched->worker->epoll_fd, EPOLL_CTL_MOD, watched->fd, &event);
}

void ProgressEngine::Unwatch(Watched* watched) {
    Worker& worker = *watched->worker;
    std::lock_guard lock(worker.mutex);
    epoll_ctl(worker.epoll_fd, EPOLL_CTL_DEL, watched->fd, nullptr);
    watched->live = false;  // an event of this batch may still name it: freed after the batch
    worker.retired.splice(worker.retired.end(), worker.watched, watched->position);
    worker.watch_count.fetch_sub(1, std::memory_order_release);
}

bool ProgressEngine::HandleReady(Worker& worker, const epoll_event* events, int ready) {
    bool ran = false;
    t_in_lane = true;
    for (int i = 0; i < ready; ++i) {
        if (events[i].data.ptr == nullptr) {  // the wake-up eventfd
            uint64_t count = 0;
            (void)!read(worker.wake_fd, &count, sizeof(count));
            continue;
        }
        auto* watched = static_cast<Watched*>(events[i].data.ptr);
        if (!watched->live) continue;
        watched->handler(events[i].events);
        ran = true;
    }
    t_in_lane = false;
    return ran;
}

bool ProgressEngine::PollOnce(Worker& worker, int timeout_ms) {
    epoll_event events[16];
    std::unique_lock run(worker.run_mutex, std::defer_lock);
    if (timeout_ms == 0) run.lock();  // a blocking wait takes the lock once something is ready
    const int ready = epoll_wait(worker.epoll_fd, events, 16, timeout_ms);
    if (!run.owns_lock()) run.lock();
    const bool ran = HandleReady(worker, events, ready);
    // Freed by this thread alone, under the run lock: a batch taken before the lock may name an entry that an
    // inline poller retired meanwhile (it stays allocated, not live, until here).
    std::list<std::unique_ptr<Watched>> retired;
    {
        std::lock_guard lock(worker.mutex);
        retired.swap(worker.retired);
    }
    retired.clear();
    return ran;
}

bool ProgressEngine::PollInline() {
    if (t_in_lane) return false;
    bool ran = false;
    for (auto& owned : workers_) {
        Worker& worker = *owned;
        if (worker.watch_count.load(std::memory_order_relaxed) == 0 ||
            worker.queued.load(std::memory_order_acquire) != 0)
            continue;  // jobs first, on the lane's thread
        std::unique_lock run(worker.run_mutex, std::try_to_lock);
        if (!run.owns_lock()) continue;  // the lane's thread is running it
        worker.inline_until.store(NowNs() + kInlineHoldNs, std::memory_order_relaxed);
        epoll_event events[16];
        const int ready = epoll_wait(worker.epoll_fd, events, 16, 0);
        ran |= HandleReady(worker, events, ready);
    }
    return ran;
}

void ProgressEngine::EndInline() {
    for (auto& worker : workers_) {
        if (worker->inline_until.exchange(0, std::memory_order_relaxed) == 0) continue;
        if (worker->sleeping.load(std::memory_order_seq_cst)) {
            const uint64_t one = 1;
            (void)!write(worker->wake_fd, &one, sizeof(one));
        }
    }
}

void ProgressEngine::Run(Worker& worker) {
    using Clock = std::chrono::steady_clock;
    while (RunQueued(worker)) {
        const int64_t hold = worker.inline_until.load(std::memory_order_relaxed) - NowNs();
        if (hold > 0) {  // a consumer drives the sockets: sleep on the wake-up fd alone
            worker.sleeping.store(true, std::memory_order_seq_cst);
            if (worker.queued.load(std::memory_order_seq_cst) == 0) {
                pollfd wake{worker.wake_fd, POLLIN, 0};
                if (::poll(&wake, 1, static_cast<int>(hold / 1'000'000) + 1) > 0) {
                    uint64_t count = 0;
                    (void)!read(worker.wake_fd, &count, sizeof(count));
                }
            }
            worker.sleeping.store(false, std::memory_order_relaxed);
            continue;
        }
        // Busy-poll briefly: a job posted, or a socket that turns ready, within the window needs no wake-up.
        auto until = Clock::now() + std::chrono::microseconds(busy_poll_us_);
        while (worker.queued.load(std::memory_order_acquire) == 0 && Clock::now() < until) {
            if (worker.watch_count.load(std::memory_order_acquire) != 0 && PollOnce(worker, 0))
                until = Clock::now() + std::chrono::microseconds(busy_poll_us_);
            else
                sched_yield();  // spin politely: the consumer's thread may be waiting for this CPU
        }
        if (worker.queued.load(std::memory_order_acquire) != 0) continue;
        worker.sleeping.store(true, std::memory_order_seq_cst);
        if (worker.queued.load(std::memory_order_seq_cst) == 0) {
            std::lock_guard lock(worker.mutex);
            if (worker.stopping && worker.queue.empty()) break;
        }
        if (worker.queued.load(std::memory_order_seq_cst) == 0) PollOnce(worker, -1);
        worker.sleeping.store(false, std::memory_order_relaxed);
    }
}

}  // namespace softndk::engine
