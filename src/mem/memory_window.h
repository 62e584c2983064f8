// An MW (MW-01 … MW-13): bound by NdkBind to a sub-range of a registered or fast-registered MR, with rights
// that are a subset of the MR's; its own token slot; invalidated locally or by the peer.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include <softndk/wdm.h>

#include "mem/memory_region.h"
#include "mem/token_table.h"
#include "mem/token_target.h"

namespace softndk::mem {

class MemoryWindow : public Invalidatable {
public:
    enum class State { kUnbound, kBound, kDraining };
    using Unbound = std::function<void()>;  // runs once the window no longer uses its MR

    MemoryWindow(TokenTable& tokens, const void* owner_pd);
    ~MemoryWindow();
    MemoryWindow(const MemoryWindow&) = delete;
    MemoryWindow& operator=(const MemoryWindow&) = delete;

    // MW-03 … MW-07. STATUS_ACCESS_VIOLATION when the MR lacks a requested right (AMB-05: the window's rights
    // must be a subset of the MR's), STATUS_INVALID_PARAMETER for a range outside the MR or flags outside the
    // bind set, STATUS_INVALID_DEVICE_STATE for an unregistered MR or an already bound window.
    // Posted right behind an invalidate of this window that is still draining, it is checked now and bound when
    // the drain ends: STATUS_PENDING, and what `will_pend` returned runs then.
    NTSTATUS Bind(MemoryRegion& region, uint64_t virtual_address, uint64_t length, ULONG flags,
                  uint64_t max_window_size, Unbound on_unbound, PendHook will_pend = {});
    using DrainDone = MemoryRegion::DrainDone;
    // MW-13: invalidation. STATUS_SUCCESS when nothing held the window; STATUS_PENDING when accesses are in
    // flight: the MR is released and what `will_pend` returned runs once they drained. Never waits.
    NTSTATUS Invalidate(PendHook will_pend);
    // Close: unbinds a bound window or joins the drain under way. STATUS_SUCCESS when unbound now, else
    // STATUS_PENDING and `done` runs later.
    NTSTATUS Shutdown(DrainDone done);
    NTSTATUS InvalidateToken(uint32_t token) override;
    uint32_t RemoteToken() const;
    State state() const;

private:
    static void OnDrained(void* self);
    struct Binding {
        uint64_t base_va;
        uint64_t length;
        uint32_t rights;
        const std::vector<uint8_t*>* pages;
        uint64_t page_offset;
    };
    void PublishLocked(const Binding& binding, MemoryRegion& region, Unbound on_unbound);
    NTSTATUS UnbindLocked(std::unique_lock<std::mutex>& lock, PendHook will_pend);
    // Runs with the lock held; returns it released. Nothing of the window is touched after the waiters ran.
    void FinishUnbind(std::unique_lock<std::mutex>& lock);

    TokenTable& tokens_;
    mutable std::mutex mutex_;
    State state_ = State::kUnbound;
    uint32_t slot_ = 0;
    TokenPair token_pair_{};
    TokenTarget target_;
    MemoryRegion* region_ = nullptr;
    Unbound on_unbound_;
    std::vector<DrainDone> drain_waiters_;
    bool bind_waiting_ = false;  // a bind is queued behind the drain
};

}  // namespace softndk::mem
