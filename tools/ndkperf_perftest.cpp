// ndkperf ib_write_bw | ib_read_bw | ib_send_bw: perftest's own rdma_cm protocol (`-R`, perftest 6.06 as in
// Debian 12's 4.5-0.17; siw-on-the-wire §2, docs/interop.md), so that softndk and perftest measure each other on Linux
// siw or an iWARP NIC, either side being the server. perftest's flags:
//   ndkperf ib_write_bw -R [-s SIZE] [-n ITERS] [-D SECONDS] [-p PORT] [-t TX] [--report_gbits] [SERVER]
//   ndkperf ib_read_bw  -R ... [-o OUTSTANDING_READS]
//   ndkperf ib_send_bw  -R ... [-r RX_DEPTH]
// The protocol, in short:
//  - Two connections on one port, one after the other: "comm" (IRD/ORD 0, one 56-byte receive posted, strict
//    ping-pong of Sends, the client first) and "data" (IRD/ORD = outstanding reads for ib_read_bw, else 0).
//  - On comm: version "6.06" (16 B), cycle buffer (4 B BE), cache line (4 B BE), MTU ("3\0"), a zero 56-byte
//    record; then the data connection; a zero record; the real record three times (STag, TO); one more record
//    around the data phase; for write/read five 8-byte report fields (size, iterations, peak, average, message
//    rate; big-endian); a closing record.
//  - Data: the client Writes or Reads `size` bytes per request into or from the server's buffer (addresses cycle
//    through a 4 KiB window when size ≤ 2 KiB). ib_send_bw Sends to the server's receives; iWARP has no
//    receiver-not-ready retry, so the server RDMA Writes its cumulative receive count (u32, little-endian) into
//    the client's credit slot every rx_depth/3 receives, and the client keeps fewer than rx_depth Sends ahead of it.
//  - The write/read server prints the client's figures; the send_bw server prints its own.
#include "ndkperf_perftest.hpp"

#include <endian.h>
#include <net/if.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ndk_args.hpp"
#include "ndkperf_perftest_flags.hpp"
#include "ndk_pair.hpp"
#include "ndk_route.h"

