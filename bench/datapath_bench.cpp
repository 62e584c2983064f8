// The data path against memcpy, measured in the same run (issue 3 §10):
//   Memcpy/size              the baseline: memcpy between the same two buffers
//   RdmaWrite/size, RdmaRead/size   bandwidth as ib_write_bw measures it: windows of 16 requests, only the last
//                            signalled (--cq-mod 16), then its completion polled; in-process pair, inline mode
//   Write64MessageRate       64 B writes, one completion per 64 (items = writes)
//   WriteLatency             one 64 B write, post to completion
//   FastRegisterInvalidate/pages   NdkFastRegister + NdkInvalidate, both completed
// bench/datapath_report.py turns the JSON into the tables of docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <vector>

#include "../tools/ndk_pair.hpp"

namespace {

constexpr size_t kLargest = 4 << 20;
constexpr int kWindow = 16;  // requests per signalled completion in the bandwidth runs

ndktools::Pair& ThePair() {
    static auto* pair = new ndktools::Pair(kLargest, SOFTNDK_COMPLETION_INLINE);
    return *pair;
}

NDK_SGE Sge(ndktools::Side& side, size_t length) {
    NDK_SGE sge{};
    sge.VirtualAddress = side.buffer;
    sge.Length = static_cast<ULONG>(length);
    sge.MemoryRegionToken = side.local_token;
    return sge;
}

void Sizes(benchmark::internal::Benchmark* b) {
    for (int64_t size = 64; size <= static_cast<int64_t>(kLargest); size *= 4) b->Arg(size);
}

void BM_Memcpy(benchmark::State& state) {
    ndktools::Pair& pair = ThePair();
    const size_t size = state.range(0);
    for (auto _ : state) {
        for (int i = 0; i < kWindow; ++i) {
            std::memcpy(pair.server.buffer, pair.client.buffer, size);
            benchmark::ClobberMemory();
        }
    }
    state.SetBytesProcessed(state.iterations() * kWindow * size);
}

template <bool kRead>
void BM_Rdma(benchmark::State& state) {
    ndktools::Pair& pair = ThePair();
    NDK_QP* qp = pair.client.qp;
    const auto post = kRead ? qp->Dispatch->NdkRead : qp->Dispatch->NdkWrite;
    NDK_SGE sge = Sge(pair.client, state.range(0));
    const UINT64 remote = reinterpret_cast<UINT64>(pair.server.buffer);
    for (auto _ : state) {
        for (int i = 0; i < kWindow - 1; ++i)
            post(qp, nullptr, &sge, 1, remote, pair.server.remote_token, NDK_OP_FLAG_SILENT_SUCCESS);
        post(qp, nullptr, &sge, 1, remote, pair.server.remote_token, 0);
        ndktools::Pair::Poll(pair.client);
    }
    state.SetBytesProcessed(state.iterations() * kWindow * state.range(0));
}
void BM_RdmaWrite(benchmark::State& state) {
    BM_Rdma<false>(state);
}
void BM_RdmaRead(benchmark::State& state) {
    BM_Rdma<true>(state);
}

void BM_Write64MessageRate(benchmark::State& state) {
    ndktools::Pair& pair = ThePair();
    NDK_SGE sge = Sge(pair.client, 64);
    const UINT64 remote = reinterpret_cast<UINT64>(pair.server.buffer);
    for (auto _ : state) {
        for (int i = 0; i < 63; ++i)
            pair.client.qp->Dispatch->NdkWrite(pair.client.qp, nullptr, &sge, 1, remote, pair.server.remote_token,
                                               NDK_OP_FLAG_SILENT_SUCCESS);
        pair.client.qp->Dispatch->NdkWrite(pair.client.qp, nullptr, &sge, 1, remote, pair.server.remote_token, 0);
        ndktools::Pair::Poll(pair.client);
    }
    state.SetItemsProcessed(state.iterations() * 64);
}

void BM_WriteLatency(benchmark::State& state) {
    ndktools::Pair& pair = ThePair();
    NDK_SGE sge = Sge(pair.client, 64);
    const UINT64 remote = reinterpret_cast<UINT64>(pair.server.buffer);
    for (auto _ : state) {
        pair.client.qp->Dispatch->NdkWrite(pair.client.qp, nullptr, &sge, 1, remote, pair.server.remote_token, 0);
        ndktools::Pair::Poll(pair.client);
    }
}

void BM_FastRegisterInvalidate(benchmark::State& state) {
    ndktools::Pair& pair = ThePair();
    ndktools::Side& s = pair.server;
    const ULONG pages = static_cast<ULONG>(state.range(0));
    std::vector<uint8_t> storage(NDK_LAM_SIZE(pages));
    auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(storage.data());
    ULONG size = static_cast<ULONG>(storage.size());
    ULONG fbo = 0;
    ndktools::Check(s.adapter->Dispatch->NdkBuildLAM(s.adapter, s.mdl, pages * PAGE_SIZE, &ndktools::Waiter::OnRequest,
                                                     nullptr, lam, &size, &fbo),
                    "NdkBuildLAM");
    NDK_MR* fast = nullptr;
    ndktools::Check(s.pd->Dispatch->NdkCreateMr(s.pd, TRUE, &ndktools::Waiter::OnCreate, nullptr, &fast),
                    "NdkCreateMr");
    ndktools::Check(
        fast->Dispatch->NdkInitializeFastRegisterMr(fast, pages, TRUE, &ndktools::Waiter::OnRequest, nullptr),
        "NdkInitializeFastRegisterMr");
    for (auto _ : state) {
        s.qp->Dispatch->NdkFastRegister(s.qp, nullptr, fast, pages, lam->AdapterPageArray, 0, pages * PAGE_SIZE,
                                        reinterpret_cast<PVOID>(0x700000000000ull), NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
        ndktools::Pair::Poll(s);
        s.qp->Dispatch->NdkInvalidate(s.qp, nullptr, &fast->Header, 0);
        ndktools::Pair::Poll(s);
    }
    fast->Dispatch->NdkCloseMr(&fast->Header, nullptr, nullptr);
    s.adapter->Dispatch->NdkReleaseLAM(s.adapter, lam);
}

BENCHMARK(BM_Memcpy)->Apply(Sizes);
BENCHMARK(BM_RdmaWrite)->Apply(Sizes);
BENCHMARK(BM_RdmaRead)->Apply(Sizes);
BENCHMARK(BM_Write64MessageRate);
BENCHMARK(BM_WriteLatency);
BENCHMARK(BM_FastRegisterInvalidate)->Arg(1)->Arg(4)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
