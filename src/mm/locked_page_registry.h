// Process-wide locked-page registry (docs/architecture.md, "Memory"): every page locked through the emulated memory
// manager, with a lock count per page so overlapping locks nest. A page is a "physical page" only while its count is
// non-zero; PFN_NUMBER = host address >> PAGE_SHIFT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

#include <softndk/ndkpi.h>

namespace softndk::mm {

using PageNumber = uintptr_t;

// The OS calls behind a lock (mlock/munlock). Tests replace them to simulate RLIMIT_MEMLOCK.
struct PageLockBackend {
    int (*lock)(const void* address, size_t bytes);    // 0 or -1 with errno
    int (*unlock)(const void* address, size_t bytes);  // 0 or -1 with errno
};

class LockedPageRegistry {
public:
    static LockedPageRegistry& Instance();

    // Counts +1 on [first, first+count); mlocks pages going 0 -> 1. On failure nothing changes and the
    // status is STATUS_WORKING_SET_QUOTA (limit) or STATUS_ACCESS_VIOLATION, with the last-error text set.
    NTSTATUS Lock(PageNumber first, size_t count);
    // Counts -1; munlocks pages reaching 0. Returns false (and changes nothing) if any page is not locked.
    bool Unlock(PageNumber first, size_t count);
    // True if every page of [first, first+count) is locked.
    bool IsLocked(PageNumber first, size_t count) const;
    // Lock count of one page (0 = not locked). For tests and diagnostics.
    uint32_t LockCount(PageNumber page) const;
    // Number of distinct segments (tests check that merging keeps the map compact).
    size_t SegmentCount() const;

    PageLockBackend SetBackendForTesting(PageLockBackend backend);

    // Shared lock held across a validation walk of many PFN runs (registration fast path).
    class Reader {
    public:
        explicit Reader(const LockedPageRegistry& registry) : registry_(registry), lock_(registry.mutex_) {}
        bool IsLocked(PageNumber first, size_t count) const { return registry_.IsLockedUnsafe(first, count); }

    private:
        const LockedPageRegistry& registry_;
        std::shared_lock<std::shared_mutex> lock_;
    };

private:
    struct Segment {
        PageNumber end;  // exclusive
        uint32_t count;
    };
    bool IsLockedUnsafe(PageNumber first, size_t count) const;
    void SplitAt(PageNumber page);
    void MergeAround(PageNumber first, PageNumber end);

    mutable std::shared_mutex mutex_;
    std::map<PageNumber, Segment> segments_;  // keyed by first page; segments never overlap
    PageLockBackend backend_;

    LockedPageRegistry();
};

}  // namespace softndk::mm
