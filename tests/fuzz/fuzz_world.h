// The world both connection-level fuzzers share (fuzz_receive, fuzz_connection): one softndk adapter with a
// listener on loopback, a PD, a CQ and a registered MR of two pages between two canary pages. Built once per
// process. Placeholders let an input name real memory: DE AD BE EF becomes the MR's remote token,
// 0B AD C0 DE 0B AD C0 DE the MR's base address (both big-endian, as on the wire).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <softndk/softndk.h>

#include "ndk_waiter.hpp"
#include "wire/iwarp_wire.h"

namespace fuzzworld {

constexpr size_t kPages = 4;  // page 0 and 3: canaries; pages 1-2: registered
constexpr uint8_t kCanary = 0xA5;

// A request that never completes aborts the run: a hang is a finding.
constexpr int kRequestTimeoutMs = 2000;
using ndktools::Waiter;

inline void Require(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stderr, "fuzz_receive: %s\n", what);
    std::abort();
}

struct World {
    NDK_ADAPTER* adapter = nullptr;
    NDK_PD* pd = nullptr;
    NDK_CQ* cq = nullptr;
    NDK_MR* mr = nullptr;
    NDK_LISTENER* listener = nullptr;
    uint8_t* memory = nullptr;
    MDL* mdl = nullptr;
    uint16_t port = 0;
    uint32_t token = 0;
    uint64_t base = 0;
    std::atomic<NDK_CONNECTOR*> incoming{nullptr};
    std::atomic<int> disconnects{0};
    static VOID OnConnect(PVOID context, NDK_CONNECTOR* connector) {
        static_cast<World*>(context)->incoming = connector;
    }
    static VOID OnDisconnect(PVOID context) { ++static_cast<World*>(context)->disconnects; }
    static VOID OnCq(PVOID, NTSTATUS) {}
};

template <class T>
T* Created(Waiter& waiter, T* direct) {
    return direct != nullptr ? direct : reinterpret_cast<T*>(waiter.object.load());
}

inline void Close(NDK_OBJECT_HEADER* object) {
    Waiter closed;
    // Every dispatch table starts with NdkCloseObject (ndkpi.h).
    auto close = *reinterpret_cast<NDK_FN_CLOSE_OBJECT const*>(reinterpret_cast<NDK_PD*>(object)->Dispatch);
    closed.Wait(close(object, &Waiter::OnRequestClose, &closed), kRequestTimeoutMs);
}

// `customize` (the first call's) adjusts the adapter's configuration.
inline World& Setup(void (*customize)(SOFTNDK_ADAPTER_CONFIG&) = nullptr) {
    static World* world = [customize] {
        auto* w = new World;
        SOFTNDK_ADAPTER_CONFIG config;
        SoftNdkInitAdapterConfig(&config);
        config.Transport = SOFTNDK_TRANSPORT_TCP;
        config.AcceptTimeoutMs = 1000;
        config.MpaRequestTimeoutMs = 50;  // fuzz_connection: an incomplete Request ends soon
        if (customize != nullptr) customize(config);
        Require(SoftNdkOpenAdapter(&config, &w->adapter) == STATUS_SUCCESS, "open adapter");
        Waiter pd;
        Require(pd.Wait(w->adapter->Dispatch->NdkCreatePd(w->adapter, &Waiter::OnCreate, &pd, &w->pd),
                        kRequestTimeoutMs) == STATUS_SUCCESS,
                "pd");
        w->pd = Created(pd, w->pd);
        Waiter cq;
        Require(cq.Wait(w->adapter->Dispatch->NdkCreateCq(w->adapter, 256, &World::OnCq, w, nullptr, &Waiter::OnCreate,
                                                          &cq, &w->cq),
                        kRequestTimeoutMs) == STATUS_SUCCESS,
                "cq");
        w->cq = Created(cq, w->cq);
        w->memory = static_cast<uint8_t*>(
            mmap(nullptr, kPages * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        Require(w->memory != MAP_FAILED, "mmap");
        std::memset(w->memory, kCanary, kPages * PAGE_SIZE);
        w->mdl = IoAllocateMdl(w->memory + PAGE_SIZE, 2 * PAGE_SIZE, FALSE, FALSE, nullptr);
        Require(w->mdl != nullptr, "mdl");
        MmProbeAndLockPages(w->mdl, KernelMode, IoModifyAccess);
        Waiter mr;
        Require(mr.Wait(w->pd->Dispatch->NdkCreateMr(w->pd, FALSE, &Waiter::OnCreate, &mr, &w->mr),
                        kRequestTimeoutMs) == STATUS_SUCCESS,
                "mr");
        w->mr = Created(mr, w->mr);
        Waiter registered;
        Require(registered.Wait(
                    w->mr->Dispatch->NdkRegisterMr(
                        w->mr, w->mdl, 2 * PAGE_SIZE,
                        NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                        &Waiter::OnRequest, &registered),
                    kRequestTimeoutMs) == STATUS_SUCCESS,
                "register");
        w->token = w->mr->Dispatch->NdkGetRemoteTokenFromMr(w->mr);
        w->base = reinterpret_cast<uint64_t>(w->memory + PAGE_SIZE);
        Waiter listener;
        Require(listener.Wait(w->adapter->Dispatch->NdkCreateListener(w->adapter, &World::OnConnect, w,
                                                                      &Waiter::OnCreate, &listener, &w->listener),
                              kRequestTimeoutMs) == STATUS_SUCCESS,
                "listener");
        w->listener = Created(listener, w->listener);
        SOCKADDR_IN address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        Waiter listened;
        Require(listened.Wait(w->listener->Dispatch->NdkListen(w->listener, reinterpret_cast<PSOCKADDR>(&address),
                                                               sizeof(address), &Waiter::OnRequest, &listened),
                              kRequestTimeoutMs) == STATUS_SUCCESS,
                "listen");
        ULONG length = sizeof(address);
        w->listener->Dispatch->NdkGetLocalAddress(w->listener, reinterpret_cast<PSOCKADDR>(&address), &length);
        w->port = ntohs(address.sin_port);
        return w;
    }();
    return *world;
}

inline void Substitute(std::vector<uint8_t>& bytes, const World& world) {
    const uint8_t token_magic[4] = {0xDE, 0xAD, 0xBE, 0xEF};
    const uint8_t base_magic[8] = {0x0B, 0xAD, 0xC0, 0xDE, 0x0B, 0xAD, 0xC0, 0xDE};
    for (size_t i = 0; i + 8 <= bytes.size(); ++i) {
        if (std::memcmp(&bytes[i], base_magic, 8) == 0)
            for (int b = 0; b < 8; ++b) bytes[i + b] = static_cast<uint8_t>(world.base >> (56 - 8 * b));
    }
    for (size_t i = 0; i + 4 <= bytes.size(); ++i) {
        if (std::memcmp(&bytes[i], token_magic, 4) == 0)
            for (int b = 0; b < 4; ++b) bytes[i + b] = static_cast<uint8_t>(world.token >> (24 - 8 * b));
    }
}

// The bytes around the registration never change.
inline void RequireCanaries(const World& world) {
    for (size_t i = 0; i < PAGE_SIZE; ++i) {
        Require(world.memory[i] == kCanary, "the page below the registration changed");
        Require(world.memory[3 * PAGE_SIZE + i] == kCanary, "the page above the registration changed");
    }
}

}  // namespace fuzzworld
