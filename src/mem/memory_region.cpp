#include "mem/memory_region.h"

#include "common/last_error.h"
#include "mem/logical_address_space.h"
#include "mem/mdl_chain.h"

namespace softndk::mem {
namespace {

constexpr ULONG kDefinedMrFlags = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                  NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_RDMA_READ_SINK;

NTSTATUS WrongState(const char* why) {
    SetLastErrorText("%s", why);
    return STATUS_INVALID_DEVICE_STATE;
}

}  // namespace

MemoryRegion::MemoryRegion(TokenTable& tokens, bool fast_register, const void* owner_pd)
    : tokens_(tokens), fast_register_(fast_register) {
    target_.kind = TargetKind::kRegion;
    target_.owner = owner_pd;
    target_.pages = &pages_;
}

MemoryRegion::~MemoryRegion() {
    // The owner drains registrations before destroying the MR; an initialised fast MR still holds its slot.
    if (slot_ != 0) tokens_.Free(slot_);
}

NTSTATUS MemoryRegion::DecodeRegisterFlags(ULONG flags, bool read_sink_required, uint32_t* rights) {
    if ((flags & ~kDefinedMrFlags) != 0) {
        SetLastErrorText("NdkRegisterMr: undefined flag bits 0x%x", flags & ~kDefinedMrFlags);
        return STATUS_INVALID_PARAMETER;
    }
    // AMB-01: remote write is the whole 0x5 mask; the 0x4 bit alone is not a defined flag.
    if ((flags & 0x4) != 0 && (flags & NDK_MR_FLAG_ALLOW_LOCAL_WRITE) == 0) {
        SetLastErrorText("NdkRegisterMr: bit 0x4 without ALLOW_LOCAL_WRITE is not NDK_MR_FLAG_ALLOW_REMOTE_WRITE");
        return STATUS_INVALID_PARAMETER;
    }
    uint32_t r = kRightLocalRead;  // MR-12: local read is always implied
    if (flags & NDK_MR_FLAG_ALLOW_LOCAL_WRITE) r |= kRightLocalWrite;
    if (flags & NDK_MR_FLAG_ALLOW_REMOTE_READ) r |= kRightRemoteRead;
    if ((flags & NDK_MR_FLAG_ALLOW_REMOTE_WRITE) == NDK_MR_FLAG_ALLOW_REMOTE_WRITE) r |= kRightRemoteWrite;
    // MR-13/15: with NOT_REQUIRED every region may be a read sink and the flag changes nothing.
    if (!read_sink_required || (flags & NDK_MR_FLAG_RDMA_READ_SINK)) r |= kRightReadSink;
    *rights = r;
    return STATUS_SUCCESS;
}

NTSTATUS MemoryRegion::Register(const MDL* mdl, SIZE_T length, ULONG flags, const RegistrationLimits& limits) {
    if (fast_register_) return WrongState("NdkRegisterMr on an MR created for fast registration (MR-05, AMB-26)");
    uint32_t rights = 0;
    NTSTATUS status = DecodeRegisterFlags(flags, limits.read_sink_required, &rights);
    if (!NT_SUCCESS(status)) return status;
    if (length > limits.max_registration_size) {
        SetLastErrorText("NdkRegisterMr: Length %zu exceeds MaxRegistrationSize %llu (AMB-27)",
                         static_cast<size_t>(length), static_cast<unsigned long long>(limits.max_registration_size));
        return STATUS_INVALID_PARAMETER;
    }
    {
        std::lock_guard lock(mutex_);
        if (state_ != State::kIdle) return WrongState("NdkRegisterMr: the MR is already registered or busy");
        state_ = State::kBusy;
    }
    uint32_t slot = 0;
    ResolvedChain chain;
    status = ResolveMdlChain(mdl, length, pages_, chain);
    if (NT_SUCCESS(status)) status = tokens_.Reserve(&slot);
    std::lock_guard lock(mutex_);
    if (!NT_SUCCESS(status)) {
        state_ = State::kIdle;
        return status;
    }
    target_.base_va = chain.base_va;
    target_.length = length;
    target_.rights = rights;
    target_.page_offset = chain.first_byte_offset;
    slot_ = slot;
    token_pair_ = tokens_.Publish(slot, &target_, token_pair_);  // findable only now, fully built
    state_ = State::kRegistered;
    return STATUS_SUCCESS;
}

NTSTATUS MemoryRegion::Deregister(DrainDone done) {
    std::unique_lock lock(mutex_);
    if (fast_register_) return WrongState("NdkDeregisterMr on a fast-register MR (MR-18, AMB-26)");
    if (state_ != State::kRegistered) return WrongState("NdkDeregisterMr: the MR is not registered (MR-18)");
    if (bound_windows() != 0) return WrongState("NdkDeregisterMr: memory windows are bound to the MR (MW-12)");
    drain_waiters_.push_back(std::move(done));
    return RetireLocked(State::kIdle);
}

// Under the lock: stops lookups of the current tokens. STATUS_SUCCESS when nothing held them (state is `after`
// now, the waiters are dropped unrun), else STATUS_PENDING: `will_pend` runs here, the state is kDraining until
// the last reference goes, then `after`, and the waiters run. The lock is held across the retire, so the drain
// hook (which takes it) cannot run before `will_pend` has.
NTSTATUS MemoryRegion::RetireLocked(State after, PendHook will_pend) {
    state_ = State::kDraining;
    after_drain_ = after;
    if (!tokens_.Retire(slot_, &MemoryRegion::OnDrained, this)) {
        drain_waiters_.push_back(will_pend());
        return STATUS_PENDING;
    }
    if (after == State::kIdle) {
        tokens_.Free(slot_);
        slot_ = 0;
    }
    drain_waiters_.clear();
    state_ = after;
    return STATUS_SUCCESS;
}

void MemoryRegion::OnDrained(void* self) {
    auto* region = static_cast<MemoryRegion*>(self);
    std::vector<DrainDone> waiters;
    {
        std::lock_guard lock(region->mutex_);
        if (region->after_drain_ == State::kIdle) {
            region->tokens_.Free(region->slot_);
            region->slot_ = 0;
        }
        region->state_ = region->after_drain_;
        waiters.swap(region->drain_waiters_);
    }
    // The last waiter may be a close that destroys the MR: nothing of `region` is touched from here.
    for (DrainDone& done : waiters)
        if (done) done(STATUS_SUCCESS);
}

NTSTATUS MemoryRegion::FastRegister(const LogicalAddressSpace& space, const NDK_LOGICAL_ADDRESS* page_array,
                                    ULONG page_count, ULONG fbo, SIZE_T length, uint64_t base_va, ULONG flags,
                                    const RegistrationLimits& limits, PendHook will_pend) {
    constexpr ULONG kAccepted = NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_ALLOW_REMOTE_READ |
                                NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_DEFER |
                                NDK_OP_FLAG_RDMA_READ_SINK;  // FR-15, AMB-03
    if (!fast_register_) return WrongState("NdkFastRegister on a regular MR (FR-08)");
    if ((flags & ~kAccepted) != 0 || page_array == nullptr || page_count == 0 || fbo >= PAGE_SIZE || length == 0) {
        SetLastErrorText("NdkFastRegister: bad flags, page array, page count, FBO or length");
        return STATUS_INVALID_PARAMETER;
    }
    // AMB-01: remote write is the whole 0x30 mask.
    if ((flags & 0x20) != 0 && (flags & NDK_OP_FLAG_ALLOW_LOCAL_WRITE) == 0) {
        SetLastErrorText("NdkFastRegister: 0x20 without ALLOW_LOCAL_WRITE is not NDK_OP_FLAG_ALLOW_REMOTE_WRITE");
        return STATUS_INVALID_PARAMETER;
    }
    if (length > static_cast<uint64_t>(page_count) * PAGE_SIZE - fbo || length > limits.max_registration_size) {
        SetLastErrorText("NdkFastRegister: Length exceeds AdapterPageCount * PAGE_SIZE - FBO (FR-12)");
        return STATUS_INVALID_PARAMETER;
    }
    if (base_va % PAGE_SIZE != fbo || base_va + length < base_va) {
        SetLastErrorText("NdkFastRegister: BaseVirtualAddress must be a multiple of PAGE_SIZE plus FBO (FR-13)");
        return STATUS_INVALID_PARAMETER;
    }
    FastLayout layout{base_va, length, kRightLocalRead, fbo};
    if (flags & NDK_OP_FLAG_ALLOW_LOCAL_WRITE) layout.rights |= kRightLocalWrite;
    if (flags & NDK_OP_FLAG_ALLOW_REMOTE_READ) layout.rights |= kRightRemoteRead;
    if ((flags & NDK_OP_FLAG_ALLOW_REMOTE_WRITE) == NDK_OP_FLAG_ALLOW_REMOTE_WRITE) layout.rights |= kRightRemoteWrite;
    if (!limits.read_sink_required || (flags & NDK_OP_FLAG_RDMA_READ_SINK)) layout.rights |= kRightReadSink;
    // FR-09/10: every page a page of a live LAM. Resolved into `into`, which is pages_ unless a drain is under way.
    auto resolve = [&](std::vector<uint8_t*>& into) -> NTSTATUS {
        into.resize(page_count);  // within the capacity reserved at initialisation
        for (ULONG i = 0; i < page_count; ++i) {
            const auto logical = static_cast<uint64_t>(page_array[i].QuadPart);
            uint8_t* host = logical % PAGE_SIZE == 0 ? space.Resolve(logical) : nullptr;
            if (host == nullptr) {
                SetLastErrorText("NdkFastRegister: page %u (0x%llx) is not a page of a live LAM (FR-09/10)", i,
                                 static_cast<unsigned long long>(logical));
                return STATUS_INVALID_PARAMETER;
            }
            into[i] = host;
        }
        return STATUS_SUCCESS;
    };
    std::unique_lock lock(mutex_);
    const bool behind_invalidate =
        state_ == State::kDraining && after_drain_ == State::kFastInitialized && !fast_register_waiting_;
    if (state_ != State::kFastInitialized && !(behind_invalidate && will_pend.function != nullptr))
        return WrongState("NdkFastRegister: the MR is not initialised, or still registered (invalidate first)");
    if (page_count > fast_page_capacity_) {
        SetLastErrorText("NdkFastRegister: %u pages exceed the %u the MR was initialised for (FR-02)", page_count,
                         fast_page_capacity_);
        return STATUS_INVALID_PARAMETER;
    }
    if ((flags & (NDK_OP_FLAG_ALLOW_REMOTE_READ | 0x20)) != 0 && !fast_remote_access_) {
        SetLastErrorText("NdkFastRegister: remote access on an MR initialised without RemoteAccess (FR-16)");
        return STATUS_ACCESS_VIOLATION;
    }
    if (!behind_invalidate) {
        const NTSTATUS status = resolve(pages_);
        if (!NT_SUCCESS(status)) return status;
        PublishFastLocked(layout, limits.rotate_fast_register_keys);
        return STATUS_SUCCESS;
    }
    // Accesses of the old registration still read pages_: the new list waits beside it until they drained.
    std::vector<uint8_t*> pages;
    const NTSTATUS status = resolve(pages);
    if (!NT_SUCCESS(status)) return status;
    drain_waiters_.push_back([this, layout, rotate = limits.rotate_fast_register_keys, pages = std::move(pages),
                              done = will_pend()](NTSTATUS) mutable {
        {
            std::lock_guard relock(mutex_);
            pages_.swap(pages);
            fast_register_waiting_ = false;
            PublishFastLocked(layout, rotate);
        }
        done(STATUS_SUCCESS);
    });
    fast_register_waiting_ = true;
    return STATUS_PENDING;
}

void MemoryRegion::PublishFastLocked(const FastLayout& layout, bool rotate) {
    target_.base_va = layout.base_va;
    target_.length = layout.length;
    target_.rights = layout.rights;
    target_.page_offset = layout.fbo;
    target_.invalidatable = this;
    // FR-19, AMB-39: findable now; with the tokens read after NdkInitializeFastRegisterMr, as hardware keeps an
    // MR's key until the consumer changes it, or with fresh ones when the adapter rotates them (opt-in check).
    token_pair_ =
        rotate ? tokens_.Publish(slot_, &target_, token_pair_, true) : tokens_.PublishKeepingKeys(slot_, &target_);
    state_ = State::kFastRegistered;
}

NTSTATUS MemoryRegion::Shutdown(DrainDone done) {
    std::lock_guard lock(mutex_);
    if (state_ == State::kDraining) {  // an invalidation or deregistration is draining: close after it
        drain_waiters_.push_back(std::move(done));
        return STATUS_PENDING;
    }
    if (state_ != State::kRegistered && state_ != State::kFastRegistered) return STATUS_SUCCESS;
    drain_waiters_.push_back(std::move(done));
    return RetireLocked(State::kIdle);
}

NTSTATUS MemoryRegion::InvalidateRegistration(PendHook will_pend) {
    std::lock_guard lock(mutex_);
    if (!fast_register_) return WrongState("NdkInvalidate of an MR registered by NdkRegisterMr (TOK-16, AMB-07)");
    if (state_ != State::kFastRegistered) return WrongState("NdkInvalidate: the MR is not fast-registered");
    if (bound_windows() != 0) return WrongState("NdkInvalidate: memory windows are bound to the MR");
    // Lookups fail at once; the completion waits for accesses in flight (FR-22), so a consumer may free the
    // memory once it sees it.
    return RetireLocked(State::kFastInitialized, will_pend);
}

NTSTATUS MemoryRegion::Invalidate(PendHook will_pend) {
    return InvalidateRegistration(will_pend);
}

NTSTATUS MemoryRegion::InvalidateToken(uint32_t token) {
    {
        std::lock_guard lock(mutex_);
        if (token != token_pair_.remote && token != token_pair_.local) return STATUS_INVALID_HANDLE;
    }
    // From inside a delivery, which may itself hold a reference: nobody waits for this drain.
    const NTSTATUS status = InvalidateRegistration({});
    return status == STATUS_PENDING ? STATUS_SUCCESS : status;
}

NTSTATUS MemoryRegion::InitializeFastRegister(ULONG page_count, bool remote_access, const RegistrationLimits& limits) {
    if (!fast_register_) return WrongState("NdkInitializeFastRegisterMr on a regular MR (FR-01, AMB-26)");
    if (page_count == 0) {
        SetLastErrorText("NdkInitializeFastRegisterMr: AdapterPageCount is 0");
        return STATUS_INVALID_PARAMETER;
    }
    if (page_count > limits.max_fast_register_pages) {
        SetLastErrorText("NdkInitializeFastRegisterMr: %u pages exceed the adapter's %u (FR-03)", page_count,
                         limits.max_fast_register_pages);
        return STATUS_IMPLEMENTATION_LIMIT;
    }
    {
        std::lock_guard lock(mutex_);
        if (state_ != State::kIdle && state_ != State::kFastInitialized)
            return WrongState("NdkInitializeFastRegisterMr: the MR is busy or fast-registered");
        state_ = State::kBusy;
    }
    uint32_t slot = 0;
    NTSTATUS status = tokens_.Reserve(&slot);
    std::vector<uint8_t*> table;
    if (NT_SUCCESS(status)) {
        try {
            table.reserve(page_count);  // the MR's page-list capacity, like a hardware MTT allocation
        } catch (const std::bad_alloc&) {
            tokens_.Free(slot);
            status = STATUS_INSUFFICIENT_RESOURCES;
        }
    }
    std::lock_guard lock(mutex_);
    if (!NT_SUCCESS(status)) {
        state_ = slot_ != 0 ? State::kFastInitialized : State::kIdle;
        return status;
    }
    if (slot_ != 0) tokens_.Free(slot_);  // re-initialisation: new slot, new tokens
    slot_ = slot;
    token_pair_ = tokens_.Tokens(slot);
    pages_ = std::move(table);
    fast_page_capacity_ = page_count;
    fast_remote_access_ = remote_access;
    state_ = State::kFastInitialized;
    return STATUS_SUCCESS;
}

uint32_t MemoryRegion::LocalToken() const {
    std::lock_guard lock(mutex_);
    return slot_ != 0 && state_ != State::kDraining ? token_pair_.local : 0;
}

uint32_t MemoryRegion::RemoteToken() const {
    std::lock_guard lock(mutex_);
    return slot_ != 0 && state_ != State::kDraining ? token_pair_.remote : 0;
}

MemoryRegion::State MemoryRegion::state() const {
    std::lock_guard lock(mutex_);
    return state_;
}

}  // namespace softndk::mem
