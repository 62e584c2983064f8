// CB-01 … CB-04 and LIFE-xx for the adapter, PD, MR and LAM calls, plus fault injection on each of them.
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "api/objects.h"
#include "support/ndk_test_support.h"

namespace softndk::test {
namespace {

class CbTest : public AdapterTest {};
SOFTNDK_ALL_MODES(CbTest);

TEST_P(CbTest, CB_01_RequestCompletionOnlyAfterPending) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    for (int i = 0; i < 20; ++i) {
        // Completion's destructor checks that a non-pending return never produced a callback.
        ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), 0), STATUS_SUCCESS);
        ASSERT_EQ(Deregister(mr), STATUS_SUCCESS);
    }
    Close(&mr->Header);
}

TEST_P(CbTest, CB_02_LIFE_05_CreateAndCloseCompletionsOnlyAfterPending) {
    for (int i = 0; i < 20; ++i) {
        NDK_MR* mr = CreateMr(i % 2 == 0);
        ASSERT_NE(mr, nullptr);
        Close(&mr->Header);
    }
}

struct CloseInsideContext {
    NDK_MR* mr;
    Completion closed;
    std::atomic<NTSTATUS> close_status{STATUS_UNSUCCESSFUL};
    std::atomic<bool> done{false};
};

VOID CloseFromCompletion(PVOID context, NTSTATUS status) {
    auto* ctx = static_cast<CloseInsideContext*>(context);
    EXPECT_EQ(status, STATUS_SUCCESS);
    ctx->close_status = ctx->mr->Dispatch->NdkCloseMr(&ctx->mr->Header, &Completion::OnClose, &ctx->closed);
    ctx->done = true;
}

TEST_P(CbTest, CB_04_LIFE_16_ConsumerMayCloseFromInsideACompletion) {
    LockedBuffer buffer(1);
    CloseInsideContext ctx;
    ctx.mr = CreateMr(false);
    NTSTATUS returned =
        ctx.mr->Dispatch->NdkRegisterMr(ctx.mr, buffer.mdl(), buffer.bytes(), 0, &CloseFromCompletion, &ctx);
    if (returned != STATUS_PENDING) {
        ASSERT_EQ(returned, STATUS_SUCCESS);
        CloseFromCompletion(&ctx, returned);
    }
    for (int i = 0; i < 5000 && !ctx.done; ++i) usleep(1000);
    ASSERT_TRUE(ctx.done);
    // The register completion still holds the MR when it closes it, so the close may pend; it must finish.
    EXPECT_EQ(ctx.closed.Wait(ctx.close_status), STATUS_SUCCESS);
}

// Needs a request that is still pending, so only pend mode.
class PendingCbTest : public AdapterTest {};
INSTANTIATE_TEST_SUITE_P(Pend, PendingCbTest, ::testing::Values(SOFTNDK_COMPLETION_PEND));

TEST_P(PendingCbTest, LIFE_10_CloseWaitsForAPendingRequest) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    Completion registered;
    NTSTATUS returned =
        mr->Dispatch->NdkRegisterMr(mr, buffer.mdl(), buffer.bytes(), 0, &Completion::OnRequest, &registered);
    ASSERT_EQ(returned, STATUS_PENDING);
    Completion closed;
    NTSTATUS close_returned = mr->Dispatch->NdkCloseMr(&mr->Header, &Completion::OnClose, &closed);
    EXPECT_EQ(close_returned, STATUS_PENDING);
    EXPECT_EQ(registered.Wait(returned), STATUS_SUCCESS);
    EXPECT_EQ(closed.Wait(close_returned), STATUS_SUCCESS);
    // LIFE-09: the registration made by the pending request is undone by the close.
    EXPECT_EQ(api::FromHandle<api::AdapterObject>(adapter_)->tokens.LiveSlots(), 1u) << "only the PD's token";
}

TEST_P(CbTest, LIFE_03_18_HeadersAreInitialised) {
    NDK_MR* mr = CreateMr(true);
    EXPECT_EQ(mr->Header.ObjectType, NdkObjectTypeMr);
    EXPECT_EQ(pd_->Header.ObjectType, NdkObjectTypePd);
    for (PVOID reserved : pd_->Header.NdkReserved.rf) EXPECT_EQ(reserved, nullptr);
    Close(&mr->Header);
}

// ---- fault injection: every asynchronous call of this layer, failing inline and asynchronously ----
struct FaultCase {
    const char* function;
    bool asynchronous;
    const char* requirement;  // the requirement that names this call's asynchronous failure
};

