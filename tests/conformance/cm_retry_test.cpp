// Review finding 5: after every failure NdkConnect, NdkConnectWithSharedEndpoint and NdkAccept can return, the
// consumer may try again on the same connector (and QP), the retry connects, and closing everything completes
// (no reference taken by a failed attempt is kept or dropped twice). The fixture's teardown closes the adapter,
// which blocks until every object is closed: a leaked reference hangs it. Also the accept timeout (CM-08) and a
// connect event queued behind a listener close (CM-23).
#include <atomic>
#include <chrono>
#include <thread>

#include "support/connected_pair.h"

namespace softndk::test {
namespace {

class CmRetryTest : public ConnectedPairTest {
protected:
    // The fixture's own set-up makes one NdkConnect and one NdkAccept; injected faults start after those. Each
    // suite injects into one function only, so the rest of its handshakes go through.
    void SetUp() override {
        ConnectedPairTest::SetUp();
        connect_events_.incoming = nullptr;  // the fixture's own passive connector is not a new request
    }
    virtual const char* Injected() const = 0;
    virtual ULONG CallsInSetUp() const { return 1; }
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.FaultRuleCount = 2;
        config.FaultRules[0] = {Injected(), CallsInSetUp() + 1, 0.0, 0, FALSE, STATUS_INSUFFICIENT_RESOURCES};
        config.FaultRules[1] = {Injected(), CallsInSetUp() + 2, 0.0, 0, TRUE, STATUS_INSUFFICIENT_RESOURCES};
    }

