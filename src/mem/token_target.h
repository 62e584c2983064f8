// What a token names. The access check (issue 3) reads only this.
#pragma once

#include <cstdint>
#include <vector>

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

struct TokenTarget {
    TargetKind kind = TargetKind::kRegion;
    const void* owner = nullptr;  // the PD; the owner check compares it
    uint64_t base_va = 0;         // first byte the token covers
    uint64_t length = 0;
    uint32_t rights = 0;
    uint32_t first_byte_offset = 0;                // of base_va within pages[0]
    const std::vector<uint8_t*>* pages = nullptr;  // kRegion / kWindow: host page addresses
    const LogicalAddressSpace* logical = nullptr;  // kPrivileged
};

}  // namespace softndk::mem
