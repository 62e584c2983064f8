// `ndkperf --client -a ADDR -p PORT [...]` (issue 7 §7), in the idiom of ib_write_bw: runs the tests against an
// `ndkperf --server` (ndkperf_server.cpp).
//  - Bandwidth: write, read and send with a window of requests in flight; a run ends when the server has seen
//    every message (a Done answered by the server), so the figure counts placed bytes, not queued ones.
//  - Sends are flow-controlled by credits, since iWARP has no receiver-not-ready retry: the server keeps
//    kServerReceives receives posted and returns credits as it reposts them.
//  - Latency: a Send ping-pong; one-way = round trip / 2.
//  - Connections: N more connections, their set-up time, and the memory they cost on both sides.
#include "ndkperf_protocol.hpp"

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ndkperf {
namespace {

using namespace remote;

// ---- client ----------------------------------------------------------------------------------------------

std::atomic<bool> g_client_disconnected{false};
VOID OnClientDisconnect(PVOID) {
    g_client_disconnected = true;
}

class Client {
public:
    // `shared_adapter`: another QP's adapter (-q N), else the client opens its own.
    explicit Client(const Options& options, NDK_ADAPTER* shared_adapter = nullptr) : options_(options) {
        const SOFTNDK_ADAPTER_CONFIG config = ConfigFor(options);
        data_bytes_ = ROUND_TO_PAGES(options.largest);
        depth_ = options.window + kServerReceives + 16;
        // Data, the send area, the receive spill, the receive slots.
        ndktools::OpenSide(&side_, config, data_bytes_ + 2 * kMessageArea + kServerReceives * kSlot, depth_,
                           4 * depth_ + 8192, NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
                           shared_adapter);
        for (size_t i = 0; i < data_bytes_; ++i) side_.buffer[i] = static_cast<uint8_t>(i * 13 + 1);  // never kMagic
    }
    ~Client() {
        for (NDK_CONNECTOR* connector : extra_connectors_) CloseObject(connector);
        for (NDK_QP* qp : extra_qps_) CloseObject(qp);
        ndktools::CloseSide(&side_);
    }

    NDK_ADAPTER* adapter() const { return side_.adapter; }
    void set_quiet() { quiet_ = true; }

    // Connects its QP to the server and posts its receives.
    void Open() {
        const int length = ParseAddress(options_.address, options_.port, &server_);
        server_length_ = static_cast<ULONG>(length);
        side_.connector = Connect(side_.qp, &hello_);
        for (ULONG i = 0; i < kServerReceives; ++i) PostReceive(i);
        credits_ = hello_.receives;
    }

    // Ends its connection: kQuit also ends the server, kLeave leaves it serving.
    void Leave(Kind kind) {
        SendControl(Control{kMagic, kind, 0, Test::kWrite, 0, 0});
        Waiter disconnected;
        disconnected.Wait(side_.connector->Dispatch->NdkDisconnect(side_.connector, &Waiter::OnRequest, &disconnected));
    }

    // The run of one Bandwidth: its first post and its Done's answer.
    Clock::time_point started() const { return started_; }
    Clock::time_point ended() const { return ended_; }

    int Run() {
        Open();
        InstallInterruptHandler();  // once: SA_RESETHAND lets a second Ctrl-C end the process
        return RunRest(options_.tests, {});
    }

    // After Open: --idle, the bandwidth rows of `tests` (after `rows`, measured elsewhere), the ping-pongs,
    // --connections, the Quit and the summary.
    int RunRest(const std::vector<std::string>& tests, std::vector<Row> rows) {
        if (options_.idle_seconds > 0) idle_cpu_percent_ = IdleCpuPercent(options_.idle_seconds);
        std::vector<LatencyRow> latencies;
        const size_t total = tests.size() * options_.sizes.size() + options_.latency_sizes.size();
        size_t step = 0;
        for (const std::string& test : tests) {
            for (size_t size : options_.sizes) {
                if (Interrupted()) break;
                std::fprintf(stderr, "[%zu/%zu] %s %s ...", ++step, total, test.c_str(), SizeName(size).c_str());
                rows.push_back(Bandwidth(test, size));
                std::fprintf(stderr, " %.2f Gb/s\n", rows.back().gbytes_per_s * 8);
            }
        }
        for (size_t size : options_.latency_sizes) {
            if (Interrupted()) break;
            std::fprintf(stderr, "[%zu/%zu] send ping-pong %s ...", ++step, total, SizeName(size).c_str());
            latencies.push_back(PingPong(size));
            std::fprintf(stderr, " %.1f us one-way\n", latencies.back().one_way_p50_ns / 1e3);
        }
        ConnectionsRow scale{};
        if (options_.connections > 0 && !Interrupted()) {
            std::fprintf(stderr, "%u connections ...", options_.connections);
            scale = Connections(options_.connections);
            std::fprintf(stderr, " %.0f us each\n", scale.setup_us_per_connection);
        }
        Leave(Kind::kQuit);
        if (Interrupted())
            std::fprintf(stderr, "ndkperf: interrupted; the rows below are what was measured (the last one partly)\n");
        Print(options_, rows, latencies, scale, idle_cpu_percent_);
        return InterruptedExitStatus();
    }

    Row Bandwidth(const std::string& test, size_t size) { return MeasureBandwidth(test, size); }

private:
    NDK_CONNECTOR* Connect(NDK_QP* qp, Hello* hello) {
        NDK_CONNECTOR* connector = CreateConnector(side_);
        SOCKADDR_INET source = SourceFor(server_);
        Join join{kMagic, hello != nullptr ? Role::kTests : Role::kExtra};
        Waiter connected;
        char waiting_for[256];
        Check(connected.WaitSaying(
                  connector->Dispatch->NdkConnect(connector, qp, reinterpret_cast<PSOCKADDR>(&source), server_length_,
                                                  reinterpret_cast<PSOCKADDR>(&server_), server_length_, kReadLimit,
                                                  kReadLimit, &join, sizeof(join), &Waiter::OnRequest, &connected),
                  ndk_connect_wait_text("ndkperf", &server_, waiting_for, sizeof(waiting_for))),
              "NdkConnect");
        if (hello != nullptr) {
            ULONG inbound = 0, outbound = 0, size = sizeof(*hello);
            Check(connector->Dispatch->NdkGetConnectionData(connector, &inbound, &outbound, hello, &size),
                  "NdkGetConnectionData");
            if (size != sizeof(*hello) || hello->magic != kMagic) {
                std::fprintf(stderr, "ndkperf: the server is not an ndkperf server\n");
                std::exit(1);
            }
            read_window_ = std::max<ULONG>(1, std::min<ULONG>(outbound, options_.window));
        }
        Waiter completed;
        Check(completed.Wait(connector->Dispatch->NdkCompleteConnect(connector, &OnClientDisconnect, nullptr,
                                                                     &Waiter::OnRequest, &completed)),
              "NdkCompleteConnect");
        return connector;
    }

    void PostReceive(size_t slot) {
        NDK_SGE sge[2] = {Sge(side_, data_bytes_ + 2 * kMessageArea + slot * kSlot, kSlot),
                          Sge(side_, data_bytes_ + kMessageArea, kMessageArea)};
        Check(side_.qp->Dispatch->NdkReceive(side_.qp, ReceiveContext(slot), sge, 2), "NdkReceive");
    }

    // Polls what is there; returns the number of data requests (context nullptr) that completed.
    ULONG Pump() {
        NDK_RESULT_EX results[32];
        const ULONG count = side_.cq->Dispatch->NdkGetCqResultsEx(side_.cq, results, 32);
        ULONG finished = 0;
        for (ULONG i = 0; i < count; ++i) {
            const NDK_RESULT_EX& result = results[i];
            if (result.Status != STATUS_SUCCESS) {
                char described[256], cause[160];
                SoftNdkFormatProviderError(result.ProviderErrorCode, cause, sizeof(cause));
                std::fprintf(stderr, "\nndkperf: a request failed: %s, cause %s%s\n",
                             ndk_status_describe(result.Status, described, sizeof(described)), cause,
                             g_client_disconnected ? ", the server disconnected" : "");
                ndktools::ExitAtOnce(1);  // one of -q's threads, maybe: no exit() twice
            }
            if (result.RequestContext == kSendContext) continue;  // a control message of ours
            if (!IsReceive(result.RequestContext)) {              // a data request
                ++finished;
                continue;
            }
            Control control{};
            const size_t slot = SlotOf(result.RequestContext);
            const uint8_t* message = side_.buffer + data_bytes_ + 2 * kMessageArea + slot * kSlot;
            if (result.BytesTransferred == sizeof(Control)) std::memcpy(&control, message, sizeof(control));
            PostReceive(slot);
            if (control.magic == kMagic) {
                credits_ += control.credits;
                if (control.kind == Kind::kDone) {
                    done_ = true;
                    server_value_ = control.value;
                }
            } else {
                ++credits_;  // a pong returns its ping's receive
                ++pongs_;
            }
        }
        return finished;
    }

    void SendControl(const Control& control) {
        while (credits_ == 0) Pump();
        --credits_;
        std::memcpy(side_.buffer + data_bytes_, &control, sizeof(control));
        NDK_SGE sge = Sge(side_, data_bytes_, sizeof(control));
        Check(side_.qp->Dispatch->NdkSend(side_.qp, kSendContext, &sge, 1, 0), "NdkSend");
    }

    // Start … Done: the Done's answer comes after every earlier message was received.
    uint64_t Exchange(Test test, uint64_t size, bool start) {
        done_ = false;
        SendControl(Control{kMagic, start ? Kind::kStart : Kind::kDone, 0, test, size, 0});
        while (!done_) Pump();
        return server_value_;
    }

    bool Post(const std::string& test, size_t size, ULONG flags = 0) {
        NDK_SGE local = Sge(side_, 0, size);
        NTSTATUS status;
        if (test == "write") {
            status = side_.qp->Dispatch->NdkWrite(side_.qp, nullptr, &local, 1, hello_.address, hello_.token, flags);
        } else if (test == "read") {
            status = side_.qp->Dispatch->NdkRead(side_.qp, nullptr, &local, 1, hello_.address, hello_.token, flags);
        } else {
            if (credits_ == 0) return false;
            --credits_;
            status = side_.qp->Dispatch->NdkSend(side_.qp, nullptr, &local, 1, flags);
        }
        Check(status, test.c_str());
        return true;
    }

    Row MeasureBandwidth(const std::string& test, size_t size) {
        const Test kind = test == "write" ? Test::kWrite : test == "read" ? Test::kRead : Test::kSend;
        const ULONG window = kind == Test::kRead ? read_window_ : options_.window;
        SendControl(Control{kMagic, Kind::kStart, 0, kind, size, 0});
        const auto start = Clock::now();
        started_ = start;
        auto report = start + std::chrono::seconds(1);
        const auto end =
            start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.seconds));
        uint64_t completed = 0, outstanding = 0;
        while (Clock::now() < end && !Interrupted()) {
            // A burst of posts rings the doorbell once: DEFER on all but its last (one sendmsg, one TCP segment).
            uint64_t burst = window - outstanding;
            if (kind == Test::kSend) burst = std::min<uint64_t>(burst, credits_);
            for (uint64_t i = 0; i < burst; ++i) Post(test, size, i + 1 < burst ? NDK_OP_FLAG_DEFER : 0);
            outstanding += burst;
            const ULONG finished = Pump();
            outstanding -= finished;
            completed += finished;
            if (options_.seconds >= 2 && !quiet_ && Clock::now() >= report) {  // progress on long runs
                std::fprintf(stderr, " %.2f",
                             completed * size * 8 / std::chrono::duration<double>(Clock::now() - start).count() / 1e9);
                report += std::chrono::seconds(1);
            }
        }
        while (outstanding > 0) {
            const ULONG finished = Pump();
            outstanding -= finished;
            completed += finished;
        }
        Exchange(kind, size, false);  // every Write is placed and every Send received
        ended_ = Clock::now();
        const double elapsed = std::chrono::duration<double>(ended_ - start).count();
        Row row{};
        row.test = test;
        row.size = size;
        row.iterations = static_cast<long>(completed);
        row.gbytes_per_s = static_cast<double>(size) * static_cast<double>(completed) / elapsed / 1e9;
        row.mops = static_cast<double>(completed) / elapsed / 1e6;
        return row;
    }

    LatencyRow PingPong(size_t size) {
        SendControl(Control{kMagic, Kind::kStart, 0, Test::kPingPong, size, 0});
        std::vector<double> samples;
        const auto stop =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.seconds));
        for (int i = 0; i < 100000 && (i < 200 || Clock::now() < stop) && (i < 21 || !Interrupted()); ++i) {
            const uint64_t before = pongs_;
            const auto t0 = Clock::now();
            while (!Post("send", size)) Pump();
            while (pongs_ == before) Pump();
            if (i >= 20) samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
        }
        Exchange(Test::kPingPong, size, false);
        std::sort(samples.begin(), samples.end());
        LatencyRow row{};
        row.size = size;
        row.iterations = static_cast<long>(samples.size());
        row.one_way_p50_ns = samples[samples.size() / 2] / 2;
        row.one_way_p99_ns = samples[samples.size() * 99 / 100] / 2;
        return row;
    }

    // The process's CPU use while its adapter holds an idle connection (issue 7 §8: < 1 % of a core).
    static double IdleCpuPercent(double seconds) {
        rusage before{}, after{};
        getrusage(RUSAGE_SELF, &before);
        const auto start = Clock::now();
        // The wait ends early when the connection does (issue 18 §2: an idle connection whose server vanished is
        // noticed by keepalive, SOFTNDK_PEER_STALL_TIMEOUT_MS).
        while (std::chrono::duration<double>(Clock::now() - start).count() < seconds && !g_client_disconnected &&
               !Interrupted())
            usleep(20000);
        if (g_client_disconnected) {
            std::fprintf(stderr,
                         "ndkperf: the connection ended while idle, %.1f s in: the server disconnected or vanished "
                         "(its disconnect event)\n",
                         std::chrono::duration<double>(Clock::now() - start).count());
            std::exit(1);
        }
        getrusage(RUSAGE_SELF, &after);
        auto cpu = [](const rusage& usage) {
            return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                   (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
        };
        return (cpu(after) - cpu(before)) / std::chrono::duration<double>(Clock::now() - start).count() * 100;
    }

    ConnectionsRow Connections(uint32_t count) {
        RaiseDescriptorLimit();
        const uint64_t server_before = Exchange(Test::kConnections, count, true);
        const uint64_t client_before = ResidentKiB();
        const auto start = Clock::now();
        for (uint32_t i = 0; i < count; ++i) {
            extra_qps_.push_back(CreateQp(side_, nullptr, 4));
            extra_connectors_.push_back(Connect(extra_qps_.back(), nullptr));
        }
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        const uint64_t client_after = ResidentKiB();
        const uint64_t server_after = Exchange(Test::kConnections, count, false);
        ConnectionsRow row{};
        row.count = count;
        row.setup_us_per_connection = seconds * 1e6 / count;
        row.client_kib_per_connection =
            static_cast<double>(client_after - std::min(client_after, client_before)) / count;
        row.server_kib_per_connection =
            static_cast<double>(server_after - std::min(server_after, server_before)) / count;
        for (NDK_CONNECTOR* connector : extra_connectors_) {
            Waiter disconnected;
            disconnected.Wait(connector->Dispatch->NdkDisconnect(connector, &Waiter::OnRequest, &disconnected));
        }
        return row;
    }

    const Options& options_;
    ndktools::Side side_;
    size_t data_bytes_ = 0;
    ULONG depth_ = 0;
    ULONG read_window_ = 1;
    SOCKADDR_INET server_{};
    ULONG server_length_ = 0;
    Hello hello_{};
    uint64_t credits_ = 0;
    uint64_t pongs_ = 0;
    bool done_ = false;
    uint64_t server_value_ = 0;
    double idle_cpu_percent_ = -1;
    bool quiet_ = false;
    Clock::time_point started_{}, ended_{};
    std::vector<NDK_QP*> extra_qps_;
    std::vector<NDK_CONNECTOR*> extra_connectors_;
};

}  // namespace

