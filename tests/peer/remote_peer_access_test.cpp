// The access-check matrix and memory windows with the peer in another process (issue 7 §5, third
// configuration; issue 3 §6). Each refusal is checked on both sides: the initiator's status and the Terminate
// cause (CQ-14), the connection ended once on both ends, and no byte of the peer's memory changed.
#include "peer/remote_peer_fixture.h"

namespace softndk::test {
namespace {

class RemoteAccessTest : public RemotePeerTest {};
SOFTNDK_ALL_MODES(RemoteAccessTest);

// The causes of a refused Write (DDP tagged) and of a refused Read (RDMAP), engine::TaggedRefusalCause.
const uint32_t kWriteUnknown = engine::TerminateProviderError(1, 1, 0x00);
const uint32_t kWriteBounds = engine::TerminateProviderError(1, 1, 0x01);
const uint32_t kWriteOtherPd = engine::TerminateProviderError(1, 1, 0x02);
const uint32_t kWriteRights = engine::TerminateProviderError(0, 1, 0x02);
const uint32_t kWriteToWrap = engine::TerminateProviderError(1, 1, 0x03);
const uint32_t kReadUnknown = engine::TerminateProviderError(0, 1, 0x00);
const uint32_t kReadBounds = engine::TerminateProviderError(0, 1, 0x01);
const uint32_t kReadRights = engine::TerminateProviderError(0, 1, 0x02);
const uint32_t kReadOtherPd = engine::TerminateProviderError(0, 1, 0x03);
const uint32_t kReadToWrap = engine::TerminateProviderError(0, 1, 0x04);

// ---- the access-check matrix: valid → owner → rights → bounds ----
TEST_P(RemoteAccessTest, QP_AccessStaleKeyAfterReregistrationIsRefused) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const Reply again = Call(Op::kReregister, region.index, kRemoteAll);
    ASSERT_EQ(again.status, STATUS_SUCCESS);
    const UINT32 fresh = static_cast<UINT32>(again.a);
    EXPECT_NE(fresh, region.token) << "TOK-03: a new key on re-registration";
    ExpectWritePlaced(region, fresh, region.address + 64, 64, 200, 0x10);
    ExpectWriteRefused(region, region.token, region.address, kWriteUnknown);
}

TEST_P(RemoteAccessTest, QP_AccessStaleKeyReadIsInvalidHandle) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ASSERT_EQ(Call(Op::kReregister, region.index, kRemoteAll).status, STATUS_SUCCESS);
    ExpectReadRefused(region.token, region.address, 64, STATUS_INVALID_HANDLE, kReadUnknown);
}

TEST_P(RemoteAccessTest, QP_AccessWriteToAnotherPdsTokenIsRefused) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const PeerRegion foreign = PeerRegister(1, kRemoteAll, peer::kInSecondPd);
    const std::vector<uint8_t> before = PeerMemory(foreign, 0, PAGE_SIZE);
    ExpectWriteRefused(region, foreign.token, foreign.address, kWriteOtherPd);
    EXPECT_EQ(PeerMemory(foreign, 0, PAGE_SIZE), before) << "nothing placed in the other PD's region";
}

TEST_P(RemoteAccessTest, QP_AccessReadOfAnotherPdsTokenIsAccessDenied) {
    const PeerRegion foreign = PeerRegister(1, kRemoteAll, peer::kInSecondPd);
    ExpectReadRefused(foreign.token, foreign.address, 64, STATUS_ACCESS_DENIED, kReadOtherPd);
}

TEST_P(RemoteAccessTest, QP_AccessWriteWithoutRemoteWriteIsRefused) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const PeerRegion read_only = PeerRegister(1, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ);
    const std::vector<uint8_t> before = PeerMemory(read_only, 0, PAGE_SIZE);
    ExpectWriteRefused(region, read_only.token, read_only.address, kWriteRights);
    EXPECT_EQ(PeerMemory(read_only, 0, PAGE_SIZE), before);
}

// Rights are checked before bounds: a Write past the end of a read-only region is a rights error.
TEST_P(RemoteAccessTest, QP_AccessRightsAreCheckedBeforeBounds) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const PeerRegion read_only = PeerRegister(1, NDK_MR_FLAG_ALLOW_REMOTE_READ);
    ExpectWriteRefused(region, read_only.token, read_only.address + PAGE_SIZE, kWriteRights);
}

TEST_P(RemoteAccessTest, QP_16_AccessWriteBelowTheBaseIsRefused) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(region, region.token, region.address - 1, kWriteBounds);
}

TEST_P(RemoteAccessTest, QP_16_AccessReadBelowTheBaseIsRemoteResources) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectReadRefused(region.token, region.address - 1, 64, STATUS_REMOTE_RESOURCES, kReadBounds);
}

TEST_P(RemoteAccessTest, QP_16_AccessWriteWrappingTheTaggedOffsetIsRefused) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(region, region.token, ~UINT64{0} - 10, kWriteToWrap);  // RFC 5041 §7.2
}

TEST_P(RemoteAccessTest, QP_16_AccessReadWrappingTheTaggedOffsetIsRemoteResources) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectReadRefused(region.token, ~UINT64{0} - 10, 64, STATUS_REMOTE_RESOURCES, kReadToWrap);  // RFC 5040 §7.2
}

TEST_P(RemoteAccessTest, QP_16_AccessWriteEndingExactlyAtTheRegionsEndIsPlaced) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const size_t offset = kPages * PAGE_SIZE - 256;
    ExpectWritePlaced(region, region.token, region.address + offset, offset, 256, 0x61);
    EXPECT_EQ(disconnects_.count, 0);
}

