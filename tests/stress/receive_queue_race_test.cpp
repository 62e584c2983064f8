// Review finding 1: a delivery must own the receive it reads. The consumer refills a full receive queue from its
// own thread while the peer sends from another (QP-05 serialises only each queue's own posts), and an SRQ is
// resized under traffic. Before the fix the inbound side read the SGEs from the ring slot after dropping the
// lock: TSan reports the race, ASan the use after free of a resized ring, and the data check a misplaced message.
// Label: concurrency (ASan and TSan runs).
#include <atomic>
#include <cstring>
#include <thread>

#include "support/connected_pair.h"

namespace softndk::test {
namespace {

constexpr ULONG kMessage = 64;
constexpr ULONG kSlots = 32;  // receive buffers, reused round-robin once their completion is verified
constexpr int kMessages = 3000;

class ReceiveQueueRaceTest : public ConnectedPairTest {
protected:
    // A small queue so that it is full before every send.
    static constexpr ULONG kQueueDepth = 4;

    NDK_QP* CreateSmallQp(NDK_CQ* cq, PVOID context) {
        Completion done;
        NDK_QP* qp = nullptr;
        EXPECT_EQ(done.Wait(pd_->Dispatch->NdkCreateQp(pd_, cq, cq, context, kQueueDepth, kDepth, 1, 1, 0,
                                                       &Completion::OnCreate, &done, &qp)),
                  STATUS_SUCCESS);
        return qp != nullptr ? qp : reinterpret_cast<NDK_QP*>(done.object());
    }
    NDK_SRQ* CreateSrq(ULONG depth) {
        Completion done;
        NDK_SRQ* srq = nullptr;
        EXPECT_EQ(done.Wait(pd_->Dispatch->NdkCreateSrq(pd_, depth, 1, 0, nullptr, nullptr, nullptr,
                                                        &Completion::OnCreate, &done, &srq)),
                  STATUS_SUCCESS);
        return srq != nullptr ? srq : reinterpret_cast<NDK_SRQ*>(done.object());
    }

    // The sender waits until the receiver has `kQueueDepth` receives queued beyond what was sent, so every send
    // pops a full queue; the receiver refills the popped slot at once, spinning on STATUS_INSUFFICIENT_RESOURCES.
    // `post(context, sge)` posts one receive; `resize()` (optional) runs between receiver iterations.
    template <class Post, class Resize>
    void Run(NDK_QP* sender, NDK_CQ* sender_cq, NDK_CQ* receive_cq, Post post, Resize resize, ULONG window) {
        std::atomic<int> posted{0};
        std::atomic<int> verified{0};
        std::atomic<bool> failed{false};
        std::thread receiver([&] {
            int next = 0;
            while (verified.load() < kMessages && !failed.load()) {
                if (next < kMessages && next - verified.load() < static_cast<int>(kSlots - window)) {
                    NDK_SGE sge = Sge(mr_b_, buffer_b_->data() + (next % kSlots) * kMessage, kMessage);
                    const NTSTATUS status = post(reinterpret_cast<PVOID>(static_cast<uintptr_t>(next + 1)), sge);
                    if (status == STATUS_SUCCESS) {
                        posted.store(++next);
                    } else if (status != STATUS_INSUFFICIENT_RESOURCES) {
                        ADD_FAILURE() << "post returned 0x" << std::hex << status;
                        failed = true;
                    }
                }
                NDK_RESULT_EX result{};
                if (receive_cq->Dispatch->NdkGetCqResultsEx(receive_cq, &result, 1) == 1) {
                    const int expected = verified.load();
                    const uint8_t* data = buffer_b_->data() + (expected % kSlots) * kMessage;
                    if (result.Status != STATUS_SUCCESS ||
                        result.RequestContext != reinterpret_cast<PVOID>(static_cast<uintptr_t>(expected + 1)) ||
                        data[0] != static_cast<uint8_t>(expected) ||
                        data[kMessage - 1] != static_cast<uint8_t>(expected)) {
                        ADD_FAILURE() << "receive " << expected << ": status 0x" << std::hex << result.Status
                                      << std::dec << ", context " << result.RequestContext << ", first byte "
                                      << int(data[0]);
                        failed = true;
                    }
                    verified.store(expected + 1);
                }
                resize();
            }
        });
        for (int message = 0; message < kMessages && !failed.load(); ++message) {
            while (posted.load() < std::min(kMessages, message + static_cast<int>(window)) && !failed.load())
                std::this_thread::yield();
            std::memset(buffer_a_->data(), static_cast<uint8_t>(message), kMessage);
            NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), kMessage);
            EXPECT_EQ(sender->Dispatch->NdkSend(sender, nullptr, &sge, 1, 0), STATUS_SUCCESS);
            EXPECT_EQ(Poll(sender_cq).Status, STATUS_SUCCESS);
        }
        receiver.join();
        EXPECT_FALSE(failed.load());
        EXPECT_EQ(verified.load(), kMessages);
    }
};
SOFTNDK_ALL_MODES(ReceiveQueueRaceTest);

