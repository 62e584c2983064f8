// Special pool (issue 19 §3). Layout of one block:
//   [ data pages: pattern … block … pattern ][ guard page, PROT_NONE ]
// A block under a page ends at the last data page's end, rounded to 16 bytes (Windows' special pool verifies
// the end the same way); a larger one starts at the first page. The pattern around the block is checked when it
// is freed (SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION, 0xC1). A freed block's data pages are unlocked, protected
// and kept, with the backtraces of its allocation and free, until kQuarantineBytes of freed address space or
// kQuarantineBlocks blocks are newer: an access in that time is a deterministic SIGSEGV, which the reporter turns
// into DRIVER_PAGE_FAULT_IN_FREED_SPECIAL_POOL (0xD5); one into a guard page is
// PAGE_FAULT_BEYOND_END_OF_ALLOCATION (0xCD). Faults elsewhere go to the handler that was there before.
#include "mm/special_pool.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <sched.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "common/last_error.h"
#include "mm/locked_page_registry.h"

namespace softndk::mm::special_pool {
namespace {

constexpr size_t kFrames = 16;
constexpr size_t kQuarantineBytes = size_t{1} << 30;  // address space only: freed pages hold no memory
// Freed blocks kept: each holds one kernel mapping (a live block two), within vm.max_map_count (65530 by
// default) with room for the rest of the process.
constexpr size_t kQuarantineBlocks = 16384;
constexpr uint8_t kPattern = 0xA5;
constexpr ULONG kFreedSpecialPool = 0xD5, kBeyondEnd = 0xCD, kCorruption = 0xC1;

struct Trace {
    void* frames[kFrames];
    int count = 0;
    void Capture() { count = backtrace(frames, kFrames); }
};

struct Block {
    char* mapping;      // data pages, then the guard page
    size_t data_bytes;  // the data pages
    char* block;
    size_t bytes;
    ULONG tag;
    bool non_paged;
    Trace allocated;
    Trace freed;
};

struct State {
    std::mutex mutex;
    std::map<char*, Block> live;   // by mapping
    std::map<char*, Block> freed;  // by mapping
    std::deque<char*> freed_order;
    size_t freed_bytes = 0;
    bool budget_spent = false;
};
State& Pool() {
    static auto* state = new State();  // never destroyed: blocks may be freed during exit
    return *state;
}

std::atomic<bool> g_enabled{false};
struct sigaction g_previous_segv {};
std::atomic<bool> g_installed{false};

void FormatTag(ULONG tag, char out[5]) {
    for (int i = 0; i < 4; ++i) {
        const char c = static_cast<char>((tag >> (8 * i)) & 0xff);
        out[i] = (c >= 0x20 && c < 0x7f) ? c : '.';
    }
    out[4] = '\0';
}

// The block's entry whose mapping holds `address` (under the mutex).
const Block* Holding(const std::map<char*, Block>& blocks, const char* address) {
    auto it = blocks.upper_bound(const_cast<char*>(address));
    if (it == blocks.begin()) return nullptr;
    --it;
    const Block& block = it->second;
    return address < block.mapping + block.data_bytes + PAGE_SIZE ? &block : nullptr;
}

void PrintTrace(const char* what, const Trace& trace) {
    std::fprintf(stderr, "    %s:\n", what);
    std::fflush(stderr);
    if (trace.count > 1) backtrace_symbols_fd(const_cast<void* const*>(trace.frames) + 1, trace.count - 1, 2);
}

[[noreturn]] void BugCheck(const char* rule, ULONG code, const Block& block, const char* address, const char* what,
                           const Trace* fault) {
    char tag[5];
    FormatTag(block.tag, tag);
    std::fprintf(stderr,
                 "\n*** SOFTNDK VERIFIER: %s (bug check 0x%X)\n    address: %p, %s\n    block:   %p, %zu bytes, "
                 "pool tag '%s', %s pool\n",
                 rule, code, static_cast<const void*>(address), what, static_cast<const void*>(block.block),
                 block.bytes, tag, block.non_paged ? "non-paged" : "paged");
    PrintTrace("allocated at", block.allocated);
    if (block.freed.count > 0) PrintTrace("freed at", block.freed);
    if (fault != nullptr) PrintTrace("the access", *fault);
    std::fprintf(stderr, "*** SOFTNDK VERIFIER: stopping like a bug check\n");
    std::fflush(stderr);
    signal(SIGABRT, SIG_DFL);
    std::abort();
}

void OnSegv(int signal_number, siginfo_t* info, void* context) {
    const char* address = static_cast<const char*>(info->si_addr);
    State& pool = Pool();
    // The faulting thread does not hold the mutex while touching a block (unless special pool itself faulted):
    // another thread may, briefly. Bounded: about a second of yields.
    bool locked = false;
    for (int tries = 0; tries < 200000 && !locked; ++tries) {
        locked = pool.mutex.try_lock();
        if (!locked) sched_yield();
    }
    if (locked) {
#if defined(__x86_64__)
        const auto* uc = static_cast<const ucontext_t*>(context);
        const bool write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
        (void)context;
        const bool write = false;  // the page-fault error code is x86-64's; elsewhere an access is called a read
#endif
        char what[160];
        Trace fault;
        fault.Capture();
        if (const Block* block = Holding(pool.freed, address)) {
            std::snprintf(what, sizeof(what), "a %s at offset %td of a block freed earlier", write ? "write" : "read",
                          address - block->block);
            BugCheck("DRIVER_PAGE_FAULT_IN_FREED_SPECIAL_POOL", kFreedSpecialPool, *block, address, what, &fault);
        }
        if (const Block* block = Holding(pool.live, address);
            block != nullptr && address >= block->mapping + block->data_bytes) {
            std::snprintf(what, sizeof(what), "a %s %td bytes past the block's end", write ? "write" : "read",
                          address - (block->block + block->bytes));
            BugCheck("PAGE_FAULT_BEYOND_END_OF_ALLOCATION", kBeyondEnd, *block, address, what, &fault);
        }
        pool.mutex.unlock();
    }
    // Not ours: the handler that was there before (ASan's, for one) gets it; with none, the default ends the
    // process when the access happens again.
    if ((g_previous_segv.sa_flags & SA_SIGINFO) != 0 && g_previous_segv.sa_sigaction != nullptr) {
        g_previous_segv.sa_sigaction(signal_number, info, context);
        return;
    }
    if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
        g_previous_segv.sa_handler(signal_number);
        return;
    }
    signal(signal_number, SIG_DFL);
}

void Install() {
    if (g_installed.exchange(true)) return;
    struct sigaction action {};
    action.sa_sigaction = &OnSegv;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
}

// Under the mutex: the oldest freed blocks leave quarantine and their address space goes back.
void TrimQuarantine(State& pool) {
    while (!pool.freed_order.empty() &&
           (pool.freed_bytes > kQuarantineBytes || pool.freed_order.size() > kQuarantineBlocks)) {
        auto it = pool.freed.find(pool.freed_order.front());
        pool.freed_order.pop_front();
        if (it == pool.freed.end()) continue;
        pool.freed_bytes -= it->second.data_bytes + PAGE_SIZE;
        munmap(it->second.mapping, it->second.data_bytes + PAGE_SIZE);
        pool.freed.erase(it);
    }
}

bool PatternIntact(const Block& block) {
    for (const char* byte = block.mapping; byte < block.block; ++byte)
        if (static_cast<uint8_t>(*byte) != kPattern) return false;
    for (const char* byte = block.block + block.bytes; byte < block.mapping + block.data_bytes; ++byte)
        if (static_cast<uint8_t>(*byte) != kPattern) return false;
    return true;
}

}  // namespace

