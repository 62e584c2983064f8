// cm::ConnectionSide against a fake channel (issue 18 §1): the state machine alone, with no socket and no second
// adapter, the way eRPC tests its session layer over a fake transport.
#include "cm/connection_side.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

namespace softndk::cm {
namespace {

using namespace std::chrono_literals;

// Records what the side asked of its peer. `echo` makes it answer from inside the call, as the in-process
// channel does: the side must not hold its lock then. Every call checks that rule (connection_side.h) and logs
// "locked: <call>" when it is broken.
class FakeChannel final : public PeerChannel {
public:
    struct Log {
        std::mutex mutex;
        std::vector<std::string> calls;
        bool last_close_abortive = false;
        void Add(std::string call) {
            std::lock_guard lock(mutex);
            calls.push_back(std::move(call));
        }
        bool Has(const std::string& call) {
            std::lock_guard lock(mutex);
            return std::find(calls.begin(), calls.end(), call) != calls.end();
        }
        std::vector<std::string> CallsUnderTheSidesLock() {
            std::lock_guard lock(mutex);
            std::vector<std::string> locked;
            for (const std::string& call : calls)
                if (call.rfind("locked: ", 0) == 0) locked.push_back(call);
            return locked;
        }
    };
    explicit FakeChannel(std::shared_ptr<Log> log) : log_(std::move(log)) {}

    std::weak_ptr<ConnectionSide> side;
    bool lost = false;
    bool echo_disconnect = false;
    bool gave_qp_back = false;

    void Bind(const std::shared_ptr<ConnectionSide>& bound) override { side = bound; }
    NTSTATUS Accept(engine::QueuePair*, ReadLimits, std::vector<uint8_t>) override {
        Called("accept");
        return STATUS_SUCCESS;
    }
    void Reject(std::vector<uint8_t>) override { Called("reject"); }
    void Establish(engine::QueuePair*, ReadLimits) override { Called("establish"); }
    void MarkEstablished(engine::QueuePair*) override { Called("mark established"); }
    void Disconnect() override {
        Called("disconnect");
        if (std::shared_ptr<ConnectionSide> me = side.lock(); me && echo_disconnect) me->OnPeerDisconnected();
    }
    void Close(std::function<void()> done, bool abortive) override {
        Called("close");
        {
            std::lock_guard lock(log_->mutex);
            log_->last_close_abortive = abortive;
        }
        if (done) done();
    }
    bool Lost() override {
        Called("lost");
        return lost;
    }
    void WhenDrained(std::function<void()> done) override {
        Called("when drained");
        done();
    }
    NTSTATUS Address(bool, Endpoint*) override {
        Called("address");
        return STATUS_CONNECTION_INVALID;
    }
    bool GaveQpBack(engine::QueuePair*) override {
        Called("gave qp back");
        return gave_qp_back;
    }

private:
    void Called(const std::string& call) {
        log_->Add(call);
        std::shared_ptr<ConnectionSide> me = side.lock();
        if (me && me->LockHeldByThisThread()) log_->Add("locked: " + call);
    }

    std::shared_ptr<Log> log_;
};

// A finish that can be waited for.
struct Outcome {
    std::promise<NTSTATUS> promise;
    std::future<NTSTATUS> future = promise.get_future();
    Finish finish() {
        return [this](NTSTATUS status) { promise.set_value(status); };
    }
    NTSTATUS Wait(std::chrono::milliseconds limit = 5s) {
        return future.wait_for(limit) == std::future_status::ready ? future.get() : STATUS_PENDING;
    }
};

class ConnectionSideTest : public ::testing::Test {
protected:
    ConnectionSideTest() : executor_(SOFTNDK_COMPLETION_INLINE, 1) {
        settings_.executor = &executor_;
        settings_.max_inbound = 8;
        settings_.max_outbound = 8;
        settings_.disconnect_timeout_ms = 100;
        settings_.accept_timeout_ms = 100;
    }

