// A CQ (CQ-01 … CQ-23): a ring of NDK_RESULT_EX, an arm, and notifications called once per arm on the
// adapter's provider thread (so they are serialised, CQ-09) while the CQ is kept alive (CQ-16).
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include <softndk/ndkpi.h>

namespace softndk::engine {

class CompletionQueue {
public:
    // Runs a notification callback on the provider thread; the owner keeps the CQ alive until it returns.
    using Notifier = std::function<void(NTSTATUS cq_status)>;

    CompletionQueue(uint32_t depth, Notifier notifier);

    // Queues one completion. `solicited` marks a receive of a send with SEND_AND_SOLICIT_EVENT. Returns false on
    // overrun: the CQ is then in error and reports nothing more (CQ-15).
    bool Push(const NDK_RESULT_EX& result, bool solicited);
    uint32_t Poll(NDK_RESULT* results, uint32_t count);
    uint32_t PollEx(NDK_RESULT_EX* results, uint32_t count);
    // CQ-06 … CQ-10.
    void Arm(ULONG type);
    // CQ-04: STATUS_INVALID_PARAMETER if the new depth cannot hold what is queued.
    NTSTATUS Resize(uint32_t depth);
    uint32_t depth() const;
    uint32_t queued() const;  // completions waiting to be polled
    bool in_error() const;

private:
    enum Arm : uint8_t { kNotArmed = 0, kErrors = 1, kSolicited = 2, kAny = 3 };  // CQ-10: merge = max
    // The strongest arm a completion satisfies: an error satisfies every arm (CQ-06, CQ-11), a solicited
    // receive SOLICITED and ANY, any other completion ANY only.
    static uint8_t Strongest(bool solicited, bool error) { return error ? kErrors : solicited ? kSolicited : kAny; }
    void NotifyLocked(NTSTATUS status, std::unique_lock<std::mutex>& lock);

    mutable std::mutex mutex_;
    std::vector<NDK_RESULT_EX> ring_;
    uint32_t head_ = 0;
    uint32_t count_ = 0;
    uint8_t arm_ = kNotArmed;
    // The weakest arm that the completions placed since the last notification satisfy (kNotArmed: none placed).
    // An arm at or above it is satisfied at once (CQ-08).
    uint8_t placed_since_notify_ = kNotArmed;
    bool overrun_ = false;
    bool overrun_reported_ = false;
    Notifier notifier_;
};

}  // namespace softndk::engine
