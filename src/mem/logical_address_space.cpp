#include "mem/logical_address_space.h"

namespace softndk::mem {

LogicalAddressSpace::LogicalAddressSpace() : chunks_(new std::atomic<Chunk*>[kMaxPages / kChunkPages]) {
    for (uint32_t i = 0; i < kMaxPages / kChunkPages; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
    free_.emplace(1, kMaxPages - 1);  // logical page 0 stays unmapped
}

LogicalAddressSpace::~LogicalAddressSpace() {
    for (Mapping* mapping : live_) delete mapping;
    for (uint32_t i = 0; i < kMaxPages / kChunkPages; ++i) delete chunks_[i].load(std::memory_order_relaxed);
}

std::atomic<uintptr_t>* LogicalAddressSpace::Entry(uint64_t page) const {
    if (page >= kMaxPages) return nullptr;
    Chunk* chunk = chunks_[page / kChunkPages].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : &chunk->host[page % kChunkPages];
}

NTSTATUS LogicalAddressSpace::Map(const uint8_t* const* host_pages, size_t count, Mapping** out) {
    if (count == 0 || count > kMaxPages) return STATUS_INSUFFICIENT_RESOURCES;
    auto mapping = std::make_unique<Mapping>();
    {
        std::lock_guard lock(mutex_);
        auto it = free_.begin();
        while (it != free_.end() && it->second < count) ++it;
        if (it == free_.end()) return STATUS_INSUFFICIENT_RESOURCES;
        mapping->first_page = it->first;
        mapping->page_count = static_cast<uint32_t>(count);
        uint64_t rest = it->second - count;
        uint64_t rest_start = it->first + count;
        free_.erase(it);
        if (rest > 0) free_.emplace(rest_start, rest);
        for (uint64_t c = mapping->first_page / kChunkPages; c <= (mapping->first_page + count - 1) / kChunkPages;
             ++c) {
            if (chunks_[c].load(std::memory_order_relaxed) == nullptr)
                chunks_[c].store(new Chunk(), std::memory_order_release);
        }
        live_.insert(mapping.get());
    }
    for (size_t i = 0; i < count; ++i)
        Entry(mapping->first_page + i)->store(reinterpret_cast<uintptr_t>(host_pages[i]), std::memory_order_release);
    *out = mapping.release();
    return STATUS_SUCCESS;
}

bool LogicalAddressSpace::Unmap(Mapping* mapping) {
    std::lock_guard lock(mutex_);
    if (live_.erase(mapping) == 0) return false;
    for (uint32_t i = 0; i < mapping->page_count; ++i)
        Entry(mapping->first_page + i)->store(0, std::memory_order_release);
    uint64_t first = mapping->first_page;
    uint64_t count = mapping->page_count;
    // Return the range, merging with free neighbours.
    auto next = free_.lower_bound(first);
    if (next != free_.end() && next->first == first + count) {
        count += next->second;
        next = free_.erase(next);
    }
    if (next != free_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == first) {
            prev->second += count;
            delete mapping;
            return true;
        }
    }
    free_.emplace(first, count);
    delete mapping;
    return true;
}

uint8_t* LogicalAddressSpace::Resolve(uint64_t logical_address) const {
    if (logical_address < kBase) return nullptr;
    std::atomic<uintptr_t>* entry = Entry((logical_address - kBase) >> PAGE_SHIFT);
    if (entry == nullptr) return nullptr;
    uintptr_t host = entry->load(std::memory_order_acquire);
    return host == 0 ? nullptr : reinterpret_cast<uint8_t*>(host) + BYTE_OFFSET(logical_address);
}

size_t LogicalAddressSpace::LiveMappings() const {
    std::lock_guard lock(mutex_);
    return live_.size();
}

}  // namespace softndk::mem
