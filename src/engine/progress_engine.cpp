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
        event.data.fd = worker->wake_fd;
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

void ProgressEngine::Run(Worker& worker) {
    using Clock = std::chrono::steady_clock;
    while (RunQueued(worker)) {
        // Busy-poll briefly: a job posted within the window runs without a wake-up.
        const auto until = Clock::now() + std::chrono::microseconds(busy_poll_us_);
        while (worker.queued.load(std::memory_order_acquire) == 0 && Clock::now() < until) {
        }
        if (worker.queued.load(std::memory_order_acquire) != 0) continue;
        worker.sleeping.store(true, std::memory_order_seq_cst);
        if (worker.queued.load(std::memory_order_seq_cst) == 0) {
            std::lock_guard lock(worker.mutex);
            if (worker.stopping && worker.queue.empty()) break;
        }
        if (worker.queued.load(std::memory_order_seq_cst) == 0) {
            epoll_event events[8];
            const int ready = epoll_wait(worker.epoll_fd, events, 8, -1);
            for (int i = 0; i < ready; ++i) {
                if (events[i].data.fd == worker.wake_fd) {
                    uint64_t count = 0;
                    (void)!read(worker.wake_fd, &count, sizeof(count));
                }
            }
        }
        worker.sleeping.store(false, std::memory_order_relaxed);
    }
}

}  // namespace softndk::engine
