// Issue 18 §2: a peer that stalls cannot pin memory. It stops inside a tagged FPDU (the placement holds the
// target), leaves a multi-segment Send open (the receive buffer stays held), or stops reading (queued Read
// Responses hold their sources). With no byte either way for PeerStallTimeoutMs the stream is reset, every
// reference is released, and NdkDeregisterMr completes; the consumer hears of it once.
#include <algorithm>
#include <chrono>

#include "wire/crafted_peer.h"

namespace softndk::test {
namespace {

constexpr ULONG kStallTimeoutMs = 1000;
// Looked at four times per timeout, so the cut comes by 1.25 s on an idle machine; the bound only tells a cut from
// none (Completion::Wait gives up at 10 s), since a loaded machine decides how late a timer runs.
constexpr long kDetectedWithinMs = kStallTimeoutMs * 5;

class StalledPeerTest : public CraftedPacketTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        CraftedPacketTest::Customize(config);
        config.PeerStallTimeoutMs = kStallTimeoutMs;
    }
    // NdkDeregisterMr, called about 100 ms after the peer stalled at `stalled`: its status, and how long after the
    // stall it completed. Timed from the stall, not from the call, so that a late call cannot make the cut look
    // early.
    std::pair<NTSTATUS, long> TimedDeregister(NDK_MR* mr, std::chrono::steady_clock::time_point stalled) {
        const NTSTATUS status = Deregister(mr);
        const long took = static_cast<long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - stalled).count());
        std::printf("NdkDeregisterMr completed %ld ms after the peer stalled (PeerStallTimeoutMs %u)\n", took,
                    kStallTimeoutMs);
        EXPECT_GE(took, static_cast<long>(kStallTimeoutMs) - 50) << "not before the timeout";
        return {status, took};
    }
    // The stream ended in a reset and the consumer heard of it once.
    void ExpectResetAndOneDisconnect() {
        uint8_t chunk[4096];
        ssize_t got;
        while ((got = ::recv(fd_, chunk, sizeof(chunk), 0)) > 0) {
        }
        EXPECT_TRUE(got < 0 && errno == ECONNRESET) << "the peer sees a reset";
        EXPECT_TRUE(WaitFor([&] { return disconnects_c_.count == 1; })) << "the disconnect event";
        usleep(10000);
        EXPECT_EQ(disconnects_c_.count, 1) << "once";
    }
};

TEST_F(StalledPeerTest, WIRE_MR_19_APeerStoppedInsideATaggedFpduDoesNotPinTheTarget) {
    Handshake();
    LockedBuffer target(4);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, target.mdl(), target.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    std::vector<uint8_t> write = WriteFpdu(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), RemoteAddress(target), 1000);
    write.resize(write.size() - 100);  // the FPDU's last 100 bytes never come
    SendBytes(write);
    const auto stalled = std::chrono::steady_clock::now();
    usleep(100000);  // the placement has taken its reference
    const auto [status, took] = TimedDeregister(mr, stalled);
    EXPECT_EQ(status, STATUS_SUCCESS);
    EXPECT_LE(took, kDetectedWithinMs);
    ExpectResetAndOneDisconnect();
    Close(&mr->Header);
}

TEST_F(StalledPeerTest, WIRE_MR_19_APeerThatLeavesASendOpenDoesNotPinTheReceiveBuffer) {
    Handshake();
    LockedBuffer sink(4);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, sink.mdl(), sink.bytes(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    NDK_SGE receive = Sge(mr, sink.data(), static_cast<ULONG>(sink.bytes()));
    ASSERT_EQ(qp_c_->Dispatch->NdkReceive(qp_c_, reinterpret_cast<PVOID>(0x5E), &receive, 1), STATUS_SUCCESS);
    // The Send's first segment (L clear); its next never comes.
    SendBytes(Fpdu(Header(wire::MakeSendHeader(RdmapOpcode::kSend, 1, 0, false, 0)), std::vector<uint8_t>(512, 0xEE)));
    const auto stalled = std::chrono::steady_clock::now();
    usleep(100000);
    const auto [status, took] = TimedDeregister(mr, stalled);
    EXPECT_EQ(status, STATUS_SUCCESS);
    EXPECT_LE(took, kDetectedWithinMs);
    const NDK_RESULT_EX flushed = PollC();
    EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(0x5E));
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED) << "the open receive is flushed";
    ExpectResetAndOneDisconnect();
    Close(&mr->Header);
}

