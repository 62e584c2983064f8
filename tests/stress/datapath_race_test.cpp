// Issue 3 §7: deregistration and invalidation racing in-flight work never free memory under it. Writer threads
// run inbound writes exactly as the engine does (one access check, then a copy into the granted pages) while
// the owner deregisters or invalidates and unmaps the memory as soon as the call completes. A write after the
// unmap would fault (ASan reports it; TSan reports the race). Label: concurrency (ASan and TSan runs).
#include <sys/mman.h>

#include <atomic>
#include <thread>
#include <vector>

#include "api/objects.h"
#include "engine/data_mover.h"
#include "support/connected_pair.h"

namespace softndk::test {
namespace {

constexpr int kWriters = 2;
constexpr size_t kRegionPages = 4;

struct Writers {
    Writers(mem::TokenTable& tokens, const void* pd) : tokens(tokens), pd(pd), source(kRegionPages * PAGE_SIZE, 0x5C) {}
    void Start() {
        for (int i = 0; i < kWriters; ++i) {
            // Each writer owns a slice: concurrent writes to the same bytes are legal RDMA but not the question here.
            const uint64_t slice = kRegionPages * PAGE_SIZE / kWriters;
            threads.emplace_back([this, i, slice] {
                engine::PieceList from;
                engine::PieceList to;
                while (!stop.load(std::memory_order_acquire)) {
                    const uint32_t token = current_token.load(std::memory_order_acquire);
                    const uint64_t base = current_base.load(std::memory_order_acquire);
                    const uint64_t address = base + i * slice;
                    mem::TokenRef grant;
                    if (token == 0 ||
                        mem::CheckAccess(tokens,
                                         {token, mem::TokenKind::kRemote, pd, address, slice, mem::kRightRemoteWrite},
                                         &grant) != mem::AccessError::kNone)
                        continue;
                    from.Clear();
                    to.Clear();
                    from.Add(source.data(), slice);
                    to.AddRange(std::move(grant), address, slice);
                    engine::CopyPieces(from, to);
                    to.Clear();  // the grant goes with the access, as in the engine
                    ++writes;
                }
            });
        }
    }
    void Stop() {
        stop = true;
        for (auto& thread : threads) thread.join();
    }
    mem::TokenTable& tokens;
    const void* pd;
    std::vector<uint8_t> source;
    std::atomic<uint32_t> current_token{0};
    std::atomic<uint64_t> current_base{0};
    std::atomic<bool> stop{false};
    std::atomic<long> writes{0};
    std::vector<std::thread> threads;
};

class DataPathRaceTest : public ConnectedPairTest {};
SOFTNDK_ALL_MODES(DataPathRaceTest);

TEST_P(DataPathRaceTest, LIFE_DeregistrationRacingInboundWritesNeverFreesMemoryUnderThem) {
    Writers writers(api::FromHandle<api::AdapterObject>(adapter_)->tokens, pd_);
    writers.Start();
    NDK_MR* mr = CreateMr(false);
    for (int round = 0; round < 150; ++round) {
        auto* memory = static_cast<uint8_t*>(ExAllocatePool2(POOL_FLAG_NON_PAGED, kRegionPages * PAGE_SIZE, 0));
        ASSERT_NE(memory, nullptr);
        MDL* mdl = IoAllocateMdl(memory, kRegionPages * PAGE_SIZE, FALSE, FALSE, nullptr);
        MmBuildMdlForNonPagedPool(mdl);
        ASSERT_EQ(Register(mr, mdl, kRegionPages * PAGE_SIZE, NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
        writers.current_base = reinterpret_cast<uint64_t>(memory);
        writers.current_token = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
        std::this_thread::yield();
        ASSERT_EQ(Deregister(mr), STATUS_SUCCESS);  // returns (or completes) only after in-flight writes
        ExFreePool(memory);                         // unmapped at once
        IoFreeMdl(mdl);
    }
    writers.Stop();
    EXPECT_GT(writers.writes.load(), 0);
    Close(&mr->Header);
}

TEST_P(DataPathRaceTest, LIFE_InvalidationRacingInboundWritesNeverFreesMemoryUnderThem) {
    Writers writers(api::FromHandle<api::AdapterObject>(adapter_)->tokens, pd_);
    writers.Start();
    NDK_MR* fast = CreateMr(true);
    ASSERT_EQ(InitializeFast(fast, kRegionPages, TRUE), STATUS_SUCCESS);
    std::vector<uint8_t> lam_storage(NDK_LAM_SIZE(kRegionPages));
    auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(lam_storage.data());
    constexpr uint64_t kBase = 0x600000000000ull;
    for (int round = 0; round < 150; ++round) {
        auto* memory = static_cast<uint8_t*>(ExAllocatePool2(POOL_FLAG_NON_PAGED, kRegionPages * PAGE_SIZE, 0));
        MDL* mdl = IoAllocateMdl(memory, kRegionPages * PAGE_SIZE, FALSE, FALSE, nullptr);
        MmBuildMdlForNonPagedPool(mdl);
        ULONG size = static_cast<ULONG>(lam_storage.size());
        ULONG fbo = 0;
        ASSERT_EQ(BuildLam(mdl, kRegionPages * PAGE_SIZE, lam, &size, &fbo), STATUS_SUCCESS);
        ASSERT_EQ(qp_b_->Dispatch->NdkFastRegister(qp_b_, nullptr, fast, kRegionPages, lam->AdapterPageArray, 0,
                                                   kRegionPages * PAGE_SIZE, reinterpret_cast<PVOID>(kBase),
                                                   NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_SILENT_SUCCESS),
                  STATUS_SUCCESS);
        writers.current_base = kBase;
        writers.current_token = fast->Dispatch->NdkGetRemoteTokenFromMr(fast);
        std::this_thread::yield();
        ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &fast->Header, 0), STATUS_SUCCESS);
        // FR-22: the completion comes once the accesses in flight have drained; only then is the memory free.
        const NDK_RESULT_EX invalidated = Poll(cq_b_);
        ASSERT_EQ(invalidated.Status, STATUS_SUCCESS);
        ASSERT_EQ(invalidated.Type, NdkOperationTypeInvalidate);
        adapter_->Dispatch->NdkReleaseLAM(adapter_, lam);  // LAM-12: no request uses it any more
        ExFreePool(memory);
        IoFreeMdl(mdl);
    }
    writers.Stop();
    EXPECT_GT(writers.writes.load(), 0);
    EXPECT_EQ(Pending(cq_b_), 0u);
    Close(&fast->Header);
}

TEST_P(DataPathRaceTest, QP_07_CB_20_FlushAndPostsRaceSafely) {
    std::atomic<bool> stop{false};
    std::thread flusher([&] {
        while (!stop) qp_b_->Dispatch->NdkFlush(qp_b_);
    });
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 8);
    for (int i = 0; i < 2000; ++i) {
        NTSTATUS status = qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1);
        ASSERT_TRUE(status == STATUS_SUCCESS || status == STATUS_INSUFFICIENT_RESOURCES);
        Pending(cq_b_);
    }
    stop = true;
    flusher.join();
    qp_b_->Dispatch->NdkFlush(qp_b_);
    Pending(cq_b_);
}

