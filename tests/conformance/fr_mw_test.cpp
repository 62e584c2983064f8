// FR-08 … FR-24, MW-01 … MW-13, TOK-03 … TOK-18: fast registration, windows and invalidation end to end.
#include <cstring>
#include <memory>

#include "api/objects.h"
#include "support/connected_pair.h"

namespace softndk::test {
namespace {

class FastRegisterTest : public ConnectedPairTest {
protected:
    void SetUp() override {
        ConnectedPairTest::SetUp();
        if (HasFatalFailure()) return;
        // B builds a LAM over its buffer and fast-registers it; A accesses it remotely.
        lam_storage_.reset(new uint8_t[NDK_LAM_SIZE(kPages)]);
        lam_ = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(lam_storage_.get());
        ULONG size = NDK_LAM_SIZE(kPages);
        ULONG fbo = 0;
        ASSERT_EQ(BuildLam(buffer_b_->mdl(), buffer_b_->bytes(), lam_, &size, &fbo, adapter_b_), STATUS_SUCCESS);
        fast_ = CreateMr(true, pd_b_);
        ASSERT_EQ(InitializeFast(fast_, kPages, TRUE), STATUS_SUCCESS);
    }
    void TearDown() override {
        if (fast_ != nullptr) Close(&fast_->Header);
        if (lam_ != nullptr) adapter_b_->Dispatch->NdkReleaseLAM(adapter_b_, lam_);
        ConnectedPairTest::TearDown();
    }
    NTSTATUS FastRegister(ULONG pages, ULONG fbo, SIZE_T length, uint64_t base, ULONG flags, NDK_QP* qp = nullptr) {
        qp = qp != nullptr ? qp : qp_b_;
        return qp->Dispatch->NdkFastRegister(qp, reinterpret_cast<PVOID>(0xF), fast_, pages, lam_->AdapterPageArray,
                                             fbo, length, reinterpret_cast<PVOID>(base), flags);
    }
    // One cycle's steps, each completed: the whole LAM at kBase with remote write, or NdkInvalidate.
    void RegisterWholeLam() {
        ASSERT_EQ(FastRegister(kPages, 0, kPages * PAGE_SIZE, kBase, NDK_OP_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
        Poll(cq_b_);
    }
    void Invalidate() {
        ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &fast_->Header, 0), STATUS_SUCCESS);
        Poll(cq_b_);
    }
    NTSTATUS WriteFromA(uint64_t address, UINT32 token, ULONG length = 64) {
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), length);
        NTSTATUS status = qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, address, token, 0);
        return status == STATUS_SUCCESS ? VerdictOfWrite() : status;
    }

    static constexpr uint64_t kBase = 0x500000000000ull;  // consumer-chosen, any value that is FBO mod PAGE_SIZE
    std::unique_ptr<uint8_t[]> lam_storage_;
    NDK_LOGICAL_ADDRESS_MAPPING* lam_ = nullptr;
    NDK_MR* fast_ = nullptr;
};
SOFTNDK_ALL_MODES(FastRegisterTest);

TEST_P(FastRegisterTest, FR_08_18_19_24_TOK_03_FullSequenceWithNewTokensAndStaleTokenFailing) {
    std::memset(buffer_a_->data(), 0x5A, 64);
    // FR-18/19: registered, completion of type FastRegister, token available.
    ASSERT_EQ(FastRegister(kPages, 0x10, 2 * PAGE_SIZE, kBase + 0x10, NDK_OP_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    NDK_RESULT_EX registered = Poll(cq_b_);
    EXPECT_EQ(registered.Status, STATUS_SUCCESS);
    EXPECT_EQ(registered.Type, NdkOperationTypeFastRegister);
    const UINT32 first = fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_);
    ASSERT_NE(first, 0u);
    // Remote access with the new token lands at FBO + offset of the LAM's pages.
    EXPECT_EQ(WriteFromA(kBase + 0x10 + PAGE_SIZE, first), STATUS_SUCCESS);
    EXPECT_EQ(buffer_b_->data()[0x10 + PAGE_SIZE], 0x5A);
    // Invalidate, fast-register again. AMB-39 (issue 19 §2): by default the MR keeps the token read after
    // NdkInitializeFastRegisterMr, as hardware keeps an MR's key, so a consumer that read it once works.
    ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &fast_->Header, 0), STATUS_SUCCESS);
    NDK_RESULT_EX invalidated = Poll(cq_b_);
    EXPECT_EQ(invalidated.Type, NdkOperationTypeInvalidate);
    ASSERT_NO_FATAL_FAILURE(RegisterWholeLam());
    const UINT32 second = fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_);
    EXPECT_EQ(second, first);
    EXPECT_EQ(WriteFromA(kBase, second), STATUS_SUCCESS);
    // Invalidated, the token refuses every access until the MR is registered again (FR-22).
    ASSERT_NO_FATAL_FAILURE(Invalidate());
    EXPECT_EQ(WriteFromA(kBase, second), STATUS_INVALID_HANDLE) << "the invalidated MR's token";
}

