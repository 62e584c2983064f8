// A connected QP pair for the tools and benchmarks: a server adapter listening on an address, a client adapter
// connecting to it, one CQ and one registered buffer per side. Every call waits for its completion, so it works
// in any completion mode.
#pragma once

#include <arpa/inet.h>
#include <sched.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <softndk/softndk.h>

#include "ndk_waiter.hpp"

namespace ndktools {

struct Side {
    NDK_ADAPTER* adapter = nullptr;
    NDK_PD* pd = nullptr;
    NDK_CQ* cq = nullptr;
    NDK_QP* qp = nullptr;
    NDK_MR* mr = nullptr;
    NDK_CONNECTOR* connector = nullptr;
    uint8_t* buffer = nullptr;
    size_t bytes = 0;
    MDL* mdl = nullptr;
    UINT32 local_token = 0;
    UINT32 remote_token = 0;
    bool owns_adapter = true;  // false: OpenSide was given another side's adapter (CloseSide leaves it open)
};

inline VOID IgnoreCq(PVOID, NTSTATUS) {}

// One side: adapter, PD, one CQ, one QP, one registered buffer of `bytes` (by default remote read and write
// allowed; `mr_flags` says otherwise). With `shared_adapter` the side opens no adapter of its own.
inline void OpenSide(Side* side, const SOFTNDK_ADAPTER_CONFIG& config, size_t bytes, ULONG depth, ULONG cq_depth = 0,
                     ULONG mr_flags = NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
                     NDK_ADAPTER* shared_adapter = nullptr) {
    side->owns_adapter = shared_adapter == nullptr;
    if (shared_adapter != nullptr)
        side->adapter = shared_adapter;
    else
        Check(SoftNdkOpenAdapter(&config, &side->adapter), "SoftNdkOpenAdapter");
    Waiter pd;
    side->pd = Created(pd, side->adapter->Dispatch->NdkCreatePd(side->adapter, &Waiter::OnCreate, &pd, &side->pd),
                       &side->pd, "NdkCreatePd");
    Waiter cq;
    side->cq =
        Created(cq,
                side->adapter->Dispatch->NdkCreateCq(side->adapter, cq_depth != 0 ? cq_depth : depth * 2, &IgnoreCq,
                                                     nullptr, nullptr, &Waiter::OnCreate, &cq, &side->cq),
                &side->cq, "NdkCreateCq");
    Waiter qp;
    side->qp = Created(qp,
                       side->pd->Dispatch->NdkCreateQp(side->pd, side->cq, side->cq, side, depth, depth, 4, 4, 256,
                                                       &Waiter::OnCreate, &qp, &side->qp),
                       &side->qp, "NdkCreateQp");
    side->bytes = bytes;
    side->buffer = static_cast<uint8_t*>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
    side->mdl = IoAllocateMdl(side->buffer, static_cast<ULONG>(bytes), FALSE, FALSE, nullptr);
    Check(SoftNdkProbeAndLockPages(side->mdl, KernelMode, IoWriteAccess), "SoftNdkProbeAndLockPages");
    Waiter mr;
    side->mr = Created(mr, side->pd->Dispatch->NdkCreateMr(side->pd, FALSE, &Waiter::OnCreate, &mr, &side->mr),
                       &side->mr, "NdkCreateMr");
    Waiter registered;
    Check(registered.Wait(
              side->mr->Dispatch->NdkRegisterMr(side->mr, side->mdl, bytes, mr_flags, &Waiter::OnRequest, &registered)),
          "NdkRegisterMr");
    side->local_token = side->mr->Dispatch->NdkGetLocalTokenFromMr(side->mr);
    side->remote_token = side->mr->Dispatch->NdkGetRemoteTokenFromMr(side->mr);
}

// Closes any object of `side` (the QP may have been closed and cleared already), then the adapter.
inline void CloseSide(Side* side) {
    Waiter connector_closed;
    if (side->connector != nullptr)
        connector_closed.Wait(side->connector->Dispatch->NdkCloseConnector(&side->connector->Header,
                                                                           &Waiter::OnRequestClose, &connector_closed));
    side->connector = nullptr;
    NDK_OBJECT_HEADER* objects[] = {side->qp ? &side->qp->Header : nullptr, &side->cq->Header, &side->mr->Header,
                                    &side->pd->Header};
    for (NDK_OBJECT_HEADER* object : objects) {
        if (object == nullptr) continue;
        Waiter closed;
        auto close = *reinterpret_cast<NDK_FN_CLOSE_OBJECT const*>(reinterpret_cast<NDK_PD*>(object)->Dispatch);
        closed.Wait(close(object, &Waiter::OnRequestClose, &closed));
    }
    MmUnlockPages(side->mdl);
    IoFreeMdl(side->mdl);
    munmap(side->buffer, side->bytes);
    if (side->owns_adapter) SoftNdkCloseAdapter(side->adapter);
    *side = Side{};
}

class Pair {
public:
    // `bytes` per side; mode is a SOFTNDK_COMPLETION_MODE.
    Pair(size_t bytes, ULONG mode, ULONG depth = 1024) {
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);
        config.CompletionMode = mode;
        for (Side* side : {&server, &client}) OpenSide(side, config, bytes, depth);
        Connect();
    }

