// ExAllocatePool2 / ExFreePool. POOL_FLAG_NON_PAGED memory is locked through the locked-page registry, so
// MmBuildMdlForNonPagedPool MDLs describe real locked pages.
// - An allocation of a page or more is its own page-aligned mapping, as Windows gives page-aligned big pool.
// - Smaller non-paged allocations share locked slabs (issue 19 §2: a driver with thousands of small allocations
//   locked a page each and failed under the default 8 MiB RLIMIT_MEMLOCK). Each size class (16-byte steps to
//   256 bytes, then eight steps per doubling) carves 16 KiB slabs into blocks; a slab is unlocked and unmapped
//   when its last block is freed. Freed blocks wait in a short FIFO before reuse, so a stale pointer does not
//   meet the next allocation at once.
// A failure to lock is printed on stderr whatever SOFTNDK_LOG says, with the `ulimit -l` remedy.
// With special pool on (the kernel layer's Verifier, issue 19 §3) src/mm/special_pool.cpp serves blocks first.
#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include <softndk/softndk.h>
#include <softndk/wdm.h>

#include "common/last_error.h"
#include "mm/locked_page_registry.h"
#include "mm/special_pool.h"

namespace {

constexpr size_t kSlabBytes = 16 * 1024;    // small: a partly used slab per class is the waste
constexpr size_t kQuarantinePerClass = 64;  // freed blocks held back from reuse, per size class

struct PoolBlock {
    size_t bytes;  // mapped bytes (big) or the class's block size (small)
    bool non_paged;
    int size_class;  // -1: its own mapping
};

struct Slab {
    char* base;
    int size_class;
    size_t used = 0;
    std::vector<uint32_t> free;  // block indices ready for reuse
};

struct SizeClass {
    size_t block_bytes;
    std::set<char*> slabs_with_room;  // by base
    std::deque<char*> quarantine;     // freed, not yet back in their slab's free list
};

struct PoolTable {
    std::mutex mutex;
    std::unordered_map<void*, PoolBlock> blocks;
    std::map<char*, Slab> slabs;  // by base
    std::vector<SizeClass> classes;

    PoolTable() {
        for (size_t bytes = 16; bytes <= 256; bytes += 16) classes.push_back({bytes, {}, {}});
        for (size_t power = 256; power < PAGE_SIZE; power *= 2)
            for (size_t step = 1; step <= 8; ++step) classes.push_back({power + power * step / 8, {}, {}});
    }
    int ClassFor(size_t bytes) const {
        for (size_t i = 0; i < classes.size(); ++i)
            if (classes[i].block_bytes >= bytes) return static_cast<int>(i);
        return -1;
    }
};

PoolTable& Table() {
    static auto* table = new PoolTable();
    return *table;
}

constexpr POOL_FLAGS kKnownFlags = POOL_FLAG_UNINITIALIZED | POOL_FLAG_NON_PAGED | POOL_FLAG_PAGED;

// Issue 19 §2: said on stderr whatever SOFTNDK_LOG says; the registry's text carries the limit and the remedy.
void ReportLockFailure(size_t requested) {
    std::fprintf(stderr, "softndk: ExAllocatePool2(POOL_FLAG_NON_PAGED, %zu bytes) failed: %s\n", requested,
                 SoftNdkGetLastErrorText());
}

void* MapLocked(size_t bytes, size_t requested) {
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return nullptr;  // mmap memory is zeroed, as ExAllocatePool2 requires
    const auto first = reinterpret_cast<uintptr_t>(memory) >> PAGE_SHIFT;
    if (madvise(memory, bytes, MADV_POPULATE_WRITE) != 0 ||
        !NT_SUCCESS(softndk::mm::LockedPageRegistry::Instance().Lock(first, bytes >> PAGE_SHIFT))) {
        ReportLockFailure(requested);
        munmap(memory, bytes);
        return nullptr;
    }
    return memory;
}

void UnmapLocked(void* memory, size_t bytes) {
    softndk::mm::LockedPageRegistry::Instance().Unlock(reinterpret_cast<uintptr_t>(memory) >> PAGE_SHIFT,
                                                       bytes >> PAGE_SHIFT);
    munmap(memory, bytes);
}

// Under the table's mutex: a block of `size_class`, from a slab with room or a new slab.
void* AllocateSmall(PoolTable& table, int size_class, size_t requested) {
    SizeClass& sizes = table.classes[static_cast<size_t>(size_class)];
    if (sizes.slabs_with_room.empty()) {
        auto* base = static_cast<char*>(MapLocked(kSlabBytes, requested));
        if (base == nullptr) return nullptr;
        Slab slab{base, size_class, 0, {}};
        const auto count = static_cast<uint32_t>(kSlabBytes / sizes.block_bytes);
        slab.free.reserve(count);
        for (uint32_t i = count; i > 0; --i) slab.free.push_back(i - 1);  // lowest address first
        table.slabs.emplace(base, std::move(slab));
        sizes.slabs_with_room.insert(base);
    }
    Slab& slab = table.slabs.at(*sizes.slabs_with_room.begin());
    const uint32_t index = slab.free.back();
    slab.free.pop_back();
    ++slab.used;
    if (slab.free.empty()) sizes.slabs_with_room.erase(slab.base);
    char* block = slab.base + index * sizes.block_bytes;
    std::memset(block, 0, sizes.block_bytes);  // zeroed, as ExAllocatePool2 returns it
    return block;
}

// Under the table's mutex: gives `block` back to its slab; the slab goes when it is empty.
void ReleaseSmall(PoolTable& table, char* block) {
    auto it = std::prev(table.slabs.upper_bound(block));
    Slab& slab = it->second;
    SizeClass& sizes = table.classes[static_cast<size_t>(slab.size_class)];
    slab.free.push_back(static_cast<uint32_t>((block - slab.base) / sizes.block_bytes));
    --slab.used;
    if (slab.used == 0) {
        sizes.slabs_with_room.erase(slab.base);
        UnmapLocked(slab.base, kSlabBytes);
        table.slabs.erase(it);
        return;
    }
    sizes.slabs_with_room.insert(slab.base);
}

}  // namespace

