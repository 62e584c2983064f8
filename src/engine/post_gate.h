// The gate between a QP's posts and its teardown (QP-07, QP-08). Posts and the close meet on one atomic word
// {posts inside << 1 | closed}, so there is no store→load race to fence: each side does one read-modify-write
// and the word's modification order decides who saw whom. Closing never waits (CB-12): it reports "idle now",
// or its action runs on the thread of the last post to leave.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace softndk::engine {

class PostGate {
public:
    using IdleAction = std::function<void()>;

    // False when the gate is closed; then the caller must not touch what the gate protects (and must not Leave).
    // A refused Enter leaves the word alone: if it added and took back a post, its take-back could see
    // {one post, closed} while the real last post, between its own fetch_sub and RunIdle, is about to run the
    // idle actions too; two RunIdle would race, and one would touch the gate after the other's action freed it
    // (ASan, QP_07_08_CloseUnderHandedOverTraffic, about 1 run in 100).
    bool Enter() {
        uint32_t word = word_.load(std::memory_order_relaxed);
        do {
            if ((word & kClosed) != 0) return false;
        } while (
            !word_.compare_exchange_weak(word, word + kPost, std::memory_order_acq_rel, std::memory_order_relaxed));
        return true;
    }
    void Leave() {
        const uint32_t before = word_.fetch_sub(kPost, std::memory_order_acq_rel);
        if (before == (kPost | kClosed)) RunIdle();  // the last post out of a closed gate
    }
    // Closes the gate (repeatable). True: no post is inside now, and `on_idle` is not run. False: `on_idle` runs
    // exactly once, on the thread of the last post to leave.
    bool Close(IdleAction on_idle) {
        std::unique_lock lock(mutex_);
        if (idle_) return true;
        const uint32_t before = word_.fetch_or(kClosed, std::memory_order_acq_rel);
        if (before == 0) {  // the first close, nobody inside: idle from here on
            idle_ = true;
            return true;
        }
        // Posts are inside, or the last one has left and is on its way to RunIdle: it will run the action.
        if (on_idle) actions_.push_back(std::move(on_idle));
        return false;
    }
    bool idle() const {
        std::lock_guard lock(mutex_);
        return idle_;
    }

private:
    static constexpr uint32_t kClosed = 1;
    static constexpr uint32_t kPost = 2;

    void RunIdle() {
        std::vector<IdleAction> actions;
        {
            std::lock_guard lock(mutex_);
            if (idle_) return;  // defensive: only the last post out of a closed gate gets here
            idle_ = true;
            actions.swap(actions_);
        }
        for (IdleAction& action : actions) action();
    }

    std::atomic<uint32_t> word_{0};
    mutable std::mutex mutex_;  // the idle flag and the actions; never on the post path
    bool idle_ = false;
    std::vector<IdleAction> actions_;
};

}  // namespace softndk::engine
