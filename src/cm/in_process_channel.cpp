// The in-process channel: each method is one step of the peer, called directly. No lock of the pair is held
// while a side is called, and no side calls in here with its lock held.
#include "cm/in_process_channel.h"

#include <atomic>
#include <mutex>

#include "common/last_error.h"
#include "transport/in_process_link.h"

namespace softndk::cm {

struct InProcessPair {
    std::mutex mutex;  // the link and the QPs; never held while a side is called
    std::weak_ptr<ConnectionSide> side[2];
    engine::QueuePair* qp[2] = {nullptr, nullptr};
    InProcessEnd end[2];
    std::shared_ptr<transport::InProcessLink> link;
    Endpoint address[2];                         // [0] the initiator's, [1] the destination
    std::atomic<bool> gone[2] = {false, false};  // the side closed or aborted
    std::atomic<bool> terminated{false};

    // Runs `step` with the other side's ConnectionSide, when it is still there.
    template <class Step>
    void ToPeerOf(int index, Step step) {
        std::shared_ptr<ConnectionSide> peer;
        {
            std::lock_guard lock(mutex);
            peer = side[1 - index].lock();
        }
        if (peer) step(*peer);
    }
};

namespace {

class InProcessChannel final : public PeerChannel {
public:
    InProcessChannel(std::shared_ptr<InProcessPair> pair, int index) : pair_(std::move(pair)), index_(index) {}

    void Bind(const std::shared_ptr<ConnectionSide>& side) override {
        std::lock_guard lock(pair_->mutex);
        pair_->side[index_] = side;
    }

    NTSTATUS Accept(engine::QueuePair* qp, ReadLimits limits, std::vector<uint8_t> private_data) override {
        std::shared_ptr<ConnectionSide> active;
        {
            // The active side's close marks it gone under this lock before it lets its QP go: the link is made
            // only while that QP is still held.
            std::lock_guard lock(pair_->mutex);
            active = pair_->side[0].lock();
            if (!active || pair_->gone[0].load()) return STATUS_CONNECTION_ABORTED;  // CM-08
            const uint32_t inbound[2] = {limits.outbound, limits.inbound};
            const uint32_t outbound[2] = {limits.inbound, limits.outbound};
            const bool deferred = pair_->end[0].deferred || end().deferred;
            std::weak_ptr<InProcessPair> weak = pair_;
            pair_->qp[1] = qp;
            pair_->link = std::make_shared<transport::InProcessLink>(
                pair_->qp[0], qp,
                [weak](uint32_t) {
                    // RFC 5040 terminate: both consumers hear of it once (CM-26), on their provider threads.
                    std::shared_ptr<InProcessPair> dead = weak.lock();
                    if (!dead) return;
                    dead->terminated = true;
                    for (int index = 0; index < 2; ++index) {
                        std::shared_ptr<ConnectionSide> side;
                        {
                            std::lock_guard lock(dead->mutex);
                            side = dead->side[index].lock();
                        }
                        if (side)
                            dead->end[index].executor->Post([side] { side->OnFailed(STATUS_CONNECTION_ABORTED); });
                    }
                },
                deferred ? pair_->end[0].progress : nullptr, deferred ? end().progress : nullptr);
            pair_->link->Start(inbound, outbound);
        }
        PeerAnswer answer;
        answer.private_data = std::move(private_data);
        answer.limits = limits;
        // The initiator no longer waits (cancelled, timed out): this accept is aborted like a lost stream's.
        if (!active->OnPeerAnswer(std::move(answer)))
            Self([](ConnectionSide& me) { me.OnFailed(STATUS_CONNECTION_ABORTED); });
        return STATUS_SUCCESS;
    }

    void Reject(std::vector<uint8_t> private_data) override {
        PeerAnswer answer;
        answer.private_data = std::move(private_data);
        answer.reject = true;
        pair_->ToPeerOf(index_, [&answer](ConnectionSide& peer) { peer.OnPeerAnswer(std::move(answer)); });
    }

    void Establish(engine::QueuePair*, ReadLimits) override {
        if (std::shared_ptr<transport::InProcessLink> link = Link()) link->Establish();
        pair_->ToPeerOf(index_, [](ConnectionSide& peer) { peer.OnEstablished(); });
    }

    void Disconnect() override {
        if (std::shared_ptr<transport::InProcessLink> link = Link()) link->PeerDisconnected(index_);  // CM-27
        pair_->ToPeerOf(index_, [](ConnectionSide& peer) { peer.OnPeerDisconnected(); });
    }

    void Close(std::function<void()> done, bool) override {
        std::shared_ptr<transport::InProcessLink> link;
        bool first;
        {
            std::lock_guard lock(pair_->mutex);
            first = !pair_->gone[index_].exchange(true);
            link = pair_->link;
        }
        // The peer sees the connection end (after a graceful disconnect its side is done and ignores it).
        if (first) pair_->ToPeerOf(index_, [](ConnectionSide& peer) { peer.OnFailed(STATUS_CONNECTION_ABORTED); });
        if (!link) {
            if (done) done();
            return;
        }
        // The action keeps the pair (and its link) alive until the posts are out; it runs on their thread.
        if (link->Shutdown([pair = pair_, done] {
                if (done) done();
            }))
            if (done) done();
    }

    bool Lost() override { return pair_->gone[1 - index_].load() || pair_->terminated.load(); }

    NTSTATUS Address(bool peer, Endpoint* out) override {
        *out = pair_->address[peer ? 1 - index_ : index_];  // set before the pair is shared
        return STATUS_SUCCESS;
    }

    bool GaveQpBack(engine::QueuePair*) override {
        std::lock_guard lock(pair_->mutex);
        return pair_->link == nullptr;
    }

private:
    const InProcessEnd& end() const { return pair_->end[index_]; }
    std::shared_ptr<transport::InProcessLink> Link() {
        std::lock_guard lock(pair_->mutex);
        return pair_->link;
    }
    template <class Step>
    void Self(Step step) {
        std::shared_ptr<ConnectionSide> me;
        {
            std::lock_guard lock(pair_->mutex);
            me = pair_->side[index_].lock();
        }
        if (me) step(*me);
    }

    std::shared_ptr<InProcessPair> pair_;
    const int index_;
};

}  // namespace

ChannelOpening OpenInProcessChannel(const std::shared_ptr<ConnectionSide>& side, engine::QueuePair* qp,
                                    InProcessEnd end, const Endpoint& local, const Endpoint& destination,
                                    std::vector<uint8_t> private_data) {
    auto pair = std::make_shared<InProcessPair>();
    pair->side[0] = side;
    pair->qp[0] = qp;
    pair->end[0] = end;
    pair->address[0] = local;
    pair->address[1] = destination;
    ChannelOpening opening;
    opening.channel = std::make_unique<InProcessChannel>(pair, 0);
    opening.send = [pair, limits = side->requested(), destination, data = std::move(private_data)]() mutable {
        InProcessRequest request;
        request.pair = pair;
        request.request.private_data = std::move(data);
        request.request.limits = limits;
        const NTSTATUS status = Fabric::Instance().Connect(destination, &request);
        if (!NT_SUCCESS(status)) SetLastErrorText("NdkConnect: no listener accepts connections there (CM-04)");
        return status;
    };
    return opening;
}

std::unique_ptr<PeerChannel> TakeInProcessRequest(const InProcessRequest& request, InProcessEnd end) {
    request.pair->end[1] = end;
    return std::make_unique<InProcessChannel>(request.pair, 1);
}

}  // namespace softndk::cm