namespace ndkperf {
namespace {

using Clock = std::chrono::steady_clock;
std::atomic<int> g_perftest_signal{0};  // the client's Ctrl-C (RunPerftest installs the handler)
using ndktools::Check;
using ndktools::CloseObject;
using ndktools::Created;
using ndktools::Waiter;
using Flags = PerftestFlags;

[[noreturn]] void Fail(const char* format, const char* detail = "") {
    std::fprintf(stderr, format, detail);
    std::fputc('\n', stderr);
    std::exit(1);
}

constexpr char kVersion[16] = "6.06";     // what perftest 6.06 sends; a peer older than 5.70 is refused
constexpr uint32_t kCycleBuffer = 4096;   // perftest: the page size
constexpr uint32_t kCacheLine = 64;       // perftest: sysconf's line size
constexpr char kMtu[2] = {'3', 0};        // IBV_MTU_1024, as siw reports; informational on iWARP
constexpr size_t kRecord = 56;            // struct pingpong_dest (siw-on-the-wire §2.2)
constexpr uint64_t kNoPeakAbove = 20000;  // perftest reports no peak beyond this many iterations
constexpr int kSilenceSeconds = 120;      // perftest: "Did not get Message for 120 Seconds"
constexpr int kConnectTries = 100;        // 100 ms apart: the server re-listens for the data connection late
// The registered buffer: control slots, the credit source and slot, then the local and the exposed area.
constexpr size_t kGuard = 4096;  // after the registered buffer: a segment crossing its end must not land there
constexpr size_t kReceiveSlot = 0, kSendSlot = 64, kCreditSource = 128, kCreditSlot = 136, kAreas = 4096;

const char* StatusNameOf(NTSTATUS status) {
    const char* name = SoftNdkStatusName(status);
    return name ? name : "NTSTATUS";
}

const char* TypeName(NDK_OPERATION_TYPE type) {
    switch (type) {
        case NdkOperationTypeReceive:
            return "receive";
        case NdkOperationTypeSend:
            return "send";
        case NdkOperationTypeRead:
            return "read";
        case NdkOperationTypeWrite:
            return "write";
        default:
            return "request";
    }
}

// A failed completion, as a line: its status and what its ProviderErrorCode says (a Terminate's cause).
std::string Describe(const NDK_RESULT_EX& result) {
    char cause[160];
    SoftNdkFormatProviderError(result.ProviderErrorCode, cause, sizeof(cause));
    char line[320];
    std::snprintf(line, sizeof(line), "%s (0x%08X) on a %s, cause %s", StatusNameOf(result.Status),
                  static_cast<unsigned>(result.Status), TypeName(result.Type), cause);
    return line;
}

// ---- the 56-byte record (siw-on-the-wire §2.2; big-endian) --------------------------------------------------------

struct Record {
    uint32_t out_reads = 0, qpn = 0, psn = 0, rkey = 0;
    uint64_t vaddr = 0;
};

void Encode(const Record& record, uint8_t* out) {
    std::memset(out, 0, kRecord);
    const uint32_t words[] = {
        0, htobe32(record.out_reads), htobe32(record.qpn), htobe32(record.psn), htobe32(record.rkey), 0};
    std::memcpy(out, words, sizeof(words));
    const uint64_t vaddr = htobe64(record.vaddr);
    std::memcpy(out + 24, &vaddr, 8);
}

Record Decode(const uint8_t* in) {
    uint32_t words[5];
    std::memcpy(words, in, sizeof(words));
    uint64_t vaddr;
    std::memcpy(&vaddr, in + 24, 8);
    return {be32toh(words[1]), be32toh(words[2]), be32toh(words[3]), be32toh(words[4]), be64toh(vaddr)};
}

uint64_t DoubleBits(double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, 8);
    return htobe64(bits);
}

double BitsDouble(uint64_t big_endian) {
    const uint64_t bits = be64toh(big_endian);
    double value;
    std::memcpy(&value, &bits, 8);
    return value;
}

// ---- connections --------------------------------------------------------------------------------------------

VOID OnDisconnect(PVOID context) {
    static_cast<std::atomic<bool>*>(context)->store(true);
}

struct Connection {
    NDK_QP* qp = nullptr;
    NDK_CONNECTOR* connector = nullptr;
    std::atomic<bool> disconnected{false};
};

struct Figures {
    uint64_t size = 0, iters = 0;
    double peak = 0, average = 0, message_rate = 0;  // in the printing side's unit (MiB/s or Gb/s), Mpps
};

class Perftest {
public:
    explicit Perftest(const Flags& flags) : flags_(flags) {
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);  // the environment's settings (SOFTNDK_TRACE, _MPA_CRC, …) apply
        if (!flags_.interface.empty())
            std::snprintf(config.InterfaceName, sizeof(config.InterfaceName), "%s", flags_.interface.c_str());
        Check(SoftNdkOpenAdapter(&config, &adapter_), "SoftNdkOpenAdapter");
        NDK_ADAPTER_INFO info{};
        info.Version.Major = 1;
        info.Version.Minor = 2;
        ULONG info_size = sizeof(info);
        Check(adapter_->Dispatch->NdkQueryAdapterInfo(adapter_, &info, &info_size), "NdkQueryAdapterInfo");
        if (flags_.verb == Verb::kRead) {
            // perftest: the device's maximum unless -o asks for fewer (siw-on-the-wire §2.1)
            const unsigned limit = std::min(info.MaxInboundReadLimit, info.MaxOutboundReadLimit);
            if (flags_.out_reads > limit)
                std::printf(" Number of outstanding reads is above max = %u\n Changing to that max value\n", limit);
            if (flags_.out_reads == 0 || flags_.out_reads > limit) flags_.out_reads = limit;
        }
        Waiter pd;
        pd_ = Created(pd, adapter_->Dispatch->NdkCreatePd(adapter_, &Waiter::OnCreate, &pd, &pd_), &pd_, "NdkCreatePd");
        comm_cq_ = CreateCq(8);
        data_cq_ = CreateCq(flags_.rx_depth + 16);       // the data QP's receives
        data_send_cq_ = CreateCq(flags_.tx_depth + 16);  // its Writes, Reads, Sends and credit Writes
        area_ = ROUND_TO_PAGES(std::max<uint64_t>(flags_.size, kCycleBuffer));
        bytes_ = kAreas + 2 * area_;  // registered; a guard page follows, mapped but not registered
        buffer_ = static_cast<uint8_t*>(
            mmap(nullptr, bytes_ + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
        if (buffer_ == MAP_FAILED) Fail("ndkperf: cannot map %s", "the buffer");
        std::mt19937 random(std::random_device{}());
        for (size_t i = kAreas; i < bytes_ + kGuard; ++i) buffer_[i] = static_cast<uint8_t>(random());  // rand()
        mdl_ = IoAllocateMdl(buffer_, static_cast<ULONG>(bytes_), FALSE, FALSE, nullptr);
        Check(SoftNdkProbeAndLockPages(mdl_, KernelMode, IoWriteAccess), "SoftNdkProbeAndLockPages");
        Waiter mr;
        mr_ = Created(mr, pd_->Dispatch->NdkCreateMr(pd_, FALSE, &Waiter::OnCreate, &mr, &mr_), &mr_, "NdkCreateMr");
        Waiter registered;
        Check(registered.Wait(mr_->Dispatch->NdkRegisterMr(
                  mr_, mdl_, bytes_,
                  NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                  &Waiter::OnRequest, &registered)),
              "NdkRegisterMr");
        local_token_ = mr_->Dispatch->NdkGetLocalTokenFromMr(mr_);
        comm_.qp = CreateQp(comm_cq_, comm_cq_, 2, 2);
        data_.qp = CreateQp(data_cq_, data_send_cq_, flags_.rx_depth + 1, flags_.tx_depth + 8);
        psn_ = static_cast<uint32_t>(random()) & 0xffffff;
    }

    ~Perftest() {
        for (Connection* connection : {&data_, &comm_}) {
            CloseObject(connection->connector);
            CloseObject(connection->qp);
        }
        CloseObject(listener_);
        CloseObject(mr_);
        MmUnlockPages(mdl_);
        IoFreeMdl(mdl_);
        munmap(buffer_, bytes_ + kGuard);
        CloseObject(data_send_cq_);
        CloseObject(data_cq_);
        CloseObject(comm_cq_);
        CloseObject(pd_);
        SoftNdkCloseAdapter(adapter_);
    }

    int Run() {
        const bool server = flags_.server.empty();
        if (server)
            AcceptComm();
        else
            ConnectComm();
        Prologue();
        Handshake(Record{});  // #5: a zero record, then the data connection (siw-on-the-wire §2.3)
        if (server)
            AcceptData();
        else
            ConnectData();
        Handshake(Record{});  // #6
        const Record mine = MyRecord();
        Guard(mine);
        PrintBanner(mine);
        remote_ = Handshake(mine);  // #7 the real record, #8 again, #9 "after RTR"
        // perftest exposes max(size, cycle buffer) rounded to a cache line at the TO it advertises
        if (!server)
            Inject(&remote_,
                   (std::max<uint64_t>(flags_.size, cycle_buffer_) + cache_line_ - 1) / cache_line_ * cache_line_);
        Handshake(mine);
        Handshake(mine);
        PrintRemote(remote_);
        std::printf("%s", kLine);
        std::printf(" #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n", Unit(), Unit());
        if (flags_.verb == Verb::kSend)
            SendRounds(mine);
        else
            RdmaRounds(mine);
        std::printf("%s", kLine);
        // iWARP Writes and Sends complete when sent: a refusal comes back as a Terminate on the data connection,
        // which by now (the server answered behind it) has arrived. The run did not succeed then.
        if (data_.disconnected) Fatal(" the data connection ended during the run");
        Handshake(mine);  // the closing handshake (#16, send_bw #11)
        Disconnect(data_);
        Disconnect(comm_);
        CheckMemory();
        return 0;
    }

private:
    static constexpr const char* kLine =
        "---------------------------------------------------------------------------------------\n";

    const char* Unit() const { return flags_.gbits ? "Gb/sec" : "MB/sec"; }

    NDK_CQ* CreateCq(ULONG depth) {
        Waiter created;
        NDK_CQ* cq = nullptr;
        return Created(created,
                       adapter_->Dispatch->NdkCreateCq(adapter_, depth, &ndktools::IgnoreCq, nullptr, nullptr,
                                                       &Waiter::OnCreate, &created, &cq),
                       &cq, "NdkCreateCq");
    }

    NDK_QP* CreateQp(NDK_CQ* receive_cq, NDK_CQ* initiator_cq, ULONG receive_depth, ULONG initiator_depth) {
        Waiter created;
        NDK_QP* qp = nullptr;
        return Created(created,
                       pd_->Dispatch->NdkCreateQp(pd_, receive_cq, initiator_cq, this, receive_depth, initiator_depth,
                                                  1, 1, 0, &Waiter::OnCreate, &created, &qp),
                       &qp, "NdkCreateQp");
    }

    NDK_SGE Sge(size_t offset, size_t length) const {
        NDK_SGE sge{};
        sge.VirtualAddress = buffer_ + offset;
        sge.Length = static_cast<ULONG>(length);
        sge.MemoryRegionToken = local_token_;
        return sge;
    }

    // One completion of `cq` before `deadline` (false when it passed). A failed completion ends the run.
    bool PollUntil(NDK_CQ* cq, Clock::time_point deadline, const char* what, NDK_RESULT_EX* result) {
        // A peer's graceful close (FIN) leaves our requests posted (CM-27): the disconnect event ends the wait.
        const Connection& connection = cq == comm_cq_ ? comm_ : data_;  // data_cq_ or data_send_cq_
        std::optional<Clock::time_point> gone;
        for (unsigned spins = 0; cq->Dispatch->NdkGetCqResultsEx(cq, result, 1) == 0; ++spins) {
            if (spins % 1024 == 0 && Clock::now() > deadline) return false;
            if (spins > 4096) usleep(20);
            if (!connection.disconnected) continue;
            if (!gone) gone = Clock::now();
            if (Clock::now() - *gone > std::chrono::milliseconds(200))  // what was in flight has come by now
                Fatal(std::string(" the peer closed the ") + (cq == comm_cq_ ? "control" : "data") + " connection (" +
                      what + ")");
        }
        if (result->Status != STATUS_SUCCESS)
            Fatal(std::string(" Completion with error at ") + (flags_.server.empty() ? "server" : "client") + ": " +
                  Describe(*result) + " (" + what + ")");
        return true;
    }

    // Ctrl-C on the client: what was measured is printed (the row above, for the size under way), marked partial,
    // and the client ends with 128 + the signal, as the native client does; the server hears that it went away.
    void EndIfInterrupted() {
        const int signal_number = g_perftest_signal.load(std::memory_order_relaxed);
        if (signal_number == 0) return;
        std::printf("%s", kLine);
        std::printf(" (partial: interrupted by signal %d; the row above covers what completed before it)\n",
                    signal_number);
        std::fflush(stdout);
        std::exit(128 + signal_number);
    }

    // The end of a failed run (issue 8 §4): the failure; what ended the data connection, from the first of its
    // requests flushed with a cause (a Terminate sent or received); whether registered memory changed under an
    // injected fault; exit status 1.
    [[noreturn]] void Fatal(const std::string& message) {
        std::fprintf(stderr, "%s\n", message.c_str());
        if (data_.connector != nullptr) {
            const auto deadline = Clock::now() + std::chrono::seconds(2);
            NDK_RESULT_EX result;
            bool reported = false;
            while (!reported && Clock::now() < deadline) {
                if (data_cq_->Dispatch->NdkGetCqResultsEx(data_cq_, &result, 1) == 0 &&
                    data_send_cq_->Dispatch->NdkGetCqResultsEx(data_send_cq_, &result, 1) == 0) {
                    if (!data_.disconnected) break;  // the data connection is up: nothing to explain
                    usleep(1000);
                    continue;
                }
                if (result.Status == STATUS_SUCCESS) continue;
                std::fprintf(stderr, " data connection ended: %s\n", Describe(result).c_str());
                reported = true;  // the first is the one that explains
            }
            if (data_.disconnected && !reported && flags_.server.empty())
                std::fprintf(stderr,
                             " data connection ended: the client went away during the test (it closed the "
                             "connection, no Terminate)\n");
        }
        CheckMemory();
        std::fflush(stdout);
        std::exit(1);
    }

    // With an injected fault no byte outside what was advertised may change (Checksum says which bytes).
    void CheckMemory() const {
        if (flags_.inject == Flags::Inject::kNone || !flags_.server.empty()) return;
        const bool same = Checksum() == checksum_;  // CheckMemory runs only after Run guarded the ranges
        std::printf(" registered memory %s\n", same ? "unchanged" : "CHANGED");
        if (!same) std::exit(3);
    }

    // FNV-1a over the bytes no request may touch: with a bad STag the whole data area and the guard page after
    // the region; beyond the region, everything before the advertised TO and the guard page (the peer's segments
    // that fall inside [TO, end) are placed, as DDP places each segment on its own, RFC 5041 §7).
    uint64_t Checksum() const {
        uint64_t sum = 0xcbf29ce484222325ull;
        auto add = [&](size_t begin, size_t end) {
            for (size_t i = begin; i < end; ++i) sum = (sum ^ buffer_[i]) * 0x100000001b3ull;
        };
        add(kAreas, guarded_end_);
        add(bytes_, bytes_ + kGuard);
        return sum;
    }

    void Guard(const Record& advertised) {
        if (flags_.inject == Flags::Inject::kNone || !flags_.server.empty()) return;
        guarded_end_ = flags_.inject == Flags::Inject::kBadStag
                           ? bytes_
                           : static_cast<size_t>(advertised.vaddr - reinterpret_cast<uintptr_t>(buffer_));
        checksum_ = Checksum();
    }

    // One completion of `cq`, or the end of the run after kSilenceSeconds without one.
    NDK_RESULT_EX PollOne(NDK_CQ* cq, const char* what) {
        NDK_RESULT_EX result;
        if (!PollUntil(cq, Clock::now() + std::chrono::seconds(kSilenceSeconds), what, &result))
            Fatal(std::string(" Did not get Message for 120 Seconds (") + what + ")");
        return result;
    }

    void PostControlReceive() {
        NDK_SGE sge = Sge(kReceiveSlot, kRecord);
        Check(comm_.qp->Dispatch->NdkReceive(comm_.qp, nullptr, &sge, 1), "NdkReceive");
    }

    // One control message each way on comm: the client Sends first and the server answers (siw-on-the-wire §2.3).
    // Every receive is copied out and posted again at once, as perftest does: the peer's next message may come
    // before our Send's completion, and then waits in inbox_ for the next exchange. The peer's death ends the
    // wait (its disconnect event); silence alone does not, as perftest's write/read server waits for ever.
    std::vector<uint8_t> Exchange(const void* data, size_t length) {
        const bool server = flags_.server.empty();
        auto post_send = [&] {
            std::memcpy(buffer_ + kSendSlot, data, length);
            NDK_SGE sge = Sge(kSendSlot, length);
            Check(comm_.qp->Dispatch->NdkSend(comm_.qp, nullptr, &sge, 1, 0), "NdkSend");
        };
        auto await = [&](bool want_receive) {  // one Send completion, or one message into inbox_
            for (;;) {
                if (want_receive && !inbox_.empty()) return;
                NDK_RESULT_EX result;
                PollUntil(comm_cq_, Clock::time_point::max(), "a control message", &result);
                if (result.Type == NdkOperationTypeSend) {
                    if (!want_receive) return;
                    continue;
                }
                inbox_.emplace_back(buffer_ + kReceiveSlot, buffer_ + kReceiveSlot + result.BytesTransferred);
                PostControlReceive();
            }
        };
        if (!server) post_send();
        if (!server) await(false);
        await(true);
        std::vector<uint8_t> message = std::move(inbox_.front());
        inbox_.pop_front();
        if (server) {
            post_send();
            await(false);
        }
        return message;
    }

    Record Handshake(const Record& record) {
        uint8_t bytes[kRecord];
        Encode(record, bytes);
        std::vector<uint8_t> answer = Exchange(bytes, kRecord);
        answer.resize(kRecord);  // perftest reads 56 bytes whatever arrived
        return Decode(answer.data());
    }

    uint32_t ExchangeWord(uint32_t value) {
        const uint32_t big = htobe32(value);
        std::vector<uint8_t> answer = Exchange(&big, 4);
        answer.resize(4);
        uint32_t word;
        std::memcpy(&word, answer.data(), 4);
        return be32toh(word);
    }

    // #1…#4: version, cycle buffer, cache line, MTU (perftest exchange_versions, check_sys_data, check_mtu).
    void Prologue() {
        std::vector<uint8_t> version = Exchange(kVersion, sizeof(kVersion));
        version.resize(sizeof(kVersion));
        version.back() = 0;
        const char* remote = reinterpret_cast<const char*>(version.data());
        if (std::atof(remote) < 5.70)
            Fail(" Current implementation is not compatible with versions older than 5.70 (the peer says \"%s\")",
                 remote);
        // The larger cycle buffer and cache line of the two apply; ours are perftest's usual 4096 and 64.
        cycle_buffer_ = std::max(kCycleBuffer, ExchangeWord(kCycleBuffer));
        cache_line_ = std::max(kCacheLine, ExchangeWord(kCacheLine));
        if (cycle_buffer_ > area_ || cache_line_ > kCycleBuffer)
            Fail("ndkperf: the peer's cycle buffer %s", "is too big");
        Exchange(kMtu, sizeof(kMtu));
    }

    Record MyRecord() const {
        Record record;
        record.out_reads = flags_.verb == Verb::kRead ? flags_.out_reads : 1;
        record.qpn = 2;  // informational with -R
        record.psn = psn_;
        record.rkey = mr_->Dispatch->NdkGetRemoteTokenFromMr(mr_);
        // send_bw on iWARP advertises its credit slot (siw-on-the-wire §2.4); write/read the exposed area
        record.vaddr =
            reinterpret_cast<uintptr_t>(buffer_ + (flags_.verb == Verb::kSend ? kCreditSlot : kAreas + area_));
        if (flags_.server.empty()) Inject(&record, bytes_ - kAreas - area_);
        return record;
    }

    // --inject: a wrong key byte in the STag, or a TO whose requests cross the end of the region by half their
    // size. `exposed` is how many bytes the region holds from the advertised TO on.
    void Inject(Record* record, uint64_t exposed) const {
        if (flags_.inject == Flags::Inject::kBadStag) record->rkey ^= 0x5A;
        if (flags_.inject == Flags::Inject::kBeyondRegion) record->vaddr += exposed - flags_.size / 2;
    }

    SOCKADDR_INET Address(const std::string& text) const {
        SOCKADDR_INET address{};
        char error[256];
        if (ndk_resolve(text.c_str(), flags_.port, AF_INET, &address, error, sizeof(error)) == 0)
            Fail("ndkperf: %s (perftest takes IPv4 only)", error);
        return address;
    }

    ULONG ReadLimit() const { return flags_.verb == Verb::kRead ? flags_.out_reads : 0; }

    // ---- the client's connections ----

    void Connect(Connection& connection, ULONG limit) {
        const SOCKADDR_INET server = Address(flags_.server);
        SOCKADDR_INET source{};
        if (!ndk_source_for(&server, &source)) Fail("ndkperf: no route to %s", flags_.server.c_str());
        Waiter created;
        connection.connector = Created(
            created,
            adapter_->Dispatch->NdkCreateConnector(adapter_, &Waiter::OnCreate, &created, &connection.connector),
            &connection.connector, "NdkCreateConnector");
        // The server listens for the data connection only after its #5 answer, so a refusal is retried (perftest's
        // own client retries 10 times, 100 ms apart). A timeout is not: a peer that never completed the TCP
        // handshake or never answered the MPA Request has already cost AcceptTimeoutMs (30 s by default), and
        // retrying it 100 times hid a dead peer for 50 minutes (a siw guest whose network had stopped, 2026-12-07).
        NTSTATUS status = STATUS_UNSUCCESSFUL;
        char waiting_for[256];
        ndk_connect_wait_text("ndkperf", &server, waiting_for, sizeof(waiting_for));
        for (int attempt = 0; attempt < kConnectTries; ++attempt) {
            if (attempt > 0) usleep(100000);
            Waiter connected;
            status = connected.WaitSaying(
                connection.connector->Dispatch->NdkConnect(
                    connection.connector, connection.qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(SOCKADDR_IN),
                    reinterpret_cast<PSOCKADDR>(const_cast<SOCKADDR_INET*>(&server)), sizeof(SOCKADDR_IN), limit, limit,
                    nullptr, 0, &Waiter::OnRequest, &connected),
                waiting_for);
            if (status != STATUS_CONNECTION_REFUSED && status != STATUS_CONNECTION_RESET &&
                status != STATUS_CONNECTION_ABORTED)
                break;
        }
        if (status == STATUS_IO_TIMEOUT)
            std::fprintf(stderr,
                         "ndkperf: %s:%u did not answer within AcceptTimeoutMs (no TCP connection, or no MPA Reply); "
                         "a timeout is not retried\n",
                         flags_.server.c_str(), static_cast<unsigned>(flags_.port));
        Check(status, "NdkConnect");
        Waiter completed;
        Check(completed.Wait(connection.connector->Dispatch->NdkCompleteConnect(
                  connection.connector, &OnDisconnect, &connection.disconnected, &Waiter::OnRequest, &completed)),
              "NdkCompleteConnect");
    }

    void ConnectComm() {
        PostControlReceive();  // before connecting, as perftest does: the server may Send right after its #1
        Connect(comm_, 0);
    }

    void ConnectData() {
        // Never filled (the server never Sends on it): flushed with the cause if the run fails. send_bw -b posts
        // its real receives instead: an extra one would take a Send meant for them.
        if (flags_.verb != Verb::kSend || !flags_.duplex) PostDataReceive();
        Connect(data_, ReadLimit());
    }

    // ---- the server's connections ----

    // The next connection request; the first is waited for as long as it takes (perftest's server does).
    NDK_CONNECTOR* NextIncoming(bool forever) {
        const auto start = Clock::now();
        for (;;) {
            if (NDK_CONNECTOR* connector = incoming_.TryTake()) return connector;
            if (!forever && Clock::now() - start > std::chrono::seconds(kSilenceSeconds))
                Fail("ndkperf: the client's %s never came", "data connection");
            usleep(200);
        }
    }

    void Accept(Connection& connection, ULONG limit, bool forever) {
        connection.connector = NextIncoming(forever);
        ULONG inbound = 0, outbound = 0, length = 0;
        Check(connection.connector->Dispatch->NdkGetConnectionData(connection.connector, &inbound, &outbound, nullptr,
                                                                   &length),
              "NdkGetConnectionData");
        // perftest 6.06 accepts with its own limits; the peer's MPA negotiation settles the rest (siw-on-the-wire §3.3)
        Waiter accepted;
        Check(accepted.Wait(connection.connector->Dispatch->NdkAccept(
                  connection.connector, connection.qp, limit, limit, nullptr, 0, &OnDisconnect,
                  &connection.disconnected, &Waiter::OnRequest, &accepted)),
              "NdkAccept");
    }

    void AcceptComm() {
        SOCKADDR_INET any{};
        any.Ipv4.sin_family = AF_INET;
        any.Ipv4.sin_port = htons(static_cast<uint16_t>(flags_.port));
        // The listener stays up for the data connection, which comes on the same port after #5.
        listener_ = ndktools::Listen(adapter_, &ndktools::IncomingConnectors::OnConnect, &incoming_, &any);
        std::printf(
            "\n************************************\n* Waiting for client to connect... *\n"
            "************************************\n");
        std::fflush(stdout);
        PostControlReceive();
        Accept(comm_, 0, true);
    }

    void AcceptData() {
        // perftest's server stops listening here; an NDK listener closes only after its connectors (CM-22), so
        // ours stays until the end.
        // One receive the peer never fills: if the data connection ends, it is flushed with the cause (CQ-14).
        if (flags_.verb != Verb::kSend) PostDataReceive();
        Accept(data_, ReadLimit(), false);
    }

    void Disconnect(Connection& connection) {
        if (connection.connector == nullptr) return;
        Waiter disconnected;
        disconnected.Wait(
            connection.connector->Dispatch->NdkDisconnect(connection.connector, &Waiter::OnRequest, &disconnected));
    }

    // ---- printing, in perftest's layout ----

    void PrintBanner(const Record& mine) const {
        const char* title = flags_.verb == Verb::kWrite  ? "RDMA_Write"
                            : flags_.verb == Verb::kRead ? "RDMA_Read"
                                                         : "Send";
        std::printf("%s                    %s%s BW Test\n", kLine, title, flags_.duplex ? " Bidirectional" : "");
        std::printf(" Dual-port       : OFF\t\tDevice         : softndk\n");
        std::printf(" Number of qps   : 1\t\tTransport type : IW\n");
        std::printf(" Connection type : RC\t\tUsing SRQ      : OFF\n");
        std::printf(" TX depth        : %u\n", flags_.tx_depth);
        if (flags_.verb == Verb::kSend) std::printf(" RX depth        : %u\n", flags_.rx_depth);
        if (flags_.verb == Verb::kRead) std::printf(" Outstand reads  : %u\n", flags_.out_reads);
        std::printf(" Mtu             : 1024[B]\n Link type       : Ethernet\n");
        std::printf(" rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n%s", kLine);
        std::printf(" local address: LID 0000 QPN %#06x PSN %#08x RKey %#08x VAddr 0x%016llx\n", mine.qpn, mine.psn,
                    mine.rkey, static_cast<unsigned long long>(mine.vaddr));
    }

    static void PrintRemote(const Record& remote) {
        std::printf(" remote address: LID 0000 QPN %#06x PSN %#08x RKey %#08x VAddr 0x%016llx\n", remote.qpn,
                    remote.psn, remote.rkey, static_cast<unsigned long long>(remote.vaddr));
    }

    void PrintRow(const Figures& f) const {
        if (flags_.gbits && f.average < 0.1)
            std::printf(" %-7llu    %llu           %-7.6f            %-7.6f            %-7.6f\n",
                        static_cast<unsigned long long>(f.size), static_cast<unsigned long long>(f.iters), f.peak,
                        f.average, f.message_rate);
        else
            std::printf(" %-7llu    %-10llu       %-7.2f            %-7.2f\t\t   %-7.6f\n",
                        static_cast<unsigned long long>(f.size), static_cast<unsigned long long>(f.iters), f.peak,
                        f.average, f.message_rate);
        std::fflush(stdout);
    }

    Figures Measure(uint64_t count, double seconds, double best_per_op) const {
        Figures f;
        f.size = size_;
        f.iters = count;
        const double unit = flags_.gbits ? 125000000.0 : 1048576.0;  // perftest: Gb/s or MiB/s
        if (seconds > 0) {
            f.average = static_cast<double>(size_) * static_cast<double>(count) / seconds / unit;
            f.message_rate = static_cast<double>(count) / seconds / 1e6;
        }
        if (best_per_op > 0) f.peak = static_cast<double>(size_) / best_per_op / unit;
        return f;
    }

    // write/read: the client sends each field first, the server answers (its answers are not used: perftest's
    // are uninitialised). Returns the peer's figures.
    Figures ExchangeReports(const Figures& mine) {
        auto exchange = [&](uint64_t big_endian) {
            std::vector<uint8_t> answer = Exchange(&big_endian, 8);
            answer.resize(8);
            uint64_t value;
            std::memcpy(&value, answer.data(), 8);
            return value;
        };
        Figures theirs;
        theirs.size = be64toh(exchange(htobe64(mine.size)));
        theirs.iters = be64toh(exchange(htobe64(mine.iters)));
        theirs.peak = BitsDouble(exchange(DoubleBits(mine.peak)));
        theirs.average = BitsDouble(exchange(DoubleBits(mine.average)));
        theirs.message_rate = BitsDouble(exchange(DoubleBits(mine.message_rate)));
        return theirs;
    }

    // ---- the rounds: one size, or every size with -a; one direction, or both with -b ----

    std::vector<uint64_t> Sizes() const {
        if (!flags_.all_sizes) return {flags_.size};
        std::vector<uint64_t> sizes;
        for (unsigned power = kAllSizesFirstPower; power <= kAllSizesLastPower; ++power)
            sizes.push_back(uint64_t{1} << power);
        return sizes;
    }

    // perftest's -b report: this side's figures plus the peer's (print_full_bw_report with both).
    static Figures Sum(Figures mine, const Figures& theirs) {
        mine.peak += theirs.peak;
        mine.average += theirs.average;
        mine.message_rate += theirs.message_rate;
        return mine;
    }

    // write_bw / read_bw (perftest's main): one way, the client runs every size and prints its rows, then one
    // handshake and the report exchange of the last size, which the server prints. Both ways, each size is a
    // handshake, both sides' run, with -a another handshake, the report exchange, and the sum on both sides.
    void RdmaRounds(const Record& mine) {
        const bool server = flags_.server.empty();
        if (!flags_.duplex) {
            if (server) {
                Handshake(mine);                       // #10: the server waits here through the data phase
                PrintRow(ExchangeReports(Figures{}));  // the server prints the client's figures
                return;
            }
            Figures last;
            for (const uint64_t size : Sizes()) {
                size_ = size;
                last = RunInitiator();
                PrintRow(last);
                EndIfInterrupted();
            }
            Handshake(mine);
            ExchangeReports(last);
            return;
        }
        for (const uint64_t size : Sizes()) {
            size_ = size;
            Handshake(mine);
            const Figures figures = RunInitiator();
            if (flags_.all_sizes) Handshake(mine);
            PrintRow(Sum(figures, ExchangeReports(figures)));
        }
    }

    // send_bw (perftest's main): per size the receiving sides post their receives, a handshake, the run, the
    // rows, and with -a a handshake after. Both ways, without -D, the two exchange reports and print the sum.
    void SendRounds(const Record& mine) {
        const bool server = flags_.server.empty();
        for (const uint64_t size : Sizes()) {
            size_ = size;
            if (server || flags_.duplex) PostReceives();
            Handshake(mine);  // #10: the receives are posted
            // The credit count restarts each size (perftest clears its credit buffer here).
            __atomic_store_n(reinterpret_cast<uint32_t*>(buffer_ + kCreditSlot), 0u, __ATOMIC_RELEASE);
            if (!flags_.duplex) {
                PrintRow(server ? ReceiveSends() : RunInitiator());
            } else {
                const Figures figures = SendBothWays();
                PrintRow(flags_.duration > 0 ? figures : Sum(figures, ExchangeReports(figures)));
            }
            if (flags_.all_sizes) Handshake(mine);
        }
    }

    // ---- the data phase ----

    // perftest's address cycling (increase_rem_addr): sizes up to half the cycle buffer walk through it in
    // cache-line-rounded steps; larger ones always use the start.
    uint64_t Offset(uint64_t index) const {
        if (size_ > cycle_buffer_ / 2 || flags_.inject != Flags::Inject::kNone) return 0;
        const uint64_t step = size_ > cache_line_ ? (size_ + cache_line_ - 1) / cache_line_ * cache_line_ : cache_line_;
        return index % (cycle_buffer_ / step) * step;
    }

    uint32_t Credit() const {
        return le32toh(__atomic_load_n(reinterpret_cast<const uint32_t*>(buffer_ + kCreditSlot), __ATOMIC_ACQUIRE));
    }

    // The client: Writes, Reads or Sends with tx_depth in flight, all signalled; for Sends also fewer than rx_depth
    // ahead of the server's credit. Ends after iters completions, or after -D seconds (then drained).
    Figures RunInitiator() {
        const uint64_t iters = flags_.duration > 0 ? UINT64_MAX : flags_.iters;
        const bool peak = flags_.duration == 0 && flags_.iters <= kNoPeakAbove;
        std::vector<Clock::time_point> completed_at;
        if (peak) completed_at.resize(flags_.iters);
        uint64_t posted = 0, completed = 0;
        const auto start = Clock::now();
        const auto end =
            start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(flags_.duration));
        bool stopping = false;
        std::optional<Clock::time_point> gone;  // when the data connection's disconnect event came
        while (completed < iters && !(stopping && completed == posted)) {
            if (flags_.duration > 0 && !stopping && Clock::now() >= end) stopping = true;
            if (!stopping && g_perftest_signal.load(std::memory_order_relaxed) != 0) stopping = true;  // Ctrl-C
            while (!stopping && posted < iters && posted - completed < flags_.tx_depth &&
                   (flags_.verb != Verb::kSend || static_cast<uint32_t>(posted + 1 - Credit()) < flags_.rx_depth)) {
                const uint64_t offset = Offset(posted);
                NDK_SGE sge = Sge(kAreas + offset, size_);
                const uint64_t remote = remote_.vaddr + offset;
                NTSTATUS posted_status;
                if (flags_.verb == Verb::kWrite)
                    posted_status = data_.qp->Dispatch->NdkWrite(data_.qp, nullptr, &sge, 1, remote, remote_.rkey, 0);
                else if (flags_.verb == Verb::kRead)
                    posted_status = data_.qp->Dispatch->NdkRead(data_.qp, nullptr, &sge, 1, remote, remote_.rkey, 0);
                else
                    posted_status = data_.qp->Dispatch->NdkSend(data_.qp, nullptr, &sge, 1, 0);
                Check(posted_status, "posting");
                ++posted;
            }
            NDK_RESULT_EX results[64];
            const ULONG got = data_send_cq_->Dispatch->NdkGetCqResultsEx(data_send_cq_, results, 64);
            if (got == 0) {
                if (data_.disconnected && !gone) gone = Clock::now();
                if (gone && Clock::now() - *gone > std::chrono::milliseconds(200))
                    Fatal(" the server closed the data connection before the end");
                if (posted > completed) continue;
                // send_bw waiting for credit: poll the slot without burning the progress thread's core
                usleep(1);
                continue;
            }
            const auto now = Clock::now();
            for (ULONG i = 0; i < got; ++i) {
                if (results[i].Status != STATUS_SUCCESS)
                    Fatal(" Completion with error at client: " + Describe(results[i]) + ", after " +
                          std::to_string(completed) + " completed");
                if (peak) completed_at[completed] = now;
                ++completed;
            }
        }
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        // The peak: the best rate sustained over any stretch of at least 1/20 of the run (and tx_depth completions).
        // perftest takes the shortest time per request over a run of requests; here completions are reaped in
        // batches that share one timestamp, and a Write completes once the socket took its bytes, so a short run
        // could fall inside a burst and claim hundreds of GB/s.
        double best = 0;
        if (peak && completed > 1) {
            const auto span = (completed_at[completed - 1] - completed_at[0]) / 20;
            const size_t least = std::min<size_t>(flags_.tx_depth, completed - 1);
            size_t j = 0;
            for (size_t i = 0; i < completed; ++i) {
                if (j < i + 1) j = i + 1;
                while (j < completed && (j - i < least || completed_at[j] - completed_at[i] < span)) ++j;
                if (j >= completed) break;
                const double per_op = std::chrono::duration<double>(completed_at[j] - completed_at[i]).count() /
                                      static_cast<double>(j - i);
                if (per_op > 0 && (best == 0 || per_op < best)) best = per_op;
            }
        }
        // Too few distinct timestamps for any stretch (a short run reaped in one or two batches): the peak is the
        // whole run's rate.
        if (peak && best == 0 && completed > 0) best = seconds / static_cast<double>(completed);
        return Measure(completed, seconds, best);
    }

