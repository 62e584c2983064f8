// ndkperf's options and result rows, shared by the in-process mode (ndkperf.cpp) and the mode between two
// processes or hosts (ndkperf_remote.cpp).
#pragma once

#include <atomic>
#include <csignal>
#include <string>
#include <vector>

#include "ndk_pair.hpp"

namespace ndkperf {

struct Options {
    enum class Role { kInProcess, kServer, kClient };
    Role role = Role::kInProcess;
    std::vector<std::string> tests{"write", "read", "send"};
    std::vector<size_t> sizes{64, 4096, 65536, 1 << 20, 4 << 20};
    std::vector<size_t> latency_sizes{64};  // remote: Send ping-pong sizes (≤ 64 KiB)
    double seconds = 0.2;
    ULONG mode = SOFTNDK_COMPLETION_INLINE;
    bool json = false;
    std::string address;  // remote: the server's (client) or the one to listen on (server, default any)
    unsigned port = 0;
    ULONG window = 16;              // remote: requests in flight
    unsigned connections = 0;       // remote: also open this many more connections and measure them
    size_t largest = 4 << 20;       // the largest size asked for (the server: the largest it accepts)
    double idle_seconds = 0;        // remote client: first sit idle this long and report the process's CPU use
    unsigned qps = 1;               // remote client: QPs on one adapter, each its own connection, run at once (-q)
    unsigned progress_threads = 0;  // the adapter's ProgressThreads (0: its default or SOFTNDK_PROGRESS_THREADS)
};

// Ctrl-C (issue 20 §1, as perftest and ping): the first SIGINT or SIGTERM ends the measurement under way; the
// rows measured so far are printed, marked partial, and the process exits 128 + the signal (130 for SIGINT). A
// second signal ends the process at once (the handler resets itself).
inline std::atomic<int> g_interrupt_signal{0};
inline bool Interrupted() {
    return g_interrupt_signal.load(std::memory_order_relaxed) != 0;
}
inline void InstallInterruptHandler() {
    struct sigaction action {};
    action.sa_handler = [](int signal_number) { g_interrupt_signal.store(signal_number); };
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}
// The exit status of a run that was interrupted, after its partial summary; 0 otherwise.
inline int InterruptedExitStatus() {
    return Interrupted() ? 128 + g_interrupt_signal.load() : 0;
}

// The --json schema of every ndkperf mode (docs/tools.md, "ndkperf --json"); keys carry their units.
inline constexpr const char* kJsonSchema = "softndk-ndkperf/2";

struct Row {
    std::string test;
    size_t size = 0;
    long iterations = 0;
    double gbytes_per_s = 0;  // 10^9 bytes per second
    double memcpy_gbytes_per_s = 0;
    double p50_ns = 0;
    double p99_ns = 0;
    double mops = 0;
};

struct LatencyRow {
    size_t size = 0;
    long iterations = 0;
    double one_way_p50_ns = 0;
    double one_way_p99_ns = 0;
};

struct ConnectionsRow {
    unsigned count = 0;
    double setup_us_per_connection = 0;
    double client_kib_per_connection = 0;
    double server_kib_per_connection = 0;
};

std::string SizeName(size_t size);
void Print(const Options& options, const std::vector<Row>& rows, const std::vector<LatencyRow>& latencies,
           const ConnectionsRow& connections, double idle_cpu_percent);
int RunServer(const Options& options);
int RunClient(const Options& options);

}  // namespace ndkperf
