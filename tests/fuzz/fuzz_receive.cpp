// libFuzzer target (issue 7 §5): softndk's whole receive state machine, driven by a byte stream against
// registered memory. Per input a raw TCP peer connects to a softndk listener, completes an MPA v2 handshake,
// sends the input as its FPDU stream and closes; softndk's QP has two receives posted. Invariants checked:
//  - no crash, no sanitizer report, no hang (the connection always ends);
//  - bytes outside the registered span never change (canary pages on both sides of the MR);
//  - the disconnect event comes at most once.
// Placeholders let the fuzzer name real memory: DE AD BE EF becomes the MR's remote token, 0B AD C0 DE 0B AD C0 DE
// the MR's base address (both big-endian, as on the wire).
#include "fuzz_world.h"

using namespace fuzzworld;
using ndktools::Waiter;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    World& world = Setup();
    world.incoming = nullptr;
    world.disconnects = 0;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    Require(fd >= 0, "socket");
    timeval timeout{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    SOCKADDR_IN address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(world.port);
    Require(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0, "connect");
    softndk::wire::MpaEnhancedWords words;
    words.ird = 2;
    words.ord = 2;
    const softndk::wire::MpaFrame request = softndk::wire::MakeMpaRequest(false, &words, {});
    std::vector<uint8_t> frame(softndk::wire::MpaFrameSize(request));
    size_t written = 0;
    softndk::wire::SerializeMpaFrame(request, frame, &written);
    Require(::send(fd, frame.data(), written, MSG_NOSIGNAL) == static_cast<ssize_t>(written), "send request");
    for (int i = 0; i < 200000 && world.incoming.load() == nullptr; ++i) usleep(10);
    NDK_CONNECTOR* connector = world.incoming.load();
    Require(connector != nullptr, "no connect event");
    Waiter qp_created;
    NDK_QP* qp = nullptr;
    Require(qp_created.Wait(world.pd->Dispatch->NdkCreateQp(world.pd, world.cq, world.cq, nullptr, 16, 16, 4, 4, 64,
                                                            &Waiter::OnCreate, &qp_created, &qp),
                            kRequestTimeoutMs) == STATUS_SUCCESS,
            "qp");
    qp = Created(qp_created, qp);
    Waiter accepted;
    Require(accepted.Wait(connector->Dispatch->NdkAccept(connector, qp, 2, 2, nullptr, 0, &World::OnDisconnect, &world,
                                                         &Waiter::OnRequest, &accepted),
                          kRequestTimeoutMs) == STATUS_SUCCESS,
            "accept");
    for (int r = 0; r < 2; ++r) {
        NDK_SGE sge{};
        sge.VirtualAddress = world.memory + PAGE_SIZE + r * PAGE_SIZE;
        sge.Length = 256;
        sge.MemoryRegionToken = world.mr->Dispatch->NdkGetLocalTokenFromMr(world.mr);
        qp->Dispatch->NdkReceive(qp, nullptr, &sge, 1);
    }
    std::vector<uint8_t> stream(data, data + size);
    Substitute(stream, world);
    // The Reply first (its length is fixed: no private data), then the fuzzed stream, then the end of it.
    uint8_t reply[softndk::wire::kMpaHeaderSize + softndk::wire::kMpaEnhancedWordsSize];
    size_t have = 0;
    while (have < sizeof(reply)) {
        const ssize_t got = ::recv(fd, reply + have, sizeof(reply) - have, 0);
        if (got <= 0) break;
        have += static_cast<size_t>(got);
    }
    if (!stream.empty()) ::send(fd, stream.data(), stream.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    // softndk closes after a Terminate; after a clean stream it waits for the consumer, so do not wait long.
    timeval drain{0, 50000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &drain, sizeof(drain));
    uint8_t sink[4096];
    while (::recv(fd, sink, sizeof(sink), 0) > 0) {
    }
    ::close(fd);
    Close(&connector->Header);
    Close(&qp->Header);
    NDK_RESULT results[32];
    while (world.cq->Dispatch->NdkGetCqResults(world.cq, results, 32) > 0) {
    }
    Require(world.disconnects.load() <= 1, "more than one disconnect event");
    RequireCanaries(world);
    return 0;
}
