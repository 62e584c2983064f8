// iWARP over TCP (issue 7 §3/§4): one TCP connection's FPDU stream (MPA framing RFC 5044, DDP RFC 5041, RDMAP
// RFC 5040). It is the QP's transport once established; before, the MPA exchange (MpaLink) owns its reads.
//  - Everything that reads the socket runs on the connection's progress lane (one thread), so the QP's inbound
//    side is entered by one thread at a time (QP-06).
//  - Sending is done by whoever holds the send lock: the posting thread (no hop for a post), or the lane when
//    the socket was full or a Read Response is due. Payload is gathered from the registered pages with
//    sendmsg; a received payload is read straight into the target pages after the header passed the one
//    access check (with CRC on, one FPDU is verified before it is placed: RFC 5044 §6.1).
//  - Every byte range taken from the peer is bounded: a Read Request beyond IRD, a Send without a receive or an
//    FPDU that does not fit terminates the stream; nothing grows with what the peer sends.
// Wire formats come from wire/iwarp_wire.h only.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <softndk/ndkpi.h>

#include "engine/progress_engine.h"
#include "engine/queue_pair.h"
#include "engine/transport.h"
#include "transport/stream_state.h"
#include "transport/wire_faults.h"
#include "transport/wire_trace.h"
#include "wire/iwarp_wire.h"

namespace softndk::transport {

struct TcpOptions {
    bool request_crc = false;          // ask for CRC32c in our MPA Request / grant it in a Reply (RFC 5044 §7.1)
    bool rtr_kicks = true;             // ScheduleKicks: wake a silent responder (siw-on-the-wire §3.4)
    WireFaults faults;                 // issue 7 §5 wire fault injection
    std::shared_ptr<WireTrace> trace;  // issue 7 §6: null unless SOFTNDK_TRACE / Config.TracePath
    // Runs `job` after `delay` on another thread (the adapter's executor); unset: no delayed work. The job must
    // not outlive what it captures: it holds weak references only.
    std::function<void(std::chrono::milliseconds delay, std::function<void()> job)> after;
    // Issue 18 §2, passive side: an accepted socket whose MPA Request is not complete within this time is reset
    // (0: no limit); a listener holds at most `max_half_open` such sockets and resets its oldest to take one
    // more; an `accept` that fails for want of descriptors or memory pauses the listener for `accept_retry`.
    std::chrono::milliseconds mpa_request_timeout{0};
    uint32_t max_half_open = 0;  // 0: no cap
    std::chrono::milliseconds accept_retry{100};
    // Issue 18 §2: a peer that stops inside an FPDU or a message, or stops reading what we send, holds memory
    // (a tagged target, a receive buffer, Read Response sources). With no byte either way for this long while
    // such work is open, the stream is reset and every reference released (0: never).
    std::chrono::milliseconds peer_stall_timeout{0};
    // CB-19: a chain of deferred requests that no doorbell follows is sent this long after (0: never).
    std::chrono::milliseconds defer_backstop{10};
};

// The socket before RDMA mode belongs to its prelude, the MPA exchange (MpaLink, issue 18 §1): the prelude gets
// the socket's events and reads the frame's bytes itself; the stream only sends what it is given and ends the
// socket. EnterRdma hands the socket to the stream. The prelude's owner holds the prelude, the prelude holds the
// stream, and the stream only refers to its prelude.
class StreamPrelude {
public:
    virtual ~StreamPrelude() = default;
    // On the lane, before EnterRdma: the socket is ready (`events`); while connecting, writable means connected.
    virtual void OnPreludeReady(uint32_t events) = 0;
};

class TcpConnection final : public engine::Transport, public std::enable_shared_from_this<TcpConnection> {
public:
    enum class Event : uint8_t {
        kMpaReceived,  // active: the Reply or Reject arrived; passive: a valid Request arrived (from MpaLink)
        kEstablished,  // passive: the initiator's RTR / first FPDU arrived (P2P), or the Reply is out (no P2P)
        kPeerClosed,   // the peer's FIN at an FPDU boundary: a graceful disconnect
        kFailed,       // refused, timed out, a protocol error, a Terminate either way, a reset or a lost stream
    };
    // Runs on the lane. `status` is set for kFailed (the cause is in the flushed requests' ProviderErrorCode).
    using EventHandler = std::function<void(Event, NTSTATUS status)>;

