// ip2string.h: IPv4 and IPv6 text to address and back (issue 9 §2; the Ex forms with port and scope, issue 19 §1).
// Addresses and ports come out in network byte order, scope ids in host order, as Microsoft documents them.
#include <arpa/inet.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "km/km_internal.h"

namespace {

constexpr size_t kMaxText = 128;  // longer than any address with scope and port: such input is invalid

// The wide forms accept ASCII only: anything else ends the text (non-Ex) or makes it invalid (Ex).
bool Narrow(PCWSTR wide, char (&narrow)[kMaxText], bool whole) {
    size_t length = 0;
    while (wide[length] != 0 && wide[length] < 0x80 && length + 1 < kMaxText) {
        narrow[length] = static_cast<char>(wide[length]);
        ++length;
    }
    narrow[length] = '\0';
    return !whole || wide[length] == 0;
}

// A decimal number of at most `max` (the port, the scope id); the whole text must be digits.
bool Decimal(const char* text, ULONG64 max, ULONG64* value) {
    if (*text == '\0') return false;
    ULONG64 result = 0;
    for (; *text != '\0'; ++text) {
        if (!std::isdigit(static_cast<unsigned char>(*text))) return false;
        result = result * 10 + static_cast<ULONG64>(*text - '0');
        if (result > max) return false;
    }
    *value = result;
    return true;
}

// The longest prefix of `text` that is an IPv6 address; its length, or 0.
size_t ParseIpv6Prefix(const char* text, in6_addr* address) {
    size_t length = 0;
    while (length < INET6_ADDRSTRLEN &&
           (std::isxdigit(static_cast<unsigned char>(text[length])) || text[length] == ':' || text[length] == '.'))
        ++length;
    char candidate[INET6_ADDRSTRLEN + 1];
    for (; length > 0; --length) {
        std::memcpy(candidate, text, length);
        candidate[length] = '\0';
        if (inet_pton(AF_INET6, candidate, address) == 1) return length;
    }
    return 0;
}

NTSTATUS Ipv4Ex(const char* text, BOOLEAN strict, IN_ADDR* address, PUSHORT port) {
    PCSTR end = nullptr;
    IN_ADDR parsed;
    if (!NT_SUCCESS(RtlIpv4StringToAddressA(text, strict, &end, &parsed))) return STATUS_INVALID_PARAMETER;
    ULONG64 number = 0;
    if (*end == ':') {
        if (!Decimal(end + 1, 0xffff, &number)) return STATUS_INVALID_PARAMETER;
    } else if (*end != '\0') {
        return STATUS_INVALID_PARAMETER;
    }
    *address = parsed;
    *port = htons(static_cast<USHORT>(number));
    return STATUS_SUCCESS;
}

// "addr", "addr%scope", "[addr]", "[addr%scope]", "[addr]:port", "[addr%scope]:port".
NTSTATUS Ipv6Ex(const char* text, IN6_ADDR* address, PULONG scope_id, PUSHORT port) {
    const bool bracketed = *text == '[';
    const char* at = bracketed ? text + 1 : text;
    in6_addr parsed{};
    const size_t length = ParseIpv6Prefix(at, &parsed);
    if (length == 0) return STATUS_INVALID_PARAMETER;
    at += length;
    ULONG64 scope = 0, number = 0;
    if (*at == '%') {
        const char* start = ++at;
        while (std::isdigit(static_cast<unsigned char>(*at))) ++at;
        char digits[16];
        if (static_cast<size_t>(at - start) >= sizeof(digits)) return STATUS_INVALID_PARAMETER;
        std::memcpy(digits, start, static_cast<size_t>(at - start));
        digits[at - start] = '\0';
        if (!Decimal(digits, 0xffffffffULL, &scope)) return STATUS_INVALID_PARAMETER;
    }
    if (bracketed) {
        if (*at++ != ']') return STATUS_INVALID_PARAMETER;
        if (*at == ':') {
            if (!Decimal(at + 1, 0xffff, &number)) return STATUS_INVALID_PARAMETER;
            at += std::strlen(at);
        }
    }
    if (*at != '\0') return STATUS_INVALID_PARAMETER;
    std::memcpy(address, &parsed, sizeof(parsed));
    *scope_id = static_cast<ULONG>(scope);
    *port = htons(static_cast<USHORT>(number));
    return STATUS_SUCCESS;
}

template <typename Char>
Char* Widen(const char* narrow, Char* out) {
    size_t i = 0;
    for (; narrow[i] != '\0'; ++i) out[i] = static_cast<Char>(narrow[i]);
    out[i] = 0;
    return out + i;
}

// The Ex forms' text: "a.b.c.d[:port]", "addr[%scope]" or "[addr[%scope]]:port"; port in network order.
std::string Ipv4ExText(const IN_ADDR* address, USHORT port) {
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, address, text, sizeof(text));
    std::string out(text);
    if (port != 0) out.append(":").append(std::to_string(ntohs(port)));  // append: gcc 12 -O3 -Wrestrict
    return out;
}
std::string Ipv6ExText(const IN6_ADDR* address, ULONG scope_id, USHORT port) {
    char text[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, address, text, sizeof(text));
    std::string out(text);
    if (scope_id != 0) out.append("%").append(std::to_string(scope_id));  // append: gcc 12 -O3 -Wrestrict
    if (port != 0) {
        std::string bracketed("[");
        bracketed.append(out).append("]:").append(std::to_string(ntohs(port)));
        out = std::move(bracketed);
    }
    return out;
}
// Copies text and its NUL when *length (characters) has room; else STATUS_INVALID_PARAMETER and the room needed.
template <typename Char>
NTSTATUS CopyOut(const std::string& text, Char* out, PULONG length) {
    if (out == nullptr || length == nullptr) return STATUS_INVALID_PARAMETER;
    const ULONG needed = static_cast<ULONG>(text.size() + 1);
    if (*length < needed) {
        *length = needed;
        return STATUS_INVALID_PARAMETER;
    }
    Widen(text.c_str(), out);
    *length = needed;
    return STATUS_SUCCESS;
}

}  // namespace

