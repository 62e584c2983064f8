// Reference counting and close for NDK objects (LIFE-05 … LIFE-16, CB-02). The initial reference is the
// consumer's; children, pending requests and in-flight callbacks hold more. When the last one goes, the
// object tears down (possibly asynchronously, e.g. an MR draining its registration), is destroyed, the close
// completion runs if the close pended, and only then is the parent released (LIFE-07, LIFE-14).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <softndk/ndkpi.h>

#include "api/verifier_hooks.h"

namespace softndk::api {

class Lifetime;

// Issue 19 §3: every live object, so that a close that waits can say what it waits for. Registered when the
// Lifetime is made, removed just before the object is destroyed.
void RegisterLive(Lifetime* lifetime);
void UnregisterLive(Lifetime* lifetime);
// One line per object still alive under `root` (an adapter's Lifetime): its type, the call that creates such an
// object, its handle and its state; at most `limit` lines, then how many more.
std::string DescribeLiveUnder(const Lifetime* root, size_t limit);

class Lifetime {
public:
    struct Ops {
        // Returns true when done now; false means it will call Lifetime::TeardownDone() later. May be null.
        bool (*teardown)(void* object);
        void (*destroy)(void* object);
        // LIFE-09: runs when the close is requested, before the consumer's reference goes, to cancel pending
        // requests that would otherwise keep the object open. May be null.
        void (*cancel)(void* object) = nullptr;
    };

    Lifetime(const Ops& ops, void* object, Lifetime* parent) : ops_(ops), object_(object), parent_(parent) {
        if (parent_ != nullptr) parent_->AddRef();
        if (parent_ != nullptr) RegisterLive(this);
    }

    void AddRef() { refs_.fetch_add(1, std::memory_order_relaxed); }
    // For a holder that reaches the object through something other than a reference (a peer's record): takes a
    // reference unless the last one is already gone and the teardown is under way.
    bool TryAddRef() {
        uint32_t refs = refs_.load(std::memory_order_acquire);
        while (refs != 0)
            if (refs_.compare_exchange_weak(refs, refs + 1, std::memory_order_acq_rel)) return true;
        return false;
    }
    void Release() {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish(false);
    }
    // LIFE-05: STATUS_SUCCESS if closed now (no completion will be called), else STATUS_PENDING.
    NTSTATUS Close(NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
        close_completion_ = completion;
        close_context_ = context;
        closing_.store(true, std::memory_order_release);
        if (ops_.cancel != nullptr) ops_.cancel(object_);
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) return Finish(true) ? STATUS_SUCCESS : STATUS_PENDING;
        return STATUS_PENDING;
    }
    void TeardownDone() { Complete(false); }
    bool closing() const { return closing_.load(std::memory_order_acquire); }
    uint32_t references() const { return refs_.load(std::memory_order_acquire); }
    void* object() const { return object_; }  // the C++ object, whose first member is the consumer's handle
    const Lifetime* parent() const { return parent_; }

private:
    bool Finish(bool inside_close) {
        if (ops_.teardown != nullptr && !ops_.teardown(object_)) return false;
        Complete(inside_close);
        return true;
    }
    void Complete(bool inside_close) {
        NDK_FN_CLOSE_COMPLETION completion = close_completion_;
        PVOID context = close_context_;
        Lifetime* parent = parent_;
        if (parent != nullptr) UnregisterLive(this);
        ops_.destroy(object_);  // frees this Lifetime too
        if (!inside_close && completion != nullptr) {
            CallbackScope scope("NdkCloseObject", context);
            completion(context);
        }
        if (parent != nullptr) parent->Release();
    }

    const Ops ops_;
    void* const object_;
    Lifetime* const parent_;
    std::atomic<uint32_t> refs_{1};
    std::atomic<bool> closing_{false};
    NDK_FN_CLOSE_COMPLETION close_completion_ = nullptr;
    PVOID close_context_ = nullptr;
};

// The destroy step of every object whose teardown needs nothing more: clear the magic so a stale handle is
// refused, then free.
template <class Object>
void DestroyObject(void* object) {
    auto* typed = static_cast<Object*>(object);
    typed->magic = 0;
    FreeObject(typed);
}

}  // namespace softndk::api
