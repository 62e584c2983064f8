// Registration costs against their floors, measured in the same run (issue 2 §8):
//   PageTableFloor        turning N PFNs into N host page pointers (what any registration must do)
//   MlockMunlock          mlock + munlock of the same pages (what locking must do)
//   RegisterDeregister    NdkRegisterMr + NdkDeregisterMr, inline mode
//   ProbeAndLockUnlock    SoftNdkProbeAndLockPages + MmUnlockPages
//   BuildReleaseLam       NdkBuildLAM + NdkReleaseLAM
//   InitializeFastRegisterMr
// Each reports items = pages, so ns/page = 1e9 / items_per_second. bench/registration_report.py turns the
// JSON into the table in docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include <softndk/softndk.h>

namespace {

const std::vector<int64_t> kPageCounts = {1, 16, 256, 4096, 65536, 262144};

void Check(NTSTATUS status, const char* what) {
    if (!NT_SUCCESS(status)) {
        std::fprintf(stderr, "%s failed: 0x%08X %s\n", what, static_cast<unsigned>(status), SoftNdkGetLastErrorText());
        std::abort();
    }
}

VOID IgnoreRequest(PVOID, NTSTATUS) {}
VOID IgnoreCreate(PVOID, NTSTATUS, NDK_OBJECT_HEADER*) {}

// One populated buffer per size, plus an MDL over it (locked on demand), shared by all benchmarks.
struct Buffer {
    explicit Buffer(size_t pages) : bytes(pages * PAGE_SIZE) {
        data = static_cast<uint8_t*>(
            mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
        mdl = IoAllocateMdl(data, static_cast<ULONG>(bytes), FALSE, FALSE, nullptr);
    }
    void EnsureLocked() {
        if (!locked) Check(SoftNdkProbeAndLockPages(mdl, KernelMode, IoWriteAccess), "SoftNdkProbeAndLockPages");
        locked = true;
    }
    void EnsureUnlocked() {
        if (locked) MmUnlockPages(mdl);
        locked = false;
    }
    size_t bytes;
    uint8_t* data;
    MDL* mdl;
    bool locked = false;
};

Buffer& BufferOf(size_t pages) {
    static std::map<size_t, std::unique_ptr<Buffer>> buffers;
    auto& slot = buffers[pages];
    if (!slot) slot = std::make_unique<Buffer>(pages);
    return *slot;
}

struct Adapter {
    Adapter() {
        Check(SoftNdkOpenAdapter(nullptr, &adapter), "SoftNdkOpenAdapter");
        Check(adapter->Dispatch->NdkCreatePd(adapter, &IgnoreCreate, nullptr, &pd), "NdkCreatePd");
    }
    NDK_MR* NewMr(bool fast) {
        NDK_MR* mr = nullptr;
        Check(pd->Dispatch->NdkCreateMr(pd, fast, &IgnoreCreate, nullptr, &mr), "NdkCreateMr");
        return mr;
    }
    NDK_ADAPTER* adapter = nullptr;
    NDK_PD* pd = nullptr;
};

Adapter& TheAdapter() {
    static Adapter adapter;
    return adapter;
}

void Finish(benchmark::State& state, int64_t pages) {
    state.SetItemsProcessed(state.iterations() * pages);
    state.counters["pages"] = static_cast<double>(pages);
}

void BM_PageTableFloor(benchmark::State& state) {
    const int64_t pages = state.range(0);
    Buffer& buffer = BufferOf(pages);
    buffer.EnsureLocked();
    const PFN_NUMBER* pfns = MmGetMdlPfnArray(buffer.mdl);
    std::vector<uint8_t*> table(pages);
    for (auto _ : state) {
        for (int64_t i = 0; i < pages; ++i) table[i] = reinterpret_cast<uint8_t*>(pfns[i] << PAGE_SHIFT);
        benchmark::DoNotOptimize(table.data());
        benchmark::ClobberMemory();
    }
    Finish(state, pages);
}

void BM_MlockMunlock(benchmark::State& state) {
    const int64_t pages = state.range(0);
    Buffer& buffer = BufferOf(pages);
    buffer.EnsureUnlocked();
    for (auto _ : state) {
        syscall(SYS_mlock, buffer.data, buffer.bytes);
        syscall(SYS_munlock, buffer.data, buffer.bytes);
    }
    Finish(state, pages);
}

void BM_RegisterDeregister(benchmark::State& state) {
    const int64_t pages = state.range(0);
    Buffer& buffer = BufferOf(pages);
    buffer.EnsureLocked();
    NDK_MR* mr = TheAdapter().NewMr(false);
    for (auto _ : state) {
        Check(mr->Dispatch->NdkRegisterMr(mr, buffer.mdl, buffer.bytes, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &IgnoreRequest,
                                          nullptr),
              "NdkRegisterMr");
        Check(mr->Dispatch->NdkDeregisterMr(mr, &IgnoreRequest, nullptr), "NdkDeregisterMr");
    }
    mr->Dispatch->NdkCloseMr(&mr->Header, nullptr, nullptr);
    Finish(state, pages);
}

void BM_ProbeAndLockUnlock(benchmark::State& state) {
    const int64_t pages = state.range(0);
    Buffer& buffer = BufferOf(pages);
    buffer.EnsureUnlocked();
    for (auto _ : state) {
        Check(SoftNdkProbeAndLockPages(buffer.mdl, KernelMode, IoWriteAccess), "SoftNdkProbeAndLockPages");
        MmUnlockPages(buffer.mdl);
    }
    Finish(state, pages);
}

void BM_BuildReleaseLam(benchmark::State& state) {
    const int64_t pages = state.range(0);
    Buffer& buffer = BufferOf(pages);
    buffer.EnsureLocked();
    NDK_ADAPTER* adapter = TheAdapter().adapter;
    std::vector<uint8_t> storage(NDK_LAM_SIZE(pages));
    auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(storage.data());
    for (auto _ : state) {
        ULONG size = static_cast<ULONG>(storage.size());
        ULONG fbo = 0;
        Check(adapter->Dispatch->NdkBuildLAM(adapter, buffer.mdl, buffer.bytes, &IgnoreRequest, nullptr, lam, &size,
                                             &fbo),
              "NdkBuildLAM");
        adapter->Dispatch->NdkReleaseLAM(adapter, lam);
    }
    Finish(state, pages);
}

void BM_InitializeFastRegisterMr(benchmark::State& state) {
    const int64_t pages = state.range(0);
    NDK_MR* mr = TheAdapter().NewMr(true);
    for (auto _ : state) {
        Check(mr->Dispatch->NdkInitializeFastRegisterMr(mr, static_cast<ULONG>(pages), TRUE, &IgnoreRequest, nullptr),
              "NdkInitializeFastRegisterMr");
    }
    mr->Dispatch->NdkCloseMr(&mr->Header, nullptr, nullptr);
    Finish(state, pages);
}

void Sizes(benchmark::internal::Benchmark* benchmark) {
    for (int64_t pages : kPageCounts) benchmark->Arg(pages);
}

BENCHMARK(BM_PageTableFloor)->Apply(Sizes);
BENCHMARK(BM_RegisterDeregister)->Apply(Sizes);
BENCHMARK(BM_BuildReleaseLam)->Apply(Sizes);
BENCHMARK(BM_InitializeFastRegisterMr)->Apply(Sizes);
BENCHMARK(BM_MlockMunlock)->Apply(Sizes);
BENCHMARK(BM_ProbeAndLockUnlock)->Apply(Sizes);

}  // namespace

BENCHMARK_MAIN();
