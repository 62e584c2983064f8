// The data path with the peer in another process (issue 7 §5, third configuration): Send/Receive, Write and
// Read placement, refusals, fast registration, disconnect and a killed peer. The fixture and the peer's control
// protocol: remote_peer_fixture.h.
#include "peer/remote_peer_fixture.h"

namespace softndk::test {
namespace {

SOFTNDK_ALL_MODES(RemotePeerTest);

TEST_P(RemotePeerTest, QP_04_20_SendLandsInThePeersReceiveWithItsContextAndLength) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ASSERT_EQ(Call(Op::kFill, region.index, 0).status, STATUS_SUCCESS);
    ASSERT_EQ(Call(Op::kReceive, region.index, 512, 256, 0x77).status, STATUS_SUCCESS);
    for (int i = 0; i < 48; ++i) buffer_->data()[i] = static_cast<uint8_t>(0xA0 + i);
    NDK_SGE sge = LocalSge(0, 48);
    ASSERT_EQ(qp_->Dispatch->NdkSend(qp_, reinterpret_cast<PVOID>(0x5), &sge, 1, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX sent = Next();
    EXPECT_EQ(sent.Status, STATUS_SUCCESS);
    EXPECT_EQ(sent.RequestContext, reinterpret_cast<PVOID>(0x5));
    const Reply received = PeerPoll();
    ASSERT_EQ(received.status, STATUS_SUCCESS) << "no receive completion at the peer";
    EXPECT_EQ(received.value, static_cast<uint32_t>(NdkOperationTypeReceive));
    EXPECT_EQ(static_cast<NTSTATUS>(received.a), STATUS_SUCCESS);
    EXPECT_EQ(received.b, 48u) << "QP-20: BytesTransferred";
    EXPECT_EQ(received.c, 0x77u);
    const std::vector<uint8_t> landed = PeerMemory(region, 512, 64);
    for (int i = 0; i < 48; ++i) EXPECT_EQ(landed[i], 0xA0 + i);
    for (int i = 48; i < 64; ++i) EXPECT_EQ(landed[i], 0) << "nothing beyond the message";
}

TEST_P(RemotePeerTest, QP_16_WriteThenReadMoveBytesAcrossProcesses) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    constexpr ULONG kBytes = 3 * PAGE_SIZE;
    for (ULONG i = 0; i < kBytes; ++i) buffer_->data()[i] = static_cast<uint8_t>(i * 7 + 3);
    NDK_SGE out = LocalSge(0, kBytes);
    ASSERT_EQ(qp_->Dispatch->NdkWrite(qp_, nullptr, &out, 1, region.address + 100, region.token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Next().Status, STATUS_SUCCESS);
    std::memset(buffer_->data() + kBytes, 0, PAGE_SIZE);
    NDK_SGE back = LocalSge(kBytes, 1000);
    ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &back, 1, region.address + 100, region.token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Next().Status, STATUS_SUCCESS);  // RFC 5040: the Write is placed before the Read is answered
    EXPECT_EQ(std::memcmp(buffer_->data() + kBytes, buffer_->data(), 1000), 0) << "read back";
    const std::vector<uint8_t> placed = PeerMemory(region, 100, kBytes);
    EXPECT_EQ(std::memcmp(placed.data(), buffer_->data(), kBytes), 0) << "the peer's memory holds the Write";
    EXPECT_EQ(disconnects_.count, 0);
}

TEST_P(RemotePeerTest, QP_15_TOK_06_WriteToAnUnknownTokenIsRefusedAndPlacesNothing) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(region, region.token ^ 0x00550000u, region.address, engine::TerminateProviderError(1, 1, 0x00));
}

TEST_P(RemotePeerTest, QP_16_WritePastTheRegionsEndIsRefusedAndPlacesNothing) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(region, region.token, region.address + kPages * PAGE_SIZE - 100,
                       engine::TerminateProviderError(1, 1, 0x01));
}

TEST_P(RemotePeerTest, MR_19_TokenOfADeregisteredRegionIsRefused) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const PeerRegion gone = PeerRegister(1, kRemoteAll);
    ASSERT_EQ(Call(Op::kDeregister, gone.index).status, STATUS_SUCCESS);
    ExpectWriteRefused(region, gone.token, gone.address, engine::TerminateProviderError(1, 1, 0x00));
}