// AMB-39, the opt-in check (RotateFastRegisterKeys, SOFTNDK_ROTATE_FR_KEYS=1): the keys change on every
// NdkFastRegister, so a consumer that reuses a token from an earlier cycle fails (and the stale token is reported
// with its MR slot and cycle: TokenTableTest.AMB_39_*).
class RotatingFastRegisterTest : public FastRegisterTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override { config.RotateFastRegisterKeys = 1; }
};
SOFTNDK_ALL_MODES(RotatingFastRegisterTest);

TEST_P(RotatingFastRegisterTest, AMB_39_RotatingKeysMakeEveryEarlierTokenStale) {
    const UINT32 initial = fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_);
    ASSERT_NO_FATAL_FAILURE(RegisterWholeLam());
    const UINT32 first = fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_);
    EXPECT_NE(first, initial);
    EXPECT_EQ(WriteFromA(kBase, first), STATUS_SUCCESS);
    ASSERT_NO_FATAL_FAILURE(Invalidate());
    ASSERT_NO_FATAL_FAILURE(RegisterWholeLam());
    const UINT32 second = fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_);
    EXPECT_NE(second, first);
    EXPECT_EQ(WriteFromA(kBase, second), STATUS_SUCCESS);
    EXPECT_EQ(WriteFromA(kBase, first), STATUS_INVALID_HANDLE) << "the token of the cycle before";
}

TEST_P(FastRegisterTest, AMB_39_TheTokenReadAfterInitializeServesEveryCycle) {
    const UINT32 initial = fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_);  // read once, reused (issue 19 §2)
    for (int cycle = 0; cycle < 3; ++cycle) {
        ASSERT_NO_FATAL_FAILURE(RegisterWholeLam());
        EXPECT_EQ(WriteFromA(kBase, initial), STATUS_SUCCESS) << "cycle " << cycle;
        ASSERT_NO_FATAL_FAILURE(Invalidate());
    }
}

TEST_P(FastRegisterTest, FR_16_RemoteFlagsOnAnMrWithoutRemoteAccessFailAccessViolation) {
    NDK_MR* local_only = CreateMr(true, pd_b_);
    ASSERT_EQ(InitializeFast(local_only, kPages, FALSE), STATUS_SUCCESS);
    for (ULONG flags : {ULONG{NDK_OP_FLAG_ALLOW_REMOTE_READ}, ULONG{NDK_OP_FLAG_ALLOW_REMOTE_WRITE}}) {
        EXPECT_EQ(qp_b_->Dispatch->NdkFastRegister(qp_b_, nullptr, local_only, kPages, lam_->AdapterPageArray, 0,
                                                   PAGE_SIZE, reinterpret_cast<PVOID>(kBase), flags),
                  STATUS_ACCESS_VIOLATION);
    }
    EXPECT_EQ(qp_b_->Dispatch->NdkFastRegister(qp_b_, nullptr, local_only, kPages, lam_->AdapterPageArray, 0, PAGE_SIZE,
                                               reinterpret_cast<PVOID>(kBase), NDK_OP_FLAG_ALLOW_LOCAL_WRITE),
              STATUS_SUCCESS);
    Poll(cq_b_);
    Close(&local_only->Header);
}

