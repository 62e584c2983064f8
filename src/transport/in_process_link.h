// The in-process transport: two QPs of one process joined directly. Each side's Transport runs the other
// side's inbound handlers on the initiator's thread, so bytes move with one copy and no parsing. Deferred, it
// hands every request to its adapter's progress engine instead and the request completes later, as on a wire: the
// engine's posting order, READ_FENCE and read limits then work for real (SOFTNDK_TRANSPORT=deferred).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

#include "engine/progress_engine.h"
#include "engine/queue_pair.h"
#include "engine/transport.h"

namespace softndk::transport {

class InProcessLink {
public:
    // Called once, on the thread that detected it, when either side terminates the connection.
    using TerminateHook = std::function<void(uint32_t provider_error)>;

    // With progress engines given (one per side: its adapter's), the link is deferred.
    InProcessLink(engine::QueuePair* active, engine::QueuePair* passive, TerminateHook on_terminate,
                  engine::ProgressEngine* active_progress = nullptr,
                  engine::ProgressEngine* passive_progress = nullptr);
    InProcessLink(const InProcessLink&) = delete;
    InProcessLink& operator=(const InProcessLink&) = delete;

    // Associates both QPs with their ends and the negotiated read limits (index 0 = active side).
    void Start(const uint32_t inbound_limit[2], const uint32_t outbound_limit[2]);
    // Marks both QPs connected (NdkCompleteConnect / NdkAccept done).
    void Establish();
    // Graceful disconnect from `side`: the other side's QP stops sending (no flush, CM-27).
    void PeerDisconnected(int side);
    // Both QPs stop taking posts (QP-07/08). True when no post is running on either side now; otherwise
    // `on_idle` runs once the last one has left, on its thread. Never waits (CB-12). Only the first call touches
    // the QPs (a later one may come after a QP was closed); later calls join its wait.
    bool Shutdown(std::function<void()> on_idle);
    void Terminate(uint32_t provider_error);
    bool terminated() const { return terminated_.load(std::memory_order_acquire); }

private:
    class End : public engine::Transport {
    public:
        End(InProcessLink* link, int side) : link_(link), side_(side) {}
        engine::InboundResult Send(const engine::PieceList& payload, bool solicited, bool invalidate,
                                   uint32_t token) override {
            return link_->qp_[1 - side_]->OnSend(payload, solicited, invalidate, token);
        }
        engine::InboundResult Write(uint32_t token, uint64_t address, const engine::PieceList& payload) override {
            return link_->qp_[1 - side_]->OnWrite(token, address, payload);
        }
        engine::InboundResult Read(uint32_t token, uint64_t address, const engine::PieceList& sink) override {
            return link_->qp_[1 - side_]->OnRead(token, address, sink);
        }
        void Terminate(uint32_t provider_error) override { link_->Terminate(provider_error); }
        bool completes_inline() const override { return !link_->deferred_; }
        void Submit(std::unique_ptr<engine::TransportRequest> request) override;

    private:
        InProcessLink* link_;
        int side_;
    };

    // Deferred links: runs `request` on the delivery thread (a read's second hop is its Response).
    void Deliver(int side, engine::TransportRequest* request, bool response);
    // One arrival per QP gate going idle, one for the first Shutdown call itself; the last finishes the join.
    bool Arrive(bool by_first_caller);

    engine::QueuePair* qp_[2];
    End ends_[2];
    engine::ProgressEngine* progress_[2];
    const bool deferred_;
    std::atomic<uint32_t> reads_in_flight_[2] = {0, 0};  // inbound Read Requests per responder side (IRD)
    std::mutex mutex_;                                   // the shutdown join, never on the post path
    bool shut_down_ = false;
    bool idle_ = false;
    int arrivals_pending_ = 0;
    std::function<void()> first_action_;
    std::vector<std::function<void()>> waiters_;
    TerminateHook on_terminate_;
    std::atomic<bool> terminated_{false};
};

}  // namespace softndk::transport
