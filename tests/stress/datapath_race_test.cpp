// Races on the data path with real traffic. A peer thread sends NdkWrite requests at a region while the owner
// deregisters or invalidates it and frees the memory as soon as the call completes: a write after the free would
// fault (ASan) or race (TSan); the first late write is refused, the connection terminates, and each side hears of
// it exactly once. Flush races receives with every receive completing exactly once; disconnect and close race
// from both sides. No ASSERT runs while a worker thread lives. Label: concurrency (ASan and TSan runs).
#include <sys/mman.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "support/connected_pair.h"

namespace softndk::test {
namespace {

constexpr size_t kRegionPages = 4;
constexpr int kRounds = 40;

class DataPathRaceTest : public ConnectedPairTest {
protected:
    // One connection per round (a refused write ends it), with disconnect callbacks on both sides.
    struct Round {
        NDK_QP* writer_qp = nullptr;
        NDK_QP* target_qp = nullptr;
        Connectors connectors;
        DisconnectEvents writer_events;
        DisconnectEvents target_events;
    };
    void Open(Round& round) {
        round.writer_qp = CreateQp(cq_a_, cq_a_, nullptr);
        round.target_qp = CreateQp(cq_b_, cq_b_, nullptr);
        round.connectors = ConnectQps(round.writer_qp, round.target_qp, 1, &round.writer_events, &round.target_events);
    }
    void Shut(Round& round) {
        for (NDK_CONNECTOR* connector : {round.connectors.active, round.connectors.passive})
            if (connector != nullptr) Close(&connector->Header);
        Close(&round.writer_qp->Header);
        Close(&round.target_qp->Header);
        Pending(cq_a_);
        Pending(cq_b_);
    }

    // Writes (token, base) from the round's writer QP until a write is refused or `stop`; then checks that the
    // connection is over: the next write is flushed. Returns the writes that landed.
    struct Writer {
        std::atomic<uint32_t> token{0};
        std::atomic<uint64_t> base{0};
        std::atomic<bool> stop{false};
        std::atomic<long> landed{0};
        std::atomic<bool> refused{false};
        std::atomic<bool> unexpected{false};
    };
    void Write(Round& round, Writer& writer) {
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), static_cast<ULONG>(kRegionPages * PAGE_SIZE));
        while (!writer.stop.load()) {
            const NTSTATUS posted = round.writer_qp->Dispatch->NdkWrite(round.writer_qp, nullptr, &sge, 1,
                                                                        writer.base.load(), writer.token.load(), 0);
            if (posted != STATUS_SUCCESS) {
                writer.unexpected = true;
                return;
            }
            const NDK_RESULT_EX result = Poll(cq_a_);
            if (result.Status == STATUS_SUCCESS) {
                ++writer.landed;
                continue;
            }
            // The late write: refused remotely (invalid token), the connection terminated.
            if (result.Status != STATUS_INVALID_HANDLE) writer.unexpected = true;
            writer.refused = true;
            const NTSTATUS after = round.writer_qp->Dispatch->NdkWrite(round.writer_qp, nullptr, &sge, 1,
                                                                       writer.base.load(), writer.token.load(), 0);
            if (after != STATUS_SUCCESS || Poll(cq_a_).Status != STATUS_CANCELLED) writer.unexpected = true;
            return;
        }
    }
    void ExpectTerminatedOnce(Round& round, const Writer& writer) {
        EXPECT_FALSE(writer.unexpected.load());
        EXPECT_TRUE(writer.refused.load()) << "a write after the deregistration must be refused";
        EXPECT_TRUE(WaitFor([&] { return round.writer_events.count == 1 && round.target_events.count == 1; }));
        usleep(1000);
        EXPECT_EQ(round.writer_events.count, 1) << "CM-26: once";
        EXPECT_EQ(round.target_events.count, 1) << "CM-26: once";
    }
};
SOFTNDK_ALL_MODES(DataPathRaceTest);

