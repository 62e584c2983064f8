// TcpConnection, receiving: the FPDU stream parsed as it arrives, on the lane. For each FPDU the first 20 bytes
// are read (the length field and a whole untagged header; a Read Request reads its last 28 header bytes
// next), the header goes through the wire parser and the one access check, and the payload is then read
// straight into the target pages together with the trailer and up to 1 KiB more (the spill; after a small FPDU,
// 64 KiB into the thread's buffer): one readv per large FPDU, and a run of small FPDUs comes in with one readv. What a
// read brings beyond its FPDU is consumed from the spill before the socket is read again, so at most 1 KiB of a payload
// (and the first 4 bytes that come with a tagged header) is copied rather than placed. With CRC on, the payload is
// verified in a one-FPDU staging buffer before it is placed (RFC 5044 §6.1: a bad FPDU changes nothing).
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "mem/access_check.h"
#include "transport/tcp_connection_internal.h"

namespace softndk::transport {
namespace {

constexpr size_t kMaxIovecs = 64;

// Issue 21: across an Ethernet MTU an FPDU carries at most 1460 payload bytes, so a 1 MiB Write is about 720
// FPDUs, and a readv each made the system calls, not the bytes, the cost (0.18× iperf3 at MTU 1500). After a
// small FPDU the next read takes up to kLargeSpill bytes into this thread's buffer and parses them there (their
// payloads are copied, one readv for dozens of FPDUs); after a large one the per-connection 1 KiB spill keeps
// the payload landing straight in its pages. Whatever a read brings is consumed before it returns, so the
// buffer can be the thread's.
constexpr size_t kLargeSpill = 64 * 1024;
constexpr size_t kSmallFpduPayload = 2 * 1024;
constexpr uint32_t kFpdusPerWake = 2048;
constexpr int kReadsPerWake = 64;

std::atomic<uint32_t> most_reads_in_one_wake{0};

uint8_t* ThreadSpill() {
    thread_local std::unique_ptr<uint8_t[]> spill;  // a pointer in TLS: the library may be loaded with dlopen
    if (!spill) spill.reset(new uint8_t[kLargeSpill]);
    return spill.get();
}

void CopyIntoPieces(const std::vector<engine::Piece>& pieces, uint64_t offset, const uint8_t* data, size_t size) {
    for (const engine::Piece& piece : pieces) {
        if (size == 0) return;
        if (offset >= piece.length) {
            offset -= piece.length;
            continue;
        }
        const size_t bytes = static_cast<size_t>(std::min<uint64_t>(piece.length - offset, size));
        std::memcpy(piece.data + offset, data, bytes);
        data += bytes;
        size -= bytes;
        offset = 0;
    }
}

}  // namespace

uint32_t MostReadsInOneWake() {
    return most_reads_in_one_wake.load(std::memory_order_relaxed);
}

void ResetMostReadsInOneWake() {
    most_reads_in_one_wake.store(0, std::memory_order_relaxed);
}

// The Read Responses to the Read Requests of one batch of reads go out together, in one sendmsg.
void TcpConnection::ReadFpdus() {
    rx_->reads_this_wake = 0;
    ReadFpdusBatch();
    const uint32_t reads = rx_->reads_this_wake;
    uint32_t most = most_reads_in_one_wake.load(std::memory_order_relaxed);
    while (reads > most && !most_reads_in_one_wake.compare_exchange_weak(most, reads, std::memory_order_relaxed)) {
    }
    if (!responses_queued_) return;
    responses_queued_ = false;
    std::vector<Finished> finished;
    {
        std::lock_guard lock(send_mutex_);
        PumpLocked(&finished);
    }
    RunFinished(&finished);
}

void TcpConnection::ReadFpdusBatch() {
    Rx& rx = *rx_;
    // Fairness on a shared lane (issue 18 §2): at most kReadsPerWake reads and kFpdusPerWake FPDUs per wake (a
    // wake of large FPDUs ends by the reads, WIRE_AWakeReadsAtMost64TimesFromAPeerFloodingLargeWrites; one of small
    // ones by the FPDUs); with many FPDUs to a read, a peer flooding tiny Writes must not hold the lane for
    // megabytes of headers (FloodFairnessTest). Level-triggered epoll brings the rest at the next wake.
    rx.fpdus_this_wake = 0;
    for (int round = 0; round < kReadsPerWake && !ended(); ++round) {
        if (rx.fpdus_this_wake >= kFpdusPerWake) return;
        if (!ConsumeSpill()) return;  // bytes read with the previous FPDU come first
        iovec iov[kMaxIovecs];
        size_t count = 0;
        bool payload_whole = true;  // the iovecs reach the FPDU's end: what follows goes to the spill
        if (rx.step == Rx::Step::kHead) {
            iov[count++] = {rx.head + rx.head_have, rx.head_need - rx.head_have};
        } else {
            if (rx.payload_done < rx.payload_size) {
                switch (rx.sink) {
                    case Rx::Sink::kPlace: {
                        count += AppendIovecs(rx.place, rx.payload_done, rx.payload_size, iov, kMaxIovecs - 2);
                        size_t covered = 0;
                        for (size_t i = 0; i < count; ++i) covered += iov[i].iov_len;
                        payload_whole = rx.payload_done + covered == rx.payload_size;
                        break;
                    }
                    case Rx::Sink::kStaging:
                        iov[count++] = {rx.staging.data() + rx.payload_done, rx.payload_size - rx.payload_done};
                        break;
                    case Rx::Sink::kSmall:
                        iov[count++] = {rx.small + rx.payload_done, rx.payload_size - rx.payload_done};
                        break;
                }
            }
            if (payload_whole && rx.trailer_have < rx.trailer_size)
                iov[count++] = {rx.trailer + rx.trailer_have, rx.trailer_size - rx.trailer_have};
        }
        if (payload_whole) {
            const bool large = rx.small_run && (rx.step == Rx::Step::kHead || rx.payload_size <= kSmallFpduPayload);
            uint8_t* spill = large ? ThreadSpill() : rx.spill;
            rx.spill_data = spill;
            iov[count++] = {spill, large ? kLargeSpill : sizeof(rx.spill)};
        }
        size_t requested = 0;
        for (size_t i = 0; i < count; ++i) requested += iov[i].iov_len;
        const ssize_t got = ::readv(fd_, iov, static_cast<int>(count));
        ++rx.reads_this_wake;
        if (trace_) trace_->Received(got, iov, count);
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
            Lost(StatusFromErrno(errno));
            return;
        }
        if (got == 0) {
            const bool boundary = rx.step == Rx::Step::kHead && rx.head_have == 0 && !rx.send_open && !rx.tagged_open;
            // Before an initiator's RTR the connection is not established: its FIN abandons the attempt.
            const bool established =
                state() == StreamState::kRdma || (state() == StreamState::kAwaitRtr && !first_fpdu_is_rtr_);
            if (!boundary || !established) {  // the stream ended inside an FPDU or a message
                Lost(STATUS_CONNECTION_ABORTED);
                return;
            }
            // The peer's FIN (CM-26/27): a graceful disconnect. Reading stops; sending may finish.
            if (peer_fin_.exchange(true)) return;
            {
                std::lock_guard lock(send_mutex_);
                RearmLocked();
            }
            if (qp_ != nullptr) qp_->EnterError(false);
            Emit(Event::kPeerClosed);
            return;
        }
        heard_.store(true, std::memory_order_relaxed);  // no more kicks (ScheduleKicks)
        rx_bytes_ += static_cast<uint64_t>(got);
        size_t n = static_cast<size_t>(got);
        if (rx.step == Rx::Step::kHead) {
            const size_t take = std::min(n, rx.head_need - rx.head_have);
            rx.head_have += take;
            n -= take;
        } else {
            size_t take = std::min(n, rx.payload_size - rx.payload_done);
            rx.payload_done += take;
            n -= take;
            take = std::min(n, rx.trailer_size - rx.trailer_have);
            rx.trailer_have += take;
            n -= take;
        }
        rx.spill_at = 0;
        rx.spill_have = n;  // the next FPDUs' first bytes
        if (!ConsumeSpill()) return;
        // A short read drained the socket: the next readv would only say EAGAIN (level-triggered, so epoll
        // reports the next bytes).
        if (static_cast<size_t>(got) < requested) return;
    }
}

