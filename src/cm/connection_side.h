// One side of a connection: the one connection state machine, for both transports (docs/architecture.md).
// The consumer's steps (NdkConnect … NdkDisconnect, the connector's close) and the peer's events (its answer,
// its RTR, its disconnect, the connection's loss) move it between the states drawn in docs/architecture.md.
// It owns the connection's consumer-visible timers: the connect and accept timeouts (CM-08) and the disconnect
// timeout (CM-25). The peer is reached through a PeerChannel (cm/peer_channel.h): a direct call in-process, MPA
// frames and a TCP stream on the wire. Nothing here calls the channel with the side's lock held (what a call
// needs is taken under it, and the state checked again after where it matters), so two sides of one process may
// call each other freely; LockHeldByThisThread lets tests check it. Consumer completions go to the adapter's
// provider thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <softndk/ndkpi.h>

#include "cm/fabric.h"
#include "cm/peer_channel.h"
#include "engine/completion_executor.h"
#include "engine/queue_pair.h"

namespace softndk::cm {

using Finish = std::function<void(NTSTATUS)>;

enum class SideState : uint8_t {
    kIdle,           // created, never used
    kConnecting,     // NdkConnect pending
    kConnectReady,   // NdkConnect completed (or was rejected): GetConnectionData / CompleteConnect / Reject
    kIncoming,       // handed to the connect event: GetConnectionData / Accept / Reject (passive side)
    kAccepting,      // NdkAccept pending until the peer's NdkCompleteConnect
    kConnected,      // established; a peer's disconnect or a loss leaves it here until NdkDisconnect
    kDisconnecting,  // NdkDisconnect pending until the peer's disconnect
    kDone,           // refused, rejected, aborted or disconnected: never reused (CM-28)
};

// What a side needs from its adapter.
struct SideSettings {
    engine::CompletionExecutor* executor = nullptr;
    uint32_t accept_timeout_ms = 0;          // CM-08: the connect and accept waits; 0 = none
    uint32_t disconnect_timeout_ms = 60000;  // CM-25
    uint32_t max_inbound = 0;                // the adapter's read limits (CM-03)
    uint32_t max_outbound = 0;
};

// A channel made for an active side (bound to it) and the step that sends its request: NdkConnect installs the
// channel before it sends, so the peer's answer always finds it.
struct ChannelOpening {
    std::unique_ptr<PeerChannel> channel;
    std::function<NTSTATUS()> send;
};

// Jobs that run once the side's lock is released: calls into the channel, and through it into the peer.
using AfterUnlockJobs = std::vector<std::function<void()>>;

class ConnectionSide : public std::enable_shared_from_this<ConnectionSide> {
public:
    // Active: `requested` is NdkConnect's read limits, capped here to the adapter's (CM-03).
    static std::shared_ptr<ConnectionSide> MakeActive(const SideSettings& settings, ReadLimits requested);
    // Passive: a request from a peer that a listener took; the channel answers it.
    static std::shared_ptr<ConnectionSide> MakePassive(const SideSettings& settings, PeerAnswer request,
                                                       std::unique_ptr<PeerChannel> channel);

    // ---- the consumer's steps (after the API layer validated them) ----
    // CM-04/CM-06: one connection per 4-tuple; released when the attempt is abandoned or the side closes.
    bool HoldTuple(const Endpoint& local, const Endpoint& remote);
    // Active: installs the channel, then sends the request; the finish runs with the peer's answer (CM-04).
    NTSTATUS Connect(engine::QueuePair* qp, ChannelOpening opening, const Finish& finish);
    // Active: CM-07. `on_disconnect` posts the consumer's disconnect event (CM-26); it is called at most once.
    NTSTATUS CompleteConnect(std::function<void()> on_disconnect);
    // Passive: CM-08; completes at the peer's NdkCompleteConnect. `limits` are capped to the adapter's already.
    NTSTATUS Accept(engine::QueuePair* qp, ReadLimits limits, std::vector<uint8_t> private_data,
                    std::function<void()> on_disconnect, const Finish& finish);
    // After a failed NdkAccept: true when the QP never reached the peer (the consumer may use it again).
    bool GiveQpBackIfUnused();
    NTSTATUS Reject(std::vector<uint8_t> private_data);  // CM-09, AMB-33
    // CM-11/12. After NdkAccept or NdkCompleteConnect the data is still given, as hardware keeps it (issue 19
    // §3), and *late says so, for the Verifier's CM-12 warning.
    NTSTATUS GetConnectionData(ULONG* inbound, ULONG* outbound, PVOID data, ULONG* length, bool* late);
    NTSTATUS Address(bool peer, Endpoint* out);  // CM-13
    NTSTATUS Disconnect(const Finish& finish);   // CM-24/25
    // LIFE-09: the connector is closing: its pending requests complete with STATUS_CANCELLED.
    void CancelPending();
    // The connector's close (LIFE-09, CM-15, CM-23): an offered connection is refused, an established one aborted.
    // `done` runs (on some thread) once neither the channel nor a post touches `qp` (the connector's) any more.
    void Close(engine::QueuePair* qp, std::function<void()> done);
    // A failed NdkConnect gives the channel, the 4-tuple and the QP up (the connector may try again).
    void AbandonAttempt();

