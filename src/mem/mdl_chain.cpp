#include "mem/mdl_chain.h"

#include "common/last_error.h"
#include "mm/locked_page_registry.h"

namespace softndk::mem {
namespace {

NTSTATUS Invalid(const char* why) {
    SetLastErrorText("MDL chain: %s", why);
    return STATUS_INVALID_PARAMETER;
}

uint8_t* HostPage(PFN_NUMBER pfn) {
    return reinterpret_cast<uint8_t*>(pfn << PAGE_SHIFT);
}

}  // namespace

NTSTATUS ResolveMdlChain(const MDL* chain, size_t length, std::vector<uint8_t*>& pages, ResolvedChain& out) {
    if (chain == nullptr) return Invalid("NULL MDL");
    if (length == 0) return Invalid("zero length");
    const uint64_t base = reinterpret_cast<uint64_t>(MmGetMdlVirtualAddress(chain));
    if (base + length < base) return Invalid("base + length wraps around 2^64");
    if (base == 0) return Invalid("zero-based virtual address (MR-11)");

    const size_t total_pages = ADDRESS_AND_SIZE_TO_SPAN_PAGES(base, length);
    pages.resize(total_pages);
    size_t filled = 0;
    uint64_t cursor = base;
    size_t remaining = length;
    PFN_NUMBER previous_pfn = 0;

    constexpr PFN_NUMBER kMaxPfn = UINTPTR_MAX >> PAGE_SHIFT;
    mm::LockedPageRegistry::Reader registry(mm::LockedPageRegistry::Instance());
    // Validates pfns[0, count) as runs of consecutive PFNs; each run must be locked.
    auto validate_runs = [&](const PFN_NUMBER* pfns, size_t count) {
        size_t run_start = 0;
        for (size_t k = 1; k <= count; ++k) {
            if (k < count && pfns[k] == pfns[k - 1] + 1) continue;
            if (pfns[run_start] > kMaxPfn || pfns[k - 1] > kMaxPfn || pfns[k - 1] < pfns[run_start] ||
                !registry.IsLocked(pfns[run_start], k - run_start))
                return false;
            run_start = k;
        }
        return true;
    };

    for (const MDL* mdl = chain; remaining > 0; mdl = mdl->Next) {
        if (mdl == nullptr) return Invalid("Length exceeds the bytes of the chain (MR-07)");
        if (mdl->ByteCount == 0) continue;
        const uint64_t mdl_va = reinterpret_cast<uint64_t>(MmGetMdlVirtualAddress(mdl));
        if (mdl_va != cursor) return Invalid("not virtually contiguous: hole or overlap between MDLs (MR-08)");
        const size_t take = mdl->ByteCount < remaining ? mdl->ByteCount : remaining;
        const ULONG span = ADDRESS_AND_SIZE_TO_SPAN_PAGES(mdl_va, take);
        const PFN_NUMBER* pfns = MmGetMdlPfnArray(mdl);
        size_t skip = 0;
        if (filled > 0 && BYTE_OFFSET(mdl_va) != 0) {
            // The chain splits inside a page: this MDL's first page is the previous MDL's last page.
            if (pfns[0] != previous_pfn) return Invalid("two MDLs give different PFNs for one virtual page");
            skip = 1;
        }
        const PFN_NUMBER* source = pfns + skip;
        const size_t count = span - skip;
        if (count > total_pages - filled) return Invalid("MDL spans more pages than its range");
        if (count > 0) {
            // One pass the compiler vectorises: write the page table and check for a single PFN run.
            uint8_t** destination = pages.data() + filled;
            const PFN_NUMBER first = source[0];
            PFN_NUMBER mismatch = 0;
            for (size_t k = 0; k < count; ++k) {
                const PFN_NUMBER pfn = source[k];
                destination[k] = HostPage(pfn);
                mismatch |= pfn ^ (first + k);
            }
            const bool valid = mismatch == 0 ? first <= kMaxPfn - (count - 1) && registry.IsLocked(first, count)
                                             : validate_runs(source, count);
            if (!valid) return Invalid("a PFN names a page that is not locked");
            previous_pfn = source[count - 1];
            filled += count;
        }
        cursor += take;
        remaining -= take;
    }
    if (filled != total_pages) return Invalid("page count mismatch");

    out.base_va = base;
    out.first_byte_offset = BYTE_OFFSET(base);
    out.page_count = total_pages;
    return STATUS_SUCCESS;
}

}  // namespace softndk::mem