// Everything that is complete now, FPDU after FPDU, taking the bytes the spill holds first. False once the
// connection failed or closed.
bool TcpConnection::ConsumeSpill() {
    Rx& rx = *rx_;
    while (!ended()) {
        const uint8_t* spill = rx.spill_data + rx.spill_at;
        size_t available = rx.spill_have - rx.spill_at;
        if (rx.step == Rx::Step::kHead) {
            const size_t take = std::min(available, rx.head_need - rx.head_have);
            std::memcpy(rx.head + rx.head_have, spill, take);
            rx.head_have += take;
            rx.spill_at += take;
            uint16_t ulpdu = 0;
            if (rx.head_have < rx.head_need && wire::PeekFpduLength({rx.head, rx.head_have}, &ulpdu).ok()) {
                if (ulpdu < wire::kDdpTaggedHeaderSize)  // no header fits: nothing else can be read
                    return Fail(wire::TerminateCauseFor(wire::WireStatus::kUlpduShorterThanHeader, false),
                                STATUS_CONNECTION_ABORTED, nullptr, 0);
            }
            if (rx.head_have < rx.head_need) return true;
            if (!ProcessHead()) return false;
            continue;
        }
        size_t take = std::min(available, rx.payload_size - rx.payload_done);
        if (take > 0) TakePayload(spill, take);
        spill += take;
        available -= take;
        rx.spill_at += take;
        take = std::min(available, rx.trailer_size - rx.trailer_have);
        std::memcpy(rx.trailer + rx.trailer_have, spill, take);
        rx.trailer_have += take;
        rx.spill_at += take;
        if (rx.payload_done < rx.payload_size || rx.trailer_have < rx.trailer_size) return true;
        rx.small_run = rx.payload_size <= kSmallFpduPayload;
        ++rx.fpdus_this_wake;
        if (!FinishFpdu()) return false;
        rx.head_have = 0;
        rx.head_need = Rx::kLookahead;
        rx.step = Rx::Step::kHead;
    }
    return false;
}

