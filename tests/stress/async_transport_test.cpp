// Issue 7 §1: the engine over a transport that completes requests later (the deferred in-process link, which
// hands every request to a delivery thread as a wire would). Posting order of completions, READ_FENCE (QP-11),
// the outbound read limit (QP-19), flush of requests not yet started (QP-21), terminate and close under
// traffic. Label: concurrency (ASan and TSan runs).
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "support/connected_pair.h"

namespace softndk::test {
namespace {

class AsyncTransportTest : public ConnectedPairTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Transport = SOFTNDK_TRANSPORT_IN_PROCESS_DEFERRED;
    }
    UINT32 RemoteB() { return mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_); }
    // Connects a fresh pair with the given read limit; the fixture's pair uses 8.
    Connectors Pair(NDK_QP** a, NDK_QP** b, ULONG read_limit) {
        *a = CreateQp(cq_a_, cq_a_, nullptr);
        *b = CreateQp(cq_b_, cq_b_, nullptr);
        return ConnectQps(*a, *b, read_limit);
    }
};
SOFTNDK_ALL_MODES(AsyncTransportTest);

TEST_P(AsyncTransportTest, QP_01_04_CompletionsComeLaterInPostingOrderAndTheQueueDepthHolds) {
    constexpr int kRequests = 240;
    constexpr int kBatch = 48;  // below the QP's initiator depth (64) and its CQ's depth
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 256);
    int completed = 0;
    for (int first = 0; first < kRequests; first += kBatch) {
        for (int i = first; i < first + kBatch; ++i) {
            const auto context = reinterpret_cast<PVOID>(static_cast<uintptr_t>(i + 1));
            NTSTATUS status =
                i % 3 == 2
                    ? qp_a_->Dispatch->NdkRead(qp_a_, context, &sge, 1, RemoteAddress(*buffer_b_), RemoteB(), 0)
                    : qp_a_->Dispatch->NdkWrite(qp_a_, context, &sge, 1, RemoteAddress(*buffer_b_), RemoteB(), 0);
            ASSERT_EQ(status, STATUS_SUCCESS);
        }
        for (; completed < first + kBatch; ++completed) {
            const NDK_RESULT_EX result = Poll(cq_a_);
            ASSERT_EQ(result.Status, STATUS_SUCCESS) << completed;
            ASSERT_EQ(result.RequestContext, reinterpret_cast<PVOID>(static_cast<uintptr_t>(completed + 1)))
                << "posting order";
            ASSERT_EQ(result.Type, completed % 3 == 2 ? NdkOperationTypeRead : NdkOperationTypeWrite);
        }
    }
}

// QP-11: a fenced write sends what earlier reads brought in, although every request is handed over at once.
TEST_P(AsyncTransportTest, QP_11_ReadFenceWaitsForEarlierReads) {
    for (int round = 0; round < 50; ++round) {
        const auto value = static_cast<uint8_t>(0x20 + round);
        std::memset(buffer_b_->data(), value, 64);
        std::memset(buffer_a_->data(), 0, 64);
        std::memset(buffer_b_->data() + 128, 0, 64);
        NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 64);
        ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sink, 1, RemoteAddress(*buffer_b_), RemoteB(), 0),
                  STATUS_SUCCESS);
        ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sink, 1, RemoteAddress(*buffer_b_, 128), RemoteB(),
                                            NDK_OP_FLAG_READ_FENCE),
                  STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_a_).Type, NdkOperationTypeRead);
        EXPECT_EQ(Poll(cq_a_).Type, NdkOperationTypeWrite);
        EXPECT_EQ(buffer_b_->data()[128 + 63], value) << "round " << round << ": the write ran before the read";
    }
}

// QP-19: with an outbound read limit of 1, reads never overlap (the second starts after the first completed),
// and none fails for it: they wait, then complete in order.
TEST_P(AsyncTransportTest, QP_19_OutstandingReadsStayWithinTheNegotiatedLimit) {
    NDK_QP* a = nullptr;
    NDK_QP* b = nullptr;
    const Connectors connectors = Pair(&a, &b, 1);
    ASSERT_NE(connectors.passive, nullptr);
    constexpr int kReads = 64;
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 4096);
    for (int i = 0; i < kReads; ++i)
        ASSERT_EQ(a->Dispatch->NdkRead(a, reinterpret_cast<PVOID>(static_cast<uintptr_t>(i + 1)), &sink, 1,
                                       RemoteAddress(*buffer_b_), RemoteB(), 0),
                  STATUS_SUCCESS);
    for (int i = 0; i < kReads; ++i) {
        const NDK_RESULT_EX result = Poll(cq_a_);
        EXPECT_EQ(result.Status, STATUS_SUCCESS);
        EXPECT_EQ(result.RequestContext, reinterpret_cast<PVOID>(static_cast<uintptr_t>(i + 1)));
    }
    for (NDK_OBJECT_HEADER* object : {&connectors.active->Header, &connectors.passive->Header, &a->Header, &b->Header})
        Close(object);
}

