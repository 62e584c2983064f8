// Two QPs connected through a listener and a connector, in the completion mode of the test parameter, with a
// registered buffer on each side. Used by the data-path conformance tests.
#pragma once

#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "engine/transport.h"
#include "support/ndk_test_support.h"
#include "support/remote_side.h"

namespace softndk::test {

// In a pair test's body: skips the test when side B is in another process and its check needs both sides here.
#define SOFTNDK_SKIP_WITH_THE_PEER_IN_ANOTHER_PROCESS(why) \
    if (remote_ != nullptr) GTEST_SKIP() << "with the peer in another process: " << why

struct ConnectEvents {
    std::atomic<NDK_CONNECTOR*> incoming{nullptr};
    std::atomic<int> count{0};
    static VOID OnConnect(PVOID context, NDK_CONNECTOR* connector) {
        auto* events = static_cast<ConnectEvents*>(context);
        events->incoming = connector;
        ++events->count;
    }
};

struct DisconnectEvents {
    std::atomic<int> count{0};
    static VOID OnDisconnect(PVOID context) { ++static_cast<DisconnectEvents*>(context)->count; }
};

struct CqEvents {
    std::atomic<int> count{0};
    std::atomic<NTSTATUS> last{STATUS_PENDING};
    static VOID OnNotify(PVOID context, NTSTATUS status) {
        auto* events = static_cast<CqEvents*>(context);
        events->last = status;
        ++events->count;
    }
};

template <class Predicate>
bool WaitFor(Predicate predicate, int milliseconds = 5000) {
    for (int i = 0; i < milliseconds * 10; ++i) {
        if (predicate()) return true;
        usleep(100);
    }
    return predicate();
}

inline SOCKADDR_IN Loopback(uint16_t port) {
    SOCKADDR_IN address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    return address;
}

class ConnectedPairTest : public AdapterTest {
protected:
    static constexpr size_t kPages = 4;
    static constexpr ULONG kDepth = 64;

    void SetUp() override {
        AdapterTest::SetUp();
        if (HasFatalFailure()) return;
        ASSERT_NO_FATAL_FAILURE(StartSideB());
        cq_a_ = CreateCq(kDepth, &cq_events_a_);
        cq_b_ = CreateCq(kDepth, &cq_events_b_, adapter_b_);
        qp_a_ = CreateQp(cq_a_, cq_a_, reinterpret_cast<PVOID>(0xA));
        qp_b_ = CreateQp(cq_b_, cq_b_, reinterpret_cast<PVOID>(0xB));
        buffer_a_ = std::make_unique<LockedBuffer>(kPages);
        buffer_b_ = std::make_unique<LockedBuffer>(kPages);
        mr_a_ = CreateMr(false);
        mr_b_ = CreateMr(false, pd_b_);
        const ULONG all = NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ;
        ASSERT_EQ(Register(mr_a_, buffer_a_->mdl(), buffer_a_->bytes(), all), STATUS_SUCCESS);
        ASSERT_EQ(Register(mr_b_, buffer_b_->mdl(), buffer_b_->bytes(), all), STATUS_SUCCESS);
        ConnectPair();
    }

    void TearDown() override {
        for (NDK_CONNECTOR* connector : {connector_a_, connector_b_})
            if (connector != nullptr) Close(&connector->Header);
        if (listener_ != nullptr) Close(&listener_->Header);
        for (NDK_QP* qp : {qp_a_, qp_b_})
            if (qp != nullptr) Close(&qp->Header);
        for (NDK_CQ* cq : {cq_a_, cq_b_})
            if (cq != nullptr) Close(&cq->Header);
        for (NDK_MR* mr : {mr_a_, mr_b_})
            if (mr != nullptr) Close(&mr->Header);
        for (NDK_LISTENER* listener : extra_listeners_) Close(&listener->Header);
        if (pd_b_ != nullptr && pd_b_ != pd_) Close(&pd_b_->Header);
        buffer_a_.reset();
        buffer_b_.reset();
        remote_.reset();  // after every buffer: they live in its arena
        AdapterTest::TearDown();
    }

