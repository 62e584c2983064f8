/* softndk kernel layer — netioapi.h: interface indexes, LUIDs, aliases and the unicast address table, so a driver can
 * find the IfIndex of an address before WskOpenNdkAdapter (issue 9 §2). The interfaces are softndk's registered NDK
 * interfaces (softndk_km.h); the table lists their local addresses. */
#ifndef SOFTNDK_KM_NETIOAPI_H
#define SOFTNDK_KM_NETIOAPI_H

#include <softndk/km/ifdef.h>
#include <softndk/km/ipifcons.h>
#include <softndk/km/nldef.h>
#include <softndk/km/wdm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct _MIB_UNICASTIPADDRESS_ROW {
    SOCKADDR_INET Address;
    NET_LUID InterfaceLuid;
    NET_IFINDEX InterfaceIndex;
    NL_PREFIX_ORIGIN PrefixOrigin;
    NL_SUFFIX_ORIGIN SuffixOrigin;
    ULONG ValidLifetime;
    ULONG PreferredLifetime;
    UCHAR OnLinkPrefixLength;
    BOOLEAN SkipAsSource;
    NL_DAD_STATE DadState;
    SCOPE_ID ScopeId;
    LARGE_INTEGER CreationTimeStamp;
} MIB_UNICASTIPADDRESS_ROW, *PMIB_UNICASTIPADDRESS_ROW;
typedef struct _MIB_UNICASTIPADDRESS_TABLE {
    ULONG NumEntries;
    MIB_UNICASTIPADDRESS_ROW Table[1];
} MIB_UNICASTIPADDRESS_TABLE, *PMIB_UNICASTIPADDRESS_TABLE;

/* Family AF_UNSPEC, AF_INET or AF_INET6. The table is freed with FreeMibTable. PASSIVE_LEVEL. */
SOFTNDK_KM_API NTSTATUS GetUnicastIpAddressTable(ADDRESS_FAMILY Family, PMIB_UNICASTIPADDRESS_TABLE* Table);
SOFTNDK_KM_API VOID FreeMibTable(PVOID Memory);
SOFTNDK_KM_API NTSTATUS ConvertInterfaceIndexToLuid(NET_IFINDEX InterfaceIndex, PNET_LUID InterfaceLuid);
SOFTNDK_KM_API NTSTATUS ConvertInterfaceLuidToIndex(const NET_LUID* InterfaceLuid, PNET_IFINDEX InterfaceIndex);
/* Interface names (issue 19 §1). The alias of a softndk interface is "softndk IfIndex" (e.g. L"softndk 1");
 * Length counts characters including the NUL. STATUS_INVALID_PARAMETER for a NULL pointer or an unknown LUID,
 * STATUS_NO_MEMORY when the alias and its NUL do not fit (Microsoft: "not enough storage"). */
SOFTNDK_KM_API NTSTATUS ConvertInterfaceLuidToAlias(const NET_LUID* InterfaceLuid, PWSTR InterfaceAlias, SIZE_T Length);
SOFTNDK_KM_API NTSTATUS ConvertInterfaceAliasToLuid(PCWSTR InterfaceAlias, PNET_LUID InterfaceLuid);

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_NETIOAPI_H */