extern "C" {

NTSTATUS RtlIpv4StringToAddressA(PCSTR S, BOOLEAN Strict, PCSTR* Terminator, IN_ADDR* Addr) {
    if (S == nullptr || Terminator == nullptr || Addr == nullptr) return STATUS_INVALID_PARAMETER;
    // The address's own characters: digits, dots, and for the loose forms x/X and hex digits.
    size_t length = 0;
    while (S[length] != '\0' && (std::isxdigit(static_cast<unsigned char>(S[length])) || S[length] == '.' ||
                                 (!Strict && (S[length] == 'x' || S[length] == 'X'))))
        ++length;
    if (length == 0 || length > 63) return STATUS_INVALID_PARAMETER;
    char text[64];
    std::memcpy(text, S, length);
    text[length] = '\0';
    in_addr parsed{};
    if (Strict) {
        unsigned parts = 0;  // four decimal parts of 0 … 255, no leading zeros beyond "0"
        const char* at = text;
        while (true) {
            if (!std::isdigit(static_cast<unsigned char>(*at))) return STATUS_INVALID_PARAMETER;
            unsigned value = 0, digits = 0;
            const char* start = at;
            for (; std::isdigit(static_cast<unsigned char>(*at)); ++at, ++digits)
                value = value * 10 + static_cast<unsigned>(*at - '0');
            if (value > 255 || digits > 3 || (digits > 1 && *start == '0')) return STATUS_INVALID_PARAMETER;
            if (++parts == 4) break;
            if (*at++ != '.') return STATUS_INVALID_PARAMETER;
        }
        length = static_cast<size_t>(at - text);
        text[length] = '\0';
        if (inet_pton(AF_INET, text, &parsed) != 1) return STATUS_INVALID_PARAMETER;
    } else if (inet_aton(text, &parsed) == 0) {
        return STATUS_INVALID_PARAMETER;
    }
    Addr->S_un.S_addr = parsed.s_addr;
    *Terminator = S + length;
    return STATUS_SUCCESS;
}

NTSTATUS RtlIpv4StringToAddressW(PCWSTR S, BOOLEAN Strict, PCWSTR* Terminator, IN_ADDR* Addr) {
    if (S == nullptr || Terminator == nullptr || Addr == nullptr) return STATUS_INVALID_PARAMETER;
    char narrow[kMaxText];
    Narrow(S, narrow, false);
    PCSTR end = nullptr;
    const NTSTATUS status = RtlIpv4StringToAddressA(narrow, Strict, &end, Addr);
    if (NT_SUCCESS(status)) *Terminator = S + (end - narrow);
    return status;
}

NTSTATUS RtlIpv4StringToAddressExA(PCSTR AddressString, BOOLEAN Strict, IN_ADDR* Address, PUSHORT Port) {
    if (AddressString == nullptr || Address == nullptr || Port == nullptr) return STATUS_INVALID_PARAMETER;
    return Ipv4Ex(AddressString, Strict, Address, Port);
}

NTSTATUS RtlIpv4StringToAddressExW(PCWSTR AddressString, BOOLEAN Strict, IN_ADDR* Address, PUSHORT Port) {
    if (AddressString == nullptr || Address == nullptr || Port == nullptr) return STATUS_INVALID_PARAMETER;
    char narrow[kMaxText];
    if (!Narrow(AddressString, narrow, true)) return STATUS_INVALID_PARAMETER;
    return Ipv4Ex(narrow, Strict, Address, Port);
}

NTSTATUS RtlIpv6StringToAddressA(PCSTR S, PCSTR* Terminator, IN6_ADDR* Addr) {
    if (S == nullptr || Terminator == nullptr || Addr == nullptr) return STATUS_INVALID_PARAMETER;
    in6_addr parsed{};
    const size_t length = ParseIpv6Prefix(S, &parsed);
    if (length == 0) return STATUS_INVALID_PARAMETER;
    std::memcpy(Addr, &parsed, sizeof(parsed));
    *Terminator = S + length;
    return STATUS_SUCCESS;
}

NTSTATUS RtlIpv6StringToAddressW(PCWSTR S, PCWSTR* Terminator, IN6_ADDR* Addr) {
    if (S == nullptr || Terminator == nullptr || Addr == nullptr) return STATUS_INVALID_PARAMETER;
    char narrow[kMaxText];
    Narrow(S, narrow, false);
    PCSTR end = nullptr;
    const NTSTATUS status = RtlIpv6StringToAddressA(narrow, &end, Addr);
    if (NT_SUCCESS(status)) *Terminator = S + (end - narrow);
    return status;
}

NTSTATUS RtlIpv6StringToAddressExA(PCSTR AddressString, IN6_ADDR* Address, PULONG ScopeId, PUSHORT Port) {
    if (AddressString == nullptr || Address == nullptr || ScopeId == nullptr || Port == nullptr)
        return STATUS_INVALID_PARAMETER;
    return Ipv6Ex(AddressString, Address, ScopeId, Port);
}

NTSTATUS RtlIpv6StringToAddressExW(PCWSTR AddressString, IN6_ADDR* Address, PULONG ScopeId, PUSHORT Port) {
    if (AddressString == nullptr || Address == nullptr || ScopeId == nullptr || Port == nullptr)
        return STATUS_INVALID_PARAMETER;
    char narrow[kMaxText];
    if (!Narrow(AddressString, narrow, true)) return STATUS_INVALID_PARAMETER;
    return Ipv6Ex(narrow, Address, ScopeId, Port);
}

PSTR RtlIpv4AddressToStringA(const IN_ADDR* Addr, PSTR S) {
    inet_ntop(AF_INET, Addr, S, INET_ADDRSTRLEN);
    return S + std::strlen(S);
}

PWSTR RtlIpv4AddressToStringW(const IN_ADDR* Addr, PWSTR S) {
    char narrow[INET_ADDRSTRLEN];
    return (RtlIpv4AddressToStringA(Addr, narrow), Widen(narrow, S));
}

PSTR RtlIpv6AddressToStringA(const IN6_ADDR* Addr, PSTR S) {
    inet_ntop(AF_INET6, Addr, S, INET6_ADDRSTRLEN);
    return S + std::strlen(S);
}

PWSTR RtlIpv6AddressToStringW(const IN6_ADDR* Addr, PWSTR S) {
    char narrow[INET6_ADDRSTRLEN];
    RtlIpv6AddressToStringA(Addr, narrow);
    return Widen(narrow, S);
}

NTSTATUS RtlIpv4AddressToStringExA(const IN_ADDR* Address, USHORT Port, PSTR AddressString,
                                   PULONG AddressStringLength) {
    if (Address == nullptr) return STATUS_INVALID_PARAMETER;
    return CopyOut(Ipv4ExText(Address, Port), AddressString, AddressStringLength);
}

NTSTATUS RtlIpv4AddressToStringExW(const IN_ADDR* Address, USHORT Port, PWSTR AddressString,
                                   PULONG AddressStringLength) {
    if (Address == nullptr) return STATUS_INVALID_PARAMETER;
    return CopyOut(Ipv4ExText(Address, Port), AddressString, AddressStringLength);
}

NTSTATUS RtlIpv6AddressToStringExA(const IN6_ADDR* Address, ULONG ScopeId, USHORT Port, PSTR AddressString,
                                   PULONG AddressStringLength) {
    if (Address == nullptr) return STATUS_INVALID_PARAMETER;
    return CopyOut(Ipv6ExText(Address, ScopeId, Port), AddressString, AddressStringLength);
}

NTSTATUS RtlIpv6AddressToStringExW(const IN6_ADDR* Address, ULONG ScopeId, USHORT Port, PWSTR AddressString,
                                   PULONG AddressStringLength) {
    if (Address == nullptr) return STATUS_INVALID_PARAMETER;
    return CopyOut(Ipv6ExText(Address, ScopeId, Port), AddressString, AddressStringLength);
}

}  // extern "C"
