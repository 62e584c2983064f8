// MR-01 … MR-22: NdkCreateMr, NdkRegisterMr, NdkDeregisterMr, in every completion mode.
#include "api/objects.h"
#include "mm/locked_page_registry.h"
#include "support/ndk_test_support.h"

#include <unistd.h>

#include <atomic>

namespace softndk::test {
namespace {

const mem::TokenTarget& TargetOf(NDK_MR* mr) {
    return api::FromHandle<api::MrObject>(mr)->region.target();
}
mem::MemoryRegion::State StateOf(NDK_MR* mr) {
    return api::FromHandle<api::MrObject>(mr)->region.state();
}

class MrTest : public AdapterTest {};
SOFTNDK_ALL_MODES(MrTest);

TEST_P(MrTest, MR_01_FastAndRegularMrsAreSeparateKinds) {
    LockedBuffer buffer(2);
    NDK_MR* fast = CreateMr(true);
    NDK_MR* regular = CreateMr(false);
    EXPECT_EQ(Register(fast, buffer.mdl(), buffer.bytes(), 0), STATUS_INVALID_DEVICE_STATE);
    EXPECT_EQ(InitializeFast(regular, 2, FALSE), STATUS_INVALID_DEVICE_STATE);
    EXPECT_EQ(Register(regular, buffer.mdl(), buffer.bytes(), 0), STATUS_SUCCESS);
    EXPECT_EQ(InitializeFast(fast, 2, FALSE), STATUS_SUCCESS);
    Close(&fast->Header);
    Close(&regular->Header);
}

TEST_P(MrTest, MR_02_LIFE_01_02_CreateMrReturnsObjectInlineOrThroughCompletion) {
    Completion done;
    NDK_MR* mr = nullptr;
    NTSTATUS returned = pd_->Dispatch->NdkCreateMr(pd_, FALSE, &Completion::OnCreate, &done, &mr);
    ASSERT_EQ(done.Wait(returned), STATUS_SUCCESS);
    if (returned == STATUS_PENDING) {
        EXPECT_EQ(mr, nullptr) << "LIFE-02: ppNdkMr must not be touched after STATUS_PENDING";
        mr = reinterpret_cast<NDK_MR*>(done.object());
    } else {
        EXPECT_EQ(returned, STATUS_SUCCESS);
    }
    ASSERT_NE(mr, nullptr);
    Close(&mr->Header);
}

TEST_P(MrTest, MR_02_CreateMrRejectsNullArgumentsInline) {
    NDK_MR* mr = nullptr;
    Completion done;
    EXPECT_EQ(pd_->Dispatch->NdkCreateMr(nullptr, FALSE, &Completion::OnCreate, &done, &mr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(pd_->Dispatch->NdkCreateMr(pd_, FALSE, nullptr, &done, &mr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(pd_->Dispatch->NdkCreateMr(pd_, FALSE, &Completion::OnCreate, &done, nullptr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(pd_->Dispatch->NdkCreateMr(pd_, 7, &Completion::OnCreate, &done, &mr), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(mr, nullptr);
}

TEST_P(MrTest, MR_04_LIFE_04_HeaderAndDispatchAreSetAndDispatchIsNeverReadBack) {
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(mr->Header.ObjectType, NdkObjectTypeMr);
    EXPECT_EQ(mr->Header.Version.Major, 1);
    EXPECT_EQ(mr->Header.Version.Minor, 2);
    for (PVOID reserved : mr->Header.NdkReserved.rf) EXPECT_EQ(reserved, nullptr);
    const NDK_MR_DISPATCH* dispatch = mr->Dispatch;
    ASSERT_NE(dispatch, nullptr);
    mr->Dispatch = nullptr;  // MR-04: the consumer may overwrite it; the provider must not use it
    LockedBuffer buffer(1);
    Completion done;
    EXPECT_EQ(done.Wait(dispatch->NdkRegisterMr(mr, buffer.mdl(), buffer.bytes(), 0, &Completion::OnRequest, &done)),
              STATUS_SUCCESS);
    mr->Dispatch = dispatch;
    Close(&mr->Header);
}

TEST_P(MrTest, MR_05_RegisterOnFastMrFailsAndChangesNothing) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(true);
    EXPECT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), 0), STATUS_INVALID_DEVICE_STATE);
    EXPECT_EQ(StateOf(mr), mem::MemoryRegion::State::kIdle);
    Close(&mr->Header);
}

TEST_P(MrTest, MR_06_RegionStartsAtFirstMdlVirtualAddress) {
    LockedBuffer buffer(3);
    MDL* partial = IoAllocateMdl(buffer.data() + 100, PAGE_SIZE, FALSE, FALSE, nullptr);
    IoBuildPartialMdl(buffer.mdl(), partial, buffer.data() + 100, PAGE_SIZE);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, partial, 1000, 0), STATUS_SUCCESS);
    EXPECT_EQ(TargetOf(mr).base_va, reinterpret_cast<uint64_t>(buffer.data() + 100));
    EXPECT_EQ(TargetOf(mr).length, 1000u);
    EXPECT_EQ(TargetOf(mr).page_offset, 100u);
    ASSERT_EQ(TargetOf(mr).pages->size(), 1u);
    EXPECT_EQ((*TargetOf(mr).pages)[0], buffer.data());
    Close(&mr->Header);
    IoFreeMdl(partial);
}

TEST_P(MrTest, MR_07_LengthBeyondChainFailsInvalidParameter) {
    LockedBuffer buffer(2);
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(Register(mr, buffer.mdl(), buffer.bytes() + 1, 0), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(StateOf(mr), mem::MemoryRegion::State::kIdle);
    EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0u);
    Close(&mr->Header);
}

TEST_P(MrTest, MR_07_LengthShorterThanChainRegistersThePrefix) {
    LockedBuffer first(2);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, first.mdl(), PAGE_SIZE + 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(TargetOf(mr).pages->size(), 2u);
    EXPECT_EQ(TargetOf(mr).length, PAGE_SIZE + 1);
    Close(&mr->Header);
}

TEST_P(MrTest, MR_07_ZeroLengthFailsInvalidParameter) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(Register(mr, buffer.mdl(), 0, 0), STATUS_INVALID_PARAMETER);
    Close(&mr->Header);
}

TEST_P(MrTest, MR_08_ChainWithHoleFailsInvalidParameter) {
    LockedBuffer buffer(4);
    MDL* head = IoAllocateMdl(buffer.data(), PAGE_SIZE, FALSE, FALSE, nullptr);
    MDL* tail = IoAllocateMdl(buffer.data() + 2 * PAGE_SIZE, PAGE_SIZE, FALSE, FALSE, nullptr);
    IoBuildPartialMdl(buffer.mdl(), head, buffer.data(), PAGE_SIZE);
    IoBuildPartialMdl(buffer.mdl(), tail, buffer.data() + 2 * PAGE_SIZE, PAGE_SIZE);
    head->Next = tail;
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(Register(mr, head, 2 * PAGE_SIZE, 0), STATUS_INVALID_PARAMETER);
    // Registering only what lies before the hole is fine.
    EXPECT_EQ(Register(mr, head, PAGE_SIZE, 0), STATUS_SUCCESS);
    Close(&mr->Header);
    IoFreeMdl(head);
    IoFreeMdl(tail);
}

TEST_P(MrTest, MR_08_OverlappingChainFailsInvalidParameter) {
    LockedBuffer buffer(2);
    MDL* head = IoAllocateMdl(buffer.data(), PAGE_SIZE, FALSE, FALSE, nullptr);
    MDL* tail = IoAllocateMdl(buffer.data() + 100, PAGE_SIZE, FALSE, FALSE, nullptr);
    IoBuildPartialMdl(buffer.mdl(), head, buffer.data(), PAGE_SIZE);
    IoBuildPartialMdl(buffer.mdl(), tail, buffer.data() + 100, PAGE_SIZE);
    head->Next = tail;
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(Register(mr, head, PAGE_SIZE + 100, 0), STATUS_INVALID_PARAMETER);
    Close(&mr->Header);
    IoFreeMdl(head);
    IoFreeMdl(tail);
}

TEST_P(MrTest, MR_08_ChainSplitInsideAPageRegisters) {
    LockedBuffer buffer(3);
    const ULONG split = PAGE_SIZE + 0x800;
    MDL* head = IoAllocateMdl(buffer.data(), split, FALSE, FALSE, nullptr);
    MDL* tail = IoAllocateMdl(buffer.data() + split, static_cast<ULONG>(buffer.bytes() - split), FALSE, FALSE, nullptr);
    IoBuildPartialMdl(buffer.mdl(), head, buffer.data(), split);
    IoBuildPartialMdl(buffer.mdl(), tail, buffer.data() + split, static_cast<ULONG>(buffer.bytes() - split));
    head->Next = tail;
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, head, buffer.bytes(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    ASSERT_EQ(TargetOf(mr).pages->size(), 3u);  // the shared page appears once
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ((*TargetOf(mr).pages)[i], buffer.data() + i * PAGE_SIZE);
    Close(&mr->Header);
    IoFreeMdl(head);
    IoFreeMdl(tail);
}

TEST_P(MrTest, MR_08_SplitPageWithTwoDifferentPfnsFails) {
    LockedBuffer buffer(3);
    const uint64_t va = 0x100000000000ull;  // fake VA: only PFNs matter
    MDL* head = MakeMdl(va, 0x800, {buffer.pfn(0)});
    MDL* tail = MakeMdl(va + 0x800, 0x800, {buffer.pfn(1)});  // same virtual page, other PFN
    head->Next = tail;
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(Register(mr, head, PAGE_SIZE, 0), STATUS_INVALID_PARAMETER);
    Close(&mr->Header);
    IoFreeMdl(head);
    IoFreeMdl(tail);
}

TEST_P(MrTest, MR_09_FakeStartVaWithRealPfnsRegistersWithoutDereference) {
    LockedBuffer buffer(3);
    // A VA nothing is mapped at: any dereference would fault (and ASan would report it).
    const uint64_t fake = 0x7e0000000000ull + 0x234;
    MDL* mdl = MakeMdl(fake, 2 * PAGE_SIZE, {buffer.pfn(2), buffer.pfn(0), buffer.pfn(1)});
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, mdl, 2 * PAGE_SIZE, NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    EXPECT_EQ(TargetOf(mr).base_va, fake);
    ASSERT_EQ(TargetOf(mr).pages->size(), 3u);
    EXPECT_EQ((*TargetOf(mr).pages)[0], buffer.data() + 2 * PAGE_SIZE);  // pages come from the PFNs
    EXPECT_EQ((*TargetOf(mr).pages)[1], buffer.data());
    EXPECT_EQ((*TargetOf(mr).pages)[2], buffer.data() + PAGE_SIZE);
    Close(&mr->Header);
    IoFreeMdl(mdl);
}

TEST_P(MrTest, MR_09_PfnOfUnlockedPageFailsWithoutDereference) {
    LockedBuffer buffer(2);
    auto* unlocked = static_cast<uint8_t*>(
        mmap(nullptr, PAGE_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));  // PROT_NONE: touching faults
    const PFN_NUMBER bad_pfns[] = {reinterpret_cast<uintptr_t>(unlocked) >> PAGE_SHIFT, 1, ~PFN_NUMBER{0} >> 4,
                                   ~PFN_NUMBER{0}};
    NDK_MR* mr = CreateMr(false);
    for (PFN_NUMBER bad : bad_pfns) {
        MDL* mdl = MakeMdl(reinterpret_cast<uint64_t>(buffer.data()), 2 * PAGE_SIZE, {buffer.pfn(0), bad});
        EXPECT_EQ(Register(mr, mdl, 2 * PAGE_SIZE, 0), STATUS_INVALID_PARAMETER) << std::hex << bad;
        EXPECT_EQ(StateOf(mr), mem::MemoryRegion::State::kIdle);
        IoFreeMdl(mdl);
    }
    Close(&mr->Header);
    munmap(unlocked, PAGE_SIZE);
}

TEST_P(MrTest, MR_10_RegistrationLeavesTheMdlChainUnchanged) {
    LockedBuffer buffer(2);
    MDL before = *buffer.mdl();
    std::vector<PFN_NUMBER> pfns(MmGetMdlPfnArray(buffer.mdl()), MmGetMdlPfnArray(buffer.mdl()) + 2);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), 0), STATUS_SUCCESS);
    EXPECT_EQ(std::memcmp(&before, buffer.mdl(), sizeof(MDL)), 0);
    EXPECT_EQ(std::memcmp(pfns.data(), MmGetMdlPfnArray(buffer.mdl()), 2 * sizeof(PFN_NUMBER)), 0);
    Close(&mr->Header);
}