// `size` payload bytes that were read into the spill go where the payload goes.
void TcpConnection::TakePayload(const uint8_t* data, size_t size) {
    Rx& rx = *rx_;
    switch (rx.sink) {
        case Rx::Sink::kPlace:
            CopyIntoPieces(rx.place, rx.payload_done, data, size);
            break;
        case Rx::Sink::kStaging:
            std::memcpy(rx.staging.data() + rx.payload_done, data, size);
            break;
        case Rx::Sink::kSmall:
            std::memcpy(rx.small + rx.payload_done, data, size);
            break;
    }
    rx.payload_done += size;
}

// The FPDU's first bytes are in: parse the header, check access and plan where its payload goes.
bool TcpConnection::ProcessHead() {
    Rx& rx = *rx_;
    wire::PeekFpduLength({rx.head, rx.head_have}, &rx.ulpdu_length);
    // A ULPDU shorter than its header (length 0 included) holds no whole DDP header, and the bytes behind it are
    // the next FPDU's: the header is parsed from the ULPDU's own bytes only, and the Terminate is LLP/MPA 0x03
    // with no header copy (siw sends the same cause; issue 18 §3.5).
    const wire::TerminateCause too_short = wire::TerminateCauseFor(wire::WireStatus::kUlpduShorterThanHeader, false);
    if (rx.ulpdu_length < wire::kDdpTaggedHeaderSize)  // shorter than any header
        return RefuseHead(too_short, STATUS_CONNECTION_ABORTED, nullptr, 0);
    const std::span<const uint8_t> ulpdu(rx.head + wire::kFpduLengthSize,
                                         std::min<size_t>(rx.head_have - wire::kFpduLengthSize, rx.ulpdu_length));
    const wire::ParseResult parsed = wire::ParseSegmentHeader(ulpdu, &rx.header);
    const size_t header_size = parsed.size;
    const size_t offender = wire::kFpduLengthSize + std::min(header_size, wire::kDdpUntaggedHeaderSize);
    if ((parsed.ok() || parsed.status == wire::WireStatus::kNeedMoreBytes) && rx.ulpdu_length < header_size)
        return RefuseHead(too_short, STATUS_CONNECTION_ABORTED, nullptr, 0);
    if (parsed.status == wire::WireStatus::kNeedMoreBytes) {
        rx.head_need = wire::kFpduLengthSize + header_size;  // a Read Request: 28 more header bytes
        return true;
    }
    if (!parsed.ok())
        return RefuseHead(wire::TerminateCauseFor(parsed.status, rx.header.tagged), STATUS_CONNECTION_ABORTED, rx.head,
                          std::min(rx.head_have, wire::kFpduLengthSize + wire::kDdpUntaggedHeaderSize));
    rx.header_size = header_size;
    rx.payload_size = rx.ulpdu_length - header_size;
    rx.payload_done = 0;
    rx.trailer_size = wire::FpduPadSize(rx.ulpdu_length) + wire::kFpduCrcSize;
    rx.trailer_have = 0;
    rx.place.clear();
    rx.sink = crc_ ? Rx::Sink::kStaging : Rx::Sink::kPlace;
    const wire::SegmentHeader& header = rx.header;
    if (state() == StreamState::kAwaitRtr && first_fpdu_is_rtr_) {  // RFC 6581 §6: the first FPDU is our RTR
        const bool write_rtr = header.opcode == wire::RdmapOpcode::kWrite && rx.payload_size == 0;
        const bool read_rtr = header.opcode == wire::RdmapOpcode::kReadRequest && header.read.size == 0;
        if (!(expect_read_rtr_ ? read_rtr : write_rtr))
            return RefuseHead(wire::term::kLlpNoMatchingRtr, STATUS_CONNECTION_ABORTED, rx.head, offender);
    }
    if (header.tagged && rx.tagged_open &&
        (header.opcode != rx.tagged_opcode || header.stag != rx.tagged_stag || header.tagged_offset != rx.tagged_next))
        return RefuseHead(wire::term::kRdmapUnexpectedOpcode, STATUS_CONNECTION_ABORTED, rx.head, offender);  // §3.7
    bool planned = true;
    switch (header.opcode) {
        case wire::RdmapOpcode::kWrite:
        case wire::RdmapOpcode::kReadResponse:
            planned = PlanTagged(rx.head);
            break;
        case wire::RdmapOpcode::kReadRequest:
            if (rx.payload_size != 0)
                return RefuseHead(wire::term::kDdpUntaggedMessageTooLong, STATUS_CONNECTION_ABORTED, rx.head, offender);
            if (header.msn != rx.expected_read_msn)  // RFC 5041 §5.3: QN 1 MSNs in order
                return RefuseHead(wire::term::kDdpUntaggedMsnRange, STATUS_CONNECTION_ABORTED, rx.head, offender);
            ++rx.expected_read_msn;
            break;
        case wire::RdmapOpcode::kTerminate:
            // RFC 5040 §4.8: a Terminate is the one message of queue 2: MSN 1, MO 0, one FPDU (issue 18 §3.3).
            // Another is no Terminate to honour but a malformed untagged segment, answered as such.
            if (header.msn != 1)
                return RefuseHead(wire::term::kDdpUntaggedMsnRange, STATUS_CONNECTION_ABORTED, rx.head, offender);
            if (header.message_offset != 0)
                return RefuseHead(wire::term::kDdpUntaggedInvalidMo, STATUS_CONNECTION_ABORTED, rx.head, offender);
            if (rx.payload_size > sizeof(rx.small))
                return RefuseHead(wire::term::kDdpUntaggedMessageTooLong, STATUS_CONNECTION_ABORTED, rx.head, offender);
            rx.sink = Rx::Sink::kSmall;
            break;
        default:
            planned = PlanSend();
            break;
    }
    if (!planned) return false;
    if (rx.held.active) return true;  // RefuseHead set the body up: read for the CRC only
    rx.step = Rx::Step::kBody;
    const size_t extra = rx.head_have - wire::kFpduLengthSize - header_size;
    PlacePrefix(rx.head + wire::kFpduLengthSize + header_size, extra);
    return true;
}