    // Active side: a non-blocking connect from `local` (port 0: the kernel picks) to `remote`. The bound local
    // address is written back. Fails inline for a socket that cannot be made or bound (STATUS_SHARING_VIOLATION
    // for a port in use). `prelude` gets the socket's events until EnterRdma.
    static NTSTATUS Connect(engine::ProgressEngine* progress, sockaddr_storage* local, const sockaddr_storage& remote,
                            const TcpOptions& options, std::weak_ptr<StreamPrelude> prelude, EventHandler handler,
                            std::shared_ptr<TcpConnection>* out);
    // Passive side: an accepted socket, connected.
    static std::shared_ptr<TcpConnection> Adopt(engine::ProgressEngine* progress, int fd, const TcpOptions& options,
                                                std::weak_ptr<StreamPrelude> prelude, EventHandler handler);
    ~TcpConnection() override;
    void StartReading();  // passive: watch the adopted socket (the prelude holds the connection first)

    void Emit(Event event, NTSTATUS status = STATUS_SUCCESS);
    const sockaddr_storage& local_address() const { return local_; }
    const sockaddr_storage& remote_address() const { return remote_; }
    uint64_t lane() const { return lane_; }
    engine::ProgressEngine* progress() const { return progress_; }

    // ---- for the prelude, on the lane ----
    // The connect's result: 0, or the socket's error (ECONNREFUSED for a hang-up without one).
    int ConnectResult(uint32_t events) const;
    void Connected();  // active: TCP is up; the socket is read from now on
    // Reads up to room.size() bytes of the prelude's frame: the count, 0 at EOF, -1 with errno set.
    ssize_t ReadPrelude(std::span<uint8_t> room);
    // 1: bytes wait in the socket; 0: the peer's FIN; -1 with errno: none (EAGAIN) or an error.
    int PeekPrelude() const;
    void SendRaw(const uint8_t* data, size_t size);  // MPA frames: alone, before any FPDU
    StreamState state() const { return state_.load(std::memory_order_acquire); }
    bool ended() const { return StreamEnded(state()); }