TEST_P(MrTest, MR_11_ZeroBasedVirtualAddressIsNotSupported) {
    LockedBuffer buffer(1);
    MDL* mdl = MakeMdl(0, PAGE_SIZE, {buffer.pfn(0)});
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(Register(mr, mdl, PAGE_SIZE, 0), STATUS_INVALID_PARAMETER);
    Close(&mr->Header);
    IoFreeMdl(mdl);
}

TEST_P(MrTest, MR_11_RegionWrappingAddressSpaceFails) {
    LockedBuffer buffer(2);
    MDL* mdl = MakeMdl(0xFFFFFFFFFFFFF000ull, 2 * PAGE_SIZE, {buffer.pfn(0), buffer.pfn(1)});
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(Register(mr, mdl, 2 * PAGE_SIZE, 0), STATUS_INVALID_PARAMETER);
    Close(&mr->Header);
    IoFreeMdl(mdl);
}

TEST_P(MrTest, MR_12_FlagsAreComparedAsWholeMasks) {
    LockedBuffer buffer(1);
    struct Case {
        ULONG flags;
        NTSTATUS status;
        uint32_t rights;  // without kRightReadSink (NOT_REQUIRED adds it to every region)
    };
    const Case cases[] = {
        {NDK_MR_FLAG_ALLOW_LOCAL_READ, STATUS_SUCCESS, mem::kRightLocalRead},
        {NDK_MR_FLAG_ALLOW_LOCAL_WRITE, STATUS_SUCCESS, mem::kRightLocalRead | mem::kRightLocalWrite},
        {NDK_MR_FLAG_ALLOW_REMOTE_READ, STATUS_SUCCESS, mem::kRightLocalRead | mem::kRightRemoteRead},
        {NDK_MR_FLAG_ALLOW_REMOTE_WRITE, STATUS_SUCCESS,
         mem::kRightLocalRead | mem::kRightLocalWrite | mem::kRightRemoteWrite},
        {NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_RDMA_READ_SINK, STATUS_SUCCESS,
         mem::kRightLocalRead | mem::kRightLocalWrite | mem::kRightRemoteWrite | mem::kRightRemoteRead},
        {0x4, STATUS_INVALID_PARAMETER, 0},   // the remote-write bit alone is not a defined flag (AMB-01)
        {0x10, STATUS_INVALID_PARAMETER, 0},  // undefined bits (AMB-37)
        {0x80000001, STATUS_INVALID_PARAMETER, 0},
    };
    NDK_MR* mr = CreateMr(false);
    for (const Case& c : cases) {
        ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), c.flags), c.status) << std::hex << c.flags;
        if (c.status == STATUS_SUCCESS) {
            EXPECT_EQ(TargetOf(mr).rights & ~mem::kRightReadSink, c.rights) << std::hex << c.flags;
            ASSERT_EQ(Deregister(mr), STATUS_SUCCESS);
        } else {
            EXPECT_EQ(StateOf(mr), mem::MemoryRegion::State::kIdle);
        }
    }
    Close(&mr->Header);
}

