// Issue 21 §4: posting with NDK_OP_FLAG_DEFER in batches, as a consumer after message rate does (CB-15), keeps
// posting order (QP-01), READ_FENCE (QP-11) and the negotiated read limit (QP-19) on iWARP/TCP. Each test fails
// if a batch were handed to the wire out of order, a fenced request gathered before the earlier Reads landed, or
// a batch of Reads sent past ORD (the peer terminates beyond its IRD). Also run under TSan (label concurrency).
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "support/connected_pair.h"

namespace softndk::test {
namespace {

constexpr int kBatch = 16;  // all but the last of each batch carry NDK_OP_FLAG_DEFER

class BatchingTest : public ConnectedPairTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override { config.Transport = SOFTNDK_TRANSPORT_TCP; }
    UINT32 RemoteB() { return mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_); }
    static ULONG BatchFlag(int index) { return (index + 1) % kBatch != 0 ? NDK_OP_FLAG_DEFER : 0; }
    static PVOID Context(int index) { return reinterpret_cast<PVOID>(static_cast<uintptr_t>(index + 1)); }
};
SOFTNDK_ALL_MODES(BatchingTest);

// QP-01 under CB-15: Writes, Reads and Sends in deferred batches complete in posting order, each with its type;
// each Read brings back what the Write before it placed, and the Sends arrive in order (their first byte is their
// index).
TEST_P(BatchingTest, QP_01_CB_15_DeferredBatchesCompleteInPostingOrder) {
    constexpr int kRequests = 6 * kBatch;
    for (int i = 0; i < kRequests; ++i) {
        if (i % 3 != 2) continue;
        NDK_SGE receive = Sge(mr_b_, buffer_b_->data() + 2 * PAGE_SIZE + 64 * (i % 32), 64);
        ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, Context(i), &receive, 1), STATUS_SUCCESS);
    }
    int completed = 0, received = 0;
    for (int i = 0; i < kRequests; ++i) {
        buffer_a_->data()[PAGE_SIZE + i] = static_cast<uint8_t>(i);
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data() + PAGE_SIZE + i, 1);
        NDK_SGE sink = Sge(mr_a_, buffer_a_->data() + 64 * (i % 16), 64);
        NTSTATUS status;
        switch (i % 3) {
            case 0:
                status = qp_a_->Dispatch->NdkWrite(qp_a_, Context(i), &sge, 1, RemoteAddress(*buffer_b_, i), RemoteB(),
                                                   BatchFlag(i));
                break;
            case 1:  // reads back the byte the Write just before it put there
                buffer_a_->data()[64 * (i % 16)] = 0xFF;
                status = qp_a_->Dispatch->NdkRead(qp_a_, Context(i), &sink, 1, RemoteAddress(*buffer_b_, i - 1),
                                                  RemoteB(), BatchFlag(i));
                break;
            default:
                status = qp_a_->Dispatch->NdkSend(qp_a_, Context(i), &sge, 1, BatchFlag(i));
                break;
        }
        ASSERT_EQ(status, STATUS_SUCCESS) << i;
        if (BatchFlag(i) != 0) continue;
        for (; completed <= i; ++completed) {
            const NDK_RESULT_EX result = Poll(cq_a_);
            ASSERT_EQ(result.Status, STATUS_SUCCESS) << completed;
            ASSERT_EQ(result.RequestContext, Context(completed)) << "posting order";
            const NDK_OPERATION_TYPE type = completed % 3 == 0   ? NdkOperationTypeWrite
                                            : completed % 3 == 1 ? NdkOperationTypeRead
                                                                 : NdkOperationTypeSend;
            ASSERT_EQ(result.Type, type) << completed;
            if (completed % 3 == 1) {  // the target saw the Write before the Read behind it
                ASSERT_EQ(buffer_a_->data()[64 * (completed % 16)], static_cast<uint8_t>(completed - 1)) << completed;
            }
        }
    }
    for (int i = 2; i < kRequests; i += 3, ++received) {
        const NDK_RESULT_EX result = Poll(cq_b_);
        ASSERT_EQ(result.Status, STATUS_SUCCESS);
        ASSERT_EQ(result.RequestContext, Context(i)) << "receives in order";
        EXPECT_EQ(result.BytesTransferred, 1u);
        EXPECT_EQ(buffer_b_->data()[2 * PAGE_SIZE + 64 * (i % 32)], static_cast<uint8_t>(i)) << "Sends in order";
    }
    for (int i = 0; i < kRequests; i += 3) EXPECT_EQ(buffer_b_->data()[i], static_cast<uint8_t>(i)) << "Write " << i;
    EXPECT_EQ(received, kRequests / 3);
}