    // How a stream ends (issue 34 §2): one Ending, handed to End on the lane, for every cause.
    struct Ending {
        enum class How : uint8_t {
            kClose,      // close the descriptor (a reset if ResetOnClose ran, or the stream was dropped)
            kReset,      // close with a reset: the peer learns of it at once
            kTerminate,  // send a Terminate with `cause` first (RFC 5040 §5.4), then FIN; drained if need be
        };
        How how = How::kClose;
        NTSTATUS status = STATUS_SUCCESS;   // what kFailed reports, when `report`
        uint32_t provider_error = 0;        // the flushed requests' ProviderErrorCode (CQ-14)
        bool report = false;                // kFailed follows
        wire::TerminateCause cause{};       // kTerminate
        const uint8_t* offender = nullptr;  // kTerminate: the refused FPDU's first bytes, as received
        size_t offender_size = 0;
    };
    // The one end of the stream, on the lane: decides the order of the Terminate, the FIN or reset, the
    // completions and the flushes (tcp_stream_end.cpp). Once ended, a second call does nothing.
    void End(const Ending& ending);
    void End(NTSTATUS status, uint32_t provider_error, bool report) {
        End(Ending{Ending::How::kClose, status, provider_error, report});
    }
    void ResetOnClose();  // the close will be a reset
    // What the MPA exchange agreed, before EnterRdma: CRC32c on every FPDU, and for a responder the RTR it chose.
    void Agree(bool crc, bool expect_read_rtr) {
        crc_ = crc;
        expect_read_rtr_ = expect_read_rtr;
    }
    // The ULPDU bytes an FPDU may carry on this path, measured now (a passive side: when the Request is in).
    void MeasurePath();
    // What a side waits for on entering RDMA mode: an initiator nothing; a responder the initiator's first FPDU
    // (RFC 5044 §7.1.2: what the consumer posts waits for it), which with P2P must be the RTR we chose (RFC 6581
    // §6) and is then reported as kEstablished.
    enum class Await : uint8_t { kNothing, kFirstFpdu, kRtr };
    // RDMA mode with `qp` (null: none, to send a Terminate): FPDUs both ways.
    void EnterRdma(engine::QueuePair* qp, uint32_t ird, uint32_t ord, Await await);
    // A protocol error in the exchange that is answered with a Terminate (RFC 6581 §5): the stream is in FPDU
    // mode now.
    void TerminateNow(wire::TerminateCause cause, NTSTATUS status);
    // Active: the RTR (RFC 6581 §6; a zero-length Read Request if `read_rtr`, else a zero-length Write), queued
    // before the consumer can post, so the first FPDU never races the responder's set-up (siw-on-the-wire §3.4).
    // SendQueued sends it once the QP takes posts (a post sends it too, first).
    void QueueRtr(bool read_rtr);
    void SendQueued();
    // The initiator's kicks (siw-on-the-wire §3.4): while nothing has come from the peer since the connection was
    // established, a zero-length Write (STag 1, TO 0, as the RTR), from 10 ms to 10.24 s after. A responder
    // that sent its Reply before it could read leaves our first FPDUs unread until more bytes arrive (Linux siw
    // does); to any other peer a zero-length Write is a no-op (RFC 5040: it names no memory).
    void ScheduleKicks(int round);
    void KickIfSilent();
    // Graceful close: a FIN once everything queued is out. kPeerClosed reports the peer's FIN.
    void Disconnect();
    // Stops at once: outstanding requests are flushed, the socket is closed (no event follows). The QP is not
    // touched from the lane any more once `on_done` runs (on the lane). Unless the stream ended gracefully or
    // was refused, the close is an abort: a reset, so the peer learns of it at once (CM-26, CM-08). `abortive`
    // resets after a Disconnect too (its timeout, CM-25): data queued before the FIN is given up.
    void Close(std::function<void()> on_done, bool abortive = false);
    // True when the peer reset or closed the stream, even if the lane has not read that yet: a step the
    // consumer takes now (NdkCompleteConnect) must not succeed on a dead connection (CM-07).
    bool StreamLost();
    // After a Terminate the socket had no room for: `done` runs on the lane once the Terminate is handed to the
    // kernel, or the drain is given up (Close); at once when nothing drains. A graceful NdkDisconnect completes
    // then, so that closing the connector next does not throw the Terminate away (RFC 5040 §5.4).
    void WhenDrained(std::function<void()> done);

    // ---- engine::Transport ----
    bool completes_inline() const override { return false; }
    void Submit(std::unique_ptr<engine::TransportRequest> request) override;
    void Doorbell() override;  // CB-18: sends what deferred posts queued, on the caller's thread
    // A local error found by the engine: send a Terminate, then close (RFC 5040 §5.4).
    void Terminate(uint32_t provider_error) override;

private:
    struct OutMessage;
    struct Fpdu;
    struct OutstandingRead;
    struct InboundRead;
    struct Finished {
        std::unique_ptr<engine::TransportRequest> request;
        engine::InboundResult result;
    };

    TcpConnection(engine::ProgressEngine* progress, int fd, bool active, const TcpOptions& options,
                  std::weak_ptr<StreamPrelude> prelude, EventHandler handler);
    void Start(uint32_t events);
    void OnReady(uint32_t events);
    void ToPrelude(uint32_t events);
    size_t PathMaxUlpdu() const;

    // ---- receive (tcp_receive.cpp) ----
    void ReadFpdus();
    void ReadFpdusBatch();
    bool ConsumeSpill();                                 // the FPDUs the spill completes
    void FirstFpduIn();                                  // kAwaitRtr → kRdma: held FPDUs go
    void TakePayload(const uint8_t* data, size_t size);  // spilled payload bytes to where the payload goes
    bool responses_queued_ = false;        // lane only: Read Responses wait for the end of the receive batch
    bool ProcessHead();                    // the first bytes of an FPDU are in: plan its body
    bool FinishFpdu();                     // its body is in
    bool PlanTagged(const uint8_t* head);  // Write / Read Response
    bool PlanSend();
    bool HandleReadRequest();
    bool HandleTerminate();
    void PlacePrefix(const uint8_t* data, size_t size);
    // A protocol or access error found here: End with a Terminate of `cause`. Returns false (stop reading).
    bool Fail(wire::TerminateCause cause, NTSTATUS status, const uint8_t* offender, size_t offender_size);
    // A lost stream found by a read: End with a reset, cause LLP 0x01.
    void Lost(NTSTATUS status);
    // A refused FPDU header: Fail at once, or with CRC on, once the FPDU's CRC has been checked.
    bool RefuseHead(wire::TerminateCause cause, NTSTATUS status, const uint8_t* offender, size_t offender_size,
                    bool receive_too_long = false);
    void EndReceiveTooLong();  // the open receive completes with STATUS_BUFFER_OVERFLOW (RFC 5041 §7.3)

