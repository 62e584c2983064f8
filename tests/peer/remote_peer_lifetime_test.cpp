// Lifetime and fault injection with the peer in another process (issue 7 §5, third configuration): the peer
// closes or leaves with work in flight, deregisters under a stream of Writes, and runs with injected faults in
// its own adapter (CB-03) and on its outbound wire. Every request this side posted completes exactly once, the
// disconnect comes once, and the peer exits cleanly (its ASan build reports leaks as a failed exit).
#include <algorithm>
#include <initializer_list>

#include "peer/remote_peer_fixture.h"

namespace softndk::test {
namespace {

class RemoteLifetimeTest : public RemotePeerTest {
protected:
    static constexpr uint32_t kRefusedUnknown = engine::TerminateProviderError(1, 1, 0x00);
    // Waits for `count` completions; each must be one of `allowed`. Returns how many succeeded.
    int CompleteAll(int count, std::initializer_list<NTSTATUS> allowed) {
        int succeeded = 0;
        for (int i = 0; i < count; ++i) {
            const NDK_RESULT_EX result = Next();
            EXPECT_NE(result.Status, STATUS_IO_TIMEOUT) << "completion " << i << " of " << count << " never came";
            if (result.Status == STATUS_IO_TIMEOUT) return succeeded;
            succeeded += result.Status == STATUS_SUCCESS;
            EXPECT_TRUE(result.Status == STATUS_SUCCESS ||
                        std::find(allowed.begin(), allowed.end(), result.Status) != allowed.end())
                << std::hex << result.Status;
        }
        NDK_RESULT_EX extra{};
        EXPECT_EQ(cq_->Dispatch->NdkGetCqResultsEx(cq_, &extra, 1), 0u) << "each request completes once";
        return succeeded;
    }
    void PostReads(const PeerRegion& region, int count, ULONG length) {
        for (int i = 0; i < count; ++i) {
            NDK_SGE sink = LocalSge(static_cast<size_t>(i % 2) * PAGE_SIZE, length);
            ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &sink, 1, region.address, region.token, 0), STATUS_SUCCESS);
        }
    }
    // The first Read's response is corrupted on the peer's wire (CRC on): the Read is flushed with the LLP CRC
    // cause, nothing is read, and both sides hear of the end once.
    void ExpectFirstReadEndsWithACrcError() {
        const PeerRegion region = PeerRegister(kPages, kRemoteAll);
        ASSERT_EQ(Call(Op::kFill, region.index, 0x11).status, STATUS_SUCCESS);
        ExpectReadRefused(region.token, region.address, 256, STATUS_CANCELLED,
                          engine::TerminateProviderError(2, 0, 0x02));
        ExpectLaterRequestsFlushed();
    }
    // After the connection ended: a new request is flushed, or refused at the post.
    void ExpectLaterRequestsFlushed() {
        NDK_SGE sge = LocalSge(0, 8);
        const NTSTATUS posted = qp_->Dispatch->NdkSend(qp_, nullptr, &sge, 1, 0);
        if (posted == STATUS_SUCCESS) {
            EXPECT_EQ(Next().Status, STATUS_CANCELLED) << "flushed after the loss";
        }
        usleep(20000);
        EXPECT_EQ(disconnects_.count, 1) << "once (CM-26)";
    }
};
SOFTNDK_ALL_MODES(RemoteLifetimeTest);