// -q N (perftest's -q): N QPs on one adapter, each its own connection to the server, run each test and size at
// once from N threads. A row is the sum: every QP's bytes over the time from the first QP's start to the last
// one's Done. Latency, --connections and --idle run on the first QP alone.
int RunManyQps(const Options& options) {
    // The first client owns the adapter the others use: they go first, on every path out of here.
    struct Clients : std::vector<std::unique_ptr<Client>> {
        ~Clients() {
            while (!empty()) pop_back();
        }
    } clients;
    clients.push_back(std::make_unique<Client>(options));
    for (unsigned i = 1; i < options.qps; ++i)
        clients.push_back(std::make_unique<Client>(options, clients[0]->adapter()));
    for (auto& client : clients) {
        client->set_quiet();
        client->Open();
    }
    InstallInterruptHandler();
    std::vector<Row> rows;
    const size_t total = options.tests.size() * options.sizes.size();
    size_t step = 0;
    for (const std::string& test : options.tests) {
        for (size_t size : options.sizes) {
            if (Interrupted()) break;
            std::fprintf(stderr, "[%zu/%zu] %s %s, %u QPs ...", ++step, total, test.c_str(), SizeName(size).c_str(),
                         options.qps);
            std::vector<Row> parts(clients.size());
            std::vector<std::thread> threads;
            for (size_t i = 0; i < clients.size(); ++i)
                threads.emplace_back([&, i] { parts[i] = clients[i]->Bandwidth(test, size); });
            for (std::thread& thread : threads) thread.join();
            Clock::time_point first = clients[0]->started(), last = clients[0]->ended();
            Row sum{};
            sum.test = test;
            sum.size = size;
            for (size_t i = 0; i < clients.size(); ++i) {
                first = std::min(first, clients[i]->started());
                last = std::max(last, clients[i]->ended());
                sum.iterations += parts[i].iterations;
            }
            const double elapsed = std::chrono::duration<double>(last - first).count();
            sum.gbytes_per_s = static_cast<double>(size) * static_cast<double>(sum.iterations) / elapsed / 1e9;
            sum.mops = static_cast<double>(sum.iterations) / elapsed / 1e6;
            rows.push_back(sum);
            std::fprintf(stderr, " %.2f Gb/s in all\n", sum.gbytes_per_s * 8);
        }
    }
    for (size_t i = clients.size(); i-- > 1;) {
        clients[i]->Leave(Kind::kLeave);
        clients.pop_back();  // before the first: it holds the adapter
    }
    // The first QP: latency, connections and the summary, as a one-QP run ends; the bandwidth rows are the sums.
    return clients[0]->RunRest({}, std::move(rows));
}

