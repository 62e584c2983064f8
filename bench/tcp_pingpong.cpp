// The raw TCP baseline of issue 7 §8: a ping-pong between two processes over loopback, both busy-polling
// non-blocking sockets (TCP_NODELAY), so no wake-up is in the path. Prints the one-way time (round trip / 2) as
// JSON. Usage: tcp_pingpong [--size BYTES] [--seconds S]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void Fail(const char* what) {
    std::perror(what);
    std::exit(1);
}

// Busy-polls until `size` bytes moved.
void SendAll(int fd, const uint8_t* data, size_t size) {
    while (size > 0) {
        const ssize_t sent = ::send(fd, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) Fail("send");
        if (sent > 0) data += sent, size -= static_cast<size_t>(sent);
    }
}

bool ReceiveAll(int fd, uint8_t* data, size_t size) {
    while (size > 0) {
        const ssize_t got = ::recv(fd, data, size, MSG_DONTWAIT);
        if (got == 0) return false;
        if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) Fail("recv");
        if (got > 0) data += got, size -= static_cast<size_t>(got);
    }
    return true;
}

void NoDelay(int fd) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

int main(int argc, char** argv) {
    size_t size = 64;
    double seconds = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        if (arg == "--size") size = std::stoul(argv[i + 1]);
        if (arg == "--seconds") seconds = std::stod(argv[i + 1]);
    }
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (::bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
        Fail("listen");
    std::vector<uint8_t> buffer(size, 0x5A);
    const pid_t child = fork();
    if (child == 0) {  // the echo side
        const int fd = ::accept(listener, nullptr, nullptr);
        NoDelay(fd);
        while (ReceiveAll(fd, buffer.data(), size)) SendAll(fd, buffer.data(), size);
        _exit(0);
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) Fail("connect");
    NoDelay(fd);
    std::vector<double> samples;
    const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (int i = 0; std::chrono::steady_clock::now() < stop || i < 1000; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        SendAll(fd, buffer.data(), size);
        if (!ReceiveAll(fd, buffer.data(), size)) Fail("echo ended");
        if (i >= 100)
            samples.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
    }
    ::close(fd);
    waitpid(child, nullptr, 0);
    std::sort(samples.begin(), samples.end());
    std::printf(
        "{\"test\":\"tcp_busy_poll_pingpong\",\"size\":%zu,\"iterations\":%zu,\"one_way_p50_ns\":%.0f,"
        "\"one_way_p99_ns\":%.0f}\n",
        size, samples.size(), samples[samples.size() / 2] / 2, samples[samples.size() * 99 / 100] / 2);
    return 0;
}