    // ---- send (tcp_send.cpp) ----
    // `arm_backstop` (a deferred post): set when this post must arm the CB-19 backstop (ArmDeferBackstop).
    void Enqueue(std::unique_ptr<OutMessage> message, std::vector<Finished>* finished, bool pump = true,
                 bool* arm_backstop = nullptr);
    // CB-19 backstop: a consumer that never rings the doorbell after deferred posts still has them sent, after
    // options_.defer_backstop (one timer per connection at a time; without a timer service, a lane job at once).
    void ArmDeferBackstop();
    // Sends what the socket takes. False when the socket failed (DropLocked ran).
    bool PumpLocked(std::vector<Finished>* finished);
    size_t GatherLocked(iovec* iov, size_t room) const;
    bool AdvanceLocked(size_t sent, std::vector<Finished>* finished);  // false: a wire fault dropped the stream
    void RearmLocked();  // epoll interest follows want_write_ and peer_fin_
    bool PrepareNextLocked();
    void RunFinished(std::vector<Finished>* finished);
    void QueueTerminateLocked(wire::TerminateCause cause, const uint8_t* offender, size_t offender_size);
    // A fault or a send error: a live stream goes to kEnding and the lane ends it with a reset (EndDropped).
    void DropLocked(NTSTATUS status);
    void EndDropped();
    // The only writer of state_ (under send_mutex_): false, and no change, for a move the table refuses.
    bool MoveToLocked(StreamState to);
    void ResetOnCloseLocked();
    uint32_t WantedEventsLocked() const;

    // ---- the end of the stream (tcp_stream_end.cpp) ----
    // Flushes what the end does not keep: everything, or all but the Terminate and the FPDU on its way before it.
    void FlushLocked(bool keep_terminate, uint32_t provider_error, std::vector<Finished>* finished);
    void FlushReadsAndQp(uint32_t provider_error, std::vector<Finished>* finished);
    // kDraining: send the Terminate when the socket has room, then half-close. The FPDU on its way before it is
    // finished first (framing); its request completes, flushed, when the drain ends.
    void ContinueDrain(uint32_t events);
    void EndDrainLocked(std::vector<Finished>* finished);
    const OutMessage* QueuedTerminateLocked() const;  // the Terminate still in out_, if any
    // The owner lets go (Close): a drain is given up and the descriptor closed.
    void Release();
    void CloseSocket();
    void HalfCloseSocket();

    engine::ProgressEngine* const progress_;
    const uint64_t lane_;
    std::unique_ptr<WireTrace::End> trace_;  // issue 7 §6: null unless traced
    int fd_;
    const bool active_;
    TcpOptions options_;
    std::mutex handler_mutex_;
    EventHandler handler_;
    sockaddr_storage local_{};
    sockaddr_storage remote_{};
    // The stream's one state (stream_state.h): written under send_mutex_ (MoveToLocked), read anywhere.
    std::atomic<StreamState> state_{StreamState::kPrelude};
    bool connecting_;  // kPrelude, active: TCP connect in progress (the lane's)
    // Weak: the prelude's owner (the listener, then the CM) holds it, and it holds this connection; a prelude
    // gone before EnterRdma ends the stream at its next event.
    std::weak_ptr<StreamPrelude> prelude_;
    std::atomic<bool> peer_fin_{false};    // live states: the peer's FIN is in (it half-closed); reading stopped
    std::atomic<bool> heard_{false};       // a byte of the FPDU stream came from the peer (no more kicks)
    std::atomic<bool> kicks_over_{false};  // the one kick after the consumer's first FPDU went (no more kicks)
    bool first_fpdu_is_rtr_ = false;       // kAwaitRtr: the first FPDU must be the RTR (P2P), then kEstablished
    std::atomic<uint32_t> end_cause_{0};   // ended states: End's provider error, set before the state moves

