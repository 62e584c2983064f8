// ndkperf: bandwidth, latency and message rate of RDMA write, read and send over a connected softndk pair, plus
// registration and fast-register rates, each beside memcpy of the same sizes measured in the same run.
// Between two processes or hosts (issue 7 §7), like ib_write_bw: `ndkperf --server [-a ADDR] [-p PORT]`, then
// `ndkperf --client -a ADDR -p PORT [...]` (ndkperf_remote.cpp).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "ndkperf_perftest.hpp"
#include "ndk_args.hpp"
#include "ndkperf_remote.hpp"

namespace ndkperf {

std::string SizeName(size_t size) {
    if (size >= (1 << 20) && size % (1 << 20) == 0) return std::to_string(size >> 20) + " MiB";
    if (size >= 1024 && size % 1024 == 0) return std::to_string(size >> 10) + " KiB";
    return std::to_string(size) + " B";
}

}  // namespace ndkperf

namespace {

using Clock = std::chrono::steady_clock;
using ndkperf::Options;
using ndkperf::Row;
using ndkperf::SizeName;

constexpr const char* kUsage =
    "usage: ndkperf [--test ...] [--sizes ...] [--seconds S] [--pend|--random] [--json]      (both sides here)\n"
    "       ndkperf --server [-a ADDRESS] [-p PORT] [--max-size BYTES] [--pend|--random]\n"
    "       ndkperf --client -a ADDRESS -p PORT [--test ...] [--sizes ...] [--window N] [-q QPS] [...]\n"
    "       ndkperf ib_write_bw|ib_read_bw|ib_send_bw -R [perftest's flags] [SERVER]  (perftest's protocol;\n"
    "               `ndkperf ib_write_bw --help` lists those flags)\n"
    "  --test write|read|send|all    what to measure (default all: write, read and send)\n"
    "  --sizes 64,4096,...           message sizes, k/M units, 1 B to 1 GiB (default 64,4096,64k,1M,4M)\n"
    "  --seconds S                   each point's budget, 0.001 to 3600 (default 0.2)\n"
    "  --pend | --random             completion mode: always pending, or chosen at random (default inline)\n"
    "  --json                        one JSON object instead of the table\n"
    "  --server                      serve clients on -a/-p (default: every address, an ephemeral port)\n"
    "  --client                      measure against a server; needs -a and -p\n"
    "  -a ADDRESS                    the server's address (client) or the one to listen on (server); in the\n"
    "                                perftest mode -a means every size, as in perftest\n"
    "  -p PORT                       1 to 65535 (client: required; server: default ephemeral, printed)\n"
    "  --max-size BYTES              server: the largest message it accepts (default 4M)\n"
    "  --window N                    client: requests in flight, 1 to 1024 (default 16)\n"
    "  -q, --qps N                   client: QPs at once, each its own connection, 1 to 32 (default 1)\n"
    "  --latency-sizes 64,...        client: Send ping-pong sizes, up to 64 KiB (default 64)\n"
    "  --connections N               client: also open N more connections and time them, 0 to 4000 (default 0)\n"
    "  --idle S                      client: first sit idle S seconds and report the CPU used, 0 to 3600\n"
    "  --progress-threads N          server and client: the adapter's progress threads, 1 to 16 (default: the\n"
    "                                adapter's, or SOFTNDK_PROGRESS_THREADS)\n"
    "  -h, --help                    this text\n"
    "  Ctrl-C prints what was measured so far, marked partial.\n";

// perftest's flags written in this mode: each is answered with how to say it here.
const char* PerftestHint(const std::string& flag) {
    if (flag == "-s") return "sizes here are --sizes 4096 (or the perftest mode: ndkperf ib_write_bw -R -s 4096 ...)";
    if (flag == "-n") return "here the budget is --seconds S (or the perftest mode: ndkperf ib_write_bw -R -n N ...)";
    if (flag == "-b") return "both directions at once is the perftest mode's -b: ndkperf ib_write_bw -R -b ...";
    if (flag == "-d") return "the device here is the interface of -a; perftest's -d names an RDMA device";
    if (flag == "-D") return "here the budget is --seconds S (or the perftest mode: ndkperf ib_write_bw -R -D S ...)";
    return nullptr;
}

double Seconds(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

NDK_SGE Sge(ndktools::Side& side, size_t offset, size_t length) {
    NDK_SGE sge{};
    sge.VirtualAddress = side.buffer + offset;
    sge.Length = static_cast<ULONG>(length);
    sge.MemoryRegionToken = side.local_token;
    return sge;
}

// One operation of `test` from client to server, completed (polled) before returning.
void RunOne(ndktools::Pair& pair, const std::string& test, size_t size, ULONG flags) {
    ndktools::Side& c = pair.client;
    ndktools::Side& s = pair.server;
    NDK_SGE local = Sge(c, 0, size);
    const UINT64 remote = reinterpret_cast<UINT64>(s.buffer);
    if (test == "write") {
        ndktools::Check(c.qp->Dispatch->NdkWrite(c.qp, nullptr, &local, 1, remote, s.remote_token, flags), "NdkWrite");
    } else if (test == "read") {
        ndktools::Check(c.qp->Dispatch->NdkRead(c.qp, nullptr, &local, 1, remote, s.remote_token, flags), "NdkRead");
    } else {
        NDK_SGE receive = Sge(s, 0, size);
        ndktools::Check(s.qp->Dispatch->NdkReceive(s.qp, nullptr, &receive, 1), "NdkReceive");
        ndktools::Check(c.qp->Dispatch->NdkSend(c.qp, nullptr, &local, 1, flags), "NdkSend");
        ndktools::Pair::Poll(s);
    }
    if ((flags & NDK_OP_FLAG_SILENT_SUCCESS) == 0) {
        NDK_RESULT_EX result = ndktools::Pair::Poll(c);
        if (result.Status != STATUS_SUCCESS) ndktools::Check(result.Status, test.c_str());
    }
}

// Runs `op` (returning how many operations it did) until `seconds` pass or Ctrl-C; at least once. A phase of
// 2 s or more that moves bytes prints its rate each second (issue 20 §1: long runs show progress).
template <class Op>
long RunFor(double seconds, size_t bytes_per_op, Op op) {
    const auto start = Clock::now();
    auto report = start + std::chrono::seconds(1);
    long count = 0;
    do {
        count += op();
        if (seconds >= 2 && bytes_per_op != 0 && Clock::now() >= report) {
            std::fprintf(stderr, " %.2f GB/s", static_cast<double>(bytes_per_op) * count / Seconds(start) / 1e9);
            report += std::chrono::seconds(1);
        }
    } while (Seconds(start) < seconds && !ndkperf::Interrupted());
    return count;
}

// One point, bounded by `seconds` in all (issue 20 §1: a 256 MiB point took 34 s at --seconds 0.2, its 2000
// latency samples unbounded): 60 % bandwidth, 20 % the memcpy baseline, 20 % latency (at most 2000 samples).
// Each phase does at least one operation, so a point lasts at most `seconds` plus three operations.
Row Measure(ndktools::Pair& pair, const std::string& test, size_t size, double seconds) {
    Row row{test, size, 0, 0, 0, 0, 0, 0};
    const int batch = size >= (1 << 20) ? 1 : 16;  // a batch is small against the budget
    // Bandwidth: back-to-back requests, each completed.
    auto start = Clock::now();
    const long iterations = RunFor(seconds * 0.6, size, [&] {
        for (int i = 0; i < batch; ++i) RunOne(pair, test, size, 0);
        return batch;
    });
    const double elapsed = Seconds(start);
    row.iterations = iterations;
    row.gbytes_per_s = static_cast<double>(size) * iterations / elapsed / 1e9;
    row.mops = iterations / elapsed / 1e6;
    // The baseline: memcpy of the same size between the same two buffers.
    start = Clock::now();
    const long copies = RunFor(seconds * 0.2, size, [&] {
        for (int i = 0; i < batch; ++i) {
            std::memcpy(pair.server.buffer, pair.client.buffer, size);
            asm volatile("" ::: "memory");
        }
        return batch;
    });
    row.memcpy_gbytes_per_s = static_cast<double>(size) * copies / Seconds(start) / 1e9;
    // Latency: post to completion, one at a time.
    std::vector<double> samples;
    start = Clock::now();
    do {
        auto t0 = Clock::now();
        RunOne(pair, test, size, 0);
        samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
    } while (samples.size() < 2000 && Seconds(start) < seconds * 0.2 && !ndkperf::Interrupted());
    std::sort(samples.begin(), samples.end());
    row.p50_ns = samples[samples.size() / 2];
    row.p99_ns = samples[samples.size() * 99 / 100];
    return row;
}

Options Parse(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "ndkperf: %s needs a value; see ndkperf --help\n", arg.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (arg == "--test") {
            std::string test = next();
            if (test != "all" && test != "write" && test != "read" && test != "send")
                ndktools::BadValue("ndkperf", arg, test, "write, read, send or all");
            if (test != "all") options.tests = {test};
        } else if (arg == "--sizes") {
            options.sizes = ndktools::ParseSizeList("ndkperf", arg, next(), 1, 1ull << 30);
        } else if (arg == "--latency-sizes") {
            options.latency_sizes = ndktools::ParseSizeList("ndkperf", arg, next(), 1, 65536);
        } else if (arg == "--server") {
            options.role = Options::Role::kServer;
        } else if (arg == "--client") {
            options.role = Options::Role::kClient;
        } else if (arg == "-a") {
            options.address = next();
        } else if (arg == "-p") {
            options.port = static_cast<unsigned>(ndktools::ParseCount("ndkperf", arg, next(), 1, 65535));
        } else if (arg == "--window") {
            options.window = static_cast<ULONG>(ndktools::ParseCount("ndkperf", arg, next(), 1, 1024));
        } else if (arg == "-q" || arg == "--qps") {  // the server serves 32 test connections at once
            options.qps = static_cast<unsigned>(ndktools::ParseCount("ndkperf", arg, next(), 1, 32));
        } else if (arg == "--progress-threads") {
            options.progress_threads = static_cast<unsigned>(ndktools::ParseCount("ndkperf", arg, next(), 1, 16));
        } else if (arg == "--connections") {  // the server holds 4096 connections at most
            options.connections = static_cast<unsigned>(ndktools::ParseCount("ndkperf", arg, next(), 0, 4000));
        } else if (arg == "--idle") {
            options.idle_seconds = ndktools::ParseSeconds("ndkperf", arg, next(), 0, 3600);
        } else if (arg == "--max-size") {
            options.largest = ndktools::ParseSize("ndkperf", arg, next(), 1, 1ull << 30);
        } else if (arg == "--seconds") {
            options.seconds = ndktools::ParseSeconds("ndkperf", arg, next(), 0.001, 3600);
        } else if (arg == "--pend" || arg == "--random") {
            const ULONG mode = arg == "--pend" ? SOFTNDK_COMPLETION_PEND : SOFTNDK_COMPLETION_RANDOM;
            if (options.mode != SOFTNDK_COMPLETION_INLINE && options.mode != mode) {
                std::fprintf(stderr,
                             "ndkperf: --pend and --random exclude each other; give one (see ndkperf --help)\n");
                std::exit(2);
            }
            options.mode = mode;
        } else if (arg == "--json") {
            options.json = true;
        } else if (arg == "-h" || arg == "--help") {
            std::fprintf(stdout, "%s", kUsage);
            std::exit(0);
        } else if (const char* hint = PerftestHint(arg)) {
            std::fprintf(stderr, "ndkperf: %s is perftest's flag: %s; see ndkperf --help\n", arg.c_str(), hint);
            std::exit(2);
        } else {
            std::fprintf(stderr, "ndkperf: unknown flag %s; see ndkperf --help\n", arg.c_str());
            std::exit(2);
        }
    }
    if (options.qps > 1 && options.role != Options::Role::kClient) {
        std::fprintf(stderr, "ndkperf: -q (QPs at once) is for --client; the server serves them all\n");
        std::exit(2);
    }
    if (options.role == Options::Role::kClient) {
        if (options.address.empty() || options.port == 0) {
            std::fprintf(stderr, "ndkperf: --client needs the server's -a ADDRESS and -p PORT; see ndkperf --help\n");
            std::exit(2);
        }
        options.largest = 0;
        for (size_t size : options.sizes) options.largest = std::max(options.largest, size);
        for (size_t size : options.latency_sizes) {
            if (size == 0 || size > 65536) {
                std::fprintf(stderr, "ndkperf: --latency-sizes are 1 … 65536\n");
                std::exit(2);
            }
        }
        if (options.window == 0 || options.window > 1024) {
            std::fprintf(stderr, "ndkperf: --window is 1 … 1024\n");
            std::exit(2);
        }
    }
    for (size_t size : options.sizes) {
        if (size == 0 || size > (1u << 30)) {
            std::fprintf(stderr, "ndkperf: sizes are 1 … 1 GiB\n");
            std::exit(2);
        }
    }
    return options;
}

struct Rate {
    std::string name;
    double ns_per_op;
};

template <class Op>
double TimePerOp(double seconds, Op op) {
    auto start = Clock::now();
    const long count = RunFor(seconds, 0, [&] {
        for (int i = 0; i < 64; ++i) op();
        return 64;
    });
    return Seconds(start) * 1e9 / count;
}

// Registration rates: NdkRegisterMr + NdkDeregisterMr, and NdkFastRegister + NdkInvalidate round trips.
std::vector<Rate> RegistrationRates(ndktools::Pair& pair, double seconds) {
    ndktools::Side& s = pair.server;
    std::vector<Rate> rates;
    ndktools::Waiter created;
    NDK_MR* mr = nullptr;
    mr =
        ndktools::Created(created, s.pd->Dispatch->NdkCreateMr(s.pd, FALSE, &ndktools::Waiter::OnCreate, &created, &mr),
                          &mr, "NdkCreateMr");
    for (size_t pages : {size_t{1}, size_t{256}}) {
        MDL* mdl = IoAllocateMdl(s.buffer, static_cast<ULONG>(pages * PAGE_SIZE), FALSE, FALSE, nullptr);
        IoBuildPartialMdl(s.mdl, mdl, s.buffer, static_cast<ULONG>(pages * PAGE_SIZE));
        const double ns = TimePerOp(seconds, [&] {
            ndktools::Waiter registered;
            ndktools::Check(registered.Wait(mr->Dispatch->NdkRegisterMr(mr, mdl, pages * PAGE_SIZE, 0,
                                                                        &ndktools::Waiter::OnRequest, &registered)),
                            "NdkRegisterMr");
            ndktools::Waiter deregistered;
            ndktools::Check(
                deregistered.Wait(mr->Dispatch->NdkDeregisterMr(mr, &ndktools::Waiter::OnRequest, &deregistered)),
                "NdkDeregisterMr");
        });
        rates.push_back({"register+deregister " + std::to_string(pages) + " page(s)", ns});
        IoFreeMdl(mdl);
    }
    ndktools::Waiter closed;
    closed.Wait(mr->Dispatch->NdkCloseMr(&mr->Header, &ndktools::Waiter::OnRequestClose, &closed));

    constexpr ULONG kPages = 16;
    std::vector<uint8_t> storage(NDK_LAM_SIZE(kPages));
    auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(storage.data());
    ULONG size = static_cast<ULONG>(storage.size());
    ULONG fbo = 0;
    ndktools::Waiter built;
    ndktools::Check(built.Wait(s.adapter->Dispatch->NdkBuildLAM(
                        s.adapter, s.mdl, kPages * PAGE_SIZE, &ndktools::Waiter::OnRequest, &built, lam, &size, &fbo)),
                    "NdkBuildLAM");
    ndktools::Waiter fast_created;
    NDK_MR* fast = nullptr;
    fast = ndktools::Created(fast_created,
                             s.pd->Dispatch->NdkCreateMr(s.pd, TRUE, &ndktools::Waiter::OnCreate, &fast_created, &fast),
                             &fast, "NdkCreateMr");
    ndktools::Waiter initialized;
    ndktools::Check(initialized.Wait(fast->Dispatch->NdkInitializeFastRegisterMr(
                        fast, kPages, TRUE, &ndktools::Waiter::OnRequest, &initialized)),
                    "NdkInitializeFastRegisterMr");
    for (ULONG pages : {ULONG{1}, kPages}) {
        const double ns = TimePerOp(seconds, [&] {
            ndktools::Check(
                s.qp->Dispatch->NdkFastRegister(s.qp, nullptr, fast, pages, lam->AdapterPageArray, 0, pages * PAGE_SIZE,
                                                reinterpret_cast<PVOID>(0x700000000000ull),
                                                NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_SILENT_SUCCESS),
                "NdkFastRegister");
            ndktools::Check(s.qp->Dispatch->NdkInvalidate(s.qp, nullptr, &fast->Header, NDK_OP_FLAG_SILENT_SUCCESS),
                            "NdkInvalidate");
        });
        rates.push_back({"fast-register+invalidate " + std::to_string(pages) + " page(s)", ns});
    }
    ndktools::Waiter fast_closed;
    fast_closed.Wait(fast->Dispatch->NdkCloseMr(&fast->Header, &ndktools::Waiter::OnRequestClose, &fast_closed));
    s.adapter->Dispatch->NdkReleaseLAM(s.adapter, lam);
    return rates;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::strncmp(argv[1], "ib_", 3) == 0) return ndkperf::RunPerftest(argc - 1, argv + 1);
    Options options = Parse(argc, argv);
    if (options.role == Options::Role::kServer) return ndkperf::RunServer(options);
    if (options.role == Options::Role::kClient) return ndkperf::RunClient(options);
    const size_t largest = *std::max_element(options.sizes.begin(), options.sizes.end());
    ndktools::Pair pair(std::max<size_t>(ROUND_TO_PAGES(largest), 1 << 20), options.mode);
    ndkperf::InstallInterruptHandler();
    std::vector<Row> rows;
    const size_t total = options.tests.size() * options.sizes.size();
    // --seconds is each point's budget; the message rate and the registration rates take one budget each.
    std::fprintf(stderr, "ndkperf: %zu point%s and 2 rates of %.3g s each: about %.3g s (Ctrl-C prints what is done)\n",
                 total, total == 1 ? "" : "s", options.seconds, options.seconds * static_cast<double>(total + 2));
    for (const std::string& test : options.tests) {
        for (size_t size : options.sizes) {
            if (ndkperf::Interrupted()) break;
            std::fprintf(stderr, "[%zu/%zu] %s %s ...\n", rows.size() + 1, total, test.c_str(), SizeName(size).c_str());
            rows.push_back(Measure(pair, test, size, options.seconds));
        }
    }
    // Message rate: 64-byte writes, one completion per 64.
    auto start = Clock::now();
    const long posted = RunFor(options.seconds, 64, [&] {
        for (int i = 0; i < 63; ++i) RunOne(pair, "write", 64, NDK_OP_FLAG_SILENT_SUCCESS);
        RunOne(pair, "write", 64, 0);
        return 64;
    });
    const double message_rate = posted / Seconds(start) / 1e6;
    std::vector<Rate> rates;
    if (!ndkperf::Interrupted()) {
        std::fprintf(stderr, "registration rates ...\n");
        rates = RegistrationRates(pair, options.seconds / 4);  // four rates, one budget
    }
    if (ndkperf::Interrupted())
        std::fprintf(stderr, "ndkperf: interrupted; the rows below are what was measured (the last one partly)\n");