TEST_P(FastRegisterTest, FR_09_10_12_13_15_BadPageListsFboLengthBaseAndFlagsAreRefusedInline) {
    EXPECT_EQ(FastRegister(kPages + 1, 0, PAGE_SIZE, kBase, 0), STATUS_INVALID_PARAMETER) << "more than initialised";
    EXPECT_EQ(FastRegister(kPages, 0, kPages * PAGE_SIZE + 1, kBase, 0), STATUS_INVALID_PARAMETER) << "FR-12";
    EXPECT_EQ(FastRegister(kPages, 8, kPages * PAGE_SIZE - 7, kBase + 8, 0), STATUS_INVALID_PARAMETER) << "FR-12";
    EXPECT_EQ(FastRegister(kPages, 8, PAGE_SIZE, kBase, 0), STATUS_INVALID_PARAMETER) << "FR-13: base != FBO mod page";
    EXPECT_EQ(FastRegister(kPages, PAGE_SIZE, 1, kBase, 0), STATUS_INVALID_PARAMETER) << "FBO beyond a page";
    EXPECT_EQ(FastRegister(kPages, 0, 0, kBase, 0), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(FastRegister(kPages, 0, PAGE_SIZE, kBase, 0x20), STATUS_INVALID_PARAMETER) << "AMB-01: 0x20 alone";
    EXPECT_EQ(FastRegister(kPages, 0, PAGE_SIZE, kBase, NDK_OP_FLAG_INLINE), STATUS_INVALID_PARAMETER) << "FR-15";
    NDK_LOGICAL_ADDRESS host[1];
    host[0].QuadPart = reinterpret_cast<LONGLONG>(buffer_b_->data());
    EXPECT_EQ(qp_b_->Dispatch->NdkFastRegister(qp_b_, nullptr, fast_, 1, host, 0, PAGE_SIZE,
                                               reinterpret_cast<PVOID>(kBase), 0),
              STATUS_INVALID_PARAMETER)
        << "FR-10: a host address is not a logical address";
    EXPECT_EQ(Pending(cq_b_), 0u);
    EXPECT_EQ(FastRegister(kPages, 0, PAGE_SIZE, 0, 0), STATUS_SUCCESS) << "AMB-09: base 0 with FBO 0";
    EXPECT_EQ(FastRegister(kPages, 0, PAGE_SIZE, kBase, 0), STATUS_INVALID_DEVICE_STATE) << "registered already";
}

// FR-21: with RDMA_READ_SINK_NOT_REQUIRED advertised, READ_SINK never fails a fast-register, and a region
// registered without it is a read sink all the same.
TEST_P(FastRegisterTest, FR_21_ReadSinkFlagNeverFailsAndIsNotNeeded) {
    ASSERT_NE(Info().AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, 0u);
    for (const ULONG flags :
         {ULONG{NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_RDMA_READ_SINK}, ULONG{NDK_OP_FLAG_ALLOW_LOCAL_WRITE}}) {
        ASSERT_EQ(FastRegister(kPages, 0, PAGE_SIZE, kBase, flags), STATUS_SUCCESS) << std::hex << flags;
        EXPECT_EQ(Poll(cq_b_).Status, STATUS_SUCCESS);
        std::memset(buffer_a_->data(), 0x5A, 64);
        std::memset(buffer_b_->data(), 0, 64);
        NDK_SGE sink{};
        sink.LogicalAddress.QuadPart = static_cast<LONGLONG>(kBase);
        sink.Length = 64;
        sink.MemoryRegionToken = fast_->Dispatch->NdkGetLocalTokenFromMr(fast_);
        ASSERT_EQ(qp_b_->Dispatch->NdkRead(qp_b_, nullptr, &sink, 1, RemoteAddress(*buffer_a_),
                                           mr_a_->Dispatch->NdkGetRemoteTokenFromMr(mr_a_), 0),
                  STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_b_).Status, STATUS_SUCCESS) << "a read into the fast MR, flags 0x" << std::hex << flags;
        EXPECT_EQ(buffer_b_->data()[63], 0x5A);
        ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &fast_->Header, 0), STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_b_).Type, NdkOperationTypeInvalidate);
    }
}

