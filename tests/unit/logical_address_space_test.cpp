// The adapter logical address space behind LAMs.
#include <gtest/gtest.h>

#include <vector>

#include "mem/logical_address_space.h"

namespace softndk::mem {
namespace {

std::vector<uint8_t*> FakePages(size_t count, uintptr_t base) {
    std::vector<uint8_t*> pages;
    for (size_t i = 0; i < count; ++i) pages.push_back(reinterpret_cast<uint8_t*>(base + (i << PAGE_SHIFT)));
    return pages;
}

TEST(LogicalAddressSpaceTest, LAM_07_MapsToPageAlignedAddressesOutsideHostSpace) {
    LogicalAddressSpace space;
    auto pages = FakePages(3, 0x10000000);
    LogicalAddressSpace::Mapping* mapping = nullptr;
    ASSERT_EQ(space.Map(pages.data(), pages.size(), &mapping), STATUS_SUCCESS);
    for (uint32_t i = 0; i < 3; ++i) {
        uint64_t logical = LogicalAddressSpace::LogicalAddress(*mapping, i);
        EXPECT_EQ(logical % PAGE_SIZE, 0u);
        EXPECT_GE(logical, LogicalAddressSpace::kBase);
        EXPECT_EQ(space.Resolve(logical + 9), pages[i] + 9);
    }
    EXPECT_EQ(space.Resolve(0x10000000), nullptr) << "host addresses are not logical addresses";
    EXPECT_EQ(space.Resolve(LogicalAddressSpace::kBase), nullptr) << "logical page 0 is never mapped";
    EXPECT_TRUE(space.Unmap(mapping));
}

TEST(LogicalAddressSpaceTest, LAM_11_UnmapFreesAndRejectsUnknownRecords) {
    LogicalAddressSpace space;
    auto pages = FakePages(4, 0x20000000);
    LogicalAddressSpace::Mapping* a = nullptr;
    LogicalAddressSpace::Mapping* b = nullptr;
    ASSERT_EQ(space.Map(pages.data(), 2, &a), STATUS_SUCCESS);
    ASSERT_EQ(space.Map(pages.data() + 2, 2, &b), STATUS_SUCCESS);
    const uint64_t logical_a = LogicalAddressSpace::LogicalAddress(*a, 0);
    EXPECT_TRUE(space.Unmap(a));
    EXPECT_EQ(space.Resolve(logical_a), nullptr);
    EXPECT_FALSE(space.Unmap(reinterpret_cast<LogicalAddressSpace::Mapping*>(0x40)));
    EXPECT_EQ(space.LiveMappings(), 1u);
    EXPECT_TRUE(space.Unmap(b));
    // Freed ranges merge: one mapping of everything fits again from the start.
    LogicalAddressSpace::Mapping* c = nullptr;
    ASSERT_EQ(space.Map(pages.data(), 4, &c), STATUS_SUCCESS);
    EXPECT_EQ(c->first_page, 1u);
    EXPECT_TRUE(space.Unmap(c));
}

TEST(LogicalAddressSpaceTest, LAM_09_ExhaustionIsInsufficientResources) {
    LogicalAddressSpace space;
    auto pages = FakePages(1, 0x30000000);
    LogicalAddressSpace::Mapping* mapping = nullptr;
    EXPECT_EQ(space.Map(pages.data(), 0, &mapping), STATUS_INSUFFICIENT_RESOURCES);
    EXPECT_EQ(space.Map(pages.data(), LogicalAddressSpace::kMaxPages, &mapping), STATUS_INSUFFICIENT_RESOURCES);
    EXPECT_EQ(space.LiveMappings(), 0u);
}

}  // namespace
}  // namespace softndk::mem
