// QP-xx data path and the one access check (issue 3 §2 and §6), in every completion mode.
#include <cstring>

#include "api/objects.h"
#include "support/connected_pair.h"

namespace softndk::test {
namespace {

class QpTest : public ConnectedPairTest {
protected:
    void Fill(LockedBuffer& buffer, uint8_t seed) {
        for (size_t i = 0; i < buffer.bytes(); ++i) buffer.data()[i] = static_cast<uint8_t>(seed + i * 7);
    }
    // Posts a receive on B covering `length` bytes at offset 0.
    void PostReceive(ULONG length, PVOID context = reinterpret_cast<PVOID>(0x77)) {
        NDK_SGE sge = Sge(mr_b_, buffer_b_->data(), length);
        ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, context, &sge, 1), STATUS_SUCCESS);
    }
    // The access-check matrix: a request that must fail on the side the spec names and change no byte of B.
    // `layer`, `type`, `code`: the RFC 5040/5041 Terminate cause the ProviderErrorCode carries (CQ-14).
    void ExpectRemoteRefusal(NTSTATUS initiator_status, uint8_t layer, uint8_t type, uint8_t code) {
        const uint32_t cause = engine::TerminateProviderError(layer, type, code);
        NDK_RESULT_EX result = Poll(cq_a_);
        if (OverTcp() && result.Type != NdkOperationTypeRead) {
            // A Send or Write completed when it left (or was flushed by the Terminate that overtook it).
            EXPECT_TRUE(result.Status == STATUS_SUCCESS || result.Status == STATUS_CANCELLED)
                << std::hex << result.Status;
            EXPECT_EQ(result.ProviderErrorCode, NT_SUCCESS(result.Status) ? 0u : cause);
        } else {
            EXPECT_EQ(result.Status, initiator_status);
            EXPECT_EQ(result.ProviderErrorCode, cause)
                << std::hex << result.ProviderErrorCode << ": the terminate cause";
        }
        // RFC 5040 terminate: both consumers hear of it, and later requests complete as flushed, with the cause.
        EXPECT_TRUE(WaitFor([&] { return disconnects_a_.count == 1 && disconnects_b_.count == 1; }));
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
        ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
        NDK_RESULT_EX flushed = Poll(cq_a_);
        EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
        EXPECT_EQ(flushed.ProviderErrorCode, cause) << std::hex << flushed.ProviderErrorCode;
    }
    void ExpectUnchanged(const std::vector<uint8_t>& before) {
        EXPECT_EQ(std::memcmp(before.data(), buffer_b_->data(), before.size()), 0) << "target memory changed";
    }
    std::vector<uint8_t> Snapshot() { return {buffer_b_->data(), buffer_b_->data() + buffer_b_->bytes()}; }
};
SOFTNDK_ALL_MODES(QpTest);

TEST_P(QpTest, QP_04_20_SendReceiveMovesDataWithContexts) {
    Fill(*buffer_a_, 3);
    PostReceive(PAGE_SIZE);
    NDK_SGE sges[2] = {Sge(mr_a_, buffer_a_->data(), 100), Sge(mr_a_, buffer_a_->data() + 3000, 2000)};
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, reinterpret_cast<PVOID>(0x55), sges, 2, 0), STATUS_SUCCESS);
    NDK_RESULT_EX sent = Poll(cq_a_);
    EXPECT_EQ(sent.Status, STATUS_SUCCESS);
    EXPECT_EQ(sent.Type, NdkOperationTypeSend);
    EXPECT_EQ(sent.QPContext, reinterpret_cast<PVOID>(0xA));
    EXPECT_EQ(sent.RequestContext, reinterpret_cast<PVOID>(0x55));
    NDK_RESULT_EX received = Poll(cq_b_);
    EXPECT_EQ(received.Status, STATUS_SUCCESS);
    EXPECT_EQ(received.Type, NdkOperationTypeReceive);
    EXPECT_EQ(received.BytesTransferred, 2100u);  // QP-20
    EXPECT_EQ(received.QPContext, reinterpret_cast<PVOID>(0xB));
    EXPECT_EQ(received.RequestContext, reinterpret_cast<PVOID>(0x77));
    EXPECT_EQ(std::memcmp(buffer_b_->data(), buffer_a_->data(), 100), 0);
    EXPECT_EQ(std::memcmp(buffer_b_->data() + 100, buffer_a_->data() + 3000, 2000), 0);
}