bool TcpConnection::PlanTagged(const uint8_t* head) {
    Rx& rx = *rx_;
    const wire::SegmentHeader& header = rx.header;
    const size_t offender = wire::kFpduLengthSize + wire::kDdpTaggedHeaderSize;
    if (header.tagged_offset + rx.payload_size < header.tagged_offset)  // RFC 5041 §7.2: the TO wraps
        return RefuseHead(wire::term::kDdpTaggedToWrap, STATUS_CONNECTION_ABORTED, head, offender);
    if (header.opcode == wire::RdmapOpcode::kWrite) {
        if (qp_ == nullptr)
            return RefuseHead(wire::term::kDdpTaggedInvalidStag, STATUS_CONNECTION_ABORTED, head, offender);
        rx.grant.Clear();
        const engine::InboundResult access =
            qp_->ResolveTagged(header.stag, header.tagged_offset, rx.payload_size, mem::kRightRemoteWrite, &rx.grant);
        if (!NT_SUCCESS(access.status))
            return RefuseHead(CauseOfProviderError(access.provider_error), STATUS_CONNECTION_ABORTED, head, offender);
        rx.place = rx.grant.pieces();
        rx.response_for = nullptr;
    } else {
        // A Read Response matches the oldest outstanding request exactly (siw-on-the-wire §3.7).
        wire::TerminateCause refusal{};
        bool matches = false;
        {
            std::lock_guard lock(reads_mutex_);  // not held into Fail: End takes it (found by a crafted test)
            OutstandingRead* front = reads_.empty() ? nullptr : &reads_.front();
            matches = front != nullptr && header.stag == front->sink_stag && header.tagged_offset == front->received &&
                      front->received + rx.payload_size <= front->total &&
                      header.last == (front->received + rx.payload_size == front->total);
            if (matches) {
                if (front->request)
                    SlicePieces(front->request->local.pieces(), header.tagged_offset, rx.payload_size, &rx.place);
                rx.response_for = front;
            } else {
                refusal = front == nullptr || header.stag != front->sink_stag ? wire::term::kDdpTaggedInvalidStag
                                                                              : wire::term::kDdpTaggedBaseOrBounds;
            }
        }
        if (!matches) return RefuseHead(refusal, STATUS_CONNECTION_ABORTED, head, offender);
    }
    rx.tagged_open = !header.last;
    rx.tagged_opcode = header.opcode;
    rx.tagged_stag = header.stag;
    rx.tagged_next = header.tagged_offset + rx.payload_size;
    return true;
}

