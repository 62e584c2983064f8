// The one seam between the provider and the kernel layer's Verifier (issue 9 §3). Null unless softndk/km is
// active, so each hook costs one predictable branch. The kernel layer (src/km/verifier.cpp) installs them:
//  - consumer callbacks run at DISPATCH_LEVEL (CB-09): CallbackScope around every callback invocation (the
//    engine reaches it through engine/verifier_seam.h, installed with the hooks);
//  - handles of closed objects are refused and reported (LIFE-06), second closes too (LIFE-05);
//  - destroyed objects can be kept in quarantine so a stale handle still reads valid memory;
//  - PASSIVE_LEVEL-only functions report a call at raised IRQL (CB-09, CB-12);
//  - two concurrent posts on one queue are reported and the second is refused (QP-05);
//  - the MDL chain of a pending registration is marked busy (MR-10).
#pragma once

#include <atomic>

#include <softndk/ndkpi.h>

#include "engine/verifier_seam.h"

extern "C" {
typedef struct SoftNdkVerifierHooks {
    // `function` and `request_context` name the request a completion callback completes (NULL otherwise).
    void (*enter_callback)(const char* function, const void* request_context);
    void (*leave_callback)(void);
    BOOLEAN (*check_handle)(const void* handle);  // FALSE: a closed object, refuse the call
    void (*object_created)(const void* handle, NDK_OBJECT_TYPE type);
    BOOLEAN (*close_started)(const void* handle);                              // FALSE: already closing, refuse
    BOOLEAN (*retain_destroyed)(void* memory, void (*release)(void* memory));  // TRUE: quarantined
    void (*passive_entry)(const char* function);
    BOOLEAN (*post_begin)(const void* queue, const char* function);  // FALSE: overlapping post, refuse
    void (*post_end)(const void* queue);
    void (*registration_started)(const void* mdl_chain, const void* request_owner);
    void (*request_finished)(const void* request_owner);
    // A consumer rule broken in a way hardware tolerates (the call goes on): `rule` is its id, e.g. CM-12.
    void (*consumer_rule)(const char* rule, const char* function, const char* detail);
    // A request or create that failed through its completion (issue 19 §3: said like an inline refusal).
    void (*request_failed)(const char* function, NTSTATUS status);
} SoftNdkVerifierHooks;

// Installs (or, with NULL, removes) the hooks. Exported so the separate kernel-layer library can reach it.
SOFTNDK_API VOID SoftNdkSetVerifierHooks(const SoftNdkVerifierHooks* hooks);
}

namespace softndk::api {

extern std::atomic<const SoftNdkVerifierHooks*> g_verifier_hooks;

// Relaxed: the kernel layer installs the hooks before it opens any adapter, and opening one orders everything
// after it. The hooked paths are out of line and marked unlikely, so the data path keeps its inlining.
inline const SoftNdkVerifierHooks* VerifierHooks() {
    return g_verifier_hooks.load(std::memory_order_relaxed);
}
#define SOFTNDK_VERIFIER_ACTIVE(hooks) __builtin_expect((hooks) != nullptr, 0)

// A consumer callback runs inside this scope (CB-09): the engine's, which reaches the hooks through the seam
// installed with them (engine/verifier_seam.h).
using engine::CallbackScope;

// QP-05: one post in flight per queue. ok() is false when the Verifier refused an overlapping post.
class PostScope {
public:
    PostScope(const void* queue, const char* function) : hooks_(VerifierHooks()), queue_(queue) {
        if (SOFTNDK_VERIFIER_ACTIVE(hooks_)) Begin(function);
    }
    ~PostScope() {
        if (SOFTNDK_VERIFIER_ACTIVE(hooks_)) hooks_->post_end(queue_);
    }
    PostScope(const PostScope&) = delete;
    PostScope& operator=(const PostScope&) = delete;
    bool ok() const { return ok_; }

private:
    [[gnu::noinline, gnu::cold]] void Begin(const char* function) {
        if (!hooks_->post_begin(queue_, function)) {
            hooks_ = nullptr;
            ok_ = false;
        }
    }

    const SoftNdkVerifierHooks* hooks_;
    const void* queue_;
    bool ok_ = true;
};

inline bool VerifierCheckHandle(const void* handle) {
    const SoftNdkVerifierHooks* hooks = VerifierHooks();
    return !SOFTNDK_VERIFIER_ACTIVE(hooks) || hooks->check_handle(handle);
}
inline void VerifierObjectCreated(const void* handle, NDK_OBJECT_TYPE type) {
    if (const SoftNdkVerifierHooks* hooks = VerifierHooks()) hooks->object_created(handle, type);
}
inline bool VerifierCloseStarted(const void* handle) {
    const SoftNdkVerifierHooks* hooks = VerifierHooks();
    return hooks == nullptr || hooks->close_started(handle);
}
inline void VerifierPassiveEntry(const char* function) {
    if (const SoftNdkVerifierHooks* hooks = VerifierHooks()) hooks->passive_entry(function);
}
inline void VerifierRegistrationStarted(const void* mdl_chain, const void* owner) {
    if (const SoftNdkVerifierHooks* hooks = VerifierHooks()) hooks->registration_started(mdl_chain, owner);
}
// Issue 19 §3: a consumer-rule violation that the call tolerates, as hardware does.
inline void VerifierConsumerRule(const char* rule, const char* function, const char* detail) {
    if (const SoftNdkVerifierHooks* hooks = VerifierHooks()) hooks->consumer_rule(rule, function, detail);
}
inline void VerifierRequestFailed(const char* function, NTSTATUS status) {
    if (const SoftNdkVerifierHooks* hooks = VerifierHooks()) hooks->request_failed(function, status);
}
inline void VerifierRequestFinished(const void* owner) {
    if (const SoftNdkVerifierHooks* hooks = VerifierHooks()) hooks->request_finished(owner);
}

// Frees a destroyed object, or hands its memory to the Verifier's quarantine after running the destructor, so
// a consumer that reads a stale handle's Dispatch member reads valid memory and the API refuses the handle.
template <class Object>
void FreeObject(Object* object) {
    const SoftNdkVerifierHooks* hooks = VerifierHooks();
    if (hooks == nullptr) {
        delete object;
        return;
    }
    object->~Object();
    if (!hooks->retain_destroyed(object, [](void* memory) { ::operator delete(memory); })) ::operator delete(object);
}

}  // namespace softndk::api
