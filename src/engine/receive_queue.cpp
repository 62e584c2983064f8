#include "engine/receive_queue.h"

#include <algorithm>

#include "common/last_error.h"

namespace softndk::engine {

ReceiveQueue::ReceiveQueue(uint32_t depth, uint32_t max_sge, uint64_t max_transfer_length)
    : depth_(depth),
      max_sge_(max_sge),
      stride_(max_sge ? max_sge : 1),
      max_transfer_length_(max_transfer_length),
      contexts_(depth),
      counts_(depth),
      sges_(static_cast<size_t>(depth) * stride_) {}

NTSTATUS ReceiveQueue::Post(PVOID context, const NDK_SGE* sgl, uint32_t count) {
    if (count > max_sge_ || (count > 0 && sgl == nullptr)) {
        SetLastErrorText("receive: %u SGEs; this queue allows %u (QP-01, SRQ-01)", count, max_sge_);
        return STATUS_INVALID_PARAMETER;
    }
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < count; ++i) bytes += sgl[i].Length;
    if (bytes > max_transfer_length_) {
        SetLastErrorText("receive: %llu bytes exceed MaxTransferLength (QP-18)",
                         static_cast<unsigned long long>(bytes));
        return STATUS_INVALID_PARAMETER;
    }
    std::lock_guard lock(mutex_);
    if (count_ == depth_) return STATUS_INSUFFICIENT_RESOURCES;
    const uint32_t slot = (head_ + count_) % depth_;
    contexts_[slot] = context;
    counts_[slot] = count;
    std::copy(sgl, sgl + count, sges_.begin() + static_cast<size_t>(slot) * stride_);
    ++count_;
    return STATUS_SUCCESS;
}

bool ReceiveQueue::Pop(ReceiveRequest* request) {
    std::unique_lock lock(mutex_);
    if (count_ == 0) return false;
    request->context = contexts_[head_];
    request->sge_count = counts_[head_];
    const auto first = sges_.begin() + static_cast<ptrdiff_t>(head_) * stride_;
    request->sges.assign(first, first + request->sge_count);
    head_ = (head_ + 1) % depth_;
    --count_;
    CheckThresholdLocked(lock);
    return true;
}

std::vector<PVOID> ReceiveQueue::Drain() {
    std::lock_guard lock(mutex_);
    std::vector<PVOID> drained;
    drained.reserve(count_);
    for (; count_ > 0; --count_) {
        drained.push_back(contexts_[head_]);
        head_ = (head_ + 1) % depth_;
    }
    return drained;
}

void ReceiveQueue::CheckThresholdLocked(std::unique_lock<std::mutex>& lock) {
    if (!armed_ || count_ >= threshold_ || !notifier_) return;
    armed_ = false;  // SRQ-06: one notification, then disarmed until the next modify
    ThresholdNotifier notifier = notifier_;
    lock.unlock();
    notifier();
    lock.lock();
}

NTSTATUS ReceiveQueue::Modify(uint32_t depth, uint32_t threshold) {
    std::unique_lock lock(mutex_);
    if (depth != 0 && depth != depth_) {
        if (depth < count_) return STATUS_INVALID_PARAMETER;
        std::vector<PVOID> contexts(depth);
        std::vector<uint32_t> counts(depth);
        std::vector<NDK_SGE> sges(static_cast<size_t>(depth) * stride_);
        for (uint32_t i = 0; i < count_; ++i) {
            const uint32_t from = (head_ + i) % depth_;
            contexts[i] = contexts_[from];
            counts[i] = counts_[from];
            std::copy_n(sges_.begin() + static_cast<size_t>(from) * stride_, stride_,
                        sges.begin() + static_cast<size_t>(i) * stride_);
        }
        contexts_ = std::move(contexts);
        counts_ = std::move(counts);
        sges_ = std::move(sges);
        depth_ = depth;
        head_ = 0;
    }
    if (threshold != 0) {
        threshold_ = threshold;
        armed_ = true;
        CheckThresholdLocked(lock);  // SRQ-06: already below the threshold -> notify now
    }
    return STATUS_SUCCESS;
}

void ReceiveQueue::SetThresholdNotifier(uint32_t threshold, ThresholdNotifier notifier) {
    std::unique_lock lock(mutex_);
    notifier_ = std::move(notifier);
    threshold_ = threshold;
    armed_ = threshold != 0;  // AMB-32: creation with a threshold arms like NdkModifySrq
    CheckThresholdLocked(lock);
}

uint32_t ReceiveQueue::size() const {
    std::lock_guard lock(mutex_);
    return count_;
}

}  // namespace softndk::engine