class FaultTest : public ::testing::TestWithParam<FaultCase> {
protected:
    void Open(ULONG nth_call) {
        SoftNdkInitAdapterConfig(&config_);
        config_.FaultRuleCount = 1;
        config_.FaultRules[0] = SOFTNDK_FAULT_RULE{
            GetParam().function,          nth_call, 0.0, 0, static_cast<BOOLEAN>(GetParam().asynchronous),
            STATUS_INSUFFICIENT_RESOURCES};
        ASSERT_EQ(SoftNdkOpenAdapter(&config_, &adapter_), STATUS_SUCCESS) << SoftNdkGetLastErrorText();
    }
    void TearDown() override {
        if (adapter_ != nullptr) {
            EXPECT_EQ(SoftNdkCloseAdapter(adapter_), STATUS_SUCCESS);
        }
    }
    // Checks the injected failure: inline, or STATUS_PENDING then the status through the completion.
    void ExpectInjected(NTSTATUS returned, Completion& done) {
        if (GetParam().asynchronous) {
            EXPECT_EQ(returned, STATUS_PENDING);
        } else {
            EXPECT_EQ(returned, STATUS_INSUFFICIENT_RESOURCES);
        }
        EXPECT_EQ(done.Wait(returned), STATUS_INSUFFICIENT_RESOURCES);
    }
    NDK_PD* MakePd() {
        Completion done;
        NDK_PD* pd = nullptr;
        EXPECT_EQ(done.Wait(adapter_->Dispatch->NdkCreatePd(adapter_, &Completion::OnCreate, &done, &pd)),
                  STATUS_SUCCESS);
        return pd;
    }
    NDK_MR* MakeMr(NDK_PD* pd, bool fast) {
        Completion done;
        NDK_MR* mr = nullptr;
        EXPECT_EQ(done.Wait(pd->Dispatch->NdkCreateMr(pd, fast, &Completion::OnCreate, &done, &mr)), STATUS_SUCCESS);
        return mr;
    }
    void CloseObject(NDK_OBJECT_HEADER* object) {
        Completion done;
        auto close = *reinterpret_cast<NDK_FN_CLOSE_OBJECT const*>(reinterpret_cast<NDK_PD*>(object)->Dispatch);
        EXPECT_EQ(done.Wait(close(object, &Completion::OnClose, &done)), STATUS_SUCCESS);
    }
    SOFTNDK_ADAPTER_CONFIG config_{};
    NDK_ADAPTER* adapter_ = nullptr;
};