TEST_P(RemotePeerTest, QP_16_ReadBeyondTheRegionCompletesWithRemoteResources) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    NDK_SGE sink = LocalSge(0, 64);
    ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &sink, 1, region.address + kPages * PAGE_SIZE - 8, region.token, 0),
              STATUS_SUCCESS);
    const NDK_RESULT_EX read = Next();
    EXPECT_EQ(read.Status, STATUS_REMOTE_RESOURCES) << std::hex << read.Status;
    EXPECT_EQ(read.ProviderErrorCode, engine::TerminateProviderError(0, 1, 0x01));
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1; }));
}

TEST_P(RemotePeerTest, TOK_06_ReadOfARegionWithoutRemoteReadIsAccessViolation) {
    const PeerRegion region = PeerRegister(1, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE);
    NDK_SGE sink = LocalSge(0, 64);
    ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &sink, 1, region.address, region.token, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX read = Next();
    EXPECT_EQ(read.Status, STATUS_ACCESS_VIOLATION) << std::hex << read.Status;
    EXPECT_EQ(read.ProviderErrorCode, engine::TerminateProviderError(0, 1, 0x02));
}

TEST_P(RemotePeerTest, QP_17_SendLargerThanThePeersReceiveEndsTheConnectionWithItsCause) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ASSERT_EQ(Call(Op::kReceive, region.index, 0, 16, 0x31).status, STATUS_SUCCESS);
    NDK_SGE sge = LocalSge(0, 64);
    ASSERT_EQ(qp_->Dispatch->NdkSend(qp_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    const Reply receive = PeerPoll();
    ASSERT_EQ(receive.status, STATUS_SUCCESS);
    EXPECT_EQ(receive.c, 0x31u);
    EXPECT_NE(static_cast<NTSTATUS>(receive.a), STATUS_SUCCESS) << "the peer's receive fails";
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1; })) << "the peer's Terminate reached us";
    NDK_SGE later = LocalSge(0, 8);
    Next();  // the Send itself: it left before the Terminate came back
    ASSERT_EQ(qp_->Dispatch->NdkSend(qp_, nullptr, &later, 1, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX flushed = Next();
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
    EXPECT_EQ(flushed.ProviderErrorCode, engine::TerminateProviderError(1, 2, 0x05))
        << std::hex << flushed.ProviderErrorCode;
}

// A fast-registered region of the peer: written through its token, then retired by our Send with Invalidate. The
// peer's receive says which token it invalidated, and a Write through it afterwards is refused.
TEST_P(RemotePeerTest, FR_18_TOK_10_13_14_SendWithInvalidateRetiresThePeersFastRegisteredToken) {
    const Reply fast = Call(Op::kFastRegister, 0, 2, NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ);
    ASSERT_EQ(fast.status, STATUS_SUCCESS);
    const PeerRegion region{fast.value, static_cast<UINT32>(fast.a), fast.b};
    std::memset(buffer_->data(), 0x3E, 128);
    NDK_SGE out = LocalSge(0, 128);
    ASSERT_EQ(qp_->Dispatch->NdkWrite(qp_, nullptr, &out, 1, region.address + 8, region.token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Next().Status, STATUS_SUCCESS);
    NDK_SGE probe = LocalSge(PAGE_SIZE, 1);
    ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &probe, 1, region.address + 8, region.token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Next().Status, STATUS_SUCCESS) << "the fast-registered token works";
    EXPECT_EQ(PeerMemory(region, 8, 128), std::vector<uint8_t>(128, 0x3E));
    const PeerRegion inbox = PeerRegister(1, kRemoteAll);
    ASSERT_EQ(Call(Op::kReceive, inbox.index, 0, 64, 0x42).status, STATUS_SUCCESS);
    NDK_SGE sge = LocalSge(0, 16);
    ASSERT_EQ(qp_->Dispatch->NdkSendAndInvalidate(qp_, nullptr, &sge, 1, 0, region.token), STATUS_SUCCESS);
    EXPECT_EQ(Next().Type, NdkOperationTypeSend) << "TOK-13";
    const Reply received = PeerPoll();
    ASSERT_EQ(received.status, STATUS_SUCCESS);
    EXPECT_EQ(static_cast<NTSTATUS>(received.a), STATUS_SUCCESS);
    EXPECT_EQ(received.value, static_cast<uint32_t>(NdkOperationTypeReceiveAndInvalidate));
    EXPECT_EQ(received.e, region.token) << "the invalidated token";
    const PeerRegion other = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(other, region.token, region.address, engine::TerminateProviderError(1, 1, 0x00));
}

// The peer invalidates its own fast-registered region: the token it gave out no longer works (FR-24, TOK-14).
TEST_P(RemotePeerTest, FR_24_TokenOfALocallyInvalidatedRegionIsRefused) {
    const Reply fast = Call(Op::kFastRegister, 0, 1, NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ);
    ASSERT_EQ(fast.status, STATUS_SUCCESS);
    const PeerRegion region{fast.value, static_cast<UINT32>(fast.a), fast.b};
    ASSERT_EQ(Call(Op::kInvalidate, region.index).status, STATUS_SUCCESS);
    const PeerRegion other = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(other, region.token, region.address, engine::TerminateProviderError(1, 1, 0x00));
}

TEST_P(RemotePeerTest, CM_24_26_27_GracefulDisconnectAcrossProcessesIndicatesOnceEachWay) {
    Completion done;
    const NTSTATUS returned = connector_->Dispatch->NdkDisconnect(connector_, &Completion::OnRequest, &done);
    EXPECT_TRUE(WaitFor([&] { return PeerDisconnects() == 1; })) << "the peer hears of it";
    EXPECT_EQ(Call(Op::kDisconnect).status, STATUS_SUCCESS);
    EXPECT_EQ(done.Wait(returned), STATUS_SUCCESS) << "completes at the peer's FIN (CM-24)";
    usleep(20000);
    EXPECT_EQ(PeerDisconnects(), 1u);
    EXPECT_LE(disconnects_.count, 1) << "at most once (CM-26)";
}

// The peer process dies: its kernel closes the stream (a FIN, or a reset when it had unread bytes). The loss is
// indicated once; our NdkDisconnect then completes and flushes what was posted, in order (CM-25), and a request
// posted after that is flushed too.
TEST_P(RemotePeerTest, CM_25_26_PeerProcessKilledIndicatesOnceAndEverythingIsFlushed) {
    NDK_SGE receive = LocalSge(0, 64);
    ASSERT_EQ(qp_->Dispatch->NdkReceive(qp_, reinterpret_cast<PVOID>(0xD1), &receive, 1), STATUS_SUCCESS);
    ASSERT_EQ(qp_->Dispatch->NdkReceive(qp_, reinterpret_cast<PVOID>(0xD2), &receive, 1), STATUS_SUCCESS);
    kill(peer_pid_, SIGKILL);
    waitpid(peer_pid_, nullptr, 0);
    peer_pid_ = -1;
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1; })) << "the lost connection is indicated";
    Completion done;
    const NTSTATUS disconnected =
        done.Wait(connector_->Dispatch->NdkDisconnect(connector_, &Completion::OnRequest, &done));
    EXPECT_TRUE(disconnected == STATUS_SUCCESS || disconnected == STATUS_CONNECTION_INVALID)
        << std::hex << disconnected;
    for (uintptr_t context : {0xD1u, 0xD2u}) {
        const NDK_RESULT_EX flushed = Next();
        EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
        EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(context)) << "in posting order";
    }
    NDK_SGE send = LocalSge(0, 8);
    const NTSTATUS posted = qp_->Dispatch->NdkSend(qp_, nullptr, &send, 1, 0);
    if (posted == STATUS_SUCCESS) {
        EXPECT_EQ(Next().Status, STATUS_CANCELLED) << "a request after the loss is flushed";
    }
    usleep(20000);
    EXPECT_EQ(disconnects_.count, 1) << "once (CM-26)";
}

}  // namespace
}  // namespace softndk::test
