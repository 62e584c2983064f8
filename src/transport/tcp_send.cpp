// TcpConnection, sending: RDMAP messages cut into FPDUs no larger than the path MSS (RFC 5044 §5.1), gathered
// from the registered pages with sendmsg (no staging copy), one message after another (no two tagged
// messages interleave, siw-on-the-wire §3.7). Whoever holds send_mutex_ sends; a full socket arms EPOLLOUT and the
// lane carries on.
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "transport/tcp_connection_internal.h"

namespace softndk::transport {
namespace {

constexpr size_t kMaxPreparedFpdus = 64;
constexpr size_t kMaxIovecs = 192;

}  // namespace

void SlicePieces(const std::vector<engine::Piece>& pieces, uint64_t offset, uint64_t length,
                 std::vector<engine::Piece>* out) {
    for (const engine::Piece& piece : pieces) {
        if (length == 0) return;
        if (offset >= piece.length) {
            offset -= piece.length;
            continue;
        }
        const uint64_t bytes = std::min(piece.length - offset, length);
        out->push_back({piece.data + offset, bytes});
        length -= bytes;
        offset = 0;
    }
}

size_t AppendIovecs(const std::vector<engine::Piece>& pieces, uint64_t from, uint64_t size, iovec* out, size_t room) {
    size_t count = 0;
    uint64_t offset = from;
    uint64_t left = size - from;
    for (const engine::Piece& piece : pieces) {
        if (left == 0 || count == room) break;
        if (offset >= piece.length) {
            offset -= piece.length;
            continue;
        }
        const uint64_t bytes = std::min(piece.length - offset, left);
        out[count++] = {piece.data + offset, static_cast<size_t>(bytes)};
        left -= bytes;
        offset = 0;
    }
    return count;
}

void TcpConnection::Submit(std::unique_ptr<engine::TransportRequest> request) {
    auto message = std::make_unique<OutMessage>();
    const engine::TransportRequest::Kind kind = request->kind;
    const bool deferred = request->deferred;
    if (kind == engine::TransportRequest::Kind::kRead) {
        // The request waits for its Response among the outstanding reads; the message only carries its fields.
        message->opcode = wire::RdmapOpcode::kReadRequest;
        message->read.size = static_cast<uint32_t>(request->local.total());
        message->read.source_stag = request->token;
        message->read.source_offset = request->address;
        std::lock_guard lock(reads_mutex_);
        if (ended()) {
            // Never inside Submit for a read (transport.h): the flush completes on the lane.
            engine::TransportRequest* raw = request.release();
            const uint32_t cause = end_cause_.load();
            progress_->Post(lane_, [raw, cause] {
                std::unique_ptr<engine::TransportRequest> owned(raw);
                engine::QueuePair* owner = owned->owner;
                owner->OnSubmittedDone(std::move(owned), {STATUS_CANCELLED, cause});
            });
            return;
        }
        OutstandingRead pending;
        pending.sink_stag = message->read.sink_stag = next_sink_stag_++;  // ours: only echoed by the peer
        pending.total = message->read.size;
        pending.request = std::move(request);
        reads_.push_back(std::move(pending));
    } else if (kind == engine::TransportRequest::Kind::kWrite) {
        message->opcode = wire::RdmapOpcode::kWrite;
        message->stag = request->token;
        message->offset = request->address;
    } else {
        message->opcode = request->invalidate
                              ? (request->solicited ? wire::RdmapOpcode::kSendSolicitedInvalidate
                                                    : wire::RdmapOpcode::kSendInvalidate)
                              : (request->solicited ? wire::RdmapOpcode::kSendSolicited : wire::RdmapOpcode::kSend);
        message->stag = request->token;
    }
    if (request) {
        message->pieces = &request->local.pieces();
        message->total = request->local.total();
        message->request = std::move(request);
    }
    std::vector<Finished> finished;
    bool arm_backstop = false;
    Enqueue(std::move(message), &finished, !deferred, deferred ? &arm_backstop : nullptr);
    RunFinished(&finished);  // a Send or Write may end here (transport.h)
    if (arm_backstop) ArmDeferBackstop();
}

// CB-15/CB-18: NDK_OP_FLAG_DEFER leaves a request queued, so that the posts of a burst go out in one sendmsg. The
// doorbell is the next post without the flag (Enqueue pumps), or a post that fails inline (the QP rings), both on
// the posting thread, as a hardware provider rings its doorbell: no other thread touches the socket for a burst.
void TcpConnection::Doorbell() {
    std::vector<Finished> finished;
    {
        std::lock_guard lock(send_mutex_);
        if (ended()) return;
        PumpLocked(&finished);
    }
    RunFinished(&finished);
}

// CB-19 makes ending every chain with a request without DEFER the consumer's duty; one that does not still has
// its requests sent, DeferBackstopMs later. Until issue 21 the lane sent every burst at once: the job ran in the
// middle of the consumer's next burst, took the send lock from it and kept the lane spinning (64 B writes at
// 0.55 M/s; 1.3 M/s without it on 2 vCPUs).
void TcpConnection::ArmDeferBackstop() {
    std::weak_ptr<TcpConnection> weak = weak_from_this();
    auto pump = [weak] {
        std::shared_ptr<TcpConnection> self = weak.lock();
        if (!self) return;
        std::vector<Finished> finished;
        {
            std::lock_guard lock(self->send_mutex_);
            self->backstop_armed_ = false;
            if (!self->ended()) self->PumpLocked(&finished);
        }
        self->RunFinished(&finished);
    };
    if (options_.after)
        options_.after(options_.defer_backstop, std::move(pump));
    else
        progress_->Post(lane_, std::move(pump));
}

void TcpConnection::Enqueue(std::unique_ptr<OutMessage> message, std::vector<Finished>* finished, bool pump,
                            bool* arm_backstop) {
    std::lock_guard lock(send_mutex_);
    if (ended() || fin_ == Fin::kSent) {
        if (message->request) finished->push_back({std::move(message->request), {STATUS_CANCELLED, end_cause_.load()}});
        return;
    }
    switch (message->opcode) {  // MSNs per queue, in wire order (RFC 5041 §5.1: the first is 1)
        case wire::RdmapOpcode::kSend:
        case wire::RdmapOpcode::kSendInvalidate:
        case wire::RdmapOpcode::kSendSolicited:
        case wire::RdmapOpcode::kSendSolicitedInvalidate:
            message->msn = ++send_msn_;
            break;
        case wire::RdmapOpcode::kReadRequest:
            message->msn = ++read_msn_;
            break;
        default:
            break;
    }
    out_.push_back(std::move(message));
    // One backstop per connection at a time; DeferBackstopMs 0: only the consumer rings.
    if (arm_backstop != nullptr && !backstop_armed_ && options_.defer_backstop.count() != 0) {
        backstop_armed_ = true;
        *arm_backstop = true;
    }
    if (pump) PumpLocked(finished);
}

void TcpConnection::QueueTerminateLocked(wire::TerminateCause cause, const uint8_t* offender, size_t offender_size) {
    // Only the FPDU already on its way is finished first; nothing else queued goes out (RFC 5040 §5.4): End flushes
    // it.
    const bool in_flight = !fpdus_.empty() && fpdus_.front().sent > 0;
    while (fpdus_.size() > (in_flight ? 1u : 0u)) fpdus_.pop_back();
    size_t position = 0;
    if (in_flight) {
        fpdus_.front().last = false;  // its message is flushed, not completed
        for (size_t i = 0; i < out_.size(); ++i) {
            if (out_[i].get() != fpdus_.front().message) continue;
            std::unique_ptr<OutMessage> message = std::move(out_[i]);
            out_.erase(out_.begin() + static_cast<std::ptrdiff_t>(i));
            out_.push_front(std::move(message));
            break;
        }
        position = 1;
    }
    auto message = std::make_unique<OutMessage>();
    message->opcode = wire::RdmapOpcode::kTerminate;
    wire::TerminateOffender what;
    if (wire::PeekFpduLength({offender, offender_size}, &what.segment_length).ok()) {  // as received: length first
        what.segment_length_valid = true;
        what.ulpdu_prefix = {offender + wire::kFpduLengthSize, offender_size - wire::kFpduLengthSize};
    }
    message->body.resize(wire::kTerminateMaxBodySize);
    size_t written = 0;
    if (wire::BuildTerminateBody(cause, what, message->body, &written) != wire::WireStatus::kOk) {
        what = {};
        wire::BuildTerminateBody(cause, what, message->body, &written);
    }
    message->body.resize(written);
    out_.insert(out_.begin() + static_cast<std::ptrdiff_t>(std::min(position, out_.size())), std::move(message));
    prepared_messages_ = position;
}

// SO_LINGER 0: closing the socket sends a reset (CM-26 abort, a dropped stream); the trace writes it so.
void TcpConnection::ResetOnCloseLocked() {
    const linger reset{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    reset_on_close_ = true;
}

// Cuts the next FPDU from the first message not fully prepared.
bool TcpConnection::PrepareNextLocked() {
    if (prepared_messages_ >= out_.size()) return false;
    if (state() == StreamState::kDraining && out_[prepared_messages_]->opcode != wire::RdmapOpcode::kTerminate)
        return false;  // nothing after the Terminate
    OutMessage& message = *out_[prepared_messages_];
    wire::SegmentHeader header;
    const size_t header_size = wire::SegmentHeaderSize(message.opcode);
    // RFC 5044 §5.1: MULPDU follows the EMSS. Linux reports half the peer's window as the MSS until the window
    // has grown (32741 on loopback right after the handshake, 65483 later): look again before each of the first 16
    // long messages, then before every 256th (a getsockopt per 64 KiB write was a tenth of the sender's core).
    if (message.prepared == 0 && message.total + header_size > max_payload_ &&
        (++long_messages_ <= 16 || long_messages_ % 256 == 0))
        max_payload_ = PathMaxUlpdu();
    const size_t room = max_payload_ > header_size ? max_payload_ - header_size : 1;
    const bool carries_payload = wire::IsTaggedOpcode(message.opcode) || wire::IsSendOpcode(message.opcode);
    const uint64_t remaining = carries_payload ? message.total - message.prepared : 0;
    const uint32_t chunk = static_cast<uint32_t>(std::min<uint64_t>(remaining, room));
    const bool last = message.prepared + chunk == (carries_payload ? message.total : 0);
    switch (message.opcode) {
        case wire::RdmapOpcode::kWrite:
            header = wire::MakeWriteHeader(message.stag, message.offset + message.prepared, last);
            break;
        case wire::RdmapOpcode::kReadResponse:
            header = wire::MakeReadResponseHeader(message.stag, message.offset + message.prepared, last);
            break;
        case wire::RdmapOpcode::kReadRequest:
            header = wire::MakeReadRequestHeader(message.msn, message.read);
            break;
        case wire::RdmapOpcode::kTerminate:
            header = wire::MakeTerminateHeader();
            break;
        default:
            header = wire::MakeSendHeader(message.opcode, message.msn, static_cast<uint32_t>(message.prepared), last,
                                          message.stag);
            break;
    }
    Fpdu& fpdu = fpdus_.emplace_back();
    fpdu.message = &message;
    size_t written = 0;
    wire::SerializeSegmentHeader(header, {fpdu.head + wire::kFpduLengthSize, wire::kMaxSegmentHeaderSize}, &written);
    size_t head = wire::kFpduLengthSize + written;
    if (message.opcode == wire::RdmapOpcode::kTerminate) {
        std::memcpy(fpdu.head + head, message.body.data(), message.body.size());
        head += message.body.size();
    }
    // Length, pad and CRC come from the wire layer. Without CRC the payload goes straight from the registered
    // pages; with CRC from a copy, the CRC over the copy: the bytes sent are the bytes it covers (issue 18 §3.6).
    slices_.clear();
    spans_.clear();
    if (chunk > 0) SlicePieces(*message.pieces, message.prepared, chunk, &slices_);
    if (crc_ && chunk > 0) {
        fpdu.copy.resize(chunk);
        size_t at = 0;
        for (const engine::Piece& slice : slices_) {
            std::memcpy(fpdu.copy.data() + at, slice.data, static_cast<size_t>(slice.length));
            at += static_cast<size_t>(slice.length);
        }
        spans_.emplace_back(fpdu.copy.data(), fpdu.copy.size());
    } else {
        for (const engine::Piece& slice : slices_) spans_.emplace_back(slice.data, static_cast<size_t>(slice.length));
    }
    wire::FrameFpduGather({fpdu.head + wire::kFpduLengthSize, head - wire::kFpduLengthSize}, spans_, crc_,
                          &fpdu.framing);
    std::memcpy(fpdu.head, fpdu.framing.length.data(), wire::kFpduLengthSize);
    fpdu.head_size = static_cast<uint16_t>(head);
    fpdu.payload_offset = message.prepared;
    fpdu.payload_size = chunk;
    fpdu.size = static_cast<uint32_t>(head + chunk + fpdu.framing.trailer_size);
    fpdu.last = last;
    message.prepared += chunk;
    if (last) ++prepared_messages_;
    return true;
}

// Iovecs for what is prepared and not sent yet, in stream order; false for nothing to send.
size_t TcpConnection::GatherLocked(iovec* iov, size_t room) const {
    size_t count = 0;
    if (raw_sent_ < raw_out_.size()) {  // MPA frames go alone, before any FPDU
        iov[count++] = {const_cast<uint8_t*>(raw_out_.data()) + raw_sent_, raw_out_.size() - raw_sent_};
        return count;
    }
    for (const Fpdu& fpdu : fpdus_) {
        if (count + 3 > room) break;
        uint32_t skip = fpdu.sent;
        if (skip < fpdu.head_size) {
            iov[count++] = {const_cast<uint8_t*>(fpdu.head) + skip, fpdu.head_size - skip};
            skip = 0;
        } else {
            skip -= fpdu.head_size;
        }
        if (skip < fpdu.payload_size && !fpdu.copy.empty()) {
            iov[count++] = {const_cast<uint8_t*>(fpdu.copy.data()) + skip, fpdu.payload_size - skip};
            skip = 0;
        } else if (skip < fpdu.payload_size) {
            const uint64_t from = fpdu.payload_offset + skip;
            const uint64_t to = fpdu.payload_offset + fpdu.payload_size;
            const size_t added = AppendIovecs(*fpdu.message->pieces, from, to, iov + count, room - count);
            uint64_t covered = 0;
            for (size_t i = count; i < count + added; ++i) covered += iov[i].iov_len;
            count += added;
            if (from + covered < to) return count;  // out of iovecs inside the payload: the trailer waits
            skip = 0;
        } else {
            skip -= fpdu.payload_size;
        }
        if (count == room) return count;
        iov[count++] = {const_cast<uint8_t*>(fpdu.framing.trailer.data()) + skip, fpdu.framing.trailer_size - skip};
    }
    return count;
}

bool TcpConnection::PumpLocked(std::vector<Finished>* finished) {
    while (fd_ >= 0 && !want_write_) {
        const StreamState state = this->state();
        if (state == StreamState::kEnding) return true;  // nothing more is sent: End resets the stream
        // A responder's FPDUs wait for the initiator's first FPDU (RFC 5044 §7.1.2), unless the consumer ends the
        // connection first: then they go, and the FIN behind them.
        const bool held = state == StreamState::kAwaitRtr && fin_ == Fin::kNone;
        while (!held && raw_sent_ >= raw_out_.size() && fpdus_.size() < kMaxPreparedFpdus && PrepareNextLocked()) {
        }
        iovec iov[kMaxIovecs];
        size_t count = GatherLocked(iov, kMaxIovecs);
        if (count == 0) {
            if (fin_ == Fin::kAfterQueue && out_.empty() && !StreamEnded(state)) {
                ::shutdown(fd_, SHUT_WR);  // NdkDisconnect: a FIN once everything is out (CM-24)
                fin_ = Fin::kSent;
                if (trace_) trace_->Fin(true);
            }
            return true;
        }
        uint64_t bytes = 0;
        for (size_t i = 0; i < count; ++i) bytes += iov[i].iov_len;
        // Wire faults (issue 7 §5): cap this send at the next fault point.
        const WireFaults& faults = options_.faults;
        if (faults.delay_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(faults.delay_us));
        uint64_t cap = bytes;
        for (uint64_t limit : {faults.drop_after_bytes, faults.stall_after_bytes})
            if (limit != 0) cap = std::min(cap, limit - std::min(limit, tx_bytes_));
        if (faults.drop_after_fpdus > tx_fpdus_ && raw_sent_ >= raw_out_.size()) {  // end at the Nth FPDU
            uint64_t through = 0, left = faults.drop_after_fpdus - tx_fpdus_;
            for (auto fpdu = fpdus_.begin(); fpdu != fpdus_.end() && left > 0; ++fpdu, --left)
                through += fpdu->size - fpdu->sent;
            cap = std::min(cap, through);
        }
        const bool corrupt_next = faults.corrupt_byte == tx_bytes_ + 1;
        if (faults.corrupt_byte > tx_bytes_ + 1) cap = std::min(cap, faults.corrupt_byte - 1 - tx_bytes_);
        if (cap == 0 && !corrupt_next) {
            if (faults.drop_after_bytes != 0 && tx_bytes_ >= faults.drop_after_bytes) {
                DropLocked(STATUS_CONNECTION_RESET);
                return false;
            }
            return true;  // stalled: the peer waits inside an FPDU
        }
        ssize_t sent;
        if (corrupt_next) {  // the corrupted byte alone
            const uint8_t byte = *static_cast<const uint8_t*>(iov[0].iov_base) ^ 0xFF;
            sent = ::send(fd_, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (trace_ && sent == 1) trace_->Data(true, &byte, 1);
        } else {
            uint64_t left = cap;
            size_t used = 0;
            while (used < count && left > 0) {
                iov[used].iov_len = static_cast<size_t>(std::min<uint64_t>(iov[used].iov_len, left));
                left -= iov[used].iov_len;
                ++used;
            }
            msghdr message{};
            message.msg_iov = iov;
            message.msg_iovlen = used;
            sent = ::sendmsg(fd_, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (trace_ && sent > 0) trace_->Data(true, iov, used, static_cast<size_t>(sent));
        }
        if (sent < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                DropLocked(StatusFromErrno(errno));
                return false;
            }
            want_write_ = true;
            RearmLocked();
            return true;
        }
        tx_bytes_ += static_cast<uint64_t>(sent);
        if (!AdvanceLocked(static_cast<size_t>(sent), finished)) return false;
    }
    return true;
}

// `sent` bytes of what GatherLocked offered went out: finished FPDUs leave, finished messages complete.
bool TcpConnection::AdvanceLocked(size_t sent, std::vector<Finished>* finished) {
    if (raw_sent_ < raw_out_.size()) {
        raw_sent_ += sent;
        if (raw_sent_ == raw_out_.size()) {
            raw_out_.clear();
            raw_sent_ = 0;
        }
        return true;
    }
    while (sent > 0 && !fpdus_.empty()) {
        Fpdu& fpdu = fpdus_.front();
        const size_t take = std::min<size_t>(sent, fpdu.size - fpdu.sent);
        fpdu.sent += static_cast<uint32_t>(take);
        sent -= take;
        if (fpdu.sent < fpdu.size) return true;
        ++tx_fpdus_;
        OutMessage* done = fpdu.last ? fpdu.message : nullptr;
        fpdus_.pop_front();
        if (done != nullptr) {
            // The front message, except behind a Terminate (QueueTerminateLocked moved a flushed one first).
            size_t index = 0;
            while (index < out_.size() && out_[index].get() != done) ++index;
            std::unique_ptr<OutMessage> message = std::move(out_[index]);
            out_.erase(out_.begin() + static_cast<std::ptrdiff_t>(index));
            if (index < prepared_messages_) --prepared_messages_;
            if (message->request) finished->push_back({std::move(message->request), {}});
            if (message->inbound_read) inbound_reads_.fetch_sub(1, std::memory_order_acq_rel);
        }
        if (options_.faults.drop_after_fpdus != 0 && tx_fpdus_ >= options_.faults.drop_after_fpdus) {
            DropLocked(STATUS_CONNECTION_RESET);
            return false;
        }
    }
    return true;
}

void TcpConnection::RearmLocked() {
    if (watched_ != nullptr) progress_->Modify(watched_, WantedEventsLocked());
}

uint32_t TcpConnection::WantedEventsLocked() const {
    if (state() == StreamState::kDraining) return want_write_ ? EPOLLOUT : 0u;  // nothing is read any more
    return (peer_fin_.load() ? 0u : static_cast<uint32_t>(EPOLLIN | EPOLLRDHUP)) | (want_write_ ? EPOLLOUT : 0u);
}

void TcpConnection::RunFinished(std::vector<Finished>* finished) {
    for (Finished& entry : *finished) {
        engine::QueuePair* owner = entry.request->owner;
        owner->OnSubmittedDone(std::move(entry.request), entry.result);
    }
    finished->clear();
}

}  // namespace softndk::transport
