// CM-01 … CM-32: listeners, connectors, shared endpoints, private data, addresses, disconnects.
#include <chrono>
#include <cstring>

#include "cm/fabric.h"
#include "support/connected_pair.h"

namespace softndk::test {
namespace {

// StartConnect (the fixture's) passes read limits of 2 unless told otherwise.
class CmTest : public ConnectedPairTest {
protected:
    NTSTATUS StartConnect(NDK_CONNECTOR* connector, NDK_QP* qp, uint16_t port, Completion& done,
                          const void* data = nullptr, ULONG length = 0, uint16_t source_port = 0) {
        return ConnectedPairTest::StartConnect(connector, qp, port, done, 2, data, length, source_port);
    }
};
SOFTNDK_ALL_MODES(CmTest);

TEST_P(CmTest, CM_01_15_ObjectsCarryTheirTypesAndOneConnectEventPerRequest) {
    EXPECT_EQ(connector_a_->Header.ObjectType, NdkObjectTypeConnector);
    EXPECT_EQ(connector_b_->Header.ObjectType, NdkObjectTypeConnector);
    EXPECT_EQ(listener_->Header.ObjectType, NdkObjectTypeListener);
    EXPECT_EQ(connect_events_.count, 1) << "CM-15: one connect event per request";
}

TEST_P(CmTest, CM_04_NoListenerIsConnectionRefused) {
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    Completion done;
    EXPECT_EQ(done.Wait(StartConnect(connector, qp, 7, done)), STATUS_CONNECTION_REFUSED);
    Close(&connector->Header);
    Close(&qp->Header);
}

TEST_P(CmTest, CM_04_SourceNotOnTheAdapterIsInvalidAddress) {
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    SOCKADDR_IN source = Loopback(0), destination = Loopback(ListenerPort());
    source.sin_addr.s_addr = htonl(0x0A010203);  // 10.1.2.3 is not an address of this adapter
    Completion done;
    EXPECT_EQ(connector->Dispatch->NdkConnect(connector, qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
                                              reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 1, 1,
                                              nullptr, 0, &Completion::OnRequest, &done),
              STATUS_INVALID_ADDRESS);
    EXPECT_EQ(connector->Dispatch->NdkConnect(connector, qp, reinterpret_cast<PSOCKADDR>(&source), 3,
                                              reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 1, 1,
                                              nullptr, 0, &Completion::OnRequest, &done),
              STATUS_INVALID_PARAMETER);
    Close(&connector->Header);
    Close(&qp->Header);
}

TEST_P(CmTest, CM_05_PortZeroTakesAnEphemeralPort) {
    const uint16_t port = ListenerPort();
    EXPECT_GE(port, 49152);
    SOCKADDR_IN local{};
    ULONG length = sizeof(local);
    ASSERT_EQ(connector_a_->Dispatch->NdkGetLocalAddress(connector_a_, reinterpret_cast<PSOCKADDR>(&local), &length),
              STATUS_SUCCESS);
    EXPECT_GE(ntohs(local.sin_port), 49152);
    EXPECT_NE(ntohs(local.sin_port), port);
}

TEST_P(CmTest, CM_09_11_RejectDeliversPrivateDataAndTheExactSizeRules) {
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    const char hello[] = "hello from the caller";
    connect_events_.incoming = nullptr;
    Completion done;
    NTSTATUS returned = StartConnect(connector, qp, ListenerPort(), done, hello, sizeof(hello));
    ASSERT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = connect_events_.incoming;
    // CM-11 (a): size query.
    ULONG length = 0;
    EXPECT_EQ(passive->Dispatch->NdkGetConnectionData(passive, nullptr, nullptr, nullptr, &length), STATUS_SUCCESS);
    EXPECT_EQ(length, sizeof(hello));
    // (b) a NULL buffer with a length is refused.
    length = 4;
    EXPECT_EQ(passive->Dispatch->NdkGetConnectionData(passive, nullptr, nullptr, nullptr, &length),
              STATUS_INVALID_PARAMETER);
    // (c)/(d) copies min(length, RDS); too small -> BUFFER_TOO_SMALL with RDS stored.
    char buffer[64] = {};
    length = 5;
    EXPECT_EQ(passive->Dispatch->NdkGetConnectionData(passive, nullptr, nullptr, buffer, &length),
              STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(length, sizeof(hello));
    EXPECT_EQ(std::memcmp(buffer, "hello", 5), 0);
    EXPECT_EQ(buffer[5], 0);
    length = sizeof(buffer);
    EXPECT_EQ(passive->Dispatch->NdkGetConnectionData(passive, nullptr, nullptr, buffer, &length), STATUS_SUCCESS);
    EXPECT_STREQ(buffer, hello);
    const char no[] = "no thanks";
    ASSERT_EQ(passive->Dispatch->NdkReject(passive, const_cast<char*>(no), sizeof(no)), STATUS_SUCCESS);
    EXPECT_EQ(done.Wait(returned), STATUS_CONNECTION_REFUSED);
    length = sizeof(buffer);
    EXPECT_EQ(connector->Dispatch->NdkGetConnectionData(connector, nullptr, nullptr, buffer, &length), STATUS_SUCCESS);
    EXPECT_STREQ(buffer, no);
    for (NDK_OBJECT_HEADER* object : {&connector->Header, &passive->Header, &qp->Header}) Close(object);
}

// CM-11 (c)/(d) when the peer sent no private data: a buffer is given, nothing is copied, RDS is 0 (found over
// TCP: the copy read from the empty data's null pointer, which UBSan stops).
TEST_P(CmTest, CM_11_ABufferWhenThePeerSentNoPrivateDataGetsNothing) {
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    connect_events_.incoming = nullptr;
    Completion done;
    NTSTATUS returned = StartConnect(connector, qp, ListenerPort(), done);
    ASSERT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = connect_events_.incoming;
    char buffer[16];
    std::memset(buffer, 0x7E, sizeof(buffer));
    ULONG length = sizeof(buffer);
    EXPECT_EQ(passive->Dispatch->NdkGetConnectionData(passive, nullptr, nullptr, buffer, &length), STATUS_SUCCESS);
    EXPECT_EQ(length, 0u);
    EXPECT_EQ(buffer[0], 0x7E) << "nothing copied";
    ASSERT_EQ(passive->Dispatch->NdkReject(passive, nullptr, 0), STATUS_SUCCESS);
    EXPECT_EQ(done.Wait(returned), STATUS_CONNECTION_REFUSED);
    length = sizeof(buffer);
    EXPECT_EQ(connector->Dispatch->NdkGetConnectionData(connector, nullptr, nullptr, buffer, &length), STATUS_SUCCESS);
    EXPECT_EQ(length, 0u);
    for (NDK_OBJECT_HEADER* object : {&connector->Header, &passive->Header, &qp->Header}) Close(object);
}

TEST_P(CmTest, CM_09_ActiveRejectAbortsThePassiveAccept) {
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* active_qp = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    connect_events_.incoming = nullptr;
    Completion connected;
    NTSTATUS returned = StartConnect(connector, active_qp, ListenerPort(), connected);
    ASSERT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = connect_events_.incoming;
    Completion accepted;
    NTSTATUS accept_returned = passive->Dispatch->NdkAccept(passive, passive_qp, 1, 1, nullptr, 0, nullptr, nullptr,
                                                            &Completion::OnRequest, &accepted);
    ASSERT_EQ(connected.Wait(returned), STATUS_SUCCESS);
    EXPECT_EQ(connector->Dispatch->NdkReject(connector, nullptr, 0), STATUS_SUCCESS);
    EXPECT_EQ(accepted.Wait(accept_returned), STATUS_CONNECTION_ABORTED);
    Completion late;
    EXPECT_EQ(
        late.Wait(connector->Dispatch->NdkCompleteConnect(connector, nullptr, nullptr, &Completion::OnRequest, &late)),
        STATUS_CONNECTION_INVALID);
    for (NDK_OBJECT_HEADER* object : {&connector->Header, &passive->Header, &active_qp->Header, &passive_qp->Header})
        Close(object);
}

TEST_P(CmTest, CM_10_PrivateDataLongerThanAdvertisedIsRefused) {
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    std::vector<uint8_t> data(Info().MaxCallerData + 1);
    Completion done;
    EXPECT_EQ(StartConnect(connector, qp, ListenerPort(), done, data.data(), static_cast<ULONG>(data.size())),
              STATUS_INVALID_PARAMETER);
    Close(&connector->Header);
    Close(&qp->Header);
}

TEST_P(CmTest, CM_13_AddressesOfBothEndsAndSmallBuffers) {
    SOCKADDR_IN a_local{}, a_peer{}, b_local{}, b_peer{};
    ULONG length = sizeof(SOCKADDR_IN);
    ASSERT_EQ(connector_a_->Dispatch->NdkGetLocalAddress(connector_a_, reinterpret_cast<PSOCKADDR>(&a_local), &length),
              STATUS_SUCCESS);
    length = sizeof(SOCKADDR_IN);
    ASSERT_EQ(connector_a_->Dispatch->NdkGetPeerAddress(connector_a_, reinterpret_cast<PSOCKADDR>(&a_peer), &length),
              STATUS_SUCCESS);
    length = sizeof(SOCKADDR_IN);
    ASSERT_EQ(connector_b_->Dispatch->NdkGetLocalAddress(connector_b_, reinterpret_cast<PSOCKADDR>(&b_local), &length),
              STATUS_SUCCESS);
    length = sizeof(SOCKADDR_IN);
    ASSERT_EQ(connector_b_->Dispatch->NdkGetPeerAddress(connector_b_, reinterpret_cast<PSOCKADDR>(&b_peer), &length),
              STATUS_SUCCESS);
    EXPECT_EQ(a_local.sin_port, b_peer.sin_port);
    EXPECT_EQ(a_peer.sin_port, b_local.sin_port);
    EXPECT_EQ(ntohs(b_local.sin_port), ListenerPort());
    length = 4;
    EXPECT_EQ(connector_a_->Dispatch->NdkGetLocalAddress(connector_a_, reinterpret_cast<PSOCKADDR>(&a_local), &length),
              STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(length, sizeof(SOCKADDR_IN));
}

TEST_P(CmTest, CM_14_ListenOnABoundPortOrAForeignAddressFails) {
    ConnectEvents events;
    Completion created;
    NDK_LISTENER* second = nullptr;
    ASSERT_EQ(created.Wait(adapter_->Dispatch->NdkCreateListener(adapter_, &ConnectEvents::OnConnect, &events,
                                                                 &Completion::OnCreate, &created, &second)),
              STATUS_SUCCESS);
    if (second == nullptr) second = reinterpret_cast<NDK_LISTENER*>(created.object());
    SOCKADDR_IN taken = Loopback(ListenerPort());
    Completion shared;
    EXPECT_EQ(shared.Wait(second->Dispatch->NdkListen(second, reinterpret_cast<PSOCKADDR>(&taken), sizeof(taken),
                                                      &Completion::OnRequest, &shared)),
              STATUS_SHARING_VIOLATION);
    SOCKADDR_IN foreign = Loopback(0);
    foreign.sin_addr.s_addr = htonl(0xC0A80001);
    Completion invalid;
    EXPECT_EQ(second->Dispatch->NdkListen(second, reinterpret_cast<PSOCKADDR>(&foreign), sizeof(foreign),
                                          &Completion::OnRequest, &invalid),
              STATUS_INVALID_ADDRESS);
    Close(&second->Header);
}

TEST_P(CmTest, CM_16_PausedListenerActsAsIfAbsent) {
    listener_->Dispatch->NdkControlConnectEvents(listener_, TRUE);
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    Completion refused;
    EXPECT_EQ(refused.Wait(StartConnect(connector, qp, ListenerPort(), refused)), STATUS_CONNECTION_REFUSED);
    listener_->Dispatch->NdkControlConnectEvents(listener_, FALSE);
    NDK_CONNECTOR* again = CreateConnector();
    connect_events_.incoming = nullptr;
    Completion offered;
    NTSTATUS returned = StartConnect(again, qp, ListenerPort(), offered);
    ASSERT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = connect_events_.incoming;
    ASSERT_EQ(passive->Dispatch->NdkReject(passive, nullptr, 0), STATUS_SUCCESS);
    EXPECT_EQ(offered.Wait(returned), STATUS_CONNECTION_REFUSED);
    for (NDK_OBJECT_HEADER* object : {&connector->Header, &again->Header, &passive->Header, &qp->Header}) Close(object);
}

TEST_P(CmTest, CM_18_19_22_23_ListenerEndpointLivesUntilItsConnectorsClose) {
    const uint16_t port = ListenerPort();
    Completion closed;
    NTSTATUS returned = listener_->Dispatch->NdkCloseListener(&listener_->Header, &Completion::OnClose, &closed);
    EXPECT_EQ(returned, STATUS_PENDING) << "CM-22: the accepted connector keeps it";
    // CM-23: no new connection once the close was issued.
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    Completion refused;
    EXPECT_EQ(refused.Wait(StartConnect(connector, qp, port, refused)), STATUS_CONNECTION_REFUSED);
    cm::Endpoint endpoint;
    SOCKADDR_IN address = Loopback(port);
    ASSERT_EQ(cm::EndpointFromSockaddr(reinterpret_cast<SOCKADDR*>(&address), sizeof(address), &endpoint),
              STATUS_SUCCESS);
    const bool here = remote_ == nullptr;  // the listener's endpoint is in this process's fabric
    if (here) {
        EXPECT_EQ(cm::Fabric::Instance().References(endpoint), 1u) << "CM-19: only the accepted connector's";
    }
    Close(&connector_b_->Header);
    connector_b_ = nullptr;
    EXPECT_EQ(closed.Wait(returned), STATUS_SUCCESS);
    listener_ = nullptr;
    if (here) {
        EXPECT_EQ(cm::Fabric::Instance().References(endpoint), 0u) << "CM-18: released, the port is reusable";
    }
    Close(&connector->Header);
    Close(&qp->Header);
}

TEST_P(CmTest, CM_24_26_27_GracefulDisconnectIndicatesOnceAndCompletesWhenThePeerAnswers) {
    NDK_SGE receive = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp_a_->Dispatch->NdkReceive(qp_a_, reinterpret_cast<PVOID>(5), &receive, 1), STATUS_SUCCESS);
    NDK_SGE b_receive = Sge(mr_b_, buffer_b_->data(), 8);
    ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, reinterpret_cast<PVOID>(6), &b_receive, 1), STATUS_SUCCESS);
    Completion a_done;
    NTSTATUS a_returned = connector_a_->Dispatch->NdkDisconnect(connector_a_, &Completion::OnRequest, &a_done);
    EXPECT_EQ(a_returned, STATUS_PENDING) << "CM-24: until the peer's disconnect arrives";
    EXPECT_TRUE(WaitFor([&] { return disconnects_b_.count == 1; }));
    EXPECT_EQ(disconnects_a_.count, 0) << "CM-26: not to the side that called NdkDisconnect";
    EXPECT_EQ(Pending(cq_b_), 0u) << "CM-27: the peer's graceful disconnect flushes nothing";
    NDK_SGE sge = Sge(mr_b_, buffer_b_->data(), 8);
    ASSERT_EQ(qp_b_->Dispatch->NdkSend(qp_b_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_CANCELLED) << "no half-open connection (CM-28)";
    Completion b_done;
    EXPECT_EQ(b_done.Wait(connector_b_->Dispatch->NdkDisconnect(connector_b_, &Completion::OnRequest, &b_done)),
              STATUS_SUCCESS);
    EXPECT_EQ(a_done.Wait(a_returned), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).RequestContext, reinterpret_cast<PVOID>(6)) << "B's own disconnect flushed it";
    NDK_RESULT_EX flushed = Poll(cq_a_);
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED) << "CM-25: implicit flush";
    EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(5));
    usleep(20000);
    EXPECT_EQ(disconnects_b_.count, 1) << "only once";
    EXPECT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &receive, 1, 0), STATUS_CONNECTION_INVALID);
    Completion again;
    EXPECT_EQ(again.Wait(connector_a_->Dispatch->NdkDisconnect(connector_a_, &Completion::OnRequest, &again)),
              STATUS_CONNECTION_INVALID);
}

