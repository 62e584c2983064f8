// iWARP over TCP (issue 7 §3/§5): the data path and its failures on a real socket. Both QPs live in this
// process, but the adapter is forced onto TCP (SOFTNDK_ADAPTER_CONFIG.Transport), so every byte goes through
// MPA/DDP/RDMAP on loopback and through the progress threads (also run under TSan).
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <numeric>

#include "engine/transport.h"
#include "support/connected_pair.h"

namespace softndk::test {
namespace {

// A registered region whose virtual range maps to its pages in reverse order: every FPDU's payload is then a
// run of separate host pieces, on the sending and on the receiving side.
struct ScatteredRegion {
    static constexpr uint64_t kVirtualBase = 0x7A0000000000ull;
    std::unique_ptr<LockedBuffer> memory;
    MDL* mdl = nullptr;
    NDK_MR* mr = nullptr;
    size_t pages = 0;
    // Byte `offset` of the virtual range, where it lives in host memory.
    uint8_t& At(size_t offset) const {
        const size_t page = pages - 1 - offset / PAGE_SIZE;
        return memory->data()[page * PAGE_SIZE + offset % PAGE_SIZE];
    }
};

class TcpTransportTest : public ConnectedPairTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Transport = SOFTNDK_TRANSPORT_TCP;
        config.MpaCrc = Crc() ? 1 : 0;
        config.WireFaults = {};
        Faults(config.WireFaults);
    }
    virtual bool Crc() { return false; }
    virtual void Faults(SOFTNDK_WIRE_FAULTS&) {}  // issue 7 §5: the fault fixtures set theirs
    void Release(ScatteredRegion& region) {
        Close(&region.mr->Header);
        region.mdl->MdlFlags &= ~MDL_PAGES_LOCKED;  // the pages are the LockedBuffer's: it unlocks them
        IoFreeMdl(region.mdl);
    }

    void Scatter(ScatteredRegion& region, size_t pages) {
        region.pages = pages;
        region.memory = std::make_unique<LockedBuffer>(pages);
        std::vector<PFN_NUMBER> pfns(pages);
        for (size_t i = 0; i < pages; ++i) pfns[i] = region.memory->pfn(pages - 1 - i);
        region.mdl = MakeMdl(ScatteredRegion::kVirtualBase, static_cast<ULONG>(pages * PAGE_SIZE), pfns);
        region.mr = CreateMr(false);
        ASSERT_EQ(
            Register(region.mr, region.mdl, pages * PAGE_SIZE,
                     NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE),
            STATUS_SUCCESS);
    }
    static NDK_SGE ScatteredSge(const ScatteredRegion& region, size_t offset, ULONG length) {
        NDK_SGE sge{};
        sge.LogicalAddress.QuadPart = static_cast<LONGLONG>(ScatteredRegion::kVirtualBase + offset);
        sge.Length = length;
        sge.MemoryRegionToken = region.mr->Dispatch->NdkGetLocalTokenFromMr(region.mr);
        return sge;
    }