    NTSTATUS Connect(NDK_CONNECTOR* connector, NDK_QP* qp, SOCKADDR_IN source, uint16_t port, ULONG data_length = 0) {
        static uint8_t data[4096];
        SOCKADDR_IN destination = Loopback(port);
        Completion done;
        return done.Wait(connector->Dispatch->NdkConnect(connector, qp, reinterpret_cast<PSOCKADDR>(&source),
                                                         sizeof(source), reinterpret_cast<PSOCKADDR>(&destination),
                                                         sizeof(destination), 1, 1, data_length ? data : nullptr,
                                                         data_length, &Completion::OnRequest, &done));
    }
    NTSTATUS ConnectShared(NDK_CONNECTOR* connector, NDK_QP* qp, NDK_SHARED_ENDPOINT* shared, uint16_t port,
                           Completion& done) {
        SOCKADDR_IN destination = Loopback(port);
        return connector->Dispatch->NdkConnectWithSharedEndpoint(
            connector, qp, shared, reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 1, 1, nullptr, 0,
            &Completion::OnRequest, &done);
    }
    NTSTATUS Accept(NDK_CONNECTOR* passive, NDK_QP* qp, Completion& done, ULONG data_length = 0) {
        static uint8_t data[4096];
        return passive->Dispatch->NdkAccept(passive, qp, 1, 1, data_length ? data : nullptr, data_length, nullptr,
                                            nullptr, &Completion::OnRequest, &done);
    }
    NDK_CONNECTOR* NextIncoming() {
        EXPECT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
        return connect_events_.incoming.exchange(nullptr);
    }
    // Completes a connect that is pending on `active` through the fixture listener's next incoming connector.
    void AcceptAndComplete(NDK_CONNECTOR* active, NTSTATUS connect_returned, Completion& connected, NDK_QP* passive_qp,
                           NDK_CONNECTOR** passive_out) {
        NDK_CONNECTOR* passive = NextIncoming();
        ASSERT_NE(passive, nullptr);
        *passive_out = passive;
        Completion accepted;
        NTSTATUS accept_returned = Accept(passive, passive_qp, accepted);
        FinishHandshake(active, connected, connect_returned, accepted, accept_returned);
    }
    // Data moves over a connection made by a retry.
    void ExpectSendArrives(NDK_QP* from, NDK_CQ* from_cq, NDK_QP* to, NDK_CQ* to_cq) {
        NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
        ASSERT_EQ(to->Dispatch->NdkReceive(to, nullptr, &receive, 1), STATUS_SUCCESS);
        NDK_SGE send = Sge(mr_a_, buffer_a_->data(), 16);
        ASSERT_EQ(from->Dispatch->NdkSend(from, nullptr, &send, 1, 0), STATUS_SUCCESS);
        EXPECT_EQ(Poll(from_cq).Status, STATUS_SUCCESS);
        EXPECT_EQ(Poll(to_cq).Status, STATUS_SUCCESS);
    }
};
class ConnectRetryTest : public CmRetryTest {
    const char* Injected() const override { return "NdkConnect"; }
};
class SharedConnectRetryTest : public CmRetryTest {
    const char* Injected() const override { return "NdkConnectWithSharedEndpoint"; }
    ULONG CallsInSetUp() const override { return 0; }
};
class AcceptRetryTest : public CmRetryTest {
    const char* Injected() const override { return "NdkAccept"; }
};
SOFTNDK_ALL_MODES(ConnectRetryTest);
SOFTNDK_ALL_MODES(SharedConnectRetryTest);
SOFTNDK_ALL_MODES(AcceptRetryTest);

TEST_P(ConnectRetryTest, CM_04_20_ConnectRetriesOnTheSameConnectorAfterEveryFailure) {
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    SOCKADDR_IN source = Loopback(0);
    SOCKADDR_IN foreign = Loopback(0);
    foreign.sin_addr.s_addr = htonl(0x0A010203);
    const ULONG too_long = Info().MaxCallerData + 1;
    EXPECT_EQ(Connect(connector, qp, source, ListenerPort(), too_long), STATUS_INVALID_PARAMETER);  // CM-10
    EXPECT_EQ(Connect(connector, qp, foreign, ListenerPort()), STATUS_INVALID_ADDRESS);             // CM-04
    EXPECT_EQ(Connect(connector, qp, source, ListenerPort()), STATUS_INSUFFICIENT_RESOURCES);       // injected inline
    EXPECT_EQ(Connect(connector, qp, source, ListenerPort()), STATUS_INSUFFICIENT_RESOURCES);       // injected async
    EXPECT_EQ(Connect(connector, qp, source, 7), STATUS_CONNECTION_REFUSED);                        // no listener
    // Refused by the peer: the reject's private data stays readable (CM-12), and the connector may try again.
    {
        SOCKADDR_IN destination = Loopback(ListenerPort());
        Completion done;
        NTSTATUS returned =
            connector->Dispatch->NdkConnect(connector, qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
                                            reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 1, 1,
                                            nullptr, 0, &Completion::OnRequest, &done);
        NDK_CONNECTOR* passive = NextIncoming();
        ASSERT_NE(passive, nullptr);
        uint8_t reason[3] = {1, 2, 3};
        ASSERT_EQ(passive->Dispatch->NdkReject(passive, reason, sizeof(reason)), STATUS_SUCCESS);
        EXPECT_EQ(done.Wait(returned), STATUS_CONNECTION_REFUSED);
        ULONG length = 0;
        EXPECT_EQ(connector->Dispatch->NdkGetConnectionData(connector, nullptr, nullptr, nullptr, &length),
                  STATUS_SUCCESS);
        EXPECT_EQ(length, sizeof(reason));
        Close(&passive->Header);
    }
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    SOCKADDR_IN destination = Loopback(ListenerPort());
    Completion connected;
    NTSTATUS returned = connector->Dispatch->NdkConnect(
        connector, qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(source), reinterpret_cast<PSOCKADDR>(&destination),
        sizeof(destination), 1, 1, nullptr, 0, &Completion::OnRequest, &connected);
    NDK_CONNECTOR* passive = nullptr;
    AcceptAndComplete(connector, returned, connected, passive_qp, &passive);
    ExpectSendArrives(qp, cq_a_, passive_qp, cq_b_);
    // Connected now: a further connect is refused (CM-28).
    EXPECT_EQ(Connect(connector, qp, source, ListenerPort()), STATUS_INVALID_DEVICE_STATE);
    for (NDK_OBJECT_HEADER* object : {&connector->Header, &passive->Header, &qp->Header, &passive_qp->Header})
        Close(object);
}

TEST_P(SharedConnectRetryTest, CM_06_21_SharedEndpointConnectRetriesAfterEveryFailure) {
    NDK_SHARED_ENDPOINT* shared = CreateSharedEndpoint();
    ASSERT_NE(shared, nullptr);
    NDK_CONNECTOR* first = CreateConnector();
    NDK_CONNECTOR* second = CreateConnector();
    NDK_QP* qp1 = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* qp2 = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* passive_qp1 = CreateQp(cq_b_, cq_b_, nullptr);
    NDK_QP* passive_qp2 = CreateQp(cq_b_, cq_b_, nullptr);
    {
        Completion done;
        EXPECT_EQ(done.Wait(ConnectShared(first, qp1, shared, ListenerPort(), done)), STATUS_INSUFFICIENT_RESOURCES);
    }
    {
        Completion done;
        EXPECT_EQ(done.Wait(ConnectShared(first, qp1, shared, ListenerPort(), done)), STATUS_INSUFFICIENT_RESOURCES);
    }
    {
        Completion done;
        EXPECT_EQ(done.Wait(ConnectShared(first, qp1, shared, 7, done)), STATUS_CONNECTION_REFUSED);
    }
    Completion one;
    NTSTATUS returned = ConnectShared(first, qp1, shared, ListenerPort(), one);
    NDK_CONNECTOR* passive1 = nullptr;
    AcceptAndComplete(first, returned, one, passive_qp1, &passive1);
    // The same 4-tuple again fails; the connector retries to another listener over the same shared endpoint.
    {
        Completion duplicate;
        EXPECT_EQ(duplicate.Wait(ConnectShared(second, qp2, shared, ListenerPort(), duplicate)),
                  STATUS_ADDRESS_ALREADY_EXISTS);
    }
    ConnectEvents second_events;
    uint16_t second_port = 0;
    NDK_LISTENER* second_listener = Listen(&second_events, 0, &second_port, adapter_b_);  // passive side B
    Completion two;
    returned = ConnectShared(second, qp2, shared, second_port, two);
    ASSERT_TRUE(WaitFor([&] { return second_events.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive2 = second_events.incoming;
    Completion accepted;
    NTSTATUS accept_returned = Accept(passive2, passive_qp2, accepted);
    FinishHandshake(second, two, returned, accepted, accept_returned);
    ExpectSendArrives(qp2, cq_a_, passive_qp2, cq_b_);
    Completion shared_closed;
    NTSTATUS close_returned =
        shared->Dispatch->NdkCloseSharedEndpoint(&shared->Header, &Completion::OnClose, &shared_closed);
    EXPECT_EQ(close_returned, STATUS_PENDING) << "CM-22: its two connected connectors keep it";
    for (NDK_OBJECT_HEADER* object :
         {&first->Header, &second->Header, &passive1->Header, &passive2->Header, &qp1->Header, &qp2->Header,
          &passive_qp1->Header, &passive_qp2->Header, &second_listener->Header})
        Close(object);
    EXPECT_EQ(shared_closed.Wait(close_returned), STATUS_SUCCESS);
}

TEST_P(AcceptRetryTest, CM_08_AcceptRetriesOnTheSameConnectorAfterEveryFailure) {
    NDK_CONNECTOR* active = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    Completion connected;
    NTSTATUS connect_returned = StartConnect(active, qp, ListenerPort(), connected, 1);
    NDK_CONNECTOR* passive = NextIncoming();
    ASSERT_NE(passive, nullptr);
    {
        Completion done;
        EXPECT_EQ(done.Wait(Accept(passive, passive_qp, done, Info().MaxCalleeData + 1)), STATUS_INVALID_PARAMETER);
    }
    {
        Completion done;  // a QP that is connected already (the fixture's)
        EXPECT_EQ(done.Wait(Accept(passive, qp_b_, done)), STATUS_INVALID_DEVICE_STATE);
    }
    {
        Completion done;
        EXPECT_EQ(done.Wait(Accept(passive, passive_qp, done)), STATUS_INSUFFICIENT_RESOURCES);  // injected inline
    }
    {
        Completion done;
        EXPECT_EQ(done.Wait(Accept(passive, passive_qp, done)), STATUS_INSUFFICIENT_RESOURCES);  // injected async
    }
    Completion accepted;
    NTSTATUS accept_returned = Accept(passive, passive_qp, accepted);
    FinishHandshake(active, connected, connect_returned, accepted, accept_returned);
    ExpectSendArrives(qp, cq_a_, passive_qp, cq_b_);
    for (NDK_OBJECT_HEADER* object : {&active->Header, &passive->Header, &qp->Header, &passive_qp->Header})
        Close(object);
}

TEST_P(AcceptRetryTest, CM_08_AcceptAfterTheConnectingPeerLeftIsAbortedEveryTime) {
    NDK_CONNECTOR* active = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    Completion connected;
    NTSTATUS connect_returned = StartConnect(active, qp, ListenerPort(), connected, 1);
    NDK_CONNECTOR* passive = NextIncoming();
    ASSERT_NE(passive, nullptr);
    Close(&active->Header);  // the connecting peer abandons: LIFE-09 cancels its NdkConnect
    EXPECT_EQ(connected.Wait(connect_returned), STATUS_CANCELLED);
    const NTSTATUS expected[] = {STATUS_INSUFFICIENT_RESOURCES, STATUS_INSUFFICIENT_RESOURCES,  // injected
                                 STATUS_CONNECTION_ABORTED, STATUS_CONNECTION_ABORTED};
    for (const NTSTATUS status : expected) {
        Completion done;
        EXPECT_EQ(done.Wait(Accept(passive, passive_qp, done)), status);
    }
    // The QP was never joined to a link: it still connects elsewhere (to a listener on A's side).
    NDK_QP* far_qp = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_CONNECTOR* other = CreateConnector(AdapterOf(passive_qp));
    Completion other_connected;
    NTSTATUS other_returned = StartConnect(other, passive_qp, ListenerPort(ListenerFor(far_qp)), other_connected, 1);
    NDK_CONNECTOR* far = nullptr;
    AcceptAndComplete(other, other_returned, other_connected, far_qp, &far);
    EXPECT_NE(far, nullptr);
    for (NDK_OBJECT_HEADER* object : {&passive->Header, &other->Header, far != nullptr ? &far->Header : nullptr,
                                      &qp->Header, &passive_qp->Header, &far_qp->Header})
        if (object != nullptr) Close(object);
}

// Review finding 7 (CM-08): an NdkAccept whose peer never calls NdkCompleteConnect ends with STATUS_IO_TIMEOUT
// after the configured time; the peer's late NdkCompleteConnect is aborted (CM-07).
class AcceptTimeoutTest : public ConnectedPairTest {
protected:
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override { config.AcceptTimeoutMs = 200; }
};
SOFTNDK_ALL_MODES(AcceptTimeoutTest);

TEST_P(AcceptTimeoutTest, CM_08_AcceptTimesOutWhenThePeerNeverCompletes) {
    connect_events_.incoming = nullptr;
    NDK_CONNECTOR* active = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    Completion connected;
    NTSTATUS connect_returned = StartConnect(active, qp, ListenerPort(), connected, 1);
    ASSERT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = connect_events_.incoming;
    Completion accepted;
    const auto start = std::chrono::steady_clock::now();
    NTSTATUS accept_returned = passive->Dispatch->NdkAccept(passive, passive_qp, 1, 1, nullptr, 0, nullptr, nullptr,
                                                            &Completion::OnRequest, &accepted);
    EXPECT_EQ(accept_returned, STATUS_PENDING) << "it waits for the peer";
    EXPECT_EQ(connected.Wait(connect_returned), STATUS_SUCCESS);
    EXPECT_EQ(accepted.Wait(accept_returned), STATUS_IO_TIMEOUT);
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, std::chrono::milliseconds(200));
    EXPECT_LT(waited, std::chrono::seconds(5));
    Completion completed;
    EXPECT_EQ(completed.Wait(
                  active->Dispatch->NdkCompleteConnect(active, nullptr, nullptr, &Completion::OnRequest, &completed)),
              STATUS_CONNECTION_ABORTED);
    for (NDK_OBJECT_HEADER* object : {&active->Header, &passive->Header, &qp->Header, &passive_qp->Header})
        Close(object);
}

// Review finding 7 (CM-23): a connect event that is queued when the listener's close starts is not delivered;
// the connecting peer is refused. The provider thread is held inside a CQ notification meanwhile, so the event
// queues behind it.
struct BlockingNotification {
    std::atomic<bool> inside{false};
    std::atomic<bool> release{false};
    static VOID OnNotify(PVOID context, NTSTATUS) {
        auto* self = static_cast<BlockingNotification*>(context);
        self->inside = true;
        while (!self->release) std::this_thread::yield();
    }
};

// Holds the adapter's provider thread inside a CQ notification, so what is posted to it meanwhile queues.
class ListenerCloseTest : public ConnectedPairTest {
protected:
    void Prepare(BlockingNotification& blocker) {
        Completion created;
        ASSERT_EQ(created.Wait(adapter_->Dispatch->NdkCreateCq(adapter_, 8, &BlockingNotification::OnNotify, &blocker,
                                                               nullptr, &Completion::OnCreate, &created, &block_cq_)),
                  STATUS_SUCCESS);
        if (block_cq_ == nullptr) block_cq_ = reinterpret_cast<NDK_CQ*>(created.object());
        trigger_ = CreateQp(block_cq_, block_cq_, nullptr);
    }
    void Block(BlockingNotification& blocker) {
        NDK_SGE sge = Sge(mr_b_, buffer_b_->data(), 8);
        ASSERT_EQ(trigger_->Dispatch->NdkReceive(trigger_, nullptr, &sge, 1), STATUS_SUCCESS);
        block_cq_->Dispatch->NdkArmCq(block_cq_, NDK_CQ_NOTIFY_ANY);
        trigger_->Dispatch->NdkFlush(trigger_);
        ASSERT_TRUE(WaitFor([&] { return blocker.inside.load(); }));  // the provider thread is held from here
    }
    void TearDown() override {
        if (trigger_ != nullptr) Close(&trigger_->Header);
        if (block_cq_ != nullptr) Close(&block_cq_->Header);
        ConnectedPairTest::TearDown();
    }
    NDK_CQ* block_cq_ = nullptr;
    NDK_QP* trigger_ = nullptr;
};
SOFTNDK_ALL_MODES(ListenerCloseTest);

TEST_P(ListenerCloseTest, CM_23_QueuedConnectEventIsRefusedOnceCloseStarts) {
    ConnectEvents events;
    uint16_t port = 0;
    NDK_LISTENER* listener = Listen(&events, 0, &port);
    BlockingNotification blocker;
    Prepare(blocker);
    NDK_CONNECTOR* active = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    Block(blocker);
    Completion connected;
    NTSTATUS connect_returned = StartConnect(active, qp, port, connected, 1);
    Completion listener_closed;
    NTSTATUS close_returned =
        listener->Dispatch->NdkCloseListener(&listener->Header, &Completion::OnClose, &listener_closed);
    blocker.release = true;
    EXPECT_EQ(connected.Wait(connect_returned), STATUS_CONNECTION_REFUSED);
    EXPECT_EQ(listener_closed.Wait(close_returned), STATUS_SUCCESS);
    EXPECT_EQ(events.count.load(), 0) << "no connect event after the close started";
    for (NDK_OBJECT_HEADER* object : {&active->Header, &qp->Header}) Close(object);
}

// CM-24 (b) / CM-25: closing one connector ends the peer's pending NdkDisconnect only once no post is running,
// and flushes the peer's QP as the NdkDisconnect path does.
TEST_P(ListenerCloseTest, CM_25_PeerCloseCompletesAPendingDisconnectWithItsQpFlushed) {
    NDK_SGE receive = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp_a_->Dispatch->NdkReceive(qp_a_, reinterpret_cast<PVOID>(0x51), &receive, 1), STATUS_SUCCESS);
    Completion disconnected;
    NTSTATUS returned = connector_a_->Dispatch->NdkDisconnect(connector_a_, &Completion::OnRequest, &disconnected);
    EXPECT_EQ(returned, STATUS_PENDING) << "waits for the peer";
    Close(&connector_b_->Header);
    connector_b_ = nullptr;
    EXPECT_EQ(disconnected.Wait(returned), STATUS_SUCCESS);
    const NDK_RESULT_EX flushed = Poll(cq_a_);
    EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(0x51));
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED) << "CM-25: the implicit flush";
}

