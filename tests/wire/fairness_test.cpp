// Issue 18 §2, fairness: one connection's bulk data cannot starve another on the same progress thread. A raw peer
// answers softndk's bulk Reads (256 KiB each, 8 outstanding, posted for 2 s) with Read Responses cut into 8 B
// FPDUs, sent from its own thread faster than the lane can place them, so the socket stays full. A second
// connection on the same lane times 64 B Read round trips meanwhile. Without the per-wake caps the lane reads the
// bulk socket for as long as it has bytes, and a round trip waits out most or all of the bulk. The property, which
// starvation breaks and load does not: at least 5 round trips complete while the bulk runs, their median stays
// under a quarter of it, and round trips longer than a quarter add up to less than half of it (a lane without the
// caps: 0 or 1 round trip, median 1.3-3.3 s; once 10, with one of 2.3 s). The maximum, one sample
// that a busy machine decides (383 ms of a 1467 ms transfer in a loaded CI run), is only reported.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "transport/tcp_connection.h"
#include "wire/crafted_peer.h"

namespace softndk::test {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration duration) {
    return std::chrono::duration<double, std::milli>(duration).count();
}

// Round trips timed while a flood ran: what the tests assert on, and the line they print.
struct RoundTrips {
    std::vector<double> ms;  // each one's wall time
    size_t during = 0;       // those that completed before the flood ended
    double Median() const { return ms.empty() ? 0 : Sorted()[ms.size() / 2]; }
    // The time spent in round trips longer than `slow` ms: a starved connection spends most of the flood in one.
    double Stalled(double slow) const {
        double stalled = 0;
        for (double one : ms)
            if (one > slow) stalled += one;
        return stalled;
    }
    std::vector<double> Sorted() const {
        std::vector<double> sorted = ms;
        std::sort(sorted.begin(), sorted.end());
        return sorted;
    }
    std::string Summary() const {
        if (ms.empty()) return "no round trip";
        const std::vector<double> sorted = Sorted();
        char line[160];
        std::snprintf(line, sizeof(line),
                      "%zu 64 B Read round trips (%zu during it): median %.2f ms, p99 %.2f ms, max %.2f ms", ms.size(),
                      during, sorted[sorted.size() / 2], sorted[sorted.size() * 99 / 100], sorted.back());
        return line;
    }
};

