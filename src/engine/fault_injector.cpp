#include "engine/fault_injector.h"

#include "common/last_error.h"

namespace softndk::engine {

NTSTATUS FaultInjector::Configure(const SOFTNDK_FAULT_RULE* rules, ULONG count) {
    if (count > SOFTNDK_MAX_FAULT_RULES) return STATUS_INVALID_PARAMETER;
    std::vector<Rule> parsed;
    for (ULONG i = 0; i < count; ++i) {
        const SOFTNDK_FAULT_RULE& rule = rules[i];
        auto function = ProviderFunctionByName(rule.FunctionName);
        if (!function) {
            SetLastErrorText("fault rule %u: unknown function '%s'", i, rule.FunctionName ? rule.FunctionName : "");
            return STATUS_INVALID_PARAMETER;
        }
        if (rule.Asynchronous && !kProviderFunctions[static_cast<size_t>(*function)].may_pend) {
            SetLastErrorText("fault rule %u: %s cannot complete asynchronously", i, rule.FunctionName);
            return STATUS_INVALID_PARAMETER;
        }
        if (NT_SUCCESS(rule.Status) || (rule.NthCall == 0 && !(rule.Probability > 0.0 && rule.Probability <= 1.0))) {
            SetLastErrorText("fault rule %u: needs an error status and NthCall > 0 or 0 < Probability <= 1", i);
            return STATUS_INVALID_PARAMETER;
        }
        parsed.push_back(Rule{*function, rule.NthCall, rule.Probability, rule.Asynchronous != FALSE, rule.Status,
                              SplitMix64(rule.Seed)});
    }
    rules_ = std::move(parsed);
    return STATUS_SUCCESS;
}

FaultDecision FaultInjector::Check(ProviderFunction function) {
    if (rules_.empty()) return {};
    const uint64_t call = calls_[static_cast<size_t>(function)].fetch_add(1, std::memory_order_relaxed) + 1;
    for (Rule& rule : rules_) {
        if (rule.function != function) continue;
        bool fire;
        if (rule.nth_call != 0) {
            fire = call == rule.nth_call;
        } else {
            std::lock_guard lock(rng_mutex_);
            fire = rule.rng.Unit() < rule.probability;
        }
        if (fire) {
            return FaultDecision{rule.asynchronous ? FaultDecision::Kind::kFailAsync : FaultDecision::Kind::kFailInline,
                                 rule.status};
        }
    }
    return {};
}

}  // namespace softndk::engine