TEST_P(MrTest, MR_15_ReadSinkFlagIsAcceptedWhenNotRequired) {
    ASSERT_NE(Info().AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, 0u);
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), NDK_MR_FLAG_RDMA_READ_SINK), STATUS_SUCCESS);
    EXPECT_NE(TargetOf(mr).rights & mem::kRightReadSink, 0u);
    ASSERT_EQ(Deregister(mr), STATUS_SUCCESS);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), 0), STATUS_SUCCESS);
    EXPECT_NE(TargetOf(mr).rights & mem::kRightReadSink, 0u) << "every region may be a sink when NOT_REQUIRED";
    Close(&mr->Header);
}

class MrReadSinkRequiredTest : public AdapterTest {
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Limits.AdapterFlags &= ~NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED;
    }
};
SOFTNDK_ALL_MODES(MrReadSinkRequiredTest);

TEST_P(MrReadSinkRequiredTest, MR_13_ReadSinkRightOnlyWithTheFlag) {
    EXPECT_EQ(Info().AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, 0u);
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    EXPECT_EQ(TargetOf(mr).rights & mem::kRightReadSink, 0u);
    ASSERT_EQ(Deregister(mr), STATUS_SUCCESS);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK),
              STATUS_SUCCESS);
    EXPECT_NE(TargetOf(mr).rights & mem::kRightReadSink, 0u);
    Close(&mr->Header);
}

