// A receive queue: the QP's own, or an SRQ shared by several QPs (SRQ-01 … SRQ-10). Posted by the consumer
// (serialised per queue, QP-05) and consumed by whichever thread delivers a send, so it takes a lock.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include <softndk/ndkpi.h>

namespace softndk::engine {

// A receive taken off the queue. The delivery owns its copy of the SGEs: once Pop returns, the consumer may
// post into the slot again (QP-05 serialises only its own posts) and NdkModifySrq may reallocate the ring.
struct ReceiveRequest {
    PVOID context = nullptr;
    uint32_t sge_count = 0;
    std::vector<NDK_SGE> sges;  // capacity kept across deliveries: no allocation once warm
};

class ReceiveQueue {
public:
    // Called (on the provider thread, by the owner) when the queued count falls below the threshold.
    using ThresholdNotifier = std::function<void()>;

    ReceiveQueue(uint32_t depth, uint32_t max_sge, uint64_t max_transfer_length);

    // STATUS_INSUFFICIENT_RESOURCES when full, STATUS_INVALID_PARAMETER for too many SGEs or more bytes than
    // MaxTransferLength (QP-18).
    NTSTATUS Post(PVOID context, const NDK_SGE* sgl, uint32_t count);
    // Takes the oldest request, copying its SGEs into `request` under the lock; false if none.
    bool Pop(ReceiveRequest* request);
    // All queued requests, oldest first, removing them (flush).
    std::vector<PVOID> Drain();
    // SRQ-05/06: depth 0 keeps the depth; threshold 0 keeps threshold and arming.
    NTSTATUS Modify(uint32_t depth, uint32_t threshold);
    void SetThresholdNotifier(uint32_t threshold, ThresholdNotifier notifier);
    uint32_t size() const;

private:
    void CheckThresholdLocked(std::unique_lock<std::mutex>& lock);

    mutable std::mutex mutex_;
    uint32_t depth_;
    const uint32_t max_sge_;  // the limit the queue was created with (may be 0: SGE-less receives only)
    const uint32_t stride_;   // storage per slot, at least 1
    const uint64_t max_transfer_length_;
    std::vector<PVOID> contexts_;
    std::vector<uint32_t> counts_;
    std::vector<NDK_SGE> sges_;
    uint32_t head_ = 0;
    uint32_t count_ = 0;
    uint32_t threshold_ = 0;
    bool armed_ = false;
    ThresholdNotifier notifier_;
};

}  // namespace softndk::engine