TEST_P(RemoteAccessTest, QP_15_TOK_06_ReadOfAnUnknownTokenIsInvalidHandle) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectReadRefused(region.token ^ 0x00330000u, region.address, 64, STATUS_INVALID_HANDLE, kReadUnknown);
}

TEST_P(RemoteAccessTest, MR_19_ReadOfADeregisteredRegionIsInvalidHandle) {
    const PeerRegion region = PeerRegister(1, kRemoteAll);
    ASSERT_EQ(Call(Op::kDeregister, region.index).status, STATUS_SUCCESS);
    ExpectReadRefused(region.token, region.address, 64, STATUS_INVALID_HANDLE, kReadUnknown);
}

TEST_P(RemoteAccessTest, QP_SendWithNoReceivePostedEndsTheConnectionWithNoBuffer) {
    NDK_SGE sge = LocalSge(0, 8);
    ASSERT_EQ(qp_->Dispatch->NdkSend(qp_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    Next();  // the Send itself: it left before the Terminate came back
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1 && PeerDisconnects() == 1; }));
    ASSERT_EQ(qp_->Dispatch->NdkSend(qp_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX flushed = Next();
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
    EXPECT_EQ(flushed.ProviderErrorCode, engine::TerminateProviderError(1, 2, 0x02)) << "DDP untagged: no buffer";
}

// ---- memory windows (MW-xx) bound by the peer ----
TEST_P(RemoteAccessTest, MW_03_09_10_WriteAndReadThroughAPeersWindowReachItsSubRange) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ASSERT_EQ(Call(Op::kFill, region.index, 0).status, STATUS_SUCCESS);
    const PeerRegion window =
        PeerBind(region, PAGE_SIZE, 1024, NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    EXPECT_NE(window.token, region.token) << "MW-09: the window has its own token";
    ExpectWritePlaced(region, window.token, window.address + 24, PAGE_SIZE + 24, 1000, 0x21);
    const std::vector<uint8_t> around = PeerMemory(region, PAGE_SIZE - 64, 64);
    EXPECT_EQ(around, std::vector<uint8_t>(64, 0)) << "nothing before the window";
    ExpectWriteRefused(region, window.token, window.address + 1024 - 100, kWriteBounds);
}

TEST_P(RemoteAccessTest, MW_03_WriteBeforeAPeersWindowIsRefused) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const PeerRegion window = PeerBind(region, PAGE_SIZE, 1024, NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    ExpectWriteRefused(region, window.token, window.address - 8, kWriteBounds);
}

TEST_P(RemoteAccessTest, MW_07_ReadOnlyWindowRefusesWritesAndServesReads) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ASSERT_EQ(Call(Op::kFill, region.index, 0x4D).status, STATUS_SUCCESS);
    const PeerRegion window = PeerBind(region, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_READ);
    std::memset(buffer_->data(), 0, 128);
    NDK_SGE sink = LocalSge(0, 128);
    ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &sink, 1, window.address, window.token, 0), STATUS_SUCCESS);
    ASSERT_EQ(Next().Status, STATUS_SUCCESS);
    for (int i = 0; i < 128; ++i) ASSERT_EQ(buffer_->data()[i], 0x4D);
    ExpectWriteRefused(region, window.token, window.address, kWriteRights);
}

TEST_P(RemoteAccessTest, MW_13_TokenOfAWindowThePeerInvalidatedIsRefused) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const PeerRegion window = PeerBind(region, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    ExpectWritePlaced(region, window.token, window.address, 0, 64, 0x31, &region);
    ASSERT_EQ(Call(Op::kInvalidateWindow, window.index).status, STATUS_SUCCESS);
    ExpectWriteRefused(region, window.token, window.address, kWriteUnknown);
}

TEST_P(RemoteAccessTest, MW_13_TOK_10_SendWithInvalidateRetiresAPeersWindow) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const PeerRegion window = PeerBind(region, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    ASSERT_EQ(Call(Op::kReceive, region.index, 2 * PAGE_SIZE, 64, 0x99).status, STATUS_SUCCESS);
    NDK_SGE sge = LocalSge(0, 16);
    ASSERT_EQ(qp_->Dispatch->NdkSendAndInvalidate(qp_, nullptr, &sge, 1, 0, window.token), STATUS_SUCCESS);
    EXPECT_EQ(Next().Status, STATUS_SUCCESS);
    const Reply received = PeerPoll();
    ASSERT_EQ(received.status, STATUS_SUCCESS);
    EXPECT_EQ(received.value, static_cast<uint32_t>(NdkOperationTypeReceiveAndInvalidate));
    EXPECT_EQ(received.e, window.token) << "the invalidated token";
    ExpectWriteRefused(region, window.token, window.address, kWriteUnknown);
}

// Two windows over one region: each has its own token and reaches only its own range (MW-09, MW-10).
TEST_P(RemoteAccessTest, MW_09_10_TwoWindowsOverOneRegionHaveTheirOwnTokensAndRanges) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const PeerRegion first = PeerBind(region, 0, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    const PeerRegion second = PeerBind(region, PAGE_SIZE, PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    EXPECT_NE(first.token, second.token);
    ExpectWritePlaced(region, first.token, first.address + 8, 8, 100, 0x70, &region);
    ExpectWritePlaced(region, second.token, second.address + 8, PAGE_SIZE + 8, 100, 0x80, &region);
    ExpectWriteRefused(region, first.token, second.address, kWriteBounds);
}

}  // namespace
}  // namespace softndk::test
