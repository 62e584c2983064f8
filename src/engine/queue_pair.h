// A QP (QP-01 … QP-23): a receive queue (its own or an SRQ), an initiator side that executes each request
// against the one access check and the transport, and the inbound side the transport calls for the peer.
// In-process, an initiator request is executed before the post returns; its completion is queued then.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include <softndk/ndkpi.h>

#include "engine/completion_queue.h"
#include "engine/data_mover.h"
#include "engine/post_gate.h"
#include "engine/receive_queue.h"
#include "engine/transport.h"
#include "mem/access_check.h"
#include "mem/token_table.h"

namespace softndk::engine {

class QueuePair {
public:
    enum class State : uint8_t { kIdle, kConnecting, kConnected, kError, kClosed };

    struct Params {
        const void* pd;
        mem::TokenTable* tokens;
        const NDK_ADAPTER_INFO* info;
        CompletionQueue* receive_cq;
        CompletionQueue* initiator_cq;
        ReceiveQueue* receive_queue;  // the QP's own, or the SRQ's
        bool shared_receive_queue;
        PVOID context;
        uint32_t max_initiator_sge;
        uint32_t inline_size;
        uint32_t initiator_depth;      // handed-over requests outstanding at most (QP-01)
        const void* handle = nullptr;  // the NDK_QP the log names (issue 33 §4.1)
    };

    explicit QueuePair(const Params& params);

    // ---- initiator requests (QP-09 … QP-18). STATUS_SUCCESS: a completion is queued (unless silent) ----
    NTSTATUS Send(PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags, bool invalidate, UINT32 token);
    NTSTATUS Write(PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token, ULONG flags);
    NTSTATUS Read(PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token, ULONG flags);
    // Bind, fast-register and invalidate: `operation(defer)` does the memory work once the QP may post; its
    // failure is returned inline (CB-17), its success is completed with `type`. An operation that finishes
    // later calls `defer()` (which returns its ticket) and returns STATUS_PENDING; FinishDeferred(ticket, …)
    // completes it then.
    template <class Operation>
    NTSTATUS RunLocalRequest(PVOID context, NDK_OPERATION_TYPE type, ULONG flags, Operation operation);
    // Initiator completions leave in posting order: a request whose verdict comes later holds its place (its
    // `defer()` ticket), and completions behind it wait for it. Its end, from any thread; the owner keeps the QP
    // alive until this returns.
    void FinishDeferred(uint64_t ticket, NTSTATUS status, uint32_t provider_error = 0);
    // CB-18: an initiator post failed inline; what earlier posts deferred is sent now (Transport::Doorbell).
    void RingDoorbell();
    // ---- receive queue ----
    NTSTATUS Receive(PVOID context, const NDK_SGE* sgl, ULONG count);
    // QP-21: cancels the queued receives and the handed-over requests not yet started.
    void Flush();

    // ---- inbound side, called by the transport on the initiator's thread ----
    InboundResult OnSend(const PieceList& payload, bool solicited, bool invalidate, uint32_t token);
    InboundResult OnWrite(uint32_t token, uint64_t address, const PieceList& payload);
    InboundResult OnRead(uint32_t token, uint64_t address, const PieceList& sink);
    // ---- inbound side for a wire: placement straight into the target pages (issue 7 §3). Called on the
    // connection's progress lane only (one at a time, QP-06); none of them terminates: the wire does. ----
    // The one access check for a tagged segment or a Read Request's source; `out` gets the granted pieces and
    // the reference. STATUS_SUCCESS with nothing added for a zero length (QP-16).
    InboundResult ResolveTagged(uint32_t token, uint64_t address, uint64_t length, uint32_t right, PieceList* out);
    // An untagged message's first segment: takes the next receive and gathers its buffers into `sink`.
    InboundResult BeginReceive(PieceList* sink, PVOID* receive_context);
    // Completes the taken receive with `bytes` (invalidating `token` when asked, TOK-10/11/14); `failure` other
    // than STATUS_SUCCESS completes it in error with `failure_code`.
    InboundResult EndReceive(PVOID receive_context, uint64_t bytes, bool solicited, bool invalidate, uint32_t token,
                             NTSTATUS failure = STATUS_SUCCESS, uint32_t failure_code = 0);
    // ---- a handed-over request has ended (transports that do not complete inline; any thread) ----
    void OnSubmittedDone(std::unique_ptr<TransportRequest> request, InboundResult result);