bool TcpConnection::PlanSend() {
    Rx& rx = *rx_;
    const wire::SegmentHeader& header = rx.header;
    const size_t offender = wire::kFpduLengthSize + wire::kDdpUntaggedHeaderSize;
    if (header.msn != rx.expected_send_msn)  // RFC 5041 §5.3 (siw: DDP/untagged/0x03)
        return RefuseHead(wire::term::kDdpUntaggedMsnRange, STATUS_CONNECTION_ABORTED, rx.head, offender);
    if (header.message_offset != (rx.send_open ? rx.send_received : 0))
        return RefuseHead(wire::term::kDdpUntaggedInvalidMo, STATUS_CONNECTION_ABORTED, rx.head, offender);
    if (!rx.send_open) {
        if (qp_ == nullptr)
            return RefuseHead(wire::term::kDdpUntaggedNoBuffer, STATUS_CONNECTION_ABORTED, rx.head, offender);
        rx.receive.Clear();
        const engine::InboundResult taken = qp_->BeginReceive(&rx.receive, &rx.receive_context);
        if (!NT_SUCCESS(taken.status))
            return RefuseHead(taken.provider_error == ProviderErrorOf(wire::term::kDdpUntaggedNoBuffer) ||
                                      taken.status == STATUS_CANCELLED
                                  ? wire::term::kDdpUntaggedNoBuffer
                                  : wire::term::kRdmapCatastrophicLocal,
                              STATUS_CONNECTION_ABORTED, rx.head, offender);
        rx.send_open = true;
        rx.send_received = 0;
    }
    if (header.message_offset + static_cast<uint64_t>(rx.payload_size) > rx.receive.total()) {
        // Larger than the receive (RFC 5041 §7.3 "message too long"): the receive completes in error.
        return RefuseHead(wire::term::kDdpUntaggedMessageTooLong, STATUS_CONNECTION_ABORTED, rx.head, offender,
                          /*receive_too_long=*/true);
    }
    SlicePieces(rx.receive.pieces(), header.message_offset, rx.payload_size, &rx.place);
    return true;
}