TEST_F(StalledPeerTest, WIRE_MR_19_APeerThatStopsReadingDoesNotPinReadResponseSources) {
    receive_buffer_ = 4096;
    Handshake();
    constexpr size_t kPages = 4096;  // 16 MiB: more than the kernel's send buffer grows to on loopback
    LockedBuffer source(kPages);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, source.mdl(), source.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    SendBytes(ReadRequestFpdu(1, mr->Dispatch->NdkGetRemoteTokenFromMr(mr), RemoteAddress(source),
                              static_cast<uint32_t>(source.bytes())));
    const auto stalled = std::chrono::steady_clock::now();  // the peer's last byte; softndk's follow, later
    usleep(100000);                                         // the Response fills the socket; the peer reads nothing
    const auto [status, took] = TimedDeregister(mr, stalled);
    EXPECT_EQ(status, STATUS_SUCCESS);
    EXPECT_LE(took, kDetectedWithinMs);
    ExpectResetAndOneDisconnect();
    Close(&mr->Header);
}

// A peer that freezes (SIGSTOP: its kernel still ACKs) with our Read outstanding: the Read completes with an
// error within the timeout, the disconnect event comes once.
TEST_F(StalledPeerTest, WIRE_APeerFrozenWithOurReadOutstandingIsCutOffAndTheReadFails) {
    Handshake();
    SendBytes(WriteFpdu(1, 0, 0));  // the initiator's first FPDU: softndk's may go now (RFC 5044 §7.1.2)
    NDK_SGE sink = Sge(mr_b_, buffer_b_->data(), 64);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(qp_c_->Dispatch->NdkRead(qp_c_, reinterpret_cast<PVOID>(0x4D), &sink, 1, 0x1000, 0x5678, 0),
              STATUS_SUCCESS);
    // The peer reads the Request and never answers it.
    const NDK_RESULT_EX read = PollC();
    const long took = static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
    EXPECT_EQ(read.RequestContext, reinterpret_cast<PVOID>(0x4D));
    EXPECT_EQ(read.Status, STATUS_CANCELLED);
    const wire::TerminateCause lost = term::kLlpConnectionLost;
    EXPECT_EQ(read.ProviderErrorCode,
              engine::TerminateProviderError(static_cast<uint8_t>(lost.layer), lost.etype, lost.code));
    EXPECT_GE(took, static_cast<long>(kStallTimeoutMs)) << "not before the timeout";
    EXPECT_LE(took, kDetectedWithinMs);
    ExpectResetAndOneDisconnect();
}

// A slow peer is not a stalled one: bytes that keep moving, however slowly, keep the connection.
TEST_F(StalledPeerTest, WIRE_APeerThatSendsSlowlyButSteadilyIsNotCutOff) {
    Handshake();
    LockedBuffer target(4);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, target.mdl(), target.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    const std::vector<uint8_t> write =
        WriteFpdu(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), RemoteAddress(target), 1000);
    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    long largest_gap = 0;  // a loaded machine may sleep far past 200 ms: a gap of the timeout may be cut off
    size_t at = 0;
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(3 * kStallTimeoutMs)) {
        SendBytes({write[at % write.size()]});  // one byte every 200 ms, FPDU after FPDU
        const auto now = std::chrono::steady_clock::now();
        largest_gap = std::max<long>(
            largest_gap, static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(now - last).count()));
        last = now;
        ++at;
        usleep(200000);
    }
    std::printf("%zu bytes, at most %ld ms apart\n", at, largest_gap);
    if (largest_gap < static_cast<long>(kStallTimeoutMs) * 3 / 4) {
        EXPECT_EQ(disconnects_c_.count, 0) << "cut off after " << at << " bytes";
    }
    Close(&mr->Header);
}

}  // namespace
}  // namespace softndk::test
