// Issue 33 §4.1: a refused token explains itself. A local SGE's refusal leaves in SoftNdkGetLastErrorText() the
// token (hex), the QP and PD it was looked up for, the status and why the token table refused it (TOK-06, TOK-08,
// MR-18, FR-22, MW-13). The statuses and terminate codes are those of qp_test.cpp; only the text is checked here.
#include <cstdio>
#include <string>

#include "support/connected_pair.h"

namespace softndk::test {
namespace {

class RefusalTextTest : public ConnectedPairTest {
protected:
    void TearDown() override {
        if (fast_ != nullptr) Close(&fast_->Header);
        if (mw_ != nullptr) Close(&mw_->Header);
        if (lam_ != nullptr) adapter_->Dispatch->NdkReleaseLAM(adapter_, lam_);
        ConnectedPairTest::TearDown();
    }
    static std::string Hex(UINT32 token) {
        char text[16];
        std::snprintf(text, sizeof(text), "0x%08X", token);
        return text;
    }
    static std::string Pointer(const void* pointer) {
        char text[32];
        std::snprintf(text, sizeof(text), "%p", pointer);
        return text;
    }
    // Sends 64 bytes from A at `address` with `token` as the SGE's local token; returns the last-error text the
    // refused post left and expects the completion's `status`.
    std::string RefusedSend(UINT32 token, NTSTATUS status = STATUS_INVALID_HANDLE, uint8_t* address = nullptr) {
        NDK_SGE sge{};
        sge.VirtualAddress = address != nullptr ? address : buffer_a_->data();
        sge.Length = 64;
        sge.MemoryRegionToken = token;
        SoftNdkClearLastErrorText();
        EXPECT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
        const std::string text = SoftNdkGetLastErrorText();
        EXPECT_EQ(Poll(cq_a_).Status, status) << text;
        return text;
    }
    // Every refusal's text names the token, the QP, the PD and the status with its code.
    void ExpectNames(const std::string& text, UINT32 token, const char* status) {
        EXPECT_NE(text.find("token " + Hex(token)), std::string::npos) << text;
        EXPECT_NE(text.find("QP " + Pointer(qp_a_)), std::string::npos) << text;
        EXPECT_NE(text.find("PD " + Pointer(pd_)), std::string::npos) << text;
        EXPECT_NE(text.find(status), std::string::npos) << text;
    }
    static void ExpectSays(const std::string& text, const char* reason) {
        EXPECT_NE(text.find(reason), std::string::npos) << "expected \"" << reason << "\" in: " << text;
    }
    // A fast-register MR of A's PD over buffer_a_, initialised; registered at kBase when `registered`.
    void MakeFastMr(bool registered) {
        lam_storage_.reset(new uint8_t[NDK_LAM_SIZE(kPages)]);
        lam_ = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(lam_storage_.get());
        ULONG size = NDK_LAM_SIZE(kPages);
        ULONG fbo = 0;
        ASSERT_EQ(BuildLam(buffer_a_->mdl(), buffer_a_->bytes(), lam_, &size, &fbo), STATUS_SUCCESS);
        fast_ = CreateMr(true);
        ASSERT_EQ(InitializeFast(fast_, kPages, FALSE), STATUS_SUCCESS);
        if (!registered) return;
        ASSERT_EQ(qp_a_->Dispatch->NdkFastRegister(qp_a_, nullptr, fast_, kPages, lam_->AdapterPageArray, 0,
                                                   kPages * PAGE_SIZE, reinterpret_cast<PVOID>(kBase), 0),
                  STATUS_SUCCESS);
        ASSERT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    }