TEST_P(MrTest, MR_14_ReadSinkMayAccompanyEveryOtherFlag) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    for (ULONG flags : {0x0u, 0x1u, 0x2u, 0x3u, 0x5u, 0x7u}) {
        ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), flags | NDK_MR_FLAG_RDMA_READ_SINK), STATUS_SUCCESS)
            << flags;
        EXPECT_NE(TargetOf(mr).rights & mem::kRightReadSink, 0u);
        ASSERT_EQ(Deregister(mr), STATUS_SUCCESS);
    }
    Close(&mr->Header);
}

struct ReentrantRegister {
    NDK_MR* mr;
    MDL* mdl;
    Completion nested;
    std::atomic<NTSTATUS> nested_returned{STATUS_UNSUCCESSFUL};
    std::atomic<bool> done{false};
};

VOID RegisterAgainFromCompletion(PVOID context, NTSTATUS) {
    auto* ctx = static_cast<ReentrantRegister*>(context);
    // MR-21/CB-12: provider functions may be called from inside a callback and must not block on it.
    ctx->nested_returned = ctx->mr->Dispatch->NdkDeregisterMr(ctx->mr, &Completion::OnRequest, &ctx->nested);
    ctx->done = true;
}

TEST_P(MrTest, MR_21_CB_12_CallsFromInsideACompletionDoNotBlock) {
    LockedBuffer buffer(1);
    ReentrantRegister ctx;
    ctx.mr = CreateMr(false);
    ctx.mdl = buffer.mdl();
    NTSTATUS returned =
        ctx.mr->Dispatch->NdkRegisterMr(ctx.mr, buffer.mdl(), buffer.bytes(), 0, &RegisterAgainFromCompletion, &ctx);
    if (returned != STATUS_PENDING) {
        ASSERT_EQ(returned, STATUS_SUCCESS);
        RegisterAgainFromCompletion(&ctx, returned);
    }
    for (int i = 0; i < 5000 && !ctx.done; ++i) usleep(1000);
    ASSERT_TRUE(ctx.done);
    EXPECT_EQ(ctx.nested.Wait(ctx.nested_returned), STATUS_SUCCESS);
    EXPECT_EQ(StateOf(ctx.mr), mem::MemoryRegion::State::kIdle);
    Close(&ctx.mr->Header);
}