    // 256 KiB from a scattered source to a scattered target, and read back into a third: four FPDUs of ~64 KiB,
    // each of 17 host pieces, so one send batch runs out of iovecs inside a payload.
    void MoveScatteredDataBothWays() {
        constexpr size_t kPages = 64;
        constexpr ULONG kBytes = kPages * PAGE_SIZE;
        ScatteredRegion source, target, sink;
        Scatter(source, kPages);
        Scatter(target, kPages);
        Scatter(sink, kPages);
        for (size_t i = 0; i < kBytes; ++i) source.At(i) = static_cast<uint8_t>(i * 7 + i / 4093);
        NDK_SGE out = ScatteredSge(source, 0, kBytes);
        ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &out, 1, ScatteredRegion::kVirtualBase,
                                            target.mr->Dispatch->NdkGetRemoteTokenFromMr(target.mr), 0),
                  STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
        NDK_SGE back = ScatteredSge(sink, 0, kBytes);
        ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &back, 1, ScatteredRegion::kVirtualBase,
                                           target.mr->Dispatch->NdkGetRemoteTokenFromMr(target.mr), 0),
                  STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);  // RDMAP ordering: the Write is placed before the Read
        size_t wrong_target = 0, wrong_sink = 0;
        for (size_t i = 0; i < kBytes; ++i) {
            wrong_target += target.At(i) != source.At(i);
            wrong_sink += sink.At(i) != source.At(i);
        }
        EXPECT_EQ(wrong_target, 0u);
        EXPECT_EQ(wrong_sink, 0u);
        EXPECT_EQ(disconnects_a_.count, 0);
        EXPECT_EQ(disconnects_b_.count, 0);
        for (ScatteredRegion* region : {&source, &target, &sink}) Release(*region);
    }

    // `count` Writes of 3 pages from A to B, with request contexts 1 … count (the wire-fault tests).
    void PostWrites(int count) {
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 3 * PAGE_SIZE);
        const UINT32 token = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
        for (int i = 0; i < count; ++i)
            ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, reinterpret_cast<PVOID>(static_cast<uintptr_t>(i + 1)), &sge, 1,
                                                RemoteAddress(*buffer_b_), token, 0),
                      STATUS_SUCCESS);
    }

    // A Send from A that B receives: the connection works.
    void ExpectSendArrives(ULONG length) {
        NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), length);
        ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, reinterpret_cast<PVOID>(0x5E), &receive, 1), STATUS_SUCCESS);
        NDK_SGE send = Sge(mr_a_, buffer_a_->data(), length);
        ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &send, 1, 0), STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
        const NDK_RESULT_EX received = Poll(cq_b_);
        EXPECT_EQ(received.Status, STATUS_SUCCESS);
        EXPECT_EQ(received.BytesTransferred, length);
    }

    // The stream is over: both consumers hear of it once and A's next request is flushed.
    void ExpectTerminated() {
        EXPECT_TRUE(WaitFor([&] { return disconnects_a_.count == 1 && disconnects_b_.count == 1; }));
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
        ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_CANCELLED);
        usleep(20000);
        EXPECT_EQ(disconnects_a_.count, 1) << "once (CM-26)";
        EXPECT_EQ(disconnects_b_.count, 1);
    }
};
SOFTNDK_ALL_MODES(TcpTransportTest);

// CB-15 (the deferred processing scheme): a request posted with NDK_OP_FLAG_DEFER may wait on the wire until the
// doorbell, which only the consumer's posts ring. The backstop for a chain left deferred (DeferBackstopMs) and the
// RTR kicks (which pump the queue too) are off here, so a doorbell that does not ring leaves the request unsent and
// the test fails.
class TcpDoorbellTest : public TcpTransportTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        TcpTransportTest::Customize(config);
        config.DeferBackstopMs = DeferBackstopMs();
        config.RtrKicks = 0;
    }
    virtual ULONG DeferBackstopMs() { return 0; }
    // 64 bytes of `fill` from A's buffer to the start of B's, posted with NDK_OP_FLAG_DEFER as request context 1.
    NTSTATUS PostDeferredWrite(uint8_t fill) {
        std::memset(buffer_a_->data(), fill, 64);
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
        return qp_a_->Dispatch->NdkWrite(qp_a_, reinterpret_cast<PVOID>(1), &sge, 1, RemoteAddress(*buffer_b_),
                                         mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), NDK_OP_FLAG_DEFER);
    }
    // A one-byte Read from B behind what A posted before: once it completes, B has placed those Writes.
    NTSTATUS ReadBehind() {
        NDK_SGE sink = Sge(mr_a_, buffer_a_->data() + buffer_a_->bytes() - 1, 1);
        const NTSTATUS posted =
            qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sink, 1, RemoteAddress(*buffer_b_, buffer_b_->bytes() - 1),
                                     mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0);
        return posted != STATUS_SUCCESS ? posted : Poll(cq_a_).Status;
    }
};
SOFTNDK_ALL_MODES(TcpDoorbellTest);

TEST_P(TcpDoorbellTest, CB_15_DeferredWriteGoesWithTheNextPost) {
    ASSERT_EQ(PostDeferredWrite(0x71), STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    const UINT32 token = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    ASSERT_EQ(
        qp_a_->Dispatch->NdkWrite(qp_a_, reinterpret_cast<PVOID>(2), &sge, 1, RemoteAddress(*buffer_b_, 64), token, 0),
        STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).RequestContext, reinterpret_cast<PVOID>(1)) << "in posting order";
    EXPECT_EQ(Poll(cq_a_).RequestContext, reinterpret_cast<PVOID>(2));
    EXPECT_EQ(ReadBehind(), STATUS_SUCCESS);
    EXPECT_EQ(buffer_b_->data()[0], 0x71);
    EXPECT_EQ(buffer_b_->data()[64], 0x71);
}

