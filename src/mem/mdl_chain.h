// Turns the first `length` bytes of an MDL chain into a page table of host page addresses (docs/architecture.md,
// "Memory"). Shared by NdkRegisterMr and NdkBuildLam.
#pragma once

#include <cstdint>
#include <vector>

#include <softndk/wdm.h>

namespace softndk::mem {

struct ResolvedChain {
    uint64_t base_va = 0;  // MmGetMdlVirtualAddress of the first MDL: an index only (MR-09, LAM-04)
    uint32_t first_byte_offset = 0;
    size_t page_count = 0;
};

// MR-06/07/08, LAM-01/02: the chain must be virtually contiguous from the first MDL's address for `length`
// bytes, and every PFN must name a locked page. Fills `pages` (capacity is reused) with host page addresses
// taken from the PFNs, never from the MDL's virtual address. Returns STATUS_INVALID_PARAMETER (with the
// last-error text set) for a hole, an overlap, a chain shorter than `length`, a zero or wrapping range, or a
// PFN of a page nobody locked; no page is ever dereferenced.
NTSTATUS ResolveMdlChain(const MDL* chain, size_t length, std::vector<uint8_t*>& pages, ResolvedChain& out);

}  // namespace softndk::mem