    // send_bw's server: rx_depth receives of its own size, all into the exposed area, posted before #10.
    void PostReceives() {
        const uint64_t count =
            flags_.duration > 0 ? flags_.rx_depth : std::min<uint64_t>(flags_.rx_depth, flags_.iters);
        for (uint64_t i = 0; i < count; ++i) PostDataReceive();
        receives_posted_ = count;
    }

    void PostDataReceive() {
        NDK_SGE sge = Sge(kAreas + area_, size_);
        Check(data_.qp->Dispatch->NdkReceive(data_.qp, nullptr, &sge, 1), "NdkReceive");
    }

    // send_bw's server: counts iters receives (or -D seconds from the first), reposting, and every rx_depth/3
    // receives RDMA Writes the cumulative count, little-endian, to the client's credit slot (siw-on-the-wire §2.4).
    Figures ReceiveSends() {
        const uint32_t credit_every = std::max(1u, flags_.rx_depth / 3);
        uint64_t received = 0, credits_in_flight = 0;
        Clock::time_point first{}, last{};
        auto* credit_source = reinterpret_cast<uint32_t*>(buffer_ + kCreditSource);
        const auto duration =
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(flags_.duration));
        for (;;) {
            if (flags_.duration == 0 && received == flags_.iters) break;
            // -D: the run ends D seconds after the first receive, whether or not more Sends come
            const auto deadline = received > 0 && flags_.duration > 0
                                      ? first + duration
                                      : Clock::now() + std::chrono::seconds(kSilenceSeconds);
            NDK_RESULT_EX result;
            if (!PollUntil(data_cq_, deadline, "a Send", &result)) {
                if (received > 0 && flags_.duration > 0) break;
                Fatal(" Did not get Message for 120 Seconds (a Send)");
            }
            last = Clock::now();
            if (received++ == 0) first = last;
            if (flags_.duration > 0 || receives_posted_ < flags_.iters) {
                PostDataReceive();
                ++receives_posted_;
            }
            NDK_RESULT_EX written;  // credit Writes done (their own CQ, as perftest's send CQ)
            while (data_send_cq_->Dispatch->NdkGetCqResultsEx(data_send_cq_, &written, 1) == 1) {
                if (written.Status != STATUS_SUCCESS) Fatal(" Completion with error at server: " + Describe(written));
                --credits_in_flight;
            }
            if ((received % flags_.rx_depth) % credit_every == 0) {
                for (; credits_in_flight >= flags_.tx_depth; --credits_in_flight)
                    PollOne(data_send_cq_, "a credit Write");
                __atomic_store_n(credit_source, htole32(static_cast<uint32_t>(received)), __ATOMIC_RELEASE);
                NDK_SGE sge = Sge(kCreditSource, 4);
                Check(data_.qp->Dispatch->NdkWrite(data_.qp, nullptr, &sge, 1, remote_.vaddr, remote_.rkey, 0),
                      "NdkWrite (credit)");
                ++credits_in_flight;
            }
        }
        for (; credits_in_flight > 0; --credits_in_flight) PollOne(data_send_cq_, "a credit Write");
        return Measure(received, std::chrono::duration<double>(last - first).count(), 0);
    }