    ~Pair() {
        for (Side* side : {&client, &server}) {
            Waiter closed;
            if (side->connector != nullptr)
                closed.Wait(side->connector->Dispatch->NdkCloseConnector(&side->connector->Header,
                                                                         &Waiter::OnRequestClose, &closed));
            side->connector = nullptr;
        }
        Waiter listener_closed;
        listener_closed.Wait(
            listener->Dispatch->NdkCloseListener(&listener->Header, &Waiter::OnRequestClose, &listener_closed));
        for (Side* side : {&client, &server}) CloseSide(side);
    }

    // Polls one completion of `side`'s CQ (busy-polling, as latency-sensitive consumers do).
    static NDK_RESULT_EX Poll(Side& side) {
        NDK_RESULT_EX result;
        while (side.cq->Dispatch->NdkGetCqResultsEx(side.cq, &result, 1) == 0) {
        }
        return result;
    }

    Side server;
    Side client;
    NDK_LISTENER* listener = nullptr;
    SOCKADDR_IN address{};

private:
    static VOID OnConnect(PVOID context, NDK_CONNECTOR* connector) {
        static_cast<std::atomic<NDK_CONNECTOR*>*>(context)->store(connector);
    }

    void Connect() {
        static std::atomic<NDK_CONNECTOR*> incoming;
        incoming = nullptr;
        SOCKADDR_INET where{};
        where.Ipv4.sin_family = AF_INET;
        where.Ipv4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        listener = Listen(server.adapter, &OnConnect, &incoming, &where);
        address = where.Ipv4;
        Waiter connector;
        client.connector = Created(connector,
                                   client.adapter->Dispatch->NdkCreateConnector(client.adapter, &Waiter::OnCreate,
                                                                                &connector, &client.connector),
                                   &client.connector, "NdkCreateConnector");
        SOCKADDR_IN source = address;
        source.sin_port = 0;
        Waiter connected;
        NTSTATUS connect_returned = client.connector->Dispatch->NdkConnect(
            client.connector, client.qp, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
            reinterpret_cast<PSOCKADDR>(&address), sizeof(address), 16, 16, nullptr, 0, &Waiter::OnRequest, &connected);
        while (incoming.load() == nullptr) sched_yield();
        server.connector = incoming.load();
        Waiter accepted;
        NTSTATUS accept_returned = server.connector->Dispatch->NdkAccept(
            server.connector, server.qp, 16, 16, nullptr, 0, nullptr, nullptr, &Waiter::OnRequest, &accepted);
        Check(connected.Wait(connect_returned), "NdkConnect");
        Waiter completed;
        Check(completed.Wait(client.connector->Dispatch->NdkCompleteConnect(client.connector, nullptr, nullptr,
                                                                            &Waiter::OnRequest, &completed)),
              "NdkCompleteConnect");
        Check(accepted.Wait(accept_returned), "NdkAccept");
    }
};

}  // namespace ndktools