TEST_P(FaultTest, CB_03_InjectedFailureIsDeliveredAndChangesNothing) {
    const std::string function = GetParam().function;
    Open(function == "NdkDeregisterMr" ? 2 : 1);  // NdkDeregisterMr: fail the second call, see below
    if (function == "NdkCreatePd") {
        Completion done;
        NDK_PD* pd = nullptr;
        ExpectInjected(adapter_->Dispatch->NdkCreatePd(adapter_, &Completion::OnCreate, &done, &pd), done);
        EXPECT_EQ(pd, nullptr);
        EXPECT_EQ(done.object(), nullptr);
        CloseObject(&MakePd()->Header);  // the next call works
        return;
    }
    NDK_PD* pd = MakePd();
    LockedBuffer buffer(2);
    if (function == "NdkCreateMr") {
        Completion done;
        NDK_MR* mr = nullptr;
        ExpectInjected(pd->Dispatch->NdkCreateMr(pd, FALSE, &Completion::OnCreate, &done, &mr), done);
        EXPECT_EQ(mr, nullptr);
        CloseObject(&MakeMr(pd, false)->Header);
    } else if (function == "NdkRegisterMr") {
        NDK_MR* mr = MakeMr(pd, false);
        Completion done;
        ExpectInjected(mr->Dispatch->NdkRegisterMr(mr, buffer.mdl(), buffer.bytes(), 0, &Completion::OnRequest, &done),
                       done);
        EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0u) << "MR unchanged";
        Completion again;
        EXPECT_EQ(again.Wait(
                      mr->Dispatch->NdkRegisterMr(mr, buffer.mdl(), buffer.bytes(), 0, &Completion::OnRequest, &again)),
                  STATUS_SUCCESS);
        CloseObject(&mr->Header);
    } else if (function == "NdkDeregisterMr") {
        NDK_MR* mr = MakeMr(pd, false);
        Completion registered;
        ASSERT_EQ(registered.Wait(mr->Dispatch->NdkRegisterMr(mr, buffer.mdl(), buffer.bytes(), 0,
                                                              &Completion::OnRequest, &registered)),
                  STATUS_SUCCESS);
        // Call 1 of NdkDeregisterMr succeeds; after registering again, call 2 is the injected failure.
        Completion first;
        ASSERT_EQ(first.Wait(mr->Dispatch->NdkDeregisterMr(mr, &Completion::OnRequest, &first)), STATUS_SUCCESS);
        Completion registered_again;
        ASSERT_EQ(registered_again.Wait(mr->Dispatch->NdkRegisterMr(mr, buffer.mdl(), buffer.bytes(), 0,
                                                                    &Completion::OnRequest, &registered_again)),
                  STATUS_SUCCESS);
        const UINT32 token = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
        Completion done;
        ExpectInjected(mr->Dispatch->NdkDeregisterMr(mr, &Completion::OnRequest, &done), done);
        EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), token) << "still registered";
        CloseObject(&mr->Header);
    } else if (function == "NdkInitializeFastRegisterMr") {
        NDK_MR* mr = MakeMr(pd, true);
        Completion done;
        ExpectInjected(mr->Dispatch->NdkInitializeFastRegisterMr(mr, 16, TRUE, &Completion::OnRequest, &done), done);
        EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0u);
        CloseObject(&mr->Header);
    } else if (function == "NdkBuildLam") {
        std::vector<uint8_t> storage(NDK_LAM_SIZE(2));
        auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(storage.data());
        ULONG size = static_cast<ULONG>(storage.size());
        ULONG fbo = 0;
        Completion done;
        ExpectInjected(adapter_->Dispatch->NdkBuildLAM(adapter_, buffer.mdl(), buffer.bytes(), &Completion::OnRequest,
                                                       &done, lam, &size, &fbo),
                       done);
        EXPECT_EQ(api::FromHandle<api::AdapterObject>(adapter_)->logical.LiveMappings(), 0u);
    } else {
        FAIL() << "no scenario for " << function;
    }
    CloseObject(&pd->Header);
}

INSTANTIATE_TEST_SUITE_P(
    Functions, FaultTest,
    ::testing::Values(FaultCase{"NdkCreatePd", false, "LIFE_01"}, FaultCase{"NdkCreatePd", true, "LIFE_01"},
                      FaultCase{"NdkCreateMr", false, "MR_03"}, FaultCase{"NdkCreateMr", true, "MR_03"},
                      FaultCase{"NdkRegisterMr", false, "MR_16"}, FaultCase{"NdkRegisterMr", true, "MR_16"},
                      FaultCase{"NdkDeregisterMr", false, "MR_19"}, FaultCase{"NdkDeregisterMr", true, "MR_19"},
                      FaultCase{"NdkInitializeFastRegisterMr", false, "FR_05"},
                      FaultCase{"NdkInitializeFastRegisterMr", true, "FR_05"},
                      FaultCase{"NdkBuildLam", false, "LAM_09"}, FaultCase{"NdkBuildLam", true, "LAM_09"}),
    [](const ::testing::TestParamInfo<FaultCase>& info) {
        return std::string(info.param.requirement) + "_" + info.param.function +
               (info.param.asynchronous ? "Async" : "Inline");
    });

TEST(FaultProbabilityTest, CB_03_SeededFractionIsReproducible) {
    auto failures_with_seed = [](ULONG seed) {
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);
        config.FaultRuleCount = 1;
        config.FaultRules[0] = SOFTNDK_FAULT_RULE{"NdkQueryAdapterInfo", 0, 0.3, seed, FALSE, STATUS_UNSUCCESSFUL};
        NDK_ADAPTER* adapter = nullptr;
        EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_SUCCESS);
        std::vector<bool> pattern;
        for (int i = 0; i < 200; ++i) {
            NDK_ADAPTER_INFO info{};
            ULONG size = sizeof(info);
            pattern.push_back(adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size) == STATUS_UNSUCCESSFUL);
        }
        EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
        return pattern;
    };
    std::vector<bool> a = failures_with_seed(7);
    EXPECT_EQ(a, failures_with_seed(7));
    EXPECT_NE(a, failures_with_seed(8));
    long failed = std::count(a.begin(), a.end(), true);
    EXPECT_GT(failed, 30);
    EXPECT_LT(failed, 90);
}

}  // namespace
}  // namespace softndk::test