    // Side B: this adapter, or with SOFTNDK_TEST_REMOTE_SIDE=1 an adapter in ndk_remote_side (issue 7 §5, the
    // third configuration). Its objects are made through adapter_b_ / pd_b_ and the helpers below.
    void StartSideB() {
        adapter_b_ = adapter_;
        pd_b_ = pd_;
        if (!RemoteSideRequested()) return;
        std::string error;
        SOFTNDK_ADAPTER_CONFIG config = config_;
        CustomizeSideB(config);
        remote_ = RemoteSide::Start(SOFTNDK_REMOTE_SIDE, config, &error);
        ASSERT_NE(remote_, nullptr) << error;
        adapter_b_ = remote_->adapter();
        Completion done;
        NDK_PD* pd = nullptr;
        ASSERT_EQ(done.Wait(adapter_b_->Dispatch->NdkCreatePd(adapter_b_, &Completion::OnCreate, &done, &pd)),
                  STATUS_SUCCESS);
        pd_b_ = pd != nullptr ? pd : reinterpret_cast<NDK_PD*>(done.object());
    }
    // Side B's adapter configuration when it is in another process: config_ as Customize made it, then this.
    virtual void CustomizeSideB(SOFTNDK_ADAPTER_CONFIG&) {}
    // B in another process: the pair is on iWARP/TCP whatever the transport config says.
    bool OverTcp() const override { return AdapterTest::OverTcp() || remote_ != nullptr; }
    bool OnSideB(const void* object) const { return remote_ != nullptr && remote_->Owns(object); }
    // The adapter and PD of the side `object` (a CQ, QP, connector, ...) belongs to.
    NDK_ADAPTER* AdapterOf(const void* object) { return OnSideB(object) ? adapter_b_ : adapter_; }
    NDK_PD* PdOf(const void* object) { return OnSideB(object) ? pd_b_ : pd_; }

    // A CQ of the fixture's adapter, or of `adapter` (adapter_b_ for side B).
    NDK_CQ* CreateCq(ULONG depth, CqEvents* events, NDK_ADAPTER* adapter = nullptr) {
        adapter = adapter != nullptr ? adapter : adapter_;
        Completion done;
        NDK_CQ* cq = nullptr;
        EXPECT_EQ(done.Wait(adapter->Dispatch->NdkCreateCq(adapter, depth, &CqEvents::OnNotify, events, nullptr,
                                                           &Completion::OnCreate, &done, &cq)),
                  STATUS_SUCCESS);
        return cq != nullptr ? cq : reinterpret_cast<NDK_CQ*>(done.object());
    }
    // A QP on the side of its receive CQ.
    NDK_QP* CreateQp(NDK_CQ* receive_cq, NDK_CQ* initiator_cq, PVOID context, ULONG inline_size = 64) {
        NDK_PD* pd = PdOf(receive_cq);
        Completion done;
        NDK_QP* qp = nullptr;
        EXPECT_EQ(done.Wait(pd->Dispatch->NdkCreateQp(pd, receive_cq, initiator_cq, context, kDepth, kDepth, 4, 4,
                                                      inline_size, &Completion::OnCreate, &done, &qp)),
                  STATUS_SUCCESS);
        return qp != nullptr ? qp : reinterpret_cast<NDK_QP*>(done.object());
    }
    NDK_CONNECTOR* CreateConnector(NDK_ADAPTER* adapter = nullptr) {
        adapter = adapter != nullptr ? adapter : adapter_;
        Completion done;
        NDK_CONNECTOR* connector = nullptr;
        EXPECT_EQ(done.Wait(adapter->Dispatch->NdkCreateConnector(adapter, &Completion::OnCreate, &done, &connector)),
                  STATUS_SUCCESS);
        return connector != nullptr ? connector : reinterpret_cast<NDK_CONNECTOR*>(done.object());
    }
    NDK_LISTENER* Listen(ConnectEvents* events, uint16_t port, uint16_t* bound_port, NDK_ADAPTER* adapter = nullptr) {
        adapter = adapter != nullptr ? adapter : adapter_;
        Completion created;
        NDK_LISTENER* listener = nullptr;
        EXPECT_EQ(created.Wait(adapter->Dispatch->NdkCreateListener(adapter, &ConnectEvents::OnConnect, events,
                                                                    &Completion::OnCreate, &created, &listener)),
                  STATUS_SUCCESS);
        if (listener == nullptr) listener = reinterpret_cast<NDK_LISTENER*>(created.object());
        SOCKADDR_IN address = Loopback(port);
        Completion listened;
        EXPECT_EQ(listened.Wait(listener->Dispatch->NdkListen(listener, reinterpret_cast<PSOCKADDR>(&address),
                                                              sizeof(address), &Completion::OnRequest, &listened)),
                  STATUS_SUCCESS);
        SOCKADDR_IN local{};
        ULONG length = sizeof(local);
        EXPECT_EQ(listener->Dispatch->NdkGetLocalAddress(listener, reinterpret_cast<PSOCKADDR>(&local), &length),
                  STATUS_SUCCESS);
        *bound_port = ntohs(local.sin_port);
        return listener;
    }

