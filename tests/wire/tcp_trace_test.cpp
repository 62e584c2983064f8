// Wire tracing (issue 7 §6): the capture SOFTNDK_ADAPTER_CONFIG.TracePath writes. Both QPs are in this process
// and trace to one file, so each byte must appear once; the streams it holds must be the MPA exchange followed
// by whole FPDUs, exactly. (tests/wire/trace_ndkping.py decodes a two-process capture with tshark.)
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "support/connected_pair.h"
#include "support/pcap_reader.h"
#include "wire/iwarp_wire.h"

namespace softndk::test {
namespace {

std::string TracePathFor(const ::testing::TestInfo& test) {
    std::string name = std::string(test.name()) + "-" + test.value_param();
    for (char& c : name)
        if (c == '/') c = '-';
    return "/tmp/softndk-trace-" + std::to_string(getpid()) + "-" + name + ".pcap";
}

class TcpTraceTest : public ConnectedPairTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.Transport = SOFTNDK_TRANSPORT_TCP;
        config.RtrKicks = 0;  // the streams hold exactly what the test posted (a kick is a zero-length Write)
        path_ = TracePathFor(*::testing::UnitTest::GetInstance()->current_test_info());
        std::snprintf(config.TracePath, sizeof(config.TracePath), "%s", path_.c_str());
    }
    void TearDown() override {
        ConnectedPairTest::TearDown();
        std::remove(path_.c_str());
    }
    std::string path_;
};
SOFTNDK_ALL_MODES(TcpTraceTest);

// The stream after the MPA frame, cut into FPDUs: their opcodes, or false when it is not whole FPDUs.
bool CutIntoFpdus(const std::vector<uint8_t>& stream, wire::MpaFrameKind kind, std::map<int, int>* opcodes) {
    wire::MpaFrame frame;
    const wire::ParseResult mpa = wire::ParseMpaFrame(stream, kind, &frame);
    if (!mpa.ok()) return false;
    size_t at = mpa.size;
    while (at < stream.size()) {
        uint16_t ulpdu = 0;
        std::span<const uint8_t> rest(stream.data() + at, stream.size() - at);
        if (!wire::PeekFpduLength(rest, &ulpdu).ok() || rest.size() < wire::FpduSize(ulpdu)) return false;
        wire::SegmentHeader header;
        if (!wire::ParseUlpduHeader(rest.subspan(wire::kFpduLengthSize, ulpdu), &header).ok()) return false;
        ++(*opcodes)[static_cast<int>(header.opcode)];
        at += wire::FpduSize(ulpdu);
    }
    return true;
}

