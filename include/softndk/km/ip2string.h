/* softndk kernel layer — ip2string.h: IPv4 and IPv6 text to address and back, as the WDK declares them, so a
 * driver can read an address (and a port) from its parameters (issue 9 §2, the Ex forms issue 19 §1).
 * Implemented in src/km/ip2string.cpp. Addresses and ports are in network byte order; scope ids in host order. */
#ifndef SOFTNDK_KM_IP2STRING_H
#define SOFTNDK_KM_IP2STRING_H

#include <softndk/km/wdm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Strict: exactly four decimal parts ("192.168.0.1"). Not strict: also one to three parts and octal or hex
 * parts, as inet_aton reads them. *Terminator points after the address; the address is in network order.
 * STATUS_INVALID_PARAMETER when no address starts at S. */
SOFTNDK_KM_API NTSTATUS RtlIpv4StringToAddressA(PCSTR S, BOOLEAN Strict, PCSTR* Terminator, IN_ADDR* Addr);
SOFTNDK_KM_API NTSTATUS RtlIpv4StringToAddressW(PCWSTR S, BOOLEAN Strict, PCWSTR* Terminator, IN_ADDR* Addr);
/* The whole string is "address" or "address:port" (port decimal, 0 … 65535); *Port is 0 when there is none.
 * STATUS_INVALID_PARAMETER for a NULL pointer or any other text. */
SOFTNDK_KM_API NTSTATUS RtlIpv4StringToAddressExA(PCSTR AddressString, BOOLEAN Strict, IN_ADDR* Address, PUSHORT Port);
SOFTNDK_KM_API NTSTATUS RtlIpv4StringToAddressExW(PCWSTR AddressString, BOOLEAN Strict, IN_ADDR* Address, PUSHORT Port);

/* The longest IPv6 address (RFC 4291 text, with an embedded IPv4 tail) that starts at S. */
SOFTNDK_KM_API NTSTATUS RtlIpv6StringToAddressA(PCSTR S, PCSTR* Terminator, IN6_ADDR* Addr);
SOFTNDK_KM_API NTSTATUS RtlIpv6StringToAddressW(PCWSTR S, PCWSTR* Terminator, IN6_ADDR* Addr);
/* The whole string is "addr", "addr%scope", "[addr]", "[addr%scope]" or either bracketed form with ":port"
 * (scope and port decimal); *ScopeId and *Port are 0 when absent. STATUS_INVALID_PARAMETER otherwise. */
SOFTNDK_KM_API NTSTATUS RtlIpv6StringToAddressExA(PCSTR AddressString, IN6_ADDR* Address, PULONG ScopeId, PUSHORT Port);
SOFTNDK_KM_API NTSTATUS RtlIpv6StringToAddressExW(PCWSTR AddressString, IN6_ADDR* Address, PULONG ScopeId,
                                                  PUSHORT Port);

/* Address to text; S holds at least 16 (IPv4) or 46 (IPv6) characters. Returns a pointer to the NUL. */
SOFTNDK_KM_API PSTR RtlIpv4AddressToStringA(const IN_ADDR* Addr, PSTR S);
SOFTNDK_KM_API PWSTR RtlIpv4AddressToStringW(const IN_ADDR* Addr, PWSTR S);
SOFTNDK_KM_API PSTR RtlIpv6AddressToStringA(const IN6_ADDR* Addr, PSTR S);
SOFTNDK_KM_API PWSTR RtlIpv6AddressToStringW(const IN6_ADDR* Addr, PWSTR S);
/* The Ex forms: "a.b.c.d:port" when Port (network order) is not 0; IPv6 "addr%scope" when ScopeId is not 0 and
 * "[addr%scope]:port" when Port is not 0. *AddressStringLength: in, the characters AddressString holds; out, the
 * characters written with the NUL. A NULL pointer or too small a buffer: STATUS_INVALID_PARAMETER (and, for too
 * small a buffer, *AddressStringLength is the length needed). */
SOFTNDK_KM_API NTSTATUS RtlIpv4AddressToStringExA(const IN_ADDR* Address, USHORT Port, PSTR AddressString,
                                                  PULONG AddressStringLength);
SOFTNDK_KM_API NTSTATUS RtlIpv4AddressToStringExW(const IN_ADDR* Address, USHORT Port, PWSTR AddressString,
                                                  PULONG AddressStringLength);
SOFTNDK_KM_API NTSTATUS RtlIpv6AddressToStringExA(const IN6_ADDR* Address, ULONG ScopeId, USHORT Port,
                                                  PSTR AddressString, PULONG AddressStringLength);
SOFTNDK_KM_API NTSTATUS RtlIpv6AddressToStringExW(const IN6_ADDR* Address, ULONG ScopeId, USHORT Port,
                                                  PWSTR AddressString, PULONG AddressStringLength);

#ifdef __cplusplus
}
#endif

#endif
