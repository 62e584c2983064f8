#include "engine/queue_pair.h"

#include <cstdio>

#include <softndk/softndk.h>

#include "common/last_error.h"

namespace softndk::engine {
namespace {

constexpr ULONG kSendFlags = NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT |
                             NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER;
// AMB-23: INLINE is accepted on writes too (MaxInlineDataSize speaks of send or write).
constexpr ULONG kWriteFlags =
    NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER | NDK_OP_FLAG_INLINE;
// TOK-17: RDMA_READ_LOCAL_INVALIDATE is accepted and ignored (the capability is not advertised).
constexpr ULONG kReadFlags =
    NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER | NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE;

// RFC 5040 §7 / RFC 5041 §7 layer, error type and code (the same causes wire/iwarp_wire.h names).
constexpr uint8_t kRdmap = 0, kDdp = 1;
constexpr uint8_t kLocalCatastrophicType = 0, kRemoteProtectionType = 1, kRemoteOperationType = 2;
constexpr uint8_t kUntaggedBufferType = 2;
inline uint32_t RemoteProtection(mem::AccessError error) {
    return TerminateProviderError(kRdmap, kRemoteProtectionType, mem::TerminateCode(error));
}
constexpr uint8_t kTaggedBufferType = 1;
constexpr uint32_t kNoReceiveBuffer = TerminateProviderError(kDdp, kUntaggedBufferType, 0x02);
constexpr uint32_t kMessageTooLong = TerminateProviderError(kDdp, kUntaggedBufferType, 0x05);
constexpr uint32_t kCannotInvalidate = TerminateProviderError(kRdmap, kRemoteOperationType, 0x09);
constexpr uint32_t kLocalCatastrophic = TerminateProviderError(kRdmap, kLocalCatastrophicType, 0x00);

}  // namespace

NTSTATUS RemoteRefusalStatus(uint32_t provider_error) {
    const uint8_t layer = (provider_error >> 12) & 0xF, type = (provider_error >> 8) & 0xF;
    const uint8_t code = provider_error & 0xFF;
    if ((provider_error & 0x10000u) == 0) return STATUS_CONNECTION_ABORTED;
    if (layer == kRdmap && type == kRemoteProtectionType) {  // RFC 5040 §7.2, as mem::TerminateCode numbers them
        switch (code) {
            case 0x00:
                return STATUS_INVALID_HANDLE;
            case 0x01:
            case 0x04:  // TO wrap: beyond the region (QP-16)
                return STATUS_REMOTE_RESOURCES;
            case 0x02:
                return STATUS_ACCESS_VIOLATION;
            case 0x03:
                return STATUS_ACCESS_DENIED;
            default:
                return STATUS_CONNECTION_ABORTED;
        }
    }
    if (layer == kDdp && type == kTaggedBufferType) {  // RFC 5041 §7.2
        switch (code) {
            case 0x00:
                return STATUS_INVALID_HANDLE;
            case 0x01:
            case 0x03:
                return STATUS_REMOTE_RESOURCES;
            case 0x02:
                return STATUS_ACCESS_DENIED;
            default:
                return STATUS_CONNECTION_ABORTED;
        }
    }
    if (provider_error == kMessageTooLong) return STATUS_BUFFER_OVERFLOW;
    return STATUS_CONNECTION_ABORTED;
}

QueuePair::QueuePair(const Params& params) : params_(params) {}

void QueuePair::PushInitiator(const NDK_RESULT_EX& result, ULONG flags) {
    if (NT_SUCCESS(result.Status) && (flags & NDK_OP_FLAG_SILENT_SUCCESS)) return;  // QP-10
    if (params_.initiator_cq->Push(result, false)) return;
    // CQ-15: an overrun makes the QP unusable. The flush waits for the caller's next point without locks: this
    // runs under order_mutex_, and maybe start_mutex_ (a Write that ended inside Submit).
    State expected = State::kConnected;
    if (state_.compare_exchange_strong(expected, State::kError)) flush_pending_.store(true, std::memory_order_release);
}

void QueuePair::FlushIfPending() {
    // A plain load first: this runs on every post, and the exchange is only needed after an overrun.
    if (flush_pending_.load(std::memory_order_acquire) && flush_pending_.exchange(false, std::memory_order_acq_rel))
        Flush();
    else if (state() == State::kError || state() == State::kClosed)
        CancelHeld();  // what was held while the QP went to error, or was closed (nothing held starts then)
}

void QueuePair::Complete(PVOID context, NDK_OPERATION_TYPE type, NTSTATUS status, ULONG flags,
                         uint32_t provider_error) {
    // QP-10: a silent success has no completion, so it holds no place in the order either.
    if (NT_SUCCESS(status) && (flags & NDK_OP_FLAG_SILENT_SUCCESS)) return;
    NDK_RESULT_EX result{};
    result.Status = status;
    result.QPContext = params_.context;
    result.RequestContext = context;
    result.Type = type;
    result.ProviderErrorCode = NT_SUCCESS(status) ? 0 : provider_error;  // CQ-14
    if (!ordering_.load(std::memory_order_acquire)) {
        PushInitiator(result, flags);
        return;
    }
    std::lock_guard lock(order_mutex_);
    ordered_.push_back({0, result, flags, true});
    ReapLocked();
}

uint64_t QueuePair::Defer(PVOID context, NDK_OPERATION_TYPE type, ULONG flags) {
    NDK_RESULT_EX result{};
    result.QPContext = params_.context;
    result.RequestContext = context;
    result.Type = type;
    std::lock_guard lock(order_mutex_);
    const uint64_t ticket = next_ticket_++;
    ordered_.push_back({ticket, result, flags, false});
    ordering_.store(true, std::memory_order_release);
    return ticket;
}

void QueuePair::FinishDeferred(uint64_t ticket, NTSTATUS status, uint32_t provider_error) {
    std::lock_guard lock(order_mutex_);
    for (Ordered& entry : ordered_) {
        if (entry.ticket != ticket) continue;
        entry.result.Status = status;
        entry.result.ProviderErrorCode = NT_SUCCESS(status) ? 0 : provider_error;  // CQ-14
        entry.done = true;
        break;
    }
    ReapLocked();
}

void QueuePair::ReapLocked() {
    while (!ordered_.empty() && ordered_.front().done) {
        PushInitiator(ordered_.front().result, ordered_.front().flags);
        ordered_.pop_front();
    }
    // Release: the pushes above happen before a poster that sees "not ordering" pushes its own.
    if (ordered_.empty()) ordering_.store(false, std::memory_order_release);
}

NTSTATUS QueuePair::CheckShape(const NDK_SGE* sgl, ULONG count, ULONG max_sge, ULONG flags, ULONG accepted) {
    if ((flags & ~accepted) != 0) {
        SetLastErrorText("flags 0x%x are not accepted by this request (QP-14, AMB-37)", flags & ~accepted);
        return STATUS_INVALID_PARAMETER;
    }
    const bool inline_data = (flags & NDK_OP_FLAG_INLINE) != 0;
    if ((count > 0 && sgl == nullptr) || (!inline_data && count > max_sge)) {
        SetLastErrorText("%u SGEs; this request allows %u (QP-13, QP-17)", count, max_sge);
        return STATUS_INVALID_PARAMETER;
    }
    uint64_t sum = 0;
    for (ULONG i = 0; i < count; ++i) sum += sgl[i].Length;
    if (sum > params_.info->MaxTransferLength || (inline_data && sum > params_.inline_size)) {
        SetLastErrorText("%llu bytes exceed MaxTransferLength or the QP's InlineDataSize (QP-13, QP-18)",
                         static_cast<unsigned long long>(sum));
        return STATUS_INVALID_PARAMETER;
    }
    return STATUS_SUCCESS;
}

NTSTATUS QueuePair::GatherLocal(const NDK_SGE* sgl, ULONG count, uint32_t rights, bool inline_data, PieceList& out,
                                mem::AccessError* error) {
    out.Clear();
    for (ULONG i = 0; i < count; ++i) {
        if (sgl[i].Length == 0) continue;
        if (inline_data) {  // TOK-09: the token is ignored; the buffer is resident until we return (QP-13)
            out.Add(static_cast<uint8_t*>(sgl[i].VirtualAddress), sgl[i].Length);
            continue;
        }
        mem::TokenRef grant;
        const uint64_t address = static_cast<uint64_t>(sgl[i].LogicalAddress.QuadPart);
        const mem::AccessRequest request{
            sgl[i].MemoryRegionToken, mem::TokenKind::kLocal, params_.pd, address, sgl[i].Length, rights};
        mem::AccessRefusal refusal;
        *error = mem::CheckAccess(*params_.tokens, request, &grant, &refusal);
        if (*error != mem::AccessError::kNone) {
            ReportRefusal("local SGE", i, request, refusal, mem::LocalAccessStatus(*error), false);
            out.Clear();  // the grants of the SGEs before it go now: a refused request holds nothing
            return mem::LocalAccessStatus(*error);
        }
        out.AddRange(std::move(grant), address, sgl[i].Length);
    }
    return STATUS_SUCCESS;
}

void QueuePair::ReportRefusal(const char* what, uint32_t index, const mem::AccessRequest& request,
                              const mem::AccessRefusal& refusal, NTSTATUS status, bool peer) const {
    char reason[400];
    mem::DescribeRefusal(request, refusal, reason, sizeof(reason));
    char where[16] = "";
    if (index != ~0u) std::snprintf(where, sizeof(where), " %u", index);
    const char* name = SoftNdkStatusName(status);
    char text[512];
    std::snprintf(text, sizeof(text), "%s%s of QP %p refused: %s (0x%08X): %s", what, where, params_.handle,
                  name != nullptr ? name : "NTSTATUS", static_cast<unsigned>(status), reason);
    // The peer's access is refused on a receiving thread, not the consumer's: only SOFTNDK_LOG=1 shows it.
    if (peer)
        LogText("%s", text);
    else
        SetLastErrorText("%s", text);
}

void QueuePair::LocalFailure(PVOID context, NDK_OPERATION_TYPE type, mem::AccessError error) {
    // A local protection error completes the request in error and terminates the connection, as an RNIC does.
    Complete(context, type, mem::LocalAccessStatus(error), 0, RemoteProtection(error));
    transport_->Terminate(RemoteProtection(error));
}

bool QueuePair::Admit(const PostGuard& guard, PVOID context, NDK_OPERATION_TYPE type, const NDK_SGE* sgl, ULONG count,
                      uint32_t rights, bool inline_data, NTSTATUS* status) {
    *status = STATUS_SUCCESS;
    if (guard.state() == State::kError) {  // after a terminate: accepted, completed as flushed
        Complete(context, type, STATUS_CANCELLED, 0, error_cause());
        return false;
    }
    if (guard.state() != State::kConnected) {
        *status = STATUS_CONNECTION_INVALID;  // QP-09
        return false;
    }
    mem::AccessError error = mem::AccessError::kNone;
    if (!NT_SUCCESS(GatherLocal(sgl, count, rights, inline_data, local_, &error))) {
        LocalFailure(context, type, error);
        return false;
    }
    return true;
}

NTSTATUS QueuePair::RunInitiator(const InitiatorRequest& request) {
    NTSTATUS status = CheckShape(request.sgl, request.count, request.max_sge, request.flags, request.accepted_flags);
    if (!NT_SUCCESS(status)) return status;
    if (request.type == NdkOperationTypeRead && outbound_read_limit_ == 0 && state() == State::kConnected) {
        SetLastErrorText("NdkRead: the connection's outbound read limit is 0 (CM-03, QP-19)");
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    PostGuard guard(*this);
    if (!Admit(guard, request.context, request.type, request.sgl, request.count, request.rights,
               (request.flags & NDK_OP_FLAG_INLINE) != 0, &status))
        return status;
    if (!transport_inline_) {
        // The initiator queue holds what is outstanding: a full queue refuses the request inline (QP-01).
        if (handed_over_.load(std::memory_order_acquire) >= params_.initiator_depth) {
            local_.Clear();
            SetLastErrorText("initiator queue full: %u requests outstanding (InitiatorQueueDepth)",
                             params_.initiator_depth);
            return STATUS_INSUFFICIENT_RESOURCES;
        }
        HandOver(request);
        FlushIfPending();
        return STATUS_SUCCESS;
    }
    InboundResult result;
    switch (request.kind) {
        case TransportRequest::Kind::kSend:
            result = transport_->Send(local_, (request.flags & NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT) != 0,
                                      request.invalidate, request.token);
            break;
        case TransportRequest::Kind::kWrite:
            result = transport_->Write(request.token, request.address, local_);
            break;
        case TransportRequest::Kind::kRead:
            result = transport_->Read(request.token, request.address, local_);
            break;
    }
    local_.Clear();
    Complete(request.context, request.type, result.status, request.flags, result.provider_error);
    FlushIfPending();
    return STATUS_SUCCESS;
}

void QueuePair::RingDoorbell() {
    PostGuard guard(*this);  // the transport stays until the last post leaves the gate
    if (guard.state() != State::kConnected && guard.state() != State::kError) return;  // not associated, or closed
    if (transport_ != nullptr && !transport_inline_) transport_->Doorbell();
}

void QueuePair::HandOver(const InitiatorRequest& request) {
    auto handed = std::make_unique<TransportRequest>();
    handed->owner = this;
    handed->kind = request.kind;
    handed->fenced = (request.flags & NDK_OP_FLAG_READ_FENCE) != 0;
    handed->solicited = (request.flags & NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT) != 0;
    handed->invalidate = request.invalidate;
    handed->deferred = (request.flags & NDK_OP_FLAG_DEFER) != 0;
    handed->token = request.token;
    handed->address = request.address;
    if (request.flags & NDK_OP_FLAG_INLINE) {  // QP-13: copy now, the buffer is the consumer's again on return
        for (const Piece& piece : local_.pieces())
            handed->inline_copy.insert(handed->inline_copy.end(), piece.data, piece.data + piece.length);
        local_.Clear();
        handed->local.Add(handed->inline_copy.data(), handed->inline_copy.size());
    } else {
        handed->local = std::move(local_);
        local_ = PieceList();
    }
    handed->ticket = Defer(request.context, request.type, request.flags);
    handed_over_.fetch_add(1, std::memory_order_acq_rel);
    if (!gate_.Enter()) {  // closed since this post began: the request ends flushed
        handed->local.Clear();
        FinishDeferred(handed->ticket, STATUS_CANCELLED);
        handed_over_.fetch_sub(1, std::memory_order_acq_rel);
        return;
    }
    bool held_ringing = false;
    {
        std::lock_guard lock(start_mutex_);
        if (held_.empty() && MayStartLocked(*handed)) {
            StartLocked(std::move(handed));
        } else {
            held_ringing = !handed->deferred;
            held_.push_back(std::move(handed));
        }
    }
    // CB-15: a post without DEFER rings the doorbell even when it must wait (READ_FENCE, the read limit): the
    // deferred requests started before it go now; it rings again itself when the lane starts it.
    if (held_ringing) transport_->Doorbell();
}

// QP-11: a fenced request starts once no read is outstanding; QP-19: at most ORD reads are outstanding.
bool QueuePair::MayStartLocked(const TransportRequest& request) const {
    // QP-21: held, then flushed by FlushIfPending. A closed QP holds too: a post that entered the gate just before
    // the close, while the QP was in error, would otherwise be held after the error's flush with nobody to flush
    // it, and its gate would never be idle (the connector's close hung: QP_08 under load, about 1 run in 250).
    if (state() == State::kError || state() == State::kClosed) return false;
    if (request.fenced && reads_outstanding_ != 0) return false;
    return request.kind != TransportRequest::Kind::kRead || reads_outstanding_ < outbound_read_limit_;
}

void QueuePair::StartLocked(std::unique_ptr<TransportRequest> request) {
    if (request->kind == TransportRequest::Kind::kRead) ++reads_outstanding_;
    transport_->Submit(std::move(request));  // a read never ends inside (transport.h): start_mutex_ is not re-entered
}

void QueuePair::OnSubmittedDone(std::unique_ptr<TransportRequest> request, InboundResult result) {
    request->local.Clear();  // the local buffers are released before the completion is visible
    handed_over_.fetch_sub(1, std::memory_order_acq_rel);
    FinishDeferred(request->ticket, result.status, result.provider_error);
    if (request->kind == TransportRequest::Kind::kRead) {  // never inside Submit (transport.h): no lock is held
        bool ring = false;
        {
            std::lock_guard lock(start_mutex_);
            --reads_outstanding_;
            while (!held_.empty() && MayStartLocked(*held_.front())) {
                std::unique_ptr<TransportRequest> next = std::move(held_.front());
                held_.pop_front();
                ring = next->deferred;  // the last one started: without DEFER, its Submit sent all before it
                StartLocked(std::move(next));
            }
        }
        // Deferred requests started here may have had their doorbell (a later post, or a failed one) ring while
        // they were held: nothing would ring for them again (CB-18).
        if (ring) transport_->Doorbell();
        FlushIfPending();
    }
    request.reset();
    gate_.Leave();  // last: the QP may be torn down once its gate is idle
}

// Flush on error: held requests never start; they complete flushed, in order.
void QueuePair::CancelHeld() {
    std::deque<std::unique_ptr<TransportRequest>> held;
    {
        std::lock_guard lock(start_mutex_);
        held.swap(held_);
    }
    for (std::unique_ptr<TransportRequest>& request : held) {
        request->local.Clear();
        handed_over_.fetch_sub(1, std::memory_order_acq_rel);
        FinishDeferred(request->ticket, STATUS_CANCELLED, error_cause());
        request.reset();
        gate_.Leave();
    }
}

NTSTATUS QueuePair::Send(PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags, bool invalidate, UINT32 token) {
    // TOK-13: a send-and-invalidate completes as a Send on the sender.
    return RunInitiator({context, NdkOperationTypeSend, sgl, count, flags, kSendFlags, params_.max_initiator_sge,
                         mem::kRightLocalRead, TransportRequest::Kind::kSend, token, 0, invalidate});
}

NTSTATUS QueuePair::Write(PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token, ULONG flags) {
    return RunInitiator({context, NdkOperationTypeWrite, sgl, count, flags, kWriteFlags, params_.max_initiator_sge,
                         mem::kRightLocalRead, TransportRequest::Kind::kWrite, token, address, false});
}

NTSTATUS QueuePair::Read(PVOID context, const NDK_SGE* sgl, ULONG count, UINT64 address, UINT32 token, ULONG flags) {
    // A read sink needs local write, and the read-sink right where the adapter requires it (MR-13, FR-20).
    return RunInitiator({context, NdkOperationTypeRead, sgl, count, flags, kReadFlags, params_.info->MaxReadRequestSge,
                         mem::kRightLocalWrite | mem::kRightReadSink, TransportRequest::Kind::kRead, token, address,
                         false});
}

void QueuePair::CancelReceive(PVOID context) {
    NDK_RESULT_EX result{};
    result.Status = STATUS_CANCELLED;
    result.ProviderErrorCode = error_cause();  // CQ-14: why the receive was flushed
    result.QPContext = params_.context;
    result.RequestContext = context;
    result.Type = NdkOperationTypeReceive;
    if (!params_.receive_cq->Push(result, false)) EnterError();  // CQ-15: an overrun makes the QP unusable
}

NTSTATUS QueuePair::Receive(PVOID context, const NDK_SGE* sgl, ULONG count) {
    if (state() == State::kError) {  // the QP is in error: the receive is flushed at once
        CancelReceive(context);
        return STATUS_SUCCESS;
    }
    return params_.receive_queue->Post(context, sgl, count);  // AMB-29: allowed before connecting
}

void QueuePair::Flush() {
    CancelHeld();                              // QP-21: initiator requests not yet started
    if (params_.shared_receive_queue) return;  // an SRQ's receives belong to the SRQ, not to this QP
    for (PVOID context : params_.receive_queue->Drain()) CancelReceive(context);
}

InboundResult QueuePair::BeginReceive(PieceList* sink, PVOID* receive_context) {
    if (state() != State::kConnected) return {STATUS_CANCELLED, 0};
    ReceiveRequest& request = receive_;
    if (!params_.receive_queue->Pop(&request)) return {STATUS_CONNECTION_ABORTED, kNoReceiveBuffer};  // RFC 5041
    *receive_context = request.context;
    mem::AccessError error = mem::AccessError::kNone;
    if (!NT_SUCCESS(GatherLocal(request.sges.data(), request.sge_count, mem::kRightLocalWrite, false, *sink, &error))) {
        const NTSTATUS status = mem::LocalAccessStatus(error);
        EndReceive(request.context, 0, false, false, 0, status, kLocalCatastrophic);
        return {STATUS_CONNECTION_ABORTED, kLocalCatastrophic};
    }
    return {};
}

InboundResult QueuePair::EndReceive(PVOID receive_context, uint64_t bytes, bool solicited, bool invalidate,
                                    uint32_t token, NTSTATUS failure, uint32_t failure_code) {
    NDK_RESULT_EX result{};
    result.QPContext = params_.context;
    result.RequestContext = receive_context;
    result.Type = NdkOperationTypeReceive;
    InboundResult verdict{};
    if (!NT_SUCCESS(failure)) {
        result.Status = failure;
        result.ProviderErrorCode = failure_code;
        verdict = {failure, failure_code};
    } else {
        result.BytesTransferred = static_cast<ULONG>(bytes);
        if (invalidate) {
            // TOK-10/11/14: invalidate before the completion is visible; a bad token aborts the connection.
            mem::TokenRef target = params_.tokens->Acquire(token, mem::TokenKind::kRemote);
            mem::AccessError invalid = !target                                     ? mem::AccessError::kInvalidToken
                                       : target.target()->owner != params_.pd      ? mem::AccessError::kWrongOwner
                                       : target.target()->invalidatable == nullptr ? mem::AccessError::kNoRights
                                                                                   : mem::AccessError::kNone;
            mem::TokenTarget* named = target ? target.target() : nullptr;
            target.Reset();
            if (invalid == mem::AccessError::kNone && !NT_SUCCESS(named->invalidatable->InvalidateToken(token)))
                invalid = mem::AccessError::kInvalidToken;
            if (invalid != mem::AccessError::kNone) {
                result.Status = mem::RemoteAccessStatus(invalid);
                result.ProviderErrorCode = kCannotInvalidate;
                verdict = {mem::RemoteAccessStatus(invalid), kCannotInvalidate};
            } else {
                result.Type = NdkOperationTypeReceiveAndInvalidate;
                result.TypeSpecificCompletionOutput = token;
            }
        }
    }
    if (!params_.receive_cq->Push(result, solicited) && NT_SUCCESS(verdict.status)) EnterError();  // CQ-15
    return verdict;
}

InboundResult QueuePair::OnSend(const PieceList& payload, bool solicited, bool invalidate, uint32_t token) {
    PVOID context = nullptr;
    InboundResult verdict = BeginReceive(&remote_, &context);
    if (!NT_SUCCESS(verdict.status)) {
        if (verdict.status != STATUS_CANCELLED) transport_->Terminate(verdict.provider_error);
        return verdict;
    }
    if (remote_.total() < payload.total()) {
        verdict = EndReceive(context, 0, solicited, false, 0, STATUS_BUFFER_OVERFLOW, kMessageTooLong);
    } else {
        const uint64_t bytes = CopyPieces(payload, remote_);
        verdict = EndReceive(context, bytes, solicited, invalidate, token);
    }
    remote_.Clear();
    if (!NT_SUCCESS(verdict.status)) transport_->Terminate(verdict.provider_error);
    return verdict;
}

InboundResult QueuePair::CheckTagged(uint32_t token, uint64_t address, uint64_t length, uint32_t right,
                                     mem::TokenRef* grant) {
    if (state() != State::kConnected) return {STATUS_CANCELLED, 0};
    const mem::AccessRequest request{token, mem::TokenKind::kRemote, params_.pd, address, length, right};
    mem::AccessRefusal refusal;
    const mem::AccessError error = mem::CheckAccess(*params_.tokens, request, grant, &refusal);
    if (error != mem::AccessError::kNone) {
        // Issue 33 §4.1: the peer's access, refused (the connection ends with a Terminate for it).
        ReportRefusal(right == mem::kRightRemoteWrite ? "the peer's RDMA Write" : "the peer's RDMA Read", ~0u, request,
                      refusal, mem::RemoteAccessStatus(error), true);
        return {mem::RemoteAccessStatus(error),
                TaggedRefusalCause(mem::TerminateCode(error), right == mem::kRightRemoteWrite)};
    }
    return {};
}

InboundResult QueuePair::ResolveTagged(uint32_t token, uint64_t address, uint64_t length, uint32_t right,
                                       PieceList* out) {
    if (length == 0) return {};  // QP-16 (decided): zero length names no memory (an RTR is one, RFC 6581)
    mem::TokenRef grant;
    const InboundResult access = CheckTagged(token, address, length, right, &grant);
    if (NT_SUCCESS(access.status)) out->AddRange(std::move(grant), address, length);
    return access;
}

// Tagged access by the peer (RDMAP Write or Read Response source) on the initiator's thread: the one access
// check, then a copy between the granted range and `local`, piece by piece, with no list of the target's pieces.
// A refusal terminates the connection.
InboundResult QueuePair::TaggedAccess(uint32_t token, uint64_t address, const PieceList& local, uint32_t right,
                                      bool into_target) {
    const uint64_t length = local.total();
    if (length == 0) return {};  // QP-16, as ResolveTagged
    mem::TokenRef grant;
    const InboundResult access = CheckTagged(token, address, length, right, &grant);
    if (!NT_SUCCESS(access.status)) {  // QP-16: beyond the region is STATUS_REMOTE_RESOURCES
        if (access.status != STATUS_CANCELLED) transport_->Terminate(access.provider_error);
        return access;
    }
    const Piece* piece = local.pieces().data();
    uint64_t offset = 0;  // into *piece
    mem::ForEachPiece(*grant.target(), address, length, [&](uint8_t* target, uint64_t bytes) {
        while (bytes > 0) {
            const uint64_t run = std::min(bytes, piece->length - offset);
            if (into_target)
                std::memcpy(target, piece->data + offset, run);
            else
                std::memcpy(piece->data + offset, target, run);
            target += run;
            bytes -= run;
            offset += run;
            if (offset == piece->length) ++piece, offset = 0;
        }
    });
    return {};
}

InboundResult QueuePair::OnWrite(uint32_t token, uint64_t address, const PieceList& payload) {
    return TaggedAccess(token, address, payload, mem::kRightRemoteWrite, true);
}

InboundResult QueuePair::OnRead(uint32_t token, uint64_t address, const PieceList& sink) {
    return TaggedAccess(token, address, sink, mem::kRightRemoteRead, false);
}

void QueuePair::Associate(Transport* transport, uint32_t inbound_read_limit, uint32_t outbound_read_limit) {
    transport_ = transport;
    transport_inline_ = transport->completes_inline();  // asked once: no virtual call per post
    inbound_read_limit_ = inbound_read_limit;
    outbound_read_limit_ = outbound_read_limit;
}

void QueuePair::EnterError(bool flush_receives, uint32_t cause) {
    if (state() != State::kConnected) return;
    uint32_t none = 0;
    if (cause != 0) error_cause_.compare_exchange_strong(none, cause, std::memory_order_acq_rel);
    State expected = State::kConnected;
    if (!state_.compare_exchange_strong(expected, State::kError)) return;
    if (flush_receives) Flush();  // CM-27: a graceful disconnect from the peer flushes nothing
}

bool QueuePair::Close(PostGate::IdleAction on_idle) {
    state_.store(State::kClosed, std::memory_order_release);
    return gate_.Close(std::move(on_idle));
}

}  // namespace softndk::engine
