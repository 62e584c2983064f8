// The wire channel: ConnectionSide steps become MPA frames (MpaLink), the RTR and FINs (its stream); their events
// become the side's events.
#include "cm/wire_channel.h"

#include <algorithm>

#include "common/last_error.h"

namespace softndk::cm {
namespace {

// AMB decision (docs/spec-decisions.md): an MPA rev 1 peer sends no IRD/ORD; it is taken as allowing one
// outstanding read each way.
constexpr uint32_t kRev1ReadLimit = 1;

sockaddr_storage ToSockaddr(const Endpoint& endpoint) {
    sockaddr_storage address{};
    ULONG length = sizeof(address);
    EndpointToSockaddr(endpoint, reinterpret_cast<SOCKADDR*>(&address), &length);
    return address;
}

PeerAnswer AnswerOf(const transport::MpaPeer& peer) {
    PeerAnswer answer;
    answer.private_data = peer.private_data;
    answer.limits.inbound = peer.enhanced ? peer.words.ird : kRev1ReadLimit;
    answer.limits.outbound = peer.enhanced ? peer.words.ord : kRev1ReadLimit;
    answer.reject = peer.reject;
    return answer;
}

transport::TcpConnection::EventHandler HandlerFor(std::weak_ptr<ConnectionSide> weak) {
    return [weak](transport::TcpConnection::Event event, NTSTATUS status) {
        std::shared_ptr<ConnectionSide> side = weak.lock();
        if (!side) return;
        switch (event) {
            case transport::TcpConnection::Event::kMpaReceived:
                return;  // the active side reads the answer through MpaAnswered (below)
            case transport::TcpConnection::Event::kEstablished:
                side->OnEstablished();
                return;
            case transport::TcpConnection::Event::kPeerClosed:
                side->OnPeerDisconnected();
                return;
            case transport::TcpConnection::Event::kFailed:
                side->OnFailed(status);
                return;
        }
    };
}

class WireChannel final : public PeerChannel {
public:
    WireChannel(std::shared_ptr<transport::MpaLink> link, bool crc) : link_(std::move(link)), crc_(crc) {}

    void Bind(const std::shared_ptr<ConnectionSide>& side) override {
        if (std::shared_ptr<transport::MpaLink> link = Link()) link->SetHandler(HandlerFor(side));
    }
    // Active: told by whichever comes first, the lane's handler at the peer's answer or the thread that called
    // MpaLink::Connect once it returns (a fast peer, or a loaded machine, answers first). Neither waits.
    void SetLink(const std::shared_ptr<transport::MpaLink>& link) {
        bool closed;
        {
            std::lock_guard lock(mutex_);
            if (link_ == link) return;
            link_ = link;
            closed = closed_;
        }
        if (closed) link->Close(nullptr, true);  // the side closed the channel before it knew its link
    }

    NTSTATUS Accept(engine::QueuePair* qp, ReadLimits limits, std::vector<uint8_t> private_data) override {
        transport::MpaOffer reply;
        reply.crc = crc_;
        reply.ird = static_cast<uint16_t>(std::min<uint32_t>(limits.inbound, wire::kMpaMaxIrdOrd));
        reply.ord = static_cast<uint16_t>(std::min<uint32_t>(limits.outbound, wire::kMpaMaxIrdOrd));
        reply.private_data = std::move(private_data);
        std::shared_ptr<transport::MpaLink> link = Link();
        qp->Associate(link->stream().get(), limits.inbound, limits.outbound);
        qp->SetState(engine::QueuePair::State::kConnecting);
        link->Accept(std::move(reply), qp, limits.inbound, limits.outbound);
        return STATUS_SUCCESS;
    }
    void Reject(std::vector<uint8_t> private_data) override { Link()->Reject(std::move(private_data)); }
    void Establish(engine::QueuePair* qp, ReadLimits limits) override {
        std::shared_ptr<transport::MpaLink> link = Link();
        qp->Associate(link->stream().get(), limits.inbound, limits.outbound);
        // The RTR is queued before the QP takes posts, so a post from another thread cannot go first, and sent
        // once it does, so the peer's answer finds the QP connected (issue 18 §3.4).
        link->Establish(qp, limits.inbound, limits.outbound);
        qp->SetState(engine::QueuePair::State::kConnected);
        link->stream()->SendQueued();
    }
    void MarkEstablished(engine::QueuePair* qp) override {
        qp->SetState(engine::QueuePair::State::kConnected);  // on the lane, before the next FPDU
    }
    void Disconnect() override { Link()->stream()->Disconnect(); }
    void Close(std::function<void()> done, bool abortive) override {
        std::shared_ptr<transport::MpaLink> link;
        {
            std::lock_guard lock(mutex_);
            link = link_;
            closed_ = true;
        }
        if (link)
            link->Close(std::move(done), abortive);
        else if (done)
            done();
    }
    bool Lost() override {
        std::shared_ptr<transport::MpaLink> link = Link();
        return !link || link->stream()->StreamLost();
    }
    void WhenDrained(std::function<void()> done) override { Link()->stream()->WhenDrained(std::move(done)); }
    NTSTATUS Address(bool peer, Endpoint* out) override {
        std::shared_ptr<transport::MpaLink> link = Link();
        if (!link) return STATUS_CONNECTION_INVALID;
        const sockaddr_storage& raw = peer ? link->stream()->remote_address() : link->stream()->local_address();
        const ULONG raw_length = raw.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
        return EndpointFromSockaddr(reinterpret_cast<const SOCKADDR*>(&raw), raw_length, out);
    }
    bool GaveQpBack(engine::QueuePair* qp) override {
        // The connection lets go of the QP before it reports a failure (Shutdown clears it; a timeout reports
        // once the close has run): a QP that never became connected goes back to the consumer (CM-08).
        const engine::QueuePair::State reached = qp->state();
        return reached != engine::QueuePair::State::kConnected && reached != engine::QueuePair::State::kError;
    }

private:
    std::shared_ptr<transport::MpaLink> Link() {
        std::lock_guard lock(mutex_);
        return link_;
    }

