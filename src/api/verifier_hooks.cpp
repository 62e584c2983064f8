#include "api/verifier_hooks.h"

namespace softndk::api {
std::atomic<const SoftNdkVerifierHooks*> g_verifier_hooks{nullptr};

namespace {

// The engine's callback scope (engine/verifier_seam.h): leave uses the table that enter used.
const void* EnterCallback(const char* function, const void* request_context) {
    const SoftNdkVerifierHooks* hooks = VerifierHooks();
    if (hooks != nullptr) hooks->enter_callback(function, request_context);
    return hooks;
}
void LeaveCallback(const void* entered) {
    if (entered != nullptr) static_cast<const SoftNdkVerifierHooks*>(entered)->leave_callback();
}
constexpr engine::CallbackSeam kCallbackSeam{EnterCallback, LeaveCallback};

}  // namespace
}  // namespace softndk::api

extern "C" VOID SoftNdkSetVerifierHooks(const SoftNdkVerifierHooks* hooks) {
    softndk::api::g_verifier_hooks.store(hooks, std::memory_order_release);
    softndk::engine::g_callback_seam.store(hooks != nullptr ? &softndk::api::kCallbackSeam : nullptr,
                                           std::memory_order_release);
}