    // ---- connection management ----
    void Associate(Transport* transport, uint32_t inbound_read_limit, uint32_t outbound_read_limit);
    void SetState(State state) { state_.store(state, std::memory_order_release); }
    State state() const { return state_.load(std::memory_order_acquire); }
    // Error state: initiator requests complete with STATUS_CANCELLED. A terminate flushes the receives; a
    // graceful disconnect from the peer does not (CM-27). `cause` (a TerminateProviderError, 0 = none) is the
    // ProviderErrorCode of every request flushed from now on, so the consumer learns why (CQ-14).
    void EnterError(bool flush_receives = true, uint32_t cause = 0);
    uint32_t error_cause() const { return error_cause_.load(std::memory_order_acquire); }
    // Stops new posts (QP-07/08). True when no post is running now; otherwise `on_idle` runs once the last one
    // has left (on its thread). Never waits (CB-12).
    bool Close(PostGate::IdleAction on_idle);
    PostGate& gate() { return gate_; }  // tests hold a post open through it
    PVOID context() const { return params_.context; }
    const void* pd() const { return params_.pd; }
    uint32_t inbound_read_limit() const { return inbound_read_limit_; }
    uint32_t outbound_read_limit() const { return outbound_read_limit_; }

private:
    class PostGuard;
    struct InitiatorRequest {
        PVOID context;
        NDK_OPERATION_TYPE type;
        const NDK_SGE* sgl;
        ULONG count;
        ULONG flags;
        ULONG accepted_flags;
        ULONG max_sge;
        uint32_t rights;  // what the local buffers must grant
        TransportRequest::Kind kind;
        uint32_t token;  // remote token (Write, Read) or the token to invalidate (Send)
        uint64_t address;
        bool invalidate;
    };
    // Send, Write and Read: shape checks, admission, delivery through the transport, completion.
    NTSTATUS RunInitiator(const InitiatorRequest& request);
    // A transport that does not complete inline: the request takes its place in the order and is handed over,
    // or held while READ_FENCE or the outbound read limit says it must wait (QP-11, QP-19).
    void HandOver(const InitiatorRequest& request);
    bool MayStartLocked(const TransportRequest& request) const;
    void StartLocked(std::unique_ptr<TransportRequest> request);
    void CancelHeld();
    void Complete(PVOID context, NDK_OPERATION_TYPE type, NTSTATUS status, ULONG flags, uint32_t provider_error = 0);
    void PushInitiator(const NDK_RESULT_EX& result, ULONG flags);
    void FlushIfPending();
    uint64_t Defer(PVOID context, NDK_OPERATION_TYPE type, ULONG flags);
    void ReapLocked();
    // Validates and gathers local SGEs into `out`; on an access error returns it and fills `error`.
    NTSTATUS GatherLocal(const NDK_SGE* sgl, ULONG count, uint32_t rights, bool inline_data, PieceList& out,
                         mem::AccessError* error);
    NTSTATUS CheckShape(const NDK_SGE* sgl, ULONG count, ULONG max_sge, ULONG flags, ULONG accepted);
    // The state and the one access check of a tagged access of `length` > 0 bytes; `grant` gets the reference.
    InboundResult CheckTagged(uint32_t token, uint64_t address, uint64_t length, uint32_t right, mem::TokenRef* grant);
    InboundResult TaggedAccess(uint32_t token, uint64_t address, const PieceList& local, uint32_t right,
                               bool into_target);
    void CancelReceive(PVOID context);
    void LocalFailure(PVOID context, NDK_OPERATION_TYPE type, mem::AccessError error);
    // Issue 33 §4.1: a refusal's text, naming what was refused, the QP, the status and why: the last-error text
    // for the consumer's own request; for the `peer`'s access, SOFTNDK_LOG only. `index` ~0u: none.
    void ReportRefusal(const char* what, uint32_t index, const mem::AccessRequest& request,
                       const mem::AccessRefusal& refusal, NTSTATUS status, bool peer) const;
    // The common start of Send, Write and Read: connection state (QP-09), then the local buffers through the
    // access check. False means the request is finished: `*status` is what the post returns.
    bool Admit(const PostGuard& guard, PVOID context, NDK_OPERATION_TYPE type, const NDK_SGE* sgl, ULONG count,
               uint32_t rights, bool inline_data, NTSTATUS* status);

