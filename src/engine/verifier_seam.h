// The Verifier's one seam below the api layer (issue 9 §3, issue 34 §2): the callback scope (CB-09) around the
// jobs the engine runs. The api layer, which owns the hooks table (api/verifier_hooks.h), installs `seam` while a
// Verifier is active; otherwise a scope costs one predictable branch. The engine includes no api header.
#pragma once

#include <atomic>

namespace softndk::engine {

struct CallbackSeam {
    // Raises to DISPATCH_LEVEL around a consumer callback; returns what `leave` is given (the table it used).
    const void* (*enter)(const char* function, const void* request_context);
    void (*leave)(const void* entered);
};

inline std::atomic<const CallbackSeam*> g_callback_seam{nullptr};

// A consumer callback runs inside this scope (CB-09: at DISPATCH_LEVEL). A completion names its request, so a
// Verifier report raised inside it can say which (issue 19 §3).
class CallbackScope {
public:
    explicit CallbackScope(const char* function = nullptr, const void* request_context = nullptr)
        : seam_(g_callback_seam.load(std::memory_order_relaxed)) {
        if (__builtin_expect(seam_ != nullptr, 0)) entered_ = seam_->enter(function, request_context);
    }
    ~CallbackScope() {
        if (__builtin_expect(seam_ != nullptr, 0)) seam_->leave(entered_);
    }
    CallbackScope(const CallbackScope&) = delete;
    CallbackScope& operator=(const CallbackScope&) = delete;

private:
    const CallbackSeam* seam_;
    const void* entered_ = nullptr;
};

}  // namespace softndk::engine