bool TcpConnection::RefuseHead(wire::TerminateCause cause, NTSTATUS status, const uint8_t* offender,
                               size_t offender_size, bool receive_too_long) {
    Rx& rx = *rx_;
    // A header copy never reaches past the ULPDU into the next FPDU's bytes (issue 18 §3.5).
    if (offender == rx.head) offender_size = std::min(offender_size, wire::kFpduLengthSize + rx.ulpdu_length);
    if (!crc_ || rx.held.active) {
        if (receive_too_long) EndReceiveTooLong();
        return Fail(cause, status, offender, offender_size);
    }
    rx.held.active = true;
    rx.held.receive_too_long = receive_too_long;
    rx.held.cause = cause;
    rx.held.status = status;
    rx.held.size = std::min(offender_size, sizeof(rx.held.copy));
    if (offender != nullptr) std::memcpy(rx.held.copy, offender, rx.held.size);
    // The rest of the FPDU is read only to check its CRC: the whole ULPDU into staging, placed nowhere.
    rx.header_size = 0;
    rx.payload_size = rx.ulpdu_length;
    rx.trailer_size = wire::FpduPadSize(rx.ulpdu_length) + wire::kFpduCrcSize;
    rx.trailer_have = 0;
    rx.place.clear();
    rx.grant.Clear();
    rx.response_for = nullptr;
    rx.sink = Rx::Sink::kStaging;
    rx.step = Rx::Step::kBody;
    PlacePrefix(rx.head + wire::kFpduLengthSize, rx.head_have - wire::kFpduLengthSize);
    return true;
}

void TcpConnection::EndReceiveTooLong() {
    Rx& rx = *rx_;
    qp_->EndReceive(rx.receive_context, 0, false, false, 0, STATUS_BUFFER_OVERFLOW,
                    ProviderErrorOf(wire::term::kDdpUntaggedMessageTooLong));
    rx.send_open = false;
    rx.receive.Clear();
}

// Up to 4 payload bytes that came with a tagged header, then the start of the trailer.
void TcpConnection::PlacePrefix(const uint8_t* data, size_t size) {
    Rx& rx = *rx_;
    const size_t payload = std::min(size, rx.payload_size);
    if (payload > 0) {
        switch (rx.sink) {
            case Rx::Sink::kPlace:
                CopyIntoPieces(rx.place, 0, data, payload);
                break;
            case Rx::Sink::kStaging:
                std::memcpy(rx.staging.data(), data, payload);
                break;
            case Rx::Sink::kSmall:
                std::memcpy(rx.small, data, payload);
                break;
        }
    }
    rx.payload_done = payload;
    const size_t trailer = std::min(size - payload, rx.trailer_size);
    std::memcpy(rx.trailer, data + payload, trailer);
    rx.trailer_have = trailer;
}

