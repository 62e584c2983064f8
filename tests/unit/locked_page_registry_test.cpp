// The locked-page registry: nesting, merging, failure atomicity and the RLIMIT_MEMLOCK message.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <string>
#include <sys/resource.h>

#include <softndk/wdm.h>

#include "mm/locked_page_registry.h"

namespace softndk::mm {
namespace {

struct Pages {
    explicit Pages(size_t count) : count(count) {
        base = static_cast<uint8_t*>(mmap(nullptr, count * PAGE_SIZE, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
    }
    ~Pages() { munmap(base, count * PAGE_SIZE); }
    PageNumber page(size_t i) const { return (reinterpret_cast<uintptr_t>(base) >> PAGE_SHIFT) + i; }
    uint8_t* base;
    size_t count;
};

LockedPageRegistry& Registry() {
    return LockedPageRegistry::Instance();
}

TEST(LockedPageRegistryTest, MDL_08_OverlappingLocksNest) {
    Pages pages(8);
    ASSERT_EQ(Registry().Lock(pages.page(0), 4), STATUS_SUCCESS);
    ASSERT_EQ(Registry().Lock(pages.page(2), 4), STATUS_SUCCESS);
    EXPECT_EQ(Registry().LockCount(pages.page(1)), 1u);
    EXPECT_EQ(Registry().LockCount(pages.page(3)), 2u);
    EXPECT_EQ(Registry().LockCount(pages.page(5)), 1u);
    EXPECT_EQ(Registry().LockCount(pages.page(6)), 0u);
    EXPECT_TRUE(Registry().IsLocked(pages.page(0), 6));
    EXPECT_FALSE(Registry().IsLocked(pages.page(0), 7));
    ASSERT_TRUE(Registry().Unlock(pages.page(0), 4));
    EXPECT_FALSE(Registry().IsLocked(pages.page(0), 1));
    EXPECT_TRUE(Registry().IsLocked(pages.page(2), 4)) << "the second lock still holds its pages";
    ASSERT_TRUE(Registry().Unlock(pages.page(2), 4));
    EXPECT_FALSE(Registry().IsLocked(pages.page(2), 1));
}

TEST(LockedPageRegistryTest, MDL_08_AdjacentEqualSegmentsMerge) {
    Pages pages(6);
    const size_t before = Registry().SegmentCount();
    ASSERT_EQ(Registry().Lock(pages.page(0), 2), STATUS_SUCCESS);
    ASSERT_EQ(Registry().Lock(pages.page(2), 2), STATUS_SUCCESS);
    ASSERT_EQ(Registry().Lock(pages.page(4), 2), STATUS_SUCCESS);
    EXPECT_LE(Registry().SegmentCount(), before + 1);
    EXPECT_TRUE(Registry().IsLocked(pages.page(0), 6));
    ASSERT_TRUE(Registry().Unlock(pages.page(0), 6));
    EXPECT_EQ(Registry().SegmentCount(), before);
}

TEST(LockedPageRegistryTest, MDL_09_UnlockOfUnlockedPagesChangesNothing) {
    Pages pages(4);
    ASSERT_EQ(Registry().Lock(pages.page(0), 2), STATUS_SUCCESS);
    EXPECT_FALSE(Registry().Unlock(pages.page(0), 3));
    EXPECT_EQ(Registry().LockCount(pages.page(0)), 1u);
    ASSERT_TRUE(Registry().Unlock(pages.page(0), 2));
    EXPECT_FALSE(Registry().Unlock(pages.page(0), 0));
    EXPECT_EQ(Registry().Lock(pages.page(0), 0), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(Registry().Lock(~PageNumber{0} - 1, 4), STATUS_INVALID_PARAMETER) << "range wraps";
}

int FailWithLimit(const void*, size_t) {
    errno = ENOMEM;
    return -1;
}
int NoUnlock(const void*, size_t) {
    return 0;
}

TEST(LockedPageRegistryTest, MDL_08_MemlockLimitBecomesWorkingSetQuotaNamingTheLimit) {
    Pages pages(2);
    PageLockBackend saved = Registry().SetBackendForTesting({&FailWithLimit, &NoUnlock});
    rlimit limit{};
    getrlimit(RLIMIT_MEMLOCK, &limit);
    rlimit low{PAGE_SIZE, limit.rlim_max};  // a finite limit, as a non-root user has
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &low), 0);
    NTSTATUS status = Registry().Lock(pages.page(0), 2);
    setrlimit(RLIMIT_MEMLOCK, &limit);
    Registry().SetBackendForTesting(saved);
    EXPECT_EQ(status, STATUS_WORKING_SET_QUOTA);
    EXPECT_NE(std::string(SoftNdkGetLastErrorText()).find("RLIMIT_MEMLOCK"), std::string::npos)
        << SoftNdkGetLastErrorText();
    EXPECT_FALSE(Registry().IsLocked(pages.page(0), 1)) << "a failed lock changes nothing";
}

int FailSecondCall(const void*, size_t) {
    static int calls = 0;
    if (++calls % 2 == 0) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

TEST(LockedPageRegistryTest, MDL_08_PartialFailureRollsBackEveryGap) {
    Pages pages(5);
    ASSERT_EQ(Registry().Lock(pages.page(2), 1), STATUS_SUCCESS);  // gaps on both sides of page 2
    PageLockBackend saved = Registry().SetBackendForTesting({&FailSecondCall, &NoUnlock});
    NTSTATUS status = Registry().Lock(pages.page(0), 5);
    Registry().SetBackendForTesting(saved);
    EXPECT_FALSE(NT_SUCCESS(status));
    EXPECT_EQ(Registry().LockCount(pages.page(0)), 0u);
    EXPECT_EQ(Registry().LockCount(pages.page(2)), 1u);
    EXPECT_EQ(Registry().LockCount(pages.page(4)), 0u);
    ASSERT_TRUE(Registry().Unlock(pages.page(2), 1));
}

}  // namespace
}  // namespace softndk::mm