// The peer closes its connector and QP without NdkDisconnect while our receives and Reads are outstanding.
TEST_P(RemoteLifetimeTest, LIFE_CM_25_PeerClosingItsConnectionFlushesOurRequestsOnce) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    NDK_SGE receive = LocalSge(2 * PAGE_SIZE, 64);
    ASSERT_EQ(qp_->Dispatch->NdkReceive(qp_, reinterpret_cast<PVOID>(0xE1), &receive, 1), STATUS_SUCCESS);
    ASSERT_NO_FATAL_FAILURE(PostReads(region, 6, PAGE_SIZE));
    ASSERT_EQ(Call(Op::kCloseConnection).status, STATUS_SUCCESS);
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1; })) << "the peer's close is indicated";
    Completion done;
    done.Wait(connector_->Dispatch->NdkDisconnect(connector_, &Completion::OnRequest, &done));
    CompleteAll(7, {STATUS_CANCELLED, STATUS_CONNECTION_ABORTED, STATUS_CONNECTION_RESET});
    ExpectLaterRequestsFlushed();
    EXPECT_EQ(Call(Op::kReceive, region.index, 0, 64, 1).status, STATUS_CONNECTION_INVALID) << "the peer's QP is gone";
}

// The peer deregisters the region our Writes stream into (MR-19, LIFE: work in flight holds its references).
// Writes placed before the deregistration land; the first one after it is refused and ends the connection.
TEST_P(RemoteLifetimeTest, MR_19_PeerDeregisteringUnderAStreamOfWritesIsSafe) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    std::memset(buffer_->data(), 0x6B, 2 * PAGE_SIZE);
    Ask(Op::kDeregister, region.index);
    constexpr int kWrites = 64;
    int posted = 0;
    for (; posted < kWrites; ++posted) {
        NDK_SGE out = LocalSge(0, 2 * PAGE_SIZE);
        if (qp_->Dispatch->NdkWrite(qp_, nullptr, &out, 1, region.address, region.token, 0) != STATUS_SUCCESS) break;
        if (posted % 8 == 7) CompleteAll(8, {STATUS_CANCELLED});
    }
    EXPECT_EQ(Answer().status, STATUS_SUCCESS) << "the deregistration completes under traffic";
    CompleteAll(posted % 8, {STATUS_CANCELLED});
    // Whatever the race gave, a Write through the old token now is refused.
    if (disconnects_.count == 0) ExpectWriteRefused(region, region.token, region.address, kRefusedUnknown);
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1 && PeerDisconnects() == 1; }));
}

// The peer process ends normally with the connection up: its adapter closes everything (LIFE-15) and its exit
// is clean; we see the loss once, and our receive is flushed.
TEST_P(RemoteLifetimeTest, LIFE_15_CM_25_PeerExitingWithTheConnectionUpIsIndicatedOnce) {
    NDK_SGE receive = LocalSge(0, 64);
    ASSERT_EQ(qp_->Dispatch->NdkReceive(qp_, reinterpret_cast<PVOID>(0xE2), &receive, 1), STATUS_SUCCESS);
    ASSERT_EQ(Call(Op::kExit).status, STATUS_SUCCESS);
    ReapPeer(20000);
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1; }));
    Completion done;
    done.Wait(connector_->Dispatch->NdkDisconnect(connector_, &Completion::OnRequest, &done));
    const NDK_RESULT_EX flushed = Next();
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
    EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(0xE2));
    ExpectLaterRequestsFlushed();
}

// ---- fault injection in the peer's adapter (CB-03): the failure, then the next call works ----
template <const char* kFault>
class PeerFaultTest : public RemoteLifetimeTest {
protected:
    std::vector<std::string> PeerArguments() override { return {"--fault", kFault}; }
};
constexpr char kRegisterAsync[] = "NdkRegisterMr:1:async";
constexpr char kRegisterInline[] = "NdkRegisterMr:1:inline";
constexpr char kDeregisterAsync[] = "NdkDeregisterMr:1:async";
using PeerRegisterAsyncFaultTest = PeerFaultTest<kRegisterAsync>;
using PeerRegisterInlineFaultTest = PeerFaultTest<kRegisterInline>;
using PeerDeregisterFaultTest = PeerFaultTest<kDeregisterAsync>;
SOFTNDK_ALL_MODES(PeerRegisterAsyncFaultTest);
SOFTNDK_ALL_MODES(PeerRegisterInlineFaultTest);
SOFTNDK_ALL_MODES(PeerDeregisterFaultTest);

