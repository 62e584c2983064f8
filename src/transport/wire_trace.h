// Wire tracing (issue 7 §6): SOFTNDK_TRACE=FILE.pcap writes the adapter's iWARP/TCP traffic as a pcap capture
// that tshark's iwarp_mpa / iwarp_ddp_rdmap dissectors decode.
//  - User mode sees the byte stream, not the segments, so each send and each receive becomes one synthesized
//    IPv4/IPv6 + TCP packet (LINKTYPE_RAW). Addresses and ports are the sockets' own. Sequence numbers count the
//    stream's bytes from a random ISN per direction: tshark's relative numbers are the real ones; the kernel's
//    ISN is not readable without TCP_REPAIR (docs/spec-decisions.md, "iWARP over TCP").
//  - The handshake (SYN, SYN-ACK, ACK) is written when a connection is set up, so that the dissectors see the
//    conversation from its start; FIN and RST are written where the socket sends or sees them.
//  - Adapters of one process that name the same file share one writer. When both ends of a connection are
//    traced by one writer, each end writes only what it sends: every byte appears once.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <softndk/ndkpi.h>

namespace softndk::transport {

class WireTrace : public std::enable_shared_from_this<WireTrace> {
public:
    // One end of one TCP connection, as traced. Thread-safe (the writer's lock).
    class End {
    public:
        ~End();
        End(const End&) = delete;
        End& operator=(const End&) = delete;
        // The connection is set up (active: connected; passive: accepted): the handshake, once per connection.
        void Established();
        // `bytes` bytes of `iov` went out (outbound) or came in.
        void Data(bool outbound, const iovec* iov, size_t count, size_t bytes);
        void Data(bool outbound, const uint8_t* data, size_t size);
        void Fin(bool outbound);
        void Reset(bool outbound);
        // What a recv/readv into `iov` returned: bytes in, the peer's FIN (0) or its reset (ECONNRESET). Leaves
        // errno as it found it, so the caller's checks after the call still read the socket's error.
        void Received(ssize_t got, const iovec* iov, size_t count);

    private:
        friend class WireTrace;
        struct Flow;
        End(std::shared_ptr<WireTrace> writer, std::shared_ptr<Flow> flow, bool active);
        bool Records(bool outbound) const;
        std::shared_ptr<WireTrace> writer_;
        std::shared_ptr<Flow> flow_;
        const bool active_;  // this end opened the connection (its SYN)
    };

    // The writer of `path`, shared by every adapter of this process that names it; the file is created
    // (truncated) by the first. STATUS_OBJECT_PATH_NOT_FOUND / STATUS_ACCESS_DENIED /
    // STATUS_INSUFFICIENT_RESOURCES when it cannot be.
    static NTSTATUS Open(const std::string& path, std::shared_ptr<WireTrace>* out);
    ~WireTrace();

    // `local` → `remote` as this end sees it. Ports and addresses must be known (after bind / accept).
    std::unique_ptr<End> Attach(const sockaddr_storage& local, const sockaddr_storage& remote, bool active);

private:
    struct Key;
    WireTrace(std::string path, std::FILE* file);
    // One packet from `from` to `to` (End::Flow's view), flags and payload; under mutex_.
    void WriteLocked(End::Flow& flow, bool from_active, uint8_t flags, const iovec* iov, size_t count, size_t bytes);

    const std::string path_;
    std::FILE* const file_;
    std::mutex mutex_;
    std::map<std::string, std::weak_ptr<End::Flow>> flows_;  // by both endpoints, in a canonical order
};

}  // namespace softndk::transport
