// Issue 19 §3: reports a driver developer understands, under the kernel layer whatever SOFTNDK_LOG says:
//  - every refusal of a consumer's NDK call prints the function, the status by name and the reason, also with
//    the Verifier off;
//  - NdkGetConnectionData after NdkCompleteConnect (CM-12) is tolerated and reported by rule id as a warning;
//  - a Verifier report raised inside a completion names the request: its function and RequestContext.
#include <ntddk.h>
#include <softndk_km.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

struct Seen {
    std::string rule;
    ULONG bug_check;
    std::string call;
};
struct Reports {
    std::mutex mutex;
    std::vector<Seen> seen;
};
VOID Collect(PVOID context, const SOFTNDK_VERIFIER_REPORT* report) {
    auto* reports = static_cast<Reports*>(context);
    std::lock_guard lock(reports->mutex);
    reports->seen.push_back({report->Rule, report->BugCheckCode, report->Call});
}

template <class Predicate>
bool WaitFor(Predicate predicate) {
    for (int i = 0; i < 5000; ++i) {
        if (predicate()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

struct Request {
    std::atomic<bool> done{false};
    std::atomic<NTSTATUS> status{STATUS_PENDING};
    std::atomic<NDK_OBJECT_HEADER*> object{nullptr};
    static VOID OnRequest(PVOID context, NTSTATUS status) {
        auto* request = static_cast<Request*>(context);
        request->status = status;
        request->done = true;
    }
    static VOID OnCreate(PVOID context, NTSTATUS status, NDK_OBJECT_HEADER* object) {
        auto* request = static_cast<Request*>(context);
        request->object = object;
        OnRequest(context, status);
    }
    NTSTATUS Wait(NTSTATUS returned) {
        if (returned != STATUS_PENDING) return returned;
        EXPECT_TRUE(WaitFor([this] { return done.load(); })) << "a request never completed";
        return status;
    }
};

class ReportsTest : public ::testing::Test {
protected:
    void SetUp() override {
        SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_LOG);
        SoftNdkKmSetVerifierCallback(Collect, &reports_);
    }
    void TearDown() override {
        SoftNdkKmSetVerifierCallback(nullptr, nullptr);
        SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_ABORT);
    }
    NDK_ADAPTER* Open(SOFTNDK_COMPLETION_MODE mode = SOFTNDK_COMPLETION_INLINE) {
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);
        config.CompletionMode = mode;
        NDK_ADAPTER* adapter = nullptr;
        EXPECT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_SUCCESS);
        return adapter;
    }
    // After the call has stored an inline result through `out` (or the completion brought it).
    template <class Object>
    static Object* Created(NTSTATUS returned, Request& request, Object** out) {
        EXPECT_EQ(request.Wait(returned), STATUS_SUCCESS);
        return returned == STATUS_PENDING ? reinterpret_cast<Object*>(request.object.load()) : *out;
    }
    static void Close(NDK_OBJECT_HEADER* object) {
        Request closed;
        // every object's close is the first entry of its dispatch table
        auto* dispatch = *reinterpret_cast<NDK_FN_CLOSE_OBJECT* const*>(object + 1);
        const NTSTATUS status = dispatch[0](
            object, [](PVOID context) { static_cast<Request*>(context)->done = true; }, &closed);
        if (status == STATUS_PENDING) {
            EXPECT_TRUE(WaitFor([&] { return closed.done.load(); }));
        }
    }
    bool Saw(const std::string& rule, ULONG bug_check) {
        std::lock_guard lock(reports_.mutex);
        for (const Seen& seen : reports_.seen)
            if (seen.rule == rule && seen.bug_check == bug_check) return true;
        return false;
    }
    Reports reports_;
};

VOID IgnoreCq(PVOID, NTSTATUS) {}

TEST_F(ReportsTest, ISSUE_19_EveryRefusalPrintsTheFunctionTheStatusNameAndTheReason) {
    NDK_ADAPTER* adapter = Open();
    testing::internal::CaptureStderr();
    NDK_CQ* cq = nullptr;
    Request request;
    // A CQ deeper than the adapter allows: refused inline, with the provider's own text.
    const NTSTATUS status = adapter->Dispatch->NdkCreateCq(adapter, 0xFFFFFFFFu, &IgnoreCq, nullptr, nullptr,
                                                           &Request::OnCreate, &request, &cq);
    NDK_ADAPTER_INFO info{};
    ULONG size = 8;  // a size query: an answer, not a refusal
    const NTSTATUS query = adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size);
    const std::string printed = testing::internal::GetCapturedStderr();
    EXPECT_EQ(status, STATUS_INVALID_PARAMETER);
    EXPECT_EQ(query, STATUS_BUFFER_TOO_SMALL);
    EXPECT_NE(printed.find("softndk: NdkCreateCq("), std::string::npos) << printed;
    EXPECT_NE(printed.find("refused: STATUS_INVALID_PARAMETER (0xC000000D): "), std::string::npos) << printed;
    EXPECT_EQ(printed.find("NdkQueryAdapterInfo"), std::string::npos) << printed;
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

