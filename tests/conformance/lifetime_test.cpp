// LIFE-xx and the remaining provider duties of QP, CQ, SRQ and MW that need their own scenario.
#include <cstring>
#include <thread>

#include "support/connected_pair.h"

namespace softndk::test {
namespace {

class LifetimeTest : public ConnectedPairTest {};
SOFTNDK_ALL_MODES(LifetimeTest);

TEST_P(LifetimeTest, MW_01_02_CreateMwGivesAnMwObject) {
    Completion created;
    NDK_MW* mw = nullptr;
    NTSTATUS returned = pd_->Dispatch->NdkCreateMw(pd_, &Completion::OnCreate, &created, &mw);
    ASSERT_EQ(created.Wait(returned), STATUS_SUCCESS);
    if (mw == nullptr) mw = reinterpret_cast<NDK_MW*>(created.object());
    EXPECT_EQ(mw->Header.ObjectType, NdkObjectTypeMw);
    EXPECT_NE(mw->Dispatch, nullptr);
    EXPECT_EQ(mw->Dispatch->NdkGetRemoteTokenFromMw(mw), 0u) << "unbound";
    Completion bad;
    EXPECT_EQ(pd_->Dispatch->NdkCreateMw(nullptr, &Completion::OnCreate, &bad, &mw), STATUS_INVALID_PARAMETER);
    Close(&mw->Header);
}

TEST_P(LifetimeTest, QP_02_03_SRQ_10_CreateQpWithSrqEnforcesItsLimits) {
    Completion made;
    NDK_SRQ* srq = nullptr;
    ASSERT_EQ(made.Wait(pd_->Dispatch->NdkCreateSrq(pd_, 4, 1, 0, nullptr, nullptr, nullptr, &Completion::OnCreate,
                                                    &made, &srq)),
              STATUS_SUCCESS);
    if (srq == nullptr) srq = reinterpret_cast<NDK_SRQ*>(made.object());
    const NDK_ADAPTER_INFO info = Info();
    Completion done;
    NDK_QP* qp = nullptr;
    auto create = pd_->Dispatch->NdkCreateQpWithSrq;
    EXPECT_EQ(create(pd_, cq_a_, cq_a_, srq, nullptr, info.MaxInitiatorQueueDepth + 1, 1, 0, &Completion::OnCreate,
                     &done, &qp),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(create(pd_, cq_a_, cq_a_, srq, nullptr, 1, info.MaxInitiatorRequestSge + 1, 0, &Completion::OnCreate,
                     &done, &qp),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(
        create(pd_, cq_a_, cq_a_, srq, nullptr, 1, 1, info.MaxInlineDataSize + 1, &Completion::OnCreate, &done, &qp),
        STATUS_INVALID_PARAMETER);
    EXPECT_EQ(create(pd_, cq_a_, cq_a_, nullptr, nullptr, 1, 1, 0, &Completion::OnCreate, &done, &qp),
              STATUS_INVALID_PARAMETER);
    Completion good;
    ASSERT_EQ(good.Wait(create(pd_, cq_a_, cq_a_, srq, reinterpret_cast<PVOID>(7), 1, 1, 0, &Completion::OnCreate,
                               &good, &qp)),
              STATUS_SUCCESS);
    if (qp == nullptr) qp = reinterpret_cast<NDK_QP*>(good.object());
    EXPECT_EQ(qp->Header.ObjectType, NdkObjectTypeQp);
    Completion srq_closed;
    NTSTATUS close_returned = srq->Dispatch->NdkCloseSrq(&srq->Header, &Completion::OnClose, &srq_closed);
    EXPECT_EQ(close_returned, STATUS_PENDING) << "SRQ-10: the SRQ is the QP's antecedent";
    Close(&qp->Header);
    EXPECT_EQ(srq_closed.Wait(close_returned), STATUS_SUCCESS);
}

TEST_P(LifetimeTest, QP_08_ConnectorCloseRacingPostsIsSafe) {
    std::atomic<bool> stop{false};
    std::atomic<long> posts{0};
    std::thread poster([&] {
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
        while (!stop) {
            NTSTATUS status =
                qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_),
                                          mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), NDK_OP_FLAG_SILENT_SUCCESS);
            // A transport that completes later may also have its initiator queue full (QP-01).
            EXPECT_TRUE(status == STATUS_SUCCESS || status == STATUS_CONNECTION_INVALID ||
                        status == STATUS_INSUFFICIENT_RESOURCES)
                << std::hex << status;
            ++posts;
        }
    });
    while (posts < 100) std::this_thread::yield();
    Close(&connector_b_->Header);  // closes the connection under the poster
    connector_b_ = nullptr;
    Close(&connector_a_->Header);
    connector_a_ = nullptr;
    stop = true;
    poster.join();
    Pending(cq_a_);
}

TEST_P(LifetimeTest, QP_11_ReadLandsBeforeALaterFencedWrite) {
    std::memset(buffer_b_->data(), 0x21, 64);
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, reinterpret_cast<PVOID>(1), &sink, 1, RemoteAddress(*buffer_b_),
                                       mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    // The fenced write sends what the read brought in: it must see the read's data.
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, reinterpret_cast<PVOID>(2), &sink, 1, RemoteAddress(*buffer_b_, 128),
                                        mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), NDK_OP_FLAG_READ_FENCE),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).RequestContext, reinterpret_cast<PVOID>(1));
    EXPECT_EQ(Poll(cq_a_).RequestContext, reinterpret_cast<PVOID>(2));
    // A wire Write completes when it leaves; the peer places it a moment later.
    EXPECT_TRUE(WaitFor([&] { return buffer_b_->data()[128 + 63] == 0x21; })) << "the write carried the read's data";
}

