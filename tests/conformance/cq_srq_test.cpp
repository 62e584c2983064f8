// CQ-01 … CQ-23 and SRQ-01 … SRQ-10.
#include <cstring>
#include <thread>
#include <vector>

#include "api/objects.h"
#include "engine/completion_queue.h"
#include "support/connected_pair.h"

namespace softndk::test {
namespace {

// ---- the CQ engine directly: arming rules ----
struct Notifications {
    std::vector<NTSTATUS> seen;
    engine::CompletionQueue::Notifier notifier() {
        return [this](NTSTATUS status) { seen.push_back(status); };
    }
};

NDK_RESULT_EX Result(NTSTATUS status) {
    NDK_RESULT_EX result{};
    result.Status = status;
    return result;
}

TEST(CompletionQueueTest, CQ_02_07_NoNotificationUnlessArmedAndOncePerArm) {
    Notifications n;
    engine::CompletionQueue cq(8, n.notifier());
    cq.Push(Result(STATUS_SUCCESS), false);
    EXPECT_TRUE(n.seen.empty());
    NDK_RESULT_EX drained[8];
    cq.PollEx(drained, 8);
    cq.Arm(NDK_CQ_NOTIFY_ANY);
    cq.Push(Result(STATUS_SUCCESS), false);
    cq.Push(Result(STATUS_SUCCESS), false);
    EXPECT_EQ(n.seen.size(), 1u);
}

TEST(CompletionQueueTest, CQ_08_ArmWithNewCompletionsQueuedNotifiesAtOnce) {
    Notifications n;
    engine::CompletionQueue cq(8, n.notifier());
    cq.Push(Result(STATUS_SUCCESS), false);
    cq.Arm(NDK_CQ_NOTIFY_ANY);
    EXPECT_EQ(n.seen.size(), 1u);
}

// Review finding 2: every arm type against every completion kind already queued since the last notification.
TEST(CompletionQueueTest, CQ_08_ArmOfEveryTypeIsSatisfiedAtOnceByAMatchingQueuedCompletion) {
    enum Kind { kPlain, kSolicited, kError };
    struct Case {
        ULONG arm;
        Kind queued;
        bool notifies;
    };
    const Case cases[] = {
        {NDK_CQ_NOTIFY_ANY, kPlain, true},           {NDK_CQ_NOTIFY_ANY, kSolicited, true},
        {NDK_CQ_NOTIFY_ANY, kError, true},           {NDK_CQ_NOTIFY_SOLICITED, kPlain, false},
        {NDK_CQ_NOTIFY_SOLICITED, kSolicited, true}, {NDK_CQ_NOTIFY_SOLICITED, kError, true},  // CQ-11
        {NDK_CQ_NOTIFY_ERRORS, kPlain, false},       {NDK_CQ_NOTIFY_ERRORS, kSolicited, false},
        {NDK_CQ_NOTIFY_ERRORS, kError, true},
    };
    for (const Case& c : cases) {
        Notifications n;
        engine::CompletionQueue cq(8, n.notifier());
        cq.Push(Result(c.queued == kError ? STATUS_CANCELLED : STATUS_SUCCESS), c.queued == kSolicited);
        cq.Arm(c.arm);
        EXPECT_EQ(n.seen.size(), c.notifies ? 1u : 0u) << "arm " << c.arm << ", queued kind " << c.queued;
        // A matching completion that was already reported by a notification does not satisfy the next arm again
        // unless another arrives (the MAY half of CQ-08 is not taken).
        if (c.notifies) {
            cq.Arm(c.arm);
            EXPECT_EQ(n.seen.size(), 1u) << "arm " << c.arm << " re-armed with nothing new";
        }
    }
}

// CQ-06: an ERRORS arm is satisfied by a completion in error as well as by a CQ error.
TEST(CompletionQueueTest, CQ_06_ErrorsArmFiresOnAnErrorCompletionOnly) {
    Notifications n;
    engine::CompletionQueue cq(8, n.notifier());
    cq.Arm(NDK_CQ_NOTIFY_ERRORS);
    cq.Push(Result(STATUS_SUCCESS), true);
    EXPECT_TRUE(n.seen.empty());
    cq.Push(Result(STATUS_CONNECTION_ABORTED), false);
    ASSERT_EQ(n.seen.size(), 1u);
    EXPECT_EQ(n.seen[0], STATUS_SUCCESS);
}

TEST(CompletionQueueTest, CQ_10_SecondArmMergesAsTheSpecSays) {
    struct Case {
        ULONG first, second;
        bool fires_on_plain_success;  // the merged arm is ANY
        bool fires_on_solicited;      // the merged arm is SOLICITED or ANY
    };
    const Case cases[] = {
        {NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_ERRORS, true, true},
        {NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_ANY, true, true},
        {NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_ERRORS, false, false},
        {NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_SOLICITED, false, true},
        {NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_ANY, true, true},
        {NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_ERRORS, false, true},
        {NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_SOLICITED, false, true},
    };
    for (const Case& c : cases) {
        Notifications plain;
        engine::CompletionQueue cq(8, plain.notifier());
        cq.Arm(c.first);
        cq.Arm(c.second);
        cq.Push(Result(STATUS_SUCCESS), false);
        EXPECT_EQ(!plain.seen.empty(), c.fires_on_plain_success) << c.first << "+" << c.second;
        Notifications solicited;
        engine::CompletionQueue cq2(8, solicited.notifier());
        cq2.Arm(c.first);
        cq2.Arm(c.second);
        cq2.Push(Result(STATUS_SUCCESS), true);
        EXPECT_EQ(!solicited.seen.empty(), c.fires_on_solicited) << c.first << "+" << c.second;
    }
}

TEST(CompletionQueueTest, CQ_11_ErrorsMatchSolicited) {
    Notifications n;
    engine::CompletionQueue cq(8, n.notifier());
    cq.Arm(NDK_CQ_NOTIFY_SOLICITED);
    cq.Push(Result(STATUS_SUCCESS), false);
    EXPECT_TRUE(n.seen.empty());
    cq.Push(Result(STATUS_CANCELLED), false);
    EXPECT_EQ(n.seen.size(), 1u);
}

TEST(CompletionQueueTest, CQ_15_OverrunIsReportedAndNothingMoreIsQueued) {
    Notifications n;
    engine::CompletionQueue cq(2, n.notifier());
    EXPECT_TRUE(cq.Push(Result(STATUS_SUCCESS), false));
    EXPECT_TRUE(cq.Push(Result(STATUS_SUCCESS), false));
    EXPECT_FALSE(cq.Push(Result(STATUS_SUCCESS), false));
    EXPECT_TRUE(cq.in_error());
    cq.Arm(NDK_CQ_NOTIFY_ERRORS);
    ASSERT_EQ(n.seen.size(), 1u);
    EXPECT_EQ(n.seen[0], STATUS_BUFFER_OVERFLOW);
    NDK_RESULT out[4];
    EXPECT_EQ(cq.Poll(out, 4), 2u) << "what was queued before the overrun stays retrievable";
    EXPECT_FALSE(cq.Push(Result(STATUS_SUCCESS), false));
}

TEST(CompletionQueueTest, CQ_04_ResizeKeepsQueuedCompletionsInOrder) {
    Notifications n;
    engine::CompletionQueue cq(4, n.notifier());
    for (int i = 0; i < 3; ++i) {
        NDK_RESULT_EX result = Result(STATUS_SUCCESS);
        result.RequestContext = reinterpret_cast<PVOID>(static_cast<uintptr_t>(i + 1));
        cq.Push(result, false);
    }
    EXPECT_EQ(cq.Resize(2), STATUS_INVALID_PARAMETER) << "cannot hold what is queued";
    EXPECT_EQ(cq.Resize(16), STATUS_SUCCESS);
    NDK_RESULT_EX out[4];
    ASSERT_EQ(cq.PollEx(out, 4), 3u);
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(out[i].RequestContext, reinterpret_cast<PVOID>(static_cast<uintptr_t>(i + 1)));
}

// ---- through the API ----
class CqTest : public ConnectedPairTest {};
SOFTNDK_ALL_MODES(CqTest);

TEST_P(CqTest, CQ_01_CreateCqEnforcesMaxCqDepth) {
    Completion done;
    NDK_CQ* cq = nullptr;
    auto create = adapter_->Dispatch->NdkCreateCq;
    EXPECT_EQ(create(adapter_, Info().MaxCqDepth + 1, &CqEvents::OnNotify, nullptr, nullptr, &Completion::OnCreate,
                     &done, &cq),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(create(adapter_, 0, &CqEvents::OnNotify, nullptr, nullptr, &Completion::OnCreate, &done, &cq),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(create(adapter_, 4, nullptr, nullptr, nullptr, &Completion::OnCreate, &done, &cq),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(cq, nullptr);
    EXPECT_EQ(cq_a_->Header.ObjectType, NdkObjectTypeCq);
}

TEST_P(CqTest, CQ_04_05_ResizeIsAdvertisedAndEnforced) {
    EXPECT_NE(Info().AdapterFlags & NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED, 0u);
    Completion done;
    EXPECT_EQ(done.Wait(cq_a_->Dispatch->NdkResizeCq(cq_a_, 128, &Completion::OnRequest, &done)), STATUS_SUCCESS);
    Completion too_big;
    EXPECT_EQ(cq_a_->Dispatch->NdkResizeCq(cq_a_, Info().MaxCqDepth + 1, &Completion::OnRequest, &too_big),
              STATUS_INVALID_PARAMETER);
}

struct PollingCallback {
    NDK_CQ* cq = nullptr;
    std::atomic<int> calls{0};
    std::atomic<int> arms{0};
    std::atomic<ULONG> polled{0};
    std::atomic<bool> inside{false};
    std::atomic<bool> overlapped{false};
    void Arm() {
        ++arms;
        cq->Dispatch->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);
    }
    static VOID OnNotify(PVOID context, NTSTATUS) {
        auto* self = static_cast<PollingCallback*>(context);
        if (self->inside.exchange(true)) self->overlapped = true;  // CQ-09: never two at once
        ++self->calls;
        usleep(50);  // widen the window in which a second, unserialised notification would overlap
        NDK_RESULT_EX results[8];
        ULONG got;
        while ((got = self->cq->Dispatch->NdkGetCqResultsEx(self->cq, results, 8)) != 0) self->polled += got;
        self->inside = false;
        self->Arm();  // a provider call from inside the callback (CB-07)
    }
};

// Completions come from two threads at once (two QPs flushing into one CQ); the callback is slow and re-arms from
// inside. Every completion is seen, callbacks never overlap (CQ-09), and each arm is satisfied at most once (CQ-07).
TEST_P(CqTest, CQ_07_09_CB_06_07_NotificationsOncePerArmSerialisedWithProviderCallsInside) {
    constexpr int kRounds = 200;
    PollingCallback callback;
    Completion created;
    NDK_CQ* cq = nullptr;
    ASSERT_EQ(created.Wait(adapter_->Dispatch->NdkCreateCq(adapter_, 1024, &PollingCallback::OnNotify, &callback,
                                                           nullptr, &Completion::OnCreate, &created, &cq)),
              STATUS_SUCCESS);
    if (cq == nullptr) cq = reinterpret_cast<NDK_CQ*>(created.object());
    callback.cq = cq;
    NDK_QP* qps[2] = {CreateQp(cq, cq, nullptr), CreateQp(cq, cq, nullptr)};
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 8);
    ASSERT_EQ(qps[0]->Dispatch->NdkReceive(qps[0], nullptr, &receive, 1), STATUS_SUCCESS);
    qps[0]->Dispatch->NdkFlush(qps[0]);
    usleep(20000);
    EXPECT_EQ(callback.calls, 0) << "CQ-02: not armed";
    NDK_RESULT_EX drained;
    ASSERT_EQ(cq->Dispatch->NdkGetCqResultsEx(cq, &drained, 1), 1u);
    callback.Arm();
    std::atomic<bool> failed{false};
    std::vector<std::thread> flushers;
    for (NDK_QP* qp : qps) {
        flushers.emplace_back([&, qp] {
            for (int i = 0; i < kRounds; ++i) {
                if (qp->Dispatch->NdkReceive(qp, nullptr, &receive, 1) != STATUS_SUCCESS) failed = true;
                qp->Dispatch->NdkFlush(qp);  // one cancelled receive per round, from this thread
            }
        });
    }
    for (std::thread& flusher : flushers) flusher.join();
    EXPECT_FALSE(failed.load());
    EXPECT_TRUE(WaitFor([&] { return callback.polled == 2 * kRounds; })) << "polled " << callback.polled;
    EXPECT_FALSE(callback.overlapped) << "CQ-09";
    EXPECT_GE(callback.calls, 1);
    const int arms = callback.arms, calls = callback.calls;
    EXPECT_TRUE(calls == arms || calls == arms - 1) << calls << " notifications for " << arms << " arms (CQ-07)";
    for (NDK_QP* qp : qps) Close(&qp->Header);
    Close(&cq->Header);
}

TEST_P(CqTest, CQ_06_QP_12_SolicitedArmFiresOnlyForSolicitedSends) {
    cq_b_->Dispatch->NdkArmCq(cq_b_, NDK_CQ_NOTIFY_SOLICITED);
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    usleep(20000);
    EXPECT_EQ(cq_events_b_.count, 0);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT), STATUS_SUCCESS);
    EXPECT_TRUE(WaitFor([&] { return cq_events_b_.count == 1; }));  // QP-12
}

TEST_P(CqTest, CQ_13_14_ResultsCarryTypeAndProviderErrorCode) {
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    for (int i = 0; i < 3; ++i)
        ASSERT_EQ(
            qp_a_->Dispatch->NdkWrite(qp_a_, reinterpret_cast<PVOID>(static_cast<uintptr_t>(i)), &sge, 1,
                                      RemoteAddress(*buffer_b_), mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
            STATUS_SUCCESS);
    // On a transport that completes later the three arrive after the posts return (SOFTNDK_TRANSPORT=deferred).
    ASSERT_TRUE(WaitFor([&] { return api::FromHandle<api::CqObject>(cq_a_)->queue.queued() == 3; }));
    NDK_RESULT_EX results[8];
    EXPECT_EQ(cq_a_->Dispatch->NdkGetCqResultsEx(cq_a_, results, 2), 2u) << "at most nResults";
    EXPECT_EQ(cq_a_->Dispatch->NdkGetCqResultsEx(cq_a_, results + 2, 8), 1u);
    EXPECT_EQ(cq_a_->Dispatch->NdkGetCqResultsEx(cq_a_, results, 8), 0u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(results[i].Type, NdkOperationTypeWrite);
        EXPECT_EQ(results[i].ProviderErrorCode, 0u);
        EXPECT_EQ(results[i].RequestContext, reinterpret_cast<PVOID>(static_cast<uintptr_t>(i)));
    }
}

TEST_P(CqTest, CQ_17_CB_11_InterruptModerationIsNotAdvertisedSoNotSupported) {
    EXPECT_EQ(Info().AdapterFlags & NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED, 0u);
    EXPECT_EQ(cq_a_->Dispatch->NdkControlCqInterruptModeration(cq_a_, 10, 4), STATUS_NOT_SUPPORTED);
}

TEST_P(CqTest, CQ_23_CqCloseWaitsForItsQps) {
    CqEvents events;
    NDK_CQ* cq = CreateCq(8, &events);
    NDK_QP* qp = CreateQp(cq, cq, nullptr);
    Completion closed;
    NTSTATUS returned = cq->Dispatch->NdkCloseCq(&cq->Header, &Completion::OnClose, &closed);
    EXPECT_EQ(returned, STATUS_PENDING);
    Close(&qp->Header);
    EXPECT_EQ(closed.Wait(returned), STATUS_SUCCESS);
}

// ---- SRQ ----
class SrqTest : public ConnectedPairTest {
protected:
    struct SrqEvents {
        std::atomic<int> count{0};
        std::atomic<NTSTATUS> last{STATUS_PENDING};
        static VOID OnNotify(PVOID context, NTSTATUS status) {
            static_cast<SrqEvents*>(context)->last = status;
            ++static_cast<SrqEvents*>(context)->count;
        }
    };
    NDK_SRQ* CreateSrq(ULONG depth, ULONG threshold, SrqEvents* events) {
        Completion done;
        NDK_SRQ* srq = nullptr;
        // On side B: its receives are placed from A.
        EXPECT_EQ(done.Wait(pd_b_->Dispatch->NdkCreateSrq(pd_b_, depth, 2, threshold, &SrqEvents::OnNotify, events,
                                                          nullptr, &Completion::OnCreate, &done, &srq)),
                  STATUS_SUCCESS);
        return srq != nullptr ? srq : reinterpret_cast<NDK_SRQ*>(done.object());
    }
};
SOFTNDK_ALL_MODES(SrqTest);

TEST_P(SrqTest, SRQ_01_CreateSrqEnforcesItsLimits) {
    Completion done;
    NDK_SRQ* srq = nullptr;
    EXPECT_EQ(pd_->Dispatch->NdkCreateSrq(pd_, Info().MaxSrqDepth + 1, 1, 0, nullptr, nullptr, nullptr,
                                          &Completion::OnCreate, &done, &srq),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(pd_->Dispatch->NdkCreateSrq(pd_, 4, Info().MaxReceiveRequestSge + 1, 0, nullptr, nullptr, nullptr,
                                          &Completion::OnCreate, &done, &srq),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(srq, nullptr);
}

TEST_P(SrqTest, SRQ_03_06_08_09_QpWithSrqReceivesAndTheThresholdNotifies) {
    SrqEvents events;
    NDK_SRQ* srq = CreateSrq(8, 2, &events);
    EXPECT_EQ(srq->Header.ObjectType, NdkObjectTypeSrq);
    EXPECT_TRUE(WaitFor([&] { return events.count == 1; })) << "AMB-32: armed at creation, already below";
    EXPECT_EQ(events.last.load(), STATUS_SUCCESS) << "SRQ-08: a threshold notification carries STATUS_SUCCESS";
    Completion created;
    NDK_QP* qp = nullptr;
    ASSERT_EQ(created.Wait(pd_b_->Dispatch->NdkCreateQpWithSrq(pd_b_, cq_b_, cq_b_, srq, nullptr, 8, 2, 0,
                                                               &Completion::OnCreate, &created, &qp)),
              STATUS_SUCCESS);
    if (qp == nullptr) qp = reinterpret_cast<NDK_QP*>(created.object());
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
    EXPECT_EQ(qp->Dispatch->NdkReceive(qp, nullptr, &receive, 1), STATUS_INVALID_DEVICE_STATE) << "QP-02";
    for (int i = 0; i < 3; ++i) ASSERT_EQ(srq->Dispatch->NdkSrqReceive(srq, nullptr, &receive, 1), STATUS_SUCCESS);
    Completion modified;
    ASSERT_EQ(modified.Wait(srq->Dispatch->NdkModifySrq(srq, 0, 3, &Completion::OnRequest, &modified)), STATUS_SUCCESS);
    EXPECT_EQ(events.count, 1) << "3 queued is not below 3";
    // A connected pair over the SRQ QP, through the fixture's listener.
    NDK_QP* sender = CreateQp(cq_a_, cq_a_, nullptr);
    const Connectors connectors = ConnectQps(sender, qp, 1);
    ASSERT_NE(connectors.passive, nullptr);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(sender->Dispatch->NdkSend(sender, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_SUCCESS);
    EXPECT_TRUE(WaitFor([&] { return events.count == 2; })) << "SRQ-06: fell below 3";
    EXPECT_EQ(events.last.load(), STATUS_SUCCESS) << "SRQ-08";
    ASSERT_EQ(sender->Dispatch->NdkSend(sender, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    Poll(cq_b_);
    usleep(20000);
    EXPECT_EQ(events.count, 2) << "disarmed until the next modify";
    for (NDK_OBJECT_HEADER* object :
         {&connectors.active->Header, &connectors.passive->Header, &sender->Header, &qp->Header, &srq->Header})
        Close(object);
    Pending(cq_a_);
    Pending(cq_b_);
}

TEST_P(SrqTest, SRQ_05_07_ModifyKeepsDepthForZeroAndRejectsTooDeep) {
    SrqEvents events;
    NDK_SRQ* srq = CreateSrq(4, 0, &events);
    Completion ok;
    EXPECT_EQ(ok.Wait(srq->Dispatch->NdkModifySrq(srq, 0, 0, &Completion::OnRequest, &ok)), STATUS_SUCCESS);
    Completion deep;
    EXPECT_EQ(srq->Dispatch->NdkModifySrq(srq, Info().MaxSrqDepth + 1, 0, &Completion::OnRequest, &deep),
              STATUS_INVALID_PARAMETER);
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 8);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(srq->Dispatch->NdkSrqReceive(srq, nullptr, &receive, 1), STATUS_SUCCESS);
    EXPECT_EQ(srq->Dispatch->NdkSrqReceive(srq, nullptr, &receive, 1), STATUS_INSUFFICIENT_RESOURCES) << "depth kept";
    Completion shrink;
    EXPECT_EQ(shrink.Wait(srq->Dispatch->NdkModifySrq(srq, 2, 0, &Completion::OnRequest, &shrink)),
              STATUS_INVALID_PARAMETER)
        << "cannot hold what is queued";
    Close(&srq->Header);
}

}  // namespace
}  // namespace softndk::test
