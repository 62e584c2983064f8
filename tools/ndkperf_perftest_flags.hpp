// perftest's flags for ndkperf ib_write_bw | ib_read_bw | ib_send_bw (issue 8 §2, issue 20 §1).
#pragma once

#include <cstdint>
#include <string>

namespace ndkperf {

enum class Verb { kWrite, kRead, kSend };

// perftest's -a: every power of two from 2 B to 8 MiB (its loop runs 1 << 1 … 1 << 23).
constexpr unsigned kAllSizesFirstPower = 1, kAllSizesLastPower = 23;

struct PerftestFlags {
    Verb verb = Verb::kWrite;
    std::string tool;
    bool rdma_cm = false;
    std::string server;  // the client's server address; none makes this the server
    unsigned port = 18515;
    uint64_t size = 65536;   // with -a the largest size, for which the buffers are made
    bool all_sizes = false;  // -a
    bool duplex = false;     // -b: both sides initiate, each reports the sum
    uint64_t iters = 0;      // 0: perftest's default for the verb
    double duration = 0;
    bool gbits = false;
    unsigned out_reads = 0;  // -o, ib_read_bw only; 0 = the adapter's limit
    unsigned tx_depth = 128;
    unsigned rx_depth = 512;
    std::string interface;  // -d: the network interface the adapter is bound to; "" = every address of the host
    // softndk's own fault injection (issue 8 §4), not a perftest flag: the STag or address this side advertises
    // (server) or uses (client) is made wrong, so the peer's or our requests are refused across the boundary.
    enum class Inject { kNone, kBadStag, kBeyondRegion } inject = Inject::kNone;
};

// argv[0] is the tool's name. A bad flag prints what is wrong and exits 2; -h prints the usage and exits 0.
PerftestFlags ParsePerftestFlags(int argc, char** argv);

}  // namespace ndkperf
