// The protocol between `ndkperf --client` and `ndkperf --server` (issue 7 §7), shared by both sides: the
// private data of connect and accept, the control messages, and the buffer layout helpers.
#pragma once

#include "ndk_route.h"
#include "ndkperf_remote.hpp"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace ndkperf::remote {

using Clock = std::chrono::steady_clock;
using ndktools::Check;
using ndktools::CloseObject;
using ndktools::Created;
using ndktools::Waiter;

constexpr uint32_t kMagic = 0x4E444B50;  // "NDKP"
constexpr ULONG kServerReceives = 256;
constexpr ULONG kCreditBatch = 16;         // credits go back every 16 reposted receives, far ahead of the window
constexpr ULONG kMessageArea = 64 * 1024;  // beside the data buffer: sends of control messages and pongs
constexpr ULONG kReadLimit = 16;
const PVOID kSendContext = reinterpret_cast<PVOID>(2);
// Each receive owns a slot for a message's first kSlot bytes (a control message lands there whole), then spills
// into a shared area: a receive placed while the previous one is read never overwrites it.
constexpr size_t kSlot = 64;
constexpr uintptr_t kReceiveBase = 0x1000;
inline PVOID ReceiveContext(size_t slot) {
    return reinterpret_cast<PVOID>(kReceiveBase + slot);
}
inline bool IsReceive(PVOID context) {
    return reinterpret_cast<uintptr_t>(context) >= kReceiveBase;
}
inline size_t SlotOf(PVOID context) {
    return reinterpret_cast<uintptr_t>(context) - kReceiveBase;
}

// The client's connect private data: which kind of connection this is.
enum class Role : uint32_t { kTests = 1, kExtra = 2 };
struct Join {
    uint32_t magic;
    Role role;
};

// The server's accept private data.
struct Hello {
    uint32_t magic;
    uint32_t token;
    uint64_t address;
    uint64_t bytes;
    uint32_t receives;
    uint32_t reserved;
};

// kLeave: this connection ends and the server goes on (the other QPs of `--client -q N`); kQuit ends the server.
enum class Kind : uint32_t { kStart = 1, kDone = 2, kCredit = 3, kQuit = 4, kLeave = 5 };
enum class Test : uint32_t { kWrite = 1, kRead = 2, kSend = 3, kPingPong = 4, kConnections = 5 };

struct Control {
    uint32_t magic;
    Kind kind;
    uint32_t credits;  // receives the sender reposted since its last message (server → client)
    Test test;
    uint64_t size;
    uint64_t value;  // kDone from the server: its resident memory in KiB
};

inline SOFTNDK_ADAPTER_CONFIG ConfigFor(const Options& options) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);  // the environment's settings (SOFTNDK_INTERFACE, _TRACE, …) apply
    config.CompletionMode = options.mode;
    if (options.progress_threads > 0) config.ProgressThreads = options.progress_threads;
    return config;
}

inline uint64_t ResidentKiB() {
    long pages = 0, resident = 0;
    if (std::FILE* file = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(file, "%ld %ld", &pages, &resident) != 2) resident = 0;
        std::fclose(file);
    }
    return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 1024;
}

inline void RaiseDescriptorLimit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

inline int ParseAddress(const std::string& text, unsigned port, SOCKADDR_INET* address) {
    char error[256];
    const int length = ndk_resolve(text.c_str(), port, AF_UNSPEC, address, error, sizeof(error));
    if (length == 0) {
        std::fprintf(stderr, "ndkperf: -a: %s; see ndkperf --help\n", error);
        std::exit(2);
    }
    return length;
}

inline SOCKADDR_INET SourceFor(const SOCKADDR_INET& destination) {
    SOCKADDR_INET source{};
    if (!ndk_source_for(&destination, &source)) {
        std::fprintf(stderr, "ndkperf: no route to the server\n");
        std::exit(1);
    }
    return source;
}

inline NDK_SGE Sge(const ndktools::Side& side, size_t offset, size_t length) {
    NDK_SGE sge{};
    sge.VirtualAddress = side.buffer + offset;
    sge.Length = static_cast<ULONG>(length);
    sge.MemoryRegionToken = side.local_token;
    return sge;
}

inline NDK_QP* CreateQp(ndktools::Side& side, PVOID context, ULONG depth) {
    Waiter created;
    NDK_QP* qp = nullptr;
    return Created(created,
                   side.pd->Dispatch->NdkCreateQp(side.pd, side.cq, side.cq, context, depth, depth, 2, 2, 0,
                                                  &Waiter::OnCreate, &created, &qp),
                   &qp, "NdkCreateQp");
}

inline NDK_CONNECTOR* CreateConnector(ndktools::Side& side) {
    Waiter created;
    NDK_CONNECTOR* connector = nullptr;
    return Created(created,
                   side.adapter->Dispatch->NdkCreateConnector(side.adapter, &Waiter::OnCreate, &created, &connector),
                   &connector, "NdkCreateConnector");
}

}  // namespace ndkperf::remote