// QP-21 / flush on error: requests held behind a fence when the connection terminates complete flushed, in order,
// and the QP is reusable for nothing (CM-28) but closes cleanly.
TEST_P(AsyncTransportTest, QP_21_TerminateFlushesRequestsNotYetStarted) {
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, reinterpret_cast<PVOID>(1), &sink, 1, RemoteAddress(*buffer_b_),
                                       RemoteB() ^ 0x3C, 0),  // a stale key: the peer terminates
              STATUS_SUCCESS);
    for (uintptr_t i = 2; i <= 20; ++i)
        ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, reinterpret_cast<PVOID>(i), &sink, 1, RemoteAddress(*buffer_b_),
                                            RemoteB(), NDK_OP_FLAG_READ_FENCE),
                  STATUS_SUCCESS);
    const NDK_RESULT_EX refused = Poll(cq_a_);
    EXPECT_EQ(refused.RequestContext, reinterpret_cast<PVOID>(1));
    EXPECT_EQ(refused.Status, STATUS_INVALID_HANDLE);
    for (uintptr_t i = 2; i <= 20; ++i) {
        const NDK_RESULT_EX flushed = Poll(cq_a_);
        EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(i));
        EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
    }
    EXPECT_TRUE(WaitFor([&] { return disconnects_a_.count == 1 && disconnects_b_.count == 1; }));
}

// QP-13: INLINE data is copied when the request is handed over; the consumer reuses its buffer at once.
TEST_P(AsyncTransportTest, QP_13_InlineDataIsTakenAtPostTime) {
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    uint8_t scratch[32];
    std::memset(scratch, 0x61, sizeof(scratch));
    NDK_SGE sge{};
    sge.VirtualAddress = scratch;
    sge.Length = sizeof(scratch);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, NDK_OP_FLAG_INLINE), STATUS_SUCCESS);
    std::memset(scratch, 0x7A, sizeof(scratch));  // the consumer's buffer is its own again
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    const NDK_RESULT_EX received = Poll(cq_b_);
    EXPECT_EQ(received.BytesTransferred, sizeof(scratch));
    EXPECT_EQ(buffer_b_->data()[31], 0x61) << "the bytes of the post, not the later ones";
}

// QP-07/08: closing both connectors while a poster keeps handing requests over; every request completes (success
// or flushed), nothing runs into a torn-down QP, and the closes complete.
TEST_P(AsyncTransportTest, QP_07_08_CloseUnderHandedOverTraffic) {
    for (int round = 0; round < 20 && !HasFailure(); ++round) {
        CqEvents events;
        NDK_CQ* cq = CreateCq(4096, &events);  // deep enough for everything flushed at the close
        NDK_QP* a = CreateQp(cq, cq, nullptr);
        NDK_QP* b = CreateQp(cq_b_, cq_b_, nullptr);
        Connectors connectors = ConnectQps(a, b, 4);
        if (connectors.passive == nullptr) break;
        std::atomic<bool> stop{false};
        std::atomic<int> posted{0};
        std::thread poster([&] {
            NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 512);
            NDK_RESULT_EX results[64];
            while (!stop.load()) {
                const NTSTATUS status = a->Dispatch->NdkWrite(a, nullptr, &sge, 1, RemoteAddress(*buffer_b_), RemoteB(),
                                                              round % 2 ? NDK_OP_FLAG_READ_FENCE : 0);
                // A full initiator queue refuses inline (QP-01) until completions drain it.
                if (status == STATUS_SUCCESS)
                    ++posted;
                else if (status != STATUS_CONNECTION_INVALID && status != STATUS_INSUFFICIENT_RESOURCES)
                    ADD_FAILURE() << std::hex << status;
                while (cq->Dispatch->NdkGetCqResultsEx(cq, results, 64) != 0) {
                }
            }
        });
        while (posted.load() < 50) std::this_thread::yield();
        Close(&connectors.passive->Header);
        Close(&connectors.active->Header);
        stop = true;
        poster.join();
        Close(&a->Header);
        Close(&b->Header);
        Close(&cq->Header);
        Pending(cq_b_);
    }
}