    static constexpr uint64_t kBase = 0x500000000000ull;
    std::unique_ptr<uint8_t[]> lam_storage_;
    NDK_LOGICAL_ADDRESS_MAPPING* lam_ = nullptr;
    NDK_MR* fast_ = nullptr;
    NDK_MW* mw_ = nullptr;
};
SOFTNDK_ALL_MODES(RefusalTextTest);

TEST_P(RefusalTextTest, TOK_06_UnknownTokenIsNamedUnknown) {
    const std::string text = RefusedSend(0x00FFFF42);
    ExpectNames(text, 0x00FFFF42, "STATUS_INVALID_HANDLE (0xC0000008)");
    ExpectSays(text, "(local)");
    ExpectSays(text, "unknown, no token was ever issued");
}

TEST_P(RefusalTextTest, TOK_06_StaleKeyNamesTheTokenTheSlotAnswersToNow) {
    const UINT32 local = mr_a_->Dispatch->NdkGetLocalTokenFromMr(mr_a_);
    const UINT32 remote = mr_a_->Dispatch->NdkGetRemoteTokenFromMr(mr_a_);
    UINT32 stale = local ^ 1;
    while (stale == local || (stale & 0xFF) == (remote & 0xFF)) stale = (stale & ~0xFFu) | ((stale + 1) & 0xFF);
    const std::string text = RefusedSend(stale);
    ExpectNames(text, stale, "STATUS_INVALID_HANDLE (0xC0000008)");
    ExpectSays(text, "stale key");
    ExpectSays(text, ("answers to " + Hex(local) + " now").c_str());
}

TEST_P(RefusalTextTest, TOK_08_TokenOfAnotherPdNamesItsPd) {
    NDK_PD* other_pd = CreatePd();
    NDK_MR* other = CreateMr(false, other_pd);
    LockedBuffer memory(1);
    ASSERT_EQ(Register(other, memory.mdl(), memory.bytes(), 0), STATUS_SUCCESS);
    const UINT32 token = other->Dispatch->NdkGetLocalTokenFromMr(other);
    const std::string text = RefusedSend(token, STATUS_ACCESS_DENIED, memory.data());
    ExpectNames(text, token, "STATUS_ACCESS_DENIED (0xC0000022)");
    ExpectSays(text, ("another protection domain: it belongs to PD " + Pointer(other_pd)).c_str());
    Close(&other->Header);
    Close(&other_pd->Header);
}

TEST_P(RefusalTextTest, MR_18_TokenOfADeregisteredMrSaysSo) {
    NDK_MR* mr = CreateMr(false);
    LockedBuffer memory(1);
    ASSERT_EQ(Register(mr, memory.mdl(), memory.bytes(), 0), STATUS_SUCCESS);
    const UINT32 token = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    ASSERT_EQ(Deregister(mr), STATUS_SUCCESS);
    const std::string text = RefusedSend(token, STATUS_INVALID_HANDLE, memory.data());
    ExpectNames(text, token, "STATUS_INVALID_HANDLE (0xC0000008)");
    ExpectSays(text, "its MR was deregistered or closed");
    Close(&mr->Header);
}

TEST_P(RefusalTextTest, MR_18_TokenOfAClosedMrSaysSo) {
    NDK_MR* mr = CreateMr(false);
    LockedBuffer memory(1);
    ASSERT_EQ(Register(mr, memory.mdl(), memory.bytes(), 0), STATUS_SUCCESS);
    const UINT32 token = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    Close(&mr->Header);
    const std::string text = RefusedSend(token, STATUS_INVALID_HANDLE, memory.data());
    ExpectNames(text, token, "STATUS_INVALID_HANDLE (0xC0000008)");
    ExpectSays(text, "its MR was deregistered or closed");
}

TEST_P(RefusalTextTest, TOK_06_RemoteTokenUsedAsLocalSaysWhichTokenIsNeeded) {
    const UINT32 remote = mr_a_->Dispatch->NdkGetRemoteTokenFromMr(mr_a_);
    const std::string text = RefusedSend(remote);
    ExpectNames(text, remote, "STATUS_INVALID_HANDLE (0xC0000008)");
    ExpectSays(text, "the remote token of an MR or MW used as a local token");
    ExpectSays(text, "NdkGetLocalTokenFromMr");
}

TEST_P(RefusalTextTest, FR_22_TokenOfAnInitialisedButUnregisteredFastMrSaysSo) {
    ASSERT_NO_FATAL_FAILURE(MakeFastMr(false));
    const UINT32 token = fast_->Dispatch->NdkGetLocalTokenFromMr(fast_);
    const std::string text = RefusedSend(token, STATUS_INVALID_HANDLE, reinterpret_cast<uint8_t*>(kBase));
    ExpectNames(text, token, "STATUS_INVALID_HANDLE (0xC0000008)");
    ExpectSays(text, "not registered; NdkFastRegister it");
}

TEST_P(RefusalTextTest, FR_22_TokenOfAnInvalidatedFastMrSaysSo) {
    ASSERT_NO_FATAL_FAILURE(MakeFastMr(true));
    const UINT32 token = fast_->Dispatch->NdkGetLocalTokenFromMr(fast_);
    ASSERT_EQ(qp_a_->Dispatch->NdkInvalidate(qp_a_, nullptr, &fast_->Header, 0), STATUS_SUCCESS);
    ASSERT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    const std::string text = RefusedSend(token, STATUS_INVALID_HANDLE, reinterpret_cast<uint8_t*>(kBase));
    ExpectNames(text, token, "STATUS_INVALID_HANDLE (0xC0000008)");
    ExpectSays(text, "its fast-register MR was invalidated");
}

TEST_P(RefusalTextTest, MW_13_TokenOfAnUnboundWindowSaysSo) {
    Completion created;
    NTSTATUS returned = pd_->Dispatch->NdkCreateMw(pd_, &Completion::OnCreate, &created, &mw_);
    ASSERT_EQ(created.Wait(returned), STATUS_SUCCESS);
    if (mw_ == nullptr) mw_ = reinterpret_cast<NDK_MW*>(created.object());
    ASSERT_EQ(qp_a_->Dispatch->NdkBind(qp_a_, nullptr, mr_a_, mw_, buffer_a_->data(), PAGE_SIZE,
                                       NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
              STATUS_SUCCESS);
    ASSERT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    const UINT32 token = mw_->Dispatch->NdkGetRemoteTokenFromMw(mw_);
    ASSERT_EQ(qp_a_->Dispatch->NdkInvalidate(qp_a_, nullptr, &mw_->Header, 0), STATUS_SUCCESS);
    ASSERT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    const std::string text = RefusedSend(token);
    ExpectNames(text, token, "STATUS_INVALID_HANDLE (0xC0000008)");
    ExpectSays(text, "its memory window is not bound");
}

}  // namespace
}  // namespace softndk::test