TEST_F(ReportsTest, ISSUE_19_RefusalsArePrintedWithTheVerifierOffToo) {
    SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_OFF);
    NDK_ADAPTER* adapter = Open();
    Request request;
    NDK_PD* pd = nullptr;
    pd = Created(adapter->Dispatch->NdkCreatePd(adapter, &Request::OnCreate, &request, &pd), request, &pd);
    ASSERT_NE(pd, nullptr);
    testing::internal::CaptureStderr();
    // A QP on no CQ: refused with a reason the provider did not write down, so the status's meaning is given.
    NDK_QP* qp = nullptr;
    Request qp_request;
    const NTSTATUS status =
        pd->Dispatch->NdkCreateQp(pd, nullptr, nullptr, nullptr, 1, 1, 1, 1, 0, &Request::OnCreate, &qp_request, &qp);
    const std::string printed = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(NT_SUCCESS(status));
    EXPECT_NE(printed.find("softndk: NdkCreateQp("), std::string::npos) << printed;
    EXPECT_NE(printed.find(std::string(") refused: ") + SoftNdkStatusName(status)), std::string::npos) << printed;
    Close(&pd->Header);
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

// NdkGetConnectionData's inbound and outbound read limits, asserting the call succeeds.
std::pair<ULONG, ULONG> ReadLimits(NDK_CONNECTOR* connector) {
    ULONG inbound = 0, outbound = 0, length = 0;
    EXPECT_EQ(connector->Dispatch->NdkGetConnectionData(connector, &inbound, &outbound, nullptr, &length),
              STATUS_SUCCESS);
    return {inbound, outbound};
}

VOID OnConnectEvent(PVOID context, NDK_CONNECTOR* connector) {
    static_cast<std::atomic<NDK_CONNECTOR*>*>(context)->store(connector);
}

