// What a token names. The access check reads only this.
#pragma once

#include <cstdint>
#include <vector>

#include <softndk/ndkpi.h>

namespace softndk::mem {

class LogicalAddressSpace;

// Internal access rights, decoded once from the NDK flag masks (AMB-01: whole-mask compares).
enum AccessRight : uint32_t {
    kRightLocalRead = 1u << 0,
    kRightLocalWrite = 1u << 1,
    kRightRemoteRead = 1u << 2,
    kRightRemoteWrite = 1u << 3,
    kRightReadSink = 1u << 4,
};

enum class TargetKind : uint8_t { kRegion, kWindow, kPrivileged };

// What NdkInvalidate and send-and-invalidate act on (TOK-10 … TOK-16): fast MRs and MWs.
class Invalidatable {
public:
    // Invalidates the registration or binding named by `token`; STATUS_SUCCESS or why it cannot.
    virtual NTSTATUS InvalidateToken(uint32_t token) = 0;

protected:
    ~Invalidatable() = default;
};

struct TokenTarget {
    TargetKind kind = TargetKind::kRegion;
    const void* owner = nullptr;  // the PD; the owner check compares it
    uint64_t base_va = 0;         // first byte the token covers
    uint64_t length = 0;
    uint32_t rights = 0;
    uint64_t page_offset = 0;                      // offset of base_va from the start of pages[0]
    const std::vector<uint8_t*>* pages = nullptr;  // kRegion / kWindow: host page addresses
    const LogicalAddressSpace* logical = nullptr;  // kPrivileged
    Invalidatable* invalidatable = nullptr;        // fast MRs and MWs only
};

}  // namespace softndk::mem