    if (options.json) {
        std::printf("{\"schema\":\"%s\",\"transport\":\"in-process\",\"results\":[", ndkperf::kJsonSchema);
        for (size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            std::printf(
                "%s{\"test\":\"%s\",\"size\":%zu,\"iterations\":%ld,\"gbytes_per_s\":%.4f,\"gbits_per_s\":%.4f,"
                "\"million_ops_per_s\":%.4f,\"latency_p50_ns\":%.0f,\"latency_p99_ns\":%.0f,"
                "\"memcpy_gbytes_per_s\":%.4f,\"ratio_to_memcpy\":%.3f}",
                i ? "," : "", r.test.c_str(), r.size, r.iterations, r.gbytes_per_s, r.gbytes_per_s * 8, r.mops,
                r.p50_ns, r.p99_ns, r.memcpy_gbytes_per_s, r.gbytes_per_s / r.memcpy_gbytes_per_s);
        }
        std::printf("],\"write64_million_messages_per_s\":%.3f,\"registration\":[", message_rate);
        for (size_t i = 0; i < rates.size(); ++i)
            std::printf("%s{\"operation\":\"%s\",\"ns_per_op\":%.1f}", i ? "," : "", rates[i].name.c_str(),
                        rates[i].ns_per_op);
        std::printf("],\"interrupted\":%s}\n", ndkperf::Interrupted() ? "true" : "false");
        return ndkperf::InterruptedExitStatus();
    }
    std::printf("%-6s %9s %10s %9s %12s %7s %12s %12s\n", "test", "size", "iters", "GB/s", "memcpy GB/s", "ratio",
                "lat p50 ns", "lat p99 ns");
    for (const Row& r : rows)
        std::printf("%-6s %9s %10ld %9.2f %12.2f %7.2f %12.0f %12.0f\n", r.test.c_str(), SizeName(r.size).c_str(),
                    r.iterations, r.gbytes_per_s, r.memcpy_gbytes_per_s, r.gbytes_per_s / r.memcpy_gbytes_per_s,
                    r.p50_ns, r.p99_ns);
    std::printf("64 B write message rate: %.2f M/s (one completion per 64 writes)\n", message_rate);
    for (const Rate& rate : rates)
        std::printf("%-40s %8.0f ns/op  %8.2f M/s\n", rate.name.c_str(), rate.ns_per_op, 1e3 / rate.ns_per_op);
    if (ndkperf::Interrupted()) std::printf("(interrupted: partial results)\n");
    return ndkperf::InterruptedExitStatus();
}