TEST_P(TcpTraceTest, WIRE_TraceHoldsEveryByteOnceAsMpaThenWholeFpdus) {
    usleep(50000);  // as a loaded machine posts: with the kicks on, one would come before the Send
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    NDK_SGE send = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &send, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_SUCCESS);
    NDK_SGE data = Sge(mr_a_, buffer_a_->data(), 3 * PAGE_SIZE);
    const UINT32 token = mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &data, 1, RemoteAddress(*buffer_b_), token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &data, 1, RemoteAddress(*buffer_b_), token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    // A graceful end both ways (CM-24): a FIN from each side.
    Completion a_done, b_done;
    const NTSTATUS a_returned = connector_a_->Dispatch->NdkDisconnect(connector_a_, &Completion::OnRequest, &a_done);
    ASSERT_TRUE(WaitFor([&] { return disconnects_b_.count == 1; }));
    const NTSTATUS b_returned = connector_b_->Dispatch->NdkDisconnect(connector_b_, &Completion::OnRequest, &b_done);
    EXPECT_EQ(a_done.Wait(a_returned), STATUS_SUCCESS);
    EXPECT_EQ(b_done.Wait(b_returned), STATUS_SUCCESS);

    std::vector<testing::TcpSegment> segments;
    std::string error;
    ASSERT_TRUE(WaitFor([&] {
        segments.clear();
        if (!testing::ReadTcpSegments(path_, &segments, &error)) return false;
        int fins = 0;
        for (const testing::TcpSegment& segment : segments) fins += (segment.flags & 0x01) != 0;
        return fins == 2;  // both FINs: the disconnect is complete in the capture
    })) << error;
    const std::vector<testing::TcpStream> streams = testing::ReassembleTcpStreams(segments);
    ASSERT_EQ(streams.size(), 2u) << "one connection, two directions";
    EXPECT_EQ(segments.front().flags, 0x02) << "the capture starts with the SYN";
    size_t payload = 0;
    for (const testing::TcpSegment& segment : segments) payload += segment.payload.size();
    EXPECT_EQ(payload, streams[0].bytes.size() + streams[1].bytes.size())
        << "every byte once: both ends trace to this file, each writes only what it sends";
    for (const testing::TcpStream& stream : streams) {
        const bool from_initiator =
            stream.bytes.size() >= wire::kMpaKeySize &&
            std::equal(wire::kMpaRequestKey.begin(), wire::kMpaRequestKey.end(), stream.bytes.begin());
        std::map<int, int> opcodes;
        ASSERT_TRUE(CutIntoFpdus(stream.bytes,
                                 from_initiator ? wire::MpaFrameKind::kRequest : wire::MpaFrameKind::kReply, &opcodes))
            << "the stream is an MPA frame, then whole FPDUs";
        using wire::RdmapOpcode;
        if (from_initiator) {
            EXPECT_EQ(opcodes[static_cast<int>(RdmapOpcode::kWrite)], 2) << "the RTR and the Write";
            EXPECT_EQ(opcodes[static_cast<int>(RdmapOpcode::kSend)], 1);
            EXPECT_EQ(opcodes[static_cast<int>(RdmapOpcode::kReadRequest)], 1);
        } else {
            EXPECT_EQ(opcodes[static_cast<int>(RdmapOpcode::kReadResponse)], 1);
            EXPECT_EQ(opcodes.size(), 1u) << "the responder sent only the Read Response";
        }
    }
}

// Issue 8 §3 (RFC 6581 §6): with MpaRtr READ the Request offers only a Read RTR, the Reply picks it, and the
// initiator's first FPDU is a zero-length Read Request of STag 1 that the responder answers with a zero-length
// Read Response before anything else; then the connection carries data.
class TcpReadRtrTraceTest : public TcpTraceTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        TcpTraceTest::Customize(config);
        config.MpaRtr = SOFTNDK_MPA_RTR_READ;
    }
};
SOFTNDK_ALL_MODES(TcpReadRtrTraceTest);

// The first FPDU after the stream's MPA frame, and the frame.
bool FirstFpdu(const std::vector<uint8_t>& stream, wire::MpaFrameKind kind, wire::MpaFrame* frame,
               wire::SegmentHeader* header, uint16_t* ulpdu) {
    const wire::ParseResult mpa = wire::ParseMpaFrame(stream, kind, frame);
    if (!mpa.ok() || stream.size() <= mpa.size) return false;
    std::span<const uint8_t> rest(stream.data() + mpa.size, stream.size() - mpa.size);
    return wire::PeekFpduLength(rest, ulpdu).ok() && rest.size() >= wire::FpduSize(*ulpdu) &&
           wire::ParseUlpduHeader(rest.subspan(wire::kFpduLengthSize, *ulpdu), header).ok();
}