TEST_P(QpTest, QP_WriteAndReadMoveDataAcrossPages) {
    Fill(*buffer_a_, 11);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data() + 10, 3 * PAGE_SIZE);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_, 20),
                                        mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    NDK_RESULT_EX written = Poll(cq_a_);
    EXPECT_EQ(written.Status, STATUS_SUCCESS);
    EXPECT_EQ(written.Type, NdkOperationTypeWrite);
    // A Write's completion frees the source; placement is certain once a later Read on the QP has completed
    // (RFC 5040 §5.5 ordering), which is when a wire peer's memory may be looked at.
    std::vector<uint8_t> source(buffer_a_->data(), buffer_a_->data() + buffer_a_->bytes());
    std::memset(buffer_a_->data(), 0, buffer_a_->bytes());
    NDK_SGE sinks[2] = {Sge(mr_a_, buffer_a_->data(), 5000), Sge(mr_a_, buffer_a_->data() + 8000, 1000)};
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, sinks, 2, RemoteAddress(*buffer_b_, 20),
                                       mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    NDK_RESULT_EX read = Poll(cq_a_);
    EXPECT_EQ(read.Status, STATUS_SUCCESS);
    EXPECT_EQ(read.Type, NdkOperationTypeRead);
    EXPECT_EQ(std::memcmp(buffer_b_->data() + 20, source.data() + 10, 3 * PAGE_SIZE), 0) << "the write landed";
    EXPECT_EQ(std::memcmp(buffer_a_->data(), buffer_b_->data() + 20, 5000), 0);
    EXPECT_EQ(std::memcmp(buffer_a_->data() + 8000, buffer_b_->data() + 5020, 1000), 0);
}

TEST_P(QpTest, QP_10_SilentSuccessQueuesNoCompletion) {
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_),
                                        mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), NDK_OP_FLAG_SILENT_SUCCESS),
              STATUS_SUCCESS);
    EXPECT_EQ(Pending(cq_a_), 0u);
    // A failing silent request still completes (QP-10).
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_), 0x12345678,
                                        NDK_OP_FLAG_SILENT_SUCCESS),
              STATUS_SUCCESS);
    if (!OverTcp()) {
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_INVALID_HANDLE);
        return;
    }
    // Over the wire the Write succeeded when it left; the peer's refusal fails the next request instead.
    EXPECT_TRUE(WaitFor([&] { return disconnects_a_.count == 1; }));
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_),
                                        mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), NDK_OP_FLAG_SILENT_SUCCESS),
              STATUS_SUCCESS);
    NDK_RESULT_EX flushed = Poll(cq_a_);
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
    EXPECT_EQ(flushed.ProviderErrorCode, engine::TerminateProviderError(1, 1, 0x00));
}

TEST_P(QpTest, QP_13_TOK_09_InlineSendIgnoresTokensAndHonoursInlineSize) {
    uint8_t message[32];
    for (uint8_t i = 0; i < 32; ++i) message[i] = i;
    PostReceive(64);
    NDK_SGE sge{};
    sge.VirtualAddress = message;
    sge.Length = 32;
    sge.MemoryRegionToken = 0xDEADBEEF;  // TOK-09: ignored
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, NDK_OP_FLAG_INLINE), STATUS_SUCCESS);
    std::memset(message, 0xFF, sizeof(message));  // the buffer may change once the call returned
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).BytesTransferred, 32u);
    for (uint8_t i = 0; i < 32; ++i) EXPECT_EQ(buffer_b_->data()[i], i);
    uint8_t large[65] = {};
    sge.VirtualAddress = large;
    sge.Length = sizeof(large);
    EXPECT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, NDK_OP_FLAG_INLINE), STATUS_INVALID_PARAMETER)
        << "above the QP's InlineDataSize";
}

TEST_P(QpTest, QP_14_FlagsARequestDoesNotListAreRejectedInline) {
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    const UINT32 remote = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    EXPECT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, NDK_OP_FLAG_ALLOW_REMOTE_READ),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_), remote, NDK_OP_FLAG_INLINE),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_), remote, 0x80000000),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(Pending(cq_a_), 0u) << "CB-17: an inline failure queues no completion";
}

