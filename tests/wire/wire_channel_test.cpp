// cm::WireChannel's active side against a raw TCP responder (issue 34 §2): the peer's MPA Reply is read on the
// lane while the thread that called MpaLink::Connect has not yet told the channel its link. The answer must reach
// the side then, without waiting for that thread (it used to wait up to 5 s on the lane, seen once in CI).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "cm/wire_channel.h"
#include "wire/iwarp_wire.h"

namespace softndk::cm {
namespace {

using namespace std::chrono_literals;

// Reads exactly `size` bytes (5 s at most).
bool ReadExactly(int fd, uint8_t* data, size_t size) {
    for (size_t got = 0; got < size;) {
        pollfd ready{fd, POLLIN, 0};
        if (::poll(&ready, 1, 5000) <= 0) return false;
        const ssize_t n = ::recv(fd, data + got, size - got, 0);
        if (n <= 0) return false;
        got += static_cast<size_t>(n);
    }
    return true;
}

// Accepts one connection, reads its MPA Request and answers at once with a P2P Reply (IRD = ORD = 1, Write RTR).
class RawResponder {
public:
    RawResponder() {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
        EXPECT_EQ(::listen(listen_fd_, 1), 0);
        socklen_t length = sizeof(address_);
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address_), &length);
        thread_ = std::thread([this] { answered_.set_value(Answer()); });
    }
    ~RawResponder() {
        thread_.join();
        if (fd_ >= 0) ::close(fd_);
        ::close(listen_fd_);
    }
    const sockaddr_in& address() const { return address_; }
    std::future<bool> answered() { return answered_.get_future(); }

private:
    bool Answer() {
        pollfd ready{listen_fd_, POLLIN, 0};
        if (::poll(&ready, 1, 5000) <= 0) return false;
        fd_ = ::accept(listen_fd_, nullptr, nullptr);
        uint8_t header[20];  // key, flags, revision, private data length (RFC 5044 §7.1)
        if (fd_ < 0 || !ReadExactly(fd_, header, sizeof(header))) return false;
        std::vector<uint8_t> rest((header[18] << 8) | header[19]);
        if (!ReadExactly(fd_, rest.data(), rest.size())) return false;
        wire::MpaEnhancedWords words;
        words.ird = 1;
        words.ord = 1;
        words.peer_to_peer = true;
        words.write_rtr = true;
        const wire::MpaFrame reply = wire::MakeMpaReply(false, &words, {});
        std::vector<uint8_t> bytes(wire::MpaFrameSize(reply));
        size_t written = 0;
        if (wire::SerializeMpaFrame(reply, bytes, &written) != wire::WireStatus::kOk) return false;
        return ::send(fd_, bytes.data(), written, MSG_NOSIGNAL) == static_cast<ssize_t>(written);
    }

    int listen_fd_ = -1;
    int fd_ = -1;
    sockaddr_in address_{};
    std::promise<bool> answered_;
    std::thread thread_;
};

Endpoint EndpointOf(const sockaddr_in& address) {
    Endpoint endpoint;
    EXPECT_EQ(EndpointFromSockaddr(reinterpret_cast<const SOCKADDR*>(&address), sizeof(address), &endpoint),
              STATUS_SUCCESS);
    return endpoint;
}

TEST(WireChannelTest, CM_04_AReplyReadBeforeConnectReturnedCompletesTheConnectWithoutWaitingForIt) {
    engine::ProgressEngine progress(engine::ProgressEngine::Options{1, 0});
    ASSERT_TRUE(progress.ok());
    engine::CompletionExecutor executor(SOFTNDK_COMPLETION_INLINE, 1);
    SideSettings settings;
    settings.executor = &executor;
    settings.max_inbound = 4;
    settings.max_outbound = 4;
    RawResponder responder;
    std::future<bool> answered = responder.answered();

    auto side = ConnectionSide::MakeActive(settings, {1, 1});
    WireConnectPlan plan;
    plan.progress = &progress;
    sockaddr_in local = responder.address();
    local.sin_port = 0;
    plan.local = EndpointOf(local);
    plan.remote = EndpointOf(responder.address());
    // The connecting thread stops after MpaLink::Connect, before it tells the channel its link, until the side
    // has the peer's answer (2 s at most): the lane must deliver it meanwhile.
    bool answered_first = false;
    plan.before_link_stored = [&side, &answered_first] {
        const auto deadline = std::chrono::steady_clock::now() + 2s;
        while (side->state() == SideState::kConnecting && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(1ms);
        answered_first = side->state() == SideState::kConnectReady;
    };
    std::promise<NTSTATUS> connected;
    ASSERT_EQ(side->Connect(nullptr, OpenWireChannel(side, std::move(plan)),
                            [&connected](NTSTATUS status) { connected.set_value(status); }),
              STATUS_PENDING);
    EXPECT_TRUE(answered_first) << "the Reply waited for the connecting thread";
    EXPECT_TRUE(answered.get());
    std::future<NTSTATUS> result = connected.get_future();
    ASSERT_EQ(result.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(result.get(), STATUS_SUCCESS);
    ULONG inbound = 0, outbound = 0, length = 0;
    bool late = false;
    EXPECT_EQ(side->GetConnectionData(&inbound, &outbound, nullptr, &length, &late), STATUS_SUCCESS);
    EXPECT_EQ(inbound, 1u);
    EXPECT_EQ(outbound, 1u);

    std::promise<void> closed;
    side->Close(nullptr, [&closed] { closed.set_value(); });
    EXPECT_EQ(closed.get_future().wait_for(5s), std::future_status::ready);
}

}  // namespace
}  // namespace softndk::cm
