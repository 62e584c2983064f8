// MpaLink (issue 18 §1): one side's MPA exchange (RFC 5044 §7.1, RFC 6581) on a TCP connection, from the
// socket's connect or accept to RDMA mode, when it hands the socket to its TcpConnection, the DDP/RDMAP stream.
// MpaHandshake holds the rules (which frame, how it is judged); this class sequences them:
//   active:  kConnecting → (TCP up, our Request out) kAwaitMpa → (Reply) kReplied → Establish → stream
//   passive: kAwaitMpa → (a valid Request) kOffered → Accept → stream, or Reject → closed
// Its phases change on the connection's lane only; what the consumer calls posts there (Establish also queues
// the RTR on the caller's thread, before the QP takes posts). The owner (the listener until the Request is in,
// then the CM's channel) holds the link; the link holds its stream.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/mpa_handshake.h"
#include "transport/tcp_connection.h"

namespace softndk::transport {

class MpaLink final : public StreamPrelude, public std::enable_shared_from_this<MpaLink> {
public:
    using Event = TcpConnection::Event;
    using EventHandler = TcpConnection::EventHandler;

    // Active: connects from `local` to `remote` and sends `offer` as the MPA Request once TCP is up (see
    // TcpConnection::Connect for the inline failures). As in Adopt, the handler is made from the new link before
    // any event can fire, so it reaches the link (its peer()) without waiting for this call to return.
    static NTSTATUS Connect(engine::ProgressEngine* progress, sockaddr_storage* local, const sockaddr_storage& remote,
                            MpaOffer offer, const TcpOptions& options,
                            const std::function<EventHandler(std::weak_ptr<MpaLink>)>& make,
                            std::shared_ptr<MpaLink>* out);
    // Passive: an accepted socket; its MPA Request is read next. The handler is made (from the new link) before
    // any event can fire; SetHandler replaces it later.
    static std::shared_ptr<MpaLink> Adopt(engine::ProgressEngine* progress, int fd, const TcpOptions& options,
                                          const std::function<EventHandler(std::weak_ptr<MpaLink>)>& make);

    void SetHandler(EventHandler handler);
    // After kMpaReceived (read on the lane, or by the CM once that event has been seen).
    const MpaPeer& peer() const { return handshake_.peer(); }
    // The stream the socket becomes: the QP's transport. Its events come through this link's handler.
    const std::shared_ptr<TcpConnection>& stream() const { return stream_; }

    // Passive: send the Reply and enter RDMA mode with `qp` (kEstablished follows); or refuse with a Reject
    // carrying `private_data`, then close.
    void Accept(MpaOffer reply, engine::QueuePair* qp, uint32_t ird, uint32_t ord);
    void Reject(std::vector<uint8_t> private_data);
    // Passive: resets the connection (kFailed, STATUS_IO_TIMEOUT) if its MPA Request is still not complete.
    void ExpireIfAwaitingRequest();
    // Active, after kMpaReceived with an accepting Reply: enter RDMA mode with `qp`. The RTR (or, to a peer
    // without P2P, a zero-length Write, siw-on-the-wire §3.4) is queued now, before the consumer can post; the
    // stream's SendQueued sends it.
    void Establish(engine::QueuePair* qp, uint32_t ird, uint32_t ord);
    // Stops at once (TcpConnection::Close); no event follows.
    void Close(std::function<void()> on_done, bool abortive = false) { stream_->Close(std::move(on_done), abortive); }

    // ---- StreamPrelude ----
    void OnPreludeReady(uint32_t events) override;

private:
    enum class Phase : uint8_t {
        kConnecting,  // active: TCP connect in progress
        kAwaitMpa,    // reading the peer's MPA frame
        kOffered,     // passive: the Request waits for NdkAccept / NdkReject
        kReplied,     // active: the Reply is in, waiting for NdkCompleteConnect
        kRdma,        // the stream owns the socket
    };

    MpaLink(bool active, bool grant_crc) : active_(active), handshake_(active, grant_crc) {}
    EventHandler Forwarder();  // the stream's handler: the refusal mapping below, then ours
    void Emit(Event event, NTSTATUS status = STATUS_SUCCESS);
    void OnConnected();
    void ReadMpa();
    void Fail(NTSTATUS status, uint32_t provider_error) { stream_->End(status, provider_error, true); }
    void PostToLane(std::function<void(MpaLink&)> job);

    const bool active_;
    MpaHandshake handshake_;
    std::shared_ptr<TcpConnection> stream_;
    Phase phase_;                            // the lane's
    std::vector<uint8_t> request_;           // active: our Request, sent once TCP connects
    std::atomic<bool> establishing_{false};  // Establish() ran; its lane job may still be queued
    std::mutex handler_mutex_;
    EventHandler handler_;
};

}  // namespace softndk::transport