TEST_P(QpTest, QP_17_18_SgeCountAndTransferLimits) {
    NDK_SGE sges[40];
    for (NDK_SGE& sge : sges) sge = Sge(mr_a_, buffer_a_->data(), 1);
    const UINT32 remote = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    EXPECT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, sges, 5, 0), STATUS_INVALID_PARAMETER) << "QP made with 4";
    EXPECT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, sges, Info().MaxReadRequestSge + 1, RemoteAddress(*buffer_b_),
                                       remote, 0),
              STATUS_INVALID_PARAMETER);
    NDK_SGE huge = Sge(mr_a_, buffer_a_->data(), Info().MaxTransferLength);
    NDK_SGE two[2] = {huge, huge};
    EXPECT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, two, 2, RemoteAddress(*buffer_b_), remote, 0),
              STATUS_INVALID_PARAMETER);
}

// Review finding 7: MaxTransferLength bounds receives too.
TEST_P(QpTest, QP_18_ReceiveLongerThanMaxTransferLengthIsRefused) {
    NDK_SGE huge = Sge(mr_b_, buffer_b_->data(), Info().MaxTransferLength);
    NDK_SGE two[2] = {huge, huge};
    EXPECT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, two, 2), STATUS_INVALID_PARAMETER);
    EXPECT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &huge, 1), STATUS_SUCCESS) << "exactly the limit is fine";
    qp_b_->Dispatch->NdkFlush(qp_b_);
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_CANCELLED);
    EXPECT_EQ(Pending(cq_b_), 0u) << "the refused receive was never queued";
}

// A local protection error on a later SGE gives back the grants of the earlier ones: nothing keeps their
// registration draining, so deregistering it completes (it pended forever before).
TEST_P(QpTest, QP_15_LocalErrorOnALaterSgeReleasesTheEarlierOnes) {
    NDK_MR* first = CreateMr(false);
    LockedBuffer memory(1);
    ASSERT_EQ(Register(first, memory.mdl(), memory.bytes(), 0), STATUS_SUCCESS);
    NDK_SGE sges[2] = {Sge(first, memory.data(), 64), Sge(mr_a_, buffer_a_->data(), 64)};
    sges[1].MemoryRegionToken ^= 0x5A;  // a stale key on the second SGE
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, sges, 2, RemoteAddress(*buffer_b_),
                                        mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_INVALID_HANDLE);
    EXPECT_EQ(Deregister(first), STATUS_SUCCESS) << "no reference of the refused request is left";
    Close(&first->Header);
}

// Review finding 4: a zero-length READ or WRITE names no memory, so its token is neither looked up nor checked
// (QP-16 decision, as siw and rxe do): it completes successfully with a garbage token and with a valid one, and
// the connection lives on.
TEST_P(QpTest, QP_16_ZeroLengthReadAndWriteDoNotUseTheirToken) {
    const UINT32 valid = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    const std::vector<uint8_t> before = Snapshot();
    for (const UINT32 token : {0xDEADBEEFu, 0u, valid}) {
        NDK_SGE empty = Sge(mr_a_, buffer_a_->data(), 0);
        EXPECT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, nullptr, 0, 0x1234, token, 0), STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS) << "write, token 0x" << std::hex << token;
        EXPECT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &empty, 1, 0x1234, token, 0), STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS) << "write of one empty SGE, token 0x" << std::hex << token;
        EXPECT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &empty, 1, 0x1234, token, 0), STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS) << "read, token 0x" << std::hex << token;
    }
    ExpectUnchanged(before);
    EXPECT_EQ(disconnects_a_.count + disconnects_b_.count, 0) << "no terminate";
    PostReceive(16);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS) << "the connection still carries traffic";
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_SUCCESS);
}