TEST_F(ReportsTest, CM_12_ConnectionDataAfterCompleteConnectIsToleratedAndReportedByRuleId) {
    NDK_ADAPTER* adapter = Open();
    Request pd_request, cq_request, listener_request, connector_request;
    NDK_PD* pd = nullptr;
    pd = Created(adapter->Dispatch->NdkCreatePd(adapter, &Request::OnCreate, &pd_request, &pd), pd_request, &pd);
    NDK_CQ* cq = nullptr;
    cq = Created(
        adapter->Dispatch->NdkCreateCq(adapter, 16, &IgnoreCq, nullptr, nullptr, &Request::OnCreate, &cq_request, &cq),
        cq_request, &cq);
    NDK_QP* qps[2] = {};
    for (NDK_QP*& qp : qps) {
        Request request;
        qp = Created(pd->Dispatch->NdkCreateQp(pd, cq, cq, nullptr, 4, 4, 1, 1, 0, &Request::OnCreate, &request, &qp),
                     request, &qp);
    }
    std::atomic<NDK_CONNECTOR*> incoming{nullptr};
    NDK_LISTENER* listener = nullptr;
    listener = Created(adapter->Dispatch->NdkCreateListener(adapter, &OnConnectEvent, &incoming, &Request::OnCreate,
                                                            &listener_request, &listener),
                       listener_request, &listener);
    SOCKADDR_IN address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    Request listened;
    ASSERT_EQ(listened.Wait(listener->Dispatch->NdkListen(listener, reinterpret_cast<PSOCKADDR>(&address),
                                                          sizeof(address), &Request::OnRequest, &listened)),
              STATUS_SUCCESS);
    ULONG length = sizeof(address);
    ASSERT_EQ(listener->Dispatch->NdkGetLocalAddress(listener, reinterpret_cast<PSOCKADDR>(&address), &length),
              STATUS_SUCCESS);
    NDK_CONNECTOR* active = nullptr;
    NDK_CONNECTOR* idle = nullptr;
    Request idle_request;
    idle = Created(adapter->Dispatch->NdkCreateConnector(adapter, &Request::OnCreate, &idle_request, &idle),
                   idle_request, &idle);
    ULONG idle_length = 0;
    EXPECT_NE(idle->Dispatch->NdkGetConnectionData(idle, nullptr, nullptr, nullptr, &idle_length), STATUS_SUCCESS)
        << "no connection data before any connection: still refused";
    Close(&idle->Header);
    active = Created(adapter->Dispatch->NdkCreateConnector(adapter, &Request::OnCreate, &connector_request, &active),
                     connector_request, &active);
    SOCKADDR_IN source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    uint8_t offer = 0x5A;
    Request connected, accepted, completed;
    // The active side offers IRD 2, ORD 3; the passive side accepts with 1 and 1.
    const NTSTATUS connect_returned = active->Dispatch->NdkConnect(
        active, qps[0], reinterpret_cast<PSOCKADDR>(&source), sizeof(source), reinterpret_cast<PSOCKADDR>(&address),
        sizeof(address), 2, 3, &offer, 1, &Request::OnRequest, &connected);
    ASSERT_TRUE(WaitFor([&] { return incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = incoming.load();
    EXPECT_EQ(ReadLimits(passive), std::make_pair(ULONG{3}, ULONG{2}))
        << "before NdkAccept: the peer's offer within our limits";
    uint8_t answer = 0xA5;
    const NTSTATUS accept_returned = passive->Dispatch->NdkAccept(passive, qps[1], 1, 1, &answer, 1, nullptr, nullptr,
                                                                  &Request::OnRequest, &accepted);
    ASSERT_EQ(connected.Wait(connect_returned), STATUS_SUCCESS);
    ASSERT_EQ(
        completed.Wait(active->Dispatch->NdkCompleteConnect(active, nullptr, nullptr, &Request::OnRequest, &completed)),
        STATUS_SUCCESS);
    ASSERT_EQ(accepted.Wait(accept_returned), STATUS_SUCCESS);

    // CM-12 says not after NdkCompleteConnect; hardware still holds the data: given, and a warning by rule id.
    const ULONG violations = SoftNdkKmVerifierViolationCount();
    testing::internal::CaptureStderr();
    ULONG inbound = 0, outbound = 0, data_length = 1;
    uint8_t data = 0;
    EXPECT_EQ(active->Dispatch->NdkGetConnectionData(active, &inbound, &outbound, &data, &data_length), STATUS_SUCCESS);
    const std::string printed = testing::internal::GetCapturedStderr();
    EXPECT_EQ(data, 0xA5) << "the peer's private data, as before NdkCompleteConnect";
    EXPECT_TRUE(Saw("NDK_CM_12_CONNECTION_DATA_AFTER_ESTABLISHING", 0));
    EXPECT_NE(printed.find("SOFTNDK VERIFIER WARNING: NDK_CM_12_CONNECTION_DATA_AFTER_ESTABLISHING"), std::string::npos)
        << printed;
    EXPECT_EQ(SoftNdkKmVerifierViolationCount(), violations) << "a tolerated rule is a warning, not a violation";
    EXPECT_EQ(ReadLimits(passive), std::make_pair(ULONG{1}, ULONG{1}))
        << "after NdkAccept: what was established, not offered";

    Request disconnected[2];
    const NTSTATUS first = active->Dispatch->NdkDisconnect(active, &Request::OnRequest, &disconnected[0]);
    const NTSTATUS second = passive->Dispatch->NdkDisconnect(passive, &Request::OnRequest, &disconnected[1]);
    EXPECT_EQ(disconnected[0].Wait(first), STATUS_SUCCESS);
    EXPECT_EQ(disconnected[1].Wait(second), STATUS_SUCCESS);
    for (NDK_OBJECT_HEADER* object : {&active->Header, &passive->Header, &listener->Header, &qps[0]->Header,
                                      &qps[1]->Header, &cq->Header, &pd->Header})
        Close(object);
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

// A completion that waits with a timeout: at DISPATCH_LEVEL (CB-09) that is IRQL_NOT_LESS_OR_EQUAL, and the
// report must say which request's completion it was.
VOID WaitsInsideCompletion(PVOID context, NTSTATUS status, NDK_OBJECT_HEADER* object) {
    KEVENT event;
    KeInitializeEvent(&event, NotificationEvent, FALSE);
    LARGE_INTEGER timeout;
    timeout.QuadPart = -10000;
    KeWaitForSingleObject(&event, Executive, KernelMode, FALSE, &timeout);
    Request::OnCreate(context, status, object);
}

TEST_F(ReportsTest, ISSUE_19_AVerifierReportInsideACompletionNamesTheRequestAndItsContext) {
    NDK_ADAPTER* adapter = Open(SOFTNDK_COMPLETION_PEND);
    Request request;
    NDK_PD* pd = nullptr;
    testing::internal::CaptureStderr();
    const NTSTATUS returned = adapter->Dispatch->NdkCreatePd(adapter, &WaitsInsideCompletion, &request, &pd);
    ASSERT_EQ(returned, STATUS_PENDING);
    ASSERT_EQ(request.Wait(returned), STATUS_SUCCESS);
    const std::string printed = testing::internal::GetCapturedStderr();
    char expected[96];
    std::snprintf(expected, sizeof(expected), "inside: the completion of NdkCreatePd, RequestContext %p",
                  static_cast<void*>(&request));
    EXPECT_TRUE(Saw("IRQL_NOT_LESS_OR_EQUAL", 0x0A));
    EXPECT_NE(printed.find(expected), std::string::npos) << printed;
    Close(request.object.load());
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
}

}  // namespace