struct SlowCallback {
    std::atomic<bool> inside{false};
    std::atomic<bool> release{false};
    std::atomic<int> calls{0};
    static VOID OnNotify(PVOID context, NTSTATUS) {
        auto* self = static_cast<SlowCallback*>(context);
        ++self->calls;
        self->inside = true;
        while (!self->release) std::this_thread::yield();
        self->inside = false;
    }
};

TEST_P(LifetimeTest, CQ_16_CB_08_LIFE_07_08_CloseWaitsForARunningNotificationAndNothingFollows) {
    SlowCallback callback;
    Completion created;
    NDK_CQ* cq = nullptr;
    ASSERT_EQ(created.Wait(adapter_->Dispatch->NdkCreateCq(adapter_, 8, &SlowCallback::OnNotify, &callback, nullptr,
                                                           &Completion::OnCreate, &created, &cq)),
              STATUS_SUCCESS);
    if (cq == nullptr) cq = reinterpret_cast<NDK_CQ*>(created.object());
    NDK_QP* qp = CreateQp(cq, cq, nullptr);
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 8);
    ASSERT_EQ(qp->Dispatch->NdkReceive(qp, nullptr, &receive, 1), STATUS_SUCCESS);
    qp->Dispatch->NdkFlush(qp);                     // one completion queued
    Close(&qp->Header);                             // only the notification will hold the CQ now
    cq->Dispatch->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);  // CQ-08: satisfied at once
    ASSERT_TRUE(WaitFor([&] { return callback.inside.load(); }));
    Completion closed;
    NTSTATUS returned = cq->Dispatch->NdkCloseCq(&cq->Header, &Completion::OnClose, &closed);
    EXPECT_EQ(returned, STATUS_PENDING) << "CQ-16: the notification is still running";
    usleep(20000);
    EXPECT_EQ(closed.calls(), 0);
    callback.release = true;
    EXPECT_EQ(closed.Wait(returned), STATUS_SUCCESS);
    EXPECT_FALSE(callback.inside);
    EXPECT_EQ(callback.calls, 1) << "LIFE-08: nothing after the close completion";
}

struct CloseOrder {
    std::atomic<int> step{0};
    std::atomic<int> mr_closed_at{-1};
    std::atomic<int> pd_closed_at{-1};
    static VOID OnMrClosed(PVOID context) {
        auto* self = static_cast<CloseOrder*>(context);
        usleep(2000);  // a slow child close completion
        self->mr_closed_at = self->step++;
    }
    static VOID OnPdClosed(PVOID context) {
        auto* self = static_cast<CloseOrder*>(context);
        self->pd_closed_at = self->step++;
    }
};