TEST_P(DataPathRaceTest, LIFE_MR_19_DeregistrationRacingWritesNeverFreesMemoryUnderThem) {
    NDK_MR* mr = CreateMr(false);
    long landed = 0;
    for (int r = 0; r < kRounds && !HasFailure(); ++r) {
        Round round;
        Open(round);
        auto* memory = static_cast<uint8_t*>(ExAllocatePool2(POOL_FLAG_NON_PAGED, kRegionPages * PAGE_SIZE, 0));
        MDL* mdl = IoAllocateMdl(memory, kRegionPages * PAGE_SIZE, FALSE, FALSE, nullptr);
        MmBuildMdlForNonPagedPool(mdl);
        EXPECT_EQ(Register(mr, mdl, kRegionPages * PAGE_SIZE, NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
        Writer writer;
        writer.base = reinterpret_cast<uint64_t>(memory);
        writer.token = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
        std::thread peer([&] { Write(round, writer); });
        while (writer.landed.load() < 1 + r % 4 && !writer.unexpected.load()) std::this_thread::yield();
        EXPECT_EQ(Deregister(mr), STATUS_SUCCESS);  // completes only after the writes in flight
        ExFreePool(memory);                         // at once: a write landing now is a use after free
        IoFreeMdl(mdl);
        peer.join();
        ExpectTerminatedOnce(round, writer);
        landed += writer.landed;
        Shut(round);
    }
    EXPECT_GT(landed, 0);
    Close(&mr->Header);
}

TEST_P(DataPathRaceTest, LIFE_LAM_12_FR_22_InvalidationRacingWritesNeverFreesMemoryUnderThem) {
    NDK_MR* fast = CreateMr(true);
    ASSERT_EQ(InitializeFast(fast, kRegionPages, TRUE), STATUS_SUCCESS);
    std::vector<uint8_t> lam_storage(NDK_LAM_SIZE(kRegionPages));
    auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(lam_storage.data());
    constexpr uint64_t kBase = 0x600000000000ull;
    for (int r = 0; r < kRounds && !HasFailure(); ++r) {
        Round round;
        Open(round);
        auto* memory = static_cast<uint8_t*>(ExAllocatePool2(POOL_FLAG_NON_PAGED, kRegionPages * PAGE_SIZE, 0));
        MDL* mdl = IoAllocateMdl(memory, kRegionPages * PAGE_SIZE, FALSE, FALSE, nullptr);
        MmBuildMdlForNonPagedPool(mdl);
        ULONG size = static_cast<ULONG>(lam_storage.size());
        ULONG fbo = 0;
        EXPECT_EQ(BuildLam(mdl, kRegionPages * PAGE_SIZE, lam, &size, &fbo), STATUS_SUCCESS);
        EXPECT_EQ(round.target_qp->Dispatch->NdkFastRegister(
                      round.target_qp, nullptr, fast, kRegionPages, lam->AdapterPageArray, 0, kRegionPages * PAGE_SIZE,
                      reinterpret_cast<PVOID>(kBase), NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_SILENT_SUCCESS),
                  STATUS_SUCCESS);
        Writer writer;
        writer.base = kBase;
        writer.token = fast->Dispatch->NdkGetRemoteTokenFromMr(fast);
        std::thread peer([&] { Write(round, writer); });
        while (writer.landed.load() < 1 + r % 4 && !writer.unexpected.load()) std::this_thread::yield();
        EXPECT_EQ(round.target_qp->Dispatch->NdkInvalidate(round.target_qp, nullptr, &fast->Header, 0), STATUS_SUCCESS);
        // FR-22: the completion comes once the writes in flight have drained; only then is the memory freed.
        const NDK_RESULT_EX invalidated = Poll(cq_b_);
        EXPECT_EQ(invalidated.Status, STATUS_SUCCESS);
        EXPECT_EQ(invalidated.Type, NdkOperationTypeInvalidate);
        adapter_->Dispatch->NdkReleaseLAM(adapter_, lam);  // LAM-12: no request uses it any more
        ExFreePool(memory);
        IoFreeMdl(mdl);
        peer.join();
        ExpectTerminatedOnce(round, writer);
        Shut(round);
    }
    Close(&fast->Header);
}

TEST_P(DataPathRaceTest, QP_07_21_CB_20_FlushRacingReceivesCompletesEachReceiveExactlyOnce) {
    constexpr uintptr_t kReceives = 3000;
    // Its own CQ, deep enough for a full receive queue flushed on top of completions not yet drained (CQ-15).
    CqEvents events;
    NDK_CQ* cq = CreateCq(4 * kDepth, &events);
    NDK_QP* qp = CreateQp(cq, cq, nullptr);
    std::atomic<bool> stop{false};
    std::thread flusher([&] {
        while (!stop.load()) qp->Dispatch->NdkFlush(qp);
    });
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 8);
    std::multiset<uintptr_t> seen;
    bool bad_status = false, bad_post = false;
    auto drain = [&] {
        NDK_RESULT_EX results[16];
        for (ULONG got; (got = cq->Dispatch->NdkGetCqResultsEx(cq, results, 16)) != 0;)
            for (ULONG i = 0; i < got; ++i) {
                seen.insert(reinterpret_cast<uintptr_t>(results[i].RequestContext));
                if (results[i].Status != STATUS_CANCELLED) bad_status = true;
            }
    };
    for (uintptr_t context = 1; context <= kReceives; ++context) {
        NTSTATUS status;
        while ((status = qp->Dispatch->NdkReceive(qp, reinterpret_cast<PVOID>(context), &receive, 1)) ==
               STATUS_INSUFFICIENT_RESOURCES)
            drain();  // the queue is full until the flusher catches up
        if (status != STATUS_SUCCESS) bad_post = true;
        drain();
    }
    stop = true;
    flusher.join();
    qp->Dispatch->NdkFlush(qp);
    drain();
    EXPECT_FALSE(bad_post);
    EXPECT_FALSE(bad_status) << "QP-21: flushed receives complete with STATUS_CANCELLED";
    EXPECT_EQ(seen.size(), kReceives) << "every receive completes";
    for (uintptr_t context = 1; context <= kReceives; ++context)
        if (seen.count(context) != 1) {
            ADD_FAILURE() << "receive " << context << " completed " << seen.count(context) << " times";
            break;
        }
    Close(&qp->Header);
    Close(&cq->Header);
}

TEST_P(DataPathRaceTest, CM_24_26_DisconnectAndCloseRacingFromBothSides) {
    for (int r = 0; r < kRounds && !HasFailure(); ++r) {
        NDK_QP* a = CreateQp(cq_a_, cq_a_, nullptr);
        NDK_QP* b = CreateQp(cq_b_, cq_b_, nullptr);
        DisconnectEvents a_events, b_events;
        const Connectors connectors = ConnectQps(a, b, 1, &a_events, &b_events);
        NDK_CONNECTOR* active = connectors.active;
        NDK_CONNECTOR* passive = connectors.passive;
        if (passive == nullptr) {
            ADD_FAILURE() << "no connection in round " << r;
            break;
        }
        // Odd rounds: both disconnect at once; even rounds: one disconnects while the other closes.
        std::thread other([&] {
            if (r % 2 == 1) {
                Completion b_done;
                NTSTATUS status = passive->Dispatch->NdkDisconnect(passive, &Completion::OnRequest, &b_done);
                const NTSTATUS final_status = b_done.Wait(status);
                EXPECT_TRUE(final_status == STATUS_SUCCESS || final_status == STATUS_CONNECTION_INVALID);
            }
            Close(&passive->Header);
        });
        Completion a_done;
        const NTSTATUS a_status = a_done.Wait(active->Dispatch->NdkDisconnect(active, &Completion::OnRequest, &a_done));
        EXPECT_TRUE(a_status == STATUS_SUCCESS || a_status == STATUS_CONNECTION_INVALID);
        other.join();
        Close(&active->Header);
        // CM-26: a disconnect is indicated at most once, and only to a side that had not disconnected first.
        EXPECT_LE(a_events.count, 1);
        EXPECT_LE(b_events.count, 1);
        Close(&a->Header);
        Close(&b->Header);
        Pending(cq_a_);
        Pending(cq_b_);
    }
}

}  // namespace
}  // namespace softndk::test
