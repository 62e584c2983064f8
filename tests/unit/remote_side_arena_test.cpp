// The shared arena of the remote-side suites (support/remote_side.h): ndk_remote_side maps it at this process's
// address, so the address must be one that another process's ASLR never fills. A kernel-chosen address (near
// 0x7f...) collided with the child's own mappings in about one run of the suite in three under load (issue 22).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>

#include "support/remote_side.h"

namespace softndk::test {
namespace {

#if !defined(__SANITIZE_THREAD__)
TEST(SharedArenaTest, ArenaLiesBetweenTheSanitizerShadowAndTheAslrRanges) {
    SharedArena arena;
    ASSERT_TRUE(arena.ok());
    const auto base = reinterpret_cast<uintptr_t>(arena.base());
    EXPECT_GE(base, uintptr_t{0x100080000000}) << "above ASan's shadow";
    EXPECT_LT(base + SharedArena::kBytes, uintptr_t{0x550000000000}) << "below PIE binaries, the heap and mmaps";
    // A second arena while the first is mapped (a test's remote side outliving the next one's start) gets the
    // next slot of the same range.
    SharedArena second;
    ASSERT_TRUE(second.ok());
    const auto next = reinterpret_cast<uintptr_t>(second.base());
    EXPECT_NE(next, base);
    EXPECT_LT(next + SharedArena::kBytes, uintptr_t{0x550000000000});
}
#endif

}  // namespace
}  // namespace softndk::test
