// The adapter's logical address space (LAM-01 … LAM-18), like an IOMMU: NdkBuildLam maps locked host pages
// to PAGE_SIZE logical pages in a range that is never a valid host address, so a logical address can never be
// mistaken for (or used as) a host pointer. Privileged-token SGEs and fast-register page lists resolve here.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include <softndk/wdm.h>

namespace softndk::mem {

class LogicalAddressSpace {
public:
    static constexpr uint64_t kBase = 0x4000000000000000ull;  // bit 62: outside any user address range
    static constexpr uint32_t kChunkPages = 4096;
    static constexpr uint32_t kMaxPages = 1u << 26;  // 256 GiB of mappings per adapter

    struct Mapping {
        uint64_t first_page;  // logical page number relative to kBase
        uint32_t page_count;
    };

    LogicalAddressSpace();
    ~LogicalAddressSpace();

    // Maps the pages at consecutive logical pages. STATUS_INSUFFICIENT_RESOURCES when the space is full.
    NTSTATUS Map(const uint8_t* const* host_pages, size_t count, Mapping** out);
    // LAM-08/11: removes the mapping. Returns false for a pointer that is not a live mapping.
    bool Unmap(Mapping* mapping);
    // Host address of a logical address, or nullptr if that page is not mapped.
    uint8_t* Resolve(uint64_t logical_address) const;
    static uint64_t LogicalAddress(const Mapping& mapping, uint32_t page) {
        return kBase + ((mapping.first_page + page) << PAGE_SHIFT);
    }
    size_t LiveMappings() const;

private:
    struct Chunk {
        std::atomic<uintptr_t> host[kChunkPages];
    };
    std::atomic<uintptr_t>* Entry(uint64_t page) const;

    std::unique_ptr<std::atomic<Chunk*>[]> chunks_;
    mutable std::mutex mutex_;           // allocation only; Resolve is lock-free
    std::map<uint64_t, uint64_t> free_;  // first page -> page count, first fit
    std::unordered_set<Mapping*> live_;
};

}  // namespace softndk::mem
