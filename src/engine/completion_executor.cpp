#include "engine/completion_executor.h"

#include "engine/verifier_seam.h"

namespace softndk::engine {

CompletionExecutor::CompletionExecutor(SOFTNDK_COMPLETION_MODE mode, uint64_t seed)
    : mode_(mode), rng_(SeedOrEntropy(seed)) {
    // Inline mode never pends, so it needs no thread; fault injection may still post, so start one lazily.
    thread_ = std::thread([this] { Run(); });
}

CompletionExecutor::~CompletionExecutor() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

bool CompletionExecutor::ShouldPend() {
    switch (mode_) {
        case SOFTNDK_COMPLETION_INLINE:
            return false;
        case SOFTNDK_COMPLETION_PEND:
            return true;
        case SOFTNDK_COMPLETION_RANDOM: {
            std::lock_guard lock(mutex_);
            return (rng_.Next() & 1) != 0;
        }
    }
    return false;
}

void CompletionExecutor::Post(std::function<void()> job) {
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(job));
    }
    wake_.notify_one();
}

void CompletionExecutor::PostAfter(std::chrono::milliseconds delay, std::function<void()> job) {
    {
        std::lock_guard lock(mutex_);
        timers_.emplace(std::chrono::steady_clock::now() + delay, std::move(job));
    }
    wake_.notify_one();
}

void CompletionExecutor::Drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !running_job_; });
}

void CompletionExecutor::Run() {
    std::unique_lock lock(mutex_);
    while (true) {
        // Due timers join the queue in deadline order.
        const auto now = std::chrono::steady_clock::now();
        while (!timers_.empty() && timers_.begin()->first <= now) {
            queue_.push_back(std::move(timers_.begin()->second));
            timers_.erase(timers_.begin());
        }
        if (queue_.empty()) {
            if (stopping_) return;
            if (timers_.empty())
                wake_.wait(lock);
            else
                wake_.wait_until(lock, timers_.begin()->first);
            continue;
        }
        std::function<void()> job = std::move(queue_.front());
        queue_.pop_front();
        running_job_ = true;
        lock.unlock();
        {
            CallbackScope scope;  // provider thread: callbacks run at DISPATCH_LEVEL (CB-09)
            job();
        }
        job = nullptr;
        lock.lock();
        running_job_ = false;
        if (queue_.empty()) idle_.notify_all();
    }
}

}  // namespace softndk::engine