// FR-22: NdkInvalidate accepts SILENT_SUCCESS, READ_FENCE and DEFER, and nothing else.
TEST_P(FastRegisterTest, FR_22_InvalidateAcceptsExactlyItsFlags) {
    for (const ULONG flag : {ULONG{NDK_OP_FLAG_INLINE}, ULONG{NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT},
                             ULONG{NDK_OP_FLAG_ALLOW_REMOTE_READ}, ULONG{0x80000000u}}) {
        ASSERT_EQ(FastRegister(kPages, 0, PAGE_SIZE, kBase, 0), STATUS_SUCCESS);
        Poll(cq_b_);
        EXPECT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &fast_->Header, flag), STATUS_INVALID_PARAMETER)
            << "flag 0x" << std::hex << flag;
        EXPECT_EQ(Pending(cq_b_), 0u) << "refused inline: no completion (CB-17)";
        EXPECT_NE(fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_), 0u) << "still registered";
        ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &fast_->Header, 0), STATUS_SUCCESS);
        Poll(cq_b_);
    }
    for (const ULONG flags : {ULONG{NDK_OP_FLAG_READ_FENCE}, ULONG{NDK_OP_FLAG_DEFER},
                              ULONG{NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER}, ULONG{NDK_OP_FLAG_SILENT_SUCCESS}}) {
        ASSERT_EQ(FastRegister(kPages, 0, PAGE_SIZE, kBase, 0), STATUS_SUCCESS);
        Poll(cq_b_);
        ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, reinterpret_cast<PVOID>(0x22), &fast_->Header, flags),
                  STATUS_SUCCESS)
            << "flags 0x" << std::hex << flags;
        if (flags == NDK_OP_FLAG_SILENT_SUCCESS) {
            EXPECT_EQ(Pending(cq_b_), 0u) << "QP-10: no completion for a silent success";
        } else {
            const NDK_RESULT_EX result = Poll(cq_b_);
            EXPECT_EQ(result.Type, NdkOperationTypeInvalidate);
            EXPECT_EQ(result.RequestContext, reinterpret_cast<PVOID>(0x22));
        }
        EXPECT_EQ(fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_), fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_));
    }
}

TEST_P(FastRegisterTest, FR_17_NotConnectedQpRefusesFastRegister) {
    NDK_QP* lone = CreateQp(cq_b_, cq_b_, nullptr);
    EXPECT_EQ(FastRegister(kPages, 0, PAGE_SIZE, kBase, 0, lone), STATUS_CONNECTION_INVALID);
    Close(&lone->Header);
}

TEST_P(FastRegisterTest, TOK_10_13_14_SendAndInvalidateInvalidatesBeforeTheCompletion) {
    ASSERT_EQ(FastRegister(kPages, 0, kPages * PAGE_SIZE, kBase, NDK_OP_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    Poll(cq_b_);
    const UINT32 token = fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_);
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data() + 3 * PAGE_SIZE, 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 16);
    ASSERT_EQ(qp_a_->Dispatch->NdkSendAndInvalidate(qp_a_, nullptr, &sge, 1, 0, token), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Type, NdkOperationTypeSend) << "TOK-13";
    NDK_RESULT_EX received = Poll(cq_b_);
    EXPECT_EQ(received.Status, STATUS_SUCCESS);
    EXPECT_EQ(received.Type, NdkOperationTypeReceiveAndInvalidate);
    EXPECT_EQ(received.TypeSpecificCompletionOutput, token);
    EXPECT_EQ(WriteFromA(kBase, token), STATUS_INVALID_HANDLE) << "TOK-14: invalid by the time of the completion";
}

TEST_P(FastRegisterTest, TOK_15_ReceiveAndInvalidateThroughGetCqResults) {
    ASSERT_EQ(FastRegister(kPages, 0, PAGE_SIZE, kBase, NDK_OP_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    Poll(cq_b_);
    const UINT32 token = fast_->Dispatch->NdkGetRemoteTokenFromMr(fast_);
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data() + 3 * PAGE_SIZE, 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 16);
    ASSERT_EQ(qp_a_->Dispatch->NdkSendAndInvalidate(qp_a_, nullptr, &sge, 1, 0, token), STATUS_SUCCESS);
    NDK_RESULT plain{};
    ASSERT_TRUE(WaitFor([&] { return cq_b_->Dispatch->NdkGetCqResults(cq_b_, &plain, 1) == 1; }));
    EXPECT_EQ(plain.Status, STATUS_SUCCESS);
    EXPECT_EQ(plain.BytesTransferred, 16u);
    EXPECT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &fast_->Header, 0), STATUS_INVALID_DEVICE_STATE)
        << "a later NdkInvalidate of the same registration fails, as usual";
}

