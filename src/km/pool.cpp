// Tagged pool and lookaside lists (issue 9 §2), and the MDL routines routed through the MR-10 check.
// Every allocation comes from softndk's pool (src/mm/nonpaged_pool.cpp): NonPaged memory is locked, so
// MmBuildMdlForNonPagedPool + NdkRegisterMr work on it. The kernel layer remembers each allocation's tag and
// size, reports bad frees (BAD_POOL_CALLER) and prints what is still allocated, by tag.
#include <cstring>
#include <map>
#include <unordered_map>

#include "km/km_internal.h"

namespace softndk::km {
namespace {

struct Allocation {
    SIZE_T bytes;
    ULONG tag;
    bool paged;
};
struct PoolTable {
    std::mutex mutex;
    std::unordered_map<void*, Allocation> live;
};
PoolTable& Table() {
    static auto* table = new PoolTable();
    return *table;
}

constexpr ULONG kNoneTag = 'enoN';  // ExAllocatePool's tag, "None"
constexpr ULONG kLookasideMagic = 0x4C6F6F6B;

bool Paged(POOL_TYPE type) {
    return (static_cast<int>(type) & 1) != 0;
}

PVOID Allocate(POOL_FLAGS flags, SIZE_T bytes, ULONG tag, const char* call) {
    const bool paged = (flags & POOL_FLAG_PAGED) != 0;
    RequireIrqlAtMost(paged ? APC_LEVEL : DISPATCH_LEVEL, call);
    if (tag == 0)
        Report("BAD_POOL_CALLER", kBadPoolCaller, call, "pool tag 0 is not allowed (use a four-character tag)");
    // Flags the user-mode pool does not distinguish: quota, cache alignment (allocations are page-aligned),
    // session and special pool; executable non-paged pool is non-paged pool.
    POOL_FLAGS base = flags & ~(POOL_FLAG_USE_QUOTA | POOL_FLAG_CACHE_ALIGNED | POOL_FLAG_SESSION |
                                POOL_FLAG_SPECIAL_POOL | POOL_FLAG_RAISE_ON_FAILURE);
    if (base & POOL_FLAG_NON_PAGED_EXECUTE) base = (base & ~POOL_FLAG_NON_PAGED_EXECUTE) | POOL_FLAG_NON_PAGED;
    PVOID memory = (ExAllocatePool2)(base, bytes, tag);
    if (memory == nullptr) {
        if (flags & POOL_FLAG_RAISE_ON_FAILURE)
            Report("POOL_ALLOCATION_FAILED", kBadPoolCaller, call, "%zu bytes with POOL_FLAG_RAISE_ON_FAILURE",
                   static_cast<size_t>(bytes));
        return nullptr;
    }
    PoolTable& table = Table();
    std::lock_guard lock(table.mutex);
    table.live.emplace(memory, Allocation{bytes, tag, paged});
    return memory;
}

void Free(PVOID memory, const ULONG* tag, const char* call) {
    if (memory == nullptr) {
        Report("BAD_POOL_CALLER", kBadPoolCaller, call, "freeing a NULL pointer");
        return;
    }
    Allocation allocation{};
    {
        PoolTable& table = Table();
        std::lock_guard lock(table.mutex);
        auto it = table.live.find(memory);
        if (it == table.live.end()) {
            allocation.bytes = 0;
        } else {
            allocation = it->second;
            table.live.erase(it);
        }
    }
    if (allocation.bytes == 0) {
        Report("BAD_POOL_CALLER", kBadPoolCaller, call, "%p is not an allocated pool block (freed twice?)", memory);
        return;
    }
    RequireIrqlAtMost(allocation.paged ? APC_LEVEL : DISPATCH_LEVEL, call);
    if (tag != nullptr && *tag != allocation.tag) {
        char want[5], got[5];
        FormatTag(allocation.tag, want);
        FormatTag(*tag, got);
        Report("BAD_POOL_CALLER", kBadPoolCaller, call, "%p was allocated with tag '%s' and freed with tag '%s'",
               memory, want, got);
    }
    (ExFreePool)(memory);
}

POOL_FLAGS FlagsOf(POOL_TYPE type) {
    return Paged(type) ? POOL_FLAG_PAGED : POOL_FLAG_NON_PAGED;
}

// ---- lookaside lists: a locked free list of up to MaximumDepth entries ----
void LockList(PNPAGED_LOOKASIDE_LIST list) {
    ULONG_PTR expected = 0;
    while (!__atomic_compare_exchange_n(&list->Lock, &expected, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        expected = 0;
        YieldProcessor();
    }
}
void UnlockList(PNPAGED_LOOKASIDE_LIST list) {
    __atomic_store_n(&list->Lock, 0, __ATOMIC_RELEASE);
}

void InitializeList(PNPAGED_LOOKASIDE_LIST list, PVOID allocate, PVOID free, POOL_TYPE type, SIZE_T size, ULONG tag,
                    bool extended) {
    std::memset(list, 0, sizeof(*list));
    list->MaximumDepth = 256;  // Windows manages the depth itself; the argument is a hint
    list->Type = type;
    list->Tag = tag;
    list->Size = static_cast<ULONG>(size < sizeof(SINGLE_LIST_ENTRY) ? sizeof(SINGLE_LIST_ENTRY) : size);
    list->Allocate = allocate;
    list->Free = free;
    list->Extended = extended;
    list->Magic = kLookasideMagic;
}

PVOID AllocateEntry(PNPAGED_LOOKASIDE_LIST list) {
    if (list->Allocate == nullptr) return ExAllocatePoolWithTag(list->Type, list->Size, list->Tag);
    if (list->Extended)
        return reinterpret_cast<PALLOCATE_FUNCTION_EX>(list->Allocate)(list->Type, list->Size, list->Tag,
                                                                       reinterpret_cast<PLOOKASIDE_LIST_EX>(list));
    return reinterpret_cast<PALLOCATE_FUNCTION>(list->Allocate)(list->Type, list->Size, list->Tag);
}

void FreeEntry(PNPAGED_LOOKASIDE_LIST list, PVOID entry) {
    if (list->Free == nullptr) {
        ExFreePoolWithTag(entry, list->Tag);
    } else if (list->Extended) {
        reinterpret_cast<PFREE_FUNCTION_EX>(list->Free)(entry, reinterpret_cast<PLOOKASIDE_LIST_EX>(list));
    } else {
        reinterpret_cast<PFREE_FUNCTION>(list->Free)(entry);
    }
}

PVOID FromList(PNPAGED_LOOKASIDE_LIST list, const char* call) {
    RequireIrqlAtMost(Paged(list->Type) ? APC_LEVEL : DISPATCH_LEVEL, call);
    LockList(list);
    ++list->TotalAllocates;
    PSINGLE_LIST_ENTRY entry = PopEntryList(&list->FreeList);
    if (entry != nullptr) --list->Depth;
    if (entry == nullptr) ++list->AllocateMisses;
    UnlockList(list);
    return entry != nullptr ? static_cast<PVOID>(entry) : AllocateEntry(list);
}

void ToList(PNPAGED_LOOKASIDE_LIST list, PVOID entry) {
    LockList(list);
    ++list->TotalFrees;
    if (list->Depth < list->MaximumDepth) {
        PushEntryList(&list->FreeList, static_cast<PSINGLE_LIST_ENTRY>(entry));
        ++list->Depth;
        UnlockList(list);
        return;
    }
    ++list->FreeMisses;
    UnlockList(list);
    FreeEntry(list, entry);
}

void DeleteList(PNPAGED_LOOKASIDE_LIST list) {
    LockList(list);
    PSINGLE_LIST_ENTRY entries = list->FreeList.Next;
    list->FreeList.Next = nullptr;
    list->Depth = 0;
    list->Magic = 0;
    UnlockList(list);
    while (entries != nullptr) {
        PSINGLE_LIST_ENTRY next = entries->Next;
        FreeEntry(list, entries);
        entries = next;
    }
}

// ---- MR-10: the MDL chain of a pending registration belongs to the provider ----
bool MdlUsable(PMDL mdl, const char* call) {
    if (mdl == nullptr || !MdlBusy(mdl)) return true;
    Report("NDK_MR_10_MDL_IN_USE", kDriverVerifierDetectedViolation, call,
           "MDL %p is part of an NdkRegisterMr request that has not completed (MR-10); the call is refused", mdl);
    return false;
}

}  // namespace

void FormatTag(ULONG tag, char out[5]) {
    for (int i = 0; i < 4; ++i) {
        char c = static_cast<char>((tag >> (8 * i)) & 0xff);
        out[i] = (c >= 0x20 && c < 0x7f) ? c : '.';
    }
    out[4] = '\0';
}

void PoolStatistics(ULONG* allocations, ULONG64* bytes) {
    PoolTable& table = Table();
    std::lock_guard lock(table.mutex);
    *allocations = static_cast<ULONG>(table.live.size());
    *bytes = 0;
    for (const auto& [memory, allocation] : table.live) *bytes += allocation.bytes;
}

ULONG ReportPoolLeaks() {
    std::map<ULONG, std::pair<ULONG, ULONG64>> by_tag;
    PoolTable& table = Table();
    {
        std::lock_guard lock(table.mutex);
        for (const auto& [memory, allocation] : table.live) {
            auto& [count, bytes] = by_tag[allocation.tag];
            ++count;
            bytes += allocation.bytes;
        }
    }
    ULONG total = 0;
    for (const auto& [tag, usage] : by_tag) {
        char name[5];
        FormatTag(tag, name);
        std::fprintf(stderr, "softndk-km: LEAK pool tag '%s': %u allocation(s), %llu bytes\n", name, usage.first,
                     static_cast<unsigned long long>(usage.second));
        total += usage.first;
    }
    return total;
}

}  // namespace softndk::km

using namespace softndk::km;

extern "C" {

PVOID SoftNdkKmAllocatePool2(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag) {
    return Allocate(Flags, NumberOfBytes, Tag, "ExAllocatePool2");
}
VOID SoftNdkKmFreePool(PVOID P) {
    Free(P, nullptr, "ExFreePool");
}

PVOID ExAllocatePoolWithTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag) {
    return Allocate(FlagsOf(PoolType), NumberOfBytes, Tag, "ExAllocatePoolWithTag");
}
PVOID ExAllocatePoolWithTagPriority(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag, EX_POOL_PRIORITY) {
    return Allocate(FlagsOf(PoolType), NumberOfBytes, Tag, "ExAllocatePoolWithTagPriority");
}
PVOID ExAllocatePool(POOL_TYPE PoolType, SIZE_T NumberOfBytes) {
    return Allocate(FlagsOf(PoolType), NumberOfBytes, kNoneTag, "ExAllocatePool");
}
PVOID ExAllocatePoolZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag) {
    return Allocate(FlagsOf(PoolType), NumberOfBytes, Tag, "ExAllocatePoolZero");  // pool memory is zeroed
}
PVOID ExAllocatePoolUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag) {
    return Allocate(FlagsOf(PoolType) | POOL_FLAG_UNINITIALIZED, NumberOfBytes, Tag, "ExAllocatePoolUninitialized");
}
VOID ExFreePoolWithTag(PVOID P, ULONG Tag) {
    Free(P, &Tag, "ExFreePoolWithTag");
}