// Review finding 7 (CQ-15): a flush that overruns the CQ puts the QP in error; requests then complete flushed.
TEST_P(QpTest, CQ_15_FlushedReceivesOverrunningTheCqPutTheQpInError) {
    NDK_CQ* tiny = CreateCq(2, &cq_events_b_);
    Completion made;
    NDK_QP* qp = nullptr;
    ASSERT_EQ(made.Wait(pd_->Dispatch->NdkCreateQp(pd_, tiny, cq_a_, nullptr, 8, 8, 1, 1, 0, &Completion::OnCreate,
                                                   &made, &qp)),
              STATUS_SUCCESS);
    if (qp == nullptr) qp = reinterpret_cast<NDK_QP*>(made.object());
    NDK_QP* peer = CreateQp(cq_b_, cq_b_, nullptr);
    Connectors connectors = ConnectQps(peer, qp);
    ASSERT_NE(connectors.passive, nullptr);
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 8);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(qp->Dispatch->NdkReceive(qp, nullptr, &receive, 1), STATUS_SUCCESS);
    qp->Dispatch->NdkFlush(qp);  // three cancelled receives into a CQ of two
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    EXPECT_EQ(qp->Dispatch->NdkSend(qp, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_CANCELLED) << "the QP is in error after the overrun";
    for (NDK_CONNECTOR* connector : {connectors.active, connectors.passive}) Close(&connector->Header);
    for (NDK_OBJECT_HEADER* object : {&qp->Header, &peer->Header, &tiny->Header}) Close(object);
}

TEST_P(QpTest, QP_01_ReceivesHonourTheQpsMaxReceiveRequestSge) {
    NDK_SGE sges[5];
    for (NDK_SGE& sge : sges) sge = Sge(mr_b_, buffer_b_->data(), 8);
    EXPECT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, sges, 5), STATUS_INVALID_PARAMETER) << "made with 4";
    Completion done;
    NDK_QP* none = nullptr;
    ASSERT_EQ(done.Wait(pd_b_->Dispatch->NdkCreateQp(pd_b_, cq_b_, cq_b_, nullptr, 4, 4, 0, 1, 0, &Completion::OnCreate,
                                                     &done, &none)),
              STATUS_SUCCESS);
    if (none == nullptr) none = reinterpret_cast<NDK_QP*>(done.object());
    EXPECT_EQ(none->Dispatch->NdkReceive(none, nullptr, sges, 1), STATUS_INVALID_PARAMETER) << "made with 0";
    EXPECT_EQ(none->Dispatch->NdkReceive(none, nullptr, nullptr, 0), STATUS_SUCCESS) << "an SGE-less receive";
    Close(&none->Header);
    Pending(cq_b_);
}

TEST_P(QpTest, QP_21_CQ_22_FlushCancelsQueuedReceives) {
    PostReceive(16, reinterpret_cast<PVOID>(1));
    PostReceive(16, reinterpret_cast<PVOID>(2));
    qp_b_->Dispatch->NdkFlush(qp_b_);
    NDK_RESULT_EX first = Poll(cq_b_);
    NDK_RESULT_EX second = Poll(cq_b_);
    EXPECT_EQ(first.Status, STATUS_CANCELLED);
    EXPECT_EQ(first.RequestContext, reinterpret_cast<PVOID>(1));
    EXPECT_EQ(second.Status, STATUS_CANCELLED);
    EXPECT_EQ(second.RequestContext, reinterpret_cast<PVOID>(2));
}

// ---- the access-check matrix (issue 3 §6) ----
TEST_P(QpTest, QP_15_TOK_06_AccessUnknownTokenFailsInvalidHandle) {
    auto before = Snapshot();
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_), 0x00FFFF42, 0),
              STATUS_SUCCESS);
    ExpectRemoteRefusal(STATUS_INVALID_HANDLE, 1, 1, 0x00);  // DDP tagged buffer: invalid STag
    ExpectUnchanged(before);
}

TEST_P(QpTest, QP_AccessStaleKeyFailsInvalidHandle) {
    auto before = Snapshot();
    const UINT32 remote = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_), remote ^ 0x5A, 0),
              STATUS_SUCCESS);
    ExpectRemoteRefusal(STATUS_INVALID_HANDLE, 1, 1, 0x00);
    ExpectUnchanged(before);
}

TEST_P(QpTest, QP_AccessTokenOfAnotherPdFailsAccessDenied) {
    NDK_PD* other_pd = CreatePd(adapter_b_);
    NDK_MR* other = CreateMr(false, other_pd);
    LockedBuffer target(1);
    ASSERT_EQ(Register(other, target.mdl(), target.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    std::vector<uint8_t> before(target.data(), target.data() + target.bytes());
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, reinterpret_cast<UINT64>(target.data()),
                                        other->Dispatch->NdkGetRemoteTokenFromMr(other), 0),
              STATUS_SUCCESS);
    ExpectRemoteRefusal(STATUS_ACCESS_DENIED, 1, 1, 0x02);  // DDP: STag not associated with this stream
    EXPECT_EQ(std::memcmp(before.data(), target.data(), before.size()), 0);
    Close(&other->Header);
    Close(&other_pd->Header);
}

