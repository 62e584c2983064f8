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

AccessError CheckAccess(TokenTable& table, const AccessRequest& request, TokenRef* grant, AccessRefusal* refusal) {
    grant->Reset();
    // valid: one atomic lookup + reference, taken straight into the caller's grant
    if (!table.Acquire(request.token, request.kind, grant)) {
        ReportRotatedAway(table, request.token);
        if (refusal != nullptr)
            *refusal = {AccessError::kInvalidToken, table.Diagnose(request.token, request.kind), nullptr, 0, 0, 0};
        return AccessError::kInvalidToken;
    }
    const AccessError error = CheckGranted(*grant->target(), request);  // owner, rights, bounds
    if (error != AccessError::kNone) {
        if (refusal != nullptr) {
            const TokenTarget& target = *grant->target();
            *refusal = {error, {}, target.owner, target.base_va, target.length, target.rights};
        }
        grant->Reset();
    }
    return error;
}

namespace {

const char* UseName(SlotUse use) {
    switch (use) {
        case SlotUse::kRegion:
            return "MR";
        case SlotUse::kFastRegion:
            return "fast-register MR";
        case SlotUse::kWindow:
            return "memory window";
        case SlotUse::kPrivileged:
            return "PD (privileged token)";
        case SlotUse::kNone:
            break;
    }
    return "MR or MW";
}

// The AccessRight bits by name, "remote write+local read", or "none".
void RightsText(uint32_t rights, char* out, size_t size) {
    static constexpr struct {
        uint32_t bit;
        const char* name;
    } kNames[] = {{kRightLocalRead, "local read"},
                  {kRightLocalWrite, "local write"},
                  {kRightRemoteRead, "remote read"},
                  {kRightRemoteWrite, "remote write"},
                  {kRightReadSink, "read sink"}};
    std::snprintf(out, size, "none");
    size_t used = 0;
    for (const auto& name : kNames) {
        if ((rights & name.bit) == 0 || used >= size) continue;
        const int n = std::snprintf(out + used, size - used, "%s%s", used == 0 ? "" : "+", name.name);
        if (n > 0) used += static_cast<size_t>(n);
    }
}

}  // namespace

void DescribeRefusal(const AccessRequest& request, const AccessRefusal& refusal, char* out, size_t size) {
    const bool local = request.kind == TokenKind::kLocal;
    const int head = std::snprintf(out, size, "token 0x%08X (%s) for PD %p: ", request.token,
                                   local ? "local" : "remote", request.owner);
    if (head < 0 || static_cast<size_t>(head) >= size) return;
    out += head;
    size -= static_cast<size_t>(head);
    const TokenDiagnosis& why = refusal.diagnosis;
    const uint32_t slot = request.token >> TokenTable::kKeyBits;
    switch (refusal.error) {
        case AccessError::kNone:
            std::snprintf(out, size, "not refused");
            return;
        case AccessError::kWrongOwner:  // RFC 5040 §7.2 code 3: STag not associated with the stream
            std::snprintf(out, size,
                          "token of another protection domain: it belongs to PD %p; use a token of an MR or MW "
                          "of the QP's own PD",
                          refusal.token_owner);
            return;
        case AccessError::kNoRights: {
            char granted[96];
            char needed[96];
            RightsText(refusal.granted, granted, sizeof(granted));
            RightsText(request.rights, needed, sizeof(needed));
            std::snprintf(out, size,
                          "access rights violation: the registration grants %s, the access needs %s; register or "
                          "bind with the NDK_MR_FLAG_ALLOW_* / NDK_OP_FLAG_ALLOW_* flags it needs",
                          granted, needed);
            return;
        }
        case AccessError::kOutOfBounds:
            std::snprintf(
                out, size,
                "base or bounds violation: [0x%llx, +%llu) is not inside the registration [0x%llx, "
                "+%llu); keep the address and length inside it",
                static_cast<unsigned long long>(request.address), static_cast<unsigned long long>(request.length),
                static_cast<unsigned long long>(refusal.base), static_cast<unsigned long long>(refusal.length));
            return;
        case AccessError::kInvalidToken:
            break;
    }
    switch (why.reason) {
        case TokenRefusal::kUnknown:
            std::snprintf(out, size,
                          "invalid token: unknown, no token was ever issued at slot %u; pass a token "
                          "read from NdkGetLocalTokenFromMr / NdkGetRemoteTokenFromMr / NdkGetRemoteTokenFromMw",
                          slot);
            return;
        case TokenRefusal::kWrongKind:
            if (!local && why.use == SlotUse::kWindow) break;  // a window has no local token to confuse
            std::snprintf(out, size, "invalid token: %s; use the %s token (%s)",
                          local ? "the remote token of an MR or MW used as a local token"
                                : "the local token of an MR used as a remote token",
                          local ? "local" : "remote",
                          local ? "NdkGetLocalTokenFromMr" : "NdkGetRemoteTokenFromMr / NdkGetRemoteTokenFromMw");
            return;
        case TokenRefusal::kStaleKey:
            if (why.now == 0)
                std::snprintf(out, size,
                              "invalid token: stale key, slot %u holds no registration now (its MR or MW was "
                              "closed, and the key is not its last one); read the token of a live registration",
                              slot);
            else
                std::snprintf(out, size,
                              "invalid token: stale key, slot %u answers to 0x%08X now (the token is from before "
                              "the %s %s, or the slot was reused); read the token again",
                              slot, why.now, UseName(why.use),
                              why.use == SlotUse::kWindow ? "was bound again" : "was registered again");
            return;
        case TokenRefusal::kRotatedAway:
            std::snprintf(out, size,
                          "invalid token: stale key of a fast-register MR from before its registration #%u (its keys "
                          "change on every NdkFastRegister); read the token again after each NdkFastRegister",
                          why.cycle);
            return;
        case TokenRefusal::kClosed:
            std::snprintf(out, size,
                          "invalid token: its %s was deregistered or closed; register it again and use the new token",
                          UseName(why.use));
            return;
        case TokenRefusal::kNotRegistered:
            std::snprintf(out, size,
                          "invalid token: its fast-register MR is initialised but not registered; NdkFastRegister "
                          "it before use");
            return;
        case TokenRefusal::kInvalidated:
            std::snprintf(out, size,
                          "invalid token: its fast-register MR was invalidated (NdkInvalidate or a "
                          "send-and-invalidate); NdkFastRegister it again before use");
            return;
        case TokenRefusal::kWindowNotBound:
            std::snprintf(out, size,
                          "invalid token: its memory window is not bound (invalidated); NdkBind it again and use "
                          "the new token");
            return;
        case TokenRefusal::kDraining:
            std::snprintf(out, size, "invalid token: its %s is being invalidated or deregistered", UseName(why.use));
            return;
        case TokenRefusal::kBusy:
            std::snprintf(out, size, "invalid token: too many accesses hold it at once; retry when some complete");
            return;
        case TokenRefusal::kNone:
            break;
    }
    std::snprintf(out, size, "invalid token: not a token this %s answers to; use the token read from it",
                  UseName(why.use));
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
