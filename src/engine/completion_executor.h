// One per adapter (docs/architecture.md, "Objects and completions"): decides whether a call completes inline or pends,
// and runs pended work and completion callbacks on a provider thread, in submission order.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <functional>
#include <mutex>
#include <thread>

#include <softndk/softndk.h>

#include "common/random.h"

namespace softndk::engine {

class CompletionExecutor {
public:
    CompletionExecutor(SOFTNDK_COMPLETION_MODE mode, uint64_t seed);
    ~CompletionExecutor();  // runs what is queued, then stops
    CompletionExecutor(const CompletionExecutor&) = delete;
    CompletionExecutor& operator=(const CompletionExecutor&) = delete;

    // True if this call should return STATUS_PENDING (pend mode, or the random draw in random mode).
    bool ShouldPend();
    void Post(std::function<void()> job);
    // Runs `job` on the provider thread once `delay` has passed (timeouts, e.g. CM-08). Timers still waiting
    // when the executor stops are dropped unrun: a timer job must hold nothing that needs running.
    void PostAfter(std::chrono::milliseconds delay, std::function<void()> job);
    // Blocks until the queue is empty and no job is running. Not from a job.
    void Drain();
    bool OnExecutorThread() const { return std::this_thread::get_id() == thread_.get_id(); }

private:
    void Run();

    const SOFTNDK_COMPLETION_MODE mode_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable idle_;
    std::deque<std::function<void()>> queue_;
    std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> timers_;
    bool running_job_ = false;
    bool stopping_ = false;
    SplitMix64 rng_;
    std::thread thread_;
};

}  // namespace softndk::engine
