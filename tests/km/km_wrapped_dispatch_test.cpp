// Issue 33 §4.2: a consumer or filter that replaces an object's Dispatch pointer with a copy of the table (copy,
// override one entry, forward to the original) keeps working under the kernel layer, whose refusal reports
// already put a forwarding table there: the forwarders find the provider's table without the object's
// Dispatch (they used to read it through the copy and recursed until the stack overflowed).
#include <ntddk.h>
#include <softndk_km.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

namespace {

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
        static_cast<Request*>(context)->object = object;
        OnRequest(context, status);
    }
    NTSTATUS Wait(NTSTATUS returned) {
        if (returned != STATUS_PENDING) return returned;
        EXPECT_TRUE(WaitFor([this] { return done.load(); })) << "a request never completed";
        return status;
    }
    template <class Object>
    Object* Created(NTSTATUS returned, Object** out) {
        EXPECT_EQ(Wait(returned), STATUS_SUCCESS);
        return returned == STATUS_PENDING ? reinterpret_cast<Object*>(object.load()) : *out;
    }
};

void Close(NDK_OBJECT_HEADER* object) {
    Request closed;
    auto* dispatch = *reinterpret_cast<NDK_FN_CLOSE_OBJECT* const*>(object + 1);  // close: the first entry
    const NTSTATUS status = dispatch[0](
        object, [](PVOID context) { static_cast<Request*>(context)->done = true; }, &closed);
    if (status == STATUS_PENDING) {
        EXPECT_TRUE(WaitFor([&] { return closed.done.load(); }));
    }
}

// The consumer's trick, as drivers write it: the copy first, the table it came from after it.
template <class Table>
struct ConsumerTable {
    Table table;
    const Table* original;
};
ConsumerTable<NDK_ADAPTER_DISPATCH> g_adapter_table;
ConsumerTable<NDK_CQ_DISPATCH> g_cq_table;
ConsumerTable<NDK_QP_DISPATCH> g_qp_table;
std::atomic<int> g_sends{0};
std::atomic<int> g_notifications{0};

VOID OnCqNotification(PVOID, NTSTATUS) {
    ++g_notifications;
}

// The NVMe-oF driver's workaround: the adapter's NdkCreateCq arms the CQ the driver forgets to arm.
NTSTATUS CreateCqAndArm(NDK_ADAPTER* adapter, ULONG depth, NDK_FN_CQ_NOTIFICATION_CALLBACK notify, PVOID context,
                        GROUP_AFFINITY* affinity, NDK_FN_CREATE_COMPLETION done, PVOID done_context, NDK_CQ** cq) {
    const NTSTATUS status =
        g_adapter_table.original->NdkCreateCq(adapter, depth, notify, context, affinity, done, done_context, cq);
    if (status == STATUS_SUCCESS) (*cq)->Dispatch->NdkArmCq(*cq, NDK_CQ_NOTIFY_ANY);
    return status;
}
// The CQ's NdkGetCqResults re-arms it after each poll; the QP's NdkSend counts.
ULONG GetResultsAndRearm(NDK_CQ* cq, NDK_RESULT* results, ULONG count) {
    const ULONG got = g_cq_table.original->NdkGetCqResults(cq, results, count);
    g_cq_table.original->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);
    return got;
}
NTSTATUS CountedSend(NDK_QP* qp, PVOID context, const NDK_SGE* sgl, ULONG count, ULONG flags) {
    ++g_sends;
    return g_qp_table.original->NdkSend(qp, context, sgl, count, flags);
}

template <class Object, class Table>
void Replace(Object* object, ConsumerTable<Table>& copy) {
    copy.original = object->Dispatch;
    copy.table = *object->Dispatch;
    object->Dispatch = &copy.table;
}

VOID OnConnectEvent(PVOID context, NDK_CONNECTOR* connector) {
    static_cast<std::atomic<NDK_CONNECTOR*>*>(context)->store(connector);
}

ULONG Poll(NDK_CQ* cq, NDK_RESULT* result) {
    ULONG got = 0;
    WaitFor([&] { return (got = cq->Dispatch->NdkGetCqResults(cq, result, 1)) != 0; });
    return got;
}

