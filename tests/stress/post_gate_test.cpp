// Review finding 3 (QP-07, QP-08): a post and a close must never both proceed, one believing the QP open and the
// other believing no post is inside. The old protocol (post: increment, then load the state; close: store the
// state, then load the count) is a Dekker pattern that x86's store buffer breaks with acquire/release only. The
// litmus runs both sides from two threads released together, many times, and checks every outcome. Label:
// concurrency (ASan and TSan runs).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/post_gate.h"

namespace softndk::test {
namespace {

constexpr int kRounds = 20000;
constexpr int kMinimumRounds = 2000;
// The rounds stop at this bound: each round needs both threads on a core at once, and a loaded machine (a CPU hog
// on each core, ctest -j 2) gives them that only every few milliseconds. 20000 rounds then took over 120 s.
constexpr auto kTimeBound = std::chrono::seconds(20);

// Spins tightly while the other thread is likely running, then yields, so a starved peer gets the core.
template <typename Predicate>
void SpinUntil(Predicate done) {
    for (int spins = 0; !done(); ++spins)
        if (spins > 1000) std::this_thread::yield();
}

TEST(PostGateTest, QP_07_08_PostAndCloseNeverBothProceed) {
    constexpr int kStop = -2;
    std::atomic<int> round{-1};
    std::atomic<int> ready{0};
    std::atomic<bool> post_inside{false};
    int violations = 0;
    int late_idles = 0;
    engine::PostGate* gate = nullptr;
    std::atomic<bool> idle_ran{false};
    std::thread poster([&] {
        for (int r = 0;; ++r) {
            SpinUntil([&] { return round.load(std::memory_order_acquire) == r || round.load() == kStop; });
            if (round.load(std::memory_order_acquire) == kStop) return;
            ready.fetch_add(1, std::memory_order_acq_rel);
            SpinUntil([&] { return ready.load(std::memory_order_acquire) >= 2; });
            if (gate->Enter()) {
                post_inside.store(true, std::memory_order_relaxed);
                // What the post protects is in use here; a close that reported "idle" now is the bug.
                post_inside.store(false, std::memory_order_relaxed);
                gate->Leave();
            }
            ready.fetch_add(1, std::memory_order_acq_rel);
        }
    });
    const auto deadline = std::chrono::steady_clock::now() + kTimeBound;
    int rounds = 0;
    for (; rounds < kRounds && (rounds < kMinimumRounds || std::chrono::steady_clock::now() < deadline); ++rounds) {
        engine::PostGate local;
        gate = &local;
        idle_ran = false;
        ready = 0;
        round.store(rounds, std::memory_order_release);
        ready.fetch_add(1, std::memory_order_acq_rel);
        SpinUntil([&] { return ready.load(std::memory_order_acquire) >= 2; });
        const bool idle_now = local.Close([&] { idle_ran = true; });
        if (idle_now && post_inside.load(std::memory_order_relaxed)) ++violations;
        SpinUntil([&] { return ready.load(std::memory_order_acquire) >= 3; });
        // Exactly one way to learn the gate is idle: at once, or through the action of the last post out.
        if (idle_now == idle_ran.load()) ++late_idles;
        EXPECT_TRUE(local.idle());
    }
    round.store(kStop, std::memory_order_release);
    poster.join();
    EXPECT_EQ(violations, 0) << "a close saw no post while a post was inside, in " << rounds << " rounds";
    EXPECT_EQ(late_idles, 0) << "the idle action ran when Close said idle, or never ran when it did not";
}

TEST(PostGateTest, QP_08_CloseWithAPostInsideRunsItsActionWhenThePostLeaves) {
    engine::PostGate gate;
    ASSERT_TRUE(gate.Enter());
    int ran = 0;
    EXPECT_FALSE(gate.Close([&] { ++ran; }));
    EXPECT_FALSE(gate.Close([&] { ++ran; })) << "a second close joins the wait";
    EXPECT_FALSE(gate.Enter()) << "closed: new posts are refused";
    EXPECT_EQ(ran, 0);
    gate.Leave();
    EXPECT_EQ(ran, 2);
    EXPECT_TRUE(gate.Close([&] { ++ran; })) << "idle now: nothing waits";
    EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace softndk::test