    Params params_;
    std::atomic<State> state_{State::kIdle};
    std::atomic<uint32_t> error_cause_{0};    // set once, before the state leaves kConnected
    std::atomic<bool> flush_pending_{false};  // an initiator CQ overrun: Flush() at the next point without locks
    PostGate gate_;
    Transport* transport_ = nullptr;
    bool transport_inline_ = true;
    uint32_t inbound_read_limit_ = 0;
    uint32_t outbound_read_limit_ = 0;
    PieceList local_;  // scratch for the initiator (posting is serialised per queue, QP-05)
    // Scratch for the inbound side. Only the peer's initiator queue enters it, and the consumer serialises that
    // queue (QP-05), so it needs no lock (QP-06).
    PieceList remote_;
    ReceiveRequest receive_;  // the receive being delivered (inbound side, same serialisation)

    // Completions waiting behind a deferred one, in posting order. Only the posting thread adds, so "empty"
    // seen there stays true until it adds: then a completion goes to the CQ directly (the in-process fast path).
    struct Ordered {
        uint64_t ticket;  // 0: decided when queued
        NDK_RESULT_EX result;
        ULONG flags;
        bool done;
    };
    std::mutex order_mutex_;
    std::deque<Ordered> ordered_;
    std::atomic<bool> ordering_{false};  // !ordered_.empty()
    uint64_t next_ticket_ = 1;

    // Handed-over requests (transports that do not complete inline). Each holds the post gate until it ends.
    std::mutex start_mutex_;  // orders starts: the poster's and those released by a completing read
    std::deque<std::unique_ptr<TransportRequest>> held_;
    uint32_t reads_outstanding_ = 0;
    std::atomic<uint32_t> handed_over_{0};  // outstanding on a transport that completes later
};

// Keeps the transport usable for one post; fails if the QP is not connected.
class QueuePair::PostGuard {
public:
    explicit PostGuard(QueuePair& qp) : qp_(qp), entered_(qp.gate_.Enter()) {
        state_ = entered_ ? qp_.state() : State::kClosed;
    }
    ~PostGuard() {
        if (entered_) qp_.gate_.Leave();
    }
    State state() const { return state_; }

private:
    QueuePair& qp_;
    const bool entered_;
    State state_;
};

template <class Operation>
NTSTATUS QueuePair::RunLocalRequest(PVOID context, NDK_OPERATION_TYPE type, ULONG flags, Operation operation) {
    PostGuard guard(*this);
    if (guard.state() == State::kError) {
        Complete(context, type, STATUS_CANCELLED, 0);
        return STATUS_SUCCESS;
    }
    if (guard.state() != State::kConnected) return STATUS_CONNECTION_INVALID;  // FR-17, MW-08, QP-09
    bool deferred = false;
    NTSTATUS status = operation([&] {
        deferred = true;
        return Defer(context, type, flags);
    });
    assert(deferred == (status == STATUS_PENDING) && "a local request pends exactly when it took a ticket");
    if (status == STATUS_PENDING) return STATUS_SUCCESS;  // completes through FinishDeferred
    if (!NT_SUCCESS(status)) return status;
    Complete(context, type, STATUS_SUCCESS, flags);
    return STATUS_SUCCESS;
}

}  // namespace softndk::engine
