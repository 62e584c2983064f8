// Issue 19 §3: an access to freed pool stops the host with a Driver-Verifier-style report: the bug check code,
// the pool tag, the address, and where the block was allocated and freed, with backtraces. Special pool is on
// with the kernel layer's Verifier (its default), so these run with no switch.
#include <ntddk.h>
#include <softndk_km.h>

#include <gtest/gtest.h>

#include <cstring>
#include <set>

namespace {

constexpr ULONG kTag = 'tsTK';  // "KTst" in a pool dump, as Windows shows tags

class SpecialPoolTest : public ::testing::Test {
protected:
    void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

char* Allocate(size_t bytes) {
    return static_cast<char*>(ExAllocatePool2(POOL_FLAG_NON_PAGED, bytes, kTag));
}

[[gnu::noinline]] void ReadAfterFree() {
    char* block = Allocate(48);
    block[8] = 1;
    ExFreePoolWithTag(block, kTag);
    volatile char seen = block[8];  // the driver bug: a link read from a freed work request
    (void)seen;
}

TEST_F(SpecialPoolTest, ISSUE_19_AReadOfFreedPoolStopsWithTheBugCheckTheTagAndBothBacktraces) {
    EXPECT_DEATH(ReadAfterFree(),
                 "DRIVER_PAGE_FAULT_IN_FREED_SPECIAL_POOL \\(bug check 0xD5\\)\n"
                 "    address: 0x[0-9a-f]+, a read at offset 8 of a block freed earlier\n"
                 "    block:   0x[0-9a-f]+, 48 bytes, pool tag 'KTst', non-paged pool\n"
                 "    allocated at:\n(.*\n)*    freed at:\n(.*\n)*    the access:\n");
}

[[gnu::noinline]] void WritePastTheEnd() {
    char* block = Allocate(48);  // 48 is a multiple of 16: the block ends at the guard page
    block[48] = 1;
}

TEST_F(SpecialPoolTest, ISSUE_19_AWritePastTheEndHitsTheGuardPage) {
    EXPECT_DEATH(WritePastTheEnd(),
                 "PAGE_FAULT_BEYOND_END_OF_ALLOCATION \\(bug check 0xCD\\)\n"
                 "    address: 0x[0-9a-f]+, a write 0 bytes past the block's end\n");
}

[[gnu::noinline]] void OverrunInsideTheSlack() {
    char* block = Allocate(40);  // rounded to 48: 8 bytes of pattern after the block
    block[41] = 1;
    ExFreePoolWithTag(block, kTag);
}

TEST_F(SpecialPoolTest, ISSUE_19_AnOverrunWithinTheLast16BytesIsFoundWhenTheBlockIsFreed) {
    EXPECT_DEATH(OverrunInsideTheSlack(), "SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION \\(bug check 0xC1\\)");
}

TEST_F(SpecialPoolTest, ISSUE_19_FreedBlocksStayOutOfReuseSoTheReportIsDeterministic) {
    std::set<char*> freed;
    for (int i = 0; i < 256; ++i) {
        char* block = Allocate(64);
        ASSERT_NE(block, nullptr);
        EXPECT_EQ(freed.count(block), 0u) << "a block freed " << freed.size() << " frees ago came back";
        block[0] = static_cast<char>(i);
        ExFreePoolWithTag(block, kTag);
        freed.insert(block);
    }
}

TEST_F(SpecialPoolTest, ISSUE_19_SpecialPoolBlocksAreZeroedAndUsable) {
    char* small = Allocate(100);
    char* big = Allocate(3 * PAGE_SIZE + 5);
    ASSERT_NE(small, nullptr);
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % PAGE_SIZE, 0u) << "a block of a page or more is page-aligned";
    EXPECT_EQ((reinterpret_cast<uintptr_t>(small) + 112) % PAGE_SIZE, 0u)
        << "a small block ends at its page's end (100 bytes rounded to 16), where the guard page begins";
    for (size_t i = 0; i < 100; ++i) EXPECT_EQ(small[i], 0);
    for (size_t i = 0; i < 3 * PAGE_SIZE + 5; ++i) ASSERT_EQ(big[i], 0);
    std::memset(small, 0x11, 100);
    std::memset(big, 0x22, 3 * PAGE_SIZE + 5);
    ExFreePoolWithTag(small, kTag);
    ExFreePoolWithTag(big, kTag);
}

}  // namespace