// CM-25 (issue 18 §2): a peer that never answers our NdkDisconnect is waited for DisconnectTimeoutMs, no longer,
// in every configuration (in-process too): the request completes with STATUS_IO_TIMEOUT and our QP is flushed.
class CmDisconnectTimeoutTest : public CmTest {
protected:
    static constexpr ULONG kTimeoutMs = 500;
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        CmTest::Customize(config);
        config.DisconnectTimeoutMs = kTimeoutMs;
    }
};
SOFTNDK_ALL_MODES(CmDisconnectTimeoutTest);

TEST_P(CmDisconnectTimeoutTest, CM_25_DisconnectCompletesWithIoTimeoutWhenThePeerNeverAnswers) {
    NDK_SGE receive = Sge(mr_a_, buffer_a_->data(), 8);
    ASSERT_EQ(qp_a_->Dispatch->NdkReceive(qp_a_, reinterpret_cast<PVOID>(5), &receive, 1), STATUS_SUCCESS);
    const auto start = std::chrono::steady_clock::now();
    Completion a_done;
    const NTSTATUS a_returned = connector_a_->Dispatch->NdkDisconnect(connector_a_, &Completion::OnRequest, &a_done);
    EXPECT_EQ(a_returned, STATUS_PENDING) << "CM-24: until the peer's disconnect arrives";
    EXPECT_TRUE(WaitFor([&] { return disconnects_b_.count == 1; })) << "the peer is told (CM-26)";
    const NTSTATUS status = a_done.Wait(a_returned);  // B never calls NdkDisconnect
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(status, STATUS_IO_TIMEOUT) << "0x" << std::hex << status;
    EXPECT_GE(took, static_cast<long>(kTimeoutMs) * 9 / 10) << "it waited for the peer first";
    EXPECT_LE(took, static_cast<long>(kTimeoutMs) + 3000);
    const NDK_RESULT_EX flushed = Poll(cq_a_);
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED) << "CM-25: implicit flush";
    EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(5));
    EXPECT_EQ(disconnects_a_.count, 0) << "no disconnect event for our own NdkDisconnect (CM-26)";
    Completion b_done;  // the peer's late answer completes, whatever its status
    b_done.Wait(connector_b_->Dispatch->NdkDisconnect(connector_b_, &Completion::OnRequest, &b_done));
}