TEST_P(QpTest, QP_16_AccessBelowBasePastEndAndWrappingFail) {
    const UINT32 remote = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    const UINT64 base = RemoteAddress(*buffer_b_);
    const UINT64 cases[] = {base - 1, base + buffer_b_->bytes() - 63, ~UINT64{0} - 10};
    auto before = Snapshot();
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, cases[0], remote, 0), STATUS_SUCCESS);
    ExpectRemoteRefusal(STATUS_REMOTE_RESOURCES, 1, 1, 0x01);  // DDP: base or bounds
    ExpectUnchanged(before);
    // The other two, checked directly against the one access check (the connection is dead now).
    SOFTNDK_SKIP_WITH_THE_PEER_IN_ANOTHER_PROCESS("the direct checks need B's token table in this process");
    auto& tokens = api::FromHandle<api::AdapterObject>(adapter_)->tokens;
    for (UINT64 address : {cases[1], cases[2]}) {
        mem::TokenRef grant;
        EXPECT_EQ(mem::CheckAccess(tokens, {remote, mem::TokenKind::kRemote, pd_, address, 64, mem::kRightRemoteWrite},
                                   &grant),
                  mem::AccessError::kOutOfBounds)
            << std::hex << address;
        EXPECT_EQ(mem::CheckAccess(
                      tokens, {remote, mem::TokenKind::kRemote, pd_, base, ~UINT64{0}, mem::kRightRemoteWrite}, &grant),
                  mem::AccessError::kOutOfBounds);
    }
}

TEST_P(QpTest, QP_AccessWriteWithoutRemoteWriteFailsAccessViolation) {
    NDK_MR* read_only = CreateMr(false, pd_b_);
    ASSERT_EQ(Register(read_only, buffer_b_->mdl(), buffer_b_->bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    auto before = Snapshot();
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_),
                                        read_only->Dispatch->NdkGetRemoteTokenFromMr(read_only), 0),
              STATUS_SUCCESS);
    ExpectRemoteRefusal(STATUS_ACCESS_VIOLATION, 0, 1, 0x02);  // RDMAP: access rights
    ExpectUnchanged(before);
    Close(&read_only->Header);
}

TEST_P(QpTest, QP_AccessReadWithoutRemoteReadFailsAccessViolation) {
    NDK_MR* write_only = CreateMr(false, pd_b_);
    ASSERT_EQ(Register(write_only, buffer_b_->mdl(), buffer_b_->bytes(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE),
              STATUS_SUCCESS);
    std::memset(buffer_a_->data(), 0x3C, 64);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_),
                                       write_only->Dispatch->NdkGetRemoteTokenFromMr(write_only), 0),
              STATUS_SUCCESS);
    ExpectRemoteRefusal(STATUS_ACCESS_VIOLATION, 0, 1, 0x02);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(buffer_a_->data()[i], 0x3C) << "the sink is untouched";
    Close(&write_only->Header);
}

TEST_P(QpTest, QP_15_TOK_08_AccessLocalSgeOutsideItsMrFailsLocally) {
    auto before = Snapshot();
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data() + buffer_a_->bytes() - 10, 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_),
                                        mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_INVALID_PARAMETER);  // the local bounds status
    ExpectUnchanged(before);
}

TEST_P(QpTest, QP_AccessReceiveIntoMrWithoutLocalWriteFails) {
    NDK_MR* read_only = CreateMr(false, pd_b_);
    ASSERT_EQ(Register(read_only, buffer_b_->mdl(), buffer_b_->bytes(), 0), STATUS_SUCCESS);
    NDK_SGE receive = Sge(read_only, buffer_b_->data(), 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    auto before = Snapshot();
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_ACCESS_VIOLATION) << "the receiver's local write check";
    const NDK_RESULT_EX sent = Poll(cq_a_);
    if (OverTcp())  // completed when it left, unless the Terminate overtook it
        EXPECT_TRUE(sent.Status == STATUS_SUCCESS || sent.Status == STATUS_CANCELLED) << std::hex << sent.Status;
    else
        EXPECT_EQ(sent.Status, STATUS_CONNECTION_ABORTED);
    ExpectUnchanged(before);
    Close(&read_only->Header);
}

