// FR-01 … FR-07, FR-23: NdkInitializeFastRegisterMr (the work-request half, FR-08 …, needs a QP).
#include <atomic>
#include <set>
#include <thread>

#include "api/objects.h"
#include "support/ndk_test_support.h"

namespace softndk::test {
namespace {

mem::MemoryRegion& RegionOf(NDK_MR* mr) {
    return api::FromHandle<api::MrObject>(mr)->region;
}

class FrTest : public AdapterTest {};
SOFTNDK_ALL_MODES(FrTest);

TEST_P(FrTest, FR_01_InitializeOnRegularMrFailsAndChangesNothing) {
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(InitializeFast(mr, 16, TRUE), STATUS_INVALID_DEVICE_STATE);
    EXPECT_EQ(RegionOf(mr).state(), mem::MemoryRegion::State::kIdle);
    EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0u);
    Close(&mr->Header);
}

TEST_P(FrTest, FR_02_InitializeRecordsThePageCapacity) {
    NDK_MR* mr = CreateMr(true);
    ASSERT_EQ(InitializeFast(mr, 37, FALSE), STATUS_SUCCESS);
    EXPECT_EQ(RegionOf(mr).fast_page_capacity(), 37u);
    EXPECT_GE(RegionOf(mr).target().pages->capacity(), 37u);
    Close(&mr->Header);
}

TEST_P(FrTest, FR_02_ZeroPagesFailsInvalidParameter) {
    NDK_MR* mr = CreateMr(true);
    EXPECT_EQ(InitializeFast(mr, 0, FALSE), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(RegionOf(mr).state(), mem::MemoryRegion::State::kIdle);
    Close(&mr->Header);
}

TEST_P(FrTest, FR_03_MorePagesThanTheAdapterSupportsFailsImplementationLimit) {
    NDK_MR* mr = CreateMr(true);
    const uint64_t supported = Info().MaxRegistrationSize / PAGE_SIZE;
    ASSERT_LT(supported, 0xFFFFFFFFull);
    EXPECT_EQ(InitializeFast(mr, static_cast<ULONG>(supported + 1), FALSE), STATUS_IMPLEMENTATION_LIMIT);
    EXPECT_EQ(InitializeFast(mr, 0xFFFFFFFF, TRUE), STATUS_IMPLEMENTATION_LIMIT);
    EXPECT_EQ(RegionOf(mr).state(), mem::MemoryRegion::State::kIdle);
    Close(&mr->Header);
}

TEST_P(FrTest, FR_04_RemoteAccessIsRecorded) {
    NDK_MR* local_only = CreateMr(true);
    NDK_MR* remote = CreateMr(true);
    ASSERT_EQ(InitializeFast(local_only, 16, FALSE), STATUS_SUCCESS);
    ASSERT_EQ(InitializeFast(remote, 16, TRUE), STATUS_SUCCESS);
    EXPECT_FALSE(RegionOf(local_only).fast_remote_access());
    EXPECT_TRUE(RegionOf(remote).fast_remote_access());
    Completion done;
    EXPECT_EQ(remote->Dispatch->NdkInitializeFastRegisterMr(remote, 16, 2, &Completion::OnRequest, &done),
              STATUS_INVALID_PARAMETER)
        << "RemoteAccess is a BOOLEAN";
    Close(&local_only->Header);
    Close(&remote->Header);
}

TEST_P(FrTest, FR_05_InitializeRejectsNullArgumentsInline) {
    NDK_MR* mr = CreateMr(true);
    Completion done;
    EXPECT_EQ(mr->Dispatch->NdkInitializeFastRegisterMr(nullptr, 16, FALSE, &Completion::OnRequest, &done),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(mr->Dispatch->NdkInitializeFastRegisterMr(mr, 16, FALSE, nullptr, &done), STATUS_INVALID_PARAMETER);
    Close(&mr->Header);
}

TEST_P(FrTest, FR_06_ParallelInitializeOnDistinctMrs) {
    constexpr int kThreads = 4;
    constexpr int kRounds = 50;
    std::vector<NDK_MR*> mrs;
    for (int i = 0; i < kThreads; ++i) mrs.push_back(CreateMr(true));
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < kRounds; ++round)
                if (InitializeFast(mrs[t], 16 + round, round % 2) != STATUS_SUCCESS) ++failures;
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(failures.load(), 0);
    std::set<UINT32> tokens;
    for (NDK_MR* mr : mrs) {
        EXPECT_EQ(RegionOf(mr).fast_page_capacity(), 16u + kRounds - 1);
        tokens.insert(mr->Dispatch->NdkGetLocalTokenFromMr(mr));
        tokens.insert(mr->Dispatch->NdkGetRemoteTokenFromMr(mr));
        Close(&mr->Header);
    }
    EXPECT_EQ(tokens.size(), 2u * kThreads) << "live initialised MRs have distinct tokens";
}

TEST_P(FrTest, FR_06_InitializeOneAfterAnotherGivesNewTokens) {
    NDK_MR* mr = CreateMr(true);
    ASSERT_EQ(InitializeFast(mr, 16, FALSE), STATUS_SUCCESS);
    UINT32 first = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    ASSERT_EQ(InitializeFast(mr, 300, TRUE), STATUS_SUCCESS);
    EXPECT_NE(mr->Dispatch->NdkGetLocalTokenFromMr(mr), first);
    EXPECT_EQ(RegionOf(mr).fast_page_capacity(), 300u);
    EXPECT_TRUE(RegionOf(mr).fast_remote_access());
    Close(&mr->Header);
}

TEST_P(FrTest, FR_07_TokensAreAvailableOnceInitializeCompletes) {
    NDK_MR* mr = CreateMr(true);
    EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0u);
    ASSERT_EQ(InitializeFast(mr, 16, TRUE), STATUS_SUCCESS);
    EXPECT_NE(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0u);
    EXPECT_NE(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), 0u);
    // Not findable until a fast-register work request makes the MR valid (FR-08 …).
    auto& tokens = api::FromHandle<api::AdapterObject>(adapter_)->tokens;
    EXPECT_FALSE(tokens.Acquire(mr->Dispatch->NdkGetLocalTokenFromMr(mr), mem::TokenKind::kLocal));
    Close(&mr->Header);
}

TEST_P(FrTest, FR_23_AdvertisedFrmrPageCountIsSupported) {
    NDK_ADAPTER_INFO info = Info();
    EXPECT_GE(info.FRMRPageCount, 256u);
    NDK_MR* mr = CreateMr(true);
    EXPECT_EQ(InitializeFast(mr, info.FRMRPageCount, TRUE), STATUS_SUCCESS);
    Close(&mr->Header);
}

}  // namespace
}  // namespace softndk::test
