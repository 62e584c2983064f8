// libFuzzer target (issue 18 §5): a whole connection from the peer's side, the MPA handshake included. An input
// is [2 bytes, big-endian: N][N bytes: what the peer sends first][the rest]. Per input a raw TCP peer connects
// to softndk's listener and sends the first part (an MPA Request, or anything). If a connect event comes, the
// consumer accepts with two receives posted, the peer reads the Reply and sends the rest (its FPDU stream), then
// closes. Invariants:
//  - no crash, no sanitizer report, no hang: the listener either offers the connection or closes the socket
//    (MpaRequestTimeoutMs is 50 ms here), and every request completes (2 s, else abort);
//  - bytes outside the registered span never change; the disconnect event comes at most once.
// Placeholders as in fuzz_world.h.
#include <poll.h>

#include <algorithm>

#include "fuzz_world.h"

using namespace fuzzworld;
using ndktools::Waiter;

namespace {

constexpr int kOfferWaitMs = 2000;  // the Request timeout is 50 ms: an offer or a close comes well before

// Reads what is there without blocking; false once softndk closed or reset the stream.
bool StillOpen(int fd) {
    uint8_t sink[4096];
    for (;;) {
        const ssize_t got = ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (got > 0) continue;
        return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
}

// A connect event left from an earlier input (offered as that input's socket closed) is refused and closed.
void CloseStale(World& world) {
    if (NDK_CONNECTOR* stale = world.incoming.exchange(nullptr)) {
        stale->Dispatch->NdkReject(stale, nullptr, 0);
        Close(&stale->Header);
    }
}

void ServeOffer(World& world, NDK_CONNECTOR* connector, int fd, const std::vector<uint8_t>& rest) {
    Waiter qp_created;
    NDK_QP* qp = nullptr;
    Require(qp_created.Wait(world.pd->Dispatch->NdkCreateQp(world.pd, world.cq, world.cq, nullptr, 16, 16, 4, 4, 64,
                                                            &Waiter::OnCreate, &qp_created, &qp),
                            kRequestTimeoutMs) == STATUS_SUCCESS,
            "qp");
    qp = Created(qp_created, qp);
    for (int r = 0; r < 2; ++r) {
        NDK_SGE sge{};
        sge.VirtualAddress = world.memory + PAGE_SIZE + r * PAGE_SIZE;
        sge.Length = 256;
        sge.MemoryRegionToken = world.mr->Dispatch->NdkGetLocalTokenFromMr(world.mr);
        qp->Dispatch->NdkReceive(qp, nullptr, &sge, 1);
    }
    Waiter accepted;
    // The peer may have gone already: the accept may fail, but it completes.
    accepted.Wait(connector->Dispatch->NdkAccept(connector, qp, 2, 2, nullptr, 0, &World::OnDisconnect, &world,
                                                 &Waiter::OnRequest, &accepted),
                  kRequestTimeoutMs);
    // The Reply: its header, then its private data (the stream may end instead).
    uint8_t reply[softndk::wire::kMpaHeaderSize + softndk::wire::kMpaMaxPrivateData];
    size_t have = 0, want = softndk::wire::kMpaHeaderSize;
    while (have < want) {
        const ssize_t got = ::recv(fd, reply + have, want - have, 0);
        if (got <= 0) break;
        have += static_cast<size_t>(got);
        if (have == softndk::wire::kMpaHeaderSize)
            want += std::min<size_t>((reply[18] << 8) | reply[19], softndk::wire::kMpaMaxPrivateData);
    }
    if (!rest.empty()) ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    timeval drain{0, 50000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &drain, sizeof(drain));
    uint8_t sink[4096];
    while (::recv(fd, sink, sizeof(sink), 0) > 0) {
    }
    Close(&connector->Header);
    Close(&qp->Header);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    World& world = Setup();
    CloseStale(world);
    world.disconnects = 0;
    if (size < 2) return 0;
    const size_t first_size = std::min<size_t>((static_cast<size_t>(data[0]) << 8) | data[1], size - 2);
    std::vector<uint8_t> first(data + 2, data + 2 + first_size);
    std::vector<uint8_t> rest(data + 2 + first_size, data + size);
    Substitute(first, world);
    Substitute(rest, world);

    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    Require(fd >= 0, "socket");
    timeval timeout{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    SOCKADDR_IN address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(world.port);
    Require(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0, "connect");
    if (!first.empty()) ::send(fd, first.data(), first.size(), MSG_NOSIGNAL);
    // The listener offers the connection or closes the socket (bad Request, or the Request timeout).
    NDK_CONNECTOR* connector = nullptr;
    bool open = true;
    for (int waited = 0; waited < kOfferWaitMs && connector == nullptr && open; ++waited) {
        pollfd probe{fd, POLLIN, 0};
        ::poll(&probe, 1, 1);
        connector = world.incoming.exchange(nullptr);
        if (connector == nullptr) open = StillOpen(fd);
    }
    Require(connector != nullptr || !open, "the listener neither offered the connection nor closed it in 2 s");
    if (connector != nullptr) ServeOffer(world, connector, fd, rest);
    ::close(fd);
    NDK_RESULT results[32];
    while (world.cq->Dispatch->NdkGetCqResults(world.cq, results, 32) > 0) {
    }
    Require(world.disconnects.load() <= 1, "more than one disconnect event");
    RequireCanaries(world);
    return 0;
}