// Needs the child's close to pend (so it has a close completion), hence pend mode only.
class PendingLifetimeTest : public ConnectedPairTest {};
INSTANTIATE_TEST_SUITE_P(Pend, PendingLifetimeTest, ::testing::Values(SOFTNDK_COMPLETION_PEND));

TEST_P(PendingLifetimeTest, LIFE_13_14_ParentCloseCompletesOnlyAfterTheChildsCloseCompletionReturns) {
    NDK_PD* pd = CreatePd();
    Completion created;
    NDK_MR* mr = nullptr;
    ASSERT_EQ(created.Wait(pd->Dispatch->NdkCreateMr(pd, FALSE, &Completion::OnCreate, &created, &mr)), STATUS_SUCCESS);
    if (mr == nullptr) mr = reinterpret_cast<NDK_MR*>(created.object());
    CloseOrder order;
    NTSTATUS pd_returned = pd->Dispatch->NdkClosePd(&pd->Header, &CloseOrder::OnPdClosed, &order);
    EXPECT_EQ(pd_returned, STATUS_PENDING);
    ASSERT_EQ(mr->Dispatch->NdkCloseMr(&mr->Header, &CloseOrder::OnMrClosed, &order), STATUS_PENDING);
    ASSERT_TRUE(WaitFor([&] { return order.pd_closed_at.load() >= 0 && order.mr_closed_at.load() >= 0; }));
    EXPECT_LT(order.mr_closed_at, order.pd_closed_at);
}

TEST_P(LifetimeTest, LIFE_15_AdapterCloseBlocksUntilEveryObjectIsClosed) {
    NDK_ADAPTER* adapter = nullptr;
    ASSERT_EQ(SoftNdkOpenAdapter(nullptr, &adapter), STATUS_SUCCESS);
    NDK_PD* pd = nullptr;
    Completion created;
    ASSERT_EQ(created.Wait(adapter->Dispatch->NdkCreatePd(adapter, &Completion::OnCreate, &created, &pd)),
              STATUS_SUCCESS);
    std::atomic<bool> closed{false};
    std::thread closer([&] {
        EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
        closed = true;
    });
    usleep(50000);
    EXPECT_FALSE(closed) << "the PD is still open";
    EXPECT_EQ(pd->Dispatch->NdkClosePd(&pd->Header, nullptr, nullptr), STATUS_SUCCESS);
    closer.join();
    EXPECT_TRUE(closed);
}

template <class Table>
bool AllMembersSet(const Table* table) {
    const auto* members = reinterpret_cast<void* const*>(table);
    for (size_t i = 0; i < sizeof(Table) / sizeof(void*); ++i)
        if (members[i] == nullptr) return false;
    return true;
}

TEST_P(LifetimeTest, LIFE_17_EveryDispatchMemberIsImplemented) {
    EXPECT_TRUE(AllMembersSet(adapter_->Dispatch));
    EXPECT_TRUE(AllMembersSet(pd_->Dispatch));
    EXPECT_TRUE(AllMembersSet(mr_a_->Dispatch));
    EXPECT_TRUE(AllMembersSet(cq_a_->Dispatch));
    EXPECT_TRUE(AllMembersSet(qp_a_->Dispatch));
    EXPECT_TRUE(AllMembersSet(connector_a_->Dispatch));
    EXPECT_TRUE(AllMembersSet(listener_->Dispatch));
}

class NoSrqTest : public ConnectedPairTest {
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override { config.Limits.MaxSrqDepth = 0; }
};
SOFTNDK_ALL_MODES(NoSrqTest);

TEST_P(NoSrqTest, SRQ_02_MaxSrqDepthZeroMeansNoSrqSupport) {
    EXPECT_EQ(Info().MaxSrqDepth, 0u);
    Completion done;
    NDK_SRQ* srq = nullptr;
    EXPECT_EQ(pd_->Dispatch->NdkCreateSrq(pd_, 1, 1, 0, nullptr, nullptr, nullptr, &Completion::OnCreate, &done, &srq),
              STATUS_NOT_SUPPORTED);
}

}  // namespace
}  // namespace softndk::test