extern "C" {

PVOID ExAllocatePool2(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag) {
    bool non_paged = (Flags & POOL_FLAG_NON_PAGED) != 0;
    bool paged = (Flags & POOL_FLAG_PAGED) != 0;
    if ((Flags & ~kKnownFlags) != 0 || non_paged == paged || NumberOfBytes == 0) {
        softndk::SetLastErrorText("ExAllocatePool2: Flags must name exactly one of NON_PAGED / PAGED, size > 0");
        return nullptr;
    }
    if (void* special = softndk::mm::special_pool::Allocate(NumberOfBytes, non_paged, Tag)) return special;
    PoolTable& table = Table();
    if (non_paged && NumberOfBytes < PAGE_SIZE) {
        std::lock_guard lock(table.mutex);
        const int size_class = table.ClassFor(NumberOfBytes);
        void* block = AllocateSmall(table, size_class, NumberOfBytes);
        if (block == nullptr) return nullptr;
        table.blocks.emplace(block,
                             PoolBlock{table.classes[static_cast<size_t>(size_class)].block_bytes, true, size_class});
        return block;
    }
    size_t bytes = ROUND_TO_PAGES(NumberOfBytes);
    if (bytes < NumberOfBytes) return nullptr;
    void* memory = nullptr;
    if (non_paged) {
        memory = MapLocked(bytes, NumberOfBytes);
        if (memory == nullptr) return nullptr;
    } else {
        memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED) return nullptr;
    }
    std::lock_guard lock(table.mutex);
    table.blocks.emplace(memory, PoolBlock{bytes, non_paged, -1});
    return memory;
}

VOID ExFreePool(PVOID P) {
    if (P == nullptr || softndk::mm::special_pool::Free(P)) return;
    PoolBlock block{};
    PoolTable& table = Table();
    {
        std::lock_guard lock(table.mutex);
        auto it = table.blocks.find(P);
        if (it == table.blocks.end()) {
            softndk::SetLastErrorText("ExFreePool: %p was not allocated by ExAllocatePool2", P);
            return;
        }
        block = it->second;
        table.blocks.erase(it);
        if (block.size_class >= 0) {
            // Held back from reuse for a while: the oldest of the class's quarantine goes back to its slab.
            SizeClass& sizes = table.classes[static_cast<size_t>(block.size_class)];
            sizes.quarantine.push_back(static_cast<char*>(P));
            if (sizes.quarantine.size() > kQuarantinePerClass) {
                ReleaseSmall(table, sizes.quarantine.front());
                sizes.quarantine.pop_front();
            }
            return;
        }
    }
    if (block.non_paged)
        UnmapLocked(P, block.bytes);
    else
        munmap(P, block.bytes);
}

}  // extern "C"
