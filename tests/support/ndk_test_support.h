// Helpers for the conformance tests: an adapter per completion mode, completion recorders that check the
// CB-01/CB-02 rule (a callback only after STATUS_PENDING), and locked buffers with their MDLs.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <softndk/softndk.h>

namespace softndk::test {

// Records one completion callback of any kind.
class Completion {
public:
    Completion() = default;
    Completion(const Completion&) = delete;
    ~Completion() {
        std::lock_guard lock(mutex_);
        EXPECT_LE(calls_, 1) << "a completion was called more than once";
        if (returned_known_ && returned_ != STATUS_PENDING) {
            EXPECT_EQ(calls_, 0) << "completion called although the call returned 0x" << std::hex << returned_;
        }
    }

    static VOID OnRequest(PVOID context, NTSTATUS status) {
        static_cast<Completion*>(context)->Record(status, nullptr);
    }
    static VOID OnCreate(PVOID context, NTSTATUS status, NDK_OBJECT_HEADER* object) {
        static_cast<Completion*>(context)->Record(status, object);
    }
    static VOID OnClose(PVOID context) { static_cast<Completion*>(context)->Record(STATUS_SUCCESS, nullptr); }

    // The final status of a call that returned `returned`: itself, or the completion's after STATUS_PENDING.
    NTSTATUS Wait(NTSTATUS returned) {
        std::unique_lock lock(mutex_);
        returned_ = returned;
        returned_known_ = true;
        if (returned != STATUS_PENDING) {
            EXPECT_EQ(calls_, 0) << "CB-01: completion called for a call that did not pend";
            return returned;
        }
        if (!cv_.wait_for(lock, std::chrono::seconds(10), [this] { return calls_ > 0; })) {
            ADD_FAILURE() << "completion never called after STATUS_PENDING";
            return STATUS_IO_TIMEOUT;
        }
        return status_;
    }
    NDK_OBJECT_HEADER* object() const { return object_; }
    int calls() {
        std::lock_guard lock(mutex_);
        return calls_;
    }

private:
    void Record(NTSTATUS status, NDK_OBJECT_HEADER* object) {
        std::lock_guard lock(mutex_);
        ++calls_;
        status_ = status;
        object_ = object;
        cv_.notify_all();
    }
    std::mutex mutex_;
    std::condition_variable cv_;
    int calls_ = 0;
    NTSTATUS status_ = STATUS_UNSUCCESSFUL;
    NDK_OBJECT_HEADER* object_ = nullptr;
    NTSTATUS returned_ = STATUS_UNSUCCESSFUL;
    bool returned_known_ = false;
};

// While a remote side runs (support/remote_side.h), LockedBuffer takes its memory from the arena both processes
// map; nullptr otherwise.
inline std::atomic<uint8_t* (*)(size_t bytes)> g_shared_allocator{nullptr};

// Page-aligned anonymous memory, locked through SoftNdkProbeAndLockPages, with one MDL over all of it.
class LockedBuffer {
public:
    explicit LockedBuffer(size_t pages, LOCK_OPERATION operation = IoWriteAccess) : bytes_(pages * PAGE_SIZE) {
        uint8_t* (*shared)(size_t) = g_shared_allocator.load();
        shared_ = shared != nullptr;
        memory_ = shared_ ? shared(bytes_)
                          : static_cast<uint8_t*>(
                                mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        EXPECT_NE(memory_, shared_ ? nullptr : MAP_FAILED) << "no memory for a LockedBuffer";
        mdl_ = IoAllocateMdl(memory_, static_cast<ULONG>(bytes_), FALSE, FALSE, nullptr);
        EXPECT_NE(mdl_, nullptr);
        EXPECT_EQ(SoftNdkProbeAndLockPages(mdl_, KernelMode, operation), STATUS_SUCCESS) << SoftNdkGetLastErrorText();
    }
    ~LockedBuffer() {
        MmUnlockPages(mdl_);
        IoFreeMdl(mdl_);
        if (!shared_) munmap(memory_, bytes_);  // the arena's pages go with the arena
    }
    LockedBuffer(const LockedBuffer&) = delete;
    uint8_t* data() const { return memory_; }
    size_t bytes() const { return bytes_; }
    MDL* mdl() const { return mdl_; }
    PFN_NUMBER pfn(size_t page) const { return MmGetMdlPfnArray(mdl_)[page]; }

private:
    size_t bytes_;
    bool shared_ = false;
    uint8_t* memory_;
    MDL* mdl_;
};

// An MDL built by hand over chosen PFNs (owned; freed with IoFreeMdl).
inline MDL* MakeMdl(uint64_t virtual_address, ULONG length, const std::vector<PFN_NUMBER>& pfns) {
    MDL* mdl = IoAllocateMdl(reinterpret_cast<PVOID>(virtual_address), length, FALSE, FALSE, nullptr);
    EXPECT_EQ(ADDRESS_AND_SIZE_TO_SPAN_PAGES(virtual_address, length), pfns.size());
    for (size_t i = 0; i < pfns.size(); ++i) MmGetMdlPfnArray(mdl)[i] = pfns[i];
    mdl->MdlFlags |= MDL_PAGES_LOCKED;
    return mdl;
}

inline const char* ModeName(SOFTNDK_COMPLETION_MODE mode) {
    switch (mode) {
        case SOFTNDK_COMPLETION_INLINE:
            return "Inline";
        case SOFTNDK_COMPLETION_PEND:
            return "Pend";
        case SOFTNDK_COMPLETION_RANDOM:
            return "Random";
    }
    return "Unknown";
}

// One adapter and PD per test, in the completion mode of the test parameter.
class AdapterTest : public ::testing::TestWithParam<SOFTNDK_COMPLETION_MODE> {
protected:
    void SetUp() override {
        SoftNdkInitAdapterConfig(&config_);
        config_.CompletionMode = Mode();
        config_.RandomSeed = 12345;
        Customize(config_);
        ASSERT_EQ(SoftNdkOpenAdapter(&config_, &adapter_), STATUS_SUCCESS) << SoftNdkGetLastErrorText();
        pd_ = CreatePd();
        ASSERT_NE(pd_, nullptr);
    }
    void TearDown() override {
        if (pd_ != nullptr) Close(&pd_->Header);
        if (adapter_ != nullptr) {
            EXPECT_EQ(SoftNdkCloseAdapter(adapter_), STATUS_SUCCESS);
        }
    }
    virtual void Customize(SOFTNDK_ADAPTER_CONFIG&) {}
    // Over iWARP/TCP (SOFTNDK_TRANSPORT=tcp runs the suites there, issue 7 §5): a Send or Write completes when it
    // leaves, so a refusal by the peer reaches the initiator only through the Terminate (RFC 5040 §5.4).
    // A connected pair with its peer in another process is on iWARP/TCP too (ConnectedPairTest).
    virtual bool OverTcp() const { return config_.Transport == SOFTNDK_TRANSPORT_TCP; }
    virtual SOFTNDK_COMPLETION_MODE Mode() { return GetParam(); }