// QP-11 under CB-15: in one deferred batch, a Read brings a value into A's buffer and the fenced Write behind it
// sends that buffer on; the Write must carry the value the Read brought, never the stale bytes before it.
// (Without the fence the Write's gather would race the Read Response: the check below sees zeros.)
TEST_P(BatchingTest, QP_11_CB_15_ReadFenceHoldsInsideADeferredBatch) {
    for (int round = 0; round < 40; ++round) {
        const auto value = static_cast<uint8_t>(0x30 + round);
        std::memset(buffer_b_->data(), value, 256);
        std::memset(buffer_b_->data() + PAGE_SIZE, 0, 256);
        std::memset(buffer_a_->data(), 0, 256);
        NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 256);
        ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, Context(0), &sink, 1, RemoteAddress(*buffer_b_), RemoteB(),
                                           NDK_OP_FLAG_DEFER),
                  STATUS_SUCCESS);
        ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, Context(1), &sink, 1, RemoteAddress(*buffer_b_, PAGE_SIZE),
                                            RemoteB(), NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER),
                  STATUS_SUCCESS);
        // A Write's completion says its source may be reused, not that it was placed: the check Reads the
        // target back, and that Read's Response follows the Write's bytes on the stream.
        std::memset(buffer_a_->data() + 1024, 0, 256);
        NDK_SGE check = Sge(mr_a_, buffer_a_->data() + 1024, 256);
        ASSERT_EQ(
            qp_a_->Dispatch->NdkRead(qp_a_, Context(2), &check, 1, RemoteAddress(*buffer_b_, PAGE_SIZE), RemoteB(), 0),
            STATUS_SUCCESS);
        for (int i = 0; i < 3; ++i) {
            const NDK_RESULT_EX result = Poll(cq_a_);
            ASSERT_EQ(result.Status, STATUS_SUCCESS);
            ASSERT_EQ(result.RequestContext, Context(i)) << "round " << round;
        }
        EXPECT_EQ(buffer_a_->data()[1024], value) << "round " << round << ": the fenced Write ran before the Read";
        EXPECT_EQ(buffer_a_->data()[1024 + 255], value) << "round " << round;
    }
}

// QP-19 under CB-15: with read limits of 1 each way, 64 Reads posted in deferred batches go one at a time (the
// peer, at IRD 1, would terminate a second outstanding one) and all complete, in order.
TEST_P(BatchingTest, QP_19_CB_15_DeferredReadsStayWithinTheNegotiatedLimit) {
    NDK_QP* a = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* b = CreateQp(cq_b_, cq_b_, nullptr);
    const Connectors connectors = ConnectQps(a, b, 1);
    ASSERT_NE(connectors.passive, nullptr);
    constexpr int kReads = 4 * kBatch;
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 4096);
    for (int i = 0; i < kReads; ++i) {
        ASSERT_EQ(a->Dispatch->NdkRead(a, Context(i), &sink, 1, RemoteAddress(*buffer_b_), RemoteB(), BatchFlag(i)),
                  STATUS_SUCCESS)
            << i;
    }
    for (int i = 0; i < kReads; ++i) {
        const NDK_RESULT_EX result = Poll(cq_a_);
        EXPECT_EQ(result.Status, STATUS_SUCCESS) << i << ": the peer terminated (a Read beyond its IRD?)";
        EXPECT_EQ(result.RequestContext, Context(i));
    }
    // The connection is still up: one more Read completes.
    ASSERT_EQ(a->Dispatch->NdkRead(a, Context(kReads), &sink, 1, RemoteAddress(*buffer_b_), RemoteB(), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS) << "the connection did not survive the deferred Reads";
    for (NDK_OBJECT_HEADER* object : {&connectors.active->Header, &connectors.passive->Header, &a->Header, &b->Header})
        Close(object);
}

// Issue 34 §1.3 (MR-19, CB-15): a Read posted with NDK_OP_FLAG_DEFER, with the backstop off (DeferBackstopMs 0,
// as a hardware doorbell), waits for the consumer's doorbell, not for the peer. The stall check must not count it
// as the peer's debt: held for several stall timeouts and then rung, it completes with success and the connection
// stays up. Before the fix the stream was reset as "connection lost" after PeerStallTimeoutMs and the Read
// completed STATUS_CANCELLED.
class DeferredStallTest : public BatchingTest {
protected:
    static constexpr ULONG kStallMs = 200;
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        BatchingTest::Customize(config);
        config.PeerStallTimeoutMs = kStallMs;
        config.DeferBackstopMs = 0;  // only the consumer rings
    }
};
SOFTNDK_ALL_MODES(DeferredStallTest);

TEST_P(DeferredStallTest, MR_19_CB_15_ADeferredReadHeldPastTheStallTimeoutCompletesOnceRung) {
    std::memset(buffer_b_->data(), 0x3C, 128);
    std::memset(buffer_a_->data(), 0, 128);
    NDK_SGE first = Sge(mr_a_, buffer_a_->data(), 64);
    NDK_SGE second = Sge(mr_a_, buffer_a_->data() + 64, 64);
    ASSERT_EQ(
        qp_a_->Dispatch->NdkRead(qp_a_, Context(0), &first, 1, RemoteAddress(*buffer_b_), RemoteB(), NDK_OP_FLAG_DEFER),
        STATUS_SUCCESS);
    // A stall is cut between one and one and a quarter timeouts after it began: four are well past it.
    std::this_thread::sleep_for(std::chrono::milliseconds(4 * kStallMs));
    EXPECT_EQ(Pending(cq_a_), 0u) << "the deferred Read completed before its doorbell (flushed?)";
    EXPECT_EQ(disconnects_a_.count, 0) << "the stream was ended while the consumer held the Read";
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, Context(1), &second, 1, RemoteAddress(*buffer_b_, 64), RemoteB(), 0),
              STATUS_SUCCESS);  // the doorbell
    for (int i = 0; i < 2; ++i) {
        const NDK_RESULT_EX result = Poll(cq_a_);
        EXPECT_EQ(result.Status, STATUS_SUCCESS)
            << i << ": ProviderErrorCode 0x" << std::hex << result.ProviderErrorCode;
        EXPECT_EQ(result.RequestContext, Context(i));
    }
    for (int i = 0; i < 128; ++i) ASSERT_EQ(buffer_a_->data()[i], 0x3C) << i;
}

}  // namespace
}  // namespace softndk::test
