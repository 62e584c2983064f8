// Seeds each Verifier violation of issue 9 §3 and asserts the report (rule and call). Log mode: the
// offending call is reported and, for NDK calls, refused, so the test can carry on.
#include <ntddk.h>
#include <softndk_km.h>

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Reports {
    std::mutex mutex;
    std::vector<std::pair<std::string, std::string>> seen;  // rule, call
};

VOID Collect(PVOID context, const SOFTNDK_VERIFIER_REPORT* report) {
    auto* reports = static_cast<Reports*>(context);
    std::lock_guard lock(reports->mutex);
    reports->seen.emplace_back(report->Rule, report->Call);
    EXPECT_NE(std::string(report->Backtrace), "");
}

class VerifierTest : public ::testing::Test {
protected:
    void SetUp() override {
        SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_LOG);
        SoftNdkKmSetVerifierCallback(Collect, &reports_);
    }
    void TearDown() override {
        SoftNdkKmSetVerifierCallback(nullptr, nullptr);
        SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_ABORT);
    }
    bool Saw(const std::string& rule, const std::string& call) {
        std::lock_guard lock(reports_.mutex);
        for (const auto& [r, c] : reports_.seen)
            if (r == rule && c == call) return true;
        return false;
    }
    size_t Count() {
        std::lock_guard lock(reports_.mutex);
        return reports_.seen.size();
    }
    NDK_ADAPTER* Open(SOFTNDK_COMPLETION_MODE mode) {
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);
        config.CompletionMode = mode;
        NDK_ADAPTER* adapter = nullptr;
        EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_SUCCESS);
        return adapter;
    }
    Reports reports_;
};

VOID Created(PVOID context, NTSTATUS, NDK_OBJECT_HEADER* object) {
    *static_cast<NDK_OBJECT_HEADER**>(context) = object;
}
VOID CqNotify(PVOID, NTSTATUS) {}

TEST_F(VerifierTest, IRQL_WaitWithTimeoutAtDispatchLevelIsReported) {
    KEVENT event;
    KeInitializeEvent(&event, NotificationEvent, TRUE);
    KIRQL old;
    KeRaiseIrql(DISPATCH_LEVEL, &old);
    LARGE_INTEGER zero{};
    KeWaitForSingleObject(&event, Executive, KernelMode, FALSE, &zero);  // a poll is fine at DISPATCH_LEVEL
    EXPECT_EQ(Count(), 0u);
    LARGE_INTEGER timeout;
    timeout.QuadPart = -10000;
    KeWaitForSingleObject(&event, Executive, KernelMode, FALSE, &timeout);
    KeLowerIrql(old);
    EXPECT_TRUE(Saw("IRQL_NOT_LESS_OR_EQUAL", "KeWaitForSingleObject"));
}

TEST_F(VerifierTest, IRQL_PagedAllocationAndPagedCodeAtDispatchLevelAreReported) {
    KIRQL old;
    KeRaiseIrql(DISPATCH_LEVEL, &old);
    PVOID paged = ExAllocatePoolWithTag(PagedPool, 64, 'gaPT');
    PAGED_CODE();
    KeLowerIrql(old);
    ExFreePoolWithTag(paged, 'gaPT');
    EXPECT_TRUE(Saw("IRQL_NOT_LESS_OR_EQUAL", "ExAllocatePoolWithTag"));
    EXPECT_TRUE(Saw("IRQL_NOT_LESS_OR_EQUAL", "TestBody"));
}

