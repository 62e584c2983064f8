// Fault injection (docs/architecture.md, "Objects and completions"): make the Nth call, or a seeded fraction of calls,
// of a provider function fail inline or asynchronously with a chosen status.
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include <softndk/softndk.h>

#include "common/random.h"
#include "engine/provider_function.h"

namespace softndk::engine {

struct FaultDecision {
    enum class Kind { kNone, kFailInline, kFailAsync } kind = Kind::kNone;
    NTSTATUS status = STATUS_SUCCESS;
};

class FaultInjector {
public:
    // STATUS_INVALID_PARAMETER (with last-error text) for an unknown name, an asynchronous rule on a function
    // that cannot pend, a success status, or a probability outside [0, 1].
    NTSTATUS Configure(const SOFTNDK_FAULT_RULE* rules, ULONG count);
    FaultDecision Check(ProviderFunction function);
    bool empty() const { return rules_.empty(); }

private:
    struct Rule {
        ProviderFunction function;
        ULONG nth_call;
        double probability;
        bool asynchronous;
        NTSTATUS status;
        SplitMix64 rng;
    };
    std::vector<Rule> rules_;
    std::array<std::atomic<uint64_t>, static_cast<size_t>(ProviderFunction::kCount)> calls_{};
    std::mutex rng_mutex_;
};

}  // namespace softndk::engine