// LIFE-09: closing a connector cancels its NdkConnect even when that request's work has not run yet (pend mode,
// provider thread busy); the close then completes.
TEST_P(ListenerCloseTest, LIFE_09_CloseCancelsAConnectWhoseWorkHasNotRun) {
    BlockingNotification blocker;
    Prepare(blocker);
    NDK_CONNECTOR* active = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    ConnectEvents silent;  // a listener that never answers
    uint16_t port = 0;
    NDK_LISTENER* listener = Listen(&silent, 0, &port);
    Block(blocker);
    Completion connected;
    NTSTATUS connect_returned = StartConnect(active, qp, port, connected, 1);
    Completion closed;
    NTSTATUS close_returned = active->Dispatch->NdkCloseConnector(&active->Header, &Completion::OnClose, &closed);
    blocker.release = true;
    EXPECT_EQ(connected.Wait(connect_returned), STATUS_CANCELLED);
    EXPECT_EQ(closed.Wait(close_returned), STATUS_SUCCESS);
    // Over TCP the attempt may have reached the listener before it was cancelled: its connect event can come
    // late. The listener's close holds until that connector is closed (CM-22); no event starts after it (CM-23).
    Completion listener_closed;
    NTSTATUS listener_returned =
        listener->Dispatch->NdkCloseListener(&listener->Header, &Completion::OnClose, &listener_closed);
    for (int i = 0; i < 5000 && listener_returned == STATUS_PENDING && listener_closed.calls() == 0 &&
                    silent.incoming.load() == nullptr;
         ++i)
        usleep(1000);
    if (NDK_CONNECTOR* offered = silent.incoming.load()) Close(&offered->Header);
    EXPECT_EQ(listener_closed.Wait(listener_returned), STATUS_SUCCESS);
    Close(&qp->Header);
}

}  // namespace
}  // namespace softndk::test