TEST_F(VerifierTest, IRQL_SpinLockRecursionAndForeignReleaseAreReported) {
    KSPIN_LOCK lock;
    KeInitializeSpinLock(&lock);
    KIRQL old;
    KeAcquireSpinLock(&lock, &old);
    KeAcquireSpinLockAtDpcLevel(&lock);
    EXPECT_TRUE(Saw("SPIN_LOCK_ALREADY_OWNED", "KeAcquireSpinLockAtDpcLevel"));
    KeReleaseSpinLock(&lock, old);
    KIRQL other;
    KeAcquireSpinLock(&lock, &other);
    std::thread([&] {
        KeRaiseIrql(DISPATCH_LEVEL, &old);
        KeReleaseSpinLockFromDpcLevel(&lock);
        KeLowerIrql(old);
    }).join();
    EXPECT_TRUE(Saw("SPIN_LOCK_NOT_OWNED", "KeReleaseSpinLockFromDpcLevel"));
    KeReleaseSpinLock(&lock, other);
    KeLowerIrql(PASSIVE_LEVEL);
}

TEST_F(VerifierTest, CB_09_PassiveOnlyNdkFunctionAtDispatchLevelIsReported) {
    NDK_ADAPTER* adapter = Open(SOFTNDK_COMPLETION_INLINE);
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof(info);
    KIRQL old;
    KeRaiseIrql(DISPATCH_LEVEL, &old);
    adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size);
    KeLowerIrql(old);
    EXPECT_TRUE(Saw("NDK_PASSIVE_LEVEL_ONLY", "NdkQueryAdapterInfo"));
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

// The executor is held by a create completion that blocks (on a std:: condition, not a kernel wait), so the
// registration queued behind it is certainly still pending when the consumer frees its MDL.
struct Blocker {
    std::mutex mutex;
    std::condition_variable cv;
    bool release = false;
    NDK_OBJECT_HEADER* object = nullptr;
};
VOID BlockingCreated(PVOID context, NTSTATUS, NDK_OBJECT_HEADER* object) {
    auto* blocker = static_cast<Blocker*>(context);
    std::unique_lock lock(blocker->mutex);
    blocker->object = object;
    blocker->cv.wait(lock, [blocker] { return blocker->release; });
}
struct Done {
    std::atomic<bool> done{false};
};
VOID MarkDone(PVOID context, NTSTATUS) {
    static_cast<Done*>(context)->done = true;
}
VOID MarkClosed(PVOID context) {
    static_cast<Done*>(context)->done = true;
}