TEST_P(PeerRegisterAsyncFaultTest, CB_03_PeersRegistrationFailsAsynchronouslyThenWorksOverTheWire) {
    const Reply failed = Call(Op::kRegister, 0, 1, kRemoteAll);
    EXPECT_EQ(failed.status, STATUS_INSUFFICIENT_RESOURCES);
    EXPECT_EQ(failed.a, 0u) << "no token for a failed registration";
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectWritePlaced(region, region.token, region.address + 16, 16, 512, 0x44);
}

TEST_P(PeerRegisterInlineFaultTest, CB_03_PeersRegistrationFailsInlineThenWorksOverTheWire) {
    EXPECT_EQ(Call(Op::kRegister, 0, 1, kRemoteAll).status, STATUS_INSUFFICIENT_RESOURCES);
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectWritePlaced(region, region.token, region.address, 0, 512, 0x45);
}

// A deregistration that fails changes nothing: the token still works over the wire; the retry retires it.
TEST_P(PeerDeregisterFaultTest, CB_03_MR_19_PeersFailedDeregistrationKeepsTheTokenAndTheRetryRetiresIt) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    EXPECT_EQ(Call(Op::kDeregister, region.index).status, STATUS_INSUFFICIENT_RESOURCES);
    ExpectWritePlaced(region, region.token, region.address + 8, 8, 300, 0x2F);
    ASSERT_EQ(Call(Op::kDeregister, region.index).status, STATUS_SUCCESS);
    const PeerRegion other = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(other, region.token, region.address, engine::TerminateProviderError(1, 1, 0x00));
}

// ---- wire faults on the peer's outbound stream ----
class PeerDropsTheConnectionTest : public RemoteLifetimeTest {
protected:
    std::vector<std::string> PeerArguments() override { return {"--drop-after-fpdus", "3"}; }
};
SOFTNDK_ALL_MODES(PeerDropsTheConnectionTest);

// The peer's stream is reset after its third FPDU (a Read Response each): the first Reads complete, every other
// one completes with an error or flush status, and each side hears of the loss once.
TEST_P(PeerDropsTheConnectionTest, CM_25_ReadsOutstandingWhenThePeersWireDropsAllComplete) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    constexpr int kReads = 8;
    ASSERT_NO_FATAL_FAILURE(PostReads(region, kReads, 512));
    const int succeeded = CompleteAll(kReads, {STATUS_CANCELLED, STATUS_CONNECTION_ABORTED, STATUS_CONNECTION_RESET});
    EXPECT_LE(succeeded, 3) << "no Read Response after the drop";
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1 && PeerDisconnects() == 1; }));
    ExpectLaterRequestsFlushed();
}

class PeerCorruptsAByteTest : public RemoteLifetimeTest {
protected:
    // Byte 60 of the peer's stream (after its 24-byte MPA Reply) is in the payload of its first Read Response;
    // both sides use CRC32c.
    std::vector<std::string> PeerArguments() override { return {"--mpa-crc", "--corrupt-byte", "60"}; }
};
SOFTNDK_ALL_MODES(PeerCorruptsAByteTest);

TEST_P(PeerCorruptsAByteTest, CM_25_ACorruptedReadResponseFailsItsCrcAndEndsTheConnection) {
    ExpectFirstReadEndsWithACrcError();
}

// Byte 40 is in the tagged offset of the peer's first Read Response: with CRC on, the CRC decides before the
// header's checks (RFC 5044 §6.1), so the error is the CRC's, not a Read Response that matches nothing.
class PeerCorruptsAHeaderByteTest : public RemoteLifetimeTest {
protected:
    std::vector<std::string> PeerArguments() override { return {"--mpa-crc", "--corrupt-byte", "40"}; }
};
SOFTNDK_ALL_MODES(PeerCorruptsAHeaderByteTest);

TEST_P(PeerCorruptsAHeaderByteTest, CM_25_ACorruptedHeaderUnderCrcIsACrcError) {
    ExpectFirstReadEndsWithACrcError();
}

}  // namespace
}  // namespace softndk::test