TEST_P(CmTest, CM_26_ClosingOneSideIndicatesADisconnectToTheOther) {
    Close(&connector_a_->Header);
    connector_a_ = nullptr;
    EXPECT_TRUE(WaitFor([&] { return disconnects_b_.count == 1; }));
    NDK_SGE sge = Sge(mr_b_, buffer_b_->data(), 8);
    if (!OverTcp()) {  // in-process the close ends the link both QPs share
        EXPECT_EQ(qp_b_->Dispatch->NdkSend(qp_b_, nullptr, &sge, 1, 0), STATUS_CONNECTION_INVALID);
        return;
    }
    // Over TCP the close is an abort (a reset): B's QP is in error, and what it posts is flushed with the cause.
    ASSERT_EQ(qp_b_->Dispatch->NdkSend(qp_b_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX flushed = Poll(cq_b_);
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
    EXPECT_EQ(flushed.ProviderErrorCode, engine::TerminateProviderError(2, 0, 0x01))
        << std::hex << flushed.ProviderErrorCode;
}

// CM-05/CM-17: a shared endpoint's connections bind its port for real, so port 0 skips an ephemeral port that
// another process holds. Here a plain socket of this process plays that process, on the port the fabric's
// cursor gives next (the one after a shared endpoint just closed).
TEST_P(CmTest, CM_05_17_SharedEndpointSkipsAPortAnotherProcessHolds) {
    NDK_SHARED_ENDPOINT* probe = CreateSharedEndpoint();
    ASSERT_NE(probe, nullptr);
    SOCKADDR_IN first{};
    ULONG length = sizeof(first);
    ASSERT_EQ(probe->Dispatch->NdkGetLocalAddress(probe, reinterpret_cast<PSOCKADDR>(&first), &length), STATUS_SUCCESS);
    Close(&probe->Header);
    const uint16_t next = ntohs(first.sin_port) == 65535 ? 49152 : ntohs(first.sin_port) + 1;
    const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(holder, 0);
    SOCKADDR_IN held = Loopback(next);
    if (::bind(holder, reinterpret_cast<sockaddr*>(&held), sizeof(held)) != 0 || ::listen(holder, 1) != 0) {
        ::close(holder);
        GTEST_SKIP() << "port " << next << " is in use here already";
    }
    NDK_SHARED_ENDPOINT* shared = CreateSharedEndpoint();
    ASSERT_NE(shared, nullptr);
    SOCKADDR_IN local{};
    length = sizeof(local);
    ASSERT_EQ(shared->Dispatch->NdkGetLocalAddress(shared, reinterpret_cast<PSOCKADDR>(&local), &length),
              STATUS_SUCCESS);
    if (OverTcp() || config_.Transport == SOFTNDK_TRANSPORT_AUTO) {  // in-process only: no real port is bound
        EXPECT_NE(ntohs(local.sin_port), next) << "the port another socket holds is skipped";
    }
    Close(&shared->Header);
    ::close(holder);
}

// CM-17: an explicit port another process listens on fails as a bound port does, where the adapter uses TCP.
TEST_P(CmTest, CM_17_SharedEndpointOnAPortAnotherProcessListensOnFails) {
    if (!OverTcp() && config_.Transport != SOFTNDK_TRANSPORT_AUTO) GTEST_SKIP() << "in-process only: no real port";
    const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(holder, 0);
    SOCKADDR_IN held = Loopback(0);
    socklen_t held_length = sizeof(held);
    ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&held), sizeof(held)), 0);
    ASSERT_EQ(::listen(holder, 1), 0);
    ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr*>(&held), &held_length), 0);
    Completion created;
    NDK_SHARED_ENDPOINT* shared = nullptr;
    EXPECT_EQ(
        created.Wait(adapter_->Dispatch->NdkCreateSharedEndpoint(
            adapter_, reinterpret_cast<PSOCKADDR>(&held), sizeof(held), &Completion::OnCreate, &created, &shared)),
        STATUS_SHARING_VIOLATION);
    EXPECT_EQ(shared, nullptr);
    if (shared != nullptr) Close(&shared->Header);  // a wrong success must not leave the adapter open (teardown)
    ::close(holder);
    NDK_SHARED_ENDPOINT* retry = CreateSharedEndpoint(ntohs(held.sin_port));
    EXPECT_NE(retry, nullptr) << "free again once the other socket closed";
    if (retry != nullptr) Close(&retry->Header);
}