    NDK_ADAPTER_INFO Info() {
        NDK_ADAPTER_INFO info{};
        ULONG size = sizeof(info);
        EXPECT_EQ(adapter_->Dispatch->NdkQueryAdapterInfo(adapter_, &info, &size), STATUS_SUCCESS);
        return info;
    }
    // A PD of the fixture's adapter, or of `adapter`.
    NDK_PD* CreatePd(NDK_ADAPTER* adapter = nullptr) {
        adapter = adapter != nullptr ? adapter : adapter_;
        Completion done;
        NDK_PD* pd = nullptr;
        NTSTATUS status = done.Wait(adapter->Dispatch->NdkCreatePd(adapter, &Completion::OnCreate, &done, &pd));
        EXPECT_EQ(status, STATUS_SUCCESS);
        return pd != nullptr ? pd : reinterpret_cast<NDK_PD*>(done.object());
    }
    // An MR of the fixture's PD, or of `pd`.
    NDK_MR* CreateMr(bool fast, NDK_PD* pd = nullptr) {
        pd = pd != nullptr ? pd : pd_;
        Completion done;
        NDK_MR* mr = nullptr;
        NTSTATUS status =
            done.Wait(pd->Dispatch->NdkCreateMr(pd, fast ? TRUE : FALSE, &Completion::OnCreate, &done, &mr));
        EXPECT_EQ(status, STATUS_SUCCESS);
        return mr != nullptr ? mr : reinterpret_cast<NDK_MR*>(done.object());
    }
    NTSTATUS Register(NDK_MR* mr, MDL* mdl, SIZE_T length, ULONG flags) {
        Completion done;
        return done.Wait(mr->Dispatch->NdkRegisterMr(mr, mdl, length, flags, &Completion::OnRequest, &done));
    }
    NTSTATUS Deregister(NDK_MR* mr) {
        Completion done;
        return done.Wait(mr->Dispatch->NdkDeregisterMr(mr, &Completion::OnRequest, &done));
    }
    NTSTATUS InitializeFast(NDK_MR* mr, ULONG pages, BOOLEAN remote) {
        Completion done;
        return done.Wait(mr->Dispatch->NdkInitializeFastRegisterMr(mr, pages, remote, &Completion::OnRequest, &done));
    }
    // A LAM of the fixture's adapter, or of `adapter`.
    NTSTATUS BuildLam(MDL* mdl, SIZE_T length, NDK_LOGICAL_ADDRESS_MAPPING* lam, ULONG* size, ULONG* fbo,
                      NDK_ADAPTER* adapter = nullptr) {
        adapter = adapter != nullptr ? adapter : adapter_;
        Completion done;
        return done.Wait(
            adapter->Dispatch->NdkBuildLAM(adapter, mdl, length, &Completion::OnRequest, &done, lam, size, fbo));
    }
    // Closes through the object's own dispatch table (first member of every table but the adapter's).
    void Close(NDK_OBJECT_HEADER* object) {
        Completion done;
        auto close = *reinterpret_cast<NDK_FN_CLOSE_OBJECT const*>(reinterpret_cast<NDK_PD*>(object)->Dispatch);
        EXPECT_EQ(done.Wait(close(object, &Completion::OnClose, &done)), STATUS_SUCCESS);
    }

    SOFTNDK_ADAPTER_CONFIG config_{};
    NDK_ADAPTER* adapter_ = nullptr;
    NDK_PD* pd_ = nullptr;
};

#define SOFTNDK_ALL_MODES(Suite)                                                                          \
    INSTANTIATE_TEST_SUITE_P(                                                                             \
        Modes, Suite,                                                                                     \
        ::testing::Values(SOFTNDK_COMPLETION_INLINE, SOFTNDK_COMPLETION_PEND, SOFTNDK_COMPLETION_RANDOM), \
        [](const ::testing::TestParamInfo<SOFTNDK_COMPLETION_MODE>& info) {                               \
            return std::string(::softndk::test::ModeName(info.param));                                    \
        })

}  // namespace softndk::test
