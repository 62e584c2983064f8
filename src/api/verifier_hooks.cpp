#include "api/verifier_hooks.h"

namespace softndk::api {
std::atomic<const SoftNdkVerifierHooks*> g_verifier_hooks{nullptr};
}  // namespace softndk::api

extern "C" VOID SoftNdkSetVerifierHooks(const SoftNdkVerifierHooks* hooks) {
    softndk::api::g_verifier_hooks.store(hooks, std::memory_order_release);
}