    // What the MPA exchange agreed (Agree), read on the data path.
    bool crc_ = false;
    bool expect_read_rtr_ = false;  // passive: the RTR we chose is a zero-length Read

    // Engine side, set on entering RDMA mode (on the lane).
    engine::QueuePair* qp_ = nullptr;
    uint32_t inbound_read_capacity_ = 0;  // IRD rounded up to a power of two (siw-on-the-wire §3.7)
    uint32_t ord_ = 0;
    size_t max_payload_ = 0;      // MULPDU for the path MSS (RFC 5044 §5.1), ULPDU bytes per FPDU
    uint64_t long_messages_ = 0;  // messages longer than one FPDU (send_mutex_): when to measure the MSS again

    // ---- send state, under send_mutex_ ----
    std::mutex send_mutex_;
    std::deque<std::unique_ptr<OutMessage>> out_;  // in wire order; the front one is being sent
    size_t prepared_messages_ = 0;                 // out_[0 .. prepared_messages_) have all FPDUs prepared
    std::deque<Fpdu> fpdus_;                       // prepared, the front one possibly partly sent
    std::vector<uint8_t> raw_out_;                 // MPA frames, before any FPDU
    size_t raw_sent_ = 0;
    bool want_write_ = false;  // EPOLLOUT armed
    // Live states: NdkDisconnect's FIN (CM-24), asked for (it goes once out_ is empty) and then sent.
    enum class Fin : uint8_t { kNone, kAfterQueue, kSent } fin_ = Fin::kNone;
    bool backstop_armed_ = false;                      // CB-19: ArmDeferBackstop's timer or lane job is on its way
    bool reset_on_close_ = false;                      // SO_LINGER 0 is set: the close sends a reset
    NTSTATUS drop_status_ = STATUS_SUCCESS;            // kEnding: why the stream was dropped
    std::vector<std::function<void()>> when_drained_;  // kDraining: WhenDrained's, run when the drain ends
    uint32_t send_msn_ = 0;                            // QN 0, pre-incremented (first MSN 1)
    uint32_t read_msn_ = 0;                            // QN 1
    uint32_t next_sink_stag_ = 0;
    uint64_t kicks_sent_ = 0;  // KickIfSilent's, so tx_fpdus_ tells the consumer's FPDUs from the RTR and kicks
    uint64_t tx_bytes_ = 0;    // for the wire faults and the stall check
    uint64_t tx_fpdus_ = 0;
    engine::ProgressEngine::Watched* watched_ = nullptr;  // the socket's epoll registration
    std::vector<engine::Piece> slices_;                   // scratch for one FPDU's CRC
    std::vector<std::span<const uint8_t>> spans_;

    // Outstanding Read Requests we sent, oldest first (matched by their Responses; ≤ ORD by the QP).
    std::mutex reads_mutex_;
    std::deque<OutstandingRead> reads_;
    // Inbound Read Requests whose Response is not out yet (≤ IRD).
    std::atomic<uint32_t> inbound_reads_{0};

    // ---- receive state (the lane's) ----
    struct Rx;
    std::unique_ptr<Rx> rx_;
    uint64_t rx_bytes_ = 0;  // read from the socket in RDMA mode (the lane's)

    // The stall check (issue 18 §2), the lane's: the counts at the last look, and since when nothing moved.
    void ScheduleStallCheck();
    void WatchLivenessLocked();  // send_mutex_
    void CheckStall();
    uint64_t stall_rx_seen_ = 0;
    uint64_t stall_tx_seen_ = 0;
    bool stall_work_open_ = false;
    std::chrono::steady_clock::time_point stall_clock_{};  // the last look at which nothing was stalled
};

// Issue 18 §2: the most socket reads one connection made in one wake of its lane since the process started or the
// last reset (a diagnostic: tests check the per-wake bound with it, resetting it first).
uint32_t MostReadsInOneWake();
void ResetMostReadsInOneWake();

// "a.b.c.d:port" / "[v6]:port" for logs and tools.
std::string FormatSockaddr(const sockaddr_storage& address);
// The NTSTATUS for a socket errno (ECONNREFUSED → STATUS_CONNECTION_REFUSED, EADDRINUSE → …SHARING_VIOLATION).
NTSTATUS StatusFromErrno(int error);

}  // namespace softndk::transport
