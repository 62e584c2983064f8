// The one access check (docs/architecture.md, "Memory"). Every path uses it: local SGEs, inbound writes, read sources,
// read sinks, send placement, bind and invalidation. Order: valid -> owner -> rights -> bounds; the bounds check cannot
// overflow. Each error maps to one NTSTATUS per side and to one RFC 5040 terminate code.
#pragma once

#include <cstdint>
#include <cstring>

#include <softndk/wdm.h>

#include "mem/logical_address_space.h"
#include "mem/token_table.h"
#include "mem/token_target.h"

namespace softndk::mem {

enum class AccessError : uint8_t {
    kNone,
    kInvalidToken,  // unknown index, stale key, invalidated, deregistered, wrong token kind
    kWrongOwner,    // the token belongs to another PD
    kNoRights,      // the registration does not grant the access
    kOutOfBounds,   // [address, address + length) is not inside the registration
};

struct AccessRequest {
    uint32_t token;
    TokenKind kind;
    const void* owner;  // the PD the access is made for
    uint64_t address;   // virtual address, or logical address for the privileged token
    uint64_t length;
    uint32_t rights;  // AccessRight bits all required
};

// What a refused access was, for its explanation (issue 33 §4.1). Filled only on a refusal; no initialisers,
// so that the data path's success case pays nothing for declaring one.
struct AccessRefusal {
    AccessError error;
    TokenDiagnosis diagnosis;  // kInvalidToken: why the table refused the token
    const void* token_owner;   // kWrongOwner: the PD the token belongs to
    uint64_t base;             // kOutOfBounds: the registration's range
    uint64_t length;
    uint32_t granted;  // kNoRights: the registration's rights
};

// On success `*grant` holds a reference on the target for as long as the access runs. On a refusal
// `*refusal`, if given, says why (the access check's order and results are the same either way).
AccessError CheckAccess(TokenTable& table, const AccessRequest& request, TokenRef* grant,
                        AccessRefusal* refusal = nullptr);
// One line naming the token (hex), whether it was used as a local or remote token, the PD it was looked up for,
// why it was refused and the remedy: "token 0x… (local) for PD 0x…: <reason>; <remedy>".
void DescribeRefusal(const AccessRequest& request, const AccessRefusal& refusal, char* out, size_t size);

// Status of a request whose own (local) buffer failed the check.
NTSTATUS LocalAccessStatus(AccessError error);
// Status of a request that the peer refused (reported to the initiator, QP-16 / AMB-24).
NTSTATUS RemoteAccessStatus(AccessError error);
// RFC 5040 §7.2: RDMAP remote protection error codes (layer 0, error type 1).
uint8_t TerminateCode(AccessError error);
const char* AccessErrorName(AccessError error);

// Calls fn(host_pointer, bytes) for each host-contiguous piece of [address, address + length) of a target that
// passed CheckAccess for that range.
template <class Fn>
void ForEachPiece(const TokenTarget& target, uint64_t address, uint64_t length, Fn&& fn) {
    if (length == 0) return;
    if (target.kind == TargetKind::kPrivileged) {
        while (length > 0) {
            const uint64_t in_page = PAGE_SIZE - (address & (PAGE_SIZE - 1));
            const uint64_t bytes = in_page < length ? in_page : length;
            fn(target.logical->Resolve(address), bytes);
            address += bytes;
            length -= bytes;
        }
        return;
    }
    const std::vector<uint8_t*>& pages = *target.pages;
    uint64_t offset = address - target.base_va + target.page_offset;
    size_t page = offset >> PAGE_SHIFT;
    uint8_t* start = pages[page] + (offset & (PAGE_SIZE - 1));
    uint64_t run = PAGE_SIZE - (offset & (PAGE_SIZE - 1));
    while (run < length && pages[page + 1] == pages[page] + PAGE_SIZE) {  // coalesce contiguous host pages
        ++page;
        run += PAGE_SIZE;
    }
    while (true) {
        const uint64_t bytes = run < length ? run : length;
        fn(start, bytes);
        length -= bytes;
        if (length == 0) return;
        start = pages[++page];
        run = PAGE_SIZE;
        while (run < length && pages[page + 1] == pages[page] + PAGE_SIZE) {
            ++page;
            run += PAGE_SIZE;
        }
    }
}

}  // namespace softndk::mem