TEST_P(QpTest, QP_AccessReadIntoSinkWithoutLocalWriteFails) {
    NDK_MR* read_only = CreateMr(false);
    ASSERT_EQ(Register(read_only, buffer_a_->mdl(), buffer_a_->bytes(), 0), STATUS_SUCCESS);
    std::memset(buffer_a_->data(), 0x11, 64);
    NDK_SGE sink = Sge(read_only, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sink, 1, RemoteAddress(*buffer_b_),
                                       mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_ACCESS_VIOLATION);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(buffer_a_->data()[i], 0x11);
    Close(&read_only->Header);
}

TEST_P(QpTest, QP_AccessAfterDeregistrationFails) {
    NDK_MR* extra = CreateMr(false, pd_b_);
    ASSERT_EQ(Register(extra, buffer_b_->mdl(), buffer_b_->bytes(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    const UINT32 token = extra->Dispatch->NdkGetRemoteTokenFromMr(extra);
    ASSERT_EQ(Deregister(extra), STATUS_SUCCESS);
    auto before = Snapshot();
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_), token, 0), STATUS_SUCCESS);
    ExpectRemoteRefusal(STATUS_INVALID_HANDLE, 1, 1, 0x00);
    ExpectUnchanged(before);
    Close(&extra->Header);
}

TEST_P(QpTest, QP_SendLargerThanThePostedReceiveFailsBufferOverflow) {
    PostReceive(16);
    auto before = Snapshot();
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 17);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_BUFFER_OVERFLOW);
    ExpectRemoteRefusal(STATUS_BUFFER_OVERFLOW, 1, 2, 0x05);  // DDP untagged: message too long
    ExpectUnchanged(before);
}

TEST_P(QpTest, QP_SendWithNoReceivePostedAbortsTheConnection) {
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    ExpectRemoteRefusal(STATUS_CONNECTION_ABORTED, 1, 2, 0x02);  // DDP untagged: no buffer
}

TEST_P(QpTest, QP_TerminateFlushesTheReceivesOfBothSides) {
    PostReceive(16, reinterpret_cast<PVOID>(9));
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, 0, 0x42, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX written = Poll(cq_a_);
    if (OverTcp())  // completed when it left, unless the Terminate overtook it
        EXPECT_TRUE(written.Status == STATUS_SUCCESS || written.Status == STATUS_CANCELLED)
            << std::hex << written.Status;
    else
        EXPECT_EQ(written.Status, STATUS_INVALID_HANDLE);
    NDK_RESULT_EX flushed = Poll(cq_b_);
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
    EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(9));
}

