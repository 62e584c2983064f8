#include "engine/completion_queue.h"

namespace softndk::engine {

CompletionQueue::CompletionQueue(uint32_t depth, Notifier notifier) : ring_(depth), notifier_(std::move(notifier)) {}

void CompletionQueue::NotifyLocked(NTSTATUS status, std::unique_lock<std::mutex>& lock) {
    arm_ = kNotArmed;  // CQ-07: once per arm
    placed_since_notify_ = kNotArmed;
    lock.unlock();
    notifier_(status);
}

bool CompletionQueue::Push(const NDK_RESULT_EX& result, bool solicited) {
    std::unique_lock lock(mutex_);
    if (overrun_) return false;
    if (count_ == ring_.size()) {
        overrun_ = true;  // CQ-15: the CQ and its QPs are unusable from here
        if (arm_ != kNotArmed) {
            overrun_reported_ = true;
            NotifyLocked(STATUS_BUFFER_OVERFLOW, lock);
        }
        return false;
    }
    ring_[(head_ + count_) % ring_.size()] = result;
    ++count_;
    const uint8_t satisfies = Strongest(solicited, !NT_SUCCESS(result.Status));
    if (placed_since_notify_ == kNotArmed || satisfies < placed_since_notify_) placed_since_notify_ = satisfies;
    if (arm_ != kNotArmed && arm_ >= satisfies) NotifyLocked(STATUS_SUCCESS, lock);
    return true;
}

uint32_t CompletionQueue::PollEx(NDK_RESULT_EX* results, uint32_t count) {
    std::lock_guard lock(mutex_);
    uint32_t taken = 0;
    while (taken < count && count_ > 0) {
        results[taken++] = ring_[head_];
        head_ = (head_ + 1) % ring_.size();
        --count_;
    }
    return taken;
}

uint32_t CompletionQueue::Poll(NDK_RESULT* results, uint32_t count) {
    std::lock_guard lock(mutex_);
    uint32_t taken = 0;
    while (taken < count && count_ > 0) {
        const NDK_RESULT_EX& entry = ring_[head_];
        results[taken++] = NDK_RESULT{entry.Status, entry.BytesTransferred, entry.QPContext, entry.RequestContext};
        head_ = (head_ + 1) % ring_.size();
        --count_;
    }
    return taken;
}

void CompletionQueue::Arm(ULONG type) {
    std::unique_lock lock(mutex_);
    uint8_t requested = type == NDK_CQ_NOTIFY_ANY         ? kAny
                        : type == NDK_CQ_NOTIFY_SOLICITED ? kSolicited
                        : type == NDK_CQ_NOTIFY_ERRORS    ? kErrors
                                                          : kNotArmed;
    if (requested == kNotArmed) return;  // an unknown type arms nothing
    if (requested > arm_) arm_ = requested;
    if (overrun_ && !overrun_reported_) {
        overrun_reported_ = true;
        NotifyLocked(STATUS_BUFFER_OVERFLOW, lock);
        return;
    }
    // CQ-08: a matching completion placed since the last notification and still queued satisfies the arm at once.
    if (count_ > 0 && placed_since_notify_ != kNotArmed && arm_ >= placed_since_notify_)
        NotifyLocked(STATUS_SUCCESS, lock);
}

NTSTATUS CompletionQueue::Resize(uint32_t depth) {
    std::lock_guard lock(mutex_);
    if (depth == 0 || depth < count_) return STATUS_INVALID_PARAMETER;
    std::vector<NDK_RESULT_EX> resized(depth);
    for (uint32_t i = 0; i < count_; ++i) resized[i] = ring_[(head_ + i) % ring_.size()];
    ring_ = std::move(resized);
    head_ = 0;
    return STATUS_SUCCESS;
}

uint32_t CompletionQueue::queued() const {
    std::lock_guard lock(mutex_);
    return count_;
}

uint32_t CompletionQueue::depth() const {
    std::lock_guard lock(mutex_);
    return static_cast<uint32_t>(ring_.size());
}

bool CompletionQueue::in_error() const {
    std::lock_guard lock(mutex_);
    return overrun_;
}

}  // namespace softndk::engine
