// Issue 18 §3.6: with CRC32c on, the CRC covers the bytes that are sent. A Read source whose owner keeps writing to
// it during the Read Response (allowed: the responder's memory is the owner's) must still leave in FPDUs whose CRC
// matches their bytes; computed over the pages before sendmsg read them, it did not, and the peer terminated.
#include <atomic>
#include <thread>

#include "support/connected_pair.h"

namespace softndk::test {
namespace {

class CrcSourceTest : public ConnectedPairTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Transport = SOFTNDK_TRANSPORT_TCP;
        config.MpaCrc = 1;
    }
    SOFTNDK_COMPLETION_MODE Mode() override { return SOFTNDK_COMPLETION_INLINE; }
};

TEST_F(CrcSourceTest, WIRE_CrcCoversTheBytesSentWhileTheOwnerWritesTheReadSource) {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "the owner's writes race the send by design (as with a NIC's DMA read): ASan runs this test";
#endif
    constexpr size_t kPages = 1024;  // 4 MiB
    LockedBuffer source(kPages), sink(kPages);
    NDK_MR* source_mr = CreateMr(false, pd_b_);
    NDK_MR* sink_mr = CreateMr(false);
    ASSERT_EQ(Register(source_mr, source.mdl(), source.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    ASSERT_EQ(Register(sink_mr, sink.mdl(), sink.bytes(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    const UINT32 token = source_mr->Dispatch->NdkGetRemoteTokenFromMr(source_mr);
    std::atomic<bool> stop{false};
    std::thread owner([&] {  // the source's owner, writing all the time
        for (uint8_t value = 0; !stop.load(std::memory_order_relaxed); ++value)
            for (size_t at = 0; at < source.bytes(); at += 512) source.data()[at] = value;
    });
    int failed = 0;
    for (int round = 0; round < 8 && failed == 0; ++round) {
        NDK_SGE sge = Sge(sink_mr, sink.data(), static_cast<ULONG>(sink.bytes()));
        ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sge, 1, RemoteAddress(source), token, 0), STATUS_SUCCESS);
        const NDK_RESULT_EX read = Poll(cq_a_);
        if (read.Status != STATUS_SUCCESS) {
            ++failed;
            ADD_FAILURE() << "Read " << round << " ended with 0x" << std::hex << read.Status << ", provider error 0x"
                          << read.ProviderErrorCode << " (0x12002: the peer found a bad CRC)";
        }
    }
    stop = true;
    owner.join();
    EXPECT_EQ(failed, 0) << "32 MiB read with CRC while the source changed";
    Close(&source_mr->Header);
    Close(&sink_mr->Header);
}

}  // namespace
}  // namespace softndk::test