    std::mutex mutex_;
    std::shared_ptr<transport::MpaLink> link_;
    bool closed_ = false;
    const bool crc_;
};

}  // namespace

ChannelOpening OpenWireChannel(const std::shared_ptr<ConnectionSide>& side, WireConnectPlan plan) {
    auto owned = std::make_unique<WireChannel>(nullptr, plan.options.request_crc);
    WireChannel* channel = owned.get();
    transport::MpaOffer offer;
    offer.crc = plan.options.request_crc;
    const ReadLimits requested = side->requested();
    offer.ird = static_cast<uint16_t>(std::min<uint32_t>(requested.inbound, wire::kMpaMaxIrdOrd));
    offer.ord = static_cast<uint16_t>(std::min<uint32_t>(requested.outbound, wire::kMpaMaxIrdOrd));
    offer.peer_to_peer = true;  // RFC 6581: the RTR tells the responder that NdkCompleteConnect ran
    // The one RTR offered, so the responder must pick it (issue 8 §3). A Read RTR is a Read Request: without an
    // outbound read it would exceed the responder's IRD (siw refuses it at IRD 0, siw-on-the-wire §3.7), so then Write.
    const bool read_rtr = plan.read_rtr && requested.outbound > 0;
    offer.write_rtr = !read_rtr;
    offer.read_rtr = read_rtr;
    offer.private_data = std::move(plan.private_data);
    ChannelOpening opening;
    opening.channel = std::move(owned);
    std::weak_ptr<ConnectionSide> weak = side;
    opening.send = [channel, weak, plan = std::move(plan), offer = std::move(offer)]() -> NTSTATUS {
        // The answer: made with the link before its socket starts, the handler reads the Reply or Reject from
        // it on the lane, tells the channel its link (the consumer's next steps use it) and then the side.
        auto make = [weak, channel](std::weak_ptr<transport::MpaLink> weak_link) {
            return [weak, weak_link, channel, events = HandlerFor(weak)](transport::TcpConnection::Event event,
                                                                         NTSTATUS status) {
                if (event != transport::TcpConnection::Event::kMpaReceived) return events(event, status);
                // The side owns the channel, so the channel lives while the side does.
                std::shared_ptr<ConnectionSide> side = weak.lock();
                std::shared_ptr<transport::MpaLink> link = weak_link.lock();  // held by its event's forwarder
                if (!side || !link) return;
                channel->SetLink(link);
                side->OnPeerAnswer(AnswerOf(link->peer()));
            };
        };
        std::shared_ptr<transport::MpaLink> link;
        NTSTATUS status = STATUS_SHARING_VIOLATION;
        for (int attempt = 0; attempt < 32 && status == STATUS_SHARING_VIOLATION; ++attempt) {
            if (attempt > 0) {
                // CM-05: the fabric's port is taken on this host (another process): the next ephemeral one.
                Endpoint next = plan.bound->WithoutPort();
                if (!plan.pick_port || !NT_SUCCESS(Fabric::Instance().Bind(&next))) break;
                Fabric::Instance().Release(*plan.bound);
                *plan.bound = next;
            }
            sockaddr_storage from = ToSockaddr(attempt > 0 ? *plan.bound : plan.local);
            status = transport::MpaLink::Connect(plan.progress, &from, ToSockaddr(plan.remote), offer, plan.options,
                                                 make, &link);
        }
        if (!NT_SUCCESS(status)) {
            SetLastErrorText("NdkConnect: the TCP socket could not be bound or connected (0x%08X)",
                             static_cast<unsigned>(status));
            return status;
        }
        if (plan.before_link_stored) plan.before_link_stored();
        channel->SetLink(link);
        return STATUS_SUCCESS;
    };
    return opening;
}

std::unique_ptr<PeerChannel> TakeWireRequest(std::shared_ptr<transport::MpaLink> link, bool crc, PeerAnswer* request) {
    *request = AnswerOf(link->peer());
    return std::make_unique<WireChannel>(std::move(link), crc);
}

}  // namespace softndk::cm