TEST_P(TcpReadRtrTraceTest, WIRE_CM_08_ReadRtrIsAZeroLengthReadAnsweredFirst) {
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    std::memset(buffer_a_->data(), 0x5A, 64);
    NDK_SGE send = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &send, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).BytesTransferred, 64u);
    // A Read behind the RTR's: its Response must match this request, not the RTR's.
    std::memset(buffer_b_->data() + PAGE_SIZE, 0xA7, 64);
    NDK_SGE sink = Sge(mr_a_, buffer_a_->data() + PAGE_SIZE, 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sink, 1, RemoteAddress(*buffer_b_, PAGE_SIZE),
                                       mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    EXPECT_EQ(buffer_a_->data()[PAGE_SIZE + 63], 0xA7);
    std::vector<testing::TcpSegment> segments;
    std::string error;
    ASSERT_TRUE(WaitFor([&] {
        segments.clear();
        if (!testing::ReadTcpSegments(path_, &segments, &error)) return false;
        const std::vector<testing::TcpStream> streams = testing::ReassembleTcpStreams(segments);
        return streams.size() == 2 && streams[0].bytes.size() > 64 && streams[1].bytes.size() > 64;
    })) << error;
    int checked = 0;
    for (const testing::TcpStream& stream : testing::ReassembleTcpStreams(segments)) {
        const bool from_initiator =
            std::equal(wire::kMpaRequestKey.begin(), wire::kMpaRequestKey.end(), stream.bytes.begin());
        wire::MpaFrame frame;
        wire::SegmentHeader header;
        uint16_t ulpdu = 0;
        ASSERT_TRUE(FirstFpdu(stream.bytes, from_initiator ? wire::MpaFrameKind::kRequest : wire::MpaFrameKind::kReply,
                              &frame, &header, &ulpdu));
        EXPECT_TRUE(frame.enhanced && frame.words.peer_to_peer && frame.words.read_rtr);
        EXPECT_FALSE(frame.words.write_rtr) << "only the Read RTR is offered, and chosen";
        if (from_initiator) {
            EXPECT_EQ(header.opcode, wire::RdmapOpcode::kReadRequest);
            EXPECT_EQ(header.read.size, 0u);
            EXPECT_EQ(header.read.source_stag, 1u);
        } else {
            EXPECT_EQ(header.opcode, wire::RdmapOpcode::kReadResponse) << "the RTR is answered before anything";
            EXPECT_EQ(ulpdu, wire::SegmentHeaderSize(wire::RdmapOpcode::kReadResponse)) << "zero length";
        }
        ++checked;
    }
    EXPECT_EQ(checked, 2);
}

// With no outbound reads (ORD 0) a Read RTR would exceed the responder's IRD: the Request offers the Write RTR.
class TcpReadRtrWithoutReadsTraceTest : public TcpReadRtrTraceTest {
protected:
    ULONG PairReadLimit() override { return 0; }
};
SOFTNDK_ALL_MODES(TcpReadRtrWithoutReadsTraceTest);

TEST_P(TcpReadRtrWithoutReadsTraceTest, WIRE_CM_08_ReadRtrFallsBackToWriteWithoutOutboundReads) {
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
    NDK_SGE send = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &send, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).BytesTransferred, 64u);
    std::vector<testing::TcpSegment> segments;
    std::string error;
    ASSERT_TRUE(WaitFor([&] {
        segments.clear();
        if (!testing::ReadTcpSegments(path_, &segments, &error)) return false;
        for (const testing::TcpStream& stream : testing::ReassembleTcpStreams(segments))
            if (std::equal(wire::kMpaRequestKey.begin(), wire::kMpaRequestKey.end(), stream.bytes.begin()))
                return stream.bytes.size() > 64;
        return false;
    })) << error;
    bool checked = false;
    for (const testing::TcpStream& stream : testing::ReassembleTcpStreams(segments)) {
        if (!std::equal(wire::kMpaRequestKey.begin(), wire::kMpaRequestKey.end(), stream.bytes.begin())) continue;
        wire::MpaFrame frame;
        wire::SegmentHeader header;
        uint16_t ulpdu = 0;
        ASSERT_TRUE(FirstFpdu(stream.bytes, wire::MpaFrameKind::kRequest, &frame, &header, &ulpdu));
        EXPECT_EQ(frame.words.ord, 0u);
        EXPECT_TRUE(frame.words.write_rtr);
        EXPECT_FALSE(frame.words.read_rtr);
        EXPECT_EQ(header.opcode, wire::RdmapOpcode::kWrite) << "the zero-length Write RTR";
        checked = true;
    }
    EXPECT_TRUE(checked);
}

TEST(TraceConfigTest, WIRE_UnwritableTracePathFailsTheOpenWithItsStatus) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    std::snprintf(config.TracePath, sizeof(config.TracePath), "/nonexistent-softndk-dir/trace.pcap");
    NDK_ADAPTER* adapter = nullptr;
    EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_OBJECT_PATH_NOT_FOUND);
    EXPECT_EQ(adapter, nullptr);
    EXPECT_NE(std::string(SoftNdkGetLastErrorText()).find("trace"), std::string::npos);
    std::memset(config.TracePath, 'x', sizeof(config.TracePath));
    EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_INVALID_PARAMETER) << "not NUL-terminated";
    EXPECT_EQ(adapter, nullptr);
}

}  // namespace
}  // namespace softndk::test