// CB-18: a post that fails inline indicates the deferred requests before it returns.
TEST_P(TcpDoorbellTest, CB_15_DeferredWriteGoesWhenALaterPostFailsInline) {
    ASSERT_EQ(PostDeferredWrite(0x72), STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    const UINT32 token = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    std::vector<NDK_SGE> too_many(Info().MaxInitiatorRequestSge + 1, sge);
    EXPECT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, reinterpret_cast<PVOID>(2), too_many.data(),
                                        static_cast<ULONG>(too_many.size()), RemoteAddress(*buffer_b_), token, 0),
              STATUS_INVALID_PARAMETER)
        << "QP-17: an inline failure";
    // Handed to the kernel inside the failing post (nothing else sends here), so its completion is queued already.
    NDK_RESULT_EX done{};
    ASSERT_EQ(cq_a_->Dispatch->NdkGetCqResultsEx(cq_a_, &done, 1), 1u) << "the deferred Write completed inline";
    EXPECT_EQ(done.RequestContext, reinterpret_cast<PVOID>(1));
    EXPECT_EQ(done.Status, STATUS_SUCCESS);
    EXPECT_EQ(ReadBehind(), STATUS_SUCCESS);
    EXPECT_EQ(buffer_b_->data()[0], 0x72) << "the deferred Write was placed";
    EXPECT_EQ(Pending(cq_a_), 0u) << "the failed post queues no completion";
}

// CB-15: a post without DEFER that must wait (READ_FENCE behind the deferred Read) still rings for the Read.
TEST_P(TcpDoorbellTest, CB_15_AFencedPostThatWaitsStillRingsForTheDeferredOnesBeforeIt) {
    std::memset(buffer_b_->data(), 0x74, 64);
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 64);
    NDK_SGE source = Sge(mr_a_, buffer_a_->data() + 4096, 64);
    const UINT32 token = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, reinterpret_cast<PVOID>(1), &sink, 1, RemoteAddress(*buffer_b_), token,
                                       NDK_OP_FLAG_DEFER),
              STATUS_SUCCESS);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, reinterpret_cast<PVOID>(2), &source, 1, RemoteAddress(*buffer_b_, 128),
                                        token, NDK_OP_FLAG_READ_FENCE),
              STATUS_SUCCESS);
    const NDK_RESULT_EX read = Poll(cq_a_);
    EXPECT_EQ(read.RequestContext, reinterpret_cast<PVOID>(1));
    EXPECT_EQ(read.Status, STATUS_SUCCESS) << "the deferred Read went when the fenced Write was posted";
    EXPECT_EQ(Poll(cq_a_).RequestContext, reinterpret_cast<PVOID>(2));
    EXPECT_EQ(buffer_a_->data()[63], 0x74);
}

// CB-19 is the consumer's duty; one that ends a chain with a deferred request still has it sent (DeferBackstopMs).
class TcpDeferBackstopTest : public TcpDoorbellTest {
protected:
    ULONG DeferBackstopMs() override { return 10; }
};
SOFTNDK_ALL_MODES(TcpDeferBackstopTest);

TEST_P(TcpDeferBackstopTest, CB_19_ADeferredWriteThatNoPostFollowsStillGoes) {
    ASSERT_EQ(PostDeferredWrite(0x73), STATUS_SUCCESS);
    NDK_RESULT_EX done = Poll(cq_a_);
    EXPECT_EQ(done.RequestContext, reinterpret_cast<PVOID>(1));
    EXPECT_EQ(done.Status, STATUS_SUCCESS);
    EXPECT_EQ(ReadBehind(), STATUS_SUCCESS);
    EXPECT_EQ(buffer_b_->data()[0], 0x73) << "the deferred Write was placed";
}

class TcpCrcTransportTest : public TcpTransportTest {
protected:
    bool Crc() override { return true; }
};
SOFTNDK_ALL_MODES(TcpCrcTransportTest);