    // ---- the peer's events (from the channel, which holds no lock of its own meanwhile) ----
    // Active: the peer's answer to our request (accept or reject). False when we no longer wait for one.
    bool OnPeerAnswer(PeerAnswer answer);
    void OnEstablished();            // passive: the initiator's NdkCompleteConnect (its RTR)
    void OnPeerDisconnected();       // the peer's graceful disconnect (its FIN)
    void OnFailed(NTSTATUS status);  // the peer aborted, a Terminate either way, a reset or a lost stream

    SideState state();
    bool active() const { return active_; }
    ReadLimits requested() const;
    engine::QueuePair* qp();
    // For tests of the rule above: true while this thread holds the side's lock.
    bool LockHeldByThisThread() const { return mutex_.HeldByThisThread(); }

private:
    // The side's mutex, which knows its holder (one relaxed store per lock) so the rule can be checked.
    class OwnedMutex {
    public:
        void lock() {
            mutex_.lock();
            holder_.store(std::this_thread::get_id(), std::memory_order_relaxed);
        }
        void unlock() {
            holder_.store(std::thread::id(), std::memory_order_relaxed);
            mutex_.unlock();
        }
        bool HeldByThisThread() const { return holder_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }

    private:
        std::mutex mutex_;
        std::atomic<std::thread::id> holder_{};
    };

    ConnectionSide(const SideSettings& settings, bool active) : settings_(settings), active_(active) {}
    std::shared_ptr<PeerChannel> Channel();  // taken under the lock, to be called outside it
    void IndicateDisconnectLocked();
    // NdkDisconnect's end: the channel is closed (abortively after a timeout), then the QP closed to posts and
    // flushed (CM-24 b, CM-25), and the request completes with `status`.
    void FinishDisconnectLocked(NTSTATUS status, AfterUnlockJobs& after);
    void FinishDisconnectIfPending(NTSTATUS status);
    // CM-08: a connect or accept that the peer never answers ends with STATUS_IO_TIMEOUT.
    void ArmStepTimeout(SideState waiting);
    void ArmDisconnectTimeout();
    void Complete(Finish finish, NTSTATUS status);  // on the provider thread
    void ReleaseTuple();
    static void RunJobs(AfterUnlockJobs& jobs);

    const SideSettings settings_;
    const bool active_;
    OwnedMutex mutex_;
    SideState state_ = SideState::kIdle;
    std::shared_ptr<PeerChannel> channel_;
    engine::QueuePair* qp_ = nullptr;
    bool qp_joined_ = false;  // passive: the QP was handed to the channel
    PeerAnswer peer_;         // the peer's request (passive) or answer (active)
    ReadLimits requested_;    // active: NdkConnect's limits
    ReadLimits effective_;    // after CM-03
    Finish connect_finish_, accept_finish_, disconnect_finish_;
    std::function<void()> on_disconnect_;
    bool disconnect_called_ = false;
    bool disconnect_indicated_ = false;
    bool peer_disconnected_ = false;  // the peer's FIN (or its NdkDisconnect in-process)
    bool failed_ = false;             // lost, terminated, aborted
    bool closed_ = false;             // the connector let go
    bool tuple_held_ = false;
    Endpoint tuple_local_, tuple_remote_;
};

}  // namespace softndk::cm