TEST_P(MrTest, MR_16_RegisterRejectsNullArgumentsInline) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    Completion done;
    EXPECT_EQ(mr->Dispatch->NdkRegisterMr(nullptr, buffer.mdl(), PAGE_SIZE, 0, &Completion::OnRequest, &done),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(mr->Dispatch->NdkRegisterMr(mr, nullptr, PAGE_SIZE, 0, &Completion::OnRequest, &done),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(mr->Dispatch->NdkRegisterMr(mr, buffer.mdl(), PAGE_SIZE, 0, nullptr, &done), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(mr->Dispatch->NdkRegisterMr(reinterpret_cast<NDK_MR*>(pd_), buffer.mdl(), PAGE_SIZE, 0,
                                          &Completion::OnRequest, &done),
              STATUS_INVALID_PARAMETER)
        << "a handle of another object type";
    EXPECT_EQ(StateOf(mr), mem::MemoryRegion::State::kIdle);
    Close(&mr->Header);
}

TEST_P(MrTest, MR_18_DoubleRegistrationFailsAndKeepsTheFirst) {
    LockedBuffer buffer(1);
    LockedBuffer other(1);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), 0), STATUS_SUCCESS);
    UINT32 token = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    EXPECT_EQ(Register(mr, other.mdl(), other.bytes(), 0), STATUS_INVALID_DEVICE_STATE);
    EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), token);
    EXPECT_EQ((*TargetOf(mr).pages)[0], buffer.data());
    Close(&mr->Header);
}

TEST_P(MrTest, MR_18_DeregisterOfUnregisteredMrFails) {
    NDK_MR* mr = CreateMr(false);
    EXPECT_EQ(Deregister(mr), STATUS_INVALID_DEVICE_STATE);
    NDK_MR* fast = CreateMr(true);
    ASSERT_EQ(InitializeFast(fast, 4, FALSE), STATUS_SUCCESS);
    EXPECT_EQ(Deregister(fast), STATUS_INVALID_DEVICE_STATE);
    EXPECT_EQ(StateOf(fast), mem::MemoryRegion::State::kFastInitialized);
    Close(&mr->Header);
    Close(&fast->Header);
}

