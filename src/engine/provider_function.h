// Names of the provider functions that fault injection can target (SOFTNDK_FAULT_RULE.FunctionName).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>

namespace softndk::engine {

// clang-format off
#define SOFTNDK_PROVIDER_FUNCTIONS(X)                                                                    \
    X(NdkCreatePd, true) X(NdkCreateCq, true) X(NdkCreateConnector, true) X(NdkCreateListener, true)     \
    X(NdkCreateSharedEndpoint, true) X(NdkBuildLam, true) X(NdkCreateMr, true) X(NdkCreateMw, true)      \
    X(NdkCreateSrq, true) X(NdkCreateQp, true) X(NdkCreateQpWithSrq, true) X(NdkRegisterMr, true)        \
    X(NdkDeregisterMr, true) X(NdkInitializeFastRegisterMr, true) X(NdkResizeCq, true)                   \
    X(NdkModifySrq, true) X(NdkConnect, true) X(NdkConnectWithSharedEndpoint, true)                      \
    X(NdkCompleteConnect, true) X(NdkCompleteConnectEx, true) X(NdkAccept, true) X(NdkAcceptEx, true)    \
    X(NdkDisconnect, true) X(NdkListen, true) X(NdkQueryAdapterInfo, false)
// clang-format on

enum class ProviderFunction : uint8_t {
#define SOFTNDK_ENUM(name, async) name,
    SOFTNDK_PROVIDER_FUNCTIONS(SOFTNDK_ENUM)
#undef SOFTNDK_ENUM
        kCount
};

struct ProviderFunctionInfo {
    const char* name;
    bool may_pend;  // takes a completion callback, so it can fail asynchronously
};

inline constexpr ProviderFunctionInfo kProviderFunctions[] = {
#define SOFTNDK_INFO(name, async) {#name, async},
    SOFTNDK_PROVIDER_FUNCTIONS(SOFTNDK_INFO)
#undef SOFTNDK_INFO
};

inline std::optional<ProviderFunction> ProviderFunctionByName(const char* name) {
    if (name == nullptr) return std::nullopt;
    for (size_t i = 0; i < static_cast<size_t>(ProviderFunction::kCount); ++i)
        if (std::strcmp(kProviderFunctions[i].name, name) == 0) return static_cast<ProviderFunction>(i);
    return std::nullopt;
}

}  // namespace softndk::engine