    // send_bw -b (perftest's run_iter_bi): each side Sends as the client does, within its tx depth and the peer's
    // credit, and receives as the server does, reposting and writing its cumulative count to the peer's credit slot.
    // A credit Write owed while kCreditWrites are in flight goes with the next one (the count only grows). Ends
    // when both directions are done, or -D seconds after the start once this side's Sends completed.
    Figures SendBothWays() {
        constexpr uint64_t kCreditWrites = 4;  // within the data QP's initiator depth, tx_depth + 8
        const bool timed = flags_.duration > 0;
        const uint32_t credit_every = std::max(1u, flags_.rx_depth / 3);
        uint64_t posted = 0, sent = 0, received = 0, credits_in_flight = 0;
        bool credit_owed = false, stopping = false;
        auto* credit_source = reinterpret_cast<uint32_t*>(buffer_ + kCreditSource);
        const auto start = Clock::now();
        const auto end =
            start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(flags_.duration));
        auto last_progress = start;
        std::optional<Clock::time_point> gone;
        for (;;) {
            const auto now = Clock::now();
            if (timed && !stopping && now >= end) stopping = true;
            if (timed ? stopping && sent == posted && credits_in_flight == 0
                      : sent == flags_.iters && received == flags_.iters && credits_in_flight == 0)
                break;
            while (!stopping && (timed || posted < flags_.iters) && posted - sent < flags_.tx_depth &&
                   static_cast<uint32_t>(posted + 1 - Credit()) < flags_.rx_depth) {
                NDK_SGE sge = Sge(kAreas + Offset(posted), size_);
                Check(data_.qp->Dispatch->NdkSend(data_.qp, nullptr, &sge, 1, 0), "NdkSend");
                ++posted;
            }
            bool progress = false;
            NDK_RESULT_EX results[64];
            ULONG got = data_cq_->Dispatch->NdkGetCqResultsEx(data_cq_, results, 64);
            for (ULONG i = 0; i < got; ++i) {
                if (results[i].Status != STATUS_SUCCESS)
                    Fatal(" Completion with error at " + Side() + ": " + Describe(results[i]) + " (a Send received)");
                ++received;
                if (timed || receives_posted_ < flags_.iters) {
                    PostDataReceive();
                    ++receives_posted_;
                }
                if ((received % flags_.rx_depth) % credit_every == 0) credit_owed = true;
            }
            progress |= got > 0;
            got = data_send_cq_->Dispatch->NdkGetCqResultsEx(data_send_cq_, results, 64);
            for (ULONG i = 0; i < got; ++i) {
                if (results[i].Status != STATUS_SUCCESS)
                    Fatal(" Completion with error at " + Side() + ": " + Describe(results[i]) + ", after " +
                          std::to_string(sent) + " Sends completed");
                if (results[i].Type == NdkOperationTypeSend)
                    ++sent;
                else
                    --credits_in_flight;
            }
            progress |= got > 0;
            if (credit_owed && credits_in_flight < kCreditWrites) {
                __atomic_store_n(credit_source, htole32(static_cast<uint32_t>(received)), __ATOMIC_RELEASE);
                NDK_SGE sge = Sge(kCreditSource, 4);
                Check(data_.qp->Dispatch->NdkWrite(data_.qp, nullptr, &sge, 1, remote_.vaddr, remote_.rkey, 0),
                      "NdkWrite (credit)");
                ++credits_in_flight;
                credit_owed = false;
            }
            if (progress) {
                last_progress = now;
                continue;
            }
            if (data_.disconnected && !gone) gone = now;
            if (gone && now - *gone > std::chrono::milliseconds(200))
                Fatal(" the peer closed the data connection before the end");
            if (now - last_progress > std::chrono::seconds(kSilenceSeconds))
                Fatal(" Did not get Message for 120 Seconds (a Send, both ways)");
            if (posted == sent) usleep(1);  // waiting for the peer's Sends or credit
        }
        return Measure(sent, std::chrono::duration<double>(Clock::now() - start).count(), 0);
    }

    std::string Side() const { return flags_.server.empty() ? "server" : "client"; }

    Flags flags_;
    NDK_ADAPTER* adapter_ = nullptr;
    NDK_PD* pd_ = nullptr;
    NDK_CQ* comm_cq_ = nullptr;
    NDK_CQ* data_cq_ = nullptr;
    NDK_CQ* data_send_cq_ = nullptr;
    NDK_MR* mr_ = nullptr;
    ndktools::IncomingConnectors incoming_;  // before listener_: its callback runs until the listener closes
    NDK_LISTENER* listener_ = nullptr;
    MDL* mdl_ = nullptr;
    uint8_t* buffer_ = nullptr;
    size_t bytes_ = 0;
    size_t area_ = 0;
    UINT32 local_token_ = 0;
    uint32_t psn_ = 0;
    uint32_t cycle_buffer_ = kCycleBuffer;
    uint32_t cache_line_ = kCacheLine;
    uint64_t receives_posted_ = 0;
    uint64_t size_ = flags_.size;             // this round's size: -a walks through them
    std::deque<std::vector<uint8_t>> inbox_;  // control messages received, not yet taken (Exchange)
    uint64_t checksum_ = 0;                   // of the guarded bytes before the peer knew where to write (CheckMemory)
    size_t guarded_end_ = kAreas;             // the guarded data area is [kAreas, guarded_end_), plus the guard page
    Connection comm_;
    Connection data_;
    Record remote_;
};

}  // namespace

int RunPerftest(int argc, char** argv) {
    const Flags flags = ParsePerftestFlags(argc, argv);
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (!flags.server.empty()) {  // the client: the first SIGINT or SIGTERM ends the run with its partial row
        struct sigaction action {};
        action.sa_handler = [](int signal_number) { g_perftest_signal.store(signal_number); };
        action.sa_flags = SA_RESETHAND;  // a second signal ends the process at once
        sigaction(SIGINT, &action, nullptr);
        sigaction(SIGTERM, &action, nullptr);
    }
    Perftest perftest(flags);
    return perftest.Run();
}

}  // namespace ndkperf
