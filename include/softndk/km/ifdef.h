/* softndk kernel layer — ifdef.h: interface indexes, LUIDs and string sizes of the network interface layer, with
 * the WDK's names and types (issue 19 §1). netioapi.h and ndis.h include it, as in the WDK. */
#ifndef SOFTNDK_KM_IFDEF_H
#define SOFTNDK_KM_IFDEF_H

#include <softndk/km/ntdef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef ULONG NET_IFINDEX, *PNET_IFINDEX;
typedef NET_IFINDEX IF_INDEX, *PIF_INDEX;
typedef USHORT NET_IFTYPE, *PNET_IFTYPE;
#define NET_IFINDEX_UNSPECIFIED ((NET_IFINDEX)0)
#define IFI_UNSPECIFIED NET_IFINDEX_UNSPECIFIED

/* The LUID of an interface: the interface type and an index unique within that type. */
typedef union _NET_LUID_LH {
    ULONG64 Value;
    struct {
        ULONG64 Reserved : 24;
        ULONG64 NetLuidIndex : 24;
        ULONG64 IfType : 16;
    } Info;
} NET_LUID_LH, *PNET_LUID_LH;
typedef NET_LUID_LH NET_LUID, *PNET_LUID;
typedef NET_LUID IF_LUID, *PIF_LUID;

#define IF_MAX_STRING_SIZE 256
#define IF_MAX_PHYS_ADDRESS_LENGTH 32
#define NDIS_IF_MAX_STRING_SIZE IF_MAX_STRING_SIZE
#define NDIS_IF_MAX_PHYS_ADDRESS_LENGTH IF_MAX_PHYS_ADDRESS_LENGTH

/* An interface alias (ConvertInterfaceLuidToAlias): at most NDIS_IF_MAX_STRING_SIZE characters and a NUL. */
typedef struct _NET_IF_ALIAS_LH {
    USHORT ifAliasLength; /* bytes */
    USHORT ifAliasOffset; /* bytes from the start of this structure */
} NET_IF_ALIAS_LH, *PNET_IF_ALIAS_LH, NET_IF_ALIAS, *PNET_IF_ALIAS;

typedef enum _NET_IF_OPER_STATUS {
    NET_IF_OPER_STATUS_UP = 1,
    NET_IF_OPER_STATUS_DOWN,
    NET_IF_OPER_STATUS_TESTING,
    NET_IF_OPER_STATUS_UNKNOWN,
    NET_IF_OPER_STATUS_DORMANT,
    NET_IF_OPER_STATUS_NOT_PRESENT,
    NET_IF_OPER_STATUS_LOWER_LAYER_DOWN
} NET_IF_OPER_STATUS,
    *PNET_IF_OPER_STATUS;

#ifdef __cplusplus
}
#endif
#endif /* SOFTNDK_KM_IFDEF_H */