TEST_P(TcpTransportTest, WIRE_LargeTransfersBetweenScatteredPagesArriveIntact) {
    MoveScatteredDataBothWays();
}

TEST_P(TcpCrcTransportTest, WIRE_LargeTransfersWithCrc32cArriveIntact) {
    MoveScatteredDataBothWays();
}

TEST_P(TcpTransportTest, WIRE_SendsOfEverySizeUpToTheReceiveArrive) {
    for (ULONG length : {1u, 3u, 4u, 13u, 14u, 18u, 100u, 4096u, 3 * 4096u}) ExpectSendArrives(length);
}

// CM-05 on real ports: the fabric hands out ephemeral ports per process; one another process (here: plain
// sockets) listens on is skipped, for a connector as for a listener.
TEST_P(TcpTransportTest, WIRE_CM_05_ConnectSkipsEphemeralPortsTheHostHasTaken) {
    NDK_SHARED_ENDPOINT* probe = CreateSharedEndpoint();  // learns the fabric's next port
    SOCKADDR_IN bound{};
    ULONG length = sizeof(bound);
    ASSERT_EQ(probe->Dispatch->NdkGetLocalAddress(probe, reinterpret_cast<PSOCKADDR>(&bound), &length), STATUS_SUCCESS);
    Close(&probe->Header);
    std::vector<int> blockers;
    for (uint16_t port = ntohs(bound.sin_port) + 1; blockers.size() < 3 && port != 0; ++port) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        SOCKADDR_IN address = Loopback(port);
        if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 && listen(fd, 1) == 0)
            blockers.push_back(fd);
        else
            close(fd);
    }
    ASSERT_EQ(blockers.size(), 3u);
    NDK_QP* active_qp = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    Connectors connectors = ConnectQps(active_qp, passive_qp);
    ASSERT_NE(connectors.passive, nullptr);
    SOCKADDR_IN local{};
    length = sizeof(local);
    ASSERT_EQ(connectors.active->Dispatch->NdkGetLocalAddress(connectors.active, reinterpret_cast<PSOCKADDR>(&local),
                                                              &length),
              STATUS_SUCCESS);
    EXPECT_GE(ntohs(local.sin_port), 49152) << "still from the CM-05 range";
    for (int fd : blockers) close(fd);
    for (NDK_OBJECT_HEADER* object :
         {&connectors.active->Header, &connectors.passive->Header, &active_qp->Header, &passive_qp->Header})
        Close(object);
}

// QP-16 on the wire: the Write completes once it is out (iWARP has no acknowledgement); the responder's
// Terminate carries the refusal (DDP tagged: invalid STag), both QPs go to error and the target is untouched.
TEST_P(TcpTransportTest, WIRE_QP_16_WriteToAnUnknownTokenTerminatesBothSides) {
    std::vector<uint8_t> before(buffer_b_->data(), buffer_b_->data() + buffer_b_->bytes());
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_), 0x00FFFF42, 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS) << "sent: the peer's verdict comes as a Terminate";
    EXPECT_TRUE(WaitFor([&] { return disconnects_a_.count == 1 && disconnects_b_.count == 1; }));
    NDK_SGE next = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &next, 1, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX flushed = Poll(cq_a_);
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
    EXPECT_EQ(flushed.ProviderErrorCode, softndk::engine::TerminateProviderError(1, 1, 0x00))
        << std::hex << flushed.ProviderErrorCode << ": later requests carry the cause (DDP tagged, invalid STag)";
    EXPECT_EQ(std::memcmp(before.data(), buffer_b_->data(), before.size()), 0) << "target memory changed";
}

// A Read is the one request that carries the peer's refusal itself: the Terminate's header copy names it, so it
// completes with the status of the refusal (QP-16) and the Terminate's cause (CQ-14), as in-process.
TEST_P(TcpTransportTest, WIRE_QP_16_CQ_14_ReadRefusedByThePeerCompletesWithTheRefusalAndItsCause) {
    std::memset(buffer_a_->data(), 0x3C, 64);
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sink, 1, RemoteAddress(*buffer_b_) + buffer_b_->bytes(),
                                       mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    const NDK_RESULT_EX read = Poll(cq_a_);
    EXPECT_EQ(read.Status, STATUS_REMOTE_RESOURCES);
    EXPECT_EQ(read.ProviderErrorCode, softndk::engine::TerminateProviderError(0, 1, 0x01))
        << std::hex << read.ProviderErrorCode << ": RDMAP remote protection, base or bounds";
    for (int i = 0; i < 64; ++i) ASSERT_EQ(buffer_a_->data()[i], 0x3C) << "the sink is untouched";
    EXPECT_TRUE(WaitFor([&] { return disconnects_a_.count == 1 && disconnects_b_.count == 1; }));
}

