// Issue 18 §2, CM-25: NdkDisconnect waits DisconnectTimeoutMs for the peer's FIN, and no longer: then the stream
// is reset, the QP flushed, and the request completes with STATUS_IO_TIMEOUT. A raw peer plays the one that never
// closes, and the one that stops reading so that our FIN is stuck behind data it will never take.
#include <chrono>

#include "wire/crafted_peer.h"

namespace softndk::test {
namespace {

constexpr ULONG kDisconnectTimeoutMs = 1000;
// How late the timeout may complete: it tells a timeout from none (Completion::Wait gives up at 10 s), since a
// loaded machine decides how late a timer runs. Idle, it completes within 1.1 s.
constexpr long kCompletedWithinMs = 5 * kDisconnectTimeoutMs;

class DisconnectTimeoutTest : public CraftedPacketTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        CraftedPacketTest::Customize(config);
        config.DisconnectTimeoutMs = kDisconnectTimeoutMs;
    }
    // NdkDisconnect on softndk's side of the raw connection: its status and how long it took.
    std::pair<NTSTATUS, std::chrono::milliseconds> TimedDisconnect() {
        const auto start = std::chrono::steady_clock::now();
        Completion done;
        const NTSTATUS returned =
            raw_connector_->Dispatch->NdkDisconnect(raw_connector_, &Completion::OnRequest, &done);
        const NTSTATUS status = done.Wait(returned);
        return {status,
                std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)};
    }
    // The raw peer's socket ends in a reset (not only our FIN): reading on reaches ECONNRESET within 5 s.
    bool PeerSeesReset() {
        uint8_t chunk[4096];
        for (;;) {
            const ssize_t got = ::recv(fd_, chunk, sizeof(chunk), 0);
            if (got > 0) continue;
            if (got < 0) return errno == ECONNRESET;
            // Our FIN came first; the reset follows it: a send now fails once it has arrived.
            for (int i = 0; i < 50; ++i) {
                if (::send(fd_, "x", 1, MSG_NOSIGNAL) < 0) return errno == ECONNRESET || errno == EPIPE;
                usleep(100000);
            }
            return false;
        }
    }
};

TEST_F(DisconnectTimeoutTest, WIRE_CM_25_DisconnectCompletesWithIoTimeoutWhenThePeerNeverSendsItsFin) {
    Handshake();
    const auto [status, took] = TimedDisconnect();
    EXPECT_EQ(status, STATUS_IO_TIMEOUT) << "0x" << std::hex << status;
    EXPECT_GE(took.count(), kDisconnectTimeoutMs * 9 / 10) << "it waited for the peer's FIN first";
    std::printf("NdkDisconnect took %ld ms (DisconnectTimeoutMs %u)\n", static_cast<long>(took.count()),
                kDisconnectTimeoutMs);
    EXPECT_LE(took.count(), kCompletedWithinMs);
    uint8_t byte;
    EXPECT_EQ(::recv(fd_, &byte, 1, 0), 0) << "our FIN reached the peer before the timeout";
    EXPECT_TRUE(PeerSeesReset());
    EXPECT_EQ(disconnects_c_.count, 0) << "no disconnect event for our own NdkDisconnect (CM-26)";
}

TEST_F(DisconnectTimeoutTest, WIRE_CM_25_DisconnectDoesNotWaitBehindDataAPeerNeverReads) {
    receive_buffer_ = 4096;
    Handshake();
    SendBytes(WriteFpdu(1, 0, 0));   // the initiator's first FPDU: softndk's may go now (RFC 5044 §7.1.2)
    constexpr size_t kPages = 4096;  // 16 MiB: more than the kernel's send buffer grows to on loopback
    LockedBuffer source(kPages);
    NDK_MR* mr = CreateMr(false);
    ASSERT_EQ(Register(mr, source.mdl(), source.bytes(), 0), STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr, source.data(), static_cast<ULONG>(source.bytes()));
    ASSERT_EQ(qp_c_->Dispatch->NdkWrite(qp_c_, reinterpret_cast<PVOID>(0x77), &sge, 1, 0, 0x1234, 0), STATUS_SUCCESS);
    usleep(100000);  // the socket fills; the peer reads nothing
    const auto [status, took] = TimedDisconnect();
    EXPECT_EQ(status, STATUS_IO_TIMEOUT) << "0x" << std::hex << status;
    std::printf("NdkDisconnect took %ld ms (DisconnectTimeoutMs %u)\n", static_cast<long>(took.count()),
                kDisconnectTimeoutMs);
    EXPECT_LE(took.count(), kCompletedWithinMs);
    const NDK_RESULT_EX write = PollC();
    EXPECT_EQ(write.RequestContext, reinterpret_cast<PVOID>(0x77));
    EXPECT_EQ(write.Status, STATUS_CANCELLED) << "the Write the peer never took is flushed";
    EXPECT_TRUE(PeerSeesReset());
    Close(&mr->Header);
}

// A peer that answers with its FIN still gets the graceful end: the timer does not fire into it later.
TEST_F(DisconnectTimeoutTest, WIRE_CM_24_APeerThatSendsItsFinCompletesTheDisconnectWithSuccess) {
    Handshake();
    Completion done;
    const NTSTATUS returned = raw_connector_->Dispatch->NdkDisconnect(raw_connector_, &Completion::OnRequest, &done);
    uint8_t byte;
    EXPECT_EQ(::recv(fd_, &byte, 1, 0), 0) << "our FIN";
    ::shutdown(fd_, SHUT_WR);  // the peer's
    EXPECT_EQ(done.Wait(returned), STATUS_SUCCESS);
    usleep((kDisconnectTimeoutMs + 300) * 1000);  // past the timeout: nothing more happens
    EXPECT_EQ(disconnects_c_.count, 0);
}

}  // namespace
}  // namespace softndk::test