TEST_P(CmTest, CM_06_21_SharedEndpointConnectsToManyAndRefusesADuplicate4Tuple) {
    NDK_SHARED_ENDPOINT* shared = CreateSharedEndpoint();
    ASSERT_NE(shared, nullptr);
    SOCKADDR_IN local{};
    ULONG length = sizeof(local);
    ASSERT_EQ(shared->Dispatch->NdkGetLocalAddress(shared, reinterpret_cast<PSOCKADDR>(&local), &length),
              STATUS_SUCCESS);
    EXPECT_GE(ntohs(local.sin_port), 49152);
    NDK_CONNECTOR* first = CreateConnector();
    NDK_CONNECTOR* second = CreateConnector();
    NDK_QP* qp1 = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* qp2 = CreateQp(cq_a_, cq_a_, nullptr);
    SOCKADDR_IN destination = Loopback(ListenerPort());
    connect_events_.incoming = nullptr;
    Completion one;
    NTSTATUS returned = first->Dispatch->NdkConnectWithSharedEndpoint(
        first, qp1, shared, reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 1, 1, nullptr, 0,
        &Completion::OnRequest, &one);
    if (!WaitFor([&] { return connect_events_.incoming.load() != nullptr; })) {
        // Fail without leaving objects open (the adapter's close would wait for them for ever).
        ADD_FAILURE() << "no connect event; the connect ended with 0x" << std::hex << one.Wait(returned);
        for (NDK_OBJECT_HEADER* object : {&first->Header, &second->Header, &qp1->Header, &qp2->Header, &shared->Header})
            Close(object);
        return;
    }
    NDK_CONNECTOR* passive = connect_events_.incoming;
    Completion duplicate;
    EXPECT_EQ(second->Dispatch->NdkConnectWithSharedEndpoint(
                  second, qp2, shared, reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 1, 1, nullptr, 0,
                  &Completion::OnRequest, &duplicate),
              STATUS_ADDRESS_ALREADY_EXISTS);
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    Completion accepted;
    NTSTATUS accept_returned = passive->Dispatch->NdkAccept(passive, passive_qp, 1, 1, nullptr, 0, nullptr, nullptr,
                                                            &Completion::OnRequest, &accepted);
    FinishHandshake(first, one, returned, accepted, accept_returned);
    Completion shared_closed;
    NTSTATUS close_returned =
        shared->Dispatch->NdkCloseSharedEndpoint(&shared->Header, &Completion::OnClose, &shared_closed);
    EXPECT_EQ(close_returned, STATUS_PENDING) << "CM-22: its connected connector keeps it";
    for (NDK_OBJECT_HEADER* object :
         {&first->Header, &second->Header, &passive->Header, &qp1->Header, &qp2->Header, &passive_qp->Header})
        Close(object);
    EXPECT_EQ(shared_closed.Wait(close_returned), STATUS_SUCCESS);
}

