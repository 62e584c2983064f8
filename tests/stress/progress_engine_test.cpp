// Issue 7 §1: the progress engine. Jobs of one lane run in order; a job posted after the thread fell asleep
// wakes it (no lost wake-up); an idle adapter uses no CPU. Label: concurrency (ASan and TSan runs).
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <softndk/softndk.h>

#include "engine/progress_engine.h"

namespace softndk::test {
namespace {

TEST(ProgressEngineTest, JobsOfALaneRunInOrderAcrossThreads) {
    engine::ProgressEngine progress({2, 20});
    ASSERT_TRUE(progress.ok());
    EXPECT_EQ(progress.threads(), 2u);
    constexpr int kJobs = 20000;
    std::vector<int> seen[4];
    std::atomic<int> done{0};
    for (int i = 0; i < kJobs; ++i) {
        const int lane = i % 4;
        progress.Post(lane, [&, lane, i] {
            seen[lane].push_back(i);  // one lane runs on one thread only
            ++done;
        });
    }
    for (int i = 0; i < 5000 && done.load() < kJobs; ++i) usleep(1000);
    ASSERT_EQ(done.load(), kJobs);
    for (int lane = 0; lane < 4; ++lane)
        for (size_t k = 1; k < seen[lane].size(); ++k) ASSERT_LT(seen[lane][k - 1], seen[lane][k]) << "lane order";
}

TEST(ProgressEngineTest, APostAfterTheThreadSleepsWakesIt) {
    engine::ProgressEngine progress({1, 0});  // no busy-poll: every post after a pause must wake the thread
    std::atomic<int> done{0};
    for (int i = 0; i < 200; ++i) {
        progress.Post(0, [&] { ++done; });
        if (i % 20 == 0) usleep(2000);  // let it fall asleep in epoll_wait
    }
    for (int i = 0; i < 5000 && done.load() < 200; ++i) usleep(1000);
    EXPECT_EQ(done.load(), 200) << "a wake-up was lost";
}

// Issue 7 §1: an idle adapter uses < 1 % of a core. The process's CPU time over one idle second, with an
// adapter open (its provider and progress threads blocked), stays under 10 ms.
TEST(ProgressEngineTest, IdleAdapterUsesNoCpu) {
    NDK_ADAPTER* adapter = nullptr;
    ASSERT_EQ(SoftNdkOpenAdapter(nullptr, &adapter), STATUS_SUCCESS);
    usleep(50000);  // let the threads settle
    timespec start{}, end{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
    usleep(1000000);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &end);
    const double cpu_ms = (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_nsec - start.tv_nsec) / 1e6;
    RecordProperty("idle_cpu_ms_per_s", static_cast<int>(cpu_ms * 1000));
    std::printf("idle adapter: %.3f ms of CPU in 1 s (%.3f %% of a core)\n", cpu_ms, cpu_ms / 10.0);
    EXPECT_LT(cpu_ms, 10.0) << "an idle adapter must use < 1 % of a core";
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

}  // namespace
}  // namespace softndk::test
