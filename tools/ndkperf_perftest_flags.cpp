// perftest's flags (issue 8 §2): parsed strictly (issue 20 §1), with -a (every size) and -b (both directions).
#include "ndkperf_perftest_flags.hpp"

#include <net/if.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "ndk_args.hpp"

namespace ndkperf {
namespace {
constexpr const char* kUsage =
    "usage: ndkperf ib_write_bw|ib_read_bw|ib_send_bw -R [flags] [SERVER]   (perftest's rdma_cm protocol)\n"
    "  without SERVER this side is the server; with it, the client (an address or a host name, IPv4)\n"
    "  -R, --rdma_cm          required: perftest's rdma_cm mode (its TCP side channel is not spoken)\n"
    "  -d, --ib-dev DEVICE    softndk0 (every address of this host, the default), a network interface name\n"
    "                         (the adapter owns its addresses), or NAME_IFACE as in siw_eth0 or rxe_eth0\n"
    "  -i, --ib-port 1        the only port\n"
    "  -s, --size SIZE        bytes, k/K/KiB, m/M/MiB, g/G/GiB units, 1 ... 1 GiB (default 65536)\n"
    "  -a, --all              every size from 2 B to 8 MiB, powers of two, a row each (give it to both sides)\n"
    "  -b, --bidirectional    both sides send at once; each prints the sum of both directions (both sides)\n"
    "  -n, --iters N          iterations, 5 ... 100000000 (default 5000 for write, 1000 for read and send)\n"
    "  -D, --duration S       run S seconds instead of -n, 1 ... 86400\n"
    "  -p, --port PORT        1 ... 65535 (default 18515)\n"
    "  -t, --tx-depth N       requests in flight, 1 ... 15000 (default 128)\n"
    "  -r, --rx-depth N       ib_send_bw: receives posted, 3 ... 16384 (default 512)\n"
    "  -o, --outs N           ib_read_bw: Reads in flight, 1 ... 65536 (default: the adapter's limit)\n"
    "  -q, --qp 1             one QP (several are not supported yet)\n"
    "  --report_gbits         report Gb/s instead of MB/s\n"
    "  -F, --CPU-freq         accepted; nothing to warn about\n"
    "  --inject bad-stag|beyond-region   softndk's own: advertise or use a wrong STag or address\n"
    "  -h, --help             this text\n"
    "  not supported yet, refused: -q above 1 (several QPs)\n";

[[noreturn]] void Usage(const char* problem, const std::string& what = "") {
    std::fprintf(stderr, "ndkperf: %s%s; see ndkperf ib_write_bw --help\n", problem, what.c_str());
    std::exit(2);
}

// perftest's size syntax: a number with an optional K, M or G (also KiB, MiB, GiB).
uint64_t ParseSize(const std::string& flag, const std::string& text) {
    return ndktools::ParseSize("ndkperf", flag, text, 1, 1ull << 30);
}

unsigned ParseCount(const std::string& flag, const std::string& text, unsigned low, unsigned high) {
    return static_cast<unsigned>(ndktools::ParseCount("ndkperf", flag, text, low, high));
}

// -d DEVICE (issue 20 §1: every perftest script passes one): softndk0 or softndk is the adapter over every
// address of the host; an interface name binds the adapter to it; NAME_IFACE (siw_eth0, rxe_eth0) names the
// interface IFACE, so a script written for siw or rxe runs unchanged.
std::string DeviceInterface(const std::string& device) {
    if (device == "softndk" || device == "softndk0") return "";
    if (if_nametoindex(device.c_str()) != 0) return device;
    const size_t underscore = device.find('_');
    if (underscore != std::string::npos && if_nametoindex(device.substr(underscore + 1).c_str()) != 0)
        return device.substr(underscore + 1);
    std::fprintf(stderr,
                 "ndkperf: -d: no device \"%s\": softndk's are softndk0 (every address of this host), a network "
                 "interface (ip link), or NAME_IFACE such as siw_eth0; see ndkperf ib_write_bw --help\n",
                 device.c_str());
    std::exit(2);
}

PerftestFlags::Inject Injection(const std::string& what) {
    if (what == "bad-stag") return PerftestFlags::Inject::kBadStag;
    if (what == "beyond-region") return PerftestFlags::Inject::kBeyondRegion;
    Usage("--inject takes bad-stag or beyond-region, not ", what);
}

PerftestFlags Parse(int argc, char** argv) {
    PerftestFlags flags;
    flags.tool = argv[0];
    bool size_given = false;
    if (flags.tool == "ib_write_bw")
        flags.verb = Verb::kWrite;
    else if (flags.tool == "ib_read_bw")
        flags.verb = Verb::kRead;
    else if (flags.tool == "ib_send_bw")
        flags.verb = Verb::kSend;
    else
        Usage("no such perftest tool: ", flags.tool);
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i], value;
        if (const size_t equals = arg.find('='); arg.rfind("--", 0) == 0 && equals != std::string::npos) {
            value = arg.substr(equals + 1);  // --size=4096
            arg.resize(equals);
        }
        auto next = [&]() -> std::string {
            if (!value.empty()) return value;
            if (i + 1 >= argc) Usage("a value is missing after ", arg);
            return argv[++i];
        };
        if (arg == "-h" || arg == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (arg == "-R" || arg == "--rdma_cm")
            flags.rdma_cm = true;
        else if (arg == "-d" || arg == "--ib-dev")
            flags.interface = DeviceInterface(next());
        else if (arg == "-i" || arg == "--ib-port")
            ParseCount(arg, next(), 1, 1);
        else if (arg == "-q" || arg == "--qp") {
            const std::string value = next();
            if (value != "1") {  // a number in range, or not a number: the same answer
                std::fprintf(stderr,
                             "ndkperf: %s %s: several QPs are not supported in the perftest mode yet (one QP: -q 1); "
                             "the native client runs several: ndkperf --client -q N; see ndkperf ib_write_bw --help\n",
                             arg.c_str(), value.c_str());
                std::exit(2);
            }
        } else if (arg == "-a" || arg == "--all")
            flags.all_sizes = true;
        else if (arg == "-b" || arg == "--bidirectional")
            flags.duplex = true;
        else if (arg == "-F" || arg == "--CPU-freq")
            continue;  // perftest's cpufreq warning: none here
        else if (arg == "-s" || arg == "--size") {
            flags.size = ParseSize(arg, next());
            size_given = true;
        } else if (arg == "-n" || arg == "--iters")
            flags.iters = ParseCount(arg, next(), 5, 100000000);
        else if (arg == "-p" || arg == "--port")
            flags.port = ParseCount(arg, next(), 1, 65535);
        else if (arg == "-D" || arg == "--duration")
            flags.duration = ParseCount(arg, next(), 1, 86400);
        else if (arg == "-t" || arg == "--tx-depth")
            flags.tx_depth = ParseCount(arg, next(), 1, 15000);
        else if (arg == "--report_gbits")
            flags.gbits = true;
        else if (arg == "--inject")
            flags.inject = Injection(next());
        else if ((arg == "-r" || arg == "--rx-depth") && flags.verb == Verb::kSend)
            flags.rx_depth = ParseCount(arg, next(), 3, 16384);
        else if ((arg == "-o" || arg == "--outs") && flags.verb == Verb::kRead)
            flags.out_reads = ParseCount(arg, next(), 1, 65536);
        else if (arg[0] != '-' && flags.server.empty())
            flags.server = arg;
        else
            Usage("unsupported flag ", arg);
    }
    if (!flags.rdma_cm) Usage("only perftest's rdma_cm mode is spoken: add -R");
    if (flags.inject != PerftestFlags::Inject::kNone && flags.verb == Verb::kSend)
        Usage(
            "--inject is for ib_write_bw and ib_read_bw; for a Send larger than the receive give the client the "
            "larger -s");
    if (flags.size == 0 || flags.size > (1u << 30)) Usage("-s must be 1 … 1 GiB");
    if (flags.all_sizes && size_given) Usage("-a runs every size from 2 B to 8 MiB: give -a or -s, not both");
    if (flags.all_sizes && flags.duration > 0 && flags.verb == Verb::kSend)
        Usage(
            "ib_send_bw -a counts its Sends per size (-n): a -D run leaves receives of one size posted for the "
            "next; give -n, or -D with one -s");
    if (flags.all_sizes) flags.size = uint64_t{1} << kAllSizesLastPower;  // the buffers hold the largest
    if (flags.inject != PerftestFlags::Inject::kNone && (flags.all_sizes || flags.duplex))
        Usage("--inject runs one size in one direction: leave out -a and -b");
    if (flags.duration > 0 && flags.iters != 0) Usage("-D and -n exclude each other");
    if (flags.iters == 0) flags.iters = flags.verb == Verb::kWrite ? 5000 : 1000;
    if (flags.duration == 0) {
        flags.tx_depth = static_cast<unsigned>(std::min<uint64_t>(flags.tx_depth, flags.iters));
        flags.rx_depth = static_cast<unsigned>(std::min<uint64_t>(flags.rx_depth, flags.iters));
        flags.rx_depth += flags.rx_depth % 2;  // perftest rounds an odd depth up
    }
    return flags;
}

}  // namespace

PerftestFlags ParsePerftestFlags(int argc, char** argv) {
    return Parse(argc, argv);
}

}  // namespace ndkperf
