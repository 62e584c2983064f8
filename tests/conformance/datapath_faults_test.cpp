// Fault injection on every asynchronous function of the data path and connection management (CB-03): the
// injected failure arrives inline or through the completion, and the next call of the same function, on the same
// objects, works. Each rule fires on the call after those the fixture's own set-up makes.
#include <string>

#include "support/connected_pair.h"

namespace softndk::test {
namespace {

struct DataPathFault {
    const char* function;
    ULONG calls_in_setup;
    bool asynchronous;
    const char* requirement;
};

class DataPathFaultTest : public ConnectedPairTest {
protected:
    const DataPathFault& Case() const { return fault_; }
    // In-process both sides share one adapter, so the rule counts the set-up's calls of both. With side B in
    // another process each adapter counts its own: the rule goes to the side whose call is injected, after that
    // side's set-up calls only.
    void Customize(SOFTNDK_ADAPTER_CONFIG& config) override {
        if (!RemoteSideRequested()) return Inject(config, fault_.calls_in_setup);
        if (!OnSideBInScenario()) Inject(config, fault_.calls_in_setup - SideBSetUpCalls());
    }
    void CustomizeSideB(SOFTNDK_ADAPTER_CONFIG& config) override {
        config.FaultRuleCount = 0;
        if (OnSideBInScenario()) Inject(config, SideBSetUpCalls());
    }
    void Inject(SOFTNDK_ADAPTER_CONFIG& config, ULONG calls_before) {
        config.FaultRuleCount = 1;
        config.FaultRules[0] = SOFTNDK_FAULT_RULE{fault_.function,
                                                  calls_before + 1,
                                                  0.0,
                                                  0,
                                                  static_cast<BOOLEAN>(fault_.asynchronous),
                                                  STATUS_INSUFFICIENT_RESOURCES};
    }
    // The scenario's injected call is side B's: the accept of the fixture listener's connection.
    bool OnSideBInScenario() const {
        const std::string function = fault_.function;
        return function == "NdkAccept" || function == "NdkAcceptEx";
    }
    // Calls of the function side B's part of the fixture's set-up makes (ConnectedPairTest::SetUp).
    ULONG SideBSetUpCalls() const {
        const std::string function = fault_.function;
        const bool one = function == "NdkCreateCq" || function == "NdkCreateQp" || function == "NdkCreateListener" ||
                         function == "NdkListen" || function == "NdkAccept";
        return one ? 1 : 0;
    }
    void ExpectInjected(NTSTATUS returned, Completion& done) {
        EXPECT_EQ(returned, fault_.asynchronous ? STATUS_PENDING : STATUS_INSUFFICIENT_RESOURCES);
        EXPECT_EQ(done.Wait(returned), STATUS_INSUFFICIENT_RESOURCES);
    }

public:
    static inline DataPathFault fault_;
};

class DataPathFaultCases : public ::testing::TestWithParam<DataPathFault> {};

void PrintTo(const DataPathFault& c, std::ostream* out) {
    *out << c.function << (c.asynchronous ? " async" : " inline");
}

// Runs one scenario in a fresh fixture (the fixture is parameterised by completion mode; faults use inline).
class Scenario : public DataPathFaultTest {
public:
    explicit Scenario(const DataPathFault& fault) { fault_ = fault; }
    void TestBody() override {}
    SOFTNDK_COMPLETION_MODE Mode() override { return SOFTNDK_COMPLETION_INLINE; }
    void Start() { SetUp(); }
    void Finish() { TearDown(); }
    void Run();
    // The next call after an injected NdkConnect* failure: the connect from `active` goes through the fixture's
    // listener, is accepted on a new QP and completed. The passive connector and QP are closed here.
    void ExpectConnects(NDK_CONNECTOR* active, NTSTATUS connect_returned, Completion& connected) {
        ASSERT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
        NDK_CONNECTOR* passive = connect_events_.incoming.exchange(nullptr);
        NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
        Completion accepted;
        NTSTATUS accept_returned = passive->Dispatch->NdkAccept(passive, passive_qp, 1, 1, nullptr, 0, nullptr, nullptr,
                                                                &Completion::OnRequest, &accepted);
        EXPECT_TRUE(FinishHandshake(active, connected, connect_returned, accepted, accept_returned))
            << "the retry connects";
        Close(&passive->Header);
        Close(&passive_qp->Header);
    }
};

void Scenario::Run() {
    const std::string function = fault_.function;
    if (function == "NdkCreateCq") {
        Completion done;
        NDK_CQ* cq = nullptr;
        ExpectInjected(adapter_->Dispatch->NdkCreateCq(adapter_, 8, &CqEvents::OnNotify, nullptr, nullptr,
                                                       &Completion::OnCreate, &done, &cq),
                       done);
        EXPECT_EQ(cq, nullptr);
        Close(&CreateCq(8, &cq_events_a_)->Header);
    } else if (function == "NdkCreateQp") {
        Completion done;
        NDK_QP* qp = nullptr;
        ExpectInjected(
            pd_->Dispatch->NdkCreateQp(pd_, cq_a_, cq_a_, nullptr, 4, 4, 1, 1, 0, &Completion::OnCreate, &done, &qp),
            done);
        Close(&CreateQp(cq_a_, cq_a_, nullptr)->Header);
    } else if (function == "NdkCreateSrq" || function == "NdkCreateQpWithSrq" || function == "NdkModifySrq") {
        Completion made;
        NDK_SRQ* srq = nullptr;
        NTSTATUS returned =
            pd_->Dispatch->NdkCreateSrq(pd_, 4, 1, 0, nullptr, nullptr, nullptr, &Completion::OnCreate, &made, &srq);
        if (function == "NdkCreateSrq") {
            ExpectInjected(returned, made);
            Completion again;
            NDK_SRQ* retried = nullptr;
            EXPECT_EQ(again.Wait(pd_->Dispatch->NdkCreateSrq(pd_, 4, 1, 0, nullptr, nullptr, nullptr,
                                                             &Completion::OnCreate, &again, &retried)),
                      STATUS_SUCCESS);
            if (retried == nullptr) retried = reinterpret_cast<NDK_SRQ*>(again.object());
            Close(&retried->Header);
            return;
        }
        ASSERT_EQ(made.Wait(returned), STATUS_SUCCESS);
        if (function == "NdkCreateQpWithSrq") {
            Completion done;
            NDK_QP* qp = nullptr;
            ExpectInjected(pd_->Dispatch->NdkCreateQpWithSrq(pd_, cq_a_, cq_a_, srq, nullptr, 4, 1, 0,
                                                             &Completion::OnCreate, &done, &qp),
                           done);
            Completion again;
            EXPECT_EQ(again.Wait(pd_->Dispatch->NdkCreateQpWithSrq(pd_, cq_a_, cq_a_, srq, nullptr, 4, 1, 0,
                                                                   &Completion::OnCreate, &again, &qp)),
                      STATUS_SUCCESS);
            if (qp == nullptr) qp = reinterpret_cast<NDK_QP*>(again.object());
            Close(&qp->Header);
        } else {
            Completion done;
            ExpectInjected(srq->Dispatch->NdkModifySrq(srq, 8, 0, &Completion::OnRequest, &done), done);
            Completion again;
            EXPECT_EQ(again.Wait(srq->Dispatch->NdkModifySrq(srq, 8, 0, &Completion::OnRequest, &again)),
                      STATUS_SUCCESS);
        }
        Close(&srq->Header);
    } else if (function == "NdkCreateMw") {
        Completion done;
        NDK_MW* mw = nullptr;
        ExpectInjected(pd_->Dispatch->NdkCreateMw(pd_, &Completion::OnCreate, &done, &mw), done);
        Completion again;
        EXPECT_EQ(again.Wait(pd_->Dispatch->NdkCreateMw(pd_, &Completion::OnCreate, &again, &mw)), STATUS_SUCCESS);
        if (mw == nullptr) mw = reinterpret_cast<NDK_MW*>(again.object());
        Close(&mw->Header);
    } else if (function == "NdkCreateConnector") {
        Completion done;
        NDK_CONNECTOR* connector = nullptr;
        ExpectInjected(adapter_->Dispatch->NdkCreateConnector(adapter_, &Completion::OnCreate, &done, &connector),
                       done);
        Close(&CreateConnector()->Header);
    } else if (function == "NdkCreateListener" || function == "NdkListen") {
        Completion done;
        NDK_LISTENER* listener = nullptr;
        NTSTATUS returned = adapter_->Dispatch->NdkCreateListener(adapter_, &ConnectEvents::OnConnect, nullptr,
                                                                  &Completion::OnCreate, &done, &listener);
        if (function == "NdkCreateListener") {
            ExpectInjected(returned, done);
            Completion again;
            EXPECT_EQ(again.Wait(adapter_->Dispatch->NdkCreateListener(adapter_, &ConnectEvents::OnConnect, nullptr,
                                                                       &Completion::OnCreate, &again, &listener)),
                      STATUS_SUCCESS);
            if (listener == nullptr) listener = reinterpret_cast<NDK_LISTENER*>(again.object());
            Close(&listener->Header);
            return;
        }
        ASSERT_EQ(done.Wait(returned), STATUS_SUCCESS);
        if (listener == nullptr) listener = reinterpret_cast<NDK_LISTENER*>(done.object());
        SOCKADDR_IN address = Loopback(0);
        Completion listened;
        ExpectInjected(listener->Dispatch->NdkListen(listener, reinterpret_cast<PSOCKADDR>(&address), sizeof(address),
                                                     &Completion::OnRequest, &listened),
                       listened);
        Completion again;
        EXPECT_EQ(again.Wait(listener->Dispatch->NdkListen(listener, reinterpret_cast<PSOCKADDR>(&address),
                                                           sizeof(address), &Completion::OnRequest, &again)),
                  STATUS_SUCCESS);
        Close(&listener->Header);
    } else if (function == "NdkCreateSharedEndpoint") {
        Completion done;
        NDK_SHARED_ENDPOINT* shared = nullptr;
        SOCKADDR_IN address = Loopback(0);
        ExpectInjected(
            adapter_->Dispatch->NdkCreateSharedEndpoint(adapter_, reinterpret_cast<PSOCKADDR>(&address),
                                                        sizeof(address), &Completion::OnCreate, &done, &shared),
            done);
        Completion again;
        EXPECT_EQ(again.Wait(adapter_->Dispatch->NdkCreateSharedEndpoint(
                      adapter_, reinterpret_cast<PSOCKADDR>(&address), sizeof(address), &Completion::OnCreate, &again,
                      &shared)),
                  STATUS_SUCCESS);
        if (shared == nullptr) shared = reinterpret_cast<NDK_SHARED_ENDPOINT*>(again.object());
        Close(&shared->Header);
    } else if (function == "NdkResizeCq") {
        Completion done;
        ExpectInjected(cq_a_->Dispatch->NdkResizeCq(cq_a_, 128, &Completion::OnRequest, &done), done);
        Completion again;
        EXPECT_EQ(again.Wait(cq_a_->Dispatch->NdkResizeCq(cq_a_, 128, &Completion::OnRequest, &again)), STATUS_SUCCESS);
    } else if (function == "NdkConnect") {
        NDK_CONNECTOR* connector = CreateConnector();
        NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
        SOCKADDR_IN source = Loopback(0), destination = Loopback(ListenerPort());
        auto connect = [&](Completion& done) {
            return connector->Dispatch->NdkConnect(connector, qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
                                                   reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 1, 1,
                                                   nullptr, 0, &Completion::OnRequest, &done);
        };
        connect_events_.incoming = nullptr;
        Completion done;
        ExpectInjected(connect(done), done);
        Completion again;
        ExpectConnects(connector, connect(again), again);
        Close(&connector->Header);
        Close(&qp->Header);
    } else if (function == "NdkDisconnect") {
        Completion done;
        ExpectInjected(connector_a_->Dispatch->NdkDisconnect(connector_a_, &Completion::OnRequest, &done), done);
        NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 8);
        NDK_SGE receive = Sge(mr_b_, buffer_b_->data(), 8);
        ASSERT_EQ(qp_b_->Dispatch->NdkReceive(qp_b_, nullptr, &receive, 1), STATUS_SUCCESS);
        ASSERT_EQ(qp_a_->Dispatch->NdkSend(qp_a_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS) << "the failed disconnect changed nothing";
        EXPECT_EQ(Poll(cq_b_).Status, STATUS_SUCCESS);
        Completion again;
        NTSTATUS again_returned = connector_a_->Dispatch->NdkDisconnect(connector_a_, &Completion::OnRequest, &again);
        EXPECT_TRUE(WaitFor([&] { return disconnects_b_.count == 1; })) << "the retry reached the peer";
        Completion peer;
        EXPECT_EQ(peer.Wait(connector_b_->Dispatch->NdkDisconnect(connector_b_, &Completion::OnRequest, &peer)),
                  STATUS_SUCCESS);
        EXPECT_EQ(again.Wait(again_returned), STATUS_SUCCESS);
    } else if (function == "NdkConnectWithSharedEndpoint") {
        Completion made;
        NDK_SHARED_ENDPOINT* shared = nullptr;
        SOCKADDR_IN local = Loopback(0), destination = Loopback(ListenerPort());
        ASSERT_EQ(
            made.Wait(adapter_->Dispatch->NdkCreateSharedEndpoint(
                adapter_, reinterpret_cast<PSOCKADDR>(&local), sizeof(local), &Completion::OnCreate, &made, &shared)),
            STATUS_SUCCESS);
        NDK_CONNECTOR* connector = CreateConnector();
        NDK_QP* qp = CreateQp(cq_a_, cq_a_, nullptr);
        auto connect = [&](Completion& done) {
            return connector->Dispatch->NdkConnectWithSharedEndpoint(
                connector, qp, shared, reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 1, 1, nullptr, 0,
                &Completion::OnRequest, &done);
        };
        connect_events_.incoming = nullptr;
        Completion done;
        ExpectInjected(connect(done), done);
        Completion again;
        ExpectConnects(connector, connect(again), again);
        for (NDK_OBJECT_HEADER* object : {&connector->Header, &qp->Header, &shared->Header}) Close(object);
    } else if (function == "NdkAccept" || function == "NdkAcceptEx" || function == "NdkCompleteConnect" ||
               function == "NdkCompleteConnectEx") {
        // A second connection to the fixture's listener.
        const bool extended = function.back() == 'x';
        NDK_CONNECTOR* active = CreateConnector();
        NDK_QP* active_qp = CreateQp(cq_a_, cq_a_, nullptr);
        NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
        SOCKADDR_IN local{};
        ULONG length = sizeof(local);
        ASSERT_EQ(listener_->Dispatch->NdkGetLocalAddress(listener_, reinterpret_cast<PSOCKADDR>(&local), &length),
                  STATUS_SUCCESS);
        SOCKADDR_IN source = Loopback(0);
        connect_events_.incoming = nullptr;
        Completion connected;
        NTSTATUS connect_returned = active->Dispatch->NdkConnect(
            active, active_qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
            reinterpret_cast<PSOCKADDR>(&local), sizeof(local), 1, 1, nullptr, 0, &Completion::OnRequest, &connected);
        ASSERT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
        NDK_CONNECTOR* passive = connect_events_.incoming;
        auto accept = [&](Completion& done) {
            return extended ? passive->Dispatch->NdkAcceptEx(passive, passive_qp, 1, 1, nullptr, 0, nullptr, nullptr,
                                                             &Completion::OnRequest, &done)
                            : passive->Dispatch->NdkAccept(passive, passive_qp, 1, 1, nullptr, 0, nullptr, nullptr,
                                                           &Completion::OnRequest, &done);
        };
        auto complete = [&](Completion& done) {
            return extended
                       ? active->Dispatch->NdkCompleteConnectEx(active, nullptr, nullptr, &Completion::OnRequest, &done)
                       : active->Dispatch->NdkCompleteConnect(active, nullptr, nullptr, &Completion::OnRequest, &done);
        };
        if (function == "NdkAccept" || function == "NdkAcceptEx") {
            Completion failed;
            ExpectInjected(accept(failed), failed);
            Completion accepted;
            NTSTATUS accept_returned = accept(accepted);
            EXPECT_EQ(connected.Wait(connect_returned), STATUS_SUCCESS) << "the retried accept went through";
            Completion completed;
            EXPECT_EQ(completed.Wait(complete(completed)), STATUS_SUCCESS);
            EXPECT_EQ(accepted.Wait(accept_returned), STATUS_SUCCESS);
        } else {
            Completion accepted;
            NTSTATUS accept_returned = accept(accepted);
            ASSERT_EQ(connected.Wait(connect_returned), STATUS_SUCCESS);
            Completion failed;
            ExpectInjected(complete(failed), failed);
            Completion again;
            EXPECT_EQ(again.Wait(complete(again)), STATUS_SUCCESS) << "the connection was still completable";
            EXPECT_EQ(accepted.Wait(accept_returned), STATUS_SUCCESS);
        }
        for (NDK_OBJECT_HEADER* object : {&active->Header, &passive->Header, &active_qp->Header, &passive_qp->Header})
            Close(object);
    } else {
        FAIL() << "no scenario for " << function;
    }
}

TEST_P(DataPathFaultCases, CB_03_InjectedFailureIsDeliveredAndTheNextCallWorks) {
    Scenario scenario(GetParam());
    scenario.Start();
    if (!::testing::Test::HasFatalFailure()) scenario.Run();
    scenario.Finish();
}

INSTANTIATE_TEST_SUITE_P(
    Functions, DataPathFaultCases,
    ::testing::Values(
        DataPathFault{"NdkCreateCq", 2, false, "CQ_01"}, DataPathFault{"NdkCreateCq", 2, true, "CQ_01"},
        DataPathFault{"NdkCreateQp", 2, false, "QP_03"}, DataPathFault{"NdkCreateQp", 2, true, "QP_03"},
        DataPathFault{"NdkCreateQpWithSrq", 0, false, "QP_03"}, DataPathFault{"NdkCreateQpWithSrq", 0, true, "QP_03"},
        DataPathFault{"NdkCreateSrq", 0, false, "SRQ_01"}, DataPathFault{"NdkCreateSrq", 0, true, "SRQ_01"},
        DataPathFault{"NdkModifySrq", 0, false, "SRQ_07"}, DataPathFault{"NdkModifySrq", 0, true, "SRQ_07"},
        DataPathFault{"NdkCreateMw", 0, false, "MW_01"}, DataPathFault{"NdkCreateMw", 0, true, "MW_01"},
        DataPathFault{"NdkCreateConnector", 1, false, "CM_01"}, DataPathFault{"NdkCreateConnector", 1, true, "CM_01"},
        DataPathFault{"NdkCreateListener", 1, false, "CM_01"}, DataPathFault{"NdkCreateListener", 1, true, "CM_01"},
        DataPathFault{"NdkCreateSharedEndpoint", 0, false, "CM_01"},
        DataPathFault{"NdkCreateSharedEndpoint", 0, true, "CM_01"}, DataPathFault{"NdkListen", 1, false, "CM_14"},
        DataPathFault{"NdkListen", 1, true, "CM_14"}, DataPathFault{"NdkResizeCq", 0, false, "CQ_04"},
        DataPathFault{"NdkResizeCq", 0, true, "CQ_04"}, DataPathFault{"NdkConnect", 1, false, "CM_04"},
        DataPathFault{"NdkConnect", 1, true, "CM_04"}, DataPathFault{"NdkDisconnect", 0, false, "CM_25"},
        DataPathFault{"NdkDisconnect", 0, true, "CM_25"},
        DataPathFault{"NdkConnectWithSharedEndpoint", 0, false, "CM_06"},
        DataPathFault{"NdkConnectWithSharedEndpoint", 0, true, "CM_06"}, DataPathFault{"NdkAccept", 1, false, "CM_08"},
        DataPathFault{"NdkAccept", 1, true, "CM_08"}, DataPathFault{"NdkAcceptEx", 0, false, "CM_08"},
        DataPathFault{"NdkAcceptEx", 0, true, "CM_08"}, DataPathFault{"NdkCompleteConnect", 1, false, "CM_07"},
        DataPathFault{"NdkCompleteConnect", 1, true, "CM_07"}, DataPathFault{"NdkCompleteConnectEx", 0, false, "CM_07"},
        DataPathFault{"NdkCompleteConnectEx", 0, true, "CM_07"}),
    [](const ::testing::TestParamInfo<DataPathFault>& info) {
        return std::string(info.param.requirement) + "_" + info.param.function +
               (info.param.asynchronous ? "Async" : "Inline");
    });

}  // namespace
}  // namespace softndk::test
