// TOK-01, TOK-02, TOK-05 through the public API (the table itself: unit/token_table_test.cpp).
#include <set>

#include "support/ndk_test_support.h"

namespace softndk::test {
namespace {

class TokTest : public AdapterTest {};
SOFTNDK_ALL_MODES(TokTest);

TEST_P(TokTest, TOK_01_LocalTokenAfterRegisterCompletes) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0u) << "no token before registration";
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), 0), STATUS_SUCCESS);
    EXPECT_NE(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0u);
    Close(&mr->Header);
}

TEST_P(TokTest, TOK_02_RemoteTokenAfterRegisterAndAfterInitialize) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    NDK_MR* fast = CreateMr(true);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    ASSERT_EQ(InitializeFast(fast, 16, TRUE), STATUS_SUCCESS);
    EXPECT_NE(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), 0u);
    EXPECT_NE(fast->Dispatch->NdkGetRemoteTokenFromMr(fast), 0u);
    EXPECT_NE(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), mr->Dispatch->NdkGetLocalTokenFromMr(mr));
    Close(&mr->Header);
    Close(&fast->Header);
}

TEST_P(TokTest, TOK_05_GettersHaveNoFailurePath) {
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(nullptr), 0u);
    EXPECT_EQ(mr->Dispatch->NdkGetRemoteTokenFromMr(nullptr), 0u);
    EXPECT_EQ(mr->Dispatch->NdkGetRemoteTokenFromMr(reinterpret_cast<NDK_MR*>(pd_)), 0u);
    EXPECT_EQ(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), 0u);
    Close(&mr->Header);
}

TEST_P(TokTest, TOK_LiveRegistrationsHaveDistinctTokensWithoutAFixedStride) {
    constexpr int kCount = 64;
    LockedBuffer buffer(1);
    std::vector<NDK_MR*> mrs;
    std::vector<UINT32> tokens;
    std::set<UINT32> distinct;
    for (int i = 0; i < kCount; ++i) {
        mrs.push_back(CreateMr(false));
        ASSERT_EQ(Register(mrs.back(), buffer.mdl(), buffer.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
        tokens.push_back(mrs.back()->Dispatch->NdkGetRemoteTokenFromMr(mrs.back()));
        distinct.insert(tokens.back());
        distinct.insert(mrs.back()->Dispatch->NdkGetLocalTokenFromMr(mrs.back()));
    }
    EXPECT_EQ(distinct.size(), 2u * kCount);
    std::set<int64_t> strides;
    for (int i = 1; i < kCount; ++i) strides.insert(static_cast<int64_t>(tokens[i]) - tokens[i - 1]);
    EXPECT_GT(strides.size(), kCount / 2u) << "tokens must not be predictable from their neighbours";
    for (NDK_MR* mr : mrs) Close(&mr->Header);
}

}  // namespace
}  // namespace softndk::test