// Wire fault injection (issue 7 §5): the stream is reset after a few FPDUs. Every request completes in posting
// order, with success or flushed, and each side hears of it once.
class TcpDropTest : public TcpTransportTest {
protected:
    void Faults(SOFTNDK_WIRE_FAULTS& faults) override {
        faults.DropAfterFpdus = 3;  // the RTR, then two 64 KiB Writes
    }
};
SOFTNDK_ALL_MODES(TcpDropTest);

TEST_P(TcpDropTest, WIRE_DroppedConnectionCompletesEveryRequestAndIndicatesOnce) {
    constexpr int kWrites = 8;
    ASSERT_NO_FATAL_FAILURE(PostWrites(kWrites));
    int succeeded = 0, flushed = 0;
    for (int i = 0; i < kWrites; ++i) {
        const NDK_RESULT_EX result = Poll(cq_a_);
        EXPECT_EQ(result.RequestContext, reinterpret_cast<PVOID>(static_cast<uintptr_t>(i + 1))) << "posting order";
        if (result.Status == STATUS_SUCCESS) {
            ++succeeded;
            EXPECT_EQ(flushed, 0) << "nothing succeeds after the first flushed request";
        } else {
            EXPECT_EQ(result.Status, STATUS_CANCELLED);
            // Handed to the stream before it died: the cause; posted after the QP went to error: none (CQ-14).
            if (result.ProviderErrorCode != 0) {
                EXPECT_EQ(result.ProviderErrorCode, softndk::engine::TerminateProviderError(2, 0, 0x01))
                    << std::hex << result.ProviderErrorCode << ": LLP: stream lost";
            }
            ++flushed;
        }
    }
    EXPECT_GE(flushed, 1);
    EXPECT_LE(succeeded, 2);
    ExpectTerminated();
}

// A corrupted byte with CRC on: the receiver verifies the FPDU before placing it (RFC 5044 §6.1), sends
// Terminate LLP/CRC error, and no byte of its memory changed. Stream bytes count from the MPA Request (20 + the 4
// IRD/ORD bytes), then the RTR FPDU (20), then the FPDU under test. The offsets hold only without the kicks: a
// test posting more than 10 ms after the RTR would otherwise find a kick (a 20-byte zero-length Write) first,
// and a corrupted length field that leaves the peer waiting inside an FPDU instead of failing its CRC.
constexpr uint64_t kFirstFpduAfterRtr = 24 + 20;

template <uint64_t kCorruptByte>
class TcpCorruptTest : public TcpCrcTransportTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        TcpCrcTransportTest::Customize(config);
        config.RtrKicks = 0;
    }
    void Faults(SOFTNDK_WIRE_FAULTS& faults) override { faults.CorruptByte = kCorruptByte; }
};
// A payload byte of a Write: 16 bytes of length + tagged header, then 10 bytes in.
using TcpCorruptWriteTest = TcpCorruptTest<kFirstFpduAfterRtr + 16 + 10>;
SOFTNDK_ALL_MODES(TcpCorruptWriteTest);
// The Data Sink STag of a Read Request (FPDU bytes 20-23): the header still parses, the CRC does not match.
using TcpCorruptReadTest = TcpCorruptTest<kFirstFpduAfterRtr + 21 + 1>;
SOFTNDK_ALL_MODES(TcpCorruptReadTest);

TEST_P(TcpCorruptWriteTest, WIRE_CorruptedFpduWithCrcChangesNothingAndTerminates) {
    std::vector<uint8_t> before(buffer_b_->data(), buffer_b_->data() + buffer_b_->bytes());
    std::memset(buffer_a_->data(), 0x5A, PAGE_SIZE);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), PAGE_SIZE);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_),
                                        mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS) << "the Write is sent";
    ExpectTerminated();
    EXPECT_EQ(std::memcmp(before.data(), buffer_b_->data(), before.size()), 0) << "a bad FPDU was placed";
}