TEST_P(CmTest, CM_31_Ipv6ConnectionsWork) {
    ConnectEvents events;
    Completion created;
    NDK_LISTENER* listener = nullptr;  // on side B, the passive side
    ASSERT_EQ(created.Wait(adapter_b_->Dispatch->NdkCreateListener(adapter_b_, &ConnectEvents::OnConnect, &events,
                                                                   &Completion::OnCreate, &created, &listener)),
              STATUS_SUCCESS);
    if (listener == nullptr) listener = reinterpret_cast<NDK_LISTENER*>(created.object());
    SOCKADDR_IN6 address{};
    address.sin6_family = AF_INET6;
    std::memcpy(&address.sin6_addr, &in6addr_loopback, sizeof(address.sin6_addr));
    Completion listened;
    ASSERT_EQ(listened.Wait(listener->Dispatch->NdkListen(listener, reinterpret_cast<PSOCKADDR>(&address),
                                                          sizeof(address), &Completion::OnRequest, &listened)),
              STATUS_SUCCESS);
    ULONG length = sizeof(address);
    ASSERT_EQ(listener->Dispatch->NdkGetLocalAddress(listener, reinterpret_cast<PSOCKADDR>(&address), &length),
              STATUS_SUCCESS);
    SOCKADDR_IN6 source{};
    source.sin6_family = AF_INET6;
    std::memcpy(&source.sin6_addr, &in6addr_loopback, sizeof(source.sin6_addr));
    NDK_CONNECTOR* connector = CreateConnector();
    NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
    Completion done;
    NTSTATUS returned = connector->Dispatch->NdkConnect(
        connector, qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(source), reinterpret_cast<PSOCKADDR>(&address),
        sizeof(address), 1, 1, nullptr, 0, &Completion::OnRequest, &done);
    ASSERT_TRUE(WaitFor([&] { return events.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = events.incoming;
    // Established over ::1: accept, complete, move data both ways, disconnect gracefully.
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    DisconnectEvents passive_disconnects;
    Completion accepted;
    NTSTATUS accept_returned =
        passive->Dispatch->NdkAccept(passive, passive_qp, 1, 1, nullptr, 0, &DisconnectEvents::OnDisconnect,
                                     &passive_disconnects, &Completion::OnRequest, &accepted);
    ASSERT_TRUE(FinishHandshake(connector, done, returned, accepted, accept_returned));
    SOCKADDR_IN6 peer{};
    ULONG peer_length = sizeof(peer);
    ASSERT_EQ(connector->Dispatch->NdkGetPeerAddress(connector, reinterpret_cast<PSOCKADDR>(&peer), &peer_length),
              STATUS_SUCCESS);
    EXPECT_EQ(peer.sin6_family, AF_INET6);
    EXPECT_EQ(std::memcmp(&peer.sin6_addr, &in6addr_loopback, sizeof(peer.sin6_addr)), 0);
    std::memset(buffer_a_->data(), 0x66, 32);
    NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 64);
    ASSERT_EQ(passive_qp->Dispatch->NdkReceive(passive_qp, nullptr, &receive, 1), STATUS_SUCCESS);
    NDK_SGE send = Sge(mr_a_, buffer_a_->data(), 32);
    ASSERT_EQ(qp->Dispatch->NdkSend(qp, nullptr, &send, 1, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    const NDK_RESULT_EX received = Poll(cq_b_);
    EXPECT_EQ(received.Status, STATUS_SUCCESS);
    EXPECT_EQ(received.BytesTransferred, 32u);
    EXPECT_EQ(buffer_b_->data()[31], 0x66);
    std::memset(buffer_b_->data() + 100, 0x77, 16);
    NDK_SGE write = Sge(mr_b_, buffer_b_->data() + 100, 16);
    ASSERT_EQ(passive_qp->Dispatch->NdkWrite(passive_qp, nullptr, &write, 1, RemoteAddress(*buffer_a_, 200),
                                             mr_a_->Dispatch->NdkGetRemoteTokenFromMr(mr_a_), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_b_).Status, STATUS_SUCCESS);
    EXPECT_TRUE(WaitFor([&] { return buffer_a_->data()[215] == 0x77; }))
        << "placed (a wire Write completes as it leaves)";
    Completion disconnected;
    NTSTATUS disconnect_returned = connector->Dispatch->NdkDisconnect(connector, &Completion::OnRequest, &disconnected);
    ASSERT_TRUE(WaitFor([&] { return passive_disconnects.count == 1; }));
    Completion passive_disconnected;
    EXPECT_EQ(passive_disconnected.Wait(
                  passive->Dispatch->NdkDisconnect(passive, &Completion::OnRequest, &passive_disconnected)),
              STATUS_SUCCESS);
    EXPECT_EQ(disconnected.Wait(disconnect_returned), STATUS_SUCCESS);
    for (NDK_OBJECT_HEADER* object :
         {&connector->Header, &passive->Header, &listener->Header, &qp->Header, &passive_qp->Header})
        Close(object);
}

// CM-17: a shared endpoint on an address the adapter does not have, or on a bound port, fails as the page says.
TEST_P(CmTest, CM_17_SharedEndpointOnAForeignAddressOrABoundPortFails) {
    Completion created;
    NDK_SHARED_ENDPOINT* shared = nullptr;
    SOCKADDR_IN foreign = Loopback(0);
    foreign.sin_addr.s_addr = htonl(0xC0A80001);
    EXPECT_EQ(created.Wait(adapter_->Dispatch->NdkCreateSharedEndpoint(adapter_, reinterpret_cast<PSOCKADDR>(&foreign),
                                                                       sizeof(foreign), &Completion::OnCreate, &created,
                                                                       &shared)),
              STATUS_INVALID_ADDRESS);
    EXPECT_EQ(shared, nullptr);
    Completion taken_created;
    SOCKADDR_IN taken = Loopback(ListenerPort());
    EXPECT_EQ(taken_created.Wait(adapter_->Dispatch->NdkCreateSharedEndpoint(
                  adapter_, reinterpret_cast<PSOCKADDR>(&taken), sizeof(taken), &Completion::OnCreate, &taken_created,
                  &shared)),
              STATUS_SHARING_VIOLATION);
    EXPECT_EQ(shared, nullptr);
}

// CM-20: a plain NdkConnect's own endpoint holds one reference, dropped when the connector closes.
TEST_P(CmTest, CM_20_ConnectorsOwnEndpointIsReleasedWhenItCloses) {
    SOCKADDR_IN local{};
    ULONG length = sizeof(local);
    ASSERT_EQ(connector_a_->Dispatch->NdkGetLocalAddress(connector_a_, reinterpret_cast<PSOCKADDR>(&local), &length),
              STATUS_SUCCESS);
    cm::Endpoint endpoint;
    ASSERT_EQ(cm::EndpointFromSockaddr(reinterpret_cast<SOCKADDR*>(&local), sizeof(local), &endpoint), STATUS_SUCCESS);
    EXPECT_EQ(cm::Fabric::Instance().References(endpoint), 1u) << "the connector's own endpoint";
    Close(&connector_a_->Header);
    connector_a_ = nullptr;
    EXPECT_EQ(cm::Fabric::Instance().References(endpoint), 0u) << "released with the connector";
    ConnectEvents events;
    uint16_t port = 0;
    NDK_LISTENER* reuse = Listen(&events, ntohs(local.sin_port), &port);
    EXPECT_EQ(port, ntohs(local.sin_port)) << "the port is free again";
    Close(&reuse->Header);
}

TEST_P(CmTest, CM_07_CompleteConnectWithoutAConnectIsConnectionInvalid) {
    NDK_CONNECTOR* connector = CreateConnector();
    Completion done;
    EXPECT_EQ(
        done.Wait(connector->Dispatch->NdkCompleteConnect(connector, nullptr, nullptr, &Completion::OnRequest, &done)),
        STATUS_CONNECTION_INVALID);
    ULONG length = 0;
    EXPECT_EQ(connector->Dispatch->NdkGetConnectionData(connector, nullptr, nullptr, nullptr, &length),
              STATUS_CONNECTION_INVALID);
    Close(&connector->Header);
}

TEST_P(CmTest, CM_28_QP_23_AConnectedQpCannotBeConnectedAgain) {
    NDK_CONNECTOR* connector = CreateConnector();
    Completion done;
    EXPECT_EQ(StartConnect(connector, qp_a_, ListenerPort(), done), STATUS_INVALID_DEVICE_STATE);
    Close(&connector->Header);
}

}  // namespace
}  // namespace softndk::test

namespace softndk::test {
namespace {

struct ReasonEvents {
    std::atomic<int> count{0};
    std::atomic<ULONG> reason{99};
    static VOID OnDisconnect(PVOID context, ULONG reason) {
        auto* events = static_cast<ReasonEvents*>(context);
        events->reason = reason;
        ++events->count;
    }
};

class CmExTest : public CmTest {};
SOFTNDK_ALL_MODES(CmExTest);

TEST_P(CmExTest, CM_07_08_30_AcceptExAndCompleteConnectExDeliverTheExDisconnectEvent) {
    NDK_CONNECTOR* active = CreateConnector();
    NDK_QP* active_qp = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    connect_events_.incoming = nullptr;
    Completion connected;
    NTSTATUS returned = StartConnect(active, active_qp, ListenerPort(), connected);
    ASSERT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = connect_events_.incoming;
    ReasonEvents active_events, passive_events;
    Completion accepted;
    NTSTATUS accept_returned =
        passive->Dispatch->NdkAcceptEx(passive, passive_qp, 1, 1, nullptr, 0, &ReasonEvents::OnDisconnect,
                                       &passive_events, &Completion::OnRequest, &accepted);
    ASSERT_EQ(connected.Wait(returned), STATUS_SUCCESS);
    Completion completed;
    ASSERT_EQ(completed.Wait(active->Dispatch->NdkCompleteConnectEx(active, &ReasonEvents::OnDisconnect, &active_events,
                                                                    &Completion::OnRequest, &completed)),
              STATUS_SUCCESS);
    ASSERT_EQ(accepted.Wait(accept_returned), STATUS_SUCCESS);
    Close(&active->Header);  // abortive: the passive side hears of it once
    EXPECT_TRUE(WaitFor([&] { return passive_events.count == 1; }));
    EXPECT_EQ(passive_events.reason, 0u) << "CM-30: no reason supplied";
    EXPECT_EQ(active_events.count, 0);
    for (NDK_OBJECT_HEADER* object : {&passive->Header, &active_qp->Header, &passive_qp->Header}) Close(object);
}

}  // namespace
}  // namespace softndk::test