    // An active side whose NdkConnect is pending on a fake channel.
    std::shared_ptr<ConnectionSide> Connecting(Outcome* connected, FakeChannel** channel_out) {
        auto side = ConnectionSide::MakeActive(settings_, {4, 4});
        auto channel = std::make_unique<FakeChannel>(log_);
        channel->side = side;
        *channel_out = channel.get();
        ChannelOpening opening{std::move(channel), [] { return STATUS_SUCCESS; }};
        EXPECT_EQ(side->Connect(nullptr, std::move(opening), connected->finish()), STATUS_PENDING);
        return side;
    }

    // Every test: no channel call was made with the side's lock held (connection_side.h, issue 34 §2).
    void TearDown() override { EXPECT_EQ(log_->CallsUnderTheSidesLock(), std::vector<std::string>{}); }

    std::shared_ptr<ConnectionSide> Connected(FakeChannel** channel_out, std::atomic<int>* events) {
        Outcome connected;
        auto side = Connecting(&connected, channel_out);
        EXPECT_TRUE(side->OnPeerAnswer(PeerAnswer{{}, {2, 2}, false}));
        EXPECT_EQ(connected.Wait(), STATUS_SUCCESS);
        EXPECT_EQ(side->CompleteConnect([events] { ++*events; }), STATUS_SUCCESS);
        return side;
    }

