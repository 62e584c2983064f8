#include "mem/memory_window.h"

#include "common/last_error.h"

namespace softndk::mem {

MemoryWindow::MemoryWindow(TokenTable& tokens, const void* owner_pd) : tokens_(tokens) {
    target_.kind = TargetKind::kWindow;
    target_.owner = owner_pd;
    target_.invalidatable = this;
}

MemoryWindow::~MemoryWindow() {
    if (slot_ != 0) tokens_.Free(slot_);
}

NTSTATUS MemoryWindow::Bind(MemoryRegion& region, uint64_t virtual_address, uint64_t length, ULONG flags,
                            uint64_t max_window_size, Unbound on_unbound, PendHook will_pend) {
    constexpr ULONG kAccepted = NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_ALLOW_REMOTE_READ |
                                NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_DEFER;  // MW-06
    if ((flags & ~kAccepted) != 0 || ((flags & NDK_OP_FLAG_ALLOW_LOCAL_WRITE) != 0 &&
                                      (flags & NDK_OP_FLAG_ALLOW_REMOTE_WRITE) != NDK_OP_FLAG_ALLOW_REMOTE_WRITE)) {
        SetLastErrorText("NdkBind: flags 0x%x outside the bind set (MW-06, AMB-37)", flags);
        return STATUS_INVALID_PARAMETER;
    }
    if (virtual_address == 0 || length == 0 || length > max_window_size || virtual_address + length < virtual_address) {
        SetLastErrorText("NdkBind: zero-based address, zero length or length above MaxWindowSize (MW-05, MW-11)");
        return STATUS_INVALID_PARAMETER;
    }
    const MemoryRegion::State region_state = region.state();
    if (region_state != MemoryRegion::State::kRegistered && region_state != MemoryRegion::State::kFastRegistered) {
        SetLastErrorText("NdkBind: the MR is not registered (AMB-26)");
        return STATUS_INVALID_DEVICE_STATE;
    }
    const TokenTarget& mr = region.target();
    if (mr.owner != target_.owner) {
        SetLastErrorText("NdkBind: the MR belongs to another PD");
        return STATUS_INVALID_PARAMETER;
    }
    uint32_t rights = kRightLocalRead;
    if (flags & NDK_OP_FLAG_ALLOW_REMOTE_READ) rights |= kRightRemoteRead;
    if ((flags & NDK_OP_FLAG_ALLOW_REMOTE_WRITE) == NDK_OP_FLAG_ALLOW_REMOTE_WRITE)
        rights |= kRightRemoteWrite | kRightLocalWrite;
    if ((mr.rights & rights) != rights) {  // MW-07
        SetLastErrorText("NdkBind: the MR does not allow the access requested for the window (MW-07)");
        return STATUS_ACCESS_VIOLATION;
    }
    if (virtual_address < mr.base_va || length > mr.length || virtual_address - mr.base_va > mr.length - length) {
        SetLastErrorText("NdkBind: the window is not inside the MR (MW-03, AMB-06)");
        return STATUS_INVALID_PARAMETER;
    }
    const Binding binding{virtual_address, length, rights | (mr.rights & kRightReadSink), mr.pages,
                          virtual_address - mr.base_va + mr.page_offset};
    std::lock_guard lock(mutex_);
    if (state_ == State::kDraining && !bind_waiting_ && will_pend.function != nullptr) {
        // Posted right behind an invalidate that is still draining (FR-24: posting order): bound when it ends.
        region.AddBoundWindow();  // the MR stays registered meanwhile (MW-12)
        bind_waiting_ = true;
        drain_waiters_.push_back(
            [this, binding, &region, on_unbound = std::move(on_unbound), done = will_pend()](NTSTATUS) mutable {
                {
                    std::lock_guard relock(mutex_);
                    bind_waiting_ = false;
                    PublishLocked(binding, region, std::move(on_unbound));
                }
                region.RemoveBoundWindow();  // PublishLocked counted the binding itself
                done(STATUS_SUCCESS);
            });
        return STATUS_PENDING;
    }
    if (state_ != State::kUnbound) {
        SetLastErrorText("NdkBind: the window is bound; invalidate it first");
        return STATUS_INVALID_DEVICE_STATE;
    }
    if (slot_ == 0) {
        NTSTATUS status = tokens_.Reserve(&slot_);
        if (!NT_SUCCESS(status)) {
            slot_ = 0;
            return status;
        }
    }
    PublishLocked(binding, region, std::move(on_unbound));
    return STATUS_SUCCESS;
}

void MemoryWindow::PublishLocked(const Binding& binding, MemoryRegion& region, Unbound on_unbound) {
    target_.base_va = binding.base_va;
    target_.length = binding.length;
    target_.rights = binding.rights;
    target_.pages = binding.pages;
    target_.page_offset = binding.page_offset;
    region_ = &region;
    on_unbound_ = std::move(on_unbound);
    region.AddBoundWindow();
    token_pair_ = tokens_.Publish(slot_, &target_, token_pair_);  // TOK-04: new key on every bind
    state_ = State::kBound;
}

void MemoryWindow::FinishUnbind(std::unique_lock<std::mutex>& lock) {
    region_->RemoveBoundWindow();
    region_ = nullptr;
    Unbound unbound = std::move(on_unbound_);
    std::vector<DrainDone> waiters;
    waiters.swap(drain_waiters_);
    state_ = State::kUnbound;
    lock.unlock();
    if (unbound) unbound();
    for (DrainDone& done : waiters)
        if (done) done(STATUS_SUCCESS);
}

NTSTATUS MemoryWindow::Invalidate(PendHook will_pend) {
    std::unique_lock lock(mutex_);
    if (state_ != State::kBound) {
        SetLastErrorText("NdkInvalidate: the window is not bound");
        return STATUS_INVALID_DEVICE_STATE;
    }
    return UnbindLocked(lock, will_pend);  // as for MRs: complete only after accesses in flight
}

NTSTATUS MemoryWindow::Shutdown(DrainDone done) {
    std::unique_lock lock(mutex_);
    if (state_ == State::kUnbound) return STATUS_SUCCESS;
    drain_waiters_.push_back(std::move(done));
    if (state_ == State::kDraining) return STATUS_PENDING;
    return UnbindLocked(lock, {});
}

// The lock is held across the retire, so the drain hook (which takes it) cannot run before `will_pend` has.
NTSTATUS MemoryWindow::UnbindLocked(std::unique_lock<std::mutex>& lock, PendHook will_pend) {
    state_ = State::kDraining;
    if (!tokens_.Retire(slot_, &MemoryWindow::OnDrained, this)) {
        drain_waiters_.push_back(will_pend());
        return STATUS_PENDING;
    }
    drain_waiters_.clear();  // drained at once: the caller completes inline
    FinishUnbind(lock);
    return STATUS_SUCCESS;
}

void MemoryWindow::OnDrained(void* self) {
    auto* window = static_cast<MemoryWindow*>(self);
    std::unique_lock lock(window->mutex_);
    window->FinishUnbind(lock);
}

NTSTATUS MemoryWindow::InvalidateToken(uint32_t token) {
    std::unique_lock lock(mutex_);
    if (state_ != State::kBound || token != token_pair_.remote) return STATUS_INVALID_HANDLE;
    const NTSTATUS status = UnbindLocked(lock, {});  // from inside a delivery: nobody waits for this drain
    return status == STATUS_PENDING ? STATUS_SUCCESS : status;
}

uint32_t MemoryWindow::RemoteToken() const {
    std::lock_guard lock(mutex_);
    return state_ == State::kBound ? token_pair_.remote : 0;
}

MemoryWindow::State MemoryWindow::state() const {
    std::lock_guard lock(mutex_);
    return state_;
}

}  // namespace softndk::mem