bool TcpConnection::FinishFpdu() {
    Rx& rx = *rx_;
    const size_t offender = wire::kFpduLengthSize + std::min(rx.header_size, wire::kDdpUntaggedHeaderSize);
    if (crc_) {  // RFC 5044 §6.1: verified before anything is placed
        const uint8_t* payload = rx.sink == Rx::Sink::kSmall ? rx.small : rx.staging.data();
        if (!wire::FpduCrcMatches({rx.head, wire::kFpduLengthSize + rx.header_size}, {payload, rx.payload_size},
                                  {rx.trailer, rx.trailer_size}))  // an open receive is flushed by End
            return Fail(wire::term::kLlpCrcError, STATUS_CONNECTION_ABORTED, rx.head, offender);
        if (rx.held.active) {  // the CRC is good: the header's own refusal goes out
            if (rx.held.receive_too_long) EndReceiveTooLong();
            return Fail(rx.held.cause, rx.held.status, rx.held.copy, rx.held.size);
        }
        if (rx.sink == Rx::Sink::kStaging) CopyIntoPieces(rx.place, 0, rx.staging.data(), rx.payload_size);
    }
    const wire::SegmentHeader& header = rx.header;
    bool ok = true;
    if (header.opcode == wire::RdmapOpcode::kWrite) {
        rx.grant.Clear();  // the reference goes once the segment is placed
    } else if (header.opcode == wire::RdmapOpcode::kReadResponse) {
        std::unique_ptr<engine::TransportRequest> done;
        {
            std::lock_guard lock(reads_mutex_);
            OutstandingRead* front = rx.response_for;
            front->received += rx.payload_size;
            if (header.last) {
                done = std::move(front->request);
                reads_.pop_front();
            }
        }
        rx.response_for = nullptr;
        if (done) {
            engine::QueuePair* owner = done->owner;
            owner->OnSubmittedDone(std::move(done), {});
        }
    } else if (wire::IsSendOpcode(header.opcode)) {
        rx.send_received += rx.payload_size;
        if (header.last) {
            const engine::InboundResult verdict =
                qp_->EndReceive(rx.receive_context, rx.send_received, wire::IsSolicitedOpcode(header.opcode),
                                wire::CarriesInvalidateStag(header.opcode), header.invalidate_stag());
            rx.send_open = false;
            rx.receive.Clear();
            ++rx.expected_send_msn;
            if (!NT_SUCCESS(verdict.status))  // TOK-14: a bad Send with Invalidate terminates
                return Fail(wire::term::kRdmapOperationCannotInvalidate, STATUS_CONNECTION_ABORTED, rx.head, offender);
        }
    } else if (header.opcode == wire::RdmapOpcode::kReadRequest) {
        ok = HandleReadRequest();
    } else if (header.opcode == wire::RdmapOpcode::kTerminate) {
        return HandleTerminate();
    }
    rx.place.clear();
    if (ok && state() == StreamState::kAwaitRtr) FirstFpduIn();
    return ok && !ended();
}

// RFC 5044 §7.1.2: the initiator's first FPDU is in, so the responder's held FPDUs go now (from the EPOLLOUT
// handler); with P2P it was the RTR, and NdkAccept completes (CM-08).
void TcpConnection::FirstFpduIn() {
    {
        std::lock_guard lock(send_mutex_);
        if (!MoveToLocked(StreamState::kRdma)) return;  // dropped meanwhile: End is on its way
        if (!out_.empty() && !want_write_) {
            want_write_ = true;
            RearmLocked();
        }
    }
    if (first_fpdu_is_rtr_) Emit(Event::kEstablished);
}