TEST_P(ReceiveQueueRaceTest, QP_05_FullReceiveQueueRefilledWhileThePeerSends) {
    NDK_CQ* send_cq = CreateCq(kDepth, &cq_events_a_);
    NDK_CQ* receive_cq = CreateCq(kDepth, &cq_events_b_);
    NDK_QP* sender = CreateSmallQp(send_cq, nullptr);
    NDK_QP* receiver = CreateSmallQp(receive_cq, nullptr);
    Connectors connectors = ConnectQps(sender, receiver);
    ASSERT_NE(connectors.passive, nullptr);
    Run(
        sender, send_cq, receive_cq,
        [&](PVOID context, NDK_SGE& sge) { return receiver->Dispatch->NdkReceive(receiver, context, &sge, 1); }, [] {},
        kQueueDepth);
    for (NDK_CONNECTOR* connector : {connectors.active, connectors.passive}) Close(&connector->Header);
    for (NDK_QP* qp : {sender, receiver}) Close(&qp->Header);
    for (NDK_CQ* cq : {send_cq, receive_cq}) Close(&cq->Header);
}

TEST_P(ReceiveQueueRaceTest, SRQ_05_SrqResizedUnderTraffic) {
    NDK_CQ* send_cq = CreateCq(kDepth, &cq_events_a_);
    NDK_CQ* receive_cq = CreateCq(kDepth, &cq_events_b_);
    NDK_SRQ* srq = CreateSrq(8);
    NDK_QP* sender = CreateSmallQp(send_cq, nullptr);
    Completion made;
    NDK_QP* receiver = nullptr;
    ASSERT_EQ(made.Wait(pd_->Dispatch->NdkCreateQpWithSrq(pd_, receive_cq, receive_cq, srq, nullptr, kDepth, 1, 0,
                                                          &Completion::OnCreate, &made, &receiver)),
              STATUS_SUCCESS);
    if (receiver == nullptr) receiver = reinterpret_cast<NDK_QP*>(made.object());
    Connectors connectors = ConnectQps(sender, receiver);
    ASSERT_NE(connectors.passive, nullptr);
    int round = 0;
    Run(
        sender, send_cq, receive_cq,
        [&](PVOID context, NDK_SGE& sge) { return srq->Dispatch->NdkSrqReceive(srq, context, &sge, 1); },
        [&] {
            // Alternate between two depths, each at least the window, so the ring is reallocated under traffic.
            Completion modified;
            const ULONG depth = (++round % 2) != 0 ? 16 : 8;
            const NTSTATUS status =
                modified.Wait(srq->Dispatch->NdkModifySrq(srq, depth, 0, &Completion::OnRequest, &modified));
            EXPECT_TRUE(status == STATUS_SUCCESS || status == STATUS_INVALID_PARAMETER) << std::hex << status;
        },
        8);
    for (NDK_CONNECTOR* connector : {connectors.active, connectors.passive}) Close(&connector->Header);
    for (NDK_QP* qp : {sender, receiver}) Close(&qp->Header);
    Close(&srq->Header);
    for (NDK_CQ* cq : {send_cq, receive_cq}) Close(&cq->Header);
}

}  // namespace
}  // namespace softndk::test
