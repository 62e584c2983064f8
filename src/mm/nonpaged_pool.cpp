// ExAllocatePool2 / ExFreePool. Every allocation is its own page-aligned mapping; POOL_FLAG_NON_PAGED memory
// is locked through the locked-page registry, so MmBuildMdlForNonPagedPool MDLs describe real locked pages.
#include <sys/mman.h>

#include <mutex>
#include <unordered_map>

#include <softndk/wdm.h>

#include "common/last_error.h"
#include "mm/locked_page_registry.h"

namespace {

struct PoolBlock {
    size_t bytes;
    bool non_paged;
};

struct PoolTable {
    std::mutex mutex;
    std::unordered_map<void*, PoolBlock> blocks;
};

PoolTable& Table() {
    static auto* table = new PoolTable();
    return *table;
}

constexpr POOL_FLAGS kKnownFlags = POOL_FLAG_UNINITIALIZED | POOL_FLAG_NON_PAGED | POOL_FLAG_PAGED;

}  // namespace

extern "C" {

PVOID ExAllocatePool2(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag) {
    (void)Tag;
    bool non_paged = (Flags & POOL_FLAG_NON_PAGED) != 0;
    bool paged = (Flags & POOL_FLAG_PAGED) != 0;
    if ((Flags & ~kKnownFlags) != 0 || non_paged == paged || NumberOfBytes == 0) {
        softndk::SetLastErrorText("ExAllocatePool2: Flags must name exactly one of NON_PAGED / PAGED, size > 0");
        return nullptr;
    }
    size_t bytes = ROUND_TO_PAGES(NumberOfBytes);
    if (bytes < NumberOfBytes) return nullptr;
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return nullptr;  // mmap memory is zeroed, as ExAllocatePool2 requires
    if (non_paged) {
        auto first = reinterpret_cast<uintptr_t>(memory) >> PAGE_SHIFT;
        if (madvise(memory, bytes, MADV_POPULATE_WRITE) != 0 ||
            !NT_SUCCESS(softndk::mm::LockedPageRegistry::Instance().Lock(first, bytes >> PAGE_SHIFT))) {
            munmap(memory, bytes);
            return nullptr;
        }
    }
    PoolTable& table = Table();
    std::lock_guard lock(table.mutex);
    table.blocks.emplace(memory, PoolBlock{bytes, non_paged});
    return memory;
}

VOID ExFreePool(PVOID P) {
    if (P == nullptr) return;
    PoolBlock block{};
    {
        PoolTable& table = Table();
        std::lock_guard lock(table.mutex);
        auto it = table.blocks.find(P);
        if (it == table.blocks.end()) {
            softndk::SetLastErrorText("ExFreePool: %p was not allocated by ExAllocatePool2", P);
            return;
        }
        block = it->second;
        table.blocks.erase(it);
    }
    if (block.non_paged)
        softndk::mm::LockedPageRegistry::Instance().Unlock(reinterpret_cast<uintptr_t>(P) >> PAGE_SHIFT,
                                                           block.bytes >> PAGE_SHIFT);
    munmap(P, block.bytes);
}

}  // extern "C"