bool TcpConnection::HandleReadRequest() {
    Rx& rx = *rx_;
    const wire::ReadRequestFields& read = rx.header.read;
    const size_t offender = wire::kFpduLengthSize + wire::kReadRequestHeaderSize;
    const bool rtr = state() == StreamState::kAwaitRtr && first_fpdu_is_rtr_;
    // Beyond IRD, rounded up to a power of two as siw sizes (and fills) its queues (siw: "IRQ exceeded")
    if (!rtr && inbound_reads_.load(std::memory_order_acquire) >= inbound_read_capacity_)
        return Fail(wire::term::kRdmapRemoteStreamCatastrophic, STATUS_CONNECTION_ABORTED, rx.head, offender);
    auto response = std::make_unique<OutMessage>();
    response->opcode = wire::RdmapOpcode::kReadResponse;
    response->stag = read.sink_stag;
    response->offset = read.sink_offset;
    response->total = read.size;
    if (read.size > 0) {
        if (qp_ == nullptr) return Fail(wire::term::kRdmapInvalidStag, STATUS_CONNECTION_ABORTED, rx.head, offender);
        const engine::InboundResult access = qp_->ResolveTagged(read.source_stag, read.source_offset, read.size,
                                                                mem::kRightRemoteRead, &response->source);
        if (!NT_SUCCESS(access.status))
            return Fail(read.source_offset + read.size < read.source_offset
                            ? wire::term::kRdmapToWrap
                            : CauseOfProviderError(access.provider_error),
                        STATUS_CONNECTION_ABORTED, rx.head, offender);
    }
    response->pieces = &response->source.pieces();
    // A Read RTR takes no IRD slot: the initiator does not count it against its ORD (RFC 6581 §6 makes it part
    // of the handshake), so a Read posted at once behind it must still fit (issue 18 §3.1).
    response->inbound_read = !rtr;
    if (!rtr) inbound_reads_.fetch_add(1, std::memory_order_acq_rel);
    std::vector<Finished> finished;
    Enqueue(std::move(response), &finished, /*pump=*/false);  // ReadFpdus sends it at the end of the batch
    responses_queued_ = true;
    RunFinished(&finished);
    return true;
}

bool TcpConnection::HandleTerminate() {
    Rx& rx = *rx_;
    wire::TerminateMessage message;
    const wire::ParseResult decoded = wire::DecodeTerminateBody({rx.small, rx.payload_size}, &message);
    const wire::TerminateCause cause = decoded.ok() ? message.cause : wire::term::kRdmapOperationUnspecified;
    const uint32_t provider_error = ProviderErrorOf(cause);
    // The header copy names the refused message. A Read of ours is still outstanding: it completes with the
    // status the refusal means, as in-process (QP-16); a Send or Write already completed when it left.
    if (decoded.ok() && message.has_ddp_header) {
        uint8_t copy[wire::kReadRequestHeaderSize];
        size_t size = std::min(message.ddp_header.size(), sizeof(copy));
        std::memcpy(copy, message.ddp_header.data(), size);
        if (message.has_rdmap_header) {
            const size_t more = std::min(message.rdmap_header.size(), sizeof(copy) - size);
            std::memcpy(copy + size, message.rdmap_header.data(), more);
            size += more;
        }
        wire::SegmentHeader offender;
        const bool read_request = wire::ParseSegmentHeader({copy, size}, &offender).ok() &&
                                  offender.opcode == wire::RdmapOpcode::kReadRequest;
        if (read_request) {
            std::unique_ptr<engine::TransportRequest> refused;
            {
                std::lock_guard lock(reads_mutex_);
                for (auto it = reads_.begin(); it != reads_.end(); ++it) {
                    if (it->sink_stag != offender.read.sink_stag) continue;
                    refused = std::move(it->request);
                    reads_.erase(it);
                    break;
                }
            }
            if (refused != nullptr) {
                std::vector<Finished> finished;
                finished.push_back({std::move(refused), {engine::RemoteRefusalStatus(provider_error), provider_error}});
                RunFinished(&finished);
            }
        }
    }
    // RFC 5040 §5.4: the stream is over; we answer nothing (siw does the same).
    End(STATUS_CONNECTION_ABORTED, provider_error, true);
    return false;
}

}  // namespace softndk::transport