    std::shared_ptr<FakeChannel::Log> log_ = std::make_shared<FakeChannel::Log>();
    engine::CompletionExecutor executor_;
    SideSettings settings_;
};

TEST_F(ConnectionSideTest, CM_03_TheAnswerLowersOurLimitsToThePeers) {
    Outcome connected;
    FakeChannel* channel;
    auto side = Connecting(&connected, &channel);
    ASSERT_TRUE(side->OnPeerAnswer(PeerAnswer{{7}, {3, 1}, false}));  // the peer's IRD 3, ORD 1
    EXPECT_EQ(connected.Wait(), STATUS_SUCCESS);
    ULONG inbound = 0, outbound = 0, length = 1;
    uint8_t byte = 0;
    bool late = true;
    EXPECT_EQ(side->GetConnectionData(&inbound, &outbound, &byte, &length, &late), STATUS_SUCCESS);
    EXPECT_FALSE(late) << "before NdkCompleteConnect: within CM-12";
    EXPECT_EQ(inbound, 1u);   // our IRD: the peer's ORD
    EXPECT_EQ(outbound, 3u);  // our ORD: the peer's IRD
    EXPECT_EQ(byte, 7);
}

TEST_F(ConnectionSideTest, CM_04_AnAnswerAfterTheConnectWasCancelledIsNotTaken) {
    Outcome connected;
    FakeChannel* channel;
    auto side = Connecting(&connected, &channel);
    side->CancelPending();
    EXPECT_EQ(connected.Wait(), STATUS_CANCELLED);
    EXPECT_FALSE(side->OnPeerAnswer(PeerAnswer{}));  // the channel aborts the peer's NdkAccept (CM-08)
}

TEST_F(ConnectionSideTest, CM_07_CompleteConnectOnALostChannelIsAborted) {
    Outcome connected;
    FakeChannel* channel;
    auto side = Connecting(&connected, &channel);
    ASSERT_TRUE(side->OnPeerAnswer(PeerAnswer{{}, {1, 1}, false}));
    EXPECT_EQ(connected.Wait(), STATUS_SUCCESS);
    channel->lost = true;
    EXPECT_EQ(side->CompleteConnect(nullptr), STATUS_CONNECTION_ABORTED);
    EXPECT_FALSE(log_->Has("establish"));
}

TEST_F(ConnectionSideTest, CM_08_AConnectThePeerNeverAnswersEndsWithIoTimeoutAndAnAbort) {
    Outcome connected;
    FakeChannel* channel;
    auto side = Connecting(&connected, &channel);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(connected.Wait(), STATUS_IO_TIMEOUT);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms);
    EXPECT_TRUE(log_->Has("close"));
    EXPECT_TRUE(log_->last_close_abortive);
}

TEST_F(ConnectionSideTest, CM_08_AnAcceptWhosePeerNeverSendsItsRtrEndsWithIoTimeout) {
    auto owned = std::make_unique<FakeChannel>(log_);
    auto side = ConnectionSide::MakePassive(settings_, PeerAnswer{{}, {2, 2}, false}, std::move(owned));
    Outcome accepted;
    EXPECT_EQ(side->Accept(nullptr, {4, 4}, {}, nullptr, accepted.finish()), STATUS_PENDING);
    EXPECT_TRUE(log_->Has("accept"));
    EXPECT_EQ(accepted.Wait(), STATUS_IO_TIMEOUT);
    EXPECT_EQ(side->state(), SideState::kDone);
}

TEST_F(ConnectionSideTest, CM_08_TheRtrCompletesTheAcceptAndALateOneChangesNothing) {
    auto owned = std::make_unique<FakeChannel>(log_);
    auto side = ConnectionSide::MakePassive(settings_, PeerAnswer{{}, {2, 2}, false}, std::move(owned));
    Outcome accepted;
    EXPECT_EQ(side->Accept(nullptr, {4, 4}, {}, nullptr, accepted.finish()), STATUS_PENDING);
    side->OnEstablished();
    EXPECT_EQ(accepted.Wait(), STATUS_SUCCESS);
    side->OnEstablished();
    EXPECT_EQ(side->state(), SideState::kConnected);
}

TEST_F(ConnectionSideTest, CM_15_ClosingAnOfferedSideRefusesItThroughTheChannel) {
    auto owned = std::make_unique<FakeChannel>(log_);
    auto side = ConnectionSide::MakePassive(settings_, PeerAnswer{}, std::move(owned));
    std::promise<void> closed;
    side->Close(nullptr, [&closed] { closed.set_value(); });
    EXPECT_EQ(closed.get_future().wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(log_->Has("reject"));
}

TEST_F(ConnectionSideTest, CM_24_ADisconnectCompletesWhenThePeerAnswersFromInsideTheCall) {
    FakeChannel* channel;
    std::atomic<int> events{0};
    auto side = Connected(&channel, &events);
    channel->echo_disconnect = true;  // the in-process peer answers at once: no lock may be held meanwhile
    Outcome disconnected;
    EXPECT_EQ(side->Disconnect(disconnected.finish()), STATUS_PENDING);
    EXPECT_EQ(disconnected.Wait(), STATUS_SUCCESS);
    EXPECT_FALSE(log_->last_close_abortive);
    EXPECT_EQ(events.load(), 0);  // CM-26: no event for our own disconnect
}

TEST_F(ConnectionSideTest, CM_25_ADisconnectThePeerNeverAnswersEndsWithIoTimeoutAndAnAbort) {
    FakeChannel* channel;
    std::atomic<int> events{0};
    auto side = Connected(&channel, &events);
    Outcome disconnected;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(side->Disconnect(disconnected.finish()), STATUS_PENDING);
    EXPECT_EQ(disconnected.Wait(), STATUS_IO_TIMEOUT);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms);
    EXPECT_TRUE(log_->last_close_abortive);
    EXPECT_EQ(side->state(), SideState::kDone);
}

TEST_F(ConnectionSideTest, CM_26_ThePeersDisconnectAndALossAreIndicatedOnce) {
    FakeChannel* channel;
    std::atomic<int> events{0};
    auto side = Connected(&channel, &events);
    side->OnPeerDisconnected();
    side->OnFailed(STATUS_CONNECTION_RESET);
    side->OnPeerDisconnected();
    EXPECT_EQ(events.load(), 1);
    EXPECT_EQ(side->state(), SideState::kConnected);  // until NdkDisconnect, which then completes at once
    Outcome disconnected;
    EXPECT_EQ(side->Disconnect(disconnected.finish()), STATUS_PENDING);
    EXPECT_EQ(disconnected.Wait(), STATUS_SUCCESS);
}

TEST_F(ConnectionSideTest, CM_28_StepsOutOfOrderAreRefusedAndChangeNothing) {
    Outcome connected;
    FakeChannel* channel;
    auto side = Connecting(&connected, &channel);
    EXPECT_EQ(side->CompleteConnect(nullptr), STATUS_CONNECTION_INVALID);  // no answer yet
    Outcome disconnected;
    EXPECT_EQ(side->Disconnect(disconnected.finish()), STATUS_CONNECTION_INVALID);
    EXPECT_EQ(side->Reject({}), STATUS_INVALID_DEVICE_STATE);
    EXPECT_EQ(side->state(), SideState::kConnecting);
    side->CancelPending();
    EXPECT_EQ(connected.Wait(), STATUS_CANCELLED);
}

// Issue 34 §2: the four calls below were made under the side's lock; TearDown checks each test for that.
TEST_F(ConnectionSideTest, CM_07_CompleteConnectAsksWhetherThePeerIsLostWithoutTheSidesLock) {
    Outcome connected;
    FakeChannel* channel;
    auto side = Connecting(&connected, &channel);
    ASSERT_TRUE(side->OnPeerAnswer(PeerAnswer{{}, {1, 1}, false}));
    EXPECT_EQ(connected.Wait(), STATUS_SUCCESS);
    EXPECT_EQ(side->CompleteConnect(nullptr), STATUS_SUCCESS);
    EXPECT_TRUE(log_->Has("lost"));
    EXPECT_TRUE(log_->Has("establish"));
    EXPECT_EQ(side->CompleteConnect(nullptr), STATUS_CONNECTION_INVALID);  // once
}

TEST_F(ConnectionSideTest, CM_09_RejectAsksWhetherThePeerIsLostWithoutTheSidesLock) {
    auto passive = ConnectionSide::MakePassive(settings_, PeerAnswer{}, std::make_unique<FakeChannel>(log_));
    EXPECT_EQ(passive->Reject({1}), STATUS_SUCCESS);
    EXPECT_TRUE(log_->Has("lost"));
    EXPECT_TRUE(log_->Has("reject"));
    EXPECT_EQ(passive->state(), SideState::kDone);

    auto lost_channel = std::make_unique<FakeChannel>(log_);
    lost_channel->lost = true;
    auto abandoned = ConnectionSide::MakePassive(settings_, PeerAnswer{}, std::move(lost_channel));
    EXPECT_EQ(abandoned->Reject({}), STATUS_CONNECTION_ABORTED);
    EXPECT_EQ(abandoned->state(), SideState::kIncoming);
}

TEST_F(ConnectionSideTest, CM_08_TheRtrMarksTheQpEstablishedWithoutTheSidesLockBeforeTheAcceptCompletes) {
    auto side =
        ConnectionSide::MakePassive(settings_, PeerAnswer{{}, {2, 2}, false}, std::make_unique<FakeChannel>(log_));
    Outcome accepted;
    EXPECT_EQ(side->Accept(nullptr, {4, 4}, {}, nullptr,
                           [this, &accepted](NTSTATUS status) {
                               EXPECT_TRUE(log_->Has("mark established"));
                               accepted.promise.set_value(status);
                           }),
              STATUS_PENDING);
    side->OnEstablished();
    EXPECT_EQ(accepted.Wait(), STATUS_SUCCESS);
    EXPECT_EQ(side->state(), SideState::kConnected);
}

TEST_F(ConnectionSideTest, CM_08_AfterAFailedAcceptTheQpIsGivenBackOnlyWhenTheChannelLetItGo) {
    for (const bool gave_back : {false, true}) {
        auto owned = std::make_unique<FakeChannel>(log_);
        owned->gave_qp_back = gave_back;
        auto side = ConnectionSide::MakePassive(settings_, PeerAnswer{{}, {2, 2}, false}, std::move(owned));
        Outcome accepted;
        EXPECT_EQ(side->Accept(nullptr, {4, 4}, {}, nullptr, accepted.finish()), STATUS_PENDING);
        EXPECT_EQ(accepted.Wait(), STATUS_IO_TIMEOUT);
        EXPECT_EQ(side->GiveQpBackIfUnused(), gave_back);
        EXPECT_TRUE(log_->Has("gave qp back"));
    }
}

}  // namespace
}  // namespace softndk::cm
