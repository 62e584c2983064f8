// Concurrency (issue 2 §7): threads registering and deregistering distinct MRs of one PD, lookups racing
// deregistration, and overlapping page locks. Run under TSan (label "concurrency") and ASan/LSan.
#include <sys/mman.h>

#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "api/objects.h"
#include "mm/locked_page_registry.h"
#include "support/ndk_test_support.h"

namespace softndk::test {
namespace {

constexpr int kThreads = 4;

class ConcurrencyTest : public AdapterTest {};
SOFTNDK_ALL_MODES(ConcurrencyTest);

TEST_P(ConcurrencyTest, MR_ParallelRegisterDeregisterOnDistinctMrsOfOnePd) {
    constexpr int kRounds = 200;
    std::vector<std::unique_ptr<LockedBuffer>> buffers;
    std::vector<NDK_MR*> mrs;
    for (int t = 0; t < kThreads; ++t) {
        buffers.push_back(std::make_unique<LockedBuffer>(4 + t));
        mrs.push_back(CreateMr(false));
    }
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < kRounds; ++round) {
                if (Register(mrs[t], buffers[t]->mdl(), buffers[t]->bytes(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE) !=
                    STATUS_SUCCESS)
                    ++failures;
                if (mrs[t]->Dispatch->NdkGetLocalTokenFromMr(mrs[t]) == 0) ++failures;
                if (Deregister(mrs[t]) != STATUS_SUCCESS) ++failures;
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(failures.load(), 0);
    for (NDK_MR* mr : mrs) Close(&mr->Header);
    EXPECT_EQ(api::FromHandle<api::AdapterObject>(adapter_)->tokens.LiveSlots(), 1u) << "only the PD's token";
}

TEST_P(ConcurrencyTest, TOK_LookupsRacingDeregistrationNeverSeeAFreedTable) {
    constexpr int kRounds = 300;
    LockedBuffer buffer(8);
    NDK_MR* mr = CreateMr(false);
    auto& tokens = api::FromHandle<api::AdapterObject>(adapter_)->tokens;
    std::atomic<uint32_t> current{0};
    std::atomic<bool> stop{false};
    std::atomic<long> hits{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 2; ++t) {
        readers.emplace_back([&] {
            while (!stop.load()) {
                mem::TokenRef ref = tokens.Acquire(current.load(), mem::TokenKind::kLocal);
                if (!ref) continue;
                // In-flight work: the page table must stay whole while the reference is held.
                const std::vector<uint8_t*>& pages = *ref.target()->pages;
                EXPECT_EQ(pages.size(), 8u);
                EXPECT_EQ(pages[7], buffer.data() + 7 * PAGE_SIZE);
                ++hits;
            }
        });
    }
    // No ASSERT while the readers run: a fatal failure here would leave joinable threads and abort the binary.
    // Rounds go on until the readers have hit a live registration at least once (a loaded machine may not
    // schedule them during the first rounds), up to a bound.
    for (int round = 0; (round < kRounds || hits.load() == 0) && round < 100 * kRounds && !HasFailure(); ++round) {
        EXPECT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), 0), STATUS_SUCCESS);
        current = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
        if (round < kRounds)
            std::this_thread::yield();
        else
            usleep(100);                            // give a starved reader the CPU
        EXPECT_EQ(Deregister(mr), STATUS_SUCCESS);  // pends while a reader holds the token
    }
    stop = true;
    for (auto& reader : readers) reader.join();
    EXPECT_GT(hits.load(), 0);
    Close(&mr->Header);
}

TEST(RegistryConcurrencyTest, MDL_OverlappingLocksFromManyThreads) {
    constexpr size_t kPages = 16;
    auto* memory = static_cast<uint8_t*>(
        mmap(nullptr, kPages * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
    const mm::PageNumber first = reinterpret_cast<uintptr_t>(memory) >> PAGE_SHIFT;
    auto& registry = mm::LockedPageRegistry::Instance();
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < 300; ++round) {
                const size_t start = (t * 3 + round) % (kPages - 4);
                if (registry.Lock(first + start, 4) != STATUS_SUCCESS) ++failures;
                if (!registry.IsLocked(first + start, 4)) ++failures;
                if (!registry.Unlock(first + start, 4)) ++failures;
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(failures.load(), 0);
    for (size_t i = 0; i < kPages; ++i) EXPECT_EQ(registry.LockCount(first + i), 0u);
    munmap(memory, kPages * PAGE_SIZE);
}

}  // namespace
}  // namespace softndk::test