TEST_P(MrTest, MR_19_DeregisterThenRegisterAgainGivesNewTokens) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    std::vector<UINT32> seen;
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
        UINT32 local = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
        UINT32 remote = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
        EXPECT_NE(local, remote);
        if (!seen.empty()) {
            EXPECT_NE(local, seen[seen.size() - 2]);
            EXPECT_NE(remote, seen.back());
        }
        seen.push_back(local);
        seen.push_back(remote);
        ASSERT_EQ(Deregister(mr), STATUS_SUCCESS);
        EXPECT_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0u);
    }
    Close(&mr->Header);
}

TEST_P(MrTest, MR_19_DeregisterWaitsForWorkHoldingTheToken) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), 0), STATUS_SUCCESS);
    auto& tokens = api::FromHandle<api::AdapterObject>(adapter_)->tokens;
    const UINT32 token = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    mem::TokenRef in_flight = tokens.Acquire(token, mem::TokenKind::kLocal);
    ASSERT_TRUE(in_flight);
    Completion done;
    NTSTATUS returned = mr->Dispatch->NdkDeregisterMr(mr, &Completion::OnRequest, &done);
    EXPECT_EQ(returned, STATUS_PENDING) << "work holds the registration";
    for (int i = 0; i < 5000 && StateOf(mr) != mem::MemoryRegion::State::kDraining; ++i) usleep(1000);
    ASSERT_EQ(StateOf(mr), mem::MemoryRegion::State::kDraining);
    EXPECT_FALSE(tokens.Acquire(token, mem::TokenKind::kLocal)) << "no new reference once deregistration started";
    EXPECT_EQ((*in_flight.target()->pages)[0], buffer.data()) << "the page table is intact for in-flight work";
    EXPECT_EQ(done.calls(), 0);
    in_flight.Reset();
    EXPECT_EQ(done.Wait(returned), STATUS_SUCCESS);
    EXPECT_EQ(StateOf(mr), mem::MemoryRegion::State::kIdle);
    Close(&mr->Header);
}

TEST_P(MrTest, MR_22_LIFE_12_13_PdCloseWaitsForItsMrs) {
    NDK_MR* mr = CreateMr(false);
    Completion pd_closed;
    NTSTATUS returned = pd_->Dispatch->NdkClosePd(&pd_->Header, &Completion::OnClose, &pd_closed);
    EXPECT_EQ(returned, STATUS_PENDING) << "LIFE-13: the PD is the MR's antecedent";
    EXPECT_EQ(pd_closed.calls(), 0);
    Close(&mr->Header);
    EXPECT_EQ(pd_closed.Wait(returned), STATUS_SUCCESS);
    pd_ = nullptr;
}

TEST_P(MrTest, LIFE_09_CloseOfRegisteredMrDeregistersIt) {
    LockedBuffer buffer(2);
    auto* adapter = api::FromHandle<api::AdapterObject>(adapter_);
    const uint32_t slots_before = adapter->tokens.LiveSlots();
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    UINT32 token = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    EXPECT_EQ(adapter->tokens.LiveSlots(), slots_before + 1);
    Close(&mr->Header);
    EXPECT_EQ(adapter->tokens.LiveSlots(), slots_before);
    EXPECT_FALSE(adapter->tokens.Acquire(token, mem::TokenKind::kRemote));
}

TEST_P(MrTest, MR_CloseOfRegisteredMrWaitsForWorkHoldingTheToken) {
    LockedBuffer buffer(1);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, buffer.mdl(), buffer.bytes(), 0), STATUS_SUCCESS);
    auto& tokens = api::FromHandle<api::AdapterObject>(adapter_)->tokens;
    mem::TokenRef in_flight = tokens.Acquire(mr->Dispatch->NdkGetLocalTokenFromMr(mr), mem::TokenKind::kLocal);
    Completion closed;
    NTSTATUS returned = mr->Dispatch->NdkCloseMr(&mr->Header, &Completion::OnClose, &closed);
    EXPECT_EQ(returned, STATUS_PENDING);
    EXPECT_EQ(closed.calls(), 0);
    in_flight.Reset();
    EXPECT_EQ(closed.Wait(returned), STATUS_SUCCESS);
}

}  // namespace
}  // namespace softndk::test
