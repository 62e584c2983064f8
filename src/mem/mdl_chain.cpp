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

    mm::LockedPageRegistry::Reader registry(mm::LockedPageRegistry::Instance());
    size_t run_start = 0;  // first index of the current PFN run, validated as one range
    auto close_run = [&](size_t end) {
        if (end == run_start) return true;
        PFN_NUMBER first = reinterpret_cast<uintptr_t>(pages[run_start]) >> PAGE_SHIFT;
        bool ok = registry.IsLocked(first, end - run_start);
        run_start = end;
        return ok;
    };

    for (const MDL* mdl = chain; remaining > 0; mdl = mdl->Next) {
        if (mdl == nullptr) return Invalid("Length exceeds the bytes of the chain (MR-07)");
        if (mdl->ByteCount == 0) continue;
        const uint64_t mdl_va = reinterpret_cast<uint64_t>(MmGetMdlVirtualAddress(mdl));
        if (mdl_va != cursor) return Invalid("not virtually contiguous: hole or overlap between MDLs (MR-08)");
        const size_t take = mdl->ByteCount < remaining ? mdl->ByteCount : remaining;
        const ULONG span = ADDRESS_AND_SIZE_TO_SPAN_PAGES(mdl_va, take);
        const PFN_NUMBER* pfns = MmGetMdlPfnArray(mdl);
        ULONG j = 0;
        if (filled > 0 && BYTE_OFFSET(mdl_va) != 0) {
            // The chain splits inside a page: this MDL's first page is the previous MDL's last page.
            if (pfns[0] != previous_pfn) return Invalid("two MDLs give different PFNs for one virtual page");
            j = 1;
        }
        for (; j < span; ++j) {
            const PFN_NUMBER pfn = pfns[j];
            if (pfn > (UINTPTR_MAX >> PAGE_SHIFT)) return Invalid("a PFN is beyond the address space");
            if (filled >= total_pages) return Invalid("MDL spans more pages than its range");
            if (filled > run_start && pfn != previous_pfn + 1 && !close_run(filled))
                return Invalid("a PFN names a page that is not locked");
            pages[filled++] = HostPage(pfn);
            previous_pfn = pfn;
        }
        cursor += take;
        remaining -= take;
    }
    if (filled != total_pages) return Invalid("page count mismatch");
    if (!close_run(filled)) return Invalid("a PFN names a page that is not locked");

    out.base_va = base;
    out.first_byte_offset = BYTE_OFFSET(base);
    out.page_count = total_pages;
    return STATUS_SUCCESS;
}

}  // namespace softndk::mem
