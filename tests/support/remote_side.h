// Side B of a connected pair in another process (issue 7 §5, third configuration). With SOFTNDK_TEST_REMOTE_SIDE=1
// the pair fixture starts ndk_remote_side and gets an NDK_ADAPTER here whose objects are proxies: each call on
// them runs on the remote process's adapter (remote_side_protocol.h), and its callbacks come back to the test's
// own callbacks on an event thread. Side A stays in this process, so the two sides meet only on the wire
// (iWARP/TCP, chosen by the default transport because the listener or connector is in another process).
// Memory comes from a shared arena mapped at the same address in both processes (SharedArena), so a test reads
// and writes B's buffers directly and SGEs, MDLs and remote addresses cross unchanged.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <softndk/softndk.h>

#include "support/remote_side_protocol.h"

namespace softndk::test {

// True when the suites run with side B in another process (SOFTNDK_TEST_REMOTE_SIDE=1).
bool RemoteSideRequested();

// Page-aligned memory both processes map at the same address. Allocations are never reused: one arena per test.
class SharedArena {
public:
    static constexpr size_t kBytes = size_t{256} << 20;  // sparse; what a test touches is what it costs
    SharedArena();
    ~SharedArena();
    SharedArena(const SharedArena&) = delete;
    SharedArena& operator=(const SharedArena&) = delete;
    bool ok() const { return base_ != nullptr; }
    // nullptr when exhausted.
    uint8_t* Allocate(size_t bytes);
    bool Contains(const void* address, size_t bytes) const;
    int fd() const { return fd_; }
    uint8_t* base() const { return base_; }

    // The arena of the running remote side, or nullptr (LockedBuffer allocates from it when set).
    static SharedArena* Current();

private:
    friend class RemoteSide;
    int fd_ = -1;
    uint8_t* base_ = nullptr;
    size_t used_ = 0;
    std::mutex mutex_;
};

class RemoteSide {
public:
    // Starts ndk_remote_side (`binary`) with an adapter opened with `config`. nullptr with `*error` set on failure.
    static std::unique_ptr<RemoteSide> Start(const char* binary, const SOFTNDK_ADAPTER_CONFIG& config,
                                             std::string* error);
    ~RemoteSide();
    RemoteSide(const RemoteSide&) = delete;
    RemoteSide& operator=(const RemoteSide&) = delete;

    NDK_ADAPTER* adapter() { return adapter_; }
    // True when `handle` is one of this side's proxies.
    bool Owns(const void* handle) const;

    // ---- used by the proxy dispatch functions (remote_side.cpp) ----
    struct Proxy {
        NDK_OBJECT_HEADER Header;
        const void* Dispatch;
        uint64_t remote;
        RemoteSide* side;
        uint32_t fast_pages;  // an MR's NdkInitializeFastRegisterMr page count: what a page array may hold
    };
    struct CallbackEntry {
        remote::Callback kind;
        void* function;
        void* context;
        NDK_OBJECT_TYPE created_type;                  // kCreate, kConnect: the proxy to make for the event's handle
        std::function<void(remote::Reader&)> outputs;  // kRequest of NdkBuildLAM: copies the LAM back
        const void* forget;                            // kClose: the proxy that stops naming its handle
    };
    static RemoteSide* Of(const void* handle);
    // The handle to send for `handle`: 0 for NULL, the remote handle of a proxy, kForeign for anything else.
    uint64_t RemoteHandle(const void* handle) const;
    // The proxy for a remote handle, made on first sight.
    NDK_OBJECT_HEADER* ProxyFor(uint64_t remote, NDK_OBJECT_TYPE type);
    // Registers a test callback; 0 for a NULL function.
    uint64_t Register(CallbackEntry entry);
    // One call, answered; the reply body (its first word is the status). On a broken link: STATUS_INTERNAL_ERROR.
    std::vector<uint8_t> Call(remote::Fn fn, const remote::Writer& body);
    // The common tail of calls with one-shot callbacks: a call that did not pend will never call them (CB-01).
    void Settle(NTSTATUS returned, std::initializer_list<uint64_t> one_shot);
    // `proxy` no longer names its remote handle (closed); a later object at that address gets a new proxy.
    void Forget(const void* proxy);

private:
    RemoteSide() = default;
    void ReadLoop();
    void EventLoop();
    void Fire(uint64_t id, NTSTATUS status, uint64_t handle, remote::Reader& rest);

    std::unique_ptr<SharedArena> arena_;
    int control_ = -1;
    pid_t pid_ = -1;
    NDK_ADAPTER* adapter_ = nullptr;
    uint64_t remote_adapter_ = 0;

    mutable std::mutex mutex_;  // everything below
    std::condition_variable replied_;
    uint64_t next_call_ = 1;
    struct ReplyBody {
        std::vector<uint8_t> body;
        uint64_t events_before;  // events that arrived before it: they run before the call returns
    };
    std::map<uint64_t, ReplyBody> replies_;
    uint64_t events_received_ = 0;
    uint64_t events_done_ = 0;
    std::condition_variable events_done_changed_;
    std::thread::id dispatcher_id_;
    bool broken_ = false;
    std::unordered_map<uint64_t, Proxy*> by_remote_;
    std::unordered_set<const void*> proxies_;
    std::vector<std::unique_ptr<Proxy>> all_proxies_;  // freed with the side: a closed handle may still be read
    uint64_t next_callback_ = 1;
    std::unordered_map<uint64_t, CallbackEntry> callbacks_;
    std::condition_variable events_ready_;
    std::deque<std::vector<uint8_t>> events_;
    bool stopping_ = false;

    std::thread reader_;
    std::thread dispatcher_;
};

}  // namespace softndk::test
