#include "mm/locked_page_registry.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include <softndk/wdm.h>

#include "common/last_error.h"

namespace softndk::mm {
namespace {

// The system calls themselves: sanitizer runtimes intercept mlock()/munlock() and turn them into no-ops.
int OsLock(const void* address, size_t bytes) {
    return static_cast<int>(syscall(SYS_mlock, address, bytes));
}
int OsUnlock(const void* address, size_t bytes) {
    return static_cast<int>(syscall(SYS_munlock, address, bytes));
}

const void* PageAddress(PageNumber page) {
    return reinterpret_cast<const void*>(page << PAGE_SHIFT);
}

NTSTATUS ExplainLockFailure(int error, PageNumber first, size_t count) {
    if (error == ENOMEM || error == EPERM || error == EAGAIN) {
        rlimit limit{};
        getrlimit(RLIMIT_MEMLOCK, &limit);
        if (error == ENOMEM && limit.rlim_cur == RLIM_INFINITY) {
            SetLastErrorText("mlock of %zu pages at %p failed: range not mapped", count, PageAddress(first));
            return STATUS_ACCESS_VIOLATION;
        }
        // Issue 20: the number needed, in ulimit -l's KiB: what is allowed now plus this request, at least.
        const unsigned long long needed_kib = (limit.rlim_cur + count * PAGE_SIZE + 1023) / 1024;
        SetLastErrorText(
            "mlock of %zu pages at %p failed (%s): RLIMIT_MEMLOCK is %llu bytes; raise it to at least %llu KiB "
            "(ulimit -l %llu, /etc/security/limits.conf, LimitMEMLOCK= for a service) or run with CAP_IPC_LOCK",
            count, PageAddress(first), std::strerror(error), static_cast<unsigned long long>(limit.rlim_cur),
            needed_kib, needed_kib);
        return STATUS_WORKING_SET_QUOTA;
    }
    SetLastErrorText("mlock of %zu pages at %p failed: %s", count, PageAddress(first), std::strerror(error));
    return STATUS_ACCESS_VIOLATION;
}

}  // namespace

LockedPageRegistry::LockedPageRegistry() : backend_{&OsLock, &OsUnlock} {}

LockedPageRegistry& LockedPageRegistry::Instance() {
    static LockedPageRegistry* registry = new LockedPageRegistry();  // never destroyed: used at exit
    return *registry;
}

PageLockBackend LockedPageRegistry::SetBackendForTesting(PageLockBackend backend) {
    std::unique_lock lock(mutex_);
    PageLockBackend old = backend_;
    backend_ = backend;
    return old;
}

bool LockedPageRegistry::IsLockedUnsafe(PageNumber first, size_t count) const {
    if (count == 0) return true;
    PageNumber end = first + count;
    if (end < first) return false;  // wraps
    auto it = segments_.upper_bound(first);
    if (it == segments_.begin()) return false;
    --it;
    PageNumber covered = first;
    while (it != segments_.end() && it->first <= covered) {
        if (it->second.end > covered) covered = it->second.end;
        if (covered >= end) return true;
        ++it;
    }
    return false;
}

bool LockedPageRegistry::IsLocked(PageNumber first, size_t count) const {
    std::shared_lock lock(mutex_);
    return IsLockedUnsafe(first, count);
}

uint32_t LockedPageRegistry::LockCount(PageNumber page) const {
    std::shared_lock lock(mutex_);
    auto it = segments_.upper_bound(page);
    if (it == segments_.begin()) return 0;
    --it;
    return page < it->second.end ? it->second.count : 0;
}

size_t LockedPageRegistry::SegmentCount() const {
    std::shared_lock lock(mutex_);
    return segments_.size();
}

void LockedPageRegistry::SplitAt(PageNumber page) {
    auto it = segments_.upper_bound(page);
    if (it == segments_.begin()) return;
    --it;
    if (it->first < page && page < it->second.end) {
        Segment tail{it->second.end, it->second.count};
        it->second.end = page;
        segments_.emplace(page, tail);
    }
}

void LockedPageRegistry::MergeAround(PageNumber first, PageNumber end) {
    auto it = segments_.lower_bound(first);  // start one segment before `first`: it may now touch it
    if (it != segments_.begin()) --it;
    while (it != segments_.end() && it->first <= end) {
        auto next = std::next(it);
        if (next != segments_.end() && it->second.end == next->first && it->second.count == next->second.count) {
            it->second.end = next->second.end;
            segments_.erase(next);
        } else {
            it = next;
        }
    }
}

NTSTATUS LockedPageRegistry::Lock(PageNumber first, size_t count) {
    PageNumber end = first + count;
    if (count == 0 || end < first) return STATUS_INVALID_PARAMETER;
    std::unique_lock lock(mutex_);

    // Find the gaps (pages going 0 -> 1) and lock them first, so a failure changes nothing.
    std::vector<std::pair<PageNumber, PageNumber>> gaps;
    PageNumber cursor = first;
    auto it = segments_.upper_bound(first);
    if (it != segments_.begin()) --it;
    for (; it != segments_.end() && it->first < end; ++it) {
        if (it->second.end <= cursor) continue;
        if (it->first > cursor) gaps.emplace_back(cursor, it->first);
        cursor = it->second.end;
    }
    if (cursor < end) gaps.emplace_back(cursor, end);

    for (size_t i = 0; i < gaps.size(); ++i) {
        auto [gap_first, gap_end] = gaps[i];
        if (backend_.lock(PageAddress(gap_first), (gap_end - gap_first) << PAGE_SHIFT) != 0) {
            int error = errno;
            for (size_t j = 0; j < i; ++j)
                backend_.unlock(PageAddress(gaps[j].first), (gaps[j].second - gaps[j].first) << PAGE_SHIFT);
            return ExplainLockFailure(error, gap_first, gap_end - gap_first);
        }
    }

    SplitAt(first);
    SplitAt(end);
    for (auto seg = segments_.lower_bound(first); seg != segments_.end() && seg->first < end; ++seg)
        ++seg->second.count;
    for (auto [gap_first, gap_end] : gaps) segments_.emplace(gap_first, Segment{gap_end, 1});
    MergeAround(first, end);
    return STATUS_SUCCESS;
}

bool LockedPageRegistry::Unlock(PageNumber first, size_t count) {
    PageNumber end = first + count;
    if (count == 0 || end < first) return false;
    std::unique_lock lock(mutex_);
    if (!IsLockedUnsafe(first, count)) {
        SetLastErrorText("unlock of %zu pages at %p: some pages are not locked", count, PageAddress(first));
        return false;
    }
    SplitAt(first);
    SplitAt(end);
    for (auto seg = segments_.lower_bound(first); seg != segments_.end() && seg->first < end;) {
        if (--seg->second.count == 0) {
            backend_.unlock(PageAddress(seg->first), (seg->second.end - seg->first) << PAGE_SHIFT);
            seg = segments_.erase(seg);
        } else {
            ++seg;
        }
    }
    MergeAround(first, end);
    return true;
}

}  // namespace softndk::mm
