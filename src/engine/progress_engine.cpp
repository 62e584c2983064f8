#include "engine/progress_engine.h"

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

bool ProgressEngine::RunQueued(Worker& worker) {
    while (true) {
        std::function<void()> job;
        {
            std::lock_guard lock(worker.mutex);
            if (worker.queue.empty()) return !worker.stopping;
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

bool ProgressEngine::PollOnce(Worker& worker, int timeout_ms) {
    epoll_event events[16];
    const int ready = epoll_wait(worker.epoll_fd, events, 16, timeout_ms);
    bool ran = false;
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
    std::list<std::unique_ptr<Watched>> retired;
    {
        std::lock_guard lock(worker.mutex);
        retired.swap(worker.retired);
    }
    return ran;  // `retired` is freed here, after the batch
}

void ProgressEngine::Run(Worker& worker) {
    using Clock = std::chrono::steady_clock;
    while (RunQueued(worker)) {
        // Busy-poll briefly: a job posted, or a socket that turns ready, within the window needs no wake-up.
        auto until = Clock::now() + std::chrono::microseconds(busy_poll_us_);
        while (worker.queued.load(std::memory_order_acquire) == 0 && Clock::now() < until) {
            if (worker.watch_count.load(std::memory_order_acquire) != 0 && PollOnce(worker, 0))
                until = Clock::now() + std::chrono::microseconds(busy_poll_us_);
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