bool Enabled() {
    return g_enabled.load(std::memory_order_relaxed);
}

void SetEnabled(bool enabled) {
    if (enabled) Install();
    g_enabled.store(enabled, std::memory_order_relaxed);
}

void* Allocate(size_t bytes, bool non_paged, ULONG tag) {
    if (!Enabled() || bytes == 0) return nullptr;
    const size_t data_bytes = ROUND_TO_PAGES(bytes);
    if (data_bytes < bytes) return nullptr;
    State& pool = Pool();
    if (non_paged && bytes < PAGE_SIZE) {
        std::lock_guard lock(pool.mutex);
        if (pool.budget_spent) return nullptr;
    }
    auto* mapping = static_cast<char*>(
        mmap(nullptr, data_bytes + PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (mapping == MAP_FAILED) return nullptr;
    if (mprotect(mapping + data_bytes, PAGE_SIZE, PROT_NONE) != 0) {  // no guard page: the normal pool serves it
        munmap(mapping, data_bytes + PAGE_SIZE);
        return nullptr;
    }
    if (non_paged) {
        const auto first = reinterpret_cast<uintptr_t>(mapping) >> PAGE_SHIFT;
        if (madvise(mapping, data_bytes, MADV_POPULATE_WRITE) != 0 ||
            !NT_SUCCESS(LockedPageRegistry::Instance().Lock(first, data_bytes >> PAGE_SHIFT))) {
            munmap(mapping, data_bytes + PAGE_SIZE);
            if (bytes >= PAGE_SIZE) return nullptr;  // the normal pool tries, and reports the failure
            std::lock_guard lock(pool.mutex);
            if (!pool.budget_spent)
                std::fprintf(stderr,
                             "softndk: special pool: locked memory is spent (%s); further small non-paged blocks "
                             "come from the normal pool, as Windows does when special pool is full\n",
                             SoftNdkGetLastErrorText());
            pool.budget_spent = true;
            return nullptr;
        }
    }
    Block block{};
    block.mapping = mapping;
    block.data_bytes = data_bytes;
    block.block = bytes < PAGE_SIZE ? mapping + data_bytes - ((bytes + 15) & ~size_t{15}) : mapping;
    block.bytes = bytes;
    block.tag = tag;
    block.non_paged = non_paged;
    block.allocated.Capture();
    std::memset(mapping, kPattern, data_bytes);
    std::memset(block.block, 0, bytes);  // zeroed, as ExAllocatePool2 returns it
    std::lock_guard lock(pool.mutex);
    pool.live.emplace(mapping, block);
    return block.block;
}

bool Free(void* pointer) {
    if (pointer == nullptr) return false;
    auto* address = static_cast<char*>(pointer);
    State& pool = Pool();
    Block block;
    bool freed_before = false;
    {
        std::lock_guard lock(pool.mutex);
        if (const Block* holding = Holding(pool.live, address); holding != nullptr && holding->block == address) {
            block = *holding;
            pool.live.erase(block.mapping);
        } else if (const Block* freed = Holding(pool.freed, address); freed != nullptr && freed->block == address) {
            block = *freed;  // freed twice: the report names the first free
            freed_before = true;
        } else {
            return false;  // not a block special pool handed out
        }
    }
    if (freed_before) {
        Trace now;
        now.Capture();
        BugCheck("BAD_POOL_CALLER", 0xC2, block, address, "freed a second time (the first free below)", &now);
    }
    if (!PatternIntact(block)) {
        Trace now;
        now.Capture();
        BugCheck("SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION", kCorruption, block, address,
                 "bytes around the block were written (an overrun within its last 16 bytes or an underrun)", &now);
    }
    block.freed.Capture();
    {
        std::lock_guard lock(pool.mutex);  // from now on a fault in it is a freed-pool access
        pool.freed.emplace(block.mapping, block);
    }
    if (block.non_paged)
        LockedPageRegistry::Instance().Unlock(reinterpret_cast<uintptr_t>(block.mapping) >> PAGE_SHIFT,
                                              block.data_bytes >> PAGE_SHIFT);
    madvise(block.mapping, block.data_bytes, MADV_DONTNEED);
    const bool protected_now = mprotect(block.mapping, block.data_bytes, PROT_NONE) == 0;
    std::lock_guard lock(pool.mutex);
    if (!protected_now) {  // out of mappings: no quarantine for this one, but never a writable freed block
        pool.freed.erase(block.mapping);
        munmap(block.mapping, block.data_bytes + PAGE_SIZE);
        return true;
    }
    pool.freed_order.push_back(block.mapping);
    pool.freed_bytes += block.data_bytes + PAGE_SIZE;
    TrimQuarantine(pool);
    return true;
}

size_t QuarantinedBlocks() {
    State& pool = Pool();
    std::lock_guard lock(pool.mutex);
    return pool.freed.size();
}

}  // namespace softndk::mm::special_pool

extern "C" VOID SoftNdkSetSpecialPool(BOOLEAN Enable) {
    softndk::mm::special_pool::SetEnabled(Enable != FALSE);
}