int RunClient(const Options& options) {
    if (options.qps > 1) return RunManyQps(options);
    Client client(options);
    return client.Run();
}

}  // namespace ndkperf

namespace ndkperf {

void Print(const Options& options, const std::vector<Row>& rows, const std::vector<LatencyRow>& latencies,
           const ConnectionsRow& connections, double idle_cpu_percent) {
    if (options.json) {
        std::printf("{\"schema\":\"%s\",\"transport\":\"tcp\",\"window\":%u,\"qps\":%u,\"results\":[", kJsonSchema,
                    options.window, options.qps);
        for (size_t i = 0; i < rows.size(); ++i)
            std::printf(
                "%s{\"test\":\"%s\",\"size\":%zu,\"iterations\":%ld,\"gbytes_per_s\":%.4f,\"gbits_per_s\":%.4f,"
                "\"million_ops_per_s\":%.4f}",
                i ? "," : "", rows[i].test.c_str(), rows[i].size, rows[i].iterations, rows[i].gbytes_per_s,
                rows[i].gbytes_per_s * 8, rows[i].mops);
        std::printf("],\"latency\":[");
        for (size_t i = 0; i < latencies.size(); ++i)
            std::printf(
                "%s{\"test\":\"send_pingpong\",\"size\":%zu,\"iterations\":%ld,\"one_way_p50_ns\":%.0f,"
                "\"one_way_p99_ns\":%.0f}",
                i ? "," : "", latencies[i].size, latencies[i].iterations, latencies[i].one_way_p50_ns,
                latencies[i].one_way_p99_ns);
        std::printf("]");
        if (connections.count > 0)
            std::printf(
                ",\"connections\":{\"count\":%u,\"setup_us_per_connection\":%.1f,"
                "\"client_kib_per_connection\":%.1f,\"server_kib_per_connection\":%.1f}",
                connections.count, connections.setup_us_per_connection, connections.client_kib_per_connection,
                connections.server_kib_per_connection);
        if (idle_cpu_percent >= 0) std::printf(",\"idle_cpu_percent\":%.3f", idle_cpu_percent);
        std::printf(",\"interrupted\":%s}\n", Interrupted() ? "true" : "false");
        return;
    }
    if (options.qps > 1) std::printf("%u QPs at once on one adapter; each row is their sum\n", options.qps);
    std::printf("%-6s %9s %10s %10s %10s %10s\n", "test", "size", "iters", "GB/s", "Gb/s", "Mmsg/s");
    for (const Row& r : rows)
        std::printf("%-6s %9s %10ld %10.3f %10.3f %10.3f\n", r.test.c_str(), SizeName(r.size).c_str(), r.iterations,
                    r.gbytes_per_s, r.gbytes_per_s * 8, r.mops);
    for (const LatencyRow& l : latencies)
        std::printf("send ping-pong %s: one-way p50 %.1f us, p99 %.1f us (%ld round trips)\n", SizeName(l.size).c_str(),
                    l.one_way_p50_ns / 1e3, l.one_way_p99_ns / 1e3, l.iterations);
    if (connections.count > 0)
        std::printf(
            "%u connections: %.0f us each to set up; %.1f KiB per connection on the client, %.1f KiB on the "
            "server\n",
            connections.count, connections.setup_us_per_connection, connections.client_kib_per_connection,
            connections.server_kib_per_connection);
    if (idle_cpu_percent >= 0)
        std::printf("idle, one connection open: %.3f %% of a core for this process\n", idle_cpu_percent);
    if (Interrupted()) std::printf("(interrupted: partial results)\n");
}

}  // namespace ndkperf