TEST_P(FastRegisterTest, TOK_11_SendAndInvalidateWithABadTokenAbortsTheConnection) {
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 16);
    ASSERT_EQ(qp_a_->Dispatch->NdkSendAndInvalidate(qp_a_, nullptr, &sge, 1, 0, 0x00ABCD12), STATUS_SUCCESS);
    const NDK_RESULT_EX sent = Poll(cq_a_);
    if (OverTcp())  // completed when it left, unless the Terminate overtook it
        EXPECT_TRUE(sent.Status == STATUS_SUCCESS || sent.Status == STATUS_CANCELLED) << std::hex << sent.Status;
    else
        EXPECT_EQ(sent.Status, STATUS_INVALID_HANDLE);
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_INVALID_HANDLE);
    EXPECT_TRUE(WaitFor([&] { return disconnects_a_.count == 1 && disconnects_b_.count == 1; }));
}

TEST_P(FastRegisterTest, TOK_16_InvalidateOfARegularMrFails) {
    EXPECT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &mr_b_->Header, 0), STATUS_INVALID_DEVICE_STATE);
    EXPECT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &mr_b_->Header, NDK_OP_FLAG_INLINE),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(Pending(cq_b_), 0u);
}

TEST_P(FastRegisterTest, LAM_14_16_TOK_18_PrivilegedTokenSgeUsesLamAddresses) {
    UINT32 privileged = 0;
    pd_b_->Dispatch->NdkGetPrivilegedMemoryRegionToken(pd_b_, &privileged);
    std::memset(buffer_b_->data() + PAGE_SIZE, 0x77, 32);
    NDK_SGE receive = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkReceive(qp_a_, nullptr, &receive, 1), STATUS_SUCCESS);
    NDK_SGE sge{};
    sge.LogicalAddress = lam_->AdapterPageArray[1];
    sge.Length = 32;
    sge.MemoryRegionToken = privileged;
    ASSERT_EQ(qp_b_->Dispatch->NdkSend(qp_b_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).BytesTransferred, 32u);
    EXPECT_EQ(buffer_a_->data()[31], 0x77);
    // LAM-15: the privileged token never works remotely.
    EXPECT_EQ(WriteFromA(static_cast<uint64_t>(lam_->AdapterPageArray[0].QuadPart), privileged), STATUS_INVALID_HANDLE);
}

// ---- memory windows ----
class WindowTest : public ConnectedPairTest {
protected:
    void SetUp() override {
        ConnectedPairTest::SetUp();
        if (HasFatalFailure()) return;
        Completion created;
        NTSTATUS returned = pd_b_->Dispatch->NdkCreateMw(pd_b_, &Completion::OnCreate, &created, &mw_);
        ASSERT_EQ(created.Wait(returned), STATUS_SUCCESS);
        if (mw_ == nullptr) mw_ = reinterpret_cast<NDK_MW*>(created.object());
    }
    void TearDown() override {
        if (mw_ != nullptr) Close(&mw_->Header);
        ConnectedPairTest::TearDown();
    }
    NTSTATUS Bind(NDK_MR* mr, size_t offset, SIZE_T length, ULONG flags) {
        return qp_b_->Dispatch->NdkBind(qp_b_, reinterpret_cast<PVOID>(0xB1), mr, mw_, buffer_b_->data() + offset,
                                        length, flags);
    }
    NTSTATUS WriteFromA(uint64_t address, UINT32 token) {
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
        NTSTATUS status = qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, address, token, 0);
        return status == STATUS_SUCCESS ? VerdictOfWrite() : status;
    }
    NDK_MW* mw_ = nullptr;
};
SOFTNDK_ALL_MODES(WindowTest);

