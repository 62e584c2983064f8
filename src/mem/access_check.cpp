#include "mem/access_check.h"

#include <cstdio>

#include "common/last_error.h"

namespace softndk::mem {

namespace {

// Issue 19 §2: with rotating fast-register keys (the opt-in check), a token the MR answered to before its last
// NdkFastRegister is named, with the MR's slot and cycle, on stderr and in the last-error text.
void ReportRotatedAway(const TokenTable& table, uint32_t token) {
    uint32_t cycle = 0;
    if (!table.RotatedAway(token, &cycle)) return;
    char text[400];
    std::snprintf(text, sizeof(text),
                  "stale token 0x%08X: the fast-register MR of token slot %u answered to it before its registration "
                  "#%u; its keys change on every NdkFastRegister (RotateFastRegisterKeys, SOFTNDK_ROTATE_FR_KEYS=1). "
                  "Read NdkGetRemoteTokenFromMr / NdkGetLocalTokenFromMr again after each NdkFastRegister",
                  token, token >> TokenTable::kKeyBits, cycle);
    SetLastErrorText("%s", text);
    std::fprintf(stderr, "softndk: %s\n", text);
}

AccessError CheckGranted(const TokenTarget& target, const AccessRequest& request) {
    if (target.owner != request.owner) return AccessError::kWrongOwner;
    if ((target.rights & request.rights) != request.rights) return AccessError::kNoRights;
    if (target.kind == TargetKind::kPrivileged) {
        // LAM-16: every page of the range must be mapped by a live LAM.
        const uint64_t end = request.address + request.length;
        if (end < request.address) return AccessError::kOutOfBounds;
        for (uint64_t page = request.address & ~uint64_t{PAGE_SIZE - 1}; page < end; page += PAGE_SIZE)
            if (target.logical->Resolve(page) == nullptr) return AccessError::kOutOfBounds;
        return AccessError::kNone;
    }
    // Overflow-safe: address >= base, length <= size, and address - base <= size - length.
    if (request.address < target.base_va || request.length > target.length ||
        request.address - target.base_va > target.length - request.length)
        return AccessError::kOutOfBounds;
    return AccessError::kNone;
}

}  // namespace

AccessError CheckAccess(TokenTable& table, const AccessRequest& request, TokenRef* grant) {
    grant->Reset();
    // valid: one atomic lookup + reference, taken straight into the caller's grant
    if (!table.Acquire(request.token, request.kind, grant)) {
        ReportRotatedAway(table, request.token);
        return AccessError::kInvalidToken;
    }
    const AccessError error = CheckGranted(*grant->target(), request);  // owner, rights, bounds
    if (error != AccessError::kNone) grant->Reset();
    return error;
}

NTSTATUS LocalAccessStatus(AccessError error) {
    switch (error) {
        case AccessError::kNone:
            return STATUS_SUCCESS;
        case AccessError::kInvalidToken:
            return STATUS_INVALID_HANDLE;
        case AccessError::kWrongOwner:
            return STATUS_ACCESS_DENIED;
        case AccessError::kNoRights:
            return STATUS_ACCESS_VIOLATION;
        case AccessError::kOutOfBounds:
            return STATUS_INVALID_PARAMETER;
    }
    return STATUS_INTERNAL_ERROR;
}

NTSTATUS RemoteAccessStatus(AccessError error) {
    return error == AccessError::kOutOfBounds ? STATUS_REMOTE_RESOURCES : LocalAccessStatus(error);
}

uint8_t TerminateCode(AccessError error) {
    switch (error) {
        case AccessError::kInvalidToken:
            return 0x00;  // Invalid STag
        case AccessError::kOutOfBounds:
            return 0x01;  // Base or bounds violation
        case AccessError::kNoRights:
            return 0x02;  // Access rights violation
        case AccessError::kWrongOwner:
            return 0x03;  // STag not associated with RDMAP Stream
        case AccessError::kNone:
            break;
    }
    return 0xFF;
}

const char* AccessErrorName(AccessError error) {
    switch (error) {
        case AccessError::kNone:
            return "none";
        case AccessError::kInvalidToken:
            return "invalid token";
        case AccessError::kWrongOwner:
            return "token of another protection domain";
        case AccessError::kNoRights:
            return "access rights violation";
        case AccessError::kOutOfBounds:
            return "base or bounds violation";
    }
    return "?";
}

}  // namespace softndk::mem
