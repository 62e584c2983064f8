// Special pool (issue 19 §3), as Driver Verifier's: each allocation on its own pages with a guard page after,
// a block under a page placed at the page's end; a freed block's pages are protected and kept out of reuse for
// a while. An access to freed pool or past a block's end stops the process with a Driver-Verifier-style report:
// the bug check, the pool tag, the address, and the backtraces of the allocation and the free.
#pragma once

#include <cstddef>

#include <softndk/wdm.h>

namespace softndk::mm::special_pool {

bool Enabled();
void SetEnabled(bool enabled);  // installs the SIGSEGV reporter the first time

// A block from special pool, or nullptr when special pool does not serve it (off, or its locked-memory budget is
// spent: then the normal pool serves it, as Windows does when special pool is full).
void* Allocate(size_t bytes, bool non_paged, ULONG tag);

// True when `block` came from special pool: it is checked for writes around it, unlocked, protected and kept in
// quarantine. False: not a special-pool block, the caller frees it.
bool Free(void* block);

// Freed special-pool ranges still kept out of reuse (for tests).
size_t QuarantinedBlocks();

}  // namespace softndk::mm::special_pool
