// ndkperf's options and result rows, shared by the in-process mode (ndkperf.cpp) and the mode between two
// processes or hosts (ndkperf_remote.cpp).
#pragma once

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
    ULONG window = 16;         // remote: requests in flight
    unsigned connections = 0;  // remote: also open this many more connections and measure them
    size_t largest = 4 << 20;  // the largest size asked for (the server: the largest it accepts)
    double idle_seconds = 0;   // remote client: first sit idle this long and report the process's CPU use
};

struct Row {
    std::string test;
    size_t size = 0;
    long iterations = 0;
    double gbps = 0;  // GB/s (bytes)
    double memcpy_gbps = 0;
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
