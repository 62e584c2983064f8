// Waiting for NDK completions from C++ consumers (the tools, the test peer, the receive fuzzer): every call may
// complete inline or pend (completion modes), so each is waited for the same way.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>

#include <softndk/softndk.h>

#include "ndk_status.h"

namespace ndktools {

// Ends the process after a failure, from any thread: the first caller flushes and exits at once (no static
// destructors while other threads still post: ndkperf -q runs several); any later caller waits for that.
[[noreturn]] inline void ExitAtOnce(int status) {
    static std::atomic<bool> exiting{false};
    if (exiting.exchange(true))
        for (;;) pause();
    std::fflush(nullptr);
    std::_Exit(status);
}

inline void Check(NTSTATUS status, const char* what) {
    if (!NT_SUCCESS(status)) {
        char described[256];
        const char* detail = SoftNdkGetLastErrorText();
        std::fprintf(stderr, "%s failed: %s%s%s\n", what, ndk_status_describe(status, described, sizeof(described)),
                     detail[0] ? "; " : "", detail);
        ExitAtOnce(1);
    }
}

struct Waiter {
    std::atomic<bool> done{false};
    std::atomic<NTSTATUS> status{STATUS_PENDING};
    std::atomic<NDK_OBJECT_HEADER*> object{nullptr};
    static VOID OnRequest(PVOID context, NTSTATUS status) {
        auto* waiter = static_cast<Waiter*>(context);
        waiter->status = status;
        waiter->done = true;
    }
    static VOID OnRequestClose(PVOID context) { OnRequest(context, STATUS_SUCCESS); }
    static VOID OnCreate(PVOID context, NTSTATUS status, NDK_OBJECT_HEADER* object) {
        static_cast<Waiter*>(context)->object = object;
        OnRequest(context, status);
    }
    // `returned` is what the call returned; STATUS_PENDING waits for the completion. With `timeout_ms`, a
    // completion that never comes aborts the process (a hang is a bug the caller must see).
    NTSTATUS Wait(NTSTATUS returned, int timeout_ms = 0) {
        if (returned != STATUS_PENDING) return returned;
        for (long waited_us = 0; !done; waited_us += 10) {
            if (timeout_ms > 0 && waited_us / 1000 > timeout_ms) {
                std::fprintf(stderr, "a request never completed (%d ms)\n", timeout_ms);
                std::abort();
            }
            usleep(10);
        }
        return status;
    }
    // The same for a wait on a peer: after kSaySeconds prints `waiting_for` once, so a long wait says what it
    // waits for (the request itself ends at the adapter's timeout).
    static constexpr int kSaySeconds = 3;
    NTSTATUS WaitSaying(NTSTATUS returned, const char* waiting_for) {
        if (returned != STATUS_PENDING) return returned;
        const auto say_at = std::chrono::steady_clock::now() + std::chrono::seconds(kSaySeconds);
        for (bool said = false; !done; usleep(10)) {
            if (!said && std::chrono::steady_clock::now() > say_at) {
                std::fprintf(stderr, "%s (%d s so far)\n", waiting_for, kSaySeconds);
                said = true;
            }
        }
        return status;
    }
};

// The created object: stored through `slot` when the call completed inline, else given to the completion.
template <class T>
T* Created(Waiter& waiter, NTSTATUS returned, T* const* slot, const char* what) {
    Check(waiter.Wait(returned), what);
    return *slot != nullptr ? *slot : reinterpret_cast<T*>(waiter.object.load());
}

// A listener on `*address` (IPv4 or IPv6; port 0 takes an ephemeral one), its bound address written back.
inline NDK_LISTENER* Listen(NDK_ADAPTER* adapter, NDK_FN_CONNECT_EVENT_CALLBACK on_connect, PVOID context,
                            SOCKADDR_INET* address) {
    Waiter created;
    NDK_LISTENER* listener = nullptr;
    listener = Created(
        created,
        adapter->Dispatch->NdkCreateListener(adapter, on_connect, context, &Waiter::OnCreate, &created, &listener),
        &listener, "NdkCreateListener");
    const ULONG length = address->si_family == AF_INET6 ? sizeof(SOCKADDR_IN6) : sizeof(SOCKADDR_IN);
    Waiter listened;
    Check(listened.Wait(listener->Dispatch->NdkListen(listener, reinterpret_cast<PSOCKADDR>(address), length,
                                                      &Waiter::OnRequest, &listened)),
          "NdkListen");
    ULONG bound = sizeof(*address);
    Check(listener->Dispatch->NdkGetLocalAddress(listener, reinterpret_cast<PSOCKADDR>(address), &bound),
          "NdkGetLocalAddress");
    return listener;
}

// The connect requests a listener delivers (its NDK_FN_CONNECT_EVENT_CALLBACK, with this as the context), taken
// in arrival order by the consumer's thread.
class IncomingConnectors {
public:
    static VOID OnConnect(PVOID context, NDK_CONNECTOR* connector) {
        auto* self = static_cast<IncomingConnectors*>(context);
        std::lock_guard lock(self->mutex_);
        self->queue_.push_back(connector);
    }
    NDK_CONNECTOR* TryTake() {  // nullptr when none is waiting
        std::lock_guard lock(mutex_);
        if (queue_.empty()) return nullptr;
        NDK_CONNECTOR* connector = queue_.front();
        queue_.pop_front();
        return connector;
    }

private:
    std::mutex mutex_;
    std::deque<NDK_CONNECTOR*> queue_;
};

// Closes any NDK object through its dispatch table's first member (NdkCloseObject, ndkpi.h) and waits.
template <class T>
void CloseObject(T* object) {
    if (object == nullptr) return;
    Waiter closed;
    auto close = *reinterpret_cast<NDK_FN_CLOSE_OBJECT const*>(object->Dispatch);
    closed.Wait(close(&object->Header, &Waiter::OnRequestClose, &closed));
}

}  // namespace ndktools
