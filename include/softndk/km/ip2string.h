/* softndk kernel layer — ip2string.h: IPv4 text to address, as the WDK declares it, so a driver can read an
 * address from its parameters. IPv6 text forms are not provided yet. */
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

#ifdef __cplusplus
}
#endif

#endif