    uint16_t ListenerPort(NDK_LISTENER* listener = nullptr) {
        listener = listener != nullptr ? listener : listener_;
        SOCKADDR_IN local{};
        ULONG length = sizeof(local);
        EXPECT_EQ(listener->Dispatch->NdkGetLocalAddress(listener, reinterpret_cast<PSOCKADDR>(&local), &length),
                  STATUS_SUCCESS);
        return ntohs(local.sin_port);
    }
    // The listener for a passive QP: the fixture's when it is on that QP's side, else one made there once.
    NDK_LISTENER* ListenerFor(NDK_QP* passive_qp) {
        if (OnSideB(passive_qp) == OnSideB(listener_)) return listener_;
        if (extra_listeners_.empty()) {
            uint16_t port = 0;
            extra_listeners_.push_back(Listen(&connect_events_, 0, &port, AdapterOf(passive_qp)));
        }
        return extra_listeners_.front();
    }

    // A shared endpoint on the loopback address (port 0: an ephemeral port).
    NDK_SHARED_ENDPOINT* CreateSharedEndpoint(uint16_t port = 0) {
        Completion created;
        NDK_SHARED_ENDPOINT* shared = nullptr;
        SOCKADDR_IN address = Loopback(port);
        EXPECT_EQ(created.Wait(adapter_->Dispatch->NdkCreateSharedEndpoint(
                      adapter_, reinterpret_cast<PSOCKADDR>(&address), sizeof(address), &Completion::OnCreate, &created,
                      &shared)),
                  STATUS_SUCCESS);
        return shared != nullptr ? shared : reinterpret_cast<NDK_SHARED_ENDPOINT*>(created.object());
    }
    // Starts NdkConnect from `connector` and `qp` to a loopback `port`; returns what NdkConnect returned.
    NTSTATUS StartConnect(NDK_CONNECTOR* connector, NDK_QP* qp, uint16_t port, Completion& done, ULONG read_limit = 2,
                          const void* data = nullptr, ULONG length = 0, uint16_t source_port = 0) {
        SOCKADDR_IN source = Loopback(source_port), destination = Loopback(port);
        return connector->Dispatch->NdkConnect(connector, qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
                                               reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination),
                                               read_limit, read_limit, const_cast<void*>(data), length,
                                               &Completion::OnRequest, &done);
    }

