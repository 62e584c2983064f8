// An MR: regular (NdkRegisterMr) or fast (NdkInitializeFastRegisterMr), never both (MR-01, AMB-25).
// Holds the page table, rights and tokens; the token slot points at `target_`, which is immutable while
// published. Work in flight holds token references, so a deregistration waits for them (drains).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include <softndk/wdm.h>

#include "mem/token_table.h"
#include "mem/token_target.h"

namespace softndk::mem {

struct RegistrationLimits {
    uint64_t max_registration_size;
    uint32_t max_fast_register_pages;
    bool read_sink_required;  // adapter does not advertise RDMA_READ_SINK_NOT_REQUIRED
    // Issue 19 §2, AMB-39: a fast-register MR's keys change on every NdkFastRegister (the opt-in check,
    // SOFTNDK_ROTATE_FR_KEYS=1); by default they stay those read after NdkInitializeFastRegisterMr.
    bool rotate_fast_register_keys = false;
};

class LogicalAddressSpace;

// Called under an MR's or MW's lock when a request on it will finish later, before the drain can end: the QP
// takes the completion's place in its order there and returns what to run when the request is done (its
// status). Built only when needed, so an inline request costs no allocation (CB-12: the call returns, the
// completion follows).
struct PendHook {
    std::function<void(NTSTATUS)> (*function)(void* context) = nullptr;
    void* context = nullptr;
    std::function<void(NTSTATUS)> operator()() const { return function != nullptr ? function(context) : nullptr; }
};

class MemoryRegion : public Invalidatable {
public:
    enum class State { kIdle, kBusy, kRegistered, kFastInitialized, kFastRegistered, kDraining };
    using DrainDone = std::function<void(NTSTATUS)>;

    MemoryRegion(TokenTable& tokens, bool fast_register, const void* owner_pd);
    ~MemoryRegion();
    MemoryRegion(const MemoryRegion&) = delete;
    MemoryRegion& operator=(const MemoryRegion&) = delete;

    // Decodes NDK_MR_FLAG_* (MR-12, AMB-01, AMB-37). STATUS_INVALID_PARAMETER for undefined bits or 0x4 alone.
    static NTSTATUS DecodeRegisterFlags(ULONG flags, bool read_sink_required, uint32_t* rights);

    // MR-05 … MR-16. On any failure the MR is unchanged.
    NTSTATUS Register(const MDL* mdl, SIZE_T length, ULONG flags, const RegistrationLimits& limits);
    // MR-18/19. STATUS_SUCCESS when no work holds the tokens; otherwise STATUS_PENDING and `done` runs when the
    // last reference is released.
    NTSTATUS Deregister(DrainDone done);
    // Close: retires whatever is published (registration or fast registration), or joins a drain under way;
    // STATUS_PENDING while work holds it, then `done` runs.
    NTSTATUS Shutdown(DrainDone done);
    // FR-01 … FR-07. Re-initialisation of an initialised (not fast-registered) MR is allowed (AMB-10).
    NTSTATUS InitializeFastRegister(ULONG page_count, bool remote_access, const RegistrationLimits& limits);

    // FR-08 … FR-16: makes an initialised fast MR valid over logical pages of the adapter's LAM space, with fresh
    // tokens. Inline failures leave the MR unchanged. Posted right behind an NdkInvalidate that is still draining
    // (FR-24: requests act in posting order), it is checked now and published when the drain ends: then it
    // returns STATUS_PENDING after `will_pend`, and `done` carries its final status.
    NTSTATUS FastRegister(const LogicalAddressSpace& space, const NDK_LOGICAL_ADDRESS* page_array, ULONG page_count,
                          ULONG fbo, SIZE_T length, uint64_t base_va, ULONG flags, const RegistrationLimits& limits,
                          PendHook will_pend = {});
    // FR-22 / TOK-16: NdkInvalidate of a fast-registered MR. The tokens die at once. STATUS_SUCCESS when nothing
    // held them; STATUS_PENDING when accesses are in flight: what `will_pend` returned runs once they drained.
    // Never waits (CB-12).
    NTSTATUS Invalidate(PendHook will_pend);
    // TOK-10/11: remote invalidation by the peer's send-and-invalidate (the remote token must match).
    NTSTATUS InvalidateToken(uint32_t token) override;
    // MW-12: windows bound to this MR keep it registered.
    void AddBoundWindow() { bound_windows_.fetch_add(1, std::memory_order_relaxed); }
    void RemoveBoundWindow() { bound_windows_.fetch_sub(1, std::memory_order_relaxed); }
    uint32_t bound_windows() const { return bound_windows_.load(std::memory_order_relaxed); }

    uint32_t LocalToken() const;
    uint32_t RemoteToken() const;
    State state() const;
    bool fast_register() const { return fast_register_; }
    uint32_t fast_page_capacity() const { return fast_page_capacity_; }
    bool fast_remote_access() const { return fast_remote_access_; }
    const TokenTarget& target() const { return target_; }

private:
    static void OnDrained(void* self);
    NTSTATUS RetireLocked(State after, PendHook will_pend = {});
    NTSTATUS InvalidateRegistration(PendHook will_pend);
    struct FastLayout {
        uint64_t base_va;
        uint64_t length;
        uint32_t rights;
        ULONG fbo;
    };
    // Under the lock, with pages_ holding the new page list: publishes it (FR-19), with the tokens it had or,
    // rotating, with fresh ones.
    void PublishFastLocked(const FastLayout& layout, bool rotate);

    TokenTable& tokens_;
    const bool fast_register_;
    mutable std::mutex mutex_;  // state transitions; never held while walking a chain
    State state_ = State::kIdle;
    uint32_t slot_ = 0;  // token slot while registered / initialised
    TokenPair token_pair_{};
    TokenTarget target_;
    std::vector<uint8_t*> pages_;  // capacity kept across registrations (like a hardware MTT)
    uint32_t fast_page_capacity_ = 0;
    bool fast_remote_access_ = false;
    std::vector<DrainDone> drain_waiters_;  // run when the drain under way ends
    bool fast_register_waiting_ = false;    // a FastRegister is queued behind the drain
    State after_drain_ = State::kIdle;
    std::atomic<uint32_t> bound_windows_{0};
};

}  // namespace softndk::mem