VOID ExInitializeNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate, PFREE_FUNCTION Free,
                                     ULONG, SIZE_T Size, ULONG Tag, USHORT) {
    InitializeList(Lookaside, reinterpret_cast<PVOID>(Allocate), reinterpret_cast<PVOID>(Free), NonPagedPoolNx, Size,
                   Tag, false);
}
VOID ExDeleteNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside) {
    DeleteList(Lookaside);
}
PVOID ExAllocateFromNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside) {
    return FromList(Lookaside, "ExAllocateFromNPagedLookasideList");
}
VOID ExFreeToNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry) {
    ToList(Lookaside, Entry);
}

VOID ExInitializePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate, PFREE_FUNCTION Free,
                                    ULONG, SIZE_T Size, ULONG Tag, USHORT) {
    InitializeList(Lookaside, reinterpret_cast<PVOID>(Allocate), reinterpret_cast<PVOID>(Free), PagedPool, Size, Tag,
                   false);
}
VOID ExDeletePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside) {
    DeleteList(Lookaside);
}
PVOID ExAllocateFromPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside) {
    return FromList(Lookaside, "ExAllocateFromPagedLookasideList");
}
VOID ExFreeToPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry) {
    ToList(Lookaside, Entry);
}

NTSTATUS ExInitializeLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PALLOCATE_FUNCTION_EX Allocate,
                                     PFREE_FUNCTION_EX Free, POOL_TYPE PoolType, ULONG, SIZE_T Size, ULONG Tag,
                                     USHORT) {
    if (Lookaside == nullptr || Size == 0) return STATUS_INVALID_PARAMETER;
    InitializeList(&Lookaside->L, reinterpret_cast<PVOID>(Allocate), reinterpret_cast<PVOID>(Free), PoolType, Size, Tag,
                   true);
    return STATUS_SUCCESS;
}
VOID ExDeleteLookasideListEx(PLOOKASIDE_LIST_EX Lookaside) {
    DeleteList(&Lookaside->L);
}
PVOID ExAllocateFromLookasideListEx(PLOOKASIDE_LIST_EX Lookaside) {
    return FromList(&Lookaside->L, "ExAllocateFromLookasideListEx");
}
VOID ExFreeToLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PVOID Entry) {
    ToList(&Lookaside->L, Entry);
}

// ---- MDL routines (the user-mode ones, after the MR-10 check) ----
VOID SoftNdkKmIoFreeMdl(PMDL Mdl) {
    if (MdlUsable(Mdl, "IoFreeMdl")) (IoFreeMdl)(Mdl);
}
VOID SoftNdkKmMmUnlockPages(PMDL MemoryDescriptorList) {
    if (MdlUsable(MemoryDescriptorList, "MmUnlockPages")) (MmUnlockPages)(MemoryDescriptorList);
}
VOID SoftNdkKmMmPrepareMdlForReuse(PMDL Mdl) {
    if (MdlUsable(Mdl, "MmPrepareMdlForReuse")) (MmPrepareMdlForReuse)(Mdl);
}
VOID SoftNdkKmMmBuildMdlForNonPagedPool(PMDL MemoryDescriptorList) {
    if (MdlUsable(MemoryDescriptorList, "MmBuildMdlForNonPagedPool")) (MmBuildMdlForNonPagedPool)(MemoryDescriptorList);
}

}  // extern "C"