TEST_P(QpTest, QP_19_CM_02_03_NoReadWhenTheOutboundLimitIsZero) {
    // A second pair whose connect asks for no outbound reads.
    CqEvents events;
    NDK_CQ* cq = CreateCq(16, &events);
    NDK_QP* qp_c = CreateQp(cq, cq, nullptr);
    NDK_QP* qp_d = CreateQp(cq, cq, nullptr);
    uint16_t port = 0;
    ConnectEvents connects;
    NDK_LISTENER* listener = Listen(&connects, 0, &port);
    NDK_CONNECTOR* active = CreateConnector();
    SOCKADDR_IN source = Loopback(0);
    SOCKADDR_IN destination = Loopback(port);
    Completion connected;
    NTSTATUS returned = active->Dispatch->NdkConnect(active, qp_c, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
                                                     reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 4,
                                                     0, nullptr, 0, &Completion::OnRequest, &connected);
    ASSERT_TRUE(WaitFor([&] { return connects.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = connects.incoming;
    ULONG inbound = 99, outbound = 99, length = 0;
    EXPECT_EQ(passive->Dispatch->NdkGetConnectionData(passive, &inbound, &outbound, nullptr, &length), STATUS_SUCCESS);
    EXPECT_EQ(inbound, 0u) << "the caller's outbound limit";
    EXPECT_EQ(outbound, 4u);
    Completion accepted;
    NTSTATUS accept_returned = passive->Dispatch->NdkAccept(passive, qp_d, 200, 200, nullptr, 0, nullptr, nullptr,
                                                            &Completion::OnRequest, &accepted);
    ASSERT_EQ(connected.Wait(returned), STATUS_SUCCESS);
    EXPECT_EQ(active->Dispatch->NdkGetConnectionData(active, &inbound, &outbound, nullptr, &length), STATUS_SUCCESS);
    EXPECT_EQ(inbound, 4u) << "CM-03: min(4, the passive side's capped outbound 128)";
    EXPECT_EQ(outbound, 0u);
    Completion completed;
    ASSERT_EQ(completed.Wait(
                  active->Dispatch->NdkCompleteConnect(active, nullptr, nullptr, &Completion::OnRequest, &completed)),
              STATUS_SUCCESS);
    ASSERT_EQ(accepted.Wait(accept_returned), STATUS_SUCCESS);
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 8);
    EXPECT_EQ(qp_c->Dispatch->NdkRead(qp_c, nullptr, &sink, 1, RemoteAddress(*buffer_b_),
                                      mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_INSUFFICIENT_RESOURCES);
    for (NDK_OBJECT_HEADER* object :
         {&active->Header, &passive->Header, &listener->Header, &qp_c->Header, &qp_d->Header, &cq->Header})
        Close(object);
}

TEST_P(QpTest, QP_09_NotConnectedQpRefusesInitiatorRequests) {
    NDK_QP* lone = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
    const UINT32 remote = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    EXPECT_EQ(lone->Dispatch->NdkSend(lone, nullptr, &sge, 1, 0), STATUS_CONNECTION_INVALID);
    EXPECT_EQ(lone->Dispatch->NdkSendAndInvalidate(lone, nullptr, &sge, 1, 0, remote), STATUS_CONNECTION_INVALID);
    EXPECT_EQ(lone->Dispatch->NdkWrite(lone, nullptr, &sge, 1, RemoteAddress(*buffer_b_), remote, 0),
              STATUS_CONNECTION_INVALID);
    EXPECT_EQ(lone->Dispatch->NdkRead(lone, nullptr, &sge, 1, RemoteAddress(*buffer_b_), remote, 0),
              STATUS_CONNECTION_INVALID);
    EXPECT_EQ(lone->Dispatch->NdkInvalidate(lone, nullptr, &mr_a_->Header, 0), STATUS_CONNECTION_INVALID);
    EXPECT_EQ(lone->Dispatch->NdkReceive(lone, nullptr, &sge, 1), STATUS_SUCCESS)
        << "AMB-29: receives may be pre-posted";
    EXPECT_EQ(Pending(cq_a_), 0u);
    Close(&lone->Header);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_CANCELLED) << "LIFE-09: closing the QP flushes its receive";
}

TEST_P(QpTest, QP_01_AI_02_CreateQpEnforcesTheAdvertisedLimits) {
    const NDK_ADAPTER_INFO info = Info();
    Completion done;
    NDK_QP* qp = nullptr;
    auto create = pd_->Dispatch->NdkCreateQp;
    EXPECT_EQ(create(pd_, cq_a_, cq_a_, nullptr, info.MaxReceiveQueueDepth + 1, 1, 1, 1, 0, &Completion::OnCreate,
                     &done, &qp),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(create(pd_, cq_a_, cq_a_, nullptr, 1, info.MaxInitiatorQueueDepth + 1, 1, 1, 0, &Completion::OnCreate,
                     &done, &qp),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(create(pd_, cq_a_, cq_a_, nullptr, 1, 1, info.MaxReceiveRequestSge + 1, 1, 0, &Completion::OnCreate,
                     &done, &qp),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(create(pd_, cq_a_, cq_a_, nullptr, 1, 1, 1, info.MaxInitiatorRequestSge + 1, 0, &Completion::OnCreate,
                     &done, &qp),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(
        create(pd_, cq_a_, cq_a_, nullptr, 1, 1, 1, 1, info.MaxInlineDataSize + 1, &Completion::OnCreate, &done, &qp),
        STATUS_INVALID_PARAMETER);
    EXPECT_EQ(create(pd_, nullptr, cq_a_, nullptr, 1, 1, 1, 1, 0, &Completion::OnCreate, &done, &qp),
              STATUS_INVALID_PARAMETER);
    EXPECT_EQ(qp, nullptr);
}

}  // namespace
}  // namespace softndk::test

namespace softndk::test {
namespace {

class ReadSinkRequiredTest : public ConnectedPairTest {
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Limits.AdapterFlags &= ~NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED;
    }
};
SOFTNDK_ALL_MODES(ReadSinkRequiredTest);

TEST_P(ReadSinkRequiredTest, MR_13_ReadIntoASinkWithoutReadSinkFailsWhereTheAdapterRequiresIt) {
    NDK_MR* plain = CreateMr(false);
    ASSERT_EQ(Register(plain, buffer_a_->mdl(), buffer_a_->bytes(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    NDK_MR* sink = CreateMr(false);
    ASSERT_EQ(Register(sink, buffer_a_->mdl(), buffer_a_->bytes(),
                       NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK),
              STATUS_SUCCESS);
    std::memset(buffer_b_->data(), 0x6B, 64);
    std::memset(buffer_a_->data(), 0, 64);
    NDK_SGE good = Sge(sink, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &good, 1, RemoteAddress(*buffer_b_),
                                       mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    EXPECT_EQ(buffer_a_->data()[63], 0x6B);
    std::memset(buffer_a_->data(), 0, 64);
    NDK_SGE bad = Sge(plain, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &bad, 1, RemoteAddress(*buffer_b_),
                                       mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_ACCESS_VIOLATION);
    EXPECT_EQ(buffer_a_->data()[63], 0) << "the sink is untouched";
    Close(&plain->Header);
    Close(&sink->Header);
}

class DeferTest : public ConnectedPairTest {};
SOFTNDK_ALL_MODES(DeferTest);

// CB-19's worked example: two deferred fast-registers, the second fails inline; the first still completes.
TEST_P(DeferTest, CB_15_16_17_18_19_DeferredRequestsCompleteWhenALaterOneFailsInline) {
    std::vector<uint8_t> storage(NDK_LAM_SIZE(kPages));
    auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(storage.data());
    ULONG size = static_cast<ULONG>(storage.size());
    ULONG fbo = 0;
    ASSERT_EQ(BuildLam(buffer_b_->mdl(), buffer_b_->bytes(), lam, &size, &fbo, adapter_b_), STATUS_SUCCESS);
    NDK_MR* first = CreateMr(true, pd_b_);
    NDK_MR* second = CreateMr(true, pd_b_);
    ASSERT_EQ(InitializeFast(first, kPages, FALSE), STATUS_SUCCESS);
    ASSERT_EQ(InitializeFast(second, kPages, FALSE), STATUS_SUCCESS);
    EXPECT_EQ(qp_b_->Dispatch->NdkFastRegister(qp_b_, reinterpret_cast<PVOID>(1), first, kPages, lam->AdapterPageArray,
                                               0, PAGE_SIZE, reinterpret_cast<PVOID>(0x10000), NDK_OP_FLAG_DEFER),
              STATUS_SUCCESS);
    EXPECT_EQ(qp_b_->Dispatch->NdkFastRegister(qp_b_, reinterpret_cast<PVOID>(2), second, kPages, lam->AdapterPageArray,
                                               0, PAGE_SIZE, reinterpret_cast<PVOID>(0x10000),
                                               NDK_OP_FLAG_DEFER | NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
              STATUS_ACCESS_VIOLATION);
    NDK_RESULT_EX result = Poll(cq_b_);
    EXPECT_EQ(result.Status, STATUS_SUCCESS);
    EXPECT_EQ(result.RequestContext, reinterpret_cast<PVOID>(1));
    EXPECT_EQ(Pending(cq_b_), 0u) << "no completion for the request that failed inline (CB-17)";
    Close(&first->Header);
    Close(&second->Header);
    adapter_b_->Dispatch->NdkReleaseLAM(adapter_b_, lam);
}

TEST_P(DeferTest, TOK_17_ReadLocalInvalidateIsIgnoredWithoutTheCapability) {
    EXPECT_EQ(Info().AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED, 0u);
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sink, 1, RemoteAddress(*buffer_b_),
                                       mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_),
                                       NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    EXPECT_NE(mr_a_->Dispatch->NdkGetLocalTokenFromMr(mr_a_), 0u) << "the sink's token is untouched";
}

}  // namespace
}  // namespace softndk::test