TEST_P(WindowTest, MW_03_09_10_TOK_04_07_BindGivesATokenForTheSubRangeOnly) {
    EXPECT_EQ(mw_->Dispatch->NdkGetRemoteTokenFromMw(mw_), 0u);
    ASSERT_EQ(Bind(mr_b_, PAGE_SIZE, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    NDK_RESULT_EX bound = Poll(cq_b_);
    EXPECT_EQ(bound.Type, NdkOperationTypeBind);
    EXPECT_EQ(bound.RequestContext, reinterpret_cast<PVOID>(0xB1));
    const UINT32 token = mw_->Dispatch->NdkGetRemoteTokenFromMw(mw_);
    ASSERT_NE(token, 0u);
    std::memset(buffer_a_->data(), 0x42, 64);
    EXPECT_EQ(WriteFromA(RemoteAddress(*buffer_b_, PAGE_SIZE + 100), token), STATUS_SUCCESS);
    EXPECT_EQ(buffer_b_->data()[PAGE_SIZE + 100], 0x42);
    EXPECT_EQ(WriteFromA(RemoteAddress(*buffer_b_, 0), token), STATUS_REMOTE_RESOURCES) << "outside the window";
}

// MW-04: the bind's VirtualAddress is an index into the MR, never dereferenced. The MR's MDL carries a fake
// virtual address over real locked pages; the window is bound and written at fake addresses, and the bytes land in
// the real pages (ASan would stop any use of the fake address as a pointer).
TEST_P(WindowTest, MW_04_BindWithAFakeVirtualAddressIsNeverDereferenced) {
    SOFTNDK_SKIP_WITH_THE_PEER_IN_ANOTHER_PROCESS("an MDL over chosen PFNs cannot be sent to another process");
    constexpr uint64_t kFake = 0x7E0000000000ull;  // nothing is mapped there
    MDL* mdl = MakeMdl(kFake, kPages * PAGE_SIZE,
                       {buffer_b_->pfn(0), buffer_b_->pfn(1), buffer_b_->pfn(2), buffer_b_->pfn(3)});
    NDK_MR* fake = CreateMr(false, pd_b_);
    ASSERT_EQ(Register(fake, mdl, kPages * PAGE_SIZE, NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    ASSERT_EQ(qp_b_->Dispatch->NdkBind(qp_b_, nullptr, fake, mw_, reinterpret_cast<PVOID>(kFake + PAGE_SIZE), PAGE_SIZE,
                                       NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Type, NdkOperationTypeBind);
    std::memset(buffer_a_->data(), 0x6B, 64);
    EXPECT_EQ(WriteFromA(kFake + PAGE_SIZE + 8, mw_->Dispatch->NdkGetRemoteTokenFromMw(mw_)), STATUS_SUCCESS);
    EXPECT_EQ(buffer_b_->data()[PAGE_SIZE + 8], 0x6B) << "placed in the real page behind the fake address";
    EXPECT_EQ(buffer_b_->data()[PAGE_SIZE + 8 + 63], 0x6B);
    ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &mw_->Header, 0), STATUS_SUCCESS);
    Poll(cq_b_);
    Close(&fake->Header);
    IoFreeMdl(mdl);
}

TEST_P(WindowTest, MW_07_RightsMustBeASubsetOfTheMrs) {
    NDK_MR* read_only = CreateMr(false, pd_b_);
    ASSERT_EQ(Register(read_only, buffer_b_->mdl(), buffer_b_->bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    EXPECT_EQ(Bind(read_only, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE), STATUS_ACCESS_VIOLATION);
    NDK_MR* local = CreateMr(false, pd_b_);
    ASSERT_EQ(Register(local, buffer_b_->mdl(), buffer_b_->bytes(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    EXPECT_EQ(Bind(local, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_READ), STATUS_ACCESS_VIOLATION);
    EXPECT_EQ(Pending(cq_b_), 0u);
    ASSERT_EQ(Bind(read_only, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    Poll(cq_b_);
    ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &mw_->Header, 0), STATUS_SUCCESS);
    Poll(cq_b_);
    Close(&read_only->Header);
    Close(&local->Header);
}

TEST_P(WindowTest, MW_03_05_06_RangeAndFlagsAreChecked) {
    EXPECT_EQ(Bind(mr_b_, kPages * PAGE_SIZE - 10, 11, NDK_OP_FLAG_ALLOW_REMOTE_READ), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(Bind(mr_b_, 0, 0, NDK_OP_FLAG_ALLOW_REMOTE_READ), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(Bind(mr_b_, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_LOCAL_WRITE), STATUS_INVALID_PARAMETER) << "not a bind flag";
    EXPECT_EQ(Bind(mr_b_, 0, PAGE_SIZE, NDK_OP_FLAG_INLINE), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(qp_b_->Dispatch->NdkBind(qp_b_, nullptr, mr_b_, mw_, nullptr, PAGE_SIZE, 0), STATUS_INVALID_PARAMETER)
        << "MW-05: zero-based";
    NDK_MR* unregistered = CreateMr(false, pd_b_);
    EXPECT_EQ(Bind(unregistered, 0, PAGE_SIZE, 0), STATUS_INVALID_DEVICE_STATE);
    Close(&unregistered->Header);
}

TEST_P(WindowTest, MW_12_13_WindowHoldsItsMrAndInvalidationReleasesIt) {
    NDK_MR* mr = CreateMr(false, pd_b_);
    ASSERT_EQ(Register(mr, buffer_b_->mdl(), buffer_b_->bytes(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    ASSERT_EQ(Bind(mr, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    Poll(cq_b_);
    const UINT32 token = mw_->Dispatch->NdkGetRemoteTokenFromMw(mw_);
    EXPECT_EQ(Deregister(mr), STATUS_INVALID_DEVICE_STATE) << "a bound window keeps the MR registered";
    Completion closed;
    NTSTATUS close_returned = mr->Dispatch->NdkCloseMr(&mr->Header, &Completion::OnClose, &closed);
    EXPECT_EQ(close_returned, STATUS_PENDING) << "MW-12: the close waits for the window";
    EXPECT_EQ(closed.calls(), 0);
    ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &mw_->Header, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Type, NdkOperationTypeInvalidate);
    EXPECT_EQ(closed.Wait(close_returned), STATUS_SUCCESS);
    EXPECT_EQ(WriteFromA(RemoteAddress(*buffer_b_), token), STATUS_INVALID_HANDLE) << "access after invalidation";
}

TEST_P(WindowTest, MW_13_RemoteInvalidationOfAWindow) {
    ASSERT_EQ(Bind(mr_b_, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    Poll(cq_b_);
    const UINT32 token = mw_->Dispatch->NdkGetRemoteTokenFromMw(mw_);
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data() + 2 * PAGE_SIZE, 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp_a_->Dispatch->NdkSendAndInvalidate(qp_a_, nullptr, &sge, 1, 0, token), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Type, NdkOperationTypeReceiveAndInvalidate);
    Poll(cq_a_);
    EXPECT_EQ(mw_->Dispatch->NdkGetRemoteTokenFromMw(mw_), 0u);
    ASSERT_EQ(Bind(mr_b_, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    Poll(cq_b_);
    EXPECT_NE(mw_->Dispatch->NdkGetRemoteTokenFromMw(mw_), token) << "TOK-04: a new key on every bind";
    ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &mw_->Header, 0), STATUS_SUCCESS);
    Poll(cq_b_);
}

TEST_P(WindowTest, MW_08_NotConnectedQpRefusesBind) {
    NDK_QP* lone = CreateQp(cq_b_, cq_b_, nullptr);
    EXPECT_EQ(lone->Dispatch->NdkBind(lone, nullptr, mr_b_, mw_, buffer_b_->data(), PAGE_SIZE, 0),
              STATUS_CONNECTION_INVALID);
    Close(&lone->Header);
}

class SmallWindowTest : public WindowTest {
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override { config.Limits.MaxWindowSize = PAGE_SIZE; }
};
SOFTNDK_ALL_MODES(SmallWindowTest);

TEST_P(SmallWindowTest, MW_11_WindowsLongerThanMaxWindowSizeAreRefused) {
    EXPECT_EQ(Info().MaxWindowSize, PAGE_SIZE);
    EXPECT_EQ(Bind(mr_b_, 0, PAGE_SIZE + 1, NDK_OP_FLAG_ALLOW_REMOTE_READ), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(Pending(cq_b_), 0u);
    ASSERT_EQ(Bind(mr_b_, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    Poll(cq_b_);
}

}  // namespace
}  // namespace softndk::test