TEST(WrappedDispatchTest, ISSUE_33_ACopiedDispatchTableThatForwardsToTheOriginalRunsASendAndReceive) {
    SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_LOG);
    const ULONG violations = SoftNdkKmVerifierViolationCount();
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    config.CompletionMode = SOFTNDK_COMPLETION_INLINE;
    NDK_ADAPTER* adapter = nullptr;
    ASSERT_EQ(SoftNdkOpenAdapter(&config, &adapter), STATUS_SUCCESS);
    Replace(adapter, g_adapter_table);
    g_adapter_table.table.NdkCreateCq = &CreateCqAndArm;

    Request pd_request, cq_request, listener_request, connector_request;
    NDK_PD* pd = nullptr;
    pd = pd_request.Created(adapter->Dispatch->NdkCreatePd(adapter, &Request::OnCreate, &pd_request, &pd), &pd);
    NDK_CQ* cq = nullptr;
    cq = cq_request.Created(adapter->Dispatch->NdkCreateCq(adapter, 16, &OnCqNotification, nullptr, nullptr,
                                                           &Request::OnCreate, &cq_request, &cq),
                            &cq);
    ASSERT_NE(cq, nullptr);
    Replace(cq, g_cq_table);
    g_cq_table.table.NdkGetCqResults = &GetResultsAndRearm;
    NDK_QP* qps[2] = {};
    for (NDK_QP*& qp : qps) {
        Request request;
        qp = request.Created(
            pd->Dispatch->NdkCreateQp(pd, cq, cq, nullptr, 4, 4, 1, 1, 0, &Request::OnCreate, &request, &qp), &qp);
    }
    Replace(qps[0], g_qp_table);
    g_qp_table.table.NdkSend = &CountedSend;

    std::atomic<NDK_CONNECTOR*> incoming{nullptr};
    NDK_LISTENER* listener = nullptr;
    listener =
        listener_request.Created(adapter->Dispatch->NdkCreateListener(adapter, &OnConnectEvent, &incoming,
                                                                      &Request::OnCreate, &listener_request, &listener),
                                 &listener);
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
    active = connector_request.Created(
        adapter->Dispatch->NdkCreateConnector(adapter, &Request::OnCreate, &connector_request, &active), &active);
    SOCKADDR_IN source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    Request connected, accepted, completed;
    const NTSTATUS connect_returned = active->Dispatch->NdkConnect(
        active, qps[0], reinterpret_cast<PSOCKADDR>(&source), sizeof(source), reinterpret_cast<PSOCKADDR>(&address),
        sizeof(address), 1, 1, nullptr, 0, &Request::OnRequest, &connected);
    ASSERT_TRUE(WaitFor([&] { return incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = incoming.load();
    const NTSTATUS accept_returned = passive->Dispatch->NdkAccept(passive, qps[1], 1, 1, nullptr, 0, nullptr, nullptr,
                                                                  &Request::OnRequest, &accepted);
    ASSERT_EQ(connected.Wait(connect_returned), STATUS_SUCCESS);
    ASSERT_EQ(
        completed.Wait(active->Dispatch->NdkCompleteConnect(active, nullptr, nullptr, &Request::OnRequest, &completed)),
        STATUS_SUCCESS);
    ASSERT_EQ(accepted.Wait(accept_returned), STATUS_SUCCESS);

    // One buffer, one MR: the send's source in its first half, the receive's sink in its second.
    void* buffer = ExAllocatePool2(POOL_FLAG_NON_PAGED, PAGE_SIZE, 'pWDT');
    ASSERT_NE(buffer, nullptr);
    PMDL mdl = IoAllocateMdl(buffer, PAGE_SIZE, FALSE, FALSE, nullptr);
    MmBuildMdlForNonPagedPool(mdl);
    Request mr_request, registered;
    NDK_MR* mr = nullptr;
    mr = mr_request.Created(pd->Dispatch->NdkCreateMr(pd, FALSE, &Request::OnCreate, &mr_request, &mr), &mr);
    ASSERT_EQ(registered.Wait(mr->Dispatch->NdkRegisterMr(mr, mdl, PAGE_SIZE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                                          &Request::OnRequest, &registered)),
              STATUS_SUCCESS);
    auto* bytes = static_cast<uint8_t*>(buffer);
    std::memcpy(bytes, "wrapped", 8);
    NDK_SGE source_sge{};
    source_sge.VirtualAddress = bytes;
    source_sge.Length = 8;
    source_sge.MemoryRegionToken = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    NDK_SGE sink_sge = source_sge;
    sink_sge.VirtualAddress = bytes + PAGE_SIZE / 2;

    ASSERT_EQ(qps[1]->Dispatch->NdkReceive(qps[1], &sink_sge, &sink_sge, 1), STATUS_SUCCESS);
    ASSERT_EQ(qps[0]->Dispatch->NdkSend(qps[0], &source_sge, &source_sge, 1, 0), STATUS_SUCCESS);
    NDK_RESULT results[2] = {};
    for (NDK_RESULT& result : results) {
        ASSERT_EQ(Poll(cq, &result), 1u);
        EXPECT_EQ(result.Status, STATUS_SUCCESS);
    }
    EXPECT_EQ(std::memcmp(bytes + PAGE_SIZE / 2, "wrapped", 8), 0);
    EXPECT_EQ(g_sends.load(), 1) << "the overriding entry ran once and forwarded";
    EXPECT_TRUE(WaitFor([] { return g_notifications.load() > 0; })) << "the CQ armed by the wrapped table fired";
    EXPECT_EQ(SoftNdkKmVerifierViolationCount(), violations) << "a table that forwards to the original is valid";

    Request deregistered, disconnected[2];
    EXPECT_EQ(deregistered.Wait(mr->Dispatch->NdkDeregisterMr(mr, &Request::OnRequest, &deregistered)), STATUS_SUCCESS);
    const NTSTATUS first = active->Dispatch->NdkDisconnect(active, &Request::OnRequest, &disconnected[0]);
    const NTSTATUS second = passive->Dispatch->NdkDisconnect(passive, &Request::OnRequest, &disconnected[1]);
    EXPECT_EQ(disconnected[0].Wait(first), STATUS_SUCCESS);
    EXPECT_EQ(disconnected[1].Wait(second), STATUS_SUCCESS);
    for (NDK_OBJECT_HEADER* object : {&mr->Header, &active->Header, &passive->Header, &listener->Header,
                                      &qps[0]->Header, &qps[1]->Header, &cq->Header, &pd->Header})
        Close(object);
    IoFreeMdl(mdl);
    ExFreePoolWithTag(buffer, 'pWDT');
    EXPECT_EQ(SoftNdkCloseAdapter(adapter), STATUS_SUCCESS);
    SoftNdkKmSetVerifierMode(SOFTNDK_VERIFIER_ABORT);
}

}  // namespace