TEST_P(DataPathRaceTest, CM_24_26_DisconnectAndCloseRacingFromBothSides) {
    for (int round = 0; round < 40; ++round) {
        NDK_QP* a = CreateQp(cq_a_, cq_a_, nullptr);
        NDK_QP* b = CreateQp(cq_b_, cq_b_, nullptr);
        const Connectors connectors = ConnectQps(a, b, 1);
        NDK_CONNECTOR* active = connectors.active;
        NDK_CONNECTOR* passive = connectors.passive;
        ASSERT_NE(passive, nullptr);
        // Odd rounds: both disconnect at once; even rounds: one disconnects while the other closes.
        Completion a_done;
        std::atomic<NTSTATUS> a_returned{STATUS_UNSUCCESSFUL};
        std::thread other([&] {
            if (round % 2 == 1) {
                Completion b_done;
                NTSTATUS status = passive->Dispatch->NdkDisconnect(passive, &Completion::OnRequest, &b_done);
                const NTSTATUS final_status = b_done.Wait(status);
                EXPECT_TRUE(final_status == STATUS_SUCCESS || final_status == STATUS_CONNECTION_INVALID);
            }
            Close(&passive->Header);
        });
        a_returned = active->Dispatch->NdkDisconnect(active, &Completion::OnRequest, &a_done);
        const NTSTATUS a_status = a_done.Wait(a_returned);
        EXPECT_TRUE(a_status == STATUS_SUCCESS || a_status == STATUS_CONNECTION_INVALID);
        other.join();
        Close(&active->Header);
        Close(&a->Header);
        Close(&b->Header);
        Pending(cq_a_);
        Pending(cq_b_);
    }
}

}  // namespace
}  // namespace softndk::test