class FloodFairnessTest : public CraftedPacketTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        CraftedPacketTest::Customize(config);
        config.ProgressThreads = 1;  // one lane serves the raw peer's connection and both ends of A-B
    }
    // 64 B Reads of A from B, one after another, until `until`, and then the one in flight: each one's time.
    RoundTrips TimeRoundTrips(Clock::time_point until) {
        RoundTrips trips;
        LockedBuffer source(1), sink(1);
        NDK_MR* source_mr = CreateMr(false, pd_b_);
        NDK_MR* sink_mr = CreateMr(false);
        EXPECT_EQ(Register(source_mr, source.mdl(), source.bytes(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
        EXPECT_EQ(Register(sink_mr, sink.mdl(), sink.bytes(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
        const UINT32 token = source_mr->Dispatch->NdkGetRemoteTokenFromMr(source_mr);
        while (Clock::now() < until) {
            NDK_SGE sge = Sge(sink_mr, sink.data(), 64);
            const auto start = Clock::now();
            if (qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sge, 1, RemoteAddress(source), token, 0) != STATUS_SUCCESS) {
                ADD_FAILURE() << "NdkRead";
                break;
            }
            NDK_RESULT_EX result{};
            while (cq_a_->Dispatch->NdkGetCqResultsEx(cq_a_, &result, 1) == 0) {
                if (Clock::now() - start > std::chrono::seconds(30)) break;
                std::this_thread::sleep_for(std::chrono::microseconds(100));  // the core goes to the flood
            }
            if (result.Status != STATUS_SUCCESS) {
                ADD_FAILURE() << "a round trip failed or took over 30 s";
                break;
            }
            const auto end = Clock::now();
            trips.ms.push_back(Ms(end - start));
            if (end < until) ++trips.during;
        }
        Close(&source_mr->Header);
        Close(&sink_mr->Header);
        return trips;
    }
};

TEST_F(FloodFairnessTest, WIRE_ABulkReadDoesNotStarveAnotherConnectionsRoundTrip) {
    constexpr size_t kReadPages = 64;  // 256 KiB per Read
    constexpr int kOutstanding = 8;
    constexpr size_t kPiece = 8;  // payload per Read Response FPDU
    constexpr auto kBulk = std::chrono::seconds(2);
    raw_read_limit_ = kOutstanding;  // the raw peer's IRD
    ASSERT_NO_FATAL_FAILURE(Handshake());
    SendBytes(WriteFpdu(1, 0, 0));  // the initiator's first FPDU: softndk's may go now (RFC 5044 §7.1.2)
    LockedBuffer sink(kReadPages);
    NDK_MR* sink_mr = CreateMr(false);
    ASSERT_EQ(Register(sink_mr, sink.mdl(), sink.bytes(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);

    // Every Response is the same but for the sink STag softndk put in its Request (bytes 4-7 of each FPDU).
    std::vector<uint8_t> response;
    std::vector<size_t> stag_at;
    constexpr uint32_t kTemplateStag = 0x5A5A5A5A;
    for (size_t offset = 0; offset < sink.bytes(); offset += kPiece) {
        const bool last = offset + kPiece == sink.bytes();
        const std::vector<uint8_t> fpdu =
            Fpdu(Header(wire::MakeReadResponseHeader(kTemplateStag, offset, last)), std::vector<uint8_t>(kPiece, 0xEE));
        stag_at.push_back(response.size() + wire::kFpduLengthSize + 2);
        response.insert(response.end(), fpdu.begin(), fpdu.end());
    }
    ASSERT_EQ(response[stag_at[0]], 0x5A);
    timeval send_timeout{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    std::atomic<bool> peer_stop{false};
    std::atomic<uint64_t> answered{0}, sent{0};
    std::thread peer([&] {  // reads softndk's Read Requests and answers each with the whole Response
        std::vector<uint8_t> in;
        uint8_t chunk[4096];
        while (!peer_stop.load()) {
            pollfd readable{fd_, POLLIN, 0};
            if (::poll(&readable, 1, 20) <= 0) continue;
            const ssize_t got = ::recv(fd_, chunk, sizeof(chunk), 0);
            if (got <= 0) return;
            in.insert(in.end(), chunk, chunk + got);
            size_t at = 0;
            wire::FpduView view;
            wire::ParseResult fpdu;
            while ((fpdu = wire::ParseFpdu(std::span(in).subspan(at), crc_, &view)).ok()) {
                at += fpdu.size;
                SegmentHeader header;
                if (!wire::ParseUlpduHeader(view.ulpdu, &header).ok() || header.opcode != RdmapOpcode::kReadRequest)
                    continue;
                const uint32_t stag = htonl(header.read.sink_stag);
                for (size_t position : stag_at) std::memcpy(&response[position], &stag, sizeof(stag));
                for (size_t done = 0; done < response.size();) {
                    const ssize_t wrote = ::send(fd_, response.data() + done, response.size() - done, MSG_NOSIGNAL);
                    if (wrote <= 0) return;
                    done += static_cast<size_t>(wrote);
                    sent += static_cast<uint64_t>(wrote);
                }
                ++answered;
            }
            in.erase(in.begin(), in.begin() + static_cast<long>(at));
        }
    });

    std::atomic<bool> bulk_failed{false};
    std::atomic<Clock::time_point> bulk_end{Clock::time_point::max()};
    int completed = 0;
    std::thread bulk([&] {  // keeps kOutstanding Reads posted until bulk_end, then collects them
        int posted = 0;
        const auto give_up = Clock::now() + std::chrono::seconds(60);
        while ((posted > completed || Clock::now() < bulk_end.load()) && Clock::now() < give_up) {
            while (posted - completed < kOutstanding && Clock::now() < bulk_end.load()) {
                NDK_SGE sge = Sge(sink_mr, sink.data(), static_cast<ULONG>(sink.bytes()));
                if (qp_c_->Dispatch->NdkRead(qp_c_, nullptr, &sge, 1, 0x1000, 0x5678, 0) != STATUS_SUCCESS) {
                    bulk_failed = true;
                    return;
                }
                ++posted;
            }
            NDK_RESULT_EX result{};
            if (cq_c_->Dispatch->NdkGetCqResultsEx(cq_c_, &result, 1) == 1) {
                if (result.Status != STATUS_SUCCESS) {
                    bulk_failed = true;
                    return;
                }
                ++completed;
            } else {
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
        }
        if (posted > completed) bulk_failed = true;
    });

    // The round trips start once the socket is full (8 MiB sent), so that a lane that stayed with it would starve
    // them from the first.
    const bool flowing = WaitFor([&] { return sent.load() >= (8u << 20) || bulk_failed.load(); }, 10000);
    transport::ResetMostReadsInOneWake();
    const auto start = Clock::now();
    bulk_end = start + kBulk;
    const RoundTrips trips = TimeRoundTrips(start + kBulk);
    bulk.join();
    const double bulk_ms = Ms(Clock::now() - start);
    peer_stop = true;
    peer.join();
    EXPECT_TRUE(flowing) << "the Responses did not start";
    EXPECT_FALSE(bulk_failed.load()) << "the bulk Reads";
    std::printf(
        "%d bulk Reads, %.0f MiB of %zu B Read Responses in %.0f ms (at most %u reads in one wake); meanwhile %s\n",
        completed, static_cast<double>(sent.load()) / (1 << 20), kPiece, bulk_ms, transport::MostReadsInOneWake(),
        trips.Summary().c_str());
    EXPECT_GE(trips.during, 5u) << "round trips completed while the bulk ran";
    EXPECT_LT(trips.Median(), Ms(kBulk) / 4) << "the median round trip waited behind the bulk";
    EXPECT_LT(trips.Stalled(Ms(kBulk) / 4), Ms(kBulk) / 2) << "round trips waited behind the bulk for most of it";
    EXPECT_EQ(disconnects_c_.count, 0) << "the raw peer's Responses ended its connection";
    Close(&sink_mr->Header);
}

// The same property against a peer that floods 8 B tagged Writes (valid, so the connection lives) from its own
// thread: many FPDUs to a read, so the 2048-FPDU cap ends a wake before the 64 reads do. For 2 s from when the
// socket is full, the same three bounds.
TEST_F(FloodFairnessTest, WIRE_APeerFloodingSmallWritesDoesNotStarveAnotherConnectionsRoundTrip) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    std::vector<uint8_t> burst;
    for (int i = 0; i < 16384; ++i) {
        const std::vector<uint8_t> fpdu = WriteFpdu(Token(), Base() + 8 * (i % 64), 8);
        burst.insert(burst.end(), fpdu.begin(), fpdu.end());
    }
    timeval send_timeout{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    constexpr auto kFlood = std::chrono::seconds(2);
    std::atomic<Clock::time_point> flood_end{Clock::time_point::max()};
    std::atomic<uint64_t> flooded{0};
    std::atomic<bool> flood_failed{false};
    std::thread flood([&] {
        size_t at = 0;  // a send cut short by its timeout goes on from where it stopped, not from an FPDU's start
        while (Clock::now() < flood_end.load()) {
            const ssize_t sent = ::send(fd_, burst.data() + at, burst.size() - at, MSG_NOSIGNAL);
            if (sent <= 0) {
                flood_failed = true;
                break;
            }
            at = (at + static_cast<size_t>(sent)) % burst.size();
            flooded += static_cast<uint64_t>(sent);
        }
    });
    const bool flowing = WaitFor([&] { return flooded.load() >= (8u << 20) || flood_failed.load(); }, 10000);
    const auto start = Clock::now();
    flood_end = start + kFlood;
    const RoundTrips trips = TimeRoundTrips(start + kFlood);
    flood_end = Clock::now();  // after a failed start
    flood.join();
    EXPECT_TRUE(flowing) << "the flood did not start";
    std::printf("a raw peer flooded %.0f MiB of 8 B Writes for %.0f ms; meanwhile %s\n",
                static_cast<double>(flooded.load()) / (1 << 20), Ms(kFlood), trips.Summary().c_str());
    EXPECT_GE(trips.during, 5u) << "round trips completed during the flood";
    EXPECT_LT(trips.Median(), Ms(kFlood) / 4) << "the median round trip waited behind the flood";
    EXPECT_LT(trips.Stalled(Ms(kFlood) / 4), Ms(kFlood) / 2) << "round trips waited behind the flood for most of it";
    EXPECT_EQ(disconnects_c_.count, 0) << "the flooding peer's valid Writes ended its connection";
}

// The per-wake read cap itself (issue 18 §2): a raw peer floods 16 KiB Writes, one or two reads each, and keeps
// the socket full. The FPDU cap (2048 per wake) would let one wake read 32 MiB; the read cap ends it after 64
// reads. transport::MostReadsInOneWake() is the most any wake made: it reaches the cap (the socket always had
// more) and never passes it. The flood lasts until a wake reached the cap, at most 5 s: under TSan, after the
// test above, the lane once kept pace with a 1 s flood (583 MiB) and no wake made more than 12 reads. The count
// is process-wide, so it is reset first: an earlier test that reached 64 made the first check vacuous.
TEST_F(FloodFairnessTest, WIRE_AWakeReadsAtMost64TimesFromAPeerFloodingLargeWrites) {
    ASSERT_NO_FATAL_FAILURE(Handshake());
    constexpr size_t kWrite = 4 * PAGE_SIZE;  // B's whole buffer
    std::vector<uint8_t> burst;
    for (int i = 0; i < 64; ++i) {
        const std::vector<uint8_t> fpdu = WriteFpdu(Token(), Base(), kWrite);
        burst.insert(burst.end(), fpdu.begin(), fpdu.end());
    }
    transport::ResetMostReadsInOneWake();  // earlier tests in this process may have reached the cap already
    timeval send_timeout{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    std::atomic<uint64_t> flooded{0};
    constexpr auto kMostFlood = std::chrono::seconds(5);
    const auto flood_start = Clock::now();
    std::thread flood([&] {
        size_t at = 0;  // as above
        while (Clock::now() - flood_start < kMostFlood && transport::MostReadsInOneWake() < 64) {
            const ssize_t sent = ::send(fd_, burst.data() + at, burst.size() - at, MSG_NOSIGNAL);
            if (sent <= 0) break;
            at = (at + static_cast<size_t>(sent)) % burst.size();
            flooded += static_cast<uint64_t>(sent);
        }
    });
    flood.join();
    EXPECT_TRUE(WaitFor([&] { return transport::MostReadsInOneWake() >= 64; }))
        << "no wake found the socket full for 64 reads; flooded " << flooded.load() << " bytes";
    const double flood_ms = std::chrono::duration<double, std::milli>(Clock::now() - flood_start).count();
    std::printf("a raw peer flooded %.0f MiB of 16 KiB Writes for %.0f ms; the most reads in one wake: %u\n",
                static_cast<double>(flooded.load()) / (1 << 20), flood_ms, transport::MostReadsInOneWake());
    EXPECT_EQ(transport::MostReadsInOneWake(), 64u) << "a wake read past its cap";
    EXPECT_EQ(disconnects_c_.count, 0) << "the flooding peer's valid Writes ended its connection";
}

}  // namespace
}  // namespace softndk::test