TEST_F(VerifierTest, MR_10_TouchingTheMdlOfAPendingRegistrationIsReported) {
    NDK_ADAPTER* adapter = Open(SOFTNDK_COMPLETION_PEND);
    Blocker pd_created;
    NDK_PD* pd = nullptr;
    ASSERT_EQ(adapter->Dispatch->NdkCreatePd(adapter, BlockingCreated, &pd_created, &pd), STATUS_PENDING);
    {
        std::unique_lock lock(pd_created.mutex);
        pd_created.release = true;
    }
    pd_created.cv.notify_all();
    while (true) {
        std::lock_guard lock(pd_created.mutex);
        if (pd_created.object != nullptr) break;
    }
    pd = reinterpret_cast<NDK_PD*>(pd_created.object);
    NDK_MR* mr_out = nullptr;  // not written after STATUS_PENDING (LIFE-02)
    Blocker mr_created;
    ASSERT_EQ(pd->Dispatch->NdkCreateMr(pd, FALSE, BlockingCreated, &mr_created, &mr_out), STATUS_PENDING);
    // The executor now blocks inside the MR's create completion until we release it.
    while (true) {
        std::lock_guard lock(mr_created.mutex);
        if (mr_created.object != nullptr) break;
    }
    auto* mr = reinterpret_cast<NDK_MR*>(mr_created.object);
    PVOID buffer = ExAllocatePoolWithTag(NonPagedPoolNx, PAGE_SIZE, 'rMTK');
    PMDL mdl = IoAllocateMdl(buffer, PAGE_SIZE, FALSE, FALSE, nullptr);
    MmBuildMdlForNonPagedPool(mdl);
    Done registered;
    ASSERT_EQ(mr->Dispatch->NdkRegisterMr(mr, mdl, PAGE_SIZE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, MarkDone, &registered),
              STATUS_PENDING);
    IoFreeMdl(mdl);  // MR-10 violation: refused in log mode, the MDL stays valid
    EXPECT_TRUE(Saw("NDK_MR_10_MDL_IN_USE", "IoFreeMdl"));
    {
        std::unique_lock lock(mr_created.mutex);
        mr_created.release = true;
    }
    mr_created.cv.notify_all();
    while (!registered.done) std::this_thread::yield();
    Done closed;
    if (mr->Dispatch->NdkCloseMr(&mr->Header, MarkClosed, &closed) == STATUS_PENDING)
        while (!closed.done) std::this_thread::yield();
    IoFreeMdl(mdl);  // now allowed
    ExFreePoolWithTag(buffer, 'rMTK');
    Done pd_closed;
    if (pd->Dispatch->NdkClosePd(&pd->Header, MarkClosed, &pd_closed) == STATUS_PENDING)
        while (!pd_closed.done) std::this_thread::yield();
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

TEST_F(VerifierTest, LIFE_05_ClosingAnObjectTwiceAndLIFE_06_UseAfterCloseAreReported) {
    NDK_ADAPTER* adapter = Open(SOFTNDK_COMPLETION_INLINE);
    NDK_OBJECT_HEADER* created = nullptr;
    NDK_PD* pd = nullptr;
    ASSERT_EQ(adapter->Dispatch->NdkCreatePd(adapter, Created, &created, &pd), STATUS_SUCCESS);
    NDK_MR* mr = nullptr;
    ASSERT_EQ(pd->Dispatch->NdkCreateMr(pd, FALSE, Created, &created, &mr), STATUS_SUCCESS);
    Done pd_closed;
    ASSERT_EQ(pd->Dispatch->NdkClosePd(&pd->Header, MarkClosed, &pd_closed), STATUS_PENDING) << "the MR is alive";
    EXPECT_EQ(pd->Dispatch->NdkClosePd(&pd->Header, MarkClosed, &pd_closed), STATUS_INVALID_PARAMETER);
    EXPECT_TRUE(Saw("NDK_LIFE_05_CLOSED_TWICE", "NdkCloseObject"));
    EXPECT_EQ(mr->Dispatch->NdkCloseMr(&mr->Header, nullptr, nullptr), STATUS_SUCCESS);
    EXPECT_TRUE(pd_closed.done);

    NDK_CQ* cq = nullptr;
    ASSERT_EQ(adapter->Dispatch->NdkCreateCq(adapter, 16, CqNotify, nullptr, nullptr, Created, &created, &cq),
              STATUS_SUCCESS);
    EXPECT_EQ(cq->Dispatch->NdkCloseCq(&cq->Header, nullptr, nullptr), STATUS_SUCCESS);
    NDK_RESULT result;
    EXPECT_EQ(cq->Dispatch->NdkGetCqResults(cq, &result, 1), 0u);  // the quarantine keeps Dispatch readable
    EXPECT_TRUE(Saw("NDK_LIFE_06_USE_AFTER_CLOSE", "NDK provider function"));
    EXPECT_EQ(cq->Dispatch->NdkCloseCq(&cq->Header, nullptr, nullptr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

TEST_F(VerifierTest, QP_05_TwoThreadsPostingToOneQueueAreReported) {
    NDK_ADAPTER* adapter = Open(SOFTNDK_COMPLETION_INLINE);
    NDK_OBJECT_HEADER* created = nullptr;
    NDK_PD* pd = nullptr;
    ASSERT_EQ(adapter->Dispatch->NdkCreatePd(adapter, Created, &created, &pd), STATUS_SUCCESS);
    NDK_CQ* cq = nullptr;
    ASSERT_EQ(adapter->Dispatch->NdkCreateCq(adapter, 64, CqNotify, nullptr, nullptr, Created, &created, &cq),
              STATUS_SUCCESS);
    NDK_QP* qp = nullptr;
    ASSERT_EQ(pd->Dispatch->NdkCreateQp(pd, cq, cq, nullptr, 16, 16, 1, 1, 0, Created, &created, &qp), STATUS_SUCCESS);
    std::atomic<bool> stop{false};
    auto poster = [&] {
        NDK_SGE sge{};
        while (!stop) {
            for (int i = 0; i < 8; ++i) qp->Dispatch->NdkReceive(qp, nullptr, &sge, 0);
            qp->Dispatch->NdkFlush(qp);
        }
    };
    std::thread a(poster), b(poster);
    for (int i = 0; i < 400 && !Saw("NDK_QP_05_CONCURRENT_POST", "NdkReceive"); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
    a.join();
    b.join();
    EXPECT_TRUE(Saw("NDK_QP_05_CONCURRENT_POST", "NdkReceive"));
    KeFlushQueuedDpcs();
    EXPECT_EQ(qp->Dispatch->NdkCloseQp(&qp->Header, nullptr, nullptr), STATUS_SUCCESS);
    Done cq_closed;
    if (cq->Dispatch->NdkCloseCq(&cq->Header, MarkClosed, &cq_closed) == STATUS_PENDING)
        while (!cq_closed.done) std::this_thread::yield();
    Done pd_closed;
    if (pd->Dispatch->NdkClosePd(&pd->Header, MarkClosed, &pd_closed) == STATUS_PENDING)
        while (!pd_closed.done) std::this_thread::yield();
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

// CB-09 through the engine's seam (engine/verifier_seam.h): a CQ notification is a job of the provider thread with
// no scope of the api's own, so only the executor's CallbackScope raises it to DISPATCH_LEVEL.
struct Notified {
    std::atomic<bool> fired{false};
    std::atomic<KIRQL> irql{PASSIVE_LEVEL};
};
VOID RecordIrql(PVOID context, NTSTATUS) {
    auto* notified = static_cast<Notified*>(context);
    notified->irql = KeGetCurrentIrql();
    notified->fired = true;
}

TEST_F(VerifierTest, CB_09_ACqNotificationOnTheProviderThreadRunsAtDispatchLevel) {
    NDK_ADAPTER* adapter = Open(SOFTNDK_COMPLETION_INLINE);
    NDK_OBJECT_HEADER* created = nullptr;
    NDK_PD* pd = nullptr;
    ASSERT_EQ(adapter->Dispatch->NdkCreatePd(adapter, Created, &created, &pd), STATUS_SUCCESS);
    Notified notified;
    NDK_CQ* cq = nullptr;
    ASSERT_EQ(adapter->Dispatch->NdkCreateCq(adapter, 16, RecordIrql, &notified, nullptr, Created, &created, &cq),
              STATUS_SUCCESS);
    NDK_QP* qp = nullptr;
    ASSERT_EQ(pd->Dispatch->NdkCreateQp(pd, cq, cq, nullptr, 16, 16, 1, 1, 0, Created, &created, &qp), STATUS_SUCCESS);
    cq->Dispatch->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);
    NDK_SGE sge{};
    ASSERT_EQ(qp->Dispatch->NdkReceive(qp, nullptr, &sge, 0), STATUS_SUCCESS);
    qp->Dispatch->NdkFlush(qp);  // the receive completes (flushed): the armed CQ notifies
    for (int i = 0; i < 400 && !notified.fired; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(notified.fired);
    EXPECT_EQ(notified.irql.load(), DISPATCH_LEVEL);
    EXPECT_EQ(qp->Dispatch->NdkCloseQp(&qp->Header, nullptr, nullptr), STATUS_SUCCESS);
    Done cq_closed;
    if (cq->Dispatch->NdkCloseCq(&cq->Header, MarkClosed, &cq_closed) == STATUS_PENDING)
        while (!cq_closed.done) std::this_thread::yield();
    Done pd_closed;
    if (pd->Dispatch->NdkClosePd(&pd->Header, MarkClosed, &pd_closed) == STATUS_PENDING)
        while (!pd_closed.done) std::this_thread::yield();
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

}  // namespace