// The corrupted Read Request is outstanding when B's Terminate arrives: it is flushed with B's cause (CQ-14).
// Posted 50 ms after the connection is up, as a loaded machine does: with the kicks on, a kick would come first
// and the corrupted byte would be the Read Request's length (the test hung for 10 s, one CI run in three).
TEST_P(TcpCorruptReadTest, WIRE_CQ_14_ReadWithACorruptedRequestIsFlushedWithTheCrcCause) {
    usleep(50000);
    std::memset(buffer_a_->data(), 0x3C, 64);
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sink, 1, RemoteAddress(*buffer_b_),
                                       mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    const NDK_RESULT_EX read = Poll(cq_a_);
    EXPECT_EQ(read.Status, STATUS_CANCELLED);
    EXPECT_EQ(read.ProviderErrorCode, softndk::engine::TerminateProviderError(2, 0, 0x02))
        << std::hex << read.ProviderErrorCode << ": LLP/MPA CRC error";
    for (int i = 0; i < 64; ++i) ASSERT_EQ(buffer_a_->data()[i], 0x3C) << "the sink is untouched";
    ExpectTerminated();
}

// Wire fault: the sender stalls inside the first FPDU after the RTR. Nothing completes while it stalls; closing
// the connector (an abort) then completes every request, flushed in posting order, and the peer hears of it once.
class TcpStallTest : public TcpTransportTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        TcpTransportTest::Customize(config);
        config.RtrKicks = 0;  // the stall point counts the consumer's bytes only (see kFirstFpduAfterRtr)
    }
    void Faults(SOFTNDK_WIRE_FAULTS& faults) override { faults.StallAfterBytes = kFirstFpduAfterRtr + 100; }
};
SOFTNDK_ALL_MODES(TcpStallTest);

TEST_P(TcpStallTest, WIRE_StalledStreamCompletesEveryRequestOnClose) {
    constexpr int kWrites = 4;
    ASSERT_NO_FATAL_FAILURE(PostWrites(kWrites));
    usleep(100000);
    EXPECT_EQ(Pending(cq_a_), 0u) << "a stalled stream completes nothing";
    EXPECT_EQ(disconnects_b_.count, 0);
    Close(&connector_a_->Header);
    connector_a_ = nullptr;
    for (int i = 0; i < kWrites; ++i) {
        const NDK_RESULT_EX result = Poll(cq_a_);
        EXPECT_EQ(result.Status, STATUS_CANCELLED);
        EXPECT_EQ(result.RequestContext, reinterpret_cast<PVOID>(static_cast<uintptr_t>(i + 1))) << "posting order";
    }
    EXPECT_TRUE(WaitFor([&] { return disconnects_b_.count == 1; }));
    usleep(20000);
    EXPECT_EQ(disconnects_b_.count, 1) << "once (CM-26)";
}

// Wire fault: every send waits first. The data path stays correct, only slower.
class TcpDelayTest : public TcpTransportTest {
protected:
    static constexpr ULONG kDelayMicroseconds = 5000;
    void Faults(SOFTNDK_WIRE_FAULTS& faults) override { faults.DelayMicroseconds = kDelayMicroseconds; }
};
SOFTNDK_ALL_MODES(TcpDelayTest);

TEST_P(TcpDelayTest, WIRE_DelayedSendsArriveIntactAndLater) {
    constexpr int kSends = 4;
    for (int i = 0; i < kSends; ++i) {
        NDK_SGE receive = Sge(mr_b_, buffer_b_->data() + i * 64, 64);
        ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    }
    for (int i = 0; i < kSends * 64; ++i) buffer_a_->data()[i] = static_cast<uint8_t>(i * 3 + 1);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kSends; ++i) {
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data() + i * 64, 64);
        ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    }
    for (int i = 0; i < kSends; ++i) {
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_b_).BytesTransferred, 64u);
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::microseconds(kDelayMicroseconds))
        << "the delay fault delayed nothing";
    EXPECT_EQ(std::memcmp(buffer_a_->data(), buffer_b_->data(), kSends * 64), 0);
}

}  // namespace
}  // namespace softndk::test