// Over iWARP/TCP, NDK_OP_FLAG_DEFER bursts race the close of the poster's connector (CB-15, QP-08): a burst's
// last post rings the doorbell on the posting thread, a deferred post may arm the 10 ms backstop (CB-19), and the
// close may come before the burst's last post, between them, or while the backstop runs. Every request the QP accepted
// completes exactly once, sent or flushed. In the stalled variant the wire stops inside an FPDU after 40,003 bytes (a
// wire fault), so the close always finds deferred bursts queued and flushes them.
template <bool kStalled>
class TcpDeferRace : public AsyncTransportTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Transport = SOFTNDK_TRANSPORT_TCP;
        if (kStalled) config.WireFaults.StallAfterBytes = 40003;
    }
    void Run();
};
using TcpDeferRaceTest = TcpDeferRace<false>;
using TcpStalledDeferRaceTest = TcpDeferRace<true>;
SOFTNDK_ALL_MODES(TcpDeferRaceTest);
SOFTNDK_ALL_MODES(TcpStalledDeferRaceTest);

template <bool kStalled>
void TcpDeferRace<kStalled>::Run() {
    for (int round = 0; round < 10 && !HasFailure(); ++round) {
        CqEvents events;
        NDK_CQ* cq = CreateCq(4096, &events);
        NDK_QP* a = CreateQp(cq, cq, nullptr);
        NDK_QP* b = CreateQp(cq_b_, cq_b_, nullptr);
        Connectors connectors = ConnectQps(a, b, 4);
        if (connectors.passive == nullptr) break;
        std::atomic<bool> stop{false};
        std::atomic<long> posted{0}, completed{0};
        std::thread poster([&] {
            NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), kStalled ? 4096 : 64);
            NDK_RESULT_EX results[64];
            for (long burst = 0; !stop.load(); ++burst) {
                const int length = 1 + static_cast<int>(burst % 8);  // the last post of a burst rings
                for (int i = 0; i < length; ++i) {
                    const ULONG flags = i + 1 < length ? NDK_OP_FLAG_DEFER : 0;
                    const NTSTATUS status =
                        a->Dispatch->NdkWrite(a, nullptr, &sge, 1, RemoteAddress(*buffer_b_), RemoteB(), flags);
                    if (status == STATUS_SUCCESS)
                        ++posted;
                    else if (status != STATUS_CONNECTION_INVALID && status != STATUS_INSUFFICIENT_RESOURCES)
                        ADD_FAILURE() << std::hex << status;
                }
                ULONG got;
                while ((got = cq->Dispatch->NdkGetCqResultsEx(cq, results, 64)) != 0) {
                    for (ULONG i = 0; i < got; ++i)
                        if (results[i].Status != STATUS_SUCCESS && results[i].Status != STATUS_CANCELLED)
                            ADD_FAILURE() << std::hex << results[i].Status;
                    completed += got;
                }
            }
        });
        while (posted.load() < 20 + round * 5) std::this_thread::yield();
        Close(&connectors.active->Header);  // the poster's side, under its bursts
        Close(&connectors.passive->Header);
        stop = true;
        poster.join();
        NDK_RESULT_EX results[64];
        EXPECT_TRUE(WaitFor([&] {
            completed += cq->Dispatch->NdkGetCqResultsEx(cq, results, 64);
            return completed.load() >= posted.load();
        })) << completed.load()
            << " of " << posted.load() << " completed";
        usleep(5000);
        completed += cq->Dispatch->NdkGetCqResultsEx(cq, results, 64);
        EXPECT_EQ(completed.load(), posted.load()) << "each accepted request completes once";
        Close(&a->Header);
        Close(&b->Header);
        Close(&cq->Header);
        Pending(cq_b_);
    }
}

TEST_P(TcpDeferRaceTest, CB_15_QP_08_DeferredBurstsRacingConnectorCloseAllCompleteOnce) {
    Run();
}
TEST_P(TcpStalledDeferRaceTest, CB_15_QP_08_DeferredBurstsQueuedAtConnectorCloseAreFlushedOnce) {
    Run();
}

}  // namespace
}  // namespace softndk::test
