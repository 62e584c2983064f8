// LAM-01 … LAM-18: NdkBuildLam, NdkReleaseLam, the privileged token.
#include <memory>

#include "api/objects.h"
#include "support/ndk_test_support.h"

namespace softndk::test {
namespace {

struct LamBuffer {
    explicit LamBuffer(ULONG pages) : bytes(NDK_LAM_SIZE(pages)), storage(new uint8_t[bytes]()) {}
    NDK_LOGICAL_ADDRESS_MAPPING* get() { return reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(storage.get()); }
    ULONG bytes;
    std::unique_ptr<uint8_t[]> storage;
};

class LamTest : public AdapterTest {
protected:
    api::AdapterObject& adapter() { return *api::FromHandle<api::AdapterObject>(adapter_); }
    void Release(NDK_LOGICAL_ADDRESS_MAPPING* lam) { adapter_->Dispatch->NdkReleaseLAM(adapter_, lam); }
};
SOFTNDK_ALL_MODES(LamTest);

TEST_P(LamTest, LAM_01_05_07_BuildMapsEveryPageToAPageAlignedLogicalAddress) {
    LockedBuffer buffer(5);
    MDL* partial = IoAllocateMdl(buffer.data() + 0x123, 3 * PAGE_SIZE, FALSE, FALSE, nullptr);
    IoBuildPartialMdl(buffer.mdl(), partial, buffer.data() + 0x123, 3 * PAGE_SIZE);
    LamBuffer lam(4);
    ULONG size = lam.bytes;
    ULONG fbo = 99;
    ASSERT_EQ(BuildLam(partial, 3 * PAGE_SIZE, lam.get(), &size, &fbo), STATUS_SUCCESS);
    EXPECT_EQ(fbo, 0x123u);
    EXPECT_EQ(lam.get()->AdapterPageCount, 4u);
    EXPECT_EQ(size, NDK_LAM_SIZE(4));
    for (ULONG i = 0; i < 4; ++i) {
        const uint64_t logical = static_cast<uint64_t>(lam.get()->AdapterPageArray[i].QuadPart);
        EXPECT_EQ(logical % PAGE_SIZE, 0u);
        EXPECT_NE(logical, reinterpret_cast<uint64_t>(buffer.data() + i * PAGE_SIZE)) << "not a host address";
        EXPECT_EQ(adapter().logical.Resolve(logical + 7), buffer.data() + i * PAGE_SIZE + 7);
    }
    Release(lam.get());
    IoFreeMdl(partial);
}

TEST_P(LamTest, LAM_02_NonContiguousChainFailsInvalidParameter) {
    LockedBuffer buffer(3);
    MDL* head = MakeMdl(reinterpret_cast<uint64_t>(buffer.data()), PAGE_SIZE, {buffer.pfn(0)});
    MDL* tail = MakeMdl(reinterpret_cast<uint64_t>(buffer.data()) + 2 * PAGE_SIZE, PAGE_SIZE, {buffer.pfn(2)});
    head->Next = tail;
    LamBuffer lam(2);
    ULONG size = lam.bytes;
    ULONG fbo = 0;
    EXPECT_EQ(BuildLam(head, 2 * PAGE_SIZE, lam.get(), &size, &fbo), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(adapter().logical.LiveMappings(), 0u);
    IoFreeMdl(head);
    IoFreeMdl(tail);
}

TEST_P(LamTest, LAM_04_FakeStartVaIsNeverDereferenced) {
    LockedBuffer buffer(2);
    MDL* mdl = MakeMdl(0x7d0000000000ull, 2 * PAGE_SIZE, {buffer.pfn(1), buffer.pfn(0)});
    LamBuffer lam(2);
    ULONG size = lam.bytes;
    ULONG fbo = 0;
    ASSERT_EQ(BuildLam(mdl, 2 * PAGE_SIZE, lam.get(), &size, &fbo), STATUS_SUCCESS);
    EXPECT_EQ(adapter().logical.Resolve(static_cast<uint64_t>(lam.get()->AdapterPageArray[0].QuadPart)),
              buffer.data() + PAGE_SIZE);
    Release(lam.get());
    IoFreeMdl(mdl);
}

TEST_P(LamTest, LAM_06_BufferTooSmallReportsTheRequiredSizeAndMapsNothing) {
    LockedBuffer buffer(3);
    ULONG size = 0;
    ULONG fbo = 0;
    EXPECT_EQ(BuildLam(buffer.mdl(), buffer.bytes(), nullptr, &size, &fbo), STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(size, NDK_LAM_SIZE(3));
    LamBuffer small(2);
    size = small.bytes;
    EXPECT_EQ(BuildLam(buffer.mdl(), buffer.bytes(), small.get(), &size, &fbo), STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(size, NDK_LAM_SIZE(3));
    EXPECT_EQ(adapter().logical.LiveMappings(), 0u);
}

TEST_P(LamTest, LAM_08_FailureLeavesNoPartialMapping) {
    LockedBuffer buffer(2);
    MDL* mdl = MakeMdl(reinterpret_cast<uint64_t>(buffer.data()), 3 * PAGE_SIZE, {buffer.pfn(0), buffer.pfn(1), 5});
    LamBuffer lam(3);
    ULONG size = lam.bytes;
    ULONG fbo = 0;
    EXPECT_EQ(BuildLam(mdl, 3 * PAGE_SIZE, lam.get(), &size, &fbo), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(adapter().logical.LiveMappings(), 0u);
    IoFreeMdl(mdl);
}

TEST_P(LamTest, LAM_09_BuildRejectsBadArgumentsInline) {
    LockedBuffer buffer(1);
    LamBuffer lam(1);
    ULONG size = lam.bytes;
    ULONG fbo = 0;
    Completion done;
    auto build = adapter_->Dispatch->NdkBuildLAM;
    EXPECT_EQ(build(nullptr, buffer.mdl(), PAGE_SIZE, &Completion::OnRequest, &done, lam.get(), &size, &fbo),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(build(adapter_, nullptr, PAGE_SIZE, &Completion::OnRequest, &done, lam.get(), &size, &fbo),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(build(adapter_, buffer.mdl(), PAGE_SIZE, nullptr, &done, lam.get(), &size, &fbo),
              STATUS_INVALID_PARAMETER)
        << "AMB-21";
    EXPECT_EQ(build(adapter_, buffer.mdl(), 0, &Completion::OnRequest, &done, lam.get(), &size, &fbo),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(build(adapter_, buffer.mdl(), PAGE_SIZE, &Completion::OnRequest, &done, lam.get(), nullptr, &fbo),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(build(adapter_, buffer.mdl(), PAGE_SIZE, &Completion::OnRequest, &done, lam.get(), &size, nullptr),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(adapter().logical.LiveMappings(), 0u);
}

TEST_P(LamTest, LAM_10_ReleaseOfAModifiedContextIsRefusedAndHarmless) {
    LockedBuffer buffer(1);
    LamBuffer lam(1);
    ULONG size = lam.bytes;
    ULONG fbo = 0;
    ASSERT_EQ(BuildLam(buffer.mdl(), buffer.bytes(), lam.get(), &size, &fbo), STATUS_SUCCESS);
    PVOID context = lam.get()->AdapterContext;
    lam.get()->AdapterContext = reinterpret_cast<PVOID>(0x1234);
    Release(lam.get());
    EXPECT_EQ(adapter().logical.LiveMappings(), 1u);
    Release(nullptr);
    lam.get()->AdapterContext = context;
    Release(lam.get());
    EXPECT_EQ(adapter().logical.LiveMappings(), 0u);
    Release(lam.get());  // a second release is refused too
    EXPECT_EQ(adapter().logical.LiveMappings(), 0u);
}

TEST_P(LamTest, LAM_11_ReleaseUnmapsAndLeavesTheMdlUnchanged) {
    LockedBuffer buffer(2);
    MDL before = *buffer.mdl();
    LamBuffer lam(2);
    ULONG size = lam.bytes;
    ULONG fbo = 0;
    ASSERT_EQ(BuildLam(buffer.mdl(), buffer.bytes(), lam.get(), &size, &fbo), STATUS_SUCCESS);
    const uint64_t logical = static_cast<uint64_t>(lam.get()->AdapterPageArray[1].QuadPart);
    Release(lam.get());
    EXPECT_EQ(adapter().logical.Resolve(logical), nullptr) << "a released logical address resolves to nothing";
    EXPECT_EQ(std::memcmp(&before, buffer.mdl(), sizeof(MDL)), 0);
}

TEST_P(LamTest, LAM_14_PrivilegedTokenGivesLocalReadAndWriteOverLams) {
    UINT32 token = 0;
    pd_->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd_, &token);
    ASSERT_NE(token, 0u);
    mem::TokenRef ref = adapter().tokens.Acquire(token, mem::TokenKind::kLocal);
    ASSERT_TRUE(ref);
    EXPECT_EQ(ref.target()->kind, mem::TargetKind::kPrivileged);
    EXPECT_EQ(ref.target()->rights & (mem::kRightLocalRead | mem::kRightLocalWrite),
              mem::kRightLocalRead | mem::kRightLocalWrite);
    EXPECT_EQ(ref.target()->logical, &adapter().logical);
    pd_->Dispatch->NdkGetPrivilegedMemoryRegionToken(nullptr, &token);  // VOID: ignored, no crash
    pd_->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd_, nullptr);
}

TEST_P(LamTest, LAM_15_PrivilegedTokenNeverGrantsRemoteAccess) {
    UINT32 token = 0;
    pd_->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd_, &token);
    EXPECT_FALSE(adapter().tokens.Acquire(token, mem::TokenKind::kRemote));
    mem::TokenRef ref = adapter().tokens.Acquire(token, mem::TokenKind::kLocal);
    EXPECT_EQ(ref.target()->rights & (mem::kRightRemoteRead | mem::kRightRemoteWrite), 0u);
}

TEST_P(LamTest, LAM_16_PrivilegedTokensArePerPdAndDistinct) {
    NDK_PD* other = CreatePd();
    UINT32 a = 0;
    UINT32 b = 0;
    pd_->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd_, &a);
    other->Dispatch->NdkGetPrivilegedMemoryRegionToken(other, &b);
    EXPECT_NE(a, b);
    mem::TokenRef ref = adapter().tokens.Acquire(b, mem::TokenKind::kLocal);
    EXPECT_EQ(ref.target()->owner, other) << "owner check input: the PD";
    ref.Reset();
    Close(&other->Header);
    EXPECT_FALSE(adapter().tokens.Acquire(b, mem::TokenKind::kLocal)) << "gone with its PD";
}

TEST_P(LamTest, LAM_17_PrivilegedTokenMayBeAReadSinkWhenNotRequired) {
    UINT32 token = 0;
    pd_->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd_, &token);
    mem::TokenRef ref = adapter().tokens.Acquire(token, mem::TokenKind::kLocal);
    EXPECT_NE(ref.target()->rights & mem::kRightReadSink, 0u);
}

class LamReadSinkRequiredTest : public LamTest {
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Limits.AdapterFlags &= ~NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED;
    }
};
SOFTNDK_ALL_MODES(LamReadSinkRequiredTest);

TEST_P(LamReadSinkRequiredTest, LAM_17_PrivilegedTokenIsNoReadSinkWhenSinksNeedTheFlag) {
    UINT32 token = 0;
    pd_->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd_, &token);
    mem::TokenRef ref = adapter().tokens.Acquire(token, mem::TokenKind::kLocal);
    ASSERT_TRUE(ref);
    EXPECT_EQ(ref.target()->rights & mem::kRightReadSink, 0u);
    EXPECT_NE(ref.target()->rights & mem::kRightLocalWrite, 0u);
}

// LAM-18: a LAM is the adapter's child. One left unreleased is counted as live until the adapter closes, and the
// close neither fails nor waits for it (no NDK close exists for a LAM); LeakSanitizer checks that it is freed.
TEST_P(LamTest, LAM_18_AdapterCloseWithALeftoverLamSucceedsAndFreesIt) {
    LockedBuffer buffer(2);
    LamBuffer lam(2);
    ULONG size = lam.bytes;
    ULONG fbo = 0;
    const size_t before = api::FromHandle<api::AdapterObject>(adapter_)->logical.LiveMappings();
    ASSERT_EQ(BuildLam(buffer.mdl(), buffer.bytes(), lam.get(), &size, &fbo), STATUS_SUCCESS);
    EXPECT_EQ(api::FromHandle<api::AdapterObject>(adapter_)->logical.LiveMappings(), before + 1);
    Close(&pd_->Header);
    pd_ = nullptr;
    EXPECT_EQ(SoftNdkCloseAdapter(adapter_), STATUS_SUCCESS) << "the leftover LAM does not hold the adapter open";
    adapter_ = nullptr;
}

}  // namespace
}  // namespace softndk::test