    struct Connectors {
        NDK_CONNECTOR* active = nullptr;
        NDK_CONNECTOR* passive = nullptr;
    };
    // The whole handshake through the fixture's listener: connect `active_qp`, accept on `passive_qp`, complete.
    Connectors ConnectQps(NDK_QP* active_qp, NDK_QP* passive_qp, ULONG read_limit = 8,
                          DisconnectEvents* active_events = nullptr, DisconnectEvents* passive_events = nullptr) {
        Connectors out;
        out.active = CreateConnector(AdapterOf(active_qp));
        SOCKADDR_IN source = Loopback(0);
        SOCKADDR_IN destination = Loopback(ListenerPort(ListenerFor(passive_qp)));
        connect_events_.incoming = nullptr;
        Completion connected;
        NTSTATUS connect_returned = out.active->Dispatch->NdkConnect(
            out.active, active_qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
            reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), read_limit, read_limit, nullptr, 0,
            &Completion::OnRequest, &connected);
        EXPECT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
        out.passive = connect_events_.incoming.load();
        if (out.passive == nullptr) return out;
        Completion accepted;
        NTSTATUS accept_returned =
            out.passive->Dispatch->NdkAccept(out.passive, passive_qp, read_limit, read_limit, nullptr, 0,
                                             passive_events ? &DisconnectEvents::OnDisconnect : nullptr, passive_events,
                                             &Completion::OnRequest, &accepted);
        FinishHandshake(out.active, connected, connect_returned, accepted, accept_returned, active_events);
        return out;
    }
    // The rest of a handshake once the passive side called NdkAccept: NdkConnect completes, NdkCompleteConnect
    // runs, then NdkAccept completes. True when all three succeeded.
    bool FinishHandshake(NDK_CONNECTOR* active, Completion& connected, NTSTATUS connect_returned, Completion& accepted,
                         NTSTATUS accept_returned, DisconnectEvents* active_events = nullptr) {
        const NTSTATUS connect = connected.Wait(connect_returned);
        EXPECT_EQ(connect, STATUS_SUCCESS);
        Completion completed;
        const NTSTATUS complete = completed.Wait(
            active->Dispatch->NdkCompleteConnect(active, active_events ? &DisconnectEvents::OnDisconnect : nullptr,
                                                 active_events, &Completion::OnRequest, &completed));
        EXPECT_EQ(complete, STATUS_SUCCESS);
        const NTSTATUS accept = accepted.Wait(accept_returned);
        EXPECT_EQ(accept, STATUS_SUCCESS);
        return connect == STATUS_SUCCESS && complete == STATUS_SUCCESS && accept == STATUS_SUCCESS;
    }

    // The read limits A and B connect with (IRD = ORD).
    virtual ULONG PairReadLimit() { return 8; }
    // Listener on an ephemeral port, then A -> B through it.
    void ConnectPair() {
        uint16_t port = 0;
        listener_ = Listen(&connect_events_, 0, &port, adapter_b_);  // B is the passive side
        Connectors connectors = ConnectQps(qp_a_, qp_b_, PairReadLimit(), &disconnects_a_, &disconnects_b_);
        connector_a_ = connectors.active;
        connector_b_ = connectors.passive;
        ASSERT_NE(connector_b_, nullptr);
    }

    NDK_SGE Sge(NDK_MR* mr, uint8_t* address, ULONG length) {
        NDK_SGE sge{};
        sge.VirtualAddress = address;
        sge.Length = length;
        sge.MemoryRegionToken = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
        return sge;
    }
    // The peer's verdict on a Write from A that was posted and returned STATUS_SUCCESS. In-process it is the
    // Write's own status. Over TCP a Write completes when it leaves, so a one-byte Read behind it (last byte of
    // B into the last byte of A; RFC 5040 §5.5 keeps the order) shows whether B took it, and the Terminate's
    // cause says why not.
    NTSTATUS VerdictOfWrite() {
        const NDK_RESULT_EX written = Poll(cq_a_);
        if (!OverTcp() || written.Status != STATUS_SUCCESS) {
            if (OverTcp() && written.Status == STATUS_CANCELLED && written.ProviderErrorCode != 0)
                return engine::RemoteRefusalStatus(written.ProviderErrorCode);
            return written.Status;
        }
        NDK_SGE sink = Sge(mr_a_, buffer_a_->data() + buffer_a_->bytes() - 1, 1);
        NTSTATUS posted =
            qp_a_->Dispatch->NdkRead(qp_a_, nullptr, &sink, 1, RemoteAddress(*buffer_b_, buffer_b_->bytes() - 1),
                                     mr_b_->Dispatch->NdkGetRemoteTokenFromMr(mr_b_), 0);
        if (posted != STATUS_SUCCESS) return posted;
        const NDK_RESULT_EX read = Poll(cq_a_);
        if (read.Status == STATUS_CANCELLED && read.ProviderErrorCode != 0)
            return engine::RemoteRefusalStatus(read.ProviderErrorCode);
        return read.Status;
    }
    // Polls one completion (waits up to 5 s).
    NDK_RESULT_EX Poll(NDK_CQ* cq) {
        NDK_RESULT_EX result{};
        result.Status = STATUS_IO_TIMEOUT;
        WaitFor([&] { return cq->Dispatch->NdkGetCqResultsEx(cq, &result, 1) == 1; });
        return result;
    }
    ULONG Pending(NDK_CQ* cq) {
        NDK_RESULT_EX results[kDepth];
        return cq->Dispatch->NdkGetCqResultsEx(cq, results, kDepth);
    }
    UINT64 RemoteAddress(const LockedBuffer& buffer, size_t offset = 0) {
        return reinterpret_cast<UINT64>(buffer.data() + offset);
    }

    NDK_CQ* cq_a_ = nullptr;
    NDK_CQ* cq_b_ = nullptr;
    NDK_QP* qp_a_ = nullptr;
    NDK_QP* qp_b_ = nullptr;
    NDK_MR* mr_a_ = nullptr;
    NDK_MR* mr_b_ = nullptr;
    NDK_LISTENER* listener_ = nullptr;
    std::vector<NDK_LISTENER*> extra_listeners_;  // ListenerFor's, on side A
    std::unique_ptr<RemoteSide> remote_;          // side B's process, when it has one
    NDK_ADAPTER* adapter_b_ = nullptr;            // side B's adapter and PD (adapter_ and pd_ in-process)
    NDK_PD* pd_b_ = nullptr;
    NDK_CONNECTOR* connector_a_ = nullptr;
    NDK_CONNECTOR* connector_b_ = nullptr;
    std::unique_ptr<LockedBuffer> buffer_a_;
    std::unique_ptr<LockedBuffer> buffer_b_;
    ConnectEvents connect_events_;
    DisconnectEvents disconnects_a_;
    DisconnectEvents disconnects_b_;
    CqEvents cq_events_a_;
    CqEvents cq_events_b_;
};

}  // namespace softndk::test
